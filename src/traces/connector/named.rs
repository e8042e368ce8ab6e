//! Connector and scheduler lines that name a request (`Signal::ids`) as
//! evidence on that request: found by any id shape, or opened on the log
//! that printed it, so a pasted excerpt with no `Received` line still
//! lists the request. What each line proves (as vLLM's sources print them):
//!
//! | line (source) | printed by | verdict |
//! |---|---|---|
//! | `NIXL transfer failed for request X with state S` / `NIXL transfer failure: <type> \| Context: {'request_id': X}` (nixl worker) | decode | error at the connector |
//! | `Handshake failed for request X, marking blocks as invalid` (nixl worker) | decode | error at the connector |
//! | `pulling kv_caches for ['X'] failed: <why>`, `MooncakeAgentMetadata transfer failed for ['X']`, `Error happens during tranfering kvcache for ['X']` (mooncake connector) | decode | error at the connector |
//! | `Mooncake transfer failed for request X`, `Failed to transfer KV cache for request X` (vllm-ascend) | either | error at the connector |
//! | `NIXL transfer failure: notification_failed \| Context: {'request_id': X}` (nixl worker ≥0.14) | decode | not a failure of X: a full prefix-cache hit read nothing; the prefill frees its blocks at the timeout, so its unread expiry is evidence only |
//! | `Failing N request(s) due to KV load failure ... Request IDs: {'X'}` (scheduler) | decode | error at the connector (the request failed) |
//! | `Potentially invalid KV blocks for unrecognized request X were retrieved by a decode worker` (nixl worker) | prefill | read after the lease ran out: the expiry's "unread" is withdrawn; the decode used blocks that may have been reused (said on its verdict) |
//! | `Releasing expired KV blocks for request X which were retrieved by 0 decode worker(s)` (nixl worker, `lifecycle.rs`), `Request X timed out after N seconds without being sent` (mooncake) | prefill | the KV was never read: a miss where decode ran it, else unknown |
//! | `Timeout waiting for P side ready: ['X']`, `Request X expired before sending on P side.` (mooncake ≥0.2x) | prefill, the decode's id | error at the connector |
//! | `KeyError: 'X'` ending a traceback (scheduler), `AssertionError: X not found in recving_metadata list` (nixl worker) | either | error at that instance |
//! | `NIXLConnector request_finished(X), request_status=S` | prefill | prefilled; the decode side judges the rest |
//! | `[PUT]Recv From <prefill>, tensor_id:Xkv` (P2pNccl) | decode | loaded (likely) |
//! | `Request X` + `The number of retrieved tokens is less than the expected number of tokens!` (LMCache adapter ≥0.3) | either | error at the connector (the load came back short) |
//! | `Finished recving\|sending KV transfer for request X` (V1 scheduler, DEBUG) | either | none: the connector is done with it (a failed load finishes too) |
//! | `Start to transmit X` (Mooncake), `Send request: X to proxy metaserver: URL` (vllm-ascend layerwise) | either | none: the transfer began |
//!
//! A failed load on a decode whose config says `kv_load_failure_policy='recompute'`
//! was recomputed (the scheduler reschedules every request with invalid
//! blocks): a silent miss, sure. Where the policy is not known (the log's
//! start was not read), a failed load may still have been recomputed:
//! the scheduler's `Recovered from KV load failure: N request(s) rescheduled`
//! names no request, so it is said on the failed ones when their count is N.

use crate::feed::LogOrigin;
use crate::logs::signal::{Signal, SignalKind as K, Val};
use crate::traces::correlator::Correlator;
use crate::traces::evidence::{FactKind, Failure};
use crate::traces::ids::{external_of_internal, trace_key};
use crate::traces::instance::events::hop_of;
use crate::traces::model::{Confidence, Hop, Outcome};

/// The scheduler reports a failed load's recovery within a step or two.
const RECOVERY_WINDOW_S: f64 = 30.0;

