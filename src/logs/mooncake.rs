//! Mooncake-family lines that start a request's transfer.

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
