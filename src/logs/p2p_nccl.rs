//! P2pNcclConnector's receive line on decode: one per layer, the KV
//! tensor of a request arrived from the prefill, or the wait for it
//! returned nothing.

use super::scan::{num_after, word_after};
use super::signal::{Signal, SignalKind as K};

/// P2pNcclConnector (V0/V1): `[PUT]Recv From ip:port, tensor_id:ID, duration:0.010ms, rank:0`.
pub(super) fn p2p(m: &str) -> Option<Signal> {
    let i = m.find("]Recv From ")?;
    let r = &m[i + 11..];
    // p2p_nccl_engine.py prints the red WARNING when the tensor it waited
    // for is None (nothing arrived), the blue INFO (with its shape) when it
    // came; a line with neither mark says which by its `shape:` field.
    let got = !m.contains('\u{1f534}') && (m.contains('\u{1f535}') || r.contains("shape:"));
    // V0's tensor id is `<request id>kv`; V1's `<request id>#<layer>`.
    let id = word_after(r, "tensor_id:").map(|t| {
        let t = t.split('#').next().unwrap_or(t);
        t.strip_suffix("kv").filter(|b| b.ends_with(|c: char| c.is_ascii_digit())).unwrap_or(t)
    });
    let mut s = match got {
        true => Signal::new(K::P2pTensorReceived),
        false => Signal::new(K::TransferFailed)
            .text("error", Some("no KV tensor arrived"))
            .text("connector", Some("P2pNcclConnector")),
    };
    s = s
        .text("peer", r.split(',').next())
        .num("ms", num_after(r, "duration:"))
        .num("rank", num_after(r, "rank:"));
    if let Some(id) = id {
        s = s.id(id);
    }
    Some(s)
}
