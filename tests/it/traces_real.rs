//! The trace correlator against the recorded vLLM 0.26 captures in
//! `shared/lab-captures/`, fed as a live tail would see them: the prefill,
//! decode (then decode-after-restart) and proxy logs interleaved in time
//! order, each line read at its own timestamp (or the previous line's),
//! `on_tick` every simulated second, `finish` at the end. The truth is each
//! capture's `requests.jsonl` and the phase tables of its README.

use crate::common;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use pdtop::feed::LogOrigin;
use pdtop::logs::vllm::{VllmEvent, parse_vllm_line};
use pdtop::traces::{Confidence, Correlator, CorrelatorOptions, Counts, Hop, Join, Outcome, anchor, base_id};
use proptest::prelude::*;

fn capture(rel: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lab-captures").join(rel);
    std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("read {}: {e} (shared/ must sit beside the checkout)", p.display()))
}

struct Req {
    id: String,
    phase: String,
    mode: String,
    cached: u64,
    /// When the client got its first byte: the demo proxy's access line time.
    first_byte: f64,
}

fn requests(dir: &str) -> Vec<Req> {
    capture(&format!("{dir}/requests.jsonl"))
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| {
            let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
            Req {
                id: s("id"),
                phase: s("phase"),
                mode: s("mode"),
                cached: v["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap_or(0),
                first_byte: v["t_start"].as_f64().unwrap_or(0.0)
                    + v["ttft_ms"].as_f64().unwrap_or(0.0) / 1000.0,
            }
        })
        .collect()
}

/// The lab's start, to anchor vLLM's year-less stamps.
fn start_hint(dir: &str) -> f64 {
    capture(&format!("{dir}/events.jsonl"))
        .lines()
        .next()
        .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .and_then(|v| v["t"].as_f64())
        .expect("events.jsonl has a first t")
}

type Lines = Vec<(f64, String)>;

/// Lines of one instance (several files appended, as a restarted process
/// writing to the same log), each at its own stamp or the previous line's.
fn instance_lines(texts: &[String], hint: f64) -> Lines {
    let mut out = Vec::new();
    let mut last = hint;
    for text in texts {
        for l in text.lines() {
            if let Some(t) = parse_vllm_line(l).and_then(|p| p.timestamp).and_then(|s| anchor(s, hint, None))
            {
                last = t;
            }
            out.push((last, l.to_string()));
        }
    }
    out
}

/// The demo proxy prints no clock at all. Its n-th `POST` access line is
/// the n-th proxied request's response start, so the harness borrows the
/// client's clock for it (first byte); the startup lines go first.
fn proxy_lines(dir: &str) -> Lines {
    let reqs = requests(dir);
    let mut times: Vec<f64> = reqs.iter().filter(|r| r.mode == "proxy").map(|r| r.first_byte).collect();
    times.sort_by(f64::total_cmp);
    let first = reqs.iter().map(|r| r.first_byte).fold(f64::MAX, f64::min) - 10.0;
    let mut it = times.into_iter();
    let mut last = first;
    capture(&format!("{dir}/proxy.log"))
        .lines()
        .map(|l| {
            if l.contains("\"POST ") {
                last = it.next().unwrap_or(last);
            }
            (last, l.to_string())
        })
        .collect()
}

/// Merges the sources in time order (each file keeps its own order, as a
/// tail reads it), ticks every whole second, finishes 10 s after the end.
fn run(feeds: Vec<(LogOrigin, Lines)>, opts: CorrelatorOptions) -> Correlator {
    let mut c = Correlator::new(opts);
    let mut pos = vec![0usize; feeds.len()];
    let mut tick: Option<f64> = None;
    loop {
        let next = (0..feeds.len())
            .filter(|k| pos[*k] < feeds[*k].1.len())
            .min_by(|a, b| feeds[*a].1[pos[*a]].0.total_cmp(&feeds[*b].1[pos[*b]].0));
        let Some(k) = next else { break };
        let (at, line) = &feeds[k].1[pos[k]];
        let mut t = tick.unwrap_or(at.floor());
        while t + 1.0 <= *at {
            t += 1.0;
            c.on_tick(t);
        }
        tick = Some(t);
        c.on_line(feeds[k].0, line, *at);
        pos[k] += 1;
    }
    let end = tick.unwrap_or(0.0);
    for s in 1..=10 {
        c.on_tick(end + f64::from(s));
    }
    c.finish(end + 10.0);
    c
}

