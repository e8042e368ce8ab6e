//! Latency over time: a role's TTFT or TPOT percentiles per time bin,
//! from the per-interval histogram deltas the state already keeps (the
//! last hour per instance). Computed on read; nothing stored.

use super::AppState;
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

/// `bins` equal bins from `since` to now, merged across the role's
/// instances (or only `only`); bins without a request are left out (a gap,
/// not a zero). A bin where every observation was 0 (a prefill's TPOT) is
/// left out too.
pub fn series(
    state: &AppState,
    role: Role,
    hist: Hist,
    since: f64,
    bins: usize,
    only: Option<usize>,
) -> Vec<Point> {
    let span = state.now - since;
    if bins == 0 || span.is_nan() || span <= 0.0 {
        return Vec::new();
    }
    let width = span / bins as f64;
    let mut acc: Vec<Option<Histogram>> = vec![None; bins];
    let chosen = state.instances.iter().enumerate().filter(|(i, s)| {
        s.endpoint.role == role && only.is_none_or(|o| o == *i || state.instances[o].endpoint.role != role)
    });
    for (_, inst) in chosen {
        for iv in inst.history.iter().rev().take_while(|iv| iv.t > since) {
            let Some(h) = iv.hists.get(&hist) else { continue };
            let b = (((iv.t - since) / width).ceil() as usize).clamp(1, bins) - 1;
            acc[b].get_or_insert_with(Histogram::default).merge(&h);
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
                t: since + width * (i + 1) as f64,
                p50: h.quantile(0.5)?,
                p90: h.quantile(0.9)?,
                count: h.total(),
            })
        })
        .collect()
}
