//! The vocabulary of what a log line says, across vLLM versions, KV
//! connectors and proxies: a kind, the request ids it names (as printed),
//! and the numbers and words it carries. One flat shape so that the events
//! view, `check --json` and the corpus test read every line the same way.

/// A value a line carries.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Num(f64),
    Bool(bool),
    Text(String),
}

macro_rules! kinds {
    ($($v:ident => $s:literal,)*) => {
        /// What a line is about. `as_str` is the stable name used in reports.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum SignalKind { $($v,)* }
        impl SignalKind {
            pub fn as_str(self) -> &'static str {
                match self { $(SignalKind::$v => $s,)* }
            }
        }
    };
}

kinds! {
    RequestReceived => "request_received",
    RequestAdded => "request_added",
    RequestFailed => "request_failed",
    RequestAborted => "request_aborted",
    ResponseDone => "response_done",
    RequestDetails => "request_details",
    ServerStarted => "server_started",
    KvConfig => "kv_config",
    HttpAccess => "http_access",
    StreamError => "stream_error",
    EngineDead => "engine_dead",
    EngineError => "engine_error",
    EngineStalled => "engine_stalled",
    WorkerExit => "worker_exit",
    ServerShutdown => "server_shutdown",
    Stats => "stats",
    Versions => "versions",
    ConnectorCreated => "connector_created",
    WaitingRemoteKvs => "waiting_remote_kvs",
    RequestStuck => "request_stuck",
    KvLoadFailed => "kv_load_failed",
    KvLoadRecovered => "kv_load_recovered",
    ConnectorMissing => "connector_missing",
    NixlStartLoadKv => "nixl_start_load_kv",
    NixlHandshakeTiming => "nixl_handshake_timing",
    NixlMatchedTokens => "nixl_matched_tokens",
    NixlUpdateStateAfterAlloc => "nixl_update_state_after_alloc",
    ConnectorMatchedTokens => "connector_matched_tokens",
    ConnectorUpdateStateAfterAlloc => "connector_update_state_after_alloc",
    ConnectorRequestFinished => "connector_request_finished",
    KvTransferFinished => "kv_transfer_finished",
    TransferStarted => "transfer_started",
    TransferFailed => "transfer_failed",
    TransferTimeout => "transfer_timeout",
    HandshakeFailed => "handshake_failed",
    RequestKeyError => "request_key_error",
    ExpiredKv => "expired_kv",
    InvalidKvRead => "invalid_kv_read",
    NixlEngineId => "nixl_engine_id",
    NixlTransferMetrics => "nixl_transfer_metrics",
    LmcacheHit => "lmcache_hit",
    LmcacheScheduledLoad => "lmcache_scheduled_load",
    LmcacheRetrieved => "lmcache_retrieved",
    LmcacheRetrievedObjects => "lmcache_retrieved_objects",
    LmcacheBackendLoad => "lmcache_backend_load",
    LmcacheStoring => "lmcache_storing",
    LmcacheStored => "lmcache_stored",
    LmcacheSent => "lmcache_sent",
    LmcachePrefetch => "lmcache_prefetch",
    MooncakeConnectFailed => "mooncake_connect_failed",
    MooncakeMountFailed => "mooncake_mount_failed",
    MooncakeRpcError => "mooncake_rpc_error",
    MooncakeKeyFailed => "mooncake_key_failed",
    ConnectorProgress => "connector_progress",
    RedoForwarding => "redo_forwarding",
    P2pTensorReceived => "p2p_tensor_received",
    OffloadHit => "offload_hit",
    OffloadStore => "offload_store",
    OffloadStoreFailed => "offload_store_failed",
    ExampleConnectorHit => "example_connector_hit",
    ExampleConnectorInject => "example_connector_inject",
    ProxyStart => "proxy_start",
    ProxyListening => "proxy_listening",
    ProxyStats => "proxy_stats",
    ProxyError => "proxy_error",
    RouterPrefillResponse => "router_prefill_response",
    RouterBackendError => "router_backend_error",
    RouterRequestFailed => "router_request_failed",
    RouterWorkers => "router_workers",
    RouterRoute => "router_route",
    SidecarPrefillSent => "sidecar_prefill_sent",
    SidecarMissingKvField => "sidecar_missing_kv_field",
    RouterDecodeResponse => "router_decode_response",
    RouterForwardedId => "router_forwarded_id",
    RouterBookkeeping => "router_bookkeeping",
    RouterPrefillErrorBody => "router_prefill_error_body",
    RouterKvParamsMissing => "router_kv_params_missing",
    LmcachePdAllocRetry => "lmcache_pd_alloc_retry",
}

