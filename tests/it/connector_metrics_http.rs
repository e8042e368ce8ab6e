//! A Mooncake pair over loopback HTTP, watched by the real binary
//! (`pdtop check --json`). Each instance serves a REAL recorded vLLM 0.26
//! scrape (qwen3-shape-restart) followed by the vLLM 0.33 MooncakeConnector
//! families, which were built from the source's declarations (no real
//! Mooncake body is public; see the fixtures' headers). Between the first
//! scrape and the later ones the prefill sent one 112-token transfer and
//! failed one send; decode failed one receive. The real body's prompt and
//! success counters are moved to match (112 prompt tokens, one request).

use crate::common;

use std::process::Command;

fn read(path: std::path::PathBuf) -> String {
    std::fs::read_to_string(path).unwrap()
}

fn real(role: &str) -> String {
    read(common::capture_dir("qwen3-shape-restart").join(format!("{role}-metrics-idle.txt")))
}

fn mooncake(name: &str) -> String {
    read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/connector-metrics").join(name))
}

/// The real prefill scrape after one 112-token request finished.
fn prefill_after_one_request() -> String {
    let before = real("prefill");
    let after = before
        .replace(
            "vllm:prompt_tokens_total{engine=\"0\",model_name=\"lab-8b\"} 0.0",
            "vllm:prompt_tokens_total{engine=\"0\",model_name=\"lab-8b\"} 112.0",
        )
        .replace(
            "vllm:request_success_total{engine=\"0\",finished_reason=\"length\",model_name=\"lab-8b\"} 0.0",
            "vllm:request_success_total{engine=\"0\",finished_reason=\"length\",model_name=\"lab-8b\"} 1.0",
        );
    assert_eq!(after.matches(" 112.0\n").count(), 1 + before.matches(" 112.0\n").count());
    after
}

#[test]
fn mooncake_prefill_bytes_are_the_observed_kv_and_failures_are_events() {
    let prefill = common::serve_vllm(vec![
        real("prefill") + &mooncake("mooncake-prefill-a.txt"),
        prefill_after_one_request() + &mooncake("mooncake-prefill-b.txt"),
    ]);
    let decode = common::serve_vllm(vec![
        real("decode") + &mooncake("mooncake-decode-a.txt"),
        real("decode") + &mooncake("mooncake-decode-b.txt"),
    ]);
    let config = common::capture_dir("qwen3-shape-restart").join("model-config.json");
    let out = Command::new(env!("CARGO_BIN_EXE_pdtop"))
        .args(["check", "--json", "--duration", "1.5", "--interval", "0.2", "--timeout", "1"])
        .args(["--prefill", &prefill, "--decode", &decode])
        .args(["--model-config", &config.display().to_string()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let r: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));

    // The ledger: Mooncake's sender counted the KV, 112 tokens x 147456 B.
    let kv = &r["kv"];
    assert_eq!(kv["observed_source"], "mooncake_bytes_transferred", "{kv}");
    assert_eq!(kv["observed_bytes"], 16_515_072.0);
    assert_eq!(kv["nixl_bytes"], 0.0);
    assert_eq!(kv["predicted_bytes"], 16_515_072.0);
    assert_eq!(kv["verdict"], "ok");

    // Each failure is an event of its instance, with no log line behind it.
    let events = r["events"].as_array().unwrap();
    let of = |kind: &str| -> Vec<String> {
        events.iter().filter(|e| e["kind"] == kind).map(|e| e["text"].as_str().unwrap().to_string()).collect()
    };
    let sent = of("mooncake_failed_transfers");
    assert_eq!(sent.len(), 1, "{events:?}");
    assert!(sent[0].starts_with(&format!("{prefill}: 1 Mooncake transfer(s) failed")), "{sent:?}");
    let recv = of("mooncake_failed_recvs");
    assert_eq!(recv.len(), 1, "{events:?}");
    assert!(recv[0].starts_with(&format!("{decode}: 1 Mooncake receive(s) failed")), "{recv:?}");

    // Per instance, what each side's families said; nothing invented.
    let p = &r["instances"][0]["connector_metrics"];
    assert_eq!(p["mooncake"]["transfers"], 1.0, "{p}");
    assert_eq!(p["mooncake"]["bytes"], 16_515_072.0);
    assert_eq!(p["mooncake"]["xfer_time_s"], 0.012);
    assert_eq!(p["mooncake"]["failed_transfers"], 1.0);
    assert_eq!(p["mooncake"]["kv_expired_reqs"], 0.0);
    assert!(p["mooncake"].get("failed_notifications").is_none(), "{p}");
    for absent in ["nixl", "offload", "lmcache", "mooncake_store"] {
        assert!(p.get(absent).is_none(), "{absent}: {p}");
    }
    let d = &r["instances"][1]["connector_metrics"];
    assert_eq!(d["mooncake"]["failed_recvs"], 1.0, "{d}");
    assert_eq!(d["mooncake"]["bytes"], 0.0);
}
