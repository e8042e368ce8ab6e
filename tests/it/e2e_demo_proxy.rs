//! End to end on `demo-proxy-qwen3`: the recording served over loopback by
//! the lab (sped up), `pdtop check --json` run as a process against it
//! with every log, and its `traces` checked against the client's truth.

use crate::common;

use std::process::Command;

use pdtop::lab::{self, LabOptions};

/// Lab seconds per real second: a miss is called 1.5 lab seconds after a
/// request is added, so reading logs wants a slow lab on a loaded machine.
const SPEED: f64 = 5.0;

#[tokio::test]
async fn check_reports_every_trace_of_the_demo_proxy_capture() {
    let _turn = common::real_time_turn().await;
    let name = "demo-proxy-qwen3";
    let cap = common::capture(name).clone();
    let secs = (cap.t_end - cap.t0) / SPEED + 1.0;
    let dir = std::env::temp_dir().join(format!("pdtop-e2e-{name}-{}", std::process::id()));
    let lab = lab::start(cap, LabOptions { speed: SPEED, looping: false, dir: dir.clone(), otlp_to: None })
        .await
        .unwrap();
    let path = |p: &std::path::Path| p.display().to_string();
    let mut args: Vec<String> = vec!["check".into(), "--json".into()];
    for (k, v) in [
        ("--prefill", lab.prefill.to_string()),
        ("--decode", lab.decode.to_string()),
        ("--interval", "0.1".into()),
        ("--timeout", common::LAB_TIMEOUT.into()),
        ("--clock-speed", SPEED.to_string()),
        ("--clock-origin", lab.clock.stamp_origin().to_string()),
        ("--duration", secs.to_string()),
        ("--prefill-log", path(&lab.prefill_log)),
        ("--decode-log", path(&lab.decode_log)),
        ("--model-config", path(&common::capture_dir(name).join("model-config.json"))),
    ] {
        args.extend([k.to_string(), v]);
    }
    if let Some(p) = &lab.proxy_log {
        args.extend(["--proxy-log".into(), path(p)]);
    }
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_pdtop")).args(&args).output().unwrap()
    })
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let r: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    let q = &r["requests"];
    eprintln!("{q}\nmetrics {}", r["requests_metrics"]);
    assert_eq!(r["requests_source"], "traces");
    assert_eq!(
        (q["error"].as_u64(), q["cancelled"].as_u64(), q["no_prefill"].as_u64()),
        (Some(9), Some(2), Some(6)),
        "{q}"
    );
    let traces = r["traces"].as_array().unwrap();
    assert_eq!(q["seen"], 52, "one trace per request the client made");
    for t in traces.iter().filter(|t| t["outcome"] != "loaded" && t["outcome"] != "no_prefill") {
        eprintln!("{}: {} {}", t["outcome"], t["id"], t["evidence"]);
    }
    assert_eq!(traces.len() as u64, q["seen"].as_u64().unwrap());
    let errors: Vec<&serde_json::Value> = traces.iter().filter(|t| t["outcome"] == "error").collect();
    let at = |h: &str| errors.iter().filter(|t| t["error_at"] == h).count();
    assert_eq!((at("decode"), at("prefill")), (6, 3), "{errors:#?}");
    // The proxy named the prefill it dropped, where the lab serves it (the
    // recording says 127.0.0.1:8100): its own report says it was the
    // prefill stage.
    let dropped = format!("dropped {}", lab.prefill);
    assert!(errors.iter().any(|t| t["evidence"].as_str().unwrap().contains(&dropped)), "{errors:#?}");
    // The client's ids; none of the requests that loaded is called a miss.
    let truth = std::fs::read_to_string(common::capture_dir(name).join("requests.jsonl")).unwrap();
    for l in truth.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        let Some(id) = v["resp_id"].as_str() else { continue };
        let t = traces.iter().find(|t| t["id"] == id).unwrap_or_else(|| panic!("no trace {id}"));
        let cached = v["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap_or(0);
        if cached > 0 {
            assert_ne!(t["outcome"], "silent_miss", "{t}");
        }
        if v["mode"] != "decode_only" {
            assert_eq!(t["decode"], lab.decode.to_string(), "{t}");
        }
    }
    // The logs count the 8 misses they cannot name; the metrics see them too.
    let known = q["silent_miss"].as_u64().unwrap() + r["unattributed_misses"].as_u64().unwrap();
    assert_eq!(known, 8, "{q}");
    // The metrics alone never call more than the truth; where they cannot
    // tell which prefill was whose they say unknown. Live timing on a
    // loaded machine may still cost one or two (counted no prefill).
    let m = &r["requests_metrics"];
    let (miss, unknown) = (m["silent_miss"].as_u64().unwrap(), m["unknown"].as_u64().unwrap());
    assert!(miss <= 8 && miss + unknown >= 6, "{m}");
    assert_eq!(out.status.code(), Some(1), "silent misses fail the check");
}
