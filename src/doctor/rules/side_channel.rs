//! The NIXL side channel: every NIXL instance (prefill and decode) binds a
//! ZMQ listener on `VLLM_NIXL_SIDE_CHANNEL_HOST:VLLM_NIXL_SIDE_CHANNEL_PORT
//! + DP index` (defaults `localhost`, 5600 since v0.11.1, 5557 before;
//! `vllm/envs.py`), and the prefill advertises that host to the decode in
//! each request's `kv_transfer_params`.

use std::net::IpAddr;

use crate::doctor::facts::{InstanceFacts, PairFacts};
use crate::doctor::finding::{Finding, Severity};
use crate::doctor::loglines::BindFailure;
use crate::feed::Role;

const HOST_VAR: &str = "VLLM_NIXL_SIDE_CHANNEL_HOST";
const PORT_VAR: &str = "VLLM_NIXL_SIDE_CHANNEL_PORT";

/// Where an instance's listener binds, and how that is known.
#[derive(Debug, Clone, PartialEq)]
pub struct SideChannel {
    pub host: String,
    pub port: u16,
    /// Data-parallel engines: engine N binds `port + N`.
    pub dp: u16,
    /// Where its process tree listens in that port range.
    pub bound: Vec<std::net::SocketAddr>,
    /// `VLLM_NIXL_SIDE_CHANNEL_PORT=5601 (environ of PID 12)`, or the default.
    pub evidence: Vec<String>,
}

/// The default port of a version: 5557 moved to 5600 in v0.11.1
/// (vllm#25059: it collided with the KV-events port).
fn default_port(version: Option<&str>) -> u16 {
    let v: Vec<u32> = version.unwrap_or("").split('.').map_while(|p| p.parse().ok()).collect();
    match v.as_slice() {
        [0, minor, ..] if *minor < 11 => 5557,
        [0, 11, 0, ..] => 5557,
        _ => 5600,
    }
}

/// A NIXL instance's side channel, when its environment could be read.
pub fn side_channel(i: &InstanceFacts) -> Option<SideChannel> {
    if !i.is_nixl() {
        return None;
    }
    let proc = i.process.as_ref()?;
    let pid = proc.pid;
    let host_var = i.env(HOST_VAR).ok()?;
    let port_var = i.env(PORT_VAR).ok()?;
    let port = port_var.and_then(|p| p.trim().parse().ok()).unwrap_or(default_port(i.version.as_deref()));
    let said = |var: &str, v: Option<&str>, default: &str| match v {
        Some(v) => format!("{var}={v} (environ of PID {pid})"),
        None => format!("{var} unset in the environ of PID {pid}: default {default}"),
    };
    let dp = crate::sources::host::ServeArgs::from_argv(&proc.argv).data_parallel_size.unwrap_or(1).max(1);
    let dp = u16::try_from(dp).unwrap_or(1);
    let mut evidence =
        vec![said(HOST_VAR, host_var, "localhost"), said(PORT_VAR, port_var, &port.to_string())];
    // What its process tree listens on there (the engine holds the socket).
    let bound: Vec<std::net::SocketAddr> = proc
        .listeners
        .iter()
        .filter(|(_, p)| *p >= port && *p < port.saturating_add(dp))
        .map(|(a, p)| std::net::SocketAddr::new(*a, *p))
        .collect();
    if !proc.listeners.is_empty() {
        let held: Vec<String> = bound.iter().map(ToString::to_string).collect();
        evidence.push(match held.as_slice() {
            [] => format!("nothing in the process tree of PID {pid} listens on port {port}"),
            l => format!("PID {pid}'s tree listens on {}", l.join(", ")),
        });
    }
    Some(SideChannel { host: host_var.unwrap_or("localhost").to_string(), port, dp, bound, evidence })
}

