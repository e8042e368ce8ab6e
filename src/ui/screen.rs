//! The dashboard's terminal: each frame is painted into a buffer, compared
//! cell by cell with the one the terminal shows, and the cells that changed
//! are written in one write. ratatui's `Terminal` does the same, but its
//! diff measures the width of every cell, changed or not, and its backend
//! formats each escape through `fmt`: together 11 % of what a dashboard
//! watching a lab cost (perf, 2026-12-07). The tests and `screenshots` still
//! draw through ratatui's `Terminal` and `TestBackend`; both paint with
//! [`crate::ui::render`].

use std::io::{self, Write};

use ratatui::Terminal;
use ratatui::backend::Backend;
use ratatui::buffer::{Buffer, Cell, CellDiffOption, CellWidth};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier};

/// Hide the cursor; show it.
const HIDE: &[u8] = b"\x1b[?25l";
const SHOW: &[u8] = b"\x1b[?25h";

/// Where the dashboard's frames go: its own [`Screen`], or ratatui's
/// `Terminal` (the tests' `TestBackend`).
pub trait Surface {
    type Error;
    fn frame(&mut self, paint: &dyn Fn(&mut Buffer)) -> Result<(), Self::Error>;
    /// The terminal's new width and height.
    fn resize(&mut self, width: u16, height: u16) -> Result<(), Self::Error>;
}

impl<W: Write> Surface for Screen<W> {
    type Error = io::Error;
    fn frame(&mut self, paint: &dyn Fn(&mut Buffer)) -> io::Result<()> {
        self.draw(paint)
    }
    fn resize(&mut self, width: u16, height: u16) -> io::Result<()> {
        Screen::resize(self, width, height);
        Ok(())
    }
}

impl<B: Backend> Surface for Terminal<B> {
    type Error = B::Error;
    fn frame(&mut self, paint: &dyn Fn(&mut Buffer)) -> Result<(), B::Error> {
        self.draw(|f| paint(f.buffer_mut())).map(|_| ())
    }
    fn resize(&mut self, width: u16, height: u16) -> Result<(), B::Error> {
        Terminal::resize(self, Rect::new(0, 0, width, height))
    }
}

pub struct Screen<W: Write> {
    out: W,
    /// What the terminal shows.
    shown: Buffer,
    /// The frame being painted.
    next: Buffer,
    /// The terminal must be cleared before the next frame (the first one,
    /// after a resize).
    clear: bool,
    /// One frame's bytes, kept to spare an allocation a frame.
    bytes: Vec<u8>,
}

impl<W: Write> Screen<W> {
    pub fn new(out: W, width: u16, height: u16) -> Screen<W> {
        let area = Rect::new(0, 0, width, height);
        Screen { out, shown: Buffer::empty(area), next: Buffer::empty(area), clear: true, bytes: Vec::new() }
    }

    /// The terminal's new size: the next frame is written whole.
    pub fn resize(&mut self, width: u16, height: u16) {
        let area = Rect::new(0, 0, width, height);
        self.shown = Buffer::empty(area);
        self.next = Buffer::empty(area);
        self.clear = true;
    }

    /// Paints a frame and writes what changed.
    pub fn draw(&mut self, paint: impl FnOnce(&mut Buffer)) -> io::Result<()> {
        self.next.reset();
        paint(&mut self.next);
        self.bytes.clear();
        if std::mem::take(&mut self.clear) {
            // Blank in the default colours: what `shown`, reset, holds.
            self.bytes.extend_from_slice(b"\x1b[0m\x1b[2J");
            self.bytes.extend_from_slice(HIDE);
            self.shown.reset();
        }
        write_changes(&self.shown, &self.next, &mut self.bytes);
        std::mem::swap(&mut self.shown, &mut self.next);
        if self.bytes.is_empty() {
            return Ok(());
        }
        self.out.write_all(&self.bytes)?;
        self.out.flush()
    }

    /// What the terminal shows (the last frame drawn).
    pub fn shown(&self) -> &Buffer {
        &self.shown
    }
}

impl<W: Write> Drop for Screen<W> {
    /// The cursor back, as ratatui's `Terminal` leaves it; errors unprinted:
    /// the terminal may be gone (the pane closed), and so may stderr.
    fn drop(&mut self) {
        let _ = self.out.write_all(SHOW).and_then(|_| self.out.flush());
    }
}

