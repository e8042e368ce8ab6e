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
/// Longest a possible miss waits for its proxy access line.
pub(crate) const PROXY_WAIT_S: f64 = 5.0;
/// A prefill copy read this long after a decode refusal may be its own.
const REFUSAL_S: f64 = 1.0;
/// Entries kept in each list below.
const CAP: usize = 1024;

#[derive(Debug, Clone, Default)]
pub(crate) struct Flow {
    /// `host:port` of each instance, to name the one a proxy error names.
    addrs: Vec<(LogOrigin, String)>,
    /// A prefill copy arrived that no proxy line followed.
    pub bypass: bool,
    /// A prefill copy was tied to a proxy access line.
    pub proxied: bool,
    /// Prefill copies waiting for their proxy line: (serial, read time).
    watch: VecDeque<(u64, f64)>,
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

    /// Every prefill copy so far came through the proxy.
    pub fn established(&self) -> bool {
        self.proxied && !self.bypass
    }

    pub fn watch(&mut self, serial: u64, at: f64) {
        push_capped(&mut self.watch, (serial, at), CAP);
    }

    /// Prefill copies moved between traces (`map`: old serial to new).
    pub fn moved(&mut self, map: impl Fn(u64) -> u64) {
        self.watch.iter_mut().for_each(|(s, _)| *s = map(*s));
    }

    pub fn orphan(&mut self, serial: u64) {
        push_capped(&mut self.orphans, serial, CAP);
    }

    /// Drops watched copies `seen` says got their proxy line; a copy older
    /// than `BYPASS_S` without one marks the bypass.
    pub fn check(&mut self, now: f64, seen: impl Fn(u64) -> Option<bool>) {
        while let Some((s, at)) = self.watch.front().copied() {
            match seen(s) {
                Some(true) | None => {}
                Some(false) if now - at > BYPASS_S => self.bypass = true,
                Some(false) => break,
            }
            self.watch.pop_front();
        }
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
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bypass_and_addrs() {
        let mut f = Flow::default();
        f.set_addr(LogOrigin::Prefill(0), "localhost:8100");
        assert_eq!(f.source_of("127.0.0.1:8100"), Some(LogOrigin::Prefill(0)));
        assert_eq!(f.source_of("127.0.0.1:8200"), None);
        f.watch(1, 0.0);
        f.watch(2, 1.0);
        f.check(3.0, |_| Some(false));
        assert!(!f.bypass);
        f.check(5.5, |s| Some(s == 2));
        assert!(f.bypass);
        assert_eq!(f.queued(), 0);
    }
}
