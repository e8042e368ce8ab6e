//! The bounded trace ring and its id indexes.
//!
//! Traces are addressed by a serial number that only grows, so a queue
//! entry that outlived its trace (evicted from the ring) finds nothing
//! instead of finding a different trace at the same position.

use std::collections::{HashMap, VecDeque};

use super::model::{Counts, Hop, Outcome, Trace};
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
    /// The prefill copy's prompt length, when a span or a DEBUG line gave it.
    pub prefill_tokens: Option<u32>,
    pub decode_at: Option<f64>,
    pub decode_event_t: Option<f64>,
    /// An instance's `Received request` line for it was read: its start
    /// on some side, not only what came after.
    pub arrived: bool,
    /// Read time of the decode's `Added` line (when its hit is due).
    pub decode_added_at: Option<f64>,
    pub decode_has_params: bool,
    pub proxy_seen: bool,
    /// A proxy-only trace opened by an exception the proxy raised itself
    /// (uvicorn's `Exception in ASGI application`).
    pub proxy_exception: bool,
    /// The status of the id-less access line pinned on it by arrival order.
    pub proxy_answer: Option<u16>,
    /// Last step the proxy's JSON lines reported, to name the failing hop.
    pub proxy_stage: Option<crate::logs::proxy::Stage>,
    /// Waiting in the hit FIFO of its decode source.
    pub in_hit_queue: bool,
    /// Listed in the correlator's open list.
    pub in_open: bool,
    /// A line named this request's KV load as failed (log, event time),
    /// until a `Recovered from KV load failure` line accounts for it.
    pub load_failed: Option<(LogOrigin, f64)>,
    /// The prefill's connector let go of its KV (`finished_sending`).
    pub prefill_sent: bool,
    /// Its prefill side was swapped in by prompt length (`prompt_join.rs`).
    pub repaired: bool,
    /// Other prefill copies of the same prompt length it could have been
    /// paired with; each gives the same verdict (`prompt_join.rs`).
    pub same_length_copies: Vec<String>,
    /// Copies of unknown length (no span, no details) that could be its too.
    pub unsized_copies: Vec<String>,
    /// Its miss was announced (`drain_new_misses`).
    pub alerted: bool,
    /// Its expiry unread counted among the misses known but not named
    /// (`unattributed_misses`), until a read after all takes it back.
    pub unattributed_miss: bool,
    /// Opened by a line the first read found in a log that prints no time
    /// (before pdtop started): its time is not known.
    pub undated: bool,
}

#[derive(Clone)]
pub(crate) struct Entry {
    pub trace: Trace,
    pub track: Track,
    /// What the sources said of it: what `decide` reads.
    pub facts: super::evidence::Facts,
    /// Merged into another trace (`length_join.rs`): gone for every lookup.
    pub retired: bool,
}

impl Entry {
    /// The first and last event times of its prefill copy and its decode
    /// request (`None`: neither is dated): where what the proxy's flow
    /// says of it is judged.
    pub fn side_span(&self) -> Option<(f64, f64)> {
        let copy = self.trace.phases.iter().filter(|p| p.hop == Hop::Producer).map(|p| p.start);
        copy.chain(self.track.decode_event_t).fold(None, |span, t| match span {
            None => Some((t, t)),
            Some((a, b)) => Some((t.min(a), t.max(b))),
        })
    }
}

/// The last counts and what they were counted at; a lock, not a `Cell`, so
/// the state stays `Sync`.
#[derive(Default)]
pub(crate) struct Memo(std::sync::Mutex<Option<(u64, u64, Counts)>>);

impl Memo {
    pub fn get(&self) -> Option<(u64, u64, Counts)> {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn set(&self, v: (u64, u64, Counts)) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(v);
    }
}

