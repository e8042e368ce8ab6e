//! This host's facts (`sources::host`) as the doctor's: the `vllm serve`
//! process behind each local instance port (argv, environ, listeners), the
//! proxy's command line, and the interfaces. The host reader finds vLLM
//! servers only (the proxy is the holder of its port that is no vLLM).

use std::net::IpAddr;

use super::facts::{
    HostNet, Iface, InstanceFacts, PairFacts, ProcessFacts, ProxyFacts, endpoint_host, is_local_host,
};
use crate::sources::host::{
    HostFacts, Listener, NotFound, ProcRoot, ServeArgs, ServeProcess, SysRoots, Unreadable, parse_environ,
    read_listeners,
};

/// The port of `HOST:PORT` or a URL.
pub(super) fn port_of(endpoint: &str) -> Option<u16> {
    let s = endpoint.split("://").last().unwrap_or(endpoint);
    let s = s.split('/').next().unwrap_or(s);
    s.rsplit_once(':')?.1.parse().ok()
}

/// Reads this host once and adds what it says to the facts.
pub fn add_host_facts(
    f: &mut PairFacts,
    root: &ProcRoot,
    sys: &SysRoots,
    proxy: Option<&str>,
    own: Option<u32>,
) {
    add_listed_host_facts(f, root, sys, proxy, own, read_listeners(root));
}

/// [`add_host_facts`] with the listeners already read.
pub fn add_listed_host_facts(
    f: &mut PairFacts,
    root: &ProcRoot,
    sys: &SysRoots,
    proxy: Option<&str>,
    own: Option<u32>,
    listeners: Result<Vec<Listener>, Unreadable>,
) {
    let mut ports: Vec<u16> = f.instances.iter().filter_map(|i| port_of(&i.endpoint)).collect();
    ports.extend(proxy.and_then(port_of));
    let host = HostFacts::read_listed(root, sys, &ports, listeners);
    let net = host_net(&host);
    for u in &host.interfaces.unread {
        f.unread(u.path.display().to_string(), u.to_string());
    }
    // Another host's port says nothing about a process here.
    let here = |h: &str| is_local_host(h) || h.parse::<IpAddr>().is_ok_and(|ip| net.has_addr(ip));
    let mut unread = Vec::new();
    for i in f.instances.iter_mut().filter(|i| here(&i.host)) {
        let Some(found) = port_of(&i.endpoint).and_then(|p| host.instances.get(&p)) else { continue };
        match found {
            Ok(sp) => with_found(i, sp.clone(), &mut unread),
            Err(nf @ NotFound::NoListener { port }) => match by_log_pid(root, i, *port) {
                Some(sp) => with_found(i, sp, &mut unread),
                None => unread.push((format!("process behind {}", i.name()), nf.to_string())),
            },
            Err(NotFound::NotVllm { pid, .. }) if Some(*pid) == own => {
                f.read.push(format!("process behind {}: pdtop's own demo lab", i.name()));
            }
            Err(nf) => unread.push((format!("process behind {}", i.name()), nf.to_string())),
        }
    }
    if let Some(p) = proxy.filter(|p| here(&endpoint_host(p))) {
        match proxy_facts(&host, p) {
            Ok(pf) => f.proxy = Some(pf),
            Err(why) => unread.push((format!("proxy {p}"), why)),
        }
    }
    for (s, why) in unread {
        f.unread(s, why);
    }
    f.read.push(format!("{}/ (processes, sockets, addresses)", root.root.display()));
    f.host_net = Some(net);
}

fn with_found(i: &mut InstanceFacts, sp: ServeProcess, unread: &mut Vec<(String, String)>) {
    if let Err(u) = &sp.env {
        let why = format!("{u}; run pdtop as the server's user or as root");
        unread.push((format!("environ of PID {} ({})", sp.pid, i.name()), why));
    }
    with_process(i, &sp);
}

