//! Requests judged over time: a decode request that waits for its KV from
//! the prefill (NIXL's and Mooncake's `start_load_kv for request X`, the
//! scheduler's `X is still in WAITING_FOR_REMOTE_KVS state.`, both DEBUG)
//! and does not go on within `stuck_after_s` is *stuck*: a flag on its
//! trace and an event, never a verdict of its own — it may still finish,
//! fail or be cancelled, and that outcome is kept. The wait is measured on
//! the clock the correlator is given (the lines' own stamps after the
//! fact, the read time live), so it works both ways.

use crate::feed::LogOrigin;
use crate::logs::signal::{Signal, SignalKind as K, Val};
use crate::traces::correlator::Correlator;
use crate::traces::evidence::FactKind;
use crate::traces::ids::{external_of_internal, trace_key};
use crate::traces::model::{Hop, RemoteWait};
use crate::traces::store::push_capped;

impl Correlator {
    /// A decode line saying its request waits for remote KV (or that the
    /// connector began loading it): connector-hop evidence, and the start
    /// of the wait that `judge_waits` watches.
    pub(crate) fn on_remote_wait(&mut self, src: LogOrigin, sig: &Signal, t: f64, at: f64) -> bool {
        let LogOrigin::Decode(i) = src else {
            return false;
        };
        let begun = sig.kind == K::NixlStartLoadKv;
        for id in &sig.ids {
            let s = match self.find(id) {
                Some(s) => s,
                // A pasted excerpt: the wait may be all there is of it.
                None => {
                    // The scheduler prints the engine's id (`…-<8 hex>` from
                    // vLLM 0.11): file it under the API server's, and index
                    // the engine's so the next wait line finds this trace.
                    let s = self.new_trace(trace_key(external_of_internal(id)), at);
                    self.store.index_engine(id, s);
                    if let Some(e) = self.store.get_mut(s) {
                        e.trace.decode = Some(i);
                        e.trace.engine_ids.push((src, id.clone()));
                        e.track.decode_at = Some(at);
                    }
                    s
                }
            };
            if begun {
                let engine = match sig.get("remote_engine") {
                    Some(Val::Text(e)) => format!(" from remote engine {e}"),
                    _ => String::new(),
                };
                self.with_phase(s, Hop::Connector, src, None, t, |p| {
                    let note = format!("load begun (start_load_kv{engine})");
                    if p.detail.is_empty() {
                        p.detail = note;
                    } else if !p.detail.contains("start_load_kv") {
                        p.detail.push_str(&format!(" · {note}"));
                    }
                });
            }
            let Some(e) = self.store.get_mut(s) else { continue };
            let w = e.trace.remote_wait.get_or_insert(RemoteWait {
                since: t,
                last_seen: t,
                load_begun: false,
                ended: None,
                stuck_at: None,
                last_read: at,
                watched: false,
            });
            // The same id waiting again long after its wait ended is a new
            // request (a reused X-Request-Id), not the old wait resumed.
            if w.ended.is_some() && t - w.last_seen > self.opts.stuck_after_s {
                w.since = t;
                w.stuck_at = None;
            }
            w.last_seen = w.last_seen.max(t);
            w.last_read = at;
            w.load_begun |= begun;
            // Still waiting after it seemed to go on (a preempted request
            // waits again): the wait is open again, from the same start.
            w.ended = None;
            if !w.watched {
                w.watched = true;
                push_capped(&mut self.waits, s, self.opts.capacity);
            }
        }
        true
    }

    /// Flags the waits seen lasting past the threshold. vLLM prints
    /// nothing when the KV arrives (the scheduler just stops printing
    /// `still in WAITING_FOR_REMOTE_KVS`, which it does on every step
    /// while waiting), so only a wait still seen `stuck_after_s` after its
    /// first sign is stuck; one whose lines stopped for that long went on
    /// and is no longer watched. At the end of the logs (`force`), a wait
    /// still being printed is said in the evidence, not guessed stuck.
    pub(crate) fn judge_waits(&mut self, now: f64, force: bool) {
        let limit = self.opts.stuck_after_s;
        let waits = std::mem::take(&mut self.waits);
        for s in waits {
            let last_stamp = self
                .store
                .get(s)
                .and_then(|e| e.trace.decode)
                .and_then(|i| self.logs.last_stamp.get(&LogOrigin::Decode(i)).copied());
            let Some(e) = self.store.get_mut(s) else { continue };
            let Some(w) = e.trace.remote_wait.as_mut() else { continue };
            let seen = w.last_seen - w.since;
            if w.ended.is_some() || w.stuck_at.is_some() || (seen < limit && now - w.last_read > limit) {
                w.watched = false;
                continue;
            }
            if seen < limit {
                // Its last line is the log's last news: it was still waiting.
                let at_end = last_stamp.is_none_or(|l| l - w.last_seen <= 5.0);
                if force && at_end {
                    e.facts.push_once(
                        w.last_seen,
                        LogOrigin::Decode(e.trace.decode.unwrap_or(0)),
                        FactKind::WaitingAtEnd { secs: seen, limit },
                    );
                    self.settle_by(s, now, force);
                    continue;
                }
                if force {
                    w.watched = false;
                } else {
                    self.waits.push_back(s);
                }
                continue;
            }
            w.stuck_at = Some(w.last_seen);
            w.watched = false;
            let kind = FactKind::Stuck {
                id: e.trace.id.clone(),
                secs: seen,
                begun: w.load_begun,
                since: w.since,
                last: w.last_seen,
                limit,
            };
            let t = w.last_seen;
            let src = LogOrigin::Decode(e.trace.decode.unwrap_or(0));
            let text = super::super::reason::Reason::Stuck {
                id: e.trace.id.clone(),
                secs: seen,
                begun: w.load_begun,
                since: w.since,
                last: w.last_seen,
                limit,
            }
            .to_string();
            self.push_log_event(src, K::RequestStuck, text, t);
            self.said(s, t, src, kind, now);
        }
    }
}
