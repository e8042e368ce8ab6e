//! The correlator: owns the ring and the parts that give evidence (the
//! instances' logs, the hit queues, the joiner, the proxy's flow). Pure:
//! lines and time come in as arguments; nothing here reads a clock or a
//! file. The parts add facts to traces (`evidence.rs`); `settle.rs` hands a
//! trace's facts to `decide/` and writes its verdict.

use std::collections::{BTreeMap, HashMap, VecDeque};

use super::connector::decode_log::DecodeLog;
use super::instance::notes::{InstanceNote, InstanceNotes};
use super::joiner::Joiner;
pub(crate) use super::line_time::LineTime;
use super::model::{Confidence, CorrelatorOptions, CorrelatorStats, Outcome, SourceStats, Trace};
use super::proxy::flow::Flow;
use super::reason::Reason;
use super::store::Store;
pub(crate) use super::style::Style;
use crate::feed::LogOrigin;
use crate::logs::proxy::parse_proxy_line;

#[derive(Clone)]
pub struct Correlator {
    pub(super) opts: CorrelatorOptions,
    pub(super) store: Store,
    pub(super) stats: BTreeMap<LogOrigin, SourceStats>,
    /// Per decode index: its hit queue, params loads, queueing.
    pub(super) decodes: HashMap<usize, DecodeLog>,
    /// Pairs prefill and decode sides, and access lines with requests.
    pub(super) joiner: Joiner,
    /// Undecided traces, checked on every tick.
    pub(super) open: VecDeque<u64>,
    pub(super) new_misses: VecDeque<String>,
    pub(super) unattributed_misses: u64,
    pub(super) synthetic: u64,
    pub(super) last_at: f64,
    /// What the proxy's flow proves without shared ids.
    pub(super) flow: Flow,
    /// Instances' failing answers and the proxy's reports of them, paired.
    pub(super) upstream: super::proxy::reports::Upstream,
    /// What each instance's log says of itself beyond its stats.
    pub(super) logs: LogState,
    /// Failures the logs reported, for the events view (`drain_log_events`).
    pub(super) log_events: VecDeque<super::model::LogEvent>,
    /// Router ids and the ids the router forwarded (`router_events.rs`).
    pub(super) router: super::proxy::router_join::RouterJoin,
    /// Traces whose decode waits for remote KV (`stuck.rs`).
    pub(super) waits: VecDeque<u64>,
    /// Per log: start-up and traceback state, for known noise.
    pub(super) noise: HashMap<LogOrigin, crate::logs::known::NoiseState>,
    /// Per log: joins wrapped lines (`wrapped.rs`).
    pub(super) readers: HashMap<LogOrigin, crate::logs::reader::Reader>,
    pub(super) prev_line: HashMap<LogOrigin, super::instance::per_log::PrevLine>,
    /// What instances' logs said of themselves, for the state to take.
    pub(super) notes: InstanceNotes,
    pub(super) inflight: super::instance::inflight::InFlight,
    /// `counts()` as of (store revision, unattributed misses): it is read
    /// on every tick and frame, and scanning 10,000 traces each time was
    /// most of an idle dashboard's work.
    pub(super) counted: super::store::Memo,
    /// Prompt-length classes waiting for a length (`length_join.rs`):
    /// (length, event time).
    pub(super) held: VecDeque<(u32, f64)>,
    /// How well the line being read is dated.
    pub(super) line_time: LineTime,
    /// Lines some log printed before pdtop started, with no time, are
    /// still to come (`set_backlog_unread`).
    pub(super) backlog_unread: bool,
    /// Kills read while those were still to come (`cut.rs`).
    pub(super) kills: Vec<super::instance::kill::Kill>,
    /// When pdtop began reading (`set_started`).
    pub(super) started: Option<f64>,
    /// The latest line read for set-up only (printed before `--since`):
    /// a request's lines before it were not read (`on_setup_line`).
    pub(super) setup_only_until: Option<f64>,
    /// Logs that print requests' arrivals (`Received request`, `Added
    /// request`): a request one of them names without its arrival began
    /// before what was read of it.
    pub(super) arrivals_logged: Vec<LogOrigin>,
    /// Traces given a fact by the read under way, with its read time:
    /// settled once each when it is done (`settle_touched`).
    pub(super) touched: Vec<(u64, f64)>,
}

