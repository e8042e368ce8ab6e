//! The real event loop (`app::run`) driven by a feed the test controls and
//! drawn into ratatui's `TestBackend`: input wins over data, a flood of
//! data is drawn in a few coalesced frames, a frozen view keeps its frame
//! while collection goes on, and a recording plays through the same loop.
//! Time is tokio's paused clock, so frame pacing is exact, not timed.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use pdtop::app::{self, App, FRAME, Input, RunStats};
use pdtop::clock::ScaledClock;
use pdtop::feed::Msg;
use pdtop::pipeline::{Feed, LiveFeed};
use pdtop::state::AppState;
use pdtop::theme::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use tokio::sync::mpsc;

fn body() -> String {
    let p =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/qwen3-decode-metrics-end.txt");
    std::fs::read_to_string(p).unwrap()
}

fn key(c: char) -> Input {
    Input::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
}

fn app() -> App {
    App::new(AppState::new(common::pair_endpoints(), 60.0), Theme::builtin("dark").unwrap())
}

fn live(rx: mpsc::Receiver<Msg>) -> Feed {
    Feed::Live(LiveFeed {
        rx,
        clock: Arc::new(ScaledClock::new(1_796_110_151.0, 1.0)),
        lab: None,
        refresh: FRAME,
        wake: None,
    })
}

fn text(term: &Terminal<TestBackend>) -> String {
    let buf = term.backend().buffer();
    let w = buf.area.width as usize;
    buf.content.chunks(w).map(|row| row.iter().map(|c| c.symbol()).collect::<String>() + "\n").collect()
}

async fn run(
    app: &mut App,
    term: &mut Terminal<TestBackend>,
    feed: Feed,
    input: mpsc::UnboundedReceiver<Input>,
) -> RunStats {
    app::run(term, app, feed, input).await.unwrap()
}

#[tokio::test(start_paused = true)]
async fn input_is_served_before_queued_data() {
    let (tx, rx) = mpsc::channel(1024);
    let scrape = body();
    for i in 0..1000 {
        tx.send(Msg::Scrape { instance: i % 2, at: 1_796_110_151.0 + i as f64, body: scrape.clone() })
            .await
            .unwrap();
    }
    let (in_tx, in_rx) = mpsc::unbounded_channel();
    in_tx.send(key('q')).unwrap();
    let mut app = app();
    let mut term = Terminal::new(TestBackend::new(120, 40)).unwrap();
    let stats = run(&mut app, &mut term, live(rx), in_rx).await;
    // The first frame is drawn, then the queued `q` wins over 1000 queued scrapes.
    assert_eq!(stats, RunStats { frames: 1, messages: 0 });
    assert!(app.quit);
}