impl SignalKind {
    /// A failure that stands on its own, request or not: shown as an event.
    pub fn is_failure(self) -> bool {
        use SignalKind::*;
        matches!(
            self,
            EngineDead
                | EngineError
                | EngineStalled
                | KvLoadFailed
                | KvLoadRecovered
                | ConnectorMissing
                | TransferFailed
                | TransferTimeout
                | HandshakeFailed
                | RequestKeyError
                | InvalidKvRead
                | MooncakeConnectFailed
                | MooncakeMountFailed
                | MooncakeRpcError
                | MooncakeKeyFailed
                | RedoForwarding
                | OffloadStoreFailed
                | ProxyError
                | RouterBackendError
                | RouterRequestFailed
                | RouterPrefillErrorBody
                | LmcachePdAllocRetry
                | SidecarMissingKvField
                | RequestFailed
        )
    }
}

/// One recognised line: kind, ids as printed, and named values.
#[derive(Debug, Clone, PartialEq)]
pub struct Signal {
    pub kind: SignalKind,
    pub ids: Vec<String>,
    pub fields: Vec<(&'static str, Val)>,
}

impl Signal {
    pub fn new(kind: SignalKind) -> Signal {
        Signal { kind, ids: Vec::new(), fields: Vec::new() }
    }
    pub fn id(mut self, id: &str) -> Signal {
        let id = trim_id(id);
        if !id.is_empty() && !self.ids.iter().any(|i| i == id) {
            self.ids.push(id.to_string());
        }
        self
    }
    pub fn num(mut self, k: &'static str, v: Option<f64>) -> Signal {
        if let Some(v) = v.filter(|v| v.is_finite()) {
            self.fields.push((k, Val::Num(v)));
        }
        self
    }
    pub fn flag(mut self, k: &'static str, v: Option<bool>) -> Signal {
        if let Some(v) = v {
            self.fields.push((k, Val::Bool(v)));
        }
        self
    }
    pub fn text(mut self, k: &'static str, v: Option<&str>) -> Signal {
        if let Some(v) = v.filter(|v| !v.is_empty()) {
            self.fields.push((k, Val::Text(super::line::clip(v))));
        }
        self
    }
    pub fn get(&self, k: &str) -> Option<&Val> {
        self.fields.iter().find(|(n, _)| *n == k).map(|(_, v)| v)
    }
    pub fn get_num(&self, k: &str) -> Option<f64> {
        match self.get(k) {
            Some(Val::Num(v)) => Some(*v),
            _ => None,
        }
    }
}

/// An id ends at `:`, `.`, `,`, `)`, `'`, `"` or space (`Received request ID:`,
/// `Added request ID.`, `request_finished(ID),`, `{'ID'}`). A dot inside the
/// id (`addr_10.0.0.1:...`) is kept: only a trailing one is dropped.
pub fn trim_id(s: &str) -> &str {
    let s = s.trim_start_matches(['\'', '"', '(', '{', '[', ' ']);
    let end = s.find([' ', ',', ')', '\'', '"', '}', ']']).unwrap_or(s.len());
    let s = &s[..end];
    s.trim_end_matches(['.', ':', ';'])
}

/// The id that joins proxy, prefill and decode lines of one request, as
/// printed ids vary: `13_` (n>1 child), `-<8 hex>` (engine suffix), `-0`
/// (completion choice index), `-0kv` (P2pNccl tensor id) are dropped. The
/// `cmpl-`/`chatcmpl-` prefix is kept: it is what the client saw.
pub fn join_id(printed: &str) -> String {
    let mut s = printed;
    // Elided by whoever pasted it (`8f07dfc0-...-a2f0e657`): never joined.
    if s.contains("...") {
        return s.to_string();
    }
    // A child of an `n > 1` request: vLLM's `parallel_sampling.py` names
    // each `f"{index}_{request_id}"`, whatever the parent's id looks like
    // (a Dynamo uuid, `cmpl-...`).
    if let Some((n, rest)) = s.split_once('_')
        && !n.is_empty()
        && n.len() <= 4
        && n.bytes().all(|b| b.is_ascii_digit())
        && rest.contains('-')
    {
        s = rest;
    }
    if let Some(b) = s.strip_suffix("kv")
        && b.rsplit_once('-').is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()))
    {
        s = b;
    }
    if let Some((b, t)) = s.rsplit_once('-')
        && !b.is_empty()
        && t.len() == 8
        && t.bytes().all(|c| c.is_ascii_hexdigit())
        && b.contains('-')
    {
        s = b;
    }
    if s.starts_with("cmpl-")
        && let Some((b, n)) = s.rsplit_once('-')
        && b.len() > 5
        && !n.is_empty()
        && n.len() <= 3
        && n.bytes().all(|c| c.is_ascii_digit())
    {
        s = b;
    }
    s.to_string()
}

