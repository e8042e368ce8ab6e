//! Instance events other than a request arriving: KV expiry, engine death
//! and restart, transfer windows, access lines, id-less errors.

use super::events::hop_of;
use super::inflight::Stop;
use crate::feed::LogOrigin;
use crate::traces::connector::named::Side;
use crate::traces::correlator::{Correlator, Style};
use crate::traces::ids::{base_id, external_of_internal};
use crate::traces::model::{Confidence, Death, Hop, Join, Outcome};
use crate::traces::store::{Store, failed_prefill};

/// Lines of one engine death arrive within this long of each other.
const DEATH_BURST_S: f64 = 5.0;
/// A transfer peer's death this close to another's is one failure.
const CASCADE_S: f64 = 1.0;

/// A prefill and a decode instance move KV between them.
fn is_peer(a: LogOrigin, b: LogOrigin) -> bool {
    matches!(
        (a, b),
        (LogOrigin::Prefill(_), LogOrigin::Decode(_)) | (LogOrigin::Decode(_), LogOrigin::Prefill(_))
    )
}

impl Correlator {
    /// The trace of that identity ([`crate::traces::Trace::serial`]) while the ring
    /// holds it: an id names one request per lifetime, a serial names one.
    pub fn trace(&self, serial: u64) -> Option<&crate::traces::Trace> {
        self.store.get(serial).map(|e| &e.trace)
    }

    /// A decode request joined a trace whose prefill failed: what decode
    /// did is evidence on that error, not a second verdict. `true` when so.
    pub(crate) fn decode_after_failed_prefill(&mut self, i: usize, s: u64, params: bool) -> bool {
        let style = self.style(i);
        let name = self.connector_name(i);
        let Some(e) = self.store.get_mut(s).filter(|e| failed_prefill(e)) else {
            return false;
        };
        let mut note = if e.trace.join == Join::ByOrder {
            // Most proxies stop at a prefill error: then this decode was the
            // next request's, and that request's copy is left unpaired.
            e.trace.confidence = Confidence::Unsure;
            format!(
                "; decode#{i} received a request next, paired with it by arrival order (no id was shared): \
                 the proxy went on after the failure, or stopped there and this decode is the next request's"
            )
        } else {
            format!("; the proxy went on: decode#{i} received it after the prefill failed")
        };
        if style == Style::Params && !params {
            note.push_str(&format!(
                " and, with no kv_transfer_params, {name} had nothing to pull: decode computed the prompt itself"
            ));
        }
        e.trace.evidence.push_str(&note);
        true
    }

