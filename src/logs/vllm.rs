//! Parser for one line of a vLLM server's output (API server + engine core).
//!
//! The line shapes come from the recorded vLLM 0.26 logs in
//! `shared/lab-captures/` and from `docs/vllm-reference.md` §2 and §5:
//!
//! ```text
//! (APIServer pid=3126) INFO 11-30 06:25:31 [async_llm.py:415] Added request cmpl-lab-warmup-0-0-88659662.
//! (APIServer pid=3126) INFO:     127.0.0.1:55082 - "GET /metrics HTTP/1.1" 200 OK
//! INFO 11-30 06:25:31 [loggers.py:335] Engine 000: ...          (v0.33: no process prefix)
//! INFO:     127.0.0.1:1 - "GET /metrics HTTP/1.1" 200 OK        (v0.33 uvicorn: no prefix)
//! [1796020745.029561] [vm:1176 :0]  parser.c:2587 UCX  INFO ...  (foreign: UCX, c10d, flashinfer)
//! ```
//!
//! Everything is hand-matched on bytes (no regex): the parser runs on every
//! line of every tailed log, so it must be cheap, and it must never panic on
//! whatever a process writes to its stdout.

use super::connectors::parse_connector;
use super::failed::request_failed;
use super::glued::{glued_start, python_module};
use super::header::split_foreign;
use super::line::{clip, leading_u64, parse_access, split_uvicorn_level, strip_ansi, url_port};
use super::lmcache::parse_lmcache;
use super::outputs::response_done;
use super::prefix::{peel, split_vllm_header};
use super::proxies::{parse_proxy_text, parse_router, parse_sidecar, parse_uvicorn};
pub use super::signal::{Signal, SignalKind, Val};
pub use super::vllm_params::KvConfigFields;
pub use super::vllm_params::KvParams;
use super::vllm_params::{count_token_ids, kv_config, parse_received};

pub use super::line::{AccessLine, Level};
pub use super::prompt::{MAX_PROMPT_CHARS, prompt_of, redact_prompt};
pub use super::vllm_stats::{EngineStats, KvTransferMetrics};
use super::vllm_stats::{parse_engine_stats, parse_kv_metrics};

/// `(month, day, hour, minute, second)` as vLLM prints it (`%m-%d %H:%M:%S`).
/// vLLM logs carry no year and no time zone; the caller anchors it.
pub use super::line::Stamp;

