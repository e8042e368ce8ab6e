//! The router's header row (`--router`): reachability, requests per
//! second, errors per leg and request duration over the window.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::fmt;
use crate::metrics::router::RouterCounter;
use crate::state::AppState;
use crate::state::router::RouterState;
use crate::theme::Theme;

pub fn router_line(frame: &mut Frame, area: Rect, state: &AppState, theme: &Theme) {
    let Some(r) = &state.router else {
        return;
    };
    frame.render_widget(Paragraph::new(line(r, state.now, state.window_secs, theme)), area);
}

fn line(r: &RouterState, now: f64, window: f64, theme: &Theme) -> Line<'static> {
    let mut spans = vec![
        Span::styled(" ROUTER  ", theme.fg("title")),
        Span::styled(format!("{} ", r.endpoint.display), theme.text()),
    ];
    let h = &r.health;
    if !h.up {
        let why = h.last_error.clone().unwrap_or_else(|| "not scraped yet".into());
        let mark = if h.scrapes_failed > 0 { "✖ DOWN " } else { "○ " };
        spans.push(Span::styled(format!("{mark}{why}"), theme.fg("error")));
        return Line::from(spans);
    }
    spans.push(Span::styled("● up ", theme.fg("ok")));
    if h.no_vllm_metrics {
        spans.push(Span::styled("no vllm_router_ metrics (wrong port?)", theme.fg("warn")));
        return Line::from(spans);
    }
    if let Some(s) = r.latest.as_ref().filter(|s| !s.workers.is_empty()) {
        let bad: Vec<&str> = s.unhealthy_workers().collect();
        let healthy = s.workers.len() - bad.len();
        let text = format!("workers {healthy}/{} ", s.workers.len());
        spans.push(Span::styled(text, if bad.is_empty() { theme.dim() } else { theme.fg("error") }));
        if !bad.is_empty() {
            spans.push(Span::styled(format!("✖ {} ", bad.join(" ")), theme.fg("error")));
        }
    }
    // A router in regular mode (or a PD one before its first request)
    // exports no PD series: zeros would read as "no traffic, no errors".
    if !r.pd_families_seen() {
        let why = "no vllm_router_pd_ series: no PD request routed yet, or not in PD mode";
        spans.push(Span::styled(why, theme.fg("warn")));
        return Line::from(spans);
    }
    let since = now - window;
    let rate = r.rate_since(RouterCounter::Requests, since);
    let rate = rate.map(|v| format!("{v:.1}/s")).unwrap_or_else(|| "?".into());
    spans.push(Span::styled(format!("req {rate:>7}  "), theme.text()));
    let d = r.duration_since(since).filter(|d| d.total() > 0.0);
    let q = |p| d.as_ref().and_then(|d| d.quantile(p));
    spans.push(Span::styled(format!("p50 {} p90 {}  ", fmt::secs(q(0.5)), fmt::secs(q(0.9))), theme.dim()));
    spans.push(Span::styled("err ", theme.dim()));
    for (c, leg) in RouterCounter::ERRORS {
        let n: f64 =
            r.history.iter().rev().take_while(|iv| iv.t > since).filter_map(|iv| iv.counters.get(&c)).sum();
        let style = if n > 0.0 { theme.fg("error") } else { theme.dim() };
        spans.push(Span::styled(format!("{leg} {} ", fmt::count(n)), style));
    }
    if h.restarts > 0 {
        spans.push(Span::styled(format!(" ↻{} restarts", h.restarts), theme.fg("warn")));
    }
    Line::from(spans)
}
