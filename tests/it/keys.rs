//! The key map as a user meets it: Esc closes what is open and never quits,
//! in every view, live and in a replay; `q` quits (closing the help first);
//! Ctrl-C always quits; `f` toggles the follow and leaves the trace pane
//! open. The README's key table is the binding table's own.

use crate::common;

use pdtop::app::App;
use pdtop::cli::UiArgs;
use pdtop::keymap::{self, Action};
use pdtop::pipeline::Player;
use pdtop::ui::View;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

fn press(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn live() -> App {
    static STATE: std::sync::OnceLock<pdtop::state::AppState> = std::sync::OnceLock::new();
    let state = STATE.get_or_init(|| common::replay_with_logs("qwen3-shape-restart", 120.0));
    App::new(state.clone(), pdtop::theme::Theme::builtin("mono").unwrap())
}

fn replay() -> (App, Player) {
    let args = common::capture_replay_args("demo-proxy-qwen3", UiArgs { theme: Some("mono".into()) });
    let (app, mut player) = pdtop::modes::replay_app(&args).unwrap();
    let mut app = app;
    // Some way in, so that the views have rows, events and traces.
    for _ in 0..12 {
        app.on_key_with(&press(KeyCode::Right), Some(&mut player));
    }
    (app, player)
}

/// Every way of being in a view: bare, with help, with the trace pane, a
/// filter, a follow, an instance drilled into, frozen.
fn open_things(app: &mut App, view: View, player: &mut Option<&mut Player>) {
    app.view.view = view;
    let keys: &[KeyCode] = &[
        KeyCode::Char('?'),
        KeyCode::Enter,
        KeyCode::Char('f'),
        KeyCode::Char(' '),
        KeyCode::Char('j'),
        KeyCode::Enter,
    ];
    for k in keys {
        app.on_key_with(&press(*k), player.as_deref_mut());
    }
}

fn esc_never_quits(app: &mut App, mut player: Option<&mut Player>) {
    for view in View::ALL {
        open_things(app, view, &mut player);
        // More Escs than things open: each closes one, the last ones nothing.
        for _ in 0..8 {
            app.on_key_with(&press(KeyCode::Esc), player.as_deref_mut());
            assert!(!app.quit, "Esc quit from {view:?}");
        }
        assert!(!app.view.help && app.view.focus.is_none(), "{view:?}");
        if view == View::Requests {
            assert!(!app.view.detail && app.view.followed.is_none() && app.view.search.is_empty());
        }
        // A search being typed: Esc drops it, the next does nothing.
        app.on_key_with(&press(KeyCode::Char('/')), player.as_deref_mut());
        app.on_key_with(&press(KeyCode::Char('x')), player.as_deref_mut());
        app.on_key_with(&press(KeyCode::Esc), player.as_deref_mut());
        app.on_key_with(&press(KeyCode::Esc), player.as_deref_mut());
        assert!(!app.quit && !app.view.searching && app.view.search.is_empty(), "{view:?}");
    }
}

#[test]
fn esc_never_quits_from_any_view_live() {
    let mut app = live();
    esc_never_quits(&mut app, None);
}

#[test]
fn esc_never_quits_from_any_view_in_a_replay() {
    let (mut app, mut player) = replay();
    esc_never_quits(&mut app, Some(&mut player));
}

#[test]
fn q_closes_the_help_then_quits_and_ctrl_c_always_quits() {
    let (mut app, mut player) = replay();
    app.on_key_with(&press(KeyCode::Char('?')), Some(&mut player));
    app.on_key_with(&press(KeyCode::Char('q')), Some(&mut player));
    assert!(!app.quit && !app.view.help);
    app.on_key_with(&press(KeyCode::Char('q')), Some(&mut player));
    assert!(app.quit);
    for view in View::ALL {
        let mut app = live();
        let mut none = None;
        open_things(&mut app, view, &mut none);
        app.on_key(&KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
        assert!(app.quit, "Ctrl-C did not quit from {view:?}");
    }
    // Ctrl-C while a search is typed.
    let mut app = live();
    app.on_action(Action::Search);
    app.on_key(&KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
    assert!(app.quit);
}

#[test]
fn f_toggles_the_follow_only() {
    let mut app = live();
    app.view.view = View::Requests;
    app.on_action(Action::Down);
    let selected = app.view.selected;
    app.on_action(Action::Follow);
    let followed = app.view.followed.expect("f follows the selected request");
    assert!(app.view.detail, "following shows the trace");
    // Stop following: the pane stays open on the same request.
    app.on_action(Action::Follow);
    assert_eq!(app.view.followed, None);
    assert!(app.view.detail, "f closed the trace pane");
    let rows = pdtop::ui::requests::visible(&app.state, &app.view);
    assert_eq!(rows[app.view.selected].serial, followed);
    assert_eq!(app.view.selected, selected);
    // f again follows it again; Esc closes the pane and does not quit.
    app.on_action(Action::Follow);
    assert_eq!(app.view.followed, Some(followed));
    app.on_action(Action::Back);
    assert!(!app.view.detail && app.view.followed.is_none() && !app.quit);
    app.on_action(Action::Back);
    assert!(!app.quit);
}

/// The README's key table is generated from the bindings: run with
/// `PDTOP_UPDATE_README=1` to rewrite it.
#[test]
fn readme_key_table_is_the_binding_table() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    let (start, end) = ("<!-- keys:start -->\n", "<!-- keys:end -->");
    let a = readme.find(start).expect("README has the keys:start marker") + start.len();
    let b = readme[a..].find(end).expect("README has the keys:end marker") + a;
    let table = keymap::markdown_table();
    if std::env::var_os("PDTOP_UPDATE_README").is_some() {
        std::fs::write(&path, format!("{}{table}{}", &readme[..a], &readme[b..])).unwrap();
        return;
    }
    assert_eq!(readme[a..b], table, "README key table drifted: PDTOP_UPDATE_README=1 rewrites it");
    // Esc's line never says it quits.
    let esc = table.lines().find(|l| l.contains("`Esc`")).unwrap();
    assert!(!esc.contains("quit"), "{esc}");
}

fn key(app: &mut App, code: KeyCode) {
    app.on_key(&press(code));
}

fn ctrl(app: &mut App, c: char) {
    app.on_key(&KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL));
}

/// htop's, k9s's and every pager's keys, on a real capture's state.
#[test]
fn keys_people_already_know() {
    let mut app = live();
    // F1 opens the help; while it is open it swallows what is not its own.
    key(&mut app, KeyCode::F(1));
    assert!(app.view.help);
    let (view, sel) = (app.view.view, app.view.selected);
    for k in [KeyCode::Char('j'), KeyCode::Char('G'), KeyCode::Tab, KeyCode::PageDown, KeyCode::Char('/')] {
        key(&mut app, k);
    }
    assert_eq!((app.view.view, app.view.selected, app.view.searching), (view, sel, false));
    key(&mut app, KeyCode::F(10));
    assert!(!app.view.help && !app.quit, "F10 closes the help first");

    // PgDn / PgUp / End / Home in Requests move by the page the screen drew.
    app.view.view = View::Requests;
    let _ = common::screen_text(&app, 120, 40);
    let page = app.view.page.get();
    assert!(page > 5, "{page}");
    key(&mut app, KeyCode::PageDown);
    assert_eq!(app.view.selected, page);
    key(&mut app, KeyCode::PageUp);
    assert_eq!(app.view.selected, 0);
    key(&mut app, KeyCode::End);
    assert!(app.view.selected > page);
    key(&mut app, KeyCode::Home);
    assert_eq!(app.view.selected, 0);

    // `G` in Events shows the last page whole, not one row.
    app.view.view = View::Events;
    key(&mut app, KeyCode::Char('G'));
    let text = common::screen_text(&app, 120, 40);
    let listed: Vec<&str> = text.lines().filter(|l| l.starts_with("│ ") && l.contains(':')).collect();
    let oldest = app.state.events.front().map(|e| pdtop::ui::fmt::clock(e.t)).unwrap();
    // The oldest event is on screen, with the page above it full.
    assert!(listed.last().is_some_and(|l| l.contains(&oldest)), "{text}");
    let inner = text.lines().filter(|l| l.starts_with('│')).count();
    assert_eq!(listed.len(), app.state.events.len().min(inner), "{text}");

    // Esc from an instance's panels goes back to the Instances list.
    app.view.view = View::Instances;
    key(&mut app, KeyCode::Enter);
    assert_eq!((app.view.view, app.view.focus.is_some()), (View::Overview, true));
    key(&mut app, KeyCode::Esc);
    assert_eq!((app.view.view, app.view.focus), (View::Instances, None));

    // `/` filters the view it is typed in; Ctrl-W and Ctrl-U edit the box.
    key(&mut app, KeyCode::Char('/'));
    assert_eq!((app.view.view, app.view.searching), (View::Instances, true));
    for c in "decode 82".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    ctrl(&mut app, 'w');
    assert_eq!(app.view.search, "decode ");
    ctrl(&mut app, 'u');
    assert_eq!(app.view.search, "");
    for c in "8200".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    key(&mut app, KeyCode::Enter);
    let text = common::screen_text(&app, 120, 40);
    assert!(text.contains("/8200") && text.contains("┌ prefill 0 ·"), "{text}");

    // A theme change says so, until the next key.
    key(&mut app, KeyCode::Char('T'));
    let text = common::screen_text(&app, 120, 40);
    assert!(text.lines().last().unwrap().trim_start().starts_with("theme: "), "{text}");
    key(&mut app, KeyCode::Char('j'));
    assert!(!common::screen_text(&app, 120, 40).lines().last().unwrap().contains("theme: "));
}

/// The trace pane says how a request was joined and how sure, in words.
#[test]
fn verdicts_are_in_words() {
    let mut app = live();
    app.view.view = View::Requests;
    key(&mut app, KeyCode::Enter);
    let text = common::screen_text(&app, 200, 60);
    let line = text.lines().find(|l| l.contains("verdict:")).unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("(joined by id, sure)") || line.contains("(joined by"), "{line}");
    assert!(!line.contains("ById") && !line.contains("Sure)"), "{line}");
}

