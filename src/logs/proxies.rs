//! Proxy and router lines that a pasted log mixes in: vLLM's NIXL toy
//! proxy, LMCache's disagg proxy, vllm-router and sglang-router (Rust
//! `tracing`: the request id sits in the span, `request_id="..."`), and
//! llm-d's routing sidecar (klog, structured `key="value"` fields).

use super::scan::{lead_num, num_after, word_after};
use super::signal::{Signal, SignalKind as K};

/// Plain-text proxy lines (no header).
pub(crate) fn parse_proxy_text(m: &str) -> Option<Signal> {
    let m = m.trim_end();
    if let Some(r) = m.strip_prefix("Initialized ")
        && r.contains(" prefill clients and ")
    {
        return Some(
            Signal::new(K::ProxyStart)
                .text("proxy", Some("vllm-toy"))
                .num("prefill_clients", lead_num(r))
                .num("decode_clients", num_after(r, "clients and ")),
        );
    }
    if let Some(r) = m.strip_prefix("Error occurred in disagg prefill proxy server - ") {
        return Some(Signal::new(K::ProxyError).text("endpoint", r.strip_suffix(" endpoint")));
    }
    if let Some(r) = m.strip_prefix("Num requests: ") {
        return Some(Signal::new(K::ProxyStats).num("num_requests", lead_num(r)));
    }
    // LMCache proxy: labelled "(ms)" but it prints seconds.
    if let Some(r) = m.trim_start().strip_prefix("- Average (ms): ") {
        return Some(Signal::new(K::ProxyStats).num("prefill_ttft_avg_s", lead_num(r)));
    }
    None
}

/// Uvicorn's own lifecycle line worth keeping: where the server listens.
pub(crate) fn parse_uvicorn(m: &str) -> Option<Signal> {
    let r = m.strip_prefix("Uvicorn running on ")?;
    Some(Signal::new(K::ProxyListening).text("url", r.split(' ').next()))
}

/// A `tracing` line of a router: spans (with ids), target, message. The
/// span's `request_id` is the router's own (`cmpl-` + 24 base62, or the
/// client's `X-Request-Id`); vllm-router's PD mode forwards another one,
/// `___prefill_addr_<p>___decode_addr_<d>_<uuid hex>`, which it prints once
/// (`Generated vLLM request ID: ...`, DEBUG since 2026, INFO before).
pub(crate) fn parse_router(spans: &str, target: &str, msg: &str) -> Option<Signal> {
    let m = msg.trim_start_matches(|c: char| !c.is_ascii()).trim();
    let s = if let Some(r) = m.strip_prefix("Prefill response status: ") {
        Signal::new(K::RouterPrefillResponse).num("status", lead_num(r))
    } else if let Some(r) = m.strip_prefix("Decode response status: ") {
        Signal::new(K::RouterDecodeResponse).num("status", lead_num(r))
    } else if let Some((_, id)) = m.strip_prefix("Generated vLLM request ID").and_then(|r| r.split_once(": "))
    {
        // vllm_pd_router sends this, not the span's id, as `X-Request-Id`
        // to both instances: the name their logs give the request.
        Signal::new(K::RouterForwardedId).text("forwarded", Some(id.trim()))
    } else if m.starts_with("Router ready") {
        let n =
            m.split_once("workers: [").map(|(_, w)| w.split(',').filter(|x| !x.trim().is_empty()).count());
        Signal::new(K::RouterWorkers).num("workers", n.map(|n| n as f64))
    } else if let Some(r) = m.strip_prefix("Starting server on ") {
        Signal::new(K::ProxyListening).text("url", Some(r.trim()))
    } else if m.contains("route_completion called") || m.contains("route_chat called") {
        let mode = if target.contains("vllm_pd_router") { "vllm_pd" } else { "regular" };
        Signal::new(K::RouterRoute).text("mode", Some(mode))
    } else if let Some(r) = m
        .strip_prefix("Transparent proxy request failed: ")
        .or_else(|| m.strip_prefix("Two-stage processing failed: "))
    {
        // vllm-router's PD mode (`vllm_pd_router.rs`): a request it failed
        // itself, named by no id, answered 500: `prefill=<url>, decode=<url>,
        // error=<why>` (the transparent route), or just the why.
        let error = r.split_once("error=").map_or(r, |(_, e)| e).trim();
        let leg = if error.contains("Prefill request to ") || error.starts_with("Prefill") {
            Some("prefill")
        } else if error.contains("Decode request to ") || error.starts_with("Decode") {
            Some("decode")
        } else {
            None
        };
        Signal::new(K::RouterRequestFailed)
            .text("prefill", word_after(r, "prefill="))
            .text("decode", word_after(r, "decode="))
            .text("leg", leg)
            .text("error", Some(error))
            .num("status", Some(500.0))
    } else if let Some(body) = m.strip_prefix("Prefill response body content: ") {
        // Printed for every body under 1 KiB: only an error body says
        // anything (the router goes on to the decode regardless, in the
        // direct-URL mode). Its JSON holds a Python repr: nothing but the
        // code and the type is read from it.
        if !body.contains("\"error\"") {
            return None;
        }
        let kind = body.split_once("\"type\":\"").and_then(|(_, t)| t.split('"').next());
        Signal::new(K::RouterPrefillErrorBody)
            .num("status", num_after(body, "\"code\":"))
            .text("error", kind)
            .text("leg", Some("prefill"))
    } else if m.starts_with("No kv_transfer_params found in prefill response")
        || (m.starts_with("No kv_transfer_params for prefill ")
            && m.contains("decode will proceed without them"))
    {
        Signal::new(K::RouterKvParamsMissing)
    } else if let Some((leg, r)) = m.split_once(" server returned error status") {
        Signal::new(K::RouterBackendError)
            .text("leg", Some(&leg.to_ascii_lowercase()))
            .text("url", word_after(r, "_url="))
            .num("status", num_after(r, "status="))
    } else if let Some((what, id)) = dynamo_bookkeeping(m) {
        // Dynamo's KV router lost track of a request it routed: it names
        // the request, and says nothing of what its workers did with it.
        return Some(Signal::new(K::RouterBookkeeping).id(id).text("what", Some(what)));
    } else if m.starts_with("request failed") || m.starts_with("response failed with status") {
        let span = spans.rsplit('{').next().unwrap_or("");
        let status = num_after(span, "status=").or_else(|| num_after(span, "status_code="));
        Signal::new(K::RouterRequestFailed)
            .num("status", status.or_else(|| num_after(m, "with status ")))
            .num("latency_s", latency_s(span))
    } else {
        return with_ids(None, spans);
    };
    with_ids(Some(s), spans)
}