impl Clone for Memo {
    fn clone(&self) -> Self {
        Memo(std::sync::Mutex::new(self.get()))
    }
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
    /// The outcomes of the traces dropped off the ring, so that counts stay
    /// run-long whatever the ring's size (a trace that old has settled).
    pub gone: Counts,
    /// When pdtop began reading: an evicted trace from before it is
    /// counted so.
    pub started: Option<f64>,
    /// Bumped by every change to an entry (a push, a `get_mut`), so what is
    /// computed from all traces can be kept until it moves.
    pub rev: u64,
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
            gone: Counts::default(),
            started: None,
            rev: 0,
        }
    }

    /// Adds a trace, indexed under its id; drops the oldest beyond capacity.
    pub fn push(&mut self, mut trace: Trace, track: Track) -> u64 {
        let serial = self.first + self.entries.len() as u64;
        self.rev += 1;
        trace.serial = serial;
        insert_key(&mut self.by_base, &trace.id, serial);
        // Grown exactly up to the cap: doubling would leave a full ring of
        // 10,000 with room (and memory) for 16,384.
        if self.entries.len() == self.entries.capacity() {
            let want = (self.entries.len() * 2).max(16).min(self.cap + 1);
            self.entries.reserve_exact(want.saturating_sub(self.entries.len()));
        }
        self.entries.push_back(Entry { trace, track, facts: Default::default(), retired: false });
        // A trace this far back has (almost always) stopped changing: give
        // back what its strings and vectors grew beyond their contents. One
        // that still changes just grows again.
        if let Some(i) = self.entries.len().checked_sub(COMPACT_LAG + 1)
            && let Some(e) = self.entries.get_mut(i)
        {
            e.trace.shrink_to_fit();
            e.facts.shrink_to_fit();
            if let Some(id) = &mut e.track.prefill_internal {
                id.shrink_to_fit();
            }
        }
        while self.entries.len() > self.cap {
            if let Some(old) = self.entries.pop_front() {
                let s = self.first;
                self.first += 1;
                self.evicted += 1;
                // One dropped still open never gets its verdict: unknown.
                self.gone.add_trace(&old.trace, self.started);
                if old.trace.outcome == Outcome::Pending {
                    self.gone.pending -= 1;
                    self.gone.unknown += 1;
                }
                self.unindex(&old, s);
            }
        }
        serial
    }

    fn unindex(&mut self, old: &Entry, serial: u64) {
        unindex(&mut self.by_base, &mut self.by_engine, old, serial);
    }
}

/// Takes `old`'s ids out of the two indexes where they still point at it.
fn unindex(
    by_base: &mut HashMap<Box<str>, u64>,
    by_engine: &mut HashMap<Box<str>, u64>,
    old: &Entry,
    serial: u64,
) {
    let forget = |map: &mut HashMap<Box<str>, u64>, k: &str| {
        if map.get(k) == Some(&serial) {
            map.remove(k);
        }
    };
    forget(by_base, &old.trace.id);
    for (_, id) in &old.trace.engine_ids {
        forget(by_base, id);
        // Traces filed under an instance's response id (no forwarded id).
        forget(by_base, &super::ids::trace_key(super::ids::external_of_internal(id)));
        forget(by_engine, id);
    }
    if let Some(k) = old.track.prefill_internal.as_deref() {
        forget(by_engine, k);
    }
}

impl Store {
    pub fn get(&self, serial: u64) -> Option<&Entry> {
        let i = serial.checked_sub(self.first)?;
        self.entries.get(usize::try_from(i).ok()?).filter(|e| !e.retired)
    }

    pub fn get_mut(&mut self, serial: u64) -> Option<&mut Entry> {
        let i = serial.checked_sub(self.first)?;
        let e = self.entries.get_mut(usize::try_from(i).ok()?).filter(|e| !e.retired)?;
        self.rev += 1;
        Some(e)
    }

    /// Takes a trace out of every lookup and count: what it held was moved
    /// to another (its sides were joined there).
    pub fn retire(&mut self, serial: u64) {
        let Some(i) = serial.checked_sub(self.first).and_then(|i| usize::try_from(i).ok()) else { return };
        let Some(e) = self.entries.get(i).filter(|e| !e.retired) else { return };
        unindex(&mut self.by_base, &mut self.by_engine, e, serial);
        if let Some(e) = self.entries.get_mut(i) {
            e.retired = true;
            self.rev += 1;
        }
    }

