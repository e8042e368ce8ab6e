//! What the proxy's flow lets pdtop conclude when the instances share no
//! request id (vLLM's own `disagg_proxy_demo.py` forwards none).
//!
//! A proxy of that flow sends every request it serves to a prefill
//! instance first (a `max_tokens=1` copy), then to decode. So a decode
//! request that came through the proxy was prefilled, whichever prefill
//! request it is paired with: its miss verdict does not rest on the
//! pairing. That holds only while every prefill copy is a proxied
//! request's; one copy with no proxy access line after it means clients
//! also reach the prefill directly (a benchmark, a handshake driver), and
//! then order proves nothing again.

use std::collections::VecDeque;

use crate::traces::store::push_capped;

use crate::feed::LogOrigin;

/// A prefill copy with no proxy line this long after it bypassed the proxy.
pub(crate) const BYPASS_S: f64 = 5.0;
/// A copy whose proxy line this many seconds of reads never brought is a
/// bypass, though the proxy answered nothing since to show its progress.
pub(crate) const SILENT_S: f64 = 30.0;
/// Longest a possible miss waits for its proxy access line.
pub(crate) const PROXY_WAIT_S: f64 = 5.0;
/// A prefill copy read this long after a decode refusal may be its own.
const REFUSAL_S: f64 = 1.0;
/// Entries kept in each list below.
const CAP: usize = 1024;

