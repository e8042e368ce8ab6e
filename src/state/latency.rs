//! Latency over time: a role's TTFT or TPOT percentiles per time bin,
//! from the per-interval histogram deltas the state already keeps (the
//! last hour per instance), summed per [`BLOCK_S`] of clock time as they
//! come (`state::blocks`).

use std::cell::RefCell;
use std::collections::HashMap;

use super::AppState;
pub use super::blocks::BLOCK_S;
use super::blocks::{Blocks, CHARTED};
use crate::feed::Role;
use crate::metrics::histogram::Histogram;
use crate::metrics::model::Hist;

/// One bin: its end time (unix seconds), p50 and p90 in seconds, and how
/// many requests it holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub t: f64,
    pub p50: f64,
    pub p90: f64,
    pub count: f64,
}

/// Time bins: `count` of `width` seconds from `start`, each
/// `(start + i·width, start + (i+1)·width]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bins {
    pub start: f64,
    pub width: f64,
    pub count: usize,
}

impl Bins {
    /// About `most` bins at most from `since` to `now`, each a whole
    /// number of blocks wide and starting on a multiple of its width: a
    /// bin holds the same intervals from frame to frame, so its point stays
    /// put as time passes and only the newest one grows.
    pub fn aligned(since: f64, now: f64, most: usize) -> Bins {
        let span = (now - since).max(0.0);
        let width = (span / most.max(1) as f64 / BLOCK_S).ceil().max(1.0) * BLOCK_S;
        let start = (since / width).floor() * width;
        let count = ((now - start) / width).ceil().max(1.0);
        Bins { start, width, count: if count.is_finite() { count as usize } else { 0 } }
    }

    fn of(&self, t: f64) -> usize {
        (((t - self.start) / self.width).ceil() as usize).clamp(1, self.count) - 1
    }

    /// Whether each block lies within one bin.
    fn whole_blocks(&self) -> bool {
        self.width >= BLOCK_S && self.width % BLOCK_S == 0.0 && self.start % BLOCK_S == 0.0
    }
}

/// The role's percentiles per bin up to now, merged across its instances
/// (or only `only`); bins without a request are left out (a gap, not a
/// zero). A bin where every observation was 0 (a prefill's TPOT) is left
/// out too. Each point is at its bin's end, the newest at now. Bins of
/// whole blocks fold the blocks, a bin's blocks once while they stay the
/// same (`folds`); others each interval: the same sums.
pub fn series(
    state: &AppState,
    role: Role,
    hist: Hist,
    bins: Bins,
    only: Option<usize>,
    folds: &Folds,
) -> Vec<Point> {
    if bins.count == 0
        || bins.width.is_nan()
        || bins.width <= 0.0
        || !bins.start.is_finite()
        || state.now <= bins.start
    {
        return Vec::new();
    }
    let mut acc: Vec<Option<Histogram>> = vec![None; bins.count];
    let chosen = state.instances.iter().enumerate().filter(|(i, s)| {
        s.endpoint.role == role && only.is_none_or(|o| o == *i || state.instances[o].endpoint.role != role)
    });
    let by_block = bins.whole_blocks() && CHARTED.contains(&hist);
    for (_, inst) in chosen {
        if by_block {
            fold_blocks(&inst.latency_blocks, hist, bins, &mut acc, folds);
        } else {
            for iv in inst.history.iter().rev().take_while(|iv| iv.t > bins.start) {
                iv.hists.merge_into(&hist, &mut acc[bins.of(iv.t)]);
            }
        }
    }
    acc.into_iter()
        .enumerate()
        .filter_map(|(i, h)| {
            let h = h?;
            if h.total() <= 0.0 || h.sum == 0.0 {
                return None;
            }
            Some(Point {
                t: (bins.start + bins.width * (i + 1) as f64).min(state.now),
                p50: h.quantile(0.5)?,
                p90: h.quantile(0.9)?,
                count: h.total(),
            })
        })
        .collect()
}

/// Adds each bin's blocks to its sum in `acc`. The blocks a bin holds are
/// folded once and their sum kept while they are the same blocks: an hour
/// in, a frame folds the newest bin's blocks and takes the other bins'
/// sums (700 or so blocks a chart) from `folds`. Folding them all was 28 %
/// of a live frame an hour in (`perf`).
fn fold_blocks(blocks: &Blocks, hist: Hist, bins: Bins, acc: &mut [Option<Histogram>], folds: &Folds) {
    let mut run = blocks.newest_after(bins.start).peekable();
    while let Some(&(t, newest, _)) = run.peek() {
        let bin = bins.of(t);
        let from = run.clone();
        let (mut oldest, mut n) = (newest, 0);
        while let Some((_, push, _)) = run.next_if(|(t, _, _)| bins.of(*t) == bin) {
            oldest = push;
            n += 1;
        }
        folds.add((hist, oldest, newest), &mut acc[bin], || {
            let mut sum = None;
            for (_, _, hists) in from.take(n) {
                hists.merge_into(&hist, &mut sum);
            }
            sum
        });
    }
}

/// Sums of runs of blocks, by the chart and the pushes that made the run's
/// oldest and newest block (always the same blocks, `state::blocks`), kept
/// from one frame to the next. A frame forgets those it did not use.
#[derive(Debug, Clone, Default)]
pub struct Folds {
    kept: RefCell<HashMap<(Hist, u64, u64), Kept>>,
}

#[derive(Debug, Clone)]
struct Kept {
    sum: Option<Histogram>,
    used: bool,
}

impl Folds {
    /// Adds the run's sum to `acc`, folding it only if not kept.
    fn add(
        &self,
        run: (Hist, u64, u64),
        acc: &mut Option<Histogram>,
        fold: impl FnOnce() -> Option<Histogram>,
    ) {
        let mut kept = self.kept.borrow_mut();
        let k = kept.entry(run).or_insert_with(|| Kept { sum: fold(), used: false });
        k.used = true;
        if let Some(sum) = &k.sum {
            acc.get_or_insert_with(Histogram::default).merge(sum);
        }
    }

    /// Ends a frame: the sums it did not use are forgotten.
    pub fn end_frame(&self) {
        self.kept.borrow_mut().retain(|_, k| std::mem::take(&mut k.used));
    }

    /// How many sums are kept.
    pub fn len(&self) -> usize {
        self.kept.borrow().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
