//! Moving a request's prefill side whole between two traces: swapped with
//! another's when prompt lengths overturn an order join, or detached to a
//! trace of its own (`prompt_join.rs`, `length_join.rs`).

use super::correlator::Correlator;
use super::ids::{external_of_internal, trace_key};
use super::model::{Hop, Join, Phase};
use crate::feed::LogOrigin;

/// The prefill side of a trace, moved whole between two traces.
#[derive(Default)]
struct PrefillSide {
    index: Option<usize>,
    phase: Option<Phase>,
    ids: Vec<(LogOrigin, String)>,
    at: Option<f64>,
    done: Option<f64>,
    wants_pull: bool,
    internal: Option<String>,
    tokens: Option<u32>,
    facts: Vec<super::evidence::Fact>,
}

impl Correlator {
    /// Exchanges the prefill sides of `a` and `b`.
    pub(super) fn swap_prefills(&mut self, a: u64, b: u64) {
        let (pa, pb) = (self.take_prefill(a), self.take_prefill(b));
        let swap = |s: u64| match s {
            s if s == a => b,
            s if s == b => a,
            s => s,
        };
        self.copies_moved(pa.index.iter().chain(&pb.index).copied(), swap);
        self.put_prefill(a, pb);
        self.put_prefill(b, pa);
        for s in [a, b] {
            let Some(e) = self.store.get_mut(s) else { continue };
            e.track.repaired = true;
            if e.trace.prefill.is_none() || e.trace.decode.is_none() {
                // One side: nothing is joined.
                e.trace.join = Join::ById;
            }
            // A prefill-only trace is named by its prefill.
            let id = e.trace.engine_ids.iter().find(|(o, _)| matches!(o, LogOrigin::Prefill(_)));
            if e.trace.decode.is_none()
                && let Some((_, id)) = id
            {
                e.trace.id = trace_key(id);
            }
        }
        for s in [a, b] {
            self.settle(s, self.last_at);
        }
    }

    /// Takes trace `s`'s prefill copy out onto a trace of its own: the
    /// pair it was joined in does not hold.
    pub(super) fn detach_prefill(&mut self, s: u64, at: f64) {
        let side = self.take_prefill(s);
        let Some(id) = side.ids.first().map(|(_, id)| trace_key(id)) else {
            self.put_prefill(s, side);
            return;
        };
        let start = side.phase.as_ref().map(|p| p.start);
        let n = self.new_trace(id, at);
        let index = side.index;
        self.copies_moved(index, |x| if x == s { n } else { x });
        self.put_prefill(n, side);
        for x in [s, n] {
            let Some(e) = self.store.get_mut(x) else { continue };
            e.trace.join = Join::ById;
            e.track.same_length_copies.clear();
            e.track.unsized_copies.clear();
            if x == n
                && let Some(start) = start
            {
                e.trace.first_seen = e.trace.first_seen.min(start);
            }
        }
        self.joiner.unpaired(n, self.opts.max_pending);
        self.settle(s, at);
        self.settle(n, at);
    }

    /// Copies on prefill instances `on` moved between traces (`map`: old
    /// serial to new): what waits for their lines follows them.
    fn copies_moved(&mut self, on: impl IntoIterator<Item = usize>, map: impl Fn(u64) -> u64 + Copy) {
        let mut seen = Vec::new();
        for i in on {
            if seen.contains(&i) {
                continue;
            }
            seen.push(i);
            self.joiner.moved(LogOrigin::Prefill(i), map);
            self.inflight.moved(LogOrigin::Prefill(i), map);
        }
        self.flow.moved(map);
    }

    fn take_prefill(&mut self, s: u64) -> PrefillSide {
        let Some(e) = self.store.get_mut(s) else { return PrefillSide::default() };
        let phase =
            e.trace.phases.iter().position(|p| p.hop == Hop::Producer).map(|k| e.trace.phases.remove(k));
        let (ids, rest): (Vec<_>, Vec<_>) =
            e.trace.engine_ids.drain(..).partition(|(o, _)| matches!(o, LogOrigin::Prefill(_)));
        e.trace.engine_ids = rest;
        PrefillSide {
            index: e.trace.prefill.take(),
            phase,
            ids,
            at: e.track.prefill_at.take(),
            done: e.track.prefill_done.take(),
            wants_pull: std::mem::take(&mut e.track.prefill_wants_pull),
            internal: e.track.prefill_internal.take(),
            tokens: e.track.prefill_tokens.take(),
            facts: e.facts.take_prefill_side(),
        }
    }

    fn put_prefill(&mut self, s: u64, p: PrefillSide) {
        for (_, id) in &p.ids {
            self.store.index_engine(id, s);
            self.store.alias(&trace_key(external_of_internal(id)), s);
        }
        let Some(e) = self.store.get_mut(s) else { return };
        if let Some(ph) = p.phase {
            // After the proxy's phase, before the connector's and decode's.
            let k = e.trace.phases.iter().position(|x| x.hop != Hop::Proxy).unwrap_or(e.trace.phases.len());
            e.trace.phases.insert(k, ph);
        }
        let mut ids = p.ids;
        ids.append(&mut e.trace.engine_ids);
        e.trace.engine_ids = ids;
        e.trace.prefill = p.index;
        e.track.prefill_at = p.at;
        e.track.prefill_done = p.done;
        e.track.prefill_wants_pull = p.wants_pull;
        e.track.prefill_internal = p.internal;
        e.track.prefill_tokens = p.tokens;
        e.facts.0.extend(p.facts);
    }
}