    /// `Releasing expired KV blocks for request X which were retrieved by N
    /// decode worker(s)`: the producer (NIXL's, on the log that printed it)
    /// held X's KV until its lease ran out. With N = 0 no decode read it.
    pub(crate) fn on_expired(
        &mut self,
        src: LogOrigin,
        internal: &str,
        retrieved_by: Option<u32>,
        t: f64,
        at: f64,
    ) {
        let held = |c: &Correlator, s: &u64| c.store.get(*s).is_some_and(|e| Store::touches(e, src));
        let s = self.store.by_engine(internal).or_else(|| {
            let base = self.store.latest(base_id(external_of_internal(internal)));
            base.filter(|s| held(self, s)).or_else(|| self.find(internal).filter(|s| held(self, s)))
        });
        if retrieved_by != Some(0) {
            return;
        }
        // No line of this log named it before: the line itself opens it.
        let Some(s) = s.or_else(|| self.trace_named(src, internal, Side::Producer, t, at)) else {
            self.unattributed_misses += 1;
            return;
        };
        let note = format!("{src} released its KV unread (lease expired)");
        if let Some(e) = self.store.get_mut(s).filter(|e| e.track.kv_notify_failed) {
            // The decode's failed notification said this would come: no miss.
            if !e.trace.evidence.contains(&note) {
                e.trace.evidence.push_str(&format!("; then {note}, as the failed notification left it"));
            }
            return;
        }
        self.with_phase(s, Hop::Connector, src, None, t, |p| {
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
        let (outcome, join, decode, params) = (
            e.trace.outcome,
            e.trace.join,
            e.trace.decode.filter(|_| e.track.decode_at.is_some()),
            e.track.decode_has_params,
        );
        let has_decode = decode.is_some();
        match outcome {
            Outcome::SilentMiss => e.trace.evidence.push_str(&format!("; confirmed: {note}")),
            Outcome::Loaded if params && join.exact() => {
                let ev = format!(
                    "decode got kv_transfer_params but never pulled: {note}; it recomputed the prompt"
                );
                self.decide(s, Outcome::SilentMiss, Confidence::Sure, ev, at);
            }
            Outcome::Error => e.trace.evidence.push_str(&format!("; {note}")),
            // The client's abort left the KV unread: the abort's echo, no miss (`abort.rs`).
            Outcome::Cancelled => e.trace.evidence.push_str(&format!("; then {note} (after the abort)")),
            // The decode request of the same id ran, and never read this KV:
            // it computed the prompt itself (a failed read would have erred
            // it). "No prefill" was wrong too: this prefill held its KV.
            Outcome::Pending | Outcome::Unknown | Outcome::NoPrefill
                if join == Join::ById
                    && let Some(di) = decode =>
            {
                if let LogOrigin::Prefill(i) = src {
                    e.trace.prefill.get_or_insert(i);
                }
                let ev = format!("decode#{di} ran it, but {note}: decode recomputed the prompt");
                self.decide(s, Outcome::SilentMiss, Confidence::Likely, ev, at);
            }
            _ => {
                // Nothing ties a decode request to it by id: the miss is real
                // but unnamed.
                self.unattributed_misses += 1;
                let what = if has_decode { "decode paired by order only" } else { "no decode request seen" };
                let ev = format!("{note}; {what}");
                let alone = e.trace.prefill.is_none() && e.trace.decode.is_none();
                if e.trace.outcome == Outcome::Pending && !has_decode {
                    e.trace.evidence = ev;
                } else {
                    e.trace.evidence.push_str(&format!("; {ev}"));
                }
                if alone && e.trace.outcome == Outcome::Pending {
                    // Only this line names it (a producer line in a log read
                    // as decode): no deadline of either side will judge it.
                    let ev = format!(
                        "{note}, so no decode loaded it; no decode request of it was read, so whether one recomputed it is unknown"
                    );
                    self.decide(s, Outcome::Unknown, Confidence::Likely, ev, at);
                    if let Some(e) = self.store.get_mut(s) {
                        e.track.reopenable = true;
                    }
                }
            }
        }
    }

    pub(crate) fn on_death(&mut self, src: LogOrigin, text: &str, t: f64, at: f64) {
        // One death prints several lines (the core's, then each request's
        // EngineDeadError): count it once, keep the first (the cause).
        let again = self.stat(src).last_death.as_ref().is_some_and(|d| (t - d.at).abs() <= DEATH_BURST_S);
        if !again {
            self.record_death(src, text, t);
        }
        self.inflight.stopping(src, Stop::Died);
        // The API server lives on and names each open stream it fails
        // (`Request <id> failed (engine dead)`): only what had no answer yet
        // is cut here.
        self.cut_off(src, &format!("engine died: {text}"), false, None, t, at);
        if let LogOrigin::Decode(i) = src {
            self.reset_hits(i, at);
        }
    }

    /// A new process of the instance started (`Starting vLLM server`, or a
    /// new API server pid). Its log stopped before: in order (`[shutdown]`),
    /// after its engine died, or with nothing at all (SIGKILL, OOM kill),
    /// which is a death too, at `last`, its old process's last stamp.
    pub(crate) fn on_restart(&mut self, src: LogOrigin, last: Option<f64>, t: f64, at: f64) {
        let ran = (last.is_some() && !self.inflight.fresh(src)) || !self.inflight.is_empty(src);
        if self.inflight.stop(src).is_none() && ran {
            let when = last.unwrap_or(t);
            let text = "its log stopped with no shutdown and a new process started (killed)";
            self.record_death(src, text, when);
            // Nothing was printed for its open streams either. Where the
            // process logs stats, an interval that generated tokens prints a
            // line (`VLLM_LOG_STATS_INTERVAL`), and a stream's end generates
            // some: a stream a stats line showed running, with none since,
            // was open up to the kill. One that began after the last stats
            // line (or with no stats at all) may have ended before the kill,
            // which lies anywhere up to the restart.
            let dated = self.inflight.last_stats(src);
            let cause = format!("{src} was killed ({text})");
            self.cut_off(src, &cause, true, Some((t, dated)), when, at);
        } else if self.inflight.stop(src) == Some(Stop::Orderly) {
            // A shutdown drains or aborts what runs: open streams stay as they were.
            let cause = format!("{src} shut down (`[shutdown]`) and restarted");
            self.cut_off(src, &cause, false, None, last.unwrap_or(t), at);
        }
        self.inflight.started(src);
        self.joiner.forget_access(src);
        if let LogOrigin::Decode(i) = src {
            self.reset_hits(i, at);
            if let Some(d) = self.decodes.get_mut(&i) {
                d.busy_until = None;
            }
        }
    }

    /// Counts a death and files its event: one that names its transfer
    /// peer's death too when that came within a second (one failure that
    /// took both sides of the pair, not two).
    fn record_death(&mut self, src: LogOrigin, text: &str, t: f64) {
        let peer = self
            .stats
            .values()
            .filter(|s| s.source != src && is_peer(s.source, src))
            .filter_map(|s| s.last_death.as_ref().map(|d| (s.source, d.at, d.text.clone())))
            .filter(|(_, at, _)| (t - at).abs() <= CASCADE_S)
            .min_by(|a, b| (t - a.1).abs().total_cmp(&(t - b.1).abs()));
        let cascade = peer.as_ref().map(|(p, pt, ptext)| {
            let (p, pt) = (*p, *pt);
            let ((a, ta, xa), (b, tb, xb)) = if pt <= t {
                ((p, pt, ptext.as_str()), (src, t, text))
            } else {
                ((src, t, text), (p, pt, ptext.as_str()))
            };
            // vLLM stamps to the second: closer than that cannot be said.
            let gap =
                if tb - ta < 1.0 { "within a second".to_string() } else { format!("{:.0} s later", tb - ta) };
            format!("death cascade: {a} died ({xa}), then {b} on the other side of the pair {gap} ({xb})")
        });
        let st = self.stat(src);
        st.deaths += 1;
        st.last_death = Some(Death { at: t, text: text.to_string(), cascade: cascade.clone() });
        let kind = crate::logs::signal::SignalKind::EngineDead;
        match cascade {
            Some(c) => {
                if let Some((p, _, _)) = &peer
                    && let Some(d) = self.stats.get_mut(p).and_then(|s| s.last_death.as_mut())
                {
                    d.cascade = Some(c.clone());
                }
                self.push_log_event(src, kind, c, t);
            }
            None => self.push_log_event(src, kind, text.to_string(), t),
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
    pub(crate) fn on_transfer_metrics(&mut self, i: usize, n: u64, at: f64) {
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

    pub(crate) fn on_instance_access(&mut self, src: LogOrigin, status: u16, t: f64, at: f64) {
        let serial = self.joiner.next_access(src, &self.store);
        let ok = (200..300).contains(&status);
        if let Some(s) = serial {
            // Before its `Added` line, a 200 starts a stream; after it, the
            // response was complete.
            let added = self.store.get(s).is_some_and(|e| match src {
                LogOrigin::Decode(_) => e.track.decode_added_at.is_some(),
                LogOrigin::Prefill(_) => e.track.prefill_internal.is_some(),
                LogOrigin::Proxy => true,
            });
            self.inflight.answered(src, s, ok && !added);
        }
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
                text.push_str("; paired by order with the prefill copy before it");
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
    pub(crate) fn cancel(&mut self, s: u64, src: LogOrigin, t: f64, at: f64) {
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
        if let Some(e) = self.store.get_mut(s) {
            e.track.cancelled_at = Some((src, t));
        }
        self.decide(s, Outcome::Cancelled, Confidence::Sure, text, at);
    }

    /// An error no request can be named for: one synthetic trace per burst.
    pub(crate) fn error_trace(&mut self, src: LogOrigin, text: String, t: f64, at: f64) {
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
