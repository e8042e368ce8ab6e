//! The two ends of upstream failures waiting for each other
//! (`upstream.rs`): instances' failing answers no proxy report has paired
//! yet, reports no answer has, and the recent reports.

use std::collections::VecDeque;

use crate::traces::model::Hop;
use crate::traces::store::push_capped;

/// An instance's answer and the proxy's report of it lie this close: the
/// instance's stamp is whole seconds, the proxy's line is dated by reads.
const REPORT_S: f64 = 2.0;
/// A decode the proxy then could not reach is a recent report's request
/// when read within this long of it.
const NEXT_STEP_S: f64 = 5.0;
const CAP: usize = 64;

#[derive(Debug, Clone, Default)]
pub(crate) struct Upstream {
    /// Instance answers no report has paired yet: (trace, status, time, hop).
    answers: VecDeque<(u64, u16, f64, Hop)>,
    /// Reports no answer has paired yet: (the report's own trace, status,
    /// the earliest and latest its line can have been printed).
    reports: VecDeque<(u64, u16, f64, f64)>,
    /// Reports, paired or not, and when each was read: the proxy's next
    /// step of that request (a decode it could not reach) is one of theirs.
    recent: VecDeque<(u64, f64)>,
}

impl Upstream {
    /// The oldest answer of `status` near a report printed between `from` and `to`.
    pub fn take_answer(&mut self, status: u16, from: f64, to: f64) -> Option<(u64, Hop)> {
        let k = self
            .answers
            .iter()
            .position(|&(_, st, t, _)| st == status && t >= from - REPORT_S && t <= to + REPORT_S)?;
        self.answers.remove(k).map(|(s, _, _, hop)| (s, hop))
    }

    /// The oldest report of `status` near an answer at `t`.
    pub fn take_report(&mut self, status: u16, t: f64) -> Option<u64> {
        let k = self
            .reports
            .iter()
            .position(|&(_, st, from, to)| st == status && t >= from - REPORT_S && t <= to + REPORT_S)?;
        self.reports.remove(k).map(|(s, ..)| s)
    }

    pub fn answer(&mut self, s: u64, status: u16, t: f64, hop: Hop) {
        push_capped(&mut self.answers, (s, status, t, hop), CAP);
    }

    /// A report with no answer yet, printed between `from` and `to`.
    pub fn report(&mut self, s: u64, status: u16, from: f64, to: f64) {
        push_capped(&mut self.reports, (s, status, from, to), CAP);
    }

    /// A report read at `at`, paired or not.
    pub fn reported(&mut self, s: u64, at: f64) {
        push_capped(&mut self.recent, (s, at), CAP);
    }

    /// Traces moved: `old` now lives on as `new`.
    pub fn moved(&mut self, old: u64, new: u64) {
        self.recent.iter_mut().filter(|(s, _)| *s == old).for_each(|(s, _)| *s = new);
    }

    /// The request a decode the proxy could not reach at `at` was, of
    /// those `open` allows: the oldest recent report's, else (a copy
    /// paired by order may have taken the one reported) the oldest
    /// prefill failure whose report is still to be read.
    pub fn next_step(&mut self, at: f64, open: impl Fn(u64) -> bool) -> Option<u64> {
        if let Some(k) = self.recent.iter().position(|&(s, when)| at - when <= NEXT_STEP_S && open(s)) {
            return self.recent.remove(k).map(|(s, _)| s);
        }
        // An instance's stamp is whole seconds: one more.
        self.answers
            .iter()
            .find(|&&(s, _, t, hop)| hop == Hop::Producer && at - t <= NEXT_STEP_S + 1.0 && open(s))
            .map(|&(s, ..)| s)
    }
}
