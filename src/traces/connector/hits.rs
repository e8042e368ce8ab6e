//! Attributing ExampleConnector's id-less `External Cache Hit!` lines.
//!
//! The decode engine prints `External Cache Hit!` when its scheduler finds
//! stored KV for a request it is scheduling, then `Inject KV cache of N
//! tokens` when the worker loads it; a miss prints nothing. Neither line
//! names the request. What makes them attributable:
//!
//! - vLLM's waiting queue is first-come first-served, so hits come out in
//!   the order the requests were added (checked on both captures: taking
//!   hits and injects strictly in `Added` order gives every request of the
//!   3-way concurrent `steady` phase its own token count, 52 of 52);
//! - scheduling follows `Added` within milliseconds unless the engine is
//!   queueing, so a request with no hit after a short settle time missed.
//!
//! - the hits of one scheduling step print back to back, and the worker's
//!   `Inject` lines for that step follow them (one engine process, in
//!   order); so a request waiting when a step's first hit printed was
//!   scheduled in that step, hit or not, unless the engine is queueing:
//!   once the step's `Inject` lines come it can take no later hit.
//!
//! The one thing order cannot tell: the scheduler asks the connector
//! (`get_num_new_matched_tokens`) for each waiting request in turn and a
//! miss prints nothing, so with two requests waiting and one hit, "the
//! older hit, the younger missed" and "the older missed (a step earlier or
//! just before), the younger hit" print the same lines. FIFO hands the hit
//! to the older only provisionally: every hit taken while younger requests
//! wait records the taker as their *rival*; a request that then goes
//! without a hit while it has rivals makes all of them unknown (one
//! missed, which is not known), until the sizes of the loads settle it
//! (`groups.rs`).

use std::collections::VecDeque;

use crate::traces::store::push_capped;

/// A decode request whose hit (or its absence) is still due.
#[derive(Debug, Clone)]
pub(crate) struct Waiting {
    pub serial: u64,
    /// Read time of its `Added` line.
    pub added_at: f64,
    /// Global `Added` order, so late joiners slot in where they belong.
    pub seq: u64,
    /// Older requests that took a hit while this one was waiting.
    pub rivals: Vec<u64>,
    /// Scheduled in a step that gave it no hit: it takes none later.
    pub closed: bool,
    /// No other request was added to this engine in the `QUIET_S` before
    /// it: no step loading another's KV or computing another's prompt
    /// delays its scheduling, so its hit is due within `HitQueue::wait`.
    pub quiet: bool,
    /// Called a miss early (likely): it still waits, as any request does,
    /// until `settle_s`; a hit before then is its own.
    pub called: bool,
}

/// What the passing of time did to a hit queue.
#[derive(Debug, Default)]
pub(crate) struct Expired {
    /// Waited their whole wait without a hit.
    pub gone: Vec<Waiting>,
    /// Quiet requests past the engine's own lag: (serial, `Added` time).
    pub early: Vec<(u64, f64)>,
}

/// A hit given to a request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Claim {
    pub serial: u64,
    /// Younger requests waiting when it was taken (each may turn out to be its owner).
    pub contested_by: usize,
    /// Older requests that took hits while this one waited.
    pub rivals: Vec<u64>,
    /// Claimed from a hit printed before this request's `Added` line.
    pub from_orphan: bool,
}

/// Requests scheduled together with fewer hits than members: one of them
/// (or more) did not load, and order alone cannot say which. Kept so that
/// prompt lengths arriving later can settle it (`groups.rs`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Group {
    pub members: Vec<u64>,
    /// `Inject KV cache of N tokens` of each hit the members took (None: not seen).
    pub hits: Vec<Option<u32>>,
    /// Counted in `unattributed_misses` until settled.
    pub counted: bool,
}

/// Most open groups kept per decode instance.
const MAX_GROUPS: usize = 256;

/// The least scheduling lag a live wait allows, however prompt the engine
/// has been: vLLM's engine takes a new request between two steps, and a
/// decode step of a large model takes up to a few hundred milliseconds.
pub(crate) const MIN_SCHED_S: f64 = 0.25;
/// A request's first step can be long: it loads the request's KV (the
/// ExampleConnector reads it from disk inside the step) or computes its
/// prompt. A request added within a second of another may wait for that
/// step (qwen3-shape-restart: steady-5 and -3 added at 06:26:17 while
/// steady-4's 288-token load ran; their hits printed at :18), so it waits
/// `settle_s`. A quiet one is called early, as likely, and sure at
/// `settle_s` (`decide/`).
const QUIET_S: f64 = 1.0;
/// Lags remembered: the wait follows the engine's recent behaviour.
const LAGS_KEPT: usize = 32;
/// A hit this long after a given-up request's `Added` line may be its late
/// hit; later it is another request's (the stamped wait, `settle_s`).
const LATE_HIT_S: f64 = 1.5;

