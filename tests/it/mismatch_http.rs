//! Instances that disagree, watched over loopback HTTP by the real binary
//! (`pdtop check`). No recording has a pair with different block sizes, so
//! the decode side serves a copy of a REAL recorded scrape in which only
//! the `block_size` label of `vllm:cache_config_info` is changed; the
//! prefill side serves the real scrape as it was. `/v1/models` and
//! `/version` answer as vLLM 0.26.0 does.

use crate::common;

use std::process::Command;
use std::thread;

use pdtop::lab::{self, LabOptions};

/// A real idle scrape of the recorded pair (vLLM 0.26.0, block 16).
fn real_scrape(role: &str) -> String {
    let dir = common::capture_dir("qwen3-shape-restart");
    std::fs::read_to_string(dir.join(format!("{role}-metrics-idle.txt"))).unwrap()
}

/// The same scrape with only the block size changed.
fn with_block(body: &str, block: u32) -> String {
    let changed = body.replace("block_size=\"16\"", &format!("block_size=\"{block}\""));
    assert_ne!(changed, body, "the real scrape has a block_size label");
    changed
}

/// An instance on loopback serving `metrics`; returns `host:port`.
fn serve(metrics: String) -> String {
    common::serve_vllm(vec![metrics])
}

fn check(args: &[&str], json: bool) -> (Option<i32>, String) {
    let mut all = vec!["check", "--duration", "1.5", "--interval", "0.2", "--timeout", "1"];
    if json {
        all.push("--json");
    }
    all.extend_from_slice(args);
    let out = Command::new(env!("CARGO_BIN_EXE_pdtop")).args(&all).output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn prefill_block_16_and_decode_block_32_is_named_in_check() {
    let prefill = serve(real_scrape("prefill"));
    let decode = serve(with_block(&real_scrape("decode"), 32));
    let args = ["--prefill", &prefill, "--decode", &decode];
    let (code, text) = thread::scope(|s| {
        let human = s.spawn(|| check(&args, false));
        let (code, out) = check(&args, true);
        let r: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        let why = "prefill block 16, decode block 32: decode looks for blocks the prefill never stores";
        assert_eq!(
            r["mismatches"],
            serde_json::json!([{"field": "block_size", "values": {prefill.as_str(): 16, decode.as_str(): 32}, "why": why}]),
        );
        let events = r["events"].as_array().unwrap();
        assert!(events.iter().any(|e| e["kind"] == "mismatch" && e["text"] == why), "{events:?}");
        // /version was asked and answered on both.
        for i in r["instances"].as_array().unwrap() {
            assert_eq!(i["vllm_version"], "0.26.0", "{i}");
        }
        // No request failed, yet the pair cannot work: not "ok".
        assert_eq!(r["verdict"], "degraded");
        assert_eq!(code, Some(1));
        human.join().unwrap()
    });
    assert_eq!(code, Some(1));
    // The summary wraps at 80 columns: compared word by word.
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains(
            "mismatch: prefill block 16, decode block 32: decode looks for blocks the prefill never stores"
        ),
        "{text}"
    );
}

#[test]
fn the_same_scrape_on_both_sides_is_no_mismatch() {
    let prefill = serve(real_scrape("prefill"));
    let decode = serve(real_scrape("decode"));
    let (code, out) = check(&["--prefill", &prefill, "--decode", &decode], true);
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["mismatches"], serde_json::json!([]));
    assert_eq!(code, Some(0), "{out}");
}

#[test]
fn a_consumer_behind_prefill_is_a_role_confusion() {
    // Both instances started as kv_consumer: the real decode log is given
    // as the prefill's log too (copied to its own file).
    let dir = std::env::temp_dir().join(format!("pdtop-roles-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let real = common::capture_dir("qwen3-shape-restart").join("vllm-decode.log");
    let as_prefill = dir.join("prefill.log");
    std::fs::copy(&real, &as_prefill).unwrap();
    let prefill = serve(real_scrape("prefill"));
    let decode = serve(real_scrape("decode"));
    let (code, out) = check(
        &[
            "--prefill",
            &prefill,
            "--decode",
            &decode,
            "--prefill-log",
            &as_prefill.display().to_string(),
            "--decode-log",
            &real.display().to_string(),
        ],
        true,
    );
    let _ = std::fs::remove_dir_all(&dir);
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    let m = r["mismatches"].as_array().unwrap();
    assert_eq!(m.len(), 1, "{m:?}");
    assert_eq!(m[0]["field"], "kv_role");
    assert_eq!(m[0]["values"][prefill.as_str()], "kv_consumer");
    assert_eq!(
        m[0]["why"],
        format!("--prefill {prefill} runs kv_role=kv_consumer: it never stores KV for decode to load")
    );
    assert_eq!(r["instances"][0]["kv_connector"], "ExampleConnector");
    assert_eq!(code, Some(1));
}

/// The demo-proxy recording served by the lab over loopback, its decode
/// scrapes changed in one label (block_size 16 → 32): the misses it really
/// had are then explained by the mismatch, and its restarts judged.
#[tokio::test]
async fn misses_behind_a_block_mismatch_name_it_as_the_likely_cause() {
    let mut cap = common::capture("demo-proxy-qwen3").clone();
    for row in cap.scrapes.iter_mut().filter(|r| r.role == pdtop::feed::Role::Decode) {
        if let Some(body) = &mut row.body {
            *body = with_block(body, 32);
        }
    }
    let speed = 10.0;
    let secs = (cap.t_end - cap.t0) / speed + 1.0;
    let tmp = std::env::temp_dir().join(format!("pdtop-mismatch-lab-{}", std::process::id()));
    let lab =
        lab::start(cap, LabOptions { speed, looping: false, dir: tmp.clone(), otlp_to: None }).await.unwrap();
    let mut args: Vec<String> = vec!["check".into(), "--json".into()];
    args.extend(common::lab_pair_args(&lab, speed, secs));
    let out =
        tokio::task::spawn_blocking(move || Command::new(env!("CARGO_BIN_EXE_pdtop")).args(&args).output())
            .await
            .unwrap()
            .unwrap();
    let _ = std::fs::remove_dir_all(&tmp);
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["mismatches"][0]["field"], "block_size", "{}", r["mismatches"]);
    assert!(r["requests"]["silent_miss"].as_u64().unwrap() > 0, "{}", r["requests"]);
    let warnings: Vec<&str> = r["warnings"].as_array().unwrap().iter().filter_map(|w| w.as_str()).collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("silent miss(es): likely cause: prefill block 16, decode block 32")),
        "{warnings:?}"
    );
    let events = r["events"].as_array().unwrap();
    let of = |kind: &str| -> Vec<&str> {
        events.iter().filter(|e| e["kind"] == kind).filter_map(|e| e["text"].as_str()).collect()
    };
    assert!(of("silent_miss").iter().all(|t| t.contains("likely cause: prefill block 16")), "{events:?}");
    // The lab's /version answers what the recorded instances ran.
    assert_eq!(r["instances"][0]["vllm_version"], "0.26.0");
    // The decode restart recovered; the killed prefill never did.
    let decode = lab.decode.to_string();
    let prefill = lab.prefill.to_string();
    assert!(
        of("recovered").iter().any(|t| t.starts_with(&format!("{decode}: after its restart"))),
        "{events:?}"
    );
    assert!(
        of("not_recovered").iter().any(|t| t.starts_with(&format!("{prefill}: after its outage"))),
        "{events:?}"
    );
}
