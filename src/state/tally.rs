//! The requests seen since start, split by outcome so that the parts sum
//! to the whole: what the Requests panel draws.

use super::AppState;

/// Requests since start and their outcomes.
#[derive(Debug, Clone, PartialEq)]
pub struct Tally {
    /// `traces` (a decode log is tailed: one verdict per request) or
    /// `metrics` (counted from scrape deltas).
    pub source: &'static str,
    pub seen: u64,
    /// (label, count) in a fixed order; they sum to `seen`.
    pub parts: Vec<(&'static str, u64)>,
}

impl Tally {
    pub fn get(&self, label: &str) -> u64 {
        self.parts.iter().find(|(l, _)| *l == label).map_or(0, |(_, n)| *n)
    }
}

impl AppState {
    /// The request happened before pdtop started: read from the logs' past.
    pub fn before_start(&self, t: &crate::traces::Trace) -> bool {
        self.logs.as_ref().is_some_and(|l| l.correlator.before_start(t))
    }

    /// Requests read from the logs' past (before pdtop started).
    pub fn before_start_count(&self) -> u64 {
        self.logs.as_ref().map_or(0, |l| l.correlator.counts().before_start)
    }

    /// Every outcome counted, the undecided ones included: `pending` (the
    /// traces wait for evidence) or `deciding` (a metrics-counted request
    /// that recomputed its prompt, held until the prefill it may have
    /// followed is known to be another's, or one waiting for the prefill
    /// side's next scrape).
    pub fn request_tally(&self) -> Tally {
        let traced = self.logs.as_ref().filter(|l| l.has_decode_log()).map(|l| l.correlator.counts());
        let (source, c, last) = match traced {
            Some(c) => ("traces", c, ("pending", c.pending)),
            None => ("metrics", self.misses.outcomes, ("deciding", self.misses.deciding() as u64)),
        };
        let parts = vec![
            ("loaded", c.loaded),
            ("silent miss", c.silent_miss),
            ("no prefill", c.no_prefill),
            ("error", c.error),
            ("cancelled", c.cancelled),
            ("unknown", c.unknown),
            last,
        ];
        Tally { source, seen: c.seen, parts }
    }
}
