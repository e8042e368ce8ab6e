//! Evidence from the instances' own logs: arrivals, finishes, deaths and
//! restarts, requests in flight, waits for remote KV, stalls, wrapped lines,
//! and what a log says of its instance.

pub(super) mod backlog;
pub(super) mod cut;
pub(super) mod decode;
pub(super) mod ends;
pub(super) mod events;
pub(super) mod inflight;
pub(crate) mod kill;
pub(super) mod lifecycle;
pub(super) mod notes;
pub(super) mod per_log;
pub(super) mod stalls;
pub(super) mod stuck;
pub(super) mod wrapped;
