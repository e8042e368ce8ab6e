//! LMCache's per-request lookup on a decode instance (`Reqid: X, Total
//! tokens N, LMCache hit tokens: M, need to load: K`): the decode side's own
//! word on whether it found the prefill's KV. In a disaggregated pair the
//! decode instance (`kv_consumer`) is sent prefilled requests, so a lookup
//! that finds nothing means the prompt is recomputed — the silent miss —
//! and a hit means KV it did not compute is loaded. LMCache repeats the
//! lookup while the KV is not ready: the latest lookup wins while the
//! request is undecided or was judged a miss by an earlier, empty one.

use crate::feed::LogOrigin;
use crate::logs::signal::Signal;
use crate::traces::correlator::Correlator;
use crate::traces::evidence::{FactKind, Failure};
use crate::traces::ids::{external_of_internal, trace_key};
use crate::traces::model::{Confidence, Hop, Outcome};

/// LMCache retrieves a request's KV in the forward pass after its lookup
/// (`start_load_kv`): one step, a second or two for a long prefill step.
/// LMCache stamps to the millisecond, so a longer window would only take in
/// the lookups of later requests.
const LOOKUP_TO_LOAD_S: f64 = 2.0;

impl Correlator {
    pub(crate) fn on_lmcache_lookup(&mut self, i: usize, sig: &Signal, t: f64, at: f64) -> bool {
        let (Some(hit), Some(total)) = (sig.get_num("hit_tokens"), sig.get_num("total_tokens")) else {
            return false;
        };
        let src = LogOrigin::Decode(i);
        let prefill_read = self.stats.keys().any(|k| matches!(k, LogOrigin::Prefill(_)));
        for id in &sig.ids {
            let s = match self.find(id) {
                Some(s) => s,
                // A pasted decode log may hold nothing else of the request.
                None if !prefill_read => {
                    // LMCache prints the engine's id: the API server's id is its stem.
                    let s = self.new_trace(trace_key(external_of_internal(id)), at);
                    if let Some(e) = self.store.get_mut(s) {
                        e.trace.decode = Some(i);
                        e.trace.first_seen = t;
                    }
                    s
                }
                // The prefill log is read and never showed it: the pair's
                // own lines decide (no prefill, or a late join).
                None => continue,
            };
            let Some(e) = self.store.get(s) else { continue };
            if !matches!(e.trace.outcome, Outcome::Pending | Outcome::SilentMiss) {
                continue;
            }
            let prefilled = e.trace.prefill.is_some();
            if prefill_read && !prefilled {
                continue;
            }
            let detail = format!("LMCache hit {hit} of {total} tokens");
            self.with_phase(s, Hop::Consumer, src, None, t, |p| {
                if p.detail.is_empty() {
                    p.detail = detail.clone();
                }
            });
            // An empty lookup may be repeated once the KV is ready: the latest wins.
            if hit > 0.0 || total > 0.0 {
                let kind = FactKind::LmcacheLookup { decode: i, hit, total, id: id.clone() };
                self.said(s, t, src, kind, at);
            }
        }
        true
    }

    /// `Storing KV cache for A out of B tokens (skip_leading_tokens=S) for
    /// request X` on the prefill, `Scheduled to load N tokens for request X`
    /// on the decode: the connector hop's detail (how far the store got, what
    /// the load was asked for). Evidence on the trace, never a verdict.
    pub(crate) fn on_lmcache_progress(&mut self, src: LogOrigin, sig: &Signal, t: f64) -> bool {
        let detail = match (src, sig.get_num("tokens")) {
            (LogOrigin::Prefill(_), Some(n)) => {
                let upto = n + sig.get_num("skip_leading_tokens").unwrap_or(0.0);
                format!("LMCache stored {upto} tokens")
            }
            (LogOrigin::Decode(_), Some(n)) => format!("LMCache load of {n} tokens scheduled"),
            _ => return false,
        };
        let other_side_read = self.stats.keys().any(|k| match src {
            LogOrigin::Prefill(_) => matches!(k, LogOrigin::Decode(_)),
            _ => matches!(k, LogOrigin::Prefill(_)),
        });
        let mut known = false;
        for id in &sig.ids {
            let s = match self.find(id) {
                Some(s) => s,
                // A pasted prefill log may hold nothing else of the request:
                // the store is what shows it was prefilled.
                None if matches!(src, LogOrigin::Prefill(_)) && !other_side_read => {
                    let s = self.new_trace(trace_key(external_of_internal(id)), t);
                    if let (Some(e), LogOrigin::Prefill(i)) = (self.store.get_mut(s), src) {
                        e.trace.prefill = Some(i);
                        e.trace.first_seen = t;
                    }
                    s
                }
                None => continue,
            };
            known = true;
            let d = detail.clone();
            self.with_phase(s, Hop::Connector, src, None, t, move |p| {
                p.detail = d;
                p.end = Some(t.max(p.start));
            });
        }
        known
    }

