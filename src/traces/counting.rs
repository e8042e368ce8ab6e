//! The outcome counts over every trace held, kept until a trace changes.

use super::correlator::Correlator;
use super::model::Counts;

impl Correlator {
    /// pdtop started reading at `at`: what happened before is marked so.
    pub fn set_started(&mut self, at: f64) {
        if self.started.is_none() {
            self.started = Some(at);
            self.store.started = Some(at);
            self.store.rev += 1;
        }
    }

    /// The request happened before pdtop started (read from the logs' past).
    pub fn before_start(&self, t: &super::model::Trace) -> bool {
        self.started.is_some_and(|s| t.first_seen < s)
    }

    pub fn counts(&self) -> Counts {
        debug_assert!(self.touched.is_empty(), "counted with facts unsettled");
        let key = (self.store.rev, self.unattributed_misses);
        if let Some((rev, un, c)) = self.counted.get()
            && (rev, un) == key
        {
            return c;
        }
        let mut c = Counts {
            unattributed_misses: self.unattributed_misses,
            evicted: self.store.evicted,
            ..self.store.gone
        };
        for t in self.store.traces() {
            c.add_trace(t, self.started);
        }
        self.counted.set((key.0, key.1, c));
        c
    }
}
