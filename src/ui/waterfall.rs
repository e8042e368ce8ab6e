//! Where one request's time went, from vLLM's own spans: a waterfall of
//! proxy → prefill (queue, prefill) → connector (hand-off, transfer wait)
//! → decode (queue, prompt, first token, decode), each bar to scale.
//! Also the Requests view's span columns and their sort.
//!
//! ```text
//!  where the time went (vLLM spans)   0 ────────────── 1.00 s
//!  proxy     first hop → last    ├──────────────────┤  1.00 s
//!  prefill   vllm-prefill        ░███─                 289 ms
//!  connector hand-off, wait          ─▒                 27 ms
//!  decode    vllm-decode              ░█▓▓▓▓▓▓▓▓▓▓▓▓  1000 ms
//! ```

use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::fmt;
use crate::state::spans::{SpanStore, Timings};
use crate::theme::Theme;
use crate::traces::Trace;

/// Label columns before the bars, and the duration after them.
const LABEL: usize = 48;
const DUR: usize = 9;

/// One stretch of a bar: from, to (unix seconds), the cell drawn, its style role.
type Seg = (f64, f64, char, &'static str);

/// The waterfall's lines, `width` columns wide; none when the trace has no span.
pub fn lines(t: &Timings, width: u16, theme: &Theme) -> Vec<Line<'static>> {
    let (Some(t0), Some(total)) = (t.start(), t.e2e()) else { return Vec::new() };
    let bar_w = (width as usize).saturating_sub(LABEL + DUR + 2).max(10);
    let total = total.max(1e-6);
    let mut out = vec![Line::from(vec![
        Span::styled(
            format!(" {:<w$}", "where the time went (vLLM spans)", w = LABEL - 1),
            theme.fg("title"),
        ),
        Span::styled(
            format!("0 {:─<w$} {}", "", fmt::secs(Some(total)), w = bar_w.saturating_sub(2)),
            theme.dim(),
        ),
    ])];
    let row = |hop: &str, who: &str, detail: String, segs: &[Seg], dur: Option<f64>, err: Option<&str>| {
        let label = format!(" {hop:<9} {who:<14.14} {detail:<w$.w$}", w = LABEL - 26);
        let mut spans = vec![Span::styled(label, theme.text())];
        spans.extend(bar(segs, t0, total, bar_w, theme));
        spans.push(Span::styled(format!(" {:>w$}", fmt::secs(dur), w = DUR - 1), theme.text()));
        if let Some(e) = err {
            spans.push(Span::styled(format!(" ✖ {e}"), theme.fg("error")));
        }
        Line::from(spans)
    };
    let end = t0 + total;
    out.push(row("proxy", "first → last", String::new(), &[(t0, end, '─', "dim")], Some(total), None));
    if let Some(p) = t.prefill {
        let q_end = p.start + p.queue.unwrap_or(0.0);
        let c_end = (q_end + p.prefill.unwrap_or(0.0)).min(p.end);
        let detail = format!("q {} · pf {}", short(p.queue), short(p.prefill));
        let segs =
            [(p.start, q_end, '░', "warn"), (q_end, c_end, '█', "prefill"), (c_end, p.end, '─', "prefill")];
        out.push(row("prefill", &p.service, detail, &segs, Some(p.end - p.start), p.error.as_deref()));
    }
    if let (Some(p), Some(d)) = (t.prefill, t.decode) {
        let w_end = d.start + d.queue.unwrap_or(0.0);
        let detail = format!("hand {} · wait {}", short(t.handoff()), short(t.transfer_wait()));
        let segs = [(p.end, d.start, '─', "dim"), (d.start, w_end, '▒', "accent")];
        out.push(row("connector", "hand-off, KV", detail, &segs, Some((w_end - p.end).max(0.0)), None));
    }
    if let Some(d) = t.decode {
        let q_end = d.start + if t.prefill.is_some() { 0.0 } else { d.queue.unwrap_or(0.0) };
        let wait_end = d.start + d.queue.unwrap_or(0.0);
        let first = d.ttft.map_or(wait_end, |f| d.start + f);
        let p_end = (wait_end + d.prefill.unwrap_or(0.0)).min(first.max(wait_end));
        let detail = format!("1st {} · dec {}", short(d.ttft), short(d.decode));
        let segs = [
            (d.start, q_end, '░', "warn"),
            (wait_end, p_end, '█', "decode"),
            (p_end, first, '─', "decode"),
            (first, d.end, '▓', "decode"),
        ];
        out.push(row("decode", &d.service, detail, &segs, Some(d.end - d.start), d.error.as_deref()));
    }
    let mut sum = vec![Span::styled(" TTFT ", theme.dim()), Span::styled(fmt::secs(t.ttft()), theme.text())];
    sum.push(Span::styled(
        " first hop → decode's first token · ░ queue █ prompt ▒ transfer wait ▓ decode",
        theme.dim(),
    ));
    out.push(Line::from(sum));
    out
}

