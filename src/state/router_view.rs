//! The router's figures as the report and the screen read them from the
//! state: its report, whether it is degraded, its warning, and what the
//! state does with a router scrape.

use serde::Serialize;

use super::router::*;
use super::{AppState, EventKind};
use crate::feed::RouterEndpoint;
use crate::metrics::router::{RouterCounter, RouterSample};
use crate::report::quantiles::Quantiles;

/// `check --json`'s `router`: totals since pdtop started (restarts
/// accounted), so the numbers are the run's, not the router's lifetime.
#[derive(Debug, Clone, Serialize)]
pub struct RouterReport {
    pub endpoint: String,
    pub up: bool,
    pub scrapes_ok: u64,
    pub scrapes_failed: u64,
    pub restarts: u32,
    pub last_error: Option<String>,
    /// Some `vllm_router_pd_` series was exported (a PD router shows none
    /// before its first request).
    pub pd_families_seen: bool,
    pub requests: f64,
    pub prefill_requests: f64,
    pub decode_requests: f64,
    /// Over the scraped time.
    pub requests_per_s: Option<f64>,
    pub errors: RouterErrors,
    /// `vllm_router_pd_request_duration_seconds`, in ms.
    pub duration_ms: Option<Quantiles>,
    /// Workers the router marked unhealthy in its last scrape.
    pub unhealthy_workers: Vec<String>,
    /// Workers it reports health for.
    pub workers: usize,
}

/// Errors per leg: the router's own (`vllm_router_pd_errors_total`), a
/// prefill or decode server's, and the decode stream's.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct RouterErrors {
    pub router: f64,
    pub prefill: f64,
    pub decode: f64,
    pub stream: f64,
}

impl RouterReport {
    pub fn from_state(state: &AppState) -> Option<RouterReport> {
        let r = state.router.as_ref()?;
        let h = &r.health;
        Some(RouterReport {
            endpoint: r.endpoint.display.clone(),
            up: h.up,
            scrapes_ok: h.scrapes_ok,
            scrapes_failed: h.scrapes_failed,
            restarts: h.restarts,
            last_error: h.last_error.clone(),
            pd_families_seen: r.pd_families_seen(),
            requests: r.total(RouterCounter::Requests),
            prefill_requests: r.total(RouterCounter::PrefillRequests),
            decode_requests: r.total(RouterCounter::DecodeRequests),
            requests_per_s: (r.covered_s > 0.0).then(|| r.total(RouterCounter::Requests) / r.covered_s),
            errors: RouterErrors {
                router: r.total(RouterCounter::Errors),
                prefill: r.total(RouterCounter::PrefillErrors),
                decode: r.total(RouterCounter::DecodeErrors),
                stream: r.total(RouterCounter::StreamErrors),
            },
            duration_ms: r.duration_total.as_ref().filter(|d| d.total() > 0.0).and_then(Quantiles::ms),
            unhealthy_workers: r
                .latest
                .iter()
                .flat_map(|s| s.unhealthy_workers())
                .map(String::from)
                .collect(),
            workers: r.latest.as_ref().map_or(0, |s| s.workers.len()),
        })
    }
}

/// The router endpoint is not well, or a router's log reported a failed
/// request (which needs no decode log to be known).
pub fn degraded(state: &AppState) -> bool {
    use crate::logs::signal::SignalKind as K;
    state.router.as_ref().is_some_and(|r| r.degraded())
        || state
            .events
            .iter()
            .any(|e| matches!(e.kind, EventKind::Log(K::RouterRequestFailed | K::RouterBackendError)))
}

/// A router that answers without being one is watched in name only.
pub fn router_warning(state: &AppState) -> Option<String> {
    let r = state.router.as_ref().filter(|r| r.health.up && r.health.no_vllm_metrics)?;
    Some(format!(
        "router {} answers but with no vllm_router_ metrics (its serving port instead of --prometheus-port?)",
        r.endpoint.display
    ))
}

impl AppState {
    /// Watches a router too.
    pub fn with_router(mut self, router: Option<RouterEndpoint>) -> AppState {
        self.router = router.map(RouterState::new);
        self
    }

