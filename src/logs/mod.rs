//! Log line parsers: vLLM server output and disaggregated-proxy output.
//! Pure functions over one line each; the tailer in `sources::logtail` feeds them.

mod line;
mod prompt;
pub mod proxy;
mod pyrepr;
pub mod vllm;
mod vllm_params;
mod vllm_stats;
