//! Why a verdict was reached, typed; put into words only where they are
//! shown (the screen, `check`'s report). Nothing reads the words back.

use std::fmt;

use super::evidence::Group;
use super::model::{Hop, Outcome};
use crate::feed::LogOrigin;

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
    /// A younger request took a hit before `settle_s` passed.
    Contested,
}

/// A wait as the words say it: "350 ms", "1.5 s".
pub fn wait_words(s: f64) -> String {
    if s < 1.0 { format!("{:.0} ms", s * 1e3) } else { format!("{s:.1} s") }
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
        n: u64,
    },
    TransferUncounted,
    // ---- silent miss
    NoParams {
        prefill: usize,
        connector: String,
    },
    NoHit {
        prefill: usize,
        finished: Finished,
        waited: f64,
        busy: bool,
        early: Option<Early>,
    },
    NeverPulled {
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
    // ---- joins
    PairedByTokens {
        n: u32,
    },
    /// Its prefill copy was one of several of that length: any of them gives this verdict.
    PairedAmong {
        n: u32,
        copies: Vec<String>,
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
    LateHit {
        decode: usize,
        after: f64,
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
const SHARED: &str = "one of the requests scheduled together did not load KV, and the logs cannot say which";
/// Why the lines cannot tell, and what would.
const WHY: &str = "vLLM's scheduler prints the hit for whichever waiting request finds its folder and nothing for a miss; their prompt lengths (vLLM's DEBUG request log or its spans) would settle it";

fn opt(n: Option<u32>) -> String {
    n.map_or("?".into(), |n| n.to_string())
}

fn hms(t: f64) -> String {
    let s = t.floor() as i64;
    let d = s.rem_euclid(86400);
    format!("{:02}:{:02}:{:02}", d / 3600, (d / 60) % 60, d % 60)
}

fn together(decode: usize, g: &Group) -> String {
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

impl Reason {
    /// Whether the reason reads as a note in brackets after the one before it.
    fn bracketed(&self) -> bool {
        matches!(self, Reason::PairedByTokens { .. } | Reason::PairedAmong { .. })
    }

    /// The reason's first clause, without ids or numbers, for grouping.
    pub fn headline(&self) -> String {
        let s = self.to_string();
        let cut = s.find(" (").unwrap_or(s.len());
        s[..cut].to_string()
    }
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

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Reason as R;
        match self {
            R::ParamsLoaded { prefill, remote, tokens, blocks, finished } => write!(
                f,
                "kv_transfer_params from prefill#{prefill}: {} tokens in {} blocks ({remote}){finished}",
                opt(*tokens),
                opt(*blocks)
            ),
            R::ParamsUnseenPrefill { remote, tokens } => write!(
                f,
                "kv_transfer_params name prefill request {remote} ({} tokens), which no prefill log showed",
                opt(*tokens)
            ),
            R::HitLoaded { inject, prefill, finished, how } => {
                match inject {
                    Some(n) => write!(f, "Inject {n} tokens")?,
                    None => f.write_str("External Cache Hit")?,
                }
                if let Some(pi) = prefill {
                    write!(f, " after prefill on prefill#{pi} finished{finished}")?;
                }
                match how {
                    HitHow::PairedByOrder => f.write_str(" (prefill paired by arrival order only)"),
                    HitHow::Contested => {
                        f.write_str(" (attributed by arrival order among concurrent requests)")
                    }
                    HitHow::Alone => Ok(()),
                }
            }
            R::TensorReceived { decode, peer, tensor } => {
                write!(f, "P2pNccl on decode#{decode} received its KV tensor from {peer} ({tensor})")
            }
            R::Lmcache { decode, hit, total, id, assumed_prefill } => {
                let src = LogOrigin::Decode(*decode);
                if *hit > 0.0 {
                    write!(f, "LMCache on {src}: hit {hit} of {total} tokens (`Reqid: {id}`)")?;
                } else {
                    write!(
                        f,
                        "LMCache on {src}: hit tokens 0 of {total}, prompt recomputed (`Reqid: {id}`)"
                    )?;
                }
                if *assumed_prefill {
                    f.write_str("; no prefill log: prefilled is assumed from the decode role")?;
                }
                Ok(())
            }
            R::GroupLoaded { decode, inject, group } => {
                write!(f, "Inject {} tokens fits its own prompt: {}", opt(*inject), together(*decode, group))
            }
            R::TransferCounted { decode, n } => {
                write!(f, "decode#{decode}'s KV Transfer metrics counted {n} transfers in that window")
            }
            R::TransferUncounted => f.write_str("no KV Transfer metrics window counted a transfer for it"),
            R::NoParams { prefill, connector } => write!(
                f,
                "decode got no kv_transfer_params although prefill#{prefill} ran it: {connector} cannot pull without them"
            ),
            R::NoHit { prefill, finished, waited, busy, early } => {
                write!(
                    f,
                    "prefill on prefill#{prefill} finished{finished}, decode computed the prompt itself: no External Cache Hit within {} of its Added line",
                    wait_words(*waited)
                )?;
                if *busy {
                    f.write_str(" (decode was queueing requests)")?;
                }
                match early {
                    Some(Early::Due) => f.write_str(
                        " (no other request was being added, so it was due; sure if none comes within 1.5 s)",
                    ),
                    Some(Early::Contested) => f.write_str(
                        " (a younger request took a hit before 1.5 s passed: FIFO gave it to that one, but it may have been this one's, scheduled late)",
                    ),
                    None => Ok(()),
                }
            }
            R::NeverPulled { remote } => {
                f.write_str("decode got kv_transfer_params")?;
                if let Some(r) = remote {
                    write!(f, " ({r})")?;
                }
                f.write_str(
                    " but never pulled: the prefill released its KV unread (lease expired); it recomputed the prompt",
                )
            }
            R::ExpiredAfterDecode { decode, src } => write!(
                f,
                "decode#{decode} ran it, but {src} released its KV unread (lease expired): decode recomputed the prompt"
            ),
            R::ExpiryConfirms { src } => write!(f, "confirmed: {src} released its KV unread (lease expired)"),
            R::GroupMiss { decode, own, group } => {
                let own = own.map_or("its".into(), |n| format!("its {n}-token"));
                write!(
                    f,
                    "prefill ran, decode recomputed {own} prompt: no injected size fits it ({})",
                    together(*decode, group)
                )
            }
            R::Recomputed { src, n } => write!(
                f,
                "{src} then recomputed it (`Recovered from KV load failure`: {n} rescheduled): the transferred KV was not used"
            ),
            R::PairedByTokens { n } => write!(f, "(prefill paired by prompt length: {n} tokens)"),
            R::PairedAmong { n, copies } => write!(
                f,
                "(prefill paired by prompt length: one of {} copies of {n} tokens, {}, and each gives this verdict)",
                copies.len(),
                copies.join(", ")
            ),
            R::RepairedCopy { id } => write!(f, "its prefill copy is {id} (re-paired by prompt length)"),
            R::OrderOnly(inner) => {
                write!(f, "possible miss, but the prefill was paired by order only: {}", words(inner))
            }
            R::SharedStep { decode, others, hits, inject, rival, id } => {
                if *rival {
                    let n = inject.map_or(String::new(), |n| format!(", Inject {n} tokens,"));
                    write!(
                        f,
                        "{SHARED} (an External Cache Hit{n} printed on decode#{decode} while {} was waiting too, which arrival order alone gave to this one; {WHY})",
                        others.join(", ")
                    )
                } else {
                    write!(
                        f,
                        "{SHARED} (decode#{decode} printed {hits} External Cache Hit(s) for {} requests added together, {id} and {}, which arrival order alone gave to the others; {WHY})",
                        others.len() + 1,
                        others.join(", ")
                    )
                }
            }
            R::LateHit { decode, after } => write!(
                f,
                "decode#{decode} printed an External Cache Hit {} after its Added line with no request waiting: it was this request's, scheduled late, or the next request's, printed before its Added line",
                wait_words(*after)
            ),
            R::StyleUnknown { decode, connector } => write!(
                f,
                "decode#{decode}'s connector ({connector}) logs nothing per request that pdtop reads: no verdict"
            ),
            R::HitQueueFull { decode } => {
                write!(f, "decode#{decode} had too many requests waiting for a hit to follow this one")
            }
            R::RestartedBeforeLoad { decode } => {
                write!(f, "decode#{decode} restarted before its KV load could be seen")
            }
            R::NoAddedLine { prefill, decode } => write!(
                f,
                "prefill on prefill#{prefill} ran; decode#{decode} logged no `Added request` line, so its KV load cannot be judged"
            ),
            R::NoPrefillLog { decode } => {
                write!(f, "served by decode#{decode}; no prefill log is being read")
            }
            R::CopyWaiting { decode, copies } => write!(
                f,
                "served by decode#{decode}, and the prefill copy {} sent about then is paired with no decode request: without a shared id the logs cannot tell whether it was this request's",
                copies.join(" or ")
            ),
            R::NoSharedIds { window } => write!(
                f,
                "the instances share no request ids (no X-Request-Id forwarded) and no prefill arrived within {window:.0} s before it"
            ),
            R::PrefillOnly { prefill, decode_read, expired } => {
                if *decode_read {
                    write!(f, "prefill on prefill#{prefill} ran; no decode request was seen for it")?;
                } else {
                    write!(f, "prefill on prefill#{prefill} ran; no decode log is being read")?;
                }
                if *expired {
                    f.write_str("; its KV expired unread")?;
                }
                Ok(())
            }
            R::NamedOnly { named } => {
                let named: Vec<String> = named.iter().map(|(h, s, d)| format!("{h} on {s}: {d}")).collect();
                write!(
                    f,
                    "no arrival line for it was read, only {}; whether its KV loaded is not known",
                    named.join("; ")
                )
            }
            R::ProxyOnly => f.write_str("seen by the proxy only: no instance log names it"),
            R::ServedAlone { src, max_tokens } => {
                write!(f, "served by {src} alone (max_tokens={max_tokens}): not a disaggregated request")
            }
            R::CutUndated { instance, gap_s, stats_seen } => {
                let why = if *stats_seen {
                    "no engine stats line came after this stream began"
                } else {
                    "its log prints no engine stats to date it"
                };
                write!(
                    f,
                    "{instance} was killed (its log stopped with no shutdown and a new process started (killed)) some time in the {gap_s:.0} s between its last line and the restart, and {why}: this stream was open at its last line and its end is never logged, so whether the kill cut it or it had ended before is unknown"
                )
            }
            R::NotifyExplains { src, text } => write!(
                f,
                "{src} had its KV in its own prefix cache and read nothing; {text}, so the prefill's unread expiry is no miss; what it was is unknown"
            ),
            R::LmcacheShortAmong { decode } => write!(
                f,
                "an LMCache load on {} came back short (`The number of retrieved tokens is less than the expected number of tokens!`) and names no request; this one's lookup had hit just before (one of several): whether its KV loaded is not known",
                LogOrigin::Decode(*decode)
            ),
            R::ExpiredAlone { src } => write!(
                f,
                "{src} released its KV unread (lease expired), so no decode loaded it; no decode request of it was read, so whether one recomputed it is unknown"
            ),
            R::NoPrefillById { id, decode } => {
                write!(f, "no prefill instance logged {id}: decode#{decode} computed it alone")
            }
            R::NoPrefillByFlow { decode } => write!(
                f,
                "decode#{decode} served it with no prefill copy before it and no proxy access line for it: it bypassed the proxy, which prefills every request it forwards"
            ),
            R::Failed { hop, src, what, by_proxy } => {
                if *by_proxy {
                    write!(f, "{hop} failed (reported by the proxy): {what}")
                } else {
                    write!(f, "{hop} on {src}: {what}")
                }
            }
            R::Then(r) => write!(f, "then {r}"),
            R::Was { outcome, reasons } => write!(f, "(was {outcome:?}: {})", words(reasons)),
            R::AfterFailedPrefill { decode, by_order, pull_without_params } => {
                if *by_order {
                    write!(
                        f,
                        "decode#{decode} received a request next, paired with it by arrival order (no id was shared): the proxy went on after the failure, or stopped there and this decode is the next request's"
                    )?;
                } else {
                    write!(f, "the proxy went on: decode#{decode} received it after the prefill failed")?;
                }
                if let Some(c) = pull_without_params {
                    write!(
                        f,
                        " and, with no kv_transfer_params, {c} had nothing to pull: decode computed the prompt itself"
                    )?;
                }
                Ok(())
            }
            R::LoadedDespiteFailedPrefill { decode, by_order } => {
                write!(f, "decode#{decode} loaded KV for it nonetheless (External Cache Hit)")?;
                if *by_order {
                    f.write_str(", which speaks against the order pairing")?;
                }
                Ok(())
            }
            R::FoundNoKv { decode } => write!(
                f,
                "decode#{decode} found no KV for it (no External Cache Hit) and computed the prompt itself"
            ),
            R::ProxyAnswered { status } => {
                if (200..300).contains(status) {
                    write!(
                        f,
                        "the proxy answered HTTP {status}: the proxy answered success for a request that failed"
                    )
                } else {
                    write!(f, "the proxy answered HTTP {status}")
                }
            }
            R::MaybeRecomputed { src, n } => write!(
                f,
                "{src} then rescheduled {n} request(s) to recompute (`Recovered from KV load failure`): this one may be among them"
            ),
            R::Expired { src } => write!(f, "{src} released its KV unread (lease expired)"),
            R::ExpiredAfterAbort { src } => {
                write!(f, "then {src} released its KV unread (lease expired) (after the abort)")
            }
            R::ExpiredAsNotified { src } => write!(
                f,
                "then {src} released its KV unread (lease expired), as the failed notification left it"
            ),
            R::Cancelled { src } => {
                write!(f, "the client closed the stream: {src} aborted the request (`Aborted request(s)`)")
            }
            R::CancelledAfter { outcome, reasons } => {
                let what = match outcome {
                    Outcome::Loaded => "after decode loaded its KV",
                    _ => "after decode recomputed its prompt",
                };
                write!(f, "{what} ({})", words(reasons))
            }
            R::AbortEcho { what } => write!(f, "then {what} (after the abort)"),
            R::SameSecond { what } => {
                write!(f, "in the same second on another log {what}: either could have come first")
            }
            R::AbortCameAfter => f.write_str("the client's abort came after it"),
            R::VllmOwnAbort => f.write_str(
                "the abort before it was vLLM's own, on that error (a client's ends `Request <id> aborted.`)",
            ),
            R::DiedBeforePull { instance, src } => write!(
                f,
                "{instance} died with it open before it pulled its KV: {src} released that KV unread (lease expired), so it neither loaded nor finished"
            ),
            R::Notify { src, text } => {
                write!(f, "{src} had its KV in its own prefix cache and read nothing; {text}")
            }
            R::Stuck { id, secs, begun, since, last, limit } => {
                let what = if *begun { "its KV load began (start_load_kv) but it" } else { "it" };
                write!(
                    f,
                    "{id} stuck on decode: {what} was still waiting for the KV from the prefill {secs:.0} s after the wait began (WAITING_FOR_REMOTE_KVS {} → {}) (threshold {limit:.0} s: --stuck-after; NIXL's prefill frees unread KV after VLLM_NIXL_ABORT_REQUEST_TIMEOUT, 480 s by default)",
                    hms(*since),
                    hms(*last)
                )
            }
            R::WaitingAtEnd { secs, limit } => write!(
                f,
                "still waiting for its KV from the prefill when the log ended (seen waiting {secs:.0} s; stuck after {limit:.0} s)"
            ),
        }
    }
}
