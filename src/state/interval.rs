//! What changed between two scrapes, stored compactly: an hour of these is
//! kept per instance, so the counters keep only their values other than
//! zero (an idle interval allocates nothing) and each histogram delta keeps its bucket bounds shared with every other interval
//! and its cumulative counts as runs (a delta of a few requests moves a few
//! buckets; the rest repeat the value before them). Both read back exactly
//! what was stored.

use std::fmt;
use std::sync::Arc;

use crate::metrics::histogram::Histogram;
use crate::metrics::model::{Counter, Hist};

/// What changed between two consecutive good scrapes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Interval {
    pub t: f64,
    pub dt: f64,
    pub counters: Counters,
    pub hists: Hists,
    pub kv_usage: Option<f64>,
    pub running: Option<f64>,
    pub waiting: Option<f64>,
    /// This interval began with a restart (its deltas count from zero).
    pub after_restart: bool,
    /// The counters went back under the same process start: no restart,
    /// and nothing counted (see `instance::continuity`).
    pub rewound: bool,
}

impl Interval {
    pub fn counter(&self, c: Counter) -> f64 {
        self.counters.get(&c).copied().unwrap_or(0.0)
    }
}

/// Counter deltas by counter, in `Counter` order; a counter the scrape
/// did not have is absent (not zero). Only values other than zero take
/// room: most intervals are idle, and those allocate nothing.
#[derive(Clone, Default, PartialEq)]
pub struct Counters {
    present: u32,
    /// Those of `present` whose value is not `+0.0` (bit for bit).
    nonzero: u32,
    /// Their values, in `Counter` order.
    vals: Box<[f64]>,
}

/// What an absent value (one of `present`, not of `nonzero`) reads as.
static ZERO: f64 = 0.0;

const _: () = assert!(Counter::ALL.len() <= 32);

impl Counters {
    /// Built in one go from counters in `Counter` order, each at most once.
    pub(crate) fn from_sorted(items: impl IntoIterator<Item = (Counter, f64)>) -> Counters {
        let (mut present, mut nonzero, mut vals) = (0u32, 0u32, Vec::new());
        for (c, v) in items {
            debug_assert!(present >> c as usize == 0, "not in Counter order");
            present |= 1 << c as usize;
            if v.to_bits() != 0 {
                nonzero |= 1 << c as usize;
                vals.push(v);
            }
        }
        Counters { present, nonzero, vals: vals.into_boxed_slice() }
    }

    pub fn get(&self, c: &Counter) -> Option<&f64> {
        let bit = 1u32 << *c as usize;
        if self.present & bit == 0 {
            None
        } else if self.nonzero & bit == 0 {
            Some(&ZERO)
        } else {
            Some(&self.vals[(self.nonzero & (bit - 1)).count_ones() as usize])
        }
    }

    pub fn contains_key(&self, c: &Counter) -> bool {
        self.present & (1 << *c as usize) != 0
    }

    pub fn insert(&mut self, c: Counter, v: f64) -> Option<f64> {
        let old = self.get(&c).copied();
        let rest = self.iter().filter(|(k, _)| **k != c).map(|(k, v)| (*k, *v));
        let mut all: Vec<(Counter, f64)> = rest.chain([(c, v)]).collect();
        all.sort_by_key(|(k, _)| *k);
        *self = Counters::from_sorted(all);
        old
    }

    pub fn iter(&self) -> CountersIter<'_> {
        CountersIter { of: self, next: 0 }
    }

    pub fn values(&self) -> impl Iterator<Item = &f64> {
        self.iter().map(|(_, v)| v)
    }

    pub fn len(&self) -> usize {
        self.present.count_ones() as usize
    }

    pub fn is_empty(&self) -> bool {
        self.present == 0
    }
}

/// The counters present, in `Counter` order.
pub struct CountersIter<'a> {
    of: &'a Counters,
    next: usize,
}

impl<'a> Iterator for CountersIter<'a> {
    type Item = (&'a Counter, &'a f64);
    fn next(&mut self) -> Option<Self::Item> {
        while let Some(c) = Counter::ALL.get(self.next) {
            self.next += 1;
            if let Some(v) = self.of.get(c) {
                return Some((c, v));
            }
        }
        None
    }
}

