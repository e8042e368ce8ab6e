//! What the correlator follows per decode instance's log: its hit queue,
//! its requests loaded on `kv_transfer_params`, whether it is queueing.

use super::hits::HitQueue;
use super::transfers::TransferLedger;

#[derive(Debug, Clone, Default)]
pub(crate) struct DecodeLog {
    /// ExampleConnector hit attribution.
    pub hits: HitQueue,
    /// Requests loaded on the strength of `kv_transfer_params`, against
    /// the transfers the `KV Transfer metrics` windows counted.
    pub transfers: TransferLedger,
    /// Tensor and data parallel sizes its last start's arguments gave.
    pub parallel: Option<(u32, u32)>,
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
