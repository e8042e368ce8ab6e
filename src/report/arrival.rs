//! A client's request behind a router that renamed it: vllm-router sends
//! its own id to both instances and only echoes the client's back, so no
//! log holds the client's id. What the client does know is when it sent
//! the request and, usually, its prompt length; the request whose prefill
//! arrived nearest that time with that length is most likely its.
//!
//! Typed in the search box as `@HH:MM:SS[.fff] [TOKENS]` (UTC, the clock
//! the Requests list shows).

use crate::state::AppState;
use crate::traces::{Confidence, Trace};

/// How far from the client's send time an arrival at an instance may be:
/// a router adds milliseconds, two hosts' clocks may differ by a second.
pub const WINDOW_S: f64 = 2.0;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Arrival {
    /// Seconds since midnight UTC.
    pub secs_of_day: f64,
    pub tokens: Option<u32>,
}

/// `@06:33:12.5 460`, `@06:33:12`; `None` for any other query.
pub fn parse(query: &str) -> Option<Arrival> {
    let mut words = query.trim().strip_prefix('@')?.split_whitespace();
    let clock: Vec<f64> =
        words.next()?.split(':').map(|p| p.parse::<f64>()).collect::<Result<_, _>>().ok()?;
    let secs = match clock.as_slice() {
        [h, m, s] if *h < 24.0 && *m < 60.0 && *s < 61.0 => h * 3600.0 + m * 60.0 + s,
        [h, m] if *h < 24.0 && *m < 60.0 => h * 3600.0 + m * 60.0,
        _ => return None,
    };
    let tokens = match words.next() {
        Some(w) => Some(w.parse().ok()?),
        None => None,
    };
    Some(Arrival { secs_of_day: secs, tokens })
}

/// The prompt length the evidence gives a request: a DEBUG detail or a
/// span, else the NIXL params' `remote_num_tokens`.
pub fn prompt_tokens(state: &AppState, t: &Trace) -> Option<u32> {
    let spans = state.spans.timings_for(t);
    t.prompt_tokens
        .or_else(|| [spans.prefill, spans.decode].into_iter().flatten().find_map(|s| s.prompt_tokens))
        .or(t.remote_num_tokens)
}

/// When the request reached its first instance, on the instances'
/// clocks: its span's start (to the microsecond), else the stamp of its
/// first instance line (to the second), else when pdtop first read of it.
pub fn arrived(state: &AppState, t: &Trace) -> f64 {
    let spans = state.spans.timings_for(t);
    let logged =
        t.phases.iter().filter(|p| p.hop != crate::traces::Hop::Proxy).map(|p| p.start).reduce(f64::min);
    [spans.prefill, spans.decode]
        .into_iter()
        .flatten()
        .map(|s| s.start)
        .reduce(f64::min)
        .or(logged)
        .unwrap_or(t.first_seen)
}

/// The requests that fit, nearest first, each with how long after the
/// given time it arrived, and how sure the nearest is to be the client's:
/// sure when it alone fits both time and length, likely when it alone
/// fits the time or is three times nearer than the next, else unsure.
pub fn candidates<'a>(state: &'a AppState, q: &Arrival) -> (Vec<(&'a Trace, f64)>, Option<Confidence>) {
    let Some(logs) = &state.logs else { return (Vec::new(), None) };
    let mut found: Vec<(&Trace, f64)> = logs
        .correlator
        .traces()
        .filter_map(|t| {
            let at = arrived(state, t).rem_euclid(86_400.0);
            let dt = (at - q.secs_of_day + 43_200.0).rem_euclid(86_400.0) - 43_200.0;
            let fits = dt.abs() <= WINDOW_S && q.tokens.is_none_or(|n| prompt_tokens(state, t) == Some(n));
            fits.then_some((t, dt))
        })
        .collect();
    found.sort_by(|a, b| a.1.abs().total_cmp(&b.1.abs()));
    let confidence = match found.as_slice() {
        [] => None,
        [_] if q.tokens.is_some() => Some(Confidence::Sure),
        [_] => Some(Confidence::Likely),
        [(_, a), (_, b), ..] if a.abs() * 3.0 < b.abs() => Some(Confidence::Likely),
        _ => Some(Confidence::Unsure),
    };
    (found, confidence)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_is_a_clock_time_and_maybe_a_length() {
        assert_eq!(parse("@06:33:12.5 460"), Some(Arrival { secs_of_day: 23_592.5, tokens: Some(460) }));
        assert_eq!(parse(" @06:33 "), Some(Arrival { secs_of_day: 23_580.0, tokens: None }));
        for q in ["06:33:12", "@25:00:00", "@06:33:12 many", "@x"] {
            assert_eq!(parse(q), None, "{q}");
        }
    }
}
