//! The dashboard's event loop. Input wins over data (`biased`), data is
//! taken in batches (the live collectors' at each refresh, or when the
//! logs' news wakes the loop), and a frame is drawn once a refresh (with
//! the clock's tick, so ages move) or sooner for a key or a new alert, at
//! most [`FRAME`] apart: an idle dashboard costs almost nothing.

use std::time::Duration;

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;

use crate::feed::Msg;
use crate::keymap::{Action, action_for};
use crate::pipeline::{Feed, LiveFeed, Player};
use crate::state::AppState;
use crate::theme::Theme;
use crate::ui::{self, DemoInfo, HistWindow, Surface, View, ViewState};

/// The shortest time between two frames (20 fps at most).
pub const FRAME: Duration = Duration::from_millis(50);
/// Messages applied before the next frame may be drawn.
const DRAIN_BATCH: usize = 256;

/// State, view and theme: everything a frame is drawn from.
pub struct App {
    pub state: AppState,
    pub view: ViewState,
    pub theme: Theme,
    pub quit: bool,
}

impl App {
    pub fn new(state: AppState, theme: Theme) -> App {
        App { state, view: ViewState::default(), theme, quit: false }
    }

    pub fn on_msg(&mut self, msg: Msg) {
        self.state.apply(msg);
    }

    /// Applies a key; returns whether the screen changed.
    pub fn on_key(&mut self, key: &KeyEvent) -> bool {
        self.on_key_with(key, None)
    }

    /// Applies a key, the replay keys steering `player` when a recording
    /// plays; returns whether the screen changed.
    pub fn on_key_with(&mut self, key: &KeyEvent, player: Option<&mut Player>) -> bool {
        if self.view.searching && key.kind == KeyEventKind::Press {
            return self.on_search_key(key);
        }
        if let Some(player) = player
            && let Some(a) = crate::keymap::replay_action_for(key)
        {
            match a {
                crate::keymap::ReplayAction::Seek(d) => player.seek(d, &mut self.state),
                crate::keymap::ReplayAction::Pause => player.paused = !player.paused,
                crate::keymap::ReplayAction::Faster => player.faster(),
                crate::keymap::ReplayAction::Slower => player.slower(),
            }
            return true;
        }
        let Some(action) = action_for(key) else {
            return false;
        };
        self.view.said = None;
        self.on_action(action);
        true
    }