impl<'a> IntoIterator for &'a Counters {
    type Item = (&'a Counter, &'a f64);
    type IntoIter = CountersIter<'a>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl fmt::Debug for Counters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// One histogram delta without its counts (those are runs in `Hists::runs`).
#[derive(Clone, PartialEq)]
struct Head {
    hist: Hist,
    /// Length of `counts` (the same as the bounds for any parsed histogram).
    len: u32,
    /// End of this histogram's runs in `Hists::runs`.
    runs_end: u32,
    bounds: Arc<[f64]>,
    sum: f64,
    count: f64,
}

/// Histogram deltas by histogram, in `Hist` order. `get` and iteration
/// hand out the full `Histogram`, rebuilt.
#[derive(Clone, Default, PartialEq)]
pub struct Hists {
    heads: Box<[Head]>,
    /// (first index, cumulative count from there on), per histogram.
    runs: Box<[(u32, f64)]>,
}

impl Hists {
    pub fn get(&self, hist: &Hist) -> Option<Histogram> {
        let i = self.heads.iter().position(|h| h.hist == *hist)?;
        Some(self.decode(i))
    }

    pub fn contains_key(&self, hist: &Hist) -> bool {
        self.heads.iter().any(|h| h.hist == *hist)
    }

    /// Adds `hist`, where this interval has it, to `acc` (made on first
    /// use), as `Histogram::merge` adds `get(hist)`; with `acc`'s bounds it
    /// adds the runs in place, rebuilding nothing. The charts and windows
    /// fold up to an hour of intervals a frame: rebuilding each histogram
    /// (and freeing it) was half of that fold's cost an hour in (`perf`).
    pub fn merge_into(&self, hist: &Hist, acc: &mut Option<Histogram>) {
        let Some(i) = self.heads.iter().position(|h| h.hist == *hist) else { return };
        let head = &self.heads[i];
        let acc = acc.get_or_insert_with(Histogram::default);
        if acc.bounds.is_empty() || *acc.bounds != *head.bounds {
            acc.merge(&self.decode(i));
            return;
        }
        // `merge` adds counts pairwise, up to the shorter of the two.
        let n = acc.counts.len().min(head.len as usize);
        let runs = self.runs_of(i);
        for (k, (from, v)) in runs.iter().enumerate() {
            let to = runs.get(k + 1).map_or(head.len, |(next, _)| *next) as usize;
            for c in &mut acc.counts[(*from as usize).min(n)..to.min(n)] {
                *c += v;
            }
        }
        acc.sum += head.sum;
        acc.count += head.count;
    }

    /// `hist`'s total count and its sum, without rebuilding it.
    pub fn total_and_sum(&self, hist: &Hist) -> Option<(f64, f64)> {
        let i = self.heads.iter().position(|h| h.hist == *hist)?;
        let head = &self.heads[i];
        let last = self.runs_of(i).last().map_or(head.count, |(_, v)| *v);
        // As `Histogram::total` reads the rebuilt one.
        Some((last.max(head.count), head.sum))
    }

    /// Adds or replaces `hist`.
    pub fn insert(&mut self, hist: Hist, h: Histogram) {
        let mut all: Vec<(Hist, Histogram, Arc<[f64]>)> = (0..self.heads.len())
            .filter(|i| self.heads[*i].hist != hist)
            .map(|i| (self.heads[i].hist, self.decode(i), self.heads[i].bounds.clone()))
            .collect();
        all.push((hist, h.clone(), Arc::from(h.bounds.as_slice())));
        all.sort_by_key(|(k, _, _)| *k);
        *self = Hists::from_sorted(all.iter().map(|(k, h, b)| (*k, h, b.clone())));
    }

