//! Follows a log file like `tail -F` and hands back complete lines.
//!
//! The core, [`Tailer`], is synchronous and poll-driven: each [`Tailer::poll`]
//! reads what was appended since the last call. That keeps it trivial to test
//! against real files, and the async wrapper [`run_tailer`] only adds the
//! timer and the channel. Polling (not inotify) because it behaves the same
//! on every filesystem, including network mounts and container volumes, and
//! a log pane refreshed a few times a second needs nothing faster.
//!
//! What it copes with, since vLLM and its proxies are restarted and their
//! logs rotated while the dashboard runs:
//! - a partial last line is held until its newline arrives;
//! - truncation in place (size < offset, e.g. `copytruncate` or `> file`):
//!   restart at 0;
//! - rotation or replacement (device or inode changed, or the file deleted
//!   then recreated): finish the old file, then read the new one from 0;
//! - a missing file is a state ([`TailState::Missing`]), polled quietly;
//! - a line over the cap is skipped and counted, never held whole in memory;
//! - invalid UTF-8 is decoded lossily and counted; `\r\n` endings are accepted.
//!
//! A truncation followed by a rewrite past the old offset between two polls
//! cannot be seen from size alone; `tail -F` has the same blind spot.

use std::fs::{File, Metadata};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::mpsc::Sender;

/// Where to start reading a file that already exists at the first poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAt {
    Beginning,
    /// Only lines appended after the first poll. A file that appears later
    /// (or replaces this one) is always read from its beginning.
    End,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailOptions {
    pub start: StartAt,
    /// Longest line kept, in bytes without the newline; longer ones are skipped.
    pub max_line_bytes: usize,
    /// Most bytes read by one poll, so catching up on a large file is spread
    /// over several batches ([`TailBatch::more`]) instead of one huge one.
    pub max_bytes_per_poll: usize,
}

impl Default for TailOptions {
    fn default() -> Self {
        TailOptions { start: StartAt::Beginning, max_line_bytes: 1 << 20, max_bytes_per_poll: 4 << 20 }
    }
}

use crate::feed::{TailCounts, TailState};

/// What one poll produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailBatch {
    /// Complete lines, without `\n` / `\r\n`, in file order.
    pub lines: Vec<String>,
    pub state: TailState,
    /// What happened during this poll only.
    pub counts: TailCounts,
    /// The per-poll byte budget was used up with data left: poll again now.
    pub more: bool,
}

impl TailBatch {
    pub fn new(state: TailState) -> Self {
        TailBatch { lines: Vec::new(), state, counts: TailCounts::default(), more: false }
    }
}

/// Splits a byte stream into lines, with the length cap and lossy decoding.
/// Shared by the file tailer and the stdin reader.
#[derive(Debug)]
struct LineSplitter {
    max: usize,
    partial: Vec<u8>,
    /// Inside a line that is being discarded, until its newline.
    skipping: bool,
}

impl LineSplitter {
    fn new(max: usize) -> Self {
        LineSplitter { max, partial: Vec::new(), skipping: false }
    }

    fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<String>, counts: &mut TailCounts) {
        while let Some(nl) = bytes.iter().position(|&b| b == b'\n') {
            let seg = &bytes[..nl];
            bytes = &bytes[nl + 1..];
            if self.skipping {
                self.skipping = false;
            } else if self.partial.len() + seg.len() > self.max {
                counts.long_lines_skipped += 1;
                self.partial.clear();
            } else if self.partial.is_empty() {
                // Common case: the whole line is in this chunk, no copy into `partial`.
                out.push(decode(seg, counts));
            } else {
                self.partial.extend_from_slice(seg);
                let line = std::mem::take(&mut self.partial);
                out.push(decode(&line, counts));
            }
        }
        if self.skipping || bytes.is_empty() {
            return;
        }
        if self.partial.len() + bytes.len() > self.max {
            // Stop buffering now: the rest of this line is dropped as it arrives.
            counts.long_lines_skipped += 1;
            self.partial = Vec::new();
            self.skipping = true;
        } else {
            self.partial.extend_from_slice(bytes);
        }
    }

    /// The source ended: an unterminated last line will never get its
    /// newline, so it is a line as it stands.
    fn flush(&mut self, out: &mut Vec<String>, counts: &mut TailCounts) {
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            out.push(decode(&line, counts));
        }
        self.skipping = false;
    }

    /// Discard until the next newline without counting: used when starting
    /// at the end of a file, in the middle of a line.
    fn resync(&mut self) {
        self.partial.clear();
        self.skipping = true;
    }
}

