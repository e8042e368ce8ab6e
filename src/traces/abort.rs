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

use super::evidence::{Fact, Failure};
use crate::feed::LogOrigin;

/// Which of an abort and the failures came first.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Ordered {
    /// Every failure came after the abort (its echo) or in the same second
    /// on another log (`ties`: either could have come first).
    Cancel { ties: Vec<(LogOrigin, f64)> },
    /// A failure came first; `own_abort`: the abort was vLLM's own, on an
    /// error (`Request <id> failed.` right after it on the same log).
    Error { own_abort: bool },
}

/// `c` is the abort (the `ci`-th fact), `fails` the failures with their places.
pub(super) fn order(c: &Fact, ci: usize, fails: &[(usize, &Fact, &Failure)]) -> Ordered {
    let mut ties = Vec::new();
    for (fi, f, x) in fails {
        if x.generate_failed && f.src == c.src && f.t >= c.t && f.t - c.t <= 1.0 {
            return Ordered::Error { own_abort: true };
        }
        // In one log the line read first came first.
        let before = f.t < c.t || (f.t == c.t && f.src == c.src && *fi < ci);
        if before {
            return Ordered::Error { own_abort: false };
        }
        if f.t == c.t && f.src != c.src {
            ties.push((f.src, f.t));
        }
    }
    Ordered::Cancel { ties }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traces::evidence::FactKind;
    use crate::traces::model::{Confidence, Hop};

    const D: LogOrigin = LogOrigin::Decode(0);
    const P: LogOrigin = LogOrigin::Prefill(0);

    fn abort(t: f64) -> Fact {
        Fact { t, src: D, kind: FactKind::Aborted }
    }

    fn fail(src: LogOrigin, t: f64, generate_failed: bool) -> (Fact, Failure) {
        let x = Failure {
            hop: Hop::Consumer,
            what: "x".into(),
            confidence: Confidence::Sure,
            generate_failed,
            by_proxy: false,
        };
        (Fact { t, src, kind: FactKind::Failed(x.clone()) }, x)
    }

    fn ord(c: f64, ci: usize, fs: &[(usize, LogOrigin, f64, bool)]) -> Ordered {
        let made: Vec<(usize, Fact, Failure)> = fs
            .iter()
            .map(|(i, s, t, g)| {
                let (f, x) = fail(*s, *t, *g);
                (*i, f, x)
            })
            .collect();
        let refs: Vec<(usize, &Fact, &Failure)> = made.iter().map(|(i, f, x)| (*i, f, x)).collect();
        order(&abort(c), ci, &refs)
    }

    #[test]
    fn a_failure_after_the_abort_is_its_echo_and_one_before_it_the_verdict() {
        // The excerpt's order: abort, then the KeyError, same second, same log.
        assert_eq!(ord(10.0, 0, &[(1, D, 10.0, false)]), Ordered::Cancel { ties: vec![] });
        // A failure read after the abort but logged a second before it.
        assert_eq!(ord(10.0, 0, &[(1, P, 9.0, false)]), Ordered::Error { own_abort: false });
        // Same second on two logs: the cancel stands, not surely.
        assert_eq!(ord(10.0, 0, &[(1, P, 10.0, false)]), Ordered::Cancel { ties: vec![(P, 10.0)] });
        // A failure first, its abort after: the error stays.
        assert_eq!(ord(11.0, 1, &[(0, D, 10.0, false)]), Ordered::Error { own_abort: false });
        // The same, in one second on one log: the line read first came first.
        assert_eq!(ord(10.0, 1, &[(0, D, 10.0, false)]), Ordered::Error { own_abort: false });
        // vLLM's own abort on an unexpected error: abort, then `failed.`.
        assert_eq!(ord(10.0, 0, &[(1, D, 10.0, true)]), Ordered::Error { own_abort: true });
    }
}
