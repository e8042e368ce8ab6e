//! `pdtop doctor`: each rule from real inputs (the lab captures' start-up
//! logs and scrapes, the lines in `tests/fixtures/doctor-lines`, whose
//! sources `SOURCES.md` lists), and the command end to end.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use pdtop::doctor::facts::{
    HostNet, Iface, InstanceFacts, MetricsFacts, PairFacts, ProcessFacts, ProxyFacts,
};
use pdtop::doctor::loglines::LogFacts;
use pdtop::doctor::rules::{self, kv_dir, proxy, roles, shapes, side_channel, ucx};
use pdtop::doctor::{Severity, diagnose};
use pdtop::feed::Role;

use crate::common::{capture_dir, serve_vllm};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/doctor-lines").join(name)
}

fn log(path: PathBuf) -> LogFacts {
    let text = std::fs::read_to_string(&path).unwrap();
    LogFacts::read(&path.file_name().unwrap().to_string_lossy(), &text)
}

fn cap_log(capture: &str, file: &str) -> LogFacts {
    log(capture_dir(capture).join(file))
}

/// An instance as `gather::read_logs` makes it from a log.
fn inst(role: Role, endpoint: &str, log: LogFacts) -> InstanceFacts {
    let mut i = InstanceFacts::new(role, endpoint);
    i.startup = log.startup.clone();
    i.log = Some(log);
    i
}

fn pair(prefill: LogFacts, decode: LogFacts) -> PairFacts {
    PairFacts {
        instances: vec![
            inst(Role::Prefill, "127.0.0.1:8100", prefill),
            inst(Role::Decode, "127.0.0.1:8200", decode),
        ],
        ..Default::default()
    }
}

fn nixl_pair() -> PairFacts {
    pair(cap_log("nixl-llama-shape", "vllm-prefill.log"), cap_log("nixl-llama-shape", "vllm-decode2.log"))
}

fn example_pair() -> PairFacts {
    pair(
        cap_log("qwen3-shape-restart", "vllm-prefill.log"),
        cap_log("qwen3-shape-restart", "vllm-decode2.log"),
    )
}

fn rule_names(f: &PairFacts) -> Vec<String> {
    rules::run(f).into_iter().map(|f| f.rule).collect()
}

#[test]
fn the_real_pairs_are_clean() {
    let f = nixl_pair();
    let d = f.instances[1].log.as_ref().unwrap();
    assert_eq!(d.engine_id(), Some("c7493e62-f2ad-4335-ad0e-19942661f025"));
    assert_eq!(d.nixl_backend.as_ref().map(|(b, _)| b.as_str()), Some("UCX"));
    assert!(rules::run(&f).is_empty(), "{:?}", rules::run(&f));
    assert!(rules::run(&example_pair()).is_empty(), "{:?}", rules::run(&example_pair()));
}

#[test]
fn the_latest_start_of_a_log_is_the_one_read() {
    // decode.log holds one start, the capture's decode2.log the restart.
    let first = cap_log("qwen3-shape-restart", "vllm-decode.log");
    assert_eq!(first.engine_id(), Some("02330b55-31fe-48ca-9f4b-1325a05040f3"));
    let second = cap_log("qwen3-shape-restart", "vllm-decode2.log");
    assert_eq!(second.engine_id(), Some("6aa85ced-5783-46b3-a660-a181094e2f45"));
}

#[test]
fn swapped_logs_are_swapped_roles_a_problem_for_example_a_warning_for_nixl() {
    let f = pair(
        cap_log("qwen3-shape-restart", "vllm-decode2.log"),
        cap_log("qwen3-shape-restart", "vllm-prefill.log"),
    );
    let found = roles::roles_swapped(&f);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].severity, Severity::Problem);
    assert!(found[0].cause.starts_with("the roles are swapped"), "{}", found[0].cause);
    assert!(found[0].evidence[0].contains("kv_role='kv_consumer'"), "{:?}", found[0].evidence);
    let f = pair(
        cap_log("nixl-llama-shape", "vllm-decode2.log"),
        cap_log("nixl-llama-shape", "vllm-prefill.log"),
    );
    assert_eq!(roles::roles_swapped(&f)[0].severity, Severity::Warning);
}

#[test]
fn the_consumer_metric_family_on_a_prefill_is_a_role_on_the_wrong_side() {
    let mut f = nixl_pair();
    f.instances[0].startup.kv_role = None;
    let body =
        std::fs::read_to_string(capture_dir("nixl-llama-shape").join("prefill-metrics-idle.txt")).unwrap();
    f.instances[0].metrics = Some(MetricsFacts::from_text(&body));
    assert!(roles::roles_swapped(&f).is_empty(), "0.26 serves no such family");
    // The HELP line vLLM registers for consumers (v1/metrics/loggers.py, 0.33).
    let with = format!(
        "{body}# HELP vllm:num_requests_kv_fetch_by_stage Number of requests in each KV fetch stage.\n"
    );
    f.instances[0].metrics = Some(MetricsFacts::from_text(&with));
    let found = roles::roles_swapped(&f);
    assert_eq!(found[0].subject, "prefill 127.0.0.1:8100");
}

