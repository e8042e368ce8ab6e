//! The correlator against `demo-proxy-qwen3`: vLLM 0.26 behind vLLM's own
//! `disagg_proxy_demo.py`, which forwards no request id, hides failures
//! behind `200 OK`, and drops a prefill instance after one error. The logs
//! are fed as a live tail would read them (each file in its own order,
//! merged in time, `on_tick` every second); the truth is the client's
//! `requests.jsonl` (`resp_id`: the decode instance's id as the client saw
//! it) and the phase table of the capture's README.

use crate::common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use pdtop::feed::LogOrigin;
use pdtop::logs::vllm::parse_vllm_line;
use pdtop::traces::{Correlator, CorrelatorOptions, Hop, Outcome, Trace, anchor};

const DIR: &str = "demo-proxy-qwen3";

fn capture(name: &str) -> String {
    let p =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lab-captures").join(DIR).join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

struct Req {
    id: String,
    phase: String,
    mode: String,
    resp_id: Option<String>,
    cached: u64,
    cancelled: bool,
    t_start: f64,
    /// First byte, or the end for a request that got none.
    answered: f64,
}

fn requests() -> Vec<Req> {
    capture("requests.jsonl")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| {
            let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
            let t_start = v["t_start"].as_f64().unwrap_or(0.0);
            Req {
                id: s("id"),
                phase: s("phase"),
                mode: s("mode"),
                resp_id: v["resp_id"].as_str().map(str::to_owned),
                cached: v["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap_or(0),
                cancelled: v["cancelled"].as_bool().unwrap_or(false),
                t_start,
                answered: match v["ttft_ms"].as_f64() {
                    Some(ms) => t_start + ms / 1000.0,
                    None => v["t_end"].as_f64().unwrap_or(t_start),
                },
            }
        })
        .collect()
}

/// What the capture's README says each request was.
fn truth(r: &Req) -> Outcome {
    match r.phase.as_str() {
        "warmup" | "baseline" => Outcome::NoPrefill,
        "refused" | "engine_dies" | "prefill_down" => Outcome::Error,
        _ if r.cancelled => Outcome::Cancelled,
        _ if r.cached > 0 => Outcome::Loaded,
        _ => Outcome::SilentMiss,
    }
}

type Lines = Vec<(f64, String)>;

/// An instance's lines at their own stamps. A line without one (uvicorn's
/// access line) takes the next stamped line's second: it was written
/// before that line and after the previous one, and a live tail reads it
/// when it is written, not at the previous stamp.
fn instance_lines(text: &str, hint: f64) -> Lines {
    let stamps: Vec<Option<f64>> = text
        .lines()
        .map(|l| parse_vllm_line(l).and_then(|p| p.timestamp).and_then(|s| anchor(s, hint, None)))
        .collect();
    let mut out = Vec::new();
    let mut next = None;
    let mut times = vec![0.0; stamps.len()];
    for (k, s) in stamps.iter().enumerate().rev() {
        if s.is_some() {
            next = *s;
        }
        times[k] = next.unwrap_or(f64::NAN);
    }
    let mut last = hint;
    for (k, l) in text.lines().enumerate() {
        let t = if times[k].is_finite() { times[k].max(last) } else { last };
        last = t;
        out.push((t, l.to_string()));
    }
    out
}

/// The demo proxy prints no clock. Its n-th `POST` access line is the n-th
/// proxied request's response start (the client's first byte, or its end
/// when nothing came); its error lines come just before that access line.
fn proxy_lines() -> Lines {
    let mut times: Vec<f64> =
        requests().iter().filter(|r| r.mode == "proxy" || r.mode == "chat").map(|r| r.answered).collect();
    times.sort_by(f64::total_cmp);
    let text = capture("proxy.log");
    let lines: Vec<&str> = text.lines().collect();
    let first = requests().iter().map(|r| r.t_start).fold(f64::MAX, f64::min) - 10.0;
    let mut out = vec![(first, String::new()); lines.len()];
    let mut it = times.into_iter();
    let mut pending: Vec<usize> = Vec::new();
    for (k, l) in lines.iter().enumerate() {
        if l.contains("\"POST ") {
            let t = it.next().unwrap_or(first);
            for p in std::mem::take(&mut pending) {
                out[p] = (t - 0.001, lines[p].to_string());
            }
            out[k] = (t, l.to_string());
        } else if l.contains("\"GET ") || l.starts_with("INFO:     ") {
            out[k] = (first, l.to_string());
        } else {
            pending.push(k);
        }
    }
    for p in pending {
        out[p] = (first, lines[p].to_string());
    }
    out
}

fn start_hint() -> f64 {
    let first = capture("events.jsonl").lines().next().map(str::to_owned).unwrap_or_default();
    serde_json::from_str::<serde_json::Value>(&first).ok().and_then(|v| v["t"].as_f64()).expect("events t")
}

fn feeds() -> Vec<(LogOrigin, Lines)> {
    let hint = start_hint();
    vec![
        (LogOrigin::Prefill(0), instance_lines(&capture("vllm-prefill.log"), hint)),
        (LogOrigin::Decode(0), instance_lines(&capture("vllm-decode.log"), hint)),
        (LogOrigin::Proxy, proxy_lines()),
    ]
}

/// The decode instance's prompt length per request id, from the spans it
/// exported (`gen_ai.usage.prompt_tokens`), at the time each arrived.
fn decode_prompt_lengths() -> Vec<(f64, String, u32)> {
    capture("spans.jsonl")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["service"] == "vllm-decode" && v["name"] == "llm_request")
        .filter_map(|v| {
            let a = &v["attributes"];
            let n = a["gen_ai.usage.prompt_tokens"].as_u64().and_then(|n| u32::try_from(n).ok())?;
            Some((v["received"].as_f64()?, a["gen_ai.request.id"].as_str()?.to_string(), n))
        })
        .collect()
}

