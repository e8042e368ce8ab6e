//! Which wire NIXL's UCX backend takes. Nothing errors when it picks a slow
//! one: a split can work and be slow while reporting nothing.

use crate::doctor::facts::{HostNet, InstanceFacts, PairFacts};
use crate::doctor::finding::{Finding, Severity};

const VAR: &str = "UCX_NET_DEVICES";

/// `mlx5_0:1` names an RDMA port, `eth0` a network interface.
fn iface_name(dev: &str) -> Option<&str> {
    (!dev.contains(':') && !dev.is_empty() && dev != "all").then_some(dev)
}

/// `UCX_NET_DEVICES` unset, or naming an interface that is down, absent,
/// the management (default-route) one, or slower than another link.
pub fn net_devices(f: &PairFacts) -> Vec<Finding> {
    let mut out = Vec::new();
    for i in f.instances.iter().filter(|i| i.is_nixl()) {
        let Ok(value) = i.env(VAR) else { continue };
        let pid = i.process.as_ref().map_or(0, |p| p.pid);
        match value {
            None => out.push(unset(f, i, pid)),
            Some(v) => {
                if let Some(net) = &f.host_net {
                    out.extend(v.split(',').filter_map(|d| named(net, i, d.trim(), v, pid)));
                }
            }
        }
    }
    out
}

fn unset(f: &PairFacts, i: &InstanceFacts, pid: u32) -> Finding {
    let (severity, cause) = if f.one_host() {
        (Severity::Note, "UCX_NET_DEVICES is unset: on one host UCX moves KV over shared memory or cuda_ipc, but which device it scores best is its choice, not yours".to_string())
    } else {
        (Severity::Warning, "UCX_NET_DEVICES is unset: UCX scores every device and may carry the KV over the management NIC or a bridge instead of the fast link (ucx#9383), and nothing reports it".to_string())
    };
    let mut fd = Finding::new("ucx_net_devices_unset", severity, i.name(), cause)
        .evidence(format!("{VAR} absent from the environ of PID {pid}"));
    if let Some(best) = f.host_net.as_ref().and_then(fastest) {
        fd = fd.evidence(format!("fastest up link here: {} ({} Mb/s)", best.0, best.1));
    }
    if severity == Severity::Note {
        return fd;
    }
    fd.fix(format!("{VAR}=<the KV link> (e.g. {VAR}=mlx5_0:1 or {VAR}=ib0) on both instances"))
}

/// The fastest interface that is up and not loopback.
fn fastest(net: &HostNet) -> Option<(String, u64)> {
    net.ifaces
        .iter()
        .filter(|x| x.up && x.name != "lo" && !x.addrs.is_empty())
        .filter_map(|x| Some((x.name.clone(), x.speed_mbps?)))
        .max_by_key(|(_, s)| *s)
}

fn named(net: &HostNet, i: &InstanceFacts, dev: &str, value: &str, pid: u32) -> Option<Finding> {
    let name = iface_name(dev)?;
    let ev = format!("{VAR}={value} (environ of PID {pid})");
    let fd = |rule, sev, cause: String| Finding::new(rule, sev, i.name(), cause).evidence(ev.clone());
    let Some(x) = net.iface(name) else {
        let known: Vec<&str> = net.ifaces.iter().map(|x| x.name.as_str()).collect();
        return Some(
            fd("ucx_net_devices_absent", Severity::Problem, format!("{VAR} names {name}, which this host does not have: UCX warns `network devices ... are not available` and falls back"))
                .evidence(format!("interfaces here: {}", known.join(", ")))
                .fix(format!("{VAR}=<one of: {}>", known.join(", "))),
        );
    };
    if !x.up {
        return Some(
            fd(
                "ucx_net_devices_down",
                Severity::Problem,
                format!("{VAR} names {name}, which is down: no KV can cross it"),
            )
            .evidence(format!("/sys/class/net/{name}/operstate: not up"))
            .fix(format!("bring {name} up, or {VAR}=<an interface that is up>")),
        );
    }
    if net.default_iface.as_deref() == Some(name) {
        return Some(
            fd("ucx_net_devices_management", Severity::Warning, format!("{VAR} names {name}, the interface of the default route (the management network, as a rule): KV shares it with everything else"))
                .evidence(format!("default route via {name}"))
                .fix(format!("{VAR}=<the dedicated KV link>")),
        );
    }
    let (best, speed) = fastest(net)?;
    let own = x.speed_mbps?;
    (speed > own).then(|| {
        fd(
            "ucx_net_devices_slow",
            Severity::Warning,
            format!("{VAR} names {name} at {own} Mb/s while {best} runs at {speed} Mb/s"),
        )
        .evidence(format!("/sys/class/net/*/speed: {name} {own}, {best} {speed}"))
        .fix(format!("{VAR}={best}, if it reaches the other host"))
    })
}

