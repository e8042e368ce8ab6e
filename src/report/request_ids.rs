//! Every id a user can copy for one request, and the search over them: the
//! id the client or proxy sent (or the response id), each instance's vLLM
//! ids (`cmpl-…-0`, `cmpl-…-0-<8 hex>`, `chatcmpl-…`), and its spans' trace
//! and request ids. A P2pNccl tensor id (`<request id>#<layer>`, V0's
//! `<request id>kv`) finds the request it carries.

use crate::feed::LogOrigin;
use crate::state::AppState;
use crate::state::spans::SpanStore;
use crate::traces::Trace;
use crate::traces::{external_of_internal, response_id};

/// Where an id comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdKind {
    /// The id the trace is filed under: the client's or proxy's
    /// `X-Request-Id`, else the response id, else one pdtop gave it.
    Request,
    /// vLLM's id as one instance logged it.
    Vllm(LogOrigin),
    /// The same vLLM id logged by two instances (a forwarded id is the
    /// prefill's and the decode's alike).
    VllmBoth(LogOrigin, LogOrigin),
    /// The trace id of its OTLP spans (`traceparent`).
    SpanTrace,
    /// The request id a span carries (`gen_ai.request.id`) that no log gave.
    SpanRequest,
    /// Found by when it arrived (`@HH:MM:SS TOKENS`, `arrival.rs`): its
    /// rank by nearness, and for the nearest how sure it is the one.
    Arrival { rank: usize, confidence: Option<crate::traces::Confidence> },
}

