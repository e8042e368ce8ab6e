//! Lines that start or end a request's KV transfer: Mooncake's, and the
//! V1 scheduler's for any connector; vLLM's Mooncake store connector's
//! failed gets and vllm-ascend's Mooncake prefill freeing unread KV.

use super::scan::{lead_num, num_after};
use super::signal::{Signal, SignalKind as K};

/// `Start to transmit X` (Mooncake), and vllm-ascend's layerwise Mooncake
/// `Send request: X to proxy metaserver: URL` (the decode asks the prefill,
/// through the proxy, to push X's KV; the prefill echoes it at DEBUG).
pub(super) fn transmit(m: &str) -> Option<Signal> {
    if let Some(r) = m.strip_prefix("Send request: ") {
        let (id, url) = r.split_once(" to proxy metaserver: ")?;
        let s = Signal::new(K::TransferStarted).id(id).text("connector", Some("MooncakeLayerwiseConnector"));
        return Some(s.text("url", Some(url.trim_end())));
    }
    let id = m.strip_prefix("Start to transmit ")?;
    Some(Signal::new(K::TransferStarted).id(id))
}

/// The V1 scheduler (`_update_from_kv_xfer_finished`, DEBUG): `Finished
/// recving KV transfer for request X` (decode: the load ended, done or
/// failed) and `Finished sending ...` (prefill: read, or expired).
pub(super) fn transmit_done(m: &str) -> Option<Signal> {
    let r = m.strip_prefix("Finished ")?;
    let (dir, id) = r.split_once(" KV transfer for request ")?;
    let dir = ["recving", "sending"].into_iter().find(|d| *d == dir)?;
    Some(Signal::new(K::KvTransferFinished).id(id.trim_end()).text("dir", Some(dir)))
}

/// `Failed to get N Mooncake keys from sub-batch (batch_keys=B,
/// first_failures=[('key', -704)])`: the store had not those chunks; the
/// scheduler then fails the requests or recomputes them (its own line).
pub(crate) fn store_get_failed(m: &str) -> Option<Signal> {
    let r = m.strip_prefix("Failed to get ")?;
    let (n, rest) = r.split_once(" Mooncake keys from sub-batch")?;
    // The first failure's code: the number after the key's closing quote.
    let code = rest
        .split_once("first_failures=")
        .and_then(|(_, f)| f.split_once("', "))
        .and_then(|(_, c)| lead_num(c));
    Some(
        Signal::new(K::MooncakeKeyFailed)
            .text("op", Some("get"))
            .num("error", code)
            .num("failed", lead_num(n))
            .num("batch_keys", num_after(rest, "batch_keys=")),
    )
}

/// vllm-ascend's prefill let go of a request's KV no decode came for:
/// `Force freed request: X` (older), `Force freed expired request: X.
/// Reason: Request exceeded timeout threshold (480 seconds). ...` (once per
/// TP worker). The same meaning as NIXL's expired lease, read by no one.
pub(crate) fn force_freed(m: &str) -> Option<Signal> {
    let r = m
        .strip_prefix("Force freed expired request: ")
        .or_else(|| m.strip_prefix("Force freed request: "))?;
    let id = r.split([' ', ',']).next()?.trim_end_matches('.');
    Some(
        Signal::new(K::ExpiredKv)
            .id(id)
            .text("connector", Some("MooncakeConnector"))
            .num("retrieved_by", Some(0.0))
            .num("timeout_s", num_after(r, "threshold (")),
    )
}

/// `MooncakeConnector finish req not in reqs to process. request_id=X.`:
/// a decode's done came for a request the prefill had already freed (it
/// read blocks that may have been reused), as NIXL's `Potentially invalid`.
pub(crate) fn finish_unknown(m: &str) -> Option<Signal> {
    let r = m.strip_prefix("MooncakeConnector finish req not in reqs to process.")?;
    let id = r
        .split_once("request_id=")
        .map(|(_, i)| i.split([' ', ',']).next().unwrap_or("").trim_end_matches('.'));
    let s = Signal::new(K::InvalidKvRead);
    Some(match id.filter(|i| !i.is_empty()) {
        Some(i) => s.id(i),
        None => s,
    })
}