impl Correlator {
    /// The trace an id a line printed names; opened on `src` when none holds
    /// it, on the side the line speaks for (`Side`). `None` for an id the
    /// paster elided (`8f07dfc0-...-a2f0e657`).
    pub(crate) fn trace_named(
        &mut self,
        src: LogOrigin,
        id: &str,
        side: Side,
        t: f64,
        at: f64,
    ) -> Option<u64> {
        if id.is_empty() || id.contains("...") {
            return None;
        }
        if let Some(s) = self.find(id) {
            return Some(s);
        }
        let s = self.new_trace(trace_key(external_of_internal(id)), at);
        self.store.index_engine(id, s);
        if let Some(e) = self.store.get_mut(s) {
            if side != Side::Peer {
                e.trace.engine_ids.push((src, id.to_string()));
            }
            match (src, side) {
                (LogOrigin::Prefill(i), Side::Producer | Side::Consumer) => {
                    e.trace.prefill = Some(i);
                    e.track.prefill_at = Some(at);
                }
                (LogOrigin::Decode(i), Side::Consumer) => {
                    e.trace.decode = Some(i);
                    e.track.decode_event_t = Some(t);
                }
                _ => {}
            }
        }
        Some(s)
    }

    /// `trace_named` for an id the printing instance ran the request under.
    pub(crate) fn trace_named_own(&mut self, src: LogOrigin, id: &str, t: f64, at: f64) -> Option<u64> {
        self.trace_named(src, id, Side::Consumer, t, at)
    }

    /// A failure line naming requests: each one's connector hop (or, for a
    /// `KeyError`, the instance) erred. `false` when the line names none.
    pub(crate) fn on_named_failure(&mut self, src: LogOrigin, sig: &Signal, t: f64, at: f64) -> bool {
        let hop = match sig.kind {
            K::RequestKeyError => hop_of(src),
            K::TransferFailed | K::HandshakeFailed | K::KvLoadFailed | K::InvalidKvRead => Hop::Connector,
            _ => return false,
        };
        let text = describe(sig);
        if matches!(sig.get("failure_type"), Some(Val::Text(f)) if f == "notification_failed") {
            return self.on_notify_failed(src, sig, &text, t, at);
        }
        let mut any = false;
        for id in &sig.ids {
            let Some(s) = self.trace_named(src, id, side_of(sig), t, at) else {
                continue;
            };
            any = true;
            if sig.kind == K::RequestKeyError && self.served_already(s, src) {
                // The engine lost a request it had already served (vLLM's
                // `_update_from_kv_xfer_finished` after `finished_sending`):
                // its own death cuts what was still in flight; this one is done.
                let note = format!("afterwards its engine failed on it: {text}");
                self.with_phase(s, hop_of(src), src, None, t, |p| {
                    if !p.detail.contains(&note) {
                        p.detail = if p.detail.is_empty() {
                            note.clone()
                        } else {
                            format!("{} · {note}", p.detail)
                        };
                    }
                });
                continue;
            }
            // NIXL says "Potentially invalid": a decode read the blocks
            // after the lease ran out (`nixl` `lifecycle.rs`). It read
            // them, so the expiry's "unread" was wrong; the decode used
            // them (it logs no failure), possibly reused ones.
            if sig.kind == K::InvalidKvRead {
                if let Some(e) = self.store.get_mut(s) {
                    e.facts.forget(|k| *k == FactKind::KvExpiredUnread);
                    // Nor was it the miss its expiry was counted as.
                    if std::mem::take(&mut e.track.unattributed_miss) {
                        self.unattributed_misses = self.unattributed_misses.saturating_sub(1);
                    }
                }
                if !self.store.get(s).is_some_and(|e| e.facts.has(|k| *k == FactKind::StaleRead)) {
                    self.said(s, t, src, FactKind::StaleRead, at);
                }
                continue;
            }
            let x = Failure {
                hop,
                what: text.clone(),
                confidence: Confidence::Sure,
                generate_failed: false,
                by_proxy: false,
            };
            // One failure is printed by each TP worker, then the scheduler: once.
            if !self.store.get(s).is_some_and(|e| e.facts.has(|k| *k == FactKind::Failed(x.clone()))) {
                self.fail_with(s, src, x, t, at);
            }
            if matches!(sig.kind, K::TransferFailed | K::HandshakeFailed)
                && let Some(e) = self.store.get_mut(s)
            {
                e.track.load_failed = Some((src, t));
            }
            if let (LogOrigin::Decode(i), K::TransferFailed | K::HandshakeFailed | K::KvLoadFailed) =
                (src, sig.kind)
                && let Some(d) = self.decodes.get_mut(&i)
            {
                d.transfers.failed(s);
            }
            let recompute =
                self.stats.get(&src).and_then(|st| st.failure_policy.as_deref()) == Some("recompute");
            if matches!(sig.kind, K::TransferFailed | K::HandshakeFailed)
                && matches!(src, LogOrigin::Decode(_))
                && recompute
                && !self.store.get(s).is_some_and(|e| e.facts.has(|k| *k == FactKind::PolicyRecompute))
            {
                self.said(s, t, src, FactKind::PolicyRecompute, at);
            }
        }
        any
    }

