//! Recordings: everything pdtop saw, in one compressed file, replayable at
//! any speed (`docs/recording.md`). Version 2 is one zstd stream of JSON
//! lines: a header holding the [`Session`], then every [`Msg`] as the
//! collectors sent it. Version 1 files are still read ([`v1`]).

pub mod v1;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::feed::Msg;
use crate::pipeline::Session;

pub const FORMAT: &str = "pdtop-recording";
pub const VERSION: u32 = 2;

/// The first line of a recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub format: String,
    pub version: u32,
    pub session: Session,
}

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
    pub fn new(out: W, session: &Session) -> std::io::Result<Writer<W>> {
        let mut enc = zstd::stream::Encoder::new(out, LEVEL)?.auto_finish();
        let header = Header { format: FORMAT.into(), version: VERSION, session: session.clone() };
        serde_json::to_writer(&mut enc, &header)?;
        enc.write_all(b"\n")?;
        // The header first, alone: a recorder killed at once leaves a file
        // that says what it was.
        enc.flush()?;
        Ok(Writer { enc, entries: 0 })
    }

    pub fn write(&mut self, m: &Msg) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.enc, m)?;
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
    pub session: Session,
    /// The format version the file was written in.
    pub version: u32,
    pub messages: Vec<Msg>,
    /// Where a damaged file stopped being readable: `messages` holds every
    /// whole entry before it (a recorder killed mid-write leaves a cut
    /// tail; the writer flushes every second, so that is all it loses).
    pub broken: Option<Broken>,
}

/// Where a recording broke and what was lost.
#[derive(Debug, Clone, PartialEq)]
pub struct Broken {
    pub error: ReadError,
    /// Bytes of the file from the break to its end, not read.
    pub bytes_lost: u64,
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}; every whole entry before it is played", self.error)?;
        if self.bytes_lost > 0 {
            write!(f, ", the last {} bytes of the file are lost", self.bytes_lost)?;
        }
        Ok(())
    }
}

/// The zstd frame's magic number: a file that does not start with it was
/// never a recording (a log, a capture's text file).
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

impl Recording {
    pub fn open(path: &Path) -> Result<Recording, ReadError> {
        let f = std::fs::File::open(path).map_err(|e| ReadError {
            file_offset: 0,
            line: None,
            reason: format!("{}: {e}", path.display()),
        })?;
        let size = f.metadata().map(|m| m.len()).ok();
        let mut r = Recording::read(f)?;
        if let (Some(b), Some(size)) = (&mut r.broken, size) {
            b.bytes_lost = size.saturating_sub(b.error.file_offset);
        }
        Ok(r)
    }

    /// Reads and checks a recording. A file that is not one, or whose
    /// header cannot be read, is an error naming the byte offset; damage
    /// after the header keeps every whole entry before it (`broken`
    /// says where). Never a panic.
    pub fn read(input: impl Read) -> Result<Recording, ReadError> {
        let pos = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let mut counting = Counting { inner: input, pos: pos.clone() };
        let err = |line: Option<u64>, reason: String| ReadError {
            file_offset: pos.load(std::sync::atomic::Ordering::Relaxed),
            line,
            reason,
        };
        let mut magic = [0u8; 4];
        let got =
            read_up_to(&mut counting, &mut magic).map_err(|e| err(None, format!("cannot read: {e}")))?;
        if got == 0 {
            return Err(err(None, "empty file".into()));
        }
        if magic[..got] != ZSTD_MAGIC[..got] || got < 4 {
            return Err(err(None, format!("not a pdtop recording: {}", what_it_is(&magic[..got]))));
        }
        let dec = zstd::stream::Decoder::new(std::io::Cursor::new(magic).chain(counting))
            .map_err(|e| err(None, format!("not zstd: {e}")))?;
        let mut reader = BufReader::new(dec);
        let mut line = Vec::new();
        let mut n = 0u64;
        let mut header: Option<(u32, Session)> = None;
        let mut messages = Vec::new();
        let mut broken = None;
        loop {
            line.clear();
            let got = match read_line(&mut reader, &mut line) {
                Ok(got) => got,
                Err(e) => {
                    broken = Some(err(Some(n + 1), e));
                    break;
                }
            };
            if got == 0 {
                break;
            }
            n += 1;
            if line.last() != Some(&b'\n') {
                broken = Some(err(Some(n), "the last line is cut short (truncated file)".into()));
                break;
            }
            let entry = match &header {
                None => {
                    header = Some(read_header(&line).map_err(|e| err(Some(n), e))?);
                    continue;
                }
                Some((1, _)) => serde_json::from_slice::<v1::Entry>(&line).map(v1::Entry::into_msg),
                Some(_) => serde_json::from_slice::<Msg>(&line),
            };
            match entry {
                Ok(m) => messages.push(m),
                Err(e) => {
                    broken = Some(err(Some(n), format!("bad entry: {e}")));
                    break;
                }
            }
        }
        let Some((version, session)) = header else {
            return Err(broken.unwrap_or_else(|| err(None, "empty recording".into())));
        };
        let broken = broken.map(|error| Broken { error, bytes_lost: 0 });
        Ok(Recording { session, version, messages, broken })
    }
}

