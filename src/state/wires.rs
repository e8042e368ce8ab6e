//! Every interface's byte counters, and which of them carried the KV.
//!
//! A transport library picks its interface by itself (UCX_NET_DEVICES,
//! VLLM_NIXL_SIDE_CHANNEL_HOST) and reports nothing when it picks the
//! management link. So pdtop reads every interface and asks which one's
//! traffic, inside the transfer windows, adds up to the bytes moved.

use std::collections::BTreeMap;

use super::series::{Point, Series};
use crate::feed::{LinkInfo, NetDevSnapshot};
use crate::sources::netdev::IfaceChange;

/// Interfaces followed at most (a host with hundreds of veths keeps the first).
const MAX_IFACES: usize = 64;
/// Share of the moved bytes an interface must show inside the transfer
/// windows to be the carrier. Loopback in the NIXL lab shows 1.0 to 1.1.
pub const CARRIER_MIN_SHARE: f64 = 0.5;

#[derive(Debug, Clone, Default)]
pub struct IfaceSeries {
    pub rx: Series,
    pub tx: Series,
}

impl IfaceSeries {
    /// Bytes in `(from, to]`, the larger direction (a receiver's rx, a
    /// sender's tx; both on loopback).
    pub fn bytes_in(&self, from: f64, to: f64) -> f64 {
        let sum =
            |s: &Series| s.points.iter().filter(|p| p.t > from && p.t <= to).map(|p| p.bytes).sum::<f64>();
        sum(&self.rx).max(sum(&self.tx))
    }
}

#[derive(Debug, Clone, Default)]
pub struct Wires {
    pub ifaces: BTreeMap<String, IfaceSeries>,
    /// sysfs facts of the last read that had them.
    pub links: BTreeMap<String, LinkInfo>,
    /// Reads so far (the first is a baseline).
    pub reads: u64,
    prev: Option<NetDevSnapshot>,
}

/// The interface that carried the KV, and how well its traffic matched.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Carrier {
    pub name: String,
    /// Its bytes inside the transfer windows against the bytes moved.
    pub share: f64,
    pub speed_mbps: Option<u64>,
    pub loopback: bool,
    pub rdma: bool,
}

impl Wires {
    pub fn on_netdev(&mut self, t: f64, snap: &NetDevSnapshot) {
        self.reads += 1;
        if !snap.links.is_empty() {
            self.links = snap.links.clone();
        }
        if let Some(prev) = &self.prev {
            for (name, change) in snap.changes_since(prev) {
                let IfaceChange::Counted { rx, tx } = change else { continue };
                if !self.ifaces.contains_key(&name) && self.ifaces.len() >= MAX_IFACES {
                    continue;
                }
                // A counter that went down is a recreated interface: no step.
                if let (Some(r), Some(x)) = (rx.bytes(), tx.bytes()) {
                    let s = self.ifaces.entry(name).or_default();
                    s.rx.push(Point { t, bytes: r as f64, count: 0.0 });
                    s.tx.push(Point { t, bytes: x as f64, count: 0.0 });
                }
            }
        }
        self.prev = Some(snap.clone());
    }

    pub fn speed_mbps(&self, name: &str) -> Option<u64> {
        self.links.get(name).and_then(|l| l.speed_mbps)
    }

    /// Bytes of one interface summed over windows (merged first, so
    /// overlapping transfers do not count the same traffic twice).
    pub fn bytes_in_windows(&self, name: &str, windows: &[(f64, f64)]) -> f64 {
        let Some(s) = self.ifaces.get(name) else { return 0.0 };
        merge(windows).iter().map(|(a, b)| s.bytes_in(*a, *b)).sum()
    }

    /// The interface whose traffic inside `windows` best accounts for
    /// `moved` bytes; `None` when none shows at least half of them (the
    /// KV went through a shared directory, or a path no counter sees).
    pub fn carrier(&self, windows: &[(f64, f64)], moved: f64) -> Option<Carrier> {
        if moved <= 0.0 || windows.is_empty() {
            return None;
        }
        self.ifaces
            .keys()
            .map(|name| (name, self.bytes_in_windows(name, windows) / moved))
            .filter(|(_, share)| *share >= CARRIER_MIN_SHARE)
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(name, share)| {
                let info = self.links.get(name).cloned().unwrap_or_default();
                Carrier {
                    name: name.clone(),
                    share: (share * 1000.0).round() / 1000.0,
                    speed_mbps: info.speed_mbps,
                    loopback: info.loopback || name == "lo",
                    rdma: info.rdma.is_some(),
                }
            })
    }

    /// The fastest link sysfs knows of (RDMA first on a tie), if any.
    pub fn fastest(&self) -> Option<(&str, u64)> {
        self.links
            .iter()
            .filter(|(n, l)| !l.loopback && !n.starts_with("rdma:"))
            .filter_map(|(n, l)| Some((n.as_str(), l.speed_mbps?, l.rdma.is_some())))
            .max_by_key(|(_, s, r)| (*s, *r))
            .map(|(n, s, _)| (n, s))
    }
}

/// Sorted, overlapping windows joined.
pub fn merge(windows: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut w: Vec<(f64, f64)> = windows.iter().copied().filter(|(a, b)| b >= a).collect();
    w.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (a, b) in w {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// "1 Gb/s", "100 Gb/s", "25.0 Gb/s"; `None` speed: what kind of link it is.
pub fn speed_text(speed_mbps: Option<u64>, loopback: bool) -> String {
    match speed_mbps {
        Some(m) if m % 1000 == 0 => format!("{} Gb/s", m / 1000),
        Some(m) if m >= 1000 => format!("{:.1} Gb/s", m as f64 / 1000.0),
        Some(m) => format!("{m} Mb/s"),
        None if loopback => "loopback".into(),
        None => "speed unknown".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feed::IfaceBytes;

    fn snap(lo: u64, eth: u64) -> NetDevSnapshot {
        let mut s = NetDevSnapshot::default();
        s.ifaces.insert("lo".into(), IfaceBytes { rx_bytes: lo, tx_bytes: lo });
        s.ifaces.insert("eth0".into(), IfaceBytes { rx_bytes: eth, tx_bytes: 0 });
        s.links.insert("eth0".into(), LinkInfo { speed_mbps: Some(1000), ..Default::default() });
        s
    }

    #[test]
    fn the_carrier_is_the_interface_whose_traffic_matches_the_windows() {
        let mut w = Wires::default();
        w.on_netdev(1.0, &snap(0, 0));
        w.on_netdev(2.0, &snap(100, 5));
        w.on_netdev(3.0, &snap(1100, 10));
        w.on_netdev(4.0, &snap(1150, 15));
        // One transfer of 1000 bytes between 2 and 3.
        let c = w.carrier(&[(2.0, 3.0)], 1000.0).unwrap();
        assert_eq!((c.name.as_str(), c.share), ("lo", 1.0));
        assert!(c.loopback);
        // Overlapping windows count the traffic once.
        assert_eq!(w.bytes_in_windows("lo", &[(2.0, 3.0), (2.5, 3.0)]), 1000.0);
        // Nothing matches: no carrier, rather than the busiest link.
        assert_eq!(w.carrier(&[(3.0, 4.0)], 1000.0), None);
        assert_eq!(w.carrier(&[], 1000.0), None);
        assert_eq!(w.fastest(), Some(("eth0", 1000)));
        assert_eq!(speed_text(Some(1000), false), "1 Gb/s");
        assert_eq!(speed_text(None, true), "loopback");
    }
}
