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

use super::{AppState, EventKind};
use crate::logs::signal::SignalKind;
use crate::traces::Outcome;

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
    deaths: Vec<(String, f64)>,
    /// Requests decided as errors so far (the traces' or the metrics').
    errors_counted: u64,
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

    fn get(&self, kind: AlertKind) -> Option<&(u64, f64, String)> {
        self.seen.get(&kind)
    }
}

impl AppState {
    /// What alerts now, most severe first. `wire` is the wrong-wire
    /// warning (`report::kv::wire_warning_of`: the link report reads the
    /// state, so it is handed in).
    pub fn alerts(&self, wire: Option<String>) -> Vec<Alert> {
        let mut out = Vec::new();
        for kind in [AlertKind::EngineDead, AlertKind::Errors, AlertKind::SilentMiss] {
            let Some((count, last, text)) = self.alerts.get(kind) else {
                continue;
            };
            let fresh = self.now - last <= ALERT_SECS;
            let down = kind == AlertKind::EngineDead && self.a_dead_engine_is_down();
            // Misses: as many as the Requests panel counts now (a verdict
            // may still change after its event).
            let count = if kind == AlertKind::SilentMiss { self.misses_seen() } else { *count };
            if fresh || down {
                out.push(Alert { kind, count, last: Some(*last), text: text.clone() });
            }
        }
        // An outage no death explains ranks with the deaths.
        if !out.iter().any(|a| a.kind == AlertKind::EngineDead) {
            let at = out.iter().position(|a| a.kind > AlertKind::Down).unwrap_or(out.len());
            if let Some(d) = self.down_alert() {
                out.insert(at, d);
            }
        }
        if let Some(w) = wire {
            out.push(Alert { kind: AlertKind::WrongWire, count: 1, last: None, text: w });
        }
        if let Some(first) = self.mismatches.first() {
            let since = self.alerts.get(AlertKind::ConfigDiffers).map(|(_, t, _)| *t);
            let text = match self.miss_cause() {
                Some(cause) if self.misses_seen() > 0 => cause,
                _ => first.why.clone(),
            };
            let count = self.mismatches.len() as u64;
            out.push(Alert { kind: AlertKind::ConfigDiffers, count, last: since, text });
        }
        if let Some(first) = self.config_problems.first() {
            let (count, text) = (self.config_problems.len() as u64, first.clone());
            out.push(Alert { kind: AlertKind::ConfigProblem, count, last: None, text });
        }
        debug_assert!(out.windows(2).all(|w| w[0].kind < w[1].kind));
        out
    }

    /// Requests decided as errors since the last look: one event for them,
    /// naming the newest (the traces), or their count (metrics alone).
    pub(super) fn collect_request_errors(&mut self) {
        let traced = self.logs.as_ref().filter(|l| l.has_decode_log());
        let total = match traced {
            Some(l) => l.correlator.counts().error,
            None => self.misses.outcomes.error,
        };
        let before = std::mem::replace(&mut self.alerts.errors_counted, total);
        if total <= before {
            return;
        }
        let n = total - before;
        let newest = traced.and_then(|l| {
            let t = l.correlator.traces().rev().find(|t| t.outcome == Outcome::Error)?;
            Some(format!("{}: {}", t.id, t.evidence()))
        });
        let text = match newest {
            Some(t) => format!("{n} request(s) failed; the newest {t}"),
            None => format!("{n} decode request(s) ended in error (finished_reason=\"error\")"),
        };
        self.push_counted(self.now, EventKind::RequestErrors, text, n);
    }

    /// Findings of one instance's configuration (`pdtop doctor`, #21):
    /// each is a config-problem alert while it is set.
    pub fn set_config_problems(&mut self, findings: Vec<String>) {
        if findings != self.config_problems {
            self.alerts.rev += 1;
        }
        self.config_problems = findings;
    }

    /// Silent misses counted so far: by the traces where a decode log is
    /// tailed, else by metrics.
    fn misses_seen(&self) -> u64 {
        match self.logs.as_ref().filter(|l| l.has_decode_log()) {
            Some(l) => l.correlator.counts().silent_miss,
            None => self.misses.outcomes.silent_miss,
        }
    }

    /// Instances that answered before and now answer no scrape, where no
    /// log told of a death (the death's own row says it then): the oldest
    /// outage named, with what the scrape got.
    fn down_alert(&self) -> Option<Alert> {
        let down: Vec<_> = self
            .instances
            .iter()
            .filter(|i| !i.health.up && i.health.scrapes_failed > 0 && i.health.last_ok.is_some())
            .collect();
        let first = down
            .iter()
            .min_by(|a, b| a.health.last_ok.unwrap_or(0.0).total_cmp(&b.health.last_ok.unwrap_or(0.0)))?;
        let h = &first.health;
        let err = h.last_error.as_deref().unwrap_or("no answer");
        let text = format!(
            "{} {} has answered no scrape since ({err}; {} failed): its requests fail until it is back",
            first.endpoint.role.name(),
            first.endpoint.display,
            h.consecutive_failures
        );
        Some(Alert { kind: AlertKind::Down, count: down.len() as u64, last: h.last_ok, text })
    }

    /// An instance whose log told of its engine's death is down (its
    /// scrapes fail) and was not seen up again after the death's own
    /// alert time (the API server may answer a scrape or two while dying).
    fn a_dead_engine_is_down(&self) -> bool {
        let Some(logs) = &self.logs else {
            return false;
        };
        self.alerts.deaths.iter().any(|(origin, t)| {
            let idx = logs
                .sources
                .iter()
                .find(|s| s.source.to_string() == *origin)
                .and_then(|s| self.instance_of(s.source));
            idx.and_then(|i| self.instances.get(i)).is_some_and(|inst| {
                let h = &inst.health;
                !h.up && h.scrapes_failed > 0 && h.last_ok.is_none_or(|ok| ok <= *t + ALERT_SECS)
            })
        })
    }
}
