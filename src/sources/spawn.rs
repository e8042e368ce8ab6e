//! Starting the collectors: scrapers on the current runtime, each under a
//! supervisor ([`supervise`]); log tailers, the connector directory and
//! interface counters on threads of their own (`poller`), which report
//! their own panics.

use std::sync::Arc;

use super::log_pace::{HEARTBEAT, LogPace};
use super::poller::{Round, Wake, every, spawn_poller};
use super::{kvdir, logtail, netdev, scrape};
use crate::clock::Clock;
use crate::feed::{Endpoint, LogOrigin, Msg};

/// Starts one scraper per endpoint on the current runtime, each under a
/// supervisor: a collector that panics becomes a [`Msg::SourceFailed`] (an
/// error state on screen), never a torn terminal or a silent stop.
pub fn spawn_scrapers(
    endpoints: &[Endpoint],
    opts: &scrape::ScrapeOptions,
    clock: std::sync::Arc<dyn crate::clock::Clock>,
    tx: tokio::sync::mpsc::Sender<Msg>,
) -> Result<(), String> {
    for (i, ep) in endpoints.iter().enumerate() {
        // A per-endpoint token (`PDTOP_BEARER_TOKEN_<HOST>_<PORT>`) wins over the global one.
        let token = scrape::token_for(ep, opts.bearer_token.as_deref(), |k| std::env::var(k).ok());
        let opts = scrape::ScrapeOptions { bearer_token: token, ..opts.clone() };
        // A URL the client cannot take is said before anything starts.
        scrape::client(ep, &opts)?;
        let (ep, clock, tx) = (ep.clone(), clock.clone(), tx.clone());
        tokio::spawn(async move {
            let name = format!("scraper {}", ep.display);
            loop {
                let task = tokio::spawn(scrape::run(i, ep.clone(), opts.clone(), clock.clone(), tx.clone()));
                let Err(e) = task.await else {
                    return;
                };
                if !e.is_panic() {
                    return;
                }
                // The panic is an error state of this instance (its header
                // row says DOWN and why) and an event; then the scraper
                // starts again, so one bad moment does not end the watch.
                let error = panic_message(e);
                let at = clock.now();
                let failed =
                    Msg::SourceFailed { source: name.clone(), at, error: format!("stopped: {error}") };
                let down = Msg::ScrapeFailed { instance: i, at, error: format!("scraper panicked: {error}") };
                if tx.send(failed).await.is_err() || tx.send(down).await.is_err() {
                    return;
                }
                // A scraper that panics every time is retried at the
                // failure backoff, not in a tight loop.
                tokio::time::sleep(scrape::backoff(opts.interval, 3)).await;
            }
        });
    }
    Ok(())
}

/// The text of a task's panic.
fn panic_message(e: tokio::task::JoinError) -> String {
    let payload = e.into_panic();
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panicked".into())
}

