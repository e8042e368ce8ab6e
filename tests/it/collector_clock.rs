//! The HTTP collectors stamp every message with the injected clock, never
//! the host's: a `/metrics` scraper against a recorded lab on loopback, and
//! the `--prometheus` collector against a real `prometheus` scraping that
//! lab, both driven by a clock that reads far from real time. A timestamp
//! taken from the host would be ~1.8e9 and fail at once.

use crate::common;

use std::future::Future;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pdtop::clock::Clock;
use pdtop::feed::{Endpoint, Msg, Role};
use pdtop::lab::{self, LabOptions};
use pdtop::sources::prometheus;
use pdtop::sources::scrape::{self, ScrapeOptions};

/// A clock that reads what the test sets; sleeps are real.
struct FakeClock(AtomicU64);

impl FakeClock {
    fn at(t: f64) -> Arc<FakeClock> {
        Arc::new(FakeClock(AtomicU64::new(t.to_bits())))
    }

    fn set(&self, t: f64) {
        self.0.store(t.to_bits(), Ordering::SeqCst);
    }
}

impl Clock for FakeClock {
    fn now(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::SeqCst))
    }

    fn sleep(&self, d: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(tokio::time::sleep(d))
    }
}

/// The time a message carries, if it is one the collectors send.
fn at_of(msg: &Msg) -> Option<f64> {
    match msg {
        Msg::Scrape { at, .. }
        | Msg::ScrapeFailed { at, .. }
        | Msg::Models { at, .. }
        | Msg::SourceFailed { at, .. }
        | Msg::Discovered { at, .. } => Some(*at),
        _ => None,
    }
}

async fn recv(rx: &mut tokio::sync::mpsc::Receiver<Msg>) -> Msg {
    tokio::time::timeout(Duration::from_secs(20), rx.recv()).await.expect("a message in time").expect("open")
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pdtop-clock-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

async fn start_lab(dir: &Path) -> lab::LabHandle {
    let cap = common::capture("qwen3-shape-restart").clone();
    lab::start(cap, LabOptions { speed: 1.0, looping: true, dir: dir.to_path_buf(), otlp_to: None })
        .await
        .unwrap()
}

#[tokio::test]
async fn a_scraper_stamps_its_messages_with_the_injected_clock() {
    let dir = temp_dir("scrape");
    let lab = start_lab(&dir).await;
    let clock = FakeClock::at(1000.0);
    let opts = ScrapeOptions {
        interval: Duration::from_millis(20),
        timeout: Duration::from_secs(2),
        bearer_token: None,
    };
    let endpoint = Endpoint::parse(Role::Decode, &lab.decode.to_string()).unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(scrape::run(0, endpoint, opts.clone(), clock.clone(), tx));

    // The first good scrape, then `/v1/models` for the (re)connect.
    let (mut scraped, mut models) = (false, false);
    while !(scraped && models) {
        let msg = recv(&mut rx).await;
        match &msg {
            Msg::Scrape { body, .. } => scraped |= body.contains("vllm:"),
            Msg::Models { info, .. } => models |= !info.id.is_empty(),
            _ => {}
        }
        if let Some(at) = at_of(&msg) {
            assert_eq!(at, 1000.0, "{msg:?}");
        }
    }
    // The clock moves: so do the stamps.
    clock.set(2500.25);
    loop {
        let msg = recv(&mut rx).await;
        if let Some(at) = at_of(&msg)
            && at != 1000.0
        {
            assert_eq!(at, 2500.25, "{msg:?}");
            break;
        }
    }

    // A failure is stamped the same way (nothing listens on this port).
    let dead = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let endpoint = Endpoint::parse(Role::Prefill, &dead.to_string()).unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(scrape::run(0, endpoint, opts, clock.clone(), tx));
    let msg = recv(&mut rx).await;
    assert!(matches!(msg, Msg::ScrapeFailed { at, .. } if at == 2500.25), "{msg:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn the_prometheus_collector_stamps_its_messages_with_the_injected_clock() {
    let Some(bin) = common::prometheus::binary() else {
        eprintln!("SKIPPED: no `prometheus` binary on PATH (apt-get install prometheus)");
        return;
    };
    let dir = temp_dir("prom");
    let lab = start_lab(&dir.join("lab")).await;
    let (prefill, decode) = (lab.prefill.to_string(), lab.decode.to_string());
    let server = common::prometheus::start(
        &bin,
        &dir.join("prom"),
        500,
        &[("vllm-prefill", &[prefill]), ("vllm-decode", &[decode])],
    );
    // The server's clock is real time; pdtop's reads 1000 s and stands still.
    const NOW: f64 = 1000.0;
    let clock = FakeClock::at(NOW);
    let opts = prometheus::PromOptions {
        url: server.url.clone(),
        auth: prometheus::Auth::None,
        roles: vec![
            (Role::Prefill, r#"job="vllm-prefill""#.into()),
            (Role::Decode, r#"job="vllm-decode""#.into()),
        ],
        interval: Duration::from_millis(250),
        timeout: Duration::from_secs(2),
        clock_speed: 1.0,
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    prometheus::spawn(opts, 0, clock.clone(), tx).unwrap();

    // Until both instances have been discovered and scraped through the
    // server (it needs a few seconds to start and scrape them), and each
    // has a sample the server took after it last told its time.
    let deadline = Instant::now() + Duration::from_secs(40);
    let (mut discovered, mut current) = (0, [false; 2]);
    while current != [true; 2] {
        assert!(Instant::now() < deadline, "no fresh scrape of both instances through prometheus");
        let msg = recv(&mut rx).await;
        match &msg {
            Msg::Discovered { at, .. } => {
                assert_eq!(*at, NOW, "{msg:?}");
                discovered += 1;
            }
            // pdtop's clock stands still, so on its timeline the server does
            // too: a sample taken after the server's last answer is "now",
            // however much real time has passed. One aged by the host's
            // clock would read a little earlier.
            Msg::Scrape { instance, at, .. } if *instance < 2 => current[*instance] |= *at == NOW,
            _ => {}
        }
        // A sample's time is now less its age on the server: never later
        // than pdtop's clock, and within the refresh windows before it.
        if let Some(at) = at_of(&msg) {
            assert!((NOW - 120.0..=NOW).contains(&at), "{msg:?}");
        }
    }
    assert_eq!(discovered, 2);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
