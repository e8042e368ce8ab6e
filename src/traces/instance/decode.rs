//! A decode request arriving: joined to its prefill copy by a shared id,
//! by the `kv_transfer_params` that name the prefill's request, or by
//! order where nothing better exists (the joiner); loaded at once when its
//! params say the KV is there, queued for its hit otherwise.

use crate::feed::LogOrigin;
use crate::logs::vllm::KvParams;
use crate::traces::correlator::{Correlator, Style};
use crate::traces::evidence::FactKind;
use crate::traces::ids::{base_id, external_of_internal, invented, trace_key};
use crate::traces::instance::events::{Added, Arrival};
use crate::traces::model::{Hop, Join, Outcome};
use crate::traces::store::{Entry, failed_prefill, recent};

impl Correlator {
    pub(crate) fn decode_arrival(&mut self, i: usize, a: &Arrival) -> u64 {
        let src = LogOrigin::Decode(i);
        let base = trace_key(a.id);
        let params = a.params.filter(|p| p.do_remote_prefill == Some(true));
        // A request whose prefill failed ended there, unless the proxy went
        // on at once: the same id much later is another request. One whose
        // decode side never came stays open to it, however late.
        let timeout = self.opts.prefill_only_timeout_s;
        let fresh = |e: &Entry| recent(e, a.t, a.at, timeout);
        let takes = |c: &Correlator, s: u64| {
            c.store.get(s).is_some_and(|e| {
                e.trace.decode.is_none()
                    && (e.trace.outcome == Outcome::Pending
                        || crate::traces::reason::deadline_only(&e.trace.reasons)
                        || (failed_prefill(e) && fresh(e)))
            })
        };
        let mut join = Join::ById;
        let mut target = self.store.latest(&base).filter(|s| takes(self, *s));
        if target.and_then(|s| self.store.get(s)).is_some_and(|e| e.trace.prefill.is_some()) {
            self.shared_id_join(a.t);
        }
        if target.is_none()
            && let Some(rid) = params.and_then(|p| p.remote_request_id.as_deref())
        {
            // The params name the prefill's internal id: an exact join even
            // when each instance invented its own ids.
            target = self
                .store
                .by_engine(rid)
                .or_else(|| self.store.latest(base_id(external_of_internal(rid))))
                .filter(|s| takes(self, *s));
        }
        // Whether ids were forwarded before does not matter: the partner
        // must be a prefill copy whose id was invented too (`joiner.rs`).
        if target.is_none() && params.is_none() && invented(base_id(a.id)) {
            target = self.order_partner(a.t, crate::traces::ids::api_of(a.id));
            if target.is_some() {
                join = Join::ByOrder;
            }
        }
        // A forwarded id no prefill logged, just after the prefill answered
        // an error without logging the request it refused (its engine
        // dead, or at validation): that was this request's copy, and the
        // proxy went on. Which refusal was its is a guess by order.
        if target.is_none() && params.is_none() && !invented(base_id(a.id)) {
            target = self.flow.take_prefill_refusal(crate::traces::ids::api_of(a.id), a.t);
            if target.is_some() {
                join = Join::ByOrder;
            }
        }
        let s = match target {
            Some(s) => {
                self.reopen(s);
                if self.store.get(s).is_some_and(|e| e.trace.id != base) {
                    self.store.alias(&base, s);
                    // Paired by order: the user knows the decode's id, not the prefill's.
                    if join == Join::ByOrder
                        && let Some(e) = self.store.get_mut(s)
                    {
                        e.trace.id = base.clone();
                    }
                }
                s
            }
            None => self.new_trace(base.clone(), a.at),
        };
        let detail = match params {
            Some(p) => format!(
                "kv_transfer_params: remote {} tokens in {} blocks from {}",
                p.remote_num_tokens.map_or("?".into(), |n| n.to_string()),
                p.remote_block_count.map_or("?".into(), |n| n.to_string()),
                p.remote_request_id.as_deref().unwrap_or("?"),
            ),
            // Only connectors that pull need the params; say so only then.
            None if self.style(i) == Style::Params => "no kv_transfer_params".to_string(),
            None => "request received".to_string(),
        };
        self.with_phase(s, Hop::Consumer, src, a.process.clone(), a.t, |p| p.detail = detail);
        if let Some(e) = self.store.get_mut(s) {
            e.trace.decode = Some(i);
            e.trace.engine_ids.push((src, a.id.to_string()));
            if join == Join::ByOrder {
                // Also for a failed prefill: its error is sure, but that it was
                // this request's (the trace now bears the decode's id) is a guess.
                e.trace.join = Join::ByOrder;
            }
            e.track.decode_at = Some(a.at);
            e.track.arrived = true;
            e.track.decode_event_t = Some(a.t);
            e.track.decode_has_params = params.is_some();
            e.trace.remote_num_tokens = params.and_then(|p| p.remote_num_tokens);
        }
        if !self.arrivals_logged.contains(&src) {
            self.arrivals_logged.push(src);
        }
        if params.is_some() {
            self.decodes.entry(i).or_default().params_seen = true;
        }
        self.mark_open(s);
        self.joiner.await_access(src, s, self.opts.max_pending);
        if self.decode_after_failed_prefill(i, s, params.is_some(), a.t) {
            return s;
        }
        match params {
            Some(p) => self.loaded_by_params(i, s, p, a.t, a.at),
            // A fact whatever the connector: it means a miss only for one
            // that pulls, and only once a prefill is joined.
            None => self.said(s, a.t, src, FactKind::NoParams, a.at),
        }
        s
    }