    /// Typing a search: text goes to the filter; Enter keeps it, Esc drops
    /// it; Ctrl-C still quits.
    fn on_search_key(&mut self, key: &KeyEvent) -> bool {
        let v = &mut self.view;
        match key.code {
            KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => self.quit = true,
            // As in a shell: Ctrl-U clears the line, Ctrl-W the last word.
            KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => v.search.clear(),
            KeyCode::Char('w') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                let kept = v.search.trim_end().len();
                let cut = v.search[..kept].rfind(char::is_whitespace).map_or(0, |i| i + 1);
                v.search.truncate(cut);
            }
            KeyCode::Char(_) if key.modifiers.contains(KeyModifiers::CONTROL) => return false,
            KeyCode::Char(c) => {
                v.search.push(c);
                v.selected = 0;
                v.scroll = 0;
            }
            KeyCode::Backspace => {
                v.search.pop();
            }
            KeyCode::Enter => v.searching = false,
            KeyCode::Esc => {
                v.searching = false;
                v.search.clear();
            }
            _ => return false,
        }
        true
    }

    /// Rows in the Requests view (for moving the selection).
    fn request_rows(&self) -> usize {
        let state = self.view.frozen.as_deref().unwrap_or(&self.state);
        ui::requests::visible(state, &self.view).len()
    }

    pub fn on_action(&mut self, action: Action) {
        let rows = self.request_rows();
        let in_requests = self.view.view == View::Requests;
        let in_instances = self.view.view == View::Instances;
        let inst_rows = {
            let state = self.view.frozen.as_deref().unwrap_or(&self.state);
            ui::instances::order(state, &self.view)
        };
        let v = &mut self.view;
        // Another request selected: its trace from its first line.
        if !matches!(action, Action::TraceDown | Action::TraceUp) {
            v.trace_scroll = 0;
        }
        // The help swallows every key but those that close it.
        if v.help && !matches!(action, Action::Help | Action::Quit | Action::ForceQuit | Action::Back) {
            return;
        }
        let page = v.page.get().max(1);
        let event_rows = {
            let state = v.frozen.as_deref().unwrap_or(&self.state);
            ui::events::shown(state, &v.search).len()
        };
        let in_events = v.view == View::Events;
        match action {
            Action::ForceQuit => self.quit = true,
            Action::Quit => {
                if v.help {
                    v.help = false;
                } else {
                    self.quit = true;
                }
            }
            // Closes the innermost thing open; with nothing open it does
            // nothing (the footer says `q quit`).
            Action::Back => {
                if v.help {
                    v.help = false;
                } else if v.focus.is_some() {
                    // Back where it was opened from: the Instances list.
                    v.focus = None;
                    v.view = View::Instances;
                } else if in_requests && (v.detail || v.followed.is_some()) {
                    v.detail = false;
                    v.followed = None;
                } else if !v.search.is_empty() {
                    v.search.clear();
                }
            }
            Action::Help => v.help = !v.help,
            Action::NextView | Action::PrevView => {
                let all = View::ALL;
                let i = all.iter().position(|x| *x == v.view).unwrap_or(0);
                let step = if action == Action::NextView { 1 } else { all.len() - 1 };
                v.view = all[(i + step) % all.len()];
                v.scroll = 0;
                // A filter belongs to the view it was typed in.
                v.search.clear();
            }
            Action::Down if in_instances => {
                v.inst_selected = (v.inst_selected + 1).min(inst_rows.len().saturating_sub(1))
            }
            Action::Up if in_instances => v.inst_selected = v.inst_selected.saturating_sub(1),
            Action::PageDown if in_instances => {
                v.inst_selected = (v.inst_selected + page).min(inst_rows.len().saturating_sub(1))
            }
            Action::PageUp if in_instances => v.inst_selected = v.inst_selected.saturating_sub(page),
            Action::Top if in_instances => v.inst_selected = 0,
            Action::Bottom if in_instances => v.inst_selected = inst_rows.len().saturating_sub(1),
            Action::Sort if v.view == View::Requests => v.req_sort = v.req_sort.next(),
            Action::Sort => v.inst_sort = v.inst_sort.next(),
            Action::Open if in_instances => {
                if let Some(i) = inst_rows.get(v.inst_selected) {
                    v.focus = Some(*i);
                    v.view = View::Overview;
                }
            }
            Action::TraceDown => v.trace_scroll = v.trace_scroll.saturating_add(1),
            Action::TraceUp => v.trace_scroll = v.trace_scroll.saturating_sub(1),
            Action::Down if in_requests => v.selected = (v.selected + 1).min(rows.saturating_sub(1)),
            Action::Up if in_requests => v.selected = v.selected.saturating_sub(1),
            Action::Top if in_requests => v.selected = 0,
            Action::Bottom if in_requests => v.selected = rows.saturating_sub(1),
            Action::PageDown if in_requests => v.selected = (v.selected + page).min(rows.saturating_sub(1)),
            Action::PageUp if in_requests => v.selected = v.selected.saturating_sub(page),
            // Events: `scroll` is the selected row of the list shown.
            Action::Down => v.scroll = (v.scroll + 1).min(event_rows.saturating_sub(1)),
            Action::Up => v.scroll = v.scroll.saturating_sub(1),
            Action::PageDown => v.scroll = (v.scroll + page).min(event_rows.saturating_sub(1)),
            Action::PageUp => v.scroll = v.scroll.saturating_sub(page),
            Action::Top => v.scroll = 0,
            Action::Bottom => v.scroll = event_rows.saturating_sub(1),
            // `/` filters the list it is typed in; a view with no list
            // of its own searches the requests.
            Action::Search => {
                if !(in_instances || in_events || in_requests) {
                    v.view = View::Requests;
                }
                v.search.clear();
                v.searching = true;
            }
            Action::Open if in_events => {
                // The request the event names, opened in Requests.
                let state = v.frozen.as_deref().unwrap_or(&self.state);
                let shown = ui::events::shown(state, &v.search);
                if let Some(id) = shown.get(v.scroll).and_then(|e| ui::events::request_of(state, e)) {
                    v.view = View::Requests;
                    v.search = id;
                    v.selected = 0;
                    v.detail = true;
                }
            }
            Action::Open => {
                if in_requests {
                    v.detail = !v.detail;
                }
            }
            // Follow only: the trace pane stays open on the same request
            // when following stops (it used to close with the follow).
            Action::Follow => {
                let state = v.frozen.as_deref().unwrap_or(&self.state);
                if let Some(serial) = v.followed.take() {
                    if let Some(row) = ui::requests::visible(state, v).iter().position(|t| t.serial == serial)
                    {
                        v.selected = row;
                    }
                    v.detail = true;
                } else if in_requests {
                    v.followed = ui::requests::visible(state, v).get(v.selected).map(|t| t.serial);
                    v.detail |= v.followed.is_some();
                }
            }
            Action::Freeze => {
                v.frozen = match v.frozen {
                    Some(_) => None,
                    None => Some(Box::new(self.state.clone())),
                };
            }
            Action::CycleTheme => {
                self.theme = self.theme.next(crate::theme::user_theme_dir().as_deref());
                v.said = Some(format!("theme: {}", self.theme.name));
            }
            Action::ToggleWindow => {
                v.window = match v.window {
                    HistWindow::Sliding => HistWindow::SinceStart,
                    HistWindow::SinceStart => HistWindow::Sliding,
                };
            }
        }
    }

    pub fn draw(&self, frame: &mut Frame) {
        self.paint(frame.buffer_mut());
    }

    /// One frame, painted into `buf` (the whole of it).
    pub fn paint(&self, buf: &mut Buffer) {
        ui::render(buf, &self.state, &self.view, &self.theme);
    }
}

