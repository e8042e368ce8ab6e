//! The host's interfaces: state and speed from sysfs, addresses from
//! `/proc`, and which interface carries the default route.
//!
//! IPv4 addresses: `/proc/net/fib_trie` lists every local address as a
//! `/32 host LOCAL` leaf but names no interface, so each is placed on the
//! interface of the most specific directly connected route in
//! `/proc/net/route` that contains it; `127/8` goes to the loopback. An
//! address no connected route contains (a `/32` handed out by a cloud, a
//! point-to-point peer) is listed in `unplaced` rather than guessed. IPv6
//! addresses come with their interface in `/proc/net/if_inet6`. Interface
//! names come from `<net>/dev`, which is per network namespace (sysfs is
//! the mounting namespace's).

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

use serde::Serialize;

use super::root::{ProcRoot, Unreadable, read_text};
use crate::sources::sysnet::SysRoots;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Interface {
    pub name: String,
    /// sysfs `operstate` (`up`, `down`, `unknown` for lo and many virtual links).
    pub operstate: Option<String>,
    /// sysfs `speed` in Mb/s; `None` where it is -1, 0 or unreadable.
    pub speed_mbps: Option<u64>,
    /// sysfs `type` 772 (ARPHRD_LOOPBACK), or named `lo`.
    pub loopback: bool,
    pub addrs: Vec<IpAddr>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Interfaces {
    pub list: Vec<Interface>,
    /// The interface of the default route (IPv4, else IPv6), lowest metric.
    pub default_route: Option<String>,
    /// Local IPv4 addresses no connected route places on an interface.
    pub unplaced: Vec<Ipv4Addr>,
    /// What could not be read, and why.
    pub unread: Vec<Unreadable>,
}

/// `/32 host LOCAL` leaves of `fib_trie`, each once (the Main and Local
/// tables both list them).
pub fn parse_fib_trie_local(text: &str) -> Vec<Ipv4Addr> {
    let mut out = Vec::new();
    let mut leaf: Option<Ipv4Addr> = None;
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(ip) = t.strip_prefix("|-- ") {
            leaf = ip.trim().parse().ok();
        } else if t.starts_with("/32 host LOCAL")
            && let Some(ip) = leaf
            && !out.contains(&ip)
        {
            out.push(ip);
        }
    }
    out
}

/// `if_inet6` rows: address (32 hex digits, network order), index, prefix
/// length, scope, flags, name.
pub fn parse_if_inet6(text: &str) -> Vec<(String, Ipv6Addr)> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let hex = f.first().filter(|h| h.len() == 32)?;
            let n = u128::from_str_radix(hex, 16).ok()?;
            Some((f.get(5)?.to_string(), Ipv6Addr::from(n)))
        })
        .collect()
}

/// Interface names of `<net>/dev` (after its two header lines).
pub fn parse_dev_names(text: &str) -> Vec<String> {
    text.lines().skip(2).filter_map(|l| Some(l.split_once(':')?.0.trim().to_string())).collect()
}

fn prefix_len(mask: Ipv4Addr) -> u32 {
    u32::from(mask).count_ones()
}

fn contains(dest: Ipv4Addr, mask: Ipv4Addr, ip: Ipv4Addr) -> bool {
    u32::from(ip) & u32::from(mask) == u32::from(dest) & u32::from(mask)
}

const RTF_GATEWAY: u16 = 0x2;

/// One row of `<net>/route`, the fields read here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub iface: String,
    pub destination: Ipv4Addr,
    pub flags: u16,
    pub metric: u32,
    pub mask: Ipv4Addr,
}

/// A `route` address: the kernel prints the network-order word as a
/// host-order `%08X`, so `0100007F` is 127.0.0.1 on the little-endian hosts
/// vLLM runs on (read the same way as `tcp`, whatever machine reads it).
fn route_addr(hex: &str) -> Option<Ipv4Addr> {
    Some(Ipv4Addr::from(u32::from_str_radix(hex, 16).ok()?.to_le_bytes()))
}

/// `<net>/route` rows after its header: Iface, Destination, Gateway, Flags,
/// RefCnt, Use, Metric, Mask, MTU, Window, IRTT. A row that does not parse
/// is skipped.
pub fn parse_routes(text: &str) -> Vec<Route> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some(Route {
                iface: f.first()?.to_string(),
                destination: route_addr(f.get(1)?)?,
                flags: u16::from_str_radix(f.get(3)?, 16).ok()?,
                metric: f.get(6)?.parse().ok()?,
                mask: route_addr(f.get(7)?)?,
            })
        })
        .collect()
}

/// The interface of each address, by the most specific connected route.
fn place(ip: Ipv4Addr, routes: &[Route]) -> Option<String> {
    routes
        .iter()
        .filter(|r| r.flags & RTF_GATEWAY == 0 && contains(r.destination, r.mask, ip))
        .max_by_key(|r| prefix_len(r.mask))
        .map(|r| r.iface.clone())
}

