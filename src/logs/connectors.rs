//! Lines the KV connectors and the scheduler print around them, as vLLM
//! 0.8 to 0.33, vllm-ascend and Mooncake write them (see
//! `tests/fixtures/log-excerpts/` for where each shape was seen). Each
//! matcher starts with a cheap `starts_with`, as most lines match none.

use super::mooncake::{transmit, transmit_done};
use super::p2p_nccl::p2p;
use super::scan::{dict_bool, dict_num, dict_raw, lead_num, list_len, num_after, py_strs, word_after};
use super::signal::{Signal, SignalKind as K};

/// A connector or scheduler line, or `None`.
pub(crate) fn parse_connector(msg: &str) -> Option<Signal> {
    let m = msg.trim_end();
    let first = *m.as_bytes().first()?;
    match first {
        b'N' => nixl(m).or_else(|| mooncake_progress(m)),
        b's' => start_load_kv(m).or_else(|| storage_to_mem(m)),
        b'F' => failing(m)
            .or_else(|| mooncake_failed(m))
            .or_else(|| transmit_done(m))
            .or_else(|| super::mooncake::store_get_failed(m))
            .or_else(|| super::mooncake::force_freed(m)),
        b'R' => recovered(m).or_else(|| mooncake_expired(m)).or_else(|| offload(m)),
        b'H' => handshake(m),
        b'P' => invalid_read(m).or_else(|| parent_exit(m)),
        b'G' => got_params(m).or_else(|| mooncake_key(m)),
        b'C' => created(m),
        b'I' => init_nixl(m),
        b'S' => sync_timeout(m).or_else(|| transmit(m)),
        b'T' => mooncake_key(m).or_else(|| mooncake_p_timeout(m)),
        b'M' => mooncake_transfer(m).or_else(|| super::mooncake::finish_unknown(m)),
        b'p' | b'E' => mooncake_pull_failed(m),
        b'L' => ascend_llmdd(m),
        b'[' => redo(m),
        b'r' => rpc(m),
        b'e' => v0_error(m),
        b'A' => super::vllm_stats::parse_v0_stats(m),
        _ => None,
    }
    .or_else(|| waiting_remote(m))
    // P2pNccl's line starts with an emoji or `[`: no scan of every other line.
    .or_else(|| if first >= 0x80 || first == b'[' { p2p(m) } else { None })
}

fn nixl(m: &str) -> Option<Signal> {
    if let Some(r) = m.strip_prefix("NIXL handshake: ") {
        let (step, t) = r.split_once(" took: ")?;
        return Some(
            Signal::new(K::NixlHandshakeTiming).text("step", Some(step)).num("seconds", lead_num(t)),
        );
    }
    if let Some(r) = m.strip_prefix("NIXL transfer failure: ") {
        // ≥0.14: `NIXL transfer failure: <type>[. Marking ...] | Context: {...}`.
        let ftype = r.split(['.', ' ', '|']).next().unwrap_or("");
        let ctx = r.split_once("Context: ").map(|(_, c)| c).unwrap_or("");
        let kind = if ftype.starts_with("handshake") { K::HandshakeFailed } else { K::TransferFailed };
        let mut s = Signal::new(kind)
            .text("connector", Some("NixlConnector"))
            .text("failure_type", Some(ftype))
            .text("remote_engine", dict_raw(ctx, "remote_engine_id"))
            .text("remote_host", dict_raw(ctx, "remote_host"))
            .num("remote_port", dict_num(ctx, "remote_port"))
            .num("num_local_blocks", dict_num(ctx, "num_local_blocks"))
            .num("num_remote_blocks", dict_num(ctx, "num_remote_blocks"))
            .text("remote_request_id", dict_raw(ctx, "remote_request_id"))
            .flag("blocks_invalid", Some(r.contains("Marking blocks as invalid")));
        if let Some(id) = dict_raw(ctx, "request_id").filter(|i| *i != "None") {
            s = s.id(id);
        }
        return Some(s);
    }
    if let Some(r) = m.strip_prefix("NIXL transfer ") {
        // `NIXL transfer failed for request X with state ERR.`, `NIXL transfer
        // setup/initiation failed for request X.`
        let (what, rest) = r.split_once(" for request ")?;
        let id = rest.split(' ').next()?;
        let mut s = Signal::new(K::TransferFailed)
            .id(id)
            .text("connector", Some("NixlConnector"))
            .flag("blocks_invalid", Some(r.contains("Marking blocks as invalid")));
        if what != "failed" {
            s = s.text("reason", Some(what));
        }
        return Some(s.text("state", word_after(rest, "with state ").map(|w| w.trim_end_matches('.'))));
    }
    if let Some(r) = m.strip_prefix("NIXLConnector ") {
        return connector_call(r, "NixlConnector");
    }
    None
}

