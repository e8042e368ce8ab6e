//! Did the bytes move, and were they the size the arithmetic predicts?
//!
//! Predicted: every prompt token a prefill instance processed should reach
//! the decode side as `bytes_per_token` of KV (the model's shape, from its
//! `config.json`). Observed, from up to three places: the interface's byte
//! counters, the connector's own count (`vllm:nixl_bytes_transferred` on
//! decode, `vllm:mooncake_bytes_transferred` on prefill), and the bytes
//! written under the ExampleConnector's directory. Far below the
//! prediction means nothing moved (what a silent miss looks like on the
//! wire); far above means a wrong model config, TP replication, or other
//! traffic on the interface.

pub use super::series::{Point, Series};
use crate::feed::KvDirSnapshot;
use crate::feed::NetDevSnapshot;
use crate::feed::Role;
use crate::kv::{KvCacheDtype, ModelShape, bytes_per_token};
use crate::metrics::model::Hist;
use crate::sources::netdev::IfaceChange;

/// Below this much predicted traffic the ratio says nothing.
pub const MIN_PREDICTED_BYTES: f64 = 1024.0 * 1024.0;

/// Where the bytes-per-token figure came from.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KvModel {
    pub bytes_per_token: u64,
    pub source: String,
    pub layers: Option<u32>,
}

impl KvModel {
    pub fn from_config(text: &str, source: String, dtype: KvCacheDtype) -> Result<KvModel, String> {
        let shape = ModelShape::from_config_json(text).map_err(|e| e.to_string())?;
        Ok(KvModel { bytes_per_token: bytes_per_token(&shape, dtype), source, layers: Some(shape.layers) })
    }
}

/// A connector family that counts the KV bytes it moved between
/// instances, read on the side that records it: NIXL's decode pulls,
/// Mooncake's prefill pushes. (The OffloadingConnector's bytes stay on one
/// instance and are never one of these.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XferFamily {
    /// The ledger's and report's name for the source.
    pub source: &'static str,
    pub label: &'static str,
    pub role: Role,
    pub bytes: Hist,
    pub time: Hist,
}

pub const NIXL: XferFamily = XferFamily {
    source: "nixl_bytes_transferred",
    label: "NIXL",
    role: Role::Decode,
    bytes: Hist::NixlBytes,
    time: Hist::NixlXferTime,
};
pub const MOONCAKE: XferFamily = XferFamily {
    source: "mooncake_bytes_transferred",
    label: "Mooncake",
    role: Role::Prefill,
    bytes: Hist::MooncakeBytes,
    time: Hist::MooncakeXferTime,
};
pub const XFER_FAMILIES: [XferFamily; 2] = [NIXL, MOONCAKE];

/// Observed against predicted, in words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkVerdict {
    /// Too little predicted traffic to judge.
    TooLittle,
    Ok,
    /// Under half the prediction: the KV did not move.
    FarBelow,
    /// Over 1.5 times the prediction.
    FarAbove,
}

pub fn verdict(observed: f64, predicted: f64) -> LinkVerdict {
    if predicted.is_nan() || predicted < MIN_PREDICTED_BYTES {
        LinkVerdict::TooLittle
    } else if observed < 0.5 * predicted {
        LinkVerdict::FarBelow
    } else if observed > 1.5 * predicted {
        LinkVerdict::FarAbove
    } else {
        LinkVerdict::Ok
    }
}

#[derive(Debug, Clone, Default)]
pub struct LinkState {
    pub model: Option<KvModel>,
    pub model_error: Option<String>,
    /// `--kv-cache-dtype` (auto: the model's dtype).
    pub kv_dtype: Option<KvCacheDtype>,
    /// Bytes the prefill side's prompt tokens should produce.
    pub predicted: Series,
    /// The connector's own byte count (see [`XferFamily`]).
    pub xfer: Series,
    /// Which family fills `xfer`: the first one seen. Another one's bytes
    /// (a MultiConnector of both) show on its own line, not in the ledger.
    pub xfer_family: Option<XferFamily>,
    /// The watched interface, received and sent.
    pub iface: Option<String>,
    pub iface_rx: Series,
    pub iface_tx: Series,
    pub iface_error: Option<String>,
    pub iface_resets: u32,
    netdev_prev: Option<NetDevSnapshot>,
    /// Bytes written into new or growing folders of the connector directory.
    pub kvdir: Series,
    pub kvdir_error: Option<String>,
    pub kvdir_folders: usize,
    kvdir_prev: Option<KvDirSnapshot>,
    kvdir_last_scan: f64,
    /// Each folder of the connector directory: when it appeared, its bytes.
    pub folders: std::collections::BTreeMap<String, FolderSeen>,
    /// Every interface, for finding the one that carried the KV.
    pub wires: super::wires::Wires,
    /// What decode took to compute prompts itself (for "worth it").
    pub compute: super::worth::ComputeSamples,
}

