//! The bounded trace ring and its id indexes.
//!
//! Traces are addressed by a serial number that only grows, so a queue
//! entry that outlived its trace (evicted from the ring) finds nothing
//! instead of finding a different trace at the same position.

use std::collections::{HashMap, VecDeque};

use super::model::{Outcome, Trace};
use crate::feed::LogOrigin;

/// What the correlator knows about a trace beyond what it shows.
#[derive(Debug, Clone, Default)]
pub(crate) struct Track {
    /// Read time of the prefill's `Received` line.
    pub prefill_at: Option<f64>,
    /// Event time the prefill answered (its access line), for "finished X s earlier".
    pub prefill_done: Option<f64>,
    /// The prefill request carried `do_remote_decode: True`: the producer
    /// expects the consumer to pull, so the decode must get params (NIXL style).
    pub prefill_wants_pull: bool,
    /// The prefill engine's internal id (`cmpl-…-0-<8hex>`).
    pub prefill_internal: Option<String>,
    pub decode_at: Option<f64>,
    pub decode_event_t: Option<f64>,
    /// Read time of the decode's `Added` line (when its hit is due).
    pub decode_added_at: Option<f64>,
    pub decode_has_params: bool,
    pub hit: bool,
    /// Younger requests that could still claim the hit this one took.
    pub contested: u32,
    pub kv_expired_unread: bool,
    pub proxy_seen: bool,
    /// Last step the proxy's JSON lines reported, to name the failing hop.
    pub proxy_stage: Option<crate::logs::proxy::Stage>,
    /// Decided only for lack of a partner (prefill-only, proxy-only): a late
    /// partner may reopen it.
    pub reopenable: bool,
    /// Waiting in the hit FIFO of its decode source.
    pub in_hit_queue: bool,
    /// Listed in the correlator's open list.
    pub in_open: bool,
    /// Confirmed by a `KV Transfer metrics` window.
    pub transfer_confirmed: bool,
}

#[derive(Clone)]
pub(crate) struct Entry {
    pub trace: Trace,
    pub track: Track,
}

/// How many traces behind the newest one a trace is compacted.
const COMPACT_LAG: usize = 256;

#[derive(Clone)]
pub(crate) struct Store {
    cap: usize,
    /// Serial of `entries[0]`.
    first: u64,
    entries: VecDeque<Entry>,
    /// Latest trace per base id.
    by_base: HashMap<Box<str>, u64>,
    /// Trace per engine-internal id (prefill side), for NIXL params and expiry lines.
    by_engine: HashMap<Box<str>, u64>,
    pub evicted: u64,
}

impl Store {
    pub fn new(cap: usize) -> Self {
        Store {
            cap: cap.max(1),
            first: 0,
            entries: VecDeque::new(),
            by_base: HashMap::new(),
            by_engine: HashMap::new(),
            evicted: 0,
        }
    }

    /// Adds a trace, indexed under its id; drops the oldest beyond capacity.
    pub fn push(&mut self, trace: Trace, track: Track) -> u64 {
        let serial = self.first + self.entries.len() as u64;
        self.by_base.insert(trace.id.as_str().into(), serial);
        // Grown exactly up to the cap: doubling would leave a full ring of
        // 10,000 with room (and memory) for 16,384.
        if self.entries.len() == self.entries.capacity() {
            let want = (self.entries.len() * 2).max(16).min(self.cap + 1);
            self.entries.reserve_exact(want.saturating_sub(self.entries.len()));
        }
        self.entries.push_back(Entry { trace, track });
        // A trace this far back has (almost always) stopped changing: give
        // back what its strings and vectors grew beyond their contents. One
        // that still changes just grows again.
        if let Some(i) = self.entries.len().checked_sub(COMPACT_LAG + 1)
            && let Some(e) = self.entries.get_mut(i)
        {
            e.trace.shrink_to_fit();
            if let Some(id) = &mut e.track.prefill_internal {
                id.shrink_to_fit();
            }
        }
        if self.entries.len() == self.cap + 1 && self.evicted == 0 {
            // The ring is full: from here on every push removes as many
            // index keys as it adds. Deleted keys leave tombstones, and
            // hashbrown doubles a table that runs out of room unless it is
            // at most half full (then it cleans up in place); room for twice
            // the keys now makes that doubling happen here, once, and not
            // hours later.
            self.by_base.reserve(self.by_base.len() + 2);
            self.by_engine.reserve(self.by_engine.len() + 2);
        }
        while self.entries.len() > self.cap {
            if let Some(old) = self.entries.pop_front() {
                let s = self.first;
                self.first += 1;
                self.evicted += 1;
                self.unindex(&old, s);
            }
        }
        serial
    }

    fn unindex(&mut self, old: &Entry, serial: u64) {
        let mut keys: Vec<&str> = vec![old.trace.id.as_str()];
        keys.extend(old.trace.engine_ids.iter().map(|(_, id)| id.as_str()));
        for k in &keys {
            if self.by_base.get(*k) == Some(&serial) {
                self.by_base.remove(*k);
            }
        }
        for k in old.trace.engine_ids.iter().map(|(_, id)| id.as_str()) {
            if self.by_engine.get(k) == Some(&serial) {
                self.by_engine.remove(k);
            }
        }
        if let Some(k) = old.track.prefill_internal.as_deref()
            && self.by_engine.get(k) == Some(&serial)
        {
            self.by_engine.remove(k);
        }
    }

    pub fn get(&self, serial: u64) -> Option<&Entry> {
        let i = serial.checked_sub(self.first)?;
        self.entries.get(usize::try_from(i).ok()?)
    }

    pub fn get_mut(&mut self, serial: u64) -> Option<&mut Entry> {
        let i = serial.checked_sub(self.first)?;
        self.entries.get_mut(usize::try_from(i).ok()?)
    }

    pub fn latest(&self, base: &str) -> Option<u64> {
        self.by_base.get(base).copied().filter(|s| self.get(*s).is_some())
    }

    /// Points `base` at `serial` too (a decode id joined to a prefill trace).
    pub fn alias(&mut self, base: &str, serial: u64) {
        self.by_base.insert(base.into(), serial);
    }

    pub fn index_engine(&mut self, internal: &str, serial: u64) {
        self.by_engine.insert(internal.into(), serial);
    }

    pub fn by_engine(&self, internal: &str) -> Option<u64> {
        self.by_engine.get(internal).copied().filter(|s| self.get(*s).is_some())
    }

    pub fn traces(&self) -> impl DoubleEndedIterator<Item = &Trace> {
        self.entries.iter().map(|e| &e.trace)
    }

    pub fn index_entries(&self) -> usize {
        self.by_base.len() + self.by_engine.len()
    }

    pub fn serials(&self) -> std::ops::Range<u64> {
        self.first..self.first + self.entries.len() as u64
    }

    pub fn outcome(&self, serial: u64) -> Option<Outcome> {
        self.get(serial).map(|e| e.trace.outcome)
    }

    /// Sources helper for death handling: does this trace have an undecided
    /// phase on `src`?
    pub fn touches(e: &Entry, src: LogOrigin) -> bool {
        match src {
            LogOrigin::Prefill(i) => e.trace.prefill == Some(i),
            LogOrigin::Decode(i) => e.trace.decode == Some(i),
            LogOrigin::Proxy => e.track.proxy_seen,
        }
    }
}