/// `<Name>Connector get_num_new_matched_tokens: ...`, `update_state_after_alloc: ...`,
/// `request_finished(ID), request_status=...`.
fn connector_call(r: &str, connector: &'static str) -> Option<Signal> {
    let nixl = connector == "NixlConnector";
    let params = r.split_once("kv_transfer_params").map(|(_, p)| p).unwrap_or("");
    if let Some(a) = r.strip_prefix("get_num_new_matched_tokens: ") {
        let kind = if nixl { K::NixlMatchedTokens } else { K::ConnectorMatchedTokens };
        return Some(
            Signal::new(kind)
                .text("connector", Some(connector))
                .num("num_computed_tokens", num_after(a, "num_computed_tokens="))
                .flag("do_remote_decode", dict_bool(params, "do_remote_decode"))
                .flag("do_remote_prefill", dict_bool(params, "do_remote_prefill"))
                .num("remote_block_ids", dict_raw(params, "remote_block_ids").and_then(list_len))
                .text("remote_host", dict_raw(params, "remote_host"))
                .num("remote_port", dict_num(params, "remote_port")),
        );
    }
    if r.starts_with("update_state_after_alloc") || r.starts_with("update states") {
        let kind = if nixl { K::NixlUpdateStateAfterAlloc } else { K::ConnectorUpdateStateAfterAlloc };
        // vllm-ascend spells it `num_externel_tokens: N`.
        let n = num_after(r, "num_external_tokens=").or_else(|| num_after(r, "num_externel_tokens: "));
        return Some(
            Signal::new(kind)
                .text("connector", Some(connector))
                .num("num_external_tokens", n)
                .flag("do_remote_decode", dict_bool(params, "do_remote_decode")),
        );
    }
    if let Some(a) = r.strip_prefix("request_finished(") {
        let id = a.split(')').next()?;
        return Some(
            Signal::new(K::ConnectorRequestFinished)
                .id(id)
                .text("connector", Some(connector))
                .text("status", word_after(a, "request_status="))
                .flag("do_remote_decode", dict_bool(params, "do_remote_decode")),
        );
    }
    None
}

fn ascend_llmdd(m: &str) -> Option<Signal> {
    connector_call(m.strip_prefix("LLMDataDistCMgrConnector ")?, "LLMDataDistCMgrConnector")
}

/// `start_load_kv for request X from remote engine E. Num local_block_ids: 4. Num remote_block_ids: 4.`
fn start_load_kv(m: &str) -> Option<Signal> {
    let r = m.strip_prefix("start_load_kv for request ")?;
    let id = r.split(' ').next()?;
    let engine = word_after(r, "from remote engine ").map(|e| e.trim_end_matches('.'));
    Some(
        Signal::new(K::NixlStartLoadKv)
            .id(id)
            .text("remote_engine", engine)
            .num("local_blocks", num_after(r, "Num local_block_ids: "))
            .num("remote_blocks", num_after(r, "Num remote_block_ids: ")),
    )
}

