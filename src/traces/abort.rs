//! A client's abort and a failure of the same request: which is the verdict.
//!
//! What vLLM prints on an abort (V1 `AsyncLLM.generate`): the client went,
//! so generate() is cancelled, calls `abort()` (`Aborted request(s) X.`)
//! and logs `Request X aborted.`, then re-raises: nothing it prints later
//! reaches X's client, and its `failed (engine dead)` / `failed` branches
//! can no longer fire for X. V0 (`Aborted request X.`) the same. A failure
//! named for X after the abort comes from the engine handling the abort
//! (tenstorrent/vllm#145: the runner's `KeyError` on the aborted id as it
//! drops it; a producer's KV expiring unread because decode was cancelled):
//! the abort's echo, evidence on the cancel, never its verdict. A failure
//! before the abort is what the client met: it stays an error, the abort
//! noted. Stamps are whole seconds: in one log the line order is the
//! order; in the same second on two logs either could be first, so the
//! cancel stands but only `Likely`.

use super::model::{Confidence, Outcome};
use super::store::Track;
use crate::feed::LogOrigin;

/// `AsyncLLM.generate`'s words for an unexpected error: it aborts the
/// request itself (`Aborted request(s) X`) and then logs `Request X
/// failed.`, so on one log that abort is the engine's, not the client's.
pub(crate) const GENERATE_FAILED: &str =
    "its generation raised an error and was aborted (`Request <id> failed.`)";

/// How a verdict about to be set meets an earlier cancel or failure.
pub(super) enum Order {
    /// The new verdict does not replace the old: its words join the evidence.
    Keep { note: String, confidence: Option<Confidence> },
    /// The new verdict stands; the old one's words join it.
    Replace { note: String, confidence: Option<Confidence> },
}

/// `current` is the trace's verdict, `new` the one asked, `evidence` its
/// words; `track` holds when and where the cancel and the failure were logged.
pub(super) fn order(
    current: Outcome,
    new: Outcome,
    evidence: &str,
    old: &str,
    track: &Track,
) -> Option<Order> {
    let (c, f) = (track.cancelled_at?, track.failed_at?);
    // In one log the line read later came later: the new verdict's.
    let failure_is_new = new == Outcome::Error;
    let failure_later = |(cs, ct): (LogOrigin, f64), (fs, ft): (LogOrigin, f64)| {
        if ft == ct && fs != cs { None } else { Some(ft > ct || (ft == ct && failure_is_new)) }
    };
    match (current, new) {
        (Outcome::Cancelled, Outcome::Error) => {
            // `fail` words a replaced verdict as "(was Cancelled: ...)": the cancel stays.
            let what = evidence.split(" (was Cancelled: ").next().unwrap_or(evidence);
            if old.contains(what) {
                // The same failure again (its repr, then the traceback's end).
                return Some(Order::Keep { note: String::new(), confidence: None });
            }
            if evidence.contains(GENERATE_FAILED) && c.0 == f.0 && f.1 - c.1 <= 1.0 {
                return Some(Order::Replace {
                    note: "; the abort before it was vLLM's own, on that error (a client's ends `Request <id> aborted.`)"
                        .to_string(),
                    confidence: None,
                });
            }
            match failure_later(c, f) {
                Some(true) => {
                    Some(Order::Keep { note: format!("; then {what} (after the abort)"), confidence: None })
                }
                None => Some(Order::Keep {
                    note: format!("; in the same second on another log {what}: either could have come first"),
                    confidence: Some(Confidence::Likely),
                }),
                Some(false) => Some(Order::Replace {
                    note: format!("; the abort came after it ({old})"),
                    confidence: None,
                }),
            }
        }
        (Outcome::Error, Outcome::Cancelled) => match failure_later(c, f) {
            Some(false) => Some(Order::Keep { note: format!("; then {evidence}"), confidence: None }),
            None => Some(Order::Replace {
                note: format!("; in the same second on another log {old}: either could have come first"),
                confidence: Some(Confidence::Likely),
            }),
            Some(true) => {
                Some(Order::Replace { note: format!("; then, after the abort, {old}"), confidence: None })
            }
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: LogOrigin = LogOrigin::Decode(0);
    const P: LogOrigin = LogOrigin::Prefill(0);

    fn track(cancel: (LogOrigin, f64), fail: (LogOrigin, f64)) -> Track {
        Track { cancelled_at: Some(cancel), failed_at: Some(fail), ..Track::default() }
    }

    #[test]
    fn a_failure_after_the_abort_is_its_echo_and_one_before_it_the_verdict() {
        let (c, e) = (Outcome::Cancelled, Outcome::Error);
        // The excerpt's order: abort, then the KeyError, same second, same log.
        let after = order(c, e, "KeyError", "aborted", &track((D, 10.0), (D, 10.0)));
        assert!(matches!(after, Some(Order::Keep { confidence: None, .. })));
        // A failure read after the abort but logged a second before it.
        let before = order(c, e, "KeyError", "aborted", &track((D, 10.0), (P, 9.0)));
        assert!(matches!(before, Some(Order::Replace { confidence: None, .. })));
        // Same second on two logs: the cancel stands, not surely.
        let tie = order(c, e, "KeyError", "aborted", &track((D, 10.0), (P, 10.0)));
        assert!(matches!(tie, Some(Order::Keep { confidence: Some(Confidence::Likely), .. })));
        // A failure first, its abort after: the error stays.
        let err_then_abort = order(e, c, "aborted", "KeyError", &track((D, 11.0), (D, 10.0)));
        assert!(matches!(err_then_abort, Some(Order::Keep { confidence: None, .. })));
        // The same, in one second on one log: the line read first came first.
        let same_second = order(e, c, "aborted", "engine dead", &track((D, 10.0), (D, 10.0)));
        assert!(matches!(same_second, Some(Order::Keep { confidence: None, .. })));
        // vLLM's own abort on an unexpected error: abort, then `failed.`.
        let own = order(c, e, GENERATE_FAILED, "aborted", &track((D, 10.0), (D, 10.0)));
        assert!(matches!(own, Some(Order::Replace { confidence: None, .. })));
        // Nothing to order without both.
        assert!(order(c, e, "x", "y", &Track::default()).is_none());
    }
}
