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

/// Adds sysfs facts to a `/proc/net/dev` read: each interface's speed, and
/// one `rdma:<dev>` entry per RDMA device (bytes from its ports' counters,
/// which count 4-byte words).
pub fn annotate(snap: &mut NetDevSnapshot, roots: &SysRoots) {
    let mut links: BTreeMap<String, LinkInfo> = BTreeMap::new();
    for name in snap.ifaces.keys() {
        let mut info = LinkInfo { loopback: name == "lo", ..Default::default() };
        if let Some(net) = &roots.net {
            let dir = net.join(name);
            info.speed_mbps =
                read_trim(&dir.join("speed")).and_then(|s| s.parse::<i64>().ok()).and_then(|v| {
                    // -1 / 0: no carrier or a virtual link.
                    (v > 0).then_some(v as u64)
                });
            info.loopback |= read_trim(&dir.join("type")).as_deref() == Some("772");
        }
        links.insert(name.clone(), info);
    }
    if let Some(ib) = &roots.infiniband
        && let Ok(devs) = std::fs::read_dir(ib)
    {
        for dev in devs.flatten() {
            let dev_name = dev.file_name().to_string_lossy().into_owned();
            let (mut rx, mut tx, mut speed) = (0u64, 0u64, None::<u64>);
            if let Ok(ports) = std::fs::read_dir(dev.path().join("ports")) {
                for port in ports.flatten() {
                    let c = |f: &str| {
                        read_trim(&port.path().join("counters").join(f)).and_then(|s| s.parse::<u64>().ok())
                    };
                    rx += c("port_rcv_data").unwrap_or(0).saturating_mul(4);
                    tx += c("port_xmit_data").unwrap_or(0).saturating_mul(4);
                    let r = read_trim(&port.path().join("rate")).and_then(|r| rate_mbps(&r));
                    speed = speed.max(r);
                }
            }
            // The net interfaces this device backs (ib0, or a RoCE eth).
            if let Ok(nets) = std::fs::read_dir(dev.path().join("device/net")) {
                for n in nets.flatten() {
                    let name = n.file_name().to_string_lossy().into_owned();
                    if let Some(info) = links.get_mut(&name) {
                        info.rdma = Some(dev_name.clone());
                        info.speed_mbps = info.speed_mbps.or(speed);
                    }
                }
            }
            let key = format!("rdma:{dev_name}");
            snap.ifaces.insert(key.clone(), IfaceBytes { rx_bytes: rx, tx_bytes: tx });
            links.insert(key, LinkInfo { speed_mbps: speed, rdma: Some(dev_name), loopback: false });
        }
    }
    snap.links = links;
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
        annotate(&mut snap, &SysRoots { net: Some(root.join("net")), infiniband: Some(root.join("ib")) });
        assert_eq!(snap.links["eth0"].speed_mbps, Some(1000));
        assert!(snap.links["lo"].loopback);
        assert_eq!(snap.links["ib0"].rdma.as_deref(), Some("mlx5_0"));
        assert_eq!(snap.links["ib0"].speed_mbps, Some(200_000));
        assert_eq!(snap.ifaces["rdma:mlx5_0"], IfaceBytes { rx_bytes: 1000, tx_bytes: 20 });
        // Roots that do not exist: names only, nothing invented.
        let mut bare = snap.clone();
        bare.ifaces.remove("rdma:mlx5_0");
        annotate(&mut bare, &SysRoots { net: Some(root.join("nope")), infiniband: None });
        assert_eq!(bare.links["eth0"].speed_mbps, None);
        std::fs::remove_dir_all(&root).ok();
    }
}
