//! A capture folder plays like a recording: `check --replay DIR` gives the
//! report `import-lab` + `check --replay FILE` gives, through the real
//! binary.

use crate::common;

use std::process::Command;

fn check(arg: &str) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_pdtop"))
        .args(["check", "--replay", arg, "--json"])
        .output()
        .unwrap();
    assert!(out.status.code().is_some_and(|c| c <= 1), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_capture_folder_replays_as_its_imported_recording() {
    for name in common::CAPTURES {
        let dir = common::capture_dir(name);
        let file =
            std::env::temp_dir().join(format!("pdtop-replay-capture-{name}-{}.rec", std::process::id()));
        let out = Command::new(env!("CARGO_BIN_EXE_pdtop"))
            .args(["import-lab", &dir.display().to_string(), "-o", &file.display().to_string()])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let from_file = check(&file.display().to_string());
        let from_dir = check(&dir.display().to_string());
        assert_eq!(from_file, from_dir, "{name}");
        assert!(from_dir["requests"]["seen"].as_u64().unwrap() > 50, "{name}: {from_dir}");
        std::fs::remove_file(&file).ok();
    }
}

/// `127.0.0.1:<port>` of a capture instance, from its own command line.
fn addr_of(dir: &std::path::Path, instance: &str) -> String {
    let cmd = std::fs::read_to_string(dir.join(format!("{instance}.cmd"))).unwrap();
    let mut words = cmd.split_whitespace();
    words.find(|w| *w == "--port").unwrap();
    format!("127.0.0.1:{}", words.next().unwrap())
}

/// Two prefill and two decode instances behind vLLM's demo proxy, no id
/// forwarded: replayed from its files (logs, scrapes, spans, the connector
/// directory as scanned), every request's outcome and prefill pairing is
/// compared with the capture's own truth (`requests.jsonl`).
#[test]
fn a_2p2d_capture_replays_with_every_outcome_and_pairing_right() {
    let dir = common::capture_dir("example-2p2d-demo-proxy");
    let r = check(&dir.display().to_string());
    let traces = r["traces"].as_array().unwrap();
    let instances: Vec<&str> =
        r["instances"].as_array().unwrap().iter().filter_map(|i| i["endpoint"].as_str()).collect();
    assert_eq!(instances.len(), 4, "{instances:?}");
    let truth = std::fs::read_to_string(dir.join("requests.jsonl")).unwrap();
    let (mut right, mut unknown, mut wrong) = (0, 0, Vec::new());
    let (mut exact, mut by_order, mut mispaired) = (0, 0, Vec::new());
    for line in truth.lines() {
        let q: serde_json::Value = serde_json::from_str(line).unwrap();
        let id = q["id"].as_str().unwrap();
        let want = q["outcome"].as_str().unwrap();
        let names = |t: &&serde_json::Value, id: &str| {
            t["vllm_ids"].as_array().unwrap().iter().any(|v| v["id"].as_str() == Some(id))
        };
        let trace = match q["decode_request_id"].as_str() {
            Some(d) => traces.iter().find(|t| names(t, d)),
            // Failed before any instance logged it: the proxy's error.
            None => traces.iter().find(|t| t["outcome"] == "error" && t["decode"].is_null()),
        };
        let Some(t) = trace else {
            wrong.push(format!("{id}: no trace"));
            continue;
        };
        match t["outcome"].as_str().unwrap() {
            o if o == want => right += 1,
            "unknown" => {
                assert!(!t["evidence"].as_str().unwrap().is_empty(), "{id}: unknown without a reason");
                unknown += 1;
            }
            o => wrong.push(format!("{id}: {o}, truth {want}: {}", t["evidence"])),
        }
        let Some(pid) = q["prefill_request_id"].as_str().filter(|_| !q["decode_request_id"].is_null()) else {
            continue;
        };
        let at = addr_of(&dir, q["prefill_instance"].as_str().unwrap());
        let same = t["prefill"].as_str() == Some(at.as_str())
            && t["vllm_ids"]
                .as_array()
                .unwrap()
                .iter()
                .any(|v| v["instance"] == at.as_str() && v["id"] == pid);
        match (t["join"].as_str(), same) {
            (Some("order"), _) => {
                // A guess, and said so: never sure of a miss.
                assert_ne!(t["outcome"], "silent_miss", "{id}");
                by_order += 1;
            }
            (Some(_), true) => exact += 1,
            (j, _) => {
                mispaired.push(format!("{id}: {j:?} {} {}, truth {at} {pid}", t["prefill"], t["vllm_ids"]))
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert!(mispaired.is_empty(), "{mispaired:#?}");
    // What the spans settle: both sides' prompt lengths pair every request
    // but the cancelled stream (its decode exported no span): by order.
    assert_eq!((right, unknown), (68, 0));
    assert_eq!((exact, by_order), (63, 1));
    folders_against_truth(&r, &truth);
    // The same folder imported as a recording plays the same.
    let file = std::env::temp_dir().join(format!("pdtop-replay-2p2d-{}.rec", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_pdtop"))
        .args(["import-lab", &dir.display().to_string(), "-o", &file.display().to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(check(&file.display().to_string()), r);
    std::fs::remove_file(&file).ok();
}

/// Each request's connector folder (`kv.requests[].folder`) against the
/// one the capture computed from its prompt (`store_folder`: the md5 of its
/// first `(n - 1) // 16 * 16` token ids). A missing decode rewrites its
/// prefill's folder (the same key) and makes none of its own; a request
/// sent straight to decode stores its own. Every folder is the request's
/// own or unknown; with the spans' prompt lengths and the directory's
/// scans, every one is known.
fn folders_against_truth(r: &serde_json::Value, truth: &str) {
    let kv = r["kv"]["requests"].as_array().unwrap();
    let traces = r["traces"].as_array().unwrap();
    let (mut right, mut wrong) = (0, Vec::new());
    for line in truth.lines() {
        let q: serde_json::Value = serde_json::from_str(line).unwrap();
        let Some(d) = q["decode_request_id"].as_str() else { continue };
        let t = traces
            .iter()
            .find(|t| t["vllm_ids"].as_array().unwrap().iter().any(|v| v["id"].as_str() == Some(d)))
            .unwrap();
        let k = kv.iter().find(|k| k["id"] == t["id"]).unwrap_or_else(|| panic!("{}: no kv entry", q["id"]));
        let want = q["store_folder"].as_str().unwrap();
        match k["folder"].as_str() {
            Some(f) if f == want => right += 1,
            got => wrong.push(format!("{}: {got:?}, truth {want} ({})", q["id"], k["note"])),
        }
        // A loaded request read its folder: the bytes the connector's
        // files hold, `layers x (tokens x bytes per layer-token + 88)`.
        if q["outcome"] == "loaded" {
            assert_eq!(k["observed"].as_f64(), q["folder_bytes"].as_f64(), "{}: {k}", q["id"]);
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    // 67 requests reached decode (the 68th failed at the proxy).
    assert_eq!(right, 67);
    let f = &r["kv"]["folders"];
    assert_eq!((f["stored"].as_u64(), f["matched"].as_u64()), (Some(67), Some(67)), "{f}");
    // Never read: the 9 misses' prefill folders and the 3 direct requests'.
    let unread: std::collections::BTreeSet<String> =
        f["unread"].as_array().unwrap().iter().filter_map(|n| n.as_str().map(String::from)).collect();
    let want: std::collections::BTreeSet<String> = truth
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|q| ["silent_miss", "no_prefill"].contains(&q["outcome"].as_str().unwrap()))
        .map(|q| q["store_folder"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(unread, want);
}

/// A NIXL pair of one prefill and two decodes behind a toy-proxy flow
/// (a uuid forwarded per request), `vllm bench serve` as the load, misses
/// whose proxy forwarded no id and passed no `kv_transfer_params` mixed in
/// (two pairs of them sent together with one prompt length), and one
/// decode SIGKILLed mid-load and restarted: replayed from its files with
/// its spans, no verdict is sure and wrong, every id-less miss whose
/// prompt length is its own in the window is named, and the streams the
/// kill cut are errors at decode, never loaded.
#[test]
fn a_nixl_bench_run_with_id_less_misses_and_a_kill_is_never_sure_and_wrong() {
    let dir = common::capture_dir("nixl-1p2d-bench");
    let r = check(&dir.display().to_string());
    let traces = r["traces"].as_array().unwrap();
    let names = |t: &serde_json::Value, id: &str| {
        t["vllm_ids"].as_array().unwrap().iter().any(|v| {
            let v = v["id"].as_str().unwrap();
            v == id || v.rsplit_once('-').is_some_and(|(h, s)| h == id && s.len() == 8)
        })
    };
    let truth = std::fs::read_to_string(dir.join("requests.jsonl")).unwrap();
    let rows: Vec<serde_json::Value> = truth.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let (mut right, mut unknown, mut sure_wrong, mut wrong) = (0, 0, Vec::new(), Vec::new());
    let mut id_less = (0, 0);
    for q in &rows {
        let id = q["id"].as_str().unwrap();
        let want = q["outcome"].as_str().unwrap();
        let d = q["decode_request_id"].as_str().unwrap();
        let t = traces.iter().rev().find(|t| names(t, d)).unwrap_or_else(|| panic!("{id}: no trace of {d}"));
        let got = t["outcome"].as_str().unwrap();
        match got {
            o if o == want => right += 1,
            "unknown" => unknown += 1,
            o if t["sure"] == true => sure_wrong.push(format!("{id}: {o}, truth {want}: {}", t["evidence"])),
            o => wrong.push(format!("{id}: {o}, truth {want}: {}", t["evidence"])),
        }
        if q["flow"] == "proxy_noid" {
            id_less.0 += 1;
            id_less.1 += usize::from(got == "silent_miss");
        }
        if want == "error" {
            assert_ne!(got, "loaded", "{id}: cut by the kill, never loaded: {}", t["evidence"]);
        }
    }
    assert!(sure_wrong.is_empty(), "{sure_wrong:#?}");
    assert!(wrong.is_empty(), "{wrong:#?}");
    // 18 misses with no id: all named, the equal-length pairs as likely.
    assert_eq!(id_less, (18, 18));
    assert_eq!(rows.len(), 274);
    // The kill broke 19 streams at the proxy (uvicorn's `Exception in ASGI
    // application`, no answer after) as decode#1 had 19 open: those are
    // its streams' echoes, not requests, and the one whose end the decode's
    // log left in doubt was cut.
    assert_eq!((right, unknown), (274, 0));
    let errors: Vec<&str> =
        traces.iter().filter(|t| t["outcome"] == "error").map(|t| t["id"].as_str().unwrap()).collect();
    assert_eq!(errors.len(), 19, "{errors:?}");
    assert!(errors.iter().all(|id| !id.starts_with("proxy-error")), "{errors:?}");
    assert!(
        traces.iter().any(|t| t["outcome"] == "error"
            && t["evidence"].as_str().unwrap().contains("the proxy logged 19 broken streams")),
        "no stream cut by the proxy's count"
    );
}

/// The bench run's proxy forwards no id for its id-less phases: its access
/// lines are pinned by arrival order, some on a prefill copy's own trace
/// before the copy joins its decode by prompt length. The line goes with
/// the copy (or is placed again): every request the truth has keeps its
/// proxy answer but the one a single line was shifted past.
#[test]
fn an_id_less_answer_line_follows_its_prefill_copy_into_the_join() {
    let args = common::capture_replay_args("nixl-1p2d-bench", Default::default());
    let (mut app, player) = pdtop::modes::replay_app(&args).unwrap();
    let end = player.run_to_end(&mut app.state);
    app.state.finish(end);
    let c = &app.state.logs.as_ref().unwrap().correlator;
    let answered = |t: &&pdtop::traces::Trace| t.phase(pdtop::traces::Hop::Proxy).is_some();
    let requests: Vec<&pdtop::traces::Trace> = c.traces().filter(|t| !t.id.starts_with("proxy")).collect();
    let without: Vec<&str> = requests.iter().filter(|t| !answered(t)).map(|t| t.id.as_str()).collect();
    assert_eq!(requests.len(), 274);
    // Before, 5 lost theirs: 3 with a copy's retired trace, 2 by the shift.
    assert!(without.len() <= 1, "{without:?}");
}

/// The bench run's proxy log with one broken stream more than the killed
/// decode had open: the breaks are not all its echoes, and which are is
/// unknown, so none is taken for one and the stream the decode's log left
/// in doubt stays unknown. Each exception is a failure of its own.
#[test]
fn more_broken_streams_than_the_dead_decode_had_open_settle_nothing() {
    let dir = common::copy_capture("nixl-1p2d-bench", "extra-break", &[]);
    let log = std::fs::read_to_string(dir.join("proxy.log")).unwrap();
    let header = "ERROR:    Exception in ASGI application";
    let at = log.find(header).expect("the real exception");
    let extra = format!("{}{header}\n{}", &log[..at], &log[at..]);
    std::fs::write(dir.join("proxy.log"), extra).unwrap();
    let r = check(&dir.display().to_string());
    let _ = std::fs::remove_dir_all(&dir);
    let traces = r["traces"].as_array().unwrap();
    let proxy_errors = traces.iter().filter(|t| t["id"].as_str().unwrap().starts_with("proxy-error")).count();
    assert_eq!(proxy_errors, 20, "{}", r["requests"]);
    let doubt = traces.iter().find(|t| t["id"] == "cmpl-169e1974-6ff4-41f1-bf4a-821230ce4e8c").unwrap();
    assert_eq!(doubt["outcome"], "unknown", "{}", doubt["evidence"]);
}

/// A capture folder whose proxy log has no timestamps (uvicorn's access
/// lines) and no client record to time its answers by: its lines are not
/// placed at the start (each would be a "proxy only" request, and its
/// errors would come before they happened); the report says so, and the
/// requests are the instances' own: 64, as the truth has.
#[test]
fn an_undated_proxy_log_is_not_replayed_at_time_zero() {
    let dir = common::copy_capture("nixl-llama-shape", "undated-proxy", &["requests.jsonl"]);
    let r = check(&dir.display().to_string());
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(r["requests"]["seen"], 64, "{}", r["requests"]);
    assert_eq!(r["requests"]["unknown"], 0, "{}", r["requests"]);
    let warned = r["warnings"].as_array().unwrap().iter().any(|w| {
        let w = w.as_str().unwrap();
        w.starts_with("proxy.log: no timestamps") && w.contains("not replayed")
    });
    assert!(warned, "{}", r["warnings"]);
}

/// The cascade's 1P2D lab: decode2 SIGKILLed with a stream open, the
/// prefill's engine dead 54 ms later. Its proxy (the lab's miniproxy)
/// logs no id: `Request failed with status 500` for each of the prefill's
/// five 500s (three of named requests, two refused before logging), and a
/// traceback for each request it then could not send to the dead decode.
/// Each such report is the failure the prefill's own access line gives,
/// seen from the other end: the request it belongs to, not one more; the
/// broken stream is the killed decode's echo. Replayed, the counts are
/// the truth's (`requests.jsonl`), and every request named by its id has
/// its truth's outcome.
#[test]
fn a_proxys_report_of_an_instance_failure_is_that_requests() {
    let dir = common::capture_dir("nixl-1p2d-cascade");
    let r = check(&dir.display().to_string());
    let n = &r["requests"];
    let got: Vec<u64> = ["seen", "loaded", "silent_miss", "no_prefill", "error", "cancelled", "unknown"]
        .iter()
        .map(|k| n[k].as_u64().unwrap())
        .collect();
    assert_eq!(got, [64, 22, 25, 3, 13, 1, 0], "{n}");
    let traces = r["traces"].as_array().unwrap();
    let truth = std::fs::read_to_string(dir.join("requests.jsonl")).unwrap();
    let mut wrong = Vec::new();
    for line in truth.lines() {
        let q: serde_json::Value = serde_json::from_str(line).unwrap();
        let Some(t) = traces.iter().find(|t| t["id"] == q["id"]) else { continue };
        if t["outcome"] != q["outcome"] {
            wrong.push(format!("{}: {}, truth {}: {}", q["id"], t["outcome"], q["outcome"], t["evidence"]));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    // The two requests the prefill refused unlogged: one went on to decode
    // (a miss, paired by order), one to the dead decode2 (an error).
    let refused = traces.iter().find(|t| t["id"].as_str().unwrap().starts_with("prefill#0-error")).unwrap();
    let evidence = refused["evidence"].as_str().unwrap();
    assert!(evidence.contains("reported by the proxy") && evidence.contains("8201"), "{evidence}");
}
