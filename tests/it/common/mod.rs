//! Helpers shared by the integration tests: the real captures in
//! `tests/fixtures/lab-captures/` (copies of the real recordings).
#![allow(dead_code)]

pub mod labs;
pub mod prometheus;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::Duration;

use pdtop::feed::Role;
use pdtop::feed::{Endpoint, Msg};
use pdtop::lab::Capture;
use pdtop::state::AppState;

pub const CAPTURES: [&str; 2] = ["qwen3-shape-restart", "nixl-llama-shape"];

pub fn capture_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lab-captures").join(name);
    assert!(dir.is_dir(), "missing {}", dir.display());
    dir
}

/// A capture of `tests/fixtures/lab-captures/`, read once per test run:
/// decoding one (xz, then a JSON line per scrape) takes seconds in a debug
/// build, most of what a replay test spent, and the tests read each many
/// times. Clone it to change it.
pub fn capture(name: &str) -> &'static Capture {
    static READ: Mutex<Vec<(String, &'static OnceLock<Capture>)>> = Mutex::new(Vec::new());
    // One cell per name, taken under the lock; read outside it, so that two
    // captures load side by side and a second reader of one waits for it.
    let cell = {
        let mut read = READ.lock().unwrap();
        match read.iter().find(|(n, _)| n == name) {
            Some((_, cell)) => *cell,
            None => {
                let cell: &'static OnceLock<Capture> = Box::leak(Box::default());
                read.push((name.to_string(), cell));
                cell
            }
        }
    };
    cell.get_or_init(|| Capture::from_dir(&capture_dir(name)).unwrap_or_else(|e| panic!("{name}: {e}")))
}

/// The capture the binary embeds (the demo's), read once per test run.
pub fn embedded_capture() -> &'static Capture {
    static READ: OnceLock<Capture> = OnceLock::new();
    READ.get_or_init(|| Capture::embedded().unwrap())
}

/// `pdtop replay` of a capture folder, at ×1, in the theme `ui` names.
pub fn capture_replay_args(name: &str, ui: pdtop::cli::UiArgs) -> pdtop::cli::ReplayArgs {
    pdtop::cli::ReplayArgs {
        file: Some(capture_dir(name)),
        from_logs: false,
        prefill_log: Vec::new(),
        decode_log: Vec::new(),
        proxy_log: None,
        stuck_after: None,
        speed: 1.0,
        ui,
    }
}

/// A fresh copy of a capture folder under the temp folder (`tag` names
/// it), without the files named in `skip`: a test's altered capture.
pub fn copy_capture(name: &str, tag: &str, skip: &[&str]) -> PathBuf {
    let src = capture_dir(name);
    let dir = std::env::temp_dir().join(format!("pdtop-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        if !skip.iter().any(|n| e.file_name() == *n) {
            std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
        }
    }
    dir
}

pub type ScrapeRow = (f64, String, Option<String>, Option<String>);

/// The rows of `scrapes.jsonl.xz`: (t, instance, Some(body) | None when down, error).
/// Read once per capture: tests replay the same scrapes many times.
pub fn scrapes(name: &str) -> Vec<ScrapeRow> {
    static READ: std::sync::Mutex<Vec<(String, Arc<Vec<ScrapeRow>>)>> = std::sync::Mutex::new(Vec::new());
    let known = READ.lock().unwrap().iter().find(|(n, _)| n == name).map(|(_, rows)| rows.clone());
    let rows = known.unwrap_or_else(|| {
        let rows = Arc::new(read_scrapes(name));
        READ.lock().unwrap().push((name.to_string(), rows.clone()));
        rows
    });
    rows.as_ref().clone()
}

fn read_scrapes(name: &str) -> Vec<ScrapeRow> {
    let raw = std::fs::read(capture_dir(name).join("scrapes.jsonl.xz")).unwrap();
    let mut out = Vec::new();
    lzma_rs::xz_decompress(&mut &raw[..], &mut out).unwrap();
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["t"].as_f64().unwrap(),
                v["instance"].as_str().unwrap().to_string(),
                v["text"].as_str().map(str::to_owned),
                v["error"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

pub fn pair_endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint::parse(Role::Prefill, "127.0.0.1:8100").unwrap(),
        Endpoint::parse(Role::Decode, "127.0.0.1:8200").unwrap(),
    ]
}

