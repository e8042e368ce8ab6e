//! The reasons' vocabulary: typed, worded in `pair.rs` and `fault.rs`.

use std::fmt;

use crate::feed::LogOrigin;
use crate::traces::outcome::{Hop, Outcome};

/// When the prefill answered, relative to the line judged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Finished {
    Unknown,
    /// Under a second before: stamps have one-second resolution.
    UnderASecond,
    Before(f64),
}

impl Finished {
    pub fn of(done: Option<f64>, t: f64) -> Finished {
        match done {
            Some(d) if t >= d && t - d < 1.0 => Finished::UnderASecond,
            Some(d) if t >= d => Finished::Before(t - d),
            _ => Finished::Unknown,
        }
    }
}

impl fmt::Display for Finished {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finished::Unknown => Ok(()),
            Finished::UnderASecond => f.write_str(" under a second earlier"),
            Finished::Before(s) => write!(f, " {s:.1} s earlier"),
        }
    }
}

/// How a hit was given to this request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HitHow {
    /// It was the only request waiting.
    Alone,
    /// Its prefill was paired by arrival order only.
    PairedByOrder,
    /// Younger requests waited too: arrival order gave it this one.
    Contested,
}

/// Why the miss is still only likely.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Early {
    /// Called before `settle_s`: sure if no hit comes by then.
    Due,
}

/// A wait as the words say it: "350 ms", "1.5 s".
pub fn wait_words(s: f64) -> String {
    if s < 1.0 { format!("{:.0} ms", s * 1e3) } else { format!("{s:.1} s") }
}

/// The members of a settled shared step, as its words name them.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// Each member's id and prompt length.
    pub members: Vec<(String, Option<u32>)>,
    /// The tokens each hit injected.
    pub hits: Vec<Option<u32>>,
}

