//! The per-request part of `check --json`'s `kv` object: which wire
//! carried the KV, each request's bytes, the folders nobody reads, and
//! whether the split pays on this link. Flattened into `KvReport`.

use serde::Serialize;

use crate::report::kv_bytes::{Ledger, RequestBytes, build, ratio3};
use crate::state::AppState;
use crate::state::wires::{Carrier, Wires, speed_text};
use crate::state::worth::Worth;

/// The `kv_bytes` object of one trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KvBytes {
    pub predicted: Option<f64>,
    pub observed: Option<f64>,
    pub source: String,
    pub ratio: Option<f64>,
    pub confidence: &'static str,
    pub verdict: &'static str,
}

impl From<&RequestBytes> for KvBytes {
    fn from(r: &RequestBytes) -> Self {
        KvBytes {
            predicted: r.predicted,
            observed: r.observed,
            source: r.source.clone(),
            ratio: r.ratio,
            confidence: r.confidence,
            verdict: r.verdict,
        }
    }
}

/// The `kv_bytes` object for a trace id, for whoever builds per-trace output.
pub fn kv_bytes_for(ledger: &Ledger, id: &str) -> Option<KvBytes> {
    ledger.get(id).map(KvBytes::from)
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct WindowBytes {
    /// Observed over predicted, over the requests whose KV should have moved
    /// and did (the ones that moved nothing are named instead).
    pub ratio: Option<f64>,
    pub observed: f64,
    pub predicted: f64,
    pub requests: usize,
    pub moved_nothing: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct FolderSummary {
    pub stored: usize,
    /// Matched to the request that wrote it.
    pub matched: usize,
    /// Matched with the writer's token count, byte for byte.
    pub matched_by_size: usize,
    /// Written and never read (a miss's prefill folder, decode's own).
    pub unread: Vec<String>,
    pub unread_bytes: u64,
    pub text: Option<String>,
}

/// One interface, as read: its bytes over the run and what sysfs says.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct IfaceSummary {
    pub rx_bytes: f64,
    pub tx_bytes: f64,
    pub speed_mbps: Option<u64>,
    pub rdma: Option<String>,
    pub loopback: bool,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct KvRequests {
    /// Every interface read (`rdma:<dev>`: an RDMA device's port counters).
    pub interfaces: std::collections::BTreeMap<String, IfaceSummary>,
    /// `--iface`, as named.
    pub iface_named: Option<String>,
    /// The interface that carried the KV; null when nothing moved over one.
    pub carrier: Option<String>,
    pub carrier_detail: Option<Carrier>,
    /// Said loudly: the KV went over another link than the named or fastest one.
    pub wire_warning: Option<String>,
    /// Which wire, in words, always.
    pub wire: Option<String>,
    pub window: WindowBytes,
    pub requests: Vec<RequestBytes>,
    pub folders: Option<FolderSummary>,
    pub worth: Option<Worth>,
    pub unattributed_nixl_bytes: f64,
    /// Transfers that overlapped another.
    pub overlapped_transfers: usize,
}

fn mb(bytes: f64) -> String {
    if bytes >= 1e9 { format!("{:.1} GB", bytes / 1e9) } else { format!("{:.0} MB", bytes / 1e6) }
}

/// "the KV went over eth0 (1 Gb/s); ib0 carried nothing", or `None`.
fn wire_warning(state: &AppState, ledger: &Ledger) -> Option<String> {
    let named = state.link.iface.as_deref();
    warning_for(&state.link.wires, named, ledger.carrier.as_ref()?, &ledger.windows, ledger.moved)
}

/// The KV crossed `carrier`: loud when the user named another interface,
/// or when a faster (non-loopback) link sat idle.
pub fn warning_for(
    w: &Wires,
    named: Option<&str>,
    c: &Carrier,
    windows: &[(f64, f64)],
    moved: f64,
) -> Option<String> {
    let carried = |name: &str| {
        let b = w.bytes_in_windows(name, windows);
        if b < 0.05 * moved { "carried nothing".to_string() } else { format!("carried only {}", mb(b)) }
    };
    let over = format!("the KV went over {} ({})", c.name, speed_text(c.speed_mbps, c.loopback));
    if let Some(named) = named
        && named != c.name
    {
        return Some(format!("{over}, not {named} (named with --iface): {named} {}", carried(named)));
    }
    let (fast, speed) = w.fastest()?;
    let slower = c.speed_mbps.is_none_or(|s| s < speed);
    (fast != c.name && slower && !c.loopback)
        .then(|| format!("{over}; {fast} ({}) {}", speed_text(Some(speed), false), carried(fast)))
}

/// The loud line alone, for the banner on every view.
pub fn wire_warning_of(state: &AppState) -> Option<String> {
    // Nothing to compare against (no name given, no speeds known): skip
    // building the ledger on every frame.
    let w = &state.link.wires;
    if w.reads < 2 || (state.link.iface.is_none() && w.fastest().is_none()) {
        return None;
    }
    wire_warning(state, &build(state))
}

fn wire_text(state: &AppState, ledger: &Ledger) -> Option<String> {
    if let Some(c) = &ledger.carrier {
        let kind = if c.loopback {
            "loopback: both instances on one host".into()
        } else {
            speed_text(c.speed_mbps, false)
        };
        return Some(format!(
            "the KV went over {} ({kind}): {:.0}% of the bytes moved showed there",
            c.name,
            c.share * 100.0
        ));
    }
    if ledger.moved <= 0.0 {
        return None;
    }
    let via_dir = ledger.requests.iter().any(|r| r.source == "kv_dir" && r.observed.unwrap_or(0.0) > 0.0);
    Some(if via_dir {
        "the KV went through the connector directory: no interface's traffic matches it".into()
    } else if state.link.wires.reads == 0 {
        "which wire carried the KV is unknown: no interface counters read".into()
    } else {
        format!(
            "{} moved, but no interface's counters show it (RDMA bypasses /proc/net/dev; /sys/class/infiniband shows its ports)",
            mb(ledger.moved)
        )
    })
}

fn folders(ledger: &Ledger) -> Option<FolderSummary> {
    if ledger.folders.is_empty() {
        return None;
    }
    let unread: Vec<&crate::report::kv_ledger::FolderMatch> =
        ledger.folders.iter().filter(|f| !f.read).collect();
    let unread_bytes = unread.iter().map(|f| f.bytes).sum::<u64>();
    let text = (!unread.is_empty()).then(|| {
        format!(
            "the directory is filling up with blocks nobody reads: {} of {} folders, {}",
            unread.len(),
            ledger.folders.len(),
            mb(unread_bytes as f64)
        )
    });
    Some(FolderSummary {
        stored: ledger.folders.len(),
        matched: ledger.folders.iter().filter(|f| f.request.is_some()).count(),
        matched_by_size: ledger.folders.iter().filter(|f| f.matched_by == "time and size").count(),
        unread: unread.iter().map(|f| f.name.clone()).collect(),
        unread_bytes,
        text,
    })
}

impl KvRequests {
    pub fn from_state(state: &AppState) -> KvRequests {
        Self::from_ledger(state, &build(state))
    }

    pub fn from_ledger(state: &AppState, ledger: &Ledger) -> KvRequests {
        let window = match ledger.ratio() {
            Some((o, p, n)) => WindowBytes {
                ratio: ratio3(o, p),
                observed: o,
                predicted: p,
                requests: n,
                moved_nothing: Vec::new(),
            },
            None => WindowBytes::default(),
        };
        let window = WindowBytes {
            moved_nothing: ledger.moved_nothing().into_iter().map(str::to_owned).collect(),
            ..window
        };
        let bpt = state.link.model.as_ref().map(|m| m.bytes_per_token);
        let block = state.instances_of(crate::feed::Role::Decode).find_map(|i| i.block_size()).unwrap_or(16);
        let worth =
            bpt.zip(crate::report::kv_nixl::rate(state, ledger)).and_then(|(b, (link, rate, src))| {
                crate::state::worth::worth(&state.link.compute, &link, b, u64::from(block), rate, src)
            });
        let w = &state.link.wires;
        let names = w.ifaces.keys().chain(w.links.keys());
        let interfaces = names
            .map(|n| {
                let s = w.ifaces.get(n);
                let l = w.links.get(n).cloned().unwrap_or_default();
                let summary = IfaceSummary {
                    rx_bytes: s.map_or(0.0, |s| s.rx.total_bytes),
                    tx_bytes: s.map_or(0.0, |s| s.tx.total_bytes),
                    speed_mbps: l.speed_mbps,
                    rdma: l.rdma,
                    loopback: l.loopback || n == "lo",
                };
                (n.clone(), summary)
            })
            .collect();
        KvRequests {
            interfaces,
            iface_named: state.link.iface.clone(),
            carrier: ledger.carrier.as_ref().map(|c| c.name.clone()),
            carrier_detail: ledger.carrier.clone(),
            wire_warning: wire_warning(state, ledger),
            wire: wire_text(state, ledger),
            window,
            requests: ledger.requests.clone(),
            folders: folders(ledger),
            worth,
            unattributed_nixl_bytes: ledger.unattributed_nixl_bytes,
            overlapped_transfers: ledger.overlapped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feed::{IfaceBytes, LinkInfo, NetDevSnapshot};

    fn snap(eth: u64, ib: u64) -> NetDevSnapshot {
        let mut s = NetDevSnapshot::default();
        s.ifaces.insert("eth0".into(), IfaceBytes { rx_bytes: eth, tx_bytes: 0 });
        s.ifaces.insert("ib0".into(), IfaceBytes { rx_bytes: ib, tx_bytes: 0 });
        s.links.insert("eth0".into(), LinkInfo { speed_mbps: Some(1000), ..Default::default() });
        let ib = LinkInfo { speed_mbps: Some(100_000), rdma: Some("mlx5_0".into()), loopback: false };
        s.links.insert("ib0".into(), ib);
        s
    }

    #[test]
    fn the_slow_wire_is_named_beside_the_idle_fast_one() {
        let mut w = Wires::default();
        w.on_netdev(1.0, &snap(0, 0));
        w.on_netdev(2.0, &snap(500_000_000, 10));
        let windows = [(1.0, 2.0)];
        let c = w.carrier(&windows, 480e6).unwrap();
        assert_eq!((c.name.as_str(), c.speed_mbps), ("eth0", Some(1000)));
        assert_eq!(
            warning_for(&w, None, &c, &windows, 480e6).as_deref(),
            Some("the KV went over eth0 (1 Gb/s); ib0 (100 Gb/s) carried nothing")
        );
        assert_eq!(
            warning_for(&w, Some("ib0"), &c, &windows, 480e6).as_deref(),
            Some("the KV went over eth0 (1 Gb/s), not ib0 (named with --iface): ib0 carried nothing")
        );
        // Over the fast one, as named: nothing to say.
        let mut w = Wires::default();
        w.on_netdev(1.0, &snap(0, 0));
        w.on_netdev(2.0, &snap(10, 500_000_000));
        let c = w.carrier(&windows, 480e6).unwrap();
        assert_eq!(c.name, "ib0");
        assert_eq!(warning_for(&w, Some("ib0"), &c, &windows, 480e6), None);
    }
}