/// Tails the logs. Files are polled together, one round at a time, in
/// causal order: prefill logs, then the proxy's, then decode logs. A decode
/// request is only sent after its prefill finished, so when a round reads
/// the decode's line, the prefill's line is already in the file and read
/// first: the correlator never sees a decode request before its prefill
/// just because one file happened to be polled later. Stdin (`-`) is read
/// on its own. `wake` is told of lines read, and of the round that reads
/// past the state's deadline (`Wake::due`): a miss is called on a read
/// that finds no hit. With a `wake` (the screen) rounds follow the files'
/// changes and the deadlines (`log_pace`); without, one every `interval`.
pub fn spawn_log_tailers(
    logs: &[(LogOrigin, String)],
    interval: std::time::Duration,
    also: Option<LinesRead>,
    clock: std::sync::Arc<dyn crate::clock::Clock>,
    (tx, wake): (tokio::sync::mpsc::Sender<Msg>, Option<Wake>),
) {
    let rank = |s: &LogOrigin| match s {
        LogOrigin::Prefill(_) => 0,
        LogOrigin::Proxy => 1,
        LogOrigin::Decode(_) => 2,
    };
    let mut files: Vec<(LogOrigin, String)> = logs.iter().filter(|(_, p)| p != "-").cloned().collect();
    files.sort_by_key(|(s, _)| rank(s));
    if !files.is_empty() {
        let paths: Vec<String> = files.iter().map(|(_, p)| p.clone()).collect();
        let round = tail_files(files, also, clock.clone(), wake.clone());
        let pause: Box<dyn FnMut() + Send> = match &wake {
            Some(w) => {
                let mut pace = LogPace::new(&paths, interval, HEARTBEAT, w.clone(), clock.clone());
                Box::new(move || pace.pause())
            }
            None => Box::new(every(interval)),
        };
        let (source, sink) = ("log tailer".to_string(), (tx.clone(), wake.clone()));
        let started = spawn_poller("pdtop-logs", source, pause, clock.clone(), sink, round);
        if let Err(e) = started {
            let _ = tx.try_send(Msg::SourceFailed {
                source: "log tailer".into(),
                at: clock.now(),
                error: e.to_string(),
            });
        }
    }
    for (source, _) in logs.iter().filter(|(_, p)| p == "-") {
        let source = *source;
        let (btx, mut brx) = tokio::sync::mpsc::channel(64);
        let task = tokio::spawn(logtail::run_reader(std::io::stdin(), logtail::TailOptions::default(), btx));
        supervise(format!("log {source} (stdin)"), task, clock.clone(), tx.clone());
        let (clock, tx, wake) = (clock.clone(), tx.clone(), wake.clone());
        tokio::spawn(async move {
            while let Some(b) = brx.recv().await {
                let msg = Msg::LogLines {
                    source,
                    at: clock.now(),
                    lines: b.lines,
                    state: b.state,
                    counts: b.counts,
                };
                if tx.send(msg).await.is_err() {
                    return;
                }
                if let Some(w) = &wake {
                    w.now();
                }
            }
        });
    }
}

/// Who else takes the lines a file's tailer read (the dashboard's doctor):
/// `(path, lines, the file was truncated or rotated, the tailer's state)`.
/// The lines are read once.
pub type LinesRead = Box<dyn FnMut(&str, &[String], bool, &crate::feed::TailState) + Send>;

/// One polling round after another over every file, in the given order.
fn tail_files(
    files: Vec<(LogOrigin, String)>,
    mut also: Option<LinesRead>,
    clock: Arc<dyn Clock>,
    wake: Option<Wake>,
) -> impl FnMut() -> Round {
    use crate::feed::TailState;
    use logtail::{ChangeFilter, TailBatch, Tailer};
    let paths: Vec<String> = files.iter().map(|(_, p)| p.clone()).collect();
    // Every path is looked up on every round, though it costs: a round's
    // `LogsPolled` says everything written before it was read, and a
    // rotation noticed later would make that untrue for the new file.
    let mut tailers: Vec<(LogOrigin, Tailer, ChangeFilter)> = files
        .into_iter()
        .map(|(s, p)| (s, Tailer::new(p, logtail::TailOptions::default()), ChangeFilter::default()))
        .collect();
    move || {
        // Taken before reading: everything written before it is read below.
        let read_from = clock.now();
        let batches: Vec<TailBatch> = tailers
            .iter_mut()
            .map(|(_, t, _)| t.poll().unwrap_or_else(|e| TailBatch::new(TailState::Error(e.to_string()))))
            .collect();
        let at = clock.now();
        // News: lines, a read past the state's deadline, or the heartbeat's
        // while verdicts wait on time alone.
        let due = wake.as_ref().map_or(f64::INFINITY, Wake::due);
        let beat = wake.as_ref().is_some_and(Wake::take_beat);
        let mut round = Round { msgs: Vec::new(), more: false, news: read_from >= due || beat };
        for (((source, _, news), b), path) in tailers.iter_mut().zip(batches).zip(&paths) {
            round.more |= b.more;
            round.news |= !b.lines.is_empty();
            if let Some(f) = also.as_mut() {
                f(path, &b.lines, b.counts.truncations + b.counts.rotations > 0, &b.state);
            }
            if news.admit(&b) {
                let msg =
                    Msg::LogLines { source: *source, at, lines: b.lines, state: b.state, counts: b.counts };
                round.msgs.push(msg);
            }
        }
        round.msgs.push(Msg::LogsPolled { at: read_from });
        round
    }
}

