//! What the sources said about one request, typed: the facts `decide`
//! reads. Each part adds the facts it owns (an instance's log, the
//! connector's lines, the hit queue, the proxy, the spans) and sets no
//! verdict; `settle.rs` hands a request's facts to `decide`, the one
//! place a verdict is reached. Words are made from the verdict's reasons
//! at the edge (`reason/`), never read back.

use super::outcome::{Confidence, Hop};
pub(crate) use super::reason::Group;
use crate::feed::LogOrigin;

/// One thing a source said about a request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Fact {
    /// Event time: the line's own stamp where it has one, else its read time.
    pub t: f64,
    /// The log (or the proxy's) that said it.
    pub src: LogOrigin,
    pub kind: FactKind,
}

/// A failure a source reported for the request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Failure {
    /// The hop that failed.
    pub hop: Hop,
    /// What the source said, in its terms (a status, an exception, a cause).
    pub what: String,
    /// How surely the failure is this request's (a cut stream's end is never
    /// logged; a proxy line names no request).
    pub confidence: Confidence,
    /// vLLM's `Request <id> failed.` after it aborted the request itself.
    pub generate_failed: bool,
    /// The proxy reported it, for an instance's hop.
    pub by_proxy: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FactKind {
    // ---- the instances' own lines
    /// The prefill instance served the request alone (`max_tokens` > 1).
    ServedAlone {
        max_tokens: u32,
    },
    /// The decode request carried `kv_transfer_params` naming the prefill's request.
    Params {
        remote: String,
        tokens: Option<u32>,
        blocks: Option<u32>,
    },
    /// A connector that pulls got a decode request without `kv_transfer_params`.
    NoParams,
    Failed(Failure),
    /// The client went away (`Aborted request(s)`).
    Aborted,
    /// Its instance was killed with this stream open, at an unknown moment
    /// between its last line and the restart: whether the kill cut it is unknown.
    CutUndated {
        instance: LogOrigin,
        gap_s: f64,
        stats_seen: bool,
    },
    /// The decode restarted before its load could be seen.
    RestartedBeforeLoad,
    /// The producer released the request's KV unread (lease expired).
    KvExpiredUnread,
    /// NIXL `notification_failed`: the decode held every block in its own
    /// prefix cache and read nothing.
    NotifyFailed {
        text: String,
    },
    /// The scheduler rescheduled failed loads to recompute them
    /// (`Recovered from KV load failure: N`); `matched`: N is exactly the
    /// failed loads just before, so this one is among them.
    LoadRecovered {
        n: f64,
        matched: bool,
    },
    /// Its prefill died after answering (the decode got its params) and
    /// before any sign that the decode read its KV: the KV died with it.
    KvLost,
    /// The producer saw a decode read its KV after the lease had run out
    /// (NIXL's `Potentially invalid KV blocks ... retrieved by a decode
    /// worker`): read after all, but possibly from reused blocks.
    StaleRead,
    /// Its load failed on a decode configured `kv_load_failure_policy:
    /// recompute`: the scheduler computes such a request itself.
    PolicyRecompute,
    /// Its decode's `KV Transfer metrics` windows had counted `counted`
    /// transfers by a quiet point, at least one for each of the `loads`
    /// loads before it (`connector::transfers`).
    TransferCounted {
        counted: u64,
        loads: u64,
    },
    /// Still seen waiting for its KV past the stuck threshold.
    Stuck {
        id: String,
        secs: f64,
        begun: bool,
        since: f64,
        last: f64,
        limit: f64,
    },
    /// Still waiting for its KV when the log ended.
    WaitingAtEnd {
        secs: f64,
        limit: f64,
    },
    /// A decode request joined this trace after its prefill failed: the
    /// proxy went on (or it is the next request's, paired by order).
    AfterFailedPrefill {
        decode: usize,
        pull_without_params: bool,
    },
    // ---- the ExampleConnector's hit lines, attributed by the hit queue
    /// An `External Cache Hit!` was given to it; `contested`: younger
    /// requests still waiting could each turn out to be its owner.
    Hit {
        decode: usize,
        contested: u32,
        from_orphan: bool,
    },
    /// No hit came within `waited` of its `Added` line (read time `added_at`).
    NoHit {
        decode: usize,
        waited: f64,
        busy: bool,
        added_at: f64,
    },
    /// No hit yet, `waited` after its `Added` line (the engine's own lag):
    /// called a miss early, likely; it waits on until `settle_s` (`NoHit`).
    NoHitYet {
        decode: usize,
        waited: f64,
        added_at: f64,
    },
    /// Too many requests waited for a hit to follow this one.
    HitQueueFull {
        decode: usize,
    },
    /// Scheduled together with `others`, fewer hits than members: one did
    /// not load, and the lines cannot say which. `rival`: it was given one
    /// of the hits (`inject` tokens) by arrival order alone.
    SharedStep {
        decode: usize,
        others: Vec<String>,
        hits: u32,
        inject: Option<u32>,
        rival: bool,
    },
    /// The members' prompt lengths settled the shared step.
    GroupSettled {
        decode: usize,
        hit: bool,
        inject: Option<u32>,
        own: Option<u32>,
        group: Group,
    },
    // ---- other connectors
    /// P2pNccl: the KV tensor of the request arrived on decode.
    TensorReceived {
        decode: usize,
        peer: String,
        tensor: String,
    },
    /// LMCache's lookup on decode: `hit` of `total` tokens found.
    LmcacheLookup {
        decode: usize,
        hit: f64,
        total: f64,
        id: String,
    },
    /// An LMCache load came back short, naming no request, and this
    /// request's lookup had just hit, with others'.
    LmcacheShortAmong {
        decode: usize,
    },
    // ---- the proxy
    /// The proxy's answer to a request that failed.
    ProxyAnswered {
        status: u16,
    },
}