fn is_loopback_name(host: &str) -> bool {
    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The listener could not bind: the engine's start-up stalls after the
/// traceback and its HTTP port never listens.
pub fn bind_failed(f: &PairFacts) -> Vec<Finding> {
    let mut out = Vec::new();
    for i in &f.instances {
        let Some(log) = &i.log else { continue };
        for b in &log.bind_errors {
            // The side channel binds `tcp://<VLLM_NIXL_SIDE_CHANNEL_HOST>:<port>`;
            // KV events bind their endpoint, `tcp://*:5557` by default
            // (`config/kv_events.py`). The traceback's thread settles it.
            let kv_events = b.thread.as_deref() != Some("nixl_handshake_listener") && b.addr.contains('*');
            let (rule, cause, fix) = match (b.kind, kv_events) {
                (BindFailure::InUse, true) => (
                    "kv_events_port_shared",
                    format!(
                        "the KV-events publisher could not bind {}: another process holds that port (two instances with KV events on one host); the engine stops",
                        b.addr
                    ),
                    "a distinct \"endpoint\" port in --kv-events-config per instance on a host".to_string(),
                ),
                (BindFailure::InUse, false) => (
                    "side_channel_port_shared",
                    format!(
                        "the NIXL side-channel listener could not bind {}: another process holds that port (two instances on one side-channel port); the engine stalls and never serves",
                        b.addr
                    ),
                    format!(
                        "a distinct {PORT_VAR} per instance on a host (each uses PORT + its DP index), e.g. 5600 for one and 5610 for the other"
                    ),
                ),
                (BindFailure::CannotAssign, _) => (
                    "side_channel_host_not_local",
                    format!(
                        "the NIXL side-channel listener could not bind {}: that host is no address of this machine; the engine stalls and never serves",
                        b.addr
                    ),
                    format!("{HOST_VAR}=<an address of this host that the other side reaches>"),
                ),
            };
            out.push(
                Finding::new(rule, Severity::Problem, i.name(), cause).evidence(log.cite(&b.at)).fix(fix),
            );
        }
    }
    out
}

/// The machine an instance runs on, as far as the endpoints tell.
fn machine(i: &InstanceFacts) -> String {
    if is_loopback_name(&i.host) || i.process.is_some() { "this host".into() } else { i.host.clone() }
}

/// Two NIXL instances of one host on one side-channel port: the second
/// one's listener cannot bind (`Address already in use`).
pub fn port_shared(f: &PairFacts) -> Vec<Finding> {
    let chans: Vec<(&InstanceFacts, SideChannel)> =
        f.instances.iter().filter_map(|i| Some((i, side_channel(i)?))).collect();
    let mut out = Vec::new();
    for (n, (a, ca)) in chans.iter().enumerate() {
        for (b, cb) in &chans[n + 1..] {
            // Engine N of each binds PORT + N: ranges that overlap collide.
            let overlap = ca.port < cb.port.saturating_add(cb.dp) && cb.port < ca.port.saturating_add(ca.dp);
            if !overlap || machine(a) != machine(b) {
                continue;
            }
            // A failure its log already shows is named by `bind_failed`.
            let logged = |i: &InstanceFacts| i.log.as_ref().is_some_and(|l| !l.bind_errors.is_empty());
            if logged(a) || logged(b) {
                continue;
            }
            let mut fd = Finding::new(
                "side_channel_port_shared",
                Severity::Problem,
                format!("{}, {}", a.name(), b.name()),
                format!(
                    "both bind their NIXL side channel on port {} of {}: the second listener fails (Address already in use) and that engine never serves",
                    ca.port,
                    machine(a)
                ),
            );
            for (i, c) in [(a, ca), (b, cb)] {
                for e in &c.evidence {
                    fd = fd.evidence(format!("{}: {e}", i.name()));
                }
            }
            out.push(fd.fix(format!(
                "{PORT_VAR}=5600 on one and {PORT_VAR}=5610 on the other (each uses PORT + its DP index)"
            )));
        }
    }
    out
}

/// A side-channel host that is no address of the instance's own host:
/// `Cannot assign requested address` at bind.
pub fn host_not_local(f: &PairFacts) -> Vec<Finding> {
    let Some(net) = &f.host_net else { return Vec::new() };
    f.instances
        .iter()
        .filter_map(|i| {
            let c = side_channel(i)?;
            let ip: IpAddr = c.host.parse().ok()?;
            if net.has_addr(ip) || i.log.as_ref().is_some_and(|l| !l.bind_errors.is_empty()) {
                return None;
            }
            let addrs: Vec<String> = net.ifaces.iter().flat_map(|x| x.addrs.iter().map(move |a| format!("{a} ({})", x.name))).collect();
            let fd = Finding::new(
                "side_channel_host_not_local",
                Severity::Problem,
                i.name(),
                format!("its side-channel host {ip} is no address of this host: the listener cannot bind (Cannot assign requested address) and the engine never serves"),
            );
            Some(
                c.evidence.iter().fold(fd, |fd, e| fd.evidence(e.clone()))
                    .evidence(format!("this host's addresses: {}", addrs.join(", ")))
                    .fix(format!("{HOST_VAR}=<one of this host's addresses that the decode reaches>")),
            )
        })
        .collect()
}

/// The prefill advertises `localhost` while decode runs on another host:
/// decode dials its own loopback (itself, or nothing).
pub fn localhost_across_hosts(f: &PairFacts) -> Vec<Finding> {
    if f.one_host() {
        return Vec::new();
    }
    f.of(Role::Prefill)
        .filter_map(|p| {
            let c = side_channel(p)?;
            // A host name can resolve to loopback too (127.0.1.1 in many
            // /etc/hosts): the bound address settles it.
            let on_loopback = c.bound.iter().any(|a| a.ip().is_loopback());
            if !is_loopback_name(&c.host) && !on_loopback {
                return None;
            }
            let decodes: Vec<String> = f.of(Role::Decode).filter(|d| machine(d) != machine(p)).map(InstanceFacts::name).collect();
            if decodes.is_empty() {
                return None;
            }
            let fd = Finding::new(
                "side_channel_localhost_across_hosts",
                Severity::Problem,
                p.name(),
                format!("its side channel ({}) is on loopback while {} runs on another host: decode dials its own loopback, handshakes with itself or times out, and every transfer fails", c.host, decodes.join(", ")),
            );
            Some(c.evidence.iter().fold(fd, |fd, e| fd.evidence(e.clone())).fix(format!("{HOST_VAR}=<the prefill host's address on the KV network>")))
        })
        .collect()
}

/// `Remote NIXL agent engine ID mismatch`: when the id received is the
/// decode's own engine id, decode handshook with its own listener — the
/// prefill's side-channel host was left at `localhost` (vllm#27083).
pub fn self_handshake(f: &PairFacts) -> Vec<Finding> {
    let mut out = Vec::new();
    for d in f.of(Role::Decode) {
        let Some(log) = &d.log else { continue };
        let own = log.engine_id();
        let Some(m) = log.engine_mismatches.last() else { continue };
        let n = log.engine_mismatches.len();
        // 0.33 names engines per DP rank in the handshake: `<id>_dp0`.
        let base = |id: &str| match id.rsplit_once("_dp") {
            Some((b, n)) if !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()) => b.to_string(),
            _ => id.to_string(),
        };
        let fd = if own.is_some_and(|own| base(own) == base(&m.received)) {
            Finding::new(
                "side_channel_self_handshake",
                Severity::Problem,
                d.name(),
                format!("decode handshook with itself ({n} time(s)): the id received, {}, is its own engine id, so the prefill's side-channel address led back to this decode — a {HOST_VAR} left at localhost across two hosts", m.received),
            )
            .fix(format!("{HOST_VAR}=<the prefill host's address> on the prefill, and distinct {PORT_VAR} values on one host"))
        } else {
            Finding::new(
                "side_channel_wrong_engine",
                Severity::Problem,
                d.name(),
                format!("the engine answering the prefill's side-channel address is not the prefill ({n} time(s)): expected {}, received {}", m.expected, m.received),
            )
            .fix(format!("point {HOST_VAR}/{PORT_VAR} of the prefill at an address and port no other instance uses"))
        };
        let mut fd = fd.evidence(log.cite(&m.at));
        if let Some(own) = own {
            fd = fd.evidence(format!("{}: its engine_id {own}", log.file));
        }
        out.push(fd);
    }
    out
}
