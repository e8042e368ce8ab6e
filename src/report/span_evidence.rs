//! Spans against logs: what vLLM's own span of a request says, checked
//! against what the log correlator concluded for the same trace. A
//! disagreement is shown, never silently resolved: the logs' hit lines
//! carry no request id (ExampleConnector), so under concurrency they can be
//! pinned on the wrong request; the span's token counts cannot.

use crate::state::spans::Timings;
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

/// The decode instance's prompt compute per 1000 prompt tokens (from its
/// spans), for requests that certainly computed their prompt (no prefill
/// hop: nothing could have been loaded) and for requests the traces call
/// loaded (spans agreeing). Medians, ms.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Baseline {
    pub computed_ms_per_ktok: Option<f64>,
    pub computed_n: usize,
    pub loaded_ms_per_ktok: Option<f64>,
    pub loaded_n: usize,
}

/// How far apart the two baselines must be before a span's prefill time
/// alone is evidence: a connector that loads inside the model step
/// (ExampleConnector from disk) makes loading cost like computing.
pub const SEPARATION: f64 = 3.0;
/// Requests needed on each side.
const MIN_N: usize = 3;

fn ms_per_ktok(t: &Timings) -> Option<f64> {
    let d = t.decode?;
    let p = d.prompt_tokens.filter(|p| *p >= 64)?;
    Some(d.prefill? * 1e6 / f64::from(p))
}

impl Baseline {
    /// From `(trace, timings, agrees)` of every held trace.
    pub fn from_traces<'a>(rows: impl Iterator<Item = (&'a Trace, Timings<'a>, bool)>) -> Baseline {
        let (mut computed, mut loaded) = (Vec::new(), Vec::new());
        for (tr, t, agrees) in rows {
            let Some(r) = ms_per_ktok(&t) else { continue };
            if tr.prefill.is_none() && t.prefill.is_none() {
                computed.push(r);
            } else if agrees && tr.outcome == crate::traces::Outcome::Loaded {
                loaded.push(r);
            }
        }
        Baseline {
            computed_n: computed.len(),
            loaded_n: loaded.len(),
            computed_ms_per_ktok: median(computed),
            loaded_ms_per_ktok: median(loaded),
        }
    }

    /// Whether the baselines are far enough apart to judge one span.
    pub fn separates(&self) -> bool {
        match (self.computed_ms_per_ktok, self.loaded_ms_per_ktok) {
            (Some(c), Some(l)) => self.computed_n >= MIN_N && self.loaded_n >= MIN_N && c >= SEPARATION * l,
            _ => false,
        }
    }

    /// What the baselines allow, in words.
    pub fn summary(&self) -> String {
        let f = |v: Option<f64>, n| v.map_or(format!("unknown ({n})"), |v| format!("{v:.0} ms ({n})"));
        let (c, l) =
            (f(self.computed_ms_per_ktok, self.computed_n), f(self.loaded_ms_per_ktok, self.loaded_n));
        let verdict = if self.separates() {
            "a decode span whose prefill time is that of computing its prompt names a miss"
        } else {
            "too close or too few to tell a miss from a decode span's prefill time"
        };
        format!("decode prompt compute per 1k tokens: computed {c}, loaded {l}: {verdict}")
    }

    /// A request after a prefill whose decode computed its prompt, as its
    /// span shows: closer to the computed baseline than to the loaded one
    /// (geometric midpoint), when the baselines separate.
    pub fn miss_evidence(&self, trace: &Trace, t: &Timings) -> Option<String> {
        if !self.separates() || (trace.prefill.is_none() && t.prefill.is_none()) {
            return None;
        }
        let (c, l) = (self.computed_ms_per_ktok?, self.loaded_ms_per_ktok?);
        let r = ms_per_ktok(t)?;
        let d = t.decode?;
        (r >= (c * l).sqrt()).then(|| {
            format!(
                "span: the decode spent {:.0} ms on its {}-token prompt ({r:.0} ms per 1k tokens; computed {c:.0}, loaded {l:.0}): it recomputed the prompt",
                d.prefill.unwrap_or(0.0) * 1000.0,
                d.prompt_tokens.unwrap_or(0)
            )
        })
    }
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    v.sort_by(f64::total_cmp);
    (!v.is_empty()).then(|| v[v.len() / 2])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feed::RequestSpan;
    use crate::traces::Outcome;

    fn span(prompt: u32, prefill_s: f64) -> RequestSpan {
        RequestSpan {
            service: "vllm-decode".into(),
            trace_id: String::new(),
            name: "llm_request".into(),
            start: 0.0,
            end: 1.0,
            request_id: "x".into(),
            ttft: Some(prefill_s),
            queue: Some(0.0),
            prefill: Some(prefill_s),
            decode: Some(0.5),
            e2e: Some(1.0),
            prompt_tokens: Some(prompt),
            completion_tokens: Some(10),
            error: None,
        }
    }

    fn trace(prefilled: bool, outcome: Outcome) -> Trace {
        let mut t = Trace::new("t".into(), 0.0);
        t.prefill = prefilled.then_some(0);
        t.outcome = outcome;
        t
    }

    /// An async loader (NIXL): a loaded request computes a few tokens, a
    /// request with no prefill the whole prompt; a request after a prefill
    /// that took the latter's time recomputed.
    #[test]
    fn separated_baselines_name_a_recompute() {
        let computed: Vec<(Trace, RequestSpan)> = (0..4)
            .map(|i| (trace(false, Outcome::NoPrefill), span(1000 + i * 500, 0.1 * (1.0 + i as f64 * 0.5))))
            .collect();
        let loaded: Vec<(Trace, RequestSpan)> =
            (0..4).map(|i| (trace(true, Outcome::Loaded), span(1000 + i * 500, 0.01))).collect();
        let rows = computed
            .iter()
            .chain(&loaded)
            .map(|(tr, s)| (tr, Timings { prefill: None, decode: Some(s) }, true));
        let b = Baseline::from_traces(rows);
        assert!(b.separates(), "{b:?}");
        let (tr, miss) = (trace(true, Outcome::Unknown), span(2049, 0.2));
        let ev = b.miss_evidence(&tr, &Timings { prefill: None, decode: Some(&miss) }).unwrap();
        assert!(ev.contains("2049-token prompt") && ev.contains("recomputed"), "{ev}");
        let ok = span(2049, 0.012);
        assert!(b.miss_evidence(&tr, &Timings { prefill: None, decode: Some(&ok) }).is_none());
        // No prefill hop: computing was expected, not a miss.
        assert!(
            b.miss_evidence(
                &trace(false, Outcome::NoPrefill),
                &Timings { prefill: None, decode: Some(&miss) }
            )
            .is_none()
        );
    }

    #[test]
    fn close_or_few_baselines_judge_nothing() {
        let rows: Vec<(Trace, RequestSpan)> = vec![
            (trace(false, Outcome::NoPrefill), span(1000, 0.1)),
            (trace(true, Outcome::Loaded), span(1000, 0.09)),
        ];
        let b = Baseline::from_traces(
            rows.iter().map(|(tr, s)| (tr, Timings { prefill: None, decode: Some(s) }, true)),
        );
        assert!(!b.separates());
        assert!(b.summary().contains("too close or too few"));
    }
}