    pub fn latest(&self, base: &str) -> Option<u64> {
        self.by_base.get(base).copied().filter(|s| self.get(*s).is_some())
    }

    /// Points `base` at `serial` too (a decode id joined to a prefill trace).
    pub fn alias(&mut self, base: &str, serial: u64) {
        insert_key(&mut self.by_base, base, serial);
    }

    pub fn index_engine(&mut self, internal: &str, serial: u64) {
        insert_key(&mut self.by_engine, internal, serial);
    }

    pub fn by_engine(&self, internal: &str) -> Option<u64> {
        self.by_engine.get(internal).copied().filter(|s| self.get(*s).is_some())
    }

    pub fn traces(&self) -> impl DoubleEndedIterator<Item = &Trace> {
        self.entries.iter().filter(|e| !e.retired).map(|e| &e.trace)
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

/// Event time of the latest thing a trace's lines said: an arrival of the
/// same id much later than this is a new request (a looping lab, a driver
/// that reuses ids), not this one's other side.
pub(crate) fn last_event(e: &Entry) -> f64 {
    e.trace.phases.iter().map(|p| p.end.unwrap_or(p.start).max(p.start)).fold(f64::NEG_INFINITY, f64::max)
}

/// Whether a decided trace is still recent enough, at event time `t` and
/// read time `at`, to take the other side of its request: on both clocks,
/// since a replayed loop repeats its stamps and a pasted log has no read time.
pub(crate) fn recent(e: &Entry, t: f64, at: f64, window: f64) -> bool {
    last_event(e) >= t - window && e.trace.decided_at.unwrap_or(e.trace.first_seen) >= at - window
}

/// The prefill answered an error and a decode request of the same id came
/// after it: the proxy went on (it hid the failure). One request, an error
/// at prefill, whatever decode did.
pub(super) fn failed_prefill(e: &Entry) -> bool {
    e.trace.outcome == Outcome::Error && e.trace.error_at == Some(Hop::Producer) && e.trace.prefill.is_some()
}

/// Indexes `key`. Once the ring is full every trace removes as many keys
/// as it adds, and deleted keys leave tombstones that use up a hashbrown
/// table's room; with none left, hashbrown doubles a table more than half
/// full (hours into a run, for good). Rebuilt clean at the size its live
/// keys need instead, it stays the size of the ring; at least a quarter of
/// room after a rebuild keeps rebuilds rare.
fn insert_key(map: &mut HashMap<Box<str>, u64>, key: &str, serial: u64) {
    if map.len() == map.capacity() && !map.contains_key(key) {
        let mut fresh = HashMap::with_capacity(map.len() + map.len() / 4 + 1);
        fresh.extend(map.drain());
        *map = fresh;
    }
    map.insert(key.into(), serial);
}

/// Appends `v`, dropping the oldest past `cap`: every queue of the traces is bounded.
pub(crate) fn push_capped<T>(q: &mut VecDeque<T>, v: T, cap: usize) {
    q.push_back(v);
    while q.len() > cap.max(1) {
        q.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full ring's churn: every new key evicts the oldest.
    fn churn(insert: fn(&mut HashMap<Box<str>, u64>, &str, u64)) -> usize {
        let mut map = HashMap::new();
        let live = 10_000u64;
        for n in 0..200_000u64 {
            insert(&mut map, &format!("cmpl-lab{n}-0"), n);
            if n >= live {
                map.remove(format!("cmpl-lab{}-0", n - live).as_str());
            }
        }
        map.capacity()
    }

    #[test]
    fn a_churned_index_keeps_the_size_of_its_live_keys() {
        // (With plain inserts, the hashbrown of Rust 1.95 doubles it.)
        let kept = churn(insert_key);
        assert!(kept < 15_000, "{kept}");
    }
}
