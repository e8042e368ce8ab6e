//! Every excerpt of the real-log corpus (`tests/fixtures/log-excerpts/`,
//! see its README) read line by line as pdtop reads a log: the request ids
//! and events each line should yield (per `MANIFEST.toml`), no id or event
//! where the manifest has none, and the noise lines counted as unknown.

use std::collections::BTreeMap;
use std::path::PathBuf;

use pdtop::logs::prefix::peel;
use pdtop::logs::reader::Reader;
use pdtop::logs::signal::{Signal, Val, join_id};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/log-excerpts")
}

/// Descriptive manifest fields (free text for people), not values a parser reads.
const PROSE: [&str; 9] =
    ["line", "kind", "note", "verdict_hint", "workers", "wording", "unit_label_wrong", "request", "file"];
/// Text fields written as the parser should name them; others are prose.
const TEXT_EXACT: [&str; 27] = [
    "connector",
    "shape",
    "status",
    "failure_type",
    "state",
    "remote_engine",
    "engine_id",
    "policy",
    "backend",
    "field",
    "op",
    "error",
    "url",
    "endpoint",
    "step",
    "method",
    "path",
    "target",
    "segment",
    "mode",
    "leg",
    "engine",
    "engine_version",
    "proxy",
    "zmq",
    "remote_host",
    "detail",
];

struct Line {
    ids: Vec<String>,
    signal: Option<Signal>,
    prefixes: String,
}

fn read_excerpt(file: &str) -> Vec<Line> {
    let text = std::fs::read_to_string(dir().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut reader = Reader::new();
    let mut out: Vec<Line> = Vec::new();
    for raw in text.split('\n').collect::<Vec<_>>().iter().take(text.lines().count()) {
        let c = reader.classify(raw);
        let prefixes = peel(raw).prefixes.join(" ");
        if c.continues {
            let joined = c.signal.clone().expect("a continuation has the joined signal");
            let prev = out.last_mut().expect("a continuation follows a line");
            let new_ids: Vec<String> = joined.ids.iter().filter(|i| !prev.ids.contains(i)).cloned().collect();
            prev.signal = Some(Signal { ids: prev.ids.clone(), ..joined });
            out.push(Line { ids: new_ids, signal: None, prefixes });
        } else {
            out.push(Line { ids: c.ids, signal: c.signal, prefixes });
        }
    }
    out
}

fn same_num(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// Compares one expected event with what the line gave; the mismatches.
fn check_event(exp: &toml::Table, got: &Signal) -> Vec<String> {
    let mut bad = Vec::new();
    for (k, v) in exp {
        if PROSE.contains(&k.as_str()) {
            continue;
        }
        let have = got.get(k);
        let ok = match (v, have) {
            (toml::Value::Integer(n), Some(Val::Num(x))) => same_num(*n as f64, *x),
            (toml::Value::Float(n), Some(Val::Num(x))) => same_num(*n, *x),
            (toml::Value::Boolean(b), Some(Val::Bool(x))) => b == x,
            (toml::Value::String(s), Some(Val::Text(x))) if TEXT_EXACT.contains(&k.as_str()) => s == x,
            (toml::Value::String(s), Some(Val::Text(x))) if k == "reason" => {
                x.to_ascii_lowercase().contains(&s.to_ascii_lowercase())
            }
            (toml::Value::String(_), _) if !TEXT_EXACT.contains(&k.as_str()) && k != "reason" => true,
            _ => false,
        };
        if !ok {
            bad.push(format!("{k}: expected {v}, got {have:?}"));
        }
    }
    bad
}

#[test]
fn every_excerpt_yields_its_ids_and_events() {
    let manifest: toml::Table =
        std::fs::read_to_string(dir().join("MANIFEST.toml")).expect("manifest").parse().expect("toml");
    let excerpts = manifest["excerpt"].as_array().expect("[[excerpt]]");
    assert!(excerpts.len() >= 57, "corpus shrank: {}", excerpts.len());
    let mut failures: Vec<String> = Vec::new();
    let (mut n_lines, mut n_events, mut n_ids, mut n_unknown) = (0, 0, 0, 0);
    for ex in excerpts {
        let file = ex["file"].as_str().expect("file");
        let expect = ex["expect"].as_table().expect("expect");
        let lines = read_excerpt(file);
        n_lines += lines.len();
        let mut fail = |m: String| failures.push(format!("{file}: {m}"));
        let at = |n: i64| &lines[(n - 1) as usize];

        let mut want_ids: BTreeMap<i64, Vec<String>> = BTreeMap::new();
        for r in expect["requests"].as_array().expect("requests") {
            let (n, printed, base) = (
                r["line"].as_integer().unwrap(),
                r["printed"].as_str().unwrap(),
                r["base"].as_str().unwrap(),
            );
            want_ids.entry(n).or_default().push(printed.to_string());
            if join_id(printed) != base {
                fail(format!("line {n}: join_id({printed}) = {} , want {base}", join_id(printed)));
            }
        }
        for (i, l) in lines.iter().enumerate() {
            let n = i as i64 + 1;
            let mut want = want_ids.get(&n).cloned().unwrap_or_default();
            want.dedup();
            if l.ids != want {
                fail(format!("line {n}: ids {:?}, want {want:?}", l.ids));
            }
            n_ids += l.ids.len();
        }

        let mut with_event = Vec::new();
        for e in expect["events"].as_array().expect("events") {
            let e = e.as_table().unwrap();
            let n = e["line"].as_integer().unwrap();
            with_event.push(n);
            let kind = e["kind"].as_str().unwrap();
            match &at(n).signal {
                Some(s) if s.kind.as_str() == kind => {
                    n_events += 1;
                    for b in check_event(e, s) {
                        fail(format!("line {n} {kind}: {b}"));
                    }
                }
                other => fail(format!("line {n}: want {kind}, got {:?}", other.as_ref().map(|s| s.kind))),
            }
        }
        let unknown: Vec<i64> =
            expect["unknown"].as_array().unwrap().iter().map(|v| v.as_integer().unwrap()).collect();
        for (i, l) in lines.iter().enumerate() {
            let n = i as i64 + 1;
            if with_event.contains(&n) {
                continue;
            }
            if let Some(s) = &l.signal {
                fail(format!("line {n}: misread as {:?} (manifest: no event)", s.kind));
            } else if unknown.contains(&n) {
                n_unknown += 1;
            }
        }
        for p in expect["prefixes"].as_array().unwrap() {
            let p = p.as_str().unwrap();
            if !lines.iter().any(|l| l.prefixes.contains(p)) {
                fail(format!("prefix {p:?} not peeled"));
            }
        }
    }
    eprintln!("corpus: {n_lines} lines, {n_events} events, {n_ids} ids, {n_unknown} unknown");
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}
