//! Where a verdict is written: each part adds its facts to a trace and
//! asks for it to be settled; `settle` gathers what is known around the
//! request, hands both to `decide`, and writes what comes back. Nothing
//! else sets an outcome.

use super::correlator::{Correlator, Style};
use super::decide::{Ctx, Verdict, decide};
use super::ids::{base_id, invented};
use super::model::Outcome;
use super::reason::Reason;
use super::store::{Entry, push_capped};
use crate::feed::LogOrigin;

/// Most misses kept for `drain_new_misses` between two calls.
const MAX_NEW_MISSES: usize = 1024;
/// Copies named in a reason at most.
const COPIES_NAMED: usize = 3;

impl Correlator {
    /// Settles each trace the read under way gave a fact, once, in the
    /// order they were touched; `force`: every deadline has passed.
    pub(super) fn settle_touched(&mut self, force: bool) {
        for (s, now) in std::mem::take(&mut self.touched) {
            self.settle_by(s, now, force);
        }
    }

    /// Decides trace `s` again from its facts, at read time `now`.
    pub(super) fn settle(&mut self, s: u64, now: f64) {
        self.settle_by(s, now, false);
    }

    /// `settle`; `force`: every deadline has passed (the end of a check).
    pub(super) fn settle_by(&mut self, s: u64, now: f64, force: bool) {
        let Some(e) = self.store.get(s) else { return };
        let cx = self.context(e, now, force);
        let v = decide(e, &cx);
        let orphan = cx.direct && !cx.bypass && matches!(v.reasons.first(), Some(Reason::NoSharedIds { .. }));
        self.write(s, v, now);
        if orphan {
            // The flow is not known yet: look again once it is.
            self.flow.orphan(s);
        }
    }

    /// A prefill copy and a decode request joined by a shared id at `t`.
    /// The first such join shows the proxy forwards ids: a request only
    /// decode logged, decided before it, was surely no proxied request.
    pub(super) fn shared_id_join(&mut self, t: f64) {
        if !self.joiner.shared(t) {
            return;
        }
        let by_id: Vec<u64> = self
            .store
            .serials()
            .filter(|&s| {
                self.store
                    .get(s)
                    .is_some_and(|e| matches!(e.trace.reasons.first(), Some(Reason::NoPrefillById { .. })))
            })
            .collect();
        for s in by_id {
            self.settle(s, self.last_at);
        }
    }

    /// The one writer of a trace's verdict.
    fn write(&mut self, s: u64, v: Verdict, now: f64) {
        if v.outcome == Outcome::Pending {
            self.mark_open(s);
        }
        let Some(e) = self.store.get(s) else { return };
        let t = &e.trace;
        let error_at = v.error_at.filter(|_| v.outcome == Outcome::Error);
        if t.outcome == v.outcome
            && t.confidence == v.confidence
            && t.reasons == v.reasons
            && t.error_at == error_at
        {
            return;
        }
        let Some(e) = self.store.get_mut(s) else { return };
        let t = &mut e.trace;
        let was = t.outcome;
        t.outcome = v.outcome;
        t.confidence = v.confidence;
        t.error_at = error_at;
        t.reasons = v.reasons;
        t.decided_at = match v.outcome {
            Outcome::Pending => None,
            _ if was == Outcome::Pending || t.decided_at.is_none() => Some(now),
            _ => t.decided_at,
        };
        // Alerted once: a verdict that comes back to a miss is not news.
        if v.outcome == Outcome::SilentMiss && was != Outcome::SilentMiss && !e.track.alerted {
            e.track.alerted = true;
            push_capped(&mut self.new_misses, t.id.clone(), MAX_NEW_MISSES);
        }
    }

    /// What is known around trace `e`'s request.
    fn context(&self, e: &Entry, now: f64, force: bool) -> Ctx<'_> {
        let (t, tk) = (&e.trace, &e.track);
        let decode = t.decode;
        let style = decode.map_or(Style::Unknown, |i| self.style(i));
        let connector = decode.map_or_else(|| "its connector".to_string(), |i| self.connector_name(i));
        let invented = invented(base_id(&t.id));
        let (span, win) = (e.side_span(), self.opts.order_window_s);
        // A prefill copy no decode took, sent about when this request came:
        // without a shared id it may be this one's.
        let waiting_copies = match (t.prefill, decode, tk.decode_at) {
            (None, Some(_), Some(dat)) if invented => {
                let t_dec = tk.decode_event_t.unwrap_or(dat);
                self.joiner
                    .waiting(&self.store, t_dec, self.opts.order_window_s)
                    .into_iter()
                    .take(COPIES_NAMED)
                    .filter_map(|w| self.store.get(w).map(|x| x.trace.id.clone()))
                    .collect()
            }
            _ => Vec::new(),
        };
        Ctx {
            now,
            force,
            opts: &self.opts,
            style,
            connector,
            guaranteed: self.flow.vouches(span, win) && tk.proxy_seen && t.prefill.is_some(),
            proxy_read: self.proxy_read(),
            prefill_read: self.stats.keys().any(|k| matches!(k, LogOrigin::Prefill(_))),
            decode_read: self.stats.keys().any(|k| matches!(k, LogOrigin::Decode(_))),
            bypass: self.flow.bypass_near(span, win),
            flow_established: self.flow.vouches(span, win),
            id_known: !invented || self.joiner.shared_at(tk.decode_event_t.unwrap_or(t.first_seen)),
            ids_shared: self.joiner.ever_shared,
            waiting_copies,
            direct: !tk.proxy_seen && self.proxy_read(),
            began_unread: self.setup_only_until.is_some()
                && !tk.arrived
                && (t.engine_ids.iter().map(|(o, _)| *o))
                    .chain(t.prefill.map(LogOrigin::Prefill))
                    .chain(t.decode.map(LogOrigin::Decode))
                    .any(|o| self.arrivals_logged.contains(&o)),
            copy_unread: self
                .setup_only_until
                .is_some_and(|u| tk.decode_event_t.unwrap_or(t.first_seen) - u < win),
        }
    }
}
