//! When each log line happened: the time its source printed on it, never
//! the moment pdtop read it. The correlator is handed the lines of every
//! log merged in that order, with the clock moved on between them, so a
//! verdict is the same whether the lines were read as they came, a few
//! seconds at a time, or in one gulp when pdtop was opened mid-run.
//!
//! - A stamped line (vLLM's `MM-DD HH:MM:SS`, a `tracing` or LMCache
//!   header) is at its stamp, on pdtop's clock: the stamps are the host's
//!   clock, which may not be pdtop's (another zone, a replayed lab), so the
//!   difference is learnt from the lines themselves (`Skew`).
//! - A line without a stamp in a log that has them (uvicorn's access
//!   line in a vLLM log, a traceback) is at the last stamp before it.
//! - A log that prints no time (a uvicorn proxy) is at the time it was
//!   read, which bounds it closely while pdtop follows the file; what the
//!   first read finds already written is `undated`: it happened before
//!   pdtop started, when is not known.
//!
//! A line is given to the correlator once every log has been read past it
//! (the watermark: the last read of all the files), so that a line of one
//! log never overtakes an earlier line of another that is still unread.

use std::collections::VecDeque;

use crate::feed::LogOrigin;
use crate::traces::anchor;

/// One line, dated.
#[derive(Debug, Clone, PartialEq)]
pub struct Dated {
    pub source: LogOrigin,
    pub line: String,
    /// When it happened, on pdtop's clock: at the latest.
    pub at: f64,
    /// At the earliest: `at` for a stamped line; for a log that prints no
    /// time, the read before the one that found it (`-inf` for what the
    /// first read found: it happened before pdtop started, when is not
    /// known).
    pub from: f64,
    /// Printed longer before pdtop started than it looks back (`since`):
    /// read for how the instances are set up, not for requests.
    pub old: bool,
}

/// A clock difference this small is read delay, not a second clock: the
/// stamps are taken as pdtop's own time (vLLM and pdtop on one host or
/// on synchronised hosts, or a recording replayed on its own times).
const SAME_CLOCK_S: f64 = 2.0;
/// A line read sooner after its stamp than the learnt difference allows,
/// by more than this, teaches a new difference (smaller jitter is the
/// stamps' one-second resolution).
const RELEARN_S: f64 = 1.0;

/// pdtop's clock minus the stamps' clock. Every read of a stamped line
/// bounds it from above (a line is read after it was printed, and printed
/// within the second its stamp names), so it is the least such bound seen:
/// close to exact for a log followed as it grows.
#[derive(Debug, Clone, Copy, Default)]
struct Skew {
    /// The least bound seen.
    least: Option<f64>,
    /// The difference in use: moved only by more than `RELEARN_S`, so
    /// that lines of one second read a little apart keep one time.
    used: Option<f64>,
}

impl Skew {
    /// `backlog`: the line was found by the first read, perhaps long after
    /// it was printed: a bound above zero is as much idle time as another
    /// clock, and says nothing (the clocks are taken as one until a line
    /// read as it is printed says otherwise); one below zero is a stamp in
    /// pdtop's future, which only another clock explains.
    fn learn(&mut self, bound: f64, backlog: bool) {
        if !bound.is_finite() || (backlog && bound > 0.0) {
            return;
        }
        let least = self.least.map_or(bound, |l| l.min(bound));
        self.least = Some(least);
        if self.used.is_none_or(|u| least < u - RELEARN_S) {
            self.used = Some(least);
        }
    }

    fn get(&self) -> f64 {
        match (self.least, self.used) {
            (Some(l), Some(u)) if l.abs() >= SAME_CLOCK_S => u,
            _ => 0.0,
        }
    }
}

/// When a line happened, as its log says.
#[derive(Debug, Clone, Copy, PartialEq)]
enum When {
    /// A stamp (its own or the last one before it), on the stamps' clock.
    Stamp(f64),
    /// Read then, on pdtop's clock (a log that prints no time).
    Read(f64),
}

/// A line read, not yet given on.
#[derive(Debug, Clone)]
struct Read {
    line: String,
    when: When,
    /// The earliest it can have been printed (pdtop's clock), for a line
    /// no stamp dates.
    from: f64,
}

/// What the timeline keeps per log.
#[derive(Debug, Clone)]
struct Log {
    source: LogOrigin,
    /// Its lines read, not yet given on: file order.
    waiting: VecDeque<Read>,
    /// Its last stamp (the stamps' clock).
    last_stamp: Option<f64>,
    /// Time of the last line given on, so its lines keep file order.
    last_at: f64,
    /// It has been read once.
    read: bool,
    /// Its last read left more to read (`TailState::CatchingUp`): it has
    /// not been read up to that read's time, only to its last line.
    behind: bool,
    /// Its first read is still going on (the file held more than one
    /// read takes): what the reads find is what it printed before.
    first_unfinished: bool,
    /// When it was last read.
    last_read: f64,
}

