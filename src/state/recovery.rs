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
//! scrapes (seconds behind when the writer or pdtop is starved). Each
//! instance's recent scrapes are kept (`history`), so a trigger learnt late
//! is judged from its own time on, as if it had been read at once.

use std::collections::VecDeque;

use super::instance::Interval;

/// Usage at or below this, with nothing running, is idle (0.1%: vLLM
/// reports exactly 0 when no block is held).
pub const IDLE_KV: f64 = 0.001;
/// Held KV with nothing running for this long is not released (a scrape
/// may lag the engine's last step by a second or two).
pub const KV_HOLD_SECS: f64 = 10.0;
/// How far back a late trigger can be judged: a log this far behind its
/// scrapes is not followed, it is being caught up on.
const HISTORY_SECS: f64 = 300.0;
/// At most this many things seen kept, over all instances (a scrape a
/// second of 8 instances for 300 s is 2,400).
const HISTORY_CAP: usize = 8192;

/// What started a watch.
#[derive(Debug, Clone, PartialEq)]
pub enum Trigger {
    Restart,
    Outage,
    /// Requests cancelled by their client (`Aborted request(s)` or the
    /// abort counter).
    Cancelled(u64),
    /// A decode instance restarted or went down: only this prefill's KV
    /// is watched.
    PeerLeft(String),
}

impl Trigger {
    fn words(&self) -> String {
        match self {
            Trigger::Restart => "its restart".into(),
            Trigger::Outage => "its outage".into(),
            Trigger::Cancelled(1) => "a cancelled request".into(),
            Trigger::Cancelled(n) => format!("{n} cancelled requests"),
            Trigger::PeerLeft(ep) => format!("decode {ep} left"),
        }
    }

    /// Whether `self`, coming after `older`, takes over its watch: an
    /// instance's own trouble is not replaced by a peer's.
    fn replaces(&self, older: &Trigger) -> bool {
        !matches!(self, Trigger::PeerLeft(_)) || matches!(older, Trigger::PeerLeft(_))
    }
}

/// What a watch reads of one good scrape's interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slice {
    pub t: f64,
    pub dt: f64,
    /// Nothing ran, waited or finished.
    pub quiet: bool,
    pub kv_usage: Option<f64>,
    pub ok: u64,
    pub errored: u64,
}

impl Slice {
    pub fn of(iv: &Interval) -> Slice {
        use crate::metrics::model::Counter;
        let (ok, errored) = (iv.counter(Counter::RequestsOk), iv.counter(Counter::RequestsErrored));
        Slice {
            t: iv.t,
            dt: iv.dt,
            // A producer keeps a finished request's KV until the consumer
            // pulls it: an interval where one finished is not quiet.
            quiet: iv.running == Some(0.0) && iv.waiting == Some(0.0) && ok + errored == 0.0,
            kv_usage: iv.kv_usage,
            ok: ok.round() as u64,
            errored: errored.round() as u64,
        }
    }
}

/// What an instance was seen to do, in `history`.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Slice(Slice),
    Down,
    Start(Trigger),
}

#[derive(Debug, Clone, PartialEq)]
enum Kv {
    Unknown,
    /// Seen held with nothing running since then: (since, usage).
    HeldSince(f64, f64),
    /// Reported as not released.
    Held(f64),
    Idle(f64, f64),
}

#[derive(Debug, Clone, PartialEq)]
enum Next {
    Pending,
    Done,
    /// Peer watches ask nothing of requests.
    NotAsked,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Watch {
    pub instance: usize,
    pub trigger: Trigger,
    pub since: f64,
    kv: Kv,
    next: Next,
}

/// What a watch concluded, for an event; `at`: the time of the evidence
/// that settled it.
#[derive(Debug, Clone, PartialEq)]
pub enum Finding {
    /// The next request succeeded (`ok`) or not, with what is known of the KV.
    Next {
        instance: usize,
        ok: bool,
        /// When the watch began: a failure the instance's log names since
        /// then is what the finding must say, not the trigger.
        since: f64,
        at: f64,
        text: String,
    },
    KvNotReleased {
        instance: usize,
        at: f64,
        text: String,
    },
    /// Held KV that was let go later.
    KvReleased {
        instance: usize,
        at: f64,
        text: String,
    },
    /// The end came first (check): nothing to judge by.
    Unknown {
        instance: usize,
        at: f64,
        text: String,
    },
}

impl Finding {
    pub fn at(&self) -> f64 {
        match self {
            Finding::Next { at, .. }
            | Finding::KvNotReleased { at, .. }
            | Finding::KvReleased { at, .. }
            | Finding::Unknown { at, .. } => *at,
        }
    }
}

impl Watch {
    fn new(instance: usize, trigger: Trigger, since: f64) -> Watch {
        let next = if matches!(trigger, Trigger::PeerLeft(_)) { Next::NotAsked } else { Next::Pending };
        Watch { instance, trigger, since, kv: Kv::Unknown, next }
    }

