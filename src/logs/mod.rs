//! Log line parsers: vLLM server output and disaggregated-proxy output.
//! Pure functions over one line each; the tailer in `sources::logtail` feeds them.

pub mod proxy;
pub mod vllm;
