//! The public vocabulary of the correlation engine: what a trace is, what
//! was concluded about it, and how sure that conclusion is.

use crate::feed::LogOrigin;

pub use super::options::{CorrelatorOptions, DEFAULT_STUCK_AFTER_S, KEPT_REQUESTS};
pub use super::outcome::{Confidence, Hop, Join, Outcome};

/// What one hop did for a request, as far as its log says.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    pub hop: Hop,
    pub source: LogOrigin,
    /// `"APIServer pid=3126"` when the line carried a process prefix.
    pub process: Option<String>,
    /// Unix seconds: the vLLM timestamp anchored to a year, or the read time
    /// for lines without a clock (uvicorn access lines, the demo proxy).
    pub start: f64,
    pub end: Option<f64>,
    pub detail: String,
    pub error: Option<String>,
}

/// One request followed across proxy, prefill, connector and decode.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// Its identity: an id names one request for one lifetime (a looping
    /// client reuses ids), so the screen and every late line address a
    /// trace by this, never by its id. Grows with each trace.
    pub serial: u64,
    /// The base id as the client/proxy knows it (`lab-steady-3`), or the
    /// id an instance invented (`a3f…`) when none was forwarded, or a
    /// synthetic one (`proxy-12`, `decode#0-error-3`).
    pub id: String,
    /// vLLM's own ids per instance (`cmpl-…-0`, `cmpl-…-0-<8hex>`).
    pub engine_ids: Vec<(LogOrigin, String)>,
    pub phases: Vec<Phase>,
    pub prefill: Option<usize>,
    pub decode: Option<usize>,
    /// `Inject KV cache of N tokens` attributed to this request (ExampleConnector).
    pub inject_tokens: Option<u32>,
    /// `remote_num_tokens` from the decode's `kv_transfer_params` (NIXL).
    pub remote_num_tokens: Option<u32>,
    /// The decode request's prompt length, when something reported it
    /// (vLLM's DEBUG request details, a span): settles which of several
    /// concurrent requests an `Inject KV cache of N tokens` belongs to.
    pub prompt_tokens: Option<u32>,
    /// The hop an `Error` verdict blames.
    pub error_at: Option<Hop>,
    pub outcome: Outcome,
    /// Why: typed, put into words by [`Trace::evidence`] where shown.
    pub reasons: Vec<super::reason::Reason>,
    pub join: Join,
    pub confidence: Confidence,
    /// Read time of the first line of this trace.
    pub first_seen: f64,
    /// The `now` (or read time) at which the verdict was reached.
    pub decided_at: Option<f64>,
    /// The prompt as vLLM printed it, only with `--show-prompts`.
    pub prompt: Option<String>,
    /// The decode waited for the remote KV (`start_load_kv`, `still in
    /// WAITING_FOR_REMOTE_KVS`), and whether that wait became stuck.
    pub remote_wait: Option<RemoteWait>,
}

/// A decode request waiting for its KV to arrive from the prefill, judged
/// over time on the log's own clock (`stuck.rs`).
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteWait {
    /// Event time of the first sign of the wait.
    pub since: f64,
    /// Event time of the last `still in WAITING_FOR_REMOTE_KVS` (or load) line.
    pub last_seen: f64,
    /// `start_load_kv` was logged: the connector began the load.
    pub load_begun: bool,
    /// When the request showed it went on (answered, finished, failed, cancelled).
    pub ended: Option<f64>,
    /// Set once it was still seen waiting `stuck_after_s` after the first
    /// sign: the event time it was judged stuck.
    pub stuck_at: Option<f64>,
    /// Read time of the last sign (the clock `on_tick` is given), to stop
    /// watching a wait whose lines stopped.
    pub last_read: f64,
    /// On the correlator's list of waits to judge.
    pub watched: bool,
}

impl RemoteWait {
    /// Seconds it had waited when judged stuck.
    pub fn stuck_secs(&self) -> Option<f64> {
        self.stuck_at.map(|t| t - self.since)
    }
}

