//! After a restart, an outage or a cancelled request: did the instance come
//! back clean? The two questions of the lesson's producer-restart,
//! consumer-restart and cancelled-request tests:
//!
//! - did its KV usage go back to idle: `kv_cache_usage_perc` about 0 in a
//!   quiet scrape, where no request runs, waits or just finished (blocks
//!   still held then belong to requests that are gone: a cancelled stream,
//!   a transfer that a dead consumer will never pull);
//! - did the next request succeed: the first requests that finish after it
//!   end well, or they error, or the instance goes down first.
//!
//! When a decode instance restarts or goes down, each prefill instance's
//! KV is watched too: a producer may hold KV for the consumer that left.
//!
//! A cancel is read from the instance's log, which is read behind its
//! scrapes. What the scrapes show is queued and judged once the logs have
//! been read past it (`advance`), so a cancel comes in its place; one read
//! later still (a writer or pdtop starved) is judged on the scrapes kept
//! since (`history`), as if it had been read at once.

use std::collections::VecDeque;

use super::instance::Interval;

mod watch;
pub use watch::{Finding, IDLE_KV, KV_HOLD_SECS, Slice, Trigger, Watch};
use watch::{Next, kv_words};

/// How far back a late trigger can be judged: a log this far behind its
/// scrapes is not followed, it is being caught up on.
const HISTORY_SECS: f64 = 300.0;
/// At most this many things seen kept, over all instances (a scrape a
/// second of 8 instances for 300 s is 2,400).
const HISTORY_CAP: usize = 8192;

/// What an instance was seen to do, in `history`.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Slice(Slice),
    Down,
    Start(Trigger),
}

#[derive(Debug, Clone, Default)]
pub struct Recovery {
    pub watches: Vec<Watch>,
    /// What the scrapes showed and the logs may not have caught up with:
    /// (instance, when, what), oldest first, judged by `advance`.
    queue: VecDeque<(usize, f64, Seen)>,
    /// What was judged, (instance, when, what), oldest first, over the
    /// last `HISTORY_SECS`: a cancel read later than `advance` went is
    /// judged on it.
    history: VecDeque<(usize, f64, Seen)>,
    /// Findings not yet said, oldest evidence first: said once the logs
    /// have been read past them (`release`).
    held: Vec<Finding>,
}

/// Inserts in time order (after what has the same time).
fn insert(list: &mut VecDeque<(usize, f64, Seen)>, entry: (usize, f64, Seen)) {
    let at = list.partition_point(|(_, u, _)| *u <= entry.1);
    list.insert(at, entry);
}

impl Recovery {
    /// A trigger seen in the scrapes at `at` (a restart, an outage's peer,
    /// an abort counter): judged in time order by `advance`.
    pub fn start(&mut self, instance: usize, trigger: Trigger, at: f64) {
        self.offer(instance, at, Seen::Start(trigger));
    }

    /// A good scrape of `instance`: its KV with nothing running, and the
    /// requests that finished since the previous one.
    pub fn on_interval(&mut self, instance: usize, iv: &Interval) {
        let s = Slice::of(iv);
        self.offer(instance, s.t, Seen::Slice(s));
    }

    /// `instance` stopped answering at `at`.
    pub fn on_down(&mut self, instance: usize, at: f64) {
        self.offer(instance, at, Seen::Down);
    }

    fn offer(&mut self, instance: usize, t: f64, seen: Seen) {
        if t.is_finite() {
            insert(&mut self.queue, (instance, t, seen));
        }
    }

    /// Whether `advance(upto)` has anything to judge.
    pub fn due(&self, upto: f64) -> bool {
        self.queue.front().is_some_and(|(_, t, _)| *t <= upto)
    }

    /// Judges what the scrapes showed up to `upto` (as far as the logs
    /// have been read: a cancel they name comes in its place), oldest
    /// first. `display` names an instance.
    pub fn advance(&mut self, upto: f64, display: &dyn Fn(usize) -> String) -> Vec<Finding> {
        let mut out = Vec::new();
        while self.queue.front().is_some_and(|(_, t, _)| *t <= upto) {
            let Some((instance, t, seen)) = self.queue.pop_front() else { break };
            out.extend(self.judge(instance, t, seen.clone(), &display(instance)));
            self.remember(instance, t, seen);
        }
        out
    }

