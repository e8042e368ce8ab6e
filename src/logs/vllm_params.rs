//! What vLLM's `Received request` and `KVTransferConfig` lines carry:
//! `max_tokens`, `kv_transfer_params`, the connector and its role.

use super::pyrepr::{Cursor, Py};

/// `kv_transfer_params` as the API server logged them inside
/// `SamplingParams(... extra_args={'kv_transfer_params': {...}})`.
/// Keys that were absent or `None` stay `None`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KvParams {
    pub do_remote_prefill: Option<bool>,
    pub do_remote_decode: Option<bool>,
    /// The prefill instance's *internal* id (with its `-<8 hex>` suffix).
    pub remote_request_id: Option<String>,
    pub remote_engine_id: Option<String>,
    pub remote_num_tokens: Option<u32>,
    /// Count of block ids in `remote_block_ids` (flattened: NIXL logs one list per KV group).
    pub remote_block_count: Option<usize>,
    pub remote_host: Option<String>,
    pub remote_port: Option<u16>,
    /// The prefill's tensor parallel size (NIXL's `tp_size`).
    pub tp_size: Option<u32>,
}

/// `Received request <id>: params: SamplingParams(...), lora_request: ...`
/// (≥0.14) or `Received request <id>: prompt: '...', params: ...` (≤0.11).
/// (external id, `max_tokens`, `kv_transfer_params`, the prompt length
/// where the line lists `prompt_token_ids`).
pub(super) fn parse_received(r: &str) -> (String, Option<u32>, Option<KvParams>, Option<u32>) {
    let (id, mut rest) = match r.find(": ") {
        Some(i) => (&r[..i], &r[i + 2..]),
        None => (r.trim_end_matches(['.', ':']), ""),
    };
    let mut max_tokens = None;
    let mut kv_params = None;
    let mut prompt_tokens = None;
    // Skip the prompt repr without looking inside it: it is user text and may
    // itself contain "max_tokens=" or "kv_transfer_params".
    if let Some(p) = rest.strip_prefix("prompt: ") {
        let mut c = Cursor::new(p);
        rest = if c.skip_value() { c.rest().trim_start_matches([',', ' ']) } else { "" };
    }
    // V0 (≤0.4) put fields between: `prefix_pos: None,sampling_params: SamplingParams(`.
    if !rest.starts_with("params: SamplingParams(")
        && let Some(i) = rest.find("params: SamplingParams(")
    {
        rest = &rest[i..];
    }
    if let Some(p) = rest.strip_prefix("params: SamplingParams(") {
        let mut c = Cursor::new(p);
        while let Some(key) = c.key_eq() {
            match key {
                "max_tokens" => {
                    max_tokens = match c.value(0) {
                        Some(Py::Int(n)) => u32::try_from(n).ok(),
                        _ => None,
                    }
                }
                "extra_args" => kv_params = c.value(0).and_then(|v| kv_params_of(&v)),
                _ => {
                    if !c.skip_value() {
                        break;
                    }
                }
            }
            if !c.eat(b',') {
                break;
            }
        }
        // `), prompt_token_ids: [...], lora_request: ...` (≤0.10).
        let tail = c.rest().strip_prefix(')').unwrap_or("").trim_start_matches([',', ' ']);
        prompt_tokens = count_token_ids(tail);
    }
    (id.to_string(), max_tokens, kv_params, prompt_tokens)
}

