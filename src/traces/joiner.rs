//! Putting each request's sides together: which prefill trace a decode
//! request without a shared id pairs with (arrival order), and which
//! request an id-less uvicorn access line answers (order per log).

use std::collections::{HashMap, VecDeque};

use super::ids::{api_of, base_id, external_of_internal, invented};
use super::model::{Hop, Outcome};
use super::store::{Entry, Store, failed_prefill, push_capped};
use crate::feed::LogOrigin;

/// Longest a request waits for its access line before its slot is dropped.
const ACCESS_WAIT_S: f64 = 120.0;
/// Joins remembered for `shared_at`.
const HISTORY: usize = 4096;

#[derive(Debug, Clone, Default)]
pub(super) struct Joiner {
    /// Prefill traces with no decode yet, oldest first.
    unpaired: VecDeque<u64>,
    /// Requests in arrival order awaiting their access line, per log.
    access_wait: HashMap<LogOrigin, VecDeque<u64>>,
    /// Order of decode `Added` lines, across logs.
    added_seq: u64,
    /// The last join was by a shared id: the proxy forwards `X-Request-Id`
    /// now, so an id seen only on decode really had no prefill. An order
    /// join (a phase where no id is forwarded) clears it.
    pub ids_shared: bool,
    /// Some join was by a shared id: the proxy forwards ids (at least at
    /// times), so an id that only decode logged was no proxied request's.
    pub ever_shared: bool,
    /// Each join's event time and whether it was by a shared id, latest
    /// last: whether ids were forwarded at a request's own time.
    history: VecDeque<(f64, bool)>,
    /// Event time of the last join by a shared id: a prefill copy that
    /// started before it was sent while ids were forwarded, and waits for
    /// its decode under its own id, not for an order partner.
    shared_at: Option<f64>,
    /// The proxy's log said it failed a request at its prefill stage
    /// (`disagg_proxy_demo.py` and the NIXL toy proxy raise on a prefill
    /// 5xx): its failed prefill copies wait for no decode.
    pub proxy_stops_at_prefill_error: bool,
}

impl Joiner {
    pub fn unpaired(&mut self, serial: u64, cap: usize) {
        push_capped(&mut self.unpaired, serial, cap);
    }

    pub fn await_access(&mut self, src: LogOrigin, serial: u64, cap: usize) {
        push_capped(self.access_wait.entry(src).or_default(), serial, cap);
    }

    /// The request an access line of `src` answers: the oldest still held.
    pub fn next_access(&mut self, src: LogOrigin, store: &Store) -> Option<u64> {
        let q = self.access_wait.get_mut(&src)?;
        while let Some(s) = q.pop_front() {
            if store.get(s).is_some() {
                return Some(s);
            }
        }
        None
    }

    /// Prefill copies moved between traces (`map`: old serial to new): the
    /// access lines they wait for on `src` answer their new traces.
    pub fn moved(&mut self, src: LogOrigin, map: impl Fn(u64) -> u64) {
        if let Some(q) = self.access_wait.get_mut(&src) {
            q.iter_mut().for_each(|s| *s = map(*s));
        }
    }

    /// The log's process restarted: nothing it had in flight will answer.
    pub fn forget_access(&mut self, src: LogOrigin) {
        self.access_wait.remove(&src);
    }

    /// A prefill copy and a decode request joined by a shared id at `t`.
    /// Returns whether this is the first such join.
    pub fn shared(&mut self, t: f64) -> bool {
        self.ids_shared = true;
        self.joined(t, true);
        let first = !std::mem::replace(&mut self.ever_shared, true);
        self.shared_at = Some(self.shared_at.map_or(t, |s| s.max(t)));
        first
    }

    /// Whether a request id was forwarded to the instances for this
    /// request: not when the instance invented it, nor before any shared one.
    pub fn forwarded(&self, id: &str) -> bool {
        self.ids_shared && !invented(base_id(id))
    }

    /// Whether trace `e` is a prefill copy a decode without a shared id may
    /// pair with: its id was invented by its instance (a forwarded id
    /// pairs by id) and no join by id came after it started.
    fn order_candidate(&self, e: &Entry, start: f64) -> bool {
        let invented = e
            .trace
            .engine_ids
            .iter()
            .find(|(o, _)| matches!(o, LogOrigin::Prefill(_)))
            .is_some_and(|(_, id)| invented(base_id(external_of_internal(id))));
        invented && self.shared_at.is_none_or(|s| s < start)
    }

    /// Whether trace `e` still waits for its decode request: pending, or a
    /// prefill copy that failed where the proxy may have gone on to decode
    /// (proxies other than vLLM's demo and toy ones do; `lifecycle.rs`
    /// then keeps the error at prefill with decode's recompute as evidence).
    fn awaits_decode(&self, e: &Entry) -> bool {
        e.trace.decode.is_none()
            && (e.trace.outcome == Outcome::Pending
                || (failed_prefill(e) && !self.proxy_stops_at_prefill_error))
    }

