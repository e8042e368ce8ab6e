//! End to end: a real recording served over loopback HTTP by the demo lab
//! (sped up), and `pdtop check --json` run as processes against it
//! (`common::labs`).

use crate::common;

use std::process::Command;

use common::labs::{RECORDED, lab_run};

fn decode_of(report: &serde_json::Value) -> &serde_json::Value {
    report["instances"].as_array().unwrap().iter().find(|i| i["role"] == "decode").unwrap()
}

#[test]
fn check_sees_the_restart_and_the_silent_misses_from_metrics() {
    let (code, r) = &lab_run("qwen3-shape-restart").metrics;
    let code = *code;
    let decode = decode_of(r);
    assert!(decode["restarts"].as_u64().unwrap() >= 1, "{decode}");
    assert!(decode["scrapes_failed"].as_u64().unwrap() > 0, "{decode}");
    assert!(decode["last_error"].as_str().unwrap().contains("refused"), "{decode}");
    assert!(r["requests"]["silent_miss"].as_u64().unwrap() >= 4, "{}", r["requests"]);
    assert_eq!(r["verdict"], "silent_misses");
    assert_eq!(code, 1, "silent misses fail the check");
    // The fields pdtop promises (README, "The check report").
    for key in ["ttft_ms", "tpot_ms", "kv_usage", "decode_prompt_tokens", "requests", "silent_miss_ids"] {
        assert!(r.get(key).is_some(), "missing {key}");
    }
    assert!(r["ttft_ms"]["decode"]["p50"].as_f64().unwrap() > 0.0);
    assert_eq!(r["decode_prompt_tokens"]["local_cache_hit"], 0.0);
}

#[test]
fn check_on_the_nixl_capture_from_metrics() {
    let (_, r) = &lab_run("nixl-llama-shape").metrics;
    // Metrics alone are a conservative cross-check: never more than the
    // truth (4), and they see misses.
    let n = r["requests"]["silent_miss"].as_u64().unwrap();
    assert!((1..=4).contains(&n), "{}", r["requests"]);
    assert_eq!(r["requests_source"], "metrics");
    assert_eq!(r["verdict"], "silent_misses");
    assert!(decode_of(r)["restarts"].as_u64().unwrap() >= 1);
}

