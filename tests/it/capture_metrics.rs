//! The metrics path on the real recordings: the parser keeps every `vllm:`
//! sample, the decode restart is one restart with no negative rate, and the
//! metrics-only miss detector finds the misses the phase tables describe.

use crate::common;

use pdtop::metrics::model::{Counter, Hist, InstanceSample};
use pdtop::metrics::parse::parse;
use pdtop::report::{Report, Verdict};

#[test]
fn parser_keeps_every_vllm_sample_of_every_scrape() {
    for cap in common::CAPTURES {
        let rows = common::scrapes(cap);
        let mut bodies = 0;
        for (_, _, body, _) in &rows {
            let Some(body) = body else { continue };
            bodies += 1;
            let expected = body.lines().filter(|l| l.starts_with("vllm:")).count();
            let all_samples = body.lines().filter(|l| !l.is_empty() && !l.starts_with('#')).count();
            let e = parse(body);
            let kept = e.samples.iter().filter(|s| s.name.starts_with("vllm:")).count();
            assert_eq!(kept, expected, "{cap}: vllm samples kept");
            assert_eq!(e.samples.len(), all_samples, "{cap}: all samples kept");
            assert_eq!(e.bad_line_count, 0, "{cap}: bad lines in a real scrape");
            assert!(expected > 100, "{cap}: a real scrape has many vllm samples");
        }
        assert!(bodies > 200, "{cap}: {bodies} scrapes");
    }
}

#[test]
fn exact_values_from_decode_metrics_end() {
    let text =
        std::fs::read_to_string(common::capture_dir("qwen3-shape-restart").join("decode-metrics-end.txt"))
            .unwrap();
    let e = parse(&text);
    let find = |name: &str, label: Option<(&str, &str)>| {
        e.samples
            .iter()
            .find(|s| s.name == name && label.is_none_or(|(k, v)| s.label(k).as_deref() == Some(v)))
            .map(|s| s.value)
    };
    assert_eq!(find("vllm:external_prefix_cache_hits_total", None), Some(17920.0));
    assert_eq!(find("vllm:prompt_tokens_by_source_total", Some(("source", "local_compute"))), Some(80.0));
    assert_eq!(find("vllm:time_to_first_token_seconds_sum", None), Some(2.395949125289917));
    assert_eq!(find("process_start_time_seconds", None), Some(1.79602001199e9));
    let sample = InstanceSample::from_exposition(&e);
    assert_eq!(sample.block_size, Some(16));
    assert_eq!(sample.model_name.as_deref(), Some("lab-8b"));
    assert_eq!(sample.kv_usage, Some(0.0));
    assert_eq!(sample.counters[&Counter::PromptExternal], 17920.0);
    assert_eq!(sample.counters[&Counter::RequestsOk], 12.0);
    assert_eq!(sample.hists[&Hist::Ttft].total(), 12.0);
    assert_eq!(sample.tpot_source, Some("vllm:request_time_per_output_token_seconds"));
    // The computed-token histogram that the miss detector reads.
    assert_eq!(sample.hists[&Hist::KvComputedTokens].sum, 80.0);
}

#[test]
fn decode_restart_is_one_restart_and_no_rate_is_negative() {
    for cap in common::CAPTURES {
        let st = common::replay_scrapes(cap);
        let decode = &st.instances[1];
        assert_eq!(decode.health.restarts, 1, "{cap}");
        assert_eq!(st.instances[0].health.restarts, 0, "{cap}: prefill never restarted");
        assert!(decode.health.scrapes_failed > 50, "{cap}: about 53 s down at 0.5 s");
        for inst in &st.instances {
            for iv in &inst.history {
                for (c, v) in &iv.counters {
                    assert!(*v >= 0.0, "{cap}: {c:?} delta {v} at {}", iv.t);
                }
                for (h, hist) in &iv.hists {
                    assert!(hist.counts.iter().all(|c| *c >= 0.0), "{cap}: {h:?} at {}", iv.t);
                    assert!(hist.count >= 0.0 && hist.sum >= 0.0);
                }
            }
        }
    }
}

