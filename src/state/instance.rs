//! One watched instance: its health, its latest scrape, and the deltas
//! between scrapes. A later `process_start_time_seconds`, or a counter
//! that goes down where no process start is exported, is a restart: the new
//! values count from zero, so a rate is never negative.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use crate::feed::{Endpoint, ModelInfo};
use crate::logs::startup::StartupConfig;
use crate::metrics::histogram::Histogram;
use crate::metrics::model::{Counter, Hist, InstanceSample, LastScrape};

pub use super::interval::Interval;
use super::interval::{Counters, Hists, share_bounds};

/// Intervals kept per instance (one per successful scrape): an hour at 1 s.
pub const HISTORY_CAP: usize = 3600;

/// Reachability and scrape bookkeeping, shown in the header row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Health {
    pub up: bool,
    pub last_ok: Option<f64>,
    pub last_attempt: Option<f64>,
    pub consecutive_failures: u32,
    pub last_error: Option<String>,
    pub scrapes_ok: u64,
    pub scrapes_failed: u64,
    pub restarts: u32,
    pub last_restart: Option<f64>,
    /// Times it went from answering to not answering.
    pub outages: u32,
    /// The last restart's new process stated a start before the old one's
    /// last answer: when that restart was seen stands for its start.
    pub started_unstated: Option<f64>,
    pub bad_lines_last: usize,
    pub bad_lines_total: u64,
    /// A scrape answered but held no `vllm:` sample (wrong port, stats off).
    pub no_vllm_metrics: bool,
}

#[derive(Debug, Clone)]
pub struct InstanceState {
    pub endpoint: Endpoint,
    pub info: Option<ModelInfo>,
    /// `/version`, asked once per connect.
    pub version: Option<String>,
    /// What its startup log says it runs (when its log is tailed).
    pub startup: StartupConfig,
    pub health: Health,
    pub latest: Option<InstanceSample>,
    pub latest_at: Option<f64>,
    pub history: VecDeque<Interval>,
    /// The history's TTFT and TPOT per block of clock time, for the charts.
    pub latency_blocks: super::blocks::Blocks,
    /// Sums of all intervals since pdtop started.
    pub total_counters: BTreeMap<Counter, f64>,
    pub total_hists: BTreeMap<Hist, Histogram>,
    /// The bucket bounds the history's histograms share, per histogram.
    bounds: BTreeMap<Hist, Option<Arc<[f64]>>>,
    /// The last scrape's text, so one that reads the same is not parsed again.
    pub last_scrape: LastScrape,
}

impl Health {
    pub fn failed(&mut self, at: f64, error: String) {
        // Up (answered before) and now not: one more outage.
        if self.up && self.last_ok.is_some() {
            self.outages += 1;
        }
        self.up = false;
        self.last_attempt = Some(at);
        self.consecutive_failures += 1;
        self.scrapes_failed += 1;
        self.last_error = Some(error);
    }

    /// A good scrape of a body with `bad_lines` unreadable lines.
    pub fn scraped(&mut self, at: f64, bad_lines: usize) {
        self.up = true;
        self.last_ok = Some(at);
        self.last_attempt = Some(at);
        self.consecutive_failures = 0;
        self.scrapes_ok += 1;
        self.bad_lines_last = bad_lines;
        self.bad_lines_total += bad_lines as u64;
    }
}

impl InstanceState {
    pub fn new(endpoint: Endpoint) -> InstanceState {
        InstanceState {
            endpoint,
            info: None,
            version: None,
            startup: StartupConfig::default(),
            health: Health::default(),
            latest: None,
            latest_at: None,
            history: VecDeque::new(),
            latency_blocks: Default::default(),
            total_counters: BTreeMap::new(),
            total_hists: BTreeMap::new(),
            bounds: BTreeMap::new(),
            last_scrape: LastScrape::default(),
        }
    }

    pub fn on_failure(&mut self, at: f64, error: String) {
        self.health.failed(at, error);
    }

