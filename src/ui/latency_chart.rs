//! Latency over time on a tall Overview: TTFT and TPOT p50 / p90 of both
//! roles against a clock axis, so a split, a restart or a miss burst is
//! seen as it happens (the view a Grafana user expects).

use super::plot::{Scale, Series};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::symbols::Marker;
use ratatui::text::Span;

use super::{fmt, header::role_style};
use crate::feed::Role;
use crate::metrics::model::Hist;
use crate::state::AppState;
use crate::state::latency::{Bins, Point, series};
use crate::theme::Theme;
use crate::ui::Panel;
use crate::ui::view::ViewState;

/// The most history drawn: what the state keeps per instance.
const SPAN_S: f64 = 3600.0;

/// Whether there is any latency to draw since the start: without it the
/// overview gives the rows to other panels.
pub fn has_data(state: &AppState, focus: Option<usize>) -> bool {
    let since = state.started_at.unwrap_or(state.now).max(state.now - SPAN_S);
    // What `series` would bin, read without rebuilding a histogram: this
    // runs every frame.
    let is = &state.instances;
    is.iter()
        .enumerate()
        .filter(|(i, s)| {
            matches!(s.endpoint.role, Role::Prefill | Role::Decode)
                && focus.is_none_or(|o| o == *i || is[o].endpoint.role != s.endpoint.role)
        })
        .any(|(_, s)| {
            s.history.iter().rev().take_while(|iv| iv.t > since).any(|iv| {
                iv.hists.total_and_sum(&Hist::Ttft).is_some_and(|(total, sum)| total > 0.0 && sum != 0.0)
            })
        })
}

/// How one series is drawn: p50 a line, p90 a line of dots over it. Colour tells
/// the roles apart where the theme gives them two; where it does not
/// (NO_COLOR, mono) decode gets glyphs of its own. Dimming is no cue: many
/// terminals, and every capture of the screen, drop it.
#[derive(Clone, Copy)]
struct Look {
    marker: Marker,
    /// What the legend shows for it.
    glyph: char,
}

fn look(role: Role, p90: bool, theme: &Theme) -> Look {
    let own_glyphs = role == Role::Decode && !roles_coloured(theme);
    match (p90, own_glyphs) {
        (false, false) => Look { marker: Marker::Braille, glyph: '⠒' },
        (false, true) => Look { marker: Marker::Dot, glyph: '•' },
        (true, false) => Look { marker: Marker::Custom('·'), glyph: '·' },
        (true, true) => Look { marker: Marker::Custom('+'), glyph: '+' },
    }
}

fn roles_coloured(theme: &Theme) -> bool {
    theme.color(Role::Prefill.name()) != theme.color(Role::Decode.name())
}

/// The legend, built from the looks drawn: `━ prefill ━ decode  ⠒ p50 · p90`
/// where colour parts the roles, else each role with its own glyphs; as
/// much as fits whole.
fn legend(roles: &[Role], cols: u16, theme: &Theme) -> ratatui::text::Line<'static> {
    let glyphs = |r: Role| (look(r, false, theme).glyph, look(r, true, theme).glyph);
    let forms: Vec<Vec<Span<'static>>> = if roles_coloured(theme) {
        let (a, b) = glyphs(Role::Prefill);
        let with = |keys: Option<String>| {
            let mut spans: Vec<Span<'static>> = roles
                .iter()
                .map(|r| Span::styled(format!(" ━ {}", r.name()), role_style(*r, theme)))
                .collect();
            spans.extend(keys.map(|k| Span::styled(k, theme.text())));
            spans
        };
        vec![with(Some(format!("  {a} p50 {b} p90"))), with(Some(format!(" {a}p50 {b}p90"))), with(None)]
    } else {
        let per_role = |words: bool| -> Vec<Span<'static>> {
            roles
                .iter()
                .flat_map(|r| {
                    let (a, b) = glyphs(*r);
                    let keys = if words { format!(" {a}p50 {b}p90 ") } else { format!("{a}{b} ") };
                    [
                        Span::styled(format!(" {}", r.name()), role_style(*r, theme)),
                        Span::styled(keys, theme.text()),
                    ]
                })
                .collect()
        };
        let names: Vec<Span<'static>> =
            roles.iter().map(|r| Span::styled(format!(" {}", r.name()), role_style(*r, theme))).collect();
        vec![per_role(true), per_role(false), names]
    };
    ratatui::text::Line::from(fmt::fit(forms, cols as usize))
}

