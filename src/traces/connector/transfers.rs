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
//! then. Where the windows have counted at least as many reads as there
//! are such loads, the loads are confirmed.
//!
//! Fewer counts is no proof of a miss: the stats line shows the engine as
//! of its last output, which can be seconds old (nixl-1p2d-cascade: a
//! quiet line 5 s after `Added request ...nixl-16`, whose 278 MiB read the
//! next window counted). So a shortfall leaves the loads unconfirmed,
//! waiting for a later quiet point, and says nothing against them.
//!
//! Counts can be matched to loads only from the process's start: read
//! from the middle, a window counts reads of loads pdtop never saw. Such a
//! ledger starts at its first quiet point.

/// Source seconds before a quiet line within which a load is taken as
/// maybe not yet known to the engine (one-second stamps).
const LATE_S: f64 = 2.0;

#[derive(Debug, Clone, Default)]
pub(crate) struct TransferLedger {
    /// Unconfirmed loads: serial and source time, in log order.
    pending: Vec<(u64, f64)>,
    /// Transfers the windows counted since pdtop began reading this process.
    counted: u64,
    /// Loads confirmed against `counted` so far.
    confirmed: u64,
    /// A quiet line whose own window may still follow: its source time.
    quiet_at: Option<f64>,
    /// This process printed a window: its connector counts reads here
    /// (a push connector's decode never does).
    pub counts: bool,
    /// Every load since the counts began was read: the process's start
    /// was, or a quiet point since.
    pub whole: bool,
}

/// A quiet point reached: the loads to judge against the counts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Due {
    pub at: f64,
}

/// Loads a quiet point confirmed, with the running totals that did.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Confirmed {
    pub loads: Vec<u64>,
    pub counted: u64,
    pub total: u64,
}

impl TransferLedger {
    pub fn load(&mut self, serial: u64, t: f64, cap: usize) {
        if self.pending.len() >= cap.max(1) {
            // Never confirmed: the oldest goes, with nothing said of it.
            self.pending.remove(0);
        }
        self.pending.push((serial, t));
    }

    /// A window of `n` transfers. The first after a quiet line is that
    /// line's own: the quiet point is due.
    pub fn window(&mut self, n: u64) -> Option<Due> {
        self.counts = true;
        self.counted += n;
        self.quiet_at.take().map(|at| Due { at })
    }

    /// An engine stats line at source time `t`: a quiet one is due at its
    /// window, or at the next stats line if it printed none (no transfer).
    pub fn stats(&mut self, quiet: bool, t: f64) -> Option<Due> {
        let due = self.quiet_at.take().map(|at| Due { at });
        if quiet {
            self.quiet_at = Some(t);
        }
        due
    }

    /// Judges the loads before quiet point `due`: those no longer loaded
    /// (`loaded` says) leave; the rest are confirmed if the counts cover
    /// them all. Late loads wait for the next quiet point.
    pub fn settle(&mut self, due: &Due, loaded: impl Fn(u64) -> bool) -> Option<Confirmed> {
        self.pending.retain(|(s, _)| loaded(*s));
        let on_time = self.pending.iter().take_while(|(_, t)| *t < due.at - LATE_S).count();
        if !self.whole {
            // Count from here: the window just closed may hold the reads
            // of late loads too, so they go with what came before.
            self.pending.clear();
            (self.counted, self.confirmed, self.whole) = (0, 0, true);
            return None;
        }
        let n = on_time as u64;
        if n == 0 || self.counted < self.confirmed + n {
            return None;
        }
        self.confirmed += n;
        let loads = self.pending.drain(..on_time).map(|(s, _)| s).collect();
        Some(Confirmed { loads, counted: self.counted, total: self.confirmed })
    }

    /// A new process, read from its start: its windows count nothing of
    /// the old one's loads.
    pub fn restart(&mut self) {
        *self = Self { whole: true, ..Self::default() };
    }