/// Merges the feeds in time order, ticks every second, finishes at the end.
/// `lengths`: prompt lengths to report as they arrive.
fn run(feeds: Vec<(LogOrigin, Lines)>, lengths: &[(f64, String, u32)]) -> Correlator {
    let mut c = Correlator::new(CorrelatorOptions::default());
    c.set_instance_addr(LogOrigin::Prefill(0), "127.0.0.1:8100");
    c.set_instance_addr(LogOrigin::Decode(0), "127.0.0.1:8200");
    let mut pos = vec![0usize; feeds.len()];
    let mut next_len = 0;
    let mut tick: Option<f64> = None;
    loop {
        let next = (0..feeds.len())
            .filter(|k| pos[*k] < feeds[*k].1.len())
            .min_by(|a, b| feeds[*a].1[pos[*a]].0.total_cmp(&feeds[*b].1[pos[*b]].0));
        let Some(k) = next else { break };
        let (at, line) = &feeds[k].1[pos[k]];
        while next_len < lengths.len() && lengths[next_len].0 <= *at {
            let (t, id, n) = &lengths[next_len];
            c.on_prompt_tokens(LogOrigin::Decode(0), id, *n, *t);
            next_len += 1;
        }
        let mut t = tick.unwrap_or(at.floor());
        while t + 1.0 <= *at {
            t += 1.0;
            c.on_tick(t);
        }
        tick = Some(t);
        c.on_line(feeds[k].0, line, *at);
        pos[k] += 1;
    }
    for (t, id, n) in &lengths[next_len..] {
        c.on_prompt_tokens(LogOrigin::Decode(0), id, *n, *t);
    }
    let end = tick.unwrap_or(0.0);
    for s in 1..=10 {
        c.on_tick(end + f64::from(s));
    }
    c.finish(end + 10.0);
    c
}

fn tally(c: &Correlator) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for t in c.traces() {
        *m.entry(format!("{:?}", t.outcome)).or_default() += 1;
    }
    m
}

fn show(t: &Trace) -> String {
    format!("{} {:?} {:?} {:?}: {}", t.id, t.outcome, t.confidence, t.error_at, t.evidence())
}

