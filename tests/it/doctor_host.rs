//! `sources::host` against real `/proc` files: this host's own `/proc` with
//! real listeners and a real process tree shaped like `vllm serve` (a
//! script named `vllm`, run as `vllm serve MODEL ...`, whose child holds the
//! side-channel socket as vLLM's EngineCore does), and copies of this host's
//! real `/proc/net` and sysfs files laid out as a root in a tempdir.

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, TcpListener};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use pdtop::sources::host::{
    EnvValue, HostFacts, NotFound, ProcRoot, SysRoots, read_interfaces, read_listeners,
};

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pdtop-doctor-host-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn inode_of(fd: &impl AsRawFd) -> u64 {
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
    let s = link.to_str().unwrap();
    s.trim_start_matches("socket:[").trim_end_matches(']').parse().unwrap()
}

#[test]
fn this_process_listener_is_found_by_its_port_and_is_no_vllm() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let facts = HostFacts::read(&ProcRoot::system(), &SysRoots::system(), &[port]);
    let me = std::process::id();
    let listeners = facts.listeners.as_ref().unwrap();
    let mine = listeners
        .iter()
        .find(|(_, x)| x.addr == l.local_addr().unwrap())
        .expect("our listener in /proc/net/tcp");
    assert_eq!(mine.0, Some(me));
    assert_eq!(mine.1.inode, inode_of(&l));
    match &facts.instances[&port] {
        Err(NotFound::NotVllm { pid, .. }) => assert_eq!(*pid, me),
        other => panic!("{other:?}"),
    }
    // A port nobody listens on. The tests beside this one bind ports of
    // their own, and the kernel may hand this one out again at once (a full
    // run once found another socket on it, its owner gone by the fd walk):
    // then it is no longer ours, whoever holds it.
    let inode = inode_of(&l);
    drop(l);
    let facts = HostFacts::read(&ProcRoot::system(), &SysRoots::system(), &[port]);
    let listed = facts.listeners.as_ref().unwrap();
    assert!(listed.iter().all(|(_, x)| x.inode != inode), "our closed listener still listed");
    let taken = listed.iter().any(|(_, x)| x.addr.port() == port);
    assert!(
        matches!(facts.instances[&port], Err(NotFound::NoListener { .. })) || taken,
        "{:?}",
        facts.instances[&port]
    );
}

/// A process tree shaped like vLLM's: `vllm serve` holds the HTTP socket,
/// its child the side-channel one. Each prints a line once its sockets are
/// where they stay.
struct FakeServe {
    server: Child,
    engine: Option<u32>,
}

