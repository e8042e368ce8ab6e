//! The decider: one request's facts and what is known around it in, its
//! verdict, confidence and reasons out. Pure: no state is written here and
//! nothing is read but its arguments; `settle.rs` is the only caller and
//! the only writer of outcomes.
//!
//! The rules, in the order they are tried:
//! 1. failures and the client's abort: an error at the failing hop, or a
//!    cancel, ordered by the lines' own stamps (`abort.rs`);
//! 2. what the decode did with the KV (`pair::RULES`, a table of small
//!    rules tried in order, each with its own test): a load by `kv_transfer_params`, an
//!    attributed `External Cache Hit`, a settled shared step, a P2pNccl
//!    tensor, an LMCache lookup; or none: a pull connector given no params
//!    after a prefill, no hit after the wait, the prefill's KV expiring
//!    unread;
//! 3. what time allows: a request with only one side after its window;
//! 4. the logs' past cut by `--since`: a request whose arrival was cut is
//!    an error at most likely, else unknown.
//!
//! A verdict on a request joined by arrival order alone is never sure, and
//! never a miss unless the proxy's flow vouches that it was prefilled. One
//! joined among several copies of its length, or beside a copy whose length
//! is not known yet, is at most likely, and its reasons name the others.

mod faults;
mod pair;
mod time;
mod verdict;

pub(crate) use verdict::{Ctx, Verdict};

use super::evidence::FactKind as F;
use super::model::{Confidence, Hop, Join, Outcome};
use super::reason::Reason as R;
use super::store::Entry;

/// The verdict on one request.
pub(crate) fn decide(e: &Entry, cx: &Ctx) -> Verdict {
    // Capped before and after the faults: what they report of the pair is
    // as sure as the join, and so is what they conclude.
    let base = capped(e, cx, pair::pair(e, cx));
    let mut v = capped(e, cx, faults::faults(e, cx, base));
    // A decode read its KV (the producer saw it, after the lease): loaded,
    // whatever the decode's own log could have added; possibly from
    // reused blocks, which the reason says.
    if v.outcome == Outcome::Unknown && e.facts.has(|k| *k == F::StaleRead) {
        v.outcome = Outcome::Loaded;
        v.confidence = Confidence::Likely;
    }
    // Only its later lines were read: a failure they name is one, at most
    // likely; anything else may have been undone by what came before.
    if cx.began_unread && !matches!(v.outcome, Outcome::Pending | Outcome::Unknown) {
        if v.outcome == Outcome::Error {
            v.confidence = v.confidence.max(Confidence::Likely);
        } else {
            let was = v.outcome;
            v = Verdict::new(Outcome::Unknown, Confidence::Likely, vec![R::BeganBeforeRead { was }]);
        }
    }
    if v.outcome != Outcome::Pending {
        v.reasons.extend(pair::join_note(e));
    }
    // A stuck wait is said whatever became of the request.
    for f in e.facts.iter() {
        match &f.kind {
            F::Stuck { .. } if v.outcome != Outcome::Unknown => v.reasons.extend(verdict::stuck(&f.kind)),
            F::StaleRead if !v.reasons.iter().any(|r| matches!(r, R::StaleKv { .. })) => {
                v.reasons.push(R::StaleKv { src: f.src });
            }
            F::WaitingAtEnd { secs, limit } => v.reasons.push(R::WaitingAtEnd { secs: *secs, limit: *limit }),
            F::NotifyFailed { text }
                if !v.reasons.iter().any(|r| matches!(r, R::Notify { .. } | R::NotifyExplains { .. })) =>
            {
                v.reasons.push(R::Notify { src: f.src, text: text.clone() });
                if e.facts.has(|k| *k == F::KvExpiredUnread) && v.outcome != Outcome::Error {
                    let src = e
                        .facts
                        .last(|k| (*k == F::KvExpiredUnread).then_some(()))
                        .map_or(f.src, |(x, _)| x.src);
                    v.reasons.push(R::ExpiredAsNotified { src });
                }
            }
            _ => {}
        }
    }
    v
}

/// An order join caps the verdict: never sure, and a miss only where the
/// proxy's flow vouches for the prefill. A join among several copies of
/// one length: likely, and so is a failure of the copy.
fn capped(e: &Entry, cx: &Ctx, mut v: Verdict) -> Verdict {
    if matches!(v.reasons.first(), Some(R::OrderOnly(_))) {
        return v;
    }
    let among = !e.track.same_length_copies.is_empty() || !e.track.unsized_copies.is_empty();
    // Decode computed a request it surely got, after a prefill failure
    // the proxy hid: the pairing says only which failure was its.
    let after_failure = v.reasons.iter().any(|r| matches!(r, R::AfterFailedPrefill { .. }));
    match e.trace.join {
        Join::ByOrder if v.outcome == Outcome::SilentMiss && after_failure => {
            v.confidence = v.confidence.max(Confidence::Likely);
        }
        Join::ByOrder if v.outcome == Outcome::SilentMiss && !cx.guaranteed => {
            v = Verdict::new(Outcome::Unknown, Confidence::Unsure, vec![R::OrderOnly(v.reasons)]);
        }
        Join::ByOrder if matches!(v.outcome, Outcome::Pending | Outcome::Error | Outcome::Cancelled) => {}
        Join::ByOrder if cx.guaranteed => v.confidence = v.confidence.max(Confidence::Likely),
        Join::ByOrder => v.confidence = Confidence::Unsure,
        // One of several copies of that length: the verdict holds for each,
        // the pairing is not known.
        Join::ByPromptTokens
            if among
                && (!matches!(v.outcome, Outcome::Pending | Outcome::Error | Outcome::Cancelled)
                    || v.error_at == Some(Hop::Producer)) =>
        {
            v.confidence = v.confidence.max(Confidence::Likely);
        }
        Join::ByPromptTokens | Join::ById => {}
    }
    v
}
