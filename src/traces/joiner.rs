//! Putting each request's sides together: which prefill trace a decode
//! request without a shared id pairs with (arrival order), and which
//! request an id-less uvicorn access line answers (order per log).

use std::collections::{HashMap, VecDeque};

use super::model::{Hop, Outcome};
use super::store::Store;
use crate::feed::LogOrigin;

/// Longest a request waits for its access line before its slot is dropped.
const ACCESS_WAIT_S: f64 = 120.0;

#[derive(Debug, Clone, Default)]
pub(super) struct Joiner {
    /// Prefill traces with no decode yet, oldest first.
    unpaired: VecDeque<u64>,
    /// Requests in arrival order awaiting their access line, per log.
    access_wait: HashMap<LogOrigin, VecDeque<u64>>,
    /// Order of decode `Added` lines, across logs.
    added_seq: u64,
    /// A prefill and a decode request have shared an id: the proxy forwards
    /// `X-Request-Id`, so an id seen only on decode really had no prefill.
    pub ids_shared: bool,
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

    /// The log's process restarted: nothing it had in flight will answer.
    pub fn forget_access(&mut self, src: LogOrigin) {
        self.access_wait.remove(&src);
    }

    pub fn next_seq(&mut self) -> u64 {
        self.added_seq += 1;
        self.added_seq
    }

    /// The oldest prefill still waiting for its decode, started within
    /// `win` before `t` (or up to a second after: stamps are whole seconds).
    pub fn partner(&mut self, store: &Store, t: f64, win: f64) -> Option<u64> {
        while let Some(s) = self.unpaired.front().copied() {
            let usable = store.get(s).and_then(|e| {
                let fresh = e.trace.decode.is_none() && e.trace.outcome == Outcome::Pending;
                let start = e.trace.phase(Hop::Producer).map(|p| p.start)?;
                fresh.then_some(start)
            });
            match usable {
                Some(start) if start >= t - win && start <= t + 1.0 => {
                    self.unpaired.pop_front();
                    return Some(s);
                }
                // Too old (or taken): it will never pair now.
                Some(start) if start < t - win => {
                    self.unpaired.pop_front();
                }
                Some(_) => return None,
                None => {
                    self.unpaired.pop_front();
                }
            }
        }
        None
    }

    /// Drops heads that can no longer matter, so the queues stay short in a
    /// long run (they are capped regardless).
    pub fn prune(&mut self, store: &Store, now: f64) {
        while let Some(s) = self.unpaired.front().copied() {
            let live =
                store.get(s).is_some_and(|e| e.trace.decode.is_none() && e.trace.outcome == Outcome::Pending);
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

fn push_capped<T>(q: &mut VecDeque<T>, v: T, cap: usize) {
    q.push_back(v);
    while q.len() > cap.max(1) {
        q.pop_front();
    }
}