#[test]
fn metrics_alone_find_the_silent_misses() {
    let st = common::replay_scrapes("qwen3-shape-restart");
    let r = Report::from_state(&st);
    // Truth (README phase table): 8 misses (edge_block + mismatch), 8
    // decode-only requests (warmup + baseline), 60 loaded.
    assert_eq!(r.requests.silent_miss, 8);
    assert_eq!(r.requests.no_prefill, 8);
    assert!((59..=60).contains(&r.requests.loaded), "{:?}", r.requests);
    assert_eq!(r.verdict, Verdict::SilentMisses);
    // The steady phase's signature: transferred KV dwarfs local compute.
    assert!(r.decode_prompt_tokens.external_kv_transfer > 80_000.0);

    let st = common::replay_scrapes("nixl-llama-shape");
    let r = Report::from_state(&st);
    assert_eq!(r.requests.silent_miss, 4);
    assert_eq!(r.requests.no_prefill, 8);
    // Over loopback TCP the transfer made decode TTFT worse than computing.
    let (loaded, computed) = (r.decode_ttft_ms_loaded.unwrap(), r.decode_ttft_ms_computed.unwrap());
    assert!(loaded.p50 > 4.0 * computed.p50, "{loaded:?} vs {computed:?}");
}

/// Replays the scrapes as a scraper with its own timing would see them:
/// every `stride`-th recorded tick, the decode instance read `skew` seconds
/// after (or before) the prefill instance.
fn replay_skewed(cap: &str, skew: f64, stride: usize) -> pdtop::state::AppState {
    use pdtop::feed::Msg;
    let mut st = pdtop::state::AppState::new(common::pair_endpoints(), 60.0);
    let mut rows: Vec<(f64, usize, Option<String>)> = common::scrapes(cap)
        .into_iter()
        .enumerate()
        .filter(|(i, _)| (i / 2) % stride == 0)
        .map(|(_, (t, inst, body, _))| {
            let decode = inst == "decode";
            let at = if decode { t + skew.max(0.0) } else { t - skew.min(0.0) };
            (at, usize::from(decode), body)
        })
        .collect();
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (at, instance, body) in rows {
        st.apply(match body {
            Some(body) => Msg::Scrape { instance, at, body },
            None => Msg::ScrapeFailed { instance, at, error: "refused".into() },
        });
    }
    st
}

#[test]
fn metrics_detector_never_cries_wolf_whatever_the_scrape_timing() {
    // Skews up to the recording's 0.5 s resolution, scrapes every 0.5-1.5 s.
    for (cap, truth) in [("qwen3-shape-restart", 8), ("nixl-llama-shape", 4)] {
        for skew in [-0.5, -0.25, 0.0, 0.25, 0.5] {
            for stride in 1..=3 {
                let o = replay_skewed(cap, skew, stride).misses.outcomes;
                let at = format!("{cap} skew {skew} stride {stride}: {o:?}");
                assert!(o.silent_miss <= truth, "{at}");
                // Where it cannot tell which prefill was whose, it says
                // unknown. A prefill's body stamped half a second after it
                // was read (negative skew) makes its completions look later
                // than they were, which may hide one miss.
                let hidden = u64::from(skew < 0.0);
                assert!(o.silent_miss + o.unknown + hidden >= truth, "{at}");
                assert!(o.unknown <= 2, "{at}");
            }
        }
    }
}

