//! The overview: is the split working, and is it worth it?
//!
//! ```text
//! ┌ TTFT · prefill ─────────┐┌ TTFT · decode ──────────┐
//! ┌ TPOT · prefill ─────────┐┌ TPOT · decode ──────────┐
//! ┌ decode prompt tokens by source ─┐┌ requests ────────┐
//!   KV connector strip (a line per connector that reports)
//! ```

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};

use super::hist::{Side, lines_wanted, render_pair};
use super::{HistWindow, ViewState, fmt, header::role_style, sources_chart};
use crate::feed::Role;
use crate::metrics::histogram::Histogram;
use crate::metrics::model::Hist;
use crate::state::AppState;
use crate::theme::Theme;
use crate::ui::Panel;

/// Wide enough for the four histograms on one row and latency over time.
const WIDE: u16 = 120;
/// What latency over time needs to be read (axis, labels, a few rows).
const SERIES_MIN: u16 = 10;
/// The token chart and the request counts: at least this tall.
const BOTTOM_MIN: u16 = 8;

pub fn render(buf: &mut Buffer, area: Rect, state: &AppState, view: &ViewState, theme: &Theme) {
    let strip = super::connectors::height(state, view.focus);
    let hist = |role, h| match view.window {
        HistWindow::Sliding => state.window_hist_of(role, h, view.focus),
        HistWindow::SinceStart => state.total_hist_of(role, h, view.focus),
    };
    let (p_ttft, d_ttft) = (hist(Role::Prefill, Hist::Ttft), hist(Role::Decode, Hist::Ttft));
    let (p_tpot, d_tpot) = (hist(Role::Prefill, Hist::Tpot), hist(Role::Decode, Hist::Tpot));
    // A prefill request generates one token, so it observes 0 as its TPOT.
    let p_note = p_tpot
        .as_ref()
        .filter(|h| h.total() > 0.0 && h.sum == 0.0)
        .map(|_| "n/a: a prefill request emits one token");
    // Without metrics there are no latencies: said, not drawn as zeros.
    let none = view.logs_only.then_some(super::NO_METRICS);
    let p_note = none.or(p_note);
    let p_tpot_shown = p_tpot.as_ref().filter(|_| p_note.is_none());
    // A histogram box gets the rows its buckets need and no more (merged
    // buckets when even that does not fit); the rest goes to what changes.
    let cap = (area.height.saturating_sub(strip + BOTTOM_MIN) / 2).max(4);
    let h_ttft = lines_wanted([p_ttft.as_ref(), d_ttft.as_ref()]).clamp(4, cap);
    let h_tpot = lines_wanted([p_tpot_shown, d_tpot.as_ref()]).clamp(4, cap);
    let wide = area.width >= WIDE;
    let (ttft_h, tpot_h) = if wide { (h_ttft.max(h_tpot), 0) } else { (h_ttft, h_tpot) };
    let rest = area.height.saturating_sub(strip + ttft_h + tpot_h);
    // Fed by logs alone there is no latency to draw over time either.
    let series_fits = wide
        && !view.logs_only
        && rest >= SERIES_MIN + BOTTOM_MIN + 4
        && super::latency_chart::has_data(state, view.focus);
    let series_h = if series_fits { (rest * 2 / 5).max(SERIES_MIN) } else { 0 };
    let [ttft, tpot, series_area, bottom, strip_area] = Layout::vertical([
        Constraint::Length(ttft_h),
        Constraint::Length(tpot_h),
        Constraint::Length(series_h),
        Constraint::Min(0),
        Constraint::Length(strip),
    ])
    .areas(area);
    let (ttft, tpot) = if wide {
        let [a, b] = Layout::horizontal([Constraint::Ratio(1, 2), Constraint::Ratio(1, 2)]).areas(ttft);
        (a, b)
    } else {
        (ttft, tpot)
    };
    render_pair(
        buf,
        ttft,
        "TTFT",
        [side(Role::Prefill, p_ttft.as_ref(), none, theme), side(Role::Decode, d_ttft.as_ref(), none, theme)],
        theme,
    );
    render_pair(
        buf,
        tpot,
        "TPOT",
        [
            side(Role::Prefill, p_tpot.as_ref(), p_note, theme),
            side(Role::Decode, d_tpot.as_ref(), none, theme),
        ],
        theme,
    );
    if series_h > 0 {
        super::latency_chart::render(buf, series_area, state, view, theme);
    } else if !view.logs_only && super::latency_chart::has_data(state, view.focus) {
        // Left out: said on the border above the chart that replaces it.
        // The screen size at which this body would have room for it.
        let chrome = buf.area.height.saturating_sub(area.height);
        let wide_hists = h_ttft.max(h_tpot);
        let rows = chrome + strip + wide_hists + SERIES_MIN + BOTTOM_MIN + 4;
        let hint = format!(" latency over time: {WIDE}x{rows} or larger ");
        let w = fmt::width(&hint) as u16;
        if tpot.width > w + 2 {
            let at =
                Rect { x: tpot.right() - w - 1, y: tpot.bottom().saturating_sub(1), width: w, height: 1 };
            super::text::draw(buf, at, &[Line::from(Span::styled(hint, theme.dim()))]);
        }
    }
    bottom_panels(buf, bottom, state, view, theme);
    if strip > 0 {
        super::connectors::render(buf, strip_area, state, view, theme);
    }
}

