//! A vLLM line wrapped over two physical lines (a terminal's wrap in a
//! pasted log, a repr broken by the writer): `logs::reader::Reader` joins
//! an indented continuation to the stamped line before it when the joined
//! text says something. The correlator has already read the first half:
//! the joined line replaces it where that half said less (nothing, or no
//! request id), and is otherwise not read twice.

use crate::feed::LogOrigin;
use crate::traces::correlator::Correlator;
use crate::traces::instance::per_log::PrevLine;

impl Correlator {
    /// One physical line of an instance's log; returns whether it was used.
    pub(crate) fn on_instance_line(&mut self, src: LogOrigin, raw: &str, at: f64) -> bool {
        let c = self.readers.entry(src).or_default().classify(raw);
        let prev = self.prev_line.remove(&src);
        let Some(line) = c.line else {
            return false;
        };
        if c.continues
            && let Some(p) = prev
            && (p.unknown || p.noise || c.ids.len() > p.ids)
        {
            let st = self.stat(src);
            st.unknown -= u64::from(p.unknown);
            st.noise -= u64::from(p.noise);
            if let Some(ev) = &p.event
                && let Some(i) = self.log_events.iter().rposition(|e| e == ev)
            {
                self.log_events.remove(i);
            }
            return self.on_instance(src, line, at, false);
        }
        if let Some(n) = self.notes.read(src, raw, &line, at) {
            self.logs.max_log_len.insert(src, n);
        }
        let noise = self.noise.entry(src).or_default().classify(raw, &line);
        let before = self.stats.get(&src).map_or((0, 0), |s| (s.unknown, s.noise));
        let events = self.log_events.len();
        let used = self.on_instance(src, line, at, noise.is_some());
        let after = self.stats.get(&src).map_or((0, 0), |s| (s.unknown, s.noise));
        let event = (self.log_events.len() > events).then(|| self.log_events.back().cloned()).flatten();
        let p = PrevLine { unknown: after.0 > before.0, noise: after.1 > before.1, ids: c.ids.len(), event };
        self.prev_line.insert(src, p);
        used
    }
}
