//! The prompt text some vLLM lines print: read only when the user asks
//! for it (`--show-prompts`), redacted from recordings otherwise.

use super::pyrepr::Cursor;

/// Longest prompt text kept when prompts are asked for (`--show-prompts`).
pub const MAX_PROMPT_CHARS: usize = 300;

/// The prompt a line prints, with its request id: `Received request <id>:
/// prompt: '...'` (≤0.11) or `Request <id> details: prompt: '...'` (DEBUG,
/// ≥0.14). Only called when the user asked to see prompts; the normal
/// parser never keeps them.
pub fn prompt_of(line: &str) -> Option<(String, String)> {
    let (id, start, end) = prompt_span(line)?;
    let text: String = line[start..end].chars().take(MAX_PROMPT_CHARS).collect();
    Some((id, text))
}

/// The line with its prompt text (if it prints one) replaced, so that a
/// recording does not carry users' prompts unless asked to.
pub fn redact_prompt(line: &str) -> Option<String> {
    let (_, start, end) = prompt_span(line)?;
    Some(format!("{}'<prompt hidden by pdtop>'{}", &line[..start], &line[end..]))
}

/// (request id, byte range of the prompt's repr) in a line that prints one.
fn prompt_span(line: &str) -> Option<(String, usize, usize)> {
    let (id, rest) = if let Some(i) = line.find("Received request ") {
        let r = &line[i + "Received request ".len()..];
        let (id, rest) = r.split_once(": ")?;
        (id, rest)
    } else {
        let i = line.find("] Request ")?;
        let r = &line[i + "] Request ".len()..];
        let (id, rest) = r.split_once(" details: ")?;
        (id, rest)
    };
    let p = rest.strip_prefix("prompt: ")?;
    let mut c = Cursor::new(p);
    if !c.skip_value() {
        return None;
    }
    let start = line.len() - p.len();
    let end = line.len() - c.rest().len();
    Some((id.to_string(), start, end))
}
