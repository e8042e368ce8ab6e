//! The spans' part of `check --json`: what the receiver got, and per-trace
//! hop timings. Kept apart from `report.rs` so the traces' JSON can attach
//! [`TimingsReport::of`] to each trace it writes.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::report::quantiles::Quantiles;
use crate::report::span_evidence::{Baseline, disagreement};
use crate::state::AppState;
use crate::state::spans::Timings;
use crate::traces::{Outcome, Trace};

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SpansReport {
    /// Request spans received (run-long).
    pub count: u64,
    /// Request spans kept now (bounded).
    pub kept: usize,
    /// Spans whose status was ERROR.
    pub errored: u64,
    /// Export bodies refused as invalid, and the newest reasons.
    pub errors: u64,
    pub last_errors: Vec<String>,
    /// Spans lost: dropped by the receiver when pdtop fell behind, or
    /// evicted from the store.
    pub dropped: u64,
    pub evicted: u64,
    /// Other spans (vLLM's start-up spans), counted only.
    pub other: u64,
    /// Traces with at least one span joined.
    pub traces_with_spans: usize,
    /// Traces whose spans contradict their logs (see `timings[].disagreement`).
    pub disagreements: usize,
    /// Whether a decode span's prefill time can name a miss here, and the
    /// baselines it is judged against.
    pub prefill_baseline: Baseline,
    pub miss_evidence: String,
    /// Requests after a prefill whose decode span shows a recomputed
    /// prompt (`timings[].miss_evidence`); the ids the traces did not call
    /// a silent miss are spans against logs.
    pub span_misses: Vec<String>,
    pub span_misses_not_in_traces: Vec<String>,
    /// The decode instance's own TTFT (from its span) of requests whose
    /// trace says it loaded the KV, against those where it computed the
    /// prompt (silent misses and no-prefill requests).
    pub decode_ttft_ms_loaded: Option<Quantiles>,
    pub decode_ttft_ms_computed: Option<Quantiles>,
}

/// Per-hop times of one trace, in milliseconds; `null` when unknown.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct TimingsReport {
    /// Queue time of the first hop (the prefill's, in a pair).
    pub queue_ms: Option<f64>,
    /// Prompt compute of the prefill (the decode's without a prefill hop).
    pub prefill_ms: Option<f64>,
    /// The decode's queue after a prefill: with async KV loading, the
    /// wait for the transfer.
    pub transfer_wait_ms: Option<f64>,
    /// From the prefill's answer to the decode's arrival (the proxy).
    pub handoff_ms: Option<f64>,
    /// From the first hop's start to the first token of the decode.
    pub ttft_ms: Option<f64>,
    /// The decode instance's own TTFT and prompt compute: a loaded request
    /// computes one token, a recomputed prompt shows here.
    pub decode_ttft_ms: Option<f64>,
    pub decode_prefill_ms: Option<f64>,
    pub decode_ms: Option<f64>,
    pub e2e_ms: Option<f64>,
    /// The processes that own the hops (`service.name`), and their ids.
    pub prefill_service: Option<String>,
    pub decode_service: Option<String>,
    pub prefill_request_id: Option<String>,
    pub decode_request_id: Option<String>,
    pub prompt_tokens: Option<u32>,
    pub completion_tokens: Option<u32>,
    /// Where the spans contradict the trace's logs, in words.
    pub disagreement: Option<String>,
    /// The decode span shows the prompt recomputed after a prefill.
    pub miss_evidence: Option<String>,
}

fn ms(v: Option<f64>) -> Option<f64> {
    v.filter(|v| v.is_finite()).map(|v| (v * 1e4).round() / 10.0)
}

impl TimingsReport {
    pub fn from_timings(t: &Timings) -> TimingsReport {
        let d = t.decode;
        TimingsReport {
            queue_ms: ms(t.queue()),
            prefill_ms: ms(t.prefill()),
            transfer_wait_ms: ms(t.transfer_wait()),
            handoff_ms: ms(t.handoff()),
            ttft_ms: ms(t.ttft()),
            decode_ttft_ms: ms(d.and_then(|d| d.ttft)),
            decode_prefill_ms: ms(d.and_then(|d| d.prefill)),
            decode_ms: ms(t.decode()),
            e2e_ms: ms(t.e2e()),
            prefill_service: t.prefill.map(|s| s.service.clone()),
            decode_service: d.map(|s| s.service.clone()),
            prefill_request_id: t.prefill.map(|s| s.request_id.clone()),
            decode_request_id: d.map(|s| s.request_id.clone()),
            prompt_tokens: t.prefill.or(d).and_then(|s| s.prompt_tokens),
            completion_tokens: d.and_then(|s| s.completion_tokens),
            disagreement: None,
            miss_evidence: None,
        }
    }

