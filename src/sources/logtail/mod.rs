//! Follows a log file like `tail -F` and hands back complete lines.
//!
//! The core, [`Tailer`], is synchronous and poll-driven: each [`Tailer::poll`]
//! reads what was appended since the last call. That keeps it trivial to test
//! against real files; the collector that polls every tailed file in turn
//! ([`spawn_log_tailers`]) adds the timer and the channel, and
//! [`ChangeFilter`] says which batches are news. Every round polls every
//! file, so it behaves the same on every filesystem, including network
//! mounts and container volumes; the screen's tailer only times its
//! rounds by inotify ([`Watch`], `sources::log_pace`), so a quiet log
//! costs no wake-up.
//!
//! What it copes with, since vLLM and its proxies are restarted and their
//! logs rotated while the dashboard runs:
//! - a partial last line is held until its newline arrives;
//! - truncation in place (size < offset, e.g. `copytruncate` or `> file`):
//!   restart at 0;
//! - rotation or replacement (device or inode changed, or the file deleted
//!   then recreated): finish the old file, then read the new one from 0;
//! - a missing file is a state ([`TailState::Missing`]), polled quietly;
//! - a line over the cap is skipped and counted, never held whole in memory;
//! - invalid UTF-8 is decoded lossily and counted; `\r\n` endings are accepted.
//!
//! A truncation followed by a rewrite past the old offset between two polls
//! cannot be seen from size alone; `tail -F` has the same blind spot.
//!
//! [`TailState::Missing`]: crate::feed::TailState::Missing
//! [`spawn_log_tailers`]: crate::sources::spawn_log_tailers

mod batch;
mod lines;
mod reader;
mod tailer;
#[cfg(target_os = "linux")]
mod watch;

pub use batch::{ChangeFilter, StartAt, TailBatch, TailOptions};
pub use reader::run_reader;
pub use tailer::Tailer;
#[cfg(not(target_os = "linux"))]
pub use unwatched::{Nudge, Watch, Woke};
#[cfg(target_os = "linux")]
pub use watch::{Nudge, Watch, Woke};

/// Where inotify is not had: nothing is watched, the tailer polls.
#[cfg(not(target_os = "linux"))]
mod unwatched {
    use std::io;
    use std::time::Instant;

    #[derive(Clone)]
    pub struct Nudge;
    impl Nudge {
        pub fn new() -> io::Result<Nudge> {
            Err(io::ErrorKind::Unsupported.into())
        }
        pub fn nudge(&self) {}
    }
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Woke {
        Changed,
        Nudged,
        Timeout,
    }
    pub struct Watch;
    impl Watch {
        pub fn new(_: &[String], _: Nudge) -> io::Result<Watch> {
            Err(io::ErrorKind::Unsupported.into())
        }
        pub fn lost(&self) -> bool {
            true
        }
        pub fn wait(&mut self, _: Instant) -> io::Result<Woke> {
            Ok(Woke::Timeout)
        }
        pub fn clear(&mut self) {}
    }
}

#[cfg(test)]
mod tests;