fn decode(line: &[u8], counts: &mut TailCounts) -> String {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    match std::str::from_utf8(line) {
        Ok(s) => s.to_owned(),
        Err(_) => {
            counts.invalid_utf8_lines += 1;
            String::from_utf8_lossy(line).into_owned()
        }
    }
}

/// Identity of a file, to notice that the path now names another one.
#[cfg(unix)]
fn file_id(m: &Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (m.dev(), m.ino())
}

/// Without inode numbers only truncation and deletion can be detected.
#[cfg(not(unix))]
fn file_id(_m: &Metadata) -> (u64, u64) {
    (0, 0)
}

#[derive(Debug)]
struct OpenFile {
    file: File,
    id: (u64, u64),
    offset: u64,
}

/// A synchronous `tail -F` over one path. See the module docs.
#[derive(Debug)]
pub struct Tailer {
    path: PathBuf,
    opts: TailOptions,
    open: Option<OpenFile>,
    splitter: LineSplitter,
    /// A file has been open before, so a new one is a replacement (counted,
    /// read from 0) and `StartAt::End` no longer applies.
    seen_before: bool,
    totals: TailCounts,
    buf: Vec<u8>,
}

impl Tailer {
    pub fn new(path: impl Into<PathBuf>, opts: TailOptions) -> Self {
        Tailer {
            path: path.into(),
            splitter: LineSplitter::new(opts.max_line_bytes),
            opts,
            open: None,
            seen_before: false,
            totals: TailCounts::default(),
            buf: Vec::new(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Counters since creation.
    pub fn totals(&self) -> TailCounts {
        self.totals
    }

    /// Bytes held for an unfinished line (never more than the line cap).
    pub fn pending_bytes(&self) -> usize {
        self.splitter.partial.len()
    }

    /// Reads what is new. `Err` only for I/O failures other than the file
    /// being absent (which is `TailState::Missing`).
    pub fn poll(&mut self) -> io::Result<TailBatch> {
        let mut batch = TailBatch::new(TailState::Following);
        let result = self.poll_into(&mut batch);
        self.totals.add(&batch.counts);
        result.map(|()| batch)
    }

    fn poll_into(&mut self, batch: &mut TailBatch) -> io::Result<()> {
        let mut budget = self.opts.max_bytes_per_poll.max(1);
        if let Some(mut of) = self.open.take() {
            match std::fs::metadata(&self.path) {
                Ok(m) if file_id(&m) == of.id => {
                    if m.len() < of.offset {
                        batch.counts.truncations += 1;
                        self.splitter.flush(&mut batch.lines, &mut batch.counts);
                        of.file.seek(SeekFrom::Start(0))?;
                        of.offset = 0;
                    }
                    let done = self.read_from(&mut of, &mut budget, batch)?;
                    batch.more = !done;
                    self.open = Some(of);
                    return Ok(());
                }
                Ok(_) => {
                    // Rotated or replaced: finish what was written to the old
                    // file before the switch, then fall through to reopen.
                    self.drain_old(of, &mut budget, batch)?;
                    if batch.more {
                        return Ok(());
                    }
                    batch.counts.rotations += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    self.drain_old(of, &mut budget, batch)?;
                    if !batch.more {
                        batch.state = TailState::Missing;
                    }
                    return Ok(());
                }
                Err(e) => {
                    self.open = Some(of);
                    return Err(e);
                }
            }
        }
        // Nothing open: (re)open the path.
        let file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                batch.state = TailState::Missing;
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let m = file.metadata()?;
        if self.seen_before && batch.counts.rotations == 0 {
            // It was gone (Missing) and is back: a replacement too.
            batch.counts.rotations += 1;
        }
        let mut of = OpenFile { file, id: file_id(&m), offset: 0 };
        if !self.seen_before && self.opts.start == StartAt::End && m.len() > 0 {
            of.offset = of.file.seek(SeekFrom::End(0))?;
            // If the file does not end with a newline we are mid-line: skip to the next one.
            let mut last = [0u8; 1];
            of.file.seek(SeekFrom::End(-1))?;
            of.file.read_exact(&mut last)?;
            if last[0] != b'\n' {
                self.splitter.resync();
            }
        }
        self.seen_before = true;
        let done = self.read_from(&mut of, &mut budget, batch)?;
        batch.more = !done;
        self.open = Some(of);
        Ok(())
    }

    /// Reads the rest of a file that the path no longer names. If the budget
    /// runs out first it is kept open and read again next poll.
    fn drain_old(&mut self, mut of: OpenFile, budget: &mut usize, batch: &mut TailBatch) -> io::Result<()> {
        if self.read_from(&mut of, budget, batch)? {
            self.splitter.flush(&mut batch.lines, &mut batch.counts);
        } else {
            batch.more = true;
            self.open = Some(of);
        }
        Ok(())
    }

    /// Reads from `of.offset` to EOF or until `budget` is spent. Returns true at EOF.
    fn read_from(
        &mut self,
        of: &mut OpenFile,
        budget: &mut usize,
        batch: &mut TailBatch,
    ) -> io::Result<bool> {
        const CHUNK: usize = 64 * 1024;
        if self.buf.len() != CHUNK {
            self.buf.resize(CHUNK, 0);
        }
        loop {
            if *budget == 0 {
                return Ok(false);
            }
            let want = CHUNK.min(*budget);
            let n = match of.file.read(&mut self.buf[..want]) {
                Ok(0) => return Ok(true),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            *budget -= n;
            of.offset += n as u64;
            self.splitter.feed(&self.buf[..n], &mut batch.lines, &mut batch.counts);
        }
    }
}

/// Polls `path` every `interval` and sends each batch that carries lines,
/// counter changes or a state change. Blocking file I/O runs on tokio's
/// blocking pool so a slow disk never stalls the UI task. Returns when the
/// receiver is dropped.
pub async fn run_tailer(path: PathBuf, opts: TailOptions, interval: Duration, tx: Sender<TailBatch>) {
    let mut tailer = Some(Tailer::new(path, opts));
    let mut last_state: Option<TailState> = None;
    loop {
        let Some(mut t) = tailer.take() else { return };
        let Ok((t, result)) = tokio::task::spawn_blocking(move || {
            let r = t.poll();
            (t, r)
        })
        .await
        else {
            // The poll panicked (it should not); stop rather than spin.
            return;
        };
        tailer = Some(t);
        let batch = match result {
            Ok(b) => b,
            Err(e) => TailBatch::new(TailState::Error(e.to_string())),
        };
        let more = batch.more;
        let changed = last_state.as_ref() != Some(&batch.state);
        if changed || !batch.lines.is_empty() || !batch.counts.is_zero() {
            last_state = Some(batch.state.clone());
            if tx.send(batch).await.is_err() {
                return;
            }
        }
        if !more {
            tokio::time::sleep(interval).await;
        }
    }
}

/// Reads lines from a blocking reader (stdin for `-`) with the same
/// splitting rules as the file tailer, on tokio's blocking pool (the tokio
/// build here has no async stdin, and a blocking read must not sit on the UI
/// task). Sends a final batch in state `Ended` at EOF; a read error is sent
/// as `TailState::Error` and ends the reader. Returns when done or when the
/// receiver is dropped.
pub async fn run_reader<R: Read + Send + 'static>(reader: R, opts: TailOptions, tx: Sender<TailBatch>) {
    let _ = tokio::task::spawn_blocking(move || read_blocking(reader, opts, tx)).await;
}

fn read_blocking<R: Read>(mut reader: R, opts: TailOptions, tx: Sender<TailBatch>) {
    let mut splitter = LineSplitter::new(opts.max_line_bytes);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let mut batch = TailBatch::new(TailState::Following);
        match reader.read(&mut buf) {
            Ok(0) => {
                splitter.flush(&mut batch.lines, &mut batch.counts);
                batch.state = TailState::Ended;
                let _ = tx.blocking_send(batch);
                return;
            }
            Ok(n) => splitter.feed(&buf[..n], &mut batch.lines, &mut batch.counts),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let _ = tx.blocking_send(TailBatch::new(TailState::Error(e.to_string())));
                return;
            }
        }
        if (!batch.lines.is_empty() || !batch.counts.is_zero()) && tx.blocking_send(batch).is_err() {
            return;
        }
    }
}

/// Follows `source`: `-` means stdin, anything else is a file path.
pub async fn run_source(source: &str, opts: TailOptions, interval: Duration, tx: Sender<TailBatch>) {
    if source == "-" {
        run_reader(io::stdin(), opts, tx).await;
    } else {
        run_tailer(PathBuf::from(source), opts, interval, tx).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::OpenOptions;
    use std::io::Write;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A unique path under the system temp dir, removed on drop.
    struct TempPath(PathBuf);

    impl TempPath {
        fn new(name: &str) -> Self {
            static N: AtomicU32 = AtomicU32::new(0);
            let n = N.fetch_add(1, Ordering::Relaxed);
            let p = std::env::temp_dir().join(format!("pdtop-tail-{}-{n}-{name}.log", std::process::id()));
            let _ = std::fs::remove_file(&p);
            TempPath(p)
        }
    }

    impl Drop for TempPath {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
            let _ = std::fs::remove_file(self.0.with_extension("log.1"));
        }
    }

    fn append(p: &Path, bytes: &[u8]) {
        let mut f = OpenOptions::new().create(true).append(true).open(p).expect("open for append");
        f.write_all(bytes).expect("write");
    }

    fn poll(t: &mut Tailer) -> TailBatch {
        t.poll().expect("poll")
    }

    #[test]
    fn pieces_and_partial_lines() {
        let p = TempPath::new("pieces");
        append(&p.0, b"ab");
        let mut t = Tailer::new(&p.0, TailOptions::default());
        assert!(poll(&mut t).lines.is_empty());
        append(&p.0, b"c\nde");
        assert_eq!(poll(&mut t).lines, ["abc"]);
        assert_eq!(t.pending_bytes(), 2);
        append(&p.0, b"f\n\ng\n");
        assert_eq!(poll(&mut t).lines, ["def", "", "g"]);
        assert!(poll(&mut t).lines.is_empty());
    }

    #[test]
    fn crlf_endings() {
        let p = TempPath::new("crlf");
        append(&p.0, b"a\r\nb\r\n");
        let mut t = Tailer::new(&p.0, TailOptions::default());
        assert_eq!(poll(&mut t).lines, ["a", "b"]);
    }

    #[test]
    fn truncation_restarts_at_zero() {
        let p = TempPath::new("trunc");
        append(&p.0, b"one\ntwo\nthree\n");
        let mut t = Tailer::new(&p.0, TailOptions::default());
        assert_eq!(poll(&mut t).lines.len(), 3);
        OpenOptions::new().write(true).open(&p.0).expect("open").set_len(0).expect("truncate");
        append(&p.0, b"new\n");
        let b = poll(&mut t);
        assert_eq!(b.lines, ["new"]);
        assert_eq!(b.counts.truncations, 1);
        assert_eq!(t.totals().truncations, 1);
    }

    #[test]
    fn rotation_drains_old_then_reads_new() {
        let p = TempPath::new("rot");
        append(&p.0, b"a\n");
        let mut t = Tailer::new(&p.0, TailOptions::default());
        assert_eq!(poll(&mut t).lines, ["a"]);
        append(&p.0, b"b\nunterminated");
        std::fs::rename(&p.0, p.0.with_extension("log.1")).expect("rename");
        append(&p.0, b"c\n");
        let b = poll(&mut t);
        assert_eq!(b.lines, ["b", "unterminated", "c"]);
        assert_eq!(b.counts.rotations, 1);
        append(&p.0, b"d\n");
        assert_eq!(poll(&mut t).lines, ["d"]);
    }

    #[test]
    fn deleted_file_is_a_state_then_comes_back() {
        let p = TempPath::new("del");
        let mut t = Tailer::new(&p.0, TailOptions::default());
        // Missing from the start: a state, not an error.
        assert_eq!(poll(&mut t).state, TailState::Missing);
        append(&p.0, b"x\n");
        let b = poll(&mut t);
        assert_eq!((b.lines.as_slice(), b.counts.rotations), (&["x".to_string()][..], 0));
        std::fs::remove_file(&p.0).expect("remove");
        for _ in 0..3 {
            let b = poll(&mut t);
            assert_eq!(b.state, TailState::Missing);
            assert!(b.lines.is_empty());
        }
        append(&p.0, b"y\n");
        let b = poll(&mut t);
        assert_eq!((b.lines.as_slice(), b.counts.rotations), (&["y".to_string()][..], 1));
        assert_eq!(b.state, TailState::Following);
    }

    #[test]
    fn two_mib_line_is_skipped_without_buffering_it() {
        let p = TempPath::new("long");
        append(&p.0, b"short\n");
        let mut t = Tailer::new(&p.0, TailOptions::default());
        assert_eq!(poll(&mut t).lines, ["short"]);
        let piece = vec![b'x'; 256 * 1024];
        for _ in 0..8 {
            append(&p.0, &piece);
            assert!(poll(&mut t).lines.is_empty());
            assert!(t.pending_bytes() <= 1 << 20);
        }
        append(&p.0, b"\nafter\n");
        let b = poll(&mut t);
        assert_eq!(b.lines, ["after"]);
        assert_eq!(t.totals().long_lines_skipped, 1);
        assert_eq!(t.pending_bytes(), 0);
    }

    #[test]
    fn long_line_inside_one_read_is_skipped() {
        let p = TempPath::new("long1");
        let mut data = b"a\n".to_vec();
        data.extend(vec![b'y'; 2 << 20]);
        data.extend_from_slice(b"\nb\n");
        append(&p.0, &data);
        let mut t = Tailer::new(&p.0, TailOptions::default());
        let mut lines = Vec::new();
        loop {
            let b = poll(&mut t);
            lines.extend(b.lines);
            if !b.more {
                break;
            }
        }
        assert_eq!(lines, ["a", "b"]);
        assert_eq!(t.totals().long_lines_skipped, 1);
    }

    #[test]
    fn invalid_utf8_is_lossy_and_counted() {
        let p = TempPath::new("utf8");
        append(&p.0, b"ok\n\xff\xfebad\n");
        let mut t = Tailer::new(&p.0, TailOptions::default());
        let b = poll(&mut t);
        assert_eq!(b.lines, ["ok", "\u{FFFD}\u{FFFD}bad"]);
        assert_eq!(b.counts.invalid_utf8_lines, 1);
    }

    #[test]
    fn start_at_end_skips_existing_and_mid_line() {
        let p = TempPath::new("end");
        append(&p.0, b"old\nhalf");
        let opts = TailOptions { start: StartAt::End, ..TailOptions::default() };
        let mut t = Tailer::new(&p.0, opts);
        assert!(poll(&mut t).lines.is_empty());
        append(&p.0, b"-line\nnew\n");
        assert_eq!(poll(&mut t).lines, ["new"]);
    }

    #[test]
    fn byte_budget_spreads_catch_up() {
        let p = TempPath::new("budget");
        append(&p.0, "l\n".repeat(1000).as_bytes());
        let opts = TailOptions { max_bytes_per_poll: 100, ..TailOptions::default() };
        let mut t = Tailer::new(&p.0, opts);
        let (mut n, mut polls) = (0, 0);
        loop {
            let b = poll(&mut t);
            n += b.lines.len();
            polls += 1;
            if !b.more {
                break;
            }
        }
        assert_eq!((n, polls), (1000, 21));
    }

    #[tokio::test]
    async fn async_tailer_sends_batches() {
        let p = TempPath::new("async");
        append(&p.0, b"hello\n");
        let (tx, mut rx) = tokio::sync::mpsc::channel(4);
        let task =
            tokio::spawn(run_tailer(p.0.clone(), TailOptions::default(), Duration::from_millis(5), tx));
        let b = rx.recv().await.expect("batch");
        assert_eq!(b.lines, ["hello"]);
        append(&p.0, b"world\n");
        let b = rx.recv().await.expect("batch");
        assert_eq!(b.lines, ["world"]);
        drop(rx);
        append(&p.0, b"x\n");
        // The runner notices the dropped receiver on its next send and returns.
        tokio::time::timeout(Duration::from_secs(5), task).await.expect("runner stops").expect("no panic");
    }

    #[tokio::test]
    async fn reader_splits_and_ends() {
        let data = io::Cursor::new(b"a\r\nb\nc".to_vec());
        let (tx, mut rx) = tokio::sync::mpsc::channel(8);
        run_reader(data, TailOptions::default(), tx).await;
        let mut lines = Vec::new();
        let mut last = None;
        while let Some(b) = rx.recv().await {
            lines.extend(b.lines);
            last = Some(b.state);
        }
        assert_eq!(lines, ["a", "b", "c"]);
        assert_eq!(last, Some(TailState::Ended));
    }
}
