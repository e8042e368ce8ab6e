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

use super::instance::Interval;

/// Usage at or below this, with nothing running, is idle (0.1%: vLLM
/// reports exactly 0 when no block is held).
pub const IDLE_KV: f64 = 0.001;
/// Held KV with nothing running for this long is not released (a scrape
/// may lag the engine's last step by a second or two).
pub const KV_HOLD_SECS: f64 = 10.0;

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

/// What a watch concluded, for an event.
#[derive(Debug, Clone, PartialEq)]
pub enum Finding {
    /// The next request succeeded (`ok`) or not, with what is known of the KV.
    Next {
        instance: usize,
        ok: bool,
        /// When the watch began: a failure the instance's log names since
        /// then is what the finding must say, not the trigger.
        since: f64,
        text: String,
    },
    KvNotReleased {
        instance: usize,
        text: String,
    },
    /// Held KV that was let go later.
    KvReleased {
        instance: usize,
        text: String,
    },
    /// The end came first (check): nothing to judge by.
    Unknown {
        instance: usize,
        text: String,
    },
}

#[derive(Debug, Clone, Default)]
pub struct Recovery {
    pub watches: Vec<Watch>,
}

impl Recovery {
    /// Starts watching `instance`; a new trigger replaces an older one (a
    /// restart after a cancel is what the next request will show).
    pub fn start(&mut self, instance: usize, trigger: Trigger, at: f64) {
        let next = if matches!(trigger, Trigger::PeerLeft(_)) { Next::NotAsked } else { Next::Pending };
        let trigger = match (&trigger, self.watches.iter().find(|w| w.instance == instance)) {
            (
                Trigger::Cancelled(n),
                Some(Watch { trigger: Trigger::Cancelled(m), next: Next::Pending, .. }),
            ) => Trigger::Cancelled(n + m),
            // An instance's own trouble is not replaced by a peer's.
            (Trigger::PeerLeft(_), Some(w)) if !matches!(w.trigger, Trigger::PeerLeft(_)) => return,
            _ => trigger,
        };
        self.watches.retain(|w| w.instance != instance);
        self.watches.push(Watch { instance, trigger, since: at, kv: Kv::Unknown, next });
    }

    pub fn watching(&self, instance: usize) -> Option<&Watch> {
        self.watches.iter().find(|w| w.instance == instance)
    }

    /// A good scrape of `instance`: its KV with nothing running, and the
    /// requests that finished since the previous one.
    pub fn on_interval(&mut self, instance: usize, iv: &Interval, display: &str) -> Vec<Finding> {
        use crate::metrics::model::Counter;
        let mut out = Vec::new();
        for w in self.watches.iter_mut().filter(|w| w.instance == instance && iv.t >= w.since) {
            // Quiet: nothing runs, waits or just finished (a producer keeps a
            // finished request's KV until the consumer pulls it).
            let finished = iv.counter(Counter::RequestsOk) + iv.counter(Counter::RequestsErrored);
            let idle = iv.running == Some(0.0) && iv.waiting == Some(0.0) && finished == 0.0;
            if let (true, Some(u)) = (idle, iv.kv_usage) {
                match w.kv {
                    Kv::Unknown | Kv::HeldSince(..) if u <= IDLE_KV => w.kv = Kv::Idle(iv.t, u),
                    Kv::Held(since) if u <= IDLE_KV => {
                        w.kv = Kv::Idle(iv.t, u);
                        out.push(Finding::KvReleased {
                            instance,
                            text: format!(
                                "{display}: KV released {:.0} s after it was seen held (after {})",
                                iv.t - since,
                                w.trigger.words()
                            ),
                        });
                    }
                    Kv::Unknown => w.kv = Kv::HeldSince(iv.t, u),
                    Kv::HeldSince(since, _) if iv.t - since >= KV_HOLD_SECS => {
                        w.kv = Kv::Held(since);
                        out.push(Finding::KvNotReleased {
                            instance,
                            text: format!(
                                "{display}: {:.1}% of KV still held {:.0} s after {} with no request running: blocks kept for requests that are gone",
                                u * 100.0,
                                iv.t - w.since,
                                w.trigger.words()
                            ),
                        });
                    }
                    _ => {}
                }
            }
            // Only requests that began after the trigger's interval tell.
            if w.next == Next::Pending && iv.t - iv.dt >= w.since - 1e-9 {
                let ok = iv.counter(Counter::RequestsOk).round() as u64;
                let errored = iv.counter(Counter::RequestsErrored).round() as u64;
                if ok > 0 || errored > 0 {
                    w.next = Next::Done;
                    let what = if ok > 0 {
                        format!("the next request succeeded ({ok} finished)")
                    } else {
                        format!("the next request failed ({errored} errored)")
                    };
                    out.push(Finding::Next {
                        instance,
                        ok: ok > 0,
                        since: w.since,
                        text: format!("{display}: after {}, {what}; {}", w.trigger.words(), kv_words(&w.kv)),
                    });
                }
            }
        }
        // Held KV stays watched after the next request: its release is news.
        self.watches.retain(|w| w.next == Next::Pending || !matches!(w.kv, Kv::Idle(..)));
        out
    }

    /// `instance` stopped answering: a pending next request did not
    /// succeed. Returns that, then the outage is watched in turn.
    pub fn on_down(&mut self, instance: usize, at: f64, display: &str) -> Vec<Finding> {
        let mut out = Vec::new();
        if let Some(w) = self.watches.iter().find(|w| w.instance == instance && w.next == Next::Pending)
            && w.trigger != Trigger::Outage
        {
            out.push(Finding::Next {
                instance,
                ok: false,
                since: w.since,
                text: format!(
                    "{display}: after {}, it went down before any request succeeded; {}",
                    w.trigger.words(),
                    kv_words(&w.kv)
                ),
            });
        }
        if !self.watching(instance).is_some_and(|w| w.trigger == Trigger::Outage) {
            self.start(instance, Trigger::Outage, at);
        }
        out
    }

    /// The end of a `check`: what is still open is said as it stands.
    pub fn finish(&mut self, up: impl Fn(usize) -> bool, display: impl Fn(usize) -> String) -> Vec<Finding> {
        let mut out = Vec::new();
        for w in self.watches.drain(..) {
            let ep = display(w.instance);
            let words = w.trigger.words();
            if w.next == Next::Pending && !up(w.instance) {
                out.push(Finding::Next {
                    instance: w.instance,
                    ok: false,
                    since: w.since,
                    text: format!("{ep}: after {words}, still down at the end"),
                });
            } else if w.next == Next::Pending {
                out.push(Finding::Unknown {
                    instance: w.instance,
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
        let found = r.finish(|_| false, |_| "d".into());
        assert!(
            matches!(&found[..], [Finding::Next { ok: false, text, .. }] if text.ends_with("still down at the end"))
        );
    }

    #[test]
    fn no_request_by_the_end_is_unknown() {
        let mut r = Recovery::default();
        r.start(0, Trigger::Restart, 0.0);
        r.on_interval(0, &iv(1.0, 0.0, 0.0, 0.0, 0.0), "p");
        let found = r.finish(|_| true, |_| "p".into());
        assert!(
            matches!(&found[..], [Finding::Unknown { text, .. }] if text.contains("unknown; KV back to idle"))
        );
    }
}
