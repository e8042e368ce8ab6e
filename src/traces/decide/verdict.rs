//! What the decider reads and returns: the request's surroundings
//! (`Ctx`) and its verdict (`Verdict`), shared by its rules.

use crate::traces::model::{Confidence, CorrelatorOptions, Hop, Outcome};
use crate::traces::reason::{Finished, Reason as R};
use crate::traces::store::Entry;
use crate::traces::style::Style;

/// What is known around a request, as `settle.rs` finds it.
#[derive(Debug, Clone)]
pub(crate) struct Ctx<'a> {
    /// The read-time clock.
    pub now: f64,
    /// The end of a check: every deadline has passed.
    pub force: bool,
    pub opts: &'a CorrelatorOptions,
    /// How the decode's connector shows a load.
    pub style: Style,
    pub connector: String,
    /// The proxy's flow proves its prefill (it came through a proxy that
    /// prefills everything it forwards).
    pub guaranteed: bool,
    pub proxy_read: bool,
    pub prefill_read: bool,
    pub decode_read: bool,
    /// Prefill copies reach the prefill without the proxy.
    pub bypass: bool,
    pub flow_established: bool,
    /// The decode's id was forwarded (not invented by the instance), or ids
    /// are shared now: an id on decode alone had no prefill.
    pub id_known: bool,
    /// Some request was joined by a shared id: the proxy forwards ids.
    pub ids_shared: bool,
    /// Prefill copies sent about when this decode request came, paired with
    /// no decode request, that could be its (no shared id).
    pub waiting_copies: Vec<String>,
    /// Came straight to the decode while the proxy's log is read.
    pub direct: bool,
    /// The logs were read for requests only from a time (`--since`)
    /// less than the order window before this decode request came: its
    /// prefill copy may be among the lines read for set-up only.
    pub copy_unread: bool,
    /// Lines were read for set-up only (`--since`) and no instance's
    /// arrival line of this request was read: it began before what pdtop
    /// read, and its later lines cannot say all that became of it.
    pub began_unread: bool,
}

/// A request's verdict.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Verdict {
    pub outcome: Outcome,
    pub confidence: Confidence,
    pub error_at: Option<Hop>,
    pub reasons: Vec<R>,
}

impl Verdict {
    pub(super) fn new(outcome: Outcome, confidence: Confidence, reasons: Vec<R>) -> Verdict {
        Verdict { outcome, confidence, error_at: None, reasons }
    }

    pub(super) fn pending() -> Verdict {
        Verdict::new(Outcome::Pending, Confidence::Sure, Vec::new())
    }

    pub(super) fn with(mut self, r: R) -> Verdict {
        self.reasons.push(r);
        self
    }
}

/// The prefill's answer time against `t`.
pub(crate) fn finished(e: &Entry, t: f64) -> Finished {
    Finished::of(e.track.prefill_done, t)
}

/// A stuck wait's fact as its reason.
pub(crate) fn stuck(k: &crate::traces::evidence::FactKind) -> Option<R> {
    match k {
        crate::traces::evidence::FactKind::Stuck { id, secs, begun, since, last, limit } => Some(R::Stuck {
            id: id.clone(),
            secs: *secs,
            begun: *begun,
            since: *since,
            last: *last,
            limit: *limit,
        }),
        _ => None,
    }
}
