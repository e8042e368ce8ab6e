//! Text glued in front of a vLLM line (a paste with a sentence before it,
//! a progress bar, another line's end) and Python loggers routed through a
//! Rust `tracing` subscriber (Dynamo's workers): where the vLLM line is.

use super::prefix::{peel, split_vllm_header, starts_with_vllm_header};

/// Where a vLLM line starts inside text glued in front of it: a process
/// prefix that leads to a header, or a header after a space or a colon.
/// `None` when the text is no vLLM line, or starts as one.
pub(super) fn glued_start(s: &str) -> Option<usize> {
    if starts_with_vllm_header(s) || s.starts_with('(') {
        return None;
    }
    let process = s.find(" pid=").and_then(|i| s[..i].rfind('(')).filter(|&i| {
        let q = peel(&s[i..]);
        q.process.is_some() && split_vllm_header(q.rest).is_some()
    });
    let header = ["INFO ", "WARNING ", "ERROR ", "DEBUG ", "CRITICAL ", "WARN "]
        .iter()
        .filter_map(|w| {
            let mut from = 1;
            while let Some(k) = s.get(from..)?.find(w) {
                let i = from + k;
                let before = s.as_bytes()[i - 1];
                if matches!(before, b' ' | b':' | b'\t') && split_vllm_header(&s[i..]).is_some() {
                    return Some(i);
                }
                from = i + 1;
            }
            None
        })
        .min();
    match (process, header) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A tracing target that is a Python module (`vllm.v1.engine.async_llm`),
/// not a Rust path: the line is a Python logger's.
pub(super) fn python_module(target: &str) -> bool {
    !target.is_empty()
        && !target.contains("::")
        && target.contains('.')
        && target.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
}
