//! The words for what time, failures and cancels decided, and for what
//! leaves a request unknown.

use std::fmt;

use super::kinds::*;
use crate::feed::LogOrigin;
use crate::traces::outcome::Outcome;

/// Whether the reason is one of this file's.
pub(super) fn owns(r: &Reason) -> bool {
    use Reason as R;
    matches!(
        r,
        R::OrderOnly { .. }
            | R::SharedStep { .. }
            | R::StyleUnknown { .. }
            | R::HitQueueFull { .. }
            | R::RestartedBeforeLoad { .. }
            | R::NoAddedLine { .. }
            | R::NoPrefillLog { .. }
            | R::CopyBeforeRead { .. }
            | R::BeganBeforeRead { .. }
            | R::CopyWaiting { .. }
            | R::NoSharedIds { .. }
            | R::PrefillOnly { .. }
            | R::NamedOnly { .. }
            | R::ProxyOnly
            | R::ServedAlone { .. }
            | R::CutUndated { .. }
            | R::NotifyExplains { .. }
            | R::LmcacheShortAmong { .. }
            | R::ExpiredAlone { .. }
            | R::NoPrefillById { .. }
            | R::NoPrefillByFlow { .. }
            | R::Failed { .. }
            | R::Then { .. }
            | R::Was { .. }
            | R::AfterFailedPrefill { .. }
            | R::LoadedDespiteFailedPrefill { .. }
            | R::FoundNoKv { .. }
            | R::ProxyAnswered { .. }
            | R::MaybeRecomputed { .. }
            | R::Expired { .. }
            | R::ExpiredAfterAbort { .. }
            | R::ExpiredAsNotified { .. }
            | R::Cancelled { .. }
            | R::KvNeverCame { .. }
            | R::CancelledAfter { .. }
            | R::AbortEcho { .. }
            | R::SameSecond { .. }
            | R::AbortCameAfter
            | R::VllmOwnAbort
            | R::Notify { .. }
            | R::Stuck { .. }
            | R::WaitingAtEnd { .. }
    )
}

pub(super) fn fmt(r: &Reason, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    use Reason as R;
    match r {
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
        R::CopyBeforeRead { decode, window } => write!(
            f,
            "served by decode#{decode} within {window:.0} s of the start of what pdtop read of the logs (--since): its prefill copy may be before it"
        ),
        R::BeganBeforeRead { was } => write!(
            f,
            "it began before what pdtop read of the logs (--since): its later lines alone say {}, which what came before may undo",
            was.name().replace('_', " ")
        ),
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
            let named: Vec<String> = named
                .iter()
                .map(
                    |(h, s, d)| if d.is_empty() { format!("{h} on {s}") } else { format!("{h} on {s}: {d}") },
                )
                .collect();
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
        R::ExpiredAsNotified { src } => {
            write!(f, "then {src} released its KV unread (lease expired), as the failed notification left it")
        }
        R::KvNeverCame { src, lost: true } => write!(
            f,
            "{src} died holding its KV after answering, before the decode read it: the decode waited for KV that could not come"
        ),
        R::KvNeverCame { src, lost: false } => write!(
            f,
            "{src} freed its KV unread (its lease ran out) while the decode still waited for it: the load could not complete"
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
        _ => Ok(()),
    }
}