fn handshake(m: &str) -> Option<Signal> {
    // Decode worker, a request's handshake future failed (NIXL ≥0.11).
    if let Some(r) = m.strip_prefix("Handshake failed for request ") {
        let id = r.split([',', ' ']).next()?;
        return Some(
            Signal::new(K::HandshakeFailed)
                .id(id)
                .text("connector", Some("NixlConnector"))
                .flag("blocks_invalid", Some(r.contains("marking blocks as invalid"))),
        );
    }
    let r = m.strip_prefix("Handshake with ")?;
    let engine = r.strip_suffix(" failed")?;
    Some(
        Signal::new(K::HandshakeFailed)
            .text("connector", Some("NixlConnector"))
            .text("remote_engine", Some(engine)),
    )
}

fn invalid_read(m: &str) -> Option<Signal> {
    let r = m.strip_prefix("Potentially invalid KV blocks for ")?;
    let id = r.split_once("request").map(|(_, i)| i.trim_start()).and_then(|i| i.split(' ').next());
    let mut s = Signal::new(K::InvalidKvRead);
    if let Some(id) = id {
        s = s.id(id);
    }
    Some(s)
}

fn parent_exit(m: &str) -> Option<Signal> {
    m.starts_with("Parent process exited, terminating worker").then(|| Signal::new(K::WorkerExit))
}

/// `Failing N request(s) due to KV load failure (failure_policy=P, T tokens affected). Request IDs: {'a'}`
fn failing(m: &str) -> Option<Signal> {
    let r = m.strip_prefix("Failing ")?;
    if !r.contains("due to KV load failure") {
        return None;
    }
    let mut s = Signal::new(K::KvLoadFailed)
        .num("requests", lead_num(r))
        .text("policy", word_after(r, "failure_policy="))
        .num("tokens_affected", r.find("policy=").and_then(|i| num_after(&r[i..], ", ")));
    if let Some((_, ids)) = r.split_once("Request IDs: ") {
        for id in ids.split(',') {
            s = s.id(id);
        }
    }
    Some(s)
}

/// `Recovered from KV load failure: N request(s) rescheduled (T tokens affected).`
fn recovered(m: &str) -> Option<Signal> {
    let r = m.strip_prefix("Recovered from KV load failure: ")?;
    Some(
        Signal::new(K::KvLoadRecovered)
            .text("policy", Some("recompute"))
            .num("requests", lead_num(r))
            .num("tokens_affected", num_after(r, " (")),
    )
}

/// vLLM's MooncakeConnector, producer side: `Request X timed out after N
/// seconds without being sent. Freeing its blocks on the producer side.` —
/// no decode pulled X's KV before the timeout (NIXL's `retrieved by 0`).
fn mooncake_expired(m: &str) -> Option<Signal> {
    let r = m.strip_prefix("Request ")?;
    // Producer side, the decode's id: its KV expired before the decode asked.
    if let Some(id) = r.strip_suffix(" expired before sending on P side.") {
        return Some(
            Signal::new(K::TransferFailed)
                .id(id)
                .text("connector", Some("MooncakeConnector"))
                .text("reason", Some("expired before sending on P side"))
                .flag("decode_ids", Some(true)),
        );
    }
    let (id, rest) = r.split_once(" timed out after ")?;
    rest.contains("without being sent").then(|| {
        Signal::new(K::ExpiredKv)
            .id(id)
            .text("connector", Some("MooncakeConnector"))
            .num("retrieved_by", Some(0.0))
            .num("timeout_s", lead_num(rest))
    })
}

/// The OffloadingConnector's scheduler side (a host-memory tier, not a transfer).
fn offload(m: &str) -> Option<Signal> {
    let r = m.strip_prefix("Request ")?;
    let (id, rest) = r.split_once(' ')?;
    if let Some(h) = rest.strip_prefix("hit ") {
        return Some(
            Signal::new(K::OffloadHit)
                .id(id)
                .num("offloaded_tokens", lead_num(h))
                .num("gpu_hit_tokens", num_after(h, "after ")),
        );
    }
    if let Some(o) = rest.strip_prefix("offloading ") {
        return Some(
            Signal::new(K::OffloadStore)
                .id(id)
                .num("blocks", lead_num(o))
                .num("from_block", num_after(o, "#")),
        );
    }
    let c = rest.strip_prefix("cannot store ")?;
    Some(Signal::new(K::OffloadStoreFailed).id(id).num("blocks", lead_num(c)))
}