impl FactKind {
    /// A sign that the decode read the request's KV. Not a transfer the
    /// windows counted: they count a decode's reads together, and a count
    /// that covers its loads need not be this one's.
    pub fn is_read(&self) -> bool {
        matches!(
            self,
            FactKind::Hit { .. } | FactKind::GroupSettled { hit: true, .. } | FactKind::TensorReceived { .. }
        )
    }
}

/// A request's facts, in the order they were read.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Facts(pub Vec<Fact>);

/// Failures kept per request: an outage prints thousands of lines into one
/// burst trace; the first ones and the latest say what happened, and
/// deciding stays as cheap on the last line as on the first.
pub(crate) const FAILURES_KEPT: usize = 16;

impl Facts {
    /// Adds a fact. Past [`FAILURES_KEPT`] failures, a new one replaces
    /// the latest (an equal one is dropped).
    pub fn push(&mut self, t: f64, src: LogOrigin, kind: FactKind) {
        if let FactKind::Failed(x) = &kind {
            let mut fails = self.0.iter().enumerate().filter(|(_, f)| matches!(f.kind, FactKind::Failed(_)));
            if let Some((last, _)) = fails.by_ref().skip(FAILURES_KEPT - 1).last() {
                match &self.0[last].kind {
                    FactKind::Failed(y) if y == x => {}
                    _ => self.0[last] = Fact { t, src, kind },
                }
                return;
            }
        }
        self.0.push(Fact { t, src, kind });
    }

    /// Adds the fact unless an equal one is there (one failure printed by
    /// each TP worker, then by the scheduler).
    pub fn push_once(&mut self, t: f64, src: LogOrigin, kind: FactKind) {
        if !self.0.iter().any(|f| f.kind == kind) {
            self.push(t, src, kind);
        }
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Fact> {
        self.0.iter()
    }

    /// The latest fact `pick` takes.
    pub fn last<'a, T>(&'a self, pick: impl Fn(&'a FactKind) -> Option<T>) -> Option<(&'a Fact, T)> {
        self.0.iter().rev().find_map(|f| pick(&f.kind).map(|x| (f, x)))
    }

    pub fn has(&self, pick: impl Fn(&FactKind) -> bool) -> bool {
        self.0.iter().any(|f| pick(&f.kind))
    }

    /// The failures, oldest first.
    pub fn failures(&self) -> impl Iterator<Item = (usize, &Fact, &Failure)> {
        self.0.iter().enumerate().filter_map(|(k, f)| match &f.kind {
            FactKind::Failed(x) => Some((k, f, x)),
            _ => None,
        })
    }

    /// The client's abort, if one was logged.
    pub fn abort(&self) -> Option<(usize, &Fact)> {
        self.0.iter().enumerate().find(|(_, f)| f.kind == FactKind::Aborted)
    }

    /// The hit fact of the request, to update as its rivals settle.
    pub fn hit_mut(&mut self) -> Option<&mut u32> {
        self.0.iter_mut().rev().find_map(|f| match &mut f.kind {
            FactKind::Hit { contested, .. } => Some(contested),
            _ => None,
        })
    }

    /// Facts of the prefill side, moved with it when two traces trade
    /// prefill copies (`prompt_join.rs`): what its log said, and the
    /// failures of its hop that the proxy reported.
    pub fn take_prefill_side(&mut self) -> Vec<Fact> {
        let (mine, rest): (Vec<Fact>, Vec<Fact>) = self.0.drain(..).partition(|f| {
            matches!(f.src, LogOrigin::Prefill(_))
                || matches!(&f.kind, FactKind::Failed(x) if x.hop == Hop::Producer)
        });
        self.0 = rest;
        mine
    }

    pub fn shrink_to_fit(&mut self) {
        self.0.shrink_to_fit();
    }

    /// Drops the facts a later line proved wrong.
    pub fn forget(&mut self, pick: impl Fn(&FactKind) -> bool) {
        self.0.retain(|f| !pick(&f.kind));
    }
}

#[cfg(test)]
mod tests {
    use super::{FAILURES_KEPT, FactKind, Facts, Failure};
    use crate::feed::LogOrigin;
    use crate::traces::{Confidence, Hop};

    fn failed(what: &str) -> FactKind {
        FactKind::Failed(Failure {
            hop: Hop::Proxy,
            what: what.to_string(),
            confidence: Confidence::Sure,
            generate_failed: false,
            by_proxy: false,
        })
    }

    /// An outage's thousands of lines on one trace: the first failures and
    /// the latest are kept, and no more.
    #[test]
    fn failures_are_kept_first_and_latest() {
        let mut f = Facts::default();
        f.push(0.0, LogOrigin::Proxy, FactKind::Aborted);
        for k in 0..20_000 {
            f.push(k as f64, LogOrigin::Proxy, failed(&format!("503 #{k}")));
        }
        let kept: Vec<String> = f.failures().map(|(_, _, x)| x.what.clone()).collect();
        assert_eq!(kept.len(), FAILURES_KEPT);
        assert_eq!(kept[0], "503 #0");
        assert_eq!(kept[FAILURES_KEPT - 2], format!("503 #{}", FAILURES_KEPT - 2));
        assert_eq!(kept[FAILURES_KEPT - 1], "503 #19999");
        assert_eq!(f.0.len(), FAILURES_KEPT + 1);
    }
}
