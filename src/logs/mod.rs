//! Log line parsers: vLLM server output and disaggregated-proxy output.
//! Pure functions over one line each; the tailer in `sources::logtail` feeds them.

mod connectors;
mod failed;
mod glued;
mod header;
pub mod known;
mod line;
mod lmcache;
mod mooncake;
mod outputs;
mod p2p_nccl;
pub mod prefix;
mod prompt;
pub mod proxies;
pub mod proxy;
mod pyrepr;
pub mod reader;
mod scan;
pub mod signal;
pub mod startup;
pub mod vllm;
mod vllm_params;
mod vllm_stats;

pub use header::restamp_dated;
