//! Recordings: everything pdtop saw, in one compressed file, replayable at
//! any speed. The format is in [`format`] and `docs/recording.md`.

pub mod format;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;

pub use format::{Entry, FORMAT, Header, VERSION};

/// zstd level: scrapes repeat almost byte for byte, so even a fast level
/// finds the previous scrape within its window.
const LEVEL: i32 = 3;
/// Longest line accepted when reading (a scrape body is ~50 KB; a log
/// batch can be larger, but never this).
const MAX_LINE: usize = 256 * 1024 * 1024;

/// Writes a recording as entries arrive.
pub struct Writer<W: Write> {
    enc: zstd::stream::AutoFinishEncoder<'static, W>,
    pub entries: u64,
}

impl<W: Write> Writer<W> {
    pub fn new(out: W, header: &Header) -> std::io::Result<Writer<W>> {
        let mut enc = zstd::stream::Encoder::new(out, LEVEL)?.auto_finish();
        serde_json::to_writer(&mut enc, header)?;
        enc.write_all(b"\n")?;
        Ok(Writer { enc, entries: 0 })
    }

    pub fn write(&mut self, e: &Entry) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.enc, e)?;
        self.enc.write_all(b"\n")?;
        self.entries += 1;
        Ok(())
    }

    /// Flushes what is buffered so that a recording cut short (a crash, a
    /// kill) still holds everything up to here.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.enc.flush()
    }
}

/// Why a recording could not be read, with where.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadError {
    /// Offset in the compressed file (bytes consumed when it failed).
    pub file_offset: u64,
    /// Line of the decompressed text (1 = the header), if known.
    pub line: Option<u64>,
    pub reason: String,
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "recording unreadable at byte {} of the file", self.file_offset)?;
        if let Some(l) = self.line {
            write!(f, " (line {l})")?;
        }
        write!(f, ": {}", self.reason)
    }
}

impl std::error::Error for ReadError {}

/// Counts the compressed bytes consumed, to name the offset of a fault.
struct Counting<R> {
    inner: R,
    pos: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.pos.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(n)
    }
}

/// A whole recording, read into memory.
#[derive(Debug, Clone)]
pub struct Recording {
    pub header: Header,
    pub entries: Vec<Entry>,
}

impl Recording {
    pub fn open(path: &Path) -> Result<Recording, ReadError> {
        let f = std::fs::File::open(path).map_err(|e| ReadError {
            file_offset: 0,
            line: None,
            reason: format!("{}: {e}", path.display()),
        })?;
        Recording::read(f)
    }

    /// Reads and checks a whole recording. A truncated or corrupt file is
    /// an error naming the byte offset, never a panic.
    pub fn read(input: impl Read) -> Result<Recording, ReadError> {
        let pos = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counting = Counting { inner: input, pos: pos.clone() };
        let err = |line: Option<u64>, reason: String| ReadError {
            file_offset: pos.load(std::sync::atomic::Ordering::Relaxed),
            line,
            reason,
        };
        let dec = zstd::stream::Decoder::new(counting).map_err(|e| err(None, format!("not zstd: {e}")))?;
        let mut reader = BufReader::new(dec);
        let mut line = Vec::new();
        let mut n = 0u64;
        let mut header: Option<Header> = None;
        let mut entries = Vec::new();
        loop {
            line.clear();
            let got = read_line(&mut reader, &mut line).map_err(|e| err(Some(n + 1), e))?;
            if got == 0 {
                break;
            }
            n += 1;
            if line.last() != Some(&b'\n') {
                return Err(err(Some(n), "the last line is cut short (truncated file)".into()));
            }
            match &header {
                None => {
                    let h: Header = serde_json::from_slice(&line)
                        .map_err(|e| err(Some(n), format!("not a pdtop recording: {e}")))?;
                    if h.format != FORMAT {
                        return Err(err(Some(n), format!("format is {:?}, not {FORMAT:?}", h.format)));
                    }
                    if h.version > VERSION {
                        return Err(err(
                            Some(n),
                            format!("version {} is newer than this pdtop reads ({VERSION})", h.version),
                        ));
                    }
                    header = Some(h);
                }
                Some(_) => {
                    let e: Entry =
                        serde_json::from_slice(&line).map_err(|e| err(Some(n), format!("bad entry: {e}")))?;
                    entries.push(e);
                }
            }
        }
        let header = header.ok_or_else(|| err(None, "empty recording".into()))?;
        Ok(Recording { header, entries })
    }
}

