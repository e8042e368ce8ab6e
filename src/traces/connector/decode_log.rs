//! What the correlator follows per decode instance's log: its hit queue,
//! its requests loaded on `kv_transfer_params`, whether it is queueing.

use std::collections::VecDeque;

use super::hits::HitQueue;

#[derive(Debug, Clone, Default)]
pub(crate) struct DecodeLog {
    /// ExampleConnector hit attribution.
    pub hits: HitQueue,
    /// Requests loaded on the strength of `kv_transfer_params`, waiting for
    /// a `KV Transfer metrics` window to count them.
    pub params_loaded: VecDeque<u64>,
    /// Read time until which the engine counts as queueing.
    pub busy_until: Option<f64>,
    /// Its requests have arrived with `kv_transfer_params`.
    pub params_seen: bool,
}

impl DecodeLog {
    pub fn busy(&self, now: f64) -> bool {
        self.busy_until.is_some_and(|u| u > now)
    }
}
