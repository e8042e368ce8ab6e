//! What each instance has in flight: requests it received and has not
//! visibly finished, so that an instance's death names the requests it cut
//! off, and only those.
//!
//! uvicorn prints an access line when the response *starts*. A plain
//! response starts once it is complete, after the request's `Added` line;
//! a stream starts right away, before its `Added` line, and only
//! `--enable-log-outputs` prints its end (`ends.rs`). So a request is
//! finished on an instance by its access line if that line followed its
//! `Added` line, by its logged end, by an abort or a failure, or by an
//! engine stats line: with N running or waiting, no more than N of those
//! that arrived before it were still in flight. With `--disable-log-stats`
//! no such line comes, so a stream's life is bounded too ([`STREAM_LIFE_S`]).

use std::collections::{HashMap, HashSet, VecDeque};

use crate::feed::LogOrigin;

/// A stream open longer than this was ended by its client: vLLM's demo
/// proxy gives a request `aiohttp.ClientTimeout(total=6 * 60 * 60)`
/// (`disagg_proxy_demo.py`) and the benchmark proxy `--timeout 21600`
/// (`disagg_prefill_proxy_server.py`, 0.14 to 0.18), the longest such
/// bounds vLLM ships; a closed connection aborts the request.
pub(crate) const STREAM_LIFE_S: f64 = 6.0 * 3600.0;

/// One request in flight on one instance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Open {
    pub serial: u64,
    /// Event time of its arrival line.
    pub since: f64,
    /// Its stream started (`200` access line before `Added`): it ends unseen.
    pub streaming: bool,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct InFlight {
    per: HashMap<LogOrigin, VecDeque<Open>>,
    /// How the instance's current process stopped, once its log says.
    stopped: HashMap<LogOrigin, Stop>,
    /// A new process started and nothing arrived since: a second sign of
    /// the same start (its pid, then `Starting vLLM server`) is no death.
    fresh: HashSet<LogOrigin>,
    /// Logs that print stats per engine (data parallel): `Engine 001` seen.
    many_engines: HashSet<LogOrigin>,
    /// The current process's last engine stats line (event time).
    stats_at: HashMap<LogOrigin, f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// `[shutdown]` lines: what it stopped with was aborted or drained.
    Orderly,
    /// Its engine died (`EngineCore encountered a fatal error`...).
    Died,
}

impl InFlight {
    pub fn begin(&mut self, src: LogOrigin, serial: u64, t: f64, cap: usize) {
        self.fresh.remove(&src);
        let q = self.per.entry(src).or_default();
        if q.iter().any(|o| o.serial == serial) {
            return;
        }
        q.push_back(Open { serial, since: t, streaming: false });
        q.retain(|o| !o.streaming || t - o.since <= STREAM_LIFE_S);
        while q.len() > cap.max(1) {
            q.pop_front();
        }
    }

    /// Requests moved between traces (`map`: old serial to new): a death
    /// of `src` cuts their new traces.
    pub fn moved(&mut self, src: LogOrigin, map: impl Fn(u64) -> u64) {
        if let Some(q) = self.per.get_mut(&src) {
            q.iter_mut().for_each(|o| o.serial = map(o.serial));
        }
    }

    /// Its access line came: a stream started (`streaming`) or it ended.
    pub fn answered(&mut self, src: LogOrigin, serial: u64, streaming: bool) {
        let Some(q) = self.per.get_mut(&src) else {
            return;
        };
        if streaming {
            q.iter_mut().filter(|o| o.serial == serial).for_each(|o| o.streaming = true);
        } else {
            q.retain(|o| o.serial != serial);
        }
    }

    /// An engine stats line at event time `t`: `busy` requests were running
    /// or waiting then. Of those that arrived before it, the unanswered are
    /// surely among them; of the open streams only the newest that still
    /// fit in `busy` can be (the older ended first: a guess only between
    /// streams of different lengths). `engine`: the line's engine index;
    /// with several engines one line does not see them all.
    pub fn engine_busy(&mut self, src: LogOrigin, engine: Option<u32>, busy: u32, t: f64) {
        self.stats_at.insert(src, t);
        if engine.is_some_and(|k| k > 0) {
            self.many_engines.insert(src);
        }
        if engine.is_some() && self.many_engines.contains(&src) {
            return;
        }
        let Some(q) = self.per.get_mut(&src) else {
            return;
        };
        let unanswered = q.iter().filter(|o| o.since < t && !o.streaming).count();
        let streams = q.iter().filter(|o| o.since < t && o.streaming).count();
        let mut drop = streams.saturating_sub((busy as usize).saturating_sub(unanswered));
        q.retain(|o| {
            let gone = drop > 0 && o.since < t && o.streaming;
            drop -= usize::from(gone);
            !gone
        });
    }

    pub fn stopping(&mut self, src: LogOrigin, how: Stop) {
        self.stopped.entry(src).or_insert(how);
    }

