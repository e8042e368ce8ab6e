//! The tracker: pure bookkeeping, the server's answers in, what to tell
//! the state out. No I/O and no clock: times are the server's sample
//! times, in milliseconds.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::api::{Series, ms, parse_sample_value};
use super::exposition::render_prefix;
use crate::feed::Endpoint;
use crate::feed::Role;

/// An instance is stale after this many of its scrape intervals without a
/// sample (the server stopped scraping it, or cannot be reached).
pub const STALE_SCRAPES: f64 = 3.0;

/// What the tracker wants said to the state.
#[derive(Debug, Clone, PartialEq)]
pub enum Out {
    /// A new instance, with the index the state will give it.
    Discovered { index: usize, endpoint: Endpoint },
    /// One server scrape, re-rendered as exposition text.
    Scrape { index: usize, ts_ms: i64, body: String },
    /// The server's scrape failed (`up == 0`); the error is filled in from
    /// `/api/v1/targets`.
    Down { index: usize, ts_ms: i64, instance: String },
    /// No sample for too long.
    Stale { index: usize, age_s: f64 },
    /// The served model, from the series' `model_name` label (what
    /// `/v1/models` would say; the server cannot be asked for that).
    Model { index: usize, name: String },
    /// Something the user should know (a misconfiguration).
    Warn(String),
}

#[derive(Debug, Clone)]
struct Watched {
    index: usize,
    role: Role,
    /// The job whose series are used (two jobs scraping one target would
    /// double every counter).
    job: Option<String>,
    /// The newest server scrape fed to the state.
    last_fed: Option<i64>,
    /// The newest sample seen (discovery included).
    newest: Option<i64>,
    /// The latest gap between two scrapes: the server's scrape interval.
    gap_ms: Option<i64>,
    stale: bool,
    model_told: bool,
}

#[derive(Debug, Default)]
pub struct Tracker {
    /// By `instance` label.
    watched: BTreeMap<String, Watched>,
    next_index: usize,
    warned: BTreeSet<String>,
}

/// One server scrape of one instance, being rebuilt.
#[derive(Default)]
struct Group {
    text: String,
    up: Option<f64>,
    samples: usize,
}

impl Tracker {
    /// `first_index`: the index the state gives the first new instance.
    pub fn new(first_index: usize) -> Tracker {
        Tracker { next_index: first_index, ..Default::default() }
    }

    pub fn len(&self) -> usize {
        self.watched.len()
    }

    pub fn is_empty(&self) -> bool {
        self.watched.is_empty()
    }

    /// The entry for an instance seen under `role`, new or known; `None`
    /// when it belongs to the other role (told once).
    fn entry(
        &mut self,
        role: Role,
        instance: &str,
        job: Option<&str>,
        out: &mut Vec<Out>,
    ) -> Option<&mut Watched> {
        if !self.watched.contains_key(instance) {
            let index = self.next_index;
            self.next_index += 1;
            let base_url =
                if instance.contains("://") { instance.to_string() } else { format!("http://{instance}") };
            let endpoint = Endpoint { role, display: instance.to_string(), base_url };
            out.push(Out::Discovered { index, endpoint });
            self.watched.insert(
                instance.to_string(),
                Watched {
                    index,
                    role,
                    job: job.map(str::to_owned),
                    last_fed: None,
                    newest: None,
                    gap_ms: None,
                    stale: false,
                    model_told: false,
                },
            );
        }
        let w = self.watched.get_mut(instance)?;
        if w.role != role {
            if self.warned.insert(instance.to_string()) {
                out.push(Out::Warn(format!(
                    "{instance} matches both --prefill-match and --decode-match; watched as {}",
                    w.role.name()
                )));
            }
            return None;
        }
        Some(w)
    }

    /// Takes `timestamp(up{...})`: every instance of the role and the time
    /// of its latest scrape.
    pub fn on_discovery(&mut self, role: Role, mut series: Vec<Series>) -> Vec<Out> {
        let mut out = Vec::new();
        // Stable indices: the same fleet gets the same order every time.
        series.sort_by(|a, b| a.metric.get("instance").cmp(&b.metric.get("instance")));
        for s in series {
            let Some(instance) = s.metric.get("instance") else {
                continue;
            };
            let job = s.metric.get("job").map(String::as_str);
            let ts = s.value.as_ref().and_then(|(_, v)| parse_sample_value(v)).filter(|v| v.is_finite());
            if let Some(w) = self.entry(role, instance, job, &mut out)
                && w.job.as_deref() == job
                && let Some(ts) = ts
            {
                w.newest = w.newest.max(Some(ms(ts)));
            }
        }
        out
    }

