//! What an instance's death cuts off: each request it had in flight.

use super::events::hop_of;
use crate::feed::LogOrigin;
use crate::traces::correlator::Correlator;
use crate::traces::evidence::{FactKind, Failure};
use crate::traces::model::{Confidence, Outcome};

impl Correlator {
    /// Every request the instance had in flight when it stopped at `t` is
    /// an error there, whatever was loaded before. A stream that had started
    /// is cut only with `streams`, and only `Likely` (its end is never
    /// logged). `kill`: the restart and the last stats line of a killed
    /// process; a stream no stats line showed running (it began after the
    /// last, or there is none) may have ended anywhere before the restart,
    /// so it is unknown.
    pub(super) fn cut_off(
        &mut self,
        src: LogOrigin,
        cause: &str,
        streams: bool,
        kill: Option<(f64, Option<f64>)>,
        t: f64,
        at: f64,
    ) {
        let cascade = self.stat(src).last_death.as_ref().and_then(|d| d.cascade.clone());
        for o in self.inflight.take(src, t) {
            let done = self
                .store
                .get(o.serial)
                .is_none_or(|e| matches!(e.trace.outcome, Outcome::Error | Outcome::Cancelled));
            if done || (o.streaming && !streams) {
                continue;
            }
            let undated = kill.filter(|(_, stats)| stats.is_none_or(|st| o.since > st));
            if o.streaming
                && let Some((restart, stats)) = undated
            {
                let kind = FactKind::CutUndated {
                    instance: src,
                    gap_s: (restart - t).max(0.0),
                    stats_seen: stats.is_some(),
                };
                self.said(o.serial, t, src, kind, at);
                continue;
            }
            let mut text = if o.streaming {
                format!(
                    "{cause}, with its stream open (HTTP 200 had started it and no end was logged; a stream that ended just before would read the same)"
                )
            } else {
                format!("{cause}, before it answered")
            };
            if let Some(c) = &cascade {
                text.push_str(&format!("; {c}"));
            }
            // A stream's end is never logged: that the death cut it is likely.
            let confidence = if o.streaming { Confidence::Likely } else { Confidence::Sure };
            let x =
                Failure { hop: hop_of(src), what: text, confidence, generate_failed: false, by_proxy: false };
            self.fail_with(o.serial, src, x, t, at);
        }
    }
}
