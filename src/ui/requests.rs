//! The Requests view: one row per request, newest first, coloured by
//! outcome; `/` filters ids; Enter opens the trace of the selected request:
//! its timeline through proxy → prefill → connector → decode.
//!
//! ```text
//! ┌ requests 76 · loaded 60 · silent miss 8 · no prefill 8 ─── /edge ┐
//! │ TIME     ID                OUTCOME      HOW  KV TOK DECODE  EVID… │
//! │ 06:26:03 lab-mismatch-3    SILENT MISS  id✓       - :8200   pre…  │
//! └───────────────────────────────────────────────────────────────────┘
//! ┌ trace lab-mismatch-3 ───────────────────────────────────────────┐
//! │ 06:26:09.0 prefill  prefill#0 APIServer pid=2797  0.4 s  …      │
//! └───────────────────────────────────────────────────────────────────┘
//! ```

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

use super::{ViewState, fmt};
use crate::feed::LogOrigin;
use crate::report::origin_endpoint;
use crate::report::request_ids::{self, IdKind};
use crate::report::timed::{Timed, TimedBy, phase_duration, phase_timed_by};
use crate::state::AppState;
use crate::theme::Theme;
use crate::traces::{Confidence, Hop, Join, Outcome, Trace};
use crate::ui::Panel;

/// The traces the view lists, newest first, those with an id containing
/// the search text (any id of theirs: `report::request_ids`).
pub fn visible<'a>(state: &'a AppState, view: &ViewState) -> Vec<&'a Trace> {
    let mut rows: Vec<&Trace> =
        request_ids::search(state, &view.search).into_iter().map(|(t, _)| t).collect();
    // A search ranks its own (a whole id first, the nearest arrival first).
    if view.search.trim().is_empty() || view.req_sort != super::waterfall::RequestSort::Newest {
        super::waterfall::sort(&mut rows, &state.spans, view.req_sort);
    }
    rows
}

/// The first `k` of [`visible`]: the overview shows a handful of the up
/// to 2,000 held, each frame. Newest first with no search, the held
/// traces are walked once, keeping the `k` newest; none are gathered.
pub fn visible_first<'a>(state: &'a AppState, view: &ViewState, k: usize) -> Vec<&'a Trace> {
    use super::waterfall::RequestSort;
    let Some(logs) = &state.logs else { return Vec::new() };
    if view.req_sort != RequestSort::Newest || !view.search.trim().is_empty() {
        let mut rows = visible(state, view);
        rows.truncate(k);
        return rows;
    }
    // `visible`'s stable sort of the search's order (newest held first):
    // ties keep that order.
    let order = |a: &(usize, &Trace), b: &(usize, &Trace)| {
        b.1.first_seen.total_cmp(&a.1.first_seen).then(a.0.cmp(&b.0))
    };
    let mut top: Vec<(usize, &Trace)> = Vec::with_capacity(k + 1);
    for row in logs.correlator.traces().rev().enumerate() {
        if top.len() == k && top.last().is_none_or(|last| order(&row, last).is_ge()) {
            continue;
        }
        let at = top.partition_point(|x| order(x, &row).is_lt());
        top.insert(at, row);
        top.truncate(k);
    }
    top.into_iter().map(|(_, t)| t).collect()
}

/// An id cut to `w` columns, padded: the head (`cmpl-`, `chatcmpl-`) and
/// the tail, where ids sharing a prefix differ, around a `…`.
pub fn cut_id(id: &str, w: usize) -> String {
    let n = id.chars().count();
    if n <= w {
        return format!("{id:<w$}");
    }
    if w < 2 {
        return "…".chars().take(w).collect();
    }
    let head = w / 3;
    let tail = w - head - 1;
    let h: String = id.chars().take(head).collect();
    let t: String = id.chars().skip(n - tail).collect();
    format!("{h}…{t}")
}

/// The outcome as the list shows it: an error says at which hop.
fn outcome_cell(t: &Trace) -> String {
    // A flag over time, louder than the verdict it may still reach.
    if t.remote_wait.as_ref().is_some_and(|w| w.stuck_at.is_some()) {
        return "STUCK".to_string();
    }
    match (t.outcome, t.error_at) {
        (Outcome::Error, Some(h)) => format!("ERROR {}", hop_word(h)),
        (o, _) => o.label().to_string(),
    }
}

