//! Link bytes against the KV size the model predicts, on the real
//! recordings (issue: "link bytes per request against the KV size the
//! model predicts").

use crate::common;

use pdtop::kv::{KvCacheDtype, ModelShape, block_rounded_tokens, bytes_per_token};
use pdtop::metrics::parse::parse;
use pdtop::report::Report;
use pdtop::sources::netdev::{byte_delta, parse_net_dev};
use pdtop::state::link::{LinkVerdict, verdict};

fn json_lines(cap: &str, file: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(common::capture_dir(cap).join(file))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn bpt(cap: &str) -> u64 {
    let text = std::fs::read_to_string(common::capture_dir(cap).join("model-config.json")).unwrap();
    bytes_per_token(&ModelShape::from_config_json(&text).unwrap(), KvCacheDtype::Auto)
}

/// Predicted bytes of the requests of a phase: ceil(tokens/16)*16 x bytes/token.
fn predicted(cap: &str, phase: &str) -> u64 {
    json_lines(cap, "requests.jsonl")
        .iter()
        .filter(|r| r["phase"] == phase)
        .map(|r| {
            let tokens = r["usage"]["prompt_tokens"].as_u64().unwrap();
            block_rounded_tokens(tokens, 16).unwrap() * bpt(cap)
        })
        .sum()
}

/// Received bytes on `lo` between a phase's start and end edges.
fn lo_rx_during(cap: &str, phase: &str) -> u64 {
    let events = json_lines(cap, "events.jsonl");
    let edge = |e: &str| {
        events.iter().find(|v| v["phase"] == phase && v["edge"] == e).unwrap()["t"].as_f64().unwrap()
    };
    let (start, end) = (edge("start"), edge("end"));
    let raw = std::fs::read(common::capture_dir(cap).join("netdev.jsonl.xz")).unwrap();
    let mut text = Vec::new();
    lzma_rs::xz_decompress(&mut &raw[..], &mut text).unwrap();
    let samples: Vec<(f64, u64)> = String::from_utf8(text)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let snap = parse_net_dev(v["text"].as_str().unwrap()).unwrap();
            (v["t"].as_f64().unwrap(), snap.get("lo").unwrap().rx_bytes)
        })
        .collect();
    // The samples that bracket the phase, summed as a live reader would.
    let first = samples.iter().rposition(|(t, _)| *t <= start).unwrap();
    let last = samples.iter().position(|(t, _)| *t >= end).unwrap();
    samples[first..=last].windows(2).filter_map(|w| byte_delta(w[0].1, w[1].1).bytes()).sum()
}

#[test]
fn nixl_bytes_transferred_equal_the_prediction_exactly() {
    assert_eq!(bpt("nixl-llama-shape"), 131_072);
    assert_eq!(bpt("qwen3-shape-restart"), 147_456);
    let predicted = predicted("nixl-llama-shape", "after_restart");
    assert_eq!(predicted, 1_847_590_912);
    let text =
        std::fs::read_to_string(common::capture_dir("nixl-llama-shape").join("decode-metrics-end.txt"))
            .unwrap();
    let e = parse(&text);
    let sum = e.samples.iter().find(|s| s.name == "vllm:nixl_bytes_transferred_sum").unwrap().value;
    assert_eq!(sum, predicted as f64);
}

#[test]
fn loopback_bytes_match_when_kv_moved_and_fall_far_below_on_misses() {
    let cap = "nixl-llama-shape";
    for phase in ["disagg", "edge_block"] {
        let (observed, predicted) = (lo_rx_during(cap, phase) as f64, predicted(cap, phase) as f64);
        let ratio = observed / predicted;
        assert!((1.0..=1.10).contains(&ratio), "{phase}: {observed} / {predicted} = {ratio}");
        assert_eq!(verdict(observed, predicted), LinkVerdict::Ok, "{phase}");
    }
    // noparams: the prefill ran, decode never pulled: nothing moved.
    let (observed, predicted) = (lo_rx_during(cap, "noparams") as f64, predicted(cap, "noparams") as f64);
    assert!(observed / predicted < 0.3, "noparams ratio {}", observed / predicted);
    assert_eq!(verdict(observed, predicted), LinkVerdict::FarBelow);
}

#[test]
fn replayed_nixl_lab_reports_bytes_against_prediction() {
    let st = common::replay_with_logs("nixl-llama-shape", 200.0);
    let kv = Report::from_state(&st).kv;
    assert_eq!(kv.bytes_per_token, Some(131_072));
    assert_eq!(kv.observed_source, Some("nixl_bytes_transferred"));
    // NIXL moved what the prefill computed, except the four noparams
    // prompts whose KV expired unread: a little under one.
    let ratio = kv.ratio.unwrap();
    assert!((0.6..1.0).contains(&ratio), "{kv:?}");
    assert_eq!(kv.verdict, LinkVerdict::Ok);
    let iface = kv.iface.unwrap();
    assert_eq!(iface.name, "lo");
    // Loopback carried the KV too (plus HTTP): more than NIXL counted.
    assert!(iface.rx_bytes > kv.nixl_bytes, "{} vs {}", iface.rx_bytes, kv.nixl_bytes);
}

#[test]
fn replayed_example_connector_lab_counts_the_directory() {
    let st = common::replay_with_logs("qwen3-shape-restart", 150.0);
    let kv = Report::from_state(&st).kv;
    assert_eq!(kv.bytes_per_token, Some(147_456));
    assert_eq!(kv.observed_source, Some("kv_dir"));
    assert_eq!(kv.kv_dir_folders, 80);
    // Every stored prompt's files, as listed at the end of the recording.
    assert_eq!(kv.kv_dir_bytes, 17_940_340_224.0);
}

#[test]
fn connector_directory_deleted_is_a_state_on_screen() {
    use pdtop::app::App;
    use pdtop::feed::Msg;
    use pdtop::sources::kvdir;
    use pdtop::state::link::{KvModel, LinkState};
    let dir = std::env::temp_dir().join(format!("pdtop-kvdir-gone-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("prompt-a")).unwrap();
    std::fs::write(dir.join("prompt-a/model.layers.0.self_attn.attn.safetensors"), vec![0u8; 4096]).unwrap();
    let model = KvModel { bytes_per_token: 147_456, source: "test".into(), layers: Some(36) };
    let mut st = pdtop::state::AppState::new(common::pair_endpoints(), 60.0).with_link(LinkState::new(
        None,
        Some(model),
        None,
    ));
    st.apply(Msg::KvDir { at: 1.0, scan: kvdir::scan(&dir) });
    std::fs::remove_dir_all(&dir).unwrap();
    st.apply(Msg::KvDir { at: 2.0, scan: kvdir::scan(&dir) });
    assert!(st.link.kvdir_error.as_deref().unwrap().contains("pdtop-kvdir-gone"));
    let mut app = App::new(st, pdtop::theme::Theme::builtin("dark").unwrap());
    app.view.view = pdtop::ui::View::Link;
    let text = common::screen_text(&app, 140, 40);
    assert!(text.contains("kv-dir: ") && text.contains("No such file"), "{text}");
}
