//! Detection latency: how long after the decode's line reaches its log file
//! does the screen's alert row count the silent miss? The demo's lab plays
//! the real qwen3 recording at 1x (its log files written, its `/metrics`
//! served over loopback), a live pipeline watches it exactly as `pdtop
//! demo` does, and the dashboard's own loop (`app::run`) draws it into a
//! 160x48 test terminal. Each miss is timed from the moment the decode log
//! first holds its request's `Added request` line (a watcher polls the file
//! every 2 ms) to the first frame whose `SILENT MISS ×N` counts it.
//!
//! `cargo bench --bench detect` prints one row per miss and the median. The
//! goal (issue #20) is one refresh, 1 s; the time includes whatever later
//! lines the verdict waits for, as it would on a live pair.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pdtop::app::{self, App, Input};
use pdtop::cli::{Inputs, UiArgs};
use pdtop::clock::{Clock, ScaledClock};
use pdtop::config::{FileConfig, Settings};
use pdtop::lab::{self, Capture, LabOptions};
use pdtop::modes::lab_session;
use pdtop::pipeline::REFRESH;
use pdtop::pipeline::{Feed, run_on_thread};
use pdtop::theme::Theme;
use ratatui::Terminal;
use ratatui::backend::{Backend, TestBackend};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

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
    let opts = LabOptions { speed: 1.0, looping: false, dir: dir.clone(), otlp_to: None };
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
            REFRESH.as_millis()
        ),
        None => {
            eprintln!("no silent miss was named within {} s", WATCH.as_secs());
            std::process::exit(1);
        }
    }
}

/// Runs the dashboard's own loop (`app::run`) on the live feed, drawn into
/// a 160x48 test terminal, and notes when each count of silent misses is
/// first on screen (the alert row's `SILENT MISS ×N`). The k-th miss named
/// is timed to the first frame showing N >= k.
fn watch_state(session: &pdtop::pipeline::Session, clock: Arc<dyn Clock>) -> BTreeMap<String, Instant> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let shown: Arc<Mutex<Vec<(Instant, u64)>>> = Arc::default();
    let app = rt.block_on(async {
        let Ok(feed) = Feed::live(session, clock.clone()) else {
            panic!("a live feed");
        };
        let mut app = App::new(session.state(), Theme::builtin("dark").expect("dark theme"));
        let backend = Watch { inner: TestBackend::new(160, 48), shown: shown.clone() };
        let mut term = Terminal::new(backend).expect("terminal");
        let (keys, input) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            tokio::time::sleep(WATCH).await;
            let _ = keys.send(Input::Key(KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE)));
        });
        app::run(&mut term, &mut app, feed, input).await.expect("the loop");
        app
    });
    // Misses in the order they were named (decided oldest first).
    let mut misses: Vec<(f64, String)> = app
        .state
        .logs
        .as_ref()
        .map(|l| {
            l.correlator
                .traces()
                .filter(|t| t.outcome == pdtop::traces::Outcome::SilentMiss)
                .map(|t| (t.decided_at.unwrap_or(f64::INFINITY), t.id.clone()))
                .collect()
        })
        .unwrap_or_default();
    misses.sort_by(|a, b| a.0.total_cmp(&b.0));
    if std::env::var_os("DETECT_DEBUG").is_some() {
        for t in app.state.logs.as_ref().unwrap().correlator.traces() {
            eprintln!("{} {:?} {:?} {:?}: {}", t.id, t.outcome, t.confidence, t.decided_at, t.evidence());
        }
    }
    let shown = shown.lock().expect("frames");
    let mut named = BTreeMap::new();
    for (k, (_, id)) in misses.into_iter().enumerate() {
        if let Some((at, _)) = shown.iter().find(|(_, n)| *n > k as u64) {
            named.insert(id, *at);
        }
    }
    named
}

/// A test terminal that notes, at each frame, the silent-miss count the
/// alert row shows.
struct Watch {
    inner: TestBackend,
    shown: Arc<Mutex<Vec<(Instant, u64)>>>,
}

impl Watch {
    fn count(&self) -> u64 {
        let buf = self.inner.buffer();
        let w = buf.area.width as usize;
        buf.content
            .chunks(w)
            .map(|row| row.iter().map(|c| c.symbol()).collect::<String>())
            .find_map(|row| {
                let rest = row.split("SILENT MISS ×").nth(1)?;
                rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
            })
            .unwrap_or(0)
    }
}

impl Backend for Watch {
    type Error = <TestBackend as Backend>::Error;
    fn draw<'a, I>(&mut self, content: I) -> Result<(), Self::Error>
    where
        I: Iterator<Item = (u16, u16, &'a ratatui::buffer::Cell)>,
    {
        self.inner.draw(content)
    }
    fn hide_cursor(&mut self) -> Result<(), Self::Error> {
        self.inner.hide_cursor()
    }
    fn show_cursor(&mut self) -> Result<(), Self::Error> {
        self.inner.show_cursor()
    }
    fn get_cursor_position(&mut self) -> Result<ratatui::layout::Position, Self::Error> {
        self.inner.get_cursor_position()
    }
    fn set_cursor_position<P: Into<ratatui::layout::Position>>(&mut self, p: P) -> Result<(), Self::Error> {
        self.inner.set_cursor_position(p)
    }
    fn clear(&mut self) -> Result<(), Self::Error> {
        self.inner.clear()
    }
    fn clear_region(&mut self, t: ratatui::backend::ClearType) -> Result<(), Self::Error> {
        self.inner.clear_region(t)
    }
    fn size(&self) -> Result<ratatui::layout::Size, Self::Error> {
        self.inner.size()
    }
    fn window_size(&mut self) -> Result<ratatui::backend::WindowSize, Self::Error> {
        self.inner.window_size()
    }
    fn flush(&mut self) -> Result<(), Self::Error> {
        let n = self.count();
        let mut shown = self.shown.lock().expect("frames");
        if shown.last().is_none_or(|(_, m)| *m != n) {
            shown.push((Instant::now(), n));
        }
        self.inner.flush()
    }
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