/// One reason of a verdict.
#[derive(Debug, Clone, PartialEq)]
pub enum Reason {
    // ---- loaded
    ParamsLoaded {
        prefill: usize,
        remote: String,
        tokens: Option<u32>,
        blocks: Option<u32>,
        finished: Finished,
    },
    ParamsUnseenPrefill {
        remote: String,
        tokens: Option<u32>,
    },
    HitLoaded {
        inject: Option<u32>,
        prefill: Option<usize>,
        finished: Finished,
        how: HitHow,
    },
    TensorReceived {
        decode: usize,
        peer: String,
        tensor: String,
    },
    Lmcache {
        decode: usize,
        hit: f64,
        total: f64,
        id: String,
        assumed_prefill: bool,
    },
    GroupLoaded {
        decode: usize,
        inject: Option<u32>,
        group: Group,
    },
    TransferCounted {
        decode: usize,
        counted: u64,
        loads: u64,
    },
    /// Not sure yet: the connector prints only a failed read.
    ReadMayFail,
    // ---- silent miss
    NoParams {
        prefill: usize,
        connector: String,
    },
    NoHit {
        prefill: usize,
        /// Its prefill was paired by arrival order only (no id, no length).
        by_order: bool,
        finished: Finished,
        waited: f64,
        busy: bool,
        early: Option<Early>,
    },
    NotReadYet {
        remote: Option<String>,
    },
    ExpiredAfterDecode {
        decode: usize,
        src: LogOrigin,
    },
    ExpiryConfirms {
        src: LogOrigin,
    },
    GroupMiss {
        decode: usize,
        own: Option<u32>,
        group: Group,
    },
    Recomputed {
        src: LogOrigin,
        n: f64,
    },
    /// The decode read the KV after the producer's lease had run out.
    StaleKv {
        src: LogOrigin,
    },
    /// The load failed on a decode whose policy is to recompute.
    RecomputedByPolicy {
        src: LogOrigin,
    },
    // ---- joins
    PairedByTokens {
        n: u32,
    },
    /// Its prefill copy was one of several of that length: any of them gives this verdict.
    PairedAmong {
        n: u32,
        copies: Vec<String>,
        /// Copies whose length no source gave that could be its too.
        unknown_length: Vec<String>,
    },
    RepairedCopy {
        id: String,
    },
    // ---- unknown
    OrderOnly(Vec<Reason>),
    SharedStep {
        decode: usize,
        others: Vec<String>,
        hits: u32,
        inject: Option<u32>,
        rival: bool,
        id: String,
    },
    StyleUnknown {
        decode: usize,
        connector: String,
    },
    HitQueueFull {
        decode: usize,
    },
    RestartedBeforeLoad {
        decode: usize,
    },
    NoAddedLine {
        prefill: usize,
        decode: usize,
    },
    NoPrefillLog {
        decode: usize,
    },
    CopyBeforeRead {
        decode: usize,
        window: f64,
    },
    BeganBeforeRead {
        was: Outcome,
    },
    CopyWaiting {
        decode: usize,
        copies: Vec<String>,
    },
    NoSharedIds {
        window: f64,
    },
    PrefillOnly {
        prefill: usize,
        decode_read: bool,
        expired: bool,
    },
    NamedOnly {
        named: Vec<(Hop, LogOrigin, String)>,
    },
    ProxyOnly,
    ServedAlone {
        src: LogOrigin,
        max_tokens: u32,
    },
    CutUndated {
        instance: LogOrigin,
        gap_s: f64,
        stats_seen: bool,
    },
    NotifyExplains {
        src: LogOrigin,
        text: String,
    },
    LmcacheShortAmong {
        decode: usize,
    },
    ExpiredAlone {
        src: LogOrigin,
    },
    // ---- no prefill
    NoPrefillById {
        id: String,
        decode: usize,
    },
    NoPrefillByFlow {
        decode: usize,
    },
    // ---- errors, cancels and what came with them
    Failed {
        hop: Hop,
        src: LogOrigin,
        what: String,
        by_proxy: bool,
    },
    Then(Box<Reason>),
    /// The verdict the request had before the failure or the cancel.
    Was {
        outcome: Outcome,
        reasons: Vec<Reason>,
    },
    AfterFailedPrefill {
        decode: usize,
        by_order: bool,
        pull_without_params: Option<String>,
    },
    LoadedDespiteFailedPrefill {
        decode: usize,
        by_order: bool,
    },
    FoundNoKv {
        decode: usize,
    },
    ProxyAnswered {
        status: u16,
    },
    MaybeRecomputed {
        src: LogOrigin,
        n: f64,
    },
    Expired {
        src: LogOrigin,
    },
    ExpiredAfterAbort {
        src: LogOrigin,
    },
    ExpiredAsNotified {
        src: LogOrigin,
    },
    Cancelled {
        src: LogOrigin,
    },
    /// The decode waited for KV that could no longer come (freed unread,
    /// or died with its prefill) until the client gave up.
    KvNeverCame {
        src: LogOrigin,
        lost: bool,
    },
    CancelledAfter {
        outcome: Outcome,
        reasons: Vec<Reason>,
    },
    AbortEcho {
        what: Box<Reason>,
    },
    SameSecond {
        what: Box<Reason>,
    },
    AbortCameAfter,
    VllmOwnAbort,
    /// Cut off by its instance's death before it pulled its KV.
    DiedBeforePull {
        instance: LogOrigin,
        src: LogOrigin,
    },
    Notify {
        src: LogOrigin,
        text: String,
    },
    Stuck {
        id: String,
        secs: f64,
        begun: bool,
        since: f64,
        last: f64,
        limit: f64,
    },
    WaitingAtEnd {
        secs: f64,
        limit: f64,
    },
}

/// The first clause of every shared-step unknown (`unknown_reasons` groups by it).
pub(super) const SHARED: &str =
    "one of the requests scheduled together did not load KV, and the logs cannot say which";
/// Why the lines cannot tell, and what would.
pub(super) const WHY: &str = "vLLM's scheduler prints the hit for whichever waiting request finds its folder and nothing for a miss; their prompt lengths (vLLM's DEBUG request log or its spans) would settle it";

pub(super) fn opt(n: Option<u32>) -> String {
    n.map_or("?".into(), |n| n.to_string())
}

pub(super) fn hms(t: f64) -> String {
    let s = t.floor() as i64;
    let d = s.rem_euclid(86400);
    format!("{:02}:{:02}:{:02}", d / 3600, (d / 60) % 60, d % 60)
}

pub(super) fn together(decode: usize, g: &Group) -> String {
    let names: Vec<String> = g.members.iter().map(|(id, l)| format!("{id} ({} tokens)", opt(*l))).collect();
    let hits: Vec<String> = g.hits.iter().map(|h| opt(*h)).collect();
    format!(
        "{} requests scheduled together on decode#{decode} ({}), {} External Cache Hit(s) injecting {} tokens",
        g.members.len(),
        names.join(", "),
        g.hits.len(),
        hits.join(" and ")
    )
}

/// A verdict's reasons in words: `; ` between them, a bracketed note after
/// the reason it qualifies.
pub fn words(reasons: &[Reason]) -> String {
    let mut out = String::new();
    for r in reasons {
        if !out.is_empty() {
            out.push_str(if r.bracketed() { " " } else { "; " });
        }
        out.push_str(&r.to_string());
    }
    out
}
