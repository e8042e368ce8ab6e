//! The event log's one writer: every part of the state adds its events
//! here, and each one reaches the alerts as it is written.

use super::AppState;
use super::event::{Event, EventKind};

/// Events kept for the log panel.
const EVENTS_CAP: usize = 500;

impl AppState {
    pub(super) fn push_event(&mut self, t: f64, kind: EventKind, text: String) {
        self.push_counted(t, kind, text, 1);
    }

    /// An event that stands for `n` occurrences (misses in one interval).
    pub(super) fn push_counted(&mut self, t: f64, kind: EventKind, text: String, n: u64) {
        self.alerts.on_event(t, kind, &text, n);
        self.events.push_back(Event { t, kind, text });
        self.events.drain(..self.events.len().saturating_sub(EVENTS_CAP));
    }
}
