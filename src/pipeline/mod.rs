//! The one pipeline every mode shares: a [`Session`] says what is watched,
//! a [`Feed`] brings the messages (live collectors, a recording, a capture
//! folded headless), and each mode is a sink of that feed.

mod collectors;
mod feed;
mod log_files;
mod player;
mod session;

pub use collectors::{COLLECTOR_THREAD, run_on_thread, spawn_collectors};
pub use feed::{CHANNEL, Feed, LabInfo, LiveFeed, REFRESH};
pub use log_files::{LogFiles, read_log_files};
pub use player::{Player, ReplayBadge};
pub use session::{Collect, DEFAULT_SINCE_S, Session};
