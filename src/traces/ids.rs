//! Request ids as vLLM rewrites them, reduced to the id the client knows.
//!
//! `X-Request-Id: lab-steady-3` becomes `cmpl-lab-steady-3-0` in vLLM's
//! `Received request` line (completions: `-<prompt index>` appended;
//! chat: `chatcmpl-lab-steady-3`) and `cmpl-lab-steady-3-0-<8 hex>` in
//! `Added request` (the engine's internal id). Without a forwarded id each
//! instance invents `cmpl-<32 hex>-0`, different on prefill and decode.

/// The client-side id of an external (`Received`) id.
pub fn base_id(external: &str) -> &str {
    if let Some(rest) = external.strip_prefix("chatcmpl-") {
        return non_empty_or(rest, external);
    }
    if let Some(rest) = external.strip_prefix("cmpl-") {
        // Exactly one `-<prompt index>`: the base itself may end in `-<n>`.
        let base = match rest.rsplit_once('-') {
            Some((b, n)) if !b.is_empty() && !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()) => b,
            _ => rest,
        };
        return non_empty_or(base, external);
    }
    external
}

/// The key a trace is filed under: the forwarded id when there is one
/// (`lab-steady-3`), else the response id the client got (`cmpl-9f…`),
/// since the instance invented the id and that is the only name the user
/// can find.
pub fn trace_key(external: &str) -> String {
    let b = base_id(external);
    if looks_random(b) { response_id(external) } else { b.to_string() }
}

/// The id a client receives in the response (`"id"`) for an external id:
/// `cmpl-9f…` for `cmpl-9f…-0` (one prompt), `chatcmpl-…` unchanged.
pub fn response_id(external: &str) -> String {
    if let Some(rest) = external.strip_prefix("cmpl-")
        && let Some((b, n)) = rest.rsplit_once('-')
        && !b.is_empty()
        && !n.is_empty()
        && n.bytes().all(|c| c.is_ascii_digit())
    {
        return format!("cmpl-{b}");
    }
    external.to_string()
}

fn non_empty_or<'a>(s: &'a str, fallback: &'a str) -> &'a str {
    if s.is_empty() { fallback } else { s }
}

/// The external id of an internal one (drops the engine's `-<8 hex>`), for
/// ids that arrive without their `Added` line (NIXL `remote_request_id`,
/// `Releasing expired KV blocks for request ...`).
pub fn external_of_internal(internal: &str) -> &str {
    match internal.rsplit_once('-') {
        Some((b, t)) if !b.is_empty() && t.len() == 8 && t.bytes().all(|c| c.is_ascii_hexdigit()) => b,
        _ => internal,
    }
}

/// The API an id was minted by: `chatcmpl-` (chat) or `cmpl-` (completions).
pub fn api_of(id: &str) -> Option<&'static str> {
    ["chatcmpl-", "cmpl-"].into_iter().find(|p| id.starts_with(p))
}

/// The id prefix vLLM gives a request of this API path (`/v1/chat/completions`).
pub fn api_of_path(path: &str) -> Option<&'static str> {
    match path.split('?').next().unwrap_or(path).trim_end_matches('/') {
        "/v1/chat/completions" => Some("chatcmpl-"),
        "/v1/completions" => Some("cmpl-"),
        _ => None,
    }
}

/// Whether a base id could be vLLM's own: `random_uuid()` is a uuid4's
/// 32 hex digits without dashes (16 since 0.12). A dashed uuid is some
/// proxy's (NIXL's toy proxy forwards `str(uuid4())` to both sides), so it
/// is shared across instances and never paired by order.
pub fn invented(base: &str) -> bool {
    matches!(base.len(), 16 | 32) && base.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether a base id looks random (a uuid, with or without dashes): the
/// client never chose it, so the trace is named by the response id.
pub fn looks_random(base: &str) -> bool {
    let hex: usize = base.bytes().filter(|b| *b != b'-').count();
    hex >= 16 && base.bytes().all(|b| b == b'-' || b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bases() {
        assert_eq!(base_id("cmpl-lab-steady-3-0"), "lab-steady-3");
        assert_eq!(base_id("cmpl-lab-x-0-0"), "lab-x-0");
        assert_eq!(base_id("chatcmpl-abc"), "abc");
        assert_eq!(base_id("cmpl-"), "cmpl-");
        assert_eq!(base_id("cmpl--0"), "-0");
        assert_eq!(base_id("plain"), "plain");
        assert_eq!(external_of_internal("cmpl-a-0-0123abcd"), "cmpl-a-0");
        assert_eq!(response_id("cmpl-9d3f201b9676b9f3-0"), "cmpl-9d3f201b9676b9f3");
        assert_eq!(response_id("chatcmpl-9890aac7d33b3580"), "chatcmpl-9890aac7d33b3580");
        assert_eq!(response_id("cmpl--0"), "cmpl--0");
        assert_eq!(external_of_internal("cmpl-a-0"), "cmpl-a-0");
        assert!(looks_random("0123456789abcdef0123456789abcdef"));
        assert!(looks_random("01234567-89ab-cdef-0123-456789abcdef"));
        // vLLM's own ids carry no dashes; a dashed uuid was forwarded.
        assert!(invented("0123456789abcdef0123456789abcdef"));
        assert!(invented("9d3f201b9676b9f3"));
        assert!(!invented("01234567-89ab-cdef-0123-456789abcdef"));
        assert!(!invented("lab-steady-3"));
        assert!(!invented("0123456789abcdef0"));
        assert!(!looks_random("lab-steady-3"));
        assert!(!looks_random("deadbeef"));
    }

    /// The trace a line's printed id is filed under, per shape: the id the
    /// client knows (engine suffix and choice index off; a forwarded id bare).
    #[test]
    fn trace_keys_per_shape() {
        let key = |printed: &str| trace_key(external_of_internal(printed));
        for (printed, want) in [
            ("cmpl-3da205a6-1c3c-41b5-aeaa-b8421e81fd5c-0", "cmpl-3da205a6-1c3c-41b5-aeaa-b8421e81fd5c"),
            ("chatcmpl-95f443c92d6709b3-a7e574bd", "chatcmpl-95f443c92d6709b3"),
            (
                "chatcmpl-35663437383837622d373633362d3464-b6f0b5ab",
                "chatcmpl-35663437383837622d373633362d3464",
            ),
            ("973ca62f1bc3666d", "973ca62f1bc3666d"),
            ("8f07dfc0-1c2d-4e5f-8a9b-0c1d2e3f4a5b", "8f07dfc0-1c2d-4e5f-8a9b-0c1d2e3f4a5b"),
            ("ba310df4-f600-441c-a0b5-0cb772aaf8ed-8b8ee10a", "ba310df4-f600-441c-a0b5-0cb772aaf8ed"),
            ("cmpl-lab-steady-3-0-0123abcd", "lab-steady-3"),
            (
                "cmpl-___prefill_addr_10.0.0.11:21001___decode_addr_10.0.0.21:22001_9b1f3c5e7a0d4b2c8e6f1a3b5c7d9e0f-0",
                "___prefill_addr_10.0.0.11:21001___decode_addr_10.0.0.21:22001_9b1f3c5e7a0d4b2c8e6f1a3b5c7d9e0f",
            ),
        ] {
            assert_eq!(key(printed), want, "{printed}");
        }
    }
}