/// What became of a prefill copy watched for its proxy line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Copy {
    /// Its proxy line came, or it is accounted for otherwise (paired by a
    /// shared id with its own decode request: no other request's copy).
    Accounted,
    /// Its proxy line was due by this read time: the proxy answers once
    /// the decode is reached, so not before its decode request was read.
    Due(f64),
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Flow {
    /// `host:port` of each instance, to name the one a proxy error names.
    addrs: Vec<(LogOrigin, String)>,
    /// When prefill copies arrived that no proxy line followed, as spans
    /// of their event times: clients reached the prefill directly then.
    bypasses: VecDeque<(f64, f64)>,
    /// A prefill copy was tied to a proxy access line.
    pub proxied: bool,
    /// The latest request the proxy answered, by when it reached decode
    /// (read time): the proxy's own progress.
    answered: Option<f64>,
    /// Prefill copies waiting for their proxy line: (serial, read time,
    /// event time).
    watch: VecDeque<(u64, f64, f64)>,
    /// Decode requests with neither a prefill copy nor a proxy line, left
    /// Unknown until the flow is known.
    pub orphans: VecDeque<u64>,
    /// Prefill instances the proxy has dropped after a failure.
    pub dropped: Vec<String>,
    /// The last host a proxy error named that matches no instance.
    pub unnamed_host: Option<String>,
    /// The proxy's latest error trace and when: the access line that
    /// follows it (`200 OK` with an empty body) is that request's.
    pub error: Option<(u64, f64)>,
    /// That error is of a proxy that answers success for a failure (vLLM's
    /// demo proxy): a `200` after it is its answer.
    pub error_answers_ok: bool,
    /// Decode refusals (4xx before logging the request) with no prefill
    /// copy before them: (serial, read time). Its copy may be read late.
    refusals: VecDeque<(u64, f64)>,
    /// Prefill refusals (an error answered before the request was logged:
    /// at validation, or with its engine dead): (serial, API, time). A
    /// proxy that goes on sends decode the same request.
    prefill_refusals: VecDeque<(u64, Option<&'static str>, f64)>,
    /// The last failure the proxy reported in its own words: the uvicorn
    /// exception that follows it (the proxy re-raises) is the same one.
    pub reported: Option<(u64, f64)>,
    /// The trace uvicorn's `Exception in ASGI application` just landed on:
    /// its traceback's lines come next.
    pub asgi_header: Option<u64>,
}

impl Flow {
    pub fn set_addr(&mut self, src: LogOrigin, addr: &str) {
        self.addrs.retain(|(s, _)| *s != src);
        self.addrs.push((src, addr.trim().to_string()));
    }

    /// The instance a `host:port` names (`localhost` and `127.0.0.1` alike).
    pub fn source_of(&self, addr: &str) -> Option<LogOrigin> {
        let norm = |a: &str| a.trim().replace("localhost", "127.0.0.1");
        let want = norm(addr);
        self.addrs.iter().find(|(_, a)| norm(a) == want).map(|(s, _)| *s)
    }

    /// The proxy was seen prefilling its requests, and no client reached
    /// the prefill within `window` of `span` (the event times of a trace's
    /// sides, `Entry::side_span`; none: ever): an order join there is with
    /// a proxied copy. Judged on the sources' times, so a bypass long after
    /// a request (a benchmark run later) leaves its verdict as it was,
    /// whenever either was read.
    pub fn vouches(&self, span: Option<(f64, f64)>, window: f64) -> bool {
        self.proxied && !self.bypass_near(span, window)
    }

    /// A prefill copy that no proxy line followed arrived within `window`
    /// of `span` (none given: at any time).
    pub fn bypass_near(&self, span: Option<(f64, f64)>, window: f64) -> bool {
        self.bypasses.iter().any(|&(a, b)| span.is_none_or(|s| near(s, window, (a, b))))
    }

    pub fn watch(&mut self, serial: u64, at: f64, t: f64) {
        push_capped(&mut self.watch, (serial, at, t), CAP);
    }

    /// Prefill copies moved between traces (`map`: old serial to new).
    pub fn moved(&mut self, map: impl Fn(u64) -> u64) {
        self.watch.iter_mut().for_each(|(s, _, _)| *s = map(*s));
    }

    pub fn orphan(&mut self, serial: u64) {
        push_capped(&mut self.orphans, serial, CAP);
    }

    /// Drops watched copies that `copy` says were proxied or accounted
    /// for. A copy is a bypass, kept at its event time, once its proxy
    /// line was due `BYPASS_S` before a request the proxy answered since
    /// (the proxy's own progress: its log may reach the file late, in
    /// bursts, so the reads' clock alone would blame a late line), or
    /// `SILENT_S` of reads ago (a proxy that answers nothing any more).
    /// Returns the event times of the new ones.
    pub fn check(&mut self, now: f64, copy: impl Fn(u64, f64) -> Copy) -> Vec<f64> {
        let answered = self.answered.unwrap_or(f64::NEG_INFINITY);
        let mut new = Vec::new();
        self.watch.retain(|&(s, at, t)| match copy(s, at) {
            Copy::Accounted => false,
            Copy::Due(due) if answered - due > BYPASS_S || now - due > SILENT_S => {
                new.push(t);
                false
            }
            Copy::Due(_) => true,
        });
        for &t in &new {
            self.bypassed(t);
        }
        new
    }

    /// The proxy answered a request that reached decode at `near` (read
    /// time of the decode's arrival).
    pub fn answered(&mut self, near: f64) {
        self.answered = Some(self.answered.map_or(near, |a| a.max(near)));
    }

    /// Adds a bypass at `t`, merged with spans less than `2 * BYPASS_S`
    /// away: a window of `BYPASS_S` or more around any time in such a gap
    /// reaches a bypass either way, so a client that keeps bypassing costs
    /// one entry and nothing is lost.
    fn bypassed(&mut self, t: f64) {
        const GAP: f64 = 2.0 * BYPASS_S;
        let mut span = (t, t);
        self.bypasses.retain(|&(a, b)| {
            let near = t >= a - GAP && t <= b + GAP;
            if near {
                span = (span.0.min(a), span.1.max(b));
            }
            !near
        });
        push_capped(&mut self.bypasses, span, CAP);
    }

    pub fn queued(&self) -> usize {
        self.watch.len() + self.orphans.len() + self.refusals.len() + self.prefill_refusals.len()
    }

    pub fn refusal(&mut self, serial: u64, at: f64) {
        push_capped(&mut self.refusals, (serial, at), CAP);
    }

    pub fn prefill_refusal(&mut self, serial: u64, api: Option<&'static str>, t: f64) {
        push_capped(&mut self.prefill_refusals, (serial, api, t), CAP);
    }

    /// The oldest prefill refusal through `api` within `REFUSAL_S` (stamps
    /// are whole seconds: one more) before `t`: the refused copy of the
    /// request decode got now.
    pub fn take_prefill_refusal(&mut self, api: Option<&str>, t: f64) -> Option<u64> {
        self.prefill_refusals.retain(|(_, _, when)| t - when <= REFUSAL_S + 1.0);
        let k = self.prefill_refusals.iter().position(|(_, a, when)| *a == api && *when <= t)?;
        self.prefill_refusals.remove(k).map(|(s, _, _)| s)
    }

    /// The oldest refusal read within `REFUSAL_S` before `at`.
    pub fn take_refusal(&mut self, at: f64) -> Option<u64> {
        while let Some((s, when)) = self.refusals.front().copied() {
            self.refusals.pop_front();
            if at - when <= REFUSAL_S && at >= when {
                return Some(s);
            }
        }
        None
    }
}
/// Span `s` widened by `window` on each side meets span `other`.
pub(crate) fn near(s: (f64, f64), window: f64, other: (f64, f64)) -> bool {
    other.1 >= s.0 - window && other.0 <= s.1 + window
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bypass_and_addrs() {
        let mut f = Flow::default();
        f.set_addr(LogOrigin::Prefill(0), "localhost:8100");
        assert_eq!(f.source_of("127.0.0.1:8100"), Some(LogOrigin::Prefill(0)));
        assert_eq!(f.source_of("127.0.0.1:8200"), None);
        f.watch(1, 0.0, 100.0);
        f.watch(2, 1.0, 101.0);
        let open = |s: u64, at: f64| if s == 2 { Copy::Accounted } else { Copy::Due(at) };
        // Read 8 s after the copy, but the proxy's log is behind: not yet.
        assert!(f.check(8.0, open).is_empty(), "the proxy answered nothing yet");
        f.answered(3.0);
        assert!(f.check(8.0, open).is_empty());
        assert!(!f.bypass_near(None, 10.0));
        f.answered(5.5);
        assert_eq!(f.check(8.0, open), vec![100.0]);
        assert!(f.bypass_near(None, 10.0));
        assert_eq!(f.queued(), 0);
    }

    /// A bypass is local to its time: a request long before or after it
    /// is still vouched for, one within the window is not.
    #[test]
    fn a_bypass_weighs_only_near_its_time() {
        let mut f = Flow { proxied: true, ..Flow::default() };
        f.watch(1, 60.0, 58.0);
        f.watch(2, 60.5, 58.4);
        f.answered(66.0);
        assert_eq!(f.check(66.0, |_, at| Copy::Due(at)), vec![58.0, 58.4]);
        assert!(f.vouches(Some((1.0, 2.5)), 10.0));
        assert!(!f.vouches(Some((50.0, 50.0)), 10.0));
        assert!(!f.vouches(Some((40.0, 68.0)), 10.0));
        assert!(f.vouches(Some((70.0, 70.0)), 10.0));
        assert!(!f.vouches(None, 10.0));
        // Copies a second apart make one span; one that bridges two spans
        // joins them.
        assert_eq!(f.bypasses.len(), 1);
        f.watch(3, 70.0, 75.0);
        f.watch(4, 71.0, 66.0);
        assert_eq!(f.check(102.0, |_, at| Copy::Due(at)), vec![75.0, 66.0]);
        assert_eq!(f.bypasses.iter().copied().collect::<Vec<_>>(), vec![(58.0, 75.0)]);
    }

    /// A proxy that answers nothing any more still shows a client at the
    /// prefill: after `SILENT_S` of reads.
    #[test]
    fn a_silent_proxy_still_shows_a_bypass() {
        let mut f = Flow { proxied: true, ..Flow::default() };
        f.answered(10.0);
        f.watch(1, 20.0, 20.0);
        assert!(f.check(49.0, |_, at| Copy::Due(at)).is_empty());
        assert_eq!(f.check(51.0, |_, at| Copy::Due(at)), vec![20.0]);
    }
}