/// One parsed line. Fields the line does not carry are `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct VllmLine {
    /// `APIServer`, `EngineCore`, `EngineCore_DP0`, `Worker_TP1`, ... from `(Name pid=N)`.
    pub process: Option<String>,
    pub pid: Option<u32>,
    /// The pod or compose service of a `kubectl`/`stern`/compose prefix.
    pub pod: Option<String>,
    /// Tensor-parallel rank from the process prefix (`rank=N`, `_TPn`).
    pub tp_rank: Option<u32>,
    pub level: Option<Level>,
    pub timestamp: Option<Stamp>,
    /// Foreign headers (LMCache, glog with 8 digits, tracing) carry a year.
    pub year: Option<u16>,
    pub event: VllmEvent,
    /// A connector, scheduler, LMCache, Mooncake, router or proxy line that
    /// `event` has no variant for (`event` is then `Other`).
    pub signal: Option<Signal>,
    /// Where the message begins (after every prefix and header), in bytes
    /// into the line without ANSI codes: what `logs::known` reads, so the
    /// prefixes are peeled once per line, not twice.
    pub message_at: usize,
    /// Uvicorn's own line (`INFO:     ...`).
    pub uvicorn: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum VllmEvent {
    /// `Received request <external id>: params: SamplingParams(...)`. The
    /// prompt text (older versions print it here) is skipped, never stored.
    Received {
        id: String,
        max_tokens: Option<u32>,
        kv_params: Option<KvParams>,
        /// Older versions (≤0.10) print `prompt_token_ids: [...]` after
        /// the params: the prompt length (a list cut short counts nothing).
        prompt_tokens: Option<u32>,
    },
    /// `Added request <internal id>.`; `external_id` drops the `-<8 hex>` suffix.
    Added {
        internal_id: String,
        external_id: String,
    },
    /// `Aborted request(s) a,b.`, `Aborted request X.` (V0, V1 to 0.10) (external ids).
    Aborted {
        ids: Vec<String>,
    },
    /// ExampleConnector scheduler side: the stored KV was found.
    ExternalCacheHit,
    /// ExampleConnector worker side: `Inject KV cache of N tokens to the paged memory`.
    InjectKv {
        tokens: u32,
    },
    /// NIXL producer: `Releasing expired KV blocks for request <internal id> which were
    /// retrieved by N remote worker(s) ...` — the consumer never pulled (a silent miss).
    KvExpired {
        id: String,
        retrieved_by: Option<u32>,
    },
    EngineStats(EngineStats),
    KvTransferMetrics(KvTransferMetrics),
    /// The engine is gone: `EngineCore encountered a fatal error`, `Engine core proc X
    /// died unexpectedly`, `EngineDeadError: ...`, `Engine core initialization failed`...
    EngineDead {
        text: String,
    },
    /// `Request <external id> failed (engine dead).`, `failed (bad
    /// request).` or `failed.`: the API server's word that this request
    /// failed, and why (`failed.rs`).
    RequestFailed {
        id: String,
        reason: &'static str,
    },
    /// `Error in completion stream generator.` (or chat): a stream broke;
    /// the line names no request.
    StreamError,
    /// `Request <id> details: prompt: ..., prompt_token_ids: [...]` (DEBUG,
    /// ≥0.14): the prompt length, never the text.
    RequestDetails {
        id: String,
        prompt_tokens: Option<u32>,
    },
    /// `Traceback (most recent call last):`. Not fatal by itself: the NIXL
    /// captures log two at WARNING for an optional import at every start.
    Traceback,
    /// Last line of a Python traceback, `ModuleNotFoundError: No module named ...`.
    Exception {
        name: String,
        text: String,
    },
    /// Uvicorn access line, with or without the `(APIServer pid=N) ` prefix.
    Access(AccessLine),
    /// `Starting vLLM server on http://127.0.0.1:8200`: a (re)start of the API server.
    ServerStarted {
        port: Option<u16>,
    },
    /// `[shutdown] ...` lines: an orderly stop (as opposed to `EngineDead`).
    Shutdown,
    /// From the `KVTransferConfig(...)` line, or the same repr inside `non-default args:`.
    KvConnectorConfig {
        fields: KvConfigFields,
        /// `'block_size': N` of the `non-default args` line that carried it.
        block_size: Option<u32>,
    },
    Other,
}

/// Parses one line (with or without its trailing `\n` / `\r\n`, or `^M` as a viewer shows a CR).
///
/// Returns `None` only for blank lines: anything else is at least
/// `VllmEvent::Other`, with the header fields it carries, so the caller can
/// still show foreign lines (UCX, c10d, flashinfer) in a log pane.
pub fn parse_vllm_line(line: &str) -> Option<VllmLine> {
    let line = strip_ansi(line);
    let line = line.trim_end_matches(['\n', '\r']).trim_end_matches("^M");
    if line.trim().is_empty() {
        return None;
    }
    let mut out = VllmLine {
        process: None,
        pid: None,
        pod: None,
        tp_rank: None,
        level: None,
        timestamp: None,
        year: None,
        event: VllmEvent::Other,
        signal: None,
        message_at: 0,
        uvicorn: false,
    };
    // `part` is a slice of `line`: its offset is where the message begins.
    let offset = |part: &str| {
        (part.as_ptr() as usize).checked_sub(line.as_ptr() as usize).filter(|o| *o <= line.len()).unwrap_or(0)
    };
    let p = peeled(line);
    out.process = p.process.map(String::from);
    out.pid = p.pid;
    out.pod = p.pod.map(String::from);
    out.tp_rank = p.tp_rank;
    let rest = p.rest;
    // Uvicorn's `INFO:     ...` (access and lifecycle lines).
    if let Some((level, after)) = split_uvicorn_level(rest) {
        out.level = Some(level);
        out.uvicorn = true;
        out.message_at = offset(after);
        if let Some(a) = parse_access(after) {
            out.event = VllmEvent::Access(a);
        } else {
            out.signal = parse_uvicorn(after);
        }
        return Some(out);
    }
    if let Some((level, ts, msg)) = split_vllm_header(rest) {
        out.level = Some(level);
        out.timestamp = Some(ts);
        out.message_at = offset(msg);
        out.event = parse_message(msg);
        out.signal = other_signal(&out.event, msg);
        return Some(out);
    }
    // A Python logger's line through a Rust `tracing` subscriber (Dynamo's
    // workers): vLLM's own message under its module's name.
    if let Some(f) = split_foreign(rest).filter(|f| python_module(f.target)) {
        out.level = f.level;
        out.timestamp = Some(f.stamp);
        out.year = f.year;
        out.message_at = offset(f.msg);
        out.event = parse_message(f.msg);
        out.signal = other_signal(&out.event, f.msg);
        return Some(out);
    }
    out.message_at = offset(rest);
    if let Some(f) = split_foreign(rest) {
        out.level = f.level;
        out.timestamp = Some(f.stamp);
        out.year = f.year;
        let sig = if !f.target.is_empty() || !f.spans.is_empty() {
            parse_router(f.spans, f.target, f.msg)
        } else {
            parse_lmcache(f.msg).or_else(|| parse_connector(f.msg)).or_else(|| parse_sidecar(f.msg))
        };
        out.signal = sig;
        return Some(out);
    }
    // Raw stderr (a traceback printed without the logger) still counts.
    out.event = parse_message(rest.trim_start());
    out.signal = other_signal(&out.event, rest.trim_start());
    Some(out)
}

