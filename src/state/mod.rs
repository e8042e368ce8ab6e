//! The one owner of application state. Collectors send [`Msg`]s; `apply`
//! folds them in; the UI and `check` only read. Nothing here does I/O or
//! reads a clock: time arrives inside the messages.

pub mod alerting;
pub mod alerts;
pub mod blocks;
mod checks;
pub mod connectors;
pub mod discovery;
pub mod doctor;
mod event;
pub mod instance;
pub mod interval;
mod journal;
pub mod latency;
pub mod link;
pub mod logs;
pub mod mismatch;
pub mod misses;
pub mod recovery;
pub mod router;
pub mod router_view;
pub mod series;
pub mod spans;
pub mod tally;
pub mod timeline;
pub mod wires;
pub mod worth;

use std::collections::VecDeque;

use crate::feed::{Endpoint, Msg, Role};
use crate::metrics::histogram::Histogram;
use crate::metrics::model::{Hist, InstanceSample};

pub use event::{Event, EventKind};
use instance::InstanceState;
use logs::LogState;
use misses::MissDetector;

const SOURCE_ERRORS_CAP: usize = 20; // collector failures kept, each also an event

#[derive(Debug, Clone)]
pub struct AppState {
    pub instances: Vec<InstanceState>,
    pub now: f64,
    pub started_at: Option<f64>,
    /// The sliding window of the histograms (seconds).
    pub window_secs: f64,
    pub misses: MissDetector,
    pub events: VecDeque<Event>,
    /// Collector tasks that died (their panics end up here).
    pub source_errors: Vec<(String, String)>,
    /// Present when logs are tailed: per-request traces.
    pub logs: Option<Box<LogState>>,
    /// Link bytes against the KV size the model predicts.
    pub link: link::LinkState,
    /// What the roles disagree on, most harmful first.
    pub mismatches: Vec<mismatch::Mismatch>,
    /// Instances watched after a restart, an outage or a cancellation.
    pub recovery: recovery::Recovery,
    /// vLLM's own request spans (`--otlp-listen`), joined to traces on read.
    pub spans: spans::SpanStore,
    pub router: Option<router::RouterState>, // `--router`
    /// The events of each alerting kind (`alerts()` says what alerts now).
    pub alerts: alerts::AlertLog,
    /// Config problems found on one instance (`pdtop doctor`'s findings).
    pub config_problems: Vec<String>,
    /// `pdtop doctor`'s latest findings (the DOCTOR line).
    pub doctor: doctor::DoctorState,
}

impl AppState {
    pub fn new(endpoints: Vec<Endpoint>, window_secs: f64) -> AppState {
        AppState {
            instances: endpoints.into_iter().map(InstanceState::new).collect(),
            now: 0.0,
            started_at: None,
            window_secs,
            misses: MissDetector::default(),
            events: VecDeque::new(),
            source_errors: Vec::new(),
            logs: None,
            link: link::LinkState::default(),
            mismatches: Vec::new(),
            recovery: recovery::Recovery::default(),
            spans: spans::SpanStore::new(spans::SPANS_CAP),
            router: None,
            alerts: alerts::AlertLog::default(),
            config_problems: Vec::new(),
            doctor: doctor::DoctorState::default(),
        }
    }

    /// Sets what the link panel watches and the model's KV size, if known.
    pub fn with_link(mut self, link: link::LinkState) -> AppState {
        self.link = link;
        self
    }

    /// Adds tailed logs: (which instance or the proxy, path or `-`).
    pub fn with_logs(mut self, logs: &[(crate::feed::LogOrigin, String)]) -> AppState {
        if !logs.is_empty() {
            let mut l = LogState::new(logs);
            // Files are tailed in rounds (`sources::spawn::tail_files`).
            l.set_rounds(logs.iter().any(|(_, p)| p != "-"));
            l.set_addrs(self.instances.iter().map(|i| &i.endpoint));
            self.logs = Some(Box::new(l));
        }
        self
    }

    /// `--show-prompts`: traces keep the prompt text the logs print.
    pub fn show_prompts(mut self, on: bool) -> AppState {
        if let Some(logs) = &mut self.logs {
            logs.correlator.set_keep_prompts(on);
        }
        self
    }