/// Whether a printed string has the shape of a request id as vLLM, its
/// connectors and proxies print one, for lines where the same place may
/// hold anything else (the key of a `KeyError`): `cmpl-`/`chatcmpl-` ids,
/// an `n>1` child (`13_cmpl-…`), vllm-router's composed id, a UUID or 16+
/// hex digits, each with or without the engine's `-<8 hex>` or a `-<n>`
/// suffix. A forwarded id of another shape is found by its trace instead.
pub fn request_shaped(id: &str) -> bool {
    if id.is_empty() || id.contains("...") || id.contains(char::is_whitespace) {
        return false;
    }
    let id = id
        .split_once('_')
        .filter(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .map_or(id, |(_, r)| r);
    if id.contains("___prefill_addr_") && id.contains("___decode_addr_") {
        return true;
    }
    if let Some(rest) = id.strip_prefix("chatcmpl-").or_else(|| id.strip_prefix("cmpl-")) {
        return !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b));
    }
    let mut s = id;
    for _ in 0..2 {
        match s.rsplit_once('-') {
            Some((b, t))
                if (t.len() == 8 && t.bytes().all(|c| c.is_ascii_hexdigit()))
                    || (!t.is_empty() && t.len() <= 3 && t.bytes().all(|c| c.is_ascii_digit())) =>
            {
                if is_uuid(b) || is_hex16(b) {
                    return true;
                }
                s = b;
            }
            _ => break,
        }
    }
    is_uuid(id) || is_hex16(id)
}

/// The end of a traceback that names the request the engine lost:
/// `KeyError: '<request id>'` (the scheduler or a connector looked up a
/// request it no longer held; any other key, `'model.layers.93.self_attn'`,
/// names no request) and NIXL's `AssertionError: <id> not found in
/// recving_metadata list` (`get_finished`).
pub(crate) fn key_error(name: &str, text: &str) -> Option<Signal> {
    let key = match name {
        // A bare dashed uuid is an engine id or a NIXL agent name
        // (`str(uuid4())`): the API server prefixes every request id.
        "KeyError" => text.strip_prefix('\'').and_then(|t| t.strip_suffix('\'')).filter(|k| !is_uuid(k))?,
        "AssertionError" => text.strip_suffix(" not found in recving_metadata list")?,
        _ => return None,
    };
    request_shaped(key)
        .then(|| Signal::new(SignalKind::RequestKeyError).id(key).text("exception", Some(name)))
}

