//! What the passing of time allows (`on_tick`, `finish`): hits overdue on
//! each decode's queue become facts, and every open trace is settled again
//! with the clock moved on.

use super::connector::hits::Waiting;
use super::correlator::{Correlator, Style};
use super::evidence::FactKind;
use super::model::{Join, Outcome};
use super::proxy::flow::{BYPASS_S, Copy, near};
use super::reason::Reason;
use crate::feed::LogOrigin;

/// How far behind the reads a decode's idle log is taken to be written.
const LATE_WRITE_S: f64 = 1.0;

impl Correlator {
    pub(super) fn sweep(&mut self, now: f64, force: bool) {
        let mut decodes: Vec<usize> = self.decodes.keys().copied().collect();
        decodes.sort_unstable();
        for i in decodes {
            // A decode's hit is overdue by its own log's clock: a later line
            // of it says none was printed before. Idle, the log is taken
            // as written a moment behind the reads (a process writes its
            // buffered lines late; `LATE_WRITE_S`). Early calls keep the
            // reads' clock: they are only likely, and a hit still counts.
            let src = LogOrigin::Decode(i);
            let seen = self.logs.read_to.get(&src).or(self.logs.last_stamp.get(&src)).copied();
            let own = seen.unwrap_or(f64::NEG_INFINITY).max(now - LATE_WRITE_S).min(now);
            let busy = self.decodes.get(&i).is_some_and(|d| d.busy(now));
            let settle = if busy { self.opts.settle_busy_s } else { self.opts.settle_s };
            // Early calls only where lines are read as they come (a live
            // tail): a log read after the fact waits for its own clock.
            let quick = match (busy, self.opts.read_every_s) {
                (true, _) => settle,
                (false, None) => f64::INFINITY,
                (false, Some(_)) => self.hit_wait(i),
            };
            if let Some(q) = self.decodes.get_mut(&i).map(|d| &mut d.hits)
                && q.step_started().is_some_and(|at| force || own - at >= self.opts.settle_s)
            {
                // A connector that prints no `Inject` line: the step ends with time.
                q.end_step(busy);
            }
            let expired = self
                .decodes
                .get_mut(&i)
                .map(|d| &mut d.hits)
                .map(|q| q.expire(own, now, settle, quick, force))
                .unwrap_or_default();
            // Called early, likely: each still waits for its hit until `settle_s`.
            if self.style(i) == Style::Hits {
                for (serial, added_at) in expired.early {
                    let kind = FactKind::NoHitYet { decode: i, waited: quick, added_at };
                    self.said(serial, now, LogOrigin::Decode(i), kind, now);
                }
            }
            for w in expired.gone {
                self.no_hit(i, w, now, busy, false, settle);
            }
        }
        self.settle_touched(force);
        self.joiner.prune(&self.store, now);
        let store = &self.store;
        // An error or a cancel is final: no later death changes it.
        self.inflight.prune(|s| {
            store.get(s).is_none_or(|e| matches!(e.trace.outcome, Outcome::Error | Outcome::Cancelled))
        });
        // The proxy's silence means nothing while its earlier lines are unread.
        if self.proxy_read() && !self.backlog_unread {
            let (store, win) = (&self.store, self.opts.order_window_s);
            let new = self.flow.check(now, |s, at| match store.get(s) {
                None => Copy::Accounted,
                Some(e) if e.track.proxy_seen => Copy::Accounted,
                Some(e) if e.trace.join == Join::ById && e.trace.decode.is_some() => Copy::Accounted,
                // A proxied copy reaches its decode within the order window.
                Some(e) => match e.track.decode_at {
                    Some(d) if e.trace.decode.is_some() => Copy::Due(d.max(at)),
                    _ => Copy::Due(at + win.max(BYPASS_S) - BYPASS_S),
                },
            });
            if !new.is_empty() {
                // The flow vouched for the order joins near them, and for the
                // requests it called no prefill (`NoPrefillByFlow`): no more.
                let joined: Vec<u64> = self
                    .store
                    .serials()
                    .filter(|&s| {
                        self.store.get(s).is_some_and(|e| {
                            let by_flow =
                                matches!(e.trace.reasons.first(), Some(Reason::NoPrefillByFlow { .. }));
                            (e.trace.join == Join::ByOrder || by_flow)
                                && e.side_span()
                                    .is_none_or(|span| new.iter().any(|&b| near(span, win, (b, b))))
                        })
                    })
                    .collect();
                for s in joined {
                    self.settle_by(s, now, force);
                }
            }
        }
        let open = std::mem::take(&mut self.open);
        for s in open {
            if let Some(e) = self.store.get_mut(s) {
                e.track.in_open = false;
            }
            if self.store.outcome(s) == Some(Outcome::Pending) {
                // Settling a pending trace lists it again while it stays so.
                self.settle_by(s, now, force);
            }
        }
        self.judge_waits(now, force);
        self.settle_touched(force);
    }

    /// The soonest reads' time at which `sweep` may decide something of a
    /// decode's hit queue (a request called early or given up, a step
    /// ended), by the same waits; `None`: nothing waits. The screen's log
    /// tailer reads then, so the call comes with the read that allows it.
    pub fn reads_due(&self, now: f64) -> Option<f64> {
        let mut due = f64::INFINITY;
        for (&i, d) in &self.decodes {
            let busy = d.busy(now);
            let settle = if busy { self.opts.settle_busy_s } else { self.opts.settle_s };
            let quick = match (busy, self.opts.read_every_s) {
                (true, _) => settle,
                (false, None) => f64::INFINITY,
                (false, Some(_)) => self.hit_wait(i),
            };
            due = due.min(d.hits.due(settle, quick));
            if let Some(at) = d.hits.step_started() {
                due = due.min(at + self.opts.settle_s);
            }
        }
        due.is_finite().then_some(due)
    }

    /// How long decode#`i`'s requests wait for their hit (`HitQueue::wait`).
    pub(super) fn hit_wait(&self, i: usize) -> f64 {
        let (settle, read) = (self.opts.settle_s, self.opts.read_every_s);
        self.decodes.get(&i).map_or(settle, |d| d.hits.wait(settle, read))
    }

    /// A queued request's hit never came (`capped`: pushed out of a full
    /// queue); `waited_s`: how long its hit was waited for.
    pub(super) fn no_hit(&mut self, i: usize, w: Waiting, now: f64, busy: bool, capped: bool, waited_s: f64) {
        let src = LogOrigin::Decode(i);
        let Some(e) = self.store.get_mut(w.serial) else {
            return;
        };
        e.track.in_hit_queue = false;
        if capped {
            self.said(w.serial, now, src, FactKind::HitQueueFull { decode: i }, now);
            return;
        }
        if !w.rivals.is_empty() {
            self.shared_step_unknown(i, w, now);
            return;
        }
        let kind = FactKind::NoHit { decode: i, waited: waited_s, busy, added_at: w.added_at };
        self.said(w.serial, now, src, kind, now);
    }

    /// The flow just became known: requests left unknown for want of it
    /// are decided again.
    pub(super) fn settle_orphans(&mut self, now: f64) {
        let orphans: Vec<u64> = self.flow.orphans.drain(..).collect();
        for s in orphans {
            self.settle(s, now);
        }
    }
}
