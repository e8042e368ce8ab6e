//! The router (`--router`): vllm-router's PD counters turned into rates,
//! its errors per leg (the router itself, prefill, decode, the decode
//! stream), its request duration, and whether it answers. A counter that
//! goes down is a router restart: that interval counts from zero, so no
//! rate is ever negative. An error counter that rises is an event.

use std::collections::{BTreeMap, VecDeque};

use super::instance::Health;
use crate::feed::RouterEndpoint;
use crate::metrics::histogram::Histogram;
use crate::metrics::router::{RouterCounter, RouterSample};

/// Intervals kept (one per good scrape): an hour at 1 s.
const HISTORY_CAP: usize = 3600;

/// What changed between two good scrapes.
#[derive(Debug, Clone, PartialEq)]
pub struct RouterInterval {
    /// End of the interval.
    pub t: f64,
    pub dt: f64,
    pub counters: BTreeMap<RouterCounter, f64>,
    pub duration: Option<Histogram>,
    /// The router restarted in this interval: its values count from zero.
    pub after_restart: bool,
}

#[derive(Debug, Clone)]
pub struct RouterState {
    pub endpoint: RouterEndpoint,
    pub health: Health,
    pub latest: Option<RouterSample>,
    latest_at: Option<f64>,
    pub history: VecDeque<RouterInterval>,
    /// Sums of every interval since pdtop started.
    pub totals: BTreeMap<RouterCounter, f64>,
    pub duration_total: Option<Histogram>,
    /// Seconds the intervals cover (the rates' denominator).
    pub covered_s: f64,
    /// Times a worker turned unhealthy since pdtop started (a flap that
    /// healed still happened).
    pub workers_turned_unhealthy: u32,
}

impl RouterState {
    /// Some `vllm_router_pd_` series was exported in the last scrape.
    pub fn pd_families_seen(&self) -> bool {
        self.latest.as_ref().is_some_and(|s| s.pd_samples > 0)
    }

    pub fn new(endpoint: RouterEndpoint) -> RouterState {
        RouterState {
            endpoint,
            health: Health::default(),
            latest: None,
            latest_at: None,
            history: VecDeque::new(),
            totals: BTreeMap::new(),
            duration_total: None,
            covered_s: 0.0,
            workers_turned_unhealthy: 0,
        }
    }

    pub fn on_failure(&mut self, at: f64, error: String) {
        self.health.failed(at, error);
    }

    /// A good scrape; the interval since the previous one (none for the
    /// first, which is only the baseline).
    pub fn on_scrape(&mut self, at: f64, sample: RouterSample) -> Option<RouterInterval> {
        self.health.scraped(at, sample.bad_lines);
        let h = &mut self.health;
        // Answers, but not as a router (the serving port, another exporter).
        h.no_vllm_metrics = !sample.is_router();
        let iv = match (&self.latest, self.latest_at) {
            (Some(prev), Some(prev_at)) if sample.is_router() && prev.is_router() => {
                Some(diff(prev, &sample, at, at - prev_at))
            }
            _ => None,
        };
        if let Some(iv) = &iv {
            if iv.after_restart {
                self.health.restarts += 1;
                self.health.last_restart = Some(at);
            }
            for (c, v) in &iv.counters {
                *self.totals.entry(*c).or_default() += v;
            }
            if let Some(d) = &iv.duration {
                self.duration_total.get_or_insert_with(Histogram::default).merge(d);
            }
            self.covered_s += iv.dt.max(0.0);
            self.history.push_back(iv.clone());
            while self.history.len() > HISTORY_CAP {
                self.history.pop_front();
            }
        }
        if sample.is_router() || self.latest.is_none() {
            self.latest = Some(sample);
            self.latest_at = Some(at);
        }
        iv
    }

    pub fn total(&self, c: RouterCounter) -> f64 {
        self.totals.get(&c).copied().unwrap_or(0.0)
    }

    /// Per second over the intervals that ended after `since`; `None`
    /// before two scrapes.
    pub fn rate_since(&self, c: RouterCounter, since: f64) -> Option<f64> {
        let recent = self.history.iter().rev().take_while(|iv| iv.t > since);
        let (mut n, mut dt) = (0.0, 0.0);
        for iv in recent {
            n += iv.counters.get(&c).copied().unwrap_or(0.0);
            dt += iv.dt;
        }
        (dt > 0.0).then(|| n / dt)
    }

    /// The duration histogram of the intervals that ended after `since`.
    pub fn duration_since(&self, since: f64) -> Option<Histogram> {
        let mut out: Option<Histogram> = None;
        for iv in self.history.iter().rev().take_while(|iv| iv.t > since) {
            if let Some(h) = &iv.duration {
                out.get_or_insert_with(Histogram::default).merge(h);
            }
        }
        out
    }

    /// Errors of every leg since pdtop started.
    pub fn errors_total(&self) -> f64 {
        RouterCounter::ERRORS.iter().map(|(c, _)| self.total(*c)).sum()
    }

    /// Unreachable, restarted, not a router, or failing requests: `check` is not ok.
    pub fn degraded(&self) -> bool {
        self.health.scrapes_failed > 0
            || !self.health.up
            || self.health.restarts > 0
            || self.health.no_vllm_metrics
            || self.errors_total() > 0.0
            || self.workers_turned_unhealthy > 0
    }
}

/// The deltas between two samples; a counter that went down means the
/// router restarted, and then the new values are the deltas.
fn diff(prev: &RouterSample, cur: &RouterSample, t: f64, dt: f64) -> RouterInterval {
    let went_down = RouterCounter::ALL.iter().any(|c| cur.counter(*c) < prev.counter(*c));
    let duration_reset = match (&cur.duration, &prev.duration) {
        (Some(c), Some(p)) => c.total() < p.total(),
        (None, Some(p)) => p.total() > 0.0,
        _ => false,
    };
    let restart = went_down || duration_reset;
    let counters = RouterCounter::ALL
        .iter()
        .map(|c| (*c, if restart { cur.counter(*c) } else { cur.counter(*c) - prev.counter(*c) }))
        .collect();
    let duration = match (&cur.duration, &prev.duration) {
        (Some(c), Some(p)) if !restart => c.delta(p),
        (Some(c), _) => Some(c.clone()),
        (None, _) => None,
    };
    RouterInterval { t, dt, counters, duration, after_restart: restart }
}
