//! A response's logged end (`--enable-log-outputs`: `Generated response
//! <id> (streaming complete)` or a plain response's line, `logs/outputs.rs`):
//! the request is no longer in flight on that instance, so a death after
//! it cuts it no more. Without the flag nothing at INFO marks a stream's
//! end, and `inflight.rs` falls back on the engine's stats lines.

use super::events::hop_of;
use crate::feed::LogOrigin;
use crate::logs::signal::Signal;
use crate::traces::correlator::Correlator;
use crate::traces::store::Store;

impl Correlator {
    /// The log's file was truncated or rotated (a restart script, logrotate,
    /// the demo's loop): its open requests are no longer followed there.
    pub fn on_log_reset(&mut self, src: LogOrigin) {
        self.inflight.started(src);
    }

    /// The request `id` names is over on `src` (its span was exported):
    /// no longer in flight there.
    pub fn on_finished(&mut self, src: LogOrigin, id: &str) {
        if let Some(s) = self.find(id).filter(|s| self.store.get(*s).is_some_and(|e| Store::touches(e, src)))
        {
            self.inflight.answered(src, s, false);
        }
    }

    pub(crate) fn on_response_done(&mut self, src: LogOrigin, sig: &Signal, t: f64) -> bool {
        let mut used = false;
        for id in &sig.ids {
            let Some(s) =
                self.find(id).filter(|s| self.store.get(*s).is_some_and(|e| Store::touches(e, src)))
            else {
                continue;
            };
            self.inflight.answered(src, s, false);
            // The instance's part of the request ends here.
            self.with_phase(s, hop_of(src), src, None, t, |p| {
                p.end.get_or_insert(t);
            });
            used = true;
        }
        used
    }
}
