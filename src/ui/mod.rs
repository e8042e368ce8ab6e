//! Rendering, from state only: `render` reads an [`AppState`] and a
//! [`ViewState`] and draws; it never does I/O and never mutates either.
//!
//! ```text
//! ┌ tabs ─────────────────────────────── model · window · clock · badges ┐
//! │ one header row per instance (role, endpoint, model, block, health)   │
//! │ the alert area: death, errors, misses, wire, config (only when any)  │
//! │ the current view (Overview, Events)                                  │
//! │ footer: the keys                                                     │
//! └──────────────────────────────────────────────────────────────────────┘
//! ```
//! Overlays (help) are drawn last.

pub mod connectors;
pub mod events;
pub mod fmt;
pub mod header;
pub mod hist;
pub mod instances;
pub mod latency_chart;
pub mod link;
mod link_requests;
pub mod overview;
mod panel;
mod plot;
mod recent_requests;
pub mod requests;
pub mod router;
mod screen;
pub mod sources_chart;
pub mod svg;
mod text;
mod view;
pub mod waterfall;

pub use panel::Panel;
pub use screen::{Screen, Surface, write_changes};
pub use view::{DemoInfo, HistWindow, NO_METRICS, View, ViewState};

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;
use ratatui::widgets::{Clear, Paragraph};

use crate::keymap;
use crate::state::AppState;
use crate::theme::Theme;

/// Draws one frame.
pub fn render(buf: &mut Buffer, live: &AppState, view: &ViewState, theme: &Theme) {
    let state = view.frozen.as_deref().unwrap_or(live);
    let area = buf.area;
    // A pair gets a row per instance; a fleet a summary per role (the
    // Instances view has the rows).
    let header_rows =
        if state.instances.len() <= header::MAX_INSTANCE_ROWS { state.instances.len() as u16 } else { 2 };
    let alerts = state.alerts(view.wire_warning(state));
    // What alerts is the state's call (`AppState::alerts`); it takes
    // `header::alert_height` rows.
    let banner = header::alert_height(&alerts, area.height);
    let router_row = u16::from(state.router.is_some());
    let logs_row = u16::from(state.logs.is_some());
    let notes_row = u16::from(!view.notes.is_empty());
    let errors_row = u16::from(!state.source_errors.is_empty());
    let doctor_row = u16::from(state.doctor.report.is_some());
    let [
        top,
        instances,
        router_area,
        logs_area,
        notes_area,
        errors_area,
        doctor_area,
        banner_area,
        body,
        footer,
    ] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(header_rows),
        Constraint::Length(router_row),
        Constraint::Length(logs_row),
        Constraint::Length(notes_row),
        Constraint::Length(errors_row),
        Constraint::Length(doctor_row),
        Constraint::Length(banner),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(area);
    title_bar(buf, top, state, view, theme);
    header::instances(buf, instances, state, theme);
    if router_row > 0 {
        router::router_line(buf, router_area, state, theme);
    }
    if logs_row > 0 {
        header::logs_line(buf, logs_area, state, view.logs_only, theme);
    }
    if notes_row > 0 {
        header::notes_line(buf, notes_area, &view.notes, theme);
    }
    if errors_row > 0 {
        header::source_errors_line(buf, errors_area, state, theme);
    }
    if doctor_row > 0 {
        header::doctor_line(buf, doctor_area, state, theme);
    }
    if banner > 0 {
        header::alerts(buf, banner_area, &alerts, state.now, theme);
    }
    // A page of the view's list, for PgUp / PgDn and `G`.
    view.page.set(body.height.saturating_sub(3).max(1) as usize);
    match view.view {
        View::Overview => overview::render(buf, body, state, view, theme),
        View::Instances => instances::render(buf, body, state, view, theme),
        View::Requests => requests::render(buf, body, state, view, theme),
        View::Link => link::render(buf, body, state, view, theme),
        View::Events => events::render(buf, body, state, view, theme),
    }
    let replay = view.badge.is_some();
    footer_bar(buf, footer, replay, view.said.as_deref(), theme);
    if view.help {
        help_overlay(buf, area, replay, theme);
    }
    view.folds.end_frame();
}

