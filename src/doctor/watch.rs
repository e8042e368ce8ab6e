//! The doctor on the dashboard: the same rules, on the logs and this host,
//! at start and whenever a server restarts, each report sent to the state
//! as a `Msg::Doctor` (the state tells new findings, and all of them again
//! after a restart). Every [`EVERY`] the logs are read on from where the
//! last round stopped (never whole again), and the listening sockets are
//! listed when a log said something new or every [`LIST_EVERY`] rounds:
//! only a new start-up in a log or a new listening socket (a restarted
//! server) has the host read again, since walking every
//! process's descriptors is the costly part. [`FULL_EVERY`] rounds read it
//! all regardless (an interface may go down).

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::Sender;

use super::gather::{self, Sources};
use super::loglines::LogFacts;
use crate::clock::Clock;
use crate::feed::Msg;
use crate::sources::host::Listener;

/// How often the doctor looks again (a restart is told within this).
pub const EVERY: Duration = Duration::from_secs(20);
/// Rounds between two full reads when nothing restarted.
pub const FULL_EVERY: u32 = 15;
/// Rounds between two listings of the sockets when the logs say nothing new.
pub const LIST_EVERY: u32 = 3;

/// A log read so far: where the next read starts, and what it said.
#[derive(Default)]
struct Followed {
    offset: u64,
    lines: usize,
    partial: String,
    facts: Option<LogFacts>,
}

impl Followed {
    /// Reads what was appended since the last call; a shorter file was
    /// truncated or rotated, and is read from its start.
    fn read(&mut self, path: &str) -> Result<LogFacts, String> {
        let mut file = std::fs::File::open(path).map_err(|e| format!("{path}: {e}"))?;
        let len = file.metadata().map_err(|e| format!("{path}: {e}"))?.len();
        if len < self.offset || self.facts.is_none() {
            *self = Followed { facts: Some(LogFacts::new(path)), ..Default::default() };
        }
        file.seek(SeekFrom::Start(self.offset)).map_err(|e| format!("{path}: {e}"))?;
        let mut buf = Vec::new();
        file.take(len - self.offset).read_to_end(&mut buf).map_err(|e| format!("{path}: {e}"))?;
        self.offset += buf.len() as u64;
        self.partial.push_str(&String::from_utf8_lossy(&buf));
        let facts = self.facts.get_or_insert_with(|| LogFacts::new(path));
        // Only whole lines: the last one may still be being written.
        let cut = self.partial.rfind('\n').map_or(0, |i| i + 1);
        for line in self.partial[..cut].lines() {
            self.lines += 1;
            facts.on_line(self.lines, line);
        }
        self.partial.drain(..cut);
        Ok(facts.clone())
    }
}

/// Runs until the state's end drops the receiver.
pub async fn run(sources: Sources, clock: Arc<dyn Clock>, tx: Sender<Msg>) {
    let mut logs: BTreeMap<String, Followed> = BTreeMap::new();
    let mut last: Option<(Vec<Listener>, Vec<Option<LogFacts>>)> = None;
    let mut round = 0u32;
    loop {
        let facts = gather::instances(&sources, |path| logs.entry(path.to_string()).or_default().read(path));
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
        let said: Vec<_> = logs.values().map(|f| f.facts.clone()).collect();
        // Listing sockets walks every TCP socket of the host: only when a
        // log said something new, or every `LIST_EVERY`th round (a server
        // restarted whose log is not read).
        let log_news = last.as_ref().is_none_or(|(_, l)| *l != said);
        let listeners = match &last {
            Some((l, _)) if !log_news && !round.is_multiple_of(LIST_EVERY) => l.clone(),
            _ => sources.listeners(),
        };
        let seen = (listeners, said);
        if last.as_ref() == Some(&seen) && !round.is_multiple_of(FULL_EVERY) {
            clock.sleep(EVERY).await;
            continue;
        }
        last = Some(seen);
        sources.add_host(&mut facts);
        gather::read_kv_dirs(&mut facts, &sources.proc_root);
        let report = super::diagnose(&facts);
        if tx.send(Msg::Doctor { at: clock.now(), report }).await.is_err() {
            return;
        }
        clock.sleep(EVERY).await;
    }
}
