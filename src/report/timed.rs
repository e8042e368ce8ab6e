//! A duration and the clock it was read from, so that it is shown with the
//! precision that clock has: vLLM stamps its log lines to the second
//! (`%m-%d %H:%M:%S`), so two of them tell `<1 s` or `~2 s`, never `0 ms`;
//! a span's times are nanoseconds.

use crate::feed::LogOrigin;
use crate::state::spans::Timings;
use crate::traces::{Hop, Phase};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// Two log stamps whole to the second.
    Stamp,
    /// A log's own sub-second clock (the proxy's JSON `ts`).
    Log,
    /// vLLM's OTLP span of the request.
    Span,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timed {
    pub secs: f64,
    pub clock: Clock,
}

impl Timed {
    /// `<1 s`, `~2 s` from stamps; `331 ms`, `1.24 s` otherwise.
    pub fn text(&self) -> String {
        let s = self.secs;
        if !s.is_finite() {
            return "n/a".into();
        }
        match self.clock {
            // Each stamp is cut to its second: the span between them is
            // anything within a second of their difference.
            Clock::Stamp if s.round() < 1.0 => "<1 s".into(),
            Clock::Stamp => format!("~{:.0} s", s.round()),
            Clock::Log | Clock::Span if s < 1.0 => format!("{:.0} ms", s.max(0.0) * 1000.0),
            Clock::Log | Clock::Span if s < 100.0 => format!("{s:.2} s"),
            Clock::Log | Clock::Span => format!("{s:.0} s"),
        }
    }
}

/// The clock a phase's times were read from: an instance's log lines are
/// stamped to the second; the proxy's only where its times are whole.
pub fn phase_clock(p: &Phase) -> Clock {
    let whole = |t: f64| t.fract() == 0.0;
    match p.source {
        LogOrigin::Prefill(_) | LogOrigin::Decode(_) => Clock::Stamp,
        LogOrigin::Proxy if whole(p.start) && p.end.is_none_or(whole) => Clock::Stamp,
        LogOrigin::Proxy => Clock::Log,
    }
}

/// How long a phase took: from its hop's span where one was joined (the
/// span is the finer clock), else from its log lines; `None` while open.
pub fn phase_duration(p: &Phase, tm: &Timings) -> Option<Timed> {
    let span = |secs: f64| Some(Timed { secs, clock: Clock::Span });
    match (p.hop, tm.prefill, tm.decode) {
        (Hop::Producer, Some(s), _) => return span(s.end - s.start),
        (Hop::Consumer, _, Some(s)) => return span(s.end - s.start),
        // As the waterfall's connector row: the prefill's answer to the
        // end of the decode's wait for the KV.
        (Hop::Connector, Some(pf), Some(d)) => {
            return span((d.start + d.queue.unwrap_or(0.0) - pf.end).max(0.0));
        }
        _ => {}
    }
    Some(Timed { secs: p.end? - p.start, clock: phase_clock(p) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_never_show_milliseconds() {
        let stamp = |secs| Timed { secs, clock: Clock::Stamp }.text();
        assert_eq!(stamp(0.0), "<1 s");
        assert_eq!(stamp(1.0), "~1 s");
        assert_eq!(stamp(2.0), "~2 s");
        assert_eq!(Timed { secs: 0.331, clock: Clock::Span }.text(), "331 ms");
        assert_eq!(Timed { secs: 1.234, clock: Clock::Log }.text(), "1.23 s");
        assert_eq!(Timed { secs: f64::NAN, clock: Clock::Span }.text(), "n/a");
    }
}
