//! The `traces` part of the `check --json` report: one object per request
//! the correlator holds.

use serde::Serialize;

use super::{AppState, Role};

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
    /// The decode endpoint that served it (or that it was sent to).
    pub decode: Option<String>,
    /// `proxy`, `prefill`, `connector` or `decode` for an error.
    pub error_at: Option<&'static str>,
    pub evidence: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct VllmId {
    /// The instance's endpoint (`127.0.0.1:8200`).
    pub instance: String,
    pub id: String,
}

impl TraceReport {
    pub fn from_trace(t: &crate::traces::Trace, state: &AppState) -> TraceReport {
        use crate::traces::{Confidence, Hop, Outcome};
        let outcome = match t.outcome {
            Outcome::Loaded => "loaded",
            Outcome::SilentMiss => "silent_miss",
            Outcome::NoPrefill => "no_prefill",
            Outcome::Error => "error",
            Outcome::Cancelled => "cancelled",
            Outcome::Unknown => "unknown",
            Outcome::Pending => "pending",
        };
        let error_at = t.error_at.filter(|_| t.outcome == Outcome::Error).map(|h| match h {
            Hop::Proxy => "proxy",
            Hop::Producer => "prefill",
            Hop::Connector => "connector",
            Hop::Consumer => "decode",
        });
        TraceReport {
            id: t.id.clone(),
            vllm_ids: t
                .engine_ids
                .iter()
                .map(|(o, id)| VllmId { instance: origin_endpoint(state, *o), id: id.clone() })
                .collect(),
            outcome,
            sure: t.confidence == Confidence::Sure,
            decode: t.decode.map(|i| origin_endpoint(state, crate::feed::LogOrigin::Decode(i))),
            error_at,
            evidence: t.evidence.clone(),
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

/// The unknown traces grouped by the first clause of their evidence (the
/// part before any id list), most frequent first.
pub fn unknown_reasons<'a>(traces: impl Iterator<Item = &'a crate::traces::Trace>) -> Vec<UnknownReason> {
    let mut by: Vec<UnknownReason> = Vec::new();
    for t in traces.filter(|t| t.outcome == crate::traces::Outcome::Unknown) {
        let cut = t.evidence.find(" (").unwrap_or(t.evidence.len());
        let reason = t.evidence[..cut].to_string();
        match by.iter_mut().find(|r| r.reason == reason) {
            Some(r) => r.count += 1,
            None => by.push(UnknownReason { count: 1, reason }),
        }
    }
    by.sort_by_key(|r| std::cmp::Reverse(r.count));
    by
}