    /// One thing seen, in its turn.
    fn judge(&mut self, instance: usize, t: f64, seen: Seen, display: &str) -> Vec<Finding> {
        match seen {
            Seen::Slice(s) => {
                let mut out = Vec::new();
                for w in self.watches.iter_mut().filter(|w| w.instance == instance && s.t >= w.since) {
                    out.extend(w.read(&s, display));
                }
                self.watches.retain(|w| !w.over());
                out
            }
            Seen::Down => {
                let out: Vec<Finding> =
                    self.watching(instance).and_then(|w| w.down(t, display)).into_iter().collect();
                // An outage already answered (a watch kept for its KV) is
                // over: this one is watched in turn.
                if !self
                    .watching(instance)
                    .is_some_and(|w| w.trigger == Trigger::Outage && w.next == Next::Pending)
                {
                    self.take_over(Watch::new(instance, Trigger::Outage, t));
                }
                out
            }
            Seen::Start(trigger) => {
                self.take_over(Watch::new(instance, trigger, t));
                Vec::new()
            }
        }
    }

    /// A trigger a log names at `at`, its line read now: what the scrapes
    /// showed before it is judged first. A line read after `advance` went
    /// past it (a log written or read seconds late) is judged on what was
    /// seen since, as if read then: a later trigger or outage took over
    /// from it, in time; what it came to before is returned. `settle`: how
    /// long after `at` it may have happened (a stamp's second), so only
    /// requests that began after that are its next.
    pub fn start_logged(
        &mut self,
        instance: usize,
        trigger: Trigger,
        at: f64,
        settle: f64,
        display: &dyn Fn(usize) -> String,
    ) -> Vec<Finding> {
        let mut out = self.advance(at, display);
        let name = display(instance);
        let later: Vec<(f64, Seen)> = self
            .history
            .iter()
            .filter(|(i, t, _)| *i == instance && *t > at)
            .map(|(_, t, s)| (*t, s.clone()))
            .collect();
        self.remember(instance, at, Seen::Start(trigger.clone()));
        let mut w = Watch::new(instance, trigger, at + settle);
        for (t, seen) in later {
            match seen {
                Seen::Slice(s) if s.t >= w.since => out.extend(w.read(&s, &name)),
                Seen::Slice(_) => {}
                Seen::Down => {
                    out.extend(w.down(t, &name));
                    return out;
                }
                Seen::Start(newer) if newer.replaces(&w.trigger) => {
                    // Cancels close together are one watch, as read in time.
                    if let (Trigger::Cancelled(n), Trigger::Cancelled(_)) = (&w.trigger, &newer)
                        && let Some(cur) = self.watches.iter_mut().find(|c| c.instance == instance)
                        && let Trigger::Cancelled(m) = &mut cur.trigger
                        && cur.next == Next::Pending
                    {
                        *m += n;
                    }
                    return out;
                }
                Seen::Start(_) => {}
            }
        }
        if !w.over() {
            self.take_over(w);
        }
        out
    }

    /// `w` replaces the instance's watch, if its trigger may.
    fn take_over(&mut self, mut w: Watch) {
        if let Some(old) = self.watches.iter().find(|o| o.instance == w.instance) {
            if !w.trigger.replaces(&old.trigger) {
                return;
            }
            if let (Trigger::Cancelled(n), Trigger::Cancelled(m), Next::Pending) =
                (&w.trigger, &old.trigger, &old.next)
            {
                w.trigger = Trigger::Cancelled(n + m);
            }
        }
        self.watches.retain(|o| o.instance != w.instance);
        self.watches.push(w);
    }

    /// Keeps what was judged, in time order, over the last `HISTORY_SECS`.
    fn remember(&mut self, instance: usize, t: f64, seen: Seen) {
        if !t.is_finite() {
            return;
        }
        insert(&mut self.history, (instance, t, seen));
        let newest = self.history.back().map_or(t, |(_, u, _)| *u);
        while self.history.front().is_some_and(|(_, u, _)| *u < newest - HISTORY_SECS)
            || self.history.len() > HISTORY_CAP
        {
            self.history.pop_front();
        }
    }

