//! The Link view's lower half: which wire carried the KV (loudly when it
//! was the wrong one), whether the split pays on it, the folders nobody
//! reads, and each request's predicted and observed bytes.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::fmt;
use crate::report::kv::KvRequests;
use crate::state::AppState;
use crate::theme::Theme;

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

pub fn render(frame: &mut Frame, area: Rect, state: &AppState, theme: &Theme) {
    let kv = KvRequests::from_state(state);
    let mut lines: Vec<Line> = Vec::new();
    if let Some(w) = &kv.wire_warning {
        lines.push(Line::styled(format!(" ✖ {w}"), theme.alarm()));
    } else if let Some(w) = &kv.wire {
        lines.push(Line::styled(format!(" {w}"), theme.text()));
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
        lines.push(Line::styled(text, style));
    }
    if let Some(w) = &kv.worth {
        lines.push(Line::styled(format!(" {}", w.text), theme.dim()));
    }
    if let Some(text) = kv.folders.as_ref().and_then(|f| f.text.clone()) {
        lines.push(Line::styled(format!(" {text}"), theme.fg("warn")));
    }
    lines.push(Line::styled(
        format!(
            " {:<24} {:>6} {:>10} {:>10} {:>6}  {:<22} {:<7} verdict",
            "request", "tokens", "predicted", "observed", "ratio", "source", "sure"
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
        lines.push(Line::from(vec![
            Span::styled(
                format!(
                    " {:<24.24} {:>6} {:>10} {:>10} {:>6}  {:<22.22} {:<7} ",
                    r.id,
                    r.tokens.map(|n| n.to_string()).unwrap_or_else(|| "?".into()),
                    b(r.predicted),
                    b(r.observed),
                    r.ratio.map(|x| format!("{x:.2}")).unwrap_or_else(|| "n/a".into()),
                    r.source,
                    r.confidence,
                ),
                theme.text(),
            ),
            Span::styled(format!("{} {}", verdict_text(r.verdict), r.note), style),
        ]));
    }
    if kv.requests.is_empty() {
        lines.push(Line::styled(" no request traced yet (needs --decode-log)", theme.dim()));
    }
    let title = Span::styled(" requests: the KV each should move, and what moved ", theme.fg("title"));
    let block = Block::default().borders(Borders::ALL).border_style(theme.fg("border")).title(title);
    frame.render_widget(Paragraph::new(lines).block(block), area);
}
