//! Request traces across a disaggregated-prefill pair: which prefill fed
//! which decode request, whether the decode loaded that KV, and the one
//! verdict pdtop exists for: the *silent miss* (prefill ran, decode found
//! nothing it recognised, recomputed, answered 200 OK).
//!
//! A pure correlation engine over the line parsers in `crate::logs`: no
//! I/O, no clock. Lines come in with the time they were read; `on_tick`
//! decides what the passing of time allows (a missing hit is only a miss
//! once it is overdue); `finish` decides everything at the end of a check.
//!
//! Evidence used, per connector:
//! - ids: `X-Request-Id` → `cmpl-<id>-0` on both instances joins them
//!   (`ids.rs`); without it, arrival order within a window, marked Unsure;
//! - NIXL and other pull connectors: the decode's `kv_transfer_params`
//!   (or their absence after a prefill that expected a pull), the prefill's
//!   `Releasing expired KV blocks` line, the `KV Transfer metrics` window;
//! - ExampleConnector: `External Cache Hit!` / `Inject KV cache of N
//!   tokens`, attributed in FIFO order (`hits.rs`);
//! - every connector: failures a line names (`log_signals.rs`): a transfer
//!   failure errs the connector hop, LMCache `hit tokens: 0` on decode
//!   after a prefill is a miss, and each failure is an event.

mod correlator;
mod decide;
mod decode_log;
mod flow;
mod groups;
mod hit_events;
mod hits;
mod ids;
mod inflight;
mod instance_events;
mod joiner;
mod lifecycle;
mod lmcache_lookups;
mod log_signals;
mod model;
mod named;
mod notes;
mod prompt_join;
mod proxy_events;
mod router_events;
mod stalls;
mod stamp;
mod store;
mod stuck;
mod wrapped;

pub use correlator::Correlator;
pub use ids::{base_id, looks_random};
pub use log_signals::{LogEvent, summary};
pub use model::{
    Confidence, CorrelatorOptions, CorrelatorStats, Counts, DEFAULT_STUCK_AFTER_S, Death, Hop, Join, Outcome,
    Phase, RemoteWait, SourceStats, Trace,
};
pub use notes::InstanceNote;
pub use stamp::{anchor, year_of};
