//! Instance events other than a request arriving: KV expiry, engine death
//! and restart, transfer windows, access lines, id-less errors.

use super::events::hop_of;
use super::inflight::Stop;
use crate::feed::LogOrigin;
use crate::logs::vllm::EngineStats;
use crate::traces::connector::named::Side;
use crate::traces::connector::transfers::{Confirmed, Quiet};
use crate::traces::correlator::{Correlator, Style};
use crate::traces::evidence::FactKind;
use crate::traces::ids::{base_id, external_of_internal};
use crate::traces::model::{Death, Hop, Join, Outcome};
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
    pub(crate) fn decode_after_failed_prefill(&mut self, i: usize, s: u64, params: bool, t: f64) -> bool {
        let pull_without_params = self.style(i) == Style::Params && !params;
        if !self.store.get(s).is_some_and(failed_prefill) {
            return false;
        }
        let kind = FactKind::AfterFailedPrefill { decode: i, pull_without_params };
        self.said(s, t, LogOrigin::Decode(i), kind, self.last_at);
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
        self.with_phase(s, Hop::Connector, src, None, t, |p| {
            p.error = Some(note.clone());
            p.end.get_or_insert(t);
        });
        if self.store.get(s).is_some_and(|e| e.facts.has(|k| *k == FactKind::KvExpiredUnread)) {
            return;
        }
        // The producer that printed it held the KV of the request of that id.
        if let (LogOrigin::Prefill(i), Some(e)) = (src, self.store.get_mut(s))
            && e.trace.join == Join::ById
            && e.trace.decode.is_some()
        {
            e.trace.prefill.get_or_insert(i);
        }
        self.said(s, t, src, FactKind::KvExpiredUnread, at);
        // A miss nothing ties to a decode request by id is real but unnamed.
        // A decode given its params by id is no such miss: its own lines
        // say what became of the load (`decide::pair::params`).
        let named = self.store.get(s).is_some_and(|e| {
            matches!(e.trace.outcome, Outcome::SilentMiss | Outcome::Error | Outcome::Cancelled)
                || e.facts.has(|k| matches!(k, FactKind::NotifyFailed { .. }))
                || (e.trace.join == Join::ById && e.facts.has(|k| matches!(k, FactKind::Params { .. })))
        });
        if !named {
            self.unattributed_misses += 1;
            if let Some(e) = self.store.get_mut(s) {
                e.track.unattributed_miss = true;
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
            let d = self.decodes.entry(i).or_default();
            d.busy_until = None;
            d.transfers.restart();
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
            // vLLM stamps whole seconds: deaths in one second are in no order
            // a log can tell (the order they were read in is the reader's).
            if (t - pt).abs() < 1.0 {
                let (a, xa, b, xb) = match p < src {
                    true => (p, ptext.as_str(), src, text),
                    false => (src, text, p, ptext.as_str()),
                };
                return format!(
                    "death cascade: {a} ({xa}) and {b} ({xb}), the two sides of the pair, died in the same second: which died first is not known"
                );
            }
            let ((a, ta, xa), (b, tb, xb)) = if pt <= t {
                ((p, pt, ptext.as_str()), (src, t, text))
            } else {
                ((src, t, text), (p, pt, ptext.as_str()))
            };
            format!(
                "death cascade: {a} died ({xa}), then {b} on the other side of the pair {:.0} s later ({xb})",
                tb - ta
            )
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
            self.said(w.serial, at, LogOrigin::Decode(i), FactKind::RestartedBeforeLoad, at);
        }
    }

    /// A `KV Transfer metrics` window of decode `i`.
    pub(crate) fn on_transfer_metrics(&mut self, i: usize, n: u64, at: f64) {
        let due = self.decodes.entry(i).or_default().transfers.window(n);
        self.confirm_transfers(i, due, at);
    }

    /// Decode `i`'s stats line: one with nothing running or waiting is a
    /// quiet point for its transfer ledger.
    pub(crate) fn on_decode_stats(&mut self, i: usize, s: &EngineStats, t: f64, at: f64) {
        let quiet = s.running == 0 && s.waiting == 0 && s.deferred.unwrap_or(0) == 0;
        let due = self.decodes.entry(i).or_default().transfers.stats(quiet, t);
        self.confirm_transfers(i, due, at);
    }

    /// A quiet point of decode `i` (its line's source time first): the loads its
    /// counts cover are confirmed. Only where the decode counts one read
    /// per load: NIXL's pull side does (its push side and most other
    /// connectors print no window), on one rank and one engine (with
    /// several, one engine's quiet says nothing of the others').
    fn confirm_transfers(&mut self, i: usize, due: Option<Quiet>, at: f64) {
        let Some(due) = due else {
            return;
        };
        let src = LogOrigin::Decode(i);
        let pulls = self.stats.get(&src).and_then(|s| s.connector.as_deref()) == Some("NixlConnector");
        let Some(d) = self.decodes.get_mut(&i) else {
            return;
        };
        let Some(Confirmed { loads, counted, confirmed }) = d.transfers.settle(due) else {
            return;
        };
        if !(pulls || d.transfers.counts) || d.parallel != Some((1, 1)) {
            return;
        }
        for s in loads {
            if self.store.get(s).is_some_and(|e| !e.retired) {
                self.said(s, due.0, src, FactKind::TransferCounted { counted, loads: confirmed }, at);
            }
        }
    }

    pub(crate) fn on_instance_access(&mut self, src: LogOrigin, status: u16, path: &str, t: f64, at: f64) {
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
                self.upstream_answer(s, hop_of(src), status, t, at);
            }
            (None, true) => {}
            (None, false) => {
                self.stat(src).unattributed_errors += 1;
                self.refused(src, status, path, t, at);
            }
        }
    }

    /// A failing access line with no request waiting for it: vLLM refused
    /// the request at validation, before logging it. One trace per line.
    fn refused(&mut self, src: LogOrigin, status: u16, path: &str, t: f64, at: f64) {
        let mut text = format!("answered HTTP {status} before logging the request (refused at validation)");
        // Without shared ids, the oldest unpaired prefill copy is this
        // request's: a proxy prefills first, then forwards to decode. A
        // proxy that goes on after its copy was refused (vLLM's demo proxy
        // does) sends decode the same request, to the same path: refused
        // there too, it is that request's second refusal, not another.
        let partner = match src {
            LogOrigin::Decode(i) if !self.joiner.ids_shared => {
                let (api, win) = (crate::traces::ids::api_of_path(path), self.opts.order_window_s);
                self.joiner
                    .partner(&self.store, t, win, api)
                    .or_else(|| self.flow.take_prefill_refusal(api, t))
                    .or_else(|| self.order_partner(t, None))
                    .map(|s| (i, s))
            }
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
                match src {
                    LogOrigin::Decode(_) if !self.joiner.ids_shared => self.flow.refusal(s, at),
                    LogOrigin::Prefill(_) => {
                        self.flow.prefill_refusal(s, crate::traces::ids::api_of_path(path), t)
                    }
                    _ => {}
                }
                s
            }
        };
        self.fail(s, hop_of(src), src, text, t, at);
        self.upstream_answer(s, hop_of(src), status, t, at);
    }

    /// The client went away (`Aborted request(s)`): its own outcome,
    /// whatever the KV did before.
    pub(crate) fn cancel(&mut self, s: u64, src: LogOrigin, t: f64, at: f64) {
        self.end_wait(s, t);
        self.with_phase(s, hop_of(src), src, None, t, |p| {
            p.end.get_or_insert(t);
        });
        if self.store.get(s).is_some_and(|e| e.facts.abort().is_some()) {
            return;
        }
        self.said(s, t, src, FactKind::Aborted, at);
    }
}
