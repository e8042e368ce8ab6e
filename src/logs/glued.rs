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
            // After the first character, whatever its width (`→ INFO …`).
            let mut from = s.chars().next().map_or(1, char::len_utf8);
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

#[cfg(test)]
mod tests {
    use super::glued_start;

    /// A line of vLLM 0.26.0 (`request_logger.py:63`, the 2P2D capture's
    /// decode log) after text a user pasted in front of it.
    const LINE: &str = "INFO 12-01 22:06:05 [request_logger.py:63] Received request cmpl-b182411064cd37e2-0: params: SamplingParams(n=1, max_tokens=48), lora_request: None.";

    #[test]
    fn a_line_is_found_after_any_glued_text() {
        for lead in ["note: ", "→ ", "é:", "ñ\t", "progress 100% "] {
            let s = format!("{lead}{LINE}");
            assert_eq!(glued_start(&s), Some(lead.len()), "{s}");
        }
        // A line that starts as one is not glued; prose without one is none.
        assert_eq!(glued_start(LINE), None);
        assert_eq!(glued_start("→ INFO is what it says"), None);
    }
}
