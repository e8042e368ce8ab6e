//! Instance events other than a request arriving: KV expiry, engine death
//! and restart, transfer windows, access lines, id-less errors.

use super::correlator::Correlator;
use super::ids::{base_id, external_of_internal};
use super::instance_events::hop_of;
use super::model::{Confidence, Death, Hop, Join, Outcome};
use crate::feed::LogOrigin;

/// Lines of one engine death arrive within this long of each other.
const DEATH_BURST_S: f64 = 5.0;

impl Correlator {
    pub(super) fn on_expired(
        &mut self,
        i: usize,
        internal: &str,
        retrieved_by: Option<u32>,
        t: f64,
        at: f64,
    ) {
        let s = self.store.by_engine(internal).or_else(|| {
            self.store
                .latest(base_id(external_of_internal(internal)))
                .filter(|s| self.store.get(*s).is_some_and(|e| e.trace.prefill == Some(i)))
        });
        if retrieved_by != Some(0) {
            return;
        }
        let Some(s) = s else {
            self.unattributed_misses += 1;
            return;
        };
        let note = format!("prefill#{i} released its KV unread (lease expired)");
        self.with_phase(s, Hop::Connector, LogOrigin::Prefill(i), None, t, |p| {
            p.error = Some(note.clone());
            p.end.get_or_insert(t);
        });
        let Some(e) = self.store.get_mut(s) else {
            return;
        };
        if e.track.kv_expired_unread {
            return;
        }
        e.track.kv_expired_unread = true;
        let (outcome, join, has_decode, params) =
            (e.trace.outcome, e.trace.join, e.trace.decode.is_some(), e.track.decode_has_params);
        match outcome {
            Outcome::SilentMiss => e.trace.evidence.push_str(&format!("; confirmed: {note}")),
            Outcome::Loaded if params && join.exact() => {
                let ev = format!(
                    "decode got kv_transfer_params but never pulled: {note}; it recomputed the prompt"
                );
                self.decide(s, Outcome::SilentMiss, Confidence::Sure, ev, at);
            }
            Outcome::Error => e.trace.evidence.push_str(&format!("; {note}")),
            _ => {
                // Nothing ties a decode request to it by id: the miss is real
                // but unnamed.
                self.unattributed_misses += 1;
                let what = if has_decode { "decode paired by order only" } else { "no decode request seen" };
                let ev = format!("{note}; {what}");
                if e.trace.outcome == Outcome::Pending && !has_decode {
                    e.trace.evidence = ev;
                } else {
                    e.trace.evidence.push_str(&format!("; {ev}"));
                }
            }
        }
    }

    pub(super) fn on_death(&mut self, src: LogOrigin, text: &str, t: f64, at: f64) {
        let st = self.stat(src);
        // One death prints several lines (the core's, then each request's
        // EngineDeadError): count it once, keep the first (the cause).
        let again = st.last_death.as_ref().is_some_and(|d| (t - d.at).abs() <= DEATH_BURST_S);
        if !again {
            st.deaths += 1;
            st.last_death = Some(Death { at: t, text: text.to_string() });
        }
        let victims: Vec<u64> = self
            .open
            .iter()
            .copied()
            .filter(|s| {
                self.store.get(*s).is_some_and(|e| {
                    e.trace.outcome == Outcome::Pending && super::store::Store::touches(e, src)
                })
            })
            .collect();
        for s in victims {
            self.fail(s, hop_of(src), src, format!("engine died: {text}"), t, at);
        }
        if let LogOrigin::Decode(i) = src {
            self.reset_hits(i, at);
        }
    }

    pub(super) fn on_restart(&mut self, src: LogOrigin, at: f64) {
        self.stat(src).starts += 1;
        self.joiner.forget_access(src);
        if let LogOrigin::Decode(i) = src {
            self.reset_hits(i, at);
            if let Some(d) = self.decodes.get_mut(&i) {
                d.busy_until = None;
            }
        }
    }

    fn reset_hits(&mut self, i: usize, at: f64) {
        let gone = self.decodes.get_mut(&i).map(|d| &mut d.hits).map(|q| q.reset()).unwrap_or_default();
        for w in gone {
            if let Some(e) = self.store.get_mut(w.serial) {
                e.track.in_hit_queue = false;
            }
            if self.store.outcome(w.serial) == Some(Outcome::Pending) {
                let ev = format!("decode#{i} restarted before its KV load could be seen");
                self.decide(w.serial, Outcome::Unknown, Confidence::Likely, ev, at);
            }
        }
    }

