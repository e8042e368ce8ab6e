//! Evidence from what stands in front: the proxy's and the router's lines,
//! and what the proxy's flow proves without shared ids.

pub(super) mod events;
pub(super) mod flow;
pub(super) mod reports;
pub(super) mod router;
pub(super) mod router_join;
pub(super) mod upstream;