fn hop_word(h: Hop) -> &'static str {
    match h {
        Hop::Proxy => "proxy",
        Hop::Producer => "prefill",
        Hop::Connector => "connect",
        Hop::Consumer => "decode",
    }
}

/// The decode endpoint that served it, as short as the list needs.
fn decode_cell(state: &AppState, t: &Trace) -> String {
    match t.decode {
        Some(i) => origin_endpoint(state, LogOrigin::Decode(i)),
        None => "-".into(),
    }
}

/// An outcome's colour, wherever a request is listed.
pub(super) fn outcome_style(o: Outcome, theme: &Theme) -> Style {
    match o {
        Outcome::Loaded => theme.fg("ok"),
        Outcome::SilentMiss => theme.alarm(),
        Outcome::Error => theme.fg("error"),
        Outcome::NoPrefill => theme.text(),
        Outcome::Pending | Outcome::Unknown | Outcome::Cancelled => theme.dim(),
    }
}

/// How the trace was joined, in three characters: `id✓`, `id~`, `ord?`.
fn how(t: &Trace) -> String {
    let join = match t.join {
        Join::ById => "id",
        Join::ByPromptTokens => "tok",
        Join::ByOrder => "ord",
    };
    let sure = match t.confidence {
        Confidence::Sure => "✓",
        Confidence::Likely => "~",
        Confidence::Unsure => "?",
    };
    format!("{join}{sure}")
}