    /// A router scrape, once the state's clock has moved to `at`.
    pub(super) fn on_router(&mut self, at: f64, scrape: Result<String, String>) {
        let Some(r) = &mut self.router else {
            return;
        };
        let name = format!("router {}", r.endpoint.display);
        let mut events = Vec::new();
        match scrape {
            Err(error) => {
                let was_up = r.health.up || r.health.scrapes_ok == 0;
                r.on_failure(at, error.clone());
                if was_up && r.health.consecutive_failures == 1 {
                    events.push((EventKind::Down, format!("{name} down: {error}")));
                }
            }
            Ok(body) => {
                let was_down = !r.health.up && r.health.consecutive_failures > 0;
                let sample = RouterSample::from_text(&body);
                let before: Vec<&str> = r.latest.iter().flat_map(|s| s.unhealthy_workers()).collect();
                for w in sample.unhealthy_workers().filter(|w| !before.contains(w)) {
                    let text = format!("{name}: worker {w} unhealthy (vllm_router_worker_health 0)");
                    events.push((EventKind::RouterError, text));
                    r.workers_turned_unhealthy += 1;
                }
                if let Some(iv) = r.on_scrape(at, sample) {
                    if iv.after_restart {
                        let text = format!("{name} restarted: counters start again from zero");
                        events.push((EventKind::Restart, text));
                    }
                    let rose: Vec<String> = RouterCounter::ERRORS
                        .iter()
                        .filter_map(|(c, leg)| {
                            let n = iv.counters.get(c).copied().unwrap_or(0.0);
                            (n > 0.0).then(|| format!("{n:.0} {leg}"))
                        })
                        .collect();
                    if !rose.is_empty() {
                        let text =
                            format!("{name}: errors {} (vllm_router_pd_*errors_total)", rose.join(", "));
                        events.push((EventKind::RouterError, text));
                    }
                }
                if was_down {
                    events.push((EventKind::Up, format!("{name} back up")));
                }
            }
        }
        for (kind, text) in events {
            self.push_event(at, kind, text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(requests: u64, prefill_errors: u64) -> String {
        format!(
            "vllm_router_pd_requests_total{{route=\"/v1/completions\"}} {requests}\n\
             vllm_router_pd_prefill_errors_total{{worker=\"http://p:8100\"}} {prefill_errors}\n"
        )
    }

    #[test]
    fn rates_restarts_and_error_events() {
        let ep = RouterEndpoint::parse("127.0.0.1:29000").unwrap();
        let mut s = AppState::new(Vec::new(), 60.0).with_router(Some(ep));
        s.apply(crate::feed::Msg::Router { at: 1.0, scrape: Ok(body(10, 0)) });
        s.apply(crate::feed::Msg::Router { at: 2.0, scrape: Ok(body(14, 0)) });
        let r = s.router.as_ref().unwrap();
        assert_eq!(r.rate_since(RouterCounter::Requests, 0.0), Some(4.0));
        assert!(s.events.is_empty());
        // Restarted, then one prefill error: never a negative rate.
        s.apply(crate::feed::Msg::Router { at: 3.0, scrape: Ok(body(2, 1)) });
        let r = s.router.as_ref().unwrap();
        assert_eq!(r.total(RouterCounter::Requests), 6.0);
        assert_eq!(r.health.restarts, 1);
        let kinds: Vec<&str> = s.events.iter().map(|e| e.kind.name()).collect();
        assert_eq!(kinds, ["restart", "router_error"]);
        s.apply(crate::feed::Msg::Router { at: 4.0, scrape: Err("cannot connect".into()) });
        s.apply(crate::feed::Msg::Router { at: 5.0, scrape: Err("cannot connect".into()) });
        s.apply(crate::feed::Msg::Router { at: 6.0, scrape: Ok(body(3, 1)) });
        let kinds: Vec<&str> = s.events.iter().map(|e| e.kind.name()).collect();
        assert_eq!(kinds, ["restart", "router_error", "down", "up"]);
        assert!(s.router.as_ref().unwrap().degraded());
    }

    #[test]
    fn a_worker_marked_unhealthy_is_one_event_and_degrades() {
        let health = |ok: u8| {
            format!(
                "vllm_router_worker_health{{worker=\"http://p:8100\"}} 1\n\
                 vllm_router_worker_health{{worker=\"http://d:8200\"}} {ok}\n"
            )
        };
        let ep = RouterEndpoint::parse("127.0.0.1:29000").unwrap();
        let mut s = AppState::new(Vec::new(), 60.0).with_router(Some(ep));
        s.apply(crate::feed::Msg::Router { at: 1.0, scrape: Ok(health(1)) });
        assert!(!s.router.as_ref().unwrap().degraded());
        s.apply(crate::feed::Msg::Router { at: 2.0, scrape: Ok(health(0)) });
        s.apply(crate::feed::Msg::Router { at: 3.0, scrape: Ok(health(0)) });
        let texts: Vec<&str> = s.events.iter().map(|e| e.text.as_str()).collect();
        assert_eq!(
            texts,
            ["router 127.0.0.1:29000: worker http://d:8200 unhealthy (vllm_router_worker_health 0)"]
        );
        let report = RouterReport::from_state(&s).unwrap();
        assert_eq!((report.workers, report.unhealthy_workers), (2, vec!["http://d:8200".to_string()]));
        assert!(s.router.as_ref().unwrap().degraded());
        s.apply(crate::feed::Msg::Router { at: 4.0, scrape: Ok(health(1)) });
        assert!(RouterReport::from_state(&s).unwrap().unhealthy_workers.is_empty());
        assert!(s.router.as_ref().unwrap().degraded(), "the flap happened");
    }
}
