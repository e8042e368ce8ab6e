//! What a poll of a log produces, how it is read, and which of it is news.

use crate::feed::{TailCounts, TailState};

/// Where to start reading a file that already exists at the first poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAt {
    Beginning,
    /// Only lines appended after the first poll. A file that appears later
    /// (or replaces this one) is always read from its beginning.
    End,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailOptions {
    pub start: StartAt,
    /// Longest line kept, in bytes without the newline; longer ones are skipped.
    pub max_line_bytes: usize,
    /// Most bytes read by one poll, so catching up on a large file is spread
    /// over several batches ([`TailBatch::more`]) instead of one huge one.
    pub max_bytes_per_poll: usize,
}

impl Default for TailOptions {
    fn default() -> Self {
        TailOptions { start: StartAt::Beginning, max_line_bytes: 1 << 20, max_bytes_per_poll: 4 << 20 }
    }
}

/// What one poll produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailBatch {
    /// Complete lines, without `\n` / `\r\n`, in file order.
    pub lines: Vec<String>,
    pub state: TailState,
    /// What happened during this poll only.
    pub counts: TailCounts,
    /// The per-poll byte budget was used up with data left: poll again now.
    pub more: bool,
}

impl TailBatch {
    pub fn new(state: TailState) -> Self {
        TailBatch { lines: Vec::new(), state, counts: TailCounts::default(), more: false }
    }
}

/// Which batches are news for the state: those with lines, with counter
/// changes, or with a state other than the last one let through. A quiet
/// poll of an unchanged file says nothing.
#[derive(Debug, Clone, Default)]
pub struct ChangeFilter {
    last: Option<TailState>,
}

impl ChangeFilter {
    /// As if a batch in `state` had already been let through.
    pub fn after(state: TailState) -> ChangeFilter {
        ChangeFilter { last: Some(state) }
    }

    /// Whether `batch` is news; remembers its state if so.
    pub fn admit(&mut self, batch: &TailBatch) -> bool {
        let news =
            self.last.as_ref() != Some(&batch.state) || !batch.lines.is_empty() || !batch.counts.is_zero();
        if news {
            self.last = Some(batch.state.clone());
        }
        news
    }
}