impl Trace {
    pub(crate) fn new(id: String, at: f64) -> Self {
        Trace {
            serial: 0,
            id,
            engine_ids: Vec::new(),
            phases: Vec::new(),
            prefill: None,
            decode: None,
            inject_tokens: None,
            remote_num_tokens: None,
            prompt_tokens: None,
            error_at: None,
            outcome: Outcome::Pending,
            reasons: Vec::new(),
            join: Join::ById,
            confidence: Confidence::Sure,
            first_seen: at,
            decided_at: None,
            prompt: None,
            remote_wait: None,
        }
    }

    /// The verdict's reasons in words.
    pub fn evidence(&self) -> String {
        super::reason::words(&self.reasons)
    }

    /// The first phase of a hop, if the trace has one.
    pub fn phase(&self, hop: Hop) -> Option<&Phase> {
        self.phases.iter().find(|p| p.hop == hop)
    }

    pub(crate) fn phase_mut(&mut self, hop: Hop) -> Option<&mut Phase> {
        self.phases.iter_mut().find(|p| p.hop == hop)
    }

    /// Gives back the capacity its strings and vectors hold beyond their
    /// contents (the ring keeps 10,000 traces).
    pub(crate) fn shrink_to_fit(&mut self) {
        let opt = |s: &mut Option<String>| s.iter_mut().for_each(String::shrink_to_fit);
        self.id.shrink_to_fit();
        self.engine_ids.shrink_to_fit();
        self.engine_ids.iter_mut().for_each(|(_, id)| id.shrink_to_fit());
        self.phases.shrink_to_fit();
        for p in &mut self.phases {
            opt(&mut p.process);
            p.detail.shrink_to_fit();
            opt(&mut p.error);
        }
        self.reasons.shrink_to_fit();
        opt(&mut self.prompt);
    }
}

/// Requests by outcome: the one counting type. The correlator counts the
/// traces it holds (per request, named); the metrics count per interval
/// (unnamed), leaving what only traces know at zero.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    pub seen: u64,
    pub loaded: u64,
    pub silent_miss: u64,
    pub no_prefill: u64,
    pub error: u64,
    /// The client went away mid-request (`Aborted request(s)`; metrics:
    /// `finished_reason="abort"`).
    pub cancelled: u64,
    /// The evidence allows no verdict (traces: no shared ids, ambiguity;
    /// metrics: which prefill was whose is open, or the prefill unseen).
    pub unknown: u64,
    /// Traces only: still waiting for evidence.
    pub pending: u64,
    /// Traces only: waited for remote KV past the stuck threshold (also
    /// counted under their outcome).
    pub stuck: u64,
    /// Misses known to have happened that no single request can be blamed
    /// for: fewer hits than concurrent prefilled requests, or a prefill's KV
    /// expiring unread with no decode request tied to it. Run-long.
    #[serde(skip)]
    pub unattributed_misses: u64,
    /// Traces dropped off the ring (still counted under their outcome). Run-long.
    #[serde(skip)]
    pub evicted: u64,
    /// Read from the logs' past: they happened before pdtop started.
    #[serde(skip)]
    pub before_start: u64,
    /// Of the silent misses, those from before pdtop started (no metric
    /// pdtop scraped saw them).
    #[serde(skip)]
    pub silent_miss_before_start: u64,
}

impl Counts {
    /// The silent misses since pdtop started: what its metrics can have seen.
    pub fn silent_miss_since_start(&self) -> u64 {
        self.silent_miss - self.silent_miss_before_start
    }
}

impl Counts {
    /// One trace more: its outcome, whether it got stuck, whether it came
    /// from before pdtop started reading at `started`.
    pub fn add_trace(&mut self, t: &Trace, started: Option<f64>) {
        self.add(t.outcome);
        self.stuck += u64::from(t.remote_wait.as_ref().is_some_and(|w| w.stuck_at.is_some()));
        let before = started.is_some_and(|s| t.first_seen < s);
        self.before_start += u64::from(before);
        self.silent_miss_before_start += u64::from(before && t.outcome == Outcome::SilentMiss);
    }

