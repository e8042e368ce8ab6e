//! When the screen's log tailer reads next. A round every quarter second
//! cost a wake-up each (about 60 µs of a core on a small VM, plus the
//! round) whether or not a line came. Waiting on the files instead, the
//! tailer reads:
//! - when a tailed file changes, but never sooner than `every` after the
//!   last round (lines are read as late as polling read them);
//! - when the state's next deadline on the reads comes (`Wake::due`): the
//!   round that passes it is the one that may call a miss;
//! - and at least once a `heartbeat`, whatever happened: the state's clock
//!   of the reads moves on, and a change inotify never tells (a network
//!   mount written from another host) is still read.
//!
//! A round reads every file whatever woke it, so what a round reads does
//! not depend on the wake-up, only when it happens does. Where the files
//! cannot be watched the tailer polls every `every`, as before.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::logtail::{Nudge, Watch, Woke};
use super::poller::Wake;
use crate::clock::Clock;

pub struct LogPace {
    every: Duration,
    heartbeat: Duration,
    watch: Option<Watch>,
    wake: Wake,
    clock: Arc<dyn Clock>,
    /// When the last round began: when `pause` last returned.
    last: Instant,
    /// The same on the clock: a deadline at or before it is the one that
    /// round read past, until the state gives the next.
    last_clock: f64,
}

/// The longest a watched tailer goes without a round: the screen's refresh.
pub const HEARTBEAT: Duration = Duration::from_secs(1);

impl LogPace {
    /// Watches `paths` for the screen woken by `wake`; polls every `every`
    /// where they cannot be watched.
    pub fn new(
        paths: &[String],
        every: Duration,
        heartbeat: Duration,
        wake: Wake,
        clock: Arc<dyn Clock>,
    ) -> LogPace {
        let watch = Nudge::new().and_then(|n| Ok((Watch::new(paths, n.clone())?, n))).ok().map(|(w, n)| {
            wake.listen(n);
            w
        });
        let last_clock = clock.now();
        LogPace {
            every,
            heartbeat: heartbeat.max(every),
            watch,
            wake,
            clock,
            last: Instant::now(),
            last_clock,
        }
    }

    /// Whether the files are watched (else polled).
    pub fn watching(&self) -> bool {
        self.watch.as_ref().is_some_and(|w| !w.lost())
    }

    /// Blocks until the next round is due; called as a round ends.
    pub fn pause(&mut self) {
        self.wait();
        self.last = Instant::now();
        self.last_clock = self.clock.now();
    }

    fn wait(&mut self) {
        let soonest = self.last + self.every;
        loop {
            if !self.watching() {
                std::thread::sleep(soonest.saturating_duration_since(Instant::now()));
                return;
            }
            self.wake.arm(f64::INFINITY);
            let until = self.next_unchanged();
            let left = until.saturating_duration_since(Instant::now()).as_secs_f64();
            self.wake.arm(self.clock.now() + left * self.clock.speed());
            let Some(watch) = self.watch.as_mut() else {
                continue;
            };
            let woke = watch.wait(until);
            self.wake.arm(f64::NEG_INFINITY);
            match woke {
                Ok(Woke::Timeout) => {
                    if until >= self.last + self.heartbeat && self.wake.waiting() {
                        self.wake.beat();
                    }
                    return;
                }
                Ok(Woke::Changed) => {
                    // A round is coming: later changes are its to read,
                    // not wake-ups of their own.
                    std::thread::sleep(soonest.saturating_duration_since(Instant::now()));
                    watch.clear();
                    return;
                }
                // A sooner deadline: looked at again.
                Ok(Woke::Nudged) => {}
                Err(_) => self.watch = None,
            }
        }
    }