fn is_hex16(s: &str) -> bool {
    s.len() >= 16 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `8-4-4-4-12` hex digits.
fn is_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 5
        && parts
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(p, n)| p.len() == n && p.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_ids() {
        for (p, b) in [
            ("cmpl-6709d8795d3c4464b01999c9f3fffede-0", "cmpl-6709d8795d3c4464b01999c9f3fffede"),
            ("chatcmpl-8c24fecc6f854a3e-873d5034", "chatcmpl-8c24fecc6f854a3e"),
            ("chatcmpl-96895635e18f40c3", "chatcmpl-96895635e18f40c3"),
            ("13_chatcmpl-c78d39a6d1d8469f90f3bda9bd41ca6a", "chatcmpl-c78d39a6d1d8469f90f3bda9bd41ca6a"),
            ("cmpl-x_1025d-0kv", "cmpl-x_1025d"),
            ("d9e65a86be2a42a4917ba9fee5e97d9e", "d9e65a86be2a42a4917ba9fee5e97d9e"),
            (
                "chatcmpl-e081a40e-dc43-4b63-8ce2-d9a91f02e2df",
                "chatcmpl-e081a40e-dc43-4b63-8ce2-d9a91f02e2df",
            ),
        ] {
            assert_eq!(join_id(p), b, "{p}");
        }
        assert_eq!(trim_id("'abc-1'}"), "abc-1");
        assert_eq!(trim_id("abc-1."), "abc-1");
    }

    /// Every id shape the corpus and vLLM's sources print (file or thread
    /// in the comment) is a request id; keys that are not are not.
    #[test]
    fn request_shapes() {
        for id in [
            "cmpl-3da205a6-1c3c-41b5-aeaa-b8421e81fd5c-0", // vllm#25562, UUID completions id + choice
            "cmpl-6709d8795d3c4464b01999c9f3fffede-0",     // 32 hex + choice
            "chatcmpl-95f443c92d6709b3-a7e574bd",          // vllm#53799, 16 hex + engine suffix
            "chatcmpl-35663437383837622d373633362d3464-b6f0b5ab", // vllm-ascend#15420, hex-encoded
            "13_chatcmpl-c78d39a6d1d8469f90f3bda9bd41ca6a", // n>1 child
            "973ca62f1bc3666d",                            // vllm#50719, Mooncake's list
            "d9e65a86be2a42a4917ba9fee5e97d9e",            // V0 bare hex
            "8f07dfc0-1c2d-4e5f-8a9b-0c1d2e3f4a5b",        // bare UUID
            "ba310df4-f600-441c-a0b5-0cb772aaf8ed-8b8ee10a", // UUID + engine suffix
            "973ca62f1bc3666d-0",                          // hex + choice
            "___prefill_addr_10.0.0.11:21001___decode_addr_10.0.0.21:22001_9b1f3c5e7a0d4b2c8e6f1a3b5c7d9e0f",
            "cmpl-___prefill_addr_10.0.0.11:21001___decode_addr_10.0.0.21:22001_9b1f3c5e7a0d4b2c8e6f1a3b5c7d9e0f-0",
        ] {
            assert!(request_shaped(id), "{id}");
        }
        // A model layer (a Mooncake draft-layer KeyError), short hex, an
        // elided id, a batch index.
        for key in ["model.layers.93.self_attn", "deadbeef", "8f07dfc0-...-a2f0e657", "0", "", "cmpl-", "a b"]
        {
            assert!(!request_shaped(key), "{key}");
        }
    }

    /// Engine ids, agent names and SGLang's `bootstrap_room` sit on the same
    /// lines as request ids; only the request's id is taken.
    #[test]
    fn engine_ids_are_never_request_ids() {
        use crate::logs::vllm::parse_vllm_line;
        let ids = |l: &str| parse_vllm_line(l).and_then(|l| l.signal).map(|s| s.ids);
        // vllm#41863 (pasted): a handshake failure with `request_id: None`.
        let l = "(Worker_TP0_EP0 pid=865) ERROR 05-01 15:00:23 [nixl_connector.py:1263] NIXL transfer failure: handshake_setup_failed | Context: {'failure_type': 'handshake_setup_failed', 'request_id': None, 'engine_id': 'c92321f8-5be9-4722-9cc1-648335f9c072', 'remote_engine_id': 'b6b76ae8-5a6c-4104-bb1d-4966a7cb9e8c'}";
        assert_eq!(ids(l), Some(vec![]));
        // vllm@002a1057 nixl_connector.py: the engine id in `Handshake with`, the
        // mismatch error's two engine ids, then the request's own line.
        let l = "ERROR 11-06 10:12:41 [nixl_connector.py:1046] Handshake with 5f1c7a2e-8d3b-4e6f-9a0c-2b4d6e8f1a3c failed";
        assert_eq!(ids(l), Some(vec![]));
        let l = "ERROR 11-06 10:12:41 [nixl_connector.py:1046] RuntimeError: Remote NIXL agent engine ID mismatch. Expected 5f1c7a2e-8d3b-4e6f-9a0c-2b4d6e8f1a3c,received 0b7e4d21-6c3a-4f58-a9e2-7d1c3b5a9f04.";
        assert_eq!(ids(l), None);
        let l = "ERROR 11-06 10:12:41 [nixl_connector.py:1058] Handshake failed for request cmpl-2e8c4a6f0b1d4e3a9c7f5b2d8e1a4c6b-0, marking blocks as invalid";
        assert_eq!(ids(l), Some(vec!["cmpl-2e8c4a6f0b1d4e3a9c7f5b2d8e1a4c6b-0".to_string()]));
        // vllm#20609 (pasted): the remote engine is a field, the request the id.
        let l = "(VllmWorker rank=0 pid=98473) DEBUG 07-08 10:00:00 [nixl_connector.py:1045] start_load_kv for request cmpl-93706305-0119-4c28-b1d2-682767153598-0 from remote engine d8db2325-17b3-424e-a45b-2ec1bb58d71f. Num local_block_ids: 4. Num remote_block_ids: 4. ";
        assert_eq!(ids(l), Some(vec!["cmpl-93706305-0119-4c28-b1d2-682767153598-0".to_string()]));
        // A KeyError on a model layer (the Mooncake draft-layer report) names no request.
        assert_eq!(ids("KeyError: 'model.layers.93.self_attn'"), None);
        // vllm nixl/worker.py (0016029b) get_finished's assert, rendered.
        let l = "(EngineCore_DP0 pid=812) ERROR 09-20 11:02:03 [core.py:1010] AssertionError: chatcmpl-5e2a9c1b7d3f4a6e-3c4d5e6f not found in recving_metadata list";
        assert_eq!(ids(l), Some(vec!["chatcmpl-5e2a9c1b7d3f4a6e-3c4d5e6f".to_string()]));
        // SGLang's decode (python/sglang/srt/disaggregation/decode.py format):
        // neither its rid nor its bootstrap_room is read as a vLLM request.
        let l = "[2026-01-16 22:03:02 TP2] Decode handshake failed for request rank=2 decode_req.req.rid='a1b2c3d4e5f60718293a4b5c6d7e8f90' decode_req.req.bootstrap_room=8815072349184213 with exception KVTransferError";
        assert!(ids(l).is_none_or(|v| v.is_empty()), "{:?}", ids(l));
    }

    /// Python lists and sets of ids, as Mooncake and the scheduler print them.
    #[test]
    fn ids_in_python_lists() {
        use crate::logs::vllm::parse_vllm_line;
        let ids = |l: &str| parse_vllm_line(l).and_then(|l| l.signal).map(|s| s.ids).unwrap_or_default();
        // vllm#50719 (pasted).
        let l = "(Worker_DP6_EP6 pid=9774) ERROR 08-01 12:42:13 [mooncake_connector.py:1899] pulling kv_caches for ['973ca62f1bc3666d'] failed: Timeout waiting for P side ready.";
        assert_eq!(ids(l), ["973ca62f1bc3666d"]);
        // vllm scheduler.py `Failing %d request(s) due to KV load failure (...). Request IDs: %s` (a set).
        let l = "ERROR 09-14 08:32:11 [scheduler.py:2192] Failing 2 request(s) due to KV load failure (failure_policy=fail, 1024 tokens affected). Request IDs: {'chatcmpl-5b0e1c7d2f8a4a43-9f2e4c1a', 'cmpl-0d4f7a2c9e1b4b6f-0-1a2b3c4d'}";
        assert_eq!(ids(l), ["chatcmpl-5b0e1c7d2f8a4a43-9f2e4c1a", "cmpl-0d4f7a2c9e1b4b6f-0-1a2b3c4d"]);
    }
}
