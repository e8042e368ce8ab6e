//! Lines drawn straight into the frame's buffer, one per row, cut at the
//! area's width: cell for cell what a `Paragraph` without wrap or scroll
//! draws, without building its per-line grapheme lists. Paragraphs were a
//! fifth of a frame's time, at a frame a second all day long.

use ratatui::buffer::{Buffer, CellWidth};
use ratatui::layout::{Alignment, Rect};

use ratatui::style::Style;
use ratatui::text::Line;

/// `Paragraph::new(lines)` rendered at `area`.
pub fn draw(buf: &mut Buffer, area: Rect, lines: &[Line<'_>]) {
    lines_into(buf, area, lines);
}

/// The lines from the top of `area`, each placed by its own alignment.
pub fn lines_into(buf: &mut Buffer, area: Rect, lines: &[Line<'_>]) {
    let area = area.intersection(buf.area);
    if area.is_empty() {
        return;
    }
    for (line, y) in lines.iter().zip(area.top()..area.bottom()) {
        let x = match line.alignment.unwrap_or(Alignment::Left) {
            Alignment::Left => 0,
            // The width as cut, as the Paragraph centres or right-aligns it.
            a => {
                let w = cells(line, area.width, |_, _, _, _| {});
                match a {
                    Alignment::Center => (area.width / 2).saturating_sub(w / 2),
                    _ => area.width.saturating_sub(w),
                }
            }
        };
        // The row's cells, indexed once (`buf[(x, y)]` computes and checks
        // the index for every cell); `cells` stays within `area.width`.
        let start = buf.index_of(area.x, y);
        let row = &mut buf.content[start..start + area.width as usize];
        cells(line, area.width, |at, symbol, style, w| {
            let at = (x + at) as usize;
            row[at].set_symbol(symbol).set_style(style);
            // The cells a wide grapheme hides are cleared, as a `Span`
            // clears them: what was there must not show when it goes.
            row[at + 1..at + w as usize].iter_mut().for_each(|c| {
                c.reset();
            });
        });
    }
}

/// Calls `put(column, symbol, style, width)` for each cell `line` fills when cut
/// at `max` columns, as the Paragraph cuts it: a grapheme wider than the
/// whole row is left out, the first one that does not fit ends the line,
/// control characters are dropped, zero-width ones take no cell. Returns
/// the width used.
fn cells<'a>(line: &'a Line<'a>, max: u16, mut put: impl FnMut(u16, &'a str, Style, u16)) -> u16 {
    let mut x: u16 = 0;
    for span in &line.spans {
        let text: &str = span.content.as_ref();
        if text.is_ascii() {
            // Each printable ASCII byte is a grapheme one cell wide.
            let style = line.style.patch(span.style);
            for (i, b) in text.bytes().enumerate() {
                if b.is_ascii_control() {
                    continue;
                }
                if x + 1 > max {
                    return x;
                }
                put(x, &text[i..=i], style, 1);
                x += 1;
            }
            continue;
        }
        if text.chars().all(stands_alone) {
            // Box drawing, blocks, braille, arrows, Latin letters: each
            // character is a grapheme, measured alone (splitting the
            // screen's bars and charts into graphemes was a twentieth of a
            // frame).
            let style = line.style.patch(span.style);
            for (i, c) in text.char_indices() {
                let symbol = &text[i..i + c.len_utf8()];
                let w = symbol.cell_width();
                if w > max {
                    continue;
                }
                if x + w > max {
                    return x;
                }
                if w > 0 {
                    put(x, symbol, style, w);
                }
                x += w;
            }
            continue;
        }
        for g in span.styled_graphemes(line.style) {
            let w = g.symbol.cell_width();
            if w > max {
                continue;
            }
            if x + w > max {
                return x;
            }
            if w > 0 {
                put(x, g.symbol, g.style, w);
            }
            x += w;
        }
    }
    x
}