    /// Findings to say once the logs are read past them.
    pub fn hold(&mut self, found: Vec<Finding>) {
        for f in found {
            let at = self.held.partition_point(|h| h.at() <= f.at());
            self.held.insert(at, f);
        }
    }

    /// The held findings whose evidence is at or before `upto`, oldest first.
    pub fn release(&mut self, upto: f64) -> Vec<Finding> {
        let n = self.held.partition_point(|h| h.at() <= upto);
        self.held.drain(..n).collect()
    }

    pub fn watching(&self, instance: usize) -> Option<&Watch> {
        self.watches.iter().find(|w| w.instance == instance)
    }

    /// The end of a `check` at `at`: everything seen is judged, and what
    /// is still open is said as it stands.
    pub fn finish(
        &mut self,
        at: f64,
        up: impl Fn(usize) -> bool,
        display: &dyn Fn(usize) -> String,
    ) -> Vec<Finding> {
        let mut out = self.advance(f64::INFINITY, display);
        for w in self.watches.drain(..) {
            let ep = display(w.instance);
            let words = w.trigger.words();
            if w.next == Next::Pending && !up(w.instance) {
                out.push(Finding::Next {
                    instance: w.instance,
                    ok: false,
                    since: w.since,
                    at,
                    text: format!("{ep}: after {words}, still down at the end"),
                });
            } else if w.next == Next::Pending {
                out.push(Finding::Unknown {
                    instance: w.instance,
                    at,
                    text: format!(
                        "{ep}: no request finished after {words}, so whether it works again is unknown; {}",
                        kv_words(&w.kv)
                    ),
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::model::Counter;

    fn names(k: usize) -> String {
        if k == 0 { "p".into() } else { "d".into() }
    }

    /// A good scrape of `i`, judged at once (no log to wait for).
    fn feed(r: &mut Recovery, i: usize, iv: &Interval) -> Vec<Finding> {
        r.on_interval(i, iv);
        r.advance(f64::INFINITY, &names)
    }

    fn down(r: &mut Recovery, i: usize, at: f64) -> Vec<Finding> {
        r.on_down(i, at);
        r.advance(f64::INFINITY, &names)
    }

    /// A scrape interval ending at `t`: what ran, the KV, and what finished.
    fn iv(t: f64, running: f64, kv: f64, ok: f64, errored: f64) -> Interval {
        let mut iv = Interval { t, dt: 1.0, ..Default::default() };
        iv.running = Some(running);
        iv.waiting = Some(0.0);
        iv.kv_usage = Some(kv);
        iv.counters.insert(Counter::RequestsOk, ok);
        iv.counters.insert(Counter::RequestsErrored, errored);
        iv
    }

    #[test]
    fn back_to_idle_and_the_next_request_succeeds() {
        let mut r = Recovery::default();
        r.start(1, Trigger::Restart, 9.0);
        assert!(feed(&mut r, 1, &iv(10.0, 0.0, 0.0, 0.0, 0.0)).is_empty());
        let found = feed(&mut r, 1, &iv(11.0, 1.0, 0.02, 1.0, 0.0));
        let [Finding::Next { ok: true, text, .. }] = found.as_slice() else { panic!("{found:?}") };
        assert_eq!(
            text,
            "d: after its restart, the next request succeeded (1 finished); KV back to idle (0.0% with nothing running)"
        );
        assert!(r.watches.is_empty());
    }

    #[test]
    fn kv_held_with_nothing_running_is_not_released_until_it_drops() {
        let mut r = Recovery::default();
        r.start(0, Trigger::Cancelled(1), 5.0);
        // Requests that finished in the cancel's interval do not count, and
        // KV right after requests finished is not judged.
        assert!(feed(&mut r, 0, &iv(5.5, 0.0, 0.05, 3.0, 0.0)).is_empty());
        assert!(feed(&mut r, 0, &iv(10.0, 0.0, 0.05, 0.0, 0.0)).is_empty());
        assert!(feed(&mut r, 0, &iv(19.0, 0.0, 0.05, 0.0, 0.0)).is_empty());
        let found = feed(&mut r, 0, &iv(20.0, 0.0, 0.05, 0.0, 0.0));
        let [Finding::KvNotReleased { text, .. }] = found.as_slice() else { panic!("{found:?}") };
        assert!(text.starts_with("p: 5.0% of KV still held 15 s after a cancelled request"), "{text}");
        // Busy scrapes judge nothing; the next request then fails.
        let found = feed(&mut r, 0, &iv(17.0, 2.0, 0.3, 0.0, 1.0));
        assert!(matches!(found.as_slice(), [Finding::Next { ok: false, .. }]), "{found:?}");
        let found = feed(&mut r, 0, &iv(30.0, 0.0, 0.0, 0.0, 0.0));
        assert!(matches!(found.as_slice(), [Finding::KvReleased { .. }]), "{found:?}");
        assert!(r.watches.is_empty());
    }

    #[test]
    fn going_down_first_is_not_a_recovery_and_the_outage_is_watched() {
        let mut r = Recovery::default();
        r.start(1, Trigger::Cancelled(2), 1.0);
        let found = down(&mut r, 1, 3.0);
        let [Finding::Next { ok: false, text, .. }] = found.as_slice() else { panic!("{found:?}") };
        assert!(text.contains("after 2 cancelled requests, it went down"), "{text}");
        assert_eq!(r.watching(1).map(|w| &w.trigger), Some(&Trigger::Outage));
        // A producer's KV watch never replaces the instance's own watch.
        r.start(1, Trigger::PeerLeft("x".into()), 4.0);
        assert_eq!(r.watching(1).map(|w| &w.trigger), Some(&Trigger::Outage));
        let found = r.finish(5.0, |_| false, &names);
        assert!(
            matches!(&found[..], [Finding::Next { ok: false, text, .. }] if text.ends_with("still down at the end"))
        );
    }

    #[test]
    fn no_request_by_the_end_is_unknown() {
        let mut r = Recovery::default();
        r.start(0, Trigger::Restart, 0.0);
        feed(&mut r, 0, &iv(1.0, 0.0, 0.0, 0.0, 0.0));
        let found = r.finish(2.0, |_| true, &names);
        assert!(
            matches!(&found[..], [Finding::Unknown { text, .. }] if text.contains("unknown; KV back to idle"))
        );
    }

    #[test]
    fn a_cancel_read_after_the_outage_it_preceded_is_judged_at_its_time() {
        // Read in time: the cancel, then the instance goes down.
        let mut r = Recovery::default();
        feed(&mut r, 1, &iv(1.0, 1.0, 0.1, 0.0, 0.0));
        r.start(1, Trigger::Cancelled(2), 1.5);
        feed(&mut r, 1, &iv(2.0, 0.0, 0.0, 0.0, 0.0));
        let in_time = down(&mut r, 1, 3.0);
        // Read behind the scrapes: the down is seen first.
        let mut late = Recovery::default();
        feed(&mut late, 1, &iv(1.0, 1.0, 0.1, 0.0, 0.0));
        feed(&mut late, 1, &iv(2.0, 0.0, 0.0, 0.0, 0.0));
        assert!(down(&mut late, 1, 3.0).is_empty());
        let found = late.start_logged(1, Trigger::Cancelled(2), 1.5, 0.0, &names);
        assert_eq!(found, in_time);
        let [Finding::Next { ok: false, at, text, .. }] = found.as_slice() else { panic!("{found:?}") };
        assert_eq!(*at, 3.0);
        assert_eq!(
            text,
            "d: after 2 cancelled requests, it went down before any request succeeded; KV back to idle (0.0% with nothing running)"
        );
        // The outage is still what is watched.
        assert_eq!(late.watching(1).map(|w| &w.trigger), Some(&Trigger::Outage));
    }

    #[test]
    fn a_late_cancel_counts_only_requests_after_it_and_a_later_restart_takes_over() {
        let mut r = Recovery::default();
        feed(&mut r, 0, &iv(1.0, 0.0, 0.0, 3.0, 0.0));
        feed(&mut r, 0, &iv(2.0, 0.0, 0.0, 0.0, 0.0));
        feed(&mut r, 0, &iv(3.0, 1.0, 0.1, 1.0, 0.0));
        // Cancelled at 1.5: the 3 finished by 1.0 are not its next request.
        let found = r.start_logged(0, Trigger::Cancelled(1), 1.5, 0.0, &names);
        let [Finding::Next { ok: true, at, text, .. }] = found.as_slice() else { panic!("{found:?}") };
        assert_eq!(*at, 3.0);
        assert!(
            text.contains("after a cancelled request, the next request succeeded (1 finished)"),
            "{text}"
        );
        assert!(r.watches.is_empty());
        // A cancel before a restart: the restart is what is watched.
        r.start(0, Trigger::Restart, 4.0);
        assert!(r.start_logged(0, Trigger::Cancelled(1), 3.5, 0.0, &names).is_empty());
        assert!(r.advance(f64::INFINITY, &names).is_empty());
        assert_eq!(r.watching(0).map(|w| &w.trigger), Some(&Trigger::Restart));
    }

    #[test]
    fn findings_are_released_oldest_first_up_to_a_time() {
        let mut r = Recovery::default();
        let f = |at: f64| Finding::Unknown { instance: 0, at, text: format!("{at}") };
        r.hold(vec![f(3.0), f(1.0)]);
        r.hold(vec![f(2.0)]);
        assert_eq!(r.release(2.5), vec![f(1.0), f(2.0)]);
        assert_eq!(r.release(f64::INFINITY), vec![f(3.0)]);
    }

    #[test]
    fn a_cancel_in_the_second_its_stamp_names_counts_no_request_of_that_second() {
        // Stamped 10: it happened between 10 and 11, so the 2 that finished
        // by 10.5 may have finished before it; the outage at 11.2 comes first.
        let mut r = Recovery::default();
        r.on_interval(1, &iv(10.25, 1.0, 0.1, 0.0, 0.0));
        r.on_interval(1, &iv(10.5, 0.0, 0.0, 2.0, 0.0));
        r.on_down(1, 11.2);
        let found = r.start_logged(1, Trigger::Cancelled(1), 10.0, 1.0, &names);
        assert!(found.is_empty(), "{found:?}");
        let found = r.advance(f64::INFINITY, &names);
        let [Finding::Next { ok: false, text, .. }] = found.as_slice() else { panic!("{found:?}") };
        assert!(text.starts_with("d: after a cancelled request, it went down"), "{text}");
        // Two cancels of one second are one watch, whichever is read first.
        let mut r = Recovery::default();
        r.on_interval(1, &iv(10.5, 0.0, 0.0, 2.0, 0.0));
        r.start_logged(1, Trigger::Cancelled(1), 10.0, 1.0, &names);
        r.start_logged(1, Trigger::Cancelled(1), 10.0, 1.0, &names);
        assert!(r.advance(f64::INFINITY, &names).is_empty());
        assert_eq!(r.watching(1).map(|w| &w.trigger), Some(&Trigger::Cancelled(2)));
    }

    #[test]
    fn an_outage_after_one_it_came_back_from_is_watched_in_turn() {
        // A timed-out scrape, answered again; the KV never seen quiet, so
        // that watch is kept. Then the instance is killed for good.
        let mut r = Recovery::default();
        assert!(down(&mut r, 0, 1.0).is_empty());
        let found = feed(&mut r, 0, &iv(3.0, 1.0, 0.1, 2.0, 0.0));
        assert!(matches!(found.as_slice(), [Finding::Next { ok: true, .. }]), "{found:?}");
        assert!(down(&mut r, 0, 5.0).is_empty());
        let found = r.finish(9.0, |_| false, &names);
        let [Finding::Next { ok: false, text, .. }] = found.as_slice() else { panic!("{found:?}") };
        assert_eq!(text, "p: after its outage, still down at the end");
    }
}
