//! Keys: one [`Action`] enum, one table of default bindings, and the help
//! overlay generated from that same table so it can never drift.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Ctrl-C: always quits, whatever is open.
    ForceQuit,
    /// `q`: closes the help overlay first, then quits.
    Quit,
    /// Esc: closes what is open (overlay, instance, trace pane, filter) and
    /// never quits: htop, k9s and bottom users press it to get out of
    /// things, not out of the program.
    Back,
    Help,
    NextView,
    PrevView,
    Up,
    Down,
    Top,
    Bottom,
    /// PgUp / PgDn: a screenful at a time.
    PageUp,
    PageDown,
    /// `J` / `K`: the trace pane's own scroll.
    TraceDown,
    TraceUp,
    Freeze,
    ToggleWindow,
    Search,
    Open,
    Follow,
    Sort,
    CycleTheme,
}

/// (key, modifiers, action, what the help overlay says).
pub const BINDINGS: &[(KeyCode, KeyModifiers, Action, &str)] = &[
    (KeyCode::Char('c'), KeyModifiers::CONTROL, Action::ForceQuit, "quit, always"),
    (KeyCode::Char('q'), KeyModifiers::NONE, Action::Quit, "quit (closes the help first)"),
    (KeyCode::F(10), KeyModifiers::NONE, Action::Quit, "quit (closes the help first)"),
    (KeyCode::Esc, KeyModifiers::NONE, Action::Back, "back one step (help, trace, filter...)"),
    (KeyCode::Char('?'), KeyModifiers::NONE, Action::Help, "this help"),
    (KeyCode::F(1), KeyModifiers::NONE, Action::Help, "this help"),
    (KeyCode::Tab, KeyModifiers::NONE, Action::NextView, "next view"),
    (KeyCode::BackTab, KeyModifiers::SHIFT, Action::PrevView, "previous view"),
    (KeyCode::Char('j'), KeyModifiers::NONE, Action::Down, "down / scroll"),
    (KeyCode::Down, KeyModifiers::NONE, Action::Down, "down / scroll"),
    (KeyCode::Char('k'), KeyModifiers::NONE, Action::Up, "up / scroll"),
    (KeyCode::Up, KeyModifiers::NONE, Action::Up, "up / scroll"),
    (KeyCode::Char('h'), KeyModifiers::NONE, Action::PrevView, "previous view"),
    (KeyCode::Left, KeyModifiers::NONE, Action::PrevView, "previous view"),
    (KeyCode::Char('l'), KeyModifiers::NONE, Action::NextView, "next view"),
    (KeyCode::Right, KeyModifiers::NONE, Action::NextView, "next view"),
    (KeyCode::Char('g'), KeyModifiers::NONE, Action::Top, "first"),
    (KeyCode::Home, KeyModifiers::NONE, Action::Top, "first"),
    (KeyCode::Char('G'), KeyModifiers::SHIFT, Action::Bottom, "last"),
    (KeyCode::End, KeyModifiers::NONE, Action::Bottom, "last"),
    (KeyCode::PageUp, KeyModifiers::NONE, Action::PageUp, "a page up"),
    (KeyCode::PageDown, KeyModifiers::NONE, Action::PageDown, "a page down"),
    (KeyCode::Char(' '), KeyModifiers::NONE, Action::Freeze, "freeze the view (collection goes on)"),
    (KeyCode::Char('w'), KeyModifiers::NONE, Action::ToggleWindow, "histograms: last 60 s / since start"),
    (KeyCode::Char('/'), KeyModifiers::NONE, Action::Search, "filter this list (requests: ids)"),
    (KeyCode::Enter, KeyModifiers::NONE, Action::Open, "open: a trace / an instance's panels"),
    (KeyCode::Char('f'), KeyModifiers::NONE, Action::Follow, "requests: follow this request / stop"),
    (KeyCode::Char('J'), KeyModifiers::SHIFT, Action::TraceDown, "trace pane: scroll down / up"),
    (KeyCode::Char('K'), KeyModifiers::SHIFT, Action::TraceUp, "trace pane: scroll down / up"),
    (KeyCode::Char('s'), KeyModifiers::NONE, Action::Sort, "instances, requests: next sort column"),
    (KeyCode::Char('T'), KeyModifiers::SHIFT, Action::CycleTheme, "theme: dark / light / no colour"),
];