impl Log {
    /// When its next line happened, on pdtop's clock (`skew`: pdtop's
    /// clock minus the stamps').
    fn next_at(&self, skew: f64) -> Option<f64> {
        let r = self.waiting.front()?;
        let at = match r.when {
            When::Stamp(s) => s + skew,
            When::Read(t) => t,
        };
        Some(at.max(self.last_at))
    }
}

/// Ties between logs at one time keep the order a request flows in.
fn rank(source: LogOrigin) -> u8 {
    match source {
        LogOrigin::Prefill(_) => 0,
        LogOrigin::Proxy => 1,
        LogOrigin::Decode(_) => 2,
    }
}

#[derive(Debug, Clone)]
pub struct Timeline {
    logs: Vec<Log>,
    skew: Skew,
    /// Read time of the first read: what it found in a log that prints no
    /// time is undated.
    first_read: Option<f64>,
    /// The latest read time, and the one before it: a log first read
    /// later holds what was printed since that earlier read.
    reads: (f64, f64),
    /// Fixed year for yearless stamps (tests); else the read time's.
    pub year: Option<i32>,
    /// How far back before the first read the logs are read for requests.
    pub since: Option<f64>,
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline {
            logs: Vec::new(),
            skew: Skew::default(),
            first_read: None,
            reads: (f64::NEG_INFINITY, f64::NEG_INFINITY),
            year: None,
            since: None,
        }
    }
}

impl Timeline {
    /// Lines of `source` read at `read_at`: dated and kept until
    /// [`Timeline::release`] gives them on. `behind`: the file holds more
    /// than this read took (`TailState::CatchingUp`).
    pub fn read(&mut self, source: LogOrigin, lines: &[String], read_at: f64, behind: bool) {
        let first = *self.first_read.get_or_insert(read_at);
        if read_at > self.reads.1 {
            self.reads = (self.reads.1, read_at);
        }
        let before = self.reads.0;
        let k = match self.logs.iter().position(|l| l.source == source) {
            Some(k) => k,
            None => {
                self.logs.push(Log {
                    source,
                    waiting: VecDeque::new(),
                    last_stamp: None,
                    last_at: f64::NEG_INFINITY,
                    read: false,
                    behind: false,
                    first_unfinished: false,
                    last_read: f64::NEG_INFINITY,
                });
                self.logs.len() - 1
            }
        };
        let backlog = self.logs[k].first_unfinished || (!self.logs[k].read && read_at <= first);
        self.logs[k].read = true;
        self.logs[k].behind = behind;
        self.logs[k].first_unfinished = backlog && behind;
        let year = self.year;
        let log = &mut self.logs[k];
        // What the first read found was printed at any time before it.
        let from = if backlog {
            f64::NEG_INFINITY
        } else if log.last_read.is_finite() {
            log.last_read
        } else {
            before
        };
        log.last_read = read_at;
        let stamps: Vec<Option<f64>> = lines
            .iter()
            .map(|l| {
                let (ts, y) = crate::logs::vllm::stamp_of(l)?;
                anchor(ts, read_at, y.map(i32::from).or(year))
            })
            .collect();
        // Lines before a log's first stamp (a banner, a traceback) were
        // printed just before it.
        if log.last_stamp.is_none() {
            log.last_stamp = stamps.iter().flatten().next().copied();
        }
        for (line, stamp) in lines.iter().zip(stamps) {
            // A line is read after it was printed, within the second its
            // stamp names: the difference of the clocks is at most this.
            if let Some(s) = stamp {
                self.skew.learn(read_at - s, backlog);
                log.last_stamp = Some(s);
            }
            let when = match log.last_stamp {
                Some(s) => When::Stamp(s),
                None => When::Read(read_at),
            };
            log.waiting.push_back(Read { line: line.clone(), when, from });
        }
    }

    /// A truncated or replaced file: its next lines are a new file's,
    /// perhaps a process's on another clock (a lab replayed in a loop).
    pub fn reset(&mut self, source: LogOrigin) {
        self.skew = Skew::default();
        if let Some(l) = self.logs.iter_mut().find(|l| l.source == source) {
            l.last_stamp = None;
            l.last_at = f64::NEG_INFINITY;
        }
    }