/// Scrapes as pdtop takes them of a lab serving the recording: each
/// instance read every `period` from its own `phase`, seeing the recorded
/// body of `lag` seconds before (the prefill's read racing the decode's at
/// the instant both bodies change), stamped with the read's time.
fn replay_phased(cap: &str, period: f64, phases: &[f64], lags: &[f64]) -> pdtop::traces::Counts {
    use pdtop::feed::Msg;
    let capture = common::capture(cap);
    let mut st = pdtop::lab::replay::initial_state(capture, false);
    let mut reads: Vec<(f64, usize, Msg)> = Vec::new();
    for i in 0..capture.instances.len() {
        let rows: Vec<_> = capture.scrapes.iter().filter(|r| r.instance == i).collect();
        let (phase, lag) = (phases[i % phases.len()], lags[i % lags.len()]);
        let mut k = 0.0;
        loop {
            let at = capture.t0 + phase + k * period;
            if at > capture.t_end + period {
                break;
            }
            k += 1.0;
            let Some(row) = rows.iter().rev().find(|r| r.t <= at - lag) else { continue };
            let msg = match &row.body {
                Some(body) => Msg::Scrape { instance: i, at, body: body.clone() },
                None => Msg::ScrapeFailed { instance: i, at, error: "refused".into() },
            };
            reads.push((at, i, msg));
        }
    }
    reads.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    for (_, _, msg) in reads {
        st.apply(msg);
    }
    st.finish(capture.t_end + 2.0 * period);
    st.misses.outcomes
}

/// The phases and read races a live pdtop may meet: both roles at one
/// instant, either a quarter period ahead, each on its own phase, and the
/// prefill's read just before the bodies change while the decode's is
/// just after.
const PHASES: [(&[f64], &[f64]); 5] = [
    (&[0.0], &[0.0]),
    (&[0.0, 0.25], &[0.0]),
    (&[0.25, 0.0], &[0.0]),
    (&[0.1, 0.4, 0.3], &[0.0]),
    (&[0.0], &[0.05, 0.0]),
];

/// The metrics-only count of silent misses at every phase of the two
/// roles' scrapes, at 0.5 and 1 s: never above the recording's truth, and
/// what it cannot settle is unknown, never "no prefill" (misses plus
/// unknowns reach the truth), for a few requests only. With both roles
/// read at one instant at the recording's own pace, it is the truth.
#[test]
fn metrics_count_is_never_above_the_truth_at_any_scrape_phase() {
    for (cap, truth) in [("qwen3-shape-restart", 8), ("nixl-llama-shape", 4), ("demo-proxy-qwen3", 8)] {
        for period in [0.5, 1.0] {
            for (phases, lags) in PHASES {
                let o = replay_phased(cap, period, phases, lags);
                let at = format!("{cap} every {period} s, phases {phases:?}, lags {lags:?}: {o:?}");
                assert!(o.silent_miss <= truth, "{at}");
                assert!(o.silent_miss + o.unknown >= truth, "{at}");
                assert!(o.unknown <= 5, "{at}");
                if period == 0.5 && phases == [0.0] && lags == [0.0] {
                    assert_eq!((o.silent_miss, o.unknown), (truth, 0), "{at}");
                }
            }
        }
    }
}

/// The same for one prefill and two decodes (truth: 7 silent misses).
#[test]
fn metrics_count_of_one_prefill_two_decodes_at_every_scrape_phase() {
    for period in [0.5, 1.0] {
        for (phases, lags) in PHASES {
            let o = replay_phased("example-1p2d-demo-proxy", period, phases, lags);
            let at = format!("every {period} s, phases {phases:?}, lags {lags:?}: {o:?}");
            assert!(o.silent_miss <= 7, "{at}");
            assert!(o.silent_miss + o.unknown >= 7, "{at}");
            assert!(o.unknown <= 2, "{at}");
        }
    }
}

/// Reading only the names pdtop lists (`read_names`: all the Prometheus
/// query asks for, all a scrape's model keeps) reads the same as reading
/// every series: no name the model uses is missing from the list; and
/// skipping the other lines unparsed (`from_text`) reads the same again.
/// Every real scrape of every capture, and every connector's recorded
/// families.
#[test]
fn read_names_cover_everything_a_real_scrape_is_read_for() {
    use pdtop::metrics::model::is_read;
    let mut bodies: Vec<String> = Vec::new();
    for cap in common::CAPTURES {
        bodies.extend(common::scrapes(cap).into_iter().filter_map(|(_, _, body, _)| body));
    }
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/connector-metrics");
    for f in std::fs::read_dir(&dir).unwrap() {
        bodies.push(std::fs::read_to_string(f.unwrap().path()).unwrap());
    }
    let (mut kept, mut all) = (0, 0);
    for body in &bodies {
        let e = parse(body);
        let whole = InstanceSample::from_exposition_unfiltered(&e);
        assert_eq!(InstanceSample::from_exposition(&e), whole);
        assert_eq!(InstanceSample::from_text(body), whole);
        all += e.samples.len();
        kept += e.samples.iter().filter(|s| is_read(s.name)).count();
    }
    assert!(bodies.len() > 400, "{} scrapes", bodies.len());
    // The cut is worth making: most of a vLLM scrape is not read.
    assert!(kept * 2 < all, "{kept} of {all} samples read");
}

