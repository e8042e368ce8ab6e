//! A log longer than one read takes (`TailOptions::max_bytes_per_poll`),
//! opened after the fact: the real tail loop (`sources::spawn_log_tailers`,
//! real files) reads it over several rounds, and no other log's lines are
//! placed past what it has been read to. Before, a long prefill log opened
//! mid-lab had its decodes' lines given on ahead of its own, and the
//! cascade's 64 requests came out as 115, 69 of them unknown.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::common;
use pdtop::clock::SystemClock;
use pdtop::feed::{LogOrigin, Msg, TailState};
use pdtop::lab::Capture;
use pdtop::sources;
use pdtop::sources::logtail::TailOptions;
use pdtop::traces::{Confidence, Outcome};

/// The cascade's logs, in the order of its instances (decode2 is `decode#1`).
const FILES: [(LogOrigin, &str); 4] = [
    (LogOrigin::Prefill(0), "vllm-prefill.log"),
    (LogOrigin::Decode(0), "vllm-decode.log"),
    (LogOrigin::Decode(1), "vllm-decode2.log"),
    (LogOrigin::Proxy, "proxy.log"),
];

/// Each request a decode log named: its verdict.
type Verdicts = BTreeMap<String, (Outcome, Confidence)>;

/// The capture's logs copied to `dir`, the prefill's with an unstamped
/// filler line after each of its lines (what a traceback or a dump adds
/// to a log), together over `min_bytes` (0: none).
fn copy_logs(src: &Path, dir: &Path, min_bytes: usize) -> Vec<(LogOrigin, String)> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    FILES
        .iter()
        .map(|(source, file)| {
            let text = std::fs::read_to_string(src.join(file)).unwrap();
            let text = match source {
                LogOrigin::Prefill(_) if min_bytes > 0 => {
                    let pad = min_bytes / text.lines().count() + 1024;
                    let filler = format!("{}\n", "x".repeat(pad));
                    text.lines().map(|line| format!("{line}\n{filler}")).collect()
                }
                _ => text,
            };
            let path = dir.join(file);
            std::fs::write(&path, &text).unwrap();
            (*source, path.display().to_string())
        })
        .collect()
}

/// The logs read by the real tail loop until every one is read to its end,
/// folded into the state; each decode-named request's verdict.
async fn tailed(cap: &Capture, logs: &[(LogOrigin, String)]) -> Verdicts {
    let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
    sources::spawn_log_tailers(logs, Duration::from_millis(20), None, Arc::new(SystemClock), (tx, None));
    let mut st = pdtop::lab::replay::initial_state(cap, true);
    // The state's logs are the copies' (the same origins, other paths).
    st = st.with_logs(logs);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut read: std::collections::HashMap<LogOrigin, bool> =
        logs.iter().map(|(o, _)| (*o, false)).collect();
    let last = loop {
        let m = tokio::time::timeout_at(deadline, rx.recv()).await.expect("read within 30 s").unwrap();
        let at = m.at();
        match &m {
            Msg::LogLines { source, state, lines, .. } if !lines.is_empty() => {
                read.insert(*source, *state == TailState::Following);
            }
            Msg::LogsPolled { .. } if read.values().all(|r| *r) => {
                st.apply(m);
                break at;
            }
            _ => {}
        }
        st.apply(m);
    };
    st.finish(last + 1.0);
    let mut out = Verdicts::new();
    for t in st.logs.as_ref().unwrap().correlator.traces() {
        if t.engine_ids.iter().any(|(o, _)| matches!(o, LogOrigin::Decode(_))) {
            out.insert(t.id.clone(), (t.outcome, t.confidence));
        }
    }
    out
}

#[tokio::test]
async fn a_log_longer_than_one_read_gives_the_verdicts_of_a_short_one() {
    let name = "nixl-1p2d-cascade";
    let src = common::capture_dir(name);
    let cap = common::capture(name).clone();
    let base = std::env::temp_dir().join(format!("pdtop-long-logs-{}", std::process::id()));
    let dir = |s: &str| -> PathBuf { base.join(s) };
    let short = tailed(&cap, &copy_logs(&src, &dir("short"), 0)).await;
    // Past one read's budget: the prefill's log takes two reads or more.
    let budget = TailOptions::default().max_bytes_per_poll;
    let long = tailed(&cap, &copy_logs(&src, &dir("long"), budget)).await;
    let _ = std::fs::remove_dir_all(&base);
    assert!(short.len() >= 40, "{short:#?}");
    let differ: Vec<String> = short
        .iter()
        .filter(|(k, v)| long.get(*k) != Some(v))
        .map(|(k, v)| format!("{k}: {v:?} -> {:?}", long.get(k)))
        .chain(long.keys().filter(|k| !short.contains_key(*k)).map(|k| format!("{k}: none -> {:?}", long[k])))
        .collect();
    assert!(differ.is_empty(), "{} differ: {differ:#?}", differ.len());
}