/// Reads one line, refusing absurdly long ones.
fn read_line(r: &mut impl BufRead, out: &mut Vec<u8>) -> Result<usize, String> {
    let mut total = 0;
    loop {
        let buf = r.fill_buf().map_err(|e| format!("decompression failed: {e}"))?;
        if buf.is_empty() {
            return Ok(total);
        }
        let (used, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        out.extend_from_slice(&buf[..used]);
        r.consume(used);
        total += used;
        if done {
            return Ok(total);
        }
        if total > MAX_LINE {
            return Err("a line longer than 256 MiB".into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feed::Msg;

    fn header() -> Header {
        Header {
            format: FORMAT.into(),
            version: VERSION,
            started: 1.0,
            prefill: vec!["127.0.0.1:8100".into()],
            decode: vec!["127.0.0.1:8200".into()],
            logs: vec![("decode#0".into(), "decode.log".into())],
            iface: Some("lo".into()),
            kv_bytes_per_token: Some(147_456),
            kv_source: Some("test".into()),
            window_secs: 60.0,
        }
    }

    fn sample() -> Vec<u8> {
        let mut out = Vec::new();
        {
            let mut w = Writer::new(&mut out, &header()).unwrap();
            for i in 0..200 {
                let msg =
                    Msg::Scrape { instance: i % 2, at: i as f64, body: format!("vllm:x {i}\n").repeat(50) };
                w.write(&Entry::from_msg(&msg).unwrap()).unwrap();
            }
        }
        out
    }

    #[test]
    fn round_trip() {
        let r = Recording::read(&sample()[..]).unwrap();
        assert_eq!(r.header, header());
        assert_eq!(r.entries.len(), 200);
        match r.entries[3].clone().into_msg() {
            Msg::Scrape { instance, at, body } => {
                assert_eq!((instance, at), (1, 3.0));
                assert!(body.starts_with("vllm:x 3\n"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn truncated_and_corrupt_files_name_the_offset() {
        let bytes = sample();
        for cut in [0, 5, bytes.len() / 2, bytes.len() - 3] {
            let e = Recording::read(&bytes[..cut]).unwrap_err();
            assert!(e.to_string().contains("at byte"), "{e}");
            assert!(e.file_offset <= cut as u64, "{e:?}");
        }
        let mut bad = bytes.clone();
        let mid = bad.len() / 2;
        for b in &mut bad[mid..mid + 16] {
            *b ^= 0x5a;
        }
        let e = Recording::read(&bad[..]).unwrap_err();
        assert!(e.file_offset > 0, "{e:?}");
        let e = Recording::read(&b"not a recording at all"[..]).unwrap_err();
        assert!(e.to_string().contains("byte"), "{e}");
    }

    #[test]
    fn every_message_kind_survives() {
        use crate::feed::LogOrigin;
        use crate::feed::{TailCounts, TailState};
        let msgs = vec![
            Msg::ScrapeFailed { instance: 1, at: 2.0, error: "refused".into() },
            Msg::LogLines {
                source: LogOrigin::Decode(0),
                at: 3.0,
                lines: vec!["a".into()],
                state: TailState::Missing,
                counts: TailCounts {
                    truncations: 1,
                    rotations: 2,
                    long_lines_skipped: 3,
                    invalid_utf8_lines: 4,
                },
            },
            Msg::KvDir { at: 4.0, scan: Err("gone".into()) },
            Msg::NetDev { at: 5.0, read: Err("no lo".into()) },
        ];
        for m in msgs {
            let back = Entry::from_msg(&m).unwrap().into_msg();
            assert_eq!(format!("{m:?}"), format!("{back:?}"));
        }
    }
}
