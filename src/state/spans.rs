//! vLLM's own request spans (OTLP), kept apart from the log correlator and
//! joined to its traces at read time ([`SpanStore::timings_for`]): by the
//! instance's request id (`gen_ai.request.id`), then by trace id when a
//! proxy propagated `traceparent`. Bounded: the oldest spans drop first.

use std::collections::{HashMap, VecDeque};

use crate::feed::{LogOrigin, RequestSpan, Role, SpanCounts};
use crate::traces::Trace;

/// Spans kept: two per request (prefill and decode) for as many requests
/// as the correlator keeps traces.
pub const SPANS_CAP: usize = 2 * crate::traces::KEPT_REQUESTS;
/// Rejected export errors kept for display.
const ERRORS_CAP: usize = 10;

#[derive(Debug, Clone, Default)]
pub struct SpanStore {
    spans: VecDeque<RequestSpan>,
    /// Serial of `spans[0]`; serials index the maps below.
    first: u64,
    by_request: HashMap<String, Vec<u64>>,
    by_trace: HashMap<String, Vec<u64>>,
    pub stats: SpanStats,
    /// The newest rejected exports: (when, why).
    pub errors: VecDeque<(f64, String)>,
    cap: usize,
}

/// Run-long counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpanStats {
    /// Request spans received.
    pub received: u64,
    /// Of those, spans whose status was ERROR.
    pub errored: u64,
    /// Other spans (start-up spans): counted, not kept.
    pub other: u64,
    /// Dropped by the receiver (the app fell behind) or evicted here.
    pub dropped: u64,
    pub evicted: u64,
    /// Export bodies refused (not a valid export request).
    pub rejected: u64,
}

/// The spans of one trace's hops, as found.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Timings<'a> {
    pub prefill: Option<&'a RequestSpan>,
    pub decode: Option<&'a RequestSpan>,
}

/// Which role a process is, from its `service.name` (`OTEL_SERVICE_NAME`),
/// when the name says so.
pub fn service_role(service: &str) -> Option<Role> {
    let s = service.to_ascii_lowercase();
    if s.contains("prefill") || s.contains("producer") {
        Some(Role::Prefill)
    } else if s.contains("decode") || s.contains("consumer") {
        Some(Role::Decode)
    } else {
        None
    }
}

impl SpanStore {
    pub fn new(cap: usize) -> SpanStore {
        SpanStore { cap: cap.max(1), ..SpanStore::default() }
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Entries in the indexes (bounded with the spans).
    pub fn index_entries(&self) -> usize {
        self.by_request.values().chain(self.by_trace.values()).map(Vec::len).sum()
    }

    pub fn on_spans(&mut self, spans: Vec<RequestSpan>, counts: SpanCounts) {
        self.stats.other += counts.other;
        self.stats.dropped += counts.dropped;
        for s in spans {
            self.stats.received += 1;
            self.stats.errored += u64::from(s.error.is_some());
            self.push(s);
        }
    }

    pub fn on_rejected(&mut self, at: f64, error: String) {
        self.stats.rejected += 1;
        self.errors.push_back((at, error));
        while self.errors.len() > ERRORS_CAP {
            self.errors.pop_front();
        }
    }

    fn push(&mut self, s: RequestSpan) {
        if self.cap == 0 {
            self.cap = SPANS_CAP;
        }
        while self.spans.len() >= self.cap {
            self.evict();
        }
        let serial = self.first + self.spans.len() as u64;
        self.by_request.entry(s.request_id.clone()).or_default().push(serial);
        if !s.trace_id.is_empty() {
            self.by_trace.entry(s.trace_id.clone()).or_default().push(serial);
        }
        self.spans.push_back(s);
    }

    fn evict(&mut self) {
        let Some(old) = self.spans.pop_front() else { return };
        let serial = self.first;
        self.first += 1;
        self.stats.evicted += 1;
        for (map, key) in [(&mut self.by_request, &old.request_id), (&mut self.by_trace, &old.trace_id)] {
            if let Some(v) = map.get_mut(key.as_str()) {
                v.retain(|s| *s != serial);
                if v.is_empty() {
                    map.remove(key.as_str());
                }
            }
        }
    }

    fn get(&self, serial: u64) -> Option<&RequestSpan> {
        self.spans.get(serial.checked_sub(self.first)? as usize)
    }

    /// Spans carrying this request id, newest last.
    pub fn by_request(&self, id: &str) -> impl Iterator<Item = &RequestSpan> {
        self.by_request.get(id).into_iter().flatten().filter_map(|s| self.get(*s))
    }

    fn by_trace_id(&self, trace_id: &str) -> impl Iterator<Item = &RequestSpan> {
        self.by_trace.get(trace_id).into_iter().flatten().filter_map(|s| self.get(*s))
    }

    /// The hop spans of a trace. Each vLLM id the trace's logs carry is
    /// looked up (with the engine's `-<8 hex>` suffix dropped); a span
    /// belongs to the hop whose log named the id unless its service name
    /// says another role (with a forwarded `X-Request-Id` both instances
    /// share one id). A hop still missing is found through the trace id
    /// of the other one (a proxy that propagates `traceparent`).
    pub fn timings_for(&self, trace: &Trace) -> Timings<'_> {
        let mut t = Timings::default();
        for (origin, id) in &trace.engine_ids {
            let role = match origin {
                LogOrigin::Prefill(_) => Role::Prefill,
                LogOrigin::Decode(_) => Role::Decode,
                LogOrigin::Proxy => continue,
            };
            // A reused id (a looping client) has a span per request: the
            // one nearest this trace's own time on that hop is its own.
            let hop = trace.phases.iter().find(|p| p.source == *origin).map_or(trace.first_seen, |p| p.start);
            let found = self
                .by_request(external_id(id))
                .filter(|s| service_role(&s.service).is_none_or(|r| r == role))
                .min_by(|a, b| (a.start - hop).abs().total_cmp(&(b.start - hop).abs()));
            if let Some(s) = found {
                *slot(&mut t, role) = Some(s);
            }
        }
        let known = t.decode.or(t.prefill);
        if let Some(k) = known.filter(|_| t.prefill.is_none() || t.decode.is_none()) {
            for s in self.by_trace_id(&k.trace_id).filter(|s| !std::ptr::eq(*s, k)) {
                // Without a role in the name, the earlier span is the prefill.
                let role = service_role(&s.service).unwrap_or(if s.start < k.start {
                    Role::Prefill
                } else {
                    Role::Decode
                });
                slot(&mut t, role).get_or_insert(s);
            }
        }
        t
    }
}