#[test]
fn two_connectors_and_two_models_are_named() {
    let f = pair(
        cap_log("nixl-llama-shape", "vllm-prefill.log"),
        cap_log("qwen3-shape-restart", "vllm-decode2.log"),
    );
    let names = rule_names(&f);
    assert!(names.contains(&"kv_connector_differs".to_string()), "{names:?}");
    assert!(names.contains(&"model_differs".to_string()), "{names:?}");
    let c = shapes::config_mismatches(&f);
    let conn = c.iter().find(|x| x.rule == "kv_connector_differs").unwrap();
    assert_eq!(conn.severity, Severity::Problem);
    assert!(conn.evidence.iter().any(|e| e.ends_with("kv_connector = NixlConnector")), "{:?}", conn.evidence);
    assert!(conn.fix.contains("kv_connector"));
}

/// The real idle scrapes, only the block_size label changed (as
/// `state::mismatch`'s own test does).
fn with_blocks(mut f: PairFacts, capture: &str, prefill: u32, decode: u32) -> PairFacts {
    for (n, file, b) in [(0, "prefill-metrics-idle.txt", prefill), (1, "decode-metrics-idle.txt", decode)] {
        let body = std::fs::read_to_string(capture_dir(capture).join(file)).unwrap();
        let body = body.replace("block_size=\"16\"", &format!("block_size=\"{b}\""));
        f.instances[n].metrics = Some(MetricsFacts::from_text(&body));
    }
    f
}

#[test]
fn nixl_takes_a_decode_block_that_is_a_multiple_and_nothing_else() {
    let ok = shapes::block_size(&with_blocks(nixl_pair(), "nixl-llama-shape", 16, 32));
    assert_eq!(ok[0].severity, Severity::Note, "{ok:?}");
    let bad = shapes::block_size(&with_blocks(nixl_pair(), "nixl-llama-shape", 32, 16));
    assert_eq!(bad[0].severity, Severity::Problem);
    assert!(bad[0].cause.contains("not a multiple"), "{}", bad[0].cause);
    assert!(bad[0].evidence[0].contains("cache_config_info"), "{:?}", bad[0].evidence);
    assert!(rules::run(&with_blocks(nixl_pair(), "nixl-llama-shape", 16, 16)).is_empty());
    // ExampleConnector keys stored KV by block-aligned length: any difference.
    let ex = shapes::block_size(&with_blocks(example_pair(), "qwen3-shape-restart", 16, 32));
    assert_eq!(ex[0].severity, Severity::Problem);
}

#[test]
fn dtype_and_tp_differences_are_named() {
    let mut f = nixl_pair();
    assert!(shapes::dtype(&f).is_empty() && shapes::tensor_parallel(&f).is_empty());
    f.instances[1].startup.dtype = Some("float16".into());
    f.instances[1].startup.tensor_parallel_size = Some(2);
    assert_eq!(shapes::dtype(&f)[0].severity, Severity::Problem);
    // NIXL maps TP 1 to 2; 2 to 3 it cannot.
    assert_eq!(shapes::tensor_parallel(&f)[0].severity, Severity::Note);
    f.instances[0].startup.tensor_parallel_size = Some(3);
    assert_eq!(shapes::tensor_parallel(&f)[0].severity, Severity::Problem);
}

#[test]
fn a_side_channel_bind_failure_in_a_log_is_named_with_its_line() {
    let mut f = nixl_pair();
    f.instances[0].log = Some(log(fixture("dynamo-2706-cannot-assign.log")));
    let found = side_channel::bind_failed(&f);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].rule, "side_channel_host_not_local");
    assert!(
        found[0].cause.starts_with("the NIXL side-channel listener could not bind tcp://172.17.0.5:34762"),
        "{}",
        found[0].cause
    );
    assert!(
        found[0].evidence[0].starts_with("dynamo-2706-cannot-assign.log:9: zmq.error.ZMQError"),
        "{:?}",
        found[0].evidence
    );
    f.instances[0].log = Some(log(fixture("vllm-20965-address-in-use.log")));
    let found = side_channel::bind_failed(&f);
    assert_eq!(found[0].rule, "side_channel_port_shared");
    assert!(found[0].cause.contains("tcp://localhost:5557"));
    assert_eq!(diagnose(&f).exit_code(), 1);
}

#[test]
fn a_handshake_that_received_decodes_own_engine_id_is_a_self_handshake() {
    let mut f = nixl_pair();
    let mut d = log(fixture("vllm-27083-self-handshake.log"));
    f.instances[1].log = Some(d.clone());
    let other = side_channel::self_handshake(&f);
    assert_eq!(other[0].rule, "side_channel_wrong_engine", "decode's own id unknown: {other:?}");
    // The decode's creation line, rendered from vLLM's format string
    // (`Creating v1 connector with name: %s and engine_id: %s`,
    // kv_connector/factory.py) with the id the decode received.
    d.on_line(0, "(EngineCore_DP0 pid=2823400) INFO 10-16 17:20:01 [factory.py:64] Creating v1 connector with name: NixlConnector and engine_id: 96b1c4ff-9edf-4d21-b7cf-975a5f441d03");
    f.instances[1].log = Some(d);
    let own = side_channel::self_handshake(&f);
    assert_eq!(own[0].rule, "side_channel_self_handshake");
    assert!(own[0].fix.contains("VLLM_NIXL_SIDE_CHANNEL_HOST"));
    assert!(own[0].evidence[0].contains("engine ID mismatch"), "{:?}", own[0].evidence);
}

/// The prefill's process as `/proc` gives it: its argv from the capture's
/// `prefill.cmd`, an environment without the variables named.
fn with_process(i: &mut InstanceFacts, pid: u32, env: &[(&str, &str)]) {
    let env: BTreeMap<String, String> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    i.process = Some(ProcessFacts {
        pid,
        argv: vec!["vllm".into(), "serve".into()],
        environ: Ok(env),
        listeners: Vec::new(),
    });
}

