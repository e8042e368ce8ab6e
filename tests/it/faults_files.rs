//! Log files that misbehave under the real tail loop
//! (`sources::spawn_log_tailers`, real files in a temp folder), folded into
//! `AppState` and judged on the LOGS row drawn into a TestBackend.
//!
//! Waits are bounded (a deadline per step, never a sleep-then-assert): a
//! step ends as soon as the state shows what it should.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pdtop::app::App;
use pdtop::clock::SystemClock;
use pdtop::feed::LogOrigin;
use pdtop::feed::Role;
use pdtop::feed::TailState;
use pdtop::feed::{Endpoint, Msg};
use pdtop::sources;
use pdtop::state::AppState;
use pdtop::state::logs::LogSource;
use pdtop::theme::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use tokio::sync::mpsc::Receiver;

/// A real vLLM decode line, with `{n}` for the request number.
fn line(n: usize) -> String {
    format!(
        "(APIServer pid=3126) INFO 11-30 06:26:48 [logger.py:43] Received request cmpl-lab-{n}-0: params: SamplingParams(n=1, max_tokens=8), lora_request: None.\n"
    )
}

fn lines(range: std::ops::Range<usize>) -> String {
    range.map(line).collect()
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pdtop-faults-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

fn append(path: &std::path::Path, bytes: &[u8]) {
    OpenOptions::new().create(true).append(true).open(path).unwrap().write_all(bytes).unwrap();
}

struct Watch {
    state: AppState,
    rx: Receiver<Msg>,
}

impl Watch {
    fn start(path: &std::path::Path) -> Watch {
        let logs = vec![(LogOrigin::Decode(0), path.display().to_string())];
        let (tx, rx) = tokio::sync::mpsc::channel(1024);
        sources::spawn_log_tailers(&logs, Duration::from_millis(20), None, Arc::new(SystemClock), (tx, None));
        let eps = vec![Endpoint::parse(Role::Decode, "127.0.0.1:8200").unwrap()];
        Watch { state: AppState::new(eps, 60.0).with_logs(&logs), rx }
    }

    fn log(&self) -> &LogSource {
        &self.state.logs.as_ref().unwrap().sources[0]
    }

    /// Applies messages until `done` holds and the polling round that
    /// made it so is over (its `LogsPolled`: the lines read are given to
    /// the traces then); fails with `what` after 10 s.
    async fn until(&mut self, what: &str, done: impl Fn(&LogSource) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let mut round_over = false;
        while !(done(self.log()) && round_over) {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(Some(m)) => {
                    round_over = matches!(m, Msg::LogsPolled { .. });
                    self.state.apply(m)
                }
                Ok(None) => panic!("the tailer stopped while waiting for {what}"),
                Err(_) => panic!("no {what} within 10 s: {:?}", self.log()),
            }
        }
    }

    /// The LOGS row as drawn.
    fn row(&self) -> String {
        let app = App::new(self.state.clone(), Theme::builtin("dark").unwrap());
        let mut term = Terminal::new(TestBackend::new(160, 30)).unwrap();
        term.draw(|f| app.draw(f)).unwrap();
        let buf = term.backend().buffer();
        (0..buf.area.height)
            .map(|y| (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect::<String>())
            .find(|l| l.contains("LOGS"))
            .unwrap_or_default()
    }
}

#[tokio::test]
async fn rotated_truncated_and_deleted_logs_are_followed_and_shown() {
    let dir = temp_dir("rotate");
    let path = dir.join("decode.log");
    append(&path, lines(0..10).as_bytes());
    let mut w = Watch::start(&path);
    w.until("the first 10 lines", |l| l.lines == 10).await;
    assert!(w.row().contains("● decode#0 decode.log 10 lines"), "{}", w.row());

    // Rotation: renamed away, a new file takes the name.
    fs::rename(&path, dir.join("decode.log.1")).unwrap();
    append(&path, lines(10..15).as_bytes());
    w.until("the rotation", |l| l.counts.rotations == 1 && l.lines == 15).await;
    assert!(w.row().contains("15 lines rotated 1×"), "{}", w.row());

    // Truncation in place (copytruncate), then new lines.
    OpenOptions::new().write(true).truncate(true).open(&path).unwrap();
    // Let the tailer see the short file before it grows past the old size.
    w.until("the truncation", |l| l.counts.truncations == 1).await;
    append(&path, lines(15..18).as_bytes());
    w.until("lines after the truncation", |l| l.lines == 18).await;
    assert!(w.row().contains("18 lines rotated 2×"), "{}", w.row());

    // Deleted: shown as missing, and picked up again when it comes back.
    fs::remove_file(&path).unwrap();
    w.until("the file missing", |l| l.state == Some(TailState::Missing)).await;
    assert!(w.row().contains("✖ missing decode#0 decode.log 18 lines"), "{}", w.row());
    append(&path, lines(18..20).as_bytes());
    w.until("the file back", |l| l.state == Some(TailState::Following) && l.lines == 20).await;
    assert!(w.row().contains("● decode#0 decode.log 20 lines"), "{}", w.row());
    // Still correlating: every request read went to the traces.
    let seen = w.state.logs.as_ref().unwrap().correlator.counts().seen;
    let ids: Vec<String> = w.state.logs.as_ref().unwrap().correlator.traces().map(|t| t.id.clone()).collect();
    assert_eq!(seen, 20, "{ids:?} waiting {:?}", w.state.logs.as_ref().unwrap().waiting());
    let _ = fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn non_utf8_and_megabyte_lines_are_counted_and_skipped_not_fatal() {
    let dir = temp_dir("garbage");
    let path = dir.join("decode.log");
    let mut bytes = Vec::new();
    bytes.extend_from_slice(line(0).as_bytes());
    // Latin-1 and stray continuation bytes inside a log line.
    bytes.extend_from_slice(b"(APIServer pid=1) INFO 11-30 06:26:48 [x.py:1] caf\xe9 \xff\xfe\x80 done\n");
    // Pure noise, no newline for a while.
    bytes.extend((0..4096u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).filter(|b| *b != b'\n'));
    bytes.push(b'\n');
    // A line just under the 1 MiB cap is kept; one over it is skipped.
    bytes.extend(std::iter::repeat_n(b'a', 1_000_000));
    bytes.push(b'\n');
    bytes.extend(std::iter::repeat_n(b'b', 2 << 20));
    bytes.push(b'\n');
    bytes.extend_from_slice(line(1).as_bytes());
    append(&path, &bytes);
    let mut w = Watch::start(&path);
    w.until("the request after the garbage", |l| l.lines == 5).await;
    let l = w.log();
    assert_eq!(l.counts.long_lines_skipped, 1, "{l:?}");
    assert!(l.counts.invalid_utf8_lines >= 2, "{l:?}");
    assert_eq!(l.state, Some(TailState::Following));
    let row = w.row();
    assert!(row.contains("● decode#0 decode.log 5 lines"), "{row}");
    assert!(row.contains("bad"), "{row}");
    // Both real requests, before and after the garbage, reached the traces.
    assert_eq!(w.state.logs.as_ref().unwrap().correlator.counts().seen, 2);
    // And a line appended later still arrives: the tailer kept going.
    append(&path, line(2).as_bytes());
    w.until("a later line", |l| l.lines == 6).await;
    let _ = fs::remove_dir_all(&dir);
}

/// A log longer than one read (4 MiB a round) says so on the LOGS row while
/// it is read in pieces, and `●` once it is read to its end.
#[tokio::test]
async fn a_log_longer_than_one_read_shows_reading_until_read_through() {
    let dir = temp_dir("long");
    let path = dir.join("decode.log");
    // Past one read's worth.
    let n = (5 << 20) / line(0).len() + 1;
    append(&path, lines(0..n).as_bytes());
    let mut w = Watch::start(&path);
    w.until("the first read", |l| l.lines > 0).await;
    assert_eq!(w.log().state, Some(TailState::CatchingUp), "{:?}", w.log());
    assert!((w.log().lines as usize) < n, "{:?}", w.log());
    let row = w.row();
    assert!(row.contains("◐ reading decode#0 decode.log"), "{row}");
    w.until("the whole log", |l| l.lines as usize == n).await;
    assert_eq!(w.log().state, Some(TailState::Following), "{:?}", w.log());
    let row = w.row();
    assert!(row.contains("● decode#0 decode.log"), "{row}");
    let _ = fs::remove_dir_all(&dir);
}
