//! A box with a title on its top border: cell for cell what ratatui's
//! `Block::default().borders(Borders::ALL).border_style(s).title(t)` draws,
//! the border cells only. `Block` also sets its (empty) style on every cell
//! inside, through the checked index of each, and runs its title layout for
//! three alignments on two edges: an eighth of a frame for the overview's
//! ten boxes (perf, 2026-12-07).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::symbols::border;
use ratatui::text::Line;

pub struct Panel<'a> {
    title: Line<'a>,
    border: Style,
}

impl<'a> Panel<'a> {
    /// A left-aligned title (its own alignment is not read) on a border
    /// drawn in `border`.
    pub fn new(title: impl Into<Line<'a>>, border: Style) -> Panel<'a> {
        Panel { title: title.into(), border }
    }

    /// No title.
    pub fn plain(border: Style) -> Panel<'static> {
        Panel { title: Line::default(), border }
    }

    /// The area inside the border.
    pub fn inner(&self, area: Rect) -> Rect {
        Rect {
            x: area.x.saturating_add(1).min(area.right()),
            y: area.y.saturating_add(1).min(area.bottom()),
            width: area.width.saturating_sub(2),
            height: area.height.saturating_sub(2),
        }
    }

    pub fn render(&self, area: Rect, buf: &mut Buffer) {
        let area = area.intersection(buf.area);
        if area.is_empty() {
            return;
        }
        let (left, top) = (area.left(), area.top());
        let (right, bottom) = (area.right() - 1, area.bottom() - 1);
        let s = border::PLAIN;
        let mut put = |x: u16, y: u16, symbol: &str| {
            buf[(x, y)].set_symbol(symbol).set_style(self.border);
        };
        // Sides, then corners over their ends, in Block's order: a box one
        // cell high or wide ends up as Block draws it.
        for y in top..=bottom {
            put(left, y, s.vertical_left);
        }
        for x in left..=right {
            put(x, top, s.horizontal_top);
        }
        for y in top..=bottom {
            put(right, y, s.vertical_right);
        }
        for x in left..=right {
            put(x, bottom, s.horizontal_bottom);
        }
        put(right, bottom, s.bottom_right);
        put(right, top, s.top_right);
        put(left, bottom, s.bottom_left);
        put(left, top, s.top_left);
        if self.title.spans.is_empty() {
            return;
        }
        let room = area.width.saturating_sub(2);
        let width = (self.title.width().min(usize::from(u16::MAX)) as u16).min(room);
        let title = Line { alignment: None, ..self.title.clone() };
        super::text::lines_into(buf, Rect::new(left + 1, top, width, 1), std::slice::from_ref(&title));
    }
}

/// `Paragraph::new(lines).block(block)` rendered at `area`.
pub fn draw_in(buf: &mut Buffer, area: Rect, block: Panel<'_>, lines: &[Line<'_>]) {
    block.render(area, buf);
    super::text::lines_into(buf, block.inner(area), lines);
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use ratatui::style::{Color, Modifier};
    use ratatui::text::Span;
    use ratatui::widgets::{Block, Borders, Widget};

    use super::*;

    /// What is under the box: text in several styles (Block does not clear
    /// its inside, and neither does the panel).
    fn under(area: Rect) -> Buffer {
        let mut buf = Buffer::empty(area);
        for y in 0..area.height {
            let style = Style::new().fg(Color::Indexed(y as u8)).add_modifier(Modifier::ITALIC);
            buf.set_string(0, y, "under ⣿ the box ━ 宽 text".repeat(3), style);
        }
        buf
    }

    fn style() -> impl Strategy<Value = Style> {
        (prop::option::of(0u8..16), prop::option::of(0u8..16), any::<bool>()).prop_map(|(fg, bg, bold)| {
            let mut s = Style::new();
            if let Some(c) = fg {
                s = s.fg(Color::Indexed(c));
            }
            if let Some(c) = bg {
                s = s.bg(Color::Indexed(c));
            }
            if bold { s.add_modifier(Modifier::BOLD) } else { s }
        })
    }

    fn title() -> impl Strategy<Value = Line<'static>> {
        let text =
            prop::sample::select(vec!["", " TTFT · ", "decode ", "p50 ≤ 宽 ", "x", " a long title, longer "]);
        prop::collection::vec((text, style()), 0..3).prop_map(|spans| {
            Line::from(spans.into_iter().map(|(t, s)| Span::styled(t, s)).collect::<Vec<_>>())
        })
    }

    proptest! {
        #[test]
        fn a_panel_draws_what_a_block_draws(
            x in 0u16..6, y in 0u16..4, w in 0u16..30, h in 0u16..8,
            border in style(), title in title(),
        ) {
            let screen = Rect::new(0, 0, 28, 9);
            let area = Rect::new(x, y, w, h);
            let mut by_block = under(screen);
            let block = Block::default().borders(Borders::ALL).border_style(border).title(title.clone());
            let inner = block.inner(area);
            block.render(area, &mut by_block);
            let mut by_panel = under(screen);
            let panel = Panel::new(title, border);
            panel.render(area, &mut by_panel);
            prop_assert_eq!(by_panel, by_block);
            prop_assert_eq!(panel.inner(area), inner);
        }
    }
}