pub fn render(buf: &mut Buffer, area: Rect, state: &AppState, view: &ViewState, theme: &Theme) {
    let Some(logs) = &state.logs else {
        let p = Paragraph::new(vec![
            Line::styled(" No logs are tailed, so requests cannot be followed one by one.", theme.text()),
            Line::styled(
                " Give --decode-log (and --prefill-log, --proxy-log) to name each request's outcome.",
                theme.dim(),
            ),
            Line::styled(" The Overview's counts come from metrics alone.", theme.dim()),
        ])
        .block(Block::default().borders(Borders::ALL).border_style(theme.fg("border")));
        p.render(area, buf);
        return;
    };
    let rows = visible(state, view);
    let selected = view.selected.min(rows.len().saturating_sub(1));
    // By identity: a reused id names several traces.
    let detail_id =
        view.followed.or_else(|| view.detail.then(|| rows.get(selected).map(|t| t.serial)).flatten());
    let (list_area, detail_area) = match &detail_id {
        Some(_) => {
            let [a, b] =
                Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(area);
            (a, Some(b))
        }
        None => (area, None),
    };
    let c = logs.correlator.counts();
    // The filter first; on a narrow screen whole counts go, the rarest
    // first, never a number cut in two.
    let t = theme.fg("title");
    let seg = |rank: u8, text: String, style| (rank, vec![Span::styled(text, style)]);
    let miss_style = if c.silent_miss > 0 { theme.alarm() } else { theme.fg("ok") };
    let mut parts = vec![
        (9, filter_title(state, view, &rows, selected, list_area.width, theme)),
        seg(8, format!(" requests {}", c.seen), t),
        seg(5, format!(" · loaded {}", c.loaded), t),
        (7, vec![Span::styled(" · ", t), Span::styled(format!("silent miss {}", c.silent_miss), miss_style)]),
        seg(4, format!(" · no prefill {}", c.no_prefill), t),
        seg(6, format!(" · error {}", c.error), t),
        seg(3, format!(" · cancelled {}", c.cancelled), t),
        seg(2, format!(" · unknown {}", c.unknown), t),
        seg(1, format!(" · pending {} ", c.pending), t),
    ];
    if c.stuck > 0 {
        parts.push(seg(8, format!(" {} STUCK ", c.stuck), theme.fg("error")));
    }
    let spans = (!state.spans.is_empty()).then_some(&state.spans);
    if spans.is_some() {
        parts.push(seg(0, format!(" sorted by {} (s) ", view.req_sort.label()), theme.dim()));
    }
    let title = fmt::keep_whole(parts, list_area.width.saturating_sub(2) as usize);
    let block = Panel::new(Line::from(title), theme.fg("border"));
    let inner = block.inner(list_area);
    block.render(list_area, buf);

    let height = inner.height.saturating_sub(1) as usize;
    // Keep the selection on screen.
    let first = selected.saturating_sub(height.saturating_sub(1));
    // The span columns only where EVIDENCE keeps 16 columns beside them
    // (the trace pane has the waterfall).
    let spans_w = fmt::width(super::waterfall::HEADER) + 1;
    let spans = spans.filter(|_| column_widths(&rows, inner.width as usize, spans_w).2);
    let span_head = if spans.is_some() { format!("{} ", super::waterfall::HEADER) } else { String::new() };
    let (id_w, decode_w, _) = column_widths(&rows, inner.width as usize, fmt::width(&span_head));
    let evidence_w = (inner.width as usize).saturating_sub(
        1 + 9 + id_w + 1 + 13 + 1 + 5 + 7 + decode_w + usize::from(decode_w > 0) + fmt::width(&span_head),
    );
    let decode_head = if decode_w > 0 { format!("{:<decode_w$} ", "DECODE") } else { String::new() };
    let mut lines = vec![Line::styled(
        format!(
            " {:<8} {:<id_w$} {:<13} {:<4} {:>6} {decode_head}{span_head}{}",
            "TIME", "ID", "OUTCOME", "HOW", "KV TOK", "EVIDENCE"
        ),
        theme.dim(),
    )];
    for (i, t) in rows.iter().enumerate().skip(first).take(height) {
        let tokens =
            t.inject_tokens.or(t.remote_num_tokens).map(|n| n.to_string()).unwrap_or_else(|| "-".into());
        let mut line = Line::from(vec![
            // `‹`: read from the logs' past, before pdtop started.
            Span::styled(
                format!("{}{} ", if state.before_start(t) { "‹" } else { " " }, fmt::clock(t.first_seen)),
                theme.dim(),
            ),
            Span::styled(format!("{:<id_w$} ", cut_id(&t.id, id_w)), theme.text()),
            Span::styled(format!("{:<13.13}", outcome_cell(t)), outcome_style(t.outcome, theme)),
            Span::styled(format!(" {:<4} {:>6} ", how(t), tokens), theme.dim()),
            Span::styled(
                if decode_w > 0 {
                    format!("{:<decode_w$.decode_w$} ", decode_cell(state, t))
                } else {
                    String::new()
                },
                theme.dim(),
            ),
            Span::styled(spans.map(|s| super::waterfall::columns(s, t)).unwrap_or_default(), theme.text()),
            Span::styled(
                fmt::shorten(
                    &if spans.is_some() { format!(" {}", t.evidence()) } else { t.evidence() },
                    evidence_w,
                ),
                theme.text(),
            ),
        ]);
        if i == selected {
            line = line.style(theme.selected());
        }
        lines.push(line);
    }
    if rows.is_empty() {
        let msg = if view.search.is_empty() {
            format!(" no request yet ({} log lines read)", logs.sources.iter().map(|s| s.lines).sum::<u64>())
        } else {
            format!(
                " no request has an id containing \"{}\" (request, vLLM, span and tensor ids; Esc clears)",
                view.search
            )
        };
        lines.push(Line::styled(msg, theme.dim()));
    }
    super::text::draw(buf, inner, &lines);

    if let (Some(serial), Some(area)) = (detail_id, detail_area) {
        match logs.correlator.trace(serial) {
            Some(t) => trace_detail(buf, area, state, t, view, theme),
            None => Paragraph::new(Line::styled(" the followed trace is no longer in the ring", theme.dim()))
                .block(Block::default().borders(Borders::ALL))
                .render(area, buf),
        }
    }
}

