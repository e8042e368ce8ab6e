use super::*;
use crate::feed::TailState;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
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

#[test]
fn only_news_passes_the_change_filter() {
    let p = TempPath::new("filter");
    let mut t = Tailer::new(&p.0, TailOptions::default());
    let mut f = ChangeFilter::default();
    // Missing at first: a state is news once.
    assert!(f.admit(&poll(&mut t)));
    assert!(!f.admit(&poll(&mut t)));
    append(&p.0, b"a\n");
    assert!(f.admit(&poll(&mut t)), "lines and a new state");
    assert!(!f.admit(&poll(&mut t)), "a quiet poll");
    append(&p.0, b"b\n");
    assert!(f.admit(&poll(&mut t)), "lines");
    OpenOptions::new().write(true).open(&p.0).expect("open").set_len(0).expect("truncate");
    let b = poll(&mut t);
    assert_eq!((b.lines.len(), b.counts.truncations), (0, 1));
    assert!(f.admit(&b), "a counter moved");
    assert!(!f.admit(&poll(&mut t)));
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
