//! An OTLP export request reduced to the request spans pdtop reads.

use super::proto::{AnyValue, ExportTraceServiceRequest, KeyValue, STATUS_CODE_ERROR, Span, Value};

use crate::feed::RequestSpan;

/// The attribute that makes a span a request span (vLLM's `llm_request`).
pub const REQUEST_ID: &str = "gen_ai.request.id";

/// The request spans of an export, and how many other spans it carried.
pub fn request_spans(req: &ExportTraceServiceRequest) -> (Vec<RequestSpan>, u64) {
    let mut out = Vec::new();
    let mut other = 0;
    for rs in &req.resource_spans {
        let service = rs
            .resource
            .as_ref()
            .and_then(|r| find(&r.attributes, "service.name"))
            .and_then(text)
            .unwrap_or_else(|| "unknown_service".to_string());
        for span in rs.scope_spans.iter().flat_map(|s| &s.spans) {
            match request_span(&service, span) {
                Some(s) => out.push(s),
                None => other += 1,
            }
        }
    }
    (out, other)
}

fn request_span(service: &str, span: &Span) -> Option<RequestSpan> {
    let a = &span.attributes;
    let request_id = find(a, REQUEST_ID).and_then(text).filter(|s| !s.is_empty())?;
    let num = |k: &str| find(a, k).and_then(number).filter(|v| v.is_finite() && *v >= 0.0);
    let count = |k: &str| num(k).map(|v| v.min(u32::MAX as f64) as u32);
    let error = span
        .status
        .as_ref()
        .filter(|s| s.code == STATUS_CODE_ERROR)
        .map(|s| if s.message.is_empty() { "error".to_string() } else { s.message.clone() });
    Some(RequestSpan {
        service: service.to_string(),
        trace_id: hex(&span.trace_id),
        name: span.name.clone(),
        start: span.start_time_unix_nano as f64 / 1e9,
        end: span.end_time_unix_nano as f64 / 1e9,
        request_id,
        ttft: num("gen_ai.latency.time_to_first_token"),
        queue: num("gen_ai.latency.time_in_queue"),
        prefill: num("gen_ai.latency.time_in_model_prefill"),
        decode: num("gen_ai.latency.time_in_model_decode"),
        e2e: num("gen_ai.latency.e2e"),
        prompt_tokens: count("gen_ai.usage.prompt_tokens"),
        completion_tokens: count("gen_ai.usage.completion_tokens"),
        error,
    })
}

fn find<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a AnyValue> {
    attrs.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.as_ref())
}

fn text(v: &AnyValue) -> Option<String> {
    match v.value.as_ref()? {
        Value::StringValue(s) => Some(s.clone()),
        Value::IntValue(i) => Some(i.to_string()),
        _ => None,
    }
}

/// Latencies are doubles and counts ints in vLLM; either is accepted
/// (another exporter may differ), and a number written as text.
fn number(v: &AnyValue) -> Option<f64> {
    match v.value.as_ref()? {
        Value::DoubleValue(d) => Some(*d),
        Value::IntValue(i) => Some(*i as f64),
        Value::StringValue(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
