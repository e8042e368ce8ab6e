//! Restarts, outages and cancellations in the real recordings: after each,
//! did the KV usage go back to idle and did the next request succeed (the
//! lesson's consumer-restart, producer-kill and cancelled-request tests)?
//! The recordings are replayed in-process, as a live pdtop would see them.

mod common;

use pdtop::lab::Capture;
use pdtop::state::AppState;

/// A capture from `tests/fixtures`, or from `../shared/lab-captures` beside
/// the checkout (where the newer recordings live).
pub fn capture(name: &str) -> Capture {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let fixture = root.join("tests/fixtures/lab-captures").join(name);
    let dir = if fixture.is_dir() { fixture } else { root.join("../shared/lab-captures").join(name) };
    Capture::from_dir(&dir).unwrap_or_else(|e| panic!("{name}: {e}"))
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
    let r = pdtop::state::report::Report::from_state(&st);
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