    /// The lines every log has been read past (`upto`: the last time all
    /// of them were read), oldest first; ties keep the order a request
    /// flows in (prefill, proxy, decode) and each file's own order.
    pub fn release(&mut self, upto: f64) -> Vec<Dated> {
        // Dated when given on, so that every line read by then is dated
        // with all that the reads taught of the clocks.
        let skew = self.skew.get();
        let cutoff = match (self.first_read, self.since) {
            (Some(first), Some(since)) => first - since,
            _ => f64::NEG_INFINITY,
        };
        let mut out = Vec::new();
        loop {
            let next = self
                .logs
                .iter()
                .enumerate()
                .filter_map(|(k, l)| l.next_at(skew).map(|at| (k, at, rank(l.source))))
                .filter(|(_, at, _)| *at <= upto)
                .min_by(|a, b| a.1.total_cmp(&b.1).then(a.2.cmp(&b.2)).then(a.0.cmp(&b.0)));
            let Some((k, at, _)) = next else { break };
            let log = &mut self.logs[k];
            if let Some(r) = log.waiting.pop_front() {
                log.last_at = at;
                let from = match r.when {
                    When::Stamp(_) => at,
                    When::Read(_) => r.from,
                };
                out.push(Dated { source: log.source, line: r.line, at, from, old: at < cutoff });
            }
        }
        out
    }

    /// Everything read, whatever its time (the end of a check).
    pub fn release_all(&mut self) -> Vec<Dated> {
        self.release(f64::INFINITY)
    }

    /// How far `source` has been read: the time of its last stamped line
    /// (pdtop's clock), whether given on yet or not.
    pub fn read_to(&self, source: LogOrigin) -> Option<f64> {
        let log = self.logs.iter().find(|l| l.source == source)?;
        log.last_stamp.map(|s| s + self.skew.get())
    }

    /// How far every log that is behind (its last read left more to
    /// read) has been read: just before its last stamped line, whose
    /// second may go on in the next read; nothing of a log behind with no
    /// stamp yet. Infinite when none is behind.
    pub fn held_to(&self) -> f64 {
        let skew = self.skew.get();
        self.logs
            .iter()
            .filter(|l| l.behind)
            .map(|l| l.last_stamp.map_or(f64::NEG_INFINITY, |s| (s + skew).next_down()))
            .fold(f64::INFINITY, f64::min)
    }

    /// Lines the first read found in a log that prints no time, not yet
    /// given on: until they are, that log is not read past any time.
    pub fn undated_waiting(&self) -> bool {
        self.logs.iter().any(|l| l.waiting.iter().any(|r| r.from == f64::NEG_INFINITY))
    }

    /// When the soonest line read and not yet given on happened: a read
    /// past it gives it on.
    pub fn next_at(&self) -> Option<f64> {
        let skew = self.skew.get();
        self.logs.iter().filter_map(|l| l.next_at(skew)).min_by(f64::total_cmp)
    }

