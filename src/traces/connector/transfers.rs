//! A decode's loads on `kv_transfer_params` against the transfers its
//! `KV Transfer metrics` windows counted.
//!
//! A window counts the reads that *finished* in its interval, not the
//! requests that began one, and a read can take longer than several
//! windows (NIXL over TCP: 30 s and more), so no window says which
//! requests it counted. The stats line and its window are printed by one
//! `log()` call, in that order. A stats line that says `Running: 0 reqs,
//! Waiting: 0 reqs` (waiting includes the requests deferred for their KV)
//! is a quiet point: the reads of the loads before it should be counted by
//! then. Where the windows have counted at least one read for every load
//! so far, the loads before the quiet point are confirmed: the counts
//! agree with them, which is evidence beside the request's own lines, not
//! a read of this one request (a count that covers the loads need not be
//! this one's).
//!
//! A count short of the loads is no proof of a miss: the stats line shows
//! the engine as of its last output, which can be seconds old
//! (nixl-1p2d-cascade: a quiet line 5 s after `Added request ...nixl-16`,
//! whose 278 MiB read the next window counted). A shortfall leaves the
//! loads for a later quiet point and says nothing against them.
//!
//! A count can run ahead of the loads, which would confirm one never read:
//! reads of loads pdtop did not see (read from the middle of a process:
//! the counts begin at its second quiet point, after the reads the first
//! may have left in flight); a load that left the ledger unconfirmed (the
//! cap: the counts begin again); several reads per load (tensor parallel:
//! a load from a prefill of several ranks, or of unknown rank count, ends
//! the confirming until a restart; the caller confirms only a decode of
//! one rank and one engine).
//! A load whose read failed, as its decode's log says, is no longer owed a
//! count.

use std::collections::VecDeque;

/// Source seconds before a quiet line within which a load is taken as
/// maybe not yet known to the engine (one-second stamps).
const LATE_S: f64 = 2.0;

/// Quiet points a ledger read from the middle waits before it counts.
const SETTLING: u8 = 2;

#[derive(Debug, Clone)]
pub(crate) struct TransferLedger {
    /// Unconfirmed loads in log order: serial, source time, and how many
    /// loads came before it.
    pending: VecDeque<(u64, f64, u64)>,
    /// Loads so far.
    loads: u64,
    /// Transfers the windows counted since the counts began.
    counted: u64,
    /// Loads confirmed against `counted` so far.
    confirmed: u64,
    /// A quiet line whose own window may still follow: its source time
    /// and the loads before it.
    quiet_at: Option<(f64, u64)>,
    /// Quiet points to pass before counting (0: counting).
    settling: u8,
    /// A load from a prefill of other than one rank: reads per load unknown.
    multiplied: bool,
    /// This process printed a window: its connector counts reads here
    /// (a push connector's decode never does).
    pub counts: bool,
}

impl Default for TransferLedger {
    /// Read from the middle of a process, until a start says otherwise.
    fn default() -> Self {
        TransferLedger {
            pending: VecDeque::new(),
            loads: 0,
            counted: 0,
            confirmed: 0,
            quiet_at: None,
            settling: SETTLING,
            multiplied: false,
            counts: false,
        }
    }
}

/// A quiet line's source time and the loads before it.
pub(crate) type Quiet = (f64, u64);

/// Loads a quiet point confirmed, with the running totals that did.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Confirmed {
    pub loads: Vec<u64>,
    pub counted: u64,
    pub confirmed: u64,
}

impl TransferLedger {
    /// A load at source time `t`; `one_rank`: its prefill reads from one
    /// rank (NIXL's `tp_size: 1`), so one read counts for it.
    pub fn load(&mut self, serial: u64, t: f64, one_rank: bool, cap: usize) {
        self.multiplied |= !one_rank;
        if self.pending.len() >= cap.max(1) {
            // It would leave unconfirmed, its count spare: begin again.
            self.pending.clear();
            self.settling = self.settling.max(1);
        }
        self.pending.push_back((serial, t, self.loads));
        self.loads += 1;
    }

    /// Its decode's log said the load's read failed: no count is owed.
    pub fn failed(&mut self, serial: u64) {
        self.pending.retain(|(s, ..)| *s != serial);
    }

    /// A window of `n` transfers. The first after a quiet line is that
    /// line's own: the quiet point is due.
    pub fn window(&mut self, n: u64) -> Option<Quiet> {
        self.counts = true;
        self.counted += n;
        self.quiet_at.take()
    }

    /// An engine stats line at source time `t`: a quiet one is due at its
    /// window, or at the next stats line if it printed none (no transfer).
    pub fn stats(&mut self, quiet: bool, t: f64) -> Option<Quiet> {
        let due = self.quiet_at.take();
        if quiet {
            self.quiet_at = Some((t, self.loads));
        }
        due
    }

    /// A quiet point: the loads before it are confirmed if the counts
    /// cover every one of them, those just before it included. Late loads
    /// wait for the next quiet point, and so do those after it.
    pub fn settle(&mut self, (at, before): Quiet) -> Option<Confirmed> {
        if self.settling > 0 {
            // Count from here: what came before is behind.
            self.settling -= 1;
            self.pending.retain(|(.., k)| *k >= before);
            (self.counted, self.confirmed) = (0, 0);
            return None;
        }
        let owed = self.pending.iter().take_while(|(.., k)| *k < before).count();
        let on_time = self.pending.iter().take(owed).take_while(|(_, t, _)| *t < at - LATE_S).count();
        if on_time == 0 || self.multiplied || self.counted < self.confirmed + owed as u64 {
            return None;
        }
        self.confirmed += on_time as u64;
        let loads = self.pending.drain(..on_time).map(|(s, ..)| s).collect();
        Some(Confirmed { loads, counted: self.counted, confirmed: self.confirmed })
    }