/// The active filter (always shown: it leads the title), how many rows it
/// finds, and which of its ids found the selected one when not its own.
fn filter_title(
    state: &AppState,
    view: &ViewState,
    rows: &[&Trace],
    selected: usize,
    width: u16,
    theme: &Theme,
) -> Vec<Span<'static>> {
    if !view.searching && view.search.is_empty() {
        return Vec::new();
    }
    let cursor = if view.searching { "▏" } else { "" };
    let q = cut_id(&view.search, (width as usize / 3).max(8));
    let arrival = crate::report::arrival::parse(&view.search).is_some();
    let by = rows
        .get(selected)
        .and_then(|t| match arrival {
            // Found by arrival: the rank the search gave it.
            true => request_ids::search(state, &view.search)
                .into_iter()
                .find(|(f, _)| f.serial == t.serial)
                .and_then(|(_, m)| m),
            false => request_ids::find_in(&state.spans, t, &request_ids::needles(&view.search)),
        })
        .filter(|m| m.kind != IdKind::Request)
        .map(|m| format!(", this one by its {}", m.kind.label()))
        .unwrap_or_default();
    vec![
        Span::styled(format!(" /{}{cursor} ", q.trim_end()), theme.badge()),
        Span::styled(format!(" {} found{by} ·", rows.len()), theme.fg("accent")),
    ]
}

/// Every id of the trace but the title's, grouped by where it was seen.
fn ids_line(state: &AppState, t: &Trace) -> Option<String> {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for r in request_ids::ids_of(&state.spans, t).into_iter().filter(|r| r.kind != IdKind::Request) {
        let label = r.kind.label();
        match groups.iter_mut().find(|(l, _)| *l == label) {
            Some((_, ids)) => ids.push(r.id),
            None => groups.push((label, vec![r.id])),
        }
    }
    let parts: Vec<String> = groups.into_iter().map(|(l, ids)| format!("{l}: {}", ids.join(", "))).collect();
    (!parts.is_empty()).then(|| format!(" {}", parts.join(" · ")))
}

/// The ID column as wide as the widest id (12 to 24), DECODE (15) only
/// where EVIDENCE keeps 30 columns (the evidence says why, the decode
/// endpoint is in the trace pane), and whether `spans_w` more columns fit.
fn column_widths(rows: &[&Trace], cols: usize, spans_w: usize) -> (usize, usize, bool) {
    let id_w = rows.iter().map(|t| t.id.chars().count()).max().unwrap_or(0).clamp(12, 24);
    let fixed = 1 + 9 + id_w + 1 + 13 + 1 + 5 + 7 + spans_w;
    let decode_w = if cols >= fixed + 16 + 30 { 15 } else { 0 };
    (id_w, decode_w, cols >= fixed + 16)
}