fn full_feeds(dir: &str) -> Vec<(LogOrigin, Lines)> {
    let hint = start_hint(dir);
    let f = |name: &str| capture(&format!("{dir}/{name}"));
    vec![
        (LogOrigin::Prefill(0), instance_lines(&[f("vllm-prefill.log")], hint)),
        (LogOrigin::Decode(0), instance_lines(&[f("vllm-decode.log"), f("vllm-decode2.log")], hint)),
        (LogOrigin::Proxy, proxy_lines(dir)),
    ]
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// Every request of the capture: its trace exists and `cached_tokens > 0`
/// (what decode loaded, as the client saw it) ⇔ `Loaded`.
fn check_against_truth(c: &Correlator, dir: &str) {
    for r in requests(dir) {
        let t = c.get(&r.id).unwrap_or_else(|| panic!("{dir}: no trace for {}", r.id));
        assert_eq!(
            r.cached > 0,
            t.outcome == Outcome::Loaded,
            "{dir} {} ({}): cached {} but {:?}: {}",
            r.id,
            r.phase,
            r.cached,
            t.outcome,
            t.evidence()
        );
        assert_eq!(t.join, Join::ById, "{}", r.id);
    }
}

fn ids_of_phase(dir: &str, phase: &str) -> Vec<String> {
    sorted(requests(dir).into_iter().filter(|r| r.phase == phase).map(|r| r.id).collect())
}

#[test]
fn qwen3_example_connector() {
    let dir = "qwen3-shape-restart";
    let mut c = run(full_feeds(dir), CorrelatorOptions::default());
    let n = c.counts();
    assert_eq!(n.silent_miss, 8, "{n:?}");
    let mut want = ids_of_phase(dir, "edge_block");
    want.extend(ids_of_phase(dir, "mismatch"));
    assert_eq!(sorted(c.silent_miss_ids()), sorted(want.clone()));
    assert_eq!(sorted(c.drain_new_misses()), sorted(want));
    assert!(c.drain_new_misses().is_empty());
    assert_eq!(n.no_prefill, 8, "{n:?}");
    assert!(n.loaded.abs_diff(60) <= 1, "{n:?}");
    assert_eq!(n.pending, 0);
    assert_eq!(n.error, 0);
    assert_eq!(n.unattributed_misses, 0);
    for phase in ["steady", "after_restart"] {
        for id in ids_of_phase(dir, phase) {
            let t = c.get(&id).expect("trace");
            assert_eq!(t.outcome, Outcome::Loaded, "{id}: {}", t.evidence());
            assert_eq!(t.confidence, Confidence::Sure, "{id}: {}", t.evidence());
        }
    }
    check_against_truth(&c, dir);
    // The hit attribution also gives each request its own token count:
    // ExampleConnector injects (prompt - 1) aligned down to the block.
    for r in requests(dir).iter().filter(|r| r.cached > 0) {
        let t = c.get(&r.id).expect("trace");
        assert_eq!(t.inject_tokens, Some(r.cached as u32), "{}", r.id);
    }
    let miss = c.get("lab-edge_block-0").expect("trace");
    assert!(miss.evidence().contains("no External Cache Hit"), "{}", miss.evidence());
    assert_eq!(miss.confidence, Confidence::Sure);
    let ok = c.get("lab-disagg-1").expect("trace");
    assert!(ok.evidence().starts_with("Inject 2032 tokens after prefill on prefill#0"), "{}", ok.evidence());
    let st = c.stats();
    let decode = st.sources.iter().find(|s| s.source == LogOrigin::Decode(0)).expect("decode stats");
    assert_eq!(decode.starts, 2, "the restart is seen");
    assert_eq!(decode.connector.as_deref(), Some("ExampleConnector"));
    assert_eq!(st.orphan_hits, 0);
}

/// A ring far smaller than the run: the requests that dropped off it
/// still count under the outcome they had, so the totals are the same as
/// with every trace kept.
#[test]
fn a_small_ring_keeps_the_run_long_counts() {
    let dir = "qwen3-shape-restart";
    let all = run(full_feeds(dir), CorrelatorOptions::default()).counts();
    let small = run(full_feeds(dir), CorrelatorOptions { capacity: 12, ..CorrelatorOptions::default() });
    let n = small.counts();
    assert_eq!(small.traces().count(), 12);
    assert!(n.evicted >= 60, "{n:?}");
    assert_eq!(Counts { evicted: 0, ..n }, Counts { evicted: 0, ..all });
    assert_eq!(n.silent_miss, 8, "{n:?}");
}

/// Read after the fact, a miss is called once the decode's log has gone
/// 1.5 s past its `Added` line without a hit: by a later line of it, or,
/// idle, a second behind the reads (live, a likely call comes sooner).
#[test]
fn qwen3_misses_are_called_within_three_seconds() {
    let dir = "qwen3-shape-restart";
    let hint = start_hint(dir);
    let c = run(full_feeds(dir), CorrelatorOptions::default());
    let mut added: HashMap<String, f64> = HashMap::new();
    for l in capture(&format!("{dir}/vllm-decode.log")).lines() {
        if let Some(p) = parse_vllm_line(l)
            && let VllmEvent::Added { external_id, .. } = &p.event
            && let Some(t) = p.timestamp.and_then(|s| anchor(s, hint, None))
        {
            added.insert(base_id(external_id).to_string(), t);
        }
    }
    let ids = c.silent_miss_ids();
    assert_eq!(ids.len(), 8);
    for id in ids {
        let t = c.get(&id).expect("trace");
        let decided = t.decided_at.expect("decided");
        let lag = decided - added[&id];
        assert!((0.0..=3.0).contains(&lag), "{id}: decided {lag} s after Added");
    }
}

#[test]
fn nixl_params() {
    let dir = "nixl-llama-shape";
    let c = run(full_feeds(dir), CorrelatorOptions::default());
    let n = c.counts();
    assert_eq!(n.silent_miss, 4, "{n:?}");
    assert_eq!(sorted(c.silent_miss_ids()), ids_of_phase(dir, "noparams"));
    for id in ids_of_phase(dir, "edge_block") {
        let t = c.get(&id).expect("trace");
        assert_eq!(t.outcome, Outcome::Loaded, "{id}");
        assert!(t.remote_num_tokens.is_some_and(|n| n > 1024), "{id}");
    }
    assert_eq!(n.no_prefill, 8, "{n:?}");
    assert!(n.loaded.abs_diff(52) <= 1, "{n:?}");
    assert_eq!(n.pending, 0);
    check_against_truth(&c, dir);
    // The prefill's expiry line confirms each miss later on.
    for id in ids_of_phase(dir, "noparams") {
        let t = c.get(&id).expect("trace");
        assert!(t.evidence().starts_with("decode got no kv_transfer_params"), "{}", t.evidence());
        assert!(t.evidence().contains("released its KV unread"), "{id}: {}", t.evidence());
    }
    // The decode's one quiet line (06:40:27) came in the second steady-24
    // was added: its read may be among that window's 36 counts, which
    // then leave one of the 36 loads before it uncounted. The decode shut
    // down before another quiet point: no load is confirmed, and none is
    // less sure for it.
    for t in c.traces().filter(|t| t.outcome == Outcome::Loaded) {
        assert!(!t.evidence().contains("KV Transfer metrics"), "{}: {}", t.id, t.evidence());
        assert_eq!(t.confidence, Confidence::Sure, "{}: {}", t.id, t.evidence());
    }
}

/// The same capture with the prefill's request lines cut (request logging
/// off): only its `Releasing expired KV blocks` lines name the requests.
/// The decode requests they name were prefilled after all, and never read
/// that KV: misses, where without the expiry they were "no prefill".
#[test]
fn a_prefill_expiry_alone_names_the_miss() {
    let dir = "nixl-llama-shape";
    let mut feeds = full_feeds(dir);
    feeds[0].1.retain(|(_, l)| l.contains("Releasing expired KV blocks"));
    feeds.truncate(2);
    assert!(!feeds[0].1.is_empty());
    let c = run(feeds, CorrelatorOptions::default());
    for id in ids_of_phase(dir, "noparams") {
        let t = c.get(&id).expect("trace");
        assert_eq!(t.outcome, Outcome::SilentMiss, "{id}: {t:?}");
        assert_eq!(t.prefill, Some(0), "{id}: {t:?}");
        assert!(t.evidence().contains("released its KV unread"), "{id}: {}", t.evidence());
    }
}

#[test]
fn proxy_log_alone_never_says_miss() {
    for dir in ["qwen3-shape-restart", "nixl-llama-shape"] {
        let c = run(vec![(LogOrigin::Proxy, proxy_lines(dir))], CorrelatorOptions::default());
        let n = c.counts();
        assert_eq!(n.silent_miss, 0, "{dir}: {n:?}");
        assert_eq!(n.loaded + n.no_prefill + n.error + n.pending, 0, "{dir}: {n:?}");
        assert_eq!(n.unknown, n.seen, "{dir}");
        assert!(n.seen > 0);
    }
}

/// vLLM's own random id for `base` on one instance (`instance` 0: prefill, 1: decode).
fn random_id(instance: u64, base: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ instance;
    for b in base.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}{:016x}", h.rotate_left(17) ^ 0x9e37_79b9_7f4a_7c15)
}

/// What the demo proxy leaves: no `X-Request-Id`, so each instance invents
/// its own id. NIXL's `remote_request_id` still names the prefill's id.
fn strip_ids(lines: Lines, instance: u64, bases: &[String]) -> Lines {
    lines
        .into_iter()
        .map(|(at, mut l)| {
            const RID: &str = "'remote_request_id': '";
            for b in bases {
                let from = format!("cmpl-{b}-0");
                if instance == 1
                    && let Some(i) = l.find(RID)
                {
                    let (head, tail) = l.split_at(i + RID.len());
                    if tail.starts_with(&from) {
                        l = format!(
                            "{head}{}",
                            tail.replacen(&from, &format!("cmpl-{}-0", random_id(0, b)), 1)
                        );
                    }
                }
                if l.contains(&from) {
                    l = l.replace(&from, &format!("cmpl-{}-0", random_id(instance, b)));
                }
            }
            (at, l)
        })
        .collect()
}

#[test]
fn without_shared_ids_no_miss_comes_from_a_guess() {
    for dir in ["qwen3-shape-restart", "nixl-llama-shape"] {
        let mut bases: Vec<String> = requests(dir).into_iter().map(|r| r.id).collect();
        // Longest first, so `lab-steady-1` never eats into `lab-steady-10`.
        bases.sort_by_key(|b| std::cmp::Reverse(b.len()));
        let feeds: Vec<(LogOrigin, Lines)> = full_feeds(dir)
            .into_iter()
            .map(|(src, lines)| match src {
                LogOrigin::Prefill(_) => (src, strip_ids(lines, 0, &bases)),
                LogOrigin::Decode(_) => (src, strip_ids(lines, 1, &bases)),
                LogOrigin::Proxy => (src, lines),
            })
            .collect();
        let joined = feeds[1].1.iter().any(|(_, l)| l.contains("cmpl-lab-"));
        assert!(!joined, "{dir}: every lab id was rewritten");
        let c = run(feeds, CorrelatorOptions::default());
        let n = c.counts();
        for t in c.traces() {
            if t.join == Join::ByOrder {
                assert_ne!(t.outcome, Outcome::SilentMiss, "{}", t.id);
                // Likely where no client reached the prefill directly
                // within the order window: the proxy's flow vouches there.
                assert_ne!(t.confidence, Confidence::Sure, "{}", t.id);
            }
        }
        assert_eq!(n.silent_miss, 0, "{dir}: {n:?}");
        // Without shared ids, absence proves something only where the
        // proxy's flow vouches: a request with no proxy line, no prefill
        // copy and no client at the prefill directly near it (the lab's
        // handshakes are such clients). Only the lab's decode-only
        // requests may be called so, never a proxied one.
        let decode_only = requests(dir).iter().filter(|r| r.mode == "decode_only").count();
        assert!(n.no_prefill <= decode_only as u64, "{dir}: {n:?}");
        for t in c.traces().filter(|t| t.outcome == Outcome::NoPrefill) {
            assert_ne!(t.confidence, Confidence::Sure, "{}", t.id);
        }
        assert!(c.traces().any(|t| t.join == Join::ByOrder), "{dir}");
        let mut by: BTreeMap<String, usize> = BTreeMap::new();
        for t in c.traces() {
            *by.entry(format!("{:?}/{:?}", t.outcome, t.join)).or_default() += 1;
        }
        eprintln!("{dir}: {by:?}");
    }
}

