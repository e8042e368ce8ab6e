//! Prometheus text parsing and the vLLM metric model.

pub mod histogram;
pub mod model;
pub mod parse;
pub mod router;
