//! What sysfs says about each link: `/sys/class/net/<if>/speed` (Mb/s;
//! virtual links such as lo answer with an error or -1) and the RDMA
//! devices under `/sys/class/infiniband`, whose traffic never shows in
//! `/proc/net/dev` (verbs bypass the kernel's stack): their port counters
//! are read as `rdma:<device>` entries. Both roots are injectable so tests
//! read a tree of their own.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::feed::{IfaceBytes, LinkInfo, NetDevSnapshot};

/// Where the sysfs classes live (`/sys/class/net`, `/sys/class/infiniband`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysRoots {
    pub net: Option<PathBuf>,
    pub infiniband: Option<PathBuf>,
}

impl SysRoots {
    pub fn system() -> SysRoots {
        SysRoots {
            net: Some(PathBuf::from("/sys/class/net")),
            infiniband: Some(PathBuf::from("/sys/class/infiniband")),
        }
    }
}

fn read_trim(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

/// `"100 Gb/sec (4X EDR)"` → 100000 Mb/s.
fn rate_mbps(text: &str) -> Option<u64> {
    let mut it = text.split_whitespace();
    let n: f64 = it.next()?.parse().ok()?;
    let unit = it.next().unwrap_or("Gb/sec");
    let mbps = if unit.starts_with('G') { n * 1000.0 } else { n };
    (mbps > 0.0).then_some(mbps as u64)
}

/// How long what sysfs says of a link (speed, type, which RDMA device
/// backs it, its ports) is taken as still true: a link renegotiates or
/// gains a device rarely, and reading every attribute every second was
/// most of the link poller's work. Counters are read every round.
pub const FACTS_FOR_S: f64 = 60.0;

/// One RDMA device as sysfs lays it out: its ports' counter files, its
/// fastest port's rate, and the net interfaces it backs.
#[derive(Debug, Clone)]
struct RdmaDevice {
    name: String,
    counters: Vec<(PathBuf, PathBuf)>,
    speed_mbps: Option<u64>,
    nets: Vec<String>,
}

/// Reads sysfs for [`annotate`](SysNet::annotate), keeping the facts that
/// seldom change for [`FACTS_FOR_S`] and reading a new interface's at once.
#[derive(Debug)]
pub struct SysNet {
    roots: SysRoots,
    /// When the facts below were read (the poller's clock), if ever.
    read_at: Option<f64>,
    links: BTreeMap<String, LinkInfo>,
    rdma: Vec<RdmaDevice>,
}

impl SysNet {
    pub fn new(roots: SysRoots) -> SysNet {
        SysNet { roots, read_at: None, links: BTreeMap::new(), rdma: Vec::new() }
    }

    /// Adds sysfs facts to a `/proc/net/dev` read taken at `now`: each
    /// interface's speed, and one `rdma:<dev>` entry per RDMA device (bytes
    /// from its ports' counters, which count 4-byte words).
    pub fn annotate(&mut self, snap: &mut NetDevSnapshot, now: f64) {
        let stale = self.read_at.is_none_or(|t| !(now - t < FACTS_FOR_S && now >= t));
        if stale {
            self.links.clear();
            self.rdma = self.roots.infiniband.as_deref().map(rdma_devices).unwrap_or_default();
            self.read_at = Some(now);
        }
        let mut links: BTreeMap<String, LinkInfo> = BTreeMap::new();
        for name in snap.ifaces.keys() {
            let info = match self.links.get(name) {
                Some(info) => info.clone(),
                None => {
                    let info = self.link_info(name);
                    self.links.insert(name.clone(), info.clone());
                    info
                }
            };
            links.insert(name.clone(), info);
        }
        for dev in &self.rdma {
            let (mut rx, mut tx) = (0u64, 0u64);
            for (rcv, xmit) in &dev.counters {
                let c = |p: &Path| read_trim(p).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
                rx += c(rcv).saturating_mul(4);
                tx += c(xmit).saturating_mul(4);
            }
            let key = format!("rdma:{}", dev.name);
            snap.ifaces.insert(key.clone(), IfaceBytes { rx_bytes: rx, tx_bytes: tx });
            links.insert(
                key,
                LinkInfo { speed_mbps: dev.speed_mbps, rdma: Some(dev.name.clone()), loopback: false },
            );
        }
        snap.links = links;
    }

    fn link_info(&self, name: &str) -> LinkInfo {
        let mut info = LinkInfo { loopback: name == "lo", ..Default::default() };
        if let Some(net) = &self.roots.net {
            let dir = net.join(name);
            info.speed_mbps =
                read_trim(&dir.join("speed")).and_then(|s| s.parse::<i64>().ok()).and_then(|v| {
                    // -1 / 0: no carrier or a virtual link.
                    (v > 0).then_some(v as u64)
                });
            info.loopback |= read_trim(&dir.join("type")).as_deref() == Some("772");
        }
        if let Some(dev) = self.rdma.iter().find(|d| d.nets.iter().any(|n| n == name)) {
            info.rdma = Some(dev.name.clone());
            info.speed_mbps = info.speed_mbps.or(dev.speed_mbps);
        }
        info
    }
}

/// The RDMA devices under `ib`, with their ports and the interfaces they
/// back (ib0, or a RoCE eth).
fn rdma_devices(ib: &Path) -> Vec<RdmaDevice> {
    let Ok(devs) = std::fs::read_dir(ib) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for dev in devs.flatten() {
        let mut d = RdmaDevice {
            name: dev.file_name().to_string_lossy().into_owned(),
            counters: Vec::new(),
            speed_mbps: None,
            nets: Vec::new(),
        };
        if let Ok(ports) = std::fs::read_dir(dev.path().join("ports")) {
            for port in ports.flatten() {
                let counters = port.path().join("counters");
                d.counters.push((counters.join("port_rcv_data"), counters.join("port_xmit_data")));
                let r = read_trim(&port.path().join("rate")).and_then(|r| rate_mbps(&r));
                d.speed_mbps = d.speed_mbps.max(r);
            }
        }
        if let Ok(nets) = std::fs::read_dir(dev.path().join("device/net")) {
            d.nets = nets.flatten().map(|n| n.file_name().to_string_lossy().into_owned()).collect();
        }
        out.push(d);
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speeds_and_rdma_ports_from_a_sysfs_tree() {
        let root = std::env::temp_dir().join(format!("pdtop-sysnet-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let w = |p: &str, s: &str| {
            let p = root.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, s).unwrap();
        };
        w("net/eth0/speed", "1000\n");
        w("net/ib0/speed", "-1\n");
        w("net/lo/type", "772\n");
        w("ib/mlx5_0/ports/1/rate", "200 Gb/sec (4X HDR)\n");
        w("ib/mlx5_0/ports/1/counters/port_rcv_data", "250\n");
        w("ib/mlx5_0/ports/1/counters/port_xmit_data", "5\n");
        w("ib/mlx5_0/device/net/ib0/ifindex", "4\n");
        let mut snap = crate::sources::netdev::parse_net_dev(
            "Inter-|\n face |\n lo: 1 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n eth0: 2 1 0 0 0 0 0 0 2 1 0 0 0 0 0 0\n ib0: 3 1 0 0 0 0 0 0 3 1 0 0 0 0 0 0\n",
        )
        .unwrap();
        let mut sys =
            SysNet::new(SysRoots { net: Some(root.join("net")), infiniband: Some(root.join("ib")) });
        let fresh = snap.clone();
        sys.annotate(&mut snap, 100.0);
        assert_eq!(snap.links["eth0"].speed_mbps, Some(1000));
        assert!(snap.links["lo"].loopback);
        assert_eq!(snap.links["ib0"].rdma.as_deref(), Some("mlx5_0"));
        assert_eq!(snap.links["ib0"].speed_mbps, Some(200_000));
        assert_eq!(snap.ifaces["rdma:mlx5_0"], IfaceBytes { rx_bytes: 1000, tx_bytes: 20 });
        // Within the minute the counters are read again, the speed is not;
        // an interface not seen before is read at once.
        w("net/eth0/speed", "25000\n");
        w("net/eth1/speed", "100000\n");
        w("ib/mlx5_0/ports/1/counters/port_rcv_data", "300\n");
        let mut again = fresh.clone();
        again.ifaces.insert("eth1".into(), IfaceBytes { rx_bytes: 0, tx_bytes: 0 });
        let mut later = again.clone();
        sys.annotate(&mut again, 100.0 + FACTS_FOR_S - 1.0);
        assert_eq!(again.links["eth0"].speed_mbps, Some(1000));
        assert_eq!(again.links["eth1"].speed_mbps, Some(100_000));
        assert_eq!(again.ifaces["rdma:mlx5_0"].rx_bytes, 1200);
        // A minute on, every fact is read afresh.
        sys.annotate(&mut later, 100.0 + FACTS_FOR_S);
        assert_eq!(later.links["eth0"].speed_mbps, Some(25_000));
        // Roots that do not exist: names only, nothing invented.
        let mut bare = fresh.clone();
        SysNet::new(SysRoots { net: Some(root.join("nope")), infiniband: None }).annotate(&mut bare, 0.0);
        assert_eq!(bare.links["eth0"].speed_mbps, None);
        assert!(!bare.ifaces.contains_key("rdma:mlx5_0"));
        std::fs::remove_dir_all(&root).ok();
    }
}
