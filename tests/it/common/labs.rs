//! The recorded labs the end-to-end tests judge a live `pdtop check`
//! against: each capture served over loopback HTTP by the demo lab (sped
//! up), played once, every check of it run as a process side by side.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use pdtop::lab::{self, LabOptions};

/// Lab seconds per real second. A miss is called 1.5 lab seconds after a
/// request is added: checks that read logs at 10x leave a loaded 2-core
/// machine too little room, and at 5x (0.3 real seconds) a slower one
/// (2026-12-08, AMD EPYC: two requests called missed in 3 of 3 clean-clone
/// CI runs, and beside three busy loops at every try).
pub const SPEED: f64 = 2.5;

/// Which of the lab's inputs a check is given besides its endpoints.
#[derive(Clone, Copy, PartialEq)]
enum Logs {
    None,
    ProxyOnly,
    /// Every log, the model config, the connector directory, the
    /// interface counters with `lo` named.
    All,
    /// The instance logs and model config, the counters with `eth0` named
    /// (where the KV did not go).
    Eth0,
}

/// What the checks of one lab run reported: (exit code, `--json` report).
pub struct LabRun {
    pub metrics: (i32, serde_json::Value),
    pub proxy_only: (i32, serde_json::Value),
    pub all: (i32, serde_json::Value),
    /// With `eth0` named (of `ETH0` only).
    pub eth0: Option<(i32, serde_json::Value)>,
    /// `pdtop record` of the inputs the `all` check read, as it read them
    /// (of `RECORDED` only: the one a test replays).
    pub recording: Option<PathBuf>,
}

pub const RECORDED: &str = "qwen3-shape-restart";
pub const ETH0: &str = "nixl-llama-shape";

/// Each capture is played once, and every check the tests ask of it
/// watches that one lab side by side: metrics only, the proxy log only,
/// every log (and a recording of it, or a check naming the wrong
/// interface). The tests read the reports; the first to ask plays the lab
/// (in its turn of `REAL_TIME`) and the others wait.
pub fn lab_run(capture: &'static str) -> &'static LabRun {
    static RUNS: [OnceLock<LabRun>; 2] = [OnceLock::new(), OnceLock::new()];
    let i = super::CAPTURES.iter().position(|c| *c == capture).expect("a capture of CAPTURES");
    RUNS[i].get_or_init(|| {
        // A runtime of its own: the lab serves from it, whichever test asked.
        std::thread::spawn(move || {
            let _turn = super::real_time_turn_blocking();
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(play(capture))
        })
        .join()
        .unwrap_or_else(|_| panic!("the lab run of {capture} failed (its panic is above)"))
    })
}

async fn play(capture: &str) -> LabRun {
    let cap = super::capture(capture).clone();
    let secs = (cap.t_end - cap.t0) / SPEED + 1.0;
    let dir = std::env::temp_dir().join(format!("pdtop-e2e-{capture}-{}", std::process::id()));
    let lab = lab::start(cap, LabOptions { speed: SPEED, looping: false, dir: dir.clone(), otlp_to: None })
        .await
        .unwrap();
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
    let wrong_iface = (capture == ETH0).then(|| check(Logs::Eth0));
    let runs = [check(Logs::None), check(Logs::ProxyOnly), check(Logs::All)];
    let mut outs = Vec::new();
    for run in runs {
        outs.push(run.await.unwrap());
    }
    let eth0 = match wrong_iface {
        Some(run) => Some(report(run.await.unwrap())),
        None => None,
    };
    if let Some(r) = recorder {
        let rec = r.await.unwrap();
        assert!(rec.status.success(), "record failed: {}", String::from_utf8_lossy(&rec.stderr));
    }
    let _ = std::fs::remove_dir_all(&dir);
    let mut reports = outs.into_iter().map(report);
    let (metrics, proxy_only, all) =
        (reports.next().unwrap(), reports.next().unwrap(), reports.next().unwrap());
    LabRun { metrics, proxy_only, all, eth0, recording }
}

fn report(out: std::process::Output) -> (i32, serde_json::Value) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("not JSON ({e}): {stdout}\nstderr: {}", String::from_utf8_lossy(&out.stderr))
    });
    (out.status.code().unwrap_or(-1), json)
}

/// The arguments that point pdtop at the lab and the logs it is given.
fn inputs(capture: &str, lab: &lab::LabHandle, logs: Logs, secs: f64) -> Vec<String> {
    let mut args = super::lab_pair_args(lab, SPEED, secs);
    let path = |p: &Path| p.display().to_string();
    if matches!(logs, Logs::All | Logs::Eth0) {
        args.extend([
            "--prefill-log".into(),
            path(&lab.prefill_log),
            "--decode-log".into(),
            path(&lab.decode_log),
        ]);
        let config = super::capture_dir(capture).join("model-config.json");
        args.extend(["--model-config".into(), path(&config)]);
        if let Some(dir) = &lab.kv_dir {
            args.extend(["--kv-dir".into(), path(dir)]);
        }
        if let Some(file) = &lab.net_dev_file {
            let iface = if logs == Logs::Eth0 { "eth0" } else { "lo" };
            args.extend(["--iface".into(), iface.into(), "--net-dev-file".into(), path(file)]);
        }
    }
    if matches!(logs, Logs::ProxyOnly | Logs::All)
        && let Some(proxy) = &lab.proxy_log
    {
        args.extend(["--proxy-log".into(), path(proxy)]);
    }
    args
}