fn default_v4(routes: &[Route]) -> Option<String> {
    routes
        .iter()
        .filter(|r| u32::from(r.destination) == 0 && u32::from(r.mask) == 0)
        .min_by_key(|r| r.metric)
        .map(|r| r.iface.clone())
}

/// `ipv6_route`: dest, dest plen, src, src plen, next hop, metric, refcnt,
/// use, flags, iface. The kernel's unreachable default sits on `lo`.
fn default_v6(text: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let metric = u32::from_str_radix(f.get(5)?, 16).ok()?;
            let default = f[0].bytes().all(|b| b == b'0') && f.get(1)? == &"00" && f.get(9)? != &"lo";
            default.then(|| (metric, f[9].to_string()))
        })
        .min()
        .map(|(_, i)| i)
}

fn sys_attr(dir: &Path, name: &str) -> Option<String> {
    std::fs::read_to_string(dir.join(name)).ok().map(|s| s.trim().to_string())
}

pub fn read_interfaces(root: &ProcRoot, sys: &SysRoots) -> Interfaces {
    let net = root.net();
    let mut out = Interfaces::default();
    let mut ok = |r: Result<String, Unreadable>| r.map_err(|e| out.unread.push(e)).ok();
    let dev = ok(read_text(&net.join("dev"), None));
    let fib = ok(read_text(&net.join("fib_trie"), None));
    let route = ok(read_text(&net.join("route"), None));
    let inet6 = read_text(&net.join("if_inet6"), None).ok(); // absent without IPv6
    let route6 = read_text(&net.join("ipv6_route"), None).ok();

    let mut names = dev.as_deref().map(parse_dev_names).unwrap_or_default();
    if names.is_empty()
        && let Some(Ok(d)) = sys.net.as_ref().map(std::fs::read_dir)
    {
        names = d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    }
    names.sort();
    let mut by_name: BTreeMap<String, Interface> = names
        .into_iter()
        .map(|name| {
            let mut i = Interface { loopback: name == "lo", name: name.clone(), ..Default::default() };
            if let Some(dir) = sys.net.as_ref().map(|n| n.join(&name)) {
                i.operstate = sys_attr(&dir, "operstate");
                i.speed_mbps = sys_attr(&dir, "speed")
                    .and_then(|s| s.parse::<i64>().ok())
                    .and_then(|v| (v > 0).then_some(v as u64));
                i.loopback |= sys_attr(&dir, "type").as_deref() == Some("772");
            }
            (name, i)
        })
        .collect();

    let routes = route.as_deref().map(parse_routes).unwrap_or_default();
    out.default_route = default_v4(&routes).or_else(|| route6.as_deref().and_then(default_v6));
    for ip in fib.as_deref().map(parse_fib_trie_local).unwrap_or_default() {
        let iface = if ip.is_loopback() {
            by_name.values().find(|i| i.loopback).map(|i| i.name.clone())
        } else {
            place(ip, &routes)
        };
        match iface.and_then(|n| by_name.get_mut(&n)) {
            Some(i) => i.addrs.push(IpAddr::V4(ip)),
            None => out.unplaced.push(ip),
        }
    }
    for (name, ip) in inet6.as_deref().map(parse_if_inet6).unwrap_or_default() {
        if let Some(i) = by_name.get_mut(&name) {
            i.addrs.push(IpAddr::V6(ip));
        }
    }
    out.list = by_name.into_values().collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // Default via 192.0.2.1 on eth0, the connected 192.0.2.0/24, and a
    // second default (via 10.0.10.1 on eth1) of higher metric.
    const ROUTE: &str = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0
eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
eth1\t00000000\t010A000A\t0003\t0\t0\t100\t00000000\t0\t0\t0
";

    #[test]
    fn routes_parse_in_network_order() {
        let r = parse_routes(ROUTE);
        assert_eq!(r.len(), 3);
        assert_eq!(r[1].destination, Ipv4Addr::new(192, 0, 2, 0));
        assert_eq!(r[1].mask, Ipv4Addr::new(255, 255, 255, 0));
        assert_eq!((r[2].flags, r[2].metric), (3, 100));
        assert_eq!(default_v4(&r).as_deref(), Some("eth0"));
        assert_eq!(place(Ipv4Addr::new(192, 0, 2, 7), &r).as_deref(), Some("eth0"));
        assert_eq!(place(Ipv4Addr::new(10, 0, 0, 7), &r), None);
    }

    #[test]
    fn a_bad_route_row_is_skipped_alone() {
        let text =
            format!("{ROUTE}eth2\tnothex\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\nshort\t00000000\n");
        assert_eq!(parse_routes(&text), parse_routes(ROUTE));
    }
}
