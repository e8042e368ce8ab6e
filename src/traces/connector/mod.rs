//! Evidence from the KV connector and the KV load: hits and injects,
//! lines that name a request (failures, expiry), LMCache lookups, the
//! per-decode queues they are attributed from.

pub(super) mod decode_log;
pub(super) mod groups;
pub(super) mod hit_events;
pub(super) mod hits;
pub(super) mod lmcache;
pub(super) mod named;
pub(super) mod signals;
pub(super) mod transfers;
