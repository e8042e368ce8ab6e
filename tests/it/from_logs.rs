//! `pdtop check --from-logs`: the recorded NIXL capture's logs read after
//! the fact give the same request counts as replaying the whole capture
//! (scrapes and all), and a pasted excerpt still yields its failure event.

use std::path::PathBuf;
use std::process::Command;

fn pdtop() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pdtop"))
}

fn json(args: &[&str]) -> serde_json::Value {
    let out = pdtop().args(args).output().expect("run pdtop");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
}

fn fixture(rel: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(rel).display().to_string()
}

#[test]
fn recorded_logs_after_the_fact_match_the_replay() {
    let d = |f: &str| fixture(&format!("lab-captures/nixl-llama-shape/{f}"));
    let replay = json(&["check", "--json", "--replay", &fixture("lab-captures/nixl-llama-shape")]);
    let (p, d1, d2, proxy) =
        (d("vllm-prefill.log"), d("vllm-decode.log"), d("vllm-decode2.log"), d("proxy.log"));
    let logs = json(&[
        "check",
        "--json",
        "--from-logs",
        "--prefill-log",
        &p,
        "--decode-log",
        &d1,
        &d2,
        "--proxy-log",
        &proxy,
    ]);
    for k in ["seen", "loaded", "silent_miss", "no_prefill", "error"] {
        assert_eq!(logs["requests"][k], replay["requests"][k], "{k}");
    }
    assert_eq!(logs["requests"]["silent_miss"], 4);
    assert_eq!(logs["verdict"], replay["verdict"]);
    let warnings = logs["warnings"].to_string();
    assert!(warnings.contains("no year"), "{warnings}");
    assert!(warnings.contains("proxy.log: no timestamps"), "{warnings}");
}

#[test]
fn a_pasted_excerpt_yields_its_events_and_says_what_it_lacks() {
    let f = fixture("log-excerpts/src-nixl-transfer-failed-state.log");
    let r = json(&["check", "--json", "--from-logs", "--decode-log", &f]);
    let events = r["events"].as_array().expect("events");
    // The failure line, then the request it failed (one error).
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0]["kind"], "transfer_failed");
    assert_eq!(events[1]["kind"], "request_errors");
    assert!(events[1]["text"].as_str().unwrap().starts_with("1 request(s) failed"), "{events:?}");
    assert!(events[0]["text"].as_str().unwrap().contains("cmpl-7c1d2e3f4a5b4c6d8e9f0a1b2c3d4e5f-0"));
    assert!(r["warnings"].to_string().contains("no prefill log"));
    let dead = fixture("log-excerpts/v1-engine-dead-request-failed.log");
    let r = json(&["check", "--json", "--from-logs", "--decode-log", &dead]);
    let kinds: Vec<&str> =
        r["events"].as_array().unwrap().iter().filter_map(|e| e["kind"].as_str()).collect();
    // One death (printed as output_handler failed + EngineDeadError) is one event.
    assert_eq!(kinds.iter().filter(|k| **k == "engine_dead").count(), 1, "{kinds:?}");
    assert!(kinds.contains(&"request_failed"), "{kinds:?}");
    // Without endpoints or logs it is a usage error, not a panic.
    let out = pdtop().args(["check", "--from-logs"]).output().unwrap();
    assert!(!out.status.success());
}

/// LMCache's lookup line on a decode log pasted alone: the request it names
/// becomes a trace, judged on LMCache's own count, and not called sure (no
/// prefill log shows that it was prefilled).
#[test]
fn a_pasted_lmcache_decode_lookup_names_the_miss_or_the_load() {
    let run = |f: &str| {
        let f = fixture(&format!("log-excerpts/{f}"));
        json(&["check", "--json", "--from-logs", "--decode-log", &f])
    };
    let miss = run("lmcache-decode-miss-zero-hit-32k.log");
    assert_eq!(miss["requests"]["silent_miss"], 1, "{}", miss["requests"]);
    assert_eq!(miss["silent_miss_ids"][0], "cmpl-1b99723b9a064fbcb912222bd32d67ba");
    let t = &miss["traces"][0];
    assert_eq!(t["sure"], false);
    assert!(t["evidence"].as_str().unwrap().contains("0 of 32768"), "{t}");
    assert!(t["evidence"].as_str().unwrap().contains("no prefill log"), "{t}");
    assert_eq!(miss["verdict"], "silent_misses");
    // Five lookups of one request while its KV was not ready: one trace, loaded.
    let repeated = run("lmcache-decode-repeated-lookup.log");
    assert_eq!(repeated["requests"]["seen"], 1, "{}", repeated["requests"]);
    assert_eq!(repeated["requests"]["loaded"], 1);
    // `need to load: -64` (more already in GPU than in LMCache) is still a hit.
    let negative = run("lmcache-hit-negative-need-to-load.log");
    assert_eq!(negative["requests"]["loaded"], 1, "{}", negative["requests"]);
    // LMCache prints the engine's id; the trace is named by the API server's.
    assert_eq!(negative["traces"][0]["id"], "chatcmpl-8c24fecc6f854a3e");
}

