//! The overview: is the split working, and is it worth it?
//!
//! ```text
//! ┌ TTFT · prefill ─────────┐┌ TTFT · decode ──────────┐
//! ┌ TPOT · prefill ─────────┐┌ TPOT · decode ──────────┐
//! ┌ decode prompt tokens by source ─┐┌ requests ────────┐
//!   KV connector strip (a line per connector that reports)
//! ```

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::hist::{Side, lines_wanted, render_pair};
use super::{HistWindow, ViewState, fmt, header::role_style, sources_chart};
use crate::feed::Role;
use crate::metrics::histogram::Histogram;
use crate::metrics::model::Hist;
use crate::state::AppState;
use crate::theme::Theme;

pub fn render(frame: &mut Frame, area: Rect, state: &AppState, view: &ViewState, theme: &Theme) {
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
    // Each histogram row gets what its buckets need, at most a third of
    // the body; the rest goes to the token chart and the request panel.
    let cap = (area.height.saturating_sub(strip + 8) / 2).max(4);
    let h_ttft = lines_wanted([p_ttft.as_ref(), d_ttft.as_ref()]).clamp(4, cap);
    let h_tpot = lines_wanted([p_tpot_shown, d_tpot.as_ref()]).clamp(4, cap);
    // A tall terminal also gets latency over time, and the rest grows.
    let series_h = if area.height >= 50 { area.height.saturating_sub(strip) / 3 } else { 0 };
    let (h_ttft, h_tpot) = if series_h > 0 {
        let grow = (area.height.saturating_sub(strip + series_h + 12) / 2).max(4);
        (h_ttft.max(grow.min(cap)), h_tpot.max(grow.min(cap)))
    } else {
        (h_ttft, h_tpot)
    };
    let [ttft, tpot, series_area, bottom, strip_area] = Layout::vertical([
        Constraint::Length(h_ttft),
        Constraint::Length(h_tpot),
        Constraint::Length(series_h),
        Constraint::Min(8),
        Constraint::Length(strip),
    ])
    .areas(area);
    if series_h > 0 {
        super::latency_chart::render(frame, series_area, state, view.focus, theme);
    }
    render_pair(
        frame,
        ttft,
        "TTFT",
        [side(Role::Prefill, p_ttft.as_ref(), none, theme), side(Role::Decode, d_ttft.as_ref(), none, theme)],
        theme,
    );
    render_pair(
        frame,
        tpot,
        "TPOT",
        [
            side(Role::Prefill, p_tpot.as_ref(), p_note, theme),
            side(Role::Decode, d_tpot.as_ref(), none, theme),
        ],
        theme,
    );
    let right_w = if area.width >= 100 { 50 } else { 44 };
    let [chart, right] = Layout::horizontal([Constraint::Min(20), Constraint::Length(right_w)]).areas(bottom);
    if view.logs_only {
        sources_chart::no_metrics(frame, chart, theme);
    } else {
        sources_chart::render(frame, chart, state, theme);
    }
    let [requests, recent] = Layout::vertical([Constraint::Length(9), Constraint::Min(0)]).areas(right);
    requests_panel(frame, requests, state, view.logs_only, theme);
    if recent.height >= 3 {
        super::events::render_recent(frame, recent, state, theme);
    }
    if strip > 0 {
        super::connectors::render(frame, strip_area, state, view, theme);
    }
}

fn side<'a>(role: Role, hist: Option<&'a Histogram>, note: Option<&'a str>, theme: &Theme) -> Side<'a> {
    Side { label: role.name(), hist, color: role_style(role, theme), note }
}

fn requests_panel(frame: &mut Frame, area: Rect, state: &AppState, logs_only: bool, theme: &Theme) {
    let metrics = state.misses.outcomes;
    // Named per request when a decode log is tailed, else counted from metrics.
    let traced = state.logs.as_ref().filter(|l| l.has_decode_log()).map(|l| l.correlator.counts());
    let (o, source, last) = match &traced {
        Some(c) => (*c, "traces", ("unknown", c.unknown + c.pending)),
        None => (metrics, "metrics", ("awaiting", state.misses.pending_prefills() as u64)),
    };
    let mut title = vec![Span::styled(format!(" requests since start ({source}) "), theme.fg("title"))];
    // A decode still waiting for remote KV past the threshold: no other
    // count shows it (it is neither loaded nor missed yet).
    if let Some(n) = traced.as_ref().map(|c| c.stuck).filter(|n| *n > 0) {
        title.push(Span::styled(format!(" ⏳ {n} STUCK "), theme.fg("error")));
    }
    let block =
        Block::default().borders(Borders::ALL).border_style(theme.fg("border")).title(Line::from(title));
    let miss_style = if o.silent_miss > 0 { theme.alarm() } else { theme.fg("ok") };
    let err_style = if o.error > 0 { theme.fg("error") } else { theme.text() };
    // Two columns of "label value", the labels padded to one width.
    let cell = |label: &str, v: u64, style| {
        [Span::styled(format!(" {label:<12}"), theme.dim()), Span::styled(format!("{v:>5}  "), style)]
    };
    let row =
        |a: [Span<'static>; 2], b: [Span<'static>; 2]| Line::from(a.into_iter().chain(b).collect::<Vec<_>>());
    let mut lines = vec![
        row(cell("seen", o.seen, theme.text()), cell("loaded KV", o.loaded, theme.fg("ok"))),
        row(cell("silent miss", o.silent_miss, miss_style), cell("no prefill", o.no_prefill, theme.text())),
        row(cell("errors", o.error, err_style), cell(last.0, last.1, theme.text())),
    ];
    if logs_only {
        lines.push(Line::styled(format!(" metrics cross-check: {}", super::NO_METRICS), theme.dim()));
        lines.push(Line::styled(" worth it? decode TTFT p50", theme.fg("title")));
        lines.push(Line::styled(format!(" {}", super::NO_METRICS), theme.dim()));
        frame.render_widget(Paragraph::new(lines).block(block), area);
        return;
    }
    if traced.is_some() {
        // The cross-check: shown, never hidden, when the two disagree.
        let (text, style) = if metrics.silent_miss == o.silent_miss {
            (format!(" metrics agree: {} silent miss(es)", metrics.silent_miss), theme.dim())
        } else {
            (
                format!(" ⚠ metrics count {} silent miss(es), traces {}", metrics.silent_miss, o.silent_miss),
                theme.fg("warn"),
            )
        };
        lines.push(Line::styled(text, style));
    }
    if state.misses.supported == Some(false) {
        lines.push(Line::styled(
            " miss detection needs vLLM ≥ 0.13 (no request_prefill_kv_computed_tokens)",
            theme.fg("warn"),
        ));
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
    frame.render_widget(Paragraph::new(lines).block(block), area);
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
