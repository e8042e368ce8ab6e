//! `router-nixl-1p2d`: vllm-router 0.1.17 in PD mode in front of NIXL 1P2D
//! (one decode on `kv_load_failure_policy: recompute`), recorded live with
//! the prefill SIGKILLed mid-load. Replayed, every request the instances
//! logged has the outcome `lab/router-nixl/analyze.py` found, and every
//! request the router failed before any instance saw it is a request of
//! its own: an error at the prefill, counted as the router counted it.

use std::collections::BTreeMap;
use std::process::Command;

use crate::common;

/// The analysis's words for pdtop's outcomes (`scripts/truth.py`).
fn outcome_of(truth: &str) -> &str {
    match truth {
        "loaded_stale_kv" => "loaded",
        "recomputed" => "silent_miss",
        "failed" => "error",
        t => t,
    }
}

fn replay(capture: &str) -> serde_json::Value {
    let dir = common::capture_dir(capture);
    let out = Command::new(env!("CARGO_BIN_EXE_pdtop"))
        .args(["check", "--json", "--replay"])
        .arg(&dir)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)))
}

/// What a capture's replay got right against its `requests.jsonl`.
struct Judged {
    report: serde_json::Value,
    /// Requests the router failed and logged (`Transparent proxy request failed`).
    refused: usize,
    /// Requests it failed and logged nothing of (503 `No available workers`).
    unlogged: usize,
    /// pdtop's requests of those refusals.
    router_errors: Vec<serde_json::Value>,
}