    /// The timings of one trace, to attach to its JSON object. For many
    /// traces, compute [`baseline`] once and use [`TimingsReport::of_with`].
    pub fn of(state: &AppState, trace: &Trace) -> TimingsReport {
        TimingsReport::of_with(state, &baseline(state), trace)
    }

    pub fn of_with(state: &AppState, base: &Baseline, trace: &Trace) -> TimingsReport {
        let t = state.spans.timings_for(trace);
        let mut r = TimingsReport::from_timings(&t);
        r.disagreement = disagreement(trace, &t, state.decode_block_size());
        r.miss_evidence = base.miss_evidence(trace, &t);
        r
    }
}

impl SpansReport {
    /// `None` when no receiver ever got anything.
    pub fn from_state(state: &AppState) -> Option<SpansReport> {
        let st = &state.spans;
        let s = st.stats;
        if s.received == 0 && s.rejected == 0 && s.other == 0 && s.dropped == 0 {
            return None;
        }
        let (mut loaded, mut computed, mut joined, mut disagree) = (Vec::new(), Vec::new(), 0, 0);
        let block = state.decode_block_size();
        for tr in state.logs.iter().flat_map(|l| l.correlator.traces()) {
            let t = st.timings_for(tr);
            joined += usize::from(!t.is_empty());
            // A verdict the spans contradict is not counted either way.
            if disagreement(tr, &t, block).is_some() {
                disagree += 1;
                continue;
            }
            let Some(ttft) = t.decode.and_then(|d| d.ttft) else { continue };
            match tr.outcome {
                Outcome::Loaded => loaded.push(ttft),
                Outcome::SilentMiss | Outcome::NoPrefill => computed.push(ttft),
                _ => {}
            }
        }
        let base = baseline(state);
        let mut span_misses = Vec::new();
        let mut not_in_traces = Vec::new();
        for tr in state.logs.iter().flat_map(|l| l.correlator.traces()) {
            if base.miss_evidence(tr, &st.timings_for(tr)).is_some() {
                span_misses.push(tr.id.clone());
                if tr.outcome != Outcome::SilentMiss {
                    not_in_traces.push(tr.id.clone());
                }
            }
        }
        Some(SpansReport {
            count: s.received,
            kept: st.len(),
            errored: s.errored,
            errors: s.rejected,
            last_errors: st.errors.iter().map(|(_, e)| e.clone()).collect(),
            dropped: s.dropped,
            evicted: s.evicted,
            other: s.other,
            traces_with_spans: joined,
            disagreements: disagree,
            miss_evidence: base.summary(),
            prefill_baseline: base,
            span_misses,
            span_misses_not_in_traces: not_in_traces,
            decode_ttft_ms_loaded: quantiles_ms(loaded),
            decode_ttft_ms_computed: quantiles_ms(computed),
        })
    }
}

/// The decode's prompt-compute baselines over the held traces.
pub fn baseline(state: &AppState) -> Baseline {
    let block = state.decode_block_size();
    let rows = state.logs.iter().flat_map(|l| l.correlator.traces()).map(|tr| {
        let t = state.spans.timings_for(tr);
        let agrees = disagreement(tr, &t, block).is_none();
        (tr, t, agrees)
    });
    Baseline::from_traces(rows)
}

/// Timings of every held trace that has spans, by trace id (until each
/// trace object of the report carries its own).
pub fn timings_by_trace(state: &AppState) -> BTreeMap<String, TimingsReport> {
    let Some(logs) = &state.logs else { return BTreeMap::new() };
    let base = baseline(state);
    logs.correlator
        .traces()
        .filter(|tr| !state.spans.timings_for(tr).is_empty())
        .map(|tr| (tr.id.clone(), TimingsReport::of_with(state, &base, tr)))
        .collect()
}

/// Exact quantiles (nearest rank) of seconds, in milliseconds.
pub fn quantiles_ms(mut v: Vec<f64>) -> Option<Quantiles> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    let r = |x: f64| (x * 1e4).round() / 10.0;
    Some(Quantiles {
        count: v.len() as u64,
        p50: r(at(0.5)),
        p90: r(at(0.9)),
        p99: r(at(0.99)),
        mean: r(v.iter().sum::<f64>() / v.len() as f64),
    })
}