/// Enter on an Events row that names a request opens that request.
#[test]
fn enter_on_an_event_opens_its_request() {
    let mut app = live();
    app.view.view = View::Events;
    let shown = pdtop::ui::events::shown(&app.state, "");
    let n = shown.iter().position(|e| e.text.starts_with("lab-")).expect("a miss event naming its request");
    let id = shown[n].text.split(": ").next().unwrap().to_string();
    let _ = common::screen_text(&app, 120, 40);
    for _ in 0..n {
        key(&mut app, KeyCode::Char('j'));
    }
    key(&mut app, KeyCode::Enter);
    assert_eq!(
        (app.view.view, app.view.detail, app.view.search.as_str()),
        (View::Requests, true, id.as_str())
    );
    let text = common::screen_text(&app, 120, 40);
    assert!(text.contains(&format!("trace {id}")), "{text}");
}

/// At 80x24 the trace pane cannot hold a trace: J scrolls it down to the
/// vLLM ids, K back, and the pane says where it is.
#[test]
fn the_trace_pane_scrolls() {
    let mut app = live();
    app.view.view = View::Requests;
    key(&mut app, KeyCode::Enter);
    let text = common::screen_text(&app, 80, 24);
    // The pane's last lines (the decode's vLLM ids) are below its edge.
    let at = |text: &str| {
        let l = text.lines().find(|l| l.contains(" J/K ")).unwrap_or_else(|| panic!("{text}")).to_string();
        let n = l.split(" J/K").next().unwrap().rsplit(' ').next().unwrap().to_string();
        let (shown, total) = n.split_once('/').unwrap();
        (shown.parse::<u32>().unwrap(), total.parse::<u32>().unwrap())
    };
    let (shown, total) = at(&text);
    assert!(shown < total, "{text}");
    let mut presses = 0;
    while at(&common::screen_text(&app, 80, 24)).0 < total {
        key(&mut app, KeyCode::Char('J'));
        presses += 1;
        assert!(presses < 40, "{}", common::screen_text(&app, 80, 24));
    }
    for _ in 0..presses {
        key(&mut app, KeyCode::Char('K'));
    }
    assert_eq!(common::screen_text(&app, 80, 24), text);
    // Another request: its trace from the top.
    key(&mut app, KeyCode::Char('J'));
    key(&mut app, KeyCode::Char('j'));
    assert_eq!(app.view.trace_scroll, 0);
}
