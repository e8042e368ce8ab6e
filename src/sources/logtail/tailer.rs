//! [`Tailer`]: a synchronous `tail -F` over one path (see the module docs
//! of [`super`] for what it copes with).

use std::fs::{File, Metadata};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::batch::{StartAt, TailBatch, TailOptions};
use super::lines::LineSplitter;
use crate::feed::{TailCounts, TailState};

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
        self.splitter.pending()
    }

    /// Reads what is new. `Err` only for I/O failures other than the file
    /// being absent (which is `TailState::Missing`).
    pub fn poll(&mut self) -> io::Result<TailBatch> {
        let mut batch = TailBatch::new(TailState::Following);
        let result = self.poll_into(&mut batch);
        if batch.more && batch.state == TailState::Following {
            batch.state = TailState::CatchingUp;
        }
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
