//! What pdtop reads from one vllm-router scrape (its PD mode,
//! `--vllm-pd-disaggregation`). Names, labels and types as the router's
//! `src/metrics.rs` registers them (vllm-project/router@13f90d7; a later
//! variant adds `method`/`status_code`/`status_class` labels):
//!
//! | family | type | labels |
//! | --- | --- | --- |
//! | `vllm_router_pd_requests_total` | counter | `route` |
//! | `vllm_router_pd_prefill_requests_total` | counter | `worker` |
//! | `vllm_router_pd_decode_requests_total` | counter | `worker` |
//! | `vllm_router_pd_errors_total` | counter | `error_type` |
//! | `vllm_router_pd_prefill_errors_total` | counter | `worker` |
//! | `vllm_router_pd_decode_errors_total` | counter | `worker` |
//! | `vllm_router_pd_stream_errors_total` | counter | `worker` |
//! | `vllm_router_pd_request_duration_seconds` | histogram | `route` |
//! | `vllm_router_worker_health` | gauge (1 healthy, 0 not) | `worker` |
//!
//! Worker health is exported in every mode, PD or not.
//!
//! Every series of a family is summed, so both label sets read the same.
//! The router exports through the `metrics` crate, which creates a series
//! at its first increment: while the router answers with any
//! `vllm_router_` sample, a PD counter it does not show has not happened
//! yet and reads 0. A body with none is not a router (`is_router`).

use std::collections::BTreeMap;

use super::histogram::Histogram;
use super::parse::{Exposition, Sample, parse};

/// The router's PD counters pdtop turns into rates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RouterCounter {
    Requests,
    PrefillRequests,
    DecodeRequests,
    Errors,
    PrefillErrors,
    DecodeErrors,
    StreamErrors,
}

impl RouterCounter {
    pub const ALL: [RouterCounter; 7] = [
        RouterCounter::Requests,
        RouterCounter::PrefillRequests,
        RouterCounter::DecodeRequests,
        RouterCounter::Errors,
        RouterCounter::PrefillErrors,
        RouterCounter::DecodeErrors,
        RouterCounter::StreamErrors,
    ];

    /// The family, as exported.
    pub fn family(self) -> &'static str {
        match self {
            RouterCounter::Requests => "vllm_router_pd_requests_total",
            RouterCounter::PrefillRequests => "vllm_router_pd_prefill_requests_total",
            RouterCounter::DecodeRequests => "vllm_router_pd_decode_requests_total",
            RouterCounter::Errors => "vllm_router_pd_errors_total",
            RouterCounter::PrefillErrors => "vllm_router_pd_prefill_errors_total",
            RouterCounter::DecodeErrors => "vllm_router_pd_decode_errors_total",
            RouterCounter::StreamErrors => "vllm_router_pd_stream_errors_total",
        }
    }

    /// The error counters, with the leg each names.
    pub const ERRORS: [(RouterCounter, &'static str); 4] = [
        (RouterCounter::Errors, "router"),
        (RouterCounter::PrefillErrors, "prefill"),
        (RouterCounter::DecodeErrors, "decode"),
        (RouterCounter::StreamErrors, "stream"),
    ];
}

/// Health per worker (1 healthy, 0 not).
const WORKER_HEALTH: &str = "vllm_router_worker_health";

/// The PD request duration histogram.
pub const DURATION_FAMILY: &str = "vllm_router_pd_request_duration_seconds";

/// One router scrape, reduced to what pdtop uses.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RouterSample {
    /// Summed over every series; 0 for a family not exported yet.
    pub counters: BTreeMap<RouterCounter, f64>,
    pub duration: Option<Histogram>,
    /// Samples named `vllm_router_*` (0: not a router).
    pub router_samples: usize,
    /// Samples of the PD families (0: the router is not in PD mode, or idle).
    pub pd_samples: usize,
    pub bad_lines: usize,
    /// NaN or infinite values, left out of the sums.
    pub non_finite: usize,
    /// `vllm_router_worker_health` per worker URL: healthy or not.
    pub workers: Vec<(String, bool)>,
}

impl RouterSample {
    pub fn from_text(text: &str) -> RouterSample {
        RouterSample::from_exposition(&parse(text))
    }

    pub fn is_router(&self) -> bool {
        self.router_samples > 0
    }

    pub fn counter(&self, c: RouterCounter) -> f64 {
        self.counters.get(&c).copied().unwrap_or(0.0)
    }

