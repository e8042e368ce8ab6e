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