/// Where interface counters are read: `/proc/net/dev`, another network
/// namespace's (`/proc/<pid>/net/dev`), or a file in that format (the demo
/// lab writes the recorded text to one).
#[derive(Debug, Clone)]
pub enum NetDevPath {
    Proc { netns_pid: Option<u32> },
    File(std::path::PathBuf),
}

/// Polls the connector directory and the interface counters every interval.
pub fn spawn_link_sources(
    kv_dir: Option<std::path::PathBuf>,
    netdev: Option<NetDevPath>,
    sys: Option<super::sysnet::SysRoots>,
    interval: std::time::Duration,
    clock: std::sync::Arc<dyn crate::clock::Clock>,
    tx: tokio::sync::mpsc::Sender<Msg>,
) {
    if kv_dir.is_none() && netdev.is_none() {
        return;
    }
    let c = clock.clone();
    let mut sys = sys.map(super::sysnet::SysNet::new);
    enum Counters {
        Proc(netdev::NetDevReader),
        File(std::path::PathBuf),
    }
    let mut counters = netdev.map(|p| match p {
        NetDevPath::Proc { netns_pid } => Counters::Proc(netdev::NetDevReader::new(netns_pid)),
        NetDevPath::File(f) => Counters::File(f),
    });
    let round = move || {
        let scan = kv_dir.as_deref().map(kvdir::scan);
        let read = counters.as_mut().map(|c| match c {
            Counters::Proc(reader) => reader.read().map_err(|e| e.to_string()),
            Counters::File(f) => std::fs::read_to_string(&*f)
                .map_err(|e| format!("{}: {e}", f.display()))
                .and_then(|text| netdev::parse_net_dev(&text).map_err(|e| e.to_string())),
        });
        let at = c.now();
        let read = read.map(|r| {
            r.map(|mut snap| {
                if let Some(sys) = &mut sys {
                    sys.annotate(&mut snap, at);
                }
                snap
            })
        });
        let msgs = scan
            .map(|scan| Msg::KvDir { at, scan })
            .into_iter()
            .chain(read.map(|read| Msg::NetDev { at, read }));
        Round { msgs: msgs.collect(), more: false, news: false }
    };
    let source = "kv-dir / interface".to_string();
    if let Err(e) =
        spawn_poller("pdtop-link", source.clone(), every(interval), clock.clone(), (tx.clone(), None), round)
    {
        let _ = tx.try_send(Msg::SourceFailed { source, at: clock.now(), error: e.to_string() });
    }
}