fn title_bar(buf: &mut Buffer, area: Rect, state: &AppState, view: &ViewState, theme: &Theme) {
    let mut spans = vec![Span::styled(" pdtop ", theme.fg("accent"))];
    for v in View::ALL {
        let style = if v == view.view {
            theme
                .fg("title")
                .add_modifier(ratatui::style::Modifier::BOLD | ratatui::style::Modifier::UNDERLINED)
        } else {
            theme.dim()
        };
        spans.push(Span::styled(format!(" {} ", v.title()), style));
    }
    let left_w: usize = spans.iter().map(|s| s.width()).sum();
    let window = match view.window {
        HistWindow::Sliding => format!("last {:.0}s", state.window_secs),
        HistWindow::SinceStart => "since start".to_string(),
    };
    let focus = view
        .focus
        .and_then(|i| state.instances.get(i))
        .map(|i| format!("only {} (Esc: all) · ", i.endpoint.display))
        .unwrap_or_default();
    let clock = format!("{focus}{window} · {} UTC ", fmt::clock(state.now));
    let demo_long = view.demo.as_ref().map(|d| {
        format!("demo {} ×{:.0} loop {} {:.0}% · ", d.capture, d.speed, d.loop_no + 1, d.progress * 100.0)
    });
    let demo_short =
        view.demo.as_ref().map(|d| format!("demo ×{:.0} {:.0}% · ", d.speed, d.progress * 100.0));
    let badge = if view.frozen.is_some() { " FROZEN  " } else { "" };
    // Widest form that fits beside the tabs: full, short demo, no clock.
    let room = (area.width as usize).saturating_sub(left_w);
    let demo_long = demo_long.or_else(|| view.badge.as_ref().map(|b| b.long.clone()));
    let demo_short = demo_short.or_else(|| view.badge.as_ref().map(|b| b.short.clone()));
    // Without the clock, the window still shows (`w` changes it), and no
    // separator is left dangling.
    let short = demo_short.unwrap_or_default();
    let candidates = [
        (demo_long.clone().unwrap_or_default(), clock.clone()),
        (short.clone(), clock.clone()),
        (short.clone(), format!("{focus}{window} ")),
        (short.trim_end_matches(" · ").to_string() + " ", String::new()),
    ];
    let (demo, clock) = candidates
        .iter()
        .find(|(d, c)| d.chars().count() + c.chars().count() + badge.len() <= room)
        .cloned()
        .unwrap_or_default();
    let mut right = vec![Span::styled(demo, theme.fg("accent")), Span::styled(clock, theme.dim())];
    if view.frozen.is_some() {
        right.push(Span::styled(" FROZEN ", theme.badge()));
        right.push(Span::raw(" "));
    }
    let right_w: u16 = right.iter().map(|s| s.width() as u16).sum();
    let [l, r] = Layout::horizontal([Constraint::Min(0), Constraint::Length(right_w)]).areas(area);
    text::draw(buf, l, &[Line::from(spans)]);
    text::draw(buf, r, &[Line::from(right)]);
}

fn footer_bar(buf: &mut Buffer, area: Rect, replay: bool, said: Option<&str>, theme: &Theme) {
    // What the last key changed, said until the next key.
    if let Some(said) = said {
        text::draw(buf, area, &[Line::styled(format!(" {said}"), theme.fg("accent"))]);
        return;
    }
    let live = [("space", "freeze"), ("w", "window")];
    let played = [("p", "pause"), ("←/→", "seek")];
    let keys = [("q", "quit"), ("?", "help"), ("Tab", "view")]
        .into_iter()
        .chain(if replay { played } else { live })
        .chain([("j/k", "move"), ("/", "search"), ("Enter", "trace"), ("f", "follow")]);
    // Whole keys only: the ones that do not fit are in `?`.
    let mut spans = Vec::new();
    let mut used = 0;
    for (k, what) in keys {
        let (key, word) = (format!(" {k} "), format!("{what} "));
        used += fmt::width(&key) + fmt::width(&word);
        if used > area.width as usize {
            break;
        }
        spans.push(Span::styled(key, theme.fg("accent")));
        spans.push(Span::styled(word, theme.dim()));
    }
    text::draw(buf, area, &[Line::from(spans)]);
}

fn help_overlay(buf: &mut Buffer, area: Rect, replay: bool, theme: &Theme) {
    let lines: Vec<Line> = keymap::help_lines_for(replay)
        .into_iter()
        .map(|(k, t)| {
            Line::from(vec![
                Span::styled(format!("{k:>14}  "), theme.fg("accent")),
                Span::styled(t, theme.text()),
            ])
        })
        .collect();
    let h = (lines.len() as u16 + 2).min(area.height);
    let w = 56.min(area.width);
    let [popup] = Layout::vertical([Constraint::Length(h)]).flex(Flex::Center).areas(area);
    let [popup] = Layout::horizontal([Constraint::Length(w)]).flex(Flex::Center).areas(popup);
    Clear.render(popup, buf);
    let block = Panel::new(Span::styled(" keys (q/Esc closes) ", theme.fg("title")), theme.fg("accent"));
    block.render(popup, buf);
    Paragraph::new(lines).render(block.inner(popup), buf);
}