    /// Takes a good scrape; returns the interval since the previous one
    /// (none for the first scrape, which is only the baseline).
    pub fn on_scrape(&mut self, at: f64, sample: InstanceSample) -> Option<Interval> {
        self.health.scraped(at, sample.bad_lines);
        let h = &mut self.health;
        h.no_vllm_metrics = sample.vllm_samples == 0;

        let interval = match (&self.latest, self.latest_at) {
            (Some(prev), Some(prev_at)) => Some(diff(prev, &sample, at, at - prev_at, &mut self.bounds)),
            _ => None,
        };
        if let Some(iv) = &interval {
            if iv.after_restart {
                self.health.restarts += 1;
                self.health.last_restart = Some(at);
                // A new process cannot have started before the old one last
                // answered: one that says so (a recording replayed in a
                // loop) started, as far as can be known, when it was seen.
                let stale = match (sample.process_start, self.latest_at) {
                    (Some(start), Some(prev_at)) => start < prev_at,
                    _ => false,
                };
                self.health.started_unstated = stale.then_some(at);
            }
            for (c, v) in &iv.counters {
                *self.total_counters.entry(*c).or_default() += v;
            }
            for (k, hist) in &iv.hists {
                self.total_hists.entry(k).or_default().merge(&hist);
            }
            // Grown exactly up to the cap (doubling would leave a full ring
            // with room for 4096).
            if self.history.len() == self.history.capacity() {
                let want = (self.history.len() * 2).clamp(16, HISTORY_CAP + 1);
                self.history.reserve_exact(want.saturating_sub(self.history.len()));
            }
            self.latency_blocks.push(iv);
            self.history.push_back(iv.clone());
            while self.history.len() > HISTORY_CAP {
                self.history.pop_front();
            }
            if let Some(first) = self.history.front() {
                self.latency_blocks.forget_before(first.t);
            }
        }
        self.latest = Some(sample);
        self.latest_at = Some(at);
        interval
    }

    /// The histogram deltas of the intervals that ended after `since`.
    pub fn hist_since(&self, hist: Hist, since: f64) -> Option<Histogram> {
        let mut out: Option<Histogram> = None;
        for iv in self.history.iter().rev().take_while(|iv| iv.t > since) {
            iv.hists.merge_into(&hist, &mut out);
        }
        out
    }

    pub fn block_size(&self) -> Option<u32> {
        self.latest.as_ref().and_then(|s| s.block_size)
    }

    pub fn model_name(&self) -> Option<&str> {
        self.latest
            .as_ref()
            .and_then(|s| s.model_name.as_deref())
            .or(self.info.as_ref().map(|i| i.id.as_str()))
    }
}

/// How a sample's process relates to the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Continuity {
    /// Counters only grew: the deltas are what happened in between.
    Same,
    /// A new process: its counters start from zero, all of them are new.
    Restart,
    /// The counters went back but `process_start_time_seconds` did not
    /// move forward: the same (or an older) process seen again, never a
    /// new one (a recording played in a loop, another server answering at
    /// the address). Nothing in between can be known: no counts, no restart.
    Rewound,
}

/// Whether the counters were reset, and by what. `process_start_time_seconds`
/// (prometheus_client's process collector) is exported by vLLM's single API
/// server process, whose registry holds the counters; a new process starts
/// later than the one it replaced. In multiprocess mode
/// (`PROMETHEUS_MULTIPROC_DIR`) vLLM exports no process start: then a
/// counter that goes back is all there is, and it is a restart.
fn continuity(prev: &InstanceSample, cur: &InstanceSample) -> Continuity {
    let counter_went_down = cur.counters.iter().any(|(c, v)| prev.counters.get(c).is_some_and(|p| v < p));
    let hist_went_down =
        cur.hists.iter().any(|(k, h)| prev.hists.get(k).is_some_and(|p| h.total() < p.total()));
    let went_back = counter_went_down || hist_went_down;
    match (prev.process_start, cur.process_start) {
        (Some(a), Some(b)) if b - a > 0.5 => Continuity::Restart,
        (Some(_), Some(_)) if went_back => Continuity::Rewound,
        _ if went_back => Continuity::Restart,
        _ => Continuity::Same,
    }
}