    /// Logs tailed live, read every `secs` clock seconds (`Correlator::set_read_every`).
    pub fn reading_every(mut self, secs: Option<f64>) -> AppState {
        if let Some(logs) = &mut self.logs {
            logs.correlator.set_read_every(secs);
        }
        self
    }

    /// Logs read live: on start, only their last `secs` are read for
    /// requests (what came before still says how the instances are set up).
    pub fn reading_since(mut self, secs: Option<f64>) -> AppState {
        if let (Some(logs), Some(s)) = (&mut self.logs, secs) {
            logs.set_since(s);
        }
        self
    }

    /// The end of a `check`: everything decidable is decided.
    pub fn finish(&mut self, at: f64) {
        self.tick(at);
        self.misses.recheck(self.prefill_seen(), f64::INFINITY);
        if let Some(logs) = &mut self.logs {
            logs.finish(self.now);
        }
        self.collect_named_misses();
        self.collect_request_errors();
        self.finish_recovery();
    }

    pub fn apply(&mut self, msg: Msg) {
        match msg {
            Msg::Scrape { instance, at, body } => {
                self.tick(at);
                let sample = match self.instances.get_mut(instance) {
                    Some(inst) => inst.last_scrape.read(body),
                    None => InstanceSample::from_text(&body),
                };
                self.on_sample(instance, at, sample);
            }
            Msg::ScrapeFailed { instance, at, error } => {
                self.tick(at);
                if let Some(inst) = self.instances.get_mut(instance) {
                    let was_up = inst.health.up || inst.health.scrapes_ok == 0;
                    inst.on_failure(at, error.clone());
                    if was_up && inst.health.consecutive_failures == 1 {
                        let text = format!("{} down: {error}", inst.endpoint.display);
                        self.push_event(at, EventKind::Down, text);
                        self.recovery_on_down(instance, at);
                    }
                }
            }
            Msg::Models { instance, at, info } => {
                self.tick(at);
                if let (Some(text), Some(root)) = (&info.config_json, &info.root) {
                    self.link.offer_config(text, root);
                }
                if let Some(inst) = self.instances.get_mut(instance) {
                    inst.info = Some(info);
                    self.refresh_mismatches();
                }
            }
            Msg::Version { instance, at, version } => {
                self.tick(at);
                self.on_version(instance, &version);
            }
            Msg::Tick { at } => self.tick(at),
            Msg::LogsPolled { at } => {
                if let Some(logs) = &mut self.logs {
                    logs.round_over(at);
                }
                self.tick(at);
            }
            Msg::KvDir { at, scan } => {
                self.tick(at);
                self.link.on_kvdir(at, scan);
            }
            Msg::NetDev { at, read } => {
                self.tick(at);
                self.link.on_netdev(at, read);
            }
            Msg::LogLines { source, at, lines, state, counts } => {
                // The lines are given on at the next tick: a polling round
                // reads every log before any of its lines is placed.
                self.now = self.now.max(at);
                self.started_at.get_or_insert(at);
                if let Some(logs) = &mut self.logs {
                    logs.on_lines(source, at, &lines, state, counts);
                }
            }
            Msg::SourceFailed { source, at, error } => {
                self.tick(at);
                self.push_event(at, EventKind::SourceError, format!("{source}: {error}"));
                self.source_errors.push((source, error));
                // A collector that keeps failing (it is restarted) must not
                // grow the state without bound; the newest ones are shown.
                if self.source_errors.len() > SOURCE_ERRORS_CAP {
                    self.source_errors.remove(0);
                }
            }
            Msg::Discovered { instance, at, endpoint } => {
                self.tick(at);
                self.add_instance(instance, endpoint);
            }
            Msg::Spans { at, spans, counts } => {
                self.tick(at);
                if let Some(logs) = &mut self.logs {
                    logs.on_spans(&spans, at);
                }
                self.spans.on_spans(spans, counts);
            }
            Msg::Router { at, scrape } => {
                self.tick(at);
                self.on_router(at, scrape);
            }
            Msg::Doctor { at, report } => {
                self.tick(at);
                // Its problems alert like a config disagreement does.
                let problems = report
                    .findings
                    .iter()
                    .filter(|f| f.severity == crate::doctor::Severity::Problem)
                    .map(doctor::event_text)
                    .collect();
                self.set_config_problems(problems);
                for f in self.doctor.on_report(report) {
                    self.push_event(at, EventKind::Doctor(f.severity), doctor::event_text(&f));
                }
            }
            Msg::SpansRejected { at, error } => {
                self.tick(at);
                // One event per burst: a sender looping on bad bodies must
                // not push every other event out of the log.
                let last = self.spans.errors.back().map(|(t, _)| *t);
                if last.is_none_or(|t| at - t >= 10.0) {
                    self.push_event(at, EventKind::SourceError, format!("otlp: {error}"));
                }
                self.spans.on_rejected(at, error);
            }
        }
    }