/// Folders remembered at most (the oldest are forgotten first).
const FOLDERS_CAP: usize = 10_000;

/// One folder of the connector directory, as the scans saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct FolderSeen {
    /// The scan that first listed it.
    pub first_seen: f64,
    /// The scan before that (it was written in between).
    pub prev_scan: Option<f64>,
    pub files: u64,
    pub bytes: u64,
}

impl LinkState {
    pub fn new(iface: Option<String>, model: Option<KvModel>, kv_dtype: Option<KvCacheDtype>) -> LinkState {
        LinkState { iface, model, kv_dtype, ..Default::default() }
    }

    /// A model config found through `/v1/models`, unless one was given.
    pub fn offer_config(&mut self, text: &str, root: &str) {
        if self.model.is_some() {
            return;
        }
        let source = format!("config.json of {root} (from /v1/models)");
        match KvModel::from_config(text, source, self.kv_dtype.unwrap_or(KvCacheDtype::Auto)) {
            Ok(m) => self.model = Some(m),
            Err(e) => self.model_error = Some(format!("{root}/config.json: {e}")),
        }
    }

    /// Prefill prompt tokens processed in an interval: what should move.
    pub fn on_prefill_tokens(&mut self, t: f64, tokens: f64, requests: f64) {
        let bpt = self.model.as_ref().map_or(f64::NAN, |m| m.bytes_per_token as f64);
        if tokens > 0.0 || requests > 0.0 {
            self.predicted.push(Point { t, bytes: tokens * bpt, count: requests });
        }
    }

    pub fn on_xfer(&mut self, family: XferFamily, t: f64, bytes: f64, transfers: f64) {
        if bytes > 0.0 || transfers > 0.0 {
            if *self.xfer_family.get_or_insert(family) != family {
                return;
            }
            self.xfer.push(Point { t, bytes, count: transfers });
        }
    }