    pub fn len(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole() -> TransferLedger {
        let mut l = TransferLedger::default();
        l.restart();
        l
    }

    #[test]
    fn a_quiet_point_confirms_the_loads_its_counts_cover() {
        let mut l = whole();
        l.load(1, 0.0, 10);
        l.load(2, 1.0, 10);
        assert_eq!(l.window(1), None);
        assert_eq!(l.stats(false, 5.0), None);
        assert_eq!(l.stats(true, 10.0), None);
        // A load after the quiet line waits for the next one.
        l.load(3, 10.5, 10);
        let due = l.window(1).unwrap();
        assert_eq!(due, Due { at: 10.0 });
        assert_eq!(l.settle(&due, |_| true), Some(Confirmed { loads: vec![1, 2], counted: 2, total: 2 }));
        assert_eq!(l.window(4), None);
        assert_eq!(l.stats(true, 20.0), None);
        let due = l.stats(false, 30.0).unwrap();
        assert_eq!(l.settle(&due, |_| true), Some(Confirmed { loads: vec![3], counted: 6, total: 3 }));
        assert_eq!(l.len(), 0);
    }

    #[test]
    fn a_shortfall_leaves_the_loads_for_a_later_quiet_point() {
        // nixl-1p2d-cascade: the quiet line came while a read was still on.
        let mut l = whole();
        l.load(1, 0.0, 10);
        l.load(2, 3.0, 10);
        l.window(1);
        l.stats(true, 10.0);
        let due = l.window(0).unwrap();
        assert_eq!(l.settle(&due, |_| true), None);
        l.load(3, 12.0, 10);
        l.stats(true, 20.0);
        let due = l.window(2).unwrap();
        assert_eq!(l.settle(&due, |_| true), Some(Confirmed { loads: vec![1, 2, 3], counted: 3, total: 3 }));
    }

    #[test]
    fn a_load_just_before_a_quiet_line_is_late_and_one_no_longer_loaded_leaves() {
        // vLLM 0.26 (nixl-llama-shape): `Added request ...steady-24` then,
        // in the same second, `Running: 0 reqs, Waiting: 0 reqs`.
        let mut l = whole();
        l.load(1, 0.0, 10);
        l.load(9, 1.0, 10);
        l.load(2, 27.0, 10);
        l.stats(true, 27.0);
        let due = l.window(1).unwrap();
        assert_eq!(l.settle(&due, |s| s != 9), Some(Confirmed { loads: vec![1], counted: 1, total: 1 }));
        assert_eq!(l.len(), 1);
    }

    #[test]
    fn a_restart_forgets_and_the_cap_drops_the_oldest() {
        let mut l = whole();
        for s in 0..3 {
            l.load(s, 0.0, 2);
        }
        l.window(5);
        l.stats(true, 10.0);
        let due = l.stats(false, 20.0).unwrap();
        assert_eq!(l.settle(&due, |_| true).map(|c| c.loads), Some(vec![1, 2]));
        l.load(7, 21.0, 2);
        l.restart();
        assert_eq!(
            (l.stats(true, 30.0), l.window(1), l.len(), l.counts),
            (None, Some(Due { at: 30.0 }), 0, true)
        );
    }

    #[test]
    fn read_from_the_middle_the_counts_begin_at_the_first_quiet_point() {
        // The first window may count reads of loads before the reading.
        let mut l = TransferLedger::default();
        l.load(1, 0.0, 10);
        l.window(3);
        l.stats(true, 10.0);
        let due = l.window(0).unwrap();
        assert_eq!(l.settle(&due, |_| true), None);
        assert_eq!((l.len(), l.whole), (0, true));
        l.load(2, 11.0, 10);
        l.stats(true, 20.0);
        let due = l.window(0).unwrap();
        assert_eq!(l.settle(&due, |_| true), None);
        l.window(1);
        l.stats(true, 30.0);
        let due = l.stats(false, 40.0).unwrap();
        assert_eq!(l.settle(&due, |_| true).map(|c| c.loads), Some(vec![2]));
    }
}
