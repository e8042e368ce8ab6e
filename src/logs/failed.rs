//! `AsyncLLM.generate` (`vllm/v1/engine/async_llm.py`, every v1 release;
//! with `--enable-log-requests`) names a request whose generation did not
//! finish, by the exception that ended it:
//! `Request %s failed (engine dead).` (`EngineDeadError`),
//! `Request %s failed (bad request).` (`ValueError`; in later releases
//! `VLLMClientError`/`GracefulHTTPError`: validation or admission refused it)
//! and `Request %s failed.` (anything else: it aborts the request and raises
//! `EngineGenerateError`). `%s` is the id the API server gave it.

/// The request's id and why it failed: `engine dead`, `bad request` or
/// `unexpected error`.
pub fn request_failed(msg: &str) -> Option<(&str, &'static str)> {
    let r = msg.strip_prefix("Request ")?.trim_end();
    let r = r.strip_suffix('.').unwrap_or(r);
    let (id, why) = [
        (" failed (engine dead)", "engine dead"),
        (" failed (bad request)", "bad request"),
        (" failed", "unexpected error"),
    ]
    .into_iter()
    .find_map(|(tail, why)| r.strip_suffix(tail).map(|id| (id, why)))?;
    (!id.is_empty() && !id.contains(' ')).then_some((id, why))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The engine-dead line is real (demo-proxy-qwen3, vLLM 0.26.0,
    /// `vllm-decode.log`); the other two are rendered from the format
    /// strings of `AsyncLLM.generate` at vllm-project/vllm 8ef0b5f5
    /// (`vllm/v1/engine/async_llm.py`) with that line's id.
    #[test]
    fn each_wording_of_a_failed_generate() {
        let id = "cmpl-be795e55122ce50d-0";
        assert_eq!(request_failed(&format!("Request {id} failed (engine dead).")), Some((id, "engine dead")));
        assert_eq!(request_failed(&format!("Request {id} failed (bad request).")), Some((id, "bad request")));
        assert_eq!(request_failed(&format!("Request {id} failed.")), Some((id, "unexpected error")));
        assert_eq!(request_failed(&format!("Request {id} aborted.")), None);
        assert_eq!(request_failed("Request failed."), None);
        assert_eq!(request_failed("Request to the prefill server failed."), None);
    }
}
