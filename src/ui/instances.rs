//! The Instances view: one line per instance, grouped by role, for fleets
//! (XpYd). Health, KV usage, running/waiting, TTFT p90, and on decode the
//! share of prompt tokens computed locally and the transferred-KV rate.
//! `s` sorts, `/` filters endpoints, Enter drills the Overview into one
//! instance (Esc returns to all).
//!
//! ```text
//! ┌ prefill 8 · 7 up ───────────────────────────────────────────────┐
//! │ ENDPOINT         HEALTH   KV        RUN WAIT  TTFT p90  …        │
//! ├ decode 8 · 8 up ────────────────────────────────────────────────┤
//! └─────────────────────────────────────────────────────────────────┘
//! ```

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};

use super::{ViewState, fmt, hist::bar};
use crate::feed::Role;
use crate::metrics::model::{Counter, Hist};
use crate::state::AppState;
use crate::state::instance::InstanceState;
use crate::theme::Theme;
use crate::ui::Panel;

pub use super::view::SortKey;

/// One instance's figures over the sliding window.
struct Row {
    index: usize,
    ttft_p90: Option<f64>,
    /// Decode: share of prompt tokens computed locally (0..1).
    local_share: Option<f64>,
    /// Decode: transferred prompt tokens per second.
    transfer_rate: Option<f64>,
}

fn row(state: &AppState, index: usize, inst: &InstanceState) -> Row {
    let since = state.now - state.window_secs;
    let ttft_p90 = inst.hist_since(Hist::Ttft, since).and_then(|h| h.quantile(0.9));
    let (mut local, mut total, mut external, mut secs) = (0.0, 0.0, 0.0, 0.0);
    for iv in inst.history.iter().rev().take_while(|iv| iv.t > since) {
        local += iv.counter(Counter::PromptLocalCompute);
        external += iv.counter(Counter::PromptExternal);
        total += iv.counter(Counter::PromptLocalCompute)
            + iv.counter(Counter::PromptLocalCacheHit)
            + iv.counter(Counter::PromptExternal);
        secs += iv.dt;
    }
    let decode = inst.endpoint.role == Role::Decode;
    Row {
        index,
        ttft_p90,
        local_share: (decode && total > 0.0).then(|| local / total),
        transfer_rate: (decode && secs > 0.0).then(|| external / secs),
    }
}

/// The rows of one role, filtered by the search text and sorted.
fn rows(state: &AppState, view: &ViewState, role: Role) -> Vec<Row> {
    let q = view.search.to_lowercase();
    let mut rows: Vec<Row> = state
        .instances
        .iter()
        .enumerate()
        .filter(|(_, i)| i.endpoint.role == role)
        .filter(|(_, i)| q.is_empty() || i.endpoint.display.to_lowercase().contains(&q))
        .map(|(n, i)| row(state, n, i))
        .collect();
    let inst = |r: &Row| &state.instances[r.index];
    match view.inst_sort {
        SortKey::Role => {}
        SortKey::Health => rows.sort_by_key(|r| (inst(r).health.up, inst(r).health.restarts == 0)),
        SortKey::KvUsage => rows.sort_by(|a, b| {
            let kv = |r: &Row| inst(r).latest.as_ref().and_then(|s| s.kv_usage).unwrap_or(-1.0);
            kv(b).total_cmp(&kv(a))
        }),
        SortKey::TtftP90 => {
            rows.sort_by(|a, b| b.ttft_p90.unwrap_or(-1.0).total_cmp(&a.ttft_p90.unwrap_or(-1.0)))
        }
    }
    rows
}

/// The instance indexes in display order (prefill rows, then decode).
pub fn order(state: &AppState, view: &ViewState) -> Vec<usize> {
    [Role::Prefill, Role::Decode].into_iter().flat_map(|r| rows(state, view, r)).map(|r| r.index).collect()
}

pub fn render(buf: &mut Buffer, area: Rect, state: &AppState, view: &ViewState, theme: &Theme) {
    let prefill = rows(state, view, Role::Prefill);
    let decode = rows(state, view, Role::Decode);
    // Each role gets room for its rows, the decode side the rest.
    // Each role gets room for its rows; when both do not fit, they share
    // the height by size.
    let want = |n: usize| (n as u16 + 3).max(4);
    let (p, d) = (want(prefill.len()), want(decode.len()));
    let [top, bottom] = if p + d <= area.height {
        Layout::vertical([Constraint::Length(p), Constraint::Min(d)]).areas(area)
    } else {
        Layout::vertical([Constraint::Fill(p), Constraint::Fill(d)]).areas(area)
    };
    let selected = order(state, view).get(view.inst_selected).copied();
    table(buf, top, state, view, Role::Prefill, &prefill, selected, theme);
    table(buf, bottom, state, view, Role::Decode, &decode, selected, theme);
}

