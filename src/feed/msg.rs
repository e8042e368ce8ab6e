//! Everything a collector can tell the app.

use serde::{Deserialize, Serialize};

use super::{
    Endpoint, KvDirSnapshot, LogOrigin, ModelInfo, NetDevSnapshot, RequestSpan, SpanCounts, TailCounts,
    TailState,
};

/// One observation. Timestamps are unix seconds from the injected clock, so
/// the state itself never reads a clock. Serialized as it is into
/// recordings (`docs/recording.md`): a new variant is recorded and
/// replayed with no other change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "snake_case")]
pub enum Msg {
    /// A `/metrics` body was fetched.
    Scrape { instance: usize, at: f64, body: String },
    /// A fetch failed (refused, timeout, HTTP status, body too large...).
    ScrapeFailed { instance: usize, at: f64, error: String },
    /// `/v1/models` answered, after a (re)connect.
    Models { instance: usize, at: f64, info: ModelInfo },
    /// `/version` answered (`{"version":"0.26.0"}`), after a (re)connect.
    Version { instance: usize, at: f64, version: String },
    /// The clock moved (ages on screen depend on it). Not recorded.
    Tick { at: f64 },
    /// A collector task ended unexpectedly (a panic is caught and reported).
    SourceFailed { source: String, at: f64, error: String },
    /// The connector directory's folders (or why it could not be read).
    KvDir { at: f64, scan: Result<KvDirSnapshot, String> },
    /// Interface byte counters (or why they could not be read).
    NetDev { at: f64, read: Result<NetDevSnapshot, String> },
    /// Every tailed file has been read up to this time (sent after each
    /// polling round): a miss deadline is only judged against logs that
    /// were actually read by then, so a stalled reader never invents one.
    LogsPolled { at: f64 },
    /// New lines from a tailed log, and how the file is doing.
    LogLines { source: LogOrigin, at: f64, lines: Vec<String>, state: TailState, counts: TailCounts },
    /// A collector found another instance to watch (a Prometheus server's
    /// fleet changes while pdtop runs). `instance` is the index the
    /// collector will use for it: the next one after those the state has.
    Discovered { instance: usize, at: f64, endpoint: Endpoint },
    /// Request spans an OTLP export carried (`--otlp-listen`).
    Spans { at: f64, spans: Vec<RequestSpan>, counts: SpanCounts },
    /// An OTLP export the receiver refused (not a valid export request).
    SpansRejected { at: f64, error: String },
    /// The router's `/metrics` body (`--router`), or why it could not be had.
    Router { at: f64, scrape: Result<String, String> },
    /// What `pdtop doctor`'s rules found (at start, then again now and then).
    Doctor { at: f64, report: crate::doctor::Report },
}

/// Every variant's `at`, by reference or by mutable reference (one list of
/// variants for `Msg::at` and `Msg::at_mut`).
macro_rules! msg_at {
    ($m:expr) => {
        match $m {
            Msg::Scrape { at, .. }
            | Msg::ScrapeFailed { at, .. }
            | Msg::Models { at, .. }
            | Msg::Version { at, .. }
            | Msg::Tick { at }
            | Msg::SourceFailed { at, .. }
            | Msg::KvDir { at, .. }
            | Msg::NetDev { at, .. }
            | Msg::LogsPolled { at }
            | Msg::LogLines { at, .. }
            | Msg::Discovered { at, .. }
            | Msg::Spans { at, .. }
            | Msg::SpansRejected { at, .. }
            | Msg::Router { at, .. }
            | Msg::Doctor { at, .. } => at,
        }
    };
}

impl Msg {
    /// When it was observed.
    pub fn at(&self) -> f64 {
        *msg_at!(self)
    }

    /// The time, to shift (building long recordings from short ones).
    pub fn at_mut(&mut self) -> &mut f64 {
        msg_at!(self)
    }

    /// Whether a recording keeps it: everything observed, not clock ticks
    /// (a replay makes its own).
    pub fn is_observation(&self) -> bool {
        !matches!(self, Msg::Tick { .. })
    }
}
