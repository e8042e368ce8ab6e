//! What the event log holds: a time, a kind, a line of text.

/// Something worth a line in the event log.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub t: f64,
    pub kind: EventKind,
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    SilentMiss,
    Restart,
    Down,
    Up,
    SourceError,
    /// The roles disagree on what they run (block size, model, ...).
    Mismatch,
    /// After a restart, outage or cancellation: the next request succeeded.
    Recovered,
    /// ... or it failed, or the instance went down first.
    NotRecovered,
    /// KV still held with nothing running, after one of those.
    KvNotReleased,
    /// The end came before any request showed it.
    RecoveryUnknown,
    /// A connector's failure counter rose (kind: `connectors::FAILURES`).
    Connector(&'static str),
    RouterError, // a `vllm_router_pd_*errors_total` rose
    /// Requests decided as errors (by the traces, or counted by metrics).
    RequestErrors,
    /// A failure a log line reported (engine death, transfer or KV load
    /// failure, connector missing...), with or without a request.
    Log(crate::logs::signal::SignalKind),
    /// A `pdtop doctor` finding, at start or after a restart.
    Doctor(crate::doctor::Severity),
}

impl EventKind {
    pub fn name(self) -> &'static str {
        match self {
            EventKind::SilentMiss => "silent_miss",
            EventKind::Restart => "restart",
            EventKind::Down => "down",
            EventKind::Up => "up",
            EventKind::SourceError => "source_error",
            EventKind::Mismatch => "mismatch",
            EventKind::Recovered => "recovered",
            EventKind::NotRecovered => "not_recovered",
            EventKind::KvNotReleased => "kv_not_released",
            EventKind::RecoveryUnknown => "recovery_unknown",
            EventKind::Connector(kind) => kind,
            EventKind::RouterError => "router_error",
            EventKind::RequestErrors => "request_errors",
            EventKind::Log(k) => k.as_str(),
            EventKind::Doctor(_) => "doctor",
        }
    }
}

impl EventKind {
    /// A failure a log or a connector counter reported on its own (an
    /// engine death, a transfer failure, a stall): the pair is degraded even
    /// where no request was named.
    pub fn is_failure(self) -> bool {
        match self {
            EventKind::Log(k) => k.is_failure(),
            // KV a producer let go unread is a request's miss (or a cancel)
            // seen from the other side: evidence on that request, which
            // its own verdict says, not a failure of the pair.
            EventKind::Connector(k) => !k.ends_with("_kv_expired"),
            _ => false,
        }
    }
}
