//! Collectors that read local files on a timer (the logs four times a
//! second, or for the screen when they change: `log_pace`; the connector
//! directory and interface counters every second), each on a thread of
//! its own. A slow disk stalls no runtime (nor did it
//! before, on tokio's blocking pool), and a round costs one wake-up, not a
//! hop to a pool thread and back to a runtime every time.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::mpsc::Sender;

use super::logtail::Nudge;
use crate::clock::Clock;
use crate::feed::Msg;

/// What one round read: the messages to send, and whether to read again
/// at once (a file had more than one round may take).
pub struct Round {
    pub msgs: Vec<Msg>,
    pub more: bool,
    /// What it sent may settle a verdict now: the screen is woken for it
    /// rather than at its next refresh.
    pub news: bool,
}

/// Wakes the screen's loop for a source's news. The screen applies queued
/// messages, in the order sent, at its refresh or when woken: a scrape or
/// a counter read a second is no reason to wake it, a log line may be.
/// It also carries the other way the moment the screen's state next waits
/// for the logs to be read past (`due`): the log tailer reads then, and
/// that round is news.
#[derive(Clone)]
pub struct Wake(Arc<Shared>);

struct Shared {
    notify: tokio::sync::Notify,
    /// `f64` bits, clock time; infinity: nothing waits.
    due: AtomicU64,
    /// `f64` bits, clock time: when the waiting tailer reads next, as far
    /// as it knows (minus infinity: it is reading, and looks at `due` next).
    armed: AtomicU64,
    /// Verdicts wait that the passing of time alone may give, at moments
    /// `due` does not name (a request seen on one side only): the
    /// tailer's heartbeat round is news while they do.
    waiting: AtomicBool,
    /// The round about to be read is the heartbeat's, and news.
    beat: AtomicBool,
    /// The log tailer's, once it waits on one.
    nudge: OnceLock<Nudge>,
}

impl Default for Wake {
    fn default() -> Wake {
        Wake(Arc::new(Shared {
            notify: tokio::sync::Notify::new(),
            due: AtomicU64::new(f64::INFINITY.to_bits()),
            armed: AtomicU64::new(f64::NEG_INFINITY.to_bits()),
            waiting: AtomicBool::new(false),
            beat: AtomicBool::new(false),
            nudge: OnceLock::new(),
        }))
    }
}

impl Wake {
    /// After the news is sent (a wake before it would find nothing).
    pub fn now(&self) {
        self.0.notify.notify_one();
    }

    /// Until a source has news (or a wake came since the last wait).
    pub async fn notified(&self) {
        self.0.notify.notified().await
    }

    /// As `notified`; never, for a feed without a wake.
    pub async fn woken(wake: Option<&Wake>) {
        match wake {
            Some(w) => w.notified().await,
            None => std::future::pending().await,
        }
    }

    /// The state's next deadline on the logs' reads (clock time; `None`:
    /// none), and whether other verdicts wait on time (`waiting`). A new
    /// deadline sooner than the waiting tailer's next read stirs it.
    pub fn want_reads_past(&self, due: Option<f64>, waiting: bool) {
        let due = due.filter(|d| !d.is_nan()).unwrap_or(f64::INFINITY);
        self.0.waiting.store(waiting, Ordering::Relaxed);
        // The same deadline again (each batch applied tells it) is no news
        // to the tailer; a later one may be, when it waits for its heartbeat.
        let was = f64::from_bits(self.0.due.swap(due.to_bits(), Ordering::SeqCst));
        if due != was
            && due < f64::from_bits(self.0.armed.load(Ordering::SeqCst))
            && let Some(n) = self.0.nudge.get()
        {
            n.nudge();
        }
    }

    /// Whether verdicts wait on time alone (`want_reads_past`).
    pub fn waiting(&self) -> bool {
        self.0.waiting.load(Ordering::Relaxed)
    }

    /// The tailer's next round is its heartbeat's, while verdicts wait.
    pub fn beat(&self) {
        self.0.beat.store(true, Ordering::Relaxed);
    }

    /// Whether this round is the heartbeat's (asked once).
    pub fn take_beat(&self) -> bool {
        self.0.beat.swap(false, Ordering::Relaxed)
    }

    /// The deadline the state last gave (infinity: none).
    pub fn due(&self) -> f64 {
        f64::from_bits(self.0.due.load(Ordering::SeqCst))
    }

