//! The rules: one function per finding, each reading only the facts and
//! saying nothing when what it needs is unknown.

pub mod kv_dir;
pub mod proxy;
pub mod roles;
pub mod shapes;
pub mod side_channel;
pub mod ucx;

use super::facts::PairFacts;
use super::finding::Finding;

/// Every rule, in the order a person would fix things.
const RULES: &[fn(&PairFacts) -> Vec<Finding>] = &[
    roles::roles_missing,
    roles::roles_swapped,
    shapes::config_mismatches,
    shapes::block_size,
    shapes::dtype,
    shapes::tensor_parallel,
    side_channel::bind_failed,
    side_channel::port_shared,
    side_channel::host_not_local,
    side_channel::localhost_across_hosts,
    side_channel::self_handshake,
    ucx::net_devices,
    ucx::devices_unavailable,
    ucx::nixl_hw_support,
    ucx::tcp_only,
    proxy::demo_proxy_with_nixl,
    proxy::id_randomization,
    kv_dir::not_shared,
    kv_dir::not_writable,
];

/// Every finding, most severe first (stable within a severity).
pub fn run(facts: &PairFacts) -> Vec<Finding> {
    let mut out: Vec<Finding> = RULES.iter().flat_map(|r| r(facts)).collect();
    out.sort_by_key(|f| f.severity);
    out
}

pub use side_channel::side_channel;
