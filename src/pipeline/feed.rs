//! Where a mode's messages come from.

use std::sync::Arc;

use tokio::sync::mpsc::{self, Receiver};

use super::collectors::{COLLECTOR_THREAD, run_on_thread, spawn_collectors};
use super::player::Player;
use super::session::Session;
use crate::clock::Clock;
use crate::error::Result;
use crate::feed::Msg;
use crate::lab::LabClock;
use crate::sources::Wake;

/// The messages a sink folds into its state.
pub enum Feed {
    /// Collectors (or a test) sending as things happen.
    Live(LiveFeed),
    /// A recording, played at a speed, with pause and seek.
    Recording(Box<Player>),
}

pub struct LiveFeed {
    pub rx: Receiver<Msg>,
    /// Ages on screen follow this clock.
    pub clock: Arc<dyn Clock>,
    /// The demo lab's position (loop, progress), when the feed is the demo.
    pub lab: Option<LabInfo>,
    /// How often new data is drawn: the scrape interval, so a frame shows
    /// one refresh of every source rather than each message as it lands.
    pub refresh: std::time::Duration,
    /// Told of news that may settle a verdict (the logs'): with it, the
    /// queue is taken at each refresh and when woken, not at each message.
    pub wake: Option<Wake>,
}

/// What the title bar says about a demo lab.
#[derive(Clone)]
pub struct LabInfo {
    pub capture: String,
    pub speed: f64,
    pub clock: LabClock,
}

/// The longest time new data waits to be drawn.
pub const REFRESH: std::time::Duration = std::time::Duration::from_secs(1);

/// How many messages may wait between collectors and the state.
pub const CHANNEL: usize = 1024;

impl LiveFeed {
    /// Tells the log tailer when the state next waits on its reads.
    pub fn tell_due(&self, state: &crate::state::AppState) {
        let due = || state.logs.as_ref().and_then(|l| l.reads_due(state.now));
        let waiting = || state.logs.as_ref().is_some_and(|l| l.correlator.counts().pending > 0);
        self.wake.iter().for_each(|w| w.want_reads_past(due(), waiting()));
    }
}

impl Feed {
    /// The session's collectors on a thread of their own.
    pub fn live(session: &Session, clock: Arc<dyn Clock>) -> Result<Feed> {
        let (tx, rx) = mpsc::channel(CHANNEL);
        let wake = Wake::default();
        let (session2, clock2, wake2) = (session.clone(), clock.clone(), wake.clone());
        run_on_thread(COLLECTOR_THREAD, move || async move {
            if let Err(e) = spawn_collectors(&session2, clock2.clone(), tx.clone(), Some(wake2.clone())) {
                let msg = Msg::SourceFailed { source: "http".into(), at: clock2.now(), error: e.to_string() };
                let _ = tx.send(msg).await;
                wake2.now();
            }
        })?;
        let refresh = session.collect.as_ref().map_or(REFRESH, |c| c.scrape.interval).min(REFRESH);
        Ok(Feed::Live(LiveFeed { rx, clock, lab: None, refresh, wake: Some(wake) }))
    }

    /// The player, for the keys that steer it.
    pub fn player_mut(&mut self) -> Option<&mut Player> {
        match self {
            Feed::Recording(p) => Some(p.as_mut()),
            Feed::Live(_) => None,
        }
    }
}