    /// Whether it has nothing left to say: the next request is known and
    /// the KV was seen idle (held KV stays watched: its release is news).
    fn over(&self) -> bool {
        self.next != Next::Pending && matches!(self.kv, Kv::Idle(..))
    }

    /// One good scrape's interval, ending at or after the watch began.
    fn read(&mut self, s: &Slice, display: &str) -> Vec<Finding> {
        let (instance, mut out) = (self.instance, Vec::new());
        if let (true, Some(u)) = (s.quiet, s.kv_usage) {
            match self.kv {
                Kv::Unknown | Kv::HeldSince(..) if u <= IDLE_KV => self.kv = Kv::Idle(s.t, u),
                Kv::Held(since) if u <= IDLE_KV => {
                    self.kv = Kv::Idle(s.t, u);
                    out.push(Finding::KvReleased {
                        instance,
                        at: s.t,
                        text: format!(
                            "{display}: KV released {:.0} s after it was seen held (after {})",
                            s.t - since,
                            self.trigger.words()
                        ),
                    });
                }
                Kv::Unknown => self.kv = Kv::HeldSince(s.t, u),
                Kv::HeldSince(since, _) if s.t - since >= KV_HOLD_SECS => {
                    self.kv = Kv::Held(since);
                    out.push(Finding::KvNotReleased {
                        instance,
                        at: s.t,
                        text: format!(
                            "{display}: {:.1}% of KV still held {:.0} s after {} with no request running: blocks kept for requests that are gone",
                            u * 100.0,
                            s.t - self.since,
                            self.trigger.words()
                        ),
                    });
                }
                _ => {}
            }
        }
        // Only requests that began after the trigger's interval tell.
        if self.next == Next::Pending && s.t - s.dt >= self.since - 1e-9 && (s.ok > 0 || s.errored > 0) {
            self.next = Next::Done;
            let what = if s.ok > 0 {
                format!("the next request succeeded ({} finished)", s.ok)
            } else {
                format!("the next request failed ({} errored)", s.errored)
            };
            out.push(Finding::Next {
                instance,
                ok: s.ok > 0,
                since: self.since,
                at: s.t,
                text: format!("{display}: after {}, {what}; {}", self.trigger.words(), kv_words(&self.kv)),
            });
        }
        out
    }

    /// The instance went down at `at`: a next request still awaited did
    /// not succeed.
    fn down(&self, at: f64, display: &str) -> Option<Finding> {
        (self.next == Next::Pending && self.trigger != Trigger::Outage).then(|| Finding::Next {
            instance: self.instance,
            ok: false,
            since: self.since,
            at,
            text: format!(
                "{display}: after {}, it went down before any request succeeded; {}",
                self.trigger.words(),
                kv_words(&self.kv)
            ),
        })
    }
}

#[derive(Debug, Clone, Default)]
pub struct Recovery {
    pub watches: Vec<Watch>,
    /// (instance, when, what), oldest first, over the last `HISTORY_SECS`.
    history: VecDeque<(usize, f64, Seen)>,
    /// Findings not yet said, oldest evidence first: said once the logs
    /// have been read past them (`release`).
    held: Vec<Finding>,
}

impl Recovery {
    /// Starts watching `instance` from `at`, a trigger seen as it happened
    /// (a restart, an outage, an abort counter); a new trigger replaces an
    /// older one (a restart after a cancel is what the next request will
    /// show), and cancels add up.
    pub fn start(&mut self, instance: usize, trigger: Trigger, at: f64) {
        self.remember(instance, at, Seen::Start(trigger.clone()));
        self.take_over(Watch::new(instance, trigger, at));
    }