/// An instance whose port never listens (its engine stalled at start-up,
/// e.g. on a side-channel bind failure) is found by the API server's pid
/// its log names, when that pid is still a `vllm serve` on the same port.
/// `sources::host` finds servers by port only; this wraps it.
fn by_log_pid(root: &ProcRoot, i: &InstanceFacts, port: u16) -> Option<ServeProcess> {
    let pid = i.log.as_ref()?.api_pid?;
    let dir = root.pid_dir(pid);
    let argv: Vec<String> = std::fs::read(dir.join("cmdline"))
        .ok()?
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let args = ServeArgs::from_argv(&argv);
    if args.entry.is_none() || args.port_or_default() != port {
        return None;
    }
    let env = match std::fs::read(dir.join("environ")) {
        Ok(b) => Ok(parse_environ(&b)),
        Err(e) => Err(Unreadable::from_io(&dir.join("environ"), Some(&dir), &e)),
    };
    Some(ServeProcess { pid, argv, args, env, listeners: Vec::new(), children: Vec::new() })
}

fn host_net(h: &HostFacts) -> HostNet {
    let ifaces = h
        .interfaces
        .list
        .iter()
        .map(|x| Iface {
            name: x.name.clone(),
            // `unknown` is what lo and many virtual links report: not down.
            up: x.operstate.as_deref() != Some("down"),
            speed_mbps: x.speed_mbps,
            addrs: x.addrs.clone(),
        })
        .collect();
    HostNet { ifaces, default_iface: h.interfaces.default_route.clone() }
}

/// The process, and what its argv sets that the log did not say.
fn with_process(i: &mut InstanceFacts, sp: &ServeProcess) {
    i.process = Some(ProcessFacts {
        pid: sp.pid,
        argv: sp.argv.clone(),
        environ: sp.env.clone().map_err(|u| u.to_string()),
        listeners: sp.listeners.iter().map(|(_, l)| (l.addr.ip(), l.addr.port())).collect(),
    });
    fill_from_args(&mut i.startup, &sp.args);
}

/// The running process's command line is the truth of what runs now; a
/// log may be of an earlier start. Its settings override, its silences
/// (vLLM's defaults) leave the log's word.
pub fn fill_from_args(s: &mut crate::logs::startup::StartupConfig, a: &ServeArgs) {
    let set = |slot: &mut Option<String>, v: Option<&String>| {
        if let Some(v) = v {
            *slot = Some(v.clone());
        }
    };
    set(&mut s.model, a.model.as_ref());
    set(&mut s.served_name, a.served_model_name.first());
    set(&mut s.dtype, a.dtype.as_ref().filter(|d| *d != "auto"));
    set(&mut s.cache_dtype, a.kv_cache_dtype.as_ref());
    s.block_size = a.block_size.or(s.block_size);
    s.tensor_parallel_size = a.tensor_parallel_size.or(s.tensor_parallel_size);
    match &a.kv_transfer_config {
        Some((_, Ok(k))) => {
            set(&mut s.connector, k.kv_connector.as_ref());
            set(&mut s.kv_role, k.kv_role.as_ref());
            set(&mut s.engine_id, k.engine_id.as_ref());
            let path = k
                .kv_connector_extra_config
                .as_ref()
                .and_then(|c| c.get("shared_storage_path"))
                .and_then(|p| p.as_str());
            set(&mut s.storage_path, path.map(str::to_owned).as_ref());
        }
        // No --kv-transfer-config, and no config file that could hold one.
        None if a.entry.is_some() && a.config_file.is_none() => s.connector = Some("none".into()),
        _ => {}
    }
}

/// The proxy's command line: the holder of its port, read from `/proc`.
fn proxy_facts(host: &HostFacts, endpoint: &str) -> Result<ProxyFacts, String> {
    let port = port_of(endpoint).ok_or("not HOST:PORT")?;
    let (pid, argv) = match host.instances.get(&port) {
        Some(Err(NotFound::NotVllm { pid, argv, .. })) => (*pid, argv.clone()),
        Some(Ok(sp)) => (sp.pid, sp.argv.clone()),
        Some(Err(nf)) => return Err(nf.to_string()),
        None => return Err("not read".into()),
    };
    Ok(ProxyFacts { endpoint: endpoint.to_string(), pid, argv })
}
