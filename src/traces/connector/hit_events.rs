//! Decode log lines about KV loads: a request queued for its hit, the
//! `External Cache Hit!` and `Inject KV cache` lines that settle it.

use super::hits::{Claim, Waiting};
use crate::feed::LogOrigin;
use crate::traces::correlator::Correlator;
use crate::traces::evidence::FactKind;
use crate::traces::model::{Hop, Outcome};

impl Correlator {
    /// Puts a prefilled, param-less decode request in line for a hit.
    pub(crate) fn enqueue_for_hit(&mut self, i: usize, s: u64, added_at: f64, seq: u64) {
        // A request whose prefill failed still takes its place in the
        // FIFO: a hit printed for it is its own, not the next request's.
        let hits = self.style(i) != crate::traces::correlator::Style::Params;
        let eligible = self.store.get(s).is_some_and(|e| {
            (e.trace.outcome == Outcome::Pending || (hits && crate::traces::store::failed_prefill(e)))
                && e.trace.prefill.is_some()
                && !e.track.decode_has_params
                && !e.track.in_hit_queue
        });
        if !eligible {
            return;
        }
        if let Some(e) = self.store.get_mut(s) {
            e.track.in_hit_queue = true;
        }
        let (orphan_s, cap) = (self.opts.orphan_hit_s, self.opts.max_pending);
        let w = Waiting {
            serial: s,
            added_at,
            seq,
            rivals: Vec::new(),
            closed: false,
            quiet: false,
            called: false,
        };
        let (claim, dropped) = self.decodes.entry(i).or_default().hits.add(w, orphan_s, cap);
        if let Some(c) = claim {
            self.apply_claim(i, c, added_at, added_at);
        }
        if let Some(d) = dropped {
            self.no_hit(i, d, added_at, false, true, self.opts.settle_s);
        }
    }

    /// A prefill arrived after its decode (read order): queue the decode now.
    pub(crate) fn late_prefill_join(&mut self, s: u64) {
        let info = self.store.get(s).and_then(|e| Some((e.trace.decode?, e.track.decode_added_at?)));
        if let Some((i, added)) = info {
            // Its place in `Added` order is unknown; it goes last.
            let seq = self.joiner.next_seq();
            self.enqueue_for_hit(i, s, added, seq);
        }
    }

    pub(crate) fn on_hit(&mut self, i: usize, t: f64, at: f64) {
        let cap = self.opts.max_pending;
        if let Some(c) = self.decodes.entry(i).or_default().hits.hit(at, cap) {
            self.apply_claim(i, c, t, at);
        }
    }

    pub(crate) fn on_inject(&mut self, i: usize, tokens: u32, t: f64) {
        let busy = self.decodes.get(&i).is_some_and(|d| d.busy(self.last_at));
        if let Some(q) = self.decodes.get_mut(&i).map(|d| &mut d.hits) {
            q.end_step(busy);
        }
        let Some(s) = self.decodes.get_mut(&i).map(|d| &mut d.hits).and_then(|q| q.inject()) else {
            return;
        };
        self.with_phase(s, Hop::Connector, LogOrigin::Decode(i), None, t, |p| {
            p.end = Some(t);
            p.detail = format!("External Cache Hit, Inject {tokens} tokens");
        });
        if let Some(e) = self.store.get_mut(s) {
            e.trace.inject_tokens = Some(tokens);
        }
        self.settle(s, self.last_at);
    }

    /// A hit attributed to a request: a fact on it; each rival it had has
    /// one open alternative less.
    pub(crate) fn apply_claim(&mut self, i: usize, c: Claim, t: f64, at: f64) {
        self.with_phase(c.serial, Hop::Connector, LogOrigin::Decode(i), None, t, |p| {
            p.detail = "External Cache Hit".into();
        });
        if let Some(e) = self.store.get_mut(c.serial) {
            e.track.in_hit_queue = false;
        }
        for r in &c.rivals {
            if let Some(left) = self.store.get_mut(*r).and_then(|e| e.facts.hit_mut()) {
                *left = left.saturating_sub(1);
                self.settle(*r, at);
            }
        }
        let contested = u32::try_from(c.contested_by).unwrap_or(u32::MAX);
        let kind = FactKind::Hit { decode: i, contested, from_orphan: c.from_orphan };
        self.said(c.serial, t, LogOrigin::Decode(i), kind, at);
    }
}
