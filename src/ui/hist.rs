//! Two histograms side by side on the same rows and the same scale, so that
//! prefill and decode can be compared at a glance.
//!
//! ```text
//! ┌ TTFT · prefill ───────────────┐┌ TTFT · decode ────────────────┐
//! │p50 355ms p90 538ms p99 729ms  ││p50 194ms p90 394ms p99 489ms  │
//! │ ≤100ms ██▌                  3 ││ ≤100ms ████████           12  │
//! │ ≤250ms ████████            12 ││ ≤250ms ██████████████     21  │
//! └───────────────────────────────┘└───────────────────────────────┘
//! ```

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::fmt;
use crate::metrics::histogram::Histogram;
use crate::theme::Theme;
use crate::ui::Panel;

pub struct Side<'a> {
    pub label: &'a str,
    pub hist: Option<&'a Histogram>,
    pub color: Style,
    /// Shown instead of bars when the numbers mean nothing here.
    pub note: Option<&'a str>,
}

pub fn render_pair(buf: &mut Buffer, area: Rect, title: &str, sides: [Side<'_>; 2], theme: &Theme) {
    let halves = Layout::horizontal([Constraint::Ratio(1, 2), Constraint::Ratio(1, 2)]).split(area);
    let bounds = shared_bounds(sides.iter().filter_map(|s| s.hist));
    let rebucketed: Vec<Option<Vec<f64>>> = sides
        .iter()
        .map(|s| {
            s.hist.filter(|_| s.note.is_none()).map(|h| {
                let mut on_shared = Histogram::empty(&bounds[..bounds.len().saturating_sub(1)]);
                on_shared.merge(h);
                on_shared.per_bucket()
            })
        })
        .collect();
    let inner_rows = area.height.saturating_sub(3) as usize;
    let rows = rows_for(&bounds, &rebucketed, inner_rows);
    let max = rows.iter().flat_map(|r| r.counts.iter()).fold(0.0f64, |m, c| m.max(*c));
    for (i, side) in sides.iter().enumerate() {
        let block = Panel::new(
            Line::from(vec![
                Span::styled(format!(" {title} · "), theme.fg("title")),
                Span::styled(format!("{} ", side.label), side.color),
            ]),
            theme.fg("border"),
        );
        let inner = block.inner(halves[i]);
        block.render(halves[i], buf);
        let mut lines = vec![quantile_line(side, inner.width, theme)];
        if let Some(note) = side.note {
            lines.push(Line::styled(fmt::shorten(note, inner.width as usize), theme.dim()));
        } else if side.hist.is_none_or(|h| h.total() <= 0.0) {
            lines.push(Line::styled(
                fmt::shorten("no requests in this window", inner.width as usize),
                theme.dim(),
            ));
        } else {
            for row in &rows {
                lines.push(bar_line(&row.label, row.counts[i], max, inner.width, side.color, theme));
            }
        }
        super::text::draw(buf, inner, &lines);
    }
}

/// `p50 … p90 … p99 … n=…`, as much of it as fits `cols` whole: spaces
/// go first, then p99, then p90; `n=` stays.
fn quantile_line(side: &Side<'_>, cols: u16, theme: &Theme) -> Line<'static> {
    let Some(h) = side.hist.filter(|h| h.total() > 0.0 && side.note.is_none()) else {
        return Line::styled("p50 n/a", theme.dim());
    };
    let n = fmt::count(h.total());
    let form = |tight: bool, ps: &[(&str, f64)]| {
        let (gap, q): (&str, fn(Option<f64>) -> String) =
            if tight { (" ", fmt::secs_tight) } else { ("  ", fmt::secs) };
        let mut spans = Vec::new();
        for (i, (name, p)) in ps.iter().enumerate() {
            let sep = if i == 0 { "" } else { gap };
            spans.push(Span::styled(format!("{sep}{name} "), theme.dim()));
            spans.push(Span::styled(q(h.quantile(*p)), theme.text()));
        }
        spans.push(Span::styled(format!("{gap}n={n}"), theme.dim()));
        spans
    };
    let all = [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)];
    Line::from(fmt::fit(
        vec![form(false, &all), form(true, &all), form(true, &all[..2]), form(true, &all[..1])],
        cols as usize,
    ))
}

/// Lines a pair needs to show every non-empty bucket (with borders and the
/// quantile line).
pub fn lines_wanted(hists: [Option<&Histogram>; 2]) -> u16 {
    let bounds = shared_bounds(hists.iter().flatten().copied());
    let per_side: Vec<Option<Vec<f64>>> = hists
        .iter()
        .map(|h| {
            h.map(|h| {
                let mut on_shared = Histogram::empty(&bounds[..bounds.len().saturating_sub(1)]);
                on_shared.merge(h);
                on_shared.per_bucket()
            })
        })
        .collect();
    let rows = rows_for(&bounds, &per_side, usize::MAX).len().max(1);
    rows as u16 + 3
}

/// The union of both histograms' bounds (they are the same in practice).
fn shared_bounds<'a>(hists: impl Iterator<Item = &'a Histogram>) -> Vec<f64> {
    let mut bounds: Vec<f64> = Vec::new();
    for h in hists {
        for b in &h.bounds {
            if !bounds.contains(b) {
                bounds.push(*b);
            }
        }
    }
    bounds.sort_by(f64::total_cmp);
    if bounds.last().is_none_or(|b| b.is_finite()) {
        bounds.push(f64::INFINITY);
    }
    bounds
}

