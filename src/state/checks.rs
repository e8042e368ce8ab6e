//! The state's side of two checks across instances: do the roles run the
//! same thing ([`super::mismatch`]), and did an instance come back clean
//! after a restart, an outage or a cancelled request ([`super::recovery`]).
//! Both turn what they find into events.

use crate::feed::{LogOrigin, Role};

use super::instance::Interval;

/// vLLM's stamps are whole seconds: a line printed up to a second after
/// what settled a finding may carry an earlier time.
const STAMP_S: f64 = 1.0;
/// How far past a finding's evidence the logs must be read before it is
/// said: a line stamped within `STAMP_S` of it, written a second late by
/// a buffered writer (as `traces::sweep` allows).
const LOG_CATCH_UP_S: f64 = STAMP_S + 1.0;
/// Logs that stop being read (a source failing) hold no finding longer.
const FINDING_HOLD_MAX_S: f64 = 30.0;
use super::recovery::{Finding, Trigger};
use super::{AppState, EventKind, mismatch};
use crate::logs::startup::normalize_version;
use crate::traces::InstanceNote;

impl AppState {
    /// The instance a log belongs to: the n-th of its role, as on the
    /// command line.
    pub(super) fn instance_of(&self, origin: LogOrigin) -> Option<usize> {
        let (role, n) = match origin {
            LogOrigin::Prefill(n) => (Role::Prefill, n),
            LogOrigin::Decode(n) => (Role::Decode, n),
            LogOrigin::Proxy => return None,
        };
        self.instances.iter().enumerate().filter(|(_, i)| i.endpoint.role == role).nth(n).map(|(k, _)| k)
    }

    /// Whether the instance's own log is tailed.
    pub(super) fn has_log(&self, idx: usize) -> bool {
        self.logs.as_ref().is_some_and(|l| l.sources.iter().any(|s| self.instance_of(s.source) == Some(idx)))
    }

    /// What the instances' logs said of themselves since the last lines
    /// (read once, by the correlator): start-up config and cancellations,
    /// each judged from the time its line was printed.
    pub(super) fn on_instance_notes(&mut self) {
        let Some(logs) = &mut self.logs else {
            return;
        };
        let notes = logs.correlator.drain_instance_notes();
        let mut changed = false;
        for (origin, at, note) in notes {
            let Some(idx) = self.instance_of(origin) else {
                continue;
            };
            match note {
                InstanceNote::Config(msg) => changed |= self.instances[idx].startup.on_line(&msg),
                InstanceNote::Cancelled(n) => {
                    let display = self.instances[idx].endpoint.display.clone();
                    let found = self.recovery.start_logged(idx, Trigger::Cancelled(n), at, &display);
                    self.push_findings(found);
                }
            }
        }
        if changed {
            self.refresh_mismatches();
        }
    }

    pub(super) fn on_version(&mut self, idx: usize, version: &str) {
        if let Some(inst) = self.instances.get_mut(idx) {
            inst.version = Some(normalize_version(version));
            self.refresh_mismatches();
        }
    }

    /// Recomputes the disagreements; a new one is an event.
    pub(super) fn refresh_mismatches(&mut self) {
        let found = mismatch::find(&self.instances);
        for m in &found {
            if !self.mismatches.iter().any(|old| old.key() == m.key()) {
                self.push_event(self.now, EventKind::Mismatch, m.why.clone());
            }
        }
        self.mismatches = found;
    }

    /// The mismatch that most likely explains silent misses, if any.
    pub fn miss_cause(&self) -> Option<String> {
        mismatch::likely_miss_cause(&self.mismatches)
    }

    /// After a good scrape: restarts and cancellations start a watch, and
    /// the interval may answer an open one.
    pub(super) fn check_recovery(&mut self, idx: usize, iv: &Interval, has_log: bool) {
        use crate::metrics::model::Counter;
        let Some(inst) = self.instances.get(idx) else {
            return;
        };
        let (role, display) = (inst.endpoint.role, inst.endpoint.display.clone());
        if iv.after_restart {
            self.recovery.start(idx, Trigger::Restart, iv.t - iv.dt);
            if role == Role::Decode {
                self.watch_producers(&display, iv.t);
            }
        }
        // Where the instance's log is tailed, its `Aborted` lines say it.
        let aborted = iv.counter(Counter::RequestsAborted).round() as u64;
        if aborted > 0 && !has_log {
            self.recovery.start(idx, Trigger::Cancelled(aborted), iv.t);
        }
        let found = self.recovery.on_interval(idx, iv, &display);
        self.push_findings(found);
    }

