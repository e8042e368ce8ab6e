//! What deserves the loudness of a silent miss, in one place, most severe
//! first. The state decides what is alerting and for how long; the header
//! only draws [`AppState::alerts`], and the Events view marks the events of
//! an alerting kind with the same tag ([`AlertKind::tag`]).
//!
//! Severity, highest first (the order of [`AlertKind`]):
//! 1. an engine died, or an instance stopped answering (no death logged: a
//!    kill, a lost host): every request on it fails until it is back;
//! 2. errors at an instance, the connector or the router: requests fail now;
//! 3. silent misses: requests succeed but pay the whole prompt again;
//! 4. a wrong wire: the KV moves, slower than it could;
//! 5. the roles' configs differ: misses or errors are likely (or the cause
//!    of the misses above);
//! 6. a config problem of one instance (`pdtop doctor`'s findings).
//!
//! An alert made of events stays [`ALERT_SECS`] after its newest event (an
//! engine death also while its instance is down); a standing condition (a
//! wire, a disagreement, a finding) stays while it holds.

use std::collections::BTreeMap;

use super::EventKind;
use crate::logs::signal::SignalKind;

/// How long an alert made of events stays after the newest one: long
/// enough to be seen by someone who glanced away, short enough to clear
/// once healthy.
pub const ALERT_SECS: f64 = 30.0;

/// What alerts, in order of severity (the most severe first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum AlertKind {
    EngineDead,
    /// An instance answers no scrape and no death of it was logged.
    Down,
    Errors,
    SilentMiss,
    WrongWire,
    ConfigDiffers,
    /// One instance's configuration is wrong on its own: the findings of
    /// `pdtop doctor`, set with [`AppState::set_config_problems`].
    ConfigProblem,
}

impl AlertKind {
    /// The alert area's words.
    pub fn title(self) -> &'static str {
        match self {
            AlertKind::EngineDead => "ENGINE DEAD",
            AlertKind::Down => "DOWN",
            AlertKind::Errors => "ERRORS",
            AlertKind::SilentMiss => "SILENT MISS",
            AlertKind::WrongWire => "WRONG WIRE",
            AlertKind::ConfigDiffers => "CONFIG DIFFERS",
            AlertKind::ConfigProblem => "CONFIG PROBLEM",
        }
    }

    /// The Events view's tag for an event of this kind (7 columns).
    pub fn tag(self) -> &'static str {
        match self {
            AlertKind::EngineDead => "▲ DEAD ",
            AlertKind::Down => "▲ DOWN ",
            AlertKind::Errors => "▲ ERROR",
            AlertKind::SilentMiss => "▲ MISS ",
            AlertKind::WrongWire => "▲ WIRE ",
            AlertKind::ConfigDiffers => "▲ DIFF ",
            AlertKind::ConfigProblem => "▲ CONF ",
        }
    }

    /// The alert an event counts toward, if any.
    pub fn of_event(kind: EventKind) -> Option<AlertKind> {
        match kind {
            EventKind::Log(SignalKind::EngineDead) => Some(AlertKind::EngineDead),
            EventKind::SilentMiss => Some(AlertKind::SilentMiss),
            EventKind::Mismatch => Some(AlertKind::ConfigDiffers),
            EventKind::RouterError | EventKind::RequestErrors => Some(AlertKind::Errors),
            k if k.is_failure() => Some(AlertKind::Errors),
            _ => None,
        }
    }
}

/// One line of the alert area.
#[derive(Debug, Clone, PartialEq)]
pub struct Alert {
    pub kind: AlertKind,
    /// Occurrences since start (misses, errors, deaths, disagreements).
    pub count: u64,
    /// The newest occurrence (`None` for a condition with no time: a wire).
    pub last: Option<f64>,
    /// What the newest occurrence said.
    pub text: String,
}

/// The events of each alerting kind since start: count, newest, its text.
#[derive(Debug, Clone, Default)]
pub struct AlertLog {
    seen: BTreeMap<AlertKind, (u64, f64, String)>,
    /// Where each engine death was logged ("decode#0"), and when.
    pub(super) deaths: Vec<(String, f64)>,
    /// Requests decided as errors so far (the traces' or the metrics').
    pub(super) errors_counted: u64,
    /// Bumped by every event that alerts, so the screen shows it at once.
    pub rev: u64,
}

impl AlertLog {
    /// An event was pushed; `n` is how many occurrences it stands for (a
    /// metrics interval may hold several misses).
    pub fn on_event(&mut self, t: f64, kind: EventKind, text: &str, n: u64) {
        let Some(a) = AlertKind::of_event(kind) else {
            return;
        };
        self.rev += 1;
        let e = self.seen.entry(a).or_insert((0, t, String::new()));
        e.0 += n;
        if t >= e.1 || e.2.is_empty() {
            e.1 = t;
            e.2 = text.to_string();
        }
        if a == AlertKind::EngineDead {
            let origin = text.split(": ").next().unwrap_or("").to_string();
            self.deaths.push((origin, t));
        }
    }

    pub(super) fn get(&self, kind: AlertKind) -> Option<&(u64, f64, String)> {
        self.seen.get(&kind)
    }
}
