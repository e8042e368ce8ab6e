//! Misses called early on a live tail: likely once a quiet request's hit
//! is overdue by the engine's own lag (`HitQueue::wait`), sure when
//! `settle_s` passes without one, unknown when a hit comes late.

use crate::traces::correlator::Correlator;
use crate::traces::model::{Confidence, Outcome};

impl Correlator {
    /// Early misses whose `settle_s` has passed with no hit: sure now,
    /// unless a younger request took a hit meanwhile (FIFO gave it to the
    /// younger; it may have been this one's, scheduled late): then likely.
    pub(in crate::traces) fn confirm_early(&mut self, i: usize, now: f64, force: bool) {
        let settle = self.opts.settle_s;
        while let Some(early) = self.decodes.get(&i).and_then(|d| d.early.front()).cloned() {
            if !force && now - early.added_at < settle {
                break;
            }
            self.decodes.get_mut(&i).map(|d| d.early.pop_front());
            let Some(e) = self.store.get_mut(early.serial) else {
                continue;
            };
            let t = &mut e.trace;
            if t.outcome != Outcome::SilentMiss
                || t.confidence != Confidence::Likely
                || !t.evidence.contains(EARLY_NOTE)
            {
                continue;
            }
            if early.contested {
                t.evidence = t.evidence.replace(EARLY_NOTE, CONTESTED_NOTE);
                continue;
            }
            let (was, is) =
                (format!("within {}", wait_words(early.waited)), format!("within {}", wait_words(settle)));
            t.evidence = t.evidence.replace(EARLY_NOTE, "").replacen(&was, &is, 1);
            t.confidence = Confidence::Sure;
        }
    }

    /// A hit was taken on decode#`i`: the early misses there may have been
    /// its owner.
    pub(in crate::traces) fn contest_early(&mut self, i: usize) {
        if let Some(d) = self.decodes.get_mut(&i) {
            d.early.iter_mut().for_each(|e| e.contested = true);
        }
    }

    /// A hit came with no request waiting for it: the latest early miss
    /// on that decode may have been scheduled late after all.
    pub(in crate::traces) fn late_hit(&mut self, i: usize, at: f64) {
        let Some(early) = self.decodes.get_mut(&i).and_then(|d| d.early.pop_back()) else {
            return;
        };
        let (s, added) = (early.serial, early.added_at);
        let Some(e) = self.store.get_mut(s) else {
            return;
        };
        if e.trace.outcome != Outcome::SilentMiss {
            return;
        }
        let t = &mut e.trace;
        t.outcome = Outcome::Unknown;
        t.confidence = Confidence::Unsure;
        t.evidence = format!(
            "decode#{i} printed an External Cache Hit {} after its Added line with no request waiting: it was this request's, scheduled late, or the next request's, printed before its Added line",
            wait_words(at - added)
        );
    }
}

/// Ends an early miss's evidence when a younger request took a hit before
/// `settle_s` passed.
const CONTESTED_NOTE: &str = " (a younger request took a hit before 1.5 s passed: FIFO gave it to that one, but it may have been this one's, scheduled late)";

/// Ends an early miss's evidence until `settle_s` confirms it.
pub(in crate::traces) const EARLY_NOTE: &str =
    " (no other request was being added, so it was due; sure if none comes within 1.5 s)";

/// A wait as the evidence says it: "350 ms", "1.5 s".
pub(in crate::traces) fn wait_words(s: f64) -> String {
    if s < 1.0 { format!("{:.0} ms", s * 1e3) } else { format!("{s:.1} s") }
}