    /// A `KV Transfer metrics` window: confirms that many param-loaded requests.
    pub(super) fn on_transfer_metrics(&mut self, i: usize, n: u64, at: f64) {
        let Some(q) = self.decodes.get_mut(&i).map(|d| &mut d.params_loaded) else {
            return;
        };
        let mut confirmed = Vec::new();
        let mut stale = Vec::new();
        let mut left = n;
        while let Some(s) = q.front().copied() {
            if left > 0 {
                q.pop_front();
                confirmed.push(s);
                left -= 1;
            } else if self.store.get(s).and_then(|e| e.track.decode_at).is_none_or(|d| at - d > 25.0) {
                // Two windows went by without counting it.
                q.pop_front();
                stale.push(s);
            } else {
                break;
            }
        }
        for s in confirmed {
            if let Some(e) = self.store.get_mut(s)
                && e.trace.outcome == Outcome::Loaded
                && !e.track.transfer_confirmed
            {
                e.track.transfer_confirmed = true;
                e.trace.evidence.push_str(&format!(
                    "; decode#{i}'s KV Transfer metrics counted {n} transfers in that window"
                ));
            }
        }
        for s in stale {
            if let Some(e) = self.store.get_mut(s)
                && e.trace.outcome == Outcome::Loaded
            {
                e.trace.confidence = e.trace.confidence.max(Confidence::Likely);
                e.trace.evidence.push_str("; no KV Transfer metrics window counted a transfer for it");
            }
        }
    }

    pub(super) fn on_instance_access(&mut self, src: LogOrigin, status: u16, t: f64, at: f64) {
        let serial = self.joiner.next_access(src, &self.store);
        let ok = (200..300).contains(&status);
        match (serial, ok) {
            (Some(s), true) => {
                if let LogOrigin::Decode(_) = src {
                    self.end_wait(s, t);
                }
                if let LogOrigin::Prefill(_) = src {
                    self.with_phase(s, Hop::Producer, src, None, t, |p| p.end = Some(t));
                    if let Some(e) = self.store.get_mut(s) {
                        e.track.prefill_done = Some(t);
                    }
                }
            }
            (Some(s), false) => {
                self.fail(s, hop_of(src), src, format!("answered HTTP {status}"), t, at);
            }
            (None, true) => {}
            (None, false) => {
                self.stat(src).unattributed_errors += 1;
                self.refused(src, status, t, at);
            }
        }
    }

    /// A failing access line with no request waiting for it: vLLM refused
    /// the request at validation, before logging it. One trace per line.
    fn refused(&mut self, src: LogOrigin, status: u16, t: f64, at: f64) {
        let mut text = format!("answered HTTP {status} before logging the request (refused at validation)");
        // Without shared ids, the oldest unpaired prefill copy is this
        // request's: a proxy prefills first, then forwards to decode.
        let partner = match src {
            LogOrigin::Decode(i) if !self.joiner.ids_shared => self.order_partner(t).map(|s| (i, s)),
            _ => None,
        };
        let s = match partner {
            Some((i, s)) => {
                if let Some(e) = self.store.get_mut(s) {
                    e.trace.decode = Some(i);
                    e.trace.join = Join::ByOrder;
                }
                text.push_str("; a proxy like vLLM's demo passes a 4xx on as the body of a 200");
                s
            }
            None => {
                let id = self.synthetic_id(&format!("{src}-error"));
                let s = self.new_trace(id, at);
                if let Some(e) = self.store.get_mut(s) {
                    match src {
                        LogOrigin::Prefill(i) => e.trace.prefill = Some(i),
                        LogOrigin::Decode(i) => e.trace.decode = Some(i),
                        LogOrigin::Proxy => e.track.proxy_seen = true,
                    }
                }
                if matches!(src, LogOrigin::Decode(_)) && !self.joiner.ids_shared {
                    self.flow.refusal(s, at);
                }
                s
            }
        };
        self.fail(s, hop_of(src), src, text, t, at);
    }

    /// The client went away (`Aborted request(s)`): its own outcome,
    /// whatever the KV did before.
    pub(super) fn cancel(&mut self, s: u64, src: LogOrigin, t: f64, at: f64) {
        self.end_wait(s, t);
        self.with_phase(s, hop_of(src), src, None, t, |p| {
            p.end.get_or_insert(t);
        });
        let Some((o, ev)) = self.store.get(s).map(|e| (e.trace.outcome, e.trace.evidence.clone())) else {
            return;
        };
        let before = match o {
            Outcome::Loaded => format!(", after decode loaded its KV ({ev})"),
            Outcome::SilentMiss => format!(", after decode recomputed its prompt ({ev})"),
            _ => String::new(),
        };
        let text =
            format!("the client closed the stream: {src} aborted the request (`Aborted request(s)`){before}");
        self.decide(s, Outcome::Cancelled, Confidence::Sure, text, at);
    }

    /// An error no request can be named for: one synthetic trace per burst.
    pub(super) fn error_trace(&mut self, src: LogOrigin, text: String, t: f64, at: f64) {
        if let Some((s, when)) = self.last_error.get(&src).copied()
            && at - when <= 1.0
            && self.store.get(s).is_some()
        {
            if let Some(e) = self.store.get_mut(s) {
                e.trace.evidence.push_str(&format!("; {text}"));
            }
            self.last_error.insert(src, (s, at));
            return;
        }
        let id = self.synthetic_id(&format!("{src}-error"));
        let s = self.new_trace(id, at);
        self.fail(s, hop_of(src), src, text, t, at);
        if let Some(e) = self.store.get_mut(s) {
            match src {
                LogOrigin::Prefill(i) => e.trace.prefill = Some(i),
                LogOrigin::Decode(i) => e.trace.decode = Some(i),
                LogOrigin::Proxy => e.track.proxy_seen = true,
            }
        }
        self.last_error.insert(src, (s, at));
    }
}
