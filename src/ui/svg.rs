//! A rendered frame as an SVG picture: every cell of a ratatui buffer as a
//! coloured rectangle and a glyph on a monospace grid. Screenshots are made
//! from the same buffers the snapshot tests read, so they cannot drift from
//! what pdtop really draws.

use std::fmt::Write;

use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};

const CELL_W: f64 = 8.4;
const CELL_H: f64 = 17.0;

/// Default foreground and background for `Color::Reset`.
pub struct Palette {
    pub fg: &'static str,
    pub bg: &'static str,
}

pub const DARK: Palette = Palette { fg: "#c8c8c8", bg: "#1b1d23" };
pub const LIGHT: Palette = Palette { fg: "#1b1d23", bg: "#fbfbf8" };

fn hex(c: Color, default: &str) -> String {
    let named = match c {
        Color::Reset => return default.to_string(),
        Color::Black => "#000000",
        Color::Red => "#cc3333",
        Color::Green => "#3ea83e",
        Color::Yellow => "#c9a227",
        Color::Blue => "#3b6fd6",
        Color::Magenta => "#b04fb0",
        Color::Cyan => "#2aa5b3",
        Color::Gray => "#b8b8b8",
        Color::DarkGray => "#6b6b6b",
        Color::LightRed => "#ff6b6b",
        Color::LightGreen => "#7ee07e",
        Color::LightYellow => "#ffe27a",
        Color::LightBlue => "#7fa8ff",
        Color::LightMagenta => "#f08cf0",
        Color::LightCyan => "#7fe3ee",
        Color::White => "#f2f2f2",
        Color::Rgb(r, g, b) => return format!("#{r:02x}{g:02x}{b:02x}"),
        Color::Indexed(i) => return format!("#{0:02x}{0:02x}{0:02x}", i),
    };
    named.to_string()
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The buffer as an SVG document.
pub fn buffer_to_svg(buf: &Buffer, palette: &Palette) -> String {
    let (w, h) = (buf.area.width, buf.area.height);
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{:.0}" height="{:.0}" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="14">"#,
        f64::from(w) * CELL_W,
        f64::from(h) * CELL_H
    );
    let _ = write!(out, r#"<rect width="100%" height="100%" fill="{}"/>"#, palette.bg);
    for y in 0..h {
        for x in 0..w {
            let cell = &buf[(x, y)];
            let style = cell.style();
            let reversed = style.add_modifier.contains(Modifier::REVERSED);
            let (mut fg, mut bg) = (
                hex(style.fg.unwrap_or(Color::Reset), palette.fg),
                hex(style.bg.unwrap_or(Color::Reset), palette.bg),
            );
            if reversed {
                std::mem::swap(&mut fg, &mut bg);
            }
            let (px, py) = (f64::from(x) * CELL_W, f64::from(y) * CELL_H);
            if bg != palette.bg {
                let _ = write!(
                    out,
                    r#"<rect x="{px:.1}" y="{py:.1}" width="{:.1}" height="{CELL_H}" fill="{bg}"/>"#,
                    CELL_W + 0.5
                );
            }
            let sym = cell.symbol();
            if sym.trim().is_empty() {
                continue;
            }
            if sym == "█" {
                // Full blocks as rectangles: fonts leave gaps between them.
                let _ = write!(
                    out,
                    r#"<rect x="{px:.1}" y="{py:.1}" width="{:.1}" height="{CELL_H}" fill="{fg}"/>"#,
                    CELL_W + 0.5
                );
                continue;
            }
            let weight =
                if style.add_modifier.contains(Modifier::BOLD) { r#" font-weight="bold""# } else { "" };
            let _ = write!(
                out,
                r#"<text x="{px:.1}" y="{:.1}" fill="{fg}"{weight}>{}</text>"#,
                py + CELL_H * 0.78,
                escape(sym)
            );
        }
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::layout::Rect;
    use ratatui::style::Style;

    #[test]
    fn cells_become_rects_and_text() {
        let mut buf = Buffer::empty(Rect::new(0, 0, 3, 1));
        buf.set_string(0, 0, "a<█", Style::new().fg(Color::Red).bg(Color::Blue));
        let svg = buffer_to_svg(&buf, &DARK);
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains(">a</text>"));
        assert!(svg.contains("&lt;"));
        assert!(svg.contains(r##"fill="#3b6fd6""##), "background drawn");
        assert!(svg.trim_end().ends_with("</svg>"));
    }
}