    /// Whether `src` had already done its part of the request: a prefill
    /// whose KV was read (the decode loaded it) or whose connector let go
    /// of it, a decode that answered.
    fn served_already(&self, s: u64, src: LogOrigin) -> bool {
        self.store.get(s).is_some_and(|e| match src {
            LogOrigin::Prefill(_) => e.trace.outcome == Outcome::Loaded || e.track.prefill_sent,
            _ => false,
        })
    }

    /// NIXL ≥0.14 `notification_failed`: the decode held every block already
    /// (a full prefix-cache hit, no read) and could not tell the prefill,
    /// which frees them at its timeout. The request itself is not failed.
    fn on_notify_failed(&mut self, src: LogOrigin, sig: &Signal, text: &str, t: f64, at: f64) -> bool {
        for id in &sig.ids {
            let Some(s) = self.trace_named(src, id, Side::Consumer, t, at) else {
                continue;
            };
            let kind = FactKind::NotifyFailed { text: text.to_string() };
            if !self.store.get(s).is_some_and(|e| e.facts.has(|k| *k == kind)) {
                self.said(s, t, src, kind, at);
            }
        }
        !sig.ids.is_empty()
    }

    /// `NIXLConnector request_finished(X), request_status=...` on a prefill:
    /// the producer ran X and its connector holds the KV (when
    /// `do_remote_decode`). The decode side judges the rest.
    pub(crate) fn on_prefill_finished(&mut self, src: LogOrigin, sig: &Signal, t: f64, at: f64) -> bool {
        for id in &sig.ids {
            if let Some(s) = self.trace_named(src, id, Side::Producer, t, at) {
                let status = match sig.get("status") {
                    Some(Val::Text(st)) => format!(" ({st})"),
                    _ => String::new(),
                };
                self.with_phase(s, Hop::Producer, src, None, t, |p| {
                    p.end.get_or_insert(t);
                    if p.detail.is_empty() {
                        p.detail = format!("connector request_finished{status}");
                    }
                });
            }
        }
        !sig.ids.is_empty()
    }

    /// A connector starting a request's transfer (`Start to transmit X`,
    /// vllm-ascend's `Send request: X to proxy metaserver`): the transfer was
    /// begun on this instance, nothing more; the later lines judge it.
    pub(crate) fn on_transfer_started(&mut self, src: LogOrigin, sig: &Signal, t: f64, at: f64) -> bool {
        let via = match sig.get("connector") {
            Some(Val::Text(c)) => format!(" ({c})"),
            _ => String::new(),
        };
        for id in &sig.ids {
            if let Some(s) = self.trace_named(src, id, Side::Consumer, t, at) {
                self.with_phase(s, Hop::Connector, src, None, t, |p| {
                    if p.detail.is_empty() {
                        p.detail = format!("transfer started{via}");
                    }
                });
            }
        }
        !sig.ids.is_empty()
    }

