//! Requests judged over time: the real `still in WAITING_FOR_REMOTE_KVS`
//! line (vllm-ascend issue 2498, vLLM's own scheduler.py) re-stamped over
//! minutes, as the scheduler prints it on every step while a decode waits.
//! Still waiting past the threshold: stuck (a flag, an event, the check
//! degraded); a wait whose lines stop: it went on, never stuck. And the
//! real `start_load_kv` line is connector-hop evidence on its request.

use crate::common;

use std::path::PathBuf;
use std::process::Command;

use pdtop::feed::LogOrigin;
use pdtop::logs::signal::SignalKind;
use pdtop::traces::{Correlator, CorrelatorOptions, Hop, Outcome};

/// 2025-08-22 18:00:44 UTC, the stamp of the pasted excerpt.
const T0: f64 = 1_755_885_644.0;

fn excerpt(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/log-excerpts").join(name);
    std::fs::read_to_string(p).unwrap()
}

/// Line `n` (1-based) of the ascend excerpt, its `08-22 18:00:44` stamp
/// moved `dt` seconds on.
fn at_offset(n: usize, dt: u32) -> String {
    let text = excerpt("ascend-llmdatadist-waiting-remote-kvs.log");
    let line = text.lines().nth(n - 1).unwrap();
    let (h, m, s) = (18 + (44 + dt) / 3600, (dt + 44) / 60 % 60, (44 + dt) % 60);
    line.replace("08-22 18:00:44", &format!("08-22 {h:02}:{m:02}:{s:02}"))
}

fn correlator(stuck_after: f64) -> Correlator {
    let mut c = Correlator::new(CorrelatorOptions { year: Some(2025), ..CorrelatorOptions::default() });
    c.set_stuck_after(stuck_after);
    c
}

/// Lines 1-3 (params, alloc, transmit), then the WAITING line every 10 s for `secs`.
fn wait_for(c: &mut Correlator, secs: u32) {
    let d = LogOrigin::Decode(0);
    for n in 1..=3 {
        c.on_line(d, &at_offset(n, 0), T0);
    }
    for dt in (0..=secs).step_by(10) {
        c.on_line(d, &at_offset(5, dt), T0 + f64::from(dt));
        c.on_tick(T0 + f64::from(dt));
    }
}

#[test]
fn a_request_still_waiting_past_the_threshold_is_stuck() {
    let mut c = correlator(480.0);
    wait_for(&mut c, 470);
    let t = c.traces().next().expect("a trace for the waiting request");
    assert!(t.id.starts_with("cmpl-6aaabd51-c40e-4c28-a621-693873731482"), "{}", t.id);
    let w = t.remote_wait.as_ref().expect("the wait is tracked");
    assert_eq!(w.stuck_at, None, "470 s is under the threshold");
    assert!(c.drain_log_events().iter().all(|e| e.kind != SignalKind::RequestStuck));
    // Still printed 490 s after it began: stuck, on the log's own clock.
    for dt in [480, 490] {
        c.on_line(LogOrigin::Decode(0), &at_offset(5, dt), T0 + f64::from(dt));
        c.on_tick(T0 + f64::from(dt));
    }
    let t = c.traces().next().unwrap();
    let w = t.remote_wait.as_ref().unwrap();
    assert_eq!(w.stuck_secs(), Some(480.0));
    assert_eq!(c.counts().stuck, 1);
    let events = c.drain_log_events();
    let stuck: Vec<_> = events.iter().filter(|e| e.kind == SignalKind::RequestStuck).collect();
    assert_eq!(stuck.len(), 1, "{events:?}");
    assert_eq!(stuck[0].source, LogOrigin::Decode(0));
    assert_eq!(stuck[0].t, T0 + 480.0);
    assert!(stuck[0].text.contains("480 s"), "{}", stuck[0].text);
    // Judged once, not on every later line.
    c.on_line(LogOrigin::Decode(0), &at_offset(5, 500), T0 + 500.0);
    c.on_tick(T0 + 500.0);
    assert!(c.drain_log_events().iter().all(|e| e.kind != SignalKind::RequestStuck));
}

#[test]
fn a_wait_whose_lines_stop_went_on_and_is_never_stuck() {
    let mut c = correlator(60.0);
    wait_for(&mut c, 20);
    // The log goes on (the engine's periodic lines) for ten minutes; the
    // request no longer waits: vLLM prints nothing when the KV arrives.
    let text = excerpt("ascend-llmdatadist-waiting-remote-kvs.log");
    let other = text.lines().nth(5).unwrap().to_string();
    for dt in (30..600).step_by(30) {
        let line = other.replace("18:00:44", &format!("18:{:02}:{:02}", (44 + dt) / 60, (44 + dt) % 60));
        c.on_line(LogOrigin::Decode(0), &line, T0 + f64::from(dt));
        c.on_tick(T0 + f64::from(dt));
    }
    c.finish(T0 + 600.0);
    let t = c.traces().next().unwrap();
    assert_eq!(t.remote_wait.as_ref().unwrap().stuck_at, None);
    assert_eq!(c.counts().stuck, 0);
    assert!(!t.evidence().contains("still waiting"), "{}", t.evidence());
}

