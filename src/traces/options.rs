//! The correlation engine's tunables.

/// Tunables. Times are seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct CorrelatorOptions {
    /// Traces kept; the oldest drop off first.
    pub capacity: usize,
    /// How long after a decode `Added` line a missing `External Cache Hit!`
    /// counts as a miss when lines are timed by their stamps (`check
    /// --from-logs`): the hit is printed when the engine schedules the
    /// request (milliseconds later when the engine is not queueing); 1.5 s
    /// covers the 1 s resolution of vLLM timestamps. The most any wait is.
    pub settle_s: f64,
    /// Lines carry the time they were read and the files are read this
    /// often (a live tail). The wait is then what the engine shows: its
    /// longest recent scheduling lag (at least `MIN_SCHED_S`) plus two
    /// reads, capped at `settle_s` (`HitQueue::wait`).
    pub read_every_s: Option<f64>,
    /// The same wait when the decode engine last reported waiting requests:
    /// a queued request is scheduled (and prints its hit) late.
    pub settle_busy_s: f64,
    /// Window for pairing a prefill with a decode arrival when no id is shared.
    pub order_window_s: f64,
    /// How long a hit printed before any request is waiting may still be
    /// claimed by the next `Added` line (two processes share one stdout).
    pub orphan_hit_s: f64,
    /// A prefill with no decode request after this long is decided Unknown.
    pub prefill_only_timeout_s: f64,
    /// A proxy-only trace is decided Unknown after this long.
    pub proxy_only_timeout_s: f64,
    /// Window for pinning an id-less proxy access line on a trace.
    pub proxy_window_s: f64,
    /// Cap on any per-source waiting queue.
    pub max_pending: usize,
    /// Fixed year for vLLM timestamps; `None`: the UTC year of the read time.
    pub year: Option<i32>,
    /// Keep the prompt text vLLM prints (`--show-prompts`); off by default:
    /// logs can hold users' prompts.
    pub keep_prompts: bool,
    /// A decode request still seen waiting for remote KV this long after
    /// its wait began is stuck: NIXL's producer frees unread KV after
    /// `VLLM_NIXL_ABORT_REQUEST_TIMEOUT` (480 s by default), so past it
    /// the KV cannot come any more.
    pub stuck_after_s: f64,
}

/// Requests kept whole (phases, ids, reasons) for the Requests view and
/// `follow`; older ones still count under their outcome. About 30 minutes
/// of a lab at one request a second, and what bounds pdtop's memory: a
/// ring that fills within the first hour keeps the dashboard's RSS flat
/// after it (`scripts/measure-demo-long.sh`).
pub const KEPT_REQUESTS: usize = 2_000;

/// `VLLM_NIXL_ABORT_REQUEST_TIMEOUT`'s default in vllm/envs.py (older releases: 120).
pub const DEFAULT_STUCK_AFTER_S: f64 = 480.0;

impl Default for CorrelatorOptions {
    fn default() -> Self {
        CorrelatorOptions {
            capacity: KEPT_REQUESTS,
            settle_s: 1.5,
            read_every_s: None,
            settle_busy_s: 10.0,
            order_window_s: 10.0,
            orphan_hit_s: 1.0,
            prefill_only_timeout_s: 60.0,
            proxy_only_timeout_s: 30.0,
            proxy_window_s: 3.0,
            max_pending: 4096,
            year: None,
            keep_prompts: false,
            stuck_after_s: DEFAULT_STUCK_AFTER_S,
        }
    }
}