    fn tick(&mut self, at: f64) {
        self.now = self.now.max(at);
        self.started_at.get_or_insert(at);
        self.misses.recheck(self.prefill_seen(), self.now);
        for ev in self.misses.settle(self.now) {
            self.push_miss_event(&ev);
        }
        if let Some(logs) = &mut self.logs {
            // Deadlines are judged only as far as the files have been read.
            let read_up_to = logs.read_up_to(self.now);
            logs.advance(read_up_to);
            self.on_instance_notes();
        }
        self.collect_named_misses();
        self.collect_request_errors();
        self.judge_recovery();
    }

    /// Turns the correlator's newly decided misses into events, naming the
    /// request and the evidence.
    fn collect_named_misses(&mut self) {
        let Some(logs) = &mut self.logs else {
            return;
        };
        for e in logs.correlator.drain_log_events() {
            self.push_event(e.t, EventKind::Log(e.kind), format!("{}: {}", e.source, e.text));
        }
        let Some(logs) = &mut self.logs else {
            return;
        };
        let ids = logs.correlator.drain_new_misses();
        let found: Vec<(String, String)> = ids
            .into_iter()
            .map(|id| {
                let evidence = logs.correlator.get(&id).map(|t| t.evidence()).unwrap_or_default();
                (id, evidence)
            })
            .collect();
        let cause = self.miss_cause().map(|c| format!(" · {c}")).unwrap_or_default();
        for (id, evidence) in found {
            self.push_event(self.now, EventKind::SilentMiss, format!("{id}: {evidence}{cause}"));
        }
    }

    fn push_miss_event(&mut self, ev: &misses::MissEvent) {
        // With a decode log, the traces name each miss; the metrics' count
        // stays as the cross-check in the request panel, not as a second
        // event for the same request.
        if self.logs.as_ref().is_some_and(|l| l.has_decode_log()) {
            return;
        }
        let display =
            self.instances.get(ev.decode_instance).map(|i| i.endpoint.display.clone()).unwrap_or_default();
        let tokens = if ev.local_compute_tokens.is_finite() {
            format!(" ({:.0} prompt tokens computed on decode)", ev.local_compute_tokens)
        } else {
            String::new()
        };
        let cause = self.miss_cause().map(|c| format!(" · {c}")).unwrap_or_default();
        let text = format!(
            "{display}: {} whole prompt(s) recomputed on decode after a prefill{tokens}{cause}",
            ev.count
        );
        self.push_counted(ev.t, EventKind::SilentMiss, text, ev.count);
    }

