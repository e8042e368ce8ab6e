//! The Link view's lower half: which wire carried the KV (loudly when it
//! was the wrong one), whether the split pays on it, the folders nobody
//! reads, and each request's predicted and observed bytes.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::fmt;
use crate::report::kv::KvRequests;
use crate::state::AppState;
use crate::theme::Theme;
use crate::ui::Panel;

fn verdict_text(v: &str) -> &'static str {
    match v {
        "as_predicted" => "✔ as predicted",
        "moved_nothing" => "✖ moved nothing",
        "short" => "⚠ short",
        "too_much" => "⚠ too much",
        "not_expected" => "· no prefill",
        _ => "? unknown",
    }
}

/// The verdict whole, then as much of the note as fits by words.
fn verdict_cell(verdict: &str, note: &str, cols: usize) -> String {
    let full = format!("{verdict} {note}");
    if fmt::width(&full) <= cols {
        full
    } else if fmt::width(verdict) + 1 >= cols {
        verdict.to_string()
    } else {
        fmt::shorten(&full, cols)
    }
}

pub fn render(buf: &mut Buffer, area: Rect, state: &AppState, theme: &Theme) {
    let kv = KvRequests::from_state(state);
    let cols = area.width.saturating_sub(2) as usize;
    let fit = |t: String| fmt::shorten(&t, cols);
    let mut lines: Vec<Line> = Vec::new();
    if let Some(w) = &kv.wire_warning {
        lines.push(Line::styled(fit(format!(" ✖ {w}")), theme.alarm()));
    } else if let Some(w) = &kv.wire {
        lines.push(Line::styled(fit(format!(" {w}")), theme.text()));
    }
    let win = &kv.window;
    if let Some(r) = win.ratio {
        let mut text = format!(
            " {} request(s) whose KV moved: {} observed / {} predicted = {r:.3}",
            win.requests,
            fmt::bytes(win.observed),
            fmt::bytes(win.predicted)
        );
        if !win.moved_nothing.is_empty() {
            let n = win.moved_nothing.len();
            text.push_str(&format!(" · {n} moved nothing: {}", win.moved_nothing.join(", ")));
        }
        let style = if win.moved_nothing.is_empty() { theme.text() } else { theme.fg("warn") };
        lines.push(Line::styled(fit(text), style));
    }
    if let Some(w) = &kv.worth {
        lines.push(Line::styled(fit(format!(" {}", w.text)), theme.dim()));
    }
    if let Some(text) = kv.folders.as_ref().and_then(|f| f.text.clone()) {
        lines.push(Line::styled(fit(format!(" {text}")), theme.fg("warn")));
    }
    // The id as wide as the widest shown; SOURCE only where the verdict
    // keeps 24 columns, SURE only where it keeps 15 (`✖ moved nothing` whole).
    let id_w = kv.requests.iter().map(|r| fmt::width(&r.id)).max().unwrap_or(0).clamp(12, 24);
    let base = 1 + id_w + 1 + 6 + 1 + 10 + 1 + 10 + 1 + 6 + 2;
    let sure_w = if cols >= base + 8 + 15 { 8 } else { 0 };
    let source_w = if cols >= base + sure_w + 23 + 24 { 22 } else { 0 };
    let verdict_w = cols.saturating_sub(base + sure_w + source_w + usize::from(source_w > 0));
    let source_head = if source_w > 0 { format!("{:<source_w$} ", "source") } else { String::new() };
    let sure_head = if sure_w > 0 { format!("{:<7} ", "sure") } else { String::new() };
    lines.push(Line::styled(
        format!(
            " {:<id_w$} {:>6} {:>10} {:>10} {:>6}  {source_head}{sure_head}verdict",
            "request", "tokens", "predicted", "observed", "ratio"
        ),
        theme.dim(),
    ));
    let room = area.height.saturating_sub(2) as usize;
    let rows = room.saturating_sub(lines.len());
    let b = |v: Option<f64>| v.map(fmt::bytes).unwrap_or_else(|| "n/a".into());
    // What went wrong first, then the newest.
    let bad = |v: &str| matches!(v, "moved_nothing" | "short" | "too_much");
    let order = kv
        .requests
        .iter()
        .rev()
        .filter(|r| bad(r.verdict))
        .chain(kv.requests.iter().rev().filter(|r| !bad(r.verdict)));
    for r in order.take(rows) {
        let style = match r.verdict {
            "moved_nothing" => theme.alarm(),
            "short" | "too_much" => theme.fg("warn"),
            "as_predicted" => theme.fg("ok"),
            _ => theme.dim(),
        };
        let source = if source_w > 0 { format!("{:<source_w$.source_w$} ", r.source) } else { String::new() };
        let sure = if sure_w > 0 { format!("{:<7} ", r.confidence) } else { String::new() };
        lines.push(Line::from(vec![
            Span::styled(
                format!(
                    " {:<id_w$} {:>6} {:>10} {:>10} {:>6}  {source}{sure}",
                    fmt::ellipsis(&r.id, id_w),
                    r.tokens.map(|n| n.to_string()).unwrap_or_else(|| "?".into()),
                    b(r.predicted),
                    b(r.observed),
                    r.ratio.map(|x| format!("{x:.2}")).unwrap_or_else(|| "n/a".into()),
                ),
                theme.text(),
            ),
            Span::styled(verdict_cell(verdict_text(r.verdict), &r.note, verdict_w), style),
        ]));
    }
    if kv.requests.is_empty() {
        lines.push(Line::styled(" no request traced yet (needs --decode-log)", theme.dim()));
    }
    // Rows that do not fit are counted in the title, not dropped unsaid.
    let shown = rows.min(kv.requests.len());
    let more = if shown < kv.requests.len() {
        format!("({shown} of {}) ", kv.requests.len())
    } else {
        String::new()
    };
    let title = fmt::fit(
        vec![
            vec![Span::styled(
                format!(" requests: the KV each should move, and what moved {more}"),
                theme.fg("title"),
            )],
            vec![Span::styled(format!(" requests' KV {more}"), theme.fg("title"))],
        ],
        cols,
    );
    let block = Panel::new(Line::from(title), theme.fg("border"));
    super::panel::draw_in(buf, area, block, &lines);
}