/// A prefill log pasted alone: LMCache's `Storing KV cache ... for request X`
/// is what shows X was prefilled; what decode did is unknown, and said so.
#[test]
fn a_pasted_lmcache_prefill_store_is_a_trace_that_says_decode_is_unread() {
    let f = fixture("log-excerpts/lmcache-prefill-storing-chunks.log");
    let r = json(&["check", "--json", "--from-logs", "--prefill-log", &f]);
    assert_eq!(r["requests"]["seen"], 1, "{}", r["requests"]);
    assert_eq!(r["requests"]["unknown"], 1);
    assert_eq!(r["traces"][0]["id"], "chatcmpl-8e1011b0d1d69ad5");
    assert!(r["traces"][0]["evidence"].as_str().unwrap().contains("no decode log"), "{}", r["traces"]);
    assert_eq!(r["unknown_reasons"][0]["count"], 1);
}

/// LMCache issue: decode loaded, retrieved, then hung with `Running: 1 reqs`
/// and no throughput until Ctrl-C. The one zero line is the stall event.
#[test]
fn a_decode_that_hangs_with_a_running_request_is_an_engine_stall() {
    let f = fixture("log-excerpts/lmcache-decode-stuck-retrieved-old-shape.log");
    let r = json(&["check", "--json", "--from-logs", "--decode-log", &f]);
    let stalls: Vec<_> =
        r["events"].as_array().unwrap().iter().filter(|e| e["kind"] == "engine_stalled").collect();
    assert_eq!(stalls.len(), 1, "{}", r["events"]);
    assert!(stalls[0]["text"].as_str().unwrap().contains("Running 1 reqs"), "{}", stalls[0]);
    assert_eq!(r["requests"]["loaded"], 1, "the KV did arrive: {}", r["requests"]);
    // A failure with no request named still degrades the pair.
    assert_eq!(r["verdict"], "degraded");
    // LMCache's lines carry 2025: the yearless vLLM lines between them are
    // of that year too (11:12:32 to 11:19:24), not of the file's mtime.
    assert_eq!(r["duration_s"], 412.0, "{}", r["warnings"]);
    assert!(r["warnings"].to_string().contains("took 2025 from the file's dated lines"), "{}", r["warnings"]);
}

