//! Cumulative Prometheus histograms: deltas between scrapes, merging across
//! instances, and quantiles by linear interpolation inside a bucket (the same
//! rule as PromQL's `histogram_quantile`).

/// A cumulative histogram: `counts[i]` observations were `<= bounds[i]`.
/// The last bound is always `+Inf`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Histogram {
    pub bounds: Vec<f64>,
    pub counts: Vec<f64>,
    pub sum: f64,
    pub count: f64,
}

/// Sorts `(le, count)` pairs and adds up those of the same bound (several
/// engines' series): linear after the sort, where a lookup per sample was
/// quadratic in the number of distinct bounds a hostile body can invent.
pub fn merge_bounds(per_le: &mut Vec<(f64, f64)>) {
    per_le.sort_by(|a, b| a.0.total_cmp(&b.0));
    per_le.dedup_by(|cur, kept| {
        let same = cur.0 == kept.0;
        if same {
            kept.1 += cur.1;
        }
        same
    });
}

impl Histogram {
    /// An empty histogram with the given finite bounds (`+Inf` is added).
    pub fn empty(finite_bounds: &[f64]) -> Histogram {
        let mut bounds = finite_bounds.to_vec();
        bounds.push(f64::INFINITY);
        Histogram { counts: vec![0.0; bounds.len()], bounds, sum: 0.0, count: 0.0 }
    }

    /// Total observations (the `+Inf` bucket, or `_count`).
    pub fn total(&self) -> f64 {
        self.counts.last().copied().unwrap_or(self.count).max(self.count)
    }

    /// `self - prev`, or `None` when the two cannot be subtracted: other
    /// bounds, or a count that went down (the process restarted, so the
    /// whole of `self` is new since the reset).
    pub fn delta(&self, prev: &Histogram) -> Option<Histogram> {
        if self.bounds != prev.bounds {
            return None;
        }
        let mut counts = Vec::with_capacity(self.counts.len());
        for (c, p) in self.counts.iter().zip(&prev.counts) {
            if c < p {
                return None;
            }
            counts.push(c - p);
        }
        if self.count < prev.count {
            return None;
        }
        Some(Histogram {
            bounds: self.bounds.clone(),
            counts,
            sum: (self.sum - prev.sum).max(0.0),
            count: self.count - prev.count,
        })
    }

    /// Adds `other` into `self`. Identical bounds add bucket by bucket;
    /// otherwise `other` is re-bucketed onto `self`'s bounds, counting each
    /// of its buckets at the first bound of `self` that is at least as high
    /// (never moves an observation below its true bucket).
    pub fn merge(&mut self, other: &Histogram) {
        if self.bounds.is_empty() {
            *self = other.clone();
            return;
        }
        if self.bounds == other.bounds {
            for (a, b) in self.counts.iter_mut().zip(&other.counts) {
                *a += b;
            }
        } else {
            let per_bucket = other.per_bucket();
            let mut added = vec![0.0; self.bounds.len()];
            for (ub, n) in other.bounds.iter().zip(per_bucket) {
                let idx = self.bounds.iter().position(|b| b >= ub).unwrap_or(self.bounds.len() - 1);
                added[idx] += n;
            }
            let mut running = 0.0;
            for (c, a) in self.counts.iter_mut().zip(added) {
                running += a;
                *c += running;
            }
        }
        self.sum += other.sum;
        self.count += other.count;
    }

    /// Observations per bucket (not cumulative).
    pub fn per_bucket(&self) -> Vec<f64> {
        let mut prev = 0.0;
        self.counts
            .iter()
            .map(|c| {
                let n = (c - prev).max(0.0);
                prev = *c;
                n
            })
            .collect()
    }