/// What each instance's log says of itself.
#[derive(Debug, Clone, Default)]
pub(super) struct LogState {
    /// `block_size` from the instance's `non-default args`.
    pub blocks: HashMap<LogOrigin, u32>,
    /// Time of the last stamped line.
    pub last_stamp: HashMap<LogOrigin, f64>,
    /// How far each log has been read (its last stamp, given on or not):
    /// a later line read says nothing was printed before it.
    pub read_to: HashMap<LogOrigin, f64>,
    /// Running requests and no progress, per log and engine (`stalls.rs`).
    pub stalls: HashMap<(LogOrigin, Option<u32>), super::instance::per_log::Stall>,
    /// `max_log_len` from the instance's `non-default args`: vLLM cuts a
    /// logged `prompt_token_ids` list to it, so a list that long is no length.
    pub max_log_len: HashMap<LogOrigin, u32>,
}

impl Correlator {
    pub fn new(opts: CorrelatorOptions) -> Self {
        Correlator {
            store: Store::new(opts.capacity),
            opts,
            stats: BTreeMap::new(),
            decodes: HashMap::new(),
            joiner: Joiner::default(),
            open: VecDeque::new(),
            new_misses: VecDeque::new(),
            unattributed_misses: 0,
            synthetic: 0,
            last_at: 0.0,
            flow: Flow::default(),
            upstream: Default::default(),
            logs: LogState::default(),
            log_events: VecDeque::new(),
            router: Default::default(),
            waits: VecDeque::new(),
            noise: HashMap::new(),
            readers: HashMap::new(),
            prev_line: HashMap::new(),
            notes: InstanceNotes::default(),
            inflight: Default::default(),
            counted: Default::default(),
            held: Default::default(),
            line_time: LineTime::default(),
            backlog_unread: false,
            kills: Vec::new(),
            started: None,
            setup_only_until: None,
            arrivals_logged: Vec::new(),
            touched: Vec::new(),
        }
    }

    /// How long a decode request may wait for remote KV before it is stuck.
    pub fn set_stuck_after(&mut self, secs: f64) {
        if secs.is_finite() && secs > 0.0 {
            self.opts.stuck_after_s = secs;
        }
    }

    /// Keep (or stop keeping) the prompt text lines carry: `--show-prompts`.
    pub fn set_keep_prompts(&mut self, on: bool) {
        self.opts.keep_prompts = on;
    }

    /// Lines come from a live tail read every `secs` (clock seconds), timed
    /// when read: the hit wait follows the engine (`HitQueue::wait`).
    pub fn set_read_every(&mut self, secs: Option<f64>) {
        self.opts.read_every_s = secs.filter(|s| s.is_finite() && *s >= 0.0);
    }

    /// The `host:port` an instance serves on, so that a proxy line naming
    /// it (`Cannot connect to host 127.0.0.1:8100`) names the right hop.
    pub fn set_instance_addr(&mut self, src: LogOrigin, addr: &str) {
        self.flow.set_addr(src, addr);
    }

    /// The decode instance that served the request an instance id names.
    pub fn decode_of(&self, id: &str) -> Option<usize> {
        self.store.get(self.find(id)?).and_then(|e| e.trace.decode)
    }

    /// One line of one source that happened at `at` (unix seconds, pdtop's
    /// clock): a stamped line, or one read as it was printed.
    pub fn on_line(&mut self, src: LogOrigin, line: &str, at: f64) {
        self.on_line_between(src, line, at, at);
    }

    /// One line that happened between `from` and `at`: a log that prints
    /// no time, read at `at` and last before at `from` (`-inf`: found by
    /// the first read, printed before pdtop started). Its place among its
    /// log's lines says more than its time then (`LineTime`).
    pub fn on_line_between(&mut self, src: LogOrigin, line: &str, from: f64, at: f64) {
        self.line_time = LineTime::new(from, at);
        self.read_line(src, line, at);
        self.line_time = LineTime::default();
    }