/// The interval between two samples, detecting a restart.
fn diff(
    prev: &InstanceSample,
    cur: &InstanceSample,
    at: f64,
    dt: f64,
    bounds: &mut BTreeMap<Hist, Option<Arc<[f64]>>>,
) -> Interval {
    let continuity = continuity(prev, cur);
    let restart = continuity == Continuity::Restart;
    if continuity == Continuity::Rewound {
        // A baseline again: the interval holds no counts.
        return Interval {
            t: at,
            dt,
            kv_usage: cur.kv_usage,
            running: cur.running,
            waiting: cur.waiting,
            rewound: true,
            ..Interval::default()
        };
    }

    // `cur.counters` is a map by `Counter`: already in order.
    let counters = Counters::from_sorted(cur.counters.iter().map(|(c, v)| {
        let d = match prev.counters.get(c) {
            Some(p) if !restart => v - p,
            // After a restart (or for a family that just appeared) the
            // counter starts from zero, so all of it is new.
            _ => *v,
        };
        (*c, d.max(0.0))
    }));
    let mut hists: Vec<(Hist, Histogram, Arc<[f64]>)> = Vec::new();
    for (k, h) in &cur.hists {
        let d = match prev.hists.get(k) {
            Some(p) if !restart => match h.delta(p) {
                Some(d) => d,
                // Other bounds without a restart: nothing comparable.
                None => continue,
            },
            _ => h.clone(),
        };
        // An interval without observations keeps no histogram: most are
        // idle, and an hour of them per instance would otherwise hold
        // every bucket of every family.
        if d.total() > 0.0 || d.sum > 0.0 {
            let shared = share_bounds(bounds.entry(*k).or_default(), &d.bounds);
            hists.push((*k, d, shared));
        }
    }
    // `cur.hists` is a map by `Hist`: already in order.
    let hists = Hists::from_sorted(hists.iter().map(|(k, h, b)| (*k, h, b.clone())));
    Interval {
        t: at,
        dt,
        counters,
        hists,
        kv_usage: cur.kv_usage,
        running: cur.running,
        waiting: cur.waiting,
        after_restart: restart,
        rewound: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feed::Role;

    fn real(file: &str) -> String {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/lab-captures/qwen3-shape-restart");
        std::fs::read_to_string(format!("{dir}/{file}")).unwrap()
    }

    fn scrape(inst: &mut InstanceState, at: f64, body: &str) -> Interval {
        inst.on_scrape(at, InstanceSample::from_text(body)).unwrap()
    }

    /// The decode's real scrapes: idle before its restart (process A) and
    /// at the end (process B, counters higher).
    #[test]
    fn counters_back_under_the_same_process_start_are_a_rewind_not_a_restart() {
        let (idle, end) = (real("decode-metrics-idle.txt"), real("decode-metrics-end.txt"));
        let (a, b) =
            ("process_start_time_seconds 1.79601987092e+09", "process_start_time_seconds 1.79602001199e+09");
        assert!(idle.contains(a) && end.contains(b));
        let mut inst = InstanceState::new(Endpoint::parse(Role::Decode, "127.0.0.1:8200").unwrap());
        inst.on_scrape(1.0, InstanceSample::from_text(&end));
        // B's counters, then the idle ones under B's start: a recording
        // looping. No restart, nothing counted.
        let iv = scrape(&mut inst, 2.0, &idle.replace(a, b));
        assert!(iv.rewound && !iv.after_restart && iv.counters.iter().all(|(_, v)| *v == 0.0));
        assert_eq!(inst.health.restarts, 0);
        // The same back under an earlier start: a process never starts
        // before the one it replaced.
        inst.on_scrape(3.0, InstanceSample::from_text(&end));
        let iv = scrape(&mut inst, 4.0, &idle);
        assert!(iv.rewound && inst.health.restarts == 0);
        // A later start is a restart: all of its counts are new.
        let iv = scrape(&mut inst, 5.0, &end);
        assert!(iv.after_restart && !iv.rewound && inst.health.restarts == 1);
        // Without a process start (multiprocess metrics), counters going
        // back are all there is: a restart.
        let no_start = |body: &str| {
            body.lines().filter(|l| !l.starts_with("process_start")).collect::<Vec<_>>().join("\n")
        };
        inst.on_scrape(6.0, InstanceSample::from_text(&no_start(&end)));
        let iv = scrape(&mut inst, 7.0, &no_start(&idle));
        assert!(iv.after_restart && inst.health.restarts == 2);
    }
}