#[test]
fn two_nixl_instances_on_one_port_and_a_foreign_host() {
    let mut f = nixl_pair();
    with_process(&mut f.instances[0], 600, &[]);
    with_process(&mut f.instances[1], 1475, &[]);
    let found = side_channel::port_shared(&f);
    assert_eq!(found.len(), 1, "both on the default 5600: {found:?}");
    assert!(found[0].evidence.iter().any(|e| e.contains("VLLM_NIXL_SIDE_CHANNEL_PORT unset")));
    with_process(&mut f.instances[1], 1475, &[("VLLM_NIXL_SIDE_CHANNEL_PORT", "5610")]);
    assert!(side_channel::port_shared(&f).is_empty());
    f.host_net = Some(HostNet {
        ifaces: vec![Iface {
            name: "eth0".into(),
            up: true,
            speed_mbps: Some(25_000),
            addrs: vec!["10.0.0.5".parse().unwrap()],
        }],
        default_iface: Some("eth0".into()),
    });
    with_process(&mut f.instances[0], 600, &[("VLLM_NIXL_SIDE_CHANNEL_HOST", "10.0.0.9")]);
    let found = side_channel::host_not_local(&f);
    assert_eq!(found[0].subject, "prefill 127.0.0.1:8100");
    assert!(found[0].evidence.iter().any(|e| e.contains("10.0.0.5 (eth0)")), "{:?}", found[0].evidence);
    // Unreadable environ: nothing is said.
    f.instances[0].process.as_mut().unwrap().environ = Err("other user".into());
    assert!(side_channel::host_not_local(&f).is_empty());
}

#[test]
fn localhost_advertised_to_a_decode_on_another_host() {
    let mut f = nixl_pair();
    f.instances[1].endpoint = "10.0.0.7:8200".into();
    f.instances[1].host = "10.0.0.7".into();
    with_process(&mut f.instances[0], 600, &[]);
    let found = side_channel::localhost_across_hosts(&f);
    assert_eq!(found[0].rule, "side_channel_localhost_across_hosts");
    with_process(&mut f.instances[0], 600, &[("VLLM_NIXL_SIDE_CHANNEL_HOST", "10.0.0.5")]);
    assert!(side_channel::localhost_across_hosts(&f).is_empty());
}

fn lab_net() -> HostNet {
    let i = |name: &str, up, speed, addr: &str| Iface {
        name: name.into(),
        up,
        speed_mbps: speed,
        addrs: vec![addr.parse().unwrap()],
    };
    HostNet {
        ifaces: vec![
            i("eno1", true, Some(1000), "192.168.1.5"),
            i("ib0", true, Some(200_000), "10.10.0.5"),
            i("ens7", false, Some(100_000), "10.20.0.5"),
        ],
        default_iface: Some("eno1".into()),
    }
}

#[test]
fn ucx_net_devices_unset_down_management_or_slow() {
    let mut f = nixl_pair();
    f.host_net = Some(lab_net());
    with_process(&mut f.instances[0], 600, &[]);
    let found = ucx::net_devices(&f);
    assert_eq!((found[0].rule.as_str(), found[0].severity), ("ucx_net_devices_unset", Severity::Note));
    let cases = [
        ("ens7", "ucx_net_devices_down"),
        ("eno1", "ucx_net_devices_management"),
        ("eth9", "ucx_net_devices_absent"),
    ];
    for (dev, rule) in cases {
        with_process(&mut f.instances[0], 600, &[("UCX_NET_DEVICES", dev)]);
        assert_eq!(ucx::net_devices(&f)[0].rule, rule, "{dev}");
    }
    with_process(&mut f.instances[0], 600, &[("UCX_NET_DEVICES", "ib0")]);
    assert!(ucx::net_devices(&f).is_empty());
    with_process(&mut f.instances[0], 600, &[("UCX_NET_DEVICES", "mlx5_0:1")]);
    assert!(ucx::net_devices(&f).is_empty(), "an RDMA port is not judged by /sys/class/net");
}

#[test]
fn nixl_transport_lines_from_the_docs_quotes() {
    // nixl#1097's line, as far as docs/misconfig.md quotes it.
    let mut l = LogFacts::new("decode.log");
    l.on_line(
        1,
        "ucp_worker.c:1912 UCX  INFO    ucp_context_0 intra-node cfg#2 rma_am(tcp/eth1) amo_am(tcp/eth1)",
    );
    assert_eq!(l.transports[0].0, "rma_am(tcp/eth1) amo_am(tcp/eth1)");
    let mut f = nixl_pair();
    f.instances[1].log.as_mut().unwrap().transports = l.transports;
    assert_eq!(ucx::tcp_only(&f)[0].rule, "ucx_tcp_only");
}

#[test]
fn the_demo_proxy_in_front_of_nixl_is_a_problem_and_in_front_of_example_is_not() {
    let cmd = std::fs::read_to_string(capture_dir("example-2p2d-demo-proxy").join("proxy.cmd")).unwrap();
    let argv: Vec<String> = cmd.split_whitespace().map(str::to_owned).collect();
    let proxy = ProxyFacts { endpoint: "127.0.0.1:8000".into(), pid: 2544, argv };
    assert!(proxy.is_demo_proxy());
    let mut f = nixl_pair();
    f.proxy = Some(proxy.clone());
    let found = proxy::demo_proxy_with_nixl(&f);
    assert_eq!(found[0].severity, Severity::Problem);
    assert!(found[0].evidence[0].contains("disagg_proxy_demo-0.26.0.py"));
    let mut e = example_pair();
    e.proxy = Some(proxy);
    assert!(proxy::demo_proxy_with_nixl(&e).is_empty());
}

