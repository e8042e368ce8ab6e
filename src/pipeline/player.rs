//! Plays a recording into the state at any speed, with pause and seek.
//! Seeking back rebuilds the state from the start: folding a recorded hour
//! through `AppState::apply` takes seconds, so there is no need to keep
//! snapshots.

use crate::feed::Msg;
use crate::record::Recording;
use crate::state::AppState;

fn speed_label(s: f64) -> String {
    if s.fract() == 0.0 { format!("{s:.0}") } else { format!("{s:.2}").trim_end_matches('0').to_string() }
}

/// The title bar's replay text: the capture's name where it fits, else
/// the position alone (80 columns).
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayBadge {
    pub long: String,
    pub short: String,
}

pub struct Player {
    messages: Vec<Msg>,
    initial: AppState,
    pos: usize,
    /// Recording time now.
    pub t: f64,
    pub t0: f64,
    pub t_end: f64,
    pub speed: f64,
    pub paused: bool,
    pub name: String,
    /// Decide what is still open once the end is reached, as a check
    /// does: set for logs read after the fact, which have ended.
    pub finish_at_end: bool,
    finished: bool,
}

impl Player {
    pub fn new(rec: Recording, initial: AppState, speed: f64, name: String) -> Player {
        let t0 = rec.messages.first().map_or(rec.session.started, Msg::at);
        let t_end = rec.messages.last().map_or(t0, Msg::at);
        Player {
            messages: rec.messages,
            initial,
            pos: 0,
            t: t0,
            t0,
            t_end,
            speed: if speed.is_finite() && speed > 0.0 { speed } else { 1.0 },
            paused: false,
            name,
            finish_at_end: false,
            finished: false,
        }
    }

    /// Moves recording time on by `real_dt` seconds at the current speed.
    pub fn advance(&mut self, real_dt: f64, state: &mut AppState) {
        if !self.paused {
            self.t = (self.t + real_dt * self.speed).min(self.t_end);
        }
        self.apply_until(state);
    }

    fn apply_until(&mut self, state: &mut AppState) {
        while let Some(m) = self.messages.get(self.pos) {
            if m.at() > self.t {
                break;
            }
            state.apply(m.clone());
            self.pos += 1;
        }
        state.apply(Msg::Tick { at: self.t });
        if self.finish_at_end && !self.finished && self.pos >= self.messages.len() && self.t >= self.t_end {
            state.finish(self.t_end);
            self.finished = true;
        }
    }

    /// Jumps by `delta` seconds of recording time (negative: back).
    pub fn seek(&mut self, delta: f64, state: &mut AppState) {
        let target = (self.t + delta).clamp(self.t0, self.t_end);
        if target < self.t {
            *state = self.initial.clone();
            self.pos = 0;
            self.finished = false;
        }
        self.t = target;
        self.apply_until(state);
    }

    pub fn faster(&mut self) {
        self.speed = (self.speed * 2.0).min(256.0);
    }

    pub fn slower(&mut self) {
        self.speed = (self.speed / 2.0).max(0.125);
    }

    /// For the title bar: where the replay is.
    pub fn badge(&self) -> ReplayBadge {
        let clock = |s: f64| format!("{}:{:02}", (s / 60.0).floor() as u64, (s % 60.0).floor() as u64);
        let short = format!(
            "{} {}/{} ×{} · ",
            if self.paused { "⏸" } else { "▶" },
            clock(self.t - self.t0),
            clock(self.t_end - self.t0),
            speed_label(self.speed)
        );
        ReplayBadge { long: format!("replay {} {short}", self.name), short }
    }

    /// Everything, at once: what `check --replay` reads.
    pub fn run_to_end(mut self, state: &mut AppState) -> f64 {
        self.t = self.t_end;
        self.apply_until(state);
        self.t_end
    }
}