    /// The tailer's next read (clock time), set before it reads `due` and
    /// again once it knows when: a deadline given in between still stirs it.
    pub fn arm(&self, at: f64) {
        self.0.armed.store(at.to_bits(), Ordering::SeqCst);
    }

    /// Whom `want_reads_past` stirs: the first tailer to ask.
    pub fn listen(&self, nudge: Nudge) {
        let _ = self.0.nudge.set(nudge);
    }
}

/// A pause of `interval` between rounds.
pub fn every(interval: Duration) -> impl FnMut() + Send + 'static {
    move || std::thread::sleep(interval)
}

/// Runs `round` on a thread named `thread`, then again after `pause` (at
/// once when it has more), until the receiver is gone; `wake` is told of
/// a round's news. A round that panics ends the poller with a
/// [`Msg::SourceFailed`] naming `source`, as a supervised task does.
pub fn spawn_poller<F, P>(
    thread: &str,
    source: String,
    mut pause: P,
    clock: Arc<dyn Clock>,
    (tx, wake): (Sender<Msg>, Option<Wake>),
    mut round: F,
) -> std::io::Result<std::thread::JoinHandle<()>>
where
    F: FnMut() -> Round + Send + 'static,
    P: FnMut() + Send + 'static,
{
    std::thread::Builder::new().name(thread.into()).spawn(move || {
        let polled = catch_unwind(AssertUnwindSafe(|| {
            loop {
                let Round { msgs, more, news } = round();
                for msg in msgs {
                    if tx.blocking_send(msg).is_err() {
                        return;
                    }
                }
                if let Some(w) = wake.as_ref().filter(|_| news) {
                    w.now();
                }
                if !more {
                    pause();
                }
            }
        }));
        if let Err(payload) = polled {
            let error = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panicked".into());
            let _ = tx.blocking_send(Msg::SourceFailed {
                source,
                at: clock.now(),
                error: format!("stopped: {error}"),
            });
            if let Some(w) = &wake {
                w.now();
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ScaledClock;

    #[tokio::test]
    async fn a_panicking_round_is_a_failed_source_and_the_thread_ends() {
        let clock = Arc::new(ScaledClock::new(100.0, 1.0));
        let (tx, mut rx) = tokio::sync::mpsc::channel(4);
        let mut n = 0;
        let thread = spawn_poller(
            "pdtop-test-poller",
            "test files".into(),
            every(Duration::ZERO),
            clock,
            (tx, None),
            move || {
                n += 1;
                assert!(n < 3, "round {n}");
                Round { msgs: vec![Msg::LogsPolled { at: n as f64 }], more: false, news: false }
            },
        )
        .unwrap();
        assert_eq!(rx.recv().await, Some(Msg::LogsPolled { at: 1.0 }));
        assert_eq!(rx.recv().await, Some(Msg::LogsPolled { at: 2.0 }));
        match rx.recv().await {
            Some(Msg::SourceFailed { source, error, at }) => {
                assert_eq!(source, "test files");
                assert!(error.starts_with("stopped: round 3"), "{error}");
                assert!(at >= 100.0);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(rx.recv().await, None, "the thread ended and dropped its sender");
        thread.join().unwrap();
    }

    #[tokio::test]
    async fn only_a_round_with_news_wakes_and_after_its_messages() {
        let clock = Arc::new(ScaledClock::new(100.0, 1.0));
        let (tx, mut rx) = tokio::sync::mpsc::channel(4);
        let wake = Wake::default();
        let mut n = 0;
        let every = Duration::from_millis(300);
        let _thread = spawn_poller(
            "pdtop-test-wake",
            "test".into(),
            super::every(every),
            clock,
            (tx, Some(wake.clone())),
            move || {
                n += 1;
                Round { msgs: vec![Msg::LogsPolled { at: n as f64 }], more: false, news: n == 2 }
            },
        )
        .unwrap();
        let quick = Duration::from_millis(100);
        assert_eq!(rx.recv().await, Some(Msg::LogsPolled { at: 1.0 }));
        assert!(tokio::time::timeout(quick, wake.notified()).await.is_err(), "round 1 had no news");
        tokio::time::timeout(Duration::from_secs(5), wake.notified()).await.expect("round 2 wakes");
        // Woken, its message is there to take.
        assert_eq!(rx.try_recv().ok(), Some(Msg::LogsPolled { at: 2.0 }));
    }
}
