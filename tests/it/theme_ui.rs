//! Themes on screen: under NO_COLOR (the mono theme) the source chart's
//! sources differ by fill, so a miss spike shows; `T` cycles the theme.

use crate::common;

use pdtop::app::App;
use pdtop::theme::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// The source chart alone, 45 s into the qwen3 capture: the edge_block
/// misses (computed, nothing transferred) are done, healthy loads before.
fn chart(theme: &str) -> String {
    let state = common::replay_metrics_only("qwen3-shape-restart", 45.0);
    let theme = Theme::builtin(theme).unwrap();
    let mut term = Terminal::new(TestBackend::new(72, 12)).unwrap();
    term.draw(|f| {
        let a = f.area();
        pdtop::ui::sources_chart::render(f.buffer_mut(), a, &state, &theme)
    })
    .unwrap();
    common::buffer_text(term.backend().buffer())
}

/// The chart's columns, bottom to top, as the glyphs drawn in them.
fn columns(text: &str) -> Vec<String> {
    let rows: Vec<Vec<char>> =
        // The plot's rows: the legend row (words) is no column.
        text.lines()
            .skip(1)
            .filter(|l| l.starts_with('│') && !l.chars().any(char::is_alphanumeric))
            .map(|l| l.chars().collect())
            .collect();
    let w = rows.iter().map(Vec::len).min().unwrap_or(0);
    (1..w.saturating_sub(1))
        .map(|x| rows.iter().rev().map(|r| r[x]).filter(|c| *c != ' ').collect())
        .filter(|c: &String| !c.is_empty())
        .collect()
}

#[test]
fn no_color_source_chart_shows_the_miss_spike() {
    let mono = chart("mono");
    let cols = columns(&mono);
    // Healthy columns are mostly transferred (`░`); a miss column is
    // computed tokens (`█`) with nothing transferred under them.
    assert!(cols.iter().any(|c| c.contains('░')), "{mono}");
    assert!(cols.iter().any(|c| c.contains('█') && !c.contains('░')), "{mono}");
    insta::assert_snapshot!("no_color_sources_chart_72x12", mono);
    // With colour the fill is one block and colour tells the sources apart.
    assert!(columns(&chart("dark")).iter().all(|c| c.chars().all(|g| g == '█')));
}

#[test]
fn the_theme_key_cycles_dark_light_mono_and_is_in_the_help() {
    let state = common::replay_metrics_only("qwen3-shape-restart", 10.0);
    let mut app = App::new(state, Theme::builtin("dark").unwrap());
    let t = KeyEvent::new(KeyCode::Char('T'), KeyModifiers::SHIFT);
    let mut seen = vec![app.theme.name.clone()];
    for _ in 0..3 {
        assert!(app.on_key(&t));
        seen.push(app.theme.name.clone());
    }
    assert_eq!(seen, ["dark", "light", "mono", "dark"]);
    assert!(!app.quit);
    assert!(pdtop::keymap::help_lines().iter().any(|(k, t)| k == "T" && t.contains("theme")));
}

/// The latency chart alone, two minutes into the qwen3 capture.
fn latency(theme: &str) -> String {
    let state = common::replay_metrics_only("qwen3-shape-restart", 120.0);
    let theme = Theme::builtin(theme).unwrap();
    let mut term = Terminal::new(TestBackend::new(100, 14)).unwrap();
    term.draw(|f| {
        let a = f.area();
        pdtop::ui::latency_chart::render(f.buffer_mut(), a, &state, &pdtop::ui::ViewState::default(), &theme)
    })
    .unwrap();
    common::buffer_text(term.backend().buffer())
}

#[test]
fn no_color_latency_lines_differ_by_glyph_and_the_legend_names_them() {
    let is_braille = |c: char| ('\u{2801}'..='\u{28ff}').contains(&c);
    for name in ["mono", "dark"] {
        let text = latency(name);
        let rows: Vec<&str> = text.lines().collect();
        // Row 1 of each half is its legend; the plot is below it.
        let legend = rows[1];
        let plot: String = rows[2..].join("\n");
        assert!(!legend.contains("bright") && !legend.contains("dim"), "{text}");
        assert!(plot.chars().any(is_braille) && legend.contains('⠒'), "{name}: no p50 line\n{text}");
        assert!(plot.contains('·') && legend.contains('·'), "{name}: no p90 points\n{text}");
        if name == "mono" {
            // No colour parts the roles: decode has glyphs of its own, and
            // the legend says which are whose.
            assert!(plot.contains('•') && plot.contains('+'), "{text}");
            assert!(legend.contains("prefill ⠒p50 ·p90") && legend.contains("decode •p50 +p90"), "{text}");
            insta::assert_snapshot!("no_color_latency_chart_100x14", text);
        } else {
            assert!(!plot.contains('•') && !plot.contains('+'), "{text}");
            assert!(legend.contains("━ prefill ━ decode"), "{text}");
        }
    }
}
