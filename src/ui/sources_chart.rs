//! Decode prompt tokens by source over time: stacked columns of locally
//! computed (red), local prefix-cache hits (yellow) and transferred KV
//! (green). A healthy split is a green chart with a thin red rim; a silent
//! miss is a red spike with no green under it.

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders};

use super::fmt;
use crate::feed::Role;
use crate::metrics::model::Counter;
use crate::state::AppState;
use crate::theme::Theme;

const SOURCES: [(Counter, &str, &str); 3] = [
    (Counter::PromptExternal, "transferred", "source_external"),
    (Counter::PromptLocalCacheHit, "cache hit", "source_cache"),
    (Counter::PromptLocalCompute, "computed", "source_compute"),
];

/// Fed by logs alone: the chart's counters do not exist.
pub fn no_metrics(frame: &mut Frame, area: Rect, theme: &Theme) {
    empty(frame, area, super::NO_METRICS, theme);
}

fn empty(frame: &mut Frame, area: Rect, msg: &str, theme: &Theme) {
    let title = Line::from(Span::styled(" decode prompt tokens by source: n/a ", theme.fg("title")));
    let block = Block::default().borders(Borders::ALL).border_style(theme.fg("border")).title(title);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if inner.height > 0 {
        frame.buffer_mut().set_stringn(
            inner.x + 1,
            inner.y,
            msg,
            inner.width.saturating_sub(1) as usize,
            theme.dim(),
        );
    }
}

pub fn render(frame: &mut Frame, area: Rect, state: &AppState, theme: &Theme) {
    let cols = area.width.saturating_sub(2).max(1) as usize;
    let window = state.window_secs.max(1.0);
    let col_secs = window / cols as f64;
    let start = state.now - window;
    let mut columns = vec![[0.0f64; 3]; cols];
    let mut totals = [0.0f64; 3];
    for inst in state.instances_of(Role::Decode) {
        for iv in inst.history.iter().rev().take_while(|iv| iv.t > start) {
            let col = (((iv.t - start) / col_secs).floor() as usize).min(cols - 1);
            for (k, (counter, _, _)) in SOURCES.iter().enumerate() {
                let v = iv.counter(*counter);
                columns[col][k] += v;
                totals[k] += v;
            }
        }
    }
    if !crate::report::by_source_known(state) {
        // Older vLLM (< 0.18) has no `prompt_tokens_by_source`: zeros here
        // would read as "nothing transferred", which is not known.
        let msg = "not reported by this vLLM (no prompt_tokens_by_source; added in 0.18)";
        return empty(frame, area, msg, theme);
    }
    let mut title = vec![Span::styled(" decode prompt tokens by source ", theme.fg("title"))];
    for (k, (_, name, role)) in SOURCES.iter().enumerate() {
        title.push(Span::styled(format!("■ {name} {} ", fmt::count(totals[k])), theme.fg(role)));
    }
    title.push(Span::styled(format!("(last {window:.0}s) "), theme.dim()));
    let block =
        Block::default().borders(Borders::ALL).border_style(theme.fg("border")).title(Line::from(title));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    draw_columns(frame.buffer_mut(), inner, &columns, theme);
}

/// The cell of source `k` (in [`SOURCES`] order). Colour tells the sources
/// apart; without it (NO_COLOR, mono) the fill does: transferred KV is the
/// quiet `░`, cache hits `▒`, and computed tokens, a miss's spike, the
/// solid `█`.
fn fill(k: usize, theme: &Theme) -> &'static str {
    if theme.color(SOURCES[k].2) != ratatui::style::Color::Reset {
        return "█";
    }
    ["░", "▒", "█"].get(k).copied().unwrap_or("█")
}

fn draw_columns(buf: &mut Buffer, area: Rect, columns: &[[f64; 3]], theme: &Theme) {
    let max = columns.iter().map(|c| c.iter().sum::<f64>()).fold(0.0f64, f64::max);
    if max.is_nan() || max <= 0.0 || area.height == 0 {
        let msg = "no decode prompt tokens in this window";
        buf.set_string(area.x + 1, area.y, msg, theme.dim());
        return;
    }
    let h = area.height as f64;
    for (x, col) in columns.iter().enumerate().take(area.width as usize) {
        let mut drawn = 0u16;
        for (k, (_, _, role)) in SOURCES.iter().enumerate() {
            // Any non-zero amount gets at least one cell: a single
            // recomputed prompt must be visible next to large transfers.
            let cells = if col[k] > 0.0 { ((col[k] / max * h).round() as u16).max(1) } else { 0 };
            for _ in 0..cells {
                if drawn >= area.height {
                    break;
                }
                let y = area.y + area.height - 1 - drawn;
                buf.set_string(area.x + x as u16, y, fill(k, theme), theme.fg(role));
                drawn += 1;
            }
        }
    }
}