    /// Built in one go from histograms in `Hist` order, each at most once,
    /// with bounds the caller shares across intervals (see [`share_bounds`]).
    pub(crate) fn from_sorted<'h>(
        items: impl IntoIterator<Item = (Hist, &'h Histogram, Arc<[f64]>)>,
    ) -> Hists {
        let mut heads: Vec<Head> = Vec::new();
        let mut runs: Vec<(u32, f64)> = Vec::new();
        for (hist, h, bounds) in items {
            debug_assert!(heads.last().is_none_or(|last| last.hist < hist), "not in Hist order");
            let from = runs.len();
            for (i, c) in h.counts.iter().enumerate() {
                // Bit equality, so that -0.0 and NaN come back as they went in.
                if runs.len() == from || runs.last().is_some_and(|(_, v)| v.to_bits() != c.to_bits()) {
                    runs.push((i as u32, *c));
                }
            }
            let (len, runs_end) = (h.counts.len() as u32, runs.len() as u32);
            heads.push(Head { hist, len, runs_end, bounds, sum: h.sum, count: h.count });
        }
        Hists { heads: heads.into_boxed_slice(), runs: runs.into_boxed_slice() }
    }

    pub fn iter(&self) -> HistsIter<'_> {
        HistsIter { of: self, next: 0 }
    }

    pub fn len(&self) -> usize {
        self.heads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heads.is_empty()
    }

    fn runs_of(&self, i: usize) -> &[(u32, f64)] {
        let start = if i == 0 { 0 } else { self.heads[i - 1].runs_end as usize };
        &self.runs[start..self.heads[i].runs_end as usize]
    }

    fn decode(&self, i: usize) -> Histogram {
        let head = &self.heads[i];
        let mut counts = Vec::with_capacity(head.len as usize);
        let runs = self.runs_of(i);
        for (k, (from, v)) in runs.iter().enumerate() {
            let to = runs.get(k + 1).map_or(head.len, |(next, _)| *next);
            counts.extend(std::iter::repeat_n(*v, (to - from) as usize));
        }
        Histogram { bounds: head.bounds.to_vec(), counts, sum: head.sum, count: head.count }
    }
}

/// Each histogram, rebuilt, in `Hist` order.
pub struct HistsIter<'a> {
    of: &'a Hists,
    next: usize,
}

impl Iterator for HistsIter<'_> {
    type Item = (Hist, Histogram);
    fn next(&mut self) -> Option<Self::Item> {
        let head = self.of.heads.get(self.next)?;
        self.next += 1;
        Some((head.hist, self.of.decode(self.next - 1)))
    }
}