    /// The source name of the connector's byte count, once it counted.
    pub fn xfer_source(&self) -> &'static str {
        self.xfer_family.map_or(NIXL.source, |f| f.source)
    }

    /// The bytes `family` counted since pdtop started (0 for another one).
    pub fn xfer_bytes_of(&self, family: XferFamily) -> f64 {
        if self.xfer_family == Some(family) { self.xfer.total_bytes } else { 0.0 }
    }

    pub fn on_netdev(&mut self, t: f64, read: Result<NetDevSnapshot, String>) {
        let snap = match read {
            Ok(s) => s,
            Err(e) => {
                self.iface_error = Some(e);
                return;
            }
        };
        self.wires.on_netdev(t, &snap);
        let Some(iface) = self.iface.clone() else {
            self.iface_error = None;
            return;
        };
        if snap.get(&iface).is_none() {
            self.iface_error = Some(format!("interface {iface} not found"));
            self.netdev_prev = Some(snap);
            return;
        }
        self.iface_error = None;
        // A first read, or an interface that just appeared, is a baseline.
        if let Some(IfaceChange::Counted { rx, tx }) =
            self.netdev_prev.as_ref().and_then(|prev| snap.change_of(prev, &iface))
        {
            // A counter that went down is a new interface: skip the step
            // rather than invent a rate.
            match (rx.bytes(), tx.bytes()) {
                (Some(r), Some(x)) => {
                    self.iface_rx.push(Point { t, bytes: r as f64, count: 0.0 });
                    self.iface_tx.push(Point { t, bytes: x as f64, count: 0.0 });
                }
                _ => self.iface_resets += 1,
            }
        }
        self.netdev_prev = Some(snap);
    }

    pub fn on_kvdir(&mut self, t: f64, scan: Result<KvDirSnapshot, String>) {
        let snap = match scan {
            Ok(s) => s,
            Err(e) => {
                self.kvdir_error = Some(e);
                return;
            }
        };
        self.kvdir_error = None;
        let prev_scan = self.kvdir_prev.as_ref().map(|_| self.kvdir_last_scan);
        for (name, stat) in &snap {
            let seen = self.folders.entry(name.clone()).or_insert(FolderSeen {
                first_seen: t,
                prev_scan,
                files: stat.files,
                bytes: stat.bytes,
            });
            seen.files = stat.files;
            seen.bytes = stat.bytes;
        }
        if self.folders.len() > FOLDERS_CAP {
            let mut by_age: Vec<(f64, String)> =
                self.folders.iter().map(|(n, f)| (f.first_seen, n.clone())).collect();
            by_age.sort_by(|a, b| a.0.total_cmp(&b.0));
            for (_, n) in by_age.into_iter().take(self.folders.len() - FOLDERS_CAP) {
                self.folders.remove(&n);
            }
        }
        self.kvdir_last_scan = t;
        if let Some(prev) = &self.kvdir_prev {
            let mut bytes = 0u64;
            let mut new = 0u64;
            for (name, stat) in &snap {
                match prev.get(name) {
                    None => {
                        new += 1;
                        bytes += stat.bytes;
                    }
                    Some(p) => bytes += stat.bytes.saturating_sub(p.bytes),
                }
            }
            if bytes > 0 || new > 0 {
                self.kvdir.push(Point { t, bytes: bytes as f64, count: new as f64 });
            }
        }
        self.kvdir_folders = snap.len();
        self.kvdir_prev = Some(snap);
    }

    /// The best observation available: the connector's own count, then the
    /// connector directory, then the interface.
    pub fn observed_since(&self, since: f64) -> Option<(&'static str, f64)> {
        if !self.xfer.points.is_empty() {
            Some((self.xfer_source(), self.xfer.since(since).0))
        } else if self.kvdir_prev.is_some() {
            Some(("kv_dir", self.kvdir.since(since).0))
        } else if self.iface.is_some() && self.netdev_prev.is_some() {
            Some(("interface_rx", self.iface_rx.since(since).0))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::netdev::parse_net_dev;

    fn netdev(lo_rx: u64) -> NetDevSnapshot {
        parse_net_dev(&format!(
            "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    lo: {lo_rx} 1 0 0 0 0 0 0 {lo_rx} 1 0 0 0 0 0 0\n"
        ))
        .unwrap()
    }

    #[test]
    fn interface_deltas_and_a_reset() {
        let mut l = LinkState::new(Some("lo".into()), None, None);
        l.on_netdev(1.0, Ok(netdev(1000)));
        l.on_netdev(2.0, Ok(netdev(5000)));
        l.on_netdev(3.0, Ok(netdev(100))); // interface recreated
        l.on_netdev(4.0, Ok(netdev(700)));
        assert_eq!(l.iface_rx.total_bytes, 4000.0 + 600.0);
        assert_eq!(l.iface_resets, 1);
        l.on_netdev(5.0, Err("gone".into()));
        assert_eq!(l.iface_error.as_deref(), Some("gone"));
        let mut l = LinkState::new(Some("eth9".into()), None, None);
        l.on_netdev(1.0, Ok(netdev(1)));
        assert!(l.iface_error.as_deref().unwrap().contains("eth9"));
    }

    #[test]
    fn verdicts() {
        let mb = 1024.0 * 1024.0;
        assert_eq!(verdict(1.09 * 100.0 * mb, 100.0 * mb), LinkVerdict::Ok);
        assert_eq!(verdict(0.2 * 100.0 * mb, 100.0 * mb), LinkVerdict::FarBelow);
        assert_eq!(verdict(3.0 * 100.0 * mb, 100.0 * mb), LinkVerdict::FarAbove);
        assert_eq!(verdict(0.0, 10.0), LinkVerdict::TooLittle);
        assert_eq!(verdict(1.0, f64::NAN), LinkVerdict::TooLittle);
    }

    #[test]
    fn kvdir_new_and_growing_folders() {
        use crate::feed::FolderStat;
        let mut l = LinkState::default();
        let snap = |v: &[(&str, u64)]| -> KvDirSnapshot {
            v.iter().map(|(n, b)| (n.to_string(), FolderStat { files: 1, bytes: *b })).collect()
        };
        l.on_kvdir(1.0, Ok(snap(&[("a", 10)])));
        l.on_kvdir(2.0, Ok(snap(&[("a", 10), ("b", 30)])));
        l.on_kvdir(3.0, Ok(snap(&[("a", 10), ("b", 50)])));
        assert_eq!(l.kvdir.total_bytes, 50.0);
        assert_eq!(l.kvdir.total_count, 1.0);
        assert_eq!(l.kvdir_folders, 2);
        l.on_kvdir(4.0, Err("gone".into()));
        assert!(l.kvdir_error.is_some());
    }
}