    fn loaded_by_params(&mut self, i: usize, s: u64, p: &KvParams, t: f64, at: f64) {
        let rid = p.remote_request_id.clone().unwrap_or_else(|| "?".into());
        let tokens = p.remote_num_tokens.map_or("?".into(), |n| n.to_string());
        self.with_phase(s, Hop::Connector, LogOrigin::Decode(i), None, t, |ph| {
            ph.detail = format!("pull {tokens} tokens from {rid}");
        });
        let kind = FactKind::Params {
            remote: rid,
            tokens: p.remote_num_tokens,
            blocks: p.remote_block_count.and_then(|n| u32::try_from(n).ok()),
        };
        self.said(s, t, LogOrigin::Decode(i), kind, at);
        // Its producer's expiry, read first, was counted a miss no request
        // could be named for: this decode's lines will say what it was.
        if let Some(e) = self.store.get_mut(s)
            && e.trace.join == Join::ById
            && std::mem::take(&mut e.track.unattributed_miss)
        {
            self.unattributed_misses = self.unattributed_misses.saturating_sub(1);
        }
        let cap = self.opts.max_pending;
        let one_rank = p.tp_size == Some(1);
        self.decodes.entry(i).or_default().transfers.load(s, t, one_rank, cap);
    }

    pub(crate) fn decode_added(&mut self, i: usize, added: Added<'_>) {
        let Added { internal, external, t, at, process } = added;
        let src = LogOrigin::Decode(i);
        let base = trace_key(external);
        let found = self.store.latest(&base).filter(|s| {
            self.store.get(*s).is_some_and(|e| e.trace.decode == Some(i) && e.track.decode_added_at.is_none())
        });
        let s = match found {
            Some(s) => s,
            None => {
                let a = Arrival { id: external, max_tokens: None, params: None, t, at, process };
                self.decode_arrival(i, &a)
            }
        };
        let seq = self.joiner.next_seq();
        if let Some(e) = self.store.get_mut(s) {
            e.track.decode_added_at = Some(at);
            e.trace.engine_ids.push((src, internal.to_string()));
        }
        self.enqueue_for_hit(i, s, at, seq);
    }
}
