//! What an instance's log says of the instance rather than of a request:
//! its start-up configuration and how many requests its clients cancelled.
//! Taken from the one parse of each line, and kept until the state's
//! instance checks read them (`drain_instance_notes`), so no line is
//! parsed a second time for them.

use std::collections::VecDeque;

use crate::feed::LogOrigin;
use crate::logs::startup::config_message;
use crate::logs::vllm::{VllmEvent, VllmLine};

/// Notes kept between two drains; a caller that never drains loses the
/// oldest, never memory.
const MAX_NOTES: usize = 4096;

#[derive(Debug, Clone, PartialEq)]
pub enum InstanceNote {
    /// A start-up line's message (`non-default args: ...`, the engine's
    /// config, `KVTransferConfig(...)`, the version banner).
    Config(String),
    /// `Aborted request(s) a, b.`: that many requests cancelled.
    Cancelled(u64),
}

#[derive(Debug, Clone, Default)]
pub(crate) struct InstanceNotes {
    /// (log, when the line was printed, what it says).
    queue: VecDeque<(LogOrigin, f64, InstanceNote)>,
}

impl InstanceNotes {
    /// One line of an instance's log (`raw`), already parsed, printed at
    /// `at`. Returns the `max_log_len` a start-up line sets, for the
    /// correlator.
    pub fn read(&mut self, src: LogOrigin, raw: &str, line: &VllmLine, at: f64) -> Option<u32> {
        let note = match &line.event {
            VllmEvent::Aborted { ids } => InstanceNote::Cancelled(ids.len().max(1) as u64),
            _ => match config_message(raw, line) {
                Some(msg) => InstanceNote::Config(msg),
                None => return None,
            },
        };
        let max_log_len = Self::max_log_len(&note);
        self.queue.push_back((src, at, note));
        if self.queue.len() > MAX_NOTES {
            self.queue.pop_front();
        }
        max_log_len
    }

    /// `'max_log_len': N` of a start-up line, if it is one.
    pub fn max_log_len(note: &InstanceNote) -> Option<u32> {
        let InstanceNote::Config(msg) = note else { return None };
        let rest = &msg[msg.find("'max_log_len': ")? + 15..];
        let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        rest[..end].parse().ok()
    }

    pub fn drain(&mut self) -> Vec<(LogOrigin, f64, InstanceNote)> {
        self.queue.drain(..).collect()
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }
}