    pub fn from_exposition(e: &Exposition<'_>) -> RouterSample {
        let mut out = RouterSample { bad_lines: e.bad_line_count, ..Default::default() };
        let mut seen = std::collections::HashSet::new();
        let mut by_name: BTreeMap<&str, Vec<&Sample<'_>>> = BTreeMap::new();
        for s in &e.samples {
            if !s.name.starts_with("vllm_router_") {
                continue;
            }
            // A repeated series would be counted twice: the first one wins.
            if !seen.insert((s.name, s.labels_text())) {
                out.bad_lines += 1;
                continue;
            }
            out.router_samples += 1;
            if s.name.starts_with("vllm_router_pd_") {
                out.pd_samples += 1;
            }
            by_name.entry(s.name).or_default().push(s);
        }
        if out.router_samples == 0 {
            return out;
        }
        for c in RouterCounter::ALL {
            let mut total = 0.0;
            for s in by_name.get(c.family()).map(|v| v.as_slice()).unwrap_or(&[]) {
                if s.value.is_finite() && s.value >= 0.0 {
                    total += s.value;
                } else {
                    out.non_finite += 1;
                }
            }
            out.counters.insert(c, total);
        }
        out.duration = histogram(&by_name, DURATION_FAMILY, &mut out.non_finite);
        for s in by_name.get(WORKER_HEALTH).map(|v| v.as_slice()).unwrap_or(&[]) {
            match s.label("worker") {
                // NaN says nothing of health: left out, not taken for "down".
                Some(_) if !s.value.is_finite() => out.non_finite += 1,
                Some(w) => out.workers.push((w.into_owned(), s.value >= 1.0)),
                None => {}
            }
        }
        out
    }

    /// Workers the router marks unhealthy.
    pub fn unhealthy_workers(&self) -> impl Iterator<Item = &str> {
        self.workers.iter().filter(|(_, ok)| !ok).map(|(w, _)| w.as_str())
    }
}

/// `<family>_bucket/_sum/_count` summed over every label set (the router
/// gives every series the same buckets).
fn histogram(
    by_name: &BTreeMap<&str, Vec<&Sample<'_>>>,
    family: &str,
    non_finite: &mut usize,
) -> Option<Histogram> {
    let buckets = by_name.get(format!("{family}_bucket").as_str())?;
    let mut per_le: Vec<(f64, f64)> = Vec::with_capacity(buckets.len());
    for s in buckets {
        let le = match s.label("le").as_deref() {
            Some("+Inf") | Some("Inf") => f64::INFINITY,
            Some(v) => match v.parse::<f64>() {
                Ok(b) if b.is_finite() => b,
                _ => continue,
            },
            None => continue,
        };
        if !s.value.is_finite() {
            *non_finite += 1;
            continue;
        }
        per_le.push((le, s.value));
    }
    if per_le.is_empty() {
        return None;
    }
    super::histogram::merge_bounds(&mut per_le);
    let sum_of = |suffix: &str| {
        by_name
            .get(format!("{family}{suffix}").as_str())
            .map(|v| v.iter().map(|s| s.value).filter(|x| x.is_finite()).sum::<f64>())
    };
    let count = sum_of("_count").unwrap_or(0.0);
    if per_le.last().is_none_or(|(b, _)| b.is_finite()) {
        per_le.push((f64::INFINITY, count));
    }
    let mut hist = Histogram {
        bounds: per_le.iter().map(|(b, _)| *b).collect(),
        counts: per_le.iter().map(|(_, c)| *c).collect(),
        sum: sum_of("_sum").unwrap_or(0.0),
        count,
    };
    // Cumulative counts never go down; a malformed body is clamped.
    let mut running: f64 = 0.0;
    for c in &mut hist.counts {
        running = running.max(*c);
        *c = running;
    }
    Some(hist)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_label_sets_sum_the_same() {
        let old = "vllm_router_pd_requests_total{route=\"/v1/completions\"} 3\n\
                   vllm_router_pd_requests_total{route=\"/v1/chat/completions\"} 2\n";
        let new = "vllm_router_pd_requests_total{route=\"/v1/completions\",method=\"POST\",status_code=\"200\",status_class=\"2xx\"} 4\n\
                   vllm_router_pd_requests_total{route=\"/v1/completions\",method=\"POST\",status_code=\"502\",status_class=\"5xx\"} 1\n";
        for body in [old, new] {
            let s = RouterSample::from_text(body);
            assert_eq!(s.counter(RouterCounter::Requests), 5.0);
            // Not exported yet: none happened.
            assert_eq!(s.counter(RouterCounter::PrefillErrors), 0.0);
            assert!(s.is_router());
        }
    }

    #[test]
    fn not_a_router_and_bad_values() {
        let s = RouterSample::from_text("vllm:num_requests_running 1\n");
        assert!(!s.is_router());
        assert!(s.counters.is_empty());
        let s = RouterSample::from_text(
            "vllm_router_pd_errors_total{error_type=\"a\"} NaN\nvllm_router_pd_errors_total{error_type=\"b\"} 2\n\
             vllm_router_pd_errors_total{error_type=\"b\"} 9\n",
        );
        assert_eq!(s.counter(RouterCounter::Errors), 2.0);
        assert_eq!((s.non_finite, s.bad_lines), (1, 1));
        // Worker health: NaN is no reading, 0 is unhealthy, no label is skipped.
        let s = RouterSample::from_text(
            "vllm_router_worker_health{worker=\"http://a:1\"} NaN\n\
             vllm_router_worker_health{worker=\"http://b:2\"} 0\n\
             vllm_router_worker_health{worker=\"http://c:3\"} 1\n\
             vllm_router_worker_health 0\n",
        );
        assert_eq!(s.workers, [("http://b:2".to_string(), false), ("http://c:3".to_string(), true)]);
        assert_eq!(s.unhealthy_workers().collect::<Vec<_>>(), ["http://b:2"]);
        assert_eq!(s.non_finite, 1);
    }
}
