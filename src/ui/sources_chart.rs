//! Decode prompt tokens by source over time: stacked columns of locally
//! computed (red), local prefix-cache hits (yellow) and transferred KV
//! (green). A healthy split is a green chart with a thin red rim; a silent
//! miss is a red spike with no green under it.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::fmt;
use crate::feed::Role;
use crate::metrics::model::Counter;
use crate::state::AppState;
use crate::theme::Theme;
use crate::ui::Panel;

const SOURCES: [(Counter, &str, &str); 3] = [
    (Counter::PromptExternal, "transferred", "source_external"),
    (Counter::PromptLocalCacheHit, "cache hit", "source_cache"),
    (Counter::PromptLocalCompute, "computed", "source_compute"),
];

/// Fed by logs alone: the chart's counters do not exist.
pub fn no_metrics(buf: &mut Buffer, area: Rect, theme: &Theme) {
    empty(buf, area, super::NO_METRICS, theme);
}

fn empty(buf: &mut Buffer, area: Rect, msg: &str, theme: &Theme) {
    let title = Line::from(Span::styled(" decode prompt tokens by source: n/a ", theme.fg("title")));
    let block = Panel::new(title, theme.fg("border"));
    let inner = block.inner(area);
    block.render(area, buf);
    if inner.height > 0 {
        let msg = fmt::shorten(msg, inner.width.saturating_sub(1) as usize);
        buf.set_string(inner.x + 1, inner.y, msg, theme.dim());
    }
}

pub fn render(buf: &mut Buffer, area: Rect, state: &AppState, theme: &Theme) {
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
        return empty(buf, area, msg, theme);
    }
    let title = fmt::fit(
        [
            format!(" decode prompt tokens by source, last {window:.0}s "),
            format!(" decode prompt tokens, last {window:.0}s "),
            format!(" prompt tokens, {window:.0}s "),
        ]
        .map(|t| vec![Span::styled(t, theme.fg("title"))])
        .into(),
        inner_w(area),
    );
    let block = Panel::new(Line::from(title), theme.fg("border"));
    let inner = block.inner(area);
    block.render(area, buf);
    // The legend has rows of its own above the columns: it never covers
    // one, and no total is cut.
    let legend = legend(&totals, inner.width as usize, theme);
    let legend_h = (legend.len() as u16).min(inner.height);
    let plot = Rect { y: inner.y + legend_h, height: inner.height - legend_h, ..inner };
    super::text::draw(buf, inner, &legend);
    draw_columns(buf, plot, &columns, theme);
}

fn inner_w(area: Rect) -> usize {
    area.width.saturating_sub(2) as usize
}

/// The cell of source `k` (in [`SOURCES`] order), in the chart and in its
/// legend. Colour tells the sources apart; without it (NO_COLOR, mono) the
/// fill does: transferred KV is the quiet `░`, cache hits `▒`, and computed
/// tokens, a miss's spike, the solid `█`.
fn glyph(k: usize, theme: &Theme) -> &'static str {
    if theme.color(SOURCES[k].2) != ratatui::style::Color::Reset {
        return "█";
    }
    ["░", "▒", "█"].get(k).copied().unwrap_or("█")
}

/// One line when it fits: the long names, else the short ones; else the
/// items wrapped over lines, never one cut.
fn legend(totals: &[f64; 3], cols: usize, theme: &Theme) -> Vec<Line<'static>> {
    let items = |short: bool| -> Vec<Span<'static>> {
        SOURCES
            .iter()
            .enumerate()
            .map(|(k, (_, name, role))| {
                let name = if short { SHORT[k] } else { name };
                Span::styled(format!(" {} {name} {}", glyph(k, theme), fmt::count(totals[k])), theme.fg(role))
            })
            .collect()
    };
    let one_line = |spans: Vec<Span<'static>>| spans.iter().map(Span::width).sum::<usize>() <= cols;
    for short in [false, true] {
        if one_line(items(short)) {
            return vec![Line::from(items(short))];
        }
    }
    let mut lines: Vec<Vec<Span<'static>>> = vec![Vec::new()];
    for item in items(false) {
        let last = lines.last_mut().expect("one line at least");
        if !last.is_empty() && last.iter().map(Span::width).sum::<usize>() + item.width() > cols {
            lines.push(vec![item]);
        } else {
            last.push(item);
        }
    }
    lines.into_iter().map(Line::from).collect()
}

/// The legend's names where the long ones do not fit on one line.
const SHORT: [&str; 3] = ["moved", "cached", "computed"];

fn draw_columns(buf: &mut Buffer, area: Rect, columns: &[[f64; 3]], theme: &Theme) {
    // Cells are set by index below: never outside the buffer.
    let area = area.intersection(buf.area);
    let max = columns.iter().map(|c| c.iter().sum::<f64>()).fold(0.0f64, f64::max);
    if max.is_nan() || max <= 0.0 || area.height == 0 {
        let msg =
            fmt::shorten("no decode prompt tokens in this window", area.width.saturating_sub(1) as usize);
        if area.height > 0 {
            buf.set_string(area.x + 1, area.y, msg, theme.dim());
        }
        return;
    }
    let h = area.height as f64;
    // Each source's cell once, not looked up in the theme for every cell.
    let looks: [(&str, Style); 3] = std::array::from_fn(|k| (glyph(k, theme), theme.fg(SOURCES[k].2)));
    for (x, col) in columns.iter().enumerate().take(area.width as usize) {
        let mut drawn = 0u16;
        for (k, (symbol, style)) in looks.iter().enumerate() {
            // Any non-zero amount gets at least one cell: a single
            // recomputed prompt must be visible next to large transfers.
            let cells = if col[k] > 0.0 { ((col[k] / max * h).round() as u16).max(1) } else { 0 };
            for _ in 0..cells {
                if drawn >= area.height {
                    break;
                }
                let y = area.y + area.height - 1 - drawn;
                // One cell wide, as every glyph of the chart is.
                buf[(area.x + x as u16, y)].set_symbol(symbol).set_style(*style);
                drawn += 1;
            }
        }
    }
}
