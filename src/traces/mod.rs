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
//! Laid out as the evidence flows:
//! - who gives evidence: `instance/` (the instances' own logs: arrivals,
//!   finishes, deaths and restarts, requests in flight, waits for remote
//!   KV), `proxy/` (the proxy's and the router's lines, what the proxy's
//!   flow proves), `connector/` (hits and injects, every line that names a
//!   request: failures, expiry, LMCache lookups);
//! - `joiner.rs` and `prompt_join.rs` resolve identity: a shared or
//!   forwarded id (`ids.rs`), the `kv_transfer_params` naming the prefill's
//!   request, equal prompt lengths from any source, else arrival order
//!   within a window, and each trace says which (`Join`);
//! - each part adds typed facts to a trace (`evidence.rs`) and sets no
//!   verdict; `settle.rs` gathers what is known around the request and
//!   hands it with the facts to `decide/`, a pure function and the one
//!   place a verdict, its confidence and its reasons are reached;
//!   `sweep.rs` is what the passing of time allows; `reason/` puts the
//!   reasons into words where they are shown; `store.rs` is the ring that
//!   owns the traces; `model.rs` is the vocabulary.

mod abort;
mod connector;
mod correlator;
mod counting;
mod decide;
#[cfg(test)]
mod early_tests;
mod evidence;
mod ids;
mod instance;
mod joiner;
mod ledger;
mod length_join;
mod line_time;
mod model;
mod options;
mod outcome;
mod prompt_join;
mod proxy;
mod reason;
mod relink;
mod settle;
mod stamp;
mod store;
mod style;
mod sweep;

pub use connector::signals::summary;
pub use correlator::Correlator;
pub use ids::{base_id, external_of_internal, looks_random, response_id};
pub use instance::notes::InstanceNote;
pub use model::{
    Confidence, CorrelatorOptions, CorrelatorStats, Counts, DEFAULT_STUCK_AFTER_S, Death, Hop, Join,
    KEPT_REQUESTS, LogEvent, Outcome, Phase, RemoteWait, SourceStats, Trace,
};
pub use reason::Reason;
pub use stamp::{anchor, stamp_at, year_of};