    /// Takes the raw samples of a role's instances over a window and says
    /// which server scrapes are new, oldest first per instance.
    pub fn on_window(&mut self, role: Role, mut series: Vec<Series>) -> Vec<Out> {
        let mut out = Vec::new();
        series.sort_by(|a, b| {
            (a.metric.get("instance"), a.metric.get("job"))
                .cmp(&(b.metric.get("instance"), b.metric.get("job")))
        });
        // instance -> scrape time -> the rebuilt text.
        let mut groups: BTreeMap<String, BTreeMap<i64, Group>> = BTreeMap::new();
        for s in &series {
            let Some(instance) = s.metric.get("instance") else {
                continue;
            };
            let job = s.metric.get("job").map(String::as_str);
            let Some(w) = self.entry(role, instance, job, &mut out) else {
                continue;
            };
            if w.job.is_none() {
                w.job = job.map(str::to_owned);
            }
            if w.job.as_deref() != job {
                continue;
            }
            let last_fed = w.last_fed;
            if !w.model_told
                && let Some(model) = s.metric.get("model_name")
            {
                w.model_told = true;
                out.push(Out::Model { index: w.index, name: model.clone() });
            }
            let Some(name) = s.metric.get("__name__") else {
                continue;
            };
            let per_ts = groups.entry(instance.clone()).or_default();
            let prefix = if name == "up" { None } else { render_prefix(name, &s.metric) };
            for (t, v) in &s.values {
                let ts = ms(*t);
                if last_fed.is_some_and(|f| ts <= f) {
                    continue;
                }
                let g = per_ts.entry(ts).or_default();
                if name == "up" {
                    g.up = parse_sample_value(v);
                    continue;
                }
                let Some(prefix) = &prefix else {
                    continue;
                };
                g.text.push_str(prefix);
                g.text.push_str(v);
                g.text.push('\n');
                g.samples += 1;
            }
        }
        for (instance, per_ts) in groups {
            let Some(w) = self.watched.get_mut(&instance) else {
                continue;
            };
            // The first sight of an instance is its baseline: only its
            // newest scrape, as a direct scraper's first fetch would be.
            let skip = if w.last_fed.is_none() { per_ts.len().saturating_sub(1) } else { 0 };
            for (ts, g) in per_ts.into_iter().skip(skip) {
                if let Some(prev) = w.newest.filter(|p| *p < ts) {
                    w.gap_ms = Some(ts - prev);
                }
                w.newest = w.newest.max(Some(ts));
                w.last_fed = Some(ts);
                w.stale = false;
                // A group without `up` (a rule or federation dropped it) is
                // taken as a good scrape when it holds samples.
                match g.up {
                    Some(up) if up < 0.5 => {
                        out.push(Out::Down { index: w.index, ts_ms: ts, instance: instance.clone() })
                    }
                    _ if g.samples == 0 && g.up.is_none() => {}
                    _ => out.push(Out::Scrape { index: w.index, ts_ms: ts, body: g.text }),
                }
            }
        }
        out
    }

    /// Instances with no sample for [`STALE_SCRAPES`] of their intervals
    /// (at least `min_interval`), each told once per outage.
    pub fn stale(&mut self, server_now_ms: i64, min_interval: Duration) -> Vec<Out> {
        let mut out = Vec::new();
        let floor = min_interval.as_millis() as i64;
        for w in self.watched.values_mut() {
            let Some(newest) = w.newest else {
                continue;
            };
            let gap = w.gap_ms.unwrap_or(floor).max(floor);
            let age = server_now_ms - newest;
            if !w.stale && age as f64 > STALE_SCRAPES * gap as f64 {
                w.stale = true;
                out.push(Out::Stale { index: w.index, age_s: age as f64 / 1000.0 });
            }
        }
        out
    }
}