/// Terminal events, read on their own thread.
#[derive(Debug)]
pub enum Input {
    Key(KeyEvent),
    /// The terminal's new width and height.
    Resize(u16, u16),
    /// SIGTERM, SIGHUP or SIGINT from outside.
    Signal,
}

/// What a run of the loop did: the tests read it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunStats {
    pub frames: u64,
    pub messages: u64,
}

/// Runs until the user quits (or every source of input is gone), drawing
/// the state the feed builds.
pub async fn run<S: Surface>(
    terminal: &mut S,
    app: &mut App,
    mut feed: Feed,
    mut input: UnboundedReceiver<Input>,
) -> Result<RunStats, S::Error> {
    let mut stats = RunStats::default();
    // A recording plays in small steps so that time on screen flows.
    let mut play = tokio::time::interval(FRAME * 2);
    let mut last_play = Instant::now();
    // A key is drawn within a frame; new data at the feed's refresh, so an
    // idle watch draws about once a second, not once per message.
    let refresh = match &feed {
        Feed::Live(live) => live.refresh.max(FRAME),
        Feed::Recording(_) => FRAME,
    };
    let mut dirty = true;
    let mut last_draw = Instant::now() - refresh;
    // A live feed's clock ticks once a refresh, keys or not: ages on screen
    // move, the state's deadlines are judged, and the frame it makes draws
    // the data that came since. One wake-up for both.
    let mut next_tick = Instant::now() + refresh;
    while !app.quit {
        if let Feed::Live(live) = &mut feed
            && Instant::now() >= next_tick
        {
            if live.wake.is_some() && !take_queued(app, live, &mut stats) {
                break;
            }
            app.on_msg(Msg::Tick { at: live.clock.now() });
            live.tell_due(&app.state);
            next_tick = Instant::now() + refresh;
            dirty = true;
        }
        if dirty && last_draw.elapsed() >= FRAME {
            if let Feed::Live(LiveFeed { lab: Some(lab), .. }) = &feed {
                let (loop_no, _) = lab.clock.now();
                app.view.demo = Some(DemoInfo {
                    capture: lab.capture.clone(),
                    speed: lab.speed,
                    loop_no,
                    progress: lab.clock.progress(),
                });
            }
            terminal.frame(&|buf| app.paint(buf))?;
            stats.frames += 1;
            last_draw = Instant::now();
            dirty = false;
        }
        let next_frame = last_draw + FRAME;
        match &mut feed {
            Feed::Live(live) => tokio::select! {
                biased;
                ev = input.recv() => dirty |= on_input(terminal, app, ev, None)?,
                _ = crate::sources::Wake::woken(live.wake.as_ref()) => {
                    let alerts = app.state.alerts.rev;
                    if !take_queued(app, live, &mut stats) {
                        break;
                    }
                    live.tell_due(&app.state);
                    dirty |= app.state.alerts.rev != alerts;
                }
                msg = live.rx.recv(), if live.wake.is_none() => {
                    let Some(msg) = msg else { break };
                    let alerts = app.state.alerts.rev;
                    app.on_msg(msg);
                    stats.messages += 1;
                    for _ in 0..DRAIN_BATCH {
                        match live.rx.try_recv() {
                            Ok(m) => {
                                app.on_msg(m);
                                stats.messages += 1;
                            }
                            Err(_) => break,
                        }
                    }
                    // A new alert is drawn at once, not at the next refresh.
                    dirty |= app.state.alerts.rev != alerts;
                }
                _ = tokio::time::sleep_until(if dirty { next_frame.min(next_tick) } else { next_tick }) => {}
            },
            Feed::Recording(player) => tokio::select! {
                biased;
                ev = input.recv() => dirty |= on_input(terminal, app, ev, Some(player.as_mut()))?,
                _ = play.tick() => {
                    let dt = last_play.elapsed().as_secs_f64();
                    last_play = Instant::now();
                    player.advance(dt, &mut app.state);
                    app.view.badge = Some(player.badge());
                    dirty = true;
                }
                _ = tokio::time::sleep_until(next_frame), if dirty => {}
            },
        }
    }
    Ok(stats)
}

