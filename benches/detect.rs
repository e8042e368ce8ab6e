//! Detection latency: how long after the decode's line reaches its log file
//! does the state hold the named silent miss? The demo's lab plays the real
//! qwen3 recording at 1x (its log files written, its `/metrics` served over
//! loopback), a live pipeline watches it exactly as `pdtop demo` does, and
//! this loop folds the messages into an `AppState` as the dashboard does,
//! with its 1 s tick. Each miss is timed from the moment the decode log first
//! holds its request's `Added request` line (a watcher polls the file every
//! 2 ms) to the first state that names it.
//!
//! `cargo bench --bench detect` prints one row per miss and the median. The
//! goal (issue #20) is one refresh, 1 s; the time includes whatever later
//! lines the verdict waits for, as it would on a live pair.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pdtop::app::TICK;
use pdtop::cli::{Inputs, UiArgs};
use pdtop::clock::{Clock, ScaledClock};
use pdtop::config::{FileConfig, Settings};
use pdtop::feed::Msg;
use pdtop::lab::{self, Capture, LabOptions};
use pdtop::modes::lab_session;
use pdtop::pipeline::{Feed, run_on_thread};

/// Where the lab starts in the recording (lab seconds after its first
/// moment): a little before its first mismatched prompt.
const START_AT: f64 = 30.0;
/// How long the run watches (real seconds): past the last miss of the
/// mismatch phase and the decode restart after it.
const WATCH: Duration = Duration::from_secs(40);

fn main() {
    let capture = Capture::embedded().expect("the embedded recording");
    let t0 = capture.t0;
    let dir = std::env::temp_dir().join(format!("pdtop-detect-{}", std::process::id()));
    let opts = LabOptions { speed: 1.0, looping: false, dir: dir.clone() };
    let (tx, rx) = std::sync::mpsc::channel();
    let at = tokio::time::Instant::now() - Duration::from_secs_f64(START_AT);
    run_on_thread("detect-lab", move || async move {
        let _ = tx.send(lab::server::start_at(capture, opts, at).await.map_err(|e| e.to_string()));
    })
    .expect("lab thread");
    let handle = rx.recv().expect("lab answered").expect("lab started");
    let settings = Settings::resolve(&Inputs::default(), &UiArgs::default(), &FileConfig::default(), false)
        .expect("default settings");
    let session = lab_session(&handle, t0, None, 1.0, settings.window_secs, settings.timeout);
    let clock: Arc<dyn Clock> = Arc::new(ScaledClock::new(t0 + START_AT, 1.0));

    // When each request's `Added request` line first appears in the decode log.
    let added: Arc<Mutex<BTreeMap<String, Instant>>> = Arc::default();
    let watcher = {
        let (added, path) = (added.clone(), handle.decode_log.clone());
        std::thread::spawn(move || watch_added(&path, &added))
    };

    let named = watch_state(&session, clock);
    drop(watcher);
    let _ = std::fs::remove_dir_all(&dir);

    let added = added.lock().expect("watcher");
    let mut lags: Vec<f64> = Vec::new();
    println!("{:<22} {:>10}", "silent miss", "lag (ms)");
    for (id, seen) in &named {
        match added.get(id) {
            Some(line) => {
                let ms = seen.saturating_duration_since(*line).as_secs_f64() * 1e3;
                lags.push(ms);
                println!("{id:<22} {ms:>10.0}");
            }
            // Written before the lab started: its line was there at once.
            None => println!("{id:<22} {:>10}", "(line before start)"),
        }
    }
    lags.sort_by(f64::total_cmp);
    match lags.get(lags.len() / 2) {
        Some(m) => println!(
            "{} misses timed: median {m:.0} ms, min {:.0} ms, max {:.0} ms (one refresh: {} ms)",
            lags.len(),
            lags[0],
            lags[lags.len() - 1],
            TICK.as_millis()
        ),
        None => {
            eprintln!("no silent miss was named within {} s", WATCH.as_secs());
            std::process::exit(1);
        }
    }
}

/// Folds the live feed into a state as the dashboard does (messages as they
/// come, a tick a second) and notes when each miss is first named.
fn watch_state(session: &pdtop::pipeline::Session, clock: Arc<dyn Clock>) -> BTreeMap<String, Instant> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let Ok(Feed::Live(mut live)) = Feed::live(session, clock.clone()) else {
            panic!("a live feed");
        };
        let mut state = session.state();
        let mut named: BTreeMap<String, Instant> = BTreeMap::new();
        let mut tick = tokio::time::interval(TICK);
        let end = tokio::time::Instant::now() + WATCH;
        loop {
            tokio::select! {
                msg = live.rx.recv() => match msg {
                    Some(m) => state.apply(m),
                    None => break,
                },
                _ = tick.tick() => state.apply(Msg::Tick { at: clock.now() }),
                _ = tokio::time::sleep_until(end) => break,
            }
            if let Some(logs) = &state.logs {
                for id in logs.correlator.silent_miss_ids() {
                    named.entry(id).or_insert_with(Instant::now);
                }
            }
        }
        named
    })
}

/// Polls the decode log and notes the first time each request's
/// `Added request` line is there, by the request's external id.
fn watch_added(path: &std::path::Path, added: &Mutex<BTreeMap<String, Instant>>) {
    let start = Instant::now();
    let mut read = 0usize;
    while start.elapsed() < WATCH {
        if let Ok(text) = std::fs::read_to_string(path) {
            // A rewind (the lab starting the file over) reads it all again.
            if text.len() < read {
                read = 0;
            }
            let now = Instant::now();
            let new = &text[read..];
            // Only whole lines: the writer may be mid-line.
            let whole = new.rfind('\n').map_or(0, |i| i + 1);
            for line in new[..whole].lines() {
                if let Some(p) = pdtop::logs::vllm::parse_vllm_line(line)
                    && let pdtop::logs::vllm::VllmEvent::Added { external_id, .. } = &p.event
                {
                    let id = pdtop::traces::base_id(external_id).to_string();
                    added.lock().expect("watcher").entry(id).or_insert(now);
                }
            }
            read += whole;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}