fn ids(r: &serde_json::Value) -> Vec<String> {
    r["silent_miss_ids"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect()
}

#[test]
fn traces_name_the_misses_on_the_example_connector_capture() {
    let (code, r) = &lab_run("qwen3-shape-restart").all;
    let code = *code;
    let q = &r["requests"];
    assert_eq!(r["requests_source"], "traces");
    let odd: Vec<String> = r["traces"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| {
            let id = t["id"].as_str().unwrap_or("");
            matches!(t["outcome"].as_str(), Some("silent_miss" | "unknown"))
                && !id.contains("edge_block")
                && !id.contains("mismatch")
        })
        .map(|t| format!("{} {} {}", t["id"], t["outcome"], t["evidence"]))
        .collect();
    assert_eq!(q["silent_miss"], 8, "{q} {odd:#?}");
    let mut expected: Vec<String> = (0..4)
        .map(|i| format!("lab-edge_block-{i}"))
        .chain((0..4).map(|i| format!("lab-mismatch-{i}")))
        .collect();
    expected.sort();
    let mut got = ids(r);
    got.sort();
    assert_eq!(got, expected);
    assert_eq!(q["no_prefill"], 8, "{q}");
    let loaded = q["loaded"].as_i64().unwrap();
    assert!((59..=61).contains(&loaded), "{q}");
    assert!(got.iter().all(|id| !id.contains("steady") && !id.contains("after_restart")));
    assert_eq!(code, 1);
    // Link bytes: the shared directory is the transfer; its bytes against
    // the prompt tokens the prefill processed.
    let kv = &r["kv"];
    assert_eq!(kv["bytes_per_token"], 147_456, "{kv}");
    assert_eq!(kv["observed_source"], "kv_dir", "{kv}");
    assert!(kv["kv_dir_folders"].as_u64().unwrap() >= 70, "{kv}");
    let ratio = kv["ratio"].as_f64().unwrap();
    assert!((0.8..1.6).contains(&ratio), "{kv}");
    // Per request: every folder the lab stored is tied to its request, and
    // through the directory no interface carried the KV.
    // Live, a scan that comes late on a loaded machine widens a folder's
    // creation window until two writers fit it: that folder is left
    // unknown (two full test runs in 2026-12 left one of 80), not given to
    // either.
    let folders = &kv["folders"];
    let (matched, stored) = (folders["matched"].as_u64().unwrap(), folders["stored"].as_u64().unwrap());
    assert!(matched <= stored && stored - matched <= 1, "{folders}");
    assert_eq!(folders["matched_by_size"], folders["matched"], "{folders}");
    assert!(folders["text"].as_str().unwrap().starts_with("the directory is filling up"), "{folders}");
    assert_eq!(kv["carrier"], serde_json::Value::Null, "{kv}");
    assert_eq!(kv["window"]["moved_nothing"].as_array().unwrap().len(), 8, "{}", kv["window"]);
}

#[test]
fn traces_name_the_misses_on_the_nixl_capture() {
    let (_, r) = &lab_run("nixl-llama-shape").all;
    let q = &r["requests"];
    assert_eq!(q["silent_miss"], 4, "{q}");
    let mut got = ids(r);
    got.sort();
    assert_eq!(got, (0..4).map(|i| format!("lab-noparams-{i}")).collect::<Vec<_>>());
    // edge_block moved whole blocks over NIXL: loaded, not missed.
    assert!(got.iter().all(|id| !id.contains("edge_block")));
    assert_eq!(q["no_prefill"], 8, "{q}");
    let loaded = q["loaded"].as_i64().unwrap();
    assert!((51..=53).contains(&loaded), "{q}");
    let kv = &r["kv"];
    assert_eq!(kv["bytes_per_token"], 131_072, "{kv}");
    assert_eq!(kv["observed_source"], "nixl_bytes_transferred", "{kv}");
    assert_eq!(kv["verdict"], "ok", "{kv}");
    assert_eq!(kv["iface"]["name"], "lo", "{kv}");
}

#[test]
fn proxy_log_alone_names_no_request() {
    for capture in common::CAPTURES {
        let (_, r) = &lab_run(capture).proxy_only;
        assert!(ids(r).is_empty(), "{capture}: {}", r["silent_miss_ids"]);
        // Without an instance log, the counts are the metrics' own.
        assert_eq!(r["requests_source"], "metrics");
    }
}

#[test]
fn bad_usage_exits_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_pdtop")).args(["check", "--duration", "1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--prefill"));
    let out = Command::new(env!("CARGO_BIN_EXE_pdtop")).args(["check", "--bogus"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn unreachable_instance_is_degraded_and_exits_1() {
    let _turn = common::real_time_turn_blocking();
    // Port 9 on loopback: nothing listens there.
    let out = Command::new(env!("CARGO_BIN_EXE_pdtop"))
        .args(["check", "--decode", "127.0.0.1:9", "--interval", "0.1", "--duration", "0.5", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["verdict"], "degraded");
    assert_eq!(r["instances"][0]["up"], false);
    assert!(r["instances"][0]["scrapes_failed"].as_u64().unwrap() > 0);
}

#[test]
fn a_recording_replays_to_the_same_verdict_as_the_live_check() {
    let run = lab_run(RECORDED);
    let ((live_code, live), file) = (&run.all, run.recording.as_ref().unwrap());
    let live_code = *live_code;
    let out = Command::new(env!("CARGO_BIN_EXE_pdtop"))
        .args(["check", "--replay", &file.display().to_string(), "--json"])
        .output()
        .unwrap();
    let replayed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(live_code));
    assert_eq!(replayed["requests"], live["requests"]);
    assert_eq!(replayed["silent_miss_ids"], live["silent_miss_ids"]);
    assert_eq!(replayed["verdict"], live["verdict"]);
    for (a, b) in replayed["instances"].as_array().unwrap().iter().zip(live["instances"].as_array().unwrap())
    {
        assert_eq!(a["role"], b["role"]);
        assert_eq!(a["endpoint"], b["endpoint"]);
        assert_eq!(a["restarts"], b["restarts"]);
    }
    assert_eq!(replayed["kv"]["bytes_per_token"], live["kv"]["bytes_per_token"]);
    // A damaged recording plays its good head and says where it broke.
    let bytes = std::fs::read(file).unwrap();
    let damaged = file.with_extension("damaged.pdrec");
    std::fs::write(&damaged, &bytes[..bytes.len() / 2]).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pdtop"))
        .args(["check", "--replay", &damaged.display().to_string(), "--json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{err}");
    assert!(err.contains("recording damaged") && err.contains("at byte"), "{err}");
    let half: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let seen = |r: &serde_json::Value| r["requests"]["seen"].as_u64().unwrap();
    assert!(seen(&half) > 0 && seen(&half) <= seen(&replayed), "{} of {}", seen(&half), seen(&replayed));
    // Damaged before its header: nothing to play, a runtime failure (exit 3).
    std::fs::write(&damaged, &bytes[..8]).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pdtop"))
        .args(["check", "--replay", &damaged.display().to_string(), "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("at byte"));
    std::fs::remove_file(&damaged).ok();
    std::fs::remove_file(file).ok();
}
