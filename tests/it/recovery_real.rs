//! Restarts, outages and cancellations in the real recordings: after each,
//! did the KV usage go back to idle and did the next request succeed (the
//! lesson's consumer-restart, producer-kill and cancelled-request tests)?
//! The recordings are replayed in-process, as a live pdtop would see them.

use pdtop::lab::Capture;
use pdtop::state::AppState;

pub fn capture(name: &str) -> Capture {
    crate::common::capture(name).clone()
}

/// The state at the end of a recording, as `check` leaves it.
fn finished(name: &str, with_logs: bool) -> AppState {
    let cap = capture(name);
    let mut st = pdtop::lab::replay::state_at(&cap, cap.t_end - cap.t0 + 1.0, with_logs);
    st.finish(st.now);
    st
}

/// The recovery events, oldest first: (kind, text).
fn recovery_events(st: &AppState) -> Vec<(&'static str, String)> {
    st.events
        .iter()
        .map(|e| (e.kind.name(), e.text.clone()))
        .filter(|(k, _)| matches!(*k, "recovered" | "not_recovered" | "kv_not_released" | "recovery_unknown"))
        .collect()
}

#[test]
fn demo_proxy_cancel_then_engine_death_then_restart_then_prefill_killed() {
    let st = finished("demo-proxy-qwen3", true);
    let ev = recovery_events(&st);
    // Truth (README): 2 streams cancelled, then the decode engine died with
    // the next 4 requests in flight; restarted, its next requests were
    // answered; the prefill was killed and never came back.
    assert_eq!(ev.len(), 3, "{ev:#?}");
    assert_eq!(ev[0].0, "not_recovered");
    assert!(ev[0].1.starts_with("127.0.0.1:8200: after 2 cancelled requests, it went down"), "{}", ev[0].1);
    // The cancelled streams' KV was freed before the engine died.
    assert!(ev[0].1.contains("KV back to idle (0.0% with nothing running)"), "{}", ev[0].1);
    assert_eq!(ev[1].0, "recovered");
    assert!(
        ev[1].1.starts_with("127.0.0.1:8200: after its restart, the next request succeeded"),
        "{}",
        ev[1].1
    );
    assert!(ev[1].1.contains("KV back to idle"), "{}", ev[1].1);
    assert_eq!(ev[2], ("not_recovered", "127.0.0.1:8100: after its outage, still down at the end".into()));
    let r = pdtop::report::Report::from_state(&st);
    assert!(r.events.iter().any(|e| e.kind == "recovered"));
    assert!(r.mismatches.is_empty(), "{:?}", r.mismatches);
}

#[test]
fn without_logs_the_restart_is_still_judged_from_metrics() {
    // vLLM 0.26 does not count a client's cancel in request_success_total,
    // so without the log only the restart and the outage are watched.
    let ev = recovery_events(&finished("demo-proxy-qwen3", false));
    let kinds: Vec<&str> = ev.iter().map(|(k, _)| *k).collect();
    assert_eq!(kinds, ["recovered", "not_recovered"], "{ev:#?}");
}

#[test]
fn consumer_restart_recovers_on_both_recorded_connectors() {
    for name in ["qwen3-shape-restart", "nixl-llama-shape"] {
        let ev = recovery_events(&finished(name, false));
        assert_eq!(ev.len(), 1, "{name}: {ev:#?}");
        assert_eq!(ev[0].0, "recovered", "{name}");
        assert!(
            ev[0].1.starts_with("127.0.0.1:8200: after its restart, the next request succeeded"),
            "{name}"
        );
    }
}

#[test]
fn the_recorded_pairs_agree_on_everything() {
    for name in ["qwen3-shape-restart", "nixl-llama-shape", "demo-proxy-qwen3"] {
        let st = finished(name, true);
        assert!(st.mismatches.is_empty(), "{name}: {:?}", st.mismatches);
        // Their logs said enough to compare.
        for i in &st.instances {
            assert_eq!(i.startup.version.as_deref(), Some("0.26.0"), "{name}");
            assert!(i.startup.kv_role.is_some(), "{name}");
        }
    }
}

/// The same recording served over loopback by the lab with its logs, and
/// `pdtop check` run against it: the cancellation is read from the decode
/// log as it grows, the rest from the scrapes.
#[tokio::test]
async fn check_over_the_lab_judges_the_cancel_the_restart_and_the_kill() {
    use pdtop::lab::{self, LabOptions};
    let cap = capture("demo-proxy-qwen3");
    // 2.5x, not 5x: the cancel and the restart are read from the logs as they
    // grow, and at 5x a slower 2-core VM missed them under load (common::labs).
    let speed = 2.5;
    let secs = (cap.t_end - cap.t0) / speed + 1.0;
    let dir = std::env::temp_dir().join(format!("pdtop-recovery-lab-{}", std::process::id()));
    let lab =
        lab::start(cap, LabOptions { speed, looping: false, dir: dir.clone(), otlp_to: None }).await.unwrap();
    let (prefill, decode) = (lab.prefill.to_string(), lab.decode.to_string());
    let mut args: Vec<String> =
        ["check", "--json", "--prefill", &prefill, "--decode", &decode].map(String::from).to_vec();
    for (flag, path) in [("--prefill-log", &lab.prefill_log), ("--decode-log", &lab.decode_log)] {
        args.extend([flag.to_string(), path.display().to_string()]);
    }
    let speed_s = speed.to_string();
    let secs_s = secs.to_string();
    let origin = lab.clock.stamp_origin().to_string();
    let timing = [
        "--interval",
        "0.1",
        "--timeout",
        crate::common::LAB_TIMEOUT,
        "--clock-speed",
        &speed_s,
        "--duration",
        &secs_s,
    ];
    args.extend(["--clock-origin".to_string(), origin]);
    args.extend(timing.map(String::from));
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_pdtop")).args(&args).output()
    })
    .await
    .unwrap()
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let events: Vec<(String, String)> = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["kind"].as_str().unwrap().to_string(), e["text"].as_str().unwrap().to_string()))
        .filter(|(k, _)| k.contains("recover") || k == "kv_not_released")
        .collect();
    let has = |kind: &str, start: String| events.iter().any(|(k, t)| k == kind && t.starts_with(&start));
    assert!(
        has("not_recovered", format!("{decode}: after 2 cancelled requests, it went down")),
        "{events:#?}"
    );
    assert!(
        has("recovered", format!("{decode}: after its restart, the next request succeeded")),
        "{events:#?}"
    );
    assert!(
        has("not_recovered", format!("{prefill}: after its outage, still down at the end")),
        "{events:#?}"
    );
    assert!(!events.iter().any(|(k, _)| k == "kv_not_released"), "{events:#?}");
    // Both instances said what they run, and it is the same.
    assert_eq!(r["mismatches"], serde_json::json!([]));
    assert_eq!(r["instances"][0]["kv_role"], "kv_producer");
    assert_eq!(r["instances"][1]["kv_role"], "kv_consumer");
}