fn got_params(m: &str) -> Option<Signal> {
    m.starts_with("Got kv_transfer_params, but no KVConnector found")
        .then(|| Signal::new(K::ConnectorMissing))
}

/// `Creating v1 connector with name: X and engine_id: Y`.
fn created(m: &str) -> Option<Signal> {
    let r = m.strip_prefix("Creating v1 connector with name: ")?;
    let (name, rest) = r.split_once(" and engine_id: ").unwrap_or((r, ""));
    Some(
        Signal::new(K::ConnectorCreated)
            .text("connector", Some(name.trim()))
            .text("engine_id", Some(rest.trim())),
    )
}

fn init_nixl(m: &str) -> Option<Signal> {
    let id = m.strip_prefix("Initializing NIXL worker ")?;
    Some(Signal::new(K::NixlEngineId).text("engine_id", Some(id.trim())))
}

fn storage_to_mem(m: &str) -> Option<Signal> {
    let r = m.strip_prefix("storage_to_mem for ")?;
    Some(
        Signal::new(K::LmcacheBackendLoad)
            .num("objects", lead_num(r))
            .num("bytes", num_after(r, "size "))
            .num("seconds", num_after(r, "took ")),
    )
}

/// Mooncake / transfer-engine lines (`ascend_direct_transport.cpp`, `store_py.cpp`).
fn mooncake_failed(m: &str) -> Option<Signal> {
    if let Some(r) = m.strip_prefix("Failed to connect to target: ") {
        let target = r.split(',').next();
        return Some(
            Signal::new(K::MooncakeConnectFailed)
                .text("target", target)
                .num("status", num_after(r, "status: ")),
        );
    }
    if let Some(r) = m.strip_prefix("Failed to connect to segment: ") {
        return Some(Signal::new(K::MooncakeConnectFailed).text("segment", Some(r.trim())));
    }
    if let Some(r) = m.strip_prefix("Failed to mount segment") {
        let s = Signal::new(K::MooncakeMountFailed);
        return Some(match r.strip_prefix(": ") {
            Some(e) => s.text("error", Some(e.trim())),
            None => s.text("reason", r.trim().strip_prefix("due to ")),
        });
    }
    if let Some(r) = m.strip_prefix("Failed to transfer KV cache for request ") {
        let (id, rest) = r.split_once(": ").unwrap_or((r, ""));
        return Some(
            Signal::new(K::TransferFailed)
                .id(id)
                .text("connector", Some("MooncakeConnector"))
                .num("ret", num_after(rest, "ret: ")),
        );
    }
    None
}

fn mooncake_transfer(m: &str) -> Option<Signal> {
    // `MooncakeAgentMetadata ... for ['X']` (older), `MooncakeXferMetadata
    // ... for {'X', 'Y'}` (0.26: a set of the decode's ids).
    let r = m
        .strip_prefix("MooncakeAgentMetadata transfer failed for ")
        .or_else(|| m.strip_prefix("MooncakeXferMetadata transfer failed for "));
    if let Some(r) = r {
        let end = r.find("]: ").or_else(|| r.find("}: "));
        let (ids, err) = end.map_or((r, ""), |i| (&r[..=i], &r[i + 3..]));
        let s = ids_of(Signal::new(K::TransferFailed), ids);
        return Some(s.text("connector", Some("MooncakeConnector")).text("reason", Some(err)));
    }
    let id = m.strip_prefix("Mooncake transfer failed for request ")?;
    Some(Signal::new(K::TransferFailed).id(id).text("connector", Some("MooncakeConnector")))
}

/// vLLM's MooncakeConnector, decode side (the worker's list of request ids):
/// `pulling kv_caches for ['<id>'] failed: Timeout waiting for P side ready.`
/// and `Error happens during tranfering kvcache for ['<id>'], see logs in prefiller.`
fn mooncake_pull_failed(m: &str) -> Option<Signal> {
    let (ids, reason) = if let Some(r) = m.strip_prefix("pulling kv_caches for ") {
        let (ids, reason) = r.split_once(" failed: ")?;
        (ids, reason.trim_end_matches('.'))
    } else {
        let r = m.strip_prefix("Error happens during tranfering kvcache for ")?;
        (r, "see logs in prefiller")
    };
    Some(
        ids_of(Signal::new(K::TransferFailed), ids)
            .text("connector", Some("MooncakeConnector"))
            .text("reason", Some(reason)),
    )
}