    /// The scheduler's `Finished recving|sending KV transfer for request X`:
    /// the connector is done with X on this instance. A failed load is also
    /// reported as finished, so this ends the wait and proves no outcome.
    pub(crate) fn on_transfer_finished(&mut self, src: LogOrigin, sig: &Signal, t: f64, at: f64) -> bool {
        let sending = sig.get("dir") == Some(&Val::Text("sending".into()));
        let (side, hop, what) = if sending {
            (Side::Producer, Hop::Producer, "the connector let go of its KV (finished_sending)")
        } else {
            (Side::Consumer, Hop::Connector, "the load ended (finished_recving)")
        };
        for id in &sig.ids {
            let Some(s) = self.trace_named(src, id, side, t, at) else { continue };
            if !sending {
                self.end_wait(s, t);
            } else if let Some(e) = self.store.get_mut(s) {
                e.track.prefill_sent = true;
            }
            self.with_phase(s, hop, src, None, t, |p| {
                p.end.get_or_insert(t);
                if !p.detail.contains(what) {
                    p.detail = if p.detail.is_empty() {
                        what.to_string()
                    } else {
                        format!("{} · {what}", p.detail)
                    };
                }
            });
        }
        !sig.ids.is_empty()
    }

    /// P2pNccl on decode: `🔵[PUT]Recv From <prefill>, tensor_id:<id>` — per
    /// layer, the KV tensor of that request arrived. (The red WARNING, the
    /// wait for it returning nothing, is a `transfer_failed`.)
    pub(crate) fn on_tensor_received(&mut self, src: LogOrigin, sig: &Signal, t: f64, at: f64) -> bool {
        let LogOrigin::Decode(i) = src else {
            return false;
        };
        let peer = match sig.get("peer") {
            Some(Val::Text(p)) => p.clone(),
            _ => "the prefill".to_string(),
        };
        for id in &sig.ids {
            let Some(s) = self.trace_named(src, id, Side::Consumer, t, at) else {
                continue;
            };
            self.with_phase(s, Hop::Connector, src, None, t, |p| {
                p.detail = format!("P2pNccl received its KV from {peer}");
                p.end.get_or_insert(t);
            });
            let kind = FactKind::TensorReceived { decode: i, peer: peer.clone(), tensor: id.clone() };
            if !self
                .store
                .get(s)
                .is_some_and(|e| e.facts.has(|k| matches!(k, FactKind::TensorReceived { .. })))
            {
                self.said(s, t, src, kind, at);
            }
        }
        !sig.ids.is_empty()
    }

    /// `Recovered from KV load failure: N request(s) rescheduled`
    /// (`kv_load_failure_policy=recompute`): the scheduler computes those
    /// requests itself and they answer as usual, so the KV that was to move
    /// was not used: a miss, not an error, with the failure as its evidence.
    /// The line names no request: only when the loads that failed on this
    /// log just before are N is it known which they were; otherwise each
    /// failed one is at most likely an error.
    pub(crate) fn on_load_recovered(&mut self, src: LogOrigin, sig: &Signal, t: f64) {
        let Some(n) = sig.get_num("requests") else {
            return;
        };
        let failed: Vec<u64> = self
            .store
            .serials()
            .filter(|s| {
                self.store.get(*s).is_some_and(|e| {
                    e.track
                        .load_failed
                        .is_some_and(|(o, ft)| o == src && t >= ft && t - ft <= RECOVERY_WINDOW_S)
                })
            })
            .collect();
        if failed.is_empty() {
            return;
        }
        let matched = failed.len() as f64 == n;
        for s in failed {
            if matched && let Some(e) = self.store.get_mut(s) {
                e.track.load_failed = None;
            }
            self.said(s, t, src, FactKind::LoadRecovered { n, matched }, t);
        }
    }
}

/// Whose id a line prints, so a trace it opens sits on the right instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// The instance held the request's KV for a decode to read (a decode
    /// log's index then says nothing of which prefill it was).
    Producer,
    /// The instance ran the request under this id.
    Consumer,
    /// Another instance's id (Mooncake's prefill printing the decode's).
    Peer,
}

