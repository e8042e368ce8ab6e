//! The instance rows and the alert area at the top of every view.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::fmt;
use super::hist::bar;
use crate::feed::Role;
use crate::state::AppState;
use crate::state::alerts::{Alert, AlertKind};
use crate::state::instance::InstanceState;
use crate::theme::Theme;

pub fn role_style(role: Role, theme: &Theme) -> Style {
    theme.fg(role.name())
}

/// One line per instance: who it is and whether it is healthy.
/// More instances than this get one summary line per role instead.
pub const MAX_INSTANCE_ROWS: usize = 4;

pub fn instances(buf: &mut Buffer, area: Rect, state: &AppState, theme: &Theme) {
    if state.instances.len() > MAX_INSTANCE_ROWS {
        let lines: Vec<Line> =
            [Role::Prefill, Role::Decode].into_iter().map(|r| role_summary(state, r, theme)).collect();
        super::text::draw(buf, area, &lines);
        return;
    }
    let endpoint_w =
        state.instances.iter().map(|i| i.endpoint.display.chars().count()).max().unwrap_or(0).clamp(12, 40);
    let lines: Vec<Line> = state
        .instances
        .iter()
        .take(area.height as usize)
        .map(|i| instance_line(i, state.now, area.width, endpoint_w, block_differs(state), theme))
        .collect();
    super::text::draw(buf, area, &lines);
}

fn block_differs(state: &AppState) -> bool {
    state.mismatches.iter().any(|m| m.field == "block_size")
}

fn instance_line(
    i: &InstanceState,
    now: f64,
    width: u16,
    endpoint_w: usize,
    block_differs: bool,
    theme: &Theme,
) -> Line<'static> {
    let role = i.endpoint.role;
    // Whole segments go, the least telling first, when the row is too
    // wide; the restart marker and the state stay whole (a cut `↻ 1` of
    // 11 reads as a wrong number).
    let mut segs: Vec<(u8, Vec<Span<'static>>)> = vec![(
        9,
        vec![
            Span::styled(format!(" {:<7} ", role.name().to_uppercase()), role_style(role, theme)),
            Span::styled(format!("{:<endpoint_w$} ", i.endpoint.display), theme.text()),
        ],
    )];
    if width >= 100 {
        let model = i.model_name().unwrap_or("?").to_string();
        let block = i.block_size().map(|b| format!("blk {b}")).unwrap_or_else(|| "blk ?".into());
        let block_style = if block_differs { theme.fg("error") } else { theme.dim() };
        segs.push((
            2,
            vec![
                Span::styled(format!("{model:<12.12} "), theme.dim()),
                Span::styled(format!("{block:<7} "), block_style),
            ],
        ));
    }
    let restarts = (i.health.restarts > 0)
        .then(|| (8, vec![Span::styled(format!(" ↻ {} restart(s)", i.health.restarts), theme.fg("warn"))]));
    let h = &i.health;
    if h.up {
        segs.push((
            8,
            vec![
                Span::styled("● up ", theme.fg("ok")),
                Span::styled(format!("{:<5} ", up_label(i, now)), theme.dim()),
            ],
        ));
        if let Some(s) = &i.latest {
            let run = s.running.map(fmt::count).unwrap_or_else(|| "?".into());
            let wait = s.waiting.map(fmt::count).unwrap_or_else(|| "?".into());
            segs.push((5, vec![Span::styled(format!("run {run:>3} wait {wait:>3}  "), theme.text())]));
            let w = 10;
            let b = s.kv_usage.map(|u| bar(u, 1.0, w)).unwrap_or_default();
            let pad = w.saturating_sub(b.chars().count());
            segs.push((
                4,
                vec![
                    Span::styled("KV ", theme.dim()),
                    Span::styled(format!("▕{b}{}▏", " ".repeat(pad)), role_style(role, theme)),
                ],
            ));
            segs.push((6, vec![Span::styled(format!("{:>6} ", fmt::pct(s.kv_usage)), theme.text())]));
        }
        if h.no_vllm_metrics {
            segs.push((
                7,
                vec![Span::styled(
                    " ⚠ no vllm: metrics (wrong port? --disable-log-stats?) ",
                    theme.fg("warn"),
                )],
            ));
        }
        if h.bad_lines_last > 0 {
            segs.push((
                7,
                vec![Span::styled(format!(" ⚠ {} bad lines ", h.bad_lines_last), theme.fg("warn"))],
            ));
        }
    } else if h.scrapes_failed == 0 {
        segs.push((8, vec![Span::styled("○ connecting…", theme.dim())]));
    } else {
        let since = h.last_ok.map(|t| format!(" {}", fmt::age(now - t))).unwrap_or_default();
        segs.push((9, vec![Span::styled(format!("✖ DOWN{since} "), theme.fg("error"))]));
        // The error gets what the rest leaves, cut by words.
        let used: usize = segs.iter().chain(&restarts).flat_map(|(_, s)| s).map(Span::width).sum();
        let room = (width as usize).saturating_sub(used);
        let err = h.last_error.clone().unwrap_or_default();
        let text = fmt::shorten(&format!("{err} ({} failed, retrying) ", h.consecutive_failures), room);
        segs.push((3, vec![Span::styled(text, theme.fg("error"))]));
    }
    segs.extend(restarts);
    Line::from(fmt::keep_whole(segs, width as usize))
}

