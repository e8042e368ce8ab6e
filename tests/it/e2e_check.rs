//! End to end: a real recording served over loopback HTTP by the demo lab
//! (sped up), and `pdtop check --json` run as processes against it.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use pdtop::lab::{self, Capture, LabOptions};

/// Lab seconds per real second. A miss is called 1.5 lab seconds after a
/// request is added: checks that read logs at 10x leave a loaded 2-core
/// machine too little room.
const SPEED: f64 = 5.0;

/// Which of the lab's logs a check is given.
#[derive(Clone, Copy, PartialEq)]
enum Logs {
    None,
    ProxyOnly,
    All,
}

/// What the checks of one lab run reported: (exit code, `--json` report).
struct LabRun {
    metrics: (i32, serde_json::Value),
    proxy_only: (i32, serde_json::Value),
    all: (i32, serde_json::Value),
    /// `pdtop record` of the inputs the `all` check read, as it read them
    /// (of `RECORDED` only: the one a test replays).
    recording: Option<PathBuf>,
}

const RECORDED: &str = "qwen3-shape-restart";

/// Each capture is played once, and every check the tests ask of it
/// watches that one lab side by side: metrics only, the proxy log only,
/// every log (and a recording of it). The tests read the reports; the first
/// to ask plays the lab (in its turn of `REAL_TIME`) and the others wait.
fn lab_run(capture: &'static str) -> &'static LabRun {
    static RUNS: [OnceLock<LabRun>; 2] = [OnceLock::new(), OnceLock::new()];
    let i = common::CAPTURES.iter().position(|c| *c == capture).expect("a capture of CAPTURES");
    RUNS[i].get_or_init(|| {
        // A runtime of its own: the lab serves from it, whichever test asked.
        std::thread::spawn(move || {
            let _turn = common::REAL_TIME.blocking_lock();
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(play(capture))
        })
        .join()
        .unwrap_or_else(|_| panic!("the lab run of {capture} failed (its panic is above)"))
    })
}

async fn play(capture: &str) -> LabRun {
    let cap = Capture::from_dir(&common::capture_dir(capture)).unwrap();
    let secs = (cap.t_end - cap.t0) / SPEED + 1.0;
    let dir = std::env::temp_dir().join(format!("pdtop-e2e-{capture}-{}", std::process::id()));
    let lab = lab::start(cap, LabOptions { speed: SPEED, looping: false, dir: dir.clone() }).await.unwrap();
    let recording = (capture == RECORDED)
        .then(|| std::env::temp_dir().join(format!("pdtop-e2e-{capture}-{}.pdrec", std::process::id())));
    let spawn = |mut args: Vec<String>, logs: Logs| {
        args.extend(inputs(capture, &lab, logs, secs));
        tokio::task::spawn_blocking(move || {
            Command::new(env!("CARGO_BIN_EXE_pdtop")).args(&args).output().unwrap()
        })
    };
    let check = |logs| spawn(vec!["check".into(), "--json".into()], logs);
    let recorder = recording
        .as_ref()
        .map(|file| spawn(vec!["record".into(), "-o".into(), file.display().to_string()], Logs::All));
    let runs = [check(Logs::None), check(Logs::ProxyOnly), check(Logs::All)];
    let mut outs = Vec::new();
    for run in runs {
        outs.push(run.await.unwrap());
    }
    if let Some(r) = recorder {
        let rec = r.await.unwrap();
        assert!(rec.status.success(), "record failed: {}", String::from_utf8_lossy(&rec.stderr));
    }
    let _ = std::fs::remove_dir_all(&dir);
    let mut reports = outs.into_iter().map(|out| {
        let stdout = String::from_utf8_lossy(&out.stdout);
        let json: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
            panic!("not JSON ({e}): {stdout}\nstderr: {}", String::from_utf8_lossy(&out.stderr))
        });
        (out.status.code().unwrap_or(-1), json)
    });
    let (metrics, proxy_only, all) =
        (reports.next().unwrap(), reports.next().unwrap(), reports.next().unwrap());
    LabRun { metrics, proxy_only, all, recording }
}

/// The arguments that point pdtop at the lab and the logs it is given.
fn inputs(capture: &str, lab: &lab::LabHandle, logs: Logs, secs: f64) -> Vec<String> {
    let mut args = common::lab_pair_args(lab, SPEED, secs);
    let path = |p: &Path| p.display().to_string();
    if logs == Logs::All {
        args.extend([
            "--prefill-log".into(),
            path(&lab.prefill_log),
            "--decode-log".into(),
            path(&lab.decode_log),
        ]);
        let config = common::capture_dir(capture).join("model-config.json");
        args.extend(["--model-config".into(), path(&config)]);
        if let Some(dir) = &lab.kv_dir {
            args.extend(["--kv-dir".into(), path(dir)]);
        }
        if let Some(file) = &lab.net_dev_file {
            args.extend(["--iface".into(), "lo".into(), "--net-dev-file".into(), path(file)]);
        }
    }
    if logs != Logs::None
        && let Some(proxy) = &lab.proxy_log
    {
        args.extend(["--proxy-log".into(), path(proxy)]);
    }
    args
}

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
    assert_eq!(q["silent_miss"], 8, "{q}");
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
    let folders = &kv["folders"];
    assert_eq!(folders["matched"], folders["stored"], "{folders}");
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
    let _turn = common::REAL_TIME.blocking_lock();
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
    // A damaged recording is a clear error naming the byte offset.
    let bytes = std::fs::read(file).unwrap();
    let damaged = file.with_extension("damaged.pdrec");
    std::fs::write(&damaged, &bytes[..bytes.len() / 2]).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pdtop"))
        .args(["check", "--replay", &damaged.display().to_string(), "--json"])
        .output()
        .unwrap();
    // A runtime failure, not bad usage: exit 3.
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("at byte"), "{err}");
    std::fs::remove_file(&damaged).ok();
    std::fs::remove_file(file).ok();
}
