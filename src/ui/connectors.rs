//! The KV connectors under the overview: a line per connector whose
//! Prometheus families the watched instances serve (absent: no line, not
//! zeros). NIXL's line keeps its latency quantiles; the others show their
//! figures from `state::connectors` (since pdtop started).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::{HistWindow, ViewState, fmt};
use crate::feed::Role;
use crate::metrics::model::{Counter, Hist};
use crate::state::AppState;
use crate::state::connectors::ConnectorMetrics;
use crate::theme::Theme;
use crate::ui::Panel;

/// The connectors after NIXL, with what their line is called.
const SHOWN: [(&str, &str); 4] = [
    ("mooncake", "Mooncake"),
    ("mooncake_store", "Mc store"),
    ("offload", "Offload"),
    ("lmcache", "LMCache"),
];

fn nixl_reports(state: &AppState) -> bool {
    state
        .instances_of(Role::Decode)
        .any(|i| i.latest.as_ref().is_some_and(|s| s.hists.contains_key(&Hist::NixlXferTime)))
}

fn metrics(state: &AppState, focus: Option<usize>) -> Option<ConnectorMetrics> {
    ConnectorMetrics::of(
        state.instances.iter().enumerate().filter(|(i, _)| focus.is_none_or(|f| f == *i)).map(|(_, i)| i),
    )
}

/// Rows the strip needs: none without a connector that reports.
pub fn height(state: &AppState, focus: Option<usize>) -> u16 {
    let others =
        metrics(state, focus).map_or(0, |m| SHOWN.iter().filter(|(k, _)| m.0.contains_key(k)).count());
    let n = others + usize::from(nixl_reports(state));
    if n == 0 { 0 } else { n as u16 + 2 }
}

pub fn render(buf: &mut Buffer, area: Rect, state: &AppState, view: &ViewState, theme: &Theme) {
    let mut lines = Vec::new();
    if nixl_reports(state) {
        lines.push(nixl_line(state, view, area.width.saturating_sub(2) as usize, theme));
    }
    if let Some(m) = metrics(state, view.focus) {
        for (key, label) in SHOWN {
            if let Some(figures) = m.0.get(key) {
                let mut segs = vec![(9, vec![Span::styled(format!(" {label:<8}"), theme.text())])];
                for (name, v) in figures {
                    let said = name.strip_suffix("_s").unwrap_or(name).replace('_', " ");
                    // A failure that happened outranks a plain figure.
                    let rank = if style_of(name, *v, theme) == theme.text() { 1 } else { 5 };
                    segs.push((
                        rank,
                        vec![
                            Span::styled(format!("  {said} "), theme.dim()),
                            Span::styled(shown(name, *v), style_of(name, *v, theme)),
                        ],
                    ));
                }
                lines.push(Line::from(fmt::keep_whole(segs, area.width.saturating_sub(2) as usize)));
            }
        }
    }
    let block = Panel::new(
        Span::styled(
            format!(
                " {} ",
                fmt::shorten(
                    "KV connectors · their own /metrics · offload: this host's memory, not a transfer · LMCache in tokens",
                    area.width.saturating_sub(4) as usize
                )
            ),
            theme.fg("title"),
        ),
        theme.fg("border"),
    );
    super::panel::draw_in(buf, area, block, &lines);
}

/// A figure in its unit, read from its name.
fn shown(name: &str, v: f64) -> String {
    if name.ends_with("bytes") {
        fmt::bytes(v)
    } else if name.ends_with("_s") {
        fmt::secs(Some(v))
    } else if name.ends_with("ratio") {
        fmt::pct(Some(v))
    } else {
        fmt::count(v)
    }
}

fn style_of(name: &str, v: f64, theme: &Theme) -> Style {
    let failure = name.starts_with("failed") || name.starts_with("kv_expired");
    if failure && v > 0.0 { theme.fg("error") } else { theme.text() }
}

fn nixl_line(state: &AppState, view: &ViewState, cols: usize, theme: &Theme) -> Line<'static> {
    let hist = |role, h| match view.window {
        HistWindow::Sliding => state.window_hist_of(role, h, view.focus),
        HistWindow::SinceStart => state.total_hist_of(role, h, view.focus),
    };
    let xfer = hist(Role::Decode, Hist::NixlXferTime).unwrap_or_default();
    let bytes = hist(Role::Decode, Hist::NixlBytes).unwrap_or_default();
    let total = |role, c| -> f64 {
        state.instances_of(role).map(|i| i.total_counters.get(&c).copied().unwrap_or(0.0)).sum()
    };
    let n = xfer.total();
    let per = (bytes.count > 0.0).then(|| bytes.sum / bytes.count);
    let throughput = (xfer.sum > 0.0).then(|| bytes.sum / xfer.sum);
    let failed = total(Role::Decode, Counter::NixlFailedTransfers);
    let notif = total(Role::Decode, Counter::NixlFailedNotifications);
    let expired = total(Role::Prefill, Counter::NixlExpired);
    let bad = |name: &str, v: f64| style_of(name, v, theme);
    let rank = |v: f64| if v > 0.0 { 7 } else { 4 };
    let segs = vec![
        (9, vec![Span::styled(format!(" {:<8}", "NIXL"), theme.text())]),
        (6, vec![Span::styled(" transfers ", theme.dim()), Span::styled(fmt::count(n), theme.text())]),
        (
            3,
            vec![
                Span::styled("  time p50 ", theme.dim()),
                Span::styled(fmt::secs(xfer.quantile(0.5)), theme.text()),
                Span::styled(" p90 ", theme.dim()),
                Span::styled(fmt::secs(xfer.quantile(0.9)), theme.text()),
            ],
        ),
        (
            1,
            vec![
                Span::styled("  per transfer ", theme.dim()),
                Span::styled(per.map(fmt::bytes).unwrap_or_else(|| "n/a".into()), theme.text()),
            ],
        ),
        (
            2,
            vec![
                Span::styled("  throughput ", theme.dim()),
                Span::styled(
                    throughput.map(|t| format!("{}/s", fmt::bytes(t))).unwrap_or_else(|| "n/a".into()),
                    theme.text(),
                ),
            ],
        ),
        (
            rank(failed),
            vec![
                Span::styled("  failed ", theme.dim()),
                Span::styled(fmt::count(failed), bad("failed", failed)),
            ],
        ),
        (
            rank(notif),
            vec![
                Span::styled("  notif failed ", theme.dim()),
                Span::styled(fmt::count(notif), bad("failed", notif)),
            ],
        ),
        (
            rank(expired),
            vec![
                Span::styled("  expired ", theme.dim()),
                Span::styled(fmt::count(expired), bad("kv_expired", expired)),
            ],
        ),
    ];
    Line::from(fmt::keep_whole(segs, cols))
}
