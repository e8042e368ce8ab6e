//! The `traces` part of the `check --json` report: one object per request
//! the correlator holds.

use serde::Serialize;

use crate::feed::Role;
use crate::state::AppState;

/// One request, as `check --json` reports it.
#[derive(Debug, Clone, Serialize)]
pub struct TraceReport {
    /// The forwarded `X-Request-Id`, else the response id the client got
    /// from decode (`cmpl-…`, `chatcmpl-…`), else the prefill's, else a
    /// name pdtop gave it (`proxy-error-3`).
    pub id: String,
    /// Every id vLLM logged for it, per instance.
    pub vllm_ids: Vec<VllmId>,
    /// `loaded`, `silent_miss`, `no_prefill`, `error`, `cancelled`, `unknown`, `pending`.
    pub outcome: &'static str,
    pub sure: bool,
    /// Read from the logs' past: it happened before pdtop started.
    pub before_start: bool,
    /// The decode endpoint that served it (or that it was sent to).
    pub decode: Option<String>,
    /// The prefill endpoint that ran its prefill copy.
    pub prefill: Option<String>,
    /// How its prefill and decode sides were put together: `id` (a shared
    /// or named id), `prompt_tokens` (same prompt length, no other
    /// candidate), `order` (arrival order: a guess); null with one side.
    pub join: Option<&'static str>,
    /// `proxy`, `prefill`, `connector` or `decode` for an error.
    pub error_at: Option<&'static str>,
    pub evidence: String,
    /// Joined by prompt length among several prefill copies of that
    /// length, each giving the verdict: the others (its own is in `vllm_ids`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub other_copies: Vec<String>,
    /// Seconds its decode was still seen waiting for remote KV when it was
    /// judged stuck (null: not stuck).
    pub stuck_s: Option<f64>,
    /// Per-hop times from vLLM's spans (each `null` without them).
    pub timings: crate::report::spans::TimingsReport,
    /// The KV bytes it should have moved and did (null when nothing says).
    pub kv_bytes: Option<crate::report::kv::KvBytes>,
}

/// What every trace's report reads, built once per report.
pub struct TraceContext {
    pub base: crate::report::span_evidence::Baseline,
    pub ledger: crate::report::kv_bytes::Ledger,
}

impl TraceContext {
    pub fn new(state: &AppState) -> TraceContext {
        TraceContext {
            base: crate::report::spans::baseline(state),
            ledger: crate::report::kv_bytes::build(state),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct VllmId {
    /// The instance's endpoint (`127.0.0.1:8200`).
    pub instance: String,
    pub id: String,
}

impl TraceReport {
    pub fn from_trace(t: &crate::traces::Trace, state: &AppState, cx: &TraceContext) -> TraceReport {
        use crate::traces::{Confidence, Hop, Outcome};
        let outcome = t.outcome.name();
        let error_at = t.error_at.filter(|_| t.outcome == Outcome::Error).map(Hop::name);
        TraceReport {
            id: t.id.clone(),
            vllm_ids: t
                .engine_ids
                .iter()
                .map(|(o, id)| VllmId { instance: origin_endpoint(state, *o), id: id.clone() })
                .collect(),
            outcome,
            sure: t.confidence == Confidence::Sure,
            before_start: state.before_start(t),
            decode: t.decode.map(|i| origin_endpoint(state, crate::feed::LogOrigin::Decode(i))),
            prefill: t.prefill.map(|i| origin_endpoint(state, crate::feed::LogOrigin::Prefill(i))),
            join: (t.prefill.is_some() && t.decode.is_some()).then_some(match t.join {
                crate::traces::Join::ById => "id",
                crate::traces::Join::ByPromptTokens => "prompt_tokens",
                crate::traces::Join::ByOrder => "order",
            }),
            error_at,
            evidence: t.evidence(),
            other_copies: t
                .reasons
                .iter()
                .find_map(|r| match r {
                    crate::traces::Reason::PairedAmong { copies, .. } => Some(copies.clone()),
                    _ => None,
                })
                .unwrap_or_default(),
            stuck_s: t.remote_wait.as_ref().and_then(|w| w.stuck_secs()),
            timings: crate::report::spans::TimingsReport::of_with(state, &cx.base, t),
            kv_bytes: crate::report::kv::kv_bytes_for(&cx.ledger, &t.id),
        }
    }
}

/// The endpoint a log origin belongs to (`decode#1` → its `--decode`).
pub fn origin_endpoint(state: &AppState, o: crate::feed::LogOrigin) -> String {
    use crate::feed::LogOrigin;
    let found = match o {
        LogOrigin::Prefill(i) => state.instances_of(Role::Prefill).nth(i),
        LogOrigin::Decode(i) => state.instances_of(Role::Decode).nth(i),
        LogOrigin::Proxy => None,
    };
    found.map_or_else(|| o.to_string(), |i| i.endpoint.display.clone())
}

/// Why requests stay unknown: how many share each reason.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct UnknownReason {
    pub count: u64,
    pub reason: String,
}

/// The unknown traces grouped by their first reason's first clause (the
/// part before any id list), most frequent first.
pub fn unknown_reasons<'a>(traces: impl Iterator<Item = &'a crate::traces::Trace>) -> Vec<UnknownReason> {
    let mut by: Vec<UnknownReason> = Vec::new();
    for t in traces.filter(|t| t.outcome == crate::traces::Outcome::Unknown) {
        let reason = t.reasons.first().map(|r| r.headline()).unwrap_or_default();
        match by.iter_mut().find(|r| r.reason == reason) {
            Some(r) => r.count += 1,
            None => by.push(UnknownReason { count: 1, reason }),
        }
    }
    by.sort_by_key(|r| std::cmp::Reverse(r.count));
    by
}