#[allow(clippy::too_many_arguments)]
fn table(
    buf: &mut Buffer,
    area: Rect,
    state: &AppState,
    view: &ViewState,
    role: Role,
    rows: &[Row],
    selected: Option<usize>,
    theme: &Theme,
) {
    let up = rows.iter().filter(|r| state.instances[r.index].health.up).count();
    let mut title = vec![Span::styled(
        format!(" {} {} · {} up · sorted by {} ", role.name(), rows.len(), up, view.inst_sort.label()),
        theme.fg(role.name()),
    )];
    if !view.search.is_empty() {
        title.push(Span::styled(format!(" /{} ", view.search), theme.fg("accent")));
    }
    let block = Panel::new(Line::from(title), theme.fg("border"));
    let inner = block.inner(area);
    block.render(area, buf);
    let narrow = inner.width < 100;
    let decode = role == Role::Decode;
    let kv_w = if narrow { 7 } else { 16 };
    let mut header = format!(
        " {:<21} {:<10} {:<kv_w$} {:>4} {:>4} {:>9}",
        "ENDPOINT", "HEALTH", "KV", "RUN", "WAIT", "TTFT p90"
    );
    if decode {
        header.push_str(&format!(" {:>7}", "LOCAL%"));
    }
    if decode && !narrow {
        header.push_str(&format!(" {:>10}", "XFER tok/s"));
    }
    let mut lines = vec![Line::styled(header, theme.dim())];
    let height = inner.height.saturating_sub(1) as usize;
    let pos = selected.and_then(|s| rows.iter().position(|r| r.index == s)).unwrap_or(0);
    let first = pos.saturating_sub(height.saturating_sub(1));
    for r in rows.iter().skip(first).take(height) {
        let i = &state.instances[r.index];
        let h = &i.health;
        let (health, hstyle) = if h.up {
            (
                format!("● up{}", if h.restarts > 0 { format!(" ↻{}", h.restarts) } else { String::new() }),
                theme.fg("ok"),
            )
        } else if h.scrapes_failed == 0 {
            ("○ …".to_string(), theme.dim())
        } else {
            (
                format!("✖ {}", h.last_ok.map(|t| fmt::age(state.now - t)).unwrap_or_else(|| "down".into())),
                theme.fg("error"),
            )
        };
        let s = i.latest.as_ref();
        let kv = s.and_then(|s| s.kv_usage);
        let gauge = kv.map(|u| bar(u, 1.0, 8)).unwrap_or_default();
        let pad = 8usize.saturating_sub(gauge.chars().count());
        let num = |v: Option<f64>| v.map(fmt::count).unwrap_or_else(|| "?".into());
        let mut spans = vec![
            Span::styled(format!(" {:<21.21} ", i.endpoint.display), theme.text()),
            Span::styled(format!("{health:<10} "), hstyle),
        ];
        if !narrow {
            spans.push(Span::styled(format!("{gauge}{} ", " ".repeat(pad)), theme.fg(role.name())));
        }
        spans.extend([
            Span::styled(format!("{:>7} ", fmt::pct(kv)), theme.text()),
            Span::styled(
                format!(
                    "{:>4} {:>4} {:>9}",
                    num(s.and_then(|s| s.running)),
                    num(s.and_then(|s| s.waiting)),
                    fmt::secs(r.ttft_p90)
                ),
                theme.text(),
            ),
        ]);
        if decode {
            let share = r.local_share.map(|v| format!("{:.0}%", v * 100.0)).unwrap_or_else(|| "n/a".into());
            let style = if r.local_share.is_some_and(|v| v > 0.5) { theme.fg("warn") } else { theme.text() };
            spans.push(Span::styled(format!(" {share:>7}"), style));
        }
        if decode && !narrow {
            spans.push(Span::styled(
                format!(" {:>10}", r.transfer_rate.map(fmt::count).unwrap_or_else(|| "n/a".into())),
                theme.text(),
            ));
        }
        if !h.up && h.scrapes_failed > 0 && !narrow {
            spans.push(Span::styled(
                format!("  {}", h.last_error.clone().unwrap_or_default()),
                theme.fg("error"),
            ));
        }
        let mut line = Line::from(spans);
        if selected == Some(r.index) {
            line = line.style(theme.selected());
        }
        lines.push(line);
    }
    super::text::draw(buf, inner, &lines);
}