/// Every prefix peeled, and text glued in front of a vLLM line (a paste,
/// a progress bar, a sentence of prose) skipped: where the line's own
/// header starts.
fn peeled(line: &str) -> super::prefix::Peeled<'_> {
    let mut p = peel(line);
    if p.process.is_none()
        && p.prefixes == 0
        && let Some(i) = glued_start(p.rest)
    {
        let prefix = p.prefix.len() + i;
        p = peel(&p.rest[i..]);
        p.prefixes += 1;
        p.prefix = &line[..prefix + p.prefix.len()];
    }
    p
}

/// The time a line was printed with (vLLM's `MM-DD HH:MM:SS`, or a
/// `tracing` or LMCache header's, with its year where it has one), read
/// without parsing the message: what a line is dated by before it is read.
pub fn stamp_of(line: &str) -> Option<(Stamp, Option<u16>)> {
    let line = strip_ansi(line);
    let p = peeled(&line);
    if split_uvicorn_level(p.rest).is_some() {
        return None;
    }
    if let Some((_, ts, _)) = split_vllm_header(p.rest) {
        return Some((ts, None));
    }
    split_foreign(p.rest).map(|f| (f.stamp, f.year))
}

/// The line with its vLLM stamp (`MM-DD HH:MM:SS`) replaced by what `f`
/// makes of it; `None` for a line without one. The demo's lab prints its
/// recording's lines on its own clock with it.
pub fn restamp(line: &str, f: impl Fn(Stamp) -> Stamp) -> Option<String> {
    let p = peeled(line);
    let (_, ts, _) = split_vllm_header(p.rest)?;
    let sp = p.rest.find(' ')?;
    let after = p.rest[sp..].trim_start_matches(' ');
    let at = after.as_ptr() as usize - line.as_ptr() as usize;
    let (mo, d, h, mi, s) = f(ts);
    let stamp = format!("{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}");
    Some(format!("{}{stamp}{}", &line[..at], &line[at + 14..]))
}

/// The connector / LMCache / proxy reading of a message no event variant took.
fn other_signal(ev: &VllmEvent, msg: &str) -> Option<Signal> {
    if let VllmEvent::Exception { name, text } = ev {
        return super::signal::key_error(name, text);
    }
    if *ev != VllmEvent::Other {
        return None;
    }
    parse_connector(msg)
        .or_else(|| parse_lmcache(msg))
        .or_else(|| parse_proxy_text(msg))
        .or_else(|| aborted_echo(msg))
        .or_else(|| response_done(msg))
}

