//! Spans against logs: what vLLM's own span of a request says, checked
//! against what the log correlator concluded for the same trace. A
//! disagreement is shown, never silently resolved: the logs' hit lines
//! carry no request id (ExampleConnector), so under concurrency they can be
//! pinned on the wrong request; the span's token counts cannot.

use super::spans::Timings;
use crate::traces::{Join, Trace};

/// Why the spans contradict the trace, in words; `None` when they agree
/// or cannot tell. `block` is the decode instance's KV block size.
pub fn disagreement(trace: &Trace, t: &Timings, block: Option<u32>) -> Option<String> {
    if let (Some(p), Some(d)) = (t.prefill, t.decode)
        && let (Some(pt), Some(dt)) = (p.prompt_tokens, d.prompt_tokens)
        && pt != dt
    {
        let how = if trace.join == Join::ByOrder { "paired by arrival order" } else { "joined" };
        return Some(format!(
            "spans: the prefill saw {pt} prompt tokens and the decode {dt}: not one request, though the logs {how} them"
        ));
    }
    let (inject, prompt) = (trace.inject_tokens?, t.decode?.prompt_tokens?);
    if inject > prompt {
        return Some(format!(
            "spans: the decode request has {prompt} prompt tokens, so the logged Inject of {inject} tokens belongs to another request"
        ));
    }
    // A full load covers the prompt's whole blocks: less than that by more
    // than a block is a partial hit or another request's hit line.
    let block = block.filter(|b| *b > 0)?;
    if inject + block <= prompt {
        return Some(format!(
            "spans: the logged Inject of {inject} tokens covers less than the {prompt}-token prompt's blocks: \
             another request's hit line, or a partial load"
        ));
    }
    None
}