/// Checks every request the client made that got an id against its trace,
/// and the id-less failures by where pdtop says they failed.
fn check(c: &Correlator, named_misses: bool) {
    let reqs = requests();
    for r in &reqs {
        let Some(rid) = &r.resp_id else { continue };
        let t = c.get(rid).unwrap_or_else(|| panic!("{}: no trace for {rid}", r.id));
        let want = truth(r);
        if named_misses || !matches!(want, Outcome::SilentMiss | Outcome::Loaded) {
            assert_eq!(t.outcome, want, "{} ({}): {}", r.id, r.phase, show(t));
        }
        // Never a loaded request called a miss, whatever the evidence.
        if want == Outcome::Loaded {
            assert_ne!(t.outcome, Outcome::SilentMiss, "{}: {}", r.id, show(t));
        }
        // Nor a miss called loaded: a hit that may be the request
        // scheduled with it leaves both unknown.
        if want == Outcome::SilentMiss {
            assert_ne!(t.outcome, Outcome::Loaded, "{}: {}", r.id, show(t));
        }
        assert_eq!(&t.id, rid, "named by the id the client saw");
        if r.mode == "proxy" || r.mode == "chat" {
            assert_eq!(t.decode, Some(0), "{}", r.id);
        }
    }
    let errors: Vec<&Trace> = c.traces().filter(|t| t.outcome == Outcome::Error).collect();
    let at = |h: Hop| errors.iter().filter(|t| t.error_at == Some(h)).count();
    assert_eq!(errors.len(), 9, "{:#?}", errors.iter().map(|t| show(t)).collect::<Vec<_>>());
    // refused (decode answered 400 to the full request) + engine_dies.
    assert_eq!(at(Hop::Consumer), 6, "{:#?}", errors.iter().map(|t| show(t)).collect::<Vec<_>>());
    // prefill_down: one refused connection, then two the proxy failed
    // itself because it had dropped its only prefill instance.
    assert_eq!(at(Hop::Producer), 3, "{:#?}", errors.iter().map(|t| show(t)).collect::<Vec<_>>());
    let n = c.counts();
    assert_eq!((n.cancelled, n.no_prefill, n.error, n.pending), (2, 6, 9, 0), "{n:?}");
    for t in c.traces() {
        assert!(t.outcome != Outcome::SilentMiss || !t.evidence().is_empty());
    }
}

#[test]
fn demo_proxy_with_prompt_lengths_names_every_miss() {
    let c = run(feeds(), &decode_prompt_lengths());
    for t in c.traces() {
        eprintln!("{}", show(t));
    }
    eprintln!("{:?}", tally(&c));
    check(&c, true);
    let mut want: Vec<String> = requests()
        .iter()
        .filter(|r| truth(r) == Outcome::SilentMiss)
        .filter_map(|r| r.resp_id.clone())
        .collect();
    want.sort();
    let mut got = c.silent_miss_ids();
    got.sort();
    assert_eq!(got, want);
    let n = c.counts();
    assert_eq!((n.loaded, n.silent_miss, n.unknown, n.unattributed_misses), (27, 8, 0, 0), "{n:?}");
}

#[test]
fn demo_proxy_from_logs_alone() {
    let c = run(feeds(), &[]);
    for t in c.traces() {
        eprintln!("{}", show(t));
    }
    eprintln!("{:?}", tally(&c));
    check(&c, false);
    let n = c.counts();
    // Each of the 8 misses shared its scheduling step with a request that
    // loaded: one hit for two requests, and nothing in the log says whose.
    // Counted, not named: a guess never becomes a miss, nor a loaded
    // request, so both of each pair are unknown.
    assert_eq!((n.silent_miss, n.unattributed_misses, n.unknown), (0, 8, 16), "{n:?}");
    assert_eq!(n.loaded, 27 - 8, "{n:?}");
}