/// `latency=2.041450065s` (a `Duration`'s Debug: `s`, `ms`, `µs`, `ns`) or
/// `latency_ms=12.5`. A bare `latency=1254651` (sgl-model-gateway) names
/// no unit: not read rather than guessed.
fn latency_s(span: &str) -> Option<f64> {
    if let Some(ms) = num_after(span, "latency_ms=") {
        return Some(ms / 1000.0);
    }
    let r = &span[span.find("latency=")? + 8..];
    let n = lead_num(r)?;
    let unit = r.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
    let scale = [("ms", 1e-3), ("µs", 1e-6), ("us", 1e-6), ("ns", 1e-9), ("s", 1.0)]
        .into_iter()
        .find(|(u, _)| unit.starts_with(u))?
        .1;
    Some(n * scale)
}

/// Ids of every `request_id=` in the spans. Without a signal, the line still
/// names its request: returned as `None` here and read by `span_ids`.
fn with_ids(s: Option<Signal>, spans: &str) -> Option<Signal> {
    let mut s = s?;
    for id in span_ids(spans) {
        s = s.id(id);
    }
    Some(s)
}

pub fn span_ids(spans: &str) -> impl Iterator<Item = &str> {
    spans.split("request_id=").skip(1).map(super::signal::trim_id)
}

/// llm-d routing sidecar (klog): `"sending request to prefiller" ... url="..." body="{\"do_remote_decode\":true,...}"`,
/// `"warning: missing 'remote_block_ids' field in prefiller response"`.
pub(crate) fn parse_sidecar(msg: &str) -> Option<Signal> {
    let m = msg.strip_prefix('"')?;
    if let Some(r) = m.strip_prefix("warning: missing '") {
        return Some(Signal::new(K::SidecarMissingKvField).text("field", r.split('\'').next()));
    }
    if m.starts_with("sending request to prefiller") {
        let url = word_after(m, "url=\"").map(|u| u.trim_end_matches('"'));
        let drd = m.find("do_remote_decode\\\":").map(|i| m[i + 19..].starts_with("true"));
        return Some(
            Signal::new(K::SidecarPrefillSent)
                .text("url", url)
                .flag("do_remote_decode", drd)
                .num("max_tokens", num_after(m, "max_tokens\\\":")),
        );
    }
    None
}

/// Dynamo's KV router (`dynamo_llm::kv_router`): `Failed to free request
/// <uuid>: <why>`, `Failed to mark prefill completed for request <uuid>:
/// <why>` → (what it failed to do, the id).
fn dynamo_bookkeeping(m: &str) -> Option<(&str, &str)> {
    let r = m.strip_prefix("Failed to ")?;
    let at = r.find(" request ")?;
    let what = &r[..at];
    let id = r[at + 9..].split([':', ' ']).next()?;
    (!id.is_empty() && !what.contains(':')).then_some((what, id))
}
