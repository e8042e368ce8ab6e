//! What pdtop keeps of an OpenTelemetry span: vLLM's per-request
//! `llm_request` span, reduced to the attributes pdtop reads. Compact on
//! purpose: a recording holds these as they are.

use serde::{Deserialize, Serialize};

/// One request span as an instance exported it. Times are seconds;
/// a latency the span did not carry is `None`, never 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestSpan {
    /// `service.name` of the exporting process (`OTEL_SERVICE_NAME`).
    pub service: String,
    /// 32 hex digits; shared by every hop when a proxy propagates `traceparent`.
    pub trace_id: String,
    pub name: String,
    /// Unix seconds.
    pub start: f64,
    pub end: f64,
    /// `gen_ai.request.id`: the instance's request id without the engine
    /// suffix (`cmpl-<id>-0`, `chatcmpl-<id>`).
    pub request_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens: Option<u32>,
    /// The span's status was ERROR (with its message, if any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a batch of exports carried besides request spans.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpanCounts {
    /// Spans without `gen_ai.request.id` (vLLM's start-up spans): counted, not kept.
    #[serde(default)]
    pub other: u64,
    /// Request spans the receiver dropped because the app fell behind.
    #[serde(default)]
    pub dropped: u64,
}