#[tokio::test(start_paused = true)]
async fn a_flood_of_data_is_drawn_in_coalesced_frames() {
    let (tx, rx) = mpsc::channel(1024);
    let (in_tx, in_rx) = mpsc::unbounded_channel();
    let scrape = body();
    let sent = 2000u64;
    let started = tokio::time::Instant::now();
    tokio::spawn(async move {
        for i in 0..sent {
            let msg = Msg::Scrape {
                instance: (i % 2) as usize,
                at: 1_796_110_151.0 + i as f64 / 10.0,
                body: scrape.clone(),
            };
            tx.send(msg).await.unwrap();
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // Let the loop drain and draw what came, then quit.
        tokio::time::sleep(FRAME * 4).await;
        in_tx.send(key('q')).unwrap();
        // Keeps the channel open until the loop has quit.
        tokio::time::sleep(Duration::from_secs(3600)).await;
    });
    let mut app = app();
    let mut term = Terminal::new(TestBackend::new(120, 40)).unwrap();
    let stats = run(&mut app, &mut term, live(rx), in_rx).await;
    let elapsed = started.elapsed();
    assert_eq!(stats.messages, sent, "every message applied");
    assert_eq!(app.state.instances[0].health.scrapes_ok + app.state.instances[1].health.scrapes_ok, sent);
    // At most one frame per FRAME (plus the first and the last), though
    // a message came every millisecond.
    let cap = (elapsed.as_millis() / FRAME.as_millis()) as u64 + 2;
    assert!(stats.frames >= 2 && stats.frames <= cap, "{stats:?} in {elapsed:?} (cap {cap})");
    assert!(stats.frames * 10 < sent, "{stats:?}");
    assert!(text(&term).contains("127.0.0.1:8200"), "{}", text(&term));
}

#[tokio::test(start_paused = true)]
async fn a_frozen_view_keeps_its_frame_while_data_goes_on() {
    let (tx, rx) = mpsc::channel(1024);
    let (in_tx, in_rx) = mpsc::unbounded_channel();
    let scrape = body();
    tokio::spawn(async move {
        in_tx.send(key(' ')).unwrap();
        tokio::time::sleep(FRAME * 2).await;
        tx.send(Msg::Scrape { instance: 1, at: 1_796_110_160.0, body: scrape }).await.unwrap();
        tokio::time::sleep(FRAME * 4).await;
        in_tx.send(key('q')).unwrap();
        tokio::time::sleep(Duration::from_secs(3600)).await;
    });
    let mut app = app();
    let mut term = Terminal::new(TestBackend::new(120, 40)).unwrap();
    let stats = run(&mut app, &mut term, live(rx), in_rx).await;
    assert_eq!(stats.messages, 1);
    // Collection went on; the frame is drawn from the frozen copy.
    assert_eq!(app.state.instances[1].health.scrapes_ok, 1);
    let frozen = app.view.frozen.as_ref().expect("still frozen");
    assert_eq!(frozen.instances[1].health.scrapes_ok, 0);
    assert!(text(&term).contains("FROZEN"), "{}", text(&term));
}

#[tokio::test(start_paused = true)]
async fn a_closed_feed_ends_the_loop() {
    let (tx, rx) = mpsc::channel(8);
    let (_in_tx, in_rx) = mpsc::unbounded_channel();
    tx.send(Msg::Tick { at: 1.0 }).await.unwrap();
    drop(tx);
    let mut app = app();
    let mut term = Terminal::new(TestBackend::new(80, 24)).unwrap();
    let stats = run(&mut app, &mut term, live(rx), in_rx).await;
    assert_eq!(stats.messages, 1);
}

/// A live watch at its refresh: scrapes of two instances a second each, and
/// ticks, for 10 s, draw about one frame a second; a key in between is drawn
/// at once.
#[tokio::test(start_paused = true)]
async fn a_steady_watch_draws_once_per_refresh_and_keys_at_once() {
    let (tx, rx) = mpsc::channel(1024);
    let (in_tx, in_rx) = mpsc::unbounded_channel();
    let scrape = body();
    let started = tokio::time::Instant::now();
    tokio::spawn(async move {
        for i in 0..20u32 {
            let msg = Msg::Scrape {
                instance: (i % 2) as usize,
                at: 1_796_110_151.0 + f64::from(i) / 2.0,
                body: scrape.clone(),
            };
            tx.send(msg).await.unwrap();
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        in_tx.send(key('q')).unwrap();
        tokio::time::sleep(Duration::from_secs(3600)).await;
    });
    let mut app = app();
    let mut term = Terminal::new(TestBackend::new(120, 40)).unwrap();
    let feed = Feed::Live(LiveFeed {
        rx,
        clock: Arc::new(ScaledClock::new(1_796_110_151.0, 1.0)),
        lab: None,
        refresh: pdtop::pipeline::REFRESH,
        wake: None,
    });
    let stats = run(&mut app, &mut term, feed, in_rx).await;
    let secs = started.elapsed().as_secs();
    assert_eq!(stats.messages, 20);
    // One per refresh (and the first), where each message used to draw one.
    assert!(stats.frames <= secs + 2, "{stats:?} in {secs} s");
    assert!(stats.frames >= secs.saturating_sub(1), "{stats:?} in {secs} s");
}

/// With a wake (the live collectors' feed), what the sources queue waits
/// for the refresh, unless one says it has news: a scrape a second wakes
/// nothing, a log line does.
#[tokio::test]
async fn queued_data_waits_for_the_refresh_unless_a_source_wakes() {
    for news in [false, true] {
        let (tx, rx) = mpsc::channel(1024);
        let (in_tx, in_rx) = mpsc::unbounded_channel();
        let wake = pdtop::sources::Wake::default();
        let w = wake.clone();
        let scrape = body();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            for i in 0..5u32 {
                let msg =
                    Msg::Scrape { instance: 0, at: 1_796_110_151.0 + f64::from(i), body: scrape.clone() };
                tx.send(msg).await.unwrap();
            }
            if news {
                w.now();
            }
            // Well before the first refresh (1 s).
            tokio::time::sleep(Duration::from_millis(300)).await;
            in_tx.send(key('q')).unwrap();
            tokio::time::sleep(Duration::from_secs(3600)).await;
        });
        let feed = Feed::Live(LiveFeed {
            rx,
            clock: Arc::new(ScaledClock::new(1_796_110_151.0, 1.0)),
            lab: None,
            refresh: pdtop::pipeline::REFRESH,
            wake: Some(wake),
        });
        let mut term = Terminal::new(TestBackend::new(120, 40)).unwrap();
        let stats = run(&mut app(), &mut term, feed, in_rx).await;
        assert_eq!(stats.messages, if news { 5 } else { 0 }, "news {news}: {stats:?}");
    }
}
