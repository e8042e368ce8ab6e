//! The charted histograms (TTFT, TPOT) of an instance's history summed
//! per [`BLOCK_S`] seconds of clock time as intervals come: a latency
//! chart an hour long folds 720 blocks per instance each frame, not 3,600
//! intervals (their fold was 55 % of a frame an hour in, `perf`).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

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
    /// The push that made it, unique in the process ([`PUSHES`]).
    push: u64,
    hists: Hists,
}

/// Pushes so far, in every instance's blocks. A block's sums never change
/// under its number (adding to a block makes a new one), and blocks go
/// only from the ends of a deque: so the blocks from one number to another
/// are always the same blocks, and a sum of them can be kept by the two
/// numbers (`latency::Folds`).
static PUSHES: AtomicU64 = AtomicU64::new(0);

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
        let push = PUSHES.fetch_add(1, Ordering::Relaxed);
        self.blocks.push_back(Block { key, t: iv.t, push, hists: Hists::from_sorted(shared) });
    }

    /// Each block placed after `t`, newest first: where it is placed, the
    /// push that made it, and its sums.
    pub fn newest_after(&self, t: f64) -> impl Iterator<Item = (f64, u64, &Hists)> + Clone {
        self.blocks.iter().rev().take_while(move |b| b.t > t).map(|b| (b.t, b.push, &b.hists))
    }

    /// Drops the blocks placed before `t` (the history's oldest interval).
    pub fn forget_before(&mut self, t: f64) {
        while self.blocks.front().is_some_and(|b| b.t < t) {
            self.blocks.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interval(t: f64, ttft_le_1: f64) -> Interval {
        let h = Histogram {
            bounds: vec![1.0, f64::INFINITY],
            counts: vec![ttft_le_1, 2.0],
            sum: 1.5,
            count: 2.0,
        };
        let b: Arc<[f64]> = Arc::from(h.bounds.as_slice());
        Interval { t, hists: Hists::from_sorted([(Hist::Ttft, &h, b)]), ..Default::default() }
    }

    fn ttft(b: &Hists) -> Histogram {
        b.get(&Hist::Ttft).unwrap()
    }

    /// Intervals of one block of clock time are summed, each block placed
    /// at its last interval with data; one without charted data adds
    /// nothing; the history's oldest interval drops the blocks before it.
    #[test]
    fn blocks_sum_their_intervals_and_go_with_the_history() {
        let mut b = Blocks::default();
        b.push(&interval(100.5, 1.0)); // (100, 105]
        b.push(&interval(104.0, 2.0));
        b.push(&Interval { t: 104.9, ..Default::default() });
        b.push(&interval(105.0, 0.0)); // still (100, 105]
        b.push(&interval(105.1, 1.0)); // (105, 110]
        let got: Vec<(f64, Histogram)> = b.newest_after(0.0).map(|(t, _, h)| (t, ttft(h))).collect();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].0, 105.1);
        assert_eq!(got[1].0, 105.0);
        assert_eq!(got[1].1.counts, vec![3.0, 6.0]);
        assert_eq!((got[1].1.sum, got[1].1.count), (4.5, 6.0));
        assert_eq!(b.newest_after(105.0).count(), 1);
        b.forget_before(105.05);
        assert_eq!(b.newest_after(0.0).map(|(t, _, _)| t).collect::<Vec<_>>(), vec![105.1]);
        // An hour of intervals a second keeps its 720 blocks and the one its
        // oldest interval is in, however long it runs.
        let mut b = Blocks::default();
        for s in 0..7200 {
            b.push(&interval(f64::from(s) + 0.5, 1.0));
            b.forget_before(f64::from(s) + 0.5 - 3600.0);
        }
        assert_eq!(b.newest_after(f64::NEG_INFINITY).count(), 721);
    }
}