    /// A prefill copy still waiting for its decode that started within
    /// `win` before `t` (or a second after), taken or not by `partner`'s
    /// rules: while one exists, a decode request without a shared id is
    /// never surely unprefilled.
    pub fn waiting(&self, store: &Store, t: f64, win: f64) -> Vec<u64> {
        self.unpaired
            .iter()
            .copied()
            .filter(|s| store.get(*s).is_some_and(|e| self.awaits_decode(e) && in_window(e, t, win)))
            .collect()
    }

    fn joined(&mut self, t: f64, by_id: bool) {
        // In time order: a join read late goes where it happened.
        let k = self.history.iter().rposition(|(u, _)| *u <= t).map_or(0, |k| k + 1);
        self.history.insert(k, (t, by_id));
        if self.history.len() > HISTORY {
            self.history.pop_front();
        }
    }

    /// Whether the last join at or before `t` was by a shared id: ids were
    /// forwarded then (the question asked of a request of time `t`, which
    /// the joins after it do not answer).
    pub fn shared_at(&self, t: f64) -> bool {
        self.history.iter().rev().find(|(u, _)| *u <= t + 1.0).is_some_and(|(_, by_id)| *by_id)
    }

    pub fn next_seq(&mut self) -> u64 {
        self.added_seq += 1;
        self.added_seq
    }

    /// The oldest prefill still waiting for its decode, started within
    /// `win` before `t` (or up to a second after: stamps are whole seconds).
    /// Prefills sent while ids were forwarded are passed over (they wait
    /// for their own id), and stay queued for it; with `api` (the decode
    /// request's `cmpl-` or `chatcmpl-`), so are copies of another API.
    pub fn partner(&mut self, store: &Store, t: f64, win: f64, api: Option<&str>) -> Option<u64> {
        let mut k = 0;
        while let Some(s) = self.unpaired.get(k).copied() {
            let usable = store.get(s).and_then(|e| {
                let fresh = self.awaits_decode(e);
                let start = e.trace.phase(Hop::Producer).map(|p| p.start)?;
                let answered = e.track.prefill_done.is_some();
                let copy = e.trace.engine_ids.iter().find(|(o, _)| matches!(o, LogOrigin::Prefill(_)));
                let copy_api = copy.and_then(|(_, id)| api_of(id));
                let same_api = api.is_none_or(|a| copy_api.is_none_or(|b| b == a));
                let candidate = self.order_candidate(e, start) && same_api;
                fresh.then_some((start, answered, in_window(e, t, win), candidate))
            });
            match usable {
                Some((_, _, true, true)) => {
                    self.unpaired.remove(k);
                    self.ids_shared = false;
                    self.joined(t, false);
                    return Some(s);
                }
                Some((_, _, true, false)) => k += 1,
                // Still queued on the prefill: its decode request comes later.
                Some((start, false, false, _)) if start < t - win => k += 1,
                // Too old (or taken): it will never pair now.
                Some((start, true, false, _)) if start < t - win => {
                    self.unpaired.remove(k);
                }
                Some(_) => return None,
                None => {
                    self.unpaired.remove(k);
                }
            }
        }
        None
    }

    /// Drops heads that can no longer matter, so the queues stay short in a
    /// long run (they are capped regardless).
    pub fn prune(&mut self, store: &Store, now: f64) {
        while let Some(s) = self.unpaired.front().copied() {
            let live = store.get(s).is_some_and(|e| self.awaits_decode(e));
            if live {
                break;
            }
            self.unpaired.pop_front();
        }
        // An access line that never came (a request that died before its
        // response) would shift every later one by one: old heads go.
        for q in self.access_wait.values_mut() {
            while let Some(s) = q.front().copied() {
                let old = store.get(s).is_none_or(|e| now - e.trace.first_seen > ACCESS_WAIT_S);
                if !old {
                    break;
                }
                q.pop_front();
            }
        }
    }

    pub fn queued(&self) -> usize {
        self.unpaired.len() + self.access_wait.values().map(VecDeque::len).sum::<usize>()
    }
}

/// Whether prefill copy `e` could be the copy of a decode request that
/// arrived at `t`: it started within `win` before (or a second after:
/// stamps are whole seconds), or it answered within `win` before, since a
/// proxy sends the decode request once the copy answers and a busy prefill
/// may queue a copy for longer than the window.
fn in_window(e: &Entry, t: f64, win: f64) -> bool {
    let start = e.trace.phase(Hop::Producer).map(|p| p.start);
    let started = start.is_some_and(|st| st >= t - win && st <= t + 1.0);
    let answered = e.track.prefill_done.is_some_and(|d| d >= t - win && d <= t + 1.0);
    started || (answered && start.is_some_and(|st| st <= t + 1.0))
}