/// How long the process has been up (`process_start_time_seconds`, on the
/// scrape's clock), or where vLLM exports no process start (multiprocess
/// metrics) the age of the last good scrape, said as an age.
fn up_label(i: &InstanceState, now: f64) -> String {
    // A restart whose process stated no newer start (counters reset under
    // an unchanged `process_start_time_seconds`) began it when seen.
    let start = i.latest.as_ref().and_then(|s| s.process_start);
    let start = match (start, i.health.started_unstated) {
        (Some(s), Some(r)) => Some(s.max(r)),
        (s, _) => s,
    };
    match start {
        Some(start) => fmt::age(now - start),
        None => format!("· {} ago", i.health.last_ok.map(|t| fmt::age(now - t)).unwrap_or_default()),
    }
}

/// A fleet's role in one line: how many are up, load, KV, restarts, and
/// which are down.
fn role_summary(state: &AppState, role: Role, theme: &Theme) -> Line<'static> {
    let all: Vec<&InstanceState> = state.instances_of(role).collect();
    let up = all.iter().filter(|i| i.health.up).count();
    let sum = |f: fn(&crate::metrics::model::InstanceSample) -> Option<f64>| -> f64 {
        all.iter().filter(|i| i.health.up).filter_map(|i| i.latest.as_ref().and_then(f)).sum()
    };
    let kvs: Vec<f64> =
        all.iter().filter(|i| i.health.up).filter_map(|i| i.latest.as_ref()?.kv_usage).collect();
    let mean = if kvs.is_empty() { None } else { Some(kvs.iter().sum::<f64>() / kvs.len() as f64) };
    let max = kvs.iter().copied().fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    let restarts: u32 = all.iter().map(|i| i.health.restarts).sum();
    let mut spans = vec![
        Span::styled(format!(" {:<7} ", role.name().to_uppercase()), role_style(role, theme)),
        Span::styled(format!("{} instances ", all.len()), theme.text()),
        Span::styled(format!("● {up} up "), theme.fg("ok")),
    ];
    if up < all.len() {
        spans.push(Span::styled(format!("✖ {} down ", all.len() - up), theme.fg("error")));
    }
    spans.push(Span::styled(
        format!(
            " run {} wait {}  KV mean {} max {}",
            fmt::count(sum(|s| s.running)),
            fmt::count(sum(|s| s.waiting)),
            fmt::pct(mean),
            fmt::pct(max)
        ),
        theme.text(),
    ));
    if restarts > 0 {
        spans.push(Span::styled(format!("  ↻ {restarts} restart(s)"), theme.fg("warn")));
    }
    let down: Vec<&str> = all
        .iter()
        .filter(|i| !i.health.up && i.health.scrapes_failed > 0)
        .map(|i| i.endpoint.display.as_str())
        .take(3)
        .collect();
    if !down.is_empty() {
        spans.push(Span::styled(format!("  down: {}", down.join(", ")), theme.fg("error")));
    }
    Line::from(spans)
}