/// The header line, of either version, as the session it describes.
fn read_header(line: &[u8]) -> Result<(u32, Session), String> {
    #[derive(Deserialize)]
    struct Peek {
        format: String,
        version: u32,
    }
    let peek: Peek = serde_json::from_slice(line).map_err(|e| format!("not a pdtop recording: {e}"))?;
    if peek.format != FORMAT {
        return Err(format!("format is {:?}, not {FORMAT:?}", peek.format));
    }
    match peek.version {
        1 => {
            let h: v1::Header =
                serde_json::from_slice(line).map_err(|e| format!("bad header of format version 1: {e}"))?;
            Ok((1, h.into_session().map_err(|e| format!("header of format version 1: {e}"))?))
        }
        VERSION => {
            let h: Header = serde_json::from_slice(line).map_err(|e| format!("bad header: {e}"))?;
            Ok((VERSION, h.session))
        }
        v => Err(format!("format version {v} is not one this pdtop reads (1 and {VERSION})")),
    }
}

/// Fills `buf` as far as the input goes.
fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// What a file that is no recording starts like.
fn what_it_is(head: &[u8]) -> String {
    if !head.is_empty() && head.iter().all(|b| b.is_ascii_graphic() || b.is_ascii_whitespace()) {
        format!("it is text (starts {:?}), not a zstd stream", String::from_utf8_lossy(head))
    } else {
        format!("it does not start with zstd's magic number (starts {head:02x?})")
    }
}