    /// One request more, under its outcome.
    pub fn add(&mut self, o: Outcome) {
        self.seen += 1;
        let slot = match o {
            Outcome::Pending => &mut self.pending,
            Outcome::Loaded => &mut self.loaded,
            Outcome::SilentMiss => &mut self.silent_miss,
            Outcome::NoPrefill => &mut self.no_prefill,
            Outcome::Error => &mut self.error,
            Outcome::Cancelled => &mut self.cancelled,
            Outcome::Unknown => &mut self.unknown,
        };
        *slot += 1;
    }
}

/// A fatal engine event, kept so the UI can say "decode died".
#[derive(Debug, Clone, PartialEq)]
pub struct Death {
    pub at: f64,
    pub text: String,
    /// Its transfer peer died within a second of it: both, in order.
    pub cascade: Option<String>,
}

/// Per-source line accounting and lifecycle, for the UI.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceStats {
    pub source: LogOrigin,
    pub lines: u64,
    /// Lines that produced an event the correlator understands.
    pub parsed: u64,
    /// Blank lines and lines of no interest (`Other`, foreign output).
    pub ignored: u64,
    /// Lines pdtop does not know at all (no event, no signal): shown, never guessed.
    pub unknown: u64,
    /// Lines known to carry nothing (start-up, tracebacks' bodies, uvicorn's
    /// lifecycle...: `logs::known`).
    pub noise: u64,
    pub last_at: Option<f64>,
    pub pid: Option<u32>,
    /// `Starting vLLM server` / uvicorn startup lines seen.
    pub starts: u32,
    pub shutdowns: u32,
    pub deaths: u32,
    pub last_death: Option<Death>,
    /// `kv_connector` from the instance's `KVTransferConfig`.
    pub connector: Option<String>,
    pub kv_role: Option<String>,
    /// `kv_load_failure_policy` from the same config (vLLM ≥ 0.26): with
    /// `recompute`, a load that fails is computed again and answered.
    pub failure_policy: Option<String>,
    /// Last `External prefix cache hit rate` of the periodic engine line.
    pub external_hit_pct: Option<f64>,
    /// `Waiting: N reqs` of the last periodic engine line.
    pub waiting: Option<u32>,
    /// Non-2xx or error lines that could not be tied to a request.
    pub unattributed_errors: u64,
    /// The proxy's id-less answers no request fits (by time, or undated
    /// by order) while instance logs name the requests: counted, not made
    /// requests of their own.
    pub unplaced_answers: u64,
}

impl SourceStats {
    pub(crate) fn new(source: LogOrigin) -> Self {
        SourceStats {
            source,
            lines: 0,
            parsed: 0,
            ignored: 0,
            unknown: 0,
            noise: 0,
            last_at: None,
            pid: None,
            starts: 0,
            shutdowns: 0,
            deaths: 0,
            last_death: None,
            connector: None,
            kv_role: None,
            failure_policy: None,
            external_hit_pct: None,
            waiting: None,
            unattributed_errors: 0,
            unplaced_answers: 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct CorrelatorStats {
    /// One entry per source that has sent at least one line, in `LogOrigin` order.
    pub sources: Vec<SourceStats>,
    /// `External Cache Hit!` lines no waiting request could take.
    pub orphan_hits: u64,
    /// Traces on the undecided list (bounded by the ring).
    pub open: usize,
    /// Entries in the per-source waiting queues (each capped at `max_pending`).
    pub queued: usize,
    /// Entries in the id indexes (bounded: dropped with their trace).
    pub index_entries: usize,
}

/// A failure a log reported.
#[derive(Debug, Clone, PartialEq)]
pub struct LogEvent {
    /// Event time (the line's own stamp where it has one).
    pub t: f64,
    pub source: LogOrigin,
    pub kind: crate::logs::signal::SignalKind,
    pub text: String,
}

/// The hop a log's own lines speak for.
pub(crate) fn hop_of(src: crate::feed::LogOrigin) -> Hop {
    match src {
        crate::feed::LogOrigin::Prefill(_) => Hop::Producer,
        crate::feed::LogOrigin::Decode(_) => Hop::Consumer,
        crate::feed::LogOrigin::Proxy => Hop::Proxy,
    }
}