/// Each kind of line that names a request, pasted alone (no `Received`
/// line for the id): the request is listed, with the verdict its line
/// proves and the hop it blames (`src/traces/named.rs` has the table).
#[test]
fn every_line_that_names_a_request_lists_it() {
    let run = |flag: &str, f: &str| {
        let f = fixture(&format!("log-excerpts/{f}"));
        json(&["check", "--json", "--from-logs", flag, &f])
    };
    let trace = |r: &serde_json::Value, id: &str| {
        r["traces"].as_array().unwrap().iter().find(|t| t["id"] == id).cloned().unwrap_or_else(|| {
            panic!("{id} not in {}", r["traces"]);
        })
    };
    // (log, role, id listed, outcome, error_at, evidence says)
    for (file, flag, id, outcome, at, says) in [
        // vllm#50719: Mooncake's pull failed; a 16-hex id from a Python list.
        (
            "mooncake-pull-timeout-p-side-ready.log",
            "--decode-log",
            "94a7d5ac08490bb5",
            "error",
            "connector",
            "Timeout waiting for P side ready",
        ),
        // vllm#26171: a NIXL handshake failed for a request.
        (
            "nixl-handshake-failed-for-request-recovery.log",
            "--decode-log",
            "cmpl-6e8a849f-7ec0-4abe-b4c7-38bce04d53d1",
            "error",
            "connector",
            "handshake_failed",
        ),
        // vllm#25808: the prefill saw a decode read KV it no longer held:
        // read, so loaded, from blocks that may have been reused.
        (
            "nixl-invalid-blocks-unrecognized-async-sched.log",
            "--prefill-log",
            "cmpl-141e42e3-ad61-46ab-88cc-fb6aaa47e363",
            "loaded",
            "",
            "lease ran out",
        ),
        // vllm#53799: a scheduler traceback ending in `KeyError: '<id>'`.
        (
            "v1-keyerror-req-id-to-index.log",
            "--decode-log",
            "chatcmpl-95f443c92d6709b3",
            "error",
            "decode",
            "KeyError",
        ),
        // The scheduler's `Failing N request(s) due to KV load failure` (policy fail).
        (
            "src-vllm-kv-load-failure-policy.log",
            "--decode-log",
            "chatcmpl-5b0e1c7d2f8a4a43b9f6c3e2d1a0b9c8",
            "error",
            "connector",
            "kv_load_failed",
        ),
        // NIXL's older per-request transfer failure.
        (
            "src-nixl-transfer-failed-state.log",
            "--decode-log",
            "cmpl-7c1d2e3f4a5b4c6d8e9f0a1b2c3d4e5f",
            "error",
            "connector",
            "state=ERR",
        ),
        // MooncakeConnector's receive_kv failure naming two requests in a list.
        (
            "src-mooncake-receive-kv-failures.log",
            "--decode-log",
            "chatcmpl-9b1d3f5a7c2e4b6d8f0a1c3e5b7d9f2a",
            "error",
            "connector",
            "Resource temporarily unavailable",
        ),
        // MooncakeConnector's producer timing out a decode's pull (the decode's ids).
        (
            "src-mooncake-producer-timeouts.log",
            "--prefill-log",
            "chatcmpl-9e7c5a3b1f2d4e6a",
            "error",
            "connector",
            "the prefill names the decode's request",
        ),
        // llm-d (pasted): the prefill's NIXL `request_finished(X)`: prefilled;
        // what decode did is not in the excerpt.
        (
            "llmd-nixl-prefill-abbrev-file-field.log",
            "--prefill-log",
            "chatcmpl-e081a40e-dc43-4b63-8ce2-d9a91f02e2df",
            "unknown",
            "",
            "no decode log is being read",
        ),
        // vllm#15806 (pasted): P2pNccl's decode waited for the request's KV
        // tensor and got none: the red WARNING p2p_nccl_engine.py prints when
        // the tensor is None (the id is vllm-router's composed one, `kv` appended).
        (
            "v0-stats-p2pnccl-decode.log",
            "--decode-log",
            "___prefill_addr_100.64.160.226:21001___decode_addr_100.64.160.226:25001_1025d17ada3146a4aaa0e80fb3820e5e",
            "error",
            "connector",
            "no KV tensor arrived",
        ),
        // vllm#25562: expired unread; no decode log, so what decode did is unknown.
        (
            "nixl-expired-zero-decode-workers-120s.log",
            "--prefill-log",
            "cmpl-fe226f2e-264c-4fd9-8c57-a115f9641164",
            "unknown",
            "",
            "its KV expired unread",
        ),
        // The same line in a log read as decode: still never "loaded".
        (
            "nixl-expired-zero-decode-workers-120s.log",
            "--decode-log",
            "cmpl-fe226f2e-264c-4fd9-8c57-a115f9641164",
            "unknown",
            "",
            "no decode loaded it",
        ),
        // LMCache#2106 (held-out): journald's prefix, then LMCache's short
        // retrieve naming the request glued to its text (`Request X` `The number...`).
        (
            "lmcache-journald-request-glued-retrieved-less.log",
            "--decode-log",
            "chatcmpl-6b7537a4f151245abc561fef52541d45",
            "error",
            "connector",
            "connector=LMCache",
        ),
        // vllm#2484 (held-out): V0's singular `Aborted request X.`, bare hex id.
        (
            "v0-aborted-request-bare-hex.log",
            "--decode-log",
            "be67046b843244b5bf1ed3d2ff2f5a02",
            "cancelled",
            "",
            "aborted the request",
        ),
        // tenstorrent/vllm#145: the client's abort, then the engine's
        // `KeyError` on the aborted id as it drops it: the abort's echo.
        (
            "v0-aborted-keyerror-repr-crlf.log",
            "--decode-log",
            "chatcmpl-2fdd35648efc418db366c6690c29c4da",
            "cancelled",
            "",
            "KeyError` on its id ending a traceback: the engine no longer held it (after the abort)",
        ),
        // vllm-ascend#5404 (held-out): the layerwise Mooncake decode asks for a
        // request's KV; nothing after it says whether it came.
        (
            "mooncake-layerwise-send-request-metaserver.log",
            "--decode-log",
            "chatcmpl-10d6276a-60bd-4376-8011-b1ea740baafb",
            "unknown",
            "",
            "whether its KV loaded is not known",
        ),
    ] {
        let r = run(flag, file);
        let t = trace(&r, id);
        assert_eq!(t["outcome"], outcome, "{file}: {t}");
        if at.is_empty() {
            assert!(t["error_at"].is_null(), "{file}: {t}");
        } else {
            assert_eq!(t["error_at"], at, "{file}: {t}");
        }
        assert!(t["evidence"].as_str().unwrap().contains(says), "{file}: {t}");
        // The failure event is kept, and now names the request.
        if outcome == "error" {
            let printed = r["events"].to_string();
            assert!(
                printed.contains(id.trim_start_matches("chatcmpl-").trim_start_matches("cmpl-")),
                "{file}: {printed}"
            );
        }
    }
    // Two engine UUIDs on the handshake's lines are no requests: one trace.
    let r = run("--decode-log", "src-nixl-handshake-failed-for-request.log");
    let ids: Vec<&str> = r["traces"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["cmpl-2e8c4a6f0b1d4e3a9c7f5b2d8e1a4c6b"]);
    // Held-out pastes: an agent name, engine UUIDs and Dynamo's worker ids are
    // no requests; a failure naming `'request_id': None` names none; Dynamo's
    // router naming requests it lost track of lists each, once.
    for (flag, file, want) in [
        (
            "--decode-log",
            "v0-dynamo-nixl-added-request-engine-uuids.log",
            vec!["98e0f7f0-0588-4239-b12a-3ff8e526899a"],
        ),
        ("--decode-log", "nixl-handshake-setup-failed-request-none.log", vec![]),
        (
            "--proxy-log",
            "dynamo-frontend-failed-free-request.log",
            vec!["e1bd4813-28b8-4e01-8a20-a2603f24d328", "f30c0cc4-a425-42a2-819e-dce9c7fabe66"],
        ),
    ] {
        let r = run(flag, file);
        let ids: Vec<&str> =
            r["traces"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect();
        assert_eq!(ids, want, "{file}");
    }
    // One line per request: the five expired requests are five traces.
    let r = run("--prefill-log", "nixl-expired-zero-decode-workers-120s.log");
    assert_eq!(r["requests"]["seen"], 5, "{}", r["requests"]);
    assert_eq!(r["requests"]["loaded"], 0);
}

/// The 2P2D capture's four instance logs, read after the fact: the demo
/// proxy forwarded no id, so every instance invented its own, and the logs
/// give no prompt length. With no proxy log, and with a proxy log in a
/// format pdtop does not read (llm-d's routing sidecar), each decode
/// request is still paired with a prefill copy, by arrival order, and the
/// trace says so (`join: order`, never sure of a miss).
#[test]
fn without_ids_or_a_known_proxy_log_prefill_and_decode_pair_by_order() {
    let d = |f: &str| fixture(&format!("lab-captures/example-2p2d-demo-proxy/{f}"));
    let truth = std::fs::read_to_string(d("requests.jsonl")).unwrap();
    let sidecar = fixture("log-excerpts/llmd-sidecar-klog-missing-fields.log");
    for proxy in [None, Some(sidecar.as_str())] {
        let (p1, p2, d1, d2) =
            (d("vllm-prefill.log"), d("vllm-prefill2.log"), d("vllm-decode.log"), d("vllm-decode2.log"));
        let mut args = vec!["check", "--json", "--from-logs", "--prefill-log", &p1, "--prefill-log", &p2];
        args.extend(["--decode-log", &d1, "--decode-log", &d2]);
        if let Some(p) = proxy {
            args.extend(["--proxy-log", p]);
        }
        let r = json(&args);
        let traces = r["traces"].as_array().unwrap();
        let (mut paired, mut right) = (0, 0);
        for line in truth.lines() {
            let q: serde_json::Value = serde_json::from_str(line).unwrap();
            let (Some(dec), Some(pre)) = (q["decode_request_id"].as_str(), q["prefill_request_id"].as_str())
            else {
                continue;
            };
            let t = traces
                .iter()
                .find(|t| t["vllm_ids"].as_array().unwrap().iter().any(|v| v["id"] == dec))
                .unwrap_or_else(|| panic!("{proxy:?}: no trace for {dec}"));
            assert_eq!(t["join"], "order", "{proxy:?} {dec}: {t}");
            assert!(!t["prefill"].is_null(), "{proxy:?} {dec}: {t}");
            assert_ne!(t["outcome"], "no_prefill", "{proxy:?} {dec}: {t}");
            assert!(!t["sure"].as_bool().unwrap() || t["outcome"] == "cancelled", "{proxy:?} {dec}: {t}");
            paired += 1;
            right += usize::from(t["vllm_ids"].as_array().unwrap().iter().any(|v| v["id"] == pre));
        }
        assert_eq!(paired, 64, "{proxy:?}");
        // Arrival order with one-second stamps swaps concurrent pairs: the
        // count reached, not a goal (the spans settle them: replay_capture.rs).
        assert_eq!(right, 44, "{proxy:?}");
        // The only requests called unprefilled are the ones sent straight to decode.
        for t in traces.iter().filter(|t| t["outcome"] == "no_prefill") {
            assert!(t["id"].as_str().unwrap().starts_with("lab-direct-"), "{t}");
        }
    }
}
