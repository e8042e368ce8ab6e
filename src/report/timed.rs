//! A duration and what timed it, so that it is shown with the precision
//! that source has: vLLM stamps its log lines to the second
//! (`%m-%d %H:%M:%S`), so two of them tell `<1 s` or `~2 s`, never `0 ms`;
//! a span's times are nanoseconds.

use crate::feed::LogOrigin;
use crate::state::spans::Timings;
use crate::traces::{Hop, Phase};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimedBy {
    /// Two log stamps whole to the second.
    Stamp,
    /// A proxy log's sub-second times (its JSON `ts`, else when its lines
    /// were read, every few milliseconds).
    Log,
    /// vLLM's OTLP span of the request.
    Span,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timed {
    pub secs: f64,
    pub by: TimedBy,
}

impl Timed {
    /// `<1 s`, `~2 s` from stamps; `331 ms`, `1.24 s` otherwise.
    pub fn text(&self) -> String {
        let s = self.secs;
        if !s.is_finite() {
            return "n/a".into();
        }
        match self.by {
            // Each stamp is cut to its second: the span between them is
            // anything within a second of their difference.
            TimedBy::Stamp if s.round() < 1.0 => "<1 s".into(),
            TimedBy::Stamp => format!("~{:.0} s", s.round()),
            TimedBy::Log | TimedBy::Span if s < 1.0 => format!("{:.0} ms", s.max(0.0) * 1000.0),
            TimedBy::Log | TimedBy::Span if s < 100.0 => format!("{s:.2} s"),
            TimedBy::Log | TimedBy::Span => format!("{s:.0} s"),
        }
    }
}

/// What timed a phase: an instance's log lines are
/// stamped to the second; the proxy's only where its times are whole.
pub fn phase_timed_by(p: &Phase) -> TimedBy {
    let whole = |t: f64| t.fract() == 0.0;
    match p.source {
        LogOrigin::Prefill(_) | LogOrigin::Decode(_) => TimedBy::Stamp,
        LogOrigin::Proxy if whole(p.start) && p.end.is_none_or(whole) => TimedBy::Stamp,
        LogOrigin::Proxy => TimedBy::Log,
    }
}

/// How long a phase took: from its hop's span where one was joined (the
/// span is the finer), else from its log lines; `None` while open.
pub fn phase_duration(p: &Phase, tm: &Timings) -> Option<Timed> {
    let span = |secs: f64| Some(Timed { secs, by: TimedBy::Span });
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
    Some(Timed { secs: p.end? - p.start, by: phase_timed_by(p) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_never_show_milliseconds() {
        let stamp = |secs| Timed { secs, by: TimedBy::Stamp }.text();
        assert_eq!(stamp(0.0), "<1 s");
        assert_eq!(stamp(1.0), "~1 s");
        assert_eq!(stamp(2.0), "~2 s");
        assert_eq!(Timed { secs: 0.331, by: TimedBy::Span }.text(), "331 ms");
        assert_eq!(Timed { secs: 1.234, by: TimedBy::Log }.text(), "1.23 s");
        assert_eq!(Timed { secs: f64::NAN, by: TimedBy::Span }.text(), "n/a");
    }
}
