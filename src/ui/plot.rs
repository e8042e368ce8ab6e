//! A line chart drawn cell for cell as ratatui's `Chart` draws it, cheaper:
//! `Chart` paints each dataset through a `Canvas`, which allocates a grid
//! and a layer the size of the plot for each dataset and then walks every
//! cell of every layer, each frame (the latency charts were a fifth of a
//! frame). Here `Chart` draws the axes and labels with no dataset, and
//! each series marks only the cells its points and lines touch, with the
//! same rounding, the same line steps and the same braille dots. Data
//! outside the bounds (which `Chart` clips) or a marker other than
//! braille, dot or a custom character is left to `Chart` whole.
//! `a_plot_draws_what_a_chart_draws` holds the two equal.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::symbols::{self, Marker};
use ratatui::text::Span;
use ratatui::widgets::{Axis, Chart, Dataset, GraphType, Widget};

/// One line of the chart: drawn as `Dataset::default().marker(marker)
/// .graph_type(GraphType::Line).style(style).data(data)`.
pub struct Series<'a> {
    pub data: &'a [(f64, f64)],
    pub marker: Marker,
    pub style: Style,
}

/// An axis: its bounds, its labels (left to right, bottom to top) and their style.
pub struct Scale<'a> {
    pub bounds: [f64; 2],
    pub labels: Vec<Span<'a>>,
    pub style: Style,
}

impl<'a> Scale<'a> {
    fn axis(&self) -> Axis<'a> {
        Axis::default().bounds(self.bounds).style(self.style).labels(self.labels.clone())
    }
}