#[test]
fn id_randomization_matters_only_to_a_proxy_or_connector_joining_by_id() {
    let mut f = nixl_pair();
    with_process(&mut f.instances[1], 1475, &[]);
    assert!(proxy::id_randomization(&f).is_empty());
    f.proxy = Some(ProxyFacts {
        endpoint: "127.0.0.1:10001".into(),
        pid: 9,
        argv: vec!["python3".into(), "disagg_proxy_p2p_nccl_xpyd.py".into()],
    });
    let found = proxy::id_randomization(&f);
    assert_eq!(found.len(), 1, "only the instance whose environ was read: {found:?}");
    assert!(found[0].fix.contains("VLLM_DISABLE_REQUEST_ID_RANDOMIZATION=1"));
    with_process(&mut f.instances[1], 1475, &[("VLLM_DISABLE_REQUEST_ID_RANDOMIZATION", "1")]);
    assert!(proxy::id_randomization(&f).is_empty());
}

#[test]
fn example_folders_that_are_two_or_read_only() {
    let root = std::env::temp_dir().join(format!("pdtop-doctor-kv-{}", std::process::id()));
    let (a, b) = (root.join("a"), root.join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let mut f = example_pair();
    let dir = |i: &mut InstanceFacts, p: &PathBuf| {
        i.startup.storage_path = Some(p.display().to_string());
        with_process(i, 1, &[]);
    };
    dir(&mut f.instances[0], &a);
    dir(&mut f.instances[1], &a);
    pdtop::doctor::gather::read_kv_dirs(&mut f, std::path::Path::new("/proc"));
    assert!(kv_dir::not_shared(&f).is_empty() && kv_dir::not_writable(&f).is_empty());
    dir(&mut f.instances[1], &b);
    pdtop::doctor::gather::read_kv_dirs(&mut f, std::path::Path::new("/proc"));
    assert_eq!(kv_dir::not_shared(&f)[0].rule, "kv_dir_not_shared");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o555)).unwrap();
    pdtop::doctor::gather::read_kv_dirs(&mut f, std::path::Path::new("/proc"));
    assert_eq!(kv_dir::not_writable(&f)[0].subject, "prefill 127.0.0.1:8100");
    std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::remove_dir_all(&root).unwrap();
}

fn pdtop(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pdtop")).arg("doctor").args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn the_command_on_a_real_capture_finds_nothing_wrong_then_a_bad_block_size() {
    let cap = capture_dir("nixl-llama-shape");
    let (p, d) = (cap.join("vllm-prefill.log"), cap.join("vllm-decode2.log"));
    let idle = |f: &str| std::fs::read_to_string(cap.join(f)).unwrap();
    let prefill = serve_vllm(vec![idle("prefill-metrics-idle.txt")]);
    let decode = serve_vllm(vec![idle("decode-metrics-idle.txt")]);
    let logs = ["--prefill-log", p.to_str().unwrap(), "--decode-log", d.to_str().unwrap()];
    let (rc, out, err) = pdtop(&[&["--prefill", &prefill, "--decode", &decode][..], &logs[..]].concat());
    // The ports are held by this test, no vllm serve: the checks on the
    // processes could not run, so nothing wrong is not clean (exit 4).
    assert_eq!(rc, 4, "{out}{err}");
    assert!(
        out.ends_with(
            "doctor: not clean: nothing wrong in what was read, but 2 sources could not be read, so the checks on them did not run (see `not read`)\n"
        ),
        "{out}"
    );
    assert!(out.contains(&format!("{prefill}/metrics")), "{out}");
    // This host's real /proc: the port's holder is this test, no vllm serve.
    assert!(out.contains(&format!("process behind prefill {prefill}: port")), "{out}");
    assert!(out.contains("is a vllm serve"), "{out}");
    let bad =
        serve_vllm(vec![idle("decode-metrics-idle.txt").replace("block_size=\"16\"", "block_size=\"8\"")]);
    let (rc, out, _) = pdtop(&[&["--prefill", &prefill, "--decode", &bad, "--json"][..], &logs[..]].concat());
    assert_eq!(rc, 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["findings"][0]["rule"], "block_size_differs", "{v}");
    assert_eq!(v["findings"][0]["severity"], "problem");
    assert!(v["findings"][0]["fix"].as_str().unwrap().contains("--block-size 8 on the prefill"), "{v}");
}

#[test]
fn the_command_lists_what_it_could_not_read_and_fails_on_a_bad_file() {
    let d = fixture("vllm-20965-address-in-use.log");
    let (rc, out, _) =
        pdtop(&["--prefill", "127.0.0.1:9", "--decode", "127.0.0.1:9", "--decode-log", d.to_str().unwrap()]);
    assert_eq!(rc, 1, "{out}");
    assert!(out.contains("PROBLEM decode 127.0.0.1:9 [side_channel_port_shared]"), "{out}");
    assert!(out.contains("\n  127.0.0.1:9/metrics: cannot connect"), "{out}");
    assert!(out.contains("\n  start-up log of prefill 127.0.0.1:9: no --prefill-log given"), "{out}");
    let (rc, _, err) =
        pdtop(&["--prefill", "127.0.0.1:9", "--decode", "127.0.0.1:9", "--decode-log", "/nonexistent/x.log"]);
    assert_eq!(rc, 2, "{err}");
    let (rc, _, _) = pdtop(&["--prefill", "127.0.0.1:9"]);
    assert_eq!(rc, 2);
}