/// NIXL's start-up warnings: UCX without CUDA support cannot register GPU
/// memory; IB hardware without accelerated IB support falls back to TCP.
pub fn nixl_hw_support(f: &PairFacts) -> Vec<Finding> {
    let mut out = Vec::new();
    for i in &f.instances {
        let Some(log) = &i.log else { continue };
        for w in &log.hw_warnings {
            let cuda = w.text.contains("CUDA");
            let (rule, sev, cause, fix) = if cuda {
                (
                    "nixl_ucx_no_cuda",
                    Severity::Problem,
                    "NIXL's UCX has no CUDA support: GPU memory cannot be registered, KV transfers of GPU blocks fail",
                    "install a UCX built with CUDA (the nixl wheel's bundled UCX, or one built --with-cuda) first on LD_LIBRARY_PATH",
                )
            } else {
                (
                    "nixl_ucx_no_accelerated_ib",
                    Severity::Warning,
                    "NIXL found IB devices but UCX has no accelerated IB support: KV moves over TCP, far slower",
                    "a UCX built with verbs/mlx5 (rdma-core installed), or UCX_TLS including rc",
                )
            };
            out.push(Finding::new(rule, sev, i.name(), cause).evidence(log.cite(w)).fix(fix));
        }
    }
    out
}

/// UCX's transport lines (`UCX_LOG_LEVEL=info`) name only TCP: the KV
/// crosses a socket, not RDMA, NVLink or shared memory.
pub fn tcp_only(f: &PairFacts) -> Vec<Finding> {
    let fast = ["rc", "ud", "dc", "cuda_ipc", "sm", "posix", "sysv", "xpmem", "cma", "gdr"];
    let mut out = Vec::new();
    for i in &f.instances {
        let Some(log) = &i.log else { continue };
        let Some((t, at)) = log.transports.last() else { continue };
        let uses_fast = fast.iter().any(|x| {
            t.contains(&format!("({x}")) || t.contains(&format!(" {x}/")) || t.contains(&format!("({x}/"))
        });
        if t.contains("tcp/") && !uses_fast {
            out.push(
                Finding::new("ucx_tcp_only", Severity::Warning, i.name(), "UCX chose TCP only for this context: KV crosses a socket, expect far lower transfer rates than RDMA")
                    .evidence(log.cite(at))
                    .fix("UCX_TLS=rc,cuda_copy,cuda_ipc (or what the link supports) and UCX_NET_DEVICES=<the RDMA port>"),
            );
        }
    }
    out
}

/// UCX said the devices `UCX_NET_DEVICES` names are not available (absent
/// or down): with NIXL 1.5.1 the UCX backend then fails and the engine
/// dies at start-up (`NIXL_ERR_BACKEND`, seen on the lab's H200).
pub fn devices_unavailable(f: &PairFacts) -> Vec<Finding> {
    let mut out = Vec::new();
    for i in &f.instances {
        let Some(log) = &i.log else { continue };
        let Some((devs, offered, at)) = log.ucx_unavailable.last() else { continue };
        let offered = if offered.is_empty() { String::new() } else { format!(" (UCX offers: {offered})") };
        out.push(
            Finding::new("ucx_net_devices_unavailable", Severity::Problem, i.name(), format!("UCX_NET_DEVICES names {}, which UCX cannot use (absent or down): NIXL's UCX backend fails and the engine does not start, or KV falls back to another device", devs.join(", ")))
                .evidence(log.cite(at))
                .fix(format!("UCX_NET_DEVICES=<an interface that is up>{offered}")),
        );
    }
    out
}