#[test]
fn a_log_that_ends_while_waiting_says_so_without_guessing() {
    let mut c = correlator(480.0);
    wait_for(&mut c, 30);
    c.finish(T0 + 30.0);
    let t = c.traces().next().unwrap();
    assert_eq!(t.remote_wait.as_ref().unwrap().stuck_at, None);
    assert!(
        t.evidence().contains("still waiting for its KV from the prefill when the log ended"),
        "{}",
        t.evidence()
    );
    assert_ne!(t.outcome, Outcome::Pending);
}

#[test]
fn start_load_kv_is_connector_evidence_on_its_request() {
    let mut c = Correlator::new(CorrelatorOptions { year: Some(2025), ..CorrelatorOptions::default() });
    let text = excerpt("nixl-multiconnector-vllmworker-start-load-kv.log");
    for line in text.lines() {
        c.on_line(LogOrigin::Decode(0), line, 1_751_940_833.0);
    }
    let traces: Vec<_> = c.traces().collect();
    // One request, though each TP worker printed it.
    assert_eq!(traces.len(), 1, "{traces:?}");
    let t = traces[0];
    assert!(t.id.starts_with("cmpl-93706305-0119-4c28-b1d2-682767153598"), "{}", t.id);
    let p = t.phase(Hop::Connector).expect("connector hop");
    assert!(p.detail.contains("load begun (start_load_kv from remote engine d8db2325"), "{}", p.detail);
    assert!(t.remote_wait.as_ref().unwrap().load_begun);
}

#[test]
fn check_from_logs_flags_the_stuck_request_with_the_threshold_given() {
    let dir = std::env::temp_dir().join(format!("pdtop-stuck-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("decode.log");
    let mut text = String::new();
    for n in 1..=3 {
        text.push_str(&at_offset(n, 0));
        text.push('\n');
    }
    for dt in (0..=120).step_by(5) {
        text.push_str(&at_offset(5, dt));
        text.push('\n');
    }
    std::fs::write(&path, text).unwrap();
    let run = |extra: &[&str]| -> serde_json::Value {
        let out = Command::new(env!("CARGO_BIN_EXE_pdtop"))
            .args(["check", "--json", "--from-logs", "--decode-log", path.to_str().unwrap()])
            .args(extra)
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap()
    };
    // The default (480 s) is not reached in two minutes.
    let r = run(&[]);
    assert_eq!(r["requests"]["stuck"], 0, "{}", r["requests"]);
    let r = run(&["--stuck-after", "100"]);
    assert_eq!(r["requests"]["stuck"], 1, "{}", r["requests"]);
    assert_eq!(r["traces"][0]["stuck_s"], 100.0);
    let kinds: Vec<&str> =
        r["events"].as_array().unwrap().iter().filter_map(|e| e["kind"].as_str()).collect();
    assert!(kinds.contains(&"request_stuck"), "{kinds:?}");
    assert_eq!(r["verdict"], "degraded", "{}", r["verdict"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// vLLM ≥ 0.11 prints the engine's id (`…-0-<8 hex>`) in the WAITING line,
/// and with default logging no `Added request` line came first: every
/// line of one request's wait must land on one trace, named by the API
/// server's id, and that wait must still be judged stuck.
#[test]
fn wait_lines_with_the_engine_suffix_stay_one_trace_and_are_judged() {
    let mut c = correlator(60.0);
    let d = LogOrigin::Decode(0);
    for dt in (0..=90).step_by(10) {
        let line = at_offset(5, dt).replace("-693873731482-0 is still", "-693873731482-0-1a2b3c4d is still");
        c.on_line(d, &line, T0 + f64::from(dt));
        c.on_tick(T0 + f64::from(dt));
    }
    let traces: Vec<_> = c.traces().collect();
    assert_eq!(traces.len(), 1, "{:?}", traces.iter().map(|t| &t.id).collect::<Vec<_>>());
    assert!(traces[0].id.starts_with("cmpl-6aaabd51-c40e-4c28-a621-693873731482"), "{}", traces[0].id);
    assert!(!traces[0].id.ends_with("1a2b3c4d"), "{}", traces[0].id);
    assert!(traces[0].remote_wait.as_ref().and_then(|w| w.stuck_at).is_some(), "90 s past a 60 s threshold");
}

/// The Overview says a request is stuck: it is neither loaded nor missed
/// yet, so no other count there shows it.
#[test]
fn the_overview_names_a_stuck_request() {
    use pdtop::feed::{Endpoint, Msg, Role, TailCounts, TailState};
    let eps = vec![Endpoint::parse(Role::Decode, "127.0.0.1:8200").unwrap()];
    let mut st = pdtop::state::AppState::new(eps, 60.0).with_logs(&[(LogOrigin::Decode(0), "d.log".into())]);
    let mut feed = |lines: Vec<String>, at: f64| {
        let (state, counts) = (TailState::Following, TailCounts::default());
        st.apply(Msg::LogLines { source: LogOrigin::Decode(0), at, lines, state, counts });
        st.apply(Msg::LogsPolled { at });
    };
    feed((1..=3).map(|n| at_offset(n, 0)).collect(), T0);
    for dt in (0..=500).step_by(10) {
        feed(vec![at_offset(5, dt)], T0 + f64::from(dt));
    }
    let app = pdtop::app::App::new(st, pdtop::theme::Theme::builtin("mono").unwrap());
    for (w, h) in [(120, 40), (80, 24)] {
        let screen = common::screen_text(&app, w, h);
        let title = screen.lines().find(|l| l.contains("requests since")).unwrap();
        assert!(title.contains("1 STUCK"), "{w}x{h}:\n{screen}");
    }
}
