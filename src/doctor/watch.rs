//! The doctor on the dashboard: the same rules, on the logs and this host,
//! at start and whenever a server restarts, each report sent to the state
//! as a `Msg::Doctor` (the state tells new findings, and all of them again
//! after a restart). The logs are not read here: the dashboard's tailer
//! reads each line once and hands it to [`StartupLogs`] as well, and every
//! [`EVERY`] the doctor takes what they said. The listening sockets are
//! listed when a log said something new, and the host is read again when
//! that listing or a log changed: walking every process's descriptors is
//! costly, and so is the listing (the kernel walks its whole table of
//! connections for `net/tcp`, about 1 ms a file on a 24 GB host). Every
//! [`FULL_EVERY`] rounds both are read regardless: a server restarted
//! without a log pdtop reads, an interface gone down. The scrapes tell such
//! a restart at once; the doctor's account of its process follows then.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc::Sender;

use super::gather::{self, Sources};
use super::loglines::LogFacts;
use crate::clock::Clock;
use crate::feed::{Msg, TailState};
use crate::sources::host::Listener;

/// How often the doctor looks again (a restart is told within this).
pub const EVERY: Duration = Duration::from_secs(20);
/// Rounds between two full reads when no log said anything new.
pub const FULL_EVERY: u32 = 15;

/// What each tailed log's lines said of its latest start, fed by the
/// tailer with the lines it read (`sources::spawn_log_tailers`), taken by
/// the doctor each round: one read per line.
#[derive(Clone, Default)]
pub struct StartupLogs(Arc<Mutex<HashMap<String, Followed>>>);

/// One log as the tailer last left it.
struct Followed {
    lines: usize,
    facts: LogFacts,
    /// Why the last poll read nothing (missing, unreadable).
    unread: Option<String>,
}

/// How long the first round waits for the tailer's first read of every log.
const FIRST_READ: Duration = Duration::from_secs(5);

impl StartupLogs {
    /// Lines read from `path`; `reset`: the file was truncated or rotated;
    /// `state`: the tailer's, whether it could read the file.
    pub fn feed(&self, path: &str, lines: &[String], reset: bool, state: &TailState) {
        let mut logs = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let new = || Followed { lines: 0, facts: LogFacts::new(path), unread: None };
        let f = logs.entry(path.to_string()).or_insert_with(new);
        if reset {
            *f = new();
        }
        for line in lines {
            f.lines += 1;
            f.facts.on_line(f.lines, line);
        }
        f.unread = match state {
            TailState::Missing => Some("No such file or directory".to_string()),
            TailState::Error(e) => Some(e.clone()),
            TailState::Following | TailState::CatchingUp | TailState::Ended => None,
        };
    }

    /// Whether every one of `paths` has been polled once (read, or failed).
    pub fn polled(&self, paths: &[String]) -> bool {
        let logs = self.0.lock().unwrap_or_else(|e| e.into_inner());
        paths.iter().all(|p| logs.contains_key(p))
    }

    /// What `path` said so far (nothing yet: a fresh one); an error when
    /// the tailer could never read it.
    pub fn get(&self, path: &str) -> Result<LogFacts, String> {
        let logs = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match logs.get(path) {
            None => Ok(LogFacts::new(path)),
            Some(Followed { lines: 0, unread: Some(why), .. }) => Err(format!("{path}: {why}")),
            Some(f) => Ok(f.facts.clone()),
        }
    }
}

/// Runs until the state's end drops the receiver.
pub async fn run(sources: Sources, logs: StartupLogs, clock: Arc<dyn Clock>, tx: Sender<Msg>) {
    let mut last: Option<(Vec<Listener>, Vec<Option<LogFacts>>)> = None;
    let mut round = 0u32;
    // A first report before the logs were read would miss their start-up.
    let paths: Vec<String> = sources.prefill_log.iter().chain(&sources.decode_log).cloned().collect();
    let waited = clock.now();
    while !logs.polled(&paths) && clock.now() - waited < FIRST_READ.as_secs_f64() {
        clock.sleep(Duration::from_millis(100)).await;
    }
    loop {
        let facts = gather::instances(&sources, |path| logs.get(path));
        let mut facts = match facts {
            Ok(f) => f,
            Err(e) => {
                let mut f = gather::instances(&sources, |p| Ok(LogFacts::new(p))).unwrap_or_default();
                f.unread("start-up logs", e);
                f
            }
        };
        // No HTTP here: the dashboard's scrapers already read /metrics,
        // /version and /v1/models (the state compares them, `mismatch`),
        // and a second reader would take scrapes from servers that answer
        // each in turn.
        for i in &mut facts.instances {
            i.version = i.startup.version.clone();
        }
        round += 1;
        let said: Vec<_> = facts.instances.iter().map(|i| i.log.clone()).collect();
        // Listing sockets walks the host's whole TCP table: only when a log
        // said something new, or every `FULL_EVERY`th round.
        let log_news = last.as_ref().is_none_or(|(_, l)| *l != said);
        let (listeners, all) = match &last {
            Some((l, _)) if !log_news && !round.is_multiple_of(FULL_EVERY) => (l.clone(), None),
            _ => {
                let all = sources.all_listeners();
                (sources.ours(&all), Some(all))
            }
        };
        let seen = (listeners, said);
        if last.as_ref() == Some(&seen) && !round.is_multiple_of(FULL_EVERY) {
            clock.sleep(EVERY).await;
            continue;
        }
        last = Some(seen);
        // The listing just read serves the host's facts too (a round that
        // kept the last one found nothing new and went on above).
        sources.add_host_listed(&mut facts, all.unwrap_or_else(|| sources.all_listeners()));
        gather::read_kv_dirs(&mut facts, &sources.proc_root);
        let report = super::diagnose(&facts);
        if tx.send(Msg::Doctor { at: clock.now(), report }).await.is_err() {
            return;
        }
        clock.sleep(EVERY).await;
    }
}