struct Row {
    label: String,
    counts: [f64; 2],
}

/// The rows to draw: the buckets from the lowest to the highest non-empty
/// one on either side, merged in groups when they do not fit.
fn rows_for(bounds: &[f64], per_side: &[Option<Vec<f64>>], max_rows: usize) -> Vec<Row> {
    let n = bounds.len();
    let nonzero =
        |i: usize| per_side.iter().any(|s| s.as_ref().is_some_and(|v| v.get(i).is_some_and(|c| *c > 0.0)));
    let (Some(lo), Some(hi)) = ((0..n).find(|i| nonzero(*i)), (0..n).rev().find(|i| nonzero(*i))) else {
        return Vec::new();
    };
    // Show at least three rows for context, when there are buckets to show.
    let lo = lo.saturating_sub(usize::from(hi - lo < 2));
    let hi = (hi + usize::from(hi - lo < 2)).min(n - 1);
    let span = hi - lo + 1;
    let group = span.div_ceil(max_rows.max(1)).max(1);
    let mut rows = Vec::new();
    let mut start = lo;
    while start <= hi {
        let end = (start + group - 1).min(hi);
        let mut counts = [0.0; 2];
        for (side, c) in counts.iter_mut().enumerate() {
            if let Some(Some(v)) = per_side.get(side) {
                *c = v[start..=end].iter().sum();
            }
        }
        rows.push(Row { label: fmt::bound_secs(bounds[end]), counts });
        start = end + 1;
    }
    rows
}

fn bar_line(label: &str, count: f64, max: f64, width: u16, color: Style, theme: &Theme) -> Line<'static> {
    const LABEL_W: usize = 8;
    const COUNT_W: usize = 6;
    let bar_w = (width as usize).saturating_sub(LABEL_W + COUNT_W + 1);
    let bar = bar(count, max, bar_w);
    let pad = bar_w.saturating_sub(bar.chars().count());
    Line::from(vec![
        Span::styled(format!("{label:>LABEL_W$} "), theme.dim()),
        Span::styled(bar, color),
        Span::raw(" ".repeat(pad)),
        Span::styled(format!("{:>COUNT_W$}", fmt::count(count)), theme.text()),
    ])
}

/// A bar in eighths of a cell.
pub fn bar(value: f64, max: f64, width: usize) -> String {
    if max.is_nan() || max <= 0.0 || value.is_nan() || value <= 0.0 || width == 0 {
        return String::new();
    }
    const PARTS: [char; 8] = [' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉'];
    let eighths = ((value / max).clamp(0.0, 1.0) * width as f64 * 8.0).round() as usize;
    let eighths = eighths.max(1);
    let mut s = "█".repeat(eighths / 8);
    if !eighths.is_multiple_of(8) {
        s.push(PARTS[eighths % 8]);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_scale_and_never_vanish() {
        assert_eq!(bar(10.0, 10.0, 4), "████");
        assert_eq!(bar(5.0, 10.0, 4), "██");
        assert_eq!(bar(0.01, 10.0, 4), "▏");
        assert_eq!(bar(0.0, 10.0, 4), "");
        assert_eq!(bar(f64::NAN, 10.0, 4), "");
    }

    #[test]
    fn rows_merge_to_fit() {
        let bounds = [1.0, 2.0, 3.0, 4.0, f64::INFINITY];
        let side = Some(vec![1.0, 1.0, 1.0, 1.0, 0.0]);
        let rows = rows_for(&bounds, &[side.clone(), None], 2);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].counts[0], 2.0);
        assert_eq!(rows[1].label, "≤4s");
        assert_eq!(rows_for(&bounds, &[side, None], 10).len(), 4);
    }
}
