//! Frames of the dashboard, drawn from the real recording into ratatui's
//! TestBackend at several sizes, snapshotted with insta; colours asserted
//! on the buffer's cells.

use crate::common;

use pdtop::app::App;
use pdtop::feed::Msg;
use pdtop::keymap::Action;
use pdtop::state::AppState;
use pdtop::theme::Theme;
use pdtop::ui::View;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;

/// Recording time of the qwen3 capture's first scrape.
const T0: f64 = 1796019929.3649874;

/// The state a scraper at 1 s would have built `secs` into the recording.
fn state_at(secs: f64) -> AppState {
    common::replay_metrics_only("qwen3-shape-restart", secs)
}

fn draw(app: &App, w: u16, h: u16) -> Buffer {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    term.draw(|f| app.draw(f)).unwrap();
    term.backend().buffer().clone()
}

fn text(buf: &Buffer) -> String {
    common::buffer_text(buf)
}

fn dark() -> Theme {
    Theme::builtin("dark").unwrap()
}

#[test]
fn overview_during_the_silent_misses() {
    // 45 s in: the edge_block misses are done, mismatch is under way.
    let app = App::new(state_at(45.0), dark());
    for (w, h) in [(80, 24), (120, 40), (200, 60)] {
        insta::assert_snapshot!(format!("overview_misses_{w}x{h}"), text(&draw(&app, w, h)));
    }
}

#[test]
fn overview_while_decode_is_down_and_after_its_restart() {
    let app = App::new(state_at(100.0), dark());
    insta::assert_snapshot!("overview_decode_down_120x40", text(&draw(&app, 120, 40)));
    let mut app = App::new(state_at(146.0), dark());
    app.view.view = View::Events;
    insta::assert_snapshot!("events_after_restart_120x40", text(&draw(&app, 120, 40)));
}

#[test]
fn help_overlay_and_frozen_badge() {
    let mut app = App::new(state_at(30.0), dark());
    app.on_action(Action::Freeze);
    app.on_action(Action::Help);
    let t = text(&draw(&app, 100, 30));
    assert!(t.contains("FROZEN"), "{t}");
    assert!(t.contains("freeze the view (collection goes on)"), "{t}");
    insta::assert_snapshot!("help_frozen_100x30", t);
    // Frozen: new data does not move the picture; unfreezing shows it.
    let before = text(&draw(&app, 100, 30));
    app.on_msg(Msg::ScrapeFailed { instance: 1, at: T0 + 31.0, error: "refused".into() });
    assert_eq!(before, text(&draw(&app, 100, 30)));
    app.on_action(Action::Back); // closes help, does not quit
    assert!(!app.quit);
    app.on_action(Action::Freeze);
    assert!(text(&draw(&app, 100, 30)).contains("DOWN"));
    app.on_action(Action::Back); // nothing open: Esc does nothing
    assert!(!app.quit);
    app.on_action(Action::Quit);
    assert!(app.quit);
}

#[test]
fn silent_miss_banner_is_loud_in_every_theme() {
    for name in ["dark", "light", "mono"] {
        let theme = Theme::builtin(name).unwrap();
        let alarm = theme.alarm();
        let app = App::new(state_at(45.0), theme);
        let buf = draw(&app, 120, 40);
        let row = (0..buf.area.height)
            .find(|y| {
                (0..buf.area.width).map(|x| buf[(x, *y)].symbol()).collect::<String>().contains("SILENT MISS")
            })
            .unwrap_or_else(|| panic!("{name}: no banner"));
        let cell = &buf[(3, row)];
        assert_eq!(cell.style().bg, alarm.bg, "{name}");
        assert!(cell.style().add_modifier.contains(ratatui::style::Modifier::BOLD), "{name}");
    }
}

#[test]
fn tiny_and_huge_terminals_do_not_panic() {
    let app = App::new(state_at(45.0), dark());
    for (w, h) in [(1, 1), (10, 5), (40, 12), (300, 100)] {
        draw(&app, w, h);
    }
}