impl IdKind {
    pub fn label(self) -> String {
        match self {
            IdKind::Request => "request id".into(),
            IdKind::Vllm(o) => format!("{o} vLLM id"),
            IdKind::VllmBoth(a, b) => format!("{a} and {b} vLLM id"),
            IdKind::SpanTrace => "span trace id".into(),
            IdKind::SpanRequest => "span request id".into(),
            IdKind::Arrival { rank: 0, confidence: Some(c) } => {
                format!("arrival: the nearest, {} the request sent then", c.word())
            }
            IdKind::Arrival { rank, .. } => format!("arrival: {} nearest", ordinal(rank + 1)),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId {
    pub kind: IdKind,
    pub id: String,
}

/// The ids its logs gave it: the one it is filed under (no origin), then
/// vLLM's per instance.
fn log_ids(t: &Trace) -> impl Iterator<Item = (Option<LogOrigin>, &str)> {
    let own = std::iter::once((None, t.id.as_str()));
    own.chain(t.engine_ids.iter().map(|(o, id)| (Some(*o), id.as_str())))
}

/// Every id of a trace, its own first: each once per instance (with a
/// forwarded id both log the same), a span's only where no log gave it.
pub fn ids_of(spans: &SpanStore, t: &Trace) -> Vec<RequestId> {
    let mut out: Vec<RequestId> = Vec::new();
    let mut push = |kind, id: &str| {
        let seen = |r: &RequestId| r.id == id && (r.kind == kind || !matches!(kind, IdKind::Vllm(_)));
        if !id.is_empty() && !out.iter().any(seen) {
            out.push(RequestId { kind, id: id.to_string() });
        }
    };
    for (origin, id) in log_ids(t) {
        push(origin.map_or(IdKind::Request, IdKind::Vllm), id);
    }
    let tm = spans.timings_for(t);
    for s in [tm.prefill, tm.decode].into_iter().flatten() {
        push(IdKind::SpanTrace, &s.trace_id);
        push(IdKind::SpanRequest, &s.request_id);
    }
    out
}

/// What a pasted query is looked for as: itself, and the request id inside
/// a P2pNccl tensor id, with and without the engine's `-<8 hex>`. Lower
/// case; the quotes and the full stop a copy from a log line brings are
/// dropped. Empty for an empty query.
pub fn needles(query: &str) -> Vec<String> {
    let q = query.trim().trim_matches(|c: char| matches!(c, '"' | '\'' | '.' | ',' | ';')).to_lowercase();
    if q.is_empty() {
        return Vec::new();
    }
    let mut out = vec![q.clone()];
    // p2p_nccl_engine.py: `tensor_id = request_id + "#" + layer_name`;
    // the V0 prototype: `request_id + "kv"` (the id ends in its `-<n>`).
    let tensor = q.split('#').next().unwrap_or(&q);
    let tensor = match tensor.strip_suffix("kv") {
        Some(b) if b.ends_with(|c: char| c.is_ascii_digit()) => b,
        _ => tensor,
    };
    for n in [tensor, external_of_internal(tensor)] {
        if !n.is_empty() && !out.iter().any(|o| o == n) {
            out.push(n.to_string());
        }
    }
    out
}

/// The first id of `t` a needle is part of.
pub fn find_in(spans: &SpanStore, t: &Trace, needles: &[String]) -> Option<RequestId> {
    let hit = |id: &str| {
        let id = id.to_lowercase();
        needles.iter().any(|n| id.contains(n.as_str()))
    };
    // The logs' ids first: no span lookup for most rows. The most exact
    // needle first (the whole query, then what is inside it): a pasted
    // decode id is the decode's own, not the base id both sides logged.
    // An id two instances logged alike is said to be both's.
    let exact =
        needles.iter().find_map(|n| log_ids(t).find(|(_, id)| id.to_lowercase().contains(n.as_str())));
    if let Some((o, id)) = exact {
        let also = log_ids(t).find_map(|(p, other)| p.filter(|p| Some(*p) != o && other == id));
        let kind = match (o, also) {
            (None, _) => IdKind::Request,
            (Some(a), Some(b)) => IdKind::VllmBoth(a, b),
            (Some(a), None) => IdKind::Vllm(a),
        };
        return Some(RequestId { kind, id: id.to_string() });
    }
    ids_of(spans, t).into_iter().find(|r| hit(&r.id))
}

/// The held traces any of whose ids contains the query, newest first, each
/// with the id that matched; every trace (and no id) for an empty query.
/// Those with an id that is the whole query come first: a pasted
/// `lab-steady-3` (or `cmpl-lab-steady-3`) selects that request, not
/// `lab-steady-31`.
pub fn search<'a>(state: &'a AppState, query: &str) -> Vec<(&'a Trace, Option<RequestId>)> {
    let Some(logs) = &state.logs else { return Vec::new() };
    if let Some(q) = super::arrival::parse(query) {
        let (found, confidence) = super::arrival::candidates(state, &q);
        return found
            .into_iter()
            .enumerate()
            .map(|(rank, (t, _))| {
                let kind = IdKind::Arrival { rank, confidence: confidence.filter(|_| rank == 0) };
                (t, Some(RequestId { kind, id: t.id.clone() }))
            })
            .collect();
    }
    let needles = needles(query);
    let all = logs.correlator.traces().rev();
    if needles.is_empty() {
        return all.map(|t| (t, None)).collect();
    }
    let mut found: Vec<_> =
        all.filter_map(|t| find_in(&state.spans, t, &needles).map(|m| (t, Some(m)))).collect();
    // An id, or the response id the client got for it (`cmpl-x` of `cmpl-x-0`).
    let whole = |t: &Trace| {
        log_ids(t).any(|(_, id)| {
            let resp = response_id(id);
            needles.iter().any(|n| id.eq_ignore_ascii_case(n) || resp.eq_ignore_ascii_case(n))
        })
    };
    // Stable: newest first within each group.
    found.sort_by_key(|(t, _)| !whole(t));
    found
}

fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, x) if x != 11 => "st",
        (2, x) if x != 12 => "nd",
        (3, x) if x != 13 => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A forwarded id: the prefill and the decode log the same vLLM id; a
    /// search for it says it is both's, not the prefill's alone. The
    /// decode's own engine id is the decode's.
    #[test]
    fn an_id_both_sides_logged_is_labelled_both() {
        let mut t = Trace::new("lab-steady-3".into(), 0.0);
        t.engine_ids = vec![
            (LogOrigin::Prefill(0), "cmpl-lab-steady-3-0".into()),
            (LogOrigin::Decode(0), "cmpl-lab-steady-3-0".into()),
            (LogOrigin::Decode(0), "cmpl-lab-steady-3-0-1a2b3c4d".into()),
        ];
        let spans = SpanStore::new(8);
        let found = find_in(&spans, &t, &needles("cmpl-lab-steady-3-0")).unwrap();
        assert_eq!(found.kind.label(), "prefill#0 and decode#0 vLLM id");
        let found = find_in(&spans, &t, &needles("1a2b3c4d")).unwrap();
        assert_eq!(found.kind, IdKind::Vllm(LogOrigin::Decode(0)));
        // A whole engine id, pasted: its own side, not the base id's two.
        t.engine_ids.push((LogOrigin::Prefill(0), "cmpl-lab-steady-3-0-9f8e7d6c".into()));
        let found = find_in(&spans, &t, &needles("cmpl-lab-steady-3-0-1a2b3c4d")).unwrap();
        assert_eq!(found.kind.label(), "decode#0 vLLM id");
        let found = find_in(&spans, &t, &needles("cmpl-lab-steady-3-0-9f8e7d6c")).unwrap();
        assert_eq!(found.kind.label(), "prefill#0 vLLM id");
    }

    #[test]
    fn a_tensor_id_is_looked_for_as_its_request_id() {
        let v1 = "cmpl-1f2e3d4c5b6a7988-0-0a1b2c3d#model.layers.3.self_attn.attn";
        assert_eq!(
            needles(v1),
            vec![v1.to_string(), "cmpl-1f2e3d4c5b6a7988-0-0a1b2c3d".into(), "cmpl-1f2e3d4c5b6a7988-0".into()]
        );
        assert_eq!(needles("cmpl-x-0kv")[1], "cmpl-x-0");
        // `kv` after a letter is part of the id.
        assert_eq!(needles("lab-kv"), vec!["lab-kv".to_string()]);
        assert_eq!(needles(" \"ChatCmpl-AB\". "), vec!["chatcmpl-ab".to_string()]);
        assert!(needles("  ").is_empty());
    }
}