/// The token chart on the left; on the right the request counts (as wide
/// as their text), then the newest requests and the events when there is
/// room for them.
fn bottom_panels(buf: &mut Buffer, area: Rect, state: &AppState, view: &ViewState, theme: &Theme) {
    let (title, lines) = requests_lines(state, view.logs_only, theme);
    let text_w = lines.iter().map(Line::width).chain([title.width() + 2]).max().unwrap_or(0) as u16 + 2;
    // The chart keeps a readable width; on a wide screen the right half
    // also holds the newest requests and the events.
    let right_w = if area.width >= WIDE { text_w.max(area.width / 2) } else { text_w };
    let right_w = right_w.min(area.width.saturating_sub(30));
    let [chart, right] = Layout::horizontal([Constraint::Min(0), Constraint::Length(right_w)]).areas(area);
    // The newest requests panel shows at most a row of the area each.
    let traced = super::requests::visible_first(state, view, area.height as usize);
    if view.logs_only {
        // No token chart without metrics: its notice keeps one row and the
        // newest requests take the rest of the column.
        let [notice, newest] = Layout::vertical([Constraint::Length(3), Constraint::Min(0)]).areas(chart);
        sources_chart::no_metrics(buf, notice, theme);
        if !traced.is_empty() && newest.height >= 3 {
            super::recent_requests::render(buf, newest, &traced, theme);
        }
    } else {
        sources_chart::render(buf, chart, state, theme);
    }
    // The counts keep what is left under them unless it holds a panel.
    let counts_h = (lines.len() as u16 + 2).min(right.height);
    let counts_h = if right.height - counts_h < 3 { right.height } else { counts_h };
    let [counts, below] = Layout::vertical([Constraint::Length(counts_h), Constraint::Min(0)]).areas(right);
    requests_panel(buf, counts, title, lines, theme);
    // The events as tall as they are (at most half), the newest requests
    // the rest.
    let newest_here = !view.logs_only && !traced.is_empty() && below.height >= 8 && area.width >= WIDE;
    let (newest, events) = if newest_here {
        let events_h = (state.events.len() as u16 + 2).clamp(3, below.height / 2);
        let [a, b] = Layout::vertical([Constraint::Min(0), Constraint::Length(events_h)]).areas(below);
        (a, b)
    } else {
        (Rect::default(), below)
    };
    if newest.height > 0 {
        super::recent_requests::render(buf, newest, &traced, theme);
    }
    if events.height >= 3 {
        super::events::render_recent(buf, events, state, theme);
    }
}

fn side<'a>(role: Role, hist: Option<&'a Histogram>, note: Option<&'a str>, theme: &Theme) -> Side<'a> {
    Side { label: role.name(), hist, color: role_style(role, theme), note }
}

fn requests_panel(
    buf: &mut Buffer,
    area: Rect,
    title: Line<'static>,
    lines: Vec<Line<'static>>,
    theme: &Theme,
) {
    let block = Panel::new(title, theme.fg("border"));
    // Rows short: the heading of the comparison goes first, then an
    // agreeing cross-check, then the comparison's detail; never a count, a
    // disagreement or the verdict.
    let room = area.height.saturating_sub(2) as usize;
    let rank = |l: &Line| {
        let text: String = l.spans.iter().map(|s| s.content.as_ref()).collect();
        [" worth it?", " metrics agree", " loaded "].iter().position(|p| text.starts_with(p))
    };
    let mut lines = lines;
    for r in 0..3 {
        if lines.len() > room {
            lines.retain(|l| rank(l) != Some(r));
        }
    }
    super::panel::draw_in(buf, area, block, &lines);
}