/// Every request an instance logged has its truth's outcome (asserted
/// here); the router's refusals are counted for the caller.
fn judge(capture: &str) -> Judged {
    let report = replay(capture);
    let traces: BTreeMap<String, &serde_json::Value> = report["traces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["id"].as_str().unwrap().to_string(), t))
        .collect();
    let (mut refused, mut unlogged) = (0, 0);
    for line in std::fs::read_to_string(common::capture_dir(capture).join("requests.jsonl")).unwrap().lines()
    {
        let q: serde_json::Value = serde_json::from_str(line).unwrap();
        let truth = q["outcome"].as_str().unwrap();
        if truth == "not_generation" {
            // The router's `POST /tokenize`: logged by vLLM, no request.
            let id = q["vllm_base_id"].as_str().unwrap();
            assert!(!traces.keys().any(|k| k.contains(id)), "{id} is no request");
            continue;
        }
        let Some(id) = q["vllm_base_id"].as_str() else {
            assert_eq!(truth, "error", "{q}");
            if q["status"] == 503 {
                unlogged += 1;
            } else {
                refused += 1;
            }
            continue;
        };
        let t = traces.get(id).unwrap_or_else(|| panic!("no trace for {} ({id})", q["id"]));
        assert_eq!(t["outcome"], outcome_of(truth), "{}: {}", q["id"], t["evidence"]);
    }
    let router_errors =
        traces.iter().filter(|(k, _)| k.starts_with("router-error-")).map(|(_, t)| (*t).clone()).collect();
    Judged { report, refused, unlogged, router_errors }
}

/// Each refusal the router logged is a request: an error at the prefill,
/// in the router's words.
fn refusals_are_requests(j: &Judged) {
    assert_eq!(j.router_errors.len(), j.refused, "one request per `Transparent proxy request failed`");
    for t in &j.router_errors {
        assert_eq!((&t["outcome"], &t["error_at"]), (&"error".into(), &"prefill".into()), "{t}");
        let e = t["evidence"].as_str().unwrap();
        assert!(e.contains("Prefill request to http://127.0.0.1:8100 failed"), "{e}");
    }
}

#[test]
fn every_request_behind_the_router_is_decided_right_and_its_refusals_are_counted() {
    let j = judge("router-nixl-1p2d");
    assert_eq!((j.refused, j.unlogged), (167, 0));
    refusals_are_requests(&j);
    // The recording made live holds the router's Prometheus too: its own
    // count of the requests it failed is the number of such requests.
    let rec = common::capture_dir("router-nixl-1p2d").join("pdtop.pdrec");
    let out = Command::new(env!("CARGO_BIN_EXE_pdtop"))
        .args(["check", "--json", "--replay"])
        .arg(&rec)
        .output()
        .unwrap();
    let live: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(live["router"]["errors"]["prefill"].as_f64(), Some(167.0), "{}", live["router"]);
    let ids = live["traces"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["id"].as_str().unwrap().starts_with("router-error-"));
    assert_eq!(ids.count(), 167);
    let q = &j.report["requests"];
    assert_eq!(q["error"].as_u64(), Some(167 + 27), "{q}");
    assert_eq!(q["silent_miss"].as_u64(), Some(21), "the recomputed loads: {q}");
    assert_eq!(q["loaded"].as_u64(), Some(108 + 52), "{q}");
    assert_eq!(q["unknown"].as_u64(), Some(0), "{q}");
    // A load read after the prefill's lease ran out: loaded, and said so.
    let stale = j.report["traces"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["evidence"].as_str().unwrap().contains("lease ran out"))
        .count();
    assert_eq!(stale, 52);
}

/// NixlPushConnector behind the same router, the prefill killed for 120 s:
/// the decode steps whose push never came failed (HTTP 200, no token);
/// the router's 503s after the prefill came back were logged nowhere.
#[test]
fn push_behind_the_router_is_decided_right() {
    let j = judge("router-nixl-push-1p1d");
    assert_eq!((j.refused, j.unlogged), (124, 4));
    refusals_are_requests(&j);
    let q = &j.report["requests"];
    assert_eq!((q["loaded"].as_u64(), q["error"].as_u64()), (Some(45), Some(124 + 2)), "{q}");
    assert_eq!((q["silent_miss"].as_u64(), q["unknown"].as_u64()), (Some(0), Some(0)), "{q}");
}

/// A client's request behind the router, found by when it was sent and its
/// prompt length (`@HH:MM:SS.fff TOKENS` in the search box): the nearest
/// arrival is the router id the request got, and none said sure is wrong.
#[test]
fn a_client_request_is_found_by_its_send_time_and_length() {
    use pdtop::report::arrival;
    use pdtop::traces::Confidence;
    let args = common::capture_replay_args("router-nixl-1p2d", Default::default());
    let (mut app, player) = pdtop::modes::replay_app(&args).unwrap();
    let end = player.run_to_end(&mut app.state);
    app.state.finish(end);
    let (mut right, mut sure_wrong, mut total) = (0, 0, 0);
    let mut by_confidence = BTreeMap::<&str, usize>::new();
    let dir = common::capture_dir("router-nixl-1p2d");
    for line in std::fs::read_to_string(dir.join("requests.jsonl")).unwrap().lines() {
        let q: serde_json::Value = serde_json::from_str(line).unwrap();
        let (Some(rid), Some(sent), Some(n)) =
            (q["router_id"].as_str(), q["t_start"].as_f64(), q["prompt_tokens"].as_u64())
        else {
            continue;
        };
        total += 1;
        if total == 1 {
            let c = &app.state.logs.as_ref().unwrap().correlator;
            let t = c.traces().find(|t| t.id == rid).unwrap();
            eprintln!(
                "debug: first_seen {} sent {sent} tokens {:?}",
                t.first_seen,
                arrival::prompt_tokens(&app.state, t)
            );
        }
        let day = sent.rem_euclid(86_400.0);
        let query = format!(
            "@{:02}:{:02}:{:06.3} {n}",
            (day / 3600.0) as u32,
            (day % 3600.0 / 60.0) as u32,
            day % 60.0
        );
        let a = arrival::parse(&query).unwrap_or_else(|| panic!("{query}"));
        let (found, confidence) = arrival::candidates(&app.state, &a);
        let got = found.first().map(|(t, _)| t.id.as_str());
        *by_confidence.entry(confidence.map_or("none", Confidence::word)).or_default() += 1;
        if got == Some(rid) {
            right += 1;
        } else if confidence == Some(Confidence::Sure) {
            sure_wrong += 1;
        }
    }
    eprintln!("arrival: {right} of {total} right, by confidence {by_confidence:?}");
    assert!(total >= 190, "{total}");
    assert_eq!(sure_wrong, 0);
    // Measured: 202 of 202, 196 sure and 6 likely (two of one length
    // within the window).
    assert!(right * 100 >= total * 95, "{right} of {total}");
}

/// MooncakeConnector over TCP behind the router, the prefill killed and
/// restarted: the router kept sending the dead engine's id, so each decode
/// after the restart waited for KV that its prefill freed unread 30 s
/// later, until the client gave up (Mooncake fails nothing itself). Those
/// are errors at the connector, not cancels; the two decode steps whose
/// prefill died holding their KV too.
#[test]
fn mooncake_behind_the_router_is_decided_right() {
    let j = judge("mooncake-tcp-1p1d");
    assert_eq!((j.refused, j.unlogged), (111, 0));
    refusals_are_requests(&j);
    let q = &j.report["requests"];
    assert_eq!((q["loaded"].as_u64(), q["error"].as_u64()), (Some(45), Some(111 + 19)), "{q}");
    assert_eq!((q["cancelled"].as_u64(), q["unknown"].as_u64()), (Some(0), Some(0)), "{q}");
    // No connector count here: a loaded request whose guessed window on
    // `lo` caught no bytes is unknown, never "moved nothing".
    for t in j.report["traces"].as_array().unwrap() {
        if t["outcome"] == "loaded" {
            assert_ne!(t["kv_bytes"]["verdict"], "moved_nothing", "{}", t["id"]);
        }
    }
}
