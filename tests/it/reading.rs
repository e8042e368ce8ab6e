//! A verdict is a function of the evidence and the times its sources gave
//! it, never of when pdtop read a line. Every real capture is read as a
//! live pdtop would read it at several paces (a tail reads four times a
//! second: the lab at x1 is read every 0.25 s of it, at x4 every second,
//! at x20 every 5 s), in one gulp (pdtop opened after the run), and
//! opened part way (what was printed before read at once, the scrapes and
//! span exports sent before lost); each request's verdict is held against
//! the reading from the start that lost the same scrapes and spans.
//!
//! Where a log prints no time (a uvicorn proxy), what the first read finds
//! can only be placed by its order: there, and only there, a gulp may say
//! less than the full reading (a verdict made unknown, or less sure, with
//! the proxy's undated lines as the reason), never something else.

use std::collections::BTreeMap;

use crate::common;
use pdtop::feed::Msg;
use pdtop::lab::Capture;
use pdtop::lab::replay::{Reading, initial_state, read_as};
use pdtop::traces::{Confidence, Join, Outcome};

/// Every capture in `tests/fixtures/lab-captures/`.
const ALL: [&str; 11] = [
    "qwen3-shape-restart",
    "nixl-llama-shape",
    "demo-proxy-qwen3",
    "example-2p2d-demo-proxy",
    "nixl-1p2d-bench",
    "nixl-1p2d-cascade",
    "example-1p2d-demo-proxy",
    "example-2p1d-demo-proxy",
    "router-nixl-1p2d",
    "router-nixl-push-1p1d",
    "mooncake-tcp-1p1d",
];

type Verdicts = BTreeMap<String, (Outcome, Confidence)>;

/// Each request's verdict: by its decode's id where a decode's log named
/// it (its identity whatever the reading); the others (a copy no decode
/// logged, the proxy's id-less failures) by their outcome and rank among
/// those, since which of two such copies a failure is pinned on is itself
/// a guess. How sure: in full where the pair was joined by a shared
/// id; joined by order or by prompt length, only its outcome, since spans
/// (the lengths) arrive by push and lines by reads, and the two orders
/// differ with the reading (what a join by length lacks then is said).
fn verdicts(cap: &Capture, r: &Reading) -> Verdicts {
    verdicts_of(cap, read_as(cap, r), r.secs)
}

fn verdicts_of(cap: &Capture, messages: Vec<Msg>, secs: f64) -> Verdicts {
    verdicts_since(cap, messages, secs, None)
}

/// `since`: the logs' lines printed longer than this before the first
/// read are read for set-up only (`--since`).
fn verdicts_since(cap: &Capture, messages: Vec<Msg>, secs: f64, since: Option<f64>) -> Verdicts {
    let st = read_state(cap, messages, secs, since);
    let mut out = Verdicts::new();
    let mut nameless: BTreeMap<String, usize> = BTreeMap::new();
    for t in st.logs.as_ref().unwrap().correlator.traces() {
        let confidence = if t.join == Join::ById { t.confidence } else { Confidence::Sure };
        // Named by decode's own log, or not named by any decode.
        let decode_logged = t.engine_ids.iter().any(|(o, _)| matches!(o, pdtop::feed::LogOrigin::Decode(_)));
        let key = if !decode_logged {
            let kind = format!("{:?}", t.outcome);
            let n = nameless.entry(kind.clone()).or_default();
            *n += 1;
            format!("{kind} #{n}")
        } else {
            let mut k = t.id.clone();
            while out.contains_key(&k) {
                k.push('\'');
            }
            k
        };
        out.insert(key, (t.outcome, confidence));
    }
    out
}

/// The state after `messages`, the logs read from `since` (`--since`),
/// finished `secs` into the capture.
fn read_state(cap: &Capture, messages: Vec<Msg>, secs: f64, since: Option<f64>) -> pdtop::state::AppState {
    let mut st = initial_state(cap, true).reading_since(since);
    for m in messages {
        st.apply(m);
    }
    st.finish(cap.t0 + secs);
    st
}

