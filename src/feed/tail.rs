//! How a tailed log is doing.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TailState {
    /// The file is open and being followed.
    Following,
    /// Followed, with more already written than one read takes (a long
    /// log opened mid-run): what was read is not all it printed before
    /// the read, and the next read comes at once.
    CatchingUp,
    /// The file does not exist (yet, or any more); polling continues.
    Missing,
    /// The source reached its end (stdin closed). Files never end.
    Ended,
    /// Reading failed for another reason (e.g. permission denied); retried
    /// every interval. Only produced by the async runners.
    Error(String),
}

/// Counters, as deltas in a batch and as totals over a file's life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TailCounts {
    pub truncations: u64,
    pub rotations: u64,
    pub long_lines_skipped: u64,
    pub invalid_utf8_lines: u64,
}

impl TailCounts {
    pub fn add(&mut self, o: &TailCounts) {
        self.truncations += o.truncations;
        self.rotations += o.rotations;
        self.long_lines_skipped += o.long_lines_skipped;
        self.invalid_utf8_lines += o.invalid_utf8_lines;
    }

    pub fn is_zero(&self) -> bool {
        *self == TailCounts::default()
    }
}
