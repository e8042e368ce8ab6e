//! `pdtop check` without `--json`: the same report in words, at 80
//! columns. It names what the JSON names (the outcome and verdict words,
//! every count, the ids and each miss's evidence), only shorter: lists are
//! capped with "+N more" and `--json` has them whole.

use super::{Report, TraceReport};

/// The width the summary wraps at.
pub const WIDTH: usize = 80;
/// Misses printed with their evidence before "+N more".
const MISSES_SHOWN: usize = 10;
/// Ids of the other outcomes printed before "+N more".
const IDS_SHOWN: usize = 6;
/// Lines of an instance's last error (they quote whole exceptions).
const ERROR_LINES: usize = 2;

pub fn summary(r: &Report) -> String {
    let mut out = Out::default();
    for i in &r.instances {
        let head = format!(
            "{:<8} {:<22} {} ok={} failed={} restarts={}",
            i.role.name(),
            i.endpoint,
            if i.up { "up  " } else { "DOWN" },
            i.scrapes_ok,
            i.scrapes_failed,
            i.restarts,
        );
        out.para(&head, 9);
        if let Some(e) = &i.last_error {
            out.capped(&format!("         last error: {e}"), 9, ERROR_LINES);
        }
    }
    if let Some(ro) = &r.router {
        let e = &ro.errors;
        out.para(
            &format!(
                "router   {:<22} {} ok={} failed={} restarts={} requests={:.0}",
                ro.endpoint,
                if ro.up { "up  " } else { "DOWN" },
                ro.scrapes_ok,
                ro.scrapes_failed,
                ro.restarts,
                ro.requests,
            ),
            9,
        );
        out.para(
            &format!(
                "         errors: router={:.0} prefill={:.0} decode={:.0} stream={:.0}",
                e.router, e.prefill, e.decode, e.stream
            ),
            9,
        );
        if let Some(err) = &ro.last_error {
            out.capped(&format!("         last error: {err}"), 9, ERROR_LINES);
        }
    }
    requests(&mut out, r);
    for m in &r.mismatches {
        out.para(&format!("mismatch: {}", m.why), 2);
    }
    if let Some(sp) = &r.spans {
        out.para(
            &format!(
                "spans: {} received, {} on traces, {} contradict their logs, {} bodies refused, {} dropped",
                sp.count, sp.traces_with_spans, sp.disagreements, sp.errors, sp.dropped
            ),
            2,
        );
    }
    for w in &r.warnings {
        out.para(&format!("warning: {w}"), 2);
    }
    out.para(&format!("verdict: {}", r.verdict.name()), 2);
    out.0
}

/// The counts in the JSON's words, then the traces behind them.
fn requests(out: &mut Out, r: &Report) {
    let q = &r.requests;
    out.para(&format!("requests (from {}): seen {}", r.requests_source, q.seen), 2);
    out.para(
        &format!(
            "  loaded {} silent_miss {} no_prefill {} error {} cancelled {} unknown {} pending {} stuck {}",
            q.loaded, q.silent_miss, q.no_prefill, q.error, q.cancelled, q.unknown, q.pending, q.stuck
        ),
        2,
    );
    if let Some(d) = &r.disagreement {
        out.para(&format!("  disagreement: {d}"), 4);
    }
    if r.unattributed_misses > 0 {
        out.para(
            &format!(
                "  unattributed_misses {}: known from the logs, no one request to name",
                r.unattributed_misses
            ),
            4,
        );
    }
    let of = |outcome: &'static str| r.traces.iter().filter(move |t| t.outcome == outcome);
    let misses: Vec<&TraceReport> = of("silent_miss").collect();
    if !misses.is_empty() {
        out.para(&format!("silent_miss ({}), each with its evidence:", misses.len()), 2);
        for t in misses.iter().take(MISSES_SHOWN) {
            out.para(&format!("  {} ({})", t.id, if t.sure { "sure" } else { "likely" }), 4);
            out.para(&format!("    {}", t.evidence), 4);
        }
        more(out, misses.len(), MISSES_SHOWN);
    } else if q.silent_miss > 0 {
        out.para(
            "silent_miss: counted from metrics, no request named (tail the decode log: --decode-log)",
            2,
        );
    }
    for outcome in ["error", "no_prefill", "cancelled"] {
        let ids: Vec<String> = of(outcome)
            .map(|t| match t.error_at {
                Some(at) => format!("{} (at {at})", t.id),
                None => t.id.clone(),
            })
            .collect();
        if ids.is_empty() {
            continue;
        }
        let shown = ids.iter().take(IDS_SHOWN).cloned().collect::<Vec<_>>().join(", ");
        let rest = ids.len().saturating_sub(IDS_SHOWN);
        let tail = if rest > 0 { format!(", +{rest} more") } else { String::new() };
        out.para(&format!("{outcome} ({}): {shown}{tail}", ids.len()), 2);
    }
    for u in &r.unknown_reasons {
        out.para(&format!("unknown ({}): {}", u.count, u.reason), 2);
    }
}

fn more(out: &mut Out, n: usize, shown: usize) {
    if n > shown {
        out.para(&format!("  +{} more (check --json lists every one)", n - shown), 4);
    }
}

/// Text wrapped at [`WIDTH`], continuation lines indented.
#[derive(Default)]
struct Out(String);

impl Out {
    fn para(&mut self, text: &str, indent: usize) {
        self.capped(text, indent, usize::MAX);
    }

    /// At most `max` lines, the last one ending in "…" when cut.
    fn capped(&mut self, text: &str, indent: usize, max: usize) {
        let lines = wrap(text, indent);
        let cut = lines.len() > max;
        for (n, line) in lines.into_iter().take(max).enumerate() {
            self.0.push_str(&line);
            if cut && n + 1 == max {
                self.0.push('…');
            }
            self.0.push('\n');
        }
    }
}

/// Greedy word wrap; a word longer than a line (an id, a URL) stays whole.
/// The text's own leading spaces are its first line's indent.
pub fn wrap(text: &str, indent: usize) -> Vec<String> {
    // A line that fits keeps its own spacing (the aligned columns).
    if text.chars().count() <= WIDTH {
        return vec![text.to_string()];
    }
    let lead = text.len() - text.trim_start().len();
    let mut lines = Vec::new();
    let mut line = text[..lead].to_string();
    let mut empty = true;
    for word in text.split_whitespace() {
        let w = line.chars().count();
        if !empty && w + 1 + word.chars().count() > WIDTH {
            lines.push(std::mem::replace(&mut line, " ".repeat(indent)));
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    lines.push(line);
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_at_80_with_an_indent_and_keeps_long_words_whole() {
        let text = format!("  {} {}", "word ".repeat(30), "x".repeat(90));
        let lines = wrap(&text, 4);
        assert!(lines[0].starts_with("  word"));
        assert!(lines[1].starts_with("    word"));
        assert!(lines.iter().filter(|l| !l.contains('x')).all(|l| l.chars().count() <= WIDTH));
        assert_eq!(lines.last().unwrap().trim(), "x".repeat(90));
    }
}