/// (time, milliseconds) points of one percentile.
type Line = Vec<(f64, f64)>;

pub fn render(buf: &mut Buffer, area: Rect, state: &AppState, view: &ViewState, theme: &Theme) {
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(area);
    chart(buf, left, state, Hist::Ttft, view, theme);
    chart(buf, right, state, Hist::Tpot, view, theme);
}

fn chart(buf: &mut Buffer, area: Rect, state: &AppState, hist: Hist, view: &ViewState, theme: &Theme) {
    let since = state.started_at.unwrap_or(state.now).max(state.now - SPAN_S);
    // Two columns a bin, and at least 5 s in each (a block): a percentile
    // of a handful of requests is noise, not a trend.
    let bins = Bins::aligned(since, state.now, (area.width.saturating_sub(10) as usize / 2).clamp(1, 240));
    let name = if hist == Hist::Ttft { "TTFT" } else { "TPOT" };
    let roles = [Role::Prefill, Role::Decode];
    let data: Vec<(Role, Line, Line)> = roles
        .iter()
        .map(|&r| {
            let pts: Vec<Point> = series(state, r, hist, bins, view.focus, &view.folds);
            let p50 = pts.iter().map(|p| (p.t, p.p50 * 1000.0)).collect();
            let p90 = pts.iter().map(|p| (p.t, p.p90 * 1000.0)).collect();
            (r, p50, p90)
        })
        .collect();
    let top = data.iter().flat_map(|(_, a, b)| a.iter().chain(b)).map(|p| p.1).fold(0.0, f64::max);
    let top = if top > 0.0 { top * 1.1 } else { 1.0 };
    let mut sets = Vec::new();
    for (role, p50, p90) in &data {
        if p50.is_empty() {
            continue;
        }
        let style = role_style(*role, theme);
        // p50 first: p90's points are drawn over its line, never hidden by it.
        for (p90, points) in [(false, p50), (true, p90)] {
            sets.push(Series { data: points, marker: look(*role, p90, theme).marker, style });
        }
    }
    let title = if sets.is_empty() {
        format!(" {name} over time: no requests yet ")
    } else {
        format!(" {name} over time, ms ")
    };
    let block = Panel::new(Span::styled(title, theme.fg("title")), theme.fg("border"));
    // The legend has a row of its own above the plot: it never covers a line.
    let inner = block.inner(area);
    block.render(area, buf);
    let [legend_area, plot] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(inner);
    let roles_shown: Vec<Role> =
        data.iter().filter(|(_, p50, _)| !p50.is_empty()).map(|(r, _, _)| *r).collect();
    if roles_shown.is_empty() {
        // No axis with made-up bounds: the title says there is nothing yet.
        return;
    }
    super::text::draw(buf, legend_area, &[legend(&roles_shown, legend_area.width, theme)]);
    let mid = (since + state.now) / 2.0;
    let x = Scale {
        bounds: [since, state.now.max(since + 1.0)],
        labels: [fmt::clock(since), fmt::clock(mid), fmt::clock(state.now)].map(Span::raw).to_vec(),
        style: theme.dim(),
    };
    let y = Scale {
        bounds: [0.0, top],
        labels: ["0".to_string(), format!("{:.0}", top / 2.0), format!("{top:.0}")].map(Span::raw).to_vec(),
        style: theme.dim(),
    };
    super::plot::chart(buf, plot, &sets, &x, &y);
}