/// Feeds every recorded scrape into a fresh state, as a live scraper would.
pub fn replay_scrapes(name: &str) -> AppState {
    let mut st = AppState::new(pair_endpoints(), 60.0);
    for (t, inst, body, error) in scrapes(name) {
        let instance = usize::from(inst == "decode");
        st.apply(match body {
            Some(body) => Msg::Scrape { instance, at: t, body },
            None => Msg::ScrapeFailed { instance, at: t, error: error.unwrap_or_default() },
        });
    }
    st
}

/// The state a live pdtop would have `secs` into a capture, logs included.
pub fn replay_with_logs(name: &str, secs: f64) -> AppState {
    let mut cap = capture(name).clone();
    // Logs and metrics only: a test that wants the recorded spans posts them.
    cap.spans.clear();
    pdtop::lab::replay::state_at(&cap, secs, true)
}

/// The same without logs: what metrics alone show.
pub fn replay_metrics_only(name: &str, secs: f64) -> AppState {
    pdtop::lab::replay::state_at(capture(name), secs, false)
}

/// The symbols of a rendered buffer, one line per row.
pub fn buffer_text(buf: &ratatui::buffer::Buffer) -> String {
    let mut out = String::new();
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            out.push_str(buf[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

/// One frame of the app on a `w` x `h` TestBackend, as text.
pub fn screen_text(app: &pdtop::app::App, w: u16, h: u16) -> String {
    let mut term = ratatui::Terminal::new(ratatui::backend::TestBackend::new(w, h)).unwrap();
    term.draw(|f| app.draw(f)).unwrap();
    buffer_text(term.backend().buffer())
}

/// The silent misses of `demo-proxy-qwen3` by the decode response id the
/// client got: through the proxy, answered, and nothing loaded
/// (`cached_tokens` 0) in the phases where KV should have moved.
pub fn demo_proxy_misses() -> Vec<String> {
    let reqs = std::fs::read_to_string(capture_dir("demo-proxy-qwen3").join("requests.jsonl")).unwrap();
    let mut out: Vec<String> = reqs
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["mode"] == "proxy" && r["status"] == 200)
        .filter(|r| matches!(r["phase"].as_str(), Some("steady" | "after_restart")))
        .filter(|r| r["usage"]["prompt_tokens_details"]["cached_tokens"] == 0)
        .map(|r| r["resp_id"].as_str().unwrap().to_string())
        .collect();
    out.sort();
    out
}

/// Reads up to the end of a request's headers (or what came before the
/// peer stopped or 5 s passed).
pub fn read_request(s: &mut TcpStream) -> Vec<u8> {
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut buf = [0u8; 4096];
    let mut seen = Vec::new();
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        seen.extend_from_slice(&buf[..n]);
        if seen.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    seen
}

/// The scrape timeout against a lab (`lab_pair_args`).
pub const LAB_TIMEOUT: &str = "3";

/// `--prefill`, `--decode` of a lab and a fast polling pace on its clock
/// (the lab's own: its speed and when it started). A lab's instance that
/// is down refuses at once; the 3-s timeout only keeps a lab starved by a
/// loaded machine from reading as an outage.
pub fn lab_pair_args(lab: &pdtop::lab::LabHandle, speed: f64, secs: f64) -> Vec<String> {
    [
        "--prefill",
        &lab.prefill.to_string(),
        "--decode",
        &lab.decode.to_string(),
        "--interval",
        "0.1",
        "--timeout",
        LAB_TIMEOUT,
        "--clock-speed",
        &speed.to_string(),
        "--clock-origin",
        &lab.clock.stamp_origin().to_string(),
        "--duration",
        &secs.to_string(),
    ]
    .map(String::from)
    .to_vec()
}

/// Answers one request as the lab's vLLM 0.26.0 instances did: `/metrics`
/// the next of `bodies` (the last one from then on), `/v1/models`,
/// `/version`, else 404.
fn answer(mut s: TcpStream, bodies: &[String], scrapes: &AtomicUsize) {
    let seen = read_request(&mut s);
    let head = String::from_utf8_lossy(&seen);
    let path = head.split_whitespace().nth(1).unwrap_or("/");
    let (ctype, body) = match path {
        "/metrics" => {
            let n = scrapes.fetch_add(1, Ordering::SeqCst).min(bodies.len() - 1);
            ("text/plain; version=0.0.4; charset=utf-8", bodies[n].clone())
        }
        "/v1/models" => (
            "application/json",
            r#"{"object":"list","data":[{"id":"lab-8b","object":"model","root":"/models/qwen3-8b-shape","max_model_len":8192}]}"#.to_string(),
        ),
        "/version" => ("application/json", r#"{"version":"0.26.0"}"#.to_string()),
        _ => {
            let _ = s.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            return;
        }
    };
    let _ = write!(
        s,
        "HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// A vLLM instance on loopback whose `/metrics` answers `bodies` in turn;
/// returns `host:port`. The threads end with the test process.
pub fn serve_vllm(bodies: Vec<String>) -> String {
    assert!(!bodies.is_empty());
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let bodies = Arc::new(bodies);
    let scrapes = Arc::new(AtomicUsize::new(0));
    thread::spawn(move || {
        for s in l.incoming().flatten() {
            let (b, n) = (bodies.clone(), scrapes.clone());
            thread::spawn(move || answer(s, &b, &n));
        }
    });
    addr
}

/// A capture's recorded OTLP export bodies with their unix times (`otlp.bin`).
pub fn otlp_bodies(capture: &str) -> Vec<(f64, Vec<u8>)> {
    let raw = std::fs::read(capture_dir(capture).join("otlp.bin")).unwrap();
    pdtop::lab::otlp_frames(&raw).unwrap().into_iter().map(|(t, b)| (t, b.to_vec())).collect()
}

/// The tests that play a lab in real time and judge what a live pdtop saw
/// take turns, four at a time. Each spends a tenth to a quarter of a core
/// (debug `pdtop check` processes scraping every 0.1 s). Six at a time
/// passed on faster VMs, but on a slower 2-core VM (2026-12-08, AMD EPYC)
/// a starved lab wrote its decode log late and two of them judged a
/// slower lab than it played, in 3 of 3 full runs.
pub static REAL_TIME: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(4);

/// A turn to play a lab in real time (`REAL_TIME`).
pub async fn real_time_turn() -> tokio::sync::SemaphorePermit<'static> {
    REAL_TIME.acquire().await.expect("the semaphore is never closed")
}

/// [`real_time_turn`] for a test outside any runtime.
pub fn real_time_turn_blocking() -> tokio::sync::SemaphorePermit<'static> {
    tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(real_time_turn())
}

/// Lines as pdtop's pipeline gives them to the correlator: each one
/// (its log, the line, when it was read), dated by its own stamp
/// (`state::timeline`), every log read a second past the last read time
/// (a stamp a little ahead of the reader's clock is given on then).
pub fn correlate(lines: &[(pdtop::feed::LogOrigin, &str, f64)]) -> pdtop::state::logs::LogState {
    let mut origins: Vec<pdtop::feed::LogOrigin> = Vec::new();
    for (o, _, _) in lines {
        if !origins.contains(o) {
            origins.push(*o);
        }
    }
    let named: Vec<(pdtop::feed::LogOrigin, String)> = origins.iter().map(|o| (*o, o.to_string())).collect();
    let mut logs = pdtop::state::logs::LogState::new(&named);
    let mut last = f64::NEG_INFINITY;
    for (o, l, at) in lines {
        let (state, counts) = (pdtop::feed::TailState::Following, pdtop::feed::TailCounts::default());
        logs.on_lines(*o, *at, &[l.to_string()], state, counts);
        last = last.max(*at);
    }
    logs.round_over(last + 1.0);
    logs.advance(last + 1.0);
    logs
}