/// The prefill prints the invalid read; Mooncake's prefill names the
/// decode's ids (`decode_ids`); the rest are the printing instance's own.
fn side_of(sig: &Signal) -> Side {
    match sig.kind {
        K::InvalidKvRead => Side::Producer,
        _ if sig.get("decode_ids") == Some(&Val::Bool(true)) => Side::Peer,
        _ => Side::Consumer,
    }
}

/// `transfer_failed on decode#0 (connector=MooncakeConnector, reason=Timeout waiting for P side ready)`.
fn describe(sig: &Signal) -> String {
    let fields: Vec<String> = sig
        .fields
        .iter()
        .filter(|(k, _)| !["tp_rank", "decode_ids", "exception"].contains(k))
        .take(4)
        .map(|(k, v)| match v {
            Val::Num(n) => format!("{k}={n}"),
            Val::Bool(b) => format!("{k}={b}"),
            Val::Text(t) => format!("{k}={t}"),
        })
        .collect();
    let what = match sig.kind {
        K::InvalidKvRead => {
            "a decode worker read KV blocks the prefill no longer held (lease expired?)".to_string()
        }
        K::RequestKeyError => {
            let exc = match sig.get("exception") {
                Some(Val::Text(e)) => e.as_str(),
                _ => "KeyError",
            };
            format!("`{exc}` on its id ending a traceback: the engine no longer held it")
        }
        k if side_of(sig) == Side::Peer => format!("{} (the prefill names the decode's request)", k.as_str()),
        k => k.as_str().to_string(),
    };
    if fields.is_empty() { what } else { format!("{what} ({})", fields.join(", ")) }
}

#[cfg(test)]
mod tests {
    use crate::feed::LogOrigin;
    use crate::traces::{Confidence, Correlator, CorrelatorOptions, Hop, Outcome};

    /// vllm#26171, pasted: the decode's handshake failed for this request.
    const HANDSHAKE: &str = "(EngineCore_DP0 pid=3317003) ERROR 10-07 17:11:06 [distributed/.../v1/nixl_connector.py:832] Handshake failed for request cmpl-6e8a849f-7ec0-4abe-b4c7-38bce04d53d1-0, marking blocks as invalid";
    const ID: &str = "cmpl-6e8a849f-7ec0-4abe-b4c7-38bce04d53d1";

    /// vLLM `v1/core/sched/scheduler.py` (PR #19330 on): `Recovered from KV
    /// load failure: %d request(s) rescheduled (%d tokens affected).`, rendered.
    fn recovered(n: u32) -> String {
        format!(
            "(EngineCore_DP0 pid=3317003) WARNING 10-07 17:11:07 [v1/core/sched/scheduler.py:1510] Recovered from KV load failure: {n} request(s) rescheduled (128 tokens affected)."
        )
    }

    fn read(lines: &[&str]) -> Correlator {
        let mut c = Correlator::new(CorrelatorOptions::default());
        for (k, l) in lines.iter().enumerate() {
            c.on_line(LogOrigin::Decode(0), l, 1_790_000_000.0 + k as f64);
        }
        c.finish(1_790_000_100.0);
        c
    }

    #[test]
    fn a_failed_load_the_scheduler_recomputed_says_so() {
        let r = recovered(1);
        let c = read(&[HANDSHAKE, &r]);
        let t = c.get(ID).expect("the failed request is a trace");
        // Recomputed: it answered, the KV was not used: a miss, said why.
        assert_eq!((t.outcome, t.decode), (Outcome::SilentMiss, Some(0)), "{t:?}");
        assert_eq!(t.confidence, Confidence::Likely);
        assert!(
            t.evidence().contains("Handshake failed") || t.evidence().contains("handshake_failed"),
            "{t:?}"
        );
        assert!(t.evidence().contains("decode#0 then recomputed it"), "{t:?}");
        // Two rescheduled, one failure read: which were recomputed is not known.
        let r = recovered(2);
        let c = read(&[HANDSHAKE, &r]);
        let t = c.get(ID).unwrap();
        assert_eq!(
            (t.outcome, t.error_at, t.confidence),
            (Outcome::Error, Some(Hop::Connector), Confidence::Likely)
        );
        assert!(t.evidence().contains("may be among them"), "{t:?}");
        // The same failure printed again (another TP worker) stays one trace,
        // one cause.
        let c = read(&[HANDSHAKE, HANDSHAKE]);
        assert_eq!(c.counts().seen, 1);
        assert!(!c.get(ID).unwrap().evidence().contains("then"), "{:?}", c.get(ID));
    }