    /// An instance just went down.
    pub(super) fn recovery_on_down(&mut self, idx: usize, at: f64) {
        let Some(inst) = self.instances.get(idx) else {
            return;
        };
        let (role, display) = (inst.endpoint.role, inst.endpoint.display.clone());
        let found = self.recovery.on_down(idx, at, &display);
        self.push_findings(found);
        if role == Role::Decode {
            self.watch_producers(&display, at);
        }
    }

    /// A producer may keep KV for a consumer that left.
    fn watch_producers(&mut self, decode: &str, at: f64) {
        let prefills: Vec<usize> =
            (0..self.instances.len()).filter(|&k| self.instances[k].endpoint.role == Role::Prefill).collect();
        for k in prefills {
            self.recovery.start(k, Trigger::PeerLeft(decode.to_string()), at);
        }
    }

    /// The end of a `check`: open watches say what they know, and every
    /// finding held is said.
    pub(super) fn finish_recovery(&mut self) {
        self.on_instance_notes();
        let up: Vec<bool> = self.instances.iter().map(|i| i.health.up).collect();
        let names: Vec<String> = self.instances.iter().map(|i| i.endpoint.display.clone()).collect();
        let found = self.recovery.finish(
            self.now,
            |k| up.get(k).copied().unwrap_or(false),
            |k| names.get(k).cloned().unwrap_or_default(),
        );
        self.recovery.hold(found);
        self.say_findings(f64::INFINITY);
    }

    /// A failed next request whose failure the instance's own log named
    /// since the watch began, up to a second after what settled it (the
    /// stamps are whole seconds): the finding says that failure, so that
    /// the trigger (a cancel, a restart) does not read as its cause.
    fn with_named_failure(&self, text: String, idx: usize, since: f64, at: f64) -> String {
        let Some(logs) = &self.logs else {
            return text;
        };
        let origins: Vec<String> = logs
            .sources
            .iter()
            .filter(|s| self.instance_of(s.source) == Some(idx))
            .map(|s| format!("{}: ", s.source))
            .collect();
        let named = self.events.iter().rev().find(|e| {
            matches!(e.kind, EventKind::Log(k) if k.is_failure())
                && e.t >= since - 1.0
                && e.t <= at + STAMP_S
                && origins.iter().any(|o| e.text.starts_with(o.as_str()))
        });
        match named {
            Some(e) => format!("{text}; its log names the failure: {}", e.text),
            None => text,
        }
    }

    /// Findings wait until the logs are read past them, so that what they
    /// say (a cancel behind them, the failure the log names) is the same
    /// however far behind the logs were read.
    fn push_findings(&mut self, found: Vec<Finding>) {
        self.recovery.hold(found);
        self.say_held_findings();
    }

    /// Says the findings the logs have been read past (all, without logs);
    /// logs that stall hold them `FINDING_HOLD_MAX_S` at most. Called after
    /// the log's events are in: a finding may name a failure among them.
    pub(super) fn say_held_findings(&mut self) {
        let upto = match &self.logs {
            None => f64::INFINITY,
            Some(logs) => (logs.read_up_to(self.now) - LOG_CATCH_UP_S).max(self.now - FINDING_HOLD_MAX_S),
        };
        self.say_findings(upto);
    }

    fn say_findings(&mut self, upto: f64) {
        for f in self.recovery.release(upto) {
            let at = f.at();
            let (kind, text) = match f {
                Finding::Next { ok: true, text, .. } | Finding::KvReleased { text, .. } => {
                    (EventKind::Recovered, text)
                }
                Finding::Next { ok: false, text, instance, since, at } => {
                    (EventKind::NotRecovered, self.with_named_failure(text, instance, since, at))
                }
                Finding::KvNotReleased { text, .. } => (EventKind::KvNotReleased, text),
                Finding::Unknown { text, .. } => (EventKind::RecoveryUnknown, text),
            };
            self.push_event(at, kind, text);
        }
    }
}