/// Whether a character is a grapheme whatever stands beside it: printable,
/// and neither a mark that joins the one before (Extend, SpacingMark, ZWJ)
/// nor one that joins the one after (Prepend, regional indicators, Hangul
/// jamo), per UAX #29. The ranges hold only grapheme class Other; the soft
/// hyphen and the joiners, bidi and invisible format characters of
/// U+2000 to U+206F are Control or Extend and left out.
fn stands_alone(c: char) -> bool {
    matches!(c,
        ' '..='~'
        | '\u{A0}'..='\u{AC}'
        | '\u{AE}'..='\u{2FF}'
        | '\u{2010}'..='\u{2027}'
        | '\u{2030}'..='\u{205E}'
        | '\u{2070}'..='\u{20CF}'
        | '\u{2100}'..='\u{2BFF}')
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use ratatui::style::{Color, Modifier};
    use ratatui::text::Span;
    use ratatui::widgets::{Block, Borders, Paragraph, Widget};

    use super::*;

    fn by_paragraph(area: Rect, lines: &[Line<'_>], block: Option<Block<'_>>) -> Buffer {
        let mut buf = Buffer::empty(Rect::new(0, 0, 24, 6));
        let p = Paragraph::new(lines.to_vec());
        let p = match block {
            Some(b) => p.block(b),
            None => p,
        };
        p.render(area, &mut buf);
        buf
    }

    fn by_lines(area: Rect, lines: &[Line<'_>], block: Option<Block<'_>>) -> Buffer {
        let mut buf = Buffer::empty(Rect::new(0, 0, 24, 6));
        match block {
            Some(b) => {
                let inner = b.inner(area);
                b.render(area, &mut buf);
                lines_into(&mut buf, inner, lines);
            }
            None => lines_into(&mut buf, area, lines),
        }
        buf
    }

    #[test]
    fn the_screens_kinds_of_line_draw_as_a_paragraph_draws_them() {
        let lines = vec![
            Line::from(vec![
                Span::styled("p50 ", Style::new().dim()),
                Span::styled("95 ms", Style::new().fg(Color::Red)),
            ]),
            Line::from("  ≤100ms ███████▋                    2"),
            Line::styled(
                "● up 3m  ✖ DOWN 54s  ↻ 2  ‹ from before",
                Style::new().add_modifier(Modifier::BOLD),
            ),
            Line::from("13:51:07 UTC").alignment(Alignment::Right),
            Line::from("centred ━ ⠒ ·").alignment(Alignment::Center),
            Line::from("wide 日本語 and e\u{301} and a\ttab"),
        ];
        for area in [Rect::new(0, 0, 24, 6), Rect::new(2, 1, 9, 4), Rect::new(0, 0, 1, 6)] {
            assert_eq!(by_lines(area, &lines, None), by_paragraph(area, &lines, None), "{area:?}");
            let block = || Some(Block::default().borders(Borders::ALL).title(" t "));
            assert_eq!(by_lines(area, &lines, block()), by_paragraph(area, &lines, block()), "{area:?}");
        }
    }

    proptest! {
        #[test]
        fn any_text_draws_as_a_paragraph_draws_it(
            texts in proptest::collection::vec("[ -~éあ日\u{301}\u{200b}\t\n█▉━⠒●✖‹⌚€ʰ\u{ad}\u{200d}]{0,30}", 1..6),
            align in 0u8..3,
            (x, y, w, h) in (0u16..6, 0u16..3, 0u16..26, 0u16..7),
        ) {
            let alignment = [Alignment::Left, Alignment::Center, Alignment::Right][align as usize];
            let lines: Vec<Line<'_>> = texts
                .iter()
                .enumerate()
                .map(|(i, t)| Line::from(vec![Span::raw(t.clone()), Span::styled(format!("{i}"), Style::new().bold())]).alignment(alignment))
                .collect();
            let area = Rect::new(x, y, w, h);
            prop_assert_eq!(by_lines(area, &lines, None), by_paragraph(area, &lines, None));
        }
    }
}