/// vLLM's MooncakeConnector, producer side: `Timeout waiting for P side
/// ready: ['<decode id>']` — the decode asked for KV this prefill did not
/// have ready in time. The ids are the decode's (`pending_reqs`).
fn mooncake_p_timeout(m: &str) -> Option<Signal> {
    let ids = m.strip_prefix("Timeout waiting for P side ready: ")?;
    Some(
        ids_of(Signal::new(K::TransferFailed), ids)
            .text("connector", Some("MooncakeConnector"))
            .text("reason", Some("Timeout waiting for P side ready"))
            .flag("decode_ids", Some(true)),
    )
}

/// The ids of a Python list (`['a', 'b']`), or the one bare id printed instead.
fn ids_of(s: Signal, raw: &str) -> Signal {
    let list = py_strs(raw);
    if list.is_empty() {
        return s.id(raw.split([' ', ',']).next().unwrap_or(""));
    }
    list.into_iter().fold(s, Signal::id)
}

/// `Transfer failed for key: K with error: -800`, `Get failed for key: K with error: X`.
fn mooncake_key(m: &str) -> Option<Signal> {
    let (op, r) = m.split_once(" failed for key: ")?;
    let op = match op {
        "Transfer" => "transfer",
        "Get" => "get",
        "Put" => "put",
        _ => return None,
    };
    let err = word_after(r, "with error: ");
    let s = Signal::new(K::MooncakeKeyFailed).text("op", Some(op)).text("key", r.split(' ').next());
    Some(match err.and_then(lead_num) {
        Some(n) => s.num("error", Some(n)),
        None => s.text("error", err),
    })
}

fn sync_timeout(m: &str) -> Option<Signal> {
    let r = m.strip_prefix("Sync batch data transfer timeout after ")?;
    Some(Signal::new(K::TransferTimeout).text("engine", Some("mooncake")).num("ns", lead_num(r)))
}

fn mooncake_progress(m: &str) -> Option<Signal> {
    let r = m.strip_prefix("Number of completed KV cache send requests: ")?;
    Some(
        Signal::new(K::ConnectorProgress)
            .text("connector", Some("MooncakeConnector"))
            .num("sends_done", lead_num(r))
            .num("recvs_done", num_after(r, "receive requests: ")),
    )
}

/// V0 MooncakeStoreConnector: `[rank0]: Failed to receive all KVs and hidden
/// states, redo model forwarding` — the decode recomputed (a miss).
fn redo(m: &str) -> Option<Signal> {
    let r = m.strip_prefix("[rank")?;
    let (rank, rest) = r.split_once("]: ")?;
    rest.starts_with("Failed to receive all KVs and hidden states, redo model forwarding")
        .then(|| Signal::new(K::RedoForwarding).num("rank", lead_num(rank)))
}

fn rpc(m: &str) -> Option<Signal> {
    m.starts_with("read rpc body failed")
        .then(|| Signal::new(K::MooncakeRpcError).text("detail", Some("read rpc body failed")))
}

/// V0 engine: `error('Error in model execution (input dumped to ...): ...')`.
fn v0_error(m: &str) -> Option<Signal> {
    let r = m.strip_prefix("error('")?;
    let reason = r.split(" (").next().unwrap_or(r);
    Some(Signal::new(K::EngineError).text("process", Some("engine")).text("reason", Some(reason)))
}

/// `<id> is still in WAITING_FOR_REMOTE_KVS state.`
fn waiting_remote(m: &str) -> Option<Signal> {
    let id = m.strip_suffix(" is still in WAITING_FOR_REMOTE_KVS state.")?;
    (!id.contains(' ')).then(|| Signal::new(K::WaitingRemoteKvs).id(id))
}
