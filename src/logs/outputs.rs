//! `--enable-log-outputs` (vLLM ≥ 0.10, chat endpoint): `RequestLogger.log_outputs`
//! prints `Generated response %s%s: output: %r, output_token_ids: %s,
//! finish_reason: %s` (≤ 0.24; `vllm/entrypoints/serve/utils/request_logger.py`
//! at e6643eca) or `Generated response %s%s: output: %r, finish_reason: %s`
//! (0.29 on), and at DEBUG `Generated response %s%s details: ...` (0.33).
//! The second `%s` is `""` (a plain response, logged once it is whole),
//! `" (streaming delta)"` (one chunk) or `" (streaming complete)"` (the
//! stream's last word, `finish_reason: streaming_complete`).

use super::signal::{Signal, SignalKind};

/// A response's sure end: the plain or `(streaming complete)` line, with
/// the request id and whether it was a stream. A delta is not an end.
pub fn response_done(msg: &str) -> Option<Signal> {
    let r = msg.strip_prefix("Generated response ")?;
    let end = r.find([' ', ':'])?;
    let (id, rest) = r.split_at(end);
    let (streaming, tail) = match rest.strip_prefix(" (streaming complete)") {
        Some(t) => (true, t),
        None => (false, rest),
    };
    if id.is_empty() || !(tail.starts_with(": output: ") || tail.starts_with(" details: ")) {
        return None;
    }
    // The output is a repr and may hold anything: the last field is the real one.
    let reason = msg.rfind(", finish_reason: ").map(|i| msg[i + 17..].trim_end());
    Some(
        Signal::new(SignalKind::ResponseDone)
            .id(id)
            .flag("streaming", Some(streaming))
            .text("finish_reason", reason),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logs::signal::Val;

    /// Rendered from the format string at vllm-project/vllm e6643eca
    /// (`vllm/entrypoints/serve/utils/request_logger.py`), with the
    /// arguments `serving_chat.py` passes for a finished stream.
    #[test]
    fn ends_and_deltas() {
        let done = "Generated response chatcmpl-9ae5adeffe24036b (streaming complete): output: '<streaming_complete: 48 tokens>', output_token_ids: None, finish_reason: streaming_complete";
        let s = response_done(done).unwrap();
        assert_eq!(s.ids, vec!["chatcmpl-9ae5adeffe24036b"]);
        assert_eq!(s.get("streaming"), Some(&Val::Bool(true)));
        assert_eq!(s.get("finish_reason"), Some(&Val::Text("streaming_complete".into())));
        let plain = "Generated response chatcmpl-xyz: output: 'ok, finish_reason: x', finish_reason: length";
        let s = response_done(plain).unwrap();
        assert_eq!((s.ids[0].as_str(), s.get("streaming")), ("chatcmpl-xyz", Some(&Val::Bool(false))));
        assert_eq!(s.get("finish_reason"), Some(&Val::Text("length".into())));
        let delta = "Generated response chatcmpl-xyz (streaming delta): output: '!', output_token_ids: [6313], finish_reason: None";
        assert!(response_done(delta).is_none());
        assert!(response_done("Generated response").is_none());
    }
}