    fn on_sample(&mut self, idx: usize, at: f64, sample: InstanceSample) {
        let Some(inst) = self.instances.get_mut(idx) else {
            return;
        };
        let was_down = !inst.health.up && inst.health.consecutive_failures > 0;
        let config = |s: Option<&InstanceSample>| {
            s.map(|s| (s.block_size, s.cache_dtype.clone(), s.model_name.clone()))
        };
        let seen = config(inst.latest.as_ref());
        let iv = inst.on_scrape(at, sample);
        if config(inst.latest.as_ref()) != seen {
            self.refresh_mismatches();
        }
        let Some(iv) = iv else {
            if self.instances[idx].endpoint.role == Role::Prefill {
                self.misses.on_prefill_first_scrape(at, self.instances[idx].latest.as_ref());
            }
            return;
        };
        let inst = &self.instances[idx];
        let role = inst.endpoint.role;
        let display = inst.endpoint.display.clone();
        let block = inst.block_size();
        if was_down {
            self.push_event(at, EventKind::Up, format!("{display} back up"));
        }
        if iv.rewound {
            self.misses.on_rewind();
        }
        if iv.after_restart {
            let text = format!("{display} restarted: counters start again from zero");
            self.push_event(at, EventKind::Restart, text);
            self.doctor.on_restart();
        }
        self.check_recovery(idx, &iv, self.has_log(idx));
        self.on_connector_interval(idx, &iv);
        match role {
            Role::Prefill => {
                use crate::metrics::model::Counter;
                self.link.on_prefill_tokens(
                    iv.t,
                    iv.counter(Counter::PromptTokens),
                    iv.counter(Counter::RequestsOk),
                );
                self.misses.on_prefill_interval(&iv);
            }
            Role::Decode => {
                self.link.compute.on_decode_interval(&iv);
                let seen = self.prefill_seen();
                if let Some(ev) = self.misses.on_decode_interval(idx, &iv, block, seen) {
                    self.push_miss_event(&ev);
                }
            }
        }
    }

    /// How far every prefill instance has been scraped: the oldest of their
    /// latest scrapes' times (infinite with no prefill instance).
    fn prefill_seen(&self) -> f64 {
        self.instances_of(Role::Prefill)
            .map(|i| i.latest_at.unwrap_or(f64::NEG_INFINITY))
            .fold(f64::INFINITY, f64::min)
    }

    pub fn instances_of(&self, role: Role) -> impl Iterator<Item = &InstanceState> {
        self.instances.iter().filter(move |i| i.endpoint.role == role)
    }

    /// A role's histogram over the sliding window, merged across instances.
    pub fn window_hist(&self, role: Role, hist: Hist) -> Option<Histogram> {
        self.window_hist_of(role, hist, None)
    }

    /// A role's histogram since pdtop started, merged across instances.
    pub fn total_hist(&self, role: Role, hist: Hist) -> Option<Histogram> {
        self.total_hist_of(role, hist, None)
    }

    /// As `window_hist`, but only instance `only` when it has this role
    /// (the drill-down into one instance).
    pub fn window_hist_of(&self, role: Role, hist: Hist, only: Option<usize>) -> Option<Histogram> {
        let since = self.now - self.window_secs;
        self.merge_role(role, only, |i| i.hist_since(hist, since))
    }

    pub fn total_hist_of(&self, role: Role, hist: Hist, only: Option<usize>) -> Option<Histogram> {
        self.merge_role(role, only, |i| i.total_hists.get(&hist).cloned())
    }

    fn merge_role(
        &self,
        role: Role,
        only: Option<usize>,
        f: impl Fn(&InstanceState) -> Option<Histogram>,
    ) -> Option<Histogram> {
        let focus = only.and_then(|i| self.instances.get(i)).filter(|i| i.endpoint.role == role);
        let mut out: Option<Histogram> = None;
        let chosen: Vec<&InstanceState> = match focus {
            Some(i) => vec![i],
            None => self.instances_of(role).collect(),
        };
        for h in chosen.into_iter().filter_map(f) {
            out.get_or_insert_with(Histogram::default).merge(&h);
        }
        out
    }

    /// The decode instances' KV block size, when one reported it.
    pub fn decode_block_size(&self) -> Option<u32> {
        self.instances_of(Role::Decode).find_map(|i| i.block_size())
    }

    /// Mean KV usage of a role's reachable instances (0..1).
    pub fn kv_usage(&self, role: Role) -> Option<f64> {
        let vals: Vec<f64> = self
            .instances_of(role)
            .filter(|i| i.health.up)
            .filter_map(|i| i.latest.as_ref()?.kv_usage)
            .collect();
        (!vals.is_empty()).then(|| vals.iter().sum::<f64>() / vals.len() as f64)
    }
}