/// Applies what the feed queued, in the order sent, a batch at a time (a
/// key is served between batches); false once every source is gone and
/// nothing is left.
fn take_queued(app: &mut App, live: &mut LiveFeed, stats: &mut RunStats) -> bool {
    use tokio::sync::mpsc::error::TryRecvError;
    for _ in 0..DRAIN_BATCH {
        match live.rx.try_recv() {
            Ok(m) => {
                app.on_msg(m);
                stats.messages += 1;
            }
            Err(TryRecvError::Empty) => return true,
            Err(TryRecvError::Disconnected) => return false,
        }
    }
    // More than a batch: the rest at the next turn, after any key.
    if let Some(w) = &live.wake {
        w.now();
    }
    true
}

/// A terminal event, a resize taken by the terminal first: the screen's
/// viewport is fixed (asking the terminal its size before every frame
/// cost three system calls a second) and follows the resize events.
fn on_input<S: Surface>(
    terminal: &mut S,
    app: &mut App,
    ev: Option<Input>,
    player: Option<&mut Player>,
) -> Result<bool, S::Error> {
    if let Some(Input::Resize(w, h)) = ev {
        terminal.resize(w, h)?;
    }
    Ok(app.on_input(ev, player))
}

impl App {
    /// A terminal event; `None` (every input gone) and signals quit.
    fn on_input(&mut self, ev: Option<Input>, player: Option<&mut Player>) -> bool {
        match ev {
            Some(Input::Key(k)) => self.on_key_with(&k, player),
            Some(Input::Resize(..)) => true,
            Some(Input::Signal) | None => {
                self.quit = true;
                false
            }
        }
    }
}
