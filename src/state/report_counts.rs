//! Requests by outcome, as `check --json` counts them (`requests`,
//! `requests_metrics`).

use serde::Serialize;

use super::misses::Outcomes;

/// Requests by outcome. From traces (per request, named) when a decode
/// instance's log is tailed, else from metrics (per interval, unnamed).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct RequestCounts {
    pub seen: u64,
    pub loaded: u64,
    pub silent_miss: u64,
    pub no_prefill: u64,
    pub error: u64,
    /// Traces only: the client went away mid-request (`Aborted request(s)`).
    pub cancelled: u64,
    /// Traces only: the logs allow no verdict (no shared ids, ambiguity).
    pub unknown: u64,
    /// Traces only: still waiting for evidence.
    pub pending: u64,
    /// Traces only: stuck waiting for remote KV (also counted under their outcome).
    pub stuck: u64,
}

impl From<&crate::traces::Counts> for RequestCounts {
    fn from(c: &crate::traces::Counts) -> Self {
        RequestCounts {
            seen: c.seen as u64,
            loaded: c.loaded as u64,
            silent_miss: c.silent_miss as u64,
            no_prefill: c.no_prefill as u64,
            error: c.error as u64,
            cancelled: c.cancelled as u64,
            unknown: c.unknown as u64,
            pending: c.pending as u64,
            stuck: c.stuck as u64,
        }
    }
}

impl From<Outcomes> for RequestCounts {
    fn from(o: Outcomes) -> Self {
        RequestCounts {
            seen: o.seen,
            loaded: o.loaded,
            silent_miss: o.silent_miss,
            no_prefill: o.no_prefill,
            error: o.error,
            ..RequestCounts::default()
        }
    }
}
