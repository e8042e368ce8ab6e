//! LMCache's own lines (LMCacheConnectorV1 inside vLLM, and LMCache MP).
//! Units differ and are kept apart: `tokens` (lookups, loads, stores),
//! `memory objects` (chunks fetched from a backend), `keys` (MP prefetch:
//! chunk keys), never mixed into one number.

use super::scan::{lead_num, num_after, word_after};
use super::signal::{Signal, SignalKind as K};

pub(crate) fn parse_lmcache(msg: &str) -> Option<Signal> {
    let m = msg.trim_end();
    match *m.as_bytes().first()? {
        b'R' => reqid(m).or_else(|| retrieved(m)).or_else(|| short_retrieve(m)),
        b'T' => short_retrieve(m),
        b'S' => scheduled(m).or_else(|| storing(m)).or_else(|| stored(m)).or_else(|| sent(m)),
        b'P' => prefetch(m),
        b'L' => versions(m),
        b'Z' => zmq(m),
        b'F' => alloc_retry(m),
        _ => None,
    }
}

/// LMCache's PD receiver on the decode (`pd_backend.py`): no room for
/// an incoming transfer, tried again every 10 ms; every transfer into this
/// decode, and its prefill, waits meanwhile. Names no request.
fn alloc_retry(m: &str) -> Option<Signal> {
    m.starts_with("Failed to allocate memory object, retrying").then(|| Signal::new(K::LmcachePdAllocRetry))
}

/// `Reqid: ID, Total tokens N, LMCache hit tokens: M, need to load: K`
/// (`need to load` can be negative: vLLM already had more locally).
fn reqid(m: &str) -> Option<Signal> {
    let r = m.strip_prefix("Reqid: ")?;
    let id = r.split(',').next()?;
    Some(
        Signal::new(K::LmcacheHit)
            .id(id)
            .num("total_tokens", num_after(r, "Total tokens "))
            .num("hit_tokens", num_after(r, "hit tokens: "))
            .num("need_to_load", num_after(r, "need to load: ")),
    )
}

/// `The number of retrieved tokens is less than the expected number of
/// tokens!` after a load: fewer tokens came back than the lookup promised.
/// Since v0.3.x the adapter names the request in front, glued to the text
/// (`"Request %s" "The number..."`, vllm_v1_adapter.py): `Request X` + `The`.
fn short_retrieve(m: &str) -> Option<Signal> {
    let at = m.find("The number of retrieved tokens is less than the")?;
    let s = Signal::new(K::TransferFailed).text("connector", Some("LMCache"));
    match m[..at].strip_prefix("Request ").map(str::trim) {
        Some(id) if !id.is_empty() && !id.contains(' ') => Some(s.id(id)),
        _ => (at == 0).then_some(s),
    }
}

/// Three shapes over the versions, plus the memory-object count:
/// `Retrieved A out of [total ]B out of total C tokens`,
/// `Retrieved A out of B required tokens (from C total tokens)`,
/// `Retrieved A tokens in S seconds` (MP), `Retrieved N memory objects from X`.
fn retrieved(m: &str) -> Option<Signal> {
    let r = m.strip_prefix("Retrieved ")?;
    let a = lead_num(r)?;
    let after = r.split_once(' ').map(|(_, x)| x).unwrap_or("");
    let cost = |s: Signal| s.num("size_gb", num_after(r, "size: ")).num("cost_ms", num_after(r, "cost "));
    if let Some(o) = after.strip_prefix("memory objects from ") {
        return Some(
            Signal::new(K::LmcacheRetrievedObjects)
                .num("objects", Some(a))
                .text("backend", o.split([' ', '(']).next()),
        );
    }
    if let Some(t) = after.strip_prefix("tokens in ") {
        return Some(
            Signal::new(K::LmcacheRetrieved)
                .text("shape", Some("mp_tokens_in_seconds"))
                .num("retrieved_tokens", Some(a))
                .num("seconds", lead_num(t)),
        );
    }
    let o = after.strip_prefix("out of ")?;
    if let Some((b, c)) = o.split_once(" required tokens (from ") {
        let s = Signal::new(K::LmcacheRetrieved)
            .text("shape", Some("required_from_total"))
            .num("retrieved_tokens", Some(a))
            .num("required_tokens", lead_num(b))
            .num("total_tokens", lead_num(c));
        return Some(cost(s));
    }
    let o = o.strip_prefix("total ").unwrap_or(o);
    let (b, c) = o.split_once(" out of total ")?;
    let s = Signal::new(K::LmcacheRetrieved)
        .text("shape", Some("out_of_total_out_of_total"))
        .num("retrieved_tokens", Some(a))
        .num("required_tokens", lead_num(b))
        .num("total_tokens", lead_num(c));
    Some(cost(s))
}