/// Reports a task that ended by panicking.
pub fn supervise(
    name: String,
    task: tokio::task::JoinHandle<()>,
    clock: std::sync::Arc<dyn crate::clock::Clock>,
    tx: tokio::sync::mpsc::Sender<Msg>,
) {
    tokio::spawn(async move {
        if let Err(e) = task.await
            && e.is_panic()
        {
            let error = panic_message(e);
            let _ = tx
                .send(Msg::SourceFailed { source: name, at: clock.now(), error: format!("stopped: {error}") })
                .await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ScaledClock;
    use std::sync::Arc;
    use std::time::Duration;

    async fn next(rx: &mut tokio::sync::mpsc::Receiver<Msg>) -> Msg {
        tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.expect("in time").expect("open")
    }

    #[tokio::test]
    async fn tailed_files_are_read_in_rounds_until_the_receiver_goes() {
        let dir = std::env::temp_dir().join(format!("pdtop-tail-rounds-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (p, d) = (dir.join("prefill.log"), dir.join("decode.log"));
        std::fs::write(&p, "p1\n").unwrap();
        std::fs::write(&d, "d1\n").unwrap();
        let files = vec![
            (LogOrigin::Prefill(0), p.display().to_string()),
            (LogOrigin::Decode(0), d.display().to_string()),
        ];
        let clock = Arc::new(ScaledClock::new(5000.0, 1.0));
        let (tx, mut rx) = tokio::sync::mpsc::channel(4);
        // Another taker of the lines read (the dashboard's doctor) gets the same.
        let handed = Arc::new(std::sync::Mutex::new(Vec::new()));
        let h = handed.clone();
        let also: LinesRead = Box::new(move |path, lines, _, _| {
            if !lines.is_empty() {
                h.lock().unwrap().push((path.rsplit('/').next().unwrap_or("").to_string(), lines.to_vec()));
            }
        });
        let round = tail_files(files, Some(also), clock.clone(), None);
        let thread = spawn_poller(
            "pdtop-test-logs",
            "log tailer".into(),
            every(Duration::from_millis(5)),
            clock,
            (tx, None),
            round,
        )
        .unwrap();
        // A round: each file's news in the given order, then its end.
        let lines = |m: Msg| match m {
            Msg::LogLines { source, lines, at, .. } if at >= 5000.0 => (source, lines),
            other => panic!("{other:?}"),
        };
        assert_eq!(lines(next(&mut rx).await), (LogOrigin::Prefill(0), vec!["p1".to_string()]));
        assert_eq!(lines(next(&mut rx).await), (LogOrigin::Decode(0), vec!["d1".to_string()]));
        assert!(matches!(next(&mut rx).await, Msg::LogsPolled { at } if at >= 5000.0));
        // Quiet rounds say only that they were read; new lines come through.
        assert!(matches!(next(&mut rx).await, Msg::LogsPolled { .. }));
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(&d).unwrap();
        f.write_all(b"d2\n").unwrap();
        let got = loop {
            match next(&mut rx).await {
                Msg::LogsPolled { .. } => continue,
                m => break lines(m),
            }
        };
        assert_eq!(got, (LogOrigin::Decode(0), vec!["d2".to_string()]));
        let lines_of = |f: &str| {
            handed
                .lock()
                .unwrap()
                .iter()
                .filter(|(p, _)| p == f)
                .flat_map(|(_, l)| l.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            (lines_of("prefill.log"), lines_of("decode.log")),
            (vec!["p1".to_string()], vec!["d1".to_string(), "d2".to_string()])
        );
        // The receiver gone, the thread ends.
        drop(rx);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !thread.is_finished() {
            assert!(std::time::Instant::now() < deadline, "the thread still runs");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        thread.join().expect("no panic");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn lines_read_are_news_and_so_is_the_read_past_the_deadline() {
        let dir = std::env::temp_dir().join(format!("pdtop-tail-news-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (quiet, busy) = (dir.join("quiet.log"), dir.join("busy.log"));
        std::fs::write(&quiet, "").unwrap();
        std::fs::write(&busy, "").unwrap();
        let clock = Arc::new(ScaledClock::new(5000.0, 1.0));
        let wake = Wake::default();
        let quiet = vec![(LogOrigin::Decode(0), quiet.display().to_string())];
        let mut q = tail_files(quiet, None, clock.clone(), Some(wake.clone()));
        let mut b =
            tail_files(vec![(LogOrigin::Decode(0), busy.display().to_string())], None, clock.clone(), None);
        assert!(!q().news && !b().news);
        std::fs::write(&busy, "INFO 12-01 10:00:00 Added request x\n").unwrap();
        assert!(b().news, "a line read");
        assert!(!b().news, "nothing new, and no deadline");
        // A read before the state's deadline finds nothing to call; the
        // one past it may call a miss.
        wake.want_reads_past(Some(clock.now() + 3600.0), false);
        assert!(!q().news);
        wake.want_reads_past(Some(clock.now() - 0.001), false);
        assert!(q().news, "read past the deadline");
        wake.want_reads_past(None, true);
        assert!(!q().news);
        // The heartbeat's round, while verdicts wait on time alone.
        wake.beat();
        assert!(q().news, "the heartbeat");
        assert!(!q().news, "once");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