/// The same capture folded headless through the whole state (scrapes once
/// a second, log lines every half second, as a live pdtop reads them), and
/// reported as `check --json` would: every trace in `traces`, the errors
/// at their hops, and the metrics counting the misses the logs can only
/// count.
#[test]
fn demo_proxy_check_report() {
    let mut cap = common::capture(DIR).clone();
    // Logs and metrics alone; with the recorded spans see
    // `the_recorded_spans_name_every_miss` below.
    let spans = std::mem::take(&mut cap.spans);
    let secs = cap.t_end - cap.t0 + 1.0;
    let mut st = pdtop::lab::replay::state_at(&cap, secs, true);
    st.finish(cap.t_end + 30.0);
    let logs_only = st;
    cap.spans = spans;
    let mut with_spans = pdtop::lab::replay::state_at(&cap, secs, true);
    with_spans.finish(cap.t_end + 30.0);
    the_recorded_spans_name_every_miss(&with_spans);
    let st = logs_only;
    let r = serde_json::to_value(pdtop::report::Report::from_state(&st)).expect("json");
    let q = &r["requests"];
    eprintln!("{q}\nmetrics {}\n{}", r["requests_metrics"], r["disagreement"]);
    let traces = r["traces"].as_array().expect("traces");
    assert_eq!(traces.len() as u64, q["seen"].as_u64().unwrap());
    let by = |o: &str| traces.iter().filter(|t| t["outcome"] == o).count() as u64;
    for o in ["loaded", "silent_miss", "no_prefill", "error", "cancelled", "unknown", "pending"] {
        assert_eq!(by(o), q[o].as_u64().unwrap(), "{o}");
    }
    assert_eq!(
        (q["error"].as_u64(), q["cancelled"].as_u64(), q["no_prefill"].as_u64()),
        (Some(9), Some(2), Some(6)),
        "{q}"
    );
    let at = |h: &str| traces.iter().filter(|t| t["outcome"] == "error" && t["error_at"] == h).count();
    assert_eq!((at("decode"), at("prefill")), (6, 3));
    // Named by what the client saw, served by the endpoint it came from.
    for req in requests().iter().filter(|r| r.resp_id.is_some()) {
        let id = req.resp_id.as_deref().unwrap();
        let t = traces.iter().find(|t| t["id"] == id).unwrap_or_else(|| panic!("no trace {id}"));
        if req.mode != "decode_only" {
            assert_eq!(t["decode"], "127.0.0.1:8200", "{t}");
        }
        let ids: Vec<&str> =
            t["vllm_ids"].as_array().unwrap().iter().filter_map(|v| v["id"].as_str()).collect();
        assert!(ids.iter().any(|v| v.starts_with(id)), "{t}");
        assert_ne!((truth(req), t["outcome"].as_str()), (Outcome::Loaded, Some("silent_miss")), "{t}");
    }
    // Logs alone count the 8 misses without naming them; the metrics see 8.
    assert_eq!(r["unattributed_misses"].as_u64().unwrap() + q["silent_miss"].as_u64().unwrap(), 8, "{q}");
    assert_eq!(r["requests_metrics"]["silent_miss"], 8, "{}", r["requests_metrics"]);
    assert!(r["disagreement"].is_null(), "{}", r["disagreement"]);
    assert_eq!(r["verdict"], "silent_misses");
    // What stays unknown, and why: the 8 pairs of requests that shared a
    // scheduling step and its one hit.
    let why = r["unknown_reasons"].as_array().expect("unknown_reasons");
    assert_eq!(why.len(), 1, "{why:?}");
    assert_eq!(why[0]["count"], 16);
    assert!(
        why[0]["reason"].as_str().unwrap().contains("requests scheduled together did not load KV"),
        "{why:?}"
    );
}

/// Every capture folded headless into the state and its report: the counts
/// pdtop gives against each capture's truth (printed for the record).
#[test]
fn counts_on_every_capture() {
    for (name, loaded, miss, no_prefill, error, cancelled) in [
        ("qwen3-shape-restart", 60, 8, 8, 0, 0),
        ("nixl-llama-shape", 52, 4, 8, 0, 0),
        ("demo-proxy-qwen3", 27, 8, 6, 9, 2),
    ] {
        let cap = common::capture(name);
        let mut st = pdtop::lab::replay::state_at(cap, cap.t_end - cap.t0 + 1.0, true);
        st.finish(cap.t_end + 30.0);
        let r = serde_json::to_value(pdtop::report::Report::from_state(&st)).expect("json");
        let q = &r["requests"];
        let u = r["unattributed_misses"].as_u64().unwrap();
        eprintln!("{name}: {q} unattributed {u}; metrics {}", r["requests_metrics"]);
        let n = |k: &str| q[k].as_u64().unwrap();
        assert!(n("loaded").abs_diff(loaded) <= 1, "{name}: {q}");
        assert_eq!(n("silent_miss") + u, miss, "{name}: {q}");
        assert_eq!(
            (n("no_prefill"), n("error"), n("cancelled"), n("pending")),
            (no_prefill, error, cancelled, 0),
            "{name}: {q}"
        );
    }
}

/// With the capture's own spans (its `otlp.bin`), the decode spans' prompt
/// lengths settle every shared scheduling step: the 8 misses are named by
/// the ids their clients got, and nothing stays unknown.
fn the_recorded_spans_name_every_miss(st: &pdtop::state::AppState) {
    let r = pdtop::report::Report::from_state(st);
    let mut named = r.silent_miss_ids.clone();
    named.sort();
    let truth = common::demo_proxy_misses();
    assert_eq!(truth.len(), 8);
    assert_eq!(named, truth);
    let q = &r.requests;
    assert_eq!((q.loaded, q.silent_miss, q.no_prefill, q.error, q.cancelled, q.unknown), (27, 8, 6, 9, 2, 0));
}