impl Drop for FakeServe {
    fn drop(&mut self) {
        if let Some(e) = self.engine {
            let _ = Command::new("kill").arg(e.to_string()).status();
        }
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

const SCRIPT: &str = "#!/bin/sh
# fd 0: the HTTP listener; fd 1: the side-channel listener.
exec 3>&1 1>/dev/null
sh -c 'echo engine >&2; exec sleep 60' 0<&3 3>&- &
exec 3>&-
echo server >&2
wait
";

#[test]
fn a_vllm_shaped_tree_from_the_side_channel_port_up_to_its_server() {
    let dir = tempdir("tree");
    let script = dir.join("vllm");
    std::fs::write(&script, SCRIPT).unwrap();
    Command::new("chmod").arg("755").arg(&script).status().unwrap();
    let http = TcpListener::bind("127.0.0.1:0").unwrap();
    let side = TcpListener::bind("127.0.0.1:0").unwrap();
    let (http_addr, side_addr) = (http.local_addr().unwrap(), side.local_addr().unwrap());
    let kv = r#"{"kv_connector":"NixlConnector","kv_role":"kv_producer"}"#;
    let mut server = Command::new(&script)
        .args([
            "serve",
            "/models/lab-llama-8b-shape",
            "--port",
            &http_addr.port().to_string(),
            "--block-size",
            "16",
        ])
        .args(["--kv-transfer-config", kv])
        .env("VLLM_NIXL_SIDE_CHANNEL_PORT", side_addr.port().to_string())
        .env("UCX_NET_DEVICES", "eth9")
        .env_remove("VLLM_NIXL_SIDE_CHANNEL_HOST")
        .stdin(Stdio::from(OwnedFd::from(http)))
        .stdout(Stdio::from(OwnedFd::from(side)))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(server.stderr.take().unwrap()).lines();
    let mut fake = FakeServe { server, engine: None };
    let mut seen: Vec<String> = (0..2).map(|_| lines.next().unwrap().unwrap()).collect();
    seen.sort();
    assert_eq!(seen, ["engine", "server"]);

    let sp = side_addr.port();
    let facts = HostFacts::read(&ProcRoot::system(), &SysRoots::system(), &[http_addr.port(), sp]);
    let by_http = facts.instances[&http_addr.port()].as_ref().expect("found by the HTTP port");
    let by_side = facts.instances[&sp].as_ref().expect("found by the side-channel port");
    assert_eq!(by_http, by_side, "both ports lead to one server");
    let s = by_http;
    fake.engine = s.children.first().map(|c| c.0);
    assert_eq!(s.pid, fake.server.id());
    assert_eq!(s.children.len(), 1, "{:?}", s.children);
    let engine = s.children[0].0;
    let held: Vec<(u32, u16)> = s.listeners.iter().map(|(p, l)| (*p, l.addr.port())).collect();
    assert!(held.contains(&(s.pid, http_addr.port())), "{held:?}");
    assert!(held.contains(&(engine, sp)), "{held:?}");
    assert_eq!(s.args.model.as_deref(), Some("/models/lab-llama-8b-shape"));
    assert_eq!((s.args.port, s.args.block_size), (Some(http_addr.port()), Some(16)));
    let kvc = s.args.kv_transfer_config.as_ref().unwrap().1.as_ref().unwrap();
    assert_eq!(kvc.kv_role.as_deref(), Some("kv_producer"));
    let env = s.env_facts().unwrap();
    let get = |n: &str| env.iter().find(|e| e.name == n).unwrap().value.clone();
    assert_eq!(get("VLLM_NIXL_SIDE_CHANNEL_PORT"), EnvValue::Set(sp.to_string()));
    assert_eq!(get("VLLM_NIXL_SIDE_CHANNEL_HOST"), EnvValue::VllmDefault("localhost"));
    assert_eq!(get("UCX_NET_DEVICES"), EnvValue::Set("eth9".into()));
    let _ = std::fs::remove_dir_all(dir);
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

// This host's real files (a container with eth0 192.0.2.2/24, fd00::2).
const FIB_TRIE: &str = "Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
        |-- 127.255.255.255
           /32 link BROADCAST
     +-- 192.0.2.0/24 2 0 2
        +-- 192.0.2.0/30 2 0 2
           |-- 192.0.2.0
              /24 link UNICAST
           |-- 192.0.2.2
              /32 host LOCAL
        |-- 192.0.2.255
           /32 link BROADCAST
Local:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
        |-- 127.255.255.255
           /32 link BROADCAST
     +-- 192.0.2.0/24 2 0 2
        +-- 192.0.2.0/30 2 0 2
           |-- 192.0.2.0
              /24 link UNICAST
           |-- 192.0.2.2
              /32 host LOCAL
        |-- 192.0.2.255
           /32 link BROADCAST
";
const ROUTE: &str = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT                                                       
eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0                                                                               
eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0                                                                               
";
const IF_INET6: &str = "fe8000000000000000fc00fffe000001 04 40 20 80     eth0
00000000000000000000000000000001 01 80 10 80       lo
fd000000000000000000000000000002 04 40 00 82     eth0
";
const DEV: &str = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 6200546168 1523926    0    0    0     0          0         0 6200546168 1523926    0    0    0     0       0          0
  ifb0:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0
  ifb1:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0
  eth0: 620509576   14594    0    0    0     0          0         0   829479    9275    0    0    0     0       0          0
";
// A listener on 192.0.2.2:5600 (row 16 of this host's /proc/net/tcp).
const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
  16: 020200C0:15E0 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 697628 1 000000007dfa8573 100 0 0 10 0
";

fn host_root(root: &Path, net: &str) {
    for (f, t) in
        [("fib_trie", FIB_TRIE), ("route", ROUTE), ("if_inet6", IF_INET6), ("dev", DEV), ("tcp", TCP)]
    {
        write(root, &format!("{net}/{f}"), t);
    }
    for (i, state, speed, ty) in
        [("eth0", "up", "-1", "1"), ("ifb0", "down", "", "1"), ("lo", "unknown", "", "772")]
    {
        write(root, &format!("sys/{i}/operstate"), &format!("{state}\n"));
        write(root, &format!("sys/{i}/type"), &format!("{ty}\n"));
        if !speed.is_empty() {
            write(root, &format!("sys/{i}/speed"), &format!("{speed}\n"));
        }
    }
}

#[test]
fn interfaces_addresses_and_default_route_from_a_copied_root() {
    let dir = tempdir("ifaces");
    host_root(&dir, "proc/net");
    let sys = SysRoots { net: Some(dir.join("sys")), infiniband: None };
    let got = read_interfaces(&ProcRoot::at(dir.join("proc")), &sys);
    assert_eq!(got.default_route.as_deref(), Some("eth0"));
    assert!(got.unplaced.is_empty() && got.unread.is_empty(), "{got:?}");
    let by = |n: &str| got.list.iter().find(|i| i.name == n).unwrap();
    let ips = |v: &[&str]| v.iter().map(|s| s.parse::<IpAddr>().unwrap()).collect::<Vec<_>>();
    assert_eq!(by("eth0").addrs, ips(&["192.0.2.2", "fe80::fc:ff:fe00:1", "fd00::2"]));
    assert_eq!(by("lo").addrs, ips(&["127.0.0.1", "::1"]));
    assert!(by("lo").loopback && !by("eth0").loopback);
    assert_eq!((by("eth0").operstate.as_deref(), by("eth0").speed_mbps), (Some("up"), None));
    assert_eq!(by("ifb0").operstate.as_deref(), Some("down"));
    assert_eq!(got.list.len(), 4, "names from net/dev, sysfs or not");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn netns_pid_reads_that_process_net_directory() {
    let dir = tempdir("netns");
    host_root(&dir, "proc/4242/net");
    let root = ProcRoot::at(dir.join("proc"));
    // The reader's own namespace has no tcp file in this root.
    assert!(read_listeners(&root).is_err());
    let ns = root.clone().with_netns_pid(4242);
    let l = read_listeners(&ns).unwrap();
    assert_eq!(l.len(), 1);
    assert_eq!(l[0].addr, "192.0.2.2:5600".parse().unwrap());
    let facts = HostFacts::read(&ns, &SysRoots { net: Some(dir.join("sys")), infiniband: None }, &[5600]);
    // The socket is there, but no process of this root holds it.
    assert!(
        matches!(facts.instances[&5600], Err(NotFound::OwnerUnseen { .. })),
        "{:?}",
        facts.instances[&5600]
    );
    assert_eq!(facts.interfaces.default_route.as_deref(), Some("eth0"));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_real_interfaces_of_this_host_place_every_local_address() {
    let got = read_interfaces(&ProcRoot::system(), &SysRoots::system());
    let lo = got.list.iter().find(|i| i.loopback).expect("a loopback interface");
    assert!(lo.addrs.contains(&"127.0.0.1".parse().unwrap()), "{lo:?}");
    let fib = std::fs::read_to_string("/proc/net/fib_trie").unwrap();
    for ip in pdtop::sources::host::parse_fib_trie_local(&fib) {
        let placed = got.list.iter().any(|i| i.addrs.contains(&IpAddr::V4(ip)));
        assert!(placed ^ got.unplaced.contains(&ip), "{ip} placed once or listed as unplaced");
    }
}

/// The roots of a capture of a real vLLM 0.26.0 NIXL pair
/// (`tests/fixtures/doctor/README.md`).
fn capture(name: &str) -> (ProcRoot, SysRoots) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/doctor").join(name).join("root");
    (ProcRoot::at(root.join("proc")), SysRoots { net: Some(root.join("sys/class/net")), infiniband: None })
}

#[test]
fn a_real_nixl_pair_each_port_to_its_api_server() {
    let (proc_root, sys) = capture("nixl-demo-proxy-block-mismatch");
    let facts = HostFacts::read(&proc_root, &sys, &[8100, 5600, 8200, 5601, 8000, 2024, 9999]);
    let server = |port: u16| facts.instances[&port].as_ref().unwrap_or_else(|e| panic!("{port}: {e}"));
    // The HTTP port is the API server's, the side channel its EngineCore's.
    for (http, side, pid, engine, block, role) in
        [(8100, 5600, 618, 894, 32, "kv_producer"), (8200, 5601, 1298, 1420, 16, "kv_consumer")]
    {
        let s = server(http);
        assert_eq!(s, server(side));
        assert_eq!(s.pid, pid);
        let titles: Vec<&str> = s.children.iter().map(|c| c.1.as_str()).collect();
        assert!(titles.contains(&"VLLM::EngineCore"), "{titles:?}");
        let held: Vec<(u32, String)> = s.listeners.iter().map(|(p, l)| (*p, l.addr.to_string())).collect();
        assert!(held.contains(&(pid, format!("127.0.0.1:{http}"))), "{held:?}");
        assert!(held.contains(&(engine, format!("127.0.0.1:{side}"))), "{held:?}");
        assert_eq!(s.args.model.as_deref(), Some("/root/lab/src/models/qwen3-8b-shape"));
        assert_eq!((s.args.port, s.args.block_size), (Some(http), Some(block)));
        assert_eq!(s.args.served_model_name, ["lab-8b"]);
        let kv = s.args.kv_transfer_config.as_ref().unwrap().1.as_ref().unwrap();
        assert_eq!((kv.kv_connector.as_deref(), kv.kv_role.as_deref()), (Some("NixlConnector"), Some(role)));
        let env = s.env_facts().unwrap();
        let get = |n: &str| env.iter().find(|e| e.name == n).map(|e| e.value.clone());
        assert_eq!(get("VLLM_NIXL_SIDE_CHANNEL_HOST"), Some(EnvValue::Set("127.0.0.1".into())));
        assert_eq!(get("VLLM_NIXL_SIDE_CHANNEL_PORT"), Some(EnvValue::Set(side.to_string())));
        assert_eq!(get("UCX_NET_DEVICES"), Some(EnvValue::Unset));
        assert_eq!(get("VLLM_DISABLE_REQUEST_ID_RANDOMIZATION"), Some(EnvValue::VllmDefault("0")));
    }
    // The demo proxy is no vLLM server; the VM's agent on :2024 was not kept.
    match &facts.instances[&8000] {
        Err(NotFound::NotVllm { pid: 1633, title, .. }) => {
            assert!(title.contains("disagg_proxy_demo.py"), "{title}")
        }
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(facts.instances[&2024], Err(NotFound::OwnerUnseen { .. })),
        "{:?}",
        facts.instances[&2024]
    );
    assert!(matches!(facts.instances[&9999], Err(NotFound::NoListener { .. })));
    let i = &facts.interfaces;
    assert_eq!(i.default_route.as_deref(), Some("eth0"));
    let eth0 = i.list.iter().find(|x| x.name == "eth0").unwrap();
    assert_eq!((eth0.operstate.as_deref(), eth0.speed_mbps), (Some("up"), None));
    assert!(eth0.addrs.contains(&"192.0.2.2".parse().unwrap()), "{eth0:?}");
    assert_eq!(i.list.iter().find(|x| x.name == "ifb0").unwrap().operstate.as_deref(), Some("down"));
}

#[test]
fn after_the_fix_the_restarted_prefill_is_the_one_found() {
    let (proc_root, sys) = capture("nixl-fixed");
    let facts = HostFacts::read(&proc_root, &sys, &[8100, 5600, 8000]);
    let p = facts.instances[&8100].as_ref().unwrap();
    assert_eq!((p.pid, p.args.block_size), (1713, Some(16)));
    assert_eq!(facts.instances[&5600].as_ref().unwrap().pid, 1713);
    match &facts.instances[&8000] {
        Err(NotFound::NotVllm { pid: 2052, title, .. }) => assert!(title.contains("miniproxy.py"), "{title}"),
        other => panic!("{other:?}"),
    }
}