    /// The q-quantile (0..=1), or `None` with no observations. Inside a
    /// bucket the value is interpolated linearly; the first bucket starts at
    /// 0; a quantile that falls in the `+Inf` bucket is reported as the
    /// highest finite bound (as PromQL does).
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.total();
        if total.is_nan() || total <= 0.0 || self.bounds.is_empty() {
            return None;
        }
        let rank = q.clamp(0.0, 1.0) * total;
        let mut lower_bound = 0.0;
        let mut lower_count = 0.0;
        for (ub, c) in self.bounds.iter().zip(&self.counts) {
            if *c >= rank && *c > lower_count {
                if ub.is_infinite() {
                    return Some(lower_bound);
                }
                let frac = (rank - lower_count) / (c - lower_count);
                return Some(lower_bound + (ub - lower_bound) * frac);
            }
            lower_bound = *ub;
            lower_count = *c;
        }
        Some(lower_bound)
    }

    /// Mean of the observations, from `_sum / _count`.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0.0).then(|| self.sum / self.count)
    }

    /// Observations strictly above `threshold`, counted from the first bound
    /// that is `>= threshold` (so it never counts one that may be below).
    pub fn count_above(&self, threshold: f64) -> f64 {
        let at = self.bounds.iter().position(|b| *b >= threshold).map(|i| self.counts[i]).unwrap_or(0.0);
        (self.total() - at).max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(bounds: &[f64], per_bucket: &[f64]) -> Histogram {
        let mut hist = Histogram::empty(bounds);
        let mut run = 0.0;
        for (i, n) in per_bucket.iter().enumerate() {
            run += n;
            hist.counts[i] = run;
        }
        hist.count = run;
        hist
    }

    #[test]
    fn quantiles_worked_by_hand() {
        // Buckets (0,0.1]: 10, (0.1,0.25]: 20, (0.25,0.5]: 10, +Inf: 0. Total 40.
        let hist = h(&[0.1, 0.25, 0.5], &[10.0, 20.0, 10.0, 0.0]);
        // p50: rank 20, in (0.1,0.25]: 0.1 + 0.15 * (20-10)/20 = 0.175
        assert!((hist.quantile(0.5).unwrap() - 0.175).abs() < 1e-12);
        // p90: rank 36, in (0.25,0.5]: 0.25 + 0.25 * (36-30)/10 = 0.4
        assert!((hist.quantile(0.9).unwrap() - 0.4).abs() < 1e-12);
        // p10: rank 4 in the first bucket from 0: 0.1 * 4/10 = 0.04
        assert!((hist.quantile(0.1).unwrap() - 0.04).abs() < 1e-12);
    }

    #[test]
    fn quantile_in_inf_bucket_is_highest_finite_bound() {
        let hist = h(&[1.0, 2.0], &[1.0, 0.0, 3.0]);
        assert_eq!(hist.quantile(0.99), Some(2.0));
    }

    #[test]
    fn empty_has_no_quantile() {
        assert_eq!(Histogram::empty(&[1.0]).quantile(0.5), None);
    }

    #[test]
    fn delta_and_reset() {
        let a = h(&[1.0], &[1.0, 1.0]);
        let b = h(&[1.0], &[3.0, 1.0]);
        let d = b.delta(&a).unwrap();
        assert_eq!(d.counts, vec![2.0, 2.0]);
        assert_eq!(d.count, 2.0);
        // A reset (counts went down) cannot be subtracted.
        assert!(a.delta(&b).is_none());
    }

    #[test]
    fn merge_same_and_different_bounds() {
        let mut a = h(&[1.0, 2.0], &[1.0, 1.0, 0.0]);
        a.merge(&h(&[1.0, 2.0], &[0.0, 2.0, 1.0]));
        assert_eq!(a.per_bucket(), vec![1.0, 3.0, 1.0]);
        let mut b = h(&[1.0, 2.0], &[0.0, 0.0, 0.0]);
        // 1 observation <= 0.5, 1 in (0.5, 1.5] -> goes to bound 2.0.
        b.merge(&h(&[0.5, 1.5], &[1.0, 1.0, 0.0]));
        assert_eq!(b.per_bucket(), vec![1.0, 1.0, 0.0]);
    }

    #[test]
    fn count_above_threshold() {
        let hist = h(&[10.0, 20.0, 50.0, 100.0], &[3.0, 1.0, 0.0, 2.0, 1.0]);
        assert_eq!(hist.count_above(20.0), 3.0);
        assert_eq!(hist.count_above(17.0), 3.0);
        assert_eq!(hist.count_above(50.0), 3.0);
    }
}