/// Draws what `Chart::new(datasets).legend_position(None).x_axis(x)
/// .y_axis(y)` draws into `area`, each series a dataset.
pub fn chart(buf: &mut Buffer, area: Rect, series: &[Series<'_>], x: &Scale<'_>, y: &Scale<'_>) {
    let inside = |&(px, py): &(f64, f64)| {
        px.is_finite()
            && py.is_finite()
            && px >= x.bounds[0]
            && px <= x.bounds[1]
            && py >= y.bounds[0]
            && py <= y.bounds[1]
    };
    let own = series.iter().all(|s| {
        matches!(s.marker, Marker::Braille | Marker::Dot | Marker::Custom(_)) && s.data.iter().all(inside)
    });
    let sets = match own {
        true => Vec::new(),
        false => series
            .iter()
            .map(|s| {
                Dataset::default().marker(s.marker).graph_type(GraphType::Line).style(s.style).data(s.data)
            })
            .collect(),
    };
    Chart::new(sets).legend_position(None).x_axis(x.axis()).y_axis(y.axis()).render(area, buf);
    if !own {
        return;
    }
    let Some(plot) = graph_area(area, x, y) else { return };
    let mut cells = Vec::new();
    for s in series {
        draw(buf, plot, s, x.bounds, y.bounds, &mut cells);
    }
}

/// Where `Chart` puts the plot in `area` with both axes labelled, no
/// titles and no legend (`Chart::layout`).
fn graph_area(area: Rect, x: &Scale<'_>, y: &Scale<'_>) -> Option<Rect> {
    if area.height == 0 || area.width == 0 {
        return None;
    }
    let mut left = area.left();
    let mut bottom = area.bottom() - 1;
    if !x.labels.is_empty() && bottom > area.top() {
        bottom -= 1;
    }
    // The labels left of the y axis: the widest y label, and the first x
    // label's part left of the axis (labels aligned left), at most a third.
    let mut labels = y.labels.iter().map(|l| l.width()).max().unwrap_or(0) as u16;
    if let Some(first) = x.labels.first() {
        labels = labels.max((first.width() as u16).saturating_sub(u16::from(!y.labels.is_empty())));
    }
    left += labels.min(area.width / 3);
    if !x.labels.is_empty() && bottom > area.top() {
        bottom -= 1;
    }
    if !y.labels.is_empty() && left + 1 < area.right() {
        left += 1;
    }
    let width = area.right().saturating_sub(left);
    let height = bottom.saturating_sub(area.top()).saturating_add(1);
    (width > 0 && height > 0).then(|| Rect::new(left, area.top(), width, height))
}

/// One series, as `Canvas` paints its points and the lines between them
/// into a grid of its marker and lays that over the plot.
fn draw(buf: &mut Buffer, plot: Rect, s: &Series<'_>, xb: [f64; 2], yb: [f64; 2], cells: &mut Vec<u8>) {
    let (cols, rows) = (usize::from(plot.width), usize::from(plot.height));
    // Dots per cell: braille's 2x4, a character's 1x1.
    let (dw, dh) = if s.marker == Marker::Braille { (2, 4) } else { (1, 1) };
    let (res_x, res_y) = ((cols * dw) as f64, (rows * dh) as f64);
    let (w, h) = (xb[1] - xb[0], yb[1] - yb[0]);
    if w <= 0.0 || h <= 0.0 {
        return;
    }
    // `Painter::get_point`, for a point known to be inside the bounds.
    let dot = |(px, py): (f64, f64)| {
        let x = ((px - xb[0]) * (res_x - 1.0) / w).round() as usize;
        let y = ((yb[1] - py) * (res_y - 1.0) / h).round() as usize;
        (x, y)
    };
    cells.clear();
    cells.resize(cols * rows, 0);
    let mut paint = |x: usize, y: usize| {
        if let Some(c) = cells.get_mut((y / dh) * cols + x / dw) {
            *c |= 1u8 << ((x % dw) + dw * (y % dh));
        }
    };
    for &p in s.data {
        let (x, y) = dot(p);
        paint(x, y);
    }
    for pair in s.data.windows(2) {
        let ((x1, y1), (x2, y2)) = (dot(pair[0]), dot(pair[1]));
        line_dots(x1, y1, x2, y2, &mut paint);
    }
    let symbol = match s.marker {
        Marker::Custom(c) => c,
        Marker::Dot => symbols::DOT.chars().next().unwrap_or('•'),
        _ => ' ',
    };
    let color = s.style.fg.unwrap_or(Color::Reset);
    for (i, &pattern) in cells.iter().enumerate() {
        if pattern == 0 {
            continue;
        }
        let c = if s.marker == Marker::Braille {
            symbols::braille::BRAILLE[usize::from(pattern)]
        } else {
            symbol
        };
        let at = (plot.x + (i % cols) as u16, plot.y + (i / cols) as u16);
        buf[at].set_char(c).set_fg(color);
    }
}

/// The dots of a line from `(x1, y1)` to `(x2, y2)`, in `Canvas`'s steps
/// (Bresenham, along the longer side, from the lower end).
fn line_dots(x1: usize, y1: usize, x2: usize, y2: usize, f: &mut impl FnMut(usize, usize)) {
    let (dx, dy) = (x2.abs_diff(x1), y2.abs_diff(y1));
    if dx == 0 {
        (y1.min(y2)..=y1.max(y2)).for_each(|y| f(x1, y));
    } else if dy == 0 {
        (x1.min(x2)..=x1.max(x2)).for_each(|x| f(x, y1));
    } else if dy < dx {
        let (p, q) = if x1 > x2 { ((x2, y2), (x1, y1)) } else { ((x1, y1), (x2, y2)) };
        steps(p, q, f);
    } else {
        let (p, q) = if y1 > y2 { ((x2, y2), (x1, y1)) } else { ((x1, y1), (x2, y2)) };
        steps((p.1, p.0), (q.1, q.0), &mut |y, x| f(x, y));
    }
}

/// Bresenham's steps from `(a0, b0)` to `(a1, b1)` along `a`, the longer
/// side (`a0 <= a1`), `b` moving by one towards `b1` when due.
fn steps((a0, b0): (usize, usize), (a1, b1): (usize, usize), f: &mut impl FnMut(usize, usize)) {
    let (da, db) = ((a1 - a0) as isize, (b1 as isize - b0 as isize).abs());
    let (mut d, mut b) = (2 * db - da, b0);
    for a in a0..=a1 {
        f(a, b);
        if d > 0 {
            b = if b0 > b1 { b.saturating_sub(1) } else { b.saturating_add(1) };
            d -= 2 * da;
        }
        d += 2 * db;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use ratatui::style::Modifier;

    fn marker() -> impl Strategy<Value = Marker> {
        prop_oneof![
            Just(Marker::Braille),
            Just(Marker::Dot),
            Just(Marker::Custom('·')),
            Just(Marker::Custom('+')),
            Just(Marker::Block),
        ]
    }

    fn color() -> impl Strategy<Value = Option<Color>> {
        prop_oneof![
            Just(None),
            Just(Some(Color::Cyan)),
            Just(Some(Color::Indexed(208))),
            Just(Some(Color::Reset))
        ]
    }

    /// A value inside `[lo, hi]` or on an edge; with `out`, at times just
    /// outside (`Chart` clips it, and draws it all).
    fn value(lo: f64, hi: f64, out: bool) -> impl Strategy<Value = f64> {
        prop_oneof![
            8 => (0.0..=1.0f64).prop_map(move |f| lo + f * (hi - lo)),
            1 => Just(lo),
            1 => Just(hi),
            u32::from(out) => (1.0..=1.3f64).prop_map(move |f| lo + f * (hi - lo)),
        ]
    }

    type Drawn = (Vec<(Vec<(f64, f64)>, Marker, Option<Color>)>, [f64; 2], [f64; 2]);

    fn drawn() -> impl Strategy<Value = Drawn> {
        (0.0..1e9f64, 0.5..4000.0f64, 0.5..5000.0f64, prop::bool::weighted(0.1)).prop_flat_map(
            |(x0, span, top, out)| {
                let (xb, yb) = ([x0, x0 + span], [0.0, top]);
                let pts = prop::collection::vec((value(xb[0], xb[1], out), value(yb[0], yb[1], out)), 0..40);
                (prop::collection::vec((pts, marker(), color()), 0..5), Just(xb), Just(yb))
            },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn a_plot_draws_what_a_chart_draws(
            (sets, xb, yb) in drawn(),
            (ax, ay, w, h) in (0u16..6, 0u16..4, 0u16..70, 0u16..16),
            xl in prop::collection::vec("[0-9:]{0,9}", 0..4),
            yl in prop::collection::vec("[0-9]{0,6}", 0..4),
            sorted in any::<bool>(),
        ) {
            let sets: Vec<_> = sets
                .into_iter()
                .map(|(mut d, m, c)| {
                    if sorted {
                        d.sort_by(|a, b| a.0.total_cmp(&b.0));
                    }
                    (d, m, c)
                })
                .collect();
            let style = Style::default().fg(Color::DarkGray).add_modifier(Modifier::DIM);
            let scale = |b: [f64; 2], l: &[String]| Scale {
                bounds: b,
                labels: l.iter().map(|s| Span::raw(s.clone())).collect(),
                style,
            };
            let (x, y) = (scale(xb, &xl), scale(yb, &yl));
            let series: Vec<Series<'_>> = sets
                .iter()
                .map(|(d, m, c)| Series { data: d, marker: *m, style: Style { fg: *c, ..Style::default() } })
                .collect();
            let bounds = Rect::new(0, 0, 64, 16);
            let area = Rect::new(ax, ay, w, h);
            let mut ours = Buffer::empty(bounds);
            let mut theirs = Buffer::empty(bounds);
            // What an earlier frame left there.
            for b in [&mut ours, &mut theirs] {
                b.set_string(0, 0, "x".repeat(64), Style::default().fg(Color::Red));
            }
            chart(&mut ours, area.intersection(bounds), &series, &x, &y);
            let sets: Vec<Dataset<'_>> = sets
                .iter()
                .map(|(d, m, c)| {
                    Dataset::default()
                        .marker(*m)
                        .graph_type(GraphType::Line)
                        .style(Style { fg: *c, ..Style::default() })
                        .data(d)
                })
                .collect();
            Chart::new(sets)
                .legend_position(None)
                .x_axis(x.axis())
                .y_axis(y.axis())
                .render(area.intersection(bounds), &mut theirs);
            prop_assert_eq!(ours, theirs);
        }
    }
}