impl<'a> IntoIterator for &'a Hists {
    type Item = (Hist, Histogram);
    type IntoIter = HistsIter<'a>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl fmt::Debug for Hists {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// The shared copy of `bounds`: the one in `cache` when equal, else a new
/// one that replaces it.
pub(crate) fn share_bounds(cache: &mut Option<Arc<[f64]>>, bounds: &[f64]) -> Arc<[f64]> {
    match cache {
        Some(b) if **b == *bounds => b.clone(),
        _ => cache.insert(Arc::from(bounds)).clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_order_is_declaration_order() {
        for (i, c) in Counter::ALL.iter().enumerate() {
            assert_eq!(*c as usize, i);
        }
        assert!(Counter::ALL.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn counters_keep_absent_apart_from_zero() {
        let mut c = Counters::default();
        assert_eq!(c.insert(Counter::RequestsOk, 0.0), None);
        c.insert(Counter::PromptTokens, 5.0);
        assert_eq!(c.insert(Counter::PromptTokens, 7.0), Some(5.0));
        assert!(c.contains_key(&Counter::RequestsOk));
        assert!(!c.contains_key(&Counter::PromptExternal));
        let got: Vec<(Counter, f64)> = c.iter().map(|(k, v)| (*k, *v)).collect();
        assert_eq!(got, vec![(Counter::PromptTokens, 7.0), (Counter::RequestsOk, 0.0)]);
        assert_eq!(c.len(), 2);
        c.insert(Counter::PromptLocalCompute, 3.0);
        c.insert(Counter::NixlExpired, -0.0);
        assert_eq!(c.get(&Counter::PromptLocalCompute), Some(&3.0));
        assert_eq!(c.get(&Counter::PromptTokens), Some(&7.0));
        assert_eq!(c.get(&Counter::NixlExpired).map(|v| v.to_bits()), Some((-0.0f64).to_bits()));
        let built = Counters::from_sorted(c.iter().map(|(k, v)| (*k, *v)));
        assert_eq!(built, c);
    }

    #[test]
    fn histograms_come_back_exactly() {
        let odd = Histogram {
            bounds: vec![0.5, 1.0, 2.0, f64::INFINITY],
            counts: vec![-0.0, 0.0, f64::NAN, 3.5],
            sum: 1.25,
            count: 4.0,
        };
        let plain = Histogram {
            bounds: vec![1.0, 2.0, 5.0, 10.0, f64::INFINITY],
            counts: vec![0.0, 0.0, 2.0, 2.0, 3.0],
            sum: 9.0,
            count: 3.0,
        };
        let short = Histogram { bounds: vec![1.0], counts: vec![], sum: 0.0, count: 0.0 };
        let mut h = Hists::default();
        h.insert(Hist::Tpot, plain.clone());
        h.insert(Hist::Ttft, odd.clone());
        h.insert(Hist::E2e, short.clone());
        h.insert(Hist::Tpot, plain.clone()); // replaces
        assert_eq!(h.len(), 3);
        let back = h.get(&Hist::Ttft).unwrap();
        assert_eq!(back.bounds, odd.bounds);
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&back.counts), bits(&odd.counts));
        assert_eq!(h.get(&Hist::Tpot), Some(plain));
        assert_eq!(h.get(&Hist::E2e), Some(short));
        assert_eq!(h.iter().map(|(k, _)| k).collect::<Vec<_>>(), vec![Hist::Ttft, Hist::Tpot, Hist::E2e]);
        assert!(h.get(&Hist::NixlBytes).is_none());
    }

    fn histogram() -> impl proptest::strategy::Strategy<Value = Histogram> {
        use proptest::prelude::*;
        // Few bound sets, so that intervals share them or not; counts in
        // runs (what the encoding packs), short or long against the bounds.
        let bounds = prop::sample::select(vec![
            vec![1.0, 2.0, 5.0, f64::INFINITY],
            vec![0.5, 1.0, 2.0, 5.0, 10.0, f64::INFINITY],
            vec![1.0, f64::NAN, f64::INFINITY],
        ]);
        let count = prop::sample::select(vec![0.0, -0.0, 1.0, 2.5, 7.0, f64::NAN]);
        (bounds, prop::collection::vec(count, 0..8), -1.0..10.0f64, 0.0..9.0f64)
            .prop_map(|(bounds, counts, sum, count)| Histogram { bounds, counts, sum, count })
    }

    proptest::proptest! {
        #[test]
        fn merge_into_adds_what_merge_adds(
            hs in proptest::collection::vec(proptest::option::of(histogram()), 0..6),
        ) {
            let mut cache = None;
            let intervals: Vec<Hists> = hs
                .iter()
                .map(|h| match h {
                    None => Hists::default(),
                    Some(h) => {
                        let b = share_bounds(&mut cache, &h.bounds);
                        Hists::from_sorted([(Hist::Ttft, h, b)])
                    }
                })
                .collect();
            let (mut slow, mut fast) = (None::<Histogram>, None::<Histogram>);
            for iv in &intervals {
                if let Some(h) = iv.get(&Hist::Ttft) {
                    slow.get_or_insert_with(Histogram::default).merge(&h);
                }
                iv.merge_into(&Hist::Ttft, &mut fast);
            }
            let bits = |h: &Option<Histogram>| {
                h.as_ref().map(|h| {
                    let b = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    (b(&h.bounds), b(&h.counts), h.sum.to_bits(), h.count.to_bits())
                })
            };
            proptest::prop_assert_eq!(bits(&fast), bits(&slow));
        }
    }

    #[test]
    fn bounds_are_shared_while_equal() {
        let mut cache = None;
        let a = share_bounds(&mut cache, &[1.0, f64::INFINITY]);
        let b = share_bounds(&mut cache, &[1.0, f64::INFINITY]);
        assert!(Arc::ptr_eq(&a, &b));
        let c = share_bounds(&mut cache, &[2.0, f64::INFINITY]);
        assert!(!Arc::ptr_eq(&a, &c));
    }
}
