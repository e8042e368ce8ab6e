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
const TEXT_EXACT: [&str; 28] = [
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
    "forwarded",
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
        let prefixes = peel(raw).prefix.to_string();
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

/// The corpus's router and sidecar excerpts read as a proxy log: each line
/// with a request id gives that request's trace its proxy hop (when, the
/// status of each leg, the failure and where), and each failure is an
/// event with its kind and the line's own time.
#[test]
fn router_and_sidecar_lines_join_traces() {
    use pdtop::feed::LogOrigin;
    use pdtop::traces::{Correlator, CorrelatorOptions, Hop, Outcome};
    // Read whole, long after it was written: each line is dated by its own
    // stamp (`state::timeline`), not by the read.
    let read = |file: &str| {
        let mut logs = pdtop::state::logs::LogState::new(&[(LogOrigin::Proxy, file.to_string())]);
        let text = std::fs::read_to_string(dir().join(file)).unwrap();
        let lines: Vec<String> = text.lines().map(String::from).collect();
        let (state, counts) = (pdtop::feed::TailState::Following, Default::default());
        logs.on_lines(LogOrigin::Proxy, 1_790_000_000.0, &lines, state, counts);
        logs.advance(1_790_000_000.0);
        logs.correlator
    };
    // vllm-router at DEBUG: the span's quoted id; the prefill leg answered 200.
    let mut c = read("vllm-router-pd-debug-request-id.log");
    let t = c.get("cmpl-Ed4lG6IlaUQRpaugWzpnIB6a").expect("trace named by the span's id").clone();
    let p = t.phase(Hop::Proxy).expect("proxy hop");
    assert_eq!(p.start, 1_768_444_217.0, "2026-01-15 02:30:17 UTC: {p:?}");
    assert!(p.detail.contains("PrefillDone (HTTP 200)"), "{p:?}");
    // Read long after: the router's steps alone decide nothing.
    assert_eq!(t.outcome, Outcome::Unknown);
    assert!(c.drain_log_events().is_empty());

    // sglang-router (vllm-router's origin): an id-less decode 500, then the
    // middleware's `request failed` with the id, status and latency: one
    // failed request, its decode leg blamed, its hop 2.04 s long.
    let mut c = read("sglang-router-pd-error-nested-span.log");
    let t = c.get("cmpl-hvNcVSx9FaPb13dmSHtom1fF").expect("trace").clone();
    assert_eq!(t.outcome, Outcome::Error, "{t:?}");
    assert_eq!(t.error_at, Some(Hop::Consumer), "{t:?}");
    assert!(
        t.evidence().contains("decode server returned error status") && t.evidence().contains("500"),
        "{t:?}"
    );
    let p = t.phase(Hop::Proxy).expect("proxy hop");
    let end = 1_756_970_126.0; // 2025-09-04 07:15:26 UTC
    assert_eq!(p.end, Some(end));
    assert!((p.start - (end - 2.041450065)).abs() < 1e-6, "{p:?}");
    let kinds: Vec<(&str, f64)> = c.drain_log_events().iter().map(|e| (e.kind.as_str(), e.t)).collect();
    assert_eq!(kinds, [("router_backend_error", end), ("router_request_failed", end)]);

    // vllm-router's PD mode: the trace is named by the id it forwards, the
    // one vLLM logs (`cmpl-<forwarded>-0`); the decode line, read where it
    // happened (before the router got decode's answer), lands on it.
    let fwd =
        "___prefill_addr_10.0.0.11:21001___decode_addr_10.0.0.21:22001_9b1f3c5e7a0d4b2c8e6f1a3b5c7d9e0f";
    // Its shape as vLLM 0.26 prints it (tests/fixtures/lab-captures), with this id.
    let decode = format!(
        "(APIServer pid=3126) INFO 03-31 13:30:20 [request_logger.py:63] Received request cmpl-{fwd}-0: params: SamplingParams(n=1, max_tokens=64, extra_args=None), lora_request: None."
    );
    let text = std::fs::read_to_string(dir().join("src-vllm-router-pd-forwarded-id.log")).unwrap();
    let router: Vec<&str> = text.lines().collect();
    let mut c = Correlator::new(CorrelatorOptions::default());
    for (src, l) in [
        (LogOrigin::Proxy, router[0]),
        (LogOrigin::Proxy, router[1]),
        (LogOrigin::Decode(0), decode.as_str()),
        (LogOrigin::Proxy, router[2]),
        (LogOrigin::Proxy, router[3]),
    ] {
        c.on_line(src, l, 1_790_000_000.0);
    }
    assert!(c.get("cmpl-q8ZrVh2kLm4PwX7nT1bYcD9e").is_none(), "named by the router's own id");
    let names: Vec<String> = c.traces().map(|t| t.id.clone()).collect();
    assert_eq!(names, [fwd], "one trace");
    let t = c.get(fwd).unwrap();
    assert_eq!((t.outcome, t.error_at, t.decode), (Outcome::Error, Some(Hop::Consumer), Some(0)), "{t:?}");
    assert!(t.evidence().contains("502"), "{t:?}");
    assert_eq!(c.drain_log_events().len(), 1, "the failed request is an event");

    // llm-d's sidecar names no request: no trace, but a prefill response
    // without its KV fields is a connector failure, one event per field.
    let mut c = read("llmd-sidecar-klog-missing-fields.log");
    assert_eq!(c.counts().seen, 0);
    let ev = c.drain_log_events();
    let fields: Vec<&str> =
        ev.iter().map(|e| e.text.rsplit("field=").next().unwrap().trim_end_matches(')')).collect();
    assert_eq!(fields, ["remote_block_ids", "remote_engine_id", "remote_host", "remote_port"], "{ev:?}");
    assert!(ev.iter().all(|e| e.kind.as_str() == "sidecar_missing_kv_field" && e.source == LogOrigin::Proxy));
}

/// `check --from-logs` with a vllm-router log beside the recorded pair's
/// own logs (the router lines carry, as `Generated vLLM request ID`, the
/// `X-Request-Id` values that capture's requests really had): the router's
/// requests are the instances' traces, and the hop the router saw sits on
/// the trace the instances decided.
#[test]
fn a_router_log_joins_the_recorded_pair_after_the_fact() {
    use pdtop::traces::{Hop, Outcome};
    let cap =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lab-captures/qwen3-shape-restart");
    // vLLM stamps have no year: the copies are dated like the capture (2026).
    let tmp = std::env::temp_dir().join(format!("pdtop-router-join-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_796_100_000);
    let copy = |name: &str| {
        let to = tmp.join(name);
        std::fs::copy(cap.join(name), &to).unwrap();
        std::fs::File::options().write(true).open(&to).unwrap().set_modified(when).unwrap();
        to.to_string_lossy().into_owned()
    };
    let router =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/router/vllm-router-pd-lab.log");
    let inputs = pdtop::cli::Inputs {
        prefill_log: vec![copy("vllm-prefill.log")],
        decode_log: vec![copy("vllm-decode.log")],
        proxy_log: Some(router.to_string_lossy().into_owned()),
        ..Default::default()
    };
    let files = pdtop::pipeline::read_log_files(&inputs).unwrap();
    let mut state = pdtop::state::AppState::new(Vec::new(), 60.0).with_logs(&files.logs);
    for m in files.msgs {
        state.apply(m);
    }
    state.finish(files.end);
    std::fs::remove_dir_all(&tmp).ok();
    let c = &state.logs.as_ref().unwrap().correlator;
    for (id, outcome) in [
        ("lab-disagg-0", Outcome::Loaded),
        ("lab-edge_block-0", Outcome::SilentMiss),
        ("lab-mismatch-0", Outcome::SilentMiss),
    ] {
        let t = c.get(id).unwrap_or_else(|| panic!("{id}: no trace"));
        assert_eq!(t.outcome, outcome, "{id}: {t:?}");
        assert!(t.prefill.is_some() && t.decode.is_some(), "{id}: {t:?}");
        let p = t.phase(Hop::Proxy).unwrap_or_else(|| panic!("{id}: no router hop: {t:?}"));
        // The router saw both legs answer 200: the miss was silent to it too.
        assert!(p.detail.contains("HTTP 200"), "{id}: {p:?}");
        assert!(t.phase(Hop::Producer).is_some_and(|pp| (pp.start - p.start).abs() <= 1.0), "{id}: {t:?}");
    }
    // A request the router failed at decode, which no instance logged.
    let t = c.get("lab-router-only-0").expect("router-only trace");
    assert_eq!((t.outcome, t.error_at), (Outcome::Error, Some(Hop::Consumer)), "{t:?}");
    assert!(t.evidence().contains("503"), "{t:?}");
    let p = t.phase(Hop::Proxy).unwrap();
    assert!((p.end.unwrap() - p.start - 1.204518337).abs() < 1e-6, "{p:?}");
    // Named by the id vLLM knows, never by the router's own.
    assert!(c.get("cmpl-h7GtY3kNq0ZsWb5VxJm2LcRe").is_none());
    let kinds: Vec<&str> = state.events.iter().map(|e| e.kind.name()).collect();
    assert!(kinds.contains(&"router_backend_error") && kinds.contains(&"router_request_failed"), "{kinds:?}");
}