    /// A prefill's scheduler losing a request it had already sent (vllm
    /// PR #25067, pasted: its `KeyError` line; the `Finished sending` line
    /// before it rendered with a header from `scheduler.py`'s
    /// `logger.debug("Finished sending KV transfer for request %s", req_id)`,
    /// as the paste quoted it without one): the engine failed after the
    /// request was served; the request did not fail.
    #[test]
    fn an_engine_losing_a_request_it_had_sent_does_not_fail_the_request() {
        let sent = "(EngineCore_DP0 pid=7) DEBUG 09-15 10:00:00 [scheduler.py:1183] Finished sending KV transfer for request cmpl-37c560d3-5680-4bd1-97f9-7ed31a56de60-0";
        let lost = "KeyError: 'cmpl-37c560d3-5680-4bd1-97f9-7ed31a56de60-0'";
        let mut c = Correlator::new(CorrelatorOptions::default());
        c.on_line(LogOrigin::Prefill(0), sent, 1_790_000_000.0);
        c.on_line(LogOrigin::Prefill(0), lost, 1_790_000_001.0);
        c.finish(1_790_000_100.0);
        let t = c.traces().next().expect("the request is listed");
        assert_ne!(t.outcome, Outcome::Error, "{t:?}");
        let p = t.phase(Hop::Producer).expect("its prefill hop");
        assert!(p.detail.contains("afterwards its engine failed on it"), "{t:?}");
        assert!(p.error.is_none(), "{t:?}");
        // The same KeyError with nothing served before it is the request's error.
        let mut c = Correlator::new(CorrelatorOptions::default());
        c.on_line(LogOrigin::Prefill(0), lost, 1_790_000_001.0);
        c.finish(1_790_000_100.0);
        assert_eq!(c.traces().next().map(|t| t.outcome), Some(Outcome::Error));
        // An engine id in a KeyError is no request.
        let mut c = Correlator::new(CorrelatorOptions::default());
        c.on_line(LogOrigin::Decode(0), "KeyError: '7a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d'", 1_790_000_001.0);
        assert_eq!(c.counts().seen, 0);
    }

    /// P2pNccl V1 (`p2p_nccl_engine.py`, the blue INFO `🔵[PUT]Recv From %s,
    /// tensor_id:%s, shape:%s, duration:%.3fms, size:%.3fGB, rank:%d` and the
    /// red WARNING `🔴[PUT]Recv From %s, tensor_id:%s, duration:%.3fms,
    /// rank:%d` when the tensor is None), rendered: one line per layer, the
    /// tensor id `<request id>#<layer>`; one request each.
    #[test]
    fn p2p_layers_fold_into_their_request_and_the_red_line_is_a_failure() {
        let blue = |layer: u32| {
            format!(
                "(EngineCore_DP0 pid=7) INFO 06-01 10:00:00 [p2p_nccl_engine.py:256] \u{1f535}[PUT]Recv From 10.0.0.1:21001, tensor_id:cmpl-1f2e3d4c5b6a7988-0-0a1b2c3d#model.layers.{layer}.self_attn.attn, shape:torch.Size([2, 16, 8, 128]), duration:0.120ms, size:0.001GB, rank:0"
            )
        };
        let (b0, b1) = (blue(0), blue(1));
        let c = read(&[&b0, &b1]);
        assert_eq!(c.counts().seen, 1, "{:?}", c.traces().collect::<Vec<_>>());
        let t = c.get("cmpl-1f2e3d4c5b6a7988").expect("the request");
        assert_eq!((t.outcome, t.confidence), (Outcome::Loaded, Confidence::Likely), "{t:?}");
        let red = "(EngineCore_DP0 pid=7) WARNING 06-01 10:00:01 [p2p_nccl_engine.py:262] \u{1f534}[PUT]Recv From 10.0.0.1:21001, tensor_id:cmpl-2a2b2c2d2e2f2a2b-0-0a1b2c3d#model.layers.0.self_attn.attn, duration:1000.120ms, rank:0";
        let c = read(&[red]);
        let t = c.get("cmpl-2a2b2c2d2e2f2a2b").expect("the request");
        assert_eq!((t.outcome, t.error_at), (Outcome::Error, Some(Hop::Connector)), "{t:?}");
        assert!(t.evidence().contains("no KV tensor arrived"), "{t:?}");
    }