/// Replay controls, checked before [`BINDINGS`] when a recording plays.
pub const REPLAY_BINDINGS: &[(KeyCode, ReplayAction, &str)] = &[
    (KeyCode::Left, ReplayAction::Seek(-10.0), "replay: back 10 s"),
    (KeyCode::Right, ReplayAction::Seek(10.0), "replay: forward 10 s"),
    (KeyCode::Char('p'), ReplayAction::Pause, "replay: pause / play"),
    (KeyCode::Char('+'), ReplayAction::Faster, "replay: twice as fast"),
    (KeyCode::Char('-'), ReplayAction::Slower, "replay: half as fast"),
];

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ReplayAction {
    Seek(f64),
    Pause,
    Faster,
    Slower,
}

pub fn replay_action_for(key: &KeyEvent) -> Option<ReplayAction> {
    if key.kind != KeyEventKind::Press || key.modifiers.contains(KeyModifiers::CONTROL) {
        return None;
    }
    REPLAY_BINDINGS.iter().find(|(code, _, _)| *code == key.code).map(|(_, a, _)| *a)
}

/// The action of a key press; releases and repeats of other kinds are
/// ignored (Windows terminals send both press and release).
pub fn action_for(key: &KeyEvent) -> Option<Action> {
    if key.kind != KeyEventKind::Press {
        return None;
    }
    BINDINGS.iter().find_map(|(code, mods, action, _)| {
        let same_mods = *mods == key.modifiers
            // Terminals disagree on whether `G` or `?` carry SHIFT.
            || (matches!(code, KeyCode::Char(_)) && !mods.contains(KeyModifiers::CONTROL)
                && !key.modifiers.contains(KeyModifiers::CONTROL));
        (*code == key.code && same_mods).then_some(*action)
    })
}

/// Help lines: each key (grouped per action) with its description.
pub fn help_lines() -> Vec<(String, &'static str)> {
    help_lines_for(false)
}

