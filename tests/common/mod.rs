//! Helpers shared by the integration tests: the real captures in
//! `../shared/lab-captures/` (CI has `shared/` beside the checkout).
#![allow(dead_code)]

use std::path::PathBuf;

use pdtop::sources::{Endpoint, Msg};
use pdtop::state::{AppState, Role};

pub const CAPTURES: [&str; 2] = ["qwen3-shape-restart", "nixl-llama-shape"];

pub fn capture_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lab-captures").join(name);
    assert!(dir.is_dir(), "missing {}", dir.display());
    dir
}

/// The rows of `scrapes.jsonl.xz`: (t, instance, Some(body) | None when down, error).
pub fn scrapes(name: &str) -> Vec<(f64, String, Option<String>, Option<String>)> {
    let raw = std::fs::read(capture_dir(name).join("scrapes.jsonl.xz")).unwrap();
    let mut out = Vec::new();
    lzma_rs::xz_decompress(&mut &raw[..], &mut out).unwrap();
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["t"].as_f64().unwrap(),
                v["instance"].as_str().unwrap().to_string(),
                v["text"].as_str().map(str::to_owned),
                v["error"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

pub fn pair_endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint::parse(Role::Prefill, "127.0.0.1:8100").unwrap(),
        Endpoint::parse(Role::Decode, "127.0.0.1:8200").unwrap(),
    ]
}

/// Feeds every recorded scrape into a fresh state, as a live scraper would.
pub fn replay_scrapes(name: &str) -> AppState {
    let mut st = AppState::new(pair_endpoints(), 60.0);
    for (t, inst, body, error) in scrapes(name) {
        let instance = usize::from(inst == "decode");
        st.apply(match body {
            Some(body) => Msg::Scrape { instance, at: t, body },
            None => Msg::ScrapeFailed { instance, at: t, error: error.unwrap_or_default() },
        });
    }
    st
}

/// Feeds scrapes and log lines of a capture, in time order, up to `secs`
/// after its first scrape (scrapes every 1 s, logs read every 0.5 s, as the
/// live collectors would).
pub fn replay_with_logs(name: &str, secs: f64) -> AppState {
    use pdtop::lab::Capture;
    use pdtop::sources::logtail::{TailCounts, TailState};
    use pdtop::traces::Source;
    let cap = Capture::from_dir(&capture_dir(name)).unwrap();
    let source_of = |file: &str| match file {
        "prefill.log" => Source::Prefill(0),
        "proxy.log" => Source::Proxy,
        _ => Source::Decode(0),
    };
    let logs: Vec<(Source, String)> =
        cap.logs.iter().map(|l| (source_of(l.file_name), l.file_name.to_string())).collect();
    let mut st = AppState::new(pair_endpoints(), 60.0).with_logs(&logs);
    let end = cap.t0 + secs;
    let mut next_line = vec![0usize; cap.logs.len()];
    let mut t = cap.t0;
    let rows = scrapes(name);
    let mut row = 0;
    while t <= end {
        // Prefill first, decode last: the order a polling round reads them.
        let mut order: Vec<usize> = (0..cap.logs.len()).collect();
        order.sort_by_key(|i| match source_of(cap.logs[*i].file_name) {
            Source::Prefill(_) => 0,
            Source::Proxy => 1,
            Source::Decode(_) => 2,
        });
        for i in order {
            let lines = &cap.logs[i].lines;
            let start = next_line[i];
            let stop = start + lines[start..].partition_point(|(lt, _)| *lt <= t);
            if stop > start {
                let batch = lines[start..stop].iter().map(|(_, l)| l.clone()).collect();
                st.apply(Msg::LogLines {
                    source: source_of(cap.logs[i].file_name),
                    at: t,
                    lines: batch,
                    state: TailState::Following,
                    counts: TailCounts::default(),
                });
                next_line[i] = stop;
            }
        }
        while row < rows.len() && rows[row].0 <= t {
            let (at, inst, body, error) = rows[row].clone();
            // One scrape a second, like a live scraper at the default interval.
            if (row / 2) % 2 == 0 {
                let instance = usize::from(inst == "decode");
                st.apply(match body {
                    Some(body) => Msg::Scrape { instance, at, body },
                    None => Msg::ScrapeFailed { instance, at, error: error.unwrap_or_default() },
                });
            }
            row += 1;
        }
        st.apply(Msg::Tick { at: t });
        t += 0.5;
    }
    st
}