#[derive(Debug, Clone, Default)]
pub(crate) struct HitQueue {
    /// Unsettled groups, oldest first.
    pub groups: VecDeque<Group>,
    waiting: VecDeque<Waiting>,
    /// Read times of hits that found nobody waiting.
    orphans: VecDeque<f64>,
    /// Requests that got a hit and await their `Inject KV cache` line.
    awaiting_inject: VecDeque<u64>,
    /// The scheduling step whose hits are printing: the requests waiting at
    /// its first hit, and its read time.
    step: Option<(Vec<u64>, f64)>,
    pub orphan_total: u64,
    pub hits_seen: u64,
    /// Read time from `Added` to its hit, of recent hits: how long this
    /// engine takes to schedule a new request.
    lags: VecDeque<f64>,
    /// `Added` read time of the request last given up on, so a hit that
    /// comes for it after all still teaches the wait.
    last_expired: Option<f64>,
    /// Read time of the latest `Added` line.
    last_added: Option<f64>,
}

impl HitQueue {
    /// A candidate request was added. Returns a claim when a fresh orphan
    /// hit was waiting for it (the engine's line beat the API server's),
    /// and any request pushed out by the cap.
    pub fn add(&mut self, mut w: Waiting, orphan_s: f64, cap: usize) -> (Option<Claim>, Option<Waiting>) {
        w.quiet = self.last_added.is_none_or(|t| w.added_at - t >= QUIET_S);
        self.last_added = Some(self.last_added.map_or(w.added_at, |t| t.max(w.added_at)));
        while self.orphans.front().is_some_and(|t| w.added_at - t > orphan_s) {
            self.orphans.pop_front();
        }
        if !self.waiting.iter().any(|x| !x.closed) && self.orphans.pop_front().is_some() {
            push_capped(&mut self.awaiting_inject, w.serial, cap);
            let claim = Claim { serial: w.serial, contested_by: 0, rivals: Vec::new(), from_orphan: true };
            return (Some(claim), None);
        }
        let pos = self.waiting.iter().position(|x| x.seq > w.seq).unwrap_or(self.waiting.len());
        self.waiting.insert(pos, w);
        let dropped = if self.waiting.len() > cap { self.waiting.pop_front() } else { None };
        (None, dropped)
    }

    /// An `External Cache Hit!` line: the oldest waiting request takes it.
    pub fn hit(&mut self, at: f64, cap: usize) -> Option<Claim> {
        self.hits_seen += 1;
        if self.step.is_none() {
            let members = self.waiting.iter().filter(|x| !x.closed).map(|x| x.serial).collect();
            self.step = Some((members, at));
        }
        // No request open for a hit: one its step passed over was scheduled
        // a step later after all (the engine got it just after that step began).
        let pos =
            self.waiting.iter().position(|x| !x.closed).or_else(|| (!self.waiting.is_empty()).then_some(0));
        let Some(w) = pos.and_then(|p| self.waiting.remove(p)) else {
            // Printed after the request it may belong to was given up on:
            // the engine schedules later than the wait allowed.
            if let Some(t) = self.last_expired.take()
                && at - t <= LATE_HIT_S
            {
                push_capped(&mut self.lags, at - t, LAGS_KEPT);
            }
            self.orphan_total += 1;
            push_capped(&mut self.orphans, at, cap);
            return None;
        };
        if !w.closed {
            push_capped(&mut self.lags, (at - w.added_at).max(0.0), LAGS_KEPT);
        }
        for younger in self.waiting.iter_mut().filter(|x| !x.closed) {
            younger.rivals.push(w.serial);
        }
        push_capped(&mut self.awaiting_inject, w.serial, cap);
        Some(Claim {
            serial: w.serial,
            contested_by: self.waiting.iter().filter(|x| !x.closed).count(),
            rivals: w.rivals,
            from_orphan: false,
        })
    }

    /// An `Inject KV cache of N tokens` line: the oldest hit without one.
    pub fn inject(&mut self) -> Option<u64> {
        self.awaiting_inject.pop_front()
    }

    /// The step's hits are over (its `Inject` lines print, or time passed):
    /// the requests it scheduled without a hit take none later, unless the
    /// engine is queueing (`busy`: they may not have been scheduled at all).
    pub fn end_step(&mut self, busy: bool) {
        let Some((members, _)) = self.step.take() else {
            return;
        };
        if busy {
            return;
        }
        for w in self.waiting.iter_mut().filter(|w| members.contains(&w.serial)) {
            w.closed = true;
        }
    }

    /// Read time of the step's first hit, if one is printing.
    pub fn step_started(&self) -> Option<f64> {
        self.step.as_ref().map(|(_, at)| *at)
    }