fn slot<'a, 'b>(t: &'b mut Timings<'a>, role: Role) -> &'b mut Option<&'a RequestSpan> {
    match role {
        Role::Prefill => &mut t.prefill,
        Role::Decode => &mut t.decode,
    }
}

/// An internal id (`cmpl-x-0-<8 hex>`) to the external one spans carry.
fn external_id(id: &str) -> &str {
    match id.rsplit_once('-') {
        Some((b, t)) if !b.is_empty() && t.len() == 8 && t.bytes().all(|c| c.is_ascii_hexdigit()) => b,
        _ => id,
    }
}

impl Timings<'_> {
    pub fn is_empty(&self) -> bool {
        self.prefill.is_none() && self.decode.is_none()
    }

    /// When the first hop began (unix seconds).
    pub fn start(&self) -> Option<f64> {
        match (self.prefill, self.decode) {
            (Some(p), Some(d)) => Some(p.start.min(d.start)),
            (p, d) => p.or(d).map(|s| s.start),
        }
    }

    /// Queue time of the first hop.
    pub fn queue(&self) -> Option<f64> {
        self.prefill.or(self.decode)?.queue
    }

    /// Prompt compute: on the prefill instance, or on decode when no
    /// prefill hop is known.
    pub fn prefill(&self) -> Option<f64> {
        self.prefill.or(self.decode)?.prefill
    }

    /// The decode's queue time after a prefill: with async KV loading
    /// (NIXL, Mooncake) the wait for the transfer falls there.
    pub fn transfer_wait(&self) -> Option<f64> {
        self.prefill?;
        self.decode?.queue
    }

    /// From the prefill's answer to the decode's arrival: the proxy's turn.
    pub fn handoff(&self) -> Option<f64> {
        let (p, d) = (self.prefill?, self.decode?);
        Some((d.start - p.end).max(0.0))
    }

    /// From the first hop's start to the decode's first token: the TTFT
    /// the client sees, less the network and the proxy's own start.
    pub fn ttft(&self) -> Option<f64> {
        let d = self.decode?;
        let first = d.start + d.ttft?;
        Some(first - self.start()?)
    }

    pub fn decode(&self) -> Option<f64> {
        self.decode?.decode
    }

    pub fn e2e(&self) -> Option<f64> {
        match (self.prefill, self.decode) {
            (Some(p), Some(d)) => Some(d.end.max(p.end) - p.start.min(d.start)),
            (p, d) => {
                let s = p.or(d)?;
                s.e2e.or(Some(s.end - s.start))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn span(service: &str, id: &str, trace: &str, start: f64) -> RequestSpan {
        RequestSpan {
            service: service.into(),
            trace_id: trace.into(),
            name: "llm_request".into(),
            start,
            end: start + 1.0,
            request_id: id.into(),
            ttft: Some(0.2),
            queue: Some(0.01),
            prefill: Some(0.1),
            decode: Some(0.7),
            e2e: Some(1.0),
            prompt_tokens: Some(100),
            completion_tokens: Some(10),
            error: None,
        }
    }

    #[test]
    fn bounded_and_indexes_follow_eviction() {
        let mut st = SpanStore::new(3);
        for i in 0..10 {
            st.on_spans(
                vec![span("vllm-decode", &format!("cmpl-{i}-0"), &format!("t{i}"), i as f64)],
                SpanCounts::default(),
            );
        }
        assert_eq!(st.len(), 3);
        assert_eq!(st.index_entries(), 6);
        assert_eq!(st.stats.evicted, 7);
        assert!(st.by_request("cmpl-0-0").next().is_none());
        assert_eq!(st.by_request("cmpl-9-0").count(), 1);
    }

    #[test]
    fn roles_from_service_names() {
        assert_eq!(service_role("vllm-prefill"), Some(Role::Prefill));
        assert_eq!(service_role("Decode-1"), Some(Role::Decode));
        assert_eq!(service_role("vllm"), None);
        assert_eq!(external_id("cmpl-abc-0-0123abcd"), "cmpl-abc-0");
        assert_eq!(external_id("chatcmpl-abc"), "chatcmpl-abc");
    }
}
