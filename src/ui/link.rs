//! The Link view: did the KV bytes move, and were they the size the
//! model's shape predicts?
//!
//! ```text
//! ┌ KV size ───────────────────────────────────────────────────────────┐
//! │ 147,456 B/token · 1,024-token prompt = 144 MiB: 1.2 s at 1 Gb/s …  │
//! ├ observed vs predicted ─────────────────────────────────────────────┤
//! │ source            last 60s: observed  predicted  ratio  verdict    │
//! ├ throughput ────────────────────────────────────────────────────────┤
//! │ ▁▂▅█▃                                                              │
//! ├ requests: the wire, worth it, each request's bytes ────────────────┤
//! └────────────────────────────────────────────────────────────────────┘
//! ```

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;
use ratatui::widgets::{Paragraph, Sparkline};

use super::{HistWindow, ViewState, fmt};
use crate::feed::Role;
use crate::kv::{LINK_RATES_GBPS, link_seconds};
use crate::state::AppState;
use crate::state::link::{LinkVerdict, Series, verdict};
use crate::theme::Theme;
use crate::ui::Panel;

/// Below this height the throughput sparkline is left out (its place
/// says so) and the per-request table gets its rows.
const SPARK_MIN_BODY: u16 = 26;
/// Below this height the KV size panel is left out too.
const SIZE_MIN_BODY: u16 = 18;

pub fn render(buf: &mut Buffer, area: Rect, state: &AppState, view: &ViewState, theme: &Theme) {
    let table_lines = table_lines(state, view, area.width.saturating_sub(2) as usize, theme);
    let table_h = table_lines.len() as u16 + 2;
    let spark_h = if area.height >= SPARK_MIN_BODY { 6 } else { 0 };
    // Short of rows, the model's KV size goes too (it never changes) and
    // the per-request table keeps its rows.
    let size_h = if area.height >= SIZE_MIN_BODY { 4 } else { 0 };
    let [size, table, spark, requests] = Layout::vertical([
        Constraint::Length(size_h),
        Constraint::Length(table_h),
        Constraint::Length(spark_h),
        Constraint::Min(0),
    ])
    .areas(area);
    if size_h > 0 {
        size_panel(buf, size, state, theme);
    }
    let title = table_title(state, view);
    super::panel::draw_in(buf, table, block(&title, theme), &table_lines);
    if spark_h > 0 {
        throughput(buf, spark, state, theme);
    } else {
        let hint = if size_h > 0 {
            format!(" throughput: {SPARK_MIN_BODY}+ rows ")
        } else {
            format!(" KV size: {SIZE_MIN_BODY}+ rows · throughput: {SPARK_MIN_BODY}+ ")
        };
        let w = fmt::width(&hint) as u16;
        if table.width > w + 2 && table.height > 0 {
            let at = Rect { x: table.right() - w - 1, y: table.bottom() - 1, width: w, height: 1 };
            Paragraph::new(Span::styled(hint, theme.dim())).render(at, buf);
        }
    }
    super::link_requests::render(buf, requests, state, theme);
}

fn block<'a>(title: &'a str, theme: &Theme) -> Panel<'a> {
    Panel::new(Span::styled(title, theme.fg("title")), theme.fg("border"))
}

fn size_panel(buf: &mut Buffer, area: Rect, state: &AppState, theme: &Theme) {
    let l = &state.link;
    let lines = match &l.model {
        Some(m) => {
            let prompt = 1024u64 * m.bytes_per_token;
            let times: Vec<String> = LINK_RATES_GBPS
                .iter()
                .filter(|g| [1.0, 10.0, 100.0].contains(*g))
                .filter_map(|g| {
                    link_seconds(prompt, *g).map(|s| format!("{} at {g} Gb/s", fmt::secs(Some(s))))
                })
                .collect();
            vec![
                Line::from(vec![
                    Span::styled(format!(" {} bytes/token ", group(m.bytes_per_token)), theme.text()),
                    Span::styled(
                        format!("({}) from {}", fmt::bytes(m.bytes_per_token as f64), m.source),
                        theme.dim(),
                    ),
                ]),
                Line::styled(
                    fmt::shorten(
                        &format!(
                            " a 1,024-token prompt is {} of KV: {}",
                            fmt::bytes(prompt as f64),
                            times.join(" · ")
                        ),
                        area.width.saturating_sub(2) as usize,
                    ),
                    theme.dim(),
                ),
            ]
        }
        None => vec![
            Line::styled(
                " KV size unknown: give --model-config config.json or --kv-bytes-per-token N",
                theme.fg("warn"),
            ),
            Line::styled(
                l.model_error.clone().unwrap_or_else(|| {
                    " (or run vLLM from a local model folder: /v1/models names it)".into()
                }),
                theme.dim(),
            ),
        ],
    };
    super::panel::draw_in(buf, area, block(" KV size the model predicts ", theme), &lines);
}

fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn table_lines(state: &AppState, view: &ViewState, cols: usize, theme: &Theme) -> Vec<Line<'static>> {
    let l = &state.link;
    let since = match view.window {
        HistWindow::Sliding => state.now - state.window_secs,
        HistWindow::SinceStart => f64::NEG_INFINITY,
    };
    let (predicted, requests) = l.predicted.since(since);
    let predicted = if l.model.is_some() { predicted } else { f64::NAN };
    let mut lines = vec![Line::styled(
        format!(" {:<22} {:>12} {:>12} {:>7}  verdict", "source", "observed", "predicted", "ratio"),
        theme.dim(),
    )];
    // Only the path the KV really takes is judged: NIXL's own count, else
    // the connector directory, else the interface.
    let mut judged = false;
    let mut row = |name: String, s: &Series, note: &str| {
        let observed = s.since(since).0;
        let ratio = if predicted > 0.0 { format!("{:.2}", observed / predicted) } else { "n/a".into() };
        let v = if judged { None } else { Some(verdict(observed, predicted)) };
        judged = true;
        let (text, style) = match v.unwrap_or(LinkVerdict::TooLittle) {
            _ if v.is_none() => ("not the KV's path here".to_string(), theme.dim()),
            LinkVerdict::Ok => ("✔ as predicted".to_string(), theme.fg("ok")),
            LinkVerdict::FarBelow => {
                ("✖ far below: the KV did not move (a miss on the wire)".to_string(), theme.alarm())
            }
            LinkVerdict::FarAbove => {
                ("⚠ far above: wrong config, TP replication or other traffic".to_string(), theme.fg("warn"))
            }
            LinkVerdict::TooLittle => ("too little traffic to judge".to_string(), theme.dim()),
        };
        lines.push(Line::from(vec![
            Span::styled(format!(" {name:<22} "), theme.text()),
            Span::styled(
                format!("{:>12} {:>12} {ratio:>7}  ", fmt::bytes(observed), fmt::bytes(predicted)),
                theme.text(),
            ),
            Span::styled(fmt::shorten(&format!("{text}{note}"), cols.saturating_sub(59)), style),
        ]));
    };
    if let Some(f) = l.xfer_family.filter(|_| !l.xfer.points.is_empty()) {
        let name = if f.role == Role::Prefill { "bytes sent" } else { "bytes transferred" };
        row(format!("{} {name}", f.label), &l.xfer, "");
    }
    if l.kvdir_folders > 0 || l.kvdir_error.is_some() || !l.kvdir.points.is_empty() {
        row("kv-dir bytes written".into(), &l.kvdir, " (a miss on decode also writes)");
    }
    if let Some(iface) = &l.iface {
        row(format!("{iface} received"), &l.iface_rx, "");
    }
    if lines.len() == 1 {
        lines.push(Line::styled(
            fmt::shorten(
                " nothing observed: give --iface NAME, --kv-dir DIR, or use NixlConnector (its metrics count bytes)",
                cols,
            ),
            theme.dim(),
        ));
    }
    let mut notes = vec![format!(" {} prefill request(s) in the window", fmt::count(requests))];
    if let Some(e) = &l.iface_error {
        notes.push(format!("interface: {e}"));
    }
    if l.iface_resets > 0 {
        notes.push(format!("counters reset {}x", l.iface_resets));
    }
    if let Some(e) = &l.kvdir_error {
        notes.push(format!("kv-dir: {e}"));
    }
    lines.push(Line::styled(fmt::shorten(&notes.join(" · "), cols), theme.dim()));
    lines
}

fn table_title(state: &AppState, view: &ViewState) -> String {
    match view.window {
        HistWindow::Sliding => format!(" observed vs predicted · last {:.0}s ", state.window_secs),
        HistWindow::SinceStart => " observed vs predicted · since start ".to_string(),
    }
}

fn throughput(buf: &mut Buffer, area: Rect, state: &AppState, theme: &Theme) {
    let l = &state.link;
    let (name, series) = if let Some(f) = l.xfer_family.filter(|_| !l.xfer.points.is_empty()) {
        (f.label, &l.xfer)
    } else if l.iface.is_some() {
        ("interface rx", &l.iface_rx)
    } else {
        ("kv-dir", &l.kvdir)
    };
    let width = area.width.saturating_sub(2) as usize;
    let data: Vec<u64> =
        series.points.iter().rev().take(width).rev().map(|p| p.bytes.max(0.0) as u64).collect();
    let peak = data.iter().copied().max().unwrap_or(0);
    let title = format!(" {name} bytes per sample (peak {}) ", fmt::bytes(peak as f64));

    let block = block(&title, theme);
    block.render(area, buf);
    Sparkline::default().data(&data).style(theme.fg("source_external")).render(block.inner(area), buf);
}
