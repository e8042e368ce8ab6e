//! The tracker: pure bookkeeping, the server's answers in, what to tell
//! the state out. No I/O and no clock: times are the server's sample
//! times, in milliseconds.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::api::{Series, ms, parse_sample_value};
use super::exposition::render_prefix;
use super::matrix::{self, Label, MatrixSink};
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
    /// The `instance` label.
    name: String,
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
    /// The server scrapes of this refresh newer than `last_fed`, being
    /// rebuilt (emptied at the end of each refresh, kept allocated).
    pending: Vec<Group>,
    /// The longest text rebuilt so far: each new one is sized to it.
    text_len: usize,
}

/// One server scrape of one instance, being rebuilt.
#[derive(Debug, Clone)]
struct Group {
    ts: i64,
    text: String,
    up: Option<f64>,
    samples: usize,
}

/// The series whose samples are being read: its instance's slot, and
/// whether it is `up` (read, not written into the text).
#[derive(Debug, Clone, Copy)]
struct Reading {
    slot: usize,
    up: bool,
}

#[derive(Debug, Default)]
pub struct Tracker {
    /// Slots in `watched`, by `instance` label.
    by_name: BTreeMap<String, usize>,
    watched: Vec<Watched>,
    next_index: usize,
    warned: BTreeSet<String>,
    /// While a window is read: the current series, its rendered
    /// `name{labels} ` (one buffer for all), and the findings so far.
    reading: Option<Reading>,
    prefix: String,
    found: Vec<Out>,
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

    /// The `instance` labels watched, in order, and the jobs their series
    /// come from (`None` when one is not known: then any job).
    pub fn targets(&self) -> (Vec<&str>, Option<BTreeSet<&str>>) {
        let names = self.by_name.keys().map(String::as_str).collect();
        let jobs = self.watched.iter().map(|w| w.job.as_deref()).collect();
        (names, jobs)
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
        let slot = match self.by_name.get(instance) {
            Some(slot) => *slot,
            None => {
                let index = self.next_index;
                self.next_index += 1;
                let base_url = if instance.contains("://") {
                    instance.to_string()
                } else {
                    format!("http://{instance}")
                };
                let endpoint = Endpoint { role, display: instance.to_string(), base_url };
                out.push(Out::Discovered { index, endpoint });
                self.by_name.insert(instance.to_string(), self.watched.len());
                self.watched.push(Watched {
                    name: instance.to_string(),
                    index,
                    role,
                    job: job.map(str::to_owned),
                    last_fed: None,
                    newest: None,
                    gap_ms: None,
                    stale: false,
                    model_told: false,
                    pending: Vec::new(),
                    text_len: 0,
                });
                self.watched.len() - 1
            }
        };
        let w = &mut self.watched[slot];
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

    /// Takes the answer to [`window_query`](super::window_query): the raw
    /// samples of the watched instances over a window, both roles in one,
    /// and says which server scrapes are new, oldest first per instance.
    /// Series of an instance not (yet) discovered are left out. An answer
    /// that cannot be read feeds nothing.
    pub fn on_window(&mut self, body: &[u8]) -> Result<Vec<Out>, String> {
        self.reading = None;
        let read = matrix::read(body, self);
        self.reading = None;
        let mut out = std::mem::take(&mut self.found);
        if let Err(e) = read {
            for w in &mut self.watched {
                w.pending.clear();
            }
            return Err(e);
        }
        // Every prefill's scrapes before any decode's, as one request per
        // role gave them: the miss detector pairs a decode's requests with
        // the prefills that completed before, so a prefill seen in the same
        // refresh must reach the state first.
        let order: Vec<usize> = [Role::Prefill, Role::Decode]
            .iter()
            .flat_map(|r| self.by_name.values().copied().filter(|s| self.watched[*s].role == *r))
            .collect();
        for slot in order {
            let w = &mut self.watched[slot];
            if w.pending.is_empty() {
                continue;
            }
            w.pending.sort_unstable_by_key(|g| g.ts);
            // The first sight of an instance is its baseline: only its
            // newest scrape, as a direct scraper's first fetch would be.
            let skip = if w.last_fed.is_none() { w.pending.len() - 1 } else { 0 };
            for g in w.pending.drain(..).skip(skip) {
                let ts = g.ts;
                if let Some(prev) = w.newest.filter(|p| *p < ts) {
                    w.gap_ms = Some(ts - prev);
                }
                w.newest = w.newest.max(Some(ts));
                w.last_fed = Some(ts);
                w.stale = false;
                w.text_len = w.text_len.max(g.text.len());
                // A group without `up` (a rule or federation dropped it) is
                // taken as a good scrape when it holds samples.
                match g.up {
                    Some(up) if up < 0.5 => {
                        out.push(Out::Down { index: w.index, ts_ms: ts, instance: w.name.clone() })
                    }
                    _ if g.samples == 0 && g.up.is_none() => {}
                    _ => out.push(Out::Scrape { index: w.index, ts_ms: ts, body: g.text }),
                }
            }
        }
        Ok(out)
    }

    /// Instances with no sample for [`STALE_SCRAPES`] of their intervals
    /// (at least `min_interval`), each told once per outage.
    pub fn stale(&mut self, server_now_ms: i64, min_interval: Duration) -> Vec<Out> {
        let mut out = Vec::new();
        let floor = min_interval.as_millis() as i64;
        for w in &mut self.watched {
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

impl MatrixSink for Tracker {
    fn series(&mut self, labels: &[Label<'_>]) -> bool {
        self.reading = None;
        let (mut instance, mut job, mut name, mut model) = (None, None, None, None);
        for (k, v) in labels {
            let v = Some(v.as_ref());
            match k.as_ref() {
                "instance" => instance = v,
                "job" => job = v,
                "__name__" => name = v,
                "model_name" => model = v,
                _ => {}
            }
        }
        let Some(&slot) = instance.and_then(|i| self.by_name.get(i)) else {
            return false;
        };
        let w = &mut self.watched[slot];
        if w.job.is_none() {
            w.job = job.map(str::to_owned);
        }
        if w.job.as_deref() != job {
            return false;
        }
        if !w.model_told
            && let Some(model) = model
        {
            w.model_told = true;
            self.found.push(Out::Model { index: w.index, name: model.to_string() });
        }
        let Some(name) = name else {
            return false;
        };
        let up = name == "up";
        if !up && !render_prefix(&mut self.prefix, name, labels) {
            return false;
        }
        self.reading = Some(Reading { slot, up });
        true
    }

    fn sample(&mut self, ts_ms: i64, value: &str) {
        let Some(r) = self.reading else {
            return;
        };
        let w = &mut self.watched[r.slot];
        if w.last_fed.is_some_and(|f| ts_ms <= f) {
            return;
        }
        // A window holds two or three scrapes of an instance: a scan.
        let i = match w.pending.iter().position(|g| g.ts == ts_ms) {
            Some(i) => i,
            None => {
                let text = String::with_capacity(w.text_len);
                w.pending.push(Group { ts: ts_ms, text, up: None, samples: 0 });
                w.pending.len() - 1
            }
        };
        let g = &mut w.pending[i];
        if r.up {
            g.up = parse_sample_value(value);
            return;
        }
        g.text.push_str(&self.prefix);
        g.text.push_str(value);
        g.text.push('\n');
        g.samples += 1;
    }
}