    /// Lines read and not yet given on.
    pub fn waiting(&self) -> usize {
        self.logs.iter().map(|l| l.waiting.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: f64 = 1_796_019_931.0; // 11-30 06:25:31 UTC

    fn line(stamp: &str, msg: &str) -> String {
        format!("INFO 11-30 {stamp} [x.py:1] {msg}")
    }

    fn lines(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_gulp_and_a_paced_read_give_the_same_order() {
        let pre = lines(&[&line("06:25:31", "a"), &line("06:25:33", "c")]);
        let dec = lines(&[
            &line("06:25:32", "b"),
            "INFO:     127.0.0.1:1 - \"POST /v1/completions HTTP/1.1\" 200 OK",
        ]);
        let order = |v: &[Dated]| v.iter().map(|d| d.line.clone()).collect::<Vec<_>>();
        // Read a minute late: the clocks' difference is only bounded, the
        // times shift, their order does not.
        let mut gulp = Timeline::default();
        gulp.read(LogOrigin::Prefill(0), &pre, T + 60.0, false);
        gulp.read(LogOrigin::Decode(0), &dec, T + 60.0, false);
        let g = gulp.release(T + 60.0);
        // Read as printed: decode's lines come with the read after a's, and
        // the prefill's c, printed later, with the read after that.
        let mut paced = Timeline::default();
        paced.read(LogOrigin::Prefill(0), &pre[..1], T + 0.3, false);
        let mut p = paced.release(T + 0.3);
        paced.read(LogOrigin::Decode(0), &dec, T + 1.2, false);
        p.extend(paced.release(T + 1.2));
        paced.read(LogOrigin::Prefill(0), &pre[1..], T + 2.4, false);
        p.extend(paced.release(T + 2.4));
        assert_eq!(order(&g), order(&p));
        assert_eq!(p.iter().map(|d| d.at - T).collect::<Vec<_>>(), vec![0.0, 1.0, 1.0, 2.0]);
        // The access line has no stamp: the last one before it dates it.
        assert!(g.iter().chain(&p).all(|d| d.from == d.at));
    }

    #[test]
    fn a_line_waits_until_every_log_is_read_past_it() {
        let mut tl = Timeline::default();
        assert_eq!(tl.next_at(), None);
        tl.read(LogOrigin::Decode(0), &lines(&[&line("06:25:32", "b")]), T + 1.1, false);
        // What a read must pass to give it on (the screen's tailer reads then).
        assert_eq!(tl.next_at(), Some(T + 1.0));
        assert_eq!(tl.release(T + 0.9).len(), 0);
        assert_eq!(tl.release(T + 1.1).len(), 1);
        assert_eq!(tl.next_at(), None);
    }

    #[test]
    fn lines_before_a_logs_first_stamp_take_it() {
        let mut tl = Timeline::default();
        let v = lines(&["banner", &line("06:25:31", "a")]);
        tl.read(LogOrigin::Prefill(0), &v, T + 40.0, false);
        tl.read(LogOrigin::Decode(0), &lines(&[&line("06:26:10", "b")]), T + 40.0, false);
        let at: Vec<f64> = tl.release(T + 40.0).iter().map(|d| d.at - T).collect();
        assert_eq!(at, vec![0.0, 0.0, 39.0]);
    }

    #[test]
    fn a_log_without_times_is_timed_by_its_reads_and_its_backlog_is_undated() {
        let mut tl = Timeline::default();
        tl.read(LogOrigin::Proxy, &lines(&["INFO:     old"]), T, false);
        tl.read(LogOrigin::Proxy, &lines(&["INFO:     new"]), T + 5.0, false);
        let out = tl.release(T + 5.0);
        let got: Vec<_> = out.iter().map(|d| (d.from, d.at)).collect();
        assert_eq!(got, vec![(f64::NEG_INFINITY, T), (T, T + 5.0)]);
    }

    #[test]
    fn a_log_behind_holds_the_others_and_its_first_read_goes_on_until_done() {
        let mut tl = Timeline::default();
        // The prefill's first read took part of its file, up to 06:25:40.
        tl.read(LogOrigin::Prefill(0), &lines(&[&line("06:25:40", "p1")]), T + 60.0, true);
        tl.read(
            LogOrigin::Decode(0),
            &lines(&[&line("06:25:40", "d1"), &line("06:25:50", "d2")]),
            T + 60.0,
            false,
        );
        // A proxy's first read that took part of its file, then the rest.
        tl.read(LogOrigin::Proxy, &lines(&["INFO:     a"]), T + 60.0, true);
        assert_eq!(tl.held_to(), f64::NEG_INFINITY, "a log behind with no stamp holds every line");
        tl.read(LogOrigin::Proxy, &lines(&["INFO:     b"]), T + 60.1, false);
        // Only what is before the prefill's last stamp is given on: its
        // 06:25:40 may go on in the next read.
        assert_eq!(tl.held_to(), (T + 9.0).next_down());
        assert!(tl.release(tl.held_to()).is_empty());
        tl.read(
            LogOrigin::Prefill(0),
            &lines(&[&line("06:25:40", "p2"), &line("06:25:45", "p3")]),
            T + 60.2,
            false,
        );
        assert_eq!(tl.held_to(), f64::INFINITY);
        let out = tl.release(T + 60.2);
        let got: Vec<&str> = out.iter().map(|d| d.line.rsplit(' ').next().unwrap()).collect();
        assert_eq!(got, vec!["p1", "p2", "d1", "p3", "d2", "a", "b"]);
        // Both of the proxy's reads found what it printed before pdtop started.
        assert!(out.iter().filter(|d| d.source == LogOrigin::Proxy).all(|d| d.from == f64::NEG_INFINITY));
    }

    #[test]
    fn stamps_of_another_clock_are_moved_onto_pdtops() {
        let mut tl = Timeline::default();
        tl.read(LogOrigin::Decode(0), &[], T, false);
        // Printed an hour "earlier" (another zone), read 0.4 s after.
        tl.read(LogOrigin::Decode(0), &lines(&[&line("06:25:31", "a")]), T + 3600.4, false);
        tl.read(LogOrigin::Decode(0), &lines(&[&line("06:25:35", "b")]), T + 3604.2, false);
        let out = tl.release(T + 3605.0);
        let got: Vec<f64> = out.iter().map(|d| ((d.at - T) * 10.0).round() / 10.0).collect();
        assert_eq!(got, vec![3600.4, 3604.4]);
    }
}