    /// The next round when no file changes: the state's deadline (not
    /// sooner than `every` after the last round), or the heartbeat.
    fn next_unchanged(&self) -> Instant {
        let beat = self.last + self.heartbeat;
        let due = self.wake.due();
        if !due.is_finite() || due <= self.last_clock {
            return beat;
        }
        let speed = self.clock.speed().max(1e-6);
        let wait = ((due - self.clock.now()) / speed).clamp(0.0, self.heartbeat.as_secs_f64());
        // A millisecond over: the round's clock (the system's) must read
        // past the deadline though the wait ran on the monotonic one.
        let at = Instant::now() + Duration::from_secs_f64(wait) + Duration::from_millis(1);
        at.max(self.last + self.every).min(beat)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SystemClock;

    fn setup(tag: &str) -> (std::path::PathBuf, String) {
        let d = std::env::temp_dir().join(format!("pdtop-pace-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("decode.log").to_string_lossy().into_owned();
        std::fs::write(&p, "").unwrap();
        (d, p)
    }

    const EVERY: Duration = Duration::from_millis(100);
    const BEAT: Duration = Duration::from_secs(2);
    /// A pause counts from the end of the last, a little before a test's `Instant`.
    const SLACK: Duration = Duration::from_millis(20);

    #[test]
    fn a_quiet_file_is_read_at_the_heartbeat_a_written_one_a_round_later() {
        let (d, p) = setup("quiet");
        let mut pace =
            LogPace::new(std::slice::from_ref(&p), EVERY, BEAT, Wake::default(), Arc::new(SystemClock));
        assert!(pace.watching());
        let began = Instant::now();
        pace.pause();
        let quiet = began.elapsed();
        assert!(quiet + SLACK >= BEAT, "{quiet:?}");
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            std::fs::write(&p, "INFO Added request x\n").unwrap();
        });
        let began = Instant::now();
        pace.pause();
        let written = began.elapsed();
        writer.join().unwrap();
        assert!(written >= Duration::from_millis(300) && written < BEAT, "{written:?}");
        // A write just after a round waits out `every`.
        let began = Instant::now();
        std::fs::write(d.join("decode.log"), "more\n").unwrap();
        pace.pause();
        assert!(began.elapsed() + SLACK >= EVERY, "{:?}", began.elapsed());
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A tailer's pace on a fresh log, with its wake and clock.
    fn paced(tag: &str) -> (std::path::PathBuf, Wake, Arc<dyn Clock>, LogPace) {
        let (d, p) = setup(tag);
        let (wake, clock): (Wake, Arc<dyn Clock>) = (Wake::default(), Arc::new(SystemClock));
        let pace = LogPace::new(&[p], EVERY, BEAT, wake.clone(), clock.clone());
        (d, wake, clock, pace)
    }

    /// The state, from another thread `after` from now, gives a deadline
    /// `ahead` seconds on, `times` times over (as each batch applied does).
    fn give_later(
        wake: &Wake,
        clock: &Arc<dyn Clock>,
        after: Duration,
        ahead: f64,
        times: usize,
    ) -> std::thread::JoinHandle<()> {
        let (wake, clock) = (wake.clone(), clock.clone());
        std::thread::spawn(move || {
            std::thread::sleep(after);
            let due = clock.now() + ahead;
            for _ in 0..times {
                wake.want_reads_past(Some(due), false);
            }
        })
    }

    #[test]
    fn a_deadline_given_while_waiting_is_kept() {
        let (d, wake, clock, mut pace) = paced("due");
        let setter = give_later(&wake, &clock, Duration::from_millis(200), 0.3, 1);
        let began = Instant::now();
        pace.pause();
        let took = began.elapsed();
        setter.join().unwrap();
        assert!(took >= Duration::from_millis(450) && took < Duration::from_millis(1500), "{took:?}");
        // A deadline past since the last round began: a round once `every`
        // is over.
        let round = Instant::now();
        std::thread::sleep(Duration::from_millis(30));
        wake.want_reads_past(Some(clock.now() - 0.01), false);
        pace.pause();
        let took = round.elapsed();
        assert!(took + SLACK >= EVERY && took < Duration::from_millis(1500), "{took:?}");
        // One the last round began after was read past: not waited for
        // again (the state gives the next), the heartbeat then; which is
        // news only while verdicts wait on time.
        assert!(!wake.take_beat());
        let began = Instant::now();
        pace.pause();
        assert!(began.elapsed() + SLACK >= BEAT, "{:?}", began.elapsed());
        assert!(!wake.take_beat(), "nothing waits");
        wake.want_reads_past(None, true);
        pace.pause();
        assert!(wake.take_beat(), "verdicts wait");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_deadline_later_than_the_one_read_past_still_ends_a_heartbeat_wait() {
        let (d, wake, clock, mut pace) = paced("later");
        wake.want_reads_past(Some(clock.now() + 0.15), false);
        pace.pause();
        // Read past it; the state, not yet told, gives a later one while
        // the tailer waits for its heartbeat.
        let setter = give_later(&wake, &clock, Duration::from_millis(150), 0.2, 2);
        let began = Instant::now();
        pace.pause();
        let took = began.elapsed();
        setter.join().unwrap();
        assert!(took >= Duration::from_millis(300) && took < Duration::from_millis(1200), "{took:?}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn files_that_cannot_be_watched_are_polled() {
        let paths = ["/nonexistent-pdtop-dir/decode.log".to_string()];
        let mut pace = LogPace::new(&paths, EVERY, BEAT, Wake::default(), Arc::new(SystemClock));
        assert!(!pace.watching());
        let began = Instant::now();
        pace.pause();
        let took = began.elapsed();
        assert!(took + SLACK >= EVERY && took < BEAT, "{took:?}");
    }
}