    /// LMCache's `The number of retrieved tokens is less than the expected
    /// number of tokens!` without `Request X` (before v0.3.x): printed in
    /// `start_load_kv` right after the load it judges, so it is about a
    /// request whose lookup on this instance just hit. One such request: its
    /// load came back short (likely, by adjacency). Several: none can be
    /// named, and a hit no longer shows they loaded.
    pub(crate) fn on_lmcache_short_unnamed(&mut self, i: usize, t: f64, at: f64) {
        let src = LogOrigin::Decode(i);
        let hit_just_before = |e: &crate::traces::store::Entry| {
            e.trace.decode == Some(i)
                && e.trace.outcome == Outcome::Loaded
                && e.facts
                    .last(|k| match k {
                        FactKind::LmcacheLookup { hit, .. } if *hit > 0.0 => Some(()),
                        _ => None,
                    })
                    .is_some_and(|(f, _)| f.t <= t && t - f.t <= LOOKUP_TO_LOAD_S)
        };
        let cands: Vec<u64> =
            self.store.serials().filter(|s| self.store.get(*s).is_some_and(hit_just_before)).collect();
        let text = format!(
            "an LMCache load on {src} came back short (`The number of retrieved tokens is less than the expected number of tokens!`)"
        );
        if let [s] = cands[..] {
            // By adjacency, not by name: likely.
            let what = format!("{text}, printed right after its lookup");
            let x = Failure {
                hop: Hop::Connector,
                what,
                confidence: Confidence::Likely,
                generate_failed: false,
                by_proxy: false,
            };
            self.fail_with(s, src, x, t, at);
            return;
        }
        for s in cands {
            self.said(s, t, src, FactKind::LmcacheShortAmong { decode: i }, at);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::feed::LogOrigin;
    use crate::traces::{Confidence, Correlator, CorrelatorOptions, Hop, Outcome};

    /// LMCache#889, pasted: a lookup on the decode that hit.
    const HIT_A: &str = "[2025-06-21 20:59:57,672] LMCache INFO: Reqid: chatcmpl-ec5a3a80c13548ca89dd8e6241abc343, Total tokens 263, LMCache hit tokens: 256, need to load: 256 (vllm_v1_adapter.py:812:lmcache.integration.vllm.vllm_v1_adapter)";
    /// The same format (LMCache `vllm_v1_adapter.py`, `Reqid: %s, Total tokens
    /// %d, LMCache hit tokens: %d, need to load: %d`), rendered: another request.
    const HIT_B: &str = "[2025-06-21 20:59:57,673] LMCache INFO: Reqid: chatcmpl-0b1c2d3e4f5a46b7c8d9e0f1a2b3c4d5, Total tokens 40, LMCache hit tokens: 32, need to load: 32 (vllm_v1_adapter.py:812:lmcache.integration.vllm.vllm_v1_adapter)";
    /// LMCache before v0.3.x (`logger.error("The number of retrieved tokens is
    /// less than the expected number of tokens! This should not happen!")`, no
    /// request named), as LMCache#1514 pasted it; the stamp is ours.
    const SHORT: &str = "[2025-06-21 20:59:57,675] LMCache ERROR: The number of retrieved tokens is less than the expected number of tokens! This should not happen! (vllm_v1_adapter.py:751:lmcache.integration.vllm.vllm_v1_adapter)";

    fn read(lines: &[&str]) -> Correlator {
        let mut c = Correlator::new(CorrelatorOptions::default());
        for (k, l) in lines.iter().enumerate() {
            c.on_line(LogOrigin::Decode(0), l, 1_750_000_000.0 + k as f64);
        }
        c.finish(1_750_000_100.0);
        c
    }

    /// A hit is no load when LMCache then says the load came back short: the
    /// one request whose lookup just hit is the one (likely); with two, none
    /// can be named, and neither is called loaded.
    #[test]
    fn a_short_retrieve_naming_no_request_undoes_the_hit_before_it() {
        let c = read(&[HIT_A]);
        assert_eq!(c.get("chatcmpl-ec5a3a80c13548ca89dd8e6241abc343").unwrap().outcome, Outcome::Loaded);
        let c = read(&[HIT_A, SHORT]);
        let t = c.get("chatcmpl-ec5a3a80c13548ca89dd8e6241abc343").unwrap();
        assert_eq!((t.outcome, t.error_at), (Outcome::Error, Some(Hop::Connector)), "{t:?}");
        assert_eq!(t.confidence, Confidence::Likely, "by adjacency, not by name: {t:?}");
        assert!(t.evidence().contains("came back short"), "{t:?}");
        let c = read(&[HIT_A, HIT_B, SHORT]);
        for id in ["chatcmpl-ec5a3a80c13548ca89dd8e6241abc343", "chatcmpl-0b1c2d3e4f5a46b7c8d9e0f1a2b3c4d5"] {
            let t = c.get(id).unwrap();
            assert_eq!(t.outcome, Outcome::Unknown, "{t:?}");
            assert!(t.evidence().contains("one of several"), "{t:?}");
        }
    }
}