/// Reads one line, refusing absurdly long ones.
fn read_line(r: &mut impl BufRead, out: &mut Vec<u8>) -> Result<usize, String> {
    let mut total = 0;
    loop {
        // Said in pdtop's words: zstd's own are stripped from its build (`thin`).
        let buf = r.fill_buf().map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => {
                "the compressed stream is cut short (truncated file)".to_string()
            }
            _ => "decompression failed: the compressed data is damaged".to_string(),
        })?;
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
    use crate::feed::{
        Endpoint, FolderStat, IfaceBytes, LogOrigin, ModelInfo, NetDevSnapshot, Role, TailCounts, TailState,
    };
    use crate::state::link::KvModel;

    fn session() -> Session {
        Session {
            started: 1.0,
            endpoints: vec![
                Endpoint::parse(Role::Prefill, "127.0.0.1:8100").unwrap(),
                Endpoint::parse(Role::Decode, "127.0.0.1:8200").unwrap(),
            ],
            router: Some(crate::feed::RouterEndpoint::parse("127.0.0.1:29000").unwrap()),
            logs: vec![(LogOrigin::Decode(0), "decode.log".into())],
            iface: Some("lo".into()),
            kv_model: Some(KvModel { bytes_per_token: 147_456, source: "test".into(), layers: Some(36) }),
            kv_cache_dtype: Some("fp8".into()),
            window_secs: 60.0,
            clock_speed: 2.0,
            clock_origin: None,
            show_prompts: false,
            collect: None,
        }
    }

    fn write(session: &Session, msgs: &[Msg]) -> Vec<u8> {
        let mut out = Vec::new();
        {
            let mut w = Writer::new(&mut out, session).unwrap();
            for m in msgs {
                w.write(m).unwrap();
            }
        }
        out
    }

    fn sample() -> Vec<u8> {
        let msgs: Vec<Msg> = (0..200)
            .map(|i| Msg::Scrape { instance: i % 2, at: i as f64, body: format!("vllm:x {i}\n").repeat(50) })
            .collect();
        write(&session(), &msgs)
    }

    #[test]
    fn round_trip() {
        let r = Recording::read(&sample()[..]).unwrap();
        assert_eq!((r.version, &r.session), (VERSION, &session()));
        assert_eq!(r.messages.len(), 200);
        match &r.messages[3] {
            Msg::Scrape { instance, at, body } => {
                assert_eq!((*instance, *at), (1, 3.0));
                assert!(body.starts_with("vllm:x 3\n"));
            }
            other => panic!("{other:?}"),
        }
    }

    /// 200 scrapes, flushed every 10 as the recorder flushes every second.
    fn flushed() -> (Vec<Msg>, Vec<u8>) {
        let msgs: Vec<Msg> = (0..200)
            .map(|i| Msg::Scrape { instance: i % 2, at: i as f64, body: format!("vllm:x {i}\n").repeat(50) })
            .collect();
        let mut out = Vec::new();
        {
            let mut w = Writer::new(&mut out, &session()).unwrap();
            for (i, m) in msgs.iter().enumerate() {
                w.write(m).unwrap();
                if i % 10 == 9 {
                    w.flush().unwrap();
                }
            }
        }
        (msgs, out)
    }

    #[test]
    fn a_cut_tail_keeps_every_whole_entry_before_it() {
        let (msgs, bytes) = flushed();
        // The header's own flushed block, alone.
        let mut head = Vec::new();
        drop(Writer::new(&mut head, &session()).unwrap());
        let mut kept = 0;
        for cut in (head.len()..bytes.len() - 1).step_by(bytes.len() / 40) {
            let r = Recording::read(&bytes[..cut]).unwrap();
            let b = r.broken.as_ref().expect("cut short");
            assert!(b.error.file_offset <= cut as u64, "{b}");
            assert_eq!(r.messages[..], msgs[..r.messages.len()], "a prefix, whole");
            assert!(r.messages.len() >= kept, "a longer head never keeps less");
            assert!(b.error.reason.contains("cut short (truncated file)"), "{b}");
            kept = r.messages.len();
        }
        assert!(kept >= 180, "the last cut keeps all but the last flush: {kept}");
        // The whole file is whole.
        let r = Recording::read(&bytes[..]).unwrap();
        assert_eq!((r.messages.len(), r.broken), (200, None));
    }

    #[test]
    fn damage_before_the_header_is_an_error_naming_the_offset() {
        let bytes = sample();
        for cut in [0, 3, 5] {
            let e = Recording::read(&bytes[..cut]).unwrap_err();
            assert!(e.to_string().contains("at byte"), "{e}");
            assert!(e.file_offset <= cut as u64, "{e:?}");
        }
        let e = Recording::read(&b"not a recording at all"[..]).unwrap_err();
        assert!(e.to_string().contains("not a pdtop recording: it is text"), "{e}");
        let e = Recording::read(&[0u8, 1, 2, 3, 4][..]).unwrap_err();
        assert!(e.to_string().contains("zstd's magic number"), "{e}");
    }

    #[test]
    fn damage_in_the_middle_keeps_the_head() {
        let (msgs, mut bad) = flushed();
        let mid = bad.len() / 2;
        for b in &mut bad[mid..mid + 16] {
            *b ^= 0x5a;
        }
        let r = Recording::read(&bad[..]).unwrap();
        let b = r.broken.as_ref().expect("damaged");
        // In pdtop's words, not zstd's (stripped from its build).
        assert!(b.error.reason.contains("damaged") || b.error.reason.contains("bad entry"), "{b}");
        assert!(!b.error.reason.contains("stripped"), "{b}");
        assert!(r.messages.len() >= 50, "{}", r.messages.len());
        assert_eq!(r.messages[..], msgs[..r.messages.len()]);
    }

    /// The recording writes the messages themselves: every kind, every
    /// field (the old mirror dropped `config_json`) comes back equal.
    #[test]
    fn every_message_kind_survives() {
        let info = ModelInfo {
            id: "lab-8b".into(),
            root: Some("/models/q".into()),
            max_model_len: Some(8192),
            config_json: Some("{\"num_hidden_layers\": 36}".into()),
        };
        let folders = [("abc".to_string(), FolderStat { files: 36, bytes: 2_359_296 })].into_iter().collect();
        let ifaces = [("lo".to_string(), IfaceBytes { rx_bytes: 1, tx_bytes: 2 })].into_iter().collect();
        let msgs = vec![
            Msg::Scrape { instance: 0, at: 1.0, body: "vllm:x 1\n".into() },
            Msg::ScrapeFailed { instance: 1, at: 2.0, error: "refused".into() },
            Msg::Models { instance: 1, at: 2.5, info },
            Msg::Tick { at: 2.6 },
            Msg::SourceFailed { source: "log tailer".into(), at: 2.7, error: "stopped".into() },
            Msg::LogLines {
                source: LogOrigin::Decode(0),
                at: 3.0,
                lines: vec!["a".into()],
                state: TailState::Error("permission denied".into()),
                counts: TailCounts {
                    truncations: 1,
                    rotations: 2,
                    long_lines_skipped: 3,
                    invalid_utf8_lines: 4,
                },
            },
            Msg::LogLines {
                source: LogOrigin::Proxy,
                at: 3.1,
                lines: vec![],
                state: TailState::Missing,
                counts: TailCounts::default(),
            },
            Msg::KvDir { at: 4.0, scan: Err("gone".into()) },
            Msg::KvDir { at: 4.1, scan: Ok(folders) },
            Msg::NetDev { at: 5.0, read: Err("no lo".into()) },
            Msg::NetDev { at: 5.1, read: Ok(NetDevSnapshot { ifaces, ..Default::default() }) },
            Msg::LogsPolled { at: 6.0 },
            Msg::Discovered {
                instance: 2,
                at: 7.0,
                endpoint: Endpoint::parse(Role::Decode, "http://10.0.0.9:8000").unwrap(),
            },
            Msg::Version { instance: 1, at: 6.0, version: "0.26.0".into() },
            Msg::Spans {
                at: 8.0,
                spans: vec![crate::feed::RequestSpan {
                    service: "vllm-decode".into(),
                    trace_id: "ab".repeat(16),
                    name: "llm_request".into(),
                    start: 7.5,
                    end: 7.9,
                    request_id: "cmpl-x-0".into(),
                    ttft: Some(0.1),
                    queue: None,
                    prefill: Some(0.05),
                    decode: Some(0.3),
                    e2e: Some(0.4),
                    prompt_tokens: Some(10),
                    completion_tokens: Some(3),
                    error: Some("boom".into()),
                }],
                counts: crate::feed::SpanCounts { other: 2, dropped: 1 },
            },
            Msg::SpansRejected { at: 8.1, error: "not protobuf".into() },
            Msg::Router {
                at: 8.2,
                scrape: Ok("vllm_router_pd_requests_total{route=\"/v1/completions\"} 3\n".into()),
            },
            Msg::Router { at: 8.3, scrape: Err("cannot connect".into()) },
        ];
        let back = Recording::read(&write(&session(), &msgs)[..]).unwrap();
        assert_eq!(back.messages, msgs);
        // The router is part of the header a replay is built from.
        assert_eq!(back.session, session());
    }

    /// A version 1 file (as pdtop wrote them before version 2) reads into
    /// the same session and messages.
    #[test]
    fn version_1_files_are_read() {
        let lines = [
            r#"{"format":"pdtop-recording","version":1,"started":1.0,"prefill":["127.0.0.1:8100"],"decode":["127.0.0.1:8200"],"logs":[["decode#0","decode.log"]],"iface":"lo","kv_bytes_per_token":147456,"kv_source":"test","window_secs":60.0}"#,
            r#"{"k":"scrape","t":2.0,"i":1,"body":"vllm:x 1\n"}"#,
            r#"{"k":"log","t":3.0,"src":"decode#0","lines":["a"],"state":"following","counts":[0,1,0,0]}"#,
            r#"{"k":"polled","t":3.5}"#,
        ];
        let text = lines.join("\n") + "\n";
        let bytes = zstd::stream::encode_all(text.as_bytes(), 1).unwrap();
        let r = Recording::read(&bytes[..]).unwrap();
        assert_eq!(r.version, 1);
        assert_eq!(r.session.endpoints.len(), 2);
        assert_eq!(r.session.logs, vec![(LogOrigin::Decode(0), "decode.log".to_string())]);
        assert_eq!(r.session.kv_model.as_ref().map(|m| m.bytes_per_token), Some(147_456));
        assert_eq!(r.messages[0], Msg::Scrape { instance: 1, at: 2.0, body: "vllm:x 1\n".into() });
        assert!(matches!(&r.messages[1], Msg::LogLines { counts, .. } if counts.rotations == 1));
        assert_eq!(r.messages[2], Msg::LogsPolled { at: 3.5 });
        // A version this pdtop does not know is named.
        let v9 = zstd::stream::encode_all(
            &br#"{"format":"pdtop-recording","version":9}
"#[..],
            1,
        )
        .unwrap();
        let e = Recording::read(&v9[..]).unwrap_err();
        assert!(e.to_string().contains("format version 9"), "{e}");
    }
}