fn differences(want: &Verdicts, got: &Verdicts) -> Vec<String> {
    let mut d: Vec<String> = want
        .iter()
        .filter(|(k, v)| got.get(*k) != Some(v))
        .map(|(k, v)| format!("{k}: {v:?} -> {:?}", got.get(k)))
        .collect();
    d.extend(got.keys().filter(|k| !want.contains_key(*k)).map(|k| format!("{k}: none -> {:?}", got[k])));
    d
}

/// Where `got` says something else than `want` for a request a decode log
/// named: what the proxy's undated lines (printed before pdtop started)
/// cannot settle may only be said less (unknown, or less sure), never
/// otherwise, and never more surely.
fn contradictions(want: &Verdicts, got: &Verdicts) -> Vec<String> {
    let contradicts = |w: &(Outcome, Confidence), g: Option<&(Outcome, Confidence)>| match g {
        None => true,
        Some(g) => g != w && !(g.0 == Outcome::Unknown || (g.0 == w.0 && g.1 > w.1)),
    };
    let mut d: Vec<String> = want
        .iter()
        .filter(|(k, w)| contradicts(w, got.get(*k)) && !k.contains(" #"))
        .map(|(k, w)| format!("{k}: {w:?} -> {:?}", got.get(k)))
        .collect();
    d.extend(
        got.keys()
            .filter(|k| !want.contains_key(*k) && !k.contains(" #"))
            .map(|k| format!("{k}: none -> {:?}", got[k])),
    );
    d
}

fn secs(cap: &Capture) -> f64 {
    cap.t_end - cap.t0 + 1.0
}

