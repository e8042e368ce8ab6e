//! Prometheus text parsing and the vLLM metric model.

pub mod connectors;
pub mod counter;
pub mod histogram;
pub mod model;
pub mod parse;
pub mod router;
