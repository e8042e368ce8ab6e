//! Collectors: each runs as its own task (the local files read on a timer,
//! on a thread of their own: `poller`), sends owned data to the app over a
//! channel, and never touches the terminal or the state. Every time a
//! message carries is read from the injected [`Clock`](crate::clock::Clock)
//! (a test or a sped-up lab drives its own); real time only paces the waits.

pub mod host;
pub mod http;
pub mod kvdir;
pub mod logtail;
pub mod netdev;
pub mod otlp;
pub mod prometheus;
pub mod router;
pub mod scrape;
pub mod sysnet;

mod log_pace;
mod poller;
mod spawn;

pub use poller::Wake;
pub use spawn::{LinesRead, NetDevPath, spawn_link_sources, spawn_log_tailers, spawn_scrapers, supervise};