/// The request panel's title and lines: the counts, the metrics
/// cross-check, and whether loading KV beats computing.
fn requests_lines(state: &AppState, logs_only: bool, theme: &Theme) -> (Line<'static>, Vec<Line<'static>>) {
    let metrics = state.misses.outcomes;
    // Named per request when a decode log is tailed, else counted from metrics.
    let traced = state.logs.as_ref().filter(|l| l.has_decode_log()).map(|l| l.correlator.counts());
    // Every outcome, so the cells sum to `seen`.
    let tally = state.request_tally();
    let mut title =
        vec![Span::styled(format!(" requests since start ({}) ", tally.source), theme.fg("title"))];
    let past = state.before_start_count();
    if past > 0 {
        title.push(Span::styled(format!("‹{past} from before it "), theme.dim()));
    }
    // A decode still waiting for remote KV past the threshold: no other
    // count shows it (it is neither loaded nor missed yet).
    if let Some(n) = traced.as_ref().map(|c| c.stuck).filter(|n| *n > 0) {
        title.push(Span::styled(format!(" ⏳ {n} STUCK "), theme.fg("error")));
    }
    let title = Line::from(title);
    let style_of = |label: &str, v: u64| match label {
        "silent miss" if v > 0 => theme.alarm(),
        "silent miss" => theme.fg("ok"),
        "error" if v > 0 => theme.fg("error"),
        "loaded" => theme.fg("ok"),
        _ => theme.text(),
    };
    // Two columns of "label value", the labels padded to one width.
    let cell = |label: &str, v: u64| {
        [
            Span::styled(format!(" {label:<12}"), theme.dim()),
            Span::styled(format!("{v:>5}  "), style_of(label, v)),
        ]
    };
    let mut cells = vec![cell("seen", tally.seen)];
    cells.extend(tally.parts.iter().map(|(label, v)| cell(label, *v)));
    let mut lines: Vec<Line<'static>> = cells
        .chunks(2)
        .map(|pair| Line::from(pair.iter().flat_map(|c| c.iter().cloned()).collect::<Vec<_>>()))
        .collect();
    let o = traced.unwrap_or(metrics);
    if logs_only {
        lines.push(Line::styled(format!(" metrics cross-check: {}", super::NO_METRICS), theme.dim()));
        lines.push(Line::styled(" worth it? decode TTFT p50", theme.fg("title")));
        lines.push(Line::styled(format!(" {}", super::NO_METRICS), theme.dim()));
        return (title, lines);
    }
    if traced.is_some() {
        // The cross-check: shown, never hidden, when the two disagree.
        // Metrics saw only what came after pdtop started.
        let since = o.silent_miss_since_start();
        // The window's scan of the traces only when the totals differ: this
        // is drawn every frame.
        let (m, open) = (metrics.silent_miss, metrics.unknown);
        let (text, style) = if m == since {
            (format!(" metrics agree: {m} silent miss(es)"), theme.dim())
        } else if m < since && since <= m + open {
            // The metrics left open which requests were the rest: no
            // contradiction.
            (format!(" metrics agree: {m} silent miss(es) + {open} unknown, traces {since}"), theme.dim())
        } else if since < m && m <= since + o.silent_miss_before_start {
            // Metrics count a miss when it finishes: one that began before
            // pdtop started may have finished after.
            let before = o.silent_miss_before_start;
            (
                format!(" metrics agree: {m} silent miss(es), traces {since} + {before} begun before pdtop"),
                theme.dim(),
            )
        } else if state.cross_check().is_some_and(|c| !c.disagree_now()) {
            // Apart once, long ago (metrics pair by timing): agreeing now.
            (format!(" metrics agree now ({} vs {since} in all)", metrics.silent_miss), theme.dim())
        } else {
            (
                format!(" ⚠ metrics: {} silent miss(es), traces: {since}", metrics.silent_miss),
                theme.fg("warn"),
            )
        };
        lines.push(Line::styled(text, style));
    }
    if state.misses.supported == Some(false) {
        lines.push(Line::styled(" miss detection needs vLLM ≥ 0.13", theme.fg("warn")));
    }
    lines.push(Line::styled(" worth it? decode TTFT p50", theme.fg("title")));
    let (loaded, computed) = (&state.misses.ttft_loaded, &state.misses.ttft_computed);
    let q = |h: &Histogram| h.quantile(0.5);
    lines.push(Line::from(vec![
        Span::styled(" loaded ", theme.dim()),
        Span::styled(fmt::secs(q(loaded)), theme.text()),
        Span::styled(format!(" ({}) · ", fmt::count(loaded.total())), theme.dim()),
        Span::styled("computed ", theme.dim()),
        Span::styled(fmt::secs(q(computed)), theme.text()),
        Span::styled(format!(" ({})", fmt::count(computed.total())), theme.dim()),
    ]));
    lines.push(worth_it_line(q(loaded), q(computed), theme));
    (title, lines)
}

/// Says plainly whether loading KV beats computing the prompt on decode.
fn worth_it_line(loaded: Option<f64>, computed: Option<f64>, theme: &Theme) -> Line<'static> {
    match (loaded, computed) {
        (Some(l), Some(c)) if l > 0.0 && c > 0.0 && l > c * 1.1 => Line::styled(
            format!(" ✖ the split costs {:.1}x: loading KV is slower than computing", l / c),
            theme.fg("error"),
        ),
        (Some(l), Some(c)) if l > 0.0 && c > 0.0 && l < c => Line::styled(
            format!(" ✔ the split saves {:.0}% of decode TTFT", (1.0 - l / c) * 100.0),
            theme.fg("ok"),
        ),
        (Some(_), Some(_)) => {
            Line::styled(" ≈ no difference between loading and computing", theme.fg("warn"))
        }
        _ => Line::styled(" needs requests of both kinds to compare", theme.dim()),
    }
}