    /// How long a quiet request may go without its hit: `settle_s` for
    /// stamped lines; for read lines (`read_every_s`) the engine's longest
    /// recent lag, at least `MIN_SCHED_S`, plus two reads (a hit printed
    /// just after the file was read comes with the next read), at most
    /// `settle_s`.
    pub fn wait(&self, settle_s: f64, read_every_s: Option<f64>) -> f64 {
        let Some(read) = read_every_s else {
            return settle_s;
        };
        let lag = self.lags.iter().copied().fold(MIN_SCHED_S, f64::max);
        (lag + 2.0 * read).min(settle_s)
    }

    /// Requests whose hit is overdue (`force`: all of them) after
    /// `settle_s` by the log's own clock `own`; and the quiet ones waiting
    /// past `quick_s` by the reads' clock `now`, to be called a miss early
    /// (they go on waiting: `Waiting::called`).
    pub fn expire(&mut self, own: f64, now: f64, settle_s: f64, quick_s: f64, force: bool) -> Expired {
        let mut out = Expired::default();
        // Oldest first, so a verdict never overtakes an older request's.
        while let Some(w) = self.waiting.front() {
            if force || own - w.added_at >= settle_s {
                if let Some(w) = self.waiting.pop_front() {
                    if !w.closed {
                        self.last_expired = Some(w.added_at);
                    }
                    out.gone.push(w);
                }
            } else {
                break;
            }
        }
        for w in self.waiting.iter_mut() {
            if w.quiet && !w.closed && !w.called && now - w.added_at >= quick_s {
                w.called = true;
                out.early.push((w.serial, w.added_at));
            }
        }
        out
    }

    /// The soonest reads' time at which `expire` may have something to
    /// give: a quiet request's early call after `quick_s`, or the oldest
    /// one's whole `settle_s` (by its log's own clock, which is never
    /// ahead of the reads; when it lags, the wait is over a little later).
    pub fn due(&self, settle_s: f64, quick_s: f64) -> f64 {
        let oldest = self.waiting.front().map_or(f64::INFINITY, |w| w.added_at + settle_s);
        self.waiting
            .iter()
            .filter(|w| w.quiet && !w.closed && !w.called)
            .map(|w| w.added_at + quick_s)
            .fold(oldest, f64::min)
    }

    /// The engine restarted: nothing in flight will print anything now.
    pub fn reset(&mut self) -> Vec<Waiting> {
        self.orphans.clear();
        self.awaiting_inject.clear();
        self.step = None;
        self.waiting.drain(..).collect()
    }

    pub fn len(&self) -> usize {
        self.waiting.len() + self.orphans.len() + self.awaiting_inject.len() + self.groups.len()
    }

    pub fn add_group(&mut self, g: Group) {
        push_capped(&mut self.groups, g, MAX_GROUPS);
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    fn w(serial: u64, at: f64) -> Waiting {
        Waiting {
            serial,
            added_at: at,
            seq: serial,
            rivals: Vec::new(),
            closed: false,
            quiet: false,
            called: false,
        }
    }

    #[test]
    fn due_is_the_next_early_call_or_the_oldest_wait() {
        let mut q = HitQueue::default();
        assert_eq!(q.due(1.5, 0.75), f64::INFINITY, "nothing waits");
        q.add(w(1, 10.0), 1.0, 10);
        // Quiet (first of its engine): called early at 10.75.
        assert_eq!(q.due(1.5, 0.75), 10.75);
        let e = q.expire(10.0, 10.75, 1.5, 0.75, false);
        assert_eq!(e.early, vec![(1, 10.0)]);
        // Called: next, its whole wait.
        assert_eq!(q.due(1.5, 0.75), 11.5);
        assert!(q.expire(11.5, 11.5, 1.5, 0.75, false).gone.len() == 1);
        assert_eq!(q.due(1.5, 0.75), f64::INFINITY);
    }

    #[test]
    fn fifo_with_rivals() {
        let mut q = HitQueue::default();
        assert_eq!(q.add(w(1, 0.0), 1.0, 10).0, None);
        assert_eq!(q.add(w(2, 0.0), 1.0, 10).0, None);
        let c = q.hit(0.1, 10).expect("claim");
        assert_eq!((c.serial, c.contested_by), (1, 1));
        assert_eq!(q.inject(), Some(1));
        // Request 2 gets nothing: it expires with request 1 as its rival.
        let gone = q.expire(2.0, 2.0, 1.5, 1.5, false).gone;
        assert_eq!(gone.len(), 1);
        assert_eq!((gone[0].serial, gone[0].rivals.clone()), (2, vec![1]));
    }

    #[test]
    fn orphan_then_added() {
        let mut q = HitQueue::default();
        assert_eq!(q.hit(5.0, 10), None);
        let (c, _) = q.add(w(3, 5.0), 1.0, 10);
        assert!(c.is_some_and(|c| c.from_orphan && c.serial == 3));
        // A stale orphan is not claimed.
        assert_eq!(q.hit(5.0, 10), None);
        assert_eq!(q.add(w(4, 9.0), 1.0, 10).0, None);
    }
}