#[test]
fn ring_stays_at_its_cap() {
    let mut c = Correlator::new(CorrelatorOptions::default());
    let mut at = 1_800_000_000.0;
    for n in 0..12_000u32 {
        let id = format!("syn-{n}");
        let lines = [
            (
                LogOrigin::Prefill(0),
                format!("Received request cmpl-{id}-0: params: SamplingParams(max_tokens=1)"),
            ),
            (LogOrigin::Prefill(0), format!("Added request cmpl-{id}-0-0123abcd.")),
            (
                LogOrigin::Prefill(0),
                "INFO:     127.0.0.1:1 - \"POST /v1/completions HTTP/1.1\" 200 OK".to_string(),
            ),
            (
                LogOrigin::Decode(0),
                format!("Received request cmpl-{id}-0: params: SamplingParams(max_tokens=64)"),
            ),
            (LogOrigin::Decode(0), format!("Added request cmpl-{id}-0-89abcdef.")),
            (LogOrigin::Decode(0), "External Cache Hit!".to_string()),
            (LogOrigin::Decode(0), "Inject KV cache of 96 tokens to the paged memory".to_string()),
        ];
        for (src, l) in lines {
            c.on_line(src, &l, at);
        }
        // Every tenth request misses (no hit, no inject), then a lull: with
        // requests overlapping, a miss cannot be told from its neighbours.
        if n % 10 == 0 {
            let id = format!("syn-miss-{n}");
            c.on_line(
                LogOrigin::Prefill(0),
                &format!("Received request cmpl-{id}-0: params: SamplingParams(max_tokens=1)"),
                at,
            );
            c.on_line(
                LogOrigin::Decode(0),
                &format!("Received request cmpl-{id}-0: params: SamplingParams(max_tokens=64)"),
                at,
            );
            c.on_line(LogOrigin::Decode(0), &format!("Added request cmpl-{id}-0-89abcdef."), at);
            // The lull: the decode's log, idle, is taken a second behind.
            at += 3.0;
            c.on_tick(at);
        }
        at += 0.25;
        c.on_tick(at);
    }
    c.finish(at + 60.0);
    let n = c.counts();
    let kept = pdtop::traces::KEPT_REQUESTS;
    assert_eq!(c.traces().count(), kept);
    // Those dropped off the ring still count, under their outcome.
    assert_eq!(n.seen, 13_200);
    assert_eq!(n.evicted, 13_200 - kept as u64);
    assert_eq!(n.pending, 0);
    let st = c.stats();
    assert!(st.open <= 10, "{st:?}");
    assert!(st.queued <= 3 * 4096, "{st:?}");
    assert!(st.index_entries <= 3 * kept, "{}", st.index_entries);
    assert_eq!(c.drain_new_misses().len(), 1024, "the alert queue is capped too");
    assert_eq!(n.silent_miss, 1_200, "one in 11 of all 13,200: {n:?}");
    assert_eq!(n.unattributed_misses, 0, "{n:?}");
    assert!(c.traces().next_back().is_some_and(|t| t.id == "syn-11999"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_lines_never_panic(
        input in proptest::collection::vec(
            (0u8..5, prop_oneof![
                any::<String>(),
                "(Received request |Added request |External Cache Hit!|Inject KV cache of |Releasing expired KV blocks for request |Aborted request\\(s\\) |INFO:     1:2 - \"POST /v1/x HTTP/1.1\" |\\{\"ts\": )[ -~]{0,60}",
                "\\(APIServer pid=[0-9]{1,3}\\) (INFO|ERROR) (1[0-3]|0[0-9])-[0-3][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} \\[a\\] (Received request cmpl-[a-z0-9-]{0,12}: params: SamplingParams\\(max_tokens=[0-9]{1,3}|Added request cmpl-[a-z0-9-]{0,20}|Engine core proc x died)[ -~]{0,30}",
            ], prop_oneof![any::<f64>(), 0.0f64..2e9]),
            0..40,
        )
    ) {
        let mut c = Correlator::new(CorrelatorOptions { capacity: 8, max_pending: 4, ..CorrelatorOptions::default() });
        for (k, line, at) in &input {
            let src = match k {
                0 => LogOrigin::Prefill(0),
                1 => LogOrigin::Prefill(1),
                2 => LogOrigin::Decode(0),
                3 => LogOrigin::Decode(1),
                _ => LogOrigin::Proxy,
            };
            c.on_line(src, line, *at);
            c.on_tick(*at);
        }
        c.finish(f64::NAN);
        let n = c.counts();
        prop_assert!(n.seen - n.evicted <= 8);
        let _ = (c.silent_miss_ids(), c.drain_new_misses(), c.stats());
    }
}

/// Two prefilled requests added in the same instant, one hit: FIFO gives
/// it to the older, but the younger may be its owner. Neither is called a
/// miss nor loaded; the miss is counted, unattributed.
#[test]
fn concurrent_miss_is_never_pinned_on_a_loaded_request() {
    let mut c = Correlator::new(CorrelatorOptions::default());
    let at = 1_800_000_000.0;
    c.on_line(
        LogOrigin::Decode(0),
        "KVTransferConfig(kv_connector='ExampleConnector', kv_role='kv_consumer')",
        at,
    );
    for id in ["a", "b"] {
        c.on_line(
            LogOrigin::Prefill(0),
            &format!("Received request cmpl-{id}-0: params: SamplingParams(max_tokens=1)"),
            at,
        );
    }
    for id in ["a", "b"] {
        c.on_line(
            LogOrigin::Decode(0),
            &format!("Received request cmpl-{id}-0: params: SamplingParams(max_tokens=9)"),
            at,
        );
        c.on_line(LogOrigin::Decode(0), &format!("Added request cmpl-{id}-0-00000000."), at);
    }
    c.on_line(LogOrigin::Decode(0), "External Cache Hit!", at);
    c.on_line(LogOrigin::Decode(0), "Inject KV cache of 32 tokens to the paged memory", at);
    c.on_tick(at + 1.0);
    assert_eq!(c.get("a").map(|t| (t.outcome, t.confidence)), Some((Outcome::Loaded, Confidence::Likely)));
    assert_eq!(c.get("b").map(|t| t.outcome), Some(Outcome::Pending));
    // The decode's log says nothing more: its clock, a second behind the
    // reads, passes b's 1.5 s wait at 2.5.
    c.on_tick(at + 3.0);
    let n = c.counts();
    // The hit may be b's (a scheduled a step earlier and missed): neither
    // is named, neither is called loaded.
    assert_eq!((n.silent_miss, n.loaded, n.unknown, n.unattributed_misses), (0, 0, 2, 1), "{n:?}");
    for id in ["a", "b"] {
        let t = c.get(id).expect("trace");
        assert!(t.evidence().contains("did not load KV, and the logs cannot say which"), "{}", t.evidence());
    }
    assert!(c.drain_new_misses().is_empty());
    // The same pair one at a time is sure: b alone, with no hit, missed.
    c.on_line(
        LogOrigin::Prefill(0),
        "Received request cmpl-c-0: params: SamplingParams(max_tokens=1)",
        at + 10.0,
    );
    c.on_line(
        LogOrigin::Decode(0),
        "Received request cmpl-c-0: params: SamplingParams(max_tokens=9)",
        at + 10.0,
    );
    c.on_line(LogOrigin::Decode(0), "Added request cmpl-c-0-00000000.", at + 10.0);
    c.on_tick(at + 11.0);
    assert_eq!(c.get("c").map(|t| t.outcome), Some(Outcome::Pending));
    // Sure once its log's clock (idle: a second behind the reads) passed
    // the 1.5 s too.
    c.on_tick(at + 11.5);
    assert_eq!(c.get("c").map(|t| t.outcome), Some(Outcome::Pending));
    c.on_tick(at + 12.5);
    assert_eq!(c.get("c").map(|t| (t.outcome, t.confidence)), Some((Outcome::SilentMiss, Confidence::Sure)));
    assert_eq!(c.drain_new_misses(), vec!["c".to_string()]);
}

/// Errors name the hop; an engine death is kept for the UI.
#[test]
fn errors_and_deaths() {
    let mut c = Correlator::new(CorrelatorOptions::default());
    let at = 1_800_000_000.0;
    c.on_line(LogOrigin::Prefill(0), "Received request cmpl-e1-0: params: SamplingParams(max_tokens=1)", at);
    c.on_line(
        LogOrigin::Prefill(0),
        "INFO:     127.0.0.1:1 - \"POST /v1/completions HTTP/1.1\" 500 Internal Server Error",
        at,
    );
    c.on_line(LogOrigin::Prefill(0), "Received request cmpl-e2-0: params: SamplingParams(max_tokens=1)", at);
    c.on_line(LogOrigin::Decode(0), "Received request cmpl-e2-0: params: SamplingParams(max_tokens=9)", at);
    c.on_line(LogOrigin::Decode(0), "ERROR 11-30 06:25:31 [core_client.py:564] Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.", at);
    c.on_line(LogOrigin::Proxy, "Error occurred in disagg proxy server", at);
    c.on_line(LogOrigin::Proxy, "ERROR:root:Request failed with status 500: boom", at);
    c.on_line(
        LogOrigin::Proxy,
        r#"{"ts": 1800000001.0, "request_id": "e3", "event": "decode_start", "instance": "127.0.0.1:8200"}"#,
        at,
    );
    c.on_line(LogOrigin::Proxy, r#"{"ts": 1800000001.5, "request_id": "e3", "event": "error", "status": 502, "error": "decode unreachable"}"#, at);
    let e1 = c.get("e1").expect("e1");
    assert_eq!(e1.outcome, Outcome::Error);
    assert!(e1.evidence().starts_with("prefill on prefill#0: answered HTTP 500"), "{}", e1.evidence());
    let e2 = c.get("e2").expect("e2");
    assert_eq!(e2.outcome, Outcome::Error);
    assert!(e2.evidence().starts_with("decode on decode#0: engine died"), "{}", e2.evidence());
    let e3 = c.get("e3").expect("e3");
    assert_eq!(e3.outcome, Outcome::Error);
    assert!(
        e3.evidence().starts_with("decode failed (reported by the proxy): HTTP 502: decode unreachable"),
        "{}",
        e3.evidence()
    );
    let st = c.stats();
    let d = st.sources.iter().find(|s| s.source == LogOrigin::Decode(0)).expect("decode");
    assert_eq!(d.deaths, 1);
    assert!(d.last_death.as_ref().is_some_and(|x| x.text.contains("died unexpectedly")));
    // The proxy's two lines about one failure make one synthetic trace.
    let proxy_errors = c.traces().filter(|t| t.id.starts_with("proxy-error")).count();
    assert_eq!(proxy_errors, 1);
    c.finish(at + 100.0);
    assert_eq!(c.counts().silent_miss, 0);
}

/// A looping lab reuses ids: a new `Received` after a verdict is a new trace.
#[test]
fn reused_ids_start_new_traces() {
    let mut c = Correlator::new(CorrelatorOptions::default());
    let mut at = 1_800_000_000.0;
    c.on_line(LogOrigin::Decode(0), "KVTransferConfig(kv_connector='ExampleConnector')", at);
    for round in 0..2 {
        c.on_line(
            LogOrigin::Prefill(0),
            "Received request cmpl-loop-0: params: SamplingParams(max_tokens=1)",
            at,
        );
        c.on_line(
            LogOrigin::Decode(0),
            "Received request cmpl-loop-0: params: SamplingParams(max_tokens=9)",
            at,
        );
        c.on_line(LogOrigin::Decode(0), "Added request cmpl-loop-0-0000000a.", at);
        if round == 0 {
            c.on_line(LogOrigin::Decode(0), "External Cache Hit!", at);
        }
        at += 5.0;
        c.on_tick(at);
    }
    let v: Vec<_> = c.traces().map(|t| (t.id.as_str(), t.outcome)).collect();
    assert_eq!(v, vec![("loop", Outcome::Loaded), ("loop", Outcome::SilentMiss)]);
    assert_eq!(c.get("loop").map(|t| t.outcome), Some(Outcome::SilentMiss));
}

/// The qwen3 capture's decode, as if SIGKILLed instead of stopped: its log
/// cut before the `[shutdown]` lines (at line 626, after its last stats
/// line), then the restarted process's own log. Spliced from the
/// capture's real lines.
fn decode_killed_feeds(dir: &str) -> Vec<(LogOrigin, Lines)> {
    let hint = start_hint(dir);
    let f = |name: &str| capture(&format!("{dir}/{name}"));
    let cut: String = f("vllm-decode.log").lines().take(626).map(|l| format!("{l}\n")).collect();
    vec![
        (LogOrigin::Prefill(0), instance_lines(&[f("vllm-prefill.log")], hint)),
        (LogOrigin::Decode(0), instance_lines(&[cut, f("vllm-decode2.log")], hint)),
        (LogOrigin::Proxy, proxy_lines(dir)),
    ]
}

/// A stream cut off by its instance's death is an error there, never
/// loaded; what the instance had finished before is untouched.
#[test]
fn a_kill_with_a_stream_in_flight_is_an_error_at_that_instance() {
    let dir = "qwen3-shape-restart";
    let c = run(decode_killed_feeds(dir), CorrelatorOptions::default());
    let t = c.get("lab-steady-39").expect("steady-39");
    assert_eq!(t.outcome, Outcome::Error, "{}", t.evidence());
    assert_eq!(t.error_at, Some(pdtop::traces::Hop::Consumer));
    assert!(t.evidence().contains("decode#0 was killed"), "{}", t.evidence());
    assert!(t.evidence().contains("was Loaded"), "what it loaded stays in the evidence: {}", t.evidence());
    // Its end is never logged: one that ended just before reads the same.
    assert_eq!(t.confidence, Confidence::Likely);
    // The stream before it started 2 s earlier; decode's last stats line
    // (06:26:48) ran one request: that one ended, the newest did not.
    let before = c.get("lab-steady-38").expect("steady-38");
    assert_eq!(before.outcome, Outcome::Loaded, "{}", before.evidence());
    let st = c.stats();
    let d = st.sources.iter().find(|s| s.source == LogOrigin::Decode(0)).expect("decode");
    assert_eq!(d.deaths, 1);
    // After the restart every request is judged as before.
    for id in ids_of_phase(dir, "after_restart") {
        assert_eq!(c.get(&id).map(|t| t.outcome), Some(Outcome::Loaded), "{id}");
    }
    // The real log stopped in order (`[shutdown]`): nothing is cut.
    let real = run(full_feeds(dir), CorrelatorOptions::default());
    assert_eq!(real.get("lab-steady-39").map(|t| t.outcome), Some(Outcome::Loaded));
}

/// `pdtop demo` loops a capture: the same lines, ids and stamps again, read
/// a loop later. Here lab-disagg-0 of the qwen3 capture (its real prefill
/// lines 144-148 and decode lines 188-192), played twice 150 s apart, with
/// proxy steps in pdtop's JSON-lines format (`logs/proxy.rs`) as the lab's
/// proxy could write them. A reused id is a new request: two traces, each
/// reachable by its own identity, each proxy step on the live request.
#[test]
fn a_reused_id_is_a_new_request_and_its_late_lines_go_to_it() {
    let dir = "qwen3-shape-restart";
    let pick = |name: &str, from: usize, n: usize| -> Vec<String> {
        capture(&format!("{dir}/{name}")).lines().skip(from - 1).take(n).map(String::from).collect()
    };
    let prefill = pick("vllm-prefill.log", 144, 5);
    let decode = pick("vllm-decode.log", 188, 5);
    let mut c = Correlator::new(CorrelatorOptions::default());
    let t0 = 1_796_019_947.0;
    let step =
        |ts: f64, ev: &str| format!(r#"{{"ts": {ts}, "request_id": "lab-disagg-0", "event": "{ev}"}}"#);
    for at in [t0, t0 + 150.0] {
        // The benchmark proxy's steps (no `received`): a request opens with its prefill.
        c.on_line(LogOrigin::Proxy, &step(at, "prefill_start"), at);
        for l in &prefill {
            c.on_line(LogOrigin::Prefill(0), l, at + 0.2);
        }
        for l in &decode {
            c.on_line(LogOrigin::Decode(0), l, at + 0.4);
        }
        c.on_line(LogOrigin::Proxy, &step(at + 1.0, "decode_done"), at + 1.0);
        c.on_tick(at + 3.0);
    }
    c.finish(t0 + 200.0);
    let mine: Vec<&pdtop::traces::Trace> = c.traces().filter(|t| t.id == "lab-disagg-0").collect();
    assert_eq!(mine.len(), 2, "{:#?}", mine.iter().map(|t| (&t.phases, t.evidence())).collect::<Vec<_>>());
    let proxy = |t: &pdtop::traces::Trace| t.phase(pdtop::traces::Hop::Proxy).map(|p| (p.start, p.end));
    assert_eq!(proxy(mine[0]), Some((t0, Some(t0 + 1.0))), "loop 1's proxy steps stay on loop 1");
    assert_eq!(proxy(mine[1]), Some((t0 + 150.0, Some(t0 + 151.0))), "loop 2's go to loop 2");
    for t in &mine {
        assert_eq!(t.outcome, Outcome::Loaded, "{}", t.evidence());
        // The screen opens a row by its identity, never by its id.
        assert_eq!(c.trace(t.serial).map(|x| x.first_seen), Some(t.first_seen));
    }
    assert_ne!(mine[0].serial, mine[1].serial);
}

/// A prefill's `500` that the proxy hid: it went on, and decode served the
/// request. The NIXL capture with lab-noparams-0's prefill access line (line
/// 307, `200 OK`) swapped for a real prefill `500` of a PD setup, pasted in
/// vllm-project/vllm#38911 (vLLM 0.18, `(APIServer pid=2884) INFO:
/// 100.124.195.xxx:51156 - "POST /v1/chat/completions HTTP/1.1" 500
/// Internal Server Error`), without its process prefix (another pid would
/// read as another process: vLLM before 0.10 printed none). The lab's proxy (`shared/lab/miniproxy.py`)
/// does exactly that: it logs the failure and forwards to decode without
/// `kv_transfer_params`. One request, counted once: a silent miss (decode
/// recomputed it and answered), the prefill's hidden 500 its cause.
#[test]
fn a_prefill_error_the_proxy_hid_is_one_request() {
    let dir = "nixl-llama-shape";
    let failed =
        r#"INFO:     100.124.195.xxx:51156 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error"#;
    let mut feeds = full_feeds(dir);
    let prefill = &mut feeds[0].1;
    assert!(prefill[306].1.contains("POST /v1/completions HTTP/1.1\" 200 OK"), "{}", prefill[306].1);
    prefill[306].1 = failed.to_string();
    let c = run(feeds, CorrelatorOptions::default());
    let mine: Vec<&pdtop::traces::Trace> = c.traces().filter(|t| t.id == "lab-noparams-0").collect();
    assert_eq!(mine.len(), 1, "one trace: {:#?}", mine.iter().map(|t| t.evidence()).collect::<Vec<_>>());
    let t = mine[0];
    // Decode computed the whole prompt and answered: the client got a
    // silent miss, the prefill's hidden failure its cause.
    assert_eq!((t.outcome, t.error_at), (Outcome::SilentMiss, None), "{}", t.evidence());
    assert!(
        t.evidence().contains("answered HTTP 500")
            && t.evidence().contains("decode computed the prompt itself"),
        "{}",
        t.evidence()
    );
    assert_eq!((t.prefill, t.decode), (Some(0), Some(0)));
    assert!(t.evidence().starts_with("prefill on prefill#0: answered HTTP 500"), "{}", t.evidence());
    assert!(t.evidence().contains("decode#0 received it after the prefill failed"), "{}", t.evidence());
    assert!(t.evidence().contains("decode computed the prompt itself"), "{}", t.evidence());
    // Counted once: a miss (with the three others), not also an error nor
    // a decode with no prefill.
    let n = c.counts();
    assert_eq!((n.error, n.silent_miss, n.no_prefill), (0, 4, 8), "{n:?}");
}

/// A death cascade: decode's engine dies, its transfer peer's 54 ms later,
/// both stamped in the same second: one event, and no order claimed (the
/// logs stamp whole seconds; which was read first says nothing). Both
/// lines are demo-proxy-qwen3's real decode death (vLLM 0.26.0,
/// `vllm-decode.log` line 368); the second is spliced into the prefill's
/// log, as its own engine prints it (the pid is the decode's). A second
/// later on the peer is ordered by the stamps. A death a minute apart
/// (vllm#20440's, in the corpus) is no cascade.
#[test]
fn a_death_cascade_is_named_as_one() {
    let fatal =
        "(EngineCore pid=1094) ERROR 12-01 07:29:35 [core.py:1332] EngineCore encountered a fatal error.";
    let other = "ERROR 07-03 20:47:11 [core.py:517] EngineCore encountered a fatal error.";
    let at = 1_796_110_175.5;
    let mut logs = common::correlate(&[
        (LogOrigin::Decode(0), fatal, at),
        (LogOrigin::Prefill(0), fatal, at + 0.054),
        (LogOrigin::Prefill(1), other, at + 60.0),
    ]);
    let c = &mut logs.correlator;
    let ev: Vec<(LogOrigin, String)> = c.drain_log_events().into_iter().map(|e| (e.source, e.text)).collect();
    // In the order they happened: the July death first.
    assert_eq!(ev.len(), 3, "{ev:#?}");
    assert_eq!(ev[0].0, LogOrigin::Prefill(1));
    assert!(!ev[0].1.contains("cascade"), "{}", ev[0].1);
    // Stamped in one second, they are given on prefill first (a request's
    // order): the first is told as it is, the second names the cascade.
    let ev = &ev[1..];
    assert_eq!(ev[0], (LogOrigin::Prefill(0), "EngineCore encountered a fatal error.".to_string()));
    assert_eq!(ev[1].0, LogOrigin::Decode(0));
    assert!(
        ev[1].1.starts_with("death cascade: prefill#0 (EngineCore encountered a fatal error.) and decode#0 (EngineCore encountered a fatal error.), the two sides of the pair, died in the same second: which died first is not known"),
        "{}",
        ev[1].1
    );
    let st = c.stats();
    let cascade = |src: LogOrigin| {
        st.sources
            .iter()
            .find(|s| s.source == src)
            .and_then(|s| s.last_death.as_ref())
            .and_then(|d| d.cascade.clone())
    };
    assert_eq!(
        cascade(LogOrigin::Decode(0)),
        cascade(LogOrigin::Prefill(0)),
        "both deaths name the one cascade"
    );
    assert!(cascade(LogOrigin::Decode(0)).is_some());
    assert_eq!(cascade(LogOrigin::Prefill(1)), None);
    // The prefill's death stamped a second after the decode's: in that order.
    let later = fatal.replace("07:29:35", "07:29:36");
    let mut logs = common::correlate(&[
        (LogOrigin::Prefill(0), later.as_str(), at),
        (LogOrigin::Decode(0), fatal, at + 0.054),
    ]);
    let ev: Vec<String> = logs.correlator.drain_log_events().into_iter().map(|e| e.text).collect();
    assert!(ev[1].starts_with("death cascade: decode#0 died (EngineCore encountered a fatal error.), then prefill#0 on the other side of the pair 1 s later"), "{}", ev[1]);
}

/// The first line of `file` in capture `dir` that contains `needle`.
fn line_with(dir: &str, file: &str, needle: &str) -> String {
    capture(&format!("{dir}/{file}"))
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{dir}/{file}: no line with {needle}"))
        .to_string()
}

/// A lab whose proxy forwarded `X-Request-Id` in an earlier phase and none
/// in a later one: qwen3-shape-restart's lab-steady-3 (one id on prefill and
/// decode), then the 2P2D capture's first request (each instance invented
/// its own id). The later decode pairs with the prefill copy sent just
/// before it, by order, and is not called "no prefill".
#[test]
fn ids_forwarded_earlier_do_not_stop_a_later_order_join() {
    let mut c = Correlator::new(CorrelatorOptions::default());
    let (q, p2) = ("qwen3-shape-restart", "example-2p2d-demo-proxy");
    let t1 = start_hint(q);
    let t2 = start_hint(p2);
    let feed = [
        (LogOrigin::Prefill(0), line_with(q, "vllm-prefill.log", "Received request cmpl-lab-steady-3-0"), t1),
        (
            LogOrigin::Decode(0),
            line_with(q, "vllm-decode.log", "Received request cmpl-lab-steady-3-0"),
            t1 + 0.3,
        ),
        (
            LogOrigin::Prefill(0),
            line_with(p2, "vllm-prefill.log", "Received request cmpl-8d18553863d3644d-0"),
            t2,
        ),
        (
            LogOrigin::Prefill(0),
            line_with(p2, "vllm-prefill.log", "Added request cmpl-8d18553863d3644d-0"),
            t2,
        ),
        (
            LogOrigin::Decode(0),
            line_with(p2, "vllm-decode.log", "Received request cmpl-97ef464d61aa9738-0"),
            t2 + 0.2,
        ),
        (
            LogOrigin::Decode(0),
            line_with(p2, "vllm-decode.log", "Added request cmpl-97ef464d61aa9738-0"),
            t2 + 0.2,
        ),
        // The demo proxy's access line for it (its first POST).
        (LogOrigin::Proxy, line_with(p2, "proxy.log", "POST /v1/completions"), t2 + 0.5),
    ];
    for (src, line, at) in &feed {
        c.on_line(*src, line, *at);
    }
    c.finish(t2 + 600.0);
    let first = c.get("lab-steady-3").expect("lab-steady-3");
    assert_eq!((first.join, first.prefill, first.decode), (Join::ById, Some(0), Some(0)));
    let later = c.get("cmpl-97ef464d61aa9738").expect("the later decode");
    assert_eq!(later.join, Join::ByOrder, "{later:?}");
    assert!(
        later.engine_ids.iter().any(|(o, id)| *o == LogOrigin::Prefill(0) && id == "cmpl-8d18553863d3644d-0")
    );
    assert_ne!(later.outcome, Outcome::NoPrefill, "{later:?}");
    assert_ne!(later.confidence, Confidence::Sure, "{later:?}");
    // The proxy's line answers the paired request, not a trace of its own.
    assert!(later.phase(Hop::Proxy).is_some(), "{later:?}");
    assert_eq!(c.counts().seen, 2);
}

/// The decode's line read before its prefill copy's (two logs tailed
/// apart), after a phase that forwarded ids: no order join was possible
/// when the decode came (a copy read later may as well be the next
/// request's), and while that copy waits unpaired the decode is never
/// "no prefill" (it was "no prefill, sure"): unknown, naming the copy.
#[test]
fn a_waiting_prefill_copy_keeps_a_decode_from_no_prefill() {
    let mut c = Correlator::new(CorrelatorOptions::default());
    let (q, p2) = ("qwen3-shape-restart", "example-2p2d-demo-proxy");
    // Ids were forwarded before (as in the test above).
    let t1 = start_hint(q);
    c.on_line(
        LogOrigin::Prefill(0),
        &line_with(q, "vllm-prefill.log", "Received request cmpl-lab-steady-3-0"),
        t1,
    );
    c.on_line(
        LogOrigin::Decode(0),
        &line_with(q, "vllm-decode.log", "Received request cmpl-lab-steady-3-0"),
        t1,
    );
    let t2 = start_hint(p2);
    let feed = [
        (
            LogOrigin::Decode(0),
            line_with(p2, "vllm-decode.log", "Received request cmpl-97ef464d61aa9738-0"),
            t2,
        ),
        (LogOrigin::Decode(0), line_with(p2, "vllm-decode.log", "Added request cmpl-97ef464d61aa9738-0"), t2),
        (
            LogOrigin::Prefill(0),
            line_with(p2, "vllm-prefill.log", "Received request cmpl-8d18553863d3644d-0"),
            t2 + 0.5,
        ),
    ];
    for (src, line, at) in &feed {
        c.on_line(*src, line, *at);
    }
    c.finish(t2 + 600.0);
    let d = c.get("cmpl-97ef464d61aa9738").expect("the decode");
    assert_eq!(d.outcome, Outcome::Unknown, "{d:?}");
    assert!(d.evidence().contains("cmpl-8d18553863d3644d"), "{}", d.evidence());
}

/// A prefill's `500` the proxy hid, with no id shared: each instance
/// invents `cmpl-<hex>-0`, so only order (and prompt length) joins the
/// prefill copy to its decode request. demo-proxy-qwen3 (vLLM 0.26.0,
/// vLLM's demo proxy, which forwards no id) with the first steady prefill's
/// access line (`vllm-prefill.log` line 115, `200 OK`, for
/// cmpl-84fe31d9b20c5eef-0) swapped for the real prefill `500` pasted in
/// vllm-project/vllm#38911 (vLLM 0.18, `(APIServer pid=2884) INFO:
/// 100.124.195.xxx:51156 - "POST /v1/chat/completions HTTP/1.1" 500
/// Internal Server Error`), with this log's process prefix (pid 521), as
/// the same process printed it. The decode log is the capture's own: its
/// request went on, as proxies other than the demo's do after a prefill
/// 5xx. One request, an error at prefill, counted once.
#[test]
fn a_prefill_error_the_proxy_hid_without_shared_ids_is_one_request() {
    let dir = "demo-proxy-qwen3";
    let failed = r#"(APIServer pid=521) INFO:     100.124.195.xxx:51156 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error"#;
    let hint = start_hint(dir);
    let f = |name: &str| capture(&format!("{dir}/{name}"));
    let mut prefill = instance_lines(&[f("vllm-prefill.log")], hint);
    assert!(prefill[113].1.contains("Received request cmpl-84fe31d9b20c5eef-0"), "{}", prefill[113].1);
    assert!(prefill[114].1.contains("POST /v1/completions HTTP/1.1\" 200 OK"), "{}", prefill[114].1);
    prefill[114].1 = failed.to_string();
    let decode = || instance_lines(&[f("vllm-decode.log")], hint);
    let clean = vec![
        (LogOrigin::Prefill(0), instance_lines(&[f("vllm-prefill.log")], hint)),
        (LogOrigin::Decode(0), decode()),
        (LogOrigin::Proxy, proxy_lines(dir)),
    ];
    let before = run(clean, CorrelatorOptions::default()).counts();
    let feeds = vec![
        (LogOrigin::Prefill(0), prefill),
        (LogOrigin::Decode(0), decode()),
        (LogOrigin::Proxy, proxy_lines(dir)),
    ];
    let c = run(feeds, CorrelatorOptions::default());
    let mine: Vec<&pdtop::traces::Trace> = c
        .traces()
        .filter(|t| t.engine_ids.iter().any(|(_, id)| id.starts_with("cmpl-84fe31d9b20c5eef-0")))
        .collect();
    assert_eq!(mine.len(), 1, "{:#?}", mine.iter().map(|t| t.evidence()).collect::<Vec<_>>());
    let t = mine[0];
    assert_eq!((t.outcome, t.error_at), (Outcome::Error, Some(Hop::Producer)), "{}", t.evidence());
    // The decode request joined it, by order: no id was shared.
    assert_eq!((t.prefill, t.decode, t.join), (Some(0), Some(0), Join::ByOrder), "{}", t.evidence());
    assert!(t.evidence().starts_with("prefill on prefill#0: answered HTTP 500"), "{}", t.evidence());
    // The error is sure; that this decode request was its rests on order,
    // and most proxies stop at a prefill error: both readings are said.
    assert!(t.evidence().contains("paired with it by arrival order"), "{}", t.evidence());
    assert!(t.evidence().contains("this decode is the next request's"), "{}", t.evidence());
    assert_ne!(t.confidence, Confidence::Sure);
    // Counted once: as many requests as without the failure, one loaded fewer.
    let n = c.counts();
    assert_eq!(
        (n.seen, n.error, n.loaded),
        (before.seen, before.error + 1, before.loaded - 1),
        "{before:?} {n:?}"
    );
    assert_eq!(n.no_prefill, before.no_prefill, "{n:?}");
}

/// A stream's logged end (`--enable-log-outputs`) takes it out of flight:
/// a kill after it cuts it no more. demo-proxy-qwen3's decode lines 276-278
/// (vLLM 0.26.0: chatcmpl-9ae5adeffe24036b received, its stream started,
/// added), then its restart (line 617, a new API server pid with no
/// shutdown before: killed). The end line is rendered from
/// `RequestLogger.log_outputs` at vllm-project/vllm e6643eca
/// (`vllm/entrypoints/serve/utils/request_logger.py`: `Generated response
/// %s%s: output: %r, output_token_ids: %s, finish_reason: %s`) with what
/// `serving_chat.py` passes at a stream's end (`" (streaming complete)"`,
/// `output_token_ids=None`, `finish_reason="streaming_complete"`, and
/// `<streaming_complete: N tokens>` as the output where it kept no text;
/// 48 tokens, as the capture's chat requests answered), with this log's
/// prefix and a stamp a second after its start. At that commit the call is
/// line 92 and `Received request` line 63, as this capture prints it.
#[test]
fn a_stream_that_logged_its_end_is_not_cut_by_a_later_kill() {
    let log = capture("demo-proxy-qwen3/vllm-decode.log");
    let lines: Vec<&str> = log.lines().collect();
    let done = "(APIServer pid=1010) INFO 12-01 07:29:29 [request_logger.py:92] Generated response chatcmpl-9ae5adeffe24036b (streaming complete): output: '<streaming_complete: 48 tokens>', output_token_ids: None, finish_reason: streaming_complete";
    let restart = lines[616];
    assert!(restart.contains("pid=1422") && restart.contains("Starting vLLM server"), "{restart}");
    let play = |end: Option<&str>| {
        let mut c = Correlator::new(CorrelatorOptions { year: Some(2026), ..CorrelatorOptions::default() });
        let at = 1_796_110_168.0;
        for l in &lines[275..278] {
            c.on_line(LogOrigin::Decode(0), l, at);
        }
        if let Some(l) = end {
            c.on_line(LogOrigin::Decode(0), l, at + 1.0);
        }
        c.on_line(LogOrigin::Decode(0), restart, at + 55.0);
        c.finish(at + 60.0);
        let t = c.get("chatcmpl-9ae5adeffe24036b").expect("its trace");
        (t.outcome, t.evidence().clone(), t.phase(Hop::Consumer).and_then(|p| p.end))
    };
    // Without its end, and with no stats line to date the kill (these lines
    // carry none, as with `--disable-log-stats`), the kill lies anywhere in
    // the 55 s up to the restart: the stream may have ended before it.
    let (cut, ev, _) = play(None);
    assert_eq!(cut, Outcome::Unknown, "{ev}");
    assert!(ev.contains("decode#0 was killed") && ev.contains("in the 55 s between"), "{ev}");
    assert!(ev.contains("had ended before is unknown"), "{ev}");
    let (kept, ev, end) = play(Some(done));
    assert_ne!(kept, Outcome::Error, "{ev}");
    // Its decode phase ends at the logged end (07:29:29), not at the kill.
    let start = pdtop::traces::anchor((12, 1, 7, 29, 28), 1_796_110_168.0, Some(2026)).unwrap();
    assert_eq!(end, Some(start + 1.0));
}

/// A client's abort leaves its prefilled KV unread: the producer's expiry
/// 120 s later is the abort's echo, no miss. The NIXL capture (vLLM 0.26.0)
/// with an abort of lab-noparams-0 spliced into its decode log after the
/// request's `Added` line (`vllm-decode.log` line 339): demo-proxy-qwen3's
/// real `Aborted request(s)` line (its `vllm-decode.log` line 330, the same
/// vLLM), with this log's pid, the stamp of the line before and
/// lab-noparams-0's internal id. The prefill's real expiry (`vllm-prefill.log`
/// line 452) then adds to the cancel.
#[test]
fn an_expiry_after_the_clients_abort_is_its_echo() {
    let dir = "nixl-llama-shape";
    let abort = "(APIServer pid=1088) INFO 11-30 06:39:56 [async_llm.py:721] Aborted request(s) cmpl-lab-noparams-0-0-b0bf8db2.";
    let clean = run(full_feeds(dir), CorrelatorOptions::default());
    let mut feeds = full_feeds(dir);
    let decode = &mut feeds[1].1;
    let k =
        decode.iter().position(|(_, l)| l.contains("Added request cmpl-lab-noparams-0-0-b0bf8db2")).unwrap();
    let at = decode[k].0;
    decode.insert(k + 1, (at, abort.to_string()));
    let c = run(feeds, CorrelatorOptions::default());
    let t = c.get("lab-noparams-0").expect("lab-noparams-0");
    assert_eq!(t.outcome, Outcome::Cancelled, "{}", t.evidence());
    assert!(
        t.evidence().contains("released its KV unread (lease expired) (after the abort)"),
        "{}",
        t.evidence()
    );
    // Not an unnamed miss: the expiry is this cancelled request's.
    assert_eq!(c.counts().unattributed_misses, clean.counts().unattributed_misses, "{:?}", c.counts());
}

/// `AsyncLLM.generate`'s other two failure lines name the request: an error
/// at that instance; after an abort, `failed (bad request).` is the
/// client's abort's echo and `failed.` the engine's own abort's reason. demo-proxy-qwen3's
/// decode lines 276-278 (vLLM 0.26.0: chatcmpl-9ae5adeffe24036b received,
/// its stream started, added); the failure and abort lines rendered from the
/// format strings of `AsyncLLM.generate` at vllm-project/vllm 8ef0b5f5
/// (`vllm/v1/engine/async_llm.py`: `Request %s failed (bad request).`,
/// `Request %s failed.`) with this log's prefix and the bracket of its own
/// `failed (engine dead)` line (line 423; the calls sit a few lines apart in
/// the same function). The abort is the log's real `Aborted request(s)` line
/// (line 330) with this request's internal id (its `Added` line).
#[test]
fn a_bad_request_or_a_failed_generate_is_an_error_at_that_instance() {
    let log = capture("demo-proxy-qwen3/vllm-decode.log");
    let lines: Vec<&str> = log.lines().collect();
    let id = "chatcmpl-9ae5adeffe24036b";
    let line =
        |msg: &str| format!("(APIServer pid=1010) INFO 12-01 07:29:35 [async_llm.py:601] Request {id} {msg}");
    let play = |tail: &[String]| {
        let mut c = Correlator::new(CorrelatorOptions { year: Some(2026), ..CorrelatorOptions::default() });
        let at = 1_796_110_168.0;
        for l in &lines[275..278] {
            c.on_line(LogOrigin::Decode(0), l, at);
        }
        for l in tail {
            c.on_line(LogOrigin::Decode(0), l, at + 1.0);
        }
        c.finish(at + 60.0);
        let t = c.get(id).expect("its trace");
        (t.outcome, t.error_at, t.evidence().clone())
    };
    let abort = "(APIServer pid=1010) INFO 12-01 07:29:34 [async_llm.py:721] Aborted request(s) chatcmpl-9ae5adeffe24036b-b9da0961.";
    // After an abort: `failed (bad request).` is the client's abort's echo;
    // `failed.` follows the abort generate() makes itself on an unexpected
    // error (a client's abort ends `Request <id> aborted.` instead): an error.
    for (msg, what, after_abort) in [
        ("failed (bad request).", "bad request", Outcome::Cancelled),
        ("failed.", "was aborted", Outcome::Error),
    ] {
        let (o, at, ev) = play(&[line(msg)]);
        assert_eq!((o, at), (Outcome::Error, Some(Hop::Consumer)), "{ev}");
        assert!(ev.contains(what), "{ev}");
        let (o, _, ev) = play(&[abort.to_string(), line(msg)]);
        assert_eq!(o, after_abort, "{ev}");
    }
}

/// NIXL's `notification_failed` says the decode held every block in its own
/// prefix cache and could not notify the prefill, which then expires them
/// with 0 readers: that expiry is evidence only, never a miss. The NIXL
/// capture (vLLM 0.26.0) with lab-steady-3 (loaded) given the prefill's real
/// expiry line (`vllm-prefill.log` line 452, with lab-steady-3's prefill
/// internal id from its line 351) and, on decode, a notification failure
/// rendered from `_read_blocks` at vllm-project/vllm 0016029b
/// (`vllm/distributed/kv_transfer/kv_connector/v1/nixl/worker.py`, as in
/// `connector/named.rs`'s test) with this log's EngineCore prefix and
/// lab-steady-3's decode internal id (`vllm-decode.log` line 388).
#[test]
fn an_expiry_after_a_failed_notification_is_no_miss() {
    let dir = "nixl-llama-shape";
    let expiry = "(EngineCore pid=767) WARNING 11-30 06:40:26 [base_worker.py:2036] Releasing expired KV blocks for request cmpl-lab-steady-3-0-900f8f8d which were retrieved by 0 remote worker(s) before lease expired.";
    let notify = "(EngineCore pid=1176) ERROR 11-30 06:40:06 [worker.py:620] NIXL transfer failure: notification_failed. P worker blocks will be freed after timeout. This may indicate network issues. | Context: {'failure_type': 'notification_failed', 'request_id': 'cmpl-lab-steady-3-0-8173c54c', 'engine_id': '7a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d', 'dst_engine_id': '1f2e3d4c-5b6a-4798-8a7b-6c5d4e3f2a1b', 'remote_rank': 0, 'remote_agent_name': 'b8c1e2d3-0a9f-4e8d-9c7b-6a5f4e3d2c1b'}";
    let play = |notify_at: Option<bool>| {
        let mut feeds = full_feeds(dir);
        let p = &mut feeds[0].1;
        let k = p
            .iter()
            .position(|(_, l)| l.contains("Releasing expired KV blocks for request cmpl-lab-noparams-0"))
            .unwrap();
        let expiry_t = p[k].0;
        p.insert(k + 1, (expiry_t, expiry.to_string()));
        let d = &mut feeds[1].1;
        match notify_at {
            // In its place, after the decode's `Added` line.
            Some(true) => {
                let k = d
                    .iter()
                    .position(|(_, l)| l.contains("Added request cmpl-lab-steady-3-0-8173c54c"))
                    .unwrap();
                let t = d[k].0;
                d.insert(k + 1, (t, notify.to_string()));
            }
            // Read after the expiry (a log read file by file).
            Some(false) => {
                let k = d.iter().position(|(t, _)| *t > expiry_t).unwrap();
                d.insert(k, (expiry_t + 0.5, notify.to_string()));
            }
            None => {}
        }
        let c = run(feeds, CorrelatorOptions::default());
        let t = c.get("lab-steady-3").expect("steady-3").clone();
        (t.outcome, t.confidence, t.evidence())
    };
    // Alone, the expiry says the decode had not read it yet, no recompute:
    // with no later line of its read or failure, not known at the end.
    let (o, conf, ev) = play(None);
    assert_eq!((o, conf), (Outcome::Unknown, Confidence::Likely), "{ev}");
    assert!(ev.contains("had not read it when the prefill released it unread"), "{ev}");
    let (o, _, ev) = play(Some(true));
    assert_eq!(o, Outcome::Loaded, "{ev}");
    assert!(ev.contains("released its KV unread") && ev.contains("failed notification"), "{ev}");
    // Read the other way round: the same facts, the same verdict.
    let (o, conf, ev) = play(Some(false));
    assert_eq!((o, conf), (Outcome::Loaded, Confidence::Likely), "{ev}");
    assert!(ev.contains("own prefix cache"), "{ev}");
}

/// vLLM's demo proxy forwards no id, so its decode requests join their
/// prefill copies by arrival order. A proxy sends a request to the same
/// endpoint on both sides: a chat copy is never a completions request's.
/// Here the real copy a completions decode was paired with is renamed a
/// chat one (`chatcmpl-`, as a chat request racing it would be named), and
/// the lines are read up to that decode's, as a live pdtop reads them
/// (later lines, prompt lengths among them, may re-pair it).
#[test]
fn arrival_order_never_pairs_a_decode_with_a_copy_of_another_api() {
    let dir = "demo-proxy-qwen3";
    let hint = start_hint(dir);
    let f = |name: &str| capture(&format!("{dir}/{name}"));
    let feeds = |prefill: String| {
        vec![
            (LogOrigin::Prefill(0), instance_lines(&[prefill], hint)),
            (LogOrigin::Decode(0), instance_lines(&[f("vllm-decode.log")], hint)),
            (LogOrigin::Proxy, proxy_lines(dir)),
        ]
    };
    let copy = "cmpl-84fe31d9b20c5eef";
    let real = run(feeds(f("vllm-prefill.log")), CorrelatorOptions::default());
    let paired = real
        .traces()
        .find(|t| t.engine_ids.iter().any(|(o, id)| *o == LogOrigin::Prefill(0) && id.starts_with(copy)))
        .expect("the copy's trace");
    assert_eq!(paired.join, Join::ByOrder, "{}", paired.evidence());
    let decode_id = paired
        .engine_ids
        .iter()
        .find(|(o, _)| *o == LogOrigin::Decode(0))
        .map(|(_, id)| id.clone())
        .expect("a decode paired by order");
    assert!(decode_id.starts_with("cmpl-"), "{decode_id}");
    let partner_of = |prefill: String| {
        let mut feeds = feeds(prefill);
        let base = pdtop::traces::base_id(&decode_id).to_string();
        let at = feeds[1].1.iter().find(|(_, l)| l.contains(&base)).map(|(t, _)| *t).expect("its line");
        for (_, lines) in &mut feeds {
            lines.retain(|(t, _)| *t <= at);
        }
        let mut c = Correlator::new(CorrelatorOptions::default());
        let mut all: Vec<(f64, LogOrigin, String)> =
            feeds.into_iter().flat_map(|(o, ls)| ls.into_iter().map(move |(t, l)| (t, o, l))).collect();
        all.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (t, o, l) in all {
            c.on_line(o, &l, t);
        }
        c.traces()
            .find(|t| t.engine_ids.iter().any(|(_, id)| *id == decode_id))
            .map(|t| {
                t.engine_ids
                    .iter()
                    .filter(|(o, _)| *o == LogOrigin::Prefill(0))
                    .map(|(_, id)| id.clone())
                    .collect::<Vec<_>>()
            })
            .expect("the decode's trace")
    };
    // Read live, the real copy is its partner by order...
    let live = partner_of(f("vllm-prefill.log"));
    assert!(live.iter().any(|id| id.starts_with(copy)));
    // ...and a copy of another API never is.
    // vLLM names a chat request `chatcmpl-<hex>`, with no choice index.
    let renamed = partner_of(f("vllm-prefill.log").replace(&format!("{copy}-0"), &format!("chat{copy}")));
    assert!(
        !renamed.iter().any(|id| id.contains(copy)),
        "a completions decode took a chat copy: {renamed:?}"
    );
}

/// NIXL's toy proxy prints its own report of a failure, then re-raises:
/// uvicorn adds `Exception in ASGI application`, its traceback and the 500.
/// One failed request, one trace; and a bare exception after it is another.
#[test]
fn the_toy_proxys_report_and_uvicorns_exception_are_one_failure() {
    let mut c = Correlator::new(CorrelatorOptions::default());
    let t0 = 1_796_397_194.0;
    let lines = [
        "Error occurred in disagg prefill proxy server - completions endpoint",
        "ERROR:    Exception in ASGI application",
        "Traceback (most recent call last):",
        "httpx.HTTPStatusError: Server error '500 Internal Server Error' for url 'http://127.0.0.1:8100/v1/completions'",
        r#"INFO:     127.0.0.1:43716 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error"#,
    ];
    for (k, l) in lines.iter().enumerate() {
        c.on_line(LogOrigin::Proxy, l, t0 + 0.01 * k as f64);
    }
    c.on_line(LogOrigin::Proxy, "ERROR:    Exception in ASGI application", t0 + 0.1);
    c.finish(t0 + 60.0);
    let failures: Vec<&pdtop::traces::Trace> =
        c.traces().filter(|t| t.id.starts_with("proxy-error")).collect();
    assert_eq!(failures.len(), 2, "{:#?}", failures.iter().map(|t| t.evidence()).collect::<Vec<_>>());
    assert!(failures[0].evidence().contains("disagg prefill proxy server"), "{}", failures[0].evidence());
    assert!(failures.iter().all(|t| t.outcome == Outcome::Error));
}

/// The cascade's 1P2D lab, whose two uvicorn proxies (vLLM's demo proxy,
/// then the lab's miniproxy) print no time into one log: each access line
/// read as its answer started, and again up to a second late (a read that
/// falls just before the line is written, at x4). A copy whose access line
/// comes late, or that shares its id with its own decode request, is no
/// client reaching the prefill directly: the demo proxy still vouches for
/// its 20 id-less misses. (Later than the 3 s `proxy_window_s`, an access
/// line fits no request and the misses are unknown, not wrong.)
/// The cascade's proxy log, each access line read `lag` after its answer
/// started and every other line with the access line before it.
fn cascade_proxy_lines(dir: &str, hint: f64, lag: f64) -> Lines {
    let mut answers: Vec<f64> = capture(&format!("{dir}/requests.jsonl"))
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["target"] == "proxy")
        .filter_map(|v| Some(v["t_start"].as_f64()? + v["ttft_ms"].as_f64().unwrap_or(0.0) / 1000.0))
        .collect();
    answers.sort_by(f64::total_cmp);
    let mut next = answers.iter().map(|t| t + lag);
    let mut last = hint - 10.0;
    capture(&format!("{dir}/proxy.log"))
        .lines()
        .map(|l| {
            if l.contains("\"POST ") {
                last = next.next().unwrap_or(last);
            }
            (last, l.to_string())
        })
        .collect()
}

#[test]
fn a_late_proxy_line_is_no_bypass() {
    let dir = "nixl-1p2d-cascade";
    let hint = start_hint(dir);
    let log = |name: &str| instance_lines(&[capture(&format!("{dir}/{name}"))], hint);
    let mut counts = Vec::new();
    for lag in [0.0, 0.5, 1.0] {
        let feeds = vec![
            (LogOrigin::Prefill(0), log("vllm-prefill.log")),
            (LogOrigin::Decode(0), log("vllm-decode.log")),
            (LogOrigin::Decode(1), log("vllm-decode2.log")),
            (LogOrigin::Proxy, cascade_proxy_lines(dir, hint, lag)),
        ];
        let c = run(feeds, CorrelatorOptions::default());
        counts.push((lag, c.counts()));
    }
    // requests.jsonl: 25 silent misses, 20 of them the demo proxy's.
    for (lag, n) in &counts {
        assert_eq!((n.silent_miss, n.unknown), (25, 0), "read {lag} s late: {n:?}");
    }
}