/// `Request <id> aborted.`: the API server's echo of `Aborted request(s)`
/// (vLLM ≥ 0.11), with the id as the client knew it.
pub fn aborted_echo(msg: &str) -> Option<Signal> {
    let id = msg.strip_prefix("Request ")?.trim_end().strip_suffix(" aborted.")?;
    (!id.contains(' ')).then(|| Signal::new(SignalKind::RequestAborted).id(id))
}

/// Dispatches on the message text. Most lines match nothing, so the checks
/// are `starts_with` on a few distinct first words before anything costlier.
fn parse_message(msg: &str) -> VllmEvent {
    if let Some(r) = msg.strip_prefix("Received request ") {
        // `POST /tokenize` (`tokenize-<id>`, no params): nothing generated.
        if r.starts_with("tokenize-") || r.starts_with("detokenize-") || r.contains(": params: None") {
            return VllmEvent::Other;
        }
        let (id, max_tokens, kv_params, prompt_tokens) = parse_received(r);
        return VllmEvent::Received { id, max_tokens, kv_params, prompt_tokens };
    }
    // Dynamo's vLLM worker (`handlers.py`, DEBUG): the id it gives vLLM,
    // which vLLM's children of an `n > 1` request carry as `<i>_<id>`.
    if let Some(id) = msg.strip_prefix("Decode Request ID: ").map(str::trim).filter(|i| !i.contains(' ')) {
        return VllmEvent::Received {
            id: id.to_string(),
            max_tokens: None,
            kv_params: None,
            prompt_tokens: None,
        };
    }
    if let Some(r) = msg.strip_prefix("Added request ") {
        let internal = r.trim_end().trim_end_matches('.');
        return VllmEvent::Added {
            internal_id: internal.to_string(),
            external_id: external_id(internal).to_string(),
        };
    }
    if let Some(r) = ["Aborted request(s) ", "Aborted request "].iter().find_map(|p| msg.strip_prefix(p)) {
        let r = r.trim_end().trim_end_matches('.');
        let ids = r.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
        return VllmEvent::Aborted { ids };
    }
    // "Hit the cache! Allocate new blocks!" is the earliest V1 wording.
    if msg.starts_with("External Cache Hit!") || msg.starts_with("Hit the cache!") {
        return VllmEvent::ExternalCacheHit;
    }
    if let Some(r) = msg.strip_prefix("Inject KV cache of ") {
        if let Some(tokens) = leading_u64(r).and_then(|n| u32::try_from(n).ok()) {
            return VllmEvent::InjectKv { tokens };
        }
        return VllmEvent::Other;
    }
    if let Some(r) = msg.strip_prefix("Releasing expired KV blocks for request") {
        // A terminal may wrap the line right here: the id is on the next one.
        let r = r.trim_start();
        let id = if r.starts_with("which ") { "" } else { r.split(' ').next().unwrap_or("") };
        let after = |k: &str| {
            r.find(k).and_then(|i| leading_u64(&r[i + k.len()..])).and_then(|n| u32::try_from(n).ok())
        };
        return VllmEvent::KvExpired { id: id.to_string(), retrieved_by: after("retrieved by ") };
    }
    // "Engine 000: ..." or "2 Engines Aggregated: ...".
    if (msg.starts_with("Engine ") || msg.as_bytes().first().is_some_and(u8::is_ascii_digit))
        && let Some(s) = parse_engine_stats(msg)
    {
        return VllmEvent::EngineStats(s);
    }
    if let Some(r) = msg.strip_prefix("KV Transfer metrics: ") {
        return VllmEvent::KvTransferMetrics(parse_kv_metrics(r));
    }
    if let Some(r) = msg.strip_prefix("Request ") {
        if let Some((id, reason)) = request_failed(msg) {
            return VllmEvent::RequestFailed { id: id.to_string(), reason };
        }
        if let Some((id, rest)) = r.split_once(" details: ") {
            return VllmEvent::RequestDetails { id: id.to_string(), prompt_tokens: count_token_ids(rest) };
        }
    }
    if msg.starts_with("Error in completion stream generator")
        || msg.starts_with("Error in chat completion stream generator")
    {
        return VllmEvent::StreamError;
    }
    if msg.starts_with("Traceback (most recent call last)") {
        return VllmEvent::Traceback;
    }
    const DEAD: [&str; 6] = [
        "EngineCore encountered a fatal error",
        "EngineCore failed to start",
        "AsyncLLM output_handler failed",
        "Engine core proc ",
        "Worker proc ",
        "WorkerProc hit an exception",
    ];
    if DEAD.iter().any(|p| msg.starts_with(p)) {
        // "Engine core proc X died unexpectedly"; the others are fatal as they stand.
        if !(msg.starts_with("Engine core proc ") || msg.starts_with("Worker proc ")) || msg.contains("died")
        {
            return VllmEvent::EngineDead { text: clip(msg) };
        }
    }
    if let Some(r) = msg.strip_prefix("Starting vLLM ") {
        // "Starting vLLM server on http://h:p" (0.26); "Starting vLLM API server 0 on ..." (older).
        if let Some(i) = r.find(" on ") {
            return VllmEvent::ServerStarted { port: url_port(r[i + 4..].trim()) };
        }
    }
    if msg.starts_with("[shutdown]") || msg.starts_with("Shutting down FastAPI HTTP server") {
        return VllmEvent::Shutdown;
    }
    if msg.starts_with("KVTransferConfig(") || msg.starts_with("non-default args: ") {
        return kv_config(msg).map_or(VllmEvent::Other, |(fields, block_size)| {
            VllmEvent::KvConnectorConfig { fields, block_size }
        });
    }
    if let Some((name, text)) = exception_line(msg) {
        let dead = name.ends_with("EngineDeadError") || text.starts_with("Engine core initialization failed");
        if dead {
            return VllmEvent::EngineDead { text: clip(msg) };
        }
        return VllmEvent::Exception { name: name.to_string(), text: clip(text) };
    }
    VllmEvent::Other
}