fn scheduled(m: &str) -> Option<Signal> {
    let r = m.strip_prefix("Scheduled to load ")?;
    Some(Signal::new(K::LmcacheScheduledLoad).num("tokens", lead_num(r)).id(word_after(r, "for request ")?))
}

/// `Storing KV cache for A out of B tokens [(skip_leading_tokens=S) ]for request ID`.
fn storing(m: &str) -> Option<Signal> {
    let r = m.strip_prefix("Storing KV cache for ")?;
    let mut s = Signal::new(K::LmcacheStoring)
        .num("tokens", lead_num(r))
        .num("of_tokens", num_after(r, "out of "))
        .num("skip_leading_tokens", num_after(r, "skip_leading_tokens="));
    if let Some(id) = word_after(r, "for request ") {
        s = s.id(id);
    }
    Some(s)
}

/// `Stored A out of total B tokens. size: X gb, cost Y ms, ...`.
fn stored(m: &str) -> Option<Signal> {
    let r = m.strip_prefix("Stored ")?;
    Some(
        Signal::new(K::LmcacheStored)
            .num("stored_tokens", lead_num(r))
            .num("total_tokens", num_after(r, "out of total "))
            .num("size_gb", num_after(r, "size: "))
            .num("cost_ms", num_after(r, "cost ")),
    )
}

fn sent(m: &str) -> Option<Signal> {
    let r = m.strip_prefix("Sent the request with ")?;
    Some(Signal::new(K::LmcacheSent).num("keys", lead_num(r)))
}

/// MP: `Prefetch request completed (L1+L2): 12/44 retained keys (12 L1, 0 L2) in 0.5 ms (external_request_id=ID, ...)`.
fn prefetch(m: &str) -> Option<Signal> {
    let r = m.strip_prefix("Prefetch request completed")?;
    let counts = r.split_once(": ").map(|(_, c)| c)?;
    let mut s = Signal::new(K::LmcachePrefetch)
        .num("retained_keys", lead_num(counts))
        .num("requested_keys", num_after(counts, "/"))
        .num("l1", num_after(counts, "keys ("))
        .num("l2", counts.find(" L1, ").and_then(|i| lead_num(&counts[i + 5..])))
        .num("ms", num_after(counts, ") in "));
    if let Some(id) = word_after(r, "external_request_id=") {
        s = s.id(id);
    }
    Some(s)
}

/// `LMCache initialized for role KVConnectorRole.X with version V, vllm version W, ...`.
fn versions(m: &str) -> Option<Signal> {
    let r = m.strip_prefix("LMCache initialized for role ")?;
    let role = r.split(' ').next().map(|w| w.rsplit('.').next().unwrap_or(w));
    Some(
        Signal::new(K::Versions)
            .text("role", role)
            .text("lmcache", word_after(r, "with version "))
            .text("vllm", word_after(r, "vllm version ")),
    )
}

/// LMCache's disagg proxy: `ZMQ proxy server started on host:port`.
fn zmq(m: &str) -> Option<Signal> {
    let r = m.strip_prefix("ZMQ proxy server started on ")?;
    Some(Signal::new(K::ProxyStart).text("proxy", Some("lmcache-disagg")).text("zmq", r.split(' ').next()))
}
