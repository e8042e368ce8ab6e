//! What alerts now, read from the state (`alerts.rs` holds the kinds and
//! their log).

use super::alerts::*;
use super::{AppState, EventKind};
use crate::traces::Outcome;

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
        // Every outage of what is down now, not just how many are down.
        let count = down.iter().map(|i| u64::from(i.health.outages.max(1))).sum();
        Some(Alert { kind: AlertKind::Down, count, last: h.last_ok, text })
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

/// How far back the metrics and the traces are held to each other: a miss
/// one of them did not see long ago (metrics pair a decode with a prefill
/// by timing alone) is history, not a disagreement now.
pub const CROSS_CHECK_SECS: f64 = 300.0;
/// How long both sides take to call a miss (the metrics' hold, a scrape).
const CROSS_CHECK_SETTLE_SECS: f64 = 15.0;
/// How much later than the line a scrape can show the same miss.
const SCRAPE_LAG_SECS: f64 = 3.0;

/// The metrics' silent misses against the traces', since pdtop started and
/// over the last [`CROSS_CHECK_SECS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrossCheck {
    pub metrics: u64,
    pub traces: u64,
    pub recent_metrics: u64,
    pub recent_traces: u64,
    /// Requests the metrics left unknown over the same window: each may be
    /// one of the traces' misses.
    pub recent_unknown: u64,
}

impl CrossCheck {
    /// They disagree now: over the recent window, not only long ago.
    pub fn disagree_now(&self) -> bool {
        let open = self.recent_metrics..=self.recent_metrics + self.recent_unknown;
        !open.contains(&self.recent_traces)
    }
}

impl AppState {
    /// The cross-check of the two miss detectors, where logs are read.
    pub fn cross_check(&self) -> Option<CrossCheck> {
        let logs = self.logs.as_ref().filter(|l| l.has_decode_log())?;
        let c = &logs.correlator;
        let (to, from) = (self.now - CROSS_CHECK_SETTLE_SECS, self.now - CROSS_CHECK_SECS);
        let recent_traces = c
            .traces()
            .filter(|t| t.outcome == Outcome::SilentMiss && !c.before_start(t))
            .map(|t| t.phase(crate::traces::Hop::Consumer).map_or(t.first_seen, |p| p.start))
            .filter(|&at| from < at && at <= to)
            .count() as u64;
        // A scrape shows a miss up to a few seconds after its lines.
        let lag = |at: f64| from + SCRAPE_LAG_SECS < at && at <= to + SCRAPE_LAG_SECS;
        let recent_metrics = self.misses.events.iter().filter(|e| lag(e.t)).map(|e| e.count).sum();
        let recent_unknown = self.misses.unknown_at.iter().filter(|t| lag(**t)).count() as u64;
        Some(CrossCheck {
            metrics: self.misses.outcomes.silent_miss,
            traces: c.counts().silent_miss_since_start(),
            recent_metrics,
            recent_traces,
            recent_unknown,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::CrossCheck;

    /// A miss the traces name that the metrics left unknown is no
    /// disagreement; one the metrics count and the traces do not, or one
    /// more than the metrics' unknowns can hold, is.
    #[test]
    fn the_metrics_unknowns_cover_the_traces_misses_and_no_more() {
        let cc = |recent_metrics, recent_traces, recent_unknown| CrossCheck {
            metrics: 0,
            traces: 0,
            recent_metrics,
            recent_traces,
            recent_unknown,
        };
        assert!(!cc(3, 3, 0).disagree_now());
        assert!(!cc(3, 4, 1).disagree_now());
        assert!(cc(3, 5, 1).disagree_now());
        assert!(cc(4, 3, 5).disagree_now());
    }
}