/// The escapes that turn `shown` into `next` (of the same size) on a
/// terminal showing `shown`, leaving the default colours and no modifier.
pub fn write_changes(shown: &Buffer, next: &Buffer, out: &mut Vec<u8>) {
    let width = next.area.width as usize;
    if width == 0 || shown.area != next.area {
        return;
    }
    let mut pen = Pen::default();
    // Where the cursor is after the last cell written.
    let mut cursor: Option<(usize, usize)> = None;
    // Cells up to here are the right part of a wide character written.
    let mut covered = 0;
    // Cells up to here are written even if unchanged: they were part of a
    // wide character that a write cut, which the terminal erases whole.
    let mut forced = 0;
    let (now, was) = (&next.content, &shown.content);
    for (i, (c, p)) in now.iter().zip(was).enumerate() {
        // Most cells are unchanged: their widths are never asked.
        if i < covered || skipped(c) || (i >= forced && same(c, p)) {
            continue;
        }
        let (x, y) = (i % width, i / width);
        let row_start = i - x;
        // The right part of an unchanged wide character shown to its left.
        if (1..=2).any(|k| {
            k <= x && {
                let (l, shown_l) = (&now[i - k], &was[i - k]);
                l.symbol().len() > 1 && same(l, shown_l) && cells(l) > k
            }
        }) {
            continue;
        }
        let w = cells(c).max(1);
        let row_end = row_start + width;
        for (j, before) in was.iter().enumerate().take((i + w).min(row_end)).skip(i) {
            let end = j + cells(before);
            if end > i + w {
                forced = forced.max(end.min(row_end));
            }
        }
        covered = i + w;
        if cursor != Some((x, y)) {
            move_to(out, x, y);
        }
        pen.take(c, out);
        put(out, c.symbol().as_bytes());
        cursor = Some((x + w, y));
    }
    pen.reset(out);
}

/// `Cell`'s equality, cheapest test first and the short symbols compared
/// inline (a call to `memcmp` per cell was a tenth of the diff). A cell to
/// be updated always is never the same.
#[allow(deprecated)]
#[inline(always)]
fn same(a: &Cell, b: &Cell) -> bool {
    a.fg == b.fg
        && a.bg == b.bg
        && a.modifier == b.modifier
        && a.underline_color == b.underline_color
        && a.diff_option == b.diff_option
        && a.diff_option != CellDiffOption::AlwaysUpdate
        && a.skip == b.skip
        && {
            let (x, y) = (a.symbol().as_bytes(), b.symbol().as_bytes());
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p == q)
        }
}

/// How many columns a cell takes. The dashboard's own symbols, ASCII,
/// box drawing, blocks and braille (U+2500 to U+259F, U+2800 to U+28FF),
/// take one, known without a table; the rest is ratatui's measure.
fn cells(c: &Cell) -> usize {
    match c.symbol().as_bytes() {
        [_] if c.diff_option == CellDiffOption::None => 1,
        [0xE2, 0x94..=0x95 | 0xA0..=0xA3, _] if c.diff_option == CellDiffOption::None => 1,
        [0xE2, 0x96, 0x80..=0x9F] if c.diff_option == CellDiffOption::None => 1,
        _ => usize::from(c.cell_width()),
    }
}

/// Cells the diff leaves alone, as ratatui's does.
#[allow(deprecated)]
fn skipped(c: &Cell) -> bool {
    c.diff_option == CellDiffOption::Skip || (c.skip && c.diff_option == CellDiffOption::None)
}

/// A few bytes pushed one by one: `extend_from_slice` calls `memmove`,
/// dearer than the copy for a cell's symbol.
#[inline(always)]
fn put(out: &mut Vec<u8>, bytes: &[u8]) {
    if bytes.len() <= 4 {
        bytes.iter().for_each(|b| out.push(*b));
    } else {
        out.extend_from_slice(bytes);
    }
}

fn move_to(out: &mut Vec<u8>, x: usize, y: usize) {
    out.extend_from_slice(b"\x1b[");
    number(out, y + 1);
    out.push(b';');
    number(out, x + 1);
    out.push(b'H');
}