    fn read_line(&mut self, src: LogOrigin, line: &str, at: f64) {
        // A NaN or infinite read time would poison every window comparison.
        let at = if at.is_finite() { at } else { self.last_at };
        self.last_at = at;
        // The log has come this far.
        let to = self.logs.read_to.entry(src).or_insert(at);
        *to = to.max(at);
        let st = self.stats.entry(src).or_insert_with(|| SourceStats::new(src));
        st.lines += 1;
        st.last_at = Some(at);
        let used = match src {
            LogOrigin::Proxy => match self.on_router_line(line, at) {
                Some(used) => used,
                None => parse_proxy_line(line).is_some_and(|ev| self.on_proxy(ev, at)),
            },
            LogOrigin::Prefill(_) | LogOrigin::Decode(_) => self.on_instance_line(src, line, at),
        };
        if self.opts.keep_prompts
            && !matches!(src, LogOrigin::Proxy)
            && let Some((id, prompt)) = crate::logs::vllm::prompt_of(line)
            && let Some(s) = self.store.latest(super::ids::base_id(&id))
            && let Some(e) = self.store.get_mut(s)
        {
            e.trace.prompt = Some(prompt);
        }
        self.settle_touched(false);
        let st = self.stats.entry(src).or_insert_with(|| SourceStats::new(src));
        if used {
            st.parsed += 1;
        } else {
            st.ignored += 1;
        }
    }

    /// `src` has been read up to a line stamped `t` (`state::timeline`).
    pub fn set_read_to(&mut self, src: LogOrigin, t: f64) {
        self.logs.read_to.insert(src, t);
    }

    /// Decides what can be decided by `now` (read-time clock).
    pub fn on_tick(&mut self, now: f64) {
        if now.is_finite() {
            self.sweep(now, false);
        }
    }

    /// End of a check: decides everything still open, as if every deadline had passed.
    pub fn finish(&mut self, now: f64) {
        let now = if now.is_finite() { now } else { self.last_at };
        self.sweep(now, true);
        // A load by params is likely while its read may still fail; at the
        // end none can any more (`decide::pair::params`).
        let loads: Vec<u64> = self
            .store
            .serials()
            .filter(|&s| {
                self.store.get(s).is_some_and(|e| {
                    e.trace.outcome == Outcome::Loaded
                        && e.trace.confidence == Confidence::Likely
                        && matches!(e.trace.reasons.first(), Some(Reason::ParamsLoaded { .. }))
                })
            })
            .collect();
        for s in loads {
            self.settle_by(s, now, true);
        }
    }

    /// Oldest → newest.
    pub fn traces(&self) -> impl DoubleEndedIterator<Item = &Trace> {
        debug_assert!(self.touched.is_empty(), "read with facts unsettled");
        self.store.traces()
    }

    /// The latest trace for a base id (or an instance's own id of it): a
    /// reused id names several (`trace` takes one by its serial).
    pub fn get(&self, id: &str) -> Option<&Trace> {
        let s = self.store.latest(id).or_else(|| self.store.by_engine(id))?;
        self.store.get(s).map(|e| &e.trace)
    }

    /// Base ids of the silent misses held, oldest first.
    pub fn silent_miss_ids(&self) -> Vec<String> {
        self.store.traces().filter(|t| t.outcome == Outcome::SilentMiss).map(|t| t.id.clone()).collect()
    }

    /// Start-up lines and cancellations read since the last call, per log,
    /// with the time each line was printed.
    pub fn drain_instance_notes(&mut self) -> Vec<(LogOrigin, f64, InstanceNote)> {
        self.notes.drain()
    }

    /// Misses decided since the last call, for a live alert.
    pub fn drain_new_misses(&mut self) -> Vec<String> {
        self.new_misses.drain(..).collect()
    }

    pub fn stats(&self) -> CorrelatorStats {
        CorrelatorStats {
            sources: self.stats.values().cloned().collect(),
            orphan_hits: self.decodes.values().map(|d| d.hits.orphan_total).sum(),
            open: self.open.len(),
            queued: self.decodes.values().map(|d| d.hits.len() + d.transfers.len()).sum::<usize>()
                + self.joiner.queued()
                + self.flow.queued()
                + self.notes.len(),
            index_entries: self.store.index_entries(),
        }
    }
}

/// `"APIServer pid=3126"` from a line's prefix.
pub(super) fn process_label(name: Option<&str>, pid: Option<u32>) -> Option<String> {
    match (name, pid) {
        (Some(n), Some(p)) => Some(format!("{n} pid={p}")),
        (Some(n), None) => Some(n.to_string()),
        (None, Some(p)) => Some(format!("pid={p}")),
        (None, None) => None,
    }
}
