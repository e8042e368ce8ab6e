//! One upstream failure seen from both ends: an instance's failing answer
//! (its access line, `500 Internal Server Error`) and the proxy's report
//! of it (`Request failed with status 500: ...`, printed by vLLM's demo
//! proxy and the proxies made from it for any upstream answer that is
//! neither 2xx nor 4xx, the first line of that failure). Neither names
//! the request, and the two logs are read apart: whichever is read first
//! waits for the other (`reports.rs`). They pair in order, by status,
//! within 2 s of each other's times; paired, the report is evidence on
//! that request (the instance's hop, reported by the proxy), not a
//! request of its own. A report with no answer (the instance's log not
//! given) stays a proxy-only failure.

use crate::feed::LogOrigin;
use crate::traces::correlator::{Correlator, LineTime};
use crate::traces::evidence::{FactKind, Failure};
use crate::traces::model::Hop;

impl Correlator {
    /// The proxy reported an upstream's failing `status` (read at `at`):
    /// the request of the instance's answer waiting for it, else a
    /// proxy-only trace that waits for one. Returns its trace.
    pub(super) fn upstream_report(&mut self, status: u16, text: &str, at: f64) -> u64 {
        let from = self.line_time.earliest(at);
        let s = match self.upstream.take_answer(status, from, at) {
            Some((s, hop)) if self.store.get(s).is_some() => {
                self.fail(s, hop, LogOrigin::Proxy, text.to_string(), at, at);
                if let Some(e) = self.store.get_mut(s) {
                    e.track.proxy_seen = true;
                }
                s
            }
            _ => {
                let id = self.synthetic_id("proxy-error");
                let s = self.new_trace(id, at);
                if let Some(e) = self.store.get_mut(s) {
                    e.track.proxy_seen = true;
                    e.track.undated = self.line_time == LineTime::Undated;
                }
                let what = format!("proxy error (HTTP {status}): {text}");
                self.fail(s, Hop::Proxy, LogOrigin::Proxy, what, at, at);
                self.upstream.report(s, status, from, at);
                s
            }
        };
        self.upstream.reported(s, at);
        s
    }

    /// Instance `src` answered trace `s` with a failing `status` at `t`: a
    /// report of it read before is this request's, not another's.
    pub(crate) fn upstream_answer(&mut self, s: u64, hop: Hop, status: u16, t: f64, at: f64) {
        match self.upstream.take_report(status, t) {
            Some(r) if r != s && self.store.get(r).is_some() => self.absorb_proxy_trace(r, s, hop, at),
            _ => self.upstream.answer(s, status, t, hop),
        }
    }

    /// The proxy-only trace `r` was trace `s`'s failure at `hop`: what the
    /// proxy said of it moves there, its blame on the proxy now on that
    /// hop, as the proxy reported it.
    pub(super) fn absorb_proxy_trace(&mut self, r: u64, s: u64, hop: Hop, at: f64) {
        let Some(e) = self.store.get(r) else { return };
        let facts: Vec<_> = e.facts.iter().cloned().collect();
        self.store.retire(r);
        for f in facts {
            match f.kind {
                FactKind::Failed(x) => {
                    let x = match x.hop {
                        Hop::Proxy => Failure { hop, by_proxy: true, ..x },
                        _ => x,
                    };
                    self.fail_with(s, f.src, x, f.t, at);
                }
                kind => self.said(s, f.t, f.src, kind, at),
            }
        }
        if let Some(e) = self.store.get_mut(s) {
            e.track.proxy_seen = true;
        }
        let to_s = |x: &mut Option<(u64, f64)>| {
            if let Some((v, _)) = x.as_mut().filter(|(v, _)| *v == r) {
                *v = s;
            }
        };
        to_s(&mut self.flow.error);
        to_s(&mut self.flow.reported);
        self.upstream.moved(r, s);
    }

    /// The proxy could not reach a decode for a request whose prefill had
    /// just failed (a proxy that goes on after it): the oldest such
    /// request that reached no decode and failed at none.
    fn reported_next_step(&mut self, at: f64) -> Option<u64> {
        let store = &self.store;
        self.upstream.next_step(at, |s| {
            store.get(s).is_some_and(|e| {
                e.trace.decode.is_none()
                    && !e.facts.has(|k| matches!(k, FactKind::Failed(x) if x.hop == Hop::Consumer))
            })
        })
    }

    /// What the traceback under the exception on trace `h` ends with: the
    /// host it could not reach. A bare exception just after a prefill's
    /// reported failure, naming a decode, is that request's next step
    /// failing (a proxy that goes on after a prefill's failure); on any
    /// other exception it names the failing hop, where none is named yet.
    pub(super) fn traceback_detail(&mut self, h: u64, text: &str, instance: Option<&str>, at: f64) {
        let named = instance.and_then(|a| self.flow.source_of(a));
        let (hop, what) = match (named, instance) {
            (Some(src @ LogOrigin::Prefill(_)), Some(a)) => {
                (Hop::Producer, format!("{src} ({a}) unreachable: {text}"))
            }
            (Some(src @ LogOrigin::Decode(_)), Some(a)) => {
                (Hop::Consumer, format!("{src} ({a}) unreachable: {text}"))
            }
            _ => return,
        };
        let bare = self.store.get(h).is_some_and(|e| {
            e.track.proxy_exception && e.trace.prefill.is_none() && e.trace.decode.is_none()
        });
        let target = match (hop, bare) {
            (Hop::Consumer, true) => self.reported_next_step(at),
            _ => None,
        };
        if let Some(s) = target {
            self.absorb_proxy_trace(h, s, hop, at);
            self.fail(s, hop, LogOrigin::Proxy, what, at, at);
            if self.flow.error.is_some_and(|(e, _)| e == h) {
                self.flow.error = Some((s, at));
            }
            return;
        }
        let named_already = self
            .store
            .get(h)
            .is_some_and(|e| e.facts.has(|k| matches!(k, FactKind::Failed(x) if x.hop == hop)));
        if !named_already {
            self.fail(h, hop, LogOrigin::Proxy, what, at, at);
        }
    }
}