/// Number of ids in `prompt_token_ids: [1, 2, 3]`, read after the prompt
/// repr (which is user text and may itself contain that phrase).
pub(super) fn count_token_ids(rest: &str) -> Option<u32> {
    let mut rest = rest;
    if let Some(p) = rest.strip_prefix("prompt: ") {
        let mut c = Cursor::new(p);
        rest = if c.skip_value() { c.rest().trim_start_matches([',', ' ']) } else { return None };
    }
    let list = rest.strip_prefix("prompt_token_ids: [")?;
    let end = list.find(']')?;
    let body = list[..end].trim();
    if body.is_empty() {
        return Some(0);
    }
    let mut n = 0u32;
    for tok in body.split(',') {
        tok.trim().parse::<u64>().ok()?;
        n = n.checked_add(1)?;
    }
    Some(n)
}
/// `{'kv_transfer_params': {...}}` → `KvParams`; anything else → `None`.
fn kv_params_of(extra: &Py) -> Option<KvParams> {
    let params = extra.get("kv_transfer_params")?;
    let Py::Dict(_) = params else { return None };
    let s = |k| match params.get(k) {
        Some(Py::Str(v)) => Some(v.clone().into_owned()),
        _ => None,
    };
    let b = |k| match params.get(k) {
        Some(Py::Bool(v)) => Some(*v),
        _ => None,
    };
    let n = |k| match params.get(k) {
        Some(Py::Int(v)) => Some(*v),
        _ => None,
    };
    Some(KvParams {
        do_remote_prefill: b("do_remote_prefill"),
        do_remote_decode: b("do_remote_decode"),
        remote_request_id: s("remote_request_id"),
        remote_engine_id: s("remote_engine_id"),
        remote_num_tokens: n("remote_num_tokens").and_then(|v| u32::try_from(v).ok()),
        remote_block_count: match params.get("remote_block_ids") {
            Some(v @ Py::List(_)) => Some(v.count_leaves()),
            _ => None,
        },
        remote_host: s("remote_host"),
        remote_port: n("remote_port").and_then(|v| u16::try_from(v).ok()),
        tp_size: n("tp_size").and_then(|v| u32::try_from(v).ok()),
    })
}

/// What pdtop reads of a `KVTransferConfig(...)`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KvConfigFields {
    pub role: Option<String>,
    pub connector: Option<String>,
    pub engine_id: Option<String>,
    /// `kv_load_failure_policy` (vLLM ≥ 0.26): `fail` or `recompute`.
    pub failure_policy: Option<String>,
    /// Tensor and data parallel sizes, where the line was `non-default
    /// args: {...}` (a size it lacks is the default, 1).
    pub parallel: Option<(u32, u32)>,
}

/// Body of `KVTransferConfig(` up to its `)`.
pub(super) fn parse_kv_config(r: &str) -> KvConfigFields {
    let mut f = KvConfigFields::default();
    let mut c = Cursor::new(r);
    while let Some(key) = c.key_eq() {
        let slot = match key {
            "kv_role" => &mut f.role,
            "kv_connector" => &mut f.connector,
            "engine_id" => &mut f.engine_id,
            "kv_load_failure_policy" => &mut f.failure_policy,
            _ => {
                if !c.skip_value() {
                    break;
                }
                if !c.eat(b',') {
                    break;
                }
                continue;
            }
        };
        if let Some(Py::Str(v)) = c.value(0) {
            *slot = Some(v.into_owned());
        }
        if !c.eat(b',') {
            break;
        }
    }
    f
}

/// `KVTransferConfig(...)` alone, or inside the start-up line's
/// `non-default args` (NIXL setups print no other), with its block size.
pub(super) fn kv_config(msg: &str) -> Option<(KvConfigFields, Option<u32>)> {
    if let Some(r) = msg.strip_prefix("KVTransferConfig(") {
        return Some((parse_kv_config(r), None));
    }
    const CFG: &str = "'kv_transfer_config': KVTransferConfig(";
    let i = msg.find(CFG)?;
    let fields = parse_kv_config(&msg[i + CFG.len()..]);
    let number = |key: &str| {
        msg.find(key)
            .and_then(|j| super::line::leading_u64(&msg[j + key.len()..]))
            .and_then(|n| u32::try_from(n).ok())
    };
    let block_size = number("'block_size': ");
    let mut fields = fields;
    if msg.starts_with("non-default args: ") {
        let size = |key| number(key).unwrap_or(1);
        fields.parallel = Some((size("'tensor_parallel_size': "), size("'data_parallel_size': ")));
    }
    Some((fields, block_size))
}
