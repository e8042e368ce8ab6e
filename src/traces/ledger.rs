//! The ledger: the plain writes every part makes on the ring (a new
//! trace, a phase, a fact, a failure, a log event, a line counted) and the
//! plain questions they ask (which trace an id names, which style a decode
//! has). It calls nothing above it: a fact marks its trace touched, and
//! the correlator settles each touched trace once the line that said it is
//! read (`settle.rs`).

use super::correlator::{Correlator, Style};
use super::evidence::{FactKind, Failure};
use super::model::{Confidence, Hop, LogEvent, Phase, SourceStats, Trace};
use super::store::{Track, push_capped};
use super::style::{HIT_CONNECTORS, PARAMS_CONNECTORS};
use crate::feed::LogOrigin;
use crate::logs::signal::SignalKind;

/// Most failure events kept for `drain_log_events` between two calls.
const MAX_LOG_EVENTS: usize = 1024;

impl Correlator {
    /// Trace `serial` has a new fact: it is settled once the read that said
    /// it is done (`Correlator::settle_touched`), at read time `now`.
    pub(super) fn touch(&mut self, serial: u64, now: f64) {
        match self.touched.iter_mut().find(|(s, _)| *s == serial) {
            Some(x) => x.1 = x.1.max(now),
            None => self.touched.push((serial, now)),
        }
    }

    /// The trace an instance id names: engine id, external id or base id.
    pub(super) fn find(&self, id: &str) -> Option<u64> {
        let ext = super::ids::external_of_internal(id);
        self.store
            .by_engine(id)
            .or_else(|| self.store.latest(&super::ids::response_id(ext)))
            .or_else(|| self.store.latest(super::ids::base_id(ext)))
    }

    /// Some decode instance's log is read: it names every request decode got.
    pub(super) fn decode_read(&self) -> bool {
        self.stats.keys().any(|k| matches!(k, LogOrigin::Decode(_)))
    }

    /// The proxy's log is read (some line of it has arrived).
    pub(super) fn proxy_read(&self) -> bool {
        self.stats.contains_key(&LogOrigin::Proxy) && !self.backlog_unread
    }

    /// The decode's connector style: its configured name first (the
    /// `KVTransferConfig` at startup), else what its requests have shown.
    pub(super) fn style(&self, i: usize) -> Style {
        let name = self.stats.get(&LogOrigin::Decode(i)).and_then(|s| s.connector.as_deref());
        if let Some(n) = name {
            if PARAMS_CONNECTORS.contains(&n) {
                return Style::Params;
            }
            if HIT_CONNECTORS.contains(&n) {
                return Style::Hits;
            }
        }
        if self.decodes.get(&i).is_some_and(|d| d.params_seen) {
            Style::Params
        } else if self.decodes.get(&i).is_some_and(|d| d.hits.hits_seen > 0) {
            Style::Hits
        } else {
            Style::Unknown
        }
    }

    pub(super) fn new_trace(&mut self, id: String, at: f64) -> u64 {
        let s = self.store.push(Trace::new(id, at), Track::default());
        self.mark_open(s);
        s
    }

    pub(super) fn synthetic_id(&mut self, prefix: &str) -> String {
        self.synthetic += 1;
        format!("{prefix}-{}", self.synthetic)
    }

    pub(super) fn mark_open(&mut self, serial: u64) {
        if let Some(e) = self.store.get_mut(serial)
            && !e.track.in_open
        {
            e.track.in_open = true;
            push_capped(&mut self.open, serial, self.opts.capacity);
        }
    }

    pub(super) fn stat(&mut self, src: LogOrigin) -> &mut SourceStats {
        self.stats.entry(src).or_insert_with(|| SourceStats::new(src))
    }

    /// Adds (or finds) the phase of `hop` and lets `f` fill it.
    pub(super) fn with_phase(
        &mut self,
        serial: u64,
        hop: Hop,
        src: LogOrigin,
        process: Option<String>,
        start: f64,
        f: impl FnOnce(&mut Phase),
    ) {
        let Some(e) = self.store.get_mut(serial) else {
            return;
        };
        if e.trace.phase(hop).is_none() {
            e.trace.phases.push(Phase {
                hop,
                source: src,
                process,
                start,
                end: None,
                detail: String::new(),
                error: None,
            });
            // Keep the documented hop order whatever order lines arrived in.
            e.trace.phases.sort_by_key(|p| hop_rank(p.hop));
        }
        if let Some(p) = e.trace.phase_mut(hop) {
            f(p);
        }
    }

    /// A failure on `hop`, as `src` reported it: a fact on the trace.
    pub(super) fn fail(&mut self, serial: u64, hop: Hop, src: LogOrigin, text: String, t: f64, now: f64) {
        let by_proxy = src == LogOrigin::Proxy && hop != Hop::Proxy;
        let x = Failure { hop, what: text, confidence: Confidence::Sure, generate_failed: false, by_proxy };
        self.fail_with(serial, src, x, t, now);
    }

    pub(super) fn fail_with(&mut self, serial: u64, src: LogOrigin, x: Failure, t: f64, now: f64) {
        self.end_wait(serial, t);
        self.with_phase(serial, x.hop, src, None, t, |p| {
            p.error = Some(x.what.clone());
            p.end.get_or_insert(t);
        });
        if let Some(e) = self.store.get_mut(serial) {
            e.facts.push(t, src, FactKind::Failed(x));
        }
        self.touch(serial, now);
    }

    /// Adds a fact to trace `serial` and settles it.
    pub(super) fn said(&mut self, serial: u64, t: f64, src: LogOrigin, kind: FactKind, now: f64) {
        if let Some(e) = self.store.get_mut(serial) {
            e.facts.push(t, src, kind);
        }
        self.touch(serial, now);
    }
    pub(crate) fn push_log_event(&mut self, src: LogOrigin, kind: SignalKind, text: String, t: f64) {
        push_capped(&mut self.log_events, LogEvent { t, source: src, kind, text }, MAX_LOG_EVENTS);
    }
    /// The request went on (answered, finished, failed, cancelled): its
    /// wait for remote KV, if any, is over.
    pub(crate) fn end_wait(&mut self, s: u64, t: f64) {
        if let Some(w) = self.store.get_mut(s).and_then(|e| e.trace.remote_wait.as_mut())
            && w.ended.is_none()
        {
            w.ended = Some(t);
        }
    }
    pub(crate) fn connector_name(&self, i: usize) -> String {
        self.stats
            .get(&LogOrigin::Decode(i))
            .and_then(|s| s.connector.clone())
            .unwrap_or_else(|| "its connector".to_string())
    }

    /// A late partner joined a trace: it is open again until its facts settle it.
    pub(crate) fn reopen(&mut self, s: u64) {
        self.mark_open(s);
    }
}

fn hop_rank(h: Hop) -> u8 {
    match h {
        Hop::Proxy => 0,
        Hop::Producer => 1,
        Hop::Connector => 2,
        Hop::Consumer => 3,
    }
}
