//! The charted histograms (TTFT, TPOT) of an instance's history summed
//! per [`BLOCK_S`] seconds of clock time as intervals come: a latency
//! chart an hour long folds 720 blocks per instance each frame, not 3,600
//! intervals (which were half of a frame's cost an hour in).

use std::collections::VecDeque;
use std::sync::Arc;

use super::interval::{Hists, Interval, share_bounds};
use crate::metrics::histogram::Histogram;
use crate::metrics::model::Hist;

/// Seconds of clock time a block sums; a chart's bins are at least this
/// wide (`ui::latency_chart`'s 5 s).
pub const BLOCK_S: f64 = 5.0;

/// The histograms the charts draw, in `Hist` order.
pub(super) const CHARTED: [Hist; 2] = [Hist::Ttft, Hist::Tpot];

/// One instance's charted histograms per block of [`BLOCK_S`] seconds of
/// clock time, oldest first, kept as long as its history.
#[derive(Debug, Clone, Default)]
pub struct Blocks {
    blocks: VecDeque<Block>,
    /// Bounds shared across blocks, per charted histogram.
    bounds: [Option<Arc<[f64]>>; 2],
}

#[derive(Debug, Clone)]
struct Block {
    key: f64,
    /// The end of its last interval that observed something: where a
    /// chart places it, as it would place that interval.
    t: f64,
    hists: Hists,
}

impl Blocks {
    /// Adds an interval's charted histograms to its block.
    pub fn push(&mut self, iv: &Interval) {
        if !CHARTED.iter().any(|h| iv.hists.contains_key(h)) {
            return;
        }
        // (k·BLOCK_S, (k+1)·BLOCK_S], as a chart's bins end where they close.
        let key = (iv.t / BLOCK_S).ceil() - 1.0;
        let mut sums: [Option<Histogram>; 2] = [None, None];
        if self.blocks.back().is_some_and(|b| b.key == key)
            && let Some(b) = self.blocks.pop_back()
        {
            for (h, sum) in CHARTED.iter().zip(&mut sums) {
                b.hists.merge_into(h, sum);
            }
        }
        for (h, sum) in CHARTED.iter().zip(&mut sums) {
            iv.hists.merge_into(h, sum);
        }
        let shared: Vec<(Hist, &Histogram, Arc<[f64]>)> = CHARTED
            .iter()
            .zip(&sums)
            .zip(&mut self.bounds)
            .filter_map(|((k, h), cache)| h.as_ref().map(|h| (*k, h, share_bounds(cache, &h.bounds))))
            .collect();
        self.blocks.push_back(Block { key, t: iv.t, hists: Hists::from_sorted(shared) });
    }

    /// Each block placed after `t`, newest first: where it is placed, and
    /// its sums.
    pub fn newest_after(&self, t: f64) -> impl Iterator<Item = (f64, &Hists)> {
        self.blocks.iter().rev().take_while(move |b| b.t > t).map(|b| (b.t, &b.hists))
    }

    /// Drops the blocks placed before `t` (the history's oldest interval).
    pub fn forget_before(&mut self, t: f64) {
        while self.blocks.front().is_some_and(|b| b.t < t) {
            self.blocks.pop_front();
        }
    }
}
