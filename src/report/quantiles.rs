//! Latency quantiles as reports print them, in milliseconds.

use serde::Serialize;

use crate::metrics::histogram::Histogram;

#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Quantiles {
    pub count: u64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub mean: f64,
}

impl Quantiles {
    /// Quantiles in milliseconds of a histogram in seconds.
    pub fn ms(h: &Histogram) -> Option<Quantiles> {
        let round = |v: f64| (v * 1000.0 * 10.0).round() / 10.0;
        if h.total() > 0.0 && h.sum == 0.0 {
            // Every observation was 0 (a prefill's TPOT): interpolating
            // inside the first bucket would invent a latency.
            let count = h.total().round() as u64;
            return Some(Quantiles { count, p50: 0.0, p90: 0.0, p99: 0.0, mean: 0.0 });
        }
        Some(Quantiles {
            count: h.total().round() as u64,
            p50: round(h.quantile(0.5)?),
            p90: round(h.quantile(0.9)?),
            p99: round(h.quantile(0.99)?),
            mean: round(h.mean().unwrap_or(f64::NAN)),
        })
    }
}