/// The help of a screen: a replay's keys take ←/→ (they seek), so those
/// are not said to change the view there, and the replay's own are listed.
pub fn help_lines_for(replay: bool) -> Vec<(String, &'static str)> {
    let mut out: Vec<(String, &'static str)> = Vec::new();
    let taken = |code: &KeyCode| replay && REPLAY_BINDINGS.iter().any(|(c, _, _)| c == code);
    for (code, mods, _, text) in BINDINGS.iter().filter(|(c, _, _, _)| !taken(c)) {
        let key = key_name(*code, *mods);
        match out.iter_mut().find(|(_, t)| t == text) {
            Some((k, _)) => {
                k.push(' ');
                k.push_str(&key);
            }
            None => out.push((key, text)),
        }
    }
    if replay {
        out.extend(
            REPLAY_BINDINGS.iter().map(|(code, _, text)| (key_name(*code, KeyModifiers::NONE), *text)),
        );
    }
    out
}

/// The README's key table (between its `<!-- keys -->` markers), from the
/// same tables as the help overlay; `tests/it/keys.rs` fails when the
/// README drifts from it.
pub fn markdown_table() -> String {
    let mut out = String::from("| key | does |\n| --- | --- |\n");
    let cell = |k: &str| k.split(' ').map(|k| format!("`{k}`")).collect::<Vec<_>>().join(" ");
    for (k, text) in help_lines() {
        out.push_str(&format!("| {} | {text} |\n", cell(&k)));
    }
    for (code, _, text) in REPLAY_BINDINGS {
        out.push_str(&format!("| {} | {text} |\n", cell(&key_name(*code, KeyModifiers::NONE))));
    }
    out
}

fn key_name(code: KeyCode, mods: KeyModifiers) -> String {
    let base = match code {
        KeyCode::Char(' ') => "space".to_string(),
        KeyCode::Char(c) => c.to_string(),
        KeyCode::Esc => "Esc".into(),
        KeyCode::Tab => "Tab".into(),
        KeyCode::BackTab => "S-Tab".into(),
        KeyCode::Up => "↑".into(),
        KeyCode::Down => "↓".into(),
        KeyCode::Left => "←".into(),
        KeyCode::Right => "→".into(),
        KeyCode::Enter => "Enter".into(),
        KeyCode::F(n) => format!("F{n}"),
        KeyCode::PageUp => "PgUp".into(),
        KeyCode::PageDown => "PgDn".into(),
        KeyCode::Home => "Home".into(),
        KeyCode::End => "End".into(),
        other => format!("{other:?}"),
    };
    if mods.contains(KeyModifiers::CONTROL) { format!("Ctrl-{base}") } else { base }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn press(code: KeyCode, mods: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, mods)
    }

    #[test]
    fn keys_map_to_actions() {
        assert_eq!(action_for(&press(KeyCode::Char('c'), KeyModifiers::CONTROL)), Some(Action::ForceQuit));
        assert_eq!(action_for(&press(KeyCode::Char('q'), KeyModifiers::NONE)), Some(Action::Quit));
        assert_eq!(action_for(&press(KeyCode::Esc, KeyModifiers::NONE)), Some(Action::Back));
        assert_eq!(action_for(&press(KeyCode::Char('j'), KeyModifiers::NONE)), Some(Action::Down));
        assert_eq!(action_for(&press(KeyCode::Down, KeyModifiers::NONE)), Some(Action::Down));
        assert_eq!(action_for(&press(KeyCode::Char('G'), KeyModifiers::SHIFT)), Some(Action::Bottom));
        assert_eq!(action_for(&press(KeyCode::Char('G'), KeyModifiers::NONE)), Some(Action::Bottom));
        assert_eq!(action_for(&press(KeyCode::Char('?'), KeyModifiers::SHIFT)), Some(Action::Help));
        assert_eq!(action_for(&press(KeyCode::Char(' '), KeyModifiers::NONE)), Some(Action::Freeze));
        assert_eq!(action_for(&press(KeyCode::Char('x'), KeyModifiers::NONE)), None);
        // htop's and every pager's keys.
        assert_eq!(action_for(&press(KeyCode::F(1), KeyModifiers::NONE)), Some(Action::Help));
        assert_eq!(action_for(&press(KeyCode::F(10), KeyModifiers::NONE)), Some(Action::Quit));
        assert_eq!(action_for(&press(KeyCode::PageDown, KeyModifiers::NONE)), Some(Action::PageDown));
        assert_eq!(action_for(&press(KeyCode::PageUp, KeyModifiers::NONE)), Some(Action::PageUp));
        assert_eq!(action_for(&press(KeyCode::Home, KeyModifiers::NONE)), Some(Action::Top));
        assert_eq!(action_for(&press(KeyCode::End, KeyModifiers::NONE)), Some(Action::Bottom));
        // Ctrl-J is not j.
        assert_eq!(action_for(&press(KeyCode::Char('j'), KeyModifiers::CONTROL)), None);
    }

    #[test]
    fn releases_are_ignored() {
        let mut k = press(KeyCode::Char('q'), KeyModifiers::NONE);
        k.kind = KeyEventKind::Release;
        assert_eq!(action_for(&k), None);
    }

    #[test]
    fn help_groups_keys_of_one_action() {
        let lines = help_lines();
        assert!(lines.iter().any(|(k, _)| k == "q F10"));
        assert!(lines.iter().any(|(k, _)| k == "? F1"));
        assert!(lines.iter().any(|(k, _)| k == "g Home"));
        assert!(lines.iter().any(|(k, _)| k == "Esc"));
        assert!(lines.iter().any(|(k, _)| k == "Ctrl-c"));
    }
}
#[cfg(test)]
mod replay_help_tests {
    use super::*;

    /// A replay's ←/→ seek: its help says so, and not that they change the view.
    #[test]
    fn a_replays_help_lists_its_keys_and_no_view_change_on_the_arrows() {
        let live = help_lines_for(false);
        let played = help_lines_for(true);
        let keys_of = |lines: &[(String, &str)], what: &str| {
            lines.iter().find(|(_, t)| *t == what).map(|(k, _)| k.clone()).unwrap_or_default()
        };
        assert!(keys_of(&live, "previous view").contains('←'));
        assert!(!keys_of(&played, "previous view").contains('←'), "{played:?}");
        assert!(!keys_of(&played, "next view").contains('→'), "{played:?}");
        assert_eq!(keys_of(&played, "replay: back 10 s"), "←");
        assert_eq!(keys_of(&played, "replay: pause / play"), "p");
        assert!(keys_of(&live, "replay: back 10 s").is_empty());
    }
}
