//! One watch of `super`: what started it, what it has seen of the KV and
//! of the next request, and what it concluded.

use crate::state::instance::Interval;

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
    pub(super) fn words(&self) -> String {
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
    pub(super) fn replaces(&self, older: &Trigger) -> bool {
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

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Kv {
    Unknown,
    /// Seen held with nothing running since then: (since, usage).
    HeldSince(f64, f64),
    /// Reported as not released.
    Held(f64),
    Idle(f64, f64),
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Next {
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
    pub(super) kv: Kv,
    pub(super) next: Next,
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
    pub(super) fn new(instance: usize, trigger: Trigger, since: f64) -> Watch {
        let next = if matches!(trigger, Trigger::PeerLeft(_)) { Next::NotAsked } else { Next::Pending };
        Watch { instance, trigger, since, kv: Kv::Unknown, next }
    }

    /// Whether it has nothing left to say: the next request is known and
    /// the KV was seen idle (held KV stays watched: its release is news).
    pub(super) fn over(&self) -> bool {
        self.next != Next::Pending && matches!(self.kv, Kv::Idle(..))
    }

    /// One good scrape's interval, ending at or after the watch began.
    pub(super) fn read(&mut self, s: &Slice, display: &str) -> Vec<Finding> {
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
    pub(super) fn down(&self, at: f64, display: &str) -> Option<Finding> {
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

pub(super) fn kv_words(kv: &Kv) -> String {
    match kv {
        Kv::Unknown => "KV not yet seen with nothing running".into(),
        Kv::Idle(_, u) => format!("KV back to idle ({:.1}% with nothing running)", u * 100.0),
        Kv::HeldSince(_, u) => format!("KV still at {:.1}% with nothing running", u * 100.0),
        Kv::Held(_) => "KV not released".into(),
    }
}
