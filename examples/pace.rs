//! Reads a capture as a live pdtop would at several paces and start
//! moments, and prints each request whose verdict differs from the
//! reading from the start at the finest pace (same evidence lost).
//!
//! `cargo run --release --example pace -- DIR [DIR...]`

use std::collections::BTreeMap;
use std::path::Path;

use pdtop::lab::Capture;
use pdtop::lab::replay::{Reading, initial_state, read_as};

fn verdicts(cap: &Capture, r: &Reading) -> BTreeMap<String, String> {
    let mut st = initial_state(cap, true);
    for m in read_as(cap, r) {
        st.apply(m);
    }
    st.finish(cap.t0 + r.secs);
    let mut out = BTreeMap::new();
    let mut n: BTreeMap<String, usize> = BTreeMap::new();
    for t in st.logs.as_ref().expect("logs").correlator.traces() {
        let key = if t.id.contains("error-") || t.id.starts_with("proxy") {
            let k = format!(
                "{}#{}",
                format!("{:?}", t.outcome),
                n.entry(format!("{:?}", t.outcome)).or_default()
            );
            *n.get_mut(&format!("{:?}", t.outcome)).unwrap() += 1;
            k
        } else {
            let mut k = t.id.clone();
            while out.contains_key(&k) {
                k.push('\'');
            }
            k
        };
        out.insert(key, format!("{} {:?}", format!("{:?}", t.outcome), t.confidence));
    }
    out
}

fn main() {
    if let Ok(at) = std::env::var("GULPFILES") {
        let dir = std::env::args().nth(1).expect("dir");
        let every = std::env::var("EVERY").ok().and_then(|s| s.parse().ok());
        gulp_files(&dir, at.parse().unwrap(), every);
        return;
    }
    if let Ok(start) = std::env::var("TLDEBUG") {
        let dir = std::env::args().nth(1).expect("dir");
        let cap = Capture::from_dir(Path::new(&dir)).expect("capture");
        timeline_debug(&cap, start.parse().unwrap());
        return;
    }
    if let Ok(id) = std::env::var("EXPLAIN") {
        let dir = std::env::args().nth(1).expect("dir");
        let cap = Capture::from_dir(Path::new(&dir)).expect("capture");
        let secs = cap.t_end - cap.t0 + 1.0;
        let start: f64 = std::env::var("START").ok().and_then(|s| s.parse().ok()).unwrap_or(secs);
        let every: f64 = std::env::var("EVERY").ok().and_then(|s| s.parse().ok()).unwrap_or(0.5);
        explain(&cap, &Reading { every, start, lost_before: start, ..Reading::from_start(secs, true) }, &id);
        explain(&cap, &Reading { lost_before: start, ..Reading::from_start(secs, true) }, &id);
        return;
    }
    for dir in std::env::args().skip(1) {
        let cap = Capture::from_dir(Path::new(&dir)).expect("capture");
        let secs = cap.t_end - cap.t0 + 1.0;
        let mid = secs * 0.4;
        let base = |lost: f64| {
            verdicts(&cap, &Reading { every: 0.5, lost_before: lost, ..Reading::from_start(secs, true) })
        };
        let full = base(0.0);
        let full_mid = base(mid);
        let full_end = base(secs);
        println!("== {dir}: {} traces", full.len());
        let cases: Vec<(String, Reading, &BTreeMap<String, String>)> = vec![
            ("x1".into(), Reading { every: 0.25, ..Reading::from_start(secs, true) }, &full),
            ("x4".into(), Reading { every: 1.0, ..Reading::from_start(secs, true) }, &full),
            ("x20".into(), Reading { every: 5.0, ..Reading::from_start(secs, true) }, &full),
            (
                "gulp".into(),
                Reading { start: secs, lost_before: 0.0, ..Reading::from_start(secs, true) },
                &full_end,
            ),
            (
                format!("start {mid:.0}s x4"),
                Reading { every: 1.0, start: mid, lost_before: mid, ..Reading::from_start(secs, true) },
                &full_mid,
            ),
        ];
        for (name, r, want) in cases {
            let got = verdicts(&cap, &r);
            let mut diffs = Vec::new();
            for (k, v) in want.iter() {
                let g = got.get(k).map(String::as_str).unwrap_or("missing");
                if g != v {
                    diffs.push(format!("{k}: {v} -> {g}"));
                }
            }
            for k in got.keys().filter(|k| !want.contains_key(*k)) {
                diffs.push(format!("{k}: missing -> {}", got[k]));
            }
            println!("  {name}: {} differ", diffs.len());
            for d in diffs.iter().take(40) {
                println!("     {d}");
            }
        }
    }
}