/// Cells of one bar: each stretch to scale, at least one cell when it
/// lasted a millisecond or more, so a short wait is seen.
fn bar(segs: &[Seg], t0: f64, total: f64, w: usize, theme: &Theme) -> Vec<Span<'static>> {
    let mut cells: Vec<(char, &str)> = vec![(' ', "dim"); w];
    let col = |t: f64| (((t - t0) / total) * w as f64).clamp(0.0, w as f64);
    for &(a, b, c, role) in segs {
        if b.partial_cmp(&(a + 0.001)) == Some(std::cmp::Ordering::Less) || b.is_nan() {
            continue;
        }
        let from = (col(a).floor() as usize).min(w.saturating_sub(1));
        let to = (col(b).round() as usize).clamp(from + 1, w);
        for cell in &mut cells[from..to] {
            *cell = (c, role);
        }
    }
    let mut out: Vec<Span<'static>> = Vec::new();
    let mut run = String::new();
    let mut role = cells.first().map_or("dim", |c| c.1);
    for (c, r) in cells {
        if r != role && !run.is_empty() {
            out.push(Span::styled(std::mem::take(&mut run), style(theme, role)));
        }
        role = r;
        run.push(c);
    }
    out.push(Span::styled(run, style(theme, role)));
    out
}

fn style(theme: &Theme, role: &str) -> Style {
    if role == "dim" { theme.dim() } else { theme.fg(role) }
}

/// `268ms`, `1.2s`, `-`: for the labels, where room is short.
fn short(v: Option<f64>) -> String {
    match v {
        Some(s) if s.is_finite() && s < 1.0 => format!("{:.0}ms", s * 1000.0),
        Some(s) if s.is_finite() => format!("{s:.1}s"),
        _ => "-".into(),
    }
}

/// What the Requests view sorts by (`s`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RequestSort {
    #[default]
    Newest,
    Ttft,
    TransferWait,
    Decode,
}

impl RequestSort {
    pub fn next(self) -> RequestSort {
        match self {
            RequestSort::Newest => RequestSort::Ttft,
            RequestSort::Ttft => RequestSort::TransferWait,
            RequestSort::TransferWait => RequestSort::Decode,
            RequestSort::Decode => RequestSort::Newest,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            RequestSort::Newest => "newest",
            RequestSort::Ttft => "TTFT",
            RequestSort::TransferWait => "transfer wait",
            RequestSort::Decode => "decode",
        }
    }

    fn key(self, t: &Timings) -> Option<f64> {
        match self {
            RequestSort::Newest => None,
            RequestSort::Ttft => t.ttft(),
            RequestSort::TransferWait => t.transfer_wait(),
            RequestSort::Decode => t.decode(),
        }
    }
}

/// Sorts rows (newest first already) slowest first by `by`; rows without
/// the figure keep their order after the others.
pub fn sort(rows: &mut [&Trace], spans: &SpanStore, by: RequestSort) {
    if by == RequestSort::Newest {
        // By when each was first seen: logs read apart (a router's, an
        // instance's) make traces in another order than their time.
        rows.sort_by(|a, b| b.first_seen.total_cmp(&a.first_seen));
        return;
    }
    if spans.is_empty() {
        return;
    }
    rows.sort_by(|a, b| {
        let (ka, kb) = (by.key(&spans.timings_for(a)), by.key(&spans.timings_for(b)));
        kb.unwrap_or(f64::NEG_INFINITY).total_cmp(&ka.unwrap_or(f64::NEG_INFINITY))
    });
}

/// The span columns of a Requests row: TTFT, transfer wait, decode.
pub fn columns(spans: &SpanStore, t: &Trace) -> String {
    let tm = spans.timings_for(t);
    format!("{:>6} {:>6} {:>6} ", short(tm.ttft()), short(tm.transfer_wait()), short(tm.decode()))
}

/// Their header, as wide as [`columns`].
pub const HEADER: &str = "  TTFT   WAIT    DEC ";
