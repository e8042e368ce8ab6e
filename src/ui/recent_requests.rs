//! The newest requests with their outcome, on a wide Overview: what a user
//! would otherwise Tab to Requests for.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::fmt;
use super::requests::outcome_style;
use crate::theme::Theme;
use crate::traces::Trace;
use crate::ui::Panel;

/// `traces` newest first; the id column as wide as the widest id shown.
pub fn render(buf: &mut Buffer, area: Rect, traces: &[&Trace], theme: &Theme) {
    let block = Panel::new(
        Span::styled(" newest requests (Tab → Requests for all) ", theme.fg("title")),
        theme.fg("border"),
    );
    let inner = block.inner(area);
    let shown = &traces[..traces.len().min(inner.height as usize)];
    // The evidence keeps at least half the row: a long id gives way (with
    // an ellipsis; the Requests view has it whole).
    let id_cap = (inner.width as usize / 2).saturating_sub(22).max(12);
    let id_w = shown.iter().map(|t| fmt::width(&t.id)).max().unwrap_or(0).min(id_cap);
    let lines: Vec<Line> = shown
        .iter()
        .map(|t| {
            let lead = 1 + 9 + id_w + 1 + 12;
            let room = (inner.width as usize).saturating_sub(lead);
            Line::from(vec![
                Span::styled(format!(" {} ", fmt::clock(t.first_seen)), theme.dim()),
                Span::styled(format!("{:<id_w$} ", fmt::ellipsis(&t.id, id_w)), theme.text()),
                Span::styled(format!("{:<11}", t.outcome.label()), outcome_style(t.outcome, theme)),
                Span::styled(format!(" {}", fmt::shorten(&t.evidence(), room)), theme.dim()),
            ])
        })
        .collect();
    super::panel::draw_in(buf, area, block, &lines);
}
