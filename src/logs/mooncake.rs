//! Lines that start or end a request's KV transfer: Mooncake's, and the
//! V1 scheduler's for any connector.

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