/// The timeline of one request, hop by hop, with the evidence in words.
fn trace_detail(buf: &mut Buffer, area: Rect, state: &AppState, t: &Trace, view: &ViewState, theme: &Theme) {
    let followed = view.followed.is_some();
    let mut title = vec![
        Span::styled(format!(" trace {} ", t.id), theme.fg("title")),
        Span::styled(format!(" {} ", outcome_cell(t)), outcome_style(t.outcome, theme)),
    ];
    if followed {
        title.push(Span::styled(" FOLLOWING (f to stop) ", theme.badge()));
    }
    let block =
        Block::default().borders(Borders::ALL).border_style(theme.fg("accent")).title(Line::from(title));
    let start = t.phases.iter().map(|p| p.start).fold(f64::INFINITY, f64::min);
    // An offset is as precise as the coarser of its two ends: against a
    // log stamp (whole seconds), a proxy line's read time says seconds too.
    let start_stamped =
        t.phases.iter().filter(|p| p.start == start).any(|p| phase_timed_by(p) == TimedBy::Stamp);
    let tm = state.spans.timings_for(t);
    let mut lines = Vec::new();
    for p in &t.phases {
        // The span's time where it has one; log stamps say no more than seconds.
        // `-`: no end seen (the hop is open, or its end was not logged).
        let dur = phase_duration(p, &tm).map_or_else(|| "-".into(), |d| d.text());
        let offset = match (start.is_finite(), phase_timed_by(p)) {
            (false, _) => String::new(),
            (true, TimedBy::Stamp) => format!("+{:.0}s", p.start - start),
            (true, _) if start_stamped => format!("+{:.0}s", p.start - start),
            (true, _) => format!("+{:.1}s", p.start - start),
        };
        let mut hop = vec![
            Span::styled(format!(" {} {:>6} ", fmt::clock(p.start), offset), theme.dim()),
            Span::styled(format!("{:<9} ", p.hop.to_string()), theme.fg("accent")),
            Span::styled(format!("{:<10} ", p.source.to_string()), theme.text()),
        ];
        // Narrow: the process goes (it is in the logs), the detail keeps
        // its row, cut by words.
        if area.width >= 100 {
            hop.push(Span::styled(format!("{:<20.20} ", p.process.clone().unwrap_or_default()), theme.dim()));
        }
        hop.push(Span::styled(format!("{dur:>8}  "), theme.text()));
        let room = (area.width as usize).saturating_sub(2 + hop.iter().map(Span::width).sum::<usize>());
        hop.push(Span::styled(fmt::shorten(&p.detail, room), theme.text()));
        lines.push(Line::from(hop));
        if let Some(e) = &p.error {
            lines.push(Line::styled(format!("{:>30}✖ {e}", ""), theme.fg("error")));
        }
    }
    if t.phases.is_empty() {
        lines.push(Line::styled(" no phase seen yet", theme.dim()));
    }
    lines.push(Line::from(vec![
        Span::styled(" verdict: ", theme.dim()),
        Span::styled(t.outcome.label(), outcome_style(t.outcome, theme)),
        Span::styled(format!("  ({}, {}) ", t.join.words(), Confidence::word(t.confidence)), theme.dim()),
    ]));
    lines.push(Line::styled(format!(" {}", t.evidence()), theme.text()));
    if let Some(w) = &t.remote_wait {
        let (text, style) = match (w.stuck_secs(), w.ended) {
            (Some(n), _) => (
                format!(" ⏳ STUCK waiting for remote KV: still waiting {n:.0} s after it began"),
                theme.fg("error"),
            ),
            (None, Some(e)) => {
                // Both ends are the decode log's stamps, whole seconds.
                let waited = Timed { secs: e - w.since, by: TimedBy::Stamp }.text();
                (format!(" waited {waited} for remote KV, then went on"), theme.dim())
            }
            (None, None) => {
                (format!(" waiting for remote KV since {}", fmt::clock(w.since)), theme.fg("warn"))
            }
        };
        lines.push(Line::styled(text, style));
    }
    let mut facts = Vec::new();
    if t.decode.is_some() {
        facts.push(format!("served by decode {}", decode_cell(state, t)));
    }
    if let (Outcome::Error, Some(h)) = (t.outcome, t.error_at) {
        facts.push(format!("failed at the {} hop", hop_word(h)));
    }
    if let Some(n) = t.prompt_tokens {
        facts.push(format!("prompt {n} tokens"));
    }
    if !facts.is_empty() {
        lines.push(Line::styled(format!(" {}", facts.join(" · ")), theme.dim()));
    }
    // Before the waterfall: the pane's height cuts its end.
    if let Some(ids) = ids_line(state, t) {
        lines.push(Line::styled(ids, theme.dim()));
    }
    lines.extend(super::waterfall::lines(&tm, area.width.saturating_sub(2), theme));
    if let Some(d) = crate::report::span_evidence::disagreement(t, &tm, state.decode_block_size()) {
        lines.push(Line::styled(format!(" ⚠ {d}"), theme.fg("warn")));
    }
    if !tm.is_empty()
        && let Some(m) = crate::report::spans::baseline(state).miss_evidence(t, &tm)
    {
        lines.push(Line::styled(format!(" ▲ {m}"), theme.alarm()));
    }
    if let Some(p) = &t.prompt {
        lines.push(Line::styled(format!(" prompt (--show-prompts): {p}"), theme.dim()));
    }
    // Scrolled by J / K, never past its last line.
    let p = Paragraph::new(lines).wrap(Wrap { trim: false });
    let total = p.line_count(area.width.saturating_sub(2)) as u16;
    let room = area.height.saturating_sub(2);
    let scroll = (view.trace_scroll.min(u16::MAX as usize) as u16).min(total.saturating_sub(room));
    if scroll > 0 || total > room {
        let more = format!(" {}/{} J/K ", scroll + room.min(total), total);
        let block = block.title_bottom(Line::styled(more, theme.dim()).right_aligned());
        p.scroll((scroll, 0)).block(block).render(area, buf);
    } else {
        p.block(block).render(area, buf);
    }
}
