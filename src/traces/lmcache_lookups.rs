//! LMCache's per-request lookup on a decode instance (`Reqid: X, Total
//! tokens N, LMCache hit tokens: M, need to load: K`): the decode side's own
//! word on whether it found the prefill's KV. In a disaggregated pair the
//! decode instance (`kv_consumer`) is sent prefilled requests, so a lookup
//! that finds nothing means the prompt is recomputed — the silent miss —
//! and a hit means KV it did not compute is loaded. LMCache repeats the
//! lookup while the KV is not ready: the latest lookup wins while the
//! request is undecided or was judged a miss by an earlier, empty one.

use super::correlator::Correlator;
use super::ids::{external_of_internal, trace_key};
use super::model::{Confidence, Hop, Outcome};
use crate::feed::LogOrigin;
use crate::logs::signal::Signal;

impl Correlator {
    pub(super) fn on_lmcache_lookup(&mut self, i: usize, sig: &Signal, t: f64, at: f64) -> bool {
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
            // Without a prefill log the prefill is the decode role's premise,
            // not something a line showed.
            let (confidence, premise) = if prefilled {
                (Confidence::Sure, "")
            } else {
                (Confidence::Likely, "; no prefill log: prefilled is assumed from the decode role")
            };
            // An empty lookup may be repeated once the KV is ready: a miss
            // on it alone is likely, not sure; a hit is LMCache's own load.
            let confidence = if hit <= 0.0 { confidence.max(Confidence::Likely) } else { confidence };
            let (outcome, ev) = if hit <= 0.0 && total > 0.0 {
                (
                    Outcome::SilentMiss,
                    format!(
                        "LMCache on {src}: hit tokens 0 of {total}, prompt recomputed (`Reqid: {id}`){premise}"
                    ),
                )
            } else if hit > 0.0 {
                (
                    Outcome::Loaded,
                    format!("LMCache on {src}: hit {hit} of {total} tokens (`Reqid: {id}`){premise}"),
                )
            } else {
                continue;
            };
            self.decide(s, outcome, confidence, ev, at);
        }
        true
    }

    /// `Storing KV cache for A out of B tokens (skip_leading_tokens=S) for
    /// request X` on the prefill, `Scheduled to load N tokens for request X`
    /// on the decode: the connector hop's detail (how far the store got, what
    /// the load was asked for). Evidence on the trace, never a verdict.
    pub(super) fn on_lmcache_progress(&mut self, src: LogOrigin, sig: &Signal, t: f64) -> bool {
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
}