    /// A new process, read from its start: its windows count nothing of
    /// the old one's loads.
    pub fn restart(&mut self) {
        *self = Self { settling: 0, ..Self::default() };
    }

    /// The same process read from its middle from here on (a start read
    /// for set-up only).
    pub fn read_from_the_middle(&mut self) {
        *self = Self::default();
    }

    pub fn len(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn started() -> TransferLedger {
        let mut l = TransferLedger::default();
        l.restart();
        l
    }

    /// A quiet line at `t` and its window of `n`: what the point confirms.
    fn quiet(l: &mut TransferLedger, t: f64, n: u64) -> Option<Vec<u64>> {
        assert_eq!(l.stats(true, t), None);
        let due = l.window(n).expect("due");
        l.settle(due).map(|c| c.loads)
    }

    #[test]
    fn a_quiet_point_confirms_the_loads_its_counts_cover() {
        let mut l = started();
        l.load(1, 0.0, true, 10);
        l.load(2, 1.0, true, 10);
        assert_eq!(l.window(1), None);
        assert_eq!(l.stats(false, 5.0), None);
        assert_eq!(l.stats(true, 10.0), None);
        // A load after the quiet line waits for the next one.
        l.load(3, 10.5, true, 10);
        let due = l.window(1).unwrap();
        assert_eq!(due, (10.0, 2));
        assert_eq!(l.settle(due), Some(Confirmed { loads: vec![1, 2], counted: 2, confirmed: 2 }));
        assert_eq!(l.window(4), None);
        // A quiet line that printed no window is due at the next stats line.
        assert_eq!(l.stats(true, 20.0), None);
        let due = l.stats(false, 30.0).unwrap();
        assert_eq!(l.settle(due), Some(Confirmed { loads: vec![3], counted: 6, confirmed: 3 }));
        assert_eq!(l.len(), 0);
    }

    #[test]
    fn a_shortfall_leaves_the_loads_for_a_later_quiet_point() {
        // nixl-1p2d-cascade: the quiet line came while a read was still on.
        let mut l = started();
        l.load(1, 0.0, true, 10);
        l.load(2, 3.0, true, 10);
        l.window(1);
        assert_eq!(quiet(&mut l, 10.0, 0), None);
        l.load(3, 12.0, true, 10);
        assert_eq!(quiet(&mut l, 20.0, 2), Some(vec![1, 2, 3]));
    }

    #[test]
    fn a_late_load_waits_and_its_read_is_owed_now() {
        // vLLM 0.26 (nixl-llama-shape): `Added request ...steady-24` then,
        // in the same second, `Running: 0 reqs, Waiting: 0 reqs`.
        let mut l = started();
        l.load(1, 0.0, true, 10);
        l.load(2, 27.0, true, 10);
        assert_eq!(quiet(&mut l, 27.0, 2), Some(vec![1]));
        assert_eq!(l.len(), 1);
        // One count for the two: the late one's read may be it.
        let mut l = started();
        l.load(1, 0.0, true, 10);
        l.load(2, 26.5, true, 10);
        assert_eq!(quiet(&mut l, 27.0, 1), None);
    }

    #[test]
    fn a_failed_read_is_owed_no_count_and_nothing_else_leaves_a_spare_one() {
        let mut l = started();
        l.load(1, 0.0, true, 10);
        l.load(2, 1.0, true, 10);
        l.failed(1);
        assert_eq!(quiet(&mut l, 10.0, 1), Some(vec![2]));
        // The cap drops loads unconfirmed: their counts would be spare, so
        // the counts begin again at the next quiet point.
        let mut l = started();
        for s in 0..3 {
            l.load(s, 0.0, true, 2);
        }
        l.window(1);
        assert_eq!(quiet(&mut l, 10.0, 1), None);
        l.load(7, 11.0, true, 2);
        assert_eq!(quiet(&mut l, 20.0, 1), Some(vec![7]));
    }

    #[test]
    fn read_from_the_middle_the_counts_begin_at_the_second_quiet_point() {
        // The first windows count reads of loads before the reading, and
        // the first quiet line may leave some in flight.
        let mut l = TransferLedger::default();
        l.load(1, 0.0, true, 10);
        l.window(3);
        assert_eq!(quiet(&mut l, 10.0, 0), None);
        l.load(2, 11.0, true, 10);
        assert_eq!(quiet(&mut l, 20.0, 2), None);
        assert_eq!(l.len(), 0);
        l.load(3, 21.0, true, 10);
        assert_eq!(quiet(&mut l, 30.0, 1), Some(vec![3]));
        // A start read for set-up only puts it back there; a start read
        // whole counts from the first.
        l.read_from_the_middle();
        l.load(4, 31.0, true, 10);
        assert_eq!(quiet(&mut l, 40.0, 1), None);
        l.restart();
        l.load(5, 41.0, true, 10);
        assert_eq!(quiet(&mut l, 50.0, 1), Some(vec![5]));
    }

    #[test]
    fn a_load_from_several_ranks_ends_the_confirming_until_a_restart() {
        // With a prefill of two ranks each load is read twice: one count
        // per load could cover only half of them.
        let mut l = started();
        l.load(1, 0.0, false, 10);
        l.load(2, 1.0, true, 10);
        assert_eq!(quiet(&mut l, 10.0, 2), None);
        l.load(3, 11.0, true, 10);
        assert_eq!(quiet(&mut l, 20.0, 5), None);
        l.restart();
        l.load(4, 21.0, true, 10);
        assert_eq!(quiet(&mut l, 30.0, 1), Some(vec![4]));
    }
}