/// vLLM observes the computed tokens of every finished request, the
/// failed ones too. In router-nixl-1p2d the prefill was killed with 27
/// loads in flight on decode (policy `fail`: errors, a whole prompt each
/// in the histogram) and 21 on decode2 (policy `recompute`: answered, the
/// prompt computed: the misses). Read as a metrics-only pdtop would, the
/// metrics count the 27 as errors and never as misses.
#[test]
fn metrics_count_failed_loads_as_errors_not_misses() {
    use pdtop::lab::replay::{Reading, initial_state, read_as};
    let cap = common::capture("router-nixl-1p2d");
    let secs = cap.t_end - cap.t0;
    let mut st = initial_state(cap, false);
    for m in read_as(cap, &Reading::from_start(secs, false)) {
        st.apply(m);
    }
    st.finish(cap.t_end);
    let o = st.misses.outcomes;
    assert_eq!((o.error, o.silent_miss), (27, 21), "{o:?}");
    // Each finished request once: the answered and the failed.
    assert_eq!(o.seen, o.loaded + o.silent_miss + o.no_prefill + o.unknown + o.error, "{o:?}");
}

/// The same at every phase of the instances' scrapes: never a failed load
/// counted as a miss; at most 10 of the 208 unknown (3 at 0.5 s, 10 at
/// 1 s, where more requests share an interval).
#[test]
fn metrics_count_failed_loads_as_errors_at_every_scrape_phase() {
    for period in [0.5, 1.0] {
        for (phases, lags) in PHASES {
            let o = replay_phased("router-nixl-1p2d", period, phases, lags);
            let at = format!("every {period} s, phases {phases:?}, lags {lags:?}: {o:?}");
            assert_eq!(o.error, 27, "{at}");
            assert!(o.silent_miss <= 21, "{at}");
            assert!(o.silent_miss + o.unknown >= 21, "{at}");
            assert!(o.unknown <= 10, "{at}");
        }
    }
}

/// The two detectors held to each other on router-nixl-1p2d, read whole
/// with its logs: the 21 recomputed loads are misses on both sides, and
/// the 52 loads whose KV expired before the decode read it (`Releasing
/// expired KV blocks ... retrieved by 0`, then `Potentially invalid KV
/// blocks ... retrieved by a decode worker`) are no miss known to either.
#[test]
fn the_cross_check_on_the_router_capture_agrees() {
    use pdtop::lab::replay::{Reading, initial_state, read_as};
    let cap = common::capture("router-nixl-1p2d");
    let mut st = initial_state(cap, true);
    for m in read_as(cap, &Reading::from_start(cap.t_end - cap.t0, true)) {
        st.apply(m);
    }
    st.finish(cap.t_end);
    let c = st.logs.as_ref().unwrap().correlator.counts();
    assert_eq!((c.silent_miss, c.unattributed_misses), (21, 0), "{c:?}");
    // Read from the start, nothing began before pdtop did: the router's
    // lines are placed by their own stamps (they were all put at the
    // recording's first instant: 243 requests "from before it").
    assert_eq!(c.before_start, 0, "{c:?}");
    let r = Report::from_state(&st);
    assert_eq!(r.disagreement, None, "{:?}", r.requests);
    let app = pdtop::app::App::new(st, pdtop::theme::Theme::builtin("dark").unwrap());
    let text = common::screen_text(&app, 120, 40);
    let line = text.lines().find(|l| l.contains("metrics")).unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("metrics agree: 21 silent miss(es)") && !line.contains('⚠'), "{line}");
}