#[test]
fn nothing_read_is_no_clean_bill() {
    // Two ports nothing listens on, no logs: nothing can be called clean.
    let (rc, out, _) = pdtop(&["--prefill", "127.0.0.1:9", "--decode", "127.0.0.1:7", "--json"]);
    assert_eq!(rc, 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let unread: Vec<&serde_json::Value> =
        v["findings"].as_array().unwrap().iter().filter(|f| f["rule"] == "instance_unread").collect();
    assert_eq!(unread.len(), 2, "{v}");
    assert_eq!(unread[0]["severity"], "problem");
    assert!(unread.iter().any(|f| f["evidence"].to_string().contains("127.0.0.1:7/metrics")), "{v}");
}

/// The report of a pair whose decode log shows the shared port.
fn bind_failure_report() -> pdtop::doctor::Report {
    let mut f = nixl_pair();
    f.instances[1].log = Some(log(fixture("vllm-20965-address-in-use.log")));
    diagnose(&f)
}

#[test]
fn the_dashboard_draws_a_doctor_line_and_tells_findings_at_start_and_after_a_restart() {
    use pdtop::feed::Msg;
    use pdtop::state::EventKind;
    let report = bind_failure_report();
    let mut st = pdtop::state::AppState::new(crate::common::pair_endpoints(), 60.0);
    let rows = crate::common::scrapes("qwen3-shape-restart");
    let t0 = rows[0].0;
    st.apply(Msg::Doctor { at: t0, report: report.clone() });
    let told = |st: &pdtop::state::AppState| {
        st.events.iter().filter(|e| matches!(e.kind, EventKind::Doctor(Severity::Problem))).count()
    };
    assert_eq!(told(&st), 1);
    st.apply(Msg::Doctor { at: t0 + 1.0, report: report.clone() });
    assert_eq!(told(&st), 1, "told once");
    let screen = crate::common::screen_text(
        &pdtop::app::App::new(st.clone(), pdtop::theme::Theme::builtin("dark").unwrap()),
        120,
        40,
    );
    assert!(
        screen.contains(
            " DOCTOR  1 problem · decode 127.0.0.1:8200: the NIXL side-channel listener could not bind"
        ),
        "{screen}"
    );
    // The capture's decode restart, then the next report: told again.
    for (t, inst, body, error) in rows {
        let instance = usize::from(inst == "decode");
        st.apply(match body {
            Some(body) => Msg::Scrape { instance, at: t, body },
            None => Msg::ScrapeFailed { instance, at: t, error: error.unwrap_or_default() },
        });
    }
    assert!(st.events.iter().any(|e| e.kind == EventKind::Restart));
    st.apply(Msg::Doctor { at: st.now, report });
    assert_eq!(told(&st), 2);
    let e = st.events.iter().rfind(|e| matches!(e.kind, EventKind::Doctor(_))).unwrap();
    assert!(e.text.contains("change: a distinct VLLM_NIXL_SIDE_CHANNEL_PORT"), "{}", e.text);
}

/// A `.cmd` file of a capture as the shell splits it (single quotes only,
/// as the lab wrote them).
fn argv_of(cmd: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in cmd.trim().chars() {
        match c {
            '\'' => quoted = !quoted,
            ' ' if !quoted => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    out.push(cur);
    // `env VAR=... python3 ...`: the process's own argv starts at python3.
    let start = out.iter().position(|a| a.starts_with("python")).unwrap_or(0);
    out.split_off(start)
}

#[test]
fn a_real_command_line_fills_what_the_log_left_and_names_a_missing_connector() {
    use pdtop::doctor::host::fill_from_args;
    use pdtop::sources::host::ServeArgs;
    let dir = capture_dir("example-2p2d-demo-proxy");
    let cmd = |f: &str| argv_of(&std::fs::read_to_string(dir.join(f)).unwrap());
    let mut f = PairFacts {
        instances: vec![
            InstanceFacts::new(Role::Prefill, "127.0.0.1:8100"),
            InstanceFacts::new(Role::Decode, "127.0.0.1:8200"),
        ],
        ..Default::default()
    };
    // The decode's command line behind --prefill, the prefill's behind --decode.
    fill_from_args(&mut f.instances[0].startup, &ServeArgs::from_argv(&cmd("decode.cmd")));
    fill_from_args(&mut f.instances[1].startup, &ServeArgs::from_argv(&cmd("prefill.cmd")));
    let s = &f.instances[0].startup;
    assert_eq!(s.connector.as_deref(), Some("ExampleConnector"));
    assert_eq!(s.storage_path.as_deref(), Some("/lab/kv"));
    assert_eq!(s.block_size, Some(16));
    assert_eq!(roles::roles_swapped(&f)[0].severity, Severity::Problem);
    // The same command line without its --kv-transfer-config.
    let mut bare = cmd("prefill.cmd");
    let k = bare.iter().position(|a| a == "--kv-transfer-config").unwrap();
    bare.drain(k..k + 2);
    let mut i = InstanceFacts::new(Role::Prefill, "127.0.0.1:8100");
    fill_from_args(&mut i.startup, &ServeArgs::from_argv(&bare));
    f.instances[0] = i;
    let found = roles::roles_missing(&f);
    assert_eq!(found[0].rule, "connector_missing");
    assert!(found[0].fix.contains("kv_producer"));
}

#[test]
fn a_server_whose_port_never_listens_is_found_by_the_pid_its_log_names() {
    use pdtop::sources::host::{ProcRoot, SysRoots};
    let mut f = nixl_pair();
    assert_eq!(f.instances[0].log.as_ref().unwrap().api_pid, Some(600));
    // A /proc with no listener, and pid 600 running the lab's real prefill
    // command line (`prefill.cmd`, port 8100) with an environment.
    let root = std::env::temp_dir().join(format!("pdtop-doctor-proc-{}", std::process::id()));
    std::fs::create_dir_all(root.join("net")).unwrap();
    std::fs::create_dir_all(root.join("600")).unwrap();
    let header =
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";
    std::fs::write(root.join("net/tcp"), header).unwrap();
    let cmd = std::fs::read_to_string(capture_dir("example-2p2d-demo-proxy").join("prefill.cmd")).unwrap();
    std::fs::write(root.join("600/cmdline"), argv_of(&cmd).join("\0") + "\0").unwrap();
    std::fs::write(root.join("600/environ"), "VLLM_NIXL_SIDE_CHANNEL_PORT=5600\0HOME=/root\0").unwrap();
    let sys = SysRoots { net: Some(root.join("sys")), infiniband: None };
    pdtop::doctor::host::add_host_facts(&mut f, &ProcRoot::at(&root), &sys, None, None);
    let p = f.instances[0].process.as_ref().expect("found by the log's pid");
    assert_eq!(p.pid, 600);
    assert_eq!(f.instances[0].env("VLLM_NIXL_SIDE_CHANNEL_PORT"), Ok(Some("5600")));
    // The decode (pid 1475 in its log) is not in this /proc: said why.
    assert!(f.unread.iter().any(|u| u.source == "process behind decode 127.0.0.1:8200"), "{:?}", f.unread);
    std::fs::remove_dir_all(&root).unwrap();
}

/// A scenario of the real NIXL pair `scripts/doctor-lab` captured on a GPU
/// (`tests/fixtures/doctor/README.md`), read through its own /proc and sysfs.
fn lab_run(scenario: &str, extra: &[&str]) -> (i32, String, String) {
    let f = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/doctor").join(scenario);
    let p = |s: &str| f.join(s).display().to_string();
    let args = [
        "--proc-root",
        &p("root/proc"),
        "--sys-class-net",
        &p("root/sys/class/net"),
        "--prefill",
        "127.0.0.1:8100",
        "--decode",
        "127.0.0.1:8200",
        "--proxy",
        "127.0.0.1:8000",
        "--prefill-log",
        &p("logs/vllm-prefill.log"),
        "--decode-log",
        &p("logs/vllm-decode.log"),
        "--timeout",
        "0.5",
    ];
    pdtop(&[&args[..], extra].concat())
}

#[test]
fn the_gpu_pairs_two_mistakes_are_named_from_proc_and_logs_alone_and_the_fix_is_clean() {
    // No HTTP here: what the captured /proc holds (argv, environ, the
    // proxy's command line) and the logs must name both mistakes.
    let (rc, out, err) = lab_run("nixl-demo-proxy-block-mismatch", &["--json"]);
    assert_eq!(rc, 1, "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rules: Vec<&str> =
        v["findings"].as_array().unwrap().iter().map(|f| f["rule"].as_str().unwrap()).collect();
    assert_eq!(&rules[..2], ["block_size_differs", "demo_proxy_with_nixl"], "{v}");
    let block = &v["findings"][0];
    assert!(
        block["cause"]
            .as_str()
            .unwrap()
            .contains("decode's block size 16 is not a multiple of the prefill's 32")
    );
    assert!(block["fix"].as_str().unwrap().starts_with("--block-size 16 on the prefill"));
    let demo = &v["findings"][1];
    assert!(
        demo["evidence"][0]
            .as_str()
            .unwrap()
            .starts_with("argv of PID 1633: python3 /root/lab/src/vllm/disagg_proxy_demo.py"),
        "{demo}"
    );
    assert!(rules[2..].iter().all(|r| *r == "ucx_net_devices_unset"), "{rules:?}");
    let (rc, out, err) = lab_run("nixl-fixed", &[]);
    assert!(out.contains("NOTE    prefill 127.0.0.1:8100 [ucx_net_devices_unset]"), "{out}");
    assert!(!out.contains("PROBLEM") && !out.contains("WARNING"), "{out}");
    // The fixed prefill log holds both starts: the latest one is read. No
    // endpoint answers here (the pair is gone): nothing wrong, but not clean.
    assert_eq!(rc, 4, "{out}{err}");
    assert!(out.contains("\n  127.0.0.1:8200/metrics: cannot connect"), "{out}");
    assert!(
        out.ends_with(
            "but 6 sources could not be read, so the checks on them did not run (see `not read`)\n"
        ),
        "{out}"
    );
    let (rc, out, _) = lab_run("nixl-fixed", &["--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((rc, &v["verdict"]), (4, &serde_json::json!("incomplete")), "{v}");
}

#[test]
fn the_gpu_pairs_facts_come_from_the_real_proc() {
    use pdtop::doctor::gather::Sources;
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/doctor/nixl-fixed");
    let s = Sources {
        prefill: vec!["127.0.0.1:8100".into()],
        decode: vec!["127.0.0.1:8200".into()],
        proxy: Some("127.0.0.1:8000".into()),
        prefill_log: vec![dir.join("logs/vllm-prefill.log").display().to_string()],
        decode_log: vec![dir.join("logs/vllm-decode.log").display().to_string()],
        proc_root: dir.join("root/proc"),
        sys_class_net: dir.join("root/sys/class/net"),
        netns_pid: None,
        timeout: std::time::Duration::from_millis(100),
        own_pid: None,
    };
    let mut f = pdtop::doctor::gather::read_logs(&s).unwrap();
    s.add_host(&mut f);
    let p = &f.instances[0];
    assert_eq!(p.process.as_ref().map(|x| x.pid), Some(1713));
    assert_eq!(p.startup.block_size, Some(16), "the restarted prefill's argv");
    assert!(p.is_nixl());
    // Side channel: the listener the engine holds, and the port its environ gives.
    let sc = side_channel::side_channel(p).unwrap();
    assert_eq!(sc.port, 5600);
    let d = side_channel::side_channel(&f.instances[1]).unwrap();
    assert_eq!(d.port, 5601);
    assert!(
        sc.evidence.iter().any(|e| e == "PID 1713's tree listens on 127.0.0.1:5600"),
        "{:?}",
        sc.evidence
    );
    // The two ports 5600 and 5601: with two DP engines each, they would collide.
    let mut two = f.clone();
    for i in &mut two.instances {
        i.process.as_mut().unwrap().argv.extend(["--data-parallel-size".to_string(), "2".to_string()]);
    }
    assert_eq!(side_channel::port_shared(&two)[0].rule, "side_channel_port_shared");
    assert!(side_channel::port_shared(&f).is_empty());
    let net = f.host_net.as_ref().unwrap();
    assert_eq!(net.default_iface.as_deref(), Some("eth0"));
    assert!(!net.iface("ifb0").unwrap().up);
    assert!(f.proxy.as_ref().is_some_and(|x| !x.is_demo_proxy()));
}

#[test]
fn ucx_naming_a_down_device_is_named_from_the_gpu_log() {
    let f = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/doctor/nixl-ucx-down-engine-dies/logs/vllm-prefill.log");
    let mut facts = nixl_pair();
    facts.instances[0].log = Some(log(f));
    let found = ucx::devices_unavailable(&facts);
    assert_eq!(found.len(), 1);
    assert!(found[0].cause.starts_with("UCX_NET_DEVICES names ifb0"), "{}", found[0].cause);
    assert!(found[0].evidence[0].starts_with("vllm-prefill.log:115: "), "{:?}", found[0].evidence);
    assert_eq!(
        found[0].fix,
        "UCX_NET_DEVICES=<an interface that is up> (UCX offers: 'eth0'(tcp), 'lo'(tcp))"
    );
}

#[test]
fn a_side_channel_host_name_that_binds_loopback_is_loopback_across_hosts() {
    use pdtop::doctor::gather::Sources;
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/doctor/nixl-fixed");
    let s = Sources {
        prefill: vec!["127.0.0.1:8100".into()],
        decode: vec!["127.0.0.1:8200".into()],
        proxy: None,
        prefill_log: vec![],
        decode_log: vec![],
        proc_root: dir.join("root/proc"),
        sys_class_net: dir.join("root/sys/class/net"),
        netns_pid: None,
        timeout: std::time::Duration::from_millis(100),
        own_pid: None,
    };
    let mut f = pdtop::doctor::gather::read_logs(&s).unwrap();
    s.add_host(&mut f);
    // The real prefill bound 127.0.0.1:5600. Named by a host name, and with
    // the decode on another host, that loopback is what the decode cannot reach.
    let env = f.instances[0].process.as_mut().unwrap().environ.as_mut().unwrap();
    env.insert("VLLM_NIXL_SIDE_CHANNEL_HOST".into(), "gpu-node-1".into());
    assert!(side_channel::localhost_across_hosts(&f).is_empty(), "one host");
    f.instances[1].endpoint = "10.0.0.7:8200".into();
    f.instances[1].host = "10.0.0.7".into();
    f.instances[1].process = None;
    let found = side_channel::localhost_across_hosts(&f);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].evidence.iter().any(|e| e.ends_with("listens on 127.0.0.1:5600")),
        "{:?}",
        found[0].evidence
    );
}

/// The dashboard's doctor on `prefill` and `decode`, the logs tailed as
/// the dashboard tails them: its first report.
async fn tailed_doctor(dir: &std::path::Path, prefill: &PathBuf, decode: &PathBuf) -> pdtop::doctor::Report {
    use pdtop::doctor::watch::StartupLogs;
    use pdtop::feed::{LogOrigin, Msg, TailState};
    let path = |p: &PathBuf| p.display().to_string();
    let logs = StartupLogs::default();
    let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
    let clock: std::sync::Arc<dyn pdtop::clock::Clock> = std::sync::Arc::new(pdtop::clock::SystemClock);
    let feed = logs.clone();
    pdtop::sources::spawn_log_tailers(
        &[(LogOrigin::Prefill(0), path(prefill)), (LogOrigin::Decode(0), path(decode))],
        std::time::Duration::from_millis(20),
        Some(Box::new(move |p: &str, lines: &[String], reset: bool, state: &TailState| {
            feed.feed(p, lines, reset, state)
        })),
        clock.clone(),
        (tx.clone(), None),
    );
    let sources = pdtop::doctor::gather::Sources {
        prefill: vec!["127.0.0.1:8100".into()],
        decode: vec!["127.0.0.1:8200".into()],
        proxy: None,
        prefill_log: vec![path(prefill)],
        decode_log: vec![path(decode)],
        // Nothing of this host is read: an empty root.
        proc_root: dir.join("proc"),
        sys_class_net: dir.join("net"),
        netns_pid: None,
        timeout: std::time::Duration::from_secs(1),
        own_pid: None,
    };
    tokio::spawn(pdtop::doctor::watch::run(sources, logs, clock, tx));
    tokio::time::timeout(std::time::Duration::from_secs(20), async {
        loop {
            if let Some(Msg::Doctor { report, .. }) = rx.recv().await {
                return report;
            }
        }
    })
    .await
    .expect("a doctor report")
}

/// The dashboard's doctor reads no log itself: the tailer reads each line
/// once and hands it on (`StartupLogs`). A real NIXL pair's logs, the
/// decode's with the shared side-channel port, tailed as the dashboard
/// does: the first report names the bind failure from the tailed lines.
#[tokio::test]
async fn the_dashboards_doctor_reads_the_lines_the_tailer_read() {
    let dir = std::env::temp_dir().join(format!("pdtop-doctor-tailed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let prefill = dir.join("prefill.log");
    let decode = dir.join("decode.log");
    std::fs::copy(capture_dir("nixl-llama-shape").join("vllm-prefill.log"), &prefill).unwrap();
    std::fs::copy(fixture("vllm-20965-address-in-use.log"), &decode).unwrap();
    let report = tailed_doctor(&dir, &prefill, &decode).await;
    let _ = std::fs::remove_dir_all(&dir);
    let causes: Vec<&str> = report.findings.iter().map(|f| f.cause.as_str()).collect();
    assert!(
        causes.iter().any(|c| c.contains("the NIXL side-channel listener could not bind")),
        "{causes:#?}"
    );
    assert!(report.read.iter().any(|r| r.contains("decode.log")), "{:?}", report.read);
    // Both logs were read (the empty /proc is what is unread).
    assert!(!report.unread.iter().any(|u| u.why.contains(".log")), "{:?}", report.unread);
}

/// A log the tailer cannot find is said to be unread, with why, as the
/// doctor's own read said it: not taken for a log that said nothing.
#[tokio::test]
async fn the_dashboards_doctor_says_which_log_it_could_not_read() {
    let dir = std::env::temp_dir().join(format!("pdtop-doctor-untailed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let prefill = dir.join("prefill.log");
    std::fs::copy(capture_dir("nixl-llama-shape").join("vllm-prefill.log"), &prefill).unwrap();
    let report = tailed_doctor(&dir, &prefill, &dir.join("no-such-decode.log")).await;
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        report.unread.iter().any(|u| u.why.contains("no-such-decode.log: No such file")),
        "{:?}",
        report.unread
    );
}

/// The demo serves the pair from pdtop's own process: the port's holder is
/// pdtop itself, read as its own lab, not a source missed (this host's real
/// `/proc`, a port this test holds).
#[test]
fn pdtops_own_lab_is_no_source_missed() {
    use pdtop::sources::host::{ProcRoot, SysRoots};
    let addr = serve_vllm(vec!["vllm:num_requests_running 0\n".into()]);
    let facts =
        || PairFacts { instances: vec![InstanceFacts::new(Role::Prefill, &addr)], ..Default::default() };
    let sys = SysRoots { net: None, infiniband: None };
    let proc = ProcRoot::at(std::path::Path::new("/proc"));
    let mut f = facts();
    pdtop::doctor::host::add_host_facts(&mut f, &proc, &sys, None, Some(std::process::id()));
    assert!(f.read.iter().any(|r| r.ends_with("pdtop's own demo lab")), "{:?}", f.read);
    assert!(!f.unread.iter().any(|u| u.source.starts_with("process behind")), "{:?}", f.unread);
    // Another pdtop (no own pid given): a port held by a non-vllm process is not read.
    let mut f = facts();
    pdtop::doctor::host::add_host_facts(&mut f, &proc, &sys, None, None);
    assert!(f.unread.iter().any(|u| u.source.starts_with("process behind")), "{:?}", f.unread);
}

/// Pasted logs alone, no endpoint: the doctor names what the lines show
/// (a decode that handshook with the wrong engine: the side-channel host
/// left where another instance answers) and says the live checks did not
/// run; a clean pair's logs are therefore "not clean" (exit 4), never clean.
#[test]
fn doctor_on_logs_alone_names_what_the_lines_show() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_pdtop")).arg("doctor").args(args).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let pasted = fixture("vllm-27083-self-handshake.log");
    let (code, text) = run(&["--decode-log", &pasted.display().to_string()]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("[side_channel_wrong_engine]"), "{text}");
    assert!(text.contains("logs only"), "{text}");
    let dir = capture_dir("router-nixl-1p2d");
    let p = |f: &str| dir.join(f).display().to_string();
    let (code, text) = run(&[
        "--prefill-log",
        &p("vllm-prefill.log"),
        "--decode-log",
        &p("vllm-decode.log"),
        &p("vllm-decode2.log"),
    ]);
    assert_eq!(code, Some(4), "{text}");
    assert!(text.contains("decode log:vllm-decode2.log"), "{text}");
    // One endpoint without the other is still bad usage.
    assert_eq!(run(&["--prefill", "127.0.0.1:9"]).0, Some(2));
}
