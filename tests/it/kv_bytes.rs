//! Bytes per request on the real recordings (issue #14): did each
//! request's KV move, over which wire, and was it the size predicted.

use crate::common;

use std::collections::BTreeMap;

use pdtop::kv::block_rounded_tokens;
use pdtop::report::kv::KvRequests;
use pdtop::report::kv_bytes::build;

/// Client truth: id → (phase, prompt tokens, cached tokens).
fn truth(cap: &str) -> BTreeMap<String, (String, u64, u64)> {
    std::fs::read_to_string(common::capture_dir(cap).join("requests.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter_map(|v| {
            let u = &v["usage"];
            Some((
                v["id"].as_str()?.to_string(),
                (
                    v["phase"].as_str()?.to_string(),
                    u["prompt_tokens"].as_u64()?,
                    u["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap_or(0),
                ),
            ))
        })
        .collect()
}

#[test]
fn nixl_each_transfer_is_the_size_predicted_and_the_four_noparams_moved_nothing() {
    let cap = "nixl-llama-shape";
    let st = common::replay_with_logs(cap, 400.0);
    let ledger = build(&st);
    let truth = truth(cap);
    let mut nothing: Vec<&str> = ledger.moved_nothing();
    nothing.sort();
    assert_eq!(nothing, (0..4).map(|i| format!("lab-noparams-{i}")).collect::<Vec<_>>());
    let (o, p, n) = ledger.ratio().unwrap();
    assert!((0.95..=1.05).contains(&(o / p)), "{o} / {p}");
    // Every request whose KV moved: warmup_p 2, disagg 6, edge_block 4,
    // steady 30, after_restart 10.
    assert_eq!(n, 52);
    let mut exact = 0;
    for r in ledger.requests.iter().filter(|r| r.outcome == "loaded") {
        let (phase, prompt, cached) = &truth[&r.id];
        // The prompt length decode was told, and the prediction from it.
        assert_eq!(r.tokens, Some(*prompt), "{}", r.id);
        assert_eq!(cached, prompt, "{}: the truth says all of it loaded", r.id);
        assert_eq!(r.predicted, Some((block_rounded_tokens(*prompt, 16).unwrap() * 131_072) as f64));
        assert_eq!(r.source, "nixl_bytes_transferred");
        let obs = r.observed.unwrap();
        if r.note.contains("split by prompt tokens") {
            // Overlapping transfers in one scrape: shared out, within a block.
            assert!((obs - r.predicted.unwrap()).abs() <= 16.0 * 131_072.0, "{r:?}");
            assert_eq!(r.confidence, "likely");
        } else {
            // One transfer in the scrape: NIXL's count is this request's.
            assert_eq!(Some(obs), r.predicted, "{phase} {r:?}");
            exact += 1;
        }
    }
    // disagg and edge_block ran one at a time: none of them shared a scrape.
    for r in ledger.requests.iter().filter(|r| r.id.contains("disagg") || r.id.contains("edge_block")) {
        assert_eq!(r.observed, r.predicted, "{r:?}");
        assert_eq!(r.confidence, "sure", "{r:?}");
    }
    assert!(exact >= 18, "{exact}");
    for r in ledger.requests.iter().filter(|r| r.id.contains("noparams")) {
        assert_eq!((r.observed, r.verdict), (Some(0.0), "moved_nothing"), "{r:?}");
        assert!(r.note.contains("no kv_transfer_params"), "{}", r.note);
        // Its prompt length still known, from the prefill's own metrics.
        assert_eq!(r.tokens, Some(truth[&r.id].1), "{r:?}");
    }
    // Decode-only requests were never expected to move anything.
    assert!(
        ledger.requests.iter().filter(|r| r.id.contains("baseline")).all(|r| r.verdict == "not_expected")
    );
    // The wire: loopback carried what NIXL moved.
    let c = ledger.carrier.as_ref().unwrap();
    assert_eq!(c.name, "lo");
    assert!((0.9..1.2).contains(&c.share), "{c:?}");
    // Each request's transfer window shows its bytes on lo, give or take
    // the HTTP and scrapes that share it.
    for r in ledger.requests.iter().filter(|r| r.id.contains("disagg-")) {
        let on_lo = r.window_iface_bytes.unwrap();
        assert!(on_lo >= 0.6 * r.predicted.unwrap(), "{r:?}");
    }
}

#[test]
fn nixl_worth_it_says_where_the_split_pays_on_this_link() {
    let st = common::replay_with_logs("nixl-llama-shape", 400.0);
    let kv = KvRequests::from_state(&st);
    let w = kv.worth.unwrap();
    // NIXL's own bytes over its own transfer time: 390-440 MB/s in the README.
    assert!((300e6..500e6).contains(&w.rate_bytes_per_s), "{w:?}");
    assert_eq!(w.rate_source, "nixl_xfer_time");
    assert_eq!(w.link, "lo");
    // Decode computed baseline prompts up to 4000 tokens itself.
    assert!(w.computed_samples >= 6 && w.longest_computed_tokens == 4000, "{w:?}");
    // Measured: decode TTFT 78 ms without the producer, 624 ms with it.
    assert!(w.transfer_always_slower, "{w:?}");
    assert!(w.text.starts_with("on lo at "), "{}", w.text);
    let r = kv.requests.iter().find(|r| r.id == "lab-disagg-2").unwrap();
    assert!(r.transfer_s.unwrap() > r.recompute_s.unwrap(), "{r:?}");
    assert_eq!(kv.carrier.as_deref(), Some("lo"));
    assert_eq!(kv.window.moved_nothing.len(), 4);
}

#[test]
fn example_connector_every_folder_matched_to_its_request_byte_for_byte() {
    let cap = "qwen3-shape-restart";
    let st = common::replay_with_logs(cap, 400.0);
    let ledger = build(&st);
    let truth = truth(cap);
    assert_eq!(ledger.folders.len(), 80);
    for f in &ledger.folders {
        let id = f.request.as_deref().unwrap_or_else(|| panic!("unmatched {f:?}"));
        assert_eq!(f.matched_by, "time and size", "{f:?}");
        assert_eq!(f.predicted, Some(f.bytes), "{f:?}");
        let (phase, prompt, _) = &truth[id];
        // Decode writes a folder of its own for prompts it computed: the
        // decode-only phases and the mismatch (a different prompt).
        let decode_writes =
            ["warmup", "baseline"].contains(&phase.as_str()) || (phase == "mismatch" && f.writer == "decode");
        assert_eq!(f.writer == "decode", decode_writes, "{f:?}");
        // ExampleConnector stores (len - 1) aligned down to the block. The
        // truth has decode's prompt: for a mismatch, not the prefill's.
        if !(phase == "mismatch" && f.writer == "prefill") {
            assert_eq!(f.tokens, Some((prompt - 1) / 16 * 16), "{f:?} {prompt}");
        }
        // Read only by a request that loaded it.
        let loaded = !["edge_block", "mismatch", "warmup", "baseline"].contains(&phase.as_str());
        assert_eq!(f.read, loaded && f.writer == "prefill", "{f:?}");
    }
    let ids: std::collections::BTreeSet<&str> =
        ledger.folders.iter().filter_map(|f| f.request.as_deref()).collect();
    let stored_by_prefill = ledger.folders.iter().filter(|f| f.writer == "prefill").count();
    assert_eq!(stored_by_prefill, 68);
    assert_eq!(ids.len(), 76, "every request that stored something");
    for r in ledger.requests.iter().filter(|r| r.outcome == "loaded") {
        assert_eq!((r.observed, r.source.as_str()), (r.predicted, "kv_dir"), "{r:?}");
    }
    let mut nothing = ledger.moved_nothing();
    nothing.sort();
    let expect: Vec<String> = (0..4)
        .map(|i| format!("lab-edge_block-{i}"))
        .chain((0..4).map(|i| format!("lab-mismatch-{i}")))
        .collect();
    assert_eq!(nothing, expect);
    let (o, p, n) = ledger.ratio().unwrap();
    assert_eq!((o, n), (p, 60));
    // Through the directory: no interface's traffic matches.
    assert_eq!(ledger.carrier, None);
    let kv = KvRequests::from_ledger(&st, &ledger);
    let folders = kv.folders.unwrap();
    assert_eq!(folders.unread.len(), 20);
    assert!(
        folders.text.unwrap().starts_with("the directory is filling up with blocks nobody reads: 20 of 80")
    );
    assert!(kv.wire.unwrap().contains("connector directory"));
}

/// The NIXL recording replayed with `--iface eth0` named: the state a
/// live pdtop reaches, and its Link view.
fn nixl_named_eth0(secs: f64) -> pdtop::state::AppState {
    let cap = common::capture("nixl-llama-shape");
    let mut session = pdtop::pipeline::Session::from_capture(cap, true);
    session.iface = Some("eth0".into());
    let mut st = session.state();
    for m in pdtop::lab::replay::messages(cap, secs, true) {
        st.apply(m);
    }
    st
}

#[test]
fn the_wrong_wire_is_said_loudly_on_screen() {
    let st = nixl_named_eth0(400.0);
    let kv = KvRequests::from_state(&st);
    assert_eq!(kv.carrier.as_deref(), Some("lo"));
    let warning = kv.wire_warning.clone().unwrap();
    assert!(warning.contains("the KV went over lo") && warning.contains("eth0 carried nothing"), "{warning}");
    let mut app = pdtop::app::App::new(st, pdtop::theme::Theme::builtin("dark").unwrap());
    app.view.view = pdtop::ui::View::Link;
    let text = common::screen_text(&app, 160, 60);
    assert!(text.contains("✖ the KV went over lo"), "{text}");
    assert!(text.contains("4 moved nothing: lab-noparams-0"), "{text}");
    assert!(text.contains("lab-after_restart-9"), "{text}");
    // Before the first miss (noparams starts 39 s in), the banner on every
    // view is the wrong wire.
    let app = pdtop::app::App::new(nixl_named_eth0(36.0), pdtop::theme::Theme::builtin("dark").unwrap());
    let text = common::screen_text(&app, 160, 40);
    assert!(text.contains("▲ WRONG WIRE  the KV went over lo"), "{text}");
}

/// `pdtop check --json` against the recording served on loopback, its
/// interface counters through `--net-dev-file`, with `--iface eth0` named.
#[test]
fn check_says_the_kv_went_over_lo_when_eth0_is_named() {
    // Played once with the other checks of the capture (`common::labs`).
    let (_, r) = common::labs::lab_run(common::labs::ETH0).eth0.as_ref().unwrap();
    let kv = &r["kv"];
    assert_eq!(kv["carrier"], "lo", "{kv}");
    assert_eq!(kv["iface_named"], "eth0", "{kv}");
    let warning = kv["wire_warning"].as_str().unwrap();
    assert!(warning.contains("the KV went over lo") && warning.contains("eth0"), "{warning}");
    assert!(r["warnings"].as_array().unwrap().iter().any(|w| w.as_str() == Some(warning)));
    let nothing: Vec<&str> =
        kv["window"]["moved_nothing"].as_array().unwrap().iter().filter_map(|v| v.as_str()).collect();
    assert_eq!(nothing, ["lab-noparams-0", "lab-noparams-1", "lab-noparams-2", "lab-noparams-3"]);
    let ratio = kv["window"]["ratio"].as_f64().unwrap();
    assert!((0.95..=1.05).contains(&ratio), "{}", kv["window"]);
    let one = kv["requests"].as_array().unwrap().iter().find(|q| q["id"] == "lab-disagg-1").unwrap();
    assert_eq!(one["predicted"], one["observed"], "{one}");
    assert_eq!(one["source"], "nixl_bytes_transferred");
}

/// Every interface is read without `--iface`, with speeds and RDMA ports
/// from the sysfs trees given (the hidden roots tests inject).
#[test]
fn check_reads_every_interface_and_the_injected_sysfs() {
    let root = std::env::temp_dir().join(format!("pdtop-kvbytes-sys-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let w = |p: &str, s: &str| {
        let p = root.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, s).unwrap();
    };
    w("net/eth0/speed", "1000\n");
    w("net/ib0/speed", "100000\n");
    w("ib/mlx5_0/ports/1/rate", "100 Gb/sec (4X EDR)\n");
    w("ib/mlx5_0/ports/1/counters/port_rcv_data", "25\n");
    w("ib/mlx5_0/ports/1/counters/port_xmit_data", "0\n");
    w("ib/mlx5_0/device/net/ib0/ifindex", "3\n");
    w(
        "net-dev",
        "Inter-|   Receive |  Transmit\n face |bytes packets errs drop fifo frame compressed multicast|bytes packets errs drop fifo colls carrier compressed\n    lo: 5 1 0 0 0 0 0 0 5 1 0 0 0 0 0 0\n  eth0: 7 1 0 0 0 0 0 0 9 1 0 0 0 0 0 0\n   ib0: 1 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n",
    );
    let p = |s: &str| root.join(s).display().to_string();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pdtop"))
        .args(["check", "--json", "--decode", "127.0.0.1:9", "--interval", "0.1", "--duration", "0.6"])
        .args([
            "--net-dev-file",
            &p("net-dev"),
            "--sys-class-net",
            &p("net"),
            "--sys-class-infiniband",
            &p("ib"),
        ])
        .output()
        .unwrap();
    std::fs::remove_dir_all(&root).ok();
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ifs = &r["kv"]["interfaces"];
    assert_eq!(ifs["eth0"]["speed_mbps"], 1000, "{ifs}");
    assert_eq!(ifs["ib0"]["rdma"], "mlx5_0", "{ifs}");
    assert_eq!(ifs["rdma:mlx5_0"]["speed_mbps"], 100_000, "{ifs}");
    assert_eq!(ifs["lo"]["loopback"], true, "{ifs}");
    // Nothing moved: no carrier, nothing to warn about.
    assert_eq!(r["kv"]["carrier"], serde_json::Value::Null);
    assert_eq!(r["kv"]["iface_named"], serde_json::Value::Null);
    assert_eq!(r["kv"]["wire_warning"], serde_json::Value::Null);
}