/// The external id is the internal one minus the `-<8 hex>` the engine
/// appends (≥0.14). Ids without such a suffix are returned unchanged.
fn external_id(internal: &str) -> &str {
    match internal.rsplit_once('-') {
        Some((base, tail))
            if !base.is_empty() && tail.len() == 8 && tail.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            base
        }
        _ => internal,
    }
}

/// `SomeError: text`, `pkg.mod.SomeError: text`, the bare name, or the repr
/// `SomeError('text')` (V0's `logger.exception(repr(e))`) at the start of a
/// message. Only names ending like an exception class count.
fn exception_line(msg: &str) -> Option<(&str, &str)> {
    let end =
        msg.bytes().position(|b| !(b.is_ascii_alphanumeric() || b == b'_' || b == b'.')).unwrap_or(msg.len());
    let name = &msg[..end];
    let is_exc = ["Error", "Exception", "Interrupt", "Exit"].iter().any(|s| name.ends_with(s));
    if !is_exc || !msg.as_bytes()[0].is_ascii_alphabetic() {
        return None;
    }
    let rest = &msg[end..];
    if rest.is_empty() {
        return Some((name, ""));
    }
    let text = rest.strip_prefix(':').or_else(|| rest.strip_prefix('(')?.strip_suffix(')'))?;
    Some((name, text.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(line: &str) -> VllmEvent {
        parse_vllm_line(line).map(|l| l.event).unwrap_or(VllmEvent::Other)
    }

    #[test]
    fn header_fields() {
        let l = parse_vllm_line(
            "(EngineCore_DP0 pid=3214) WARNING 11-30 06:25:34 [x.py:1] External Cache Hit!\n",
        );
        let l = l.expect("parsed");
        assert_eq!(l.process.as_deref(), Some("EngineCore_DP0"));
        assert_eq!(l.pid, Some(3214));
        assert_eq!(l.level, Some(Level::Warning));
        assert_eq!(l.timestamp, Some((11, 30, 6, 25, 34)));
        assert_eq!(l.event, VllmEvent::ExternalCacheHit);
        assert_eq!(parse_vllm_line("  \r\n"), None);
    }

    #[test]
    fn v033_lines_without_prefix() {
        let l = parse_vllm_line("INFO 11-30 06:00:10 [loggers.py:335] Engine 000: Avg prompt throughput: 0.5 tokens/s, Avg generation throughput: 1.6 tokens/s, Running: 0 reqs, Waiting: 0 reqs, KV fetch: 1 waiting to start, 0 in progress, 2 completed waiting, GPU KV cache usage: 0.0%, External prefix cache hit rate: 86.5%").expect("line");
        assert_eq!(l.process, None);
        let VllmEvent::EngineStats(s) = l.event else { panic!("{:?}", l.event) };
        assert_eq!((s.prompt_tps, s.gen_tps, s.external_hit_pct), (0.5, 1.6, Some(86.5)));
        assert_eq!(s.prefix_hit_pct, None);
        let l = parse_vllm_line("INFO:     127.0.0.1:1 - \"GET /metrics HTTP/1.1\" 200 OK").expect("line");
        assert_eq!(l.timestamp, None);
        assert!(matches!(l.event, VllmEvent::Access(ref a) if a.path == "/metrics" && a.status == 200));
    }

    #[test]
    fn prompts_only_when_asked() {
        let line = r#"INFO 01-02 03:04:05 [logger.py:43] Received request cmpl-abc-0: prompt: 'say "hi", please', params: SamplingParams(n=1, max_tokens=7), lora_request: None."#;
        assert_eq!(prompt_of(line), Some(("cmpl-abc-0".into(), r#"'say "hi", please'"#.into())));
        let debug = "(APIServer pid=1) DEBUG 11-30 06:25:31 [request_logger.py:50] Request cmpl-x-0 details: prompt: 'secret', prompt_token_ids: [1], prompt_embeds shape: None.";
        assert_eq!(prompt_of(debug), Some(("cmpl-x-0".into(), "'secret'".into())));
        assert_eq!(prompt_of("INFO Received request cmpl-y-0: params: SamplingParams(n=1)"), None);
        let hidden = redact_prompt(line).unwrap();
        assert!(!hidden.contains("please") && hidden.contains("max_tokens=7"), "{hidden}");
        assert_eq!(parse_vllm_line(&hidden).map(|l| l.event), parse_vllm_line(line).map(|l| l.event));
    }

    #[test]
    fn old_received_with_prompt_is_skipped() {
        let line = r#"INFO 01-02 03:04:05 [logger.py:43] Received request cmpl-abc-0: prompt: 'say max_tokens=9, extra_args={\'kv_transfer_params\': {}} "hi"', params: SamplingParams(n=1, stop=['),'], max_tokens=7, extra_args=None), prompt_token_ids: [1, 2], lora_request: None."#;
        assert_eq!(
            ev(line),
            VllmEvent::Received {
                id: "cmpl-abc-0".into(),
                max_tokens: Some(7),
                kv_params: None,
                // Its list after the params: the prompt's length.
                prompt_tokens: Some(2)
            }
        );
    }

    #[test]
    fn a_tokenize_call_is_no_request() {
        // vllm-router 0.1.17 before a load, as vLLM 0.26 logged it (router-nixl-1p2d).
        let l = "(APIServer pid=686) INFO 12-06 06:33:06 [request_logger.py:63] Received request tokenize-___prefill_addr_127.0.0.1:8100___decode_addr_127.0.0.1:8200_d7ce943f188f4b84a6f8d74eeaaf525e: params: None, lora_request: None.";
        assert_eq!(parse_vllm_line(l).unwrap().event, VllmEvent::Other);
    }

    #[test]
    fn ansi_colours_are_ignored() {
        let l = parse_vllm_line("\x1b[36m(APIServer pid=1)\x1b[0m \x1b[32mINFO\x1b[0m 11-30 06:25:31 [a.py:1] Added request x-0-deadbeef.").expect("line");
        assert_eq!(
            l.event,
            VllmEvent::Added { internal_id: "x-0-deadbeef".into(), external_id: "x-0".into() }
        );
    }

    #[test]
    fn death_markers() {
        for m in [
            "ERROR 06-11 11:46:39 [core.py:517] EngineCore encountered a fatal error.",
            "ERROR 12-01 23:08:02 [core_client.py:564] Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.",
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.",
            "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
        ] {
            assert!(matches!(ev(m), VllmEvent::EngineDead { .. }), "{m}");
        }
        // Mid-line mentions of an error class are not exception lines.
        assert_eq!(
            ev("WARNING 11-30 06:24:52 [s.py:1] Found ulimit ... like `OSError: [Errno 24]`"),
            VllmEvent::Other
        );
        assert_eq!(ev("Traceback (most recent call last):"), VllmEvent::Traceback);
    }

    #[test]
    fn engine_dead_requests_and_details() {
        let l = "(APIServer pid=1010) INFO 12-01 07:29:35 [async_llm.py:601] Request cmpl-be795e55122ce50d-0 failed (engine dead).";
        assert_eq!(
            ev(l),
            VllmEvent::RequestFailed { id: "cmpl-be795e55122ce50d-0".into(), reason: "engine dead" }
        );
        let s = "(APIServer pid=1010) ERROR 12-01 07:29:35 [serving.py:495] Error in completion stream generator.";
        assert_eq!(ev(s), VllmEvent::StreamError);
        let d = "(APIServer pid=1) DEBUG 11-30 06:25:31 [request_logger.py:50] Request cmpl-x-0 details: prompt: 'a, prompt_token_ids: [9]', prompt_token_ids: [1, 2, 3], prompt_embeds shape: None.";
        assert_eq!(ev(d), VllmEvent::RequestDetails { id: "cmpl-x-0".into(), prompt_tokens: Some(3) });
        let cut =
            "DEBUG 11-30 06:25:31 [r.py:1] Request cmpl-x-0 details: prompt: 'a', prompt_token_ids: [1, 2";
        assert_eq!(ev(cut), VllmEvent::RequestDetails { id: "cmpl-x-0".into(), prompt_tokens: None });
    }

    #[test]
    fn message_at_is_where_known_noise_reads() {
        let msg = |raw: &str| {
            let l = parse_vllm_line(raw).expect("line");
            (l.uvicorn, raw[l.message_at..].to_string())
        };
        let header = "(EngineCore_DP0 pid=72) INFO 12-07 22:14:56 [core.py:1] Loading model";
        assert_eq!(msg(header), (false, "Loading model".into()));
        assert_eq!(
            msg("vllm-1  | INFO:     Application startup complete."),
            (true, "Application startup complete.".into())
        );
        // Raw stderr keeps its indent: a traceback frame is told by it.
        assert_eq!(msg("  File \"x.py\", line 2"), (false, "  File \"x.py\", line 2".into()));
        // ANSI colours are stripped before the offset is taken.
        let l = parse_vllm_line("\x1b[32mINFO\x1b[0m 12-07 22:14:56 [a.py:1] hi").unwrap();
        assert_eq!(&"INFO 12-07 22:14:56 [a.py:1] hi"[l.message_at..], "hi");
    }

    #[test]
    fn external_id_suffix() {
        assert_eq!(external_id("cmpl-lab-warmup_p-0-0-8db1b597"), "cmpl-lab-warmup_p-0-0");
        assert_eq!(external_id("cmpl-abc-0"), "cmpl-abc-0");
        assert_eq!(external_id("-deadbeef"), "-deadbeef");
    }

    #[test]
    fn received_lines_of_older_versions_give_the_prompt_length() {
        // Line 2 of tests/fixtures/log-excerpts/lmcache-nixl-prefill-received-added-storing.log
        // (vLLM ~0.8-0.9, `[logger.py:39]`): the ids follow the params.
        let old =
            include_str!("../../tests/fixtures/log-excerpts/lmcache-nixl-prefill-received-added-storing.log")
                .lines()
                .nth(1)
                .expect("line 2");
        let VllmEvent::Received { id, max_tokens, prompt_tokens, .. } = ev(old) else { panic!("{old}") };
        assert_eq!(
            (id.as_str(), max_tokens, prompt_tokens),
            ("cmpl-82a2f7b4642147c0b2e9c6445d772794-0", Some(1), Some(10))
        );
        // The same line cut inside the list counts nothing.
        let cut = &old[..old.find("prompt_token_ids: [").expect("ids") + 30];
        assert!(matches!(ev(cut), VllmEvent::Received { prompt_tokens: None, .. }));
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        let line = format!("Received request x: params: SamplingParams(extra_args={}", "[".repeat(100_000));
        assert!(matches!(ev(&line), VllmEvent::Received { kv_params: None, .. }));
    }
}
