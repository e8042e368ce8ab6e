//! The router's header row (`--router`): reachability, requests per
//! second, errors per leg and request duration over the window.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::widgets::Widget;

use super::fmt;
use crate::metrics::router::RouterCounter;
use crate::state::AppState;
use crate::state::router::RouterState;
use crate::theme::Theme;

pub fn router_line(buf: &mut Buffer, area: Rect, state: &AppState, theme: &Theme) {
    let Some(r) = &state.router else {
        return;
    };
    let segments = line(r, state.now, state.window_secs, theme);
    Paragraph::new(Line::from(fmt::keep_whole(segments, area.width as usize))).render(area, buf);
}

/// The row's segments, ranked: what is left out first on a narrow screen
/// has the lowest rank (latency before errors, errors before the name).
fn line(r: &RouterState, now: f64, window: f64, theme: &Theme) -> Vec<(u8, Vec<Span<'static>>)> {
    let mut segs = vec![(
        9,
        vec![
            Span::styled(" ROUTER  ", theme.fg("title")),
            Span::styled(format!("{} ", r.endpoint.display), theme.text()),
        ],
    )];
    let h = &r.health;
    if !h.up {
        let why = h.last_error.clone().unwrap_or_else(|| "not scraped yet".into());
        let mark = if h.scrapes_failed > 0 { "✖ DOWN " } else { "○ " };
        segs.push((8, vec![Span::styled(format!("{mark}{why}"), theme.fg("error"))]));
        return segs;
    }
    segs.push((8, vec![Span::styled("● up ", theme.fg("ok"))]));
    if h.no_vllm_metrics {
        segs.push((7, vec![Span::styled("no vllm_router_ metrics (wrong port?)", theme.fg("warn"))]));
        return segs;
    }
    if let Some(s) = r.latest.as_ref().filter(|s| !s.workers.is_empty()) {
        let bad: Vec<&str> = s.unhealthy_workers().collect();
        let healthy = s.workers.len() - bad.len();
        let text = format!("workers {healthy}/{} ", s.workers.len());
        let mut workers =
            vec![Span::styled(text, if bad.is_empty() { theme.dim() } else { theme.fg("error") })];
        if !bad.is_empty() {
            workers.push(Span::styled(format!("✖ {} ", bad.join(" ")), theme.fg("error")));
        }
        segs.push((if bad.is_empty() { 3 } else { 7 }, workers));
    }
    // A router in regular mode (or a PD one before its first request)
    // exports no PD series: zeros would read as "no traffic, no errors".
    if !r.pd_families_seen() {
        let why = "no vllm_router_pd_ series: no PD request routed yet, or not in PD mode";
        segs.push((6, vec![Span::styled(why, theme.fg("warn"))]));
        return segs;
    }
    let since = now - window;
    let rate = r.rate_since(RouterCounter::Requests, since);
    let rate = rate.map(|v| format!("{v:.1}/s")).unwrap_or_else(|| "?".into());
    segs.push((5, vec![Span::styled(format!("req {rate:>7}  "), theme.text())]));
    let d = r.duration_since(since).filter(|d| d.total() > 0.0);
    let q = |p| d.as_ref().and_then(|d| d.quantile(p));
    segs.push((
        2,
        vec![Span::styled(format!("p50 {} p90 {}  ", fmt::secs(q(0.5)), fmt::secs(q(0.9))), theme.dim())],
    ));
    let mut errors = vec![Span::styled("err ", theme.dim())];
    let mut any_error = false;
    for (c, leg) in RouterCounter::ERRORS {
        let n: f64 =
            r.history.iter().rev().take_while(|iv| iv.t > since).filter_map(|iv| iv.counters.get(&c)).sum();
        let style = if n > 0.0 { theme.fg("error") } else { theme.dim() };
        errors.push(Span::styled(format!("{leg} {} ", fmt::count(n)), style));
        any_error |= n > 0.0;
    }
    // Errors that happened outrank the request rate.
    segs.push((if any_error { 7 } else { 4 }, errors));
    if h.restarts > 0 {
        segs.push((6, vec![Span::styled(format!(" ↻{} restarts", h.restarts), theme.fg("warn"))]));
    }
    segs
}
