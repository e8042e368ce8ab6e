//! Misses called early on a live tail: likely once a quiet request's hit
//! is overdue by the engine's own lag (`HitQueue::wait`), sure when
//! `settle_s` passes without one, unknown when a hit comes late. The
//! verdicts are `decide`'s; this keeps the list of early misses to settle
//! again and adds the facts that change them.

use crate::feed::LogOrigin;
use crate::traces::correlator::Correlator;
use crate::traces::evidence::FactKind;
use crate::traces::model::Outcome;

impl Correlator {
    /// Early misses whose `settle_s` has passed: settled again (sure now,
    /// unless a younger request took a hit meanwhile).
    pub(in crate::traces) fn confirm_early(&mut self, i: usize, now: f64, force: bool) {
        let settle = self.opts.settle_s;
        while let Some(early) = self.decodes.get(&i).and_then(|d| d.early.front()).cloned() {
            if !force && now - early.added_at < settle {
                break;
            }
            self.decodes.get_mut(&i).map(|d| d.early.pop_front());
            self.settle_by(early.serial, now, force);
        }
    }

    /// A hit was taken on decode#`i`: the early misses there may have been
    /// its owner (FIFO gave it to the younger; it may have been theirs,
    /// scheduled late).
    pub(in crate::traces) fn contest_early(&mut self, i: usize, at: f64) {
        let serials: Vec<u64> =
            self.decodes.get(&i).map(|d| d.early.iter().map(|e| e.serial).collect()).unwrap_or_default();
        for s in serials {
            if let Some(e) = self.store.get_mut(s) {
                e.facts.push_once(at, LogOrigin::Decode(i), FactKind::EarlyContested);
            }
            self.settle(s, at);
        }
    }

    /// A hit came with no request waiting for it: the latest early miss
    /// on that decode may have been scheduled late after all.
    pub(in crate::traces) fn late_hit(&mut self, i: usize, at: f64) {
        let Some(early) = self.decodes.get_mut(&i).and_then(|d| d.early.pop_back()) else {
            return;
        };
        if self.store.outcome(early.serial) != Some(Outcome::SilentMiss) {
            return;
        }
        let kind = FactKind::LateHit { decode: i, after: at - early.added_at };
        self.said(early.serial, at, LogOrigin::Decode(i), kind, at);
    }
}