    /// A trigger a log names at `at`, learnt perhaps after later scrapes
    /// of `instance`: judged on what was seen since `at`, as if read then.
    /// A later trigger or outage took over from it, in time; what it came
    /// to before is returned.
    pub fn start_logged(
        &mut self,
        instance: usize,
        trigger: Trigger,
        at: f64,
        display: &str,
    ) -> Vec<Finding> {
        let later: Vec<(f64, Seen)> = self
            .history
            .iter()
            .filter(|(i, t, _)| *i == instance && *t > at)
            .map(|(_, t, s)| (*t, s.clone()))
            .collect();
        self.remember(instance, at, Seen::Start(trigger.clone()));
        let mut w = Watch::new(instance, trigger, at);
        let mut out = Vec::new();
        for (t, seen) in later {
            match seen {
                Seen::Slice(s) => out.extend(w.read(&s, display)),
                Seen::Down => {
                    out.extend(w.down(t, display));
                    return out;
                }
                Seen::Start(newer) if newer.replaces(&w.trigger) => {
                    // Cancels a second apart are one watch, as read in time.
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

    /// Keeps what was seen, in time order, over the last `HISTORY_SECS`.
    fn remember(&mut self, instance: usize, t: f64, seen: Seen) {
        if !t.is_finite() {
            return;
        }
        let at = self.history.partition_point(|(_, u, _)| *u <= t);
        self.history.insert(at, (instance, t, seen));
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

    /// A good scrape of `instance`: its KV with nothing running, and the
    /// requests that finished since the previous one.
    pub fn on_interval(&mut self, instance: usize, iv: &Interval, display: &str) -> Vec<Finding> {
        let s = Slice::of(iv);
        self.remember(instance, s.t, Seen::Slice(s));
        let mut out = Vec::new();
        for w in self.watches.iter_mut().filter(|w| w.instance == instance && s.t >= w.since) {
            out.extend(w.read(&s, display));
        }
        self.watches.retain(|w| !w.over());
        out
    }

    /// `instance` stopped answering: a pending next request did not
    /// succeed. Returns that, then the outage is watched in turn.
    pub fn on_down(&mut self, instance: usize, at: f64, display: &str) -> Vec<Finding> {
        self.remember(instance, at, Seen::Down);
        let out: Vec<Finding> =
            self.watching(instance).and_then(|w| w.down(at, display)).into_iter().collect();
        if !self.watching(instance).is_some_and(|w| w.trigger == Trigger::Outage) {
            self.take_over(Watch::new(instance, Trigger::Outage, at));
        }
        out
    }

    /// The end of a `check` at `at`: what is still open is said as it stands.
    pub fn finish(
        &mut self,
        at: f64,
        up: impl Fn(usize) -> bool,
        display: impl Fn(usize) -> String,
    ) -> Vec<Finding> {
        let mut out = Vec::new();
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

fn kv_words(kv: &Kv) -> String {
    match kv {
        Kv::Unknown => "KV not yet seen with nothing running".into(),
        Kv::Idle(_, u) => format!("KV back to idle ({:.1}% with nothing running)", u * 100.0),
        Kv::HeldSince(_, u) => format!("KV still at {:.1}% with nothing running", u * 100.0),
        Kv::Held(_) => "KV not released".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::model::Counter;

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
        assert!(r.on_interval(1, &iv(10.0, 0.0, 0.0, 0.0, 0.0), "d").is_empty());
        let found = r.on_interval(1, &iv(11.0, 1.0, 0.02, 1.0, 0.0), "d");
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
        assert!(r.on_interval(0, &iv(5.5, 0.0, 0.05, 3.0, 0.0), "p").is_empty());
        assert!(r.on_interval(0, &iv(10.0, 0.0, 0.05, 0.0, 0.0), "p").is_empty());
        assert!(r.on_interval(0, &iv(19.0, 0.0, 0.05, 0.0, 0.0), "p").is_empty());
        let found = r.on_interval(0, &iv(20.0, 0.0, 0.05, 0.0, 0.0), "p");
        let [Finding::KvNotReleased { text, .. }] = found.as_slice() else { panic!("{found:?}") };
        assert!(text.starts_with("p: 5.0% of KV still held 15 s after a cancelled request"), "{text}");
        // Busy scrapes judge nothing; the next request then fails.
        let found = r.on_interval(0, &iv(17.0, 2.0, 0.3, 0.0, 1.0), "p");
        assert!(matches!(found.as_slice(), [Finding::Next { ok: false, .. }]), "{found:?}");
        let found = r.on_interval(0, &iv(30.0, 0.0, 0.0, 0.0, 0.0), "p");
        assert!(matches!(found.as_slice(), [Finding::KvReleased { .. }]), "{found:?}");
        assert!(r.watches.is_empty());
    }

    #[test]
    fn going_down_first_is_not_a_recovery_and_the_outage_is_watched() {
        let mut r = Recovery::default();
        r.start(1, Trigger::Cancelled(2), 1.0);
        let found = r.on_down(1, 3.0, "d");
        let [Finding::Next { ok: false, text, .. }] = found.as_slice() else { panic!("{found:?}") };
        assert!(text.contains("after 2 cancelled requests, it went down"), "{text}");
        assert_eq!(r.watching(1).map(|w| &w.trigger), Some(&Trigger::Outage));
        // A producer's KV watch never replaces the instance's own watch.
        r.start(1, Trigger::PeerLeft("x".into()), 4.0);
        assert_eq!(r.watching(1).map(|w| &w.trigger), Some(&Trigger::Outage));
        let found = r.finish(5.0, |_| false, |_| "d".into());
        assert!(
            matches!(&found[..], [Finding::Next { ok: false, text, .. }] if text.ends_with("still down at the end"))
        );
    }

    #[test]
    fn no_request_by_the_end_is_unknown() {
        let mut r = Recovery::default();
        r.start(0, Trigger::Restart, 0.0);
        r.on_interval(0, &iv(1.0, 0.0, 0.0, 0.0, 0.0), "p");
        let found = r.finish(2.0, |_| true, |_| "p".into());
        assert!(
            matches!(&found[..], [Finding::Unknown { text, .. }] if text.contains("unknown; KV back to idle"))
        );
    }

    #[test]
    fn a_cancel_read_after_the_outage_it_preceded_is_judged_at_its_time() {
        // Read in time: the cancel, then the instance goes down.
        let mut r = Recovery::default();
        r.on_interval(1, &iv(1.0, 1.0, 0.1, 0.0, 0.0), "d");
        r.start(1, Trigger::Cancelled(2), 1.5);
        r.on_interval(1, &iv(2.0, 0.0, 0.0, 0.0, 0.0), "d");
        let in_time = r.on_down(1, 3.0, "d");
        // Read behind the scrapes: the down is seen first.
        let mut late = Recovery::default();
        late.on_interval(1, &iv(1.0, 1.0, 0.1, 0.0, 0.0), "d");
        late.on_interval(1, &iv(2.0, 0.0, 0.0, 0.0, 0.0), "d");
        assert!(late.on_down(1, 3.0, "d").is_empty());
        let found = late.start_logged(1, Trigger::Cancelled(2), 1.5, "d");
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
        r.on_interval(0, &iv(1.0, 0.0, 0.0, 3.0, 0.0), "p");
        r.on_interval(0, &iv(2.0, 0.0, 0.0, 0.0, 0.0), "p");
        r.on_interval(0, &iv(3.0, 1.0, 0.1, 1.0, 0.0), "p");
        // Cancelled at 1.5: the 3 finished by 1.0 are not its next request.
        let found = r.start_logged(0, Trigger::Cancelled(1), 1.5, "p");
        let [Finding::Next { ok: true, at, text, .. }] = found.as_slice() else { panic!("{found:?}") };
        assert_eq!(*at, 3.0);
        assert!(
            text.contains("after a cancelled request, the next request succeeded (1 finished)"),
            "{text}"
        );
        assert!(r.watches.is_empty());
        // A cancel before a restart: the restart is what is watched.
        r.start(0, Trigger::Restart, 4.0);
        assert!(r.start_logged(0, Trigger::Cancelled(1), 3.5, "p").is_empty());
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
}