#[test]
fn requests_view_and_a_trace_from_the_real_logs() {
    // 60 s in: the misses are named, the steady phase is running.
    let mut app = App::new(common::replay_with_logs("qwen3-shape-restart", 60.0), dark());
    app.view.view = View::Requests;
    let t = text(&draw(&app, 140, 44));
    assert!(t.contains("lab-edge_block-0") && t.contains("SILENT MISS"), "{t}");
    insta::assert_snapshot!("requests_140x44", t);
    // Search for one miss and open its trace.
    app.on_action(Action::Search);
    for c in "mismatch-2".chars() {
        app.on_key(&ratatui::crossterm::event::KeyEvent::new(
            ratatui::crossterm::event::KeyCode::Char(c),
            ratatui::crossterm::event::KeyModifiers::NONE,
        ));
    }
    app.on_key(&ratatui::crossterm::event::KeyEvent::new(
        ratatui::crossterm::event::KeyCode::Enter,
        ratatui::crossterm::event::KeyModifiers::NONE,
    ));
    app.on_action(Action::Open);
    let t = text(&draw(&app, 140, 44));
    assert!(t.contains("trace lab-mismatch-2"), "{t}");
    assert!(!t.contains("lab-steady-0 "), "the filter hides other ids: {t}");
    insta::assert_snapshot!("trace_mismatch_140x44", t);
}

/// The three sizes every view is drawn at: a laptop pane, a half screen, a
/// full screen.
const SIZES: [(u16, u16); 3] = [(80, 24), (120, 40), (200, 60)];

/// Every view of a live pdtop tailing the logs, 62 s into the recording
/// (misses named, the steady phase running), at every size.
#[test]
fn every_view_at_every_size() {
    let state = common::replay_with_logs("qwen3-shape-restart", 62.0);
    let views: [(&str, View, bool, bool); 7] = [
        ("overview", View::Overview, false, false),
        ("instances", View::Instances, false, false),
        ("requests", View::Requests, false, false),
        ("trace", View::Requests, true, false),
        ("link", View::Link, false, false),
        ("events", View::Events, false, false),
        ("help", View::Overview, false, true),
    ];
    for (name, view, open, help) in views {
        let mut app = App::new(state.clone(), dark());
        app.view.view = view;
        app.view.help = help;
        if open {
            app.view.search = "edge_block-1".into();
            app.view.detail = true;
        }
        for (w, h) in SIZES {
            let t = text(&draw(&app, w, h));
            insta::assert_snapshot!(format!("view_{name}_{w}x{h}"), t);
        }
    }
}

/// Issue #19 item 5: at 80x24 every number is whole (the quantile line
/// keeps `n=`, the token legend keeps the computed total, the request
/// panel keeps the verdict), and EVIDENCE is wider than DECODE.
#[test]
fn every_number_is_whole_at_80x24() {
    let state = common::replay_with_logs("qwen3-shape-restart", 62.0);
    let mut app = App::new(state, dark());
    let t = text(&draw(&app, 80, 24));
    for whole in ["n=37", "n=45", "n=42", "computed 28.2k", "transferred 41.1k", "saves 14%"] {
        assert!(t.contains(whole), "{whole} is not whole at 80x24:\n{t}");
    }
    // The latency chart is left out here, and says where it is.
    assert!(t.contains("latency over time: 120x"), "{t}");
    app.view.view = View::Requests;
    let t = text(&draw(&app, 80, 24));
    let head = t.lines().find(|l| l.contains("EVIDENCE")).expect("a header row");
    let evidence_w = head.split_once("EVIDENCE").map_or(0, |(_, rest)| rest.chars().count() + 7);
    assert!(evidence_w >= 24, "EVIDENCE is {evidence_w} wide: {head}");
    assert!(!head.contains("DECODE"), "DECODE gives way to EVIDENCE at 80 columns: {head}");
}

/// Issue #19 item 6: at 200x60 the histograms take the rows their buckets
/// need (no empty band), the latency charts have a legend row of their
/// own, and the newest requests and the events get room.
#[test]
fn a_large_screen_goes_to_requests_events_and_latency() {
    let state = common::replay_with_logs("qwen3-shape-restart", 62.0);
    let app = App::new(state, dark());
    let t = text(&draw(&app, 200, 60));
    let empty_in_boxes = t
        .lines()
        .take_while(|l| !l.contains("over time"))
        .filter(|l| l.trim_matches(['│', ' ']).is_empty())
        .count();
    assert!(empty_in_boxes <= 2, "histograms with empty rows:\n{t}");
    assert_eq!(t.matches("⠒ p50 · p90").count(), 2, "a legend per latency chart:\n{t}");
    assert!(t.contains("newest requests") && t.contains("lab-steady-19"), "{t}");
    let events = t.lines().filter(|l| l.contains("▲ MISS  lab-")).count();
    assert!(events >= 6, "{events} event rows:\n{t}");
}