    /// How the current process stopped, if its log said.
    pub fn stop(&self, src: LogOrigin) -> Option<Stop> {
        self.stopped.get(&src).copied()
    }

    /// When the current process last printed an engine stats line.
    pub fn last_stats(&self, src: LogOrigin) -> Option<f64> {
        self.stats_at.get(&src).copied()
    }

    /// The instance stopped at `t`: what it had in flight, oldest first,
    /// less the streams that outlived any client ([`STREAM_LIFE_S`]).
    pub fn take(&mut self, src: LogOrigin, t: f64) -> Vec<Open> {
        let q = self.per.remove(&src).unwrap_or_default();
        q.into_iter().filter(|o| !o.streaming || t - o.since <= STREAM_LIFE_S).collect()
    }

    /// A new process of the instance started: its past is closed.
    pub fn started(&mut self, src: LogOrigin) {
        self.per.remove(&src);
        self.stopped.remove(&src);
        self.stats_at.remove(&src);
        self.fresh.insert(src);
    }

    /// Drops entries whose trace left the ring or was decided for good
    /// (`gone`: an error or a cancel, which no death changes), so a long
    /// run keeps only what is open.
    pub fn prune(&mut self, gone: impl Fn(u64) -> bool) {
        for q in self.per.values_mut() {
            q.retain(|o| !gone(o.serial));
        }
    }

    /// Started and nothing arrived since.
    pub fn fresh(&self, src: LogOrigin) -> bool {
        self.fresh.contains(&src)
    }

    pub fn is_empty(&self, src: LogOrigin) -> bool {
        self.per.get(&src).is_none_or(VecDeque::is_empty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: LogOrigin = LogOrigin::Decode(0);

    #[test]
    fn a_plain_answer_ends_it_and_a_stream_stays_open_until_the_engine_is_idle() {
        let mut f = InFlight::default();
        f.begin(D, 1, 10.0, 8);
        f.begin(D, 2, 11.0, 8);
        f.begin(D, 3, 20.0, 8);
        f.answered(D, 1, false);
        f.answered(D, 2, true);
        // Stats at 15: nothing running, so request 2's stream had ended.
        f.engine_busy(D, Some(0), 0, 15.0);
        let left = f.take(D, 40.0);
        assert_eq!(left.iter().map(|o| o.serial).collect::<Vec<_>>(), vec![3]);
        assert!(f.take(D, 40.0).is_empty());
    }

    #[test]
    fn a_busy_engine_keeps_only_as_many_as_it_runs() {
        let mut f = InFlight::default();
        for (s, t) in [(1, 10.0), (2, 11.0), (3, 12.0), (4, 20.0)] {
            f.begin(D, s, t, 8);
            f.answered(D, s, true);
        }
        // One unanswered request, older than every stream: it runs for sure.
        f.begin(D, 9, 9.0, 8);
        f.engine_busy(D, Some(0), 2, 15.0);
        assert_eq!(f.take(D, 40.0).iter().map(|o| o.serial).collect::<Vec<_>>(), vec![3, 4, 9]);
        // Data parallel: engine 0's line does not see engine 1's requests.
        f.begin(D, 5, 30.0, 8);
        f.engine_busy(D, Some(1), 0, 31.0);
        f.engine_busy(D, Some(0), 0, 32.0);
        assert_eq!(f.take(D, 40.0).len(), 1);
    }

    #[test]
    fn a_stream_older_than_any_client_timeout_is_no_longer_in_flight() {
        let mut f = InFlight::default();
        f.begin(D, 1, 0.0, 8);
        f.answered(D, 1, true);
        f.begin(D, 2, 0.0, 8);
        // No stats line ever came (`--disable-log-stats`).
        let hour = f.clone().take(D, 3600.0);
        assert_eq!(hour.len(), 2);
        // Past the proxies' timeout the stream is gone; an unanswered
        // plain request would have been answered or failed in the log.
        let late = f.clone().take(D, STREAM_LIFE_S + 1.0);
        assert_eq!(late.iter().map(|o| o.serial).collect::<Vec<_>>(), vec![2]);
        f.begin(D, 3, STREAM_LIFE_S + 1.0, 8);
        assert_eq!(f.take(D, STREAM_LIFE_S + 2.0).iter().map(|o| o.serial).collect::<Vec<_>>(), vec![2, 3]);
        assert_eq!(f.last_stats(D), None);
        f.engine_busy(D, Some(0), 1, 5.0);
        assert_eq!(f.last_stats(D), Some(5.0));
        f.started(D);
        assert_eq!(f.last_stats(D), None);
    }

    #[test]
    fn a_new_process_forgets_the_orderly_shutdown() {
        let mut f = InFlight::default();
        f.stopping(D, Stop::Orderly);
        f.stopping(D, Stop::Died);
        assert_eq!(f.stop(D), Some(Stop::Orderly));
        f.started(D);
        assert_eq!(f.stop(D), None);
    }
}
