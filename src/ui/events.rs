//! The event log: silent misses, restarts, instances going down and up,
//! collectors that failed, roles that disagree, and whether an instance
//! came back clean after a restart or a cancellation. Newest first. An
//! event of an alerting kind (a death, an error, a miss, a disagreement)
//! carries the alert area's mark (`▲ MISS `) in its loud style.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{ViewState, fmt};
use crate::state::alerts::AlertKind;
use crate::state::{AppState, EventKind};
use crate::theme::Theme;
use crate::ui::Panel;

pub fn render(buf: &mut Buffer, area: Rect, state: &AppState, view: &ViewState, theme: &Theme) {
    let title = match view.search.is_empty() {
        true => " events ".to_string(),
        false => format!(" events /{} ", view.search),
    };
    list(buf, area, state, Some(view.scroll), &view.search, &title, theme);
}

/// The newest few events, under the request panel of the overview.
pub fn render_recent(buf: &mut Buffer, area: Rect, state: &AppState, theme: &Theme) {
    list(buf, area, state, None, "", " recent events ", theme);
}

/// The events the Events view lists, newest first, those naming `filter`.
pub fn shown<'a>(state: &'a AppState, filter: &str) -> Vec<&'a crate::state::Event> {
    let q = filter.to_lowercase();
    state.events.iter().rev().filter(|e| q.is_empty() || e.text.to_lowercase().contains(&q)).collect()
}

/// The request an event names (`lab-mismatch-3: prefill on ...`), if a
/// held trace has that id.
pub fn request_of(state: &AppState, e: &crate::state::Event) -> Option<String> {
    let id = e.text.split(": ").next()?.trim();
    let found = crate::report::request_ids::search(state, id);
    let (t, _) = found.first()?;
    (t.id == id || t.engine_ids.iter().any(|(_, x)| x == id)).then(|| id.to_string())
}

/// `selected`: the row the Events view has selected (none in the overview's).
fn list(
    buf: &mut Buffer,
    area: Rect,
    state: &AppState,
    selected: Option<usize>,
    filter: &str,
    title: &str,
    theme: &Theme,
) {
    let shown = shown(state, filter);
    let block =
        Panel::new(Span::styled(format!("{title}({}) ", shown.len()), theme.fg("title")), theme.fg("border"));
    // The selected row in sight, the last page shown whole.
    let rows = area.height.saturating_sub(2).max(1) as usize;
    let selected = selected.map(|n| n.min(shown.len().saturating_sub(1)));
    let skip = selected.unwrap_or(0).saturating_sub(rows - 1).min(shown.len().saturating_sub(rows));
    let lines: Vec<Line> = shown
        .into_iter()
        .enumerate()
        .skip(skip)
        .take(area.height as usize)
        .map(|(n, e)| {
            // What alerts is marked as the alert area marks it.
            let alert = AlertKind::of_event(e.kind).map(|a| (a.tag(), theme.alarm()));
            let (tag, style) = alert.unwrap_or_else(|| match e.kind {
                EventKind::SilentMiss => ("MISS   ", theme.alarm()),
                EventKind::Restart => ("RESTART", theme.fg("warn")),
                EventKind::Down => ("DOWN   ", theme.fg("error")),
                EventKind::Up => ("UP     ", theme.fg("ok")),
                EventKind::SourceError => ("SOURCE ", theme.fg("error")),
                EventKind::Mismatch => ("DIFFER ", theme.fg("error")),
                EventKind::Recovered => ("BACK OK", theme.fg("ok")),
                EventKind::NotRecovered => ("NOT OK ", theme.fg("error")),
                EventKind::KvNotReleased => ("KV HELD", theme.fg("warn")),
                EventKind::RecoveryUnknown => ("BACK ? ", theme.dim()),
                EventKind::Connector(_) => ("KV FAIL", theme.fg("error")),
                EventKind::RouterError => ("ROUTER ", theme.fg("error")),
                EventKind::RequestErrors => ("ERROR  ", theme.fg("error")),
                EventKind::Log(_) => ("LOG    ", theme.fg("error")),
                EventKind::Doctor(s) => ("DOCTOR ", theme.fg(doctor_color(s))),
            });
            let clock = format!(" {} ", fmt::clock(e.t));
            // Cut by words with an ellipsis, never mid-word.
            let room = (area.width as usize).saturating_sub(2 + fmt::width(&clock) + fmt::width(tag) + 1);
            let line = Line::from(vec![
                Span::styled(clock, theme.dim()),
                Span::styled(tag, style),
                Span::styled(format!(" {}", fmt::shorten(&e.text, room)), theme.text()),
            ]);
            if selected == Some(n) { line.style(theme.selected()) } else { line }
        })
        .collect();
    let lines = match (lines.is_empty(), filter.is_empty()) {
        (true, true) => vec![Line::styled(" nothing yet: no miss, restart or outage so far", theme.dim())],
        (true, false) => vec![Line::styled(format!(" no event names \"{filter}\" (Esc: all)"), theme.dim())],
        _ => lines,
    };
    super::panel::draw_in(buf, area, block, &lines);
}

/// A problem as an error, a warning as a warning, a note dim.
pub fn doctor_color(s: crate::doctor::Severity) -> &'static str {
    match s {
        crate::doctor::Severity::Problem => "error",
        crate::doctor::Severity::Warning => "warn",
        crate::doctor::Severity::Note => "dim",
    }
}