fn number(out: &mut Vec<u8>, n: usize) {
    let mut digits = [0u8; 20];
    let mut k = digits.len();
    let mut n = n;
    loop {
        k -= 1;
        digits[k] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    put(out, &digits[k..]);
}

/// The terminal's current colours and modifiers (SGR state).
#[derive(Default)]
struct Pen {
    fg: Color,
    bg: Color,
    underline: Color,
    modifier: Modifier,
}

impl Pen {
    /// Sets the pen to `c`'s style, writing only what differs.
    fn take(&mut self, c: &Cell, out: &mut Vec<u8>) {
        if c.modifier != self.modifier {
            // Some modifiers share their reset (22 ends bold and dim), so a
            // change starts from none and sets every modifier and colour.
            out.extend_from_slice(b"\x1b[0m");
            *self = Pen::default();
            for (m, code) in MODIFIERS {
                if c.modifier.contains(m) {
                    sgr(out, code);
                }
            }
            self.modifier = c.modifier;
        }
        if c.fg != self.fg {
            colour(out, c.fg, 38);
            self.fg = c.fg;
        }
        if c.bg != self.bg {
            colour(out, c.bg, 48);
            self.bg = c.bg;
        }
        if c.underline_color != self.underline {
            colour(out, c.underline_color, 58);
            self.underline = c.underline_color;
        }
    }

    fn reset(&mut self, out: &mut Vec<u8>) {
        if self.fg != Color::Reset
            || self.bg != Color::Reset
            || self.underline != Color::Reset
            || !self.modifier.is_empty()
        {
            out.extend_from_slice(b"\x1b[0m");
            *self = Pen::default();
        }
    }
}

/// Modifiers and their SGR codes.
const MODIFIERS: [(Modifier, &[u8]); 9] = [
    (Modifier::BOLD, b"1"),
    (Modifier::DIM, b"2"),
    (Modifier::ITALIC, b"3"),
    (Modifier::UNDERLINED, b"4"),
    (Modifier::SLOW_BLINK, b"5"),
    (Modifier::RAPID_BLINK, b"6"),
    (Modifier::REVERSED, b"7"),
    (Modifier::HIDDEN, b"8"),
    (Modifier::CROSSED_OUT, b"9"),
];

fn sgr(out: &mut Vec<u8>, code: &[u8]) {
    out.extend_from_slice(b"\x1b[");
    out.extend_from_slice(code);
    out.push(b'm');
}

/// `base` is 38 (foreground), 48 (background) or 58 (underline); the
/// named colours are written as crossterm writes them: their index in the
/// 256-colour palette.
fn colour(out: &mut Vec<u8>, c: Color, base: usize) {
    out.extend_from_slice(b"\x1b[");
    let index = match c {
        Color::Reset => {
            number(out, base + 1);
            out.push(b'm');
            return;
        }
        Color::Rgb(r, g, b) => {
            number(out, base);
            for v in [2, r as usize, g as usize, b as usize] {
                out.push(b';');
                number(out, v);
            }
            out.push(b'm');
            return;
        }
        Color::Indexed(i) => i,
        Color::Black => 0,
        Color::Red => 1,
        Color::Green => 2,
        Color::Yellow => 3,
        Color::Blue => 4,
        Color::Magenta => 5,
        Color::Cyan => 6,
        Color::Gray => 7,
        Color::DarkGray => 8,
        Color::LightRed => 9,
        Color::LightGreen => 10,
        Color::LightYellow => 11,
        Color::LightBlue => 12,
        Color::LightMagenta => 13,
        Color::LightCyan => 14,
        Color::White => 15,
    };
    number(out, base);
    out.extend_from_slice(b";5;");
    number(out, usize::from(index));
    out.push(b'm');
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use ratatui::style::Style;

    use super::*;

    /// A real terminal emulator fed what the screen wrote.
    fn emulated(bytes: &[u8], area: Rect) -> vt100::Parser {
        let size = |n: u16| std::num::NonZeroU16::new(n).unwrap();
        let mut term = vt100::Parser::new(size(area.height), size(area.width), 0);
        term.process(bytes);
        term
    }

    fn vt_colour(c: Color) -> vt100::Color {
        let named = [
            Color::Black,
            Color::Red,
            Color::Green,
            Color::Yellow,
            Color::Blue,
            Color::Magenta,
            Color::Cyan,
            Color::Gray,
            Color::DarkGray,
            Color::LightRed,
            Color::LightGreen,
            Color::LightYellow,
            Color::LightBlue,
            Color::LightMagenta,
            Color::LightCyan,
            Color::White,
        ];
        match c {
            Color::Reset => vt100::Color::Default,
            Color::Rgb(r, g, b) => vt100::Color::Rgb(r, g, b),
            Color::Indexed(i) => vt100::Color::Idx(i),
            c => vt100::Color::Idx(named.iter().position(|n| *n == c).unwrap() as u8),
        }
    }

    /// Every cell the buffer shows is on the emulated terminal, in its
    /// colours and modifiers (the right half of a wide character aside).
    fn assert_shows(term: &vt100::Parser, buf: &Buffer) {
        for y in 0..buf.area.height {
            let mut covered = 0;
            for x in 0..buf.area.width {
                let want = &buf[(x, y)];
                let got = term.screen().cell(y, x).unwrap();
                if x < covered {
                    assert!(got.is_wide_continuation(), "({x},{y}) should be covered");
                    continue;
                }
                covered = x + want.cell_width();
                let text = if got.has_contents() { got.contents() } else { " " };
                let at = format!("({x},{y}) {want:?}");
                assert_eq!(text, want.symbol(), "{at}");
                assert_eq!(got.fgcolor(), vt_colour(want.fg), "{at}");
                assert_eq!(got.bgcolor(), vt_colour(want.bg), "{at}");
                // Bold and dim are one intensity to the emulator, the later
                // set winning; many terminals show both.
                if !want.modifier.contains(Modifier::BOLD | Modifier::DIM) {
                    assert_eq!(got.bold(), want.modifier.contains(Modifier::BOLD), "{at}");
                    assert_eq!(got.dim(), want.modifier.contains(Modifier::DIM), "{at}");
                }
                assert_eq!(got.italic(), want.modifier.contains(Modifier::ITALIC), "{at}");
                assert_eq!(got.underline(), want.modifier.contains(Modifier::UNDERLINED), "{at}");
                assert_eq!(got.inverse(), want.modifier.contains(Modifier::REVERSED), "{at}");
            }
        }
    }

    /// Text painted at a place in a style.
    type Stroke = (u16, u16, String, Style);

    fn paint(buf: &mut Buffer, strokes: &[Stroke]) {
        for (x, y, text, style) in strokes {
            buf.set_string(*x, *y, text, *style);
        }
    }

    fn style() -> impl Strategy<Value = Style> {
        let colour = prop_oneof![
            Just(Color::Reset),
            Just(Color::Red),
            Just(Color::DarkGray),
            Just(Color::White),
            any::<u8>().prop_map(Color::Indexed),
            (any::<u8>(), any::<u8>(), any::<u8>()).prop_map(|(r, g, b)| Color::Rgb(r, g, b)),
        ];
        let modifier = prop::sample::subsequence(
            vec![Modifier::BOLD, Modifier::DIM, Modifier::ITALIC, Modifier::UNDERLINED, Modifier::REVERSED],
            0..=2,
        )
        .prop_map(|ms| ms.into_iter().fold(Modifier::empty(), |a, m| a | m));
        (colour.clone(), colour, modifier).prop_map(|(fg, bg, m)| Style::new().fg(fg).bg(bg).add_modifier(m))
    }

    /// What the dashboard draws: ASCII, box drawing, braille, blocks, and
    /// wide characters that other strokes may cut in half.
    fn strokes() -> impl Strategy<Value = Vec<Stroke>> {
        let text = prop::collection::vec(
            prop::sample::select(vec!["a", "Z", " ", "│", "─", "⣿", "⠒", "█", "▲", "✖", "宽", "⚠️", "é"]),
            1..8,
        )
        .prop_map(|parts| parts.concat());
        prop::collection::vec((0u16..14, 0u16..5, text, style()), 0..14)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// After any frame, any next one is what the terminal shows: the
        /// cells that changed are enough.
        #[test]
        fn the_terminal_shows_each_frame(first in strokes(), second in strokes(), third in strokes()) {
            let area = Rect::new(0, 0, 14, 5);
            let mut bytes = Vec::new();
            let mut screen = Screen::new(&mut bytes, area.width, area.height);
            for strokes in [&first, &second, &third] {
                screen.draw(|buf| paint(buf, strokes)).unwrap();
                // Everything written so far leaves the terminal showing this frame.
                assert_shows(&emulated(&screen.out[..], area), screen.shown());
            }
            drop(screen);
            prop_assert!(!emulated(&bytes, area).screen().hide_cursor(), "the cursor is shown again at the end");
        }
    }

    #[test]
    fn an_unchanged_frame_writes_nothing_and_a_resize_writes_all() {
        let area = Rect::new(0, 0, 20, 3);
        let mut bytes = Vec::new();
        let mut screen = Screen::new(&mut bytes, area.width, area.height);
        let draw = |buf: &mut Buffer| {
            buf.set_string(0, 0, "TTFT ━━ p50 ⣿ 宽", Style::new().fg(Color::Cyan));
        };
        screen.draw(draw).unwrap();
        let first = screen.out.len();
        screen.draw(draw).unwrap();
        assert_eq!(screen.out.len(), first, "nothing changed, nothing written");
        screen.resize(20, 3);
        screen.draw(draw).unwrap();
        assert!(screen.out.len() >= 2 * first - 2, "written whole after a resize");
        let term = emulated(&screen.out[first..], area);
        let mut want = Buffer::empty(area);
        draw(&mut want);
        assert_shows(&term, &want);
    }
}