#[allow(dead_code)]
pub fn explain(cap: &Capture, r: &Reading, id: &str) {
    let mut st = initial_state(cap, true);
    for m in read_as(cap, r) {
        st.apply(m);
    }
    st.finish(cap.t0 + r.secs);
    let near: Option<f64> = std::env::var("NEAR").ok().and_then(|s| s.parse().ok());
    let hit = |t: &pdtop::traces::Trace| {
        t.id == id
            || (id.ends_with('*') && t.id.starts_with(id.trim_end_matches('*')))
            || near.is_some_and(|n| t.phases.iter().any(|p| (p.start - cap.t0 - n).abs() < 0.6))
    };
    for t in st.logs.as_ref().expect("logs").correlator.traces().filter(|t| hit(t)) {
        println!(
            "{} {:?} {:?} first_seen {:.1} reasons {}",
            t.id,
            t.outcome,
            t.confidence,
            t.first_seen - cap.t0,
            t.evidence()
        );
        for p in &t.phases {
            println!(
                "   {:?} {} {:.1} {:?} {}",
                p.hop,
                p.source,
                p.start - cap.t0,
                p.end.map(|e| e - cap.t0),
                p.detail
            );
        }
    }
}

#[allow(dead_code)]
pub fn timeline_debug(cap: &Capture, start: f64) {
    let mut tl = pdtop::state::timeline::Timeline::default();
    let t = cap.t0 + start;
    for l in &cap.logs {
        let lines: Vec<String> = l.lines.iter().filter(|(lt, _)| *lt <= t).map(|(_, s)| s.clone()).collect();
        tl.read(l.source, &lines, t);
    }
    let mut last = f64::MIN;
    for d in tl.release(t) {
        if d.at < last - 0.001 || (d.at - cap.t0) > start - 0.01 {
            println!(
                "{} {:.2} {:.2} {}",
                d.source,
                d.at - cap.t0,
                d.from - cap.t0,
                &d.line[..d.line.len().min(120)]
            );
        }
        last = d.at;
    }
}

#[allow(dead_code)]
pub fn gulp_files(dir: &str, at: f64, read_every: Option<f64>) {
    use pdtop::feed::{LogOrigin, Msg, TailCounts, TailState};
    let logs = vec![
        (LogOrigin::Prefill(0), format!("{dir}/prefill.log")),
        (LogOrigin::Decode(0), format!("{dir}/decode.log")),
        (LogOrigin::Proxy, format!("{dir}/proxy.log")),
    ];
    let mut st = pdtop::state::AppState::new(Vec::new(), 60.0).with_logs(&logs).reading_every(read_every);
    for (o, p) in &logs {
        let lines: Vec<String> = std::fs::read_to_string(p).unwrap().lines().map(String::from).collect();
        st.apply(Msg::LogLines {
            source: *o,
            at,
            lines,
            state: TailState::Following,
            counts: TailCounts::default(),
        });
    }
    st.apply(Msg::LogsPolled { at });
    for k in 1..8 {
        st.apply(Msg::LogsPolled { at: at + k as f64 * 0.5 });
    }
    for t in st.logs.as_ref().unwrap().correlator.traces() {
        if t.id.contains("edge") || t.id.contains("mismatch") {
            println!("{} {:?} {:?} {}", t.id, t.outcome, t.confidence, t.evidence());
        }
    }
}