/// Rows the alert area takes at most; more alerts are named on the last.
pub const MAX_ALERT_ROWS: usize = 3;
/// Below this many terminal rows the alert area takes one row (the most
/// severe, the others named on it): three would cut the Requests panel's
/// counts at 80x24.
pub const SHORT_SCREEN_ROWS: u16 = 30;

/// The rows the alert area needs for these alerts on a screen `rows`
/// high (0 when none).
pub fn alert_height(alerts: &[Alert], rows: u16) -> u16 {
    let most = if rows < SHORT_SCREEN_ROWS { 1 } else { MAX_ALERT_ROWS };
    alerts.len().min(most) as u16
}

/// The alert area: one loud row per alerting kind, most severe first, each
/// with its count and the age of its newest occurrence (the state decides
/// what alerts: `AppState::alerts`).
pub fn alerts(buf: &mut Buffer, area: Rect, alerts: &[Alert], now: f64, theme: &Theme) {
    let rows = area.height as usize;
    let lines: Vec<Line> = alerts
        .iter()
        .take(rows)
        .enumerate()
        .map(|(i, a)| {
            let more = if i + 1 == rows && alerts.len() > rows {
                let rest: Vec<&str> = alerts[rows..].iter().map(|a| a.kind.title()).collect();
                format!(" (+ {})", rest.join(", "))
            } else {
                String::new()
            };
            // Cut by words with an ellipsis; the numbers lead, so they stay.
            let room = (area.width as usize).saturating_sub(fmt::width(&more));
            Line::styled(format!("{}{more}", fmt::shorten(&alert_text(a, now), room)), theme.alarm())
        })
        .collect();
    // What `Paragraph::new(lines).style(alarm)` draws: the style over the
    // whole area, the lines on it (`text::draw`, a Paragraph's cells).
    let area = area.intersection(buf.area);
    buf.set_style(area, theme.alarm());
    super::text::draw(buf, area, &lines);
}

/// ` ▲ SILENT MISS ×8  3.0s ago  lab-mismatch-3: …`: the numbers first, so
/// that a narrow screen cuts the words, never a number.
pub fn alert_text(a: &Alert, now: f64) -> String {
    let count = match a.kind {
        AlertKind::WrongWire => String::new(),
        _ => format!(" ×{}", a.count),
    };
    let age = a.last.map(|t| format!("  {} ago", fmt::age(now - t))).unwrap_or_default();
    format!(" ▲ {}{count}{age}  {} ", a.kind.title(), a.text)
}