/// Read as it was printed, at x1, x4 and x20: the same verdicts. At x20 a
/// log that prints no time (the uvicorn proxies here) is dated only to 5 s:
/// every request a decode log names still gets the same verdict; how the
/// proxy's own id-less failure lines group into requests may differ.
#[test]
fn every_capture_gives_the_same_verdicts_at_every_pace() {
    let mut failed = Vec::new();
    for name in ALL {
        let cap = common::capture(name);
        let whole = Reading::from_start(secs(cap), true);
        let want = verdicts(cap, &whole);
        for every in [0.25, 1.0, 5.0] {
            let got = verdicts(cap, &Reading { every, ..whole });
            let mut d = differences(&want, &got);
            if every > 1.0 {
                d.retain(|line| !line.contains(" #"));
            }
            if !d.is_empty() {
                failed.push(format!("{name} read every {every} s: {} differ: {d:#?}", d.len()));
            }
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

/// Read every second from just after the start, at three phases of the
/// second: where the reads fall against the lines (a live tail is not in
/// step with the lab's clock) changes no verdict. A proxy that prints no
/// time is dated by these reads, so a copy's access line may be read a
/// read later at one phase than at another.
#[test]
fn every_capture_gives_the_same_verdicts_whatever_the_phase_of_its_reads() {
    let mut failed = Vec::new();
    for name in ALL {
        let cap = common::capture(name);
        let base = Reading { every: 1.0, ..Reading::from_start(secs(cap), true) };
        let want = verdicts(cap, &Reading { start: 0.1, ..base });
        for start in [0.4, 0.7] {
            let d = differences(&want, &verdicts(cap, &Reading { start, ..base }));
            if !d.is_empty() {
                failed.push(format!("{name} read every second from {start} s: {} differ: {d:#?}", d.len()));
            }
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

/// Opened part way, at a quarter, half and three quarters of the run, read
/// at x4: every request's verdict is the one a pdtop running from the start
/// gives with the same scrapes and spans lost; where the proxy prints no
/// time, what only its lines of before the start could settle may be said
/// less (`contradictions`).
#[test]
fn opened_part_way_a_capture_gives_the_verdicts_of_a_reading_from_its_start() {
    let mut failed = Vec::new();
    for name in ALL {
        let cap = common::capture(name);
        for at in [0.25, 0.5, 0.75] {
            let start = (secs(cap) * at).round();
            let whole = Reading { lost_before: start, ..Reading::from_start(secs(cap), true) };
            let want = verdicts(cap, &whole);
            let got = verdicts(cap, &Reading { every: 1.0, start, ..whole });
            let d = contradictions(&want, &got);
            if !d.is_empty() {
                failed.push(format!("{name} opened {start} s in: {} contradict: {d:#?}", d.len()));
            }
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

/// Read in one gulp after the run (no scrape or span reached pdtop): the
/// verdicts of a reading from the start that lost them too; where the
/// proxy's log prints no time and its undated lines were all the
/// difference, a verdict may only say less.
#[test]
fn read_in_one_gulp_a_capture_gives_the_same_verdicts() {
    let mut failed = Vec::new();
    for name in ALL {
        let cap = common::capture(name);
        let lost = Reading { lost_before: secs(cap), ..Reading::from_start(secs(cap), true) };
        let want = verdicts(cap, &lost);
        let got = verdicts(cap, &Reading { start: secs(cap), ..lost });
        let d = contradictions(&want, &got);
        if !d.is_empty() {
            failed.push(format!("{name} in one gulp: {} contradict: {d:#?}", d.len()));
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

/// A polling round reaches the state as one message per log, then
/// `LogsPolled`; another collector's message (a scrape, the version, a
/// clock tick) may come between them. The round's lines are still placed
/// together: read from the start and opened half way, no verdict changes.
/// (Live, opened mid-run on `nixl-1p2d-cascade`, the prefill's first read
/// was once placed before the decodes' of the same round had come, and
/// none of the 20 demo-phase requests was joined.)
#[test]
fn a_message_between_a_rounds_batches_changes_no_verdict() {
    let mut failed = Vec::new();
    for name in ALL {
        let cap = common::capture(name);
        for start in [0.0, (secs(cap) * 0.5).round()] {
            let r = Reading { every: 1.0, start, lost_before: start, ..Reading::from_start(secs(cap), true) };
            let want = verdicts(cap, &r);
            let mut between = Vec::new();
            for m in read_as(cap, &r) {
                let tick = matches!(m, Msg::LogLines { .. }).then(|| Msg::Tick { at: m.at() });
                between.push(m);
                between.extend(tick);
            }
            let d = differences(&want, &verdicts_of(cap, between, r.secs));
            if !d.is_empty() {
                failed.push(format!(
                    "{name} from {start} s, a tick after each batch: {} differ: {d:#?}",
                    d.len()
                ));
            }
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

/// Opened late with `--since` shorter than the run: the logs' lines before
/// the cut are read for set-up only. A request that began before the cut,
/// or whose prefill copy may lie before it, is never said surely to be
/// otherwise than a reading of the whole logs says: its verdict is
/// unknown, or not sure (joins by arrival order next to the cut may pair
/// other copies, and say they may). Not "no prefill" for a copy pdtop
/// did not read, not "cancelled" for a request whose failure came first.
/// Nor surer than the whole reading: what is sure in a cut is sure whole.
#[test]
fn a_cut_of_the_logs_past_is_never_surely_otherwise() {
    // Each request's verdict, keyed as `verdicts` keys it, with how sure
    // it says it is whatever its join.
    let sure = |cap: &Capture, msgs: Vec<Msg>, secs: f64, since: Option<f64>| {
        let st = read_state(cap, msgs, secs, since);
        let mut out = Verdicts::new();
        for t in st.logs.as_ref().unwrap().correlator.traces() {
            if t.engine_ids.iter().any(|(o, _)| matches!(o, pdtop::feed::LogOrigin::Decode(_))) {
                out.insert(t.id.clone(), (t.outcome, t.confidence));
            }
        }
        out
    };
    let mut failed = Vec::new();
    for name in ALL {
        let cap = common::capture(name);
        let start = (secs(cap) * 0.75).round();
        let full = Reading { every: 1.0, start, lost_before: start, ..Reading::from_start(secs(cap), true) };
        let want = sure(cap, read_as(cap, &full), full.secs, None);
        for cut in [0.2, 0.4, 0.6] {
            let since = (secs(cap) * cut).round();
            let got = sure(cap, read_as(cap, &full), full.secs, Some(since));
            let d: Vec<String> = got
                .iter()
                .filter(|(k, g)| {
                    g.1 == Confidence::Sure && want.get(*k).is_none_or(|w| w.0 != g.0 || w.1 != g.1)
                })
                .map(|(k, g)| format!("{k}: {:?} -> {g:?}", want.get(k)))
                .collect();
            if !d.is_empty() {
                failed.push(format!(
                    "{name} opened {start} s in, since {since} s: {} contradict: {d:#?}",
                    d.len()
                ));
            }
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

/// Cut after their arrival and before the decode's `transfer failed` line
/// (mooncake's two stale probes), a failure read alone is an error, and
/// not sure: what came before it was not read (a whole reading says the
/// prefill died holding the KV, likely).
#[test]
fn a_failure_read_without_its_arrival_is_an_error_at_most_likely() {
    let cap = common::capture("mooncake-tcp-1p1d");
    let start = (secs(cap) * 0.75).round();
    let full = Reading { every: 1.0, start, lost_before: start, ..Reading::from_start(secs(cap), true) };
    let st = read_state(cap, read_as(cap, &full), full.secs, Some((secs(cap) * 0.2).round()));
    let probes: Vec<(String, Outcome, Confidence)> = st
        .logs
        .as_ref()
        .unwrap()
        .correlator
        .traces()
        .filter(|t| t.id.starts_with("probe-stale"))
        .map(|t| (t.id.clone(), t.outcome, t.confidence))
        .collect();
    assert_eq!(probes.len(), 2, "{probes:?}");
    assert!(probes.iter().all(|p| p.1 == Outcome::Error && p.2 == Confidence::Likely), "{probes:?}");
}

/// The decodes' `KV Transfer metrics` windows confirm loads only against
/// counts that cannot be reads of loads pdtop did not read. Whole, the
/// windows of router-nixl-1p2d count exactly its 160 loads. With one read
/// taken from decode#0's last window (a load that was never read), none
/// of the 65 loads of that span is confirmed; cut by `--since`, where the
/// first windows count reads of loads before the cut, no more than whole:
/// a decode's counts begin at its second quiet point after the cut.
#[test]
fn a_cut_confirms_transfers_only_of_loads_it_read() {
    let cap = common::capture("router-nixl-1p2d");
    let truth =
        std::fs::read_to_string(common::capture_dir("router-nixl-1p2d").join("requests.jsonl")).unwrap();
    let loaded: std::collections::BTreeSet<String> = truth
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| matches!(r["outcome"].as_str(), Some("loaded" | "loaded_stale_kv")))
        .filter_map(|r| r["vllm_base_id"].as_str().map(str::to_string))
        .collect();
    let full = Reading::from_start(secs(cap), true);
    let confirmed = |since: Option<f64>, one_unread: bool| -> std::collections::BTreeSet<String> {
        let mut msgs = read_as(cap, &full);
        if one_unread {
            let (from, to) = ("Num successful transfers=34,", "Num successful transfers=33,");
            let mut n = 0;
            for m in &mut msgs {
                if let Msg::LogLines { source: pdtop::feed::LogOrigin::Decode(0), lines, .. } = m {
                    for l in lines.iter_mut().filter(|l| l.contains(from)) {
                        *l = l.replace(from, to);
                        n += 1;
                    }
                }
            }
            assert_eq!(n, 1);
        }
        let st = read_state(cap, msgs, full.secs, since);
        let c = &st.logs.as_ref().unwrap().correlator;
        c.traces()
            .filter(|t| t.evidence().contains("KV Transfer metrics had counted"))
            .map(|t| t.id.clone())
            .collect()
    };
    let whole = confirmed(None, false);
    assert_eq!(whole, loaded);
    let short = confirmed(None, true);
    assert_eq!(short.len(), 160 - 65);
    assert!(short.is_subset(&whole));
    for cut in [0.2, 0.4, 0.6] {
        let since = (secs(cap) * cut).round();
        let got = confirmed(Some(since), true);
        let extra: Vec<&String> = got.difference(&short).collect();
        assert!(extra.is_empty(), "since {since}: {extra:?}");
    }
}

/// What is said surely while the run is read stays so: "sure" is no
/// guess that later lines take back. Read as a live pdtop reads, every
/// capture's requests are looked at after each message; each one ever
/// given a sure verdict has it at the end. And where the truth gives
/// each request's outcome, the misses at the end are the truth's and none
/// is counted that no request could be named for. Before: a producer's lease that ran out while its decode, given
/// the params, still waited to read made a sure miss (52 loads of
/// router-nixl-1p2d, 17 failed pulls of mooncake-tcp-1p1d announced as
/// misses), and a load by params was sure before its read could fail
/// (46 of router-nixl-1p2d, 19 of nixl-1p2d-bench and of mooncake-tcp-1p1d
/// failed later).
#[test]
fn a_sure_verdict_said_during_a_reading_is_the_verdict_at_its_end() {
    let mut failed = Vec::new();
    for name in ALL {
        let cap = common::capture(name);
        let mut st = initial_state(cap, true);
        let mut said: BTreeMap<u64, (String, Outcome)> = BTreeMap::new();
        for m in read_as(cap, &Reading::from_start(secs(cap), true)) {
            st.apply(m);
            for t in st.logs.as_ref().unwrap().correlator.traces() {
                if t.confidence == Confidence::Sure && t.outcome != Outcome::Pending {
                    said.entry(t.serial).or_insert_with(|| (t.id.clone(), t.outcome));
                }
            }
        }
        st.finish(cap.t0 + secs(cap));
        let c = &st.logs.as_ref().unwrap().correlator;
        let end: BTreeMap<u64, Outcome> = c.traces().map(|t| (t.serial, t.outcome)).collect();
        let undone: Vec<String> = said
            .iter()
            .filter(|(s, (_, o))| end.get(s).is_some_and(|e| e != o))
            .map(|(s, (id, o))| format!("{id}: {o:?} -> {:?}", end[s]))
            .collect();
        if !undone.is_empty() {
            failed.push(format!("{name}: {} sure verdicts undone: {undone:#?}", undone.len()));
        }
        let truth = std::fs::read_to_string(common::capture_dir(name).join("requests.jsonl")).unwrap();
        // A load the decode recomputed (vLLM's recompute policy) is a miss too.
        let truth_misses = truth
            .lines()
            .filter(|l| l.contains(r#""outcome": "silent_miss""#) || l.contains(r#""outcome": "recomputed""#))
            .count();
        // The captures whose truth gives each request's outcome (the three
        // oldest give only the phase): there the misses are the truth's,
        // and none is counted without a request to name.
        let n = c.counts();
        let per_request = truth.contains(r#""outcome": "#);
        if per_request && (n.unattributed_misses != 0 || n.silent_miss != truth_misses as u64) {
            failed.push(format!("{name}: {n:?}, the truth's misses {truth_misses}"));
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

/// What each instance's recovery came to (after a cancel, a restart, an
/// outage): its findings, oldest first, as (kind, text).
fn recovery_findings(cap: &Capture, r: &Reading) -> Vec<(String, String)> {
    let st = read_state(cap, read_as(cap, r), r.secs, None);
    st.events
        .iter()
        .map(|e| (e.kind.name().to_string(), e.text.clone()))
        .filter(|(k, _)| {
            matches!(k.as_str(), "recovered" | "not_recovered" | "kv_not_released" | "recovery_unknown")
        })
        .collect()
}

/// A cancel is read from the decode's log, an outage and a restart from
/// its scrapes: read every 5 s, the log is seconds behind the scrapes, and
/// every capture still says what came of each the same as read every 0.25 s;
/// opened half way, the same as a reading from the start that lost the
/// same scrapes.
#[test]
fn every_capture_gives_the_same_recovery_findings_at_every_pace() {
    let mut failed = Vec::new();
    for name in ALL {
        let cap = common::capture(name);
        let whole = Reading { every: 0.25, ..Reading::from_start(secs(cap), true) };
        let want = recovery_findings(cap, &whole);
        for every in [1.0, 5.0] {
            let got = recovery_findings(cap, &Reading { every, ..whole });
            if got != want {
                failed.push(format!("{name} read every {every} s: {want:#?} -> {got:#?}"));
            }
        }
        // Opened half way: what the logs printed before is read in one gulp.
        let start = (secs(cap) * 0.5).round();
        let lost = Reading { lost_before: start, ..whole };
        let (want, got) =
            (recovery_findings(cap, &lost), recovery_findings(cap, &Reading { every: 1.0, start, ..lost }));
        if got != want {
            failed.push(format!("{name} opened {start} s in: {want:#?} -> {got:#?}"));
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}