    /// vLLM `nixl/worker.py` (0016029b, `_read_blocks`), rendered: a full
    /// prefix-cache hit could not notify the prefill. Not a failed load.
    #[test]
    fn a_failed_notification_is_no_failed_load() {
        let l = "(Worker_TP0 pid=4121) ERROR 09-20 11:02:03 [worker.py:620] NIXL transfer failure: notification_failed. P worker blocks will be freed after timeout. This may indicate network issues. | Context: {'failure_type': 'notification_failed', 'request_id': 'chatcmpl-5e2a9c1b7d3f4a6e-3c4d5e6f', 'engine_id': '7a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d', 'dst_engine_id': '1f2e3d4c-5b6a-4798-8a7b-6c5d4e3f2a1b', 'remote_rank': 0, 'remote_agent_name': 'b8c1e2d3-0a9f-4e8d-9c7b-6a5f4e3d2c1b'}";
        let mut c = read(&[l]);
        let t = c.get("chatcmpl-5e2a9c1b7d3f4a6e").expect("the request is listed");
        assert_eq!(t.outcome, Outcome::Unknown, "{t:?}");
        assert!(t.evidence().contains("own prefix cache"), "{t:?}");
        // Neither engine nor agent UUID became a request.
        assert_eq!(c.counts().seen, 1);
        assert_eq!(c.drain_log_events().len(), 1, "still an event");
    }

    /// vLLM `v1/core/sched/scheduler.py` (`_update_from_kv_xfer_finished`,
    /// `logger.debug("Finished recving KV transfer for request %s", req_id)`),
    /// rendered after a pasted wait line of vllm-ascend#5660: the request is
    /// listed, its wait ends, and no verdict is drawn from it (a failed load
    /// is reported finished too).
    #[test]
    fn a_finished_transfer_ends_the_wait_and_proves_nothing_more() {
        let wait = "(EngineCore_DP0 pid=9246) DEBUG 01-06 12:06:06 [v1/core/sched/scheduler.py:348] chatcmpl-7817d6df-206c-4aca-bfac-c43df205506f is still in WAITING_FOR_REMOTE_KVS state.";
        let done = "(EngineCore_DP0 pid=9246) DEBUG 01-06 12:06:07 [v1/core/sched/scheduler.py:1293] Finished recving KV transfer for request chatcmpl-7817d6df-206c-4aca-bfac-c43df205506f";
        let c = read(&[done]);
        let t = c.get("chatcmpl-7817d6df-206c-4aca-bfac-c43df205506f").expect("listed");
        assert_eq!(t.outcome, Outcome::Unknown, "{t:?}");
        let c = read(&[wait, done]);
        let t = c.get("chatcmpl-7817d6df-206c-4aca-bfac-c43df205506f").unwrap();
        assert!(t.phase(Hop::Connector).is_some_and(|p| p.detail.contains("finished_recving")), "{t:?}");
        assert!(t.remote_wait.as_ref().is_some_and(|w| w.ended.is_some()), "the wait ended: {t:?}");
    }
}