/// One line on the tailed logs: each file's state and line count.
pub fn logs_line(buf: &mut Buffer, area: Rect, state: &AppState, logs_only: bool, theme: &Theme) {
    // The file names go first when the line is too wide, then whole files
    // (the last first), never a count cut in two.
    let cols = area.width as usize;
    let full = logs_spans(state, logs_only, true, theme);
    let spans = if full.iter().map(Span::width).sum::<usize>() <= cols {
        full
    } else {
        let mut segments: Vec<(u8, Vec<Span<'static>>)> = Vec::new();
        for (i, part) in logs_spans(state, logs_only, false, theme).split(|s| s.content == "   ").enumerate()
        {
            let mut part = part.to_vec();
            part.push(Span::raw("   "));
            segments.push((if i == 0 { 2 } else { 1 }, part));
        }
        fmt::keep_whole(segments, cols)
    };
    super::text::draw(buf, area, &[Line::from(spans)]);
}

fn logs_spans(state: &AppState, logs_only: bool, names: bool, theme: &Theme) -> Vec<Span<'static>> {
    let Some(logs) = &state.logs else {
        return Vec::new();
    };
    let mut spans = vec![Span::styled(" LOGS    ", theme.dim())];
    if logs_only {
        spans.push(Span::styled("logs only, no metrics · ", theme.fg("warn")));
    }
    for s in &logs.sources {
        use crate::feed::TailState;
        let name = std::path::Path::new(&s.path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| s.path.clone());
        let (mark, style) = match &s.state {
            Some(TailState::Following) => ("●", theme.fg("ok")),
            Some(TailState::CatchingUp) => ("◐ reading", theme.fg("warn")),
            Some(TailState::Ended) => ("■", theme.dim()),
            Some(TailState::Missing) => ("✖ missing", theme.fg("error")),
            Some(TailState::Error(_)) => ("✖", theme.fg("error")),
            None => ("○", theme.dim()),
        };
        spans.push(Span::styled(format!("{mark} "), style));
        let name = if names { format!(" {name}") } else { String::new() };
        spans.push(Span::styled(
            format!("{}{name} {} lines", s.source, fmt::count(s.lines as f64)),
            theme.text(),
        ));
        let c = &s.counts;
        let skipped = c.long_lines_skipped + c.invalid_utf8_lines;
        if c.rotations + c.truncations > 0 {
            spans.push(Span::styled(format!(" rotated {}×", c.rotations + c.truncations), theme.fg("warn")));
        }
        if skipped > 0 {
            spans.push(Span::styled(format!(" ⚠{skipped} bad"), theme.fg("warn")));
        }
        let unknown = logs.correlator.unknown_lines(s.source);
        if unknown > 0 {
            spans.push(Span::styled(format!(" ?{} unknown", fmt::count(unknown as f64)), theme.dim()));
        }
        if let Some(TailState::Error(e)) = &s.state {
            spans.push(Span::styled(format!(" {e}"), theme.fg("error")));
        }
        spans.push(Span::raw("   "));
    }
    spans
}

/// What the logs read after the fact could not say, the weightiest first
/// (a file left out before an assumed year).
pub fn notes_line(buf: &mut Buffer, area: Rect, notes: &[String], theme: &Theme) {
    let mut notes: Vec<&String> = notes.iter().collect();
    notes.sort_by_key(|n| !n.contains("not used"));
    let text = notes.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(" · ");
    super::text::draw(buf, area, &[Line::styled(format!(" NOTE    {text}"), theme.fg("warn"))]);
}

/// The newest collector failure, kept on screen: a collector that stopped
/// must not look like a quiet source.
pub fn source_errors_line(buf: &mut Buffer, area: Rect, state: &AppState, theme: &Theme) {
    let Some((source, error)) = state.source_errors.last() else {
        return;
    };
    let more = state.source_errors.len() - 1;
    let more = if more > 0 { format!(" (+{more} earlier, see Events)") } else { String::new() };
    let text = format!(" ✖ {source}: {error}{more}");
    super::text::draw(buf, area, &[Line::styled(text, theme.fg("error"))]);
}

/// `pdtop doctor`'s word on the pair: its counts, and the first problem.
pub fn doctor_line(buf: &mut Buffer, area: Rect, state: &AppState, theme: &Theme) {
    use crate::doctor::Severity;
    let Some(r) = &state.doctor.report else {
        return;
    };
    let worst = r.findings.first().map(|f| f.severity);
    let style = match worst {
        Some(Severity::Problem) => theme.fg("error"),
        Some(Severity::Warning) => theme.fg("warn"),
        // Nothing wrong in what was read, but not all was: no green.
        _ if !r.unread.is_empty() => theme.fg("warn"),
        _ => theme.fg("ok"),
    };
    let first = r
        .findings
        .first()
        .filter(|f| f.severity != Severity::Note)
        .map(|f| format!(" · {}: {}", f.subject, f.cause))
        .or_else(|| r.unread.first().map(|u| format!(" · not read: {}: {}", u.source, u.why)))
        .unwrap_or_default();
    let head = r.short_headline().replacen("doctor:", "DOCTOR ", 1);
    super::text::draw(buf, area, &[Line::styled(format!(" {head}{first}"), style)]);
}
