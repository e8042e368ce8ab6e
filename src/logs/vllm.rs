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

use std::borrow::Cow;

use super::proxy::{AccessLine, parse_access};

/// `(month, day, hour, minute, second)` as vLLM prints it (`%m-%d %H:%M:%S`).
/// vLLM logs carry no year and no time zone; the caller anchors it.
pub type Stamp = (u8, u8, u8, u8, u8);

/// Longest text kept in a free-text event (`EngineDead`, `Exception`), so a
/// giant exception message does not get copied whole into app state.
const MAX_TEXT: usize = 512;

/// Deepest nesting of Python literals we follow before giving up, so a
/// hostile `[[[[...` line cannot exhaust the stack.
const MAX_DEPTH: usize = 32;

/// Log level, from vLLM's `LEVEL MM-DD` header or uvicorn's `LEVEL:` prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warning,
    Error,
    Critical,
}

impl Level {
    fn from_word(w: &str) -> Option<Level> {
        Some(match w {
            "TRACE" => Level::Trace,
            "DEBUG" => Level::Debug,
            "INFO" => Level::Info,
            "WARNING" | "WARN" => Level::Warning,
            "ERROR" => Level::Error,
            "CRITICAL" | "FATAL" => Level::Critical,
            _ => return None,
        })
    }
}

/// One parsed line. Fields the line does not carry are `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct VllmLine {
    /// `APIServer`, `EngineCore`, `EngineCore_DP0`, `Worker_TP1`, ... from `(Name pid=N)`.
    pub process: Option<String>,
    pub pid: Option<u32>,
    pub level: Option<Level>,
    pub timestamp: Option<Stamp>,
    pub event: VllmEvent,
}

/// `kv_transfer_params` as the API server logged them inside
/// `SamplingParams(... extra_args={'kv_transfer_params': {...}})`.
/// Keys that were absent or `None` stay `None`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KvParams {
    pub do_remote_prefill: Option<bool>,
    pub do_remote_decode: Option<bool>,
    /// The prefill instance's *internal* id (with its `-<8 hex>` suffix).
    pub remote_request_id: Option<String>,
    pub remote_engine_id: Option<String>,
    pub remote_num_tokens: Option<u32>,
    /// Count of block ids in `remote_block_ids` (flattened: NIXL logs one list per KV group).
    pub remote_block_count: Option<usize>,
    pub remote_host: Option<String>,
    pub remote_port: Option<u16>,
}

/// The periodic `Engine 000: Avg prompt throughput: ...` line (§2.2).
#[derive(Debug, Clone, PartialEq)]
pub struct EngineStats {
    /// `Engine 000` → `Some(0)`; `N Engines Aggregated` → `None`.
    pub engine: Option<u32>,
    pub prompt_tps: f64,
    pub gen_tps: f64,
    pub running: u32,
    pub waiting: u32,
    pub kv_usage_pct: f64,
    /// Only printed once the prefix cache has seen queries (v0.33).
    pub prefix_hit_pct: Option<f64>,
    /// Only printed when a KV connector reports stats.
    pub external_hit_pct: Option<f64>,
    /// `Deferred: N reqs` (≥0.24, only when non-zero).
    pub deferred: Option<u32>,
    /// `Preemptions: N` (only when non-zero in the interval).
    pub preemptions: Option<u32>,
}

/// `KV Transfer metrics: k=v, ...` (§2.3). `pairs` keeps every key in order,
/// so keys added by later vLLM versions are not lost; the named fields are
/// the ones the dashboard uses.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KvTransferMetrics {
    pub pairs: Vec<(String, String)>,
    pub num_successful_transfers: Option<u64>,
    pub avg_xfer_ms: Option<f64>,
    pub p90_xfer_ms: Option<f64>,
    pub avg_mb_per_transfer: Option<f64>,
    pub throughput_mb_s: Option<f64>,
    pub num_failed_transfers: Option<u64>,
    pub num_kv_expired: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum VllmEvent {
    /// `Received request <external id>: params: SamplingParams(...)`. The
    /// prompt text (older versions print it here) is skipped, never stored.
    Received {
        id: String,
        max_tokens: Option<u32>,
        kv_params: Option<KvParams>,
    },
    /// `Added request <internal id>.`; `external_id` drops the `-<8 hex>` suffix.
    Added {
        internal_id: String,
        external_id: String,
    },
    /// `Aborted request(s) a,b.` (external ids).
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
        role: Option<String>,
        connector: Option<String>,
        engine_id: Option<String>,
    },
    Other,
}

/// Parses one line (with or without its trailing `\n` / `\r\n`).
///
/// Returns `None` only for blank lines: anything else is at least
/// `VllmEvent::Other`, with the header fields it carries, so the caller can
/// still show foreign lines (UCX, c10d, flashinfer) in a log pane.
pub fn parse_vllm_line(line: &str) -> Option<VllmLine> {
    let line = strip_ansi(line);
    let line = line.trim_end_matches(['\n', '\r']);
    if line.trim().is_empty() {
        return None;
    }
    let mut out =
        VllmLine { process: None, pid: None, level: None, timestamp: None, event: VllmEvent::Other };
    let mut rest = line;
    if let Some((name, pid, after)) = split_process_prefix(rest) {
        out.process = Some(name.to_string());
        out.pid = pid;
        rest = after;
    }
    // Uvicorn's `INFO:     ...` (access and lifecycle lines).
    if let Some((level, after)) = split_uvicorn_level(rest) {
        out.level = Some(level);
        if let Some(a) = parse_access(after) {
            out.event = VllmEvent::Access(a);
        }
        return Some(out);
    }
    let msg = match split_vllm_header(rest) {
        Some((level, ts, msg)) => {
            out.level = Some(level);
            out.timestamp = Some(ts);
            msg
        }
        // Raw stderr (a traceback printed without the logger) still counts.
        None => rest.trim_start(),
    };
    out.event = parse_message(msg);
    Some(out)
}

/// Removes ANSI colour escapes (`ESC [ ... letter`). vLLM colours its prefix
/// on a TTY; a log captured through `script` or a pty would carry them.
/// Borrowed when there is nothing to strip, which is the common case.
pub(crate) fn strip_ansi(line: &str) -> Cow<'_, str> {
    if !line.contains('\x1b') {
        return Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.peek() == Some(&'[') {
                chars.next();
                // Parameters and intermediates, then one final byte in @..~.
                for c2 in chars.by_ref() {
                    if ('@'..='~').contains(&c2) {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    Cow::Owned(out)
}

/// `(Name pid=N) rest` → `(Name, Some(N), rest)`. Names can carry extra words
/// (`(VllmWorker rank=0 pid=7)`): the name is the first word, pid is last.
fn split_process_prefix(line: &str) -> Option<(&str, Option<u32>, &str)> {
    let inner_end = line.strip_prefix('(')?.find(')')? + 1;
    let inner = &line[1..inner_end];
    let pid_at = inner.rfind("pid=")?;
    let name = inner.split(' ').next().filter(|n| !n.is_empty())?;
    let pid = inner[pid_at + 4..].parse().ok();
    let rest = &line[inner_end + 1..];
    Some((name, pid, rest.strip_prefix(' ').unwrap_or(rest)))
}

/// Uvicorn's level prefix: `INFO:` padded with spaces. Requires the space so
/// Python's `INFO:root:msg` (basicConfig) is not mistaken for it.
pub(crate) fn split_uvicorn_level(s: &str) -> Option<(Level, &str)> {
    // Level words are ASCII, so a ':' within the first 10 bytes is a char boundary.
    let colon = s.bytes().take(10).position(|b| b == b':')?;
    let level = Level::from_word(&s[..colon])?;
    let after = &s[colon + 1..];
    if !after.starts_with(' ') {
        return None;
    }
    Some((level, after.trim_start_matches(' ')))
}

/// `INFO 11-30 06:24:52 [file.py:345] message` → `(Info, stamp, "message")`.
fn split_vllm_header(s: &str) -> Option<(Level, Stamp, &str)> {
    let sp = s.find(' ')?;
    let level = Level::from_word(&s[..sp])?;
    let rest = &s[sp + 1..];
    let b = rest.as_bytes();
    // "MM-DD HH:MM:SS " is 15 bytes, all ASCII.
    if b.len() < 15 || b[2] != b'-' || b[5] != b' ' || b[8] != b':' || b[11] != b':' {
        return None;
    }
    let num = |i: usize| -> Option<u8> {
        let (h, l) = (b[i], b[i + 1]);
        (h.is_ascii_digit() && l.is_ascii_digit()).then(|| (h - b'0') * 10 + (l - b'0'))
    };
    let ts = (num(0)?, num(3)?, num(6)?, num(9)?, num(12)?);
    let rest = rest.get(14..)?.trim_start_matches(' ');
    // `[fileinfo:lineno]`; fileinfo never contains "] ".
    let msg = match rest.strip_prefix('[') {
        Some(r) => match r.find(']') {
            Some(end) => r[end + 1..].strip_prefix(' ').unwrap_or(&r[end + 1..]),
            None => rest,
        },
        None => rest,
    };
    Some((level, ts, msg))
}

/// Dispatches on the message text. Most lines match nothing, so the checks
/// are `starts_with` on a few distinct first words before anything costlier.
fn parse_message(msg: &str) -> VllmEvent {
    if let Some(r) = msg.strip_prefix("Received request ") {
        return parse_received(r);
    }
    if let Some(r) = msg.strip_prefix("Added request ") {
        let internal = r.trim_end().trim_end_matches('.');
        return VllmEvent::Added {
            internal_id: internal.to_string(),
            external_id: external_id(internal).to_string(),
        };
    }
    if let Some(r) = msg.strip_prefix("Aborted request(s) ") {
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
    if let Some(r) = msg.strip_prefix("Releasing expired KV blocks for request ") {
        let id = r.split(' ').next().unwrap_or("");
        const BY: &str = "retrieved by ";
        let retrieved_by =
            r.find(BY).and_then(|i| leading_u64(&r[i + BY.len()..])).and_then(|n| u32::try_from(n).ok());
        return VllmEvent::KvExpired { id: id.to_string(), retrieved_by };
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
    if msg.starts_with("Traceback (most recent call last)") {
        return VllmEvent::Traceback;
    }
    const DEAD: [&str; 5] = [
        "EngineCore encountered a fatal error",
        "EngineCore failed to start",
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
    if msg.starts_with("[shutdown]") {
        return VllmEvent::Shutdown;
    }
    if let Some(r) = msg.strip_prefix("KVTransferConfig(") {
        return parse_kv_config(r);
    }
    if msg.starts_with("non-default args: ") {
        // The startup line embeds the same repr; NIXL setups print no other.
        const CFG: &str = "'kv_transfer_config': KVTransferConfig(";
        if let Some(i) = msg.find(CFG) {
            return parse_kv_config(&msg[i + CFG.len()..]);
        }
        return VllmEvent::Other;
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

/// `SomeError: text` or `pkg.mod.SomeError: text` (or the bare name) at the
/// start of a message, as a traceback ends. Only names ending like an
/// exception class count, so ordinary prose with a colon is left alone.
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
    let text = rest.strip_prefix(':')?;
    Some((name, text.trim()))
}

/// Keeps at most `MAX_TEXT` bytes, cut on a char boundary.
fn clip(s: &str) -> String {
    if s.len() <= MAX_TEXT {
        return s.to_string();
    }
    let mut end = MAX_TEXT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// Leading decimal digits of `s`, if any.
fn leading_u64(s: &str) -> Option<u64> {
    let end = s.bytes().position(|b| !b.is_ascii_digit()).unwrap_or(s.len());
    s[..end].parse().ok()
}

/// Port of `http://host:port[/...]`, `host:port` or `[::1]:port`.
fn url_port(url: &str) -> Option<u16> {
    let hostport = url.split("://").last()?.split('/').next()?;
    let (_, port) = hostport.rsplit_once(':')?;
    leading_u64(port).and_then(|p| u16::try_from(p).ok())
}

/// Longest prompt text kept when prompts are asked for (`--show-prompts`).
pub const MAX_PROMPT_CHARS: usize = 300;

/// The prompt a line prints, with its request id: `Received request <id>:
/// prompt: '...'` (≤0.11) or `Request <id> details: prompt: '...'` (DEBUG,
/// ≥0.14). Only called when the user asked to see prompts; the normal
/// parser never keeps them.
pub fn prompt_of(line: &str) -> Option<(String, String)> {
    let (id, start, end) = prompt_span(line)?;
    let text: String = line[start..end].chars().take(MAX_PROMPT_CHARS).collect();
    Some((id, text))
}

/// The line with its prompt text (if it prints one) replaced, so that a
/// recording does not carry users' prompts unless asked to.
pub fn redact_prompt(line: &str) -> Option<String> {
    let (_, start, end) = prompt_span(line)?;
    Some(format!("{}'<prompt hidden by pdtop>'{}", &line[..start], &line[end..]))
}

/// (request id, byte range of the prompt's repr) in a line that prints one.
fn prompt_span(line: &str) -> Option<(String, usize, usize)> {
    let (id, rest) = if let Some(i) = line.find("Received request ") {
        let r = &line[i + "Received request ".len()..];
        let (id, rest) = r.split_once(": ")?;
        (id, rest)
    } else {
        let i = line.find("] Request ")?;
        let r = &line[i + "] Request ".len()..];
        let (id, rest) = r.split_once(" details: ")?;
        (id, rest)
    };
    let p = rest.strip_prefix("prompt: ")?;
    let mut c = Cursor::new(p);
    if !c.skip_value() {
        return None;
    }
    let start = line.len() - p.len();
    let end = line.len() - c.rest().len();
    Some((id.to_string(), start, end))
}

/// `Received request <id>: params: SamplingParams(...), lora_request: ...`
/// (≥0.14) or `Received request <id>: prompt: '...', params: ...` (≤0.11).
fn parse_received(r: &str) -> VllmEvent {
    let (id, mut rest) = match r.find(": ") {
        Some(i) => (&r[..i], &r[i + 2..]),
        None => (r.trim_end_matches(['.', ':']), ""),
    };
    let mut max_tokens = None;
    let mut kv_params = None;
    // Skip the prompt repr without looking inside it: it is user text and may
    // itself contain "max_tokens=" or "kv_transfer_params".
    if let Some(p) = rest.strip_prefix("prompt: ") {
        let mut c = Cursor::new(p);
        rest = if c.skip_value() { c.rest().trim_start_matches([',', ' ']) } else { "" };
    }
    if let Some(p) = rest.strip_prefix("params: SamplingParams(") {
        let mut c = Cursor::new(p);
        while let Some(key) = c.key_eq() {
            match key {
                "max_tokens" => {
                    max_tokens = match c.value(0) {
                        Some(Py::Int(n)) => u32::try_from(n).ok(),
                        _ => None,
                    }
                }
                "extra_args" => kv_params = c.value(0).and_then(|v| kv_params_of(&v)),
                _ => {
                    if !c.skip_value() {
                        break;
                    }
                }
            }
            if !c.eat(b',') {
                break;
            }
        }
    }
    VllmEvent::Received { id: id.to_string(), max_tokens, kv_params }
}

/// `{'kv_transfer_params': {...}}` → `KvParams`; anything else → `None`.
fn kv_params_of(extra: &Py) -> Option<KvParams> {
    let params = extra.get("kv_transfer_params")?;
    let Py::Dict(_) = params else { return None };
    let s = |k| match params.get(k) {
        Some(Py::Str(v)) => Some(v.clone().into_owned()),
        _ => None,
    };
    let b = |k| match params.get(k) {
        Some(Py::Bool(v)) => Some(*v),
        _ => None,
    };
    let n = |k| match params.get(k) {
        Some(Py::Int(v)) => Some(*v),
        _ => None,
    };
    Some(KvParams {
        do_remote_prefill: b("do_remote_prefill"),
        do_remote_decode: b("do_remote_decode"),
        remote_request_id: s("remote_request_id"),
        remote_engine_id: s("remote_engine_id"),
        remote_num_tokens: n("remote_num_tokens").and_then(|v| u32::try_from(v).ok()),
        remote_block_count: match params.get("remote_block_ids") {
            Some(v @ Py::List(_)) => Some(v.count_leaves()),
            _ => None,
        },
        remote_host: s("remote_host"),
        remote_port: n("remote_port").and_then(|v| u16::try_from(v).ok()),
    })
}

/// Body of `KVTransferConfig(` up to its `)`.
fn parse_kv_config(r: &str) -> VllmEvent {
    let (mut role, mut connector, mut engine_id) = (None, None, None);
    let mut c = Cursor::new(r);
    while let Some(key) = c.key_eq() {
        let slot = match key {
            "kv_role" => &mut role,
            "kv_connector" => &mut connector,
            "engine_id" => &mut engine_id,
            _ => {
                if !c.skip_value() {
                    break;
                }
                if !c.eat(b',') {
                    break;
                }
                continue;
            }
        };
        if let Some(Py::Str(v)) = c.value(0) {
            *slot = Some(v.into_owned());
        }
        if !c.eat(b',') {
            break;
        }
    }
    VllmEvent::KvConnectorConfig { role, connector, engine_id }
}

/// `Engine 000: Avg prompt throughput: 0.5 tokens/s, ...` (see §2.2 for the
/// optional parts). The five parts every version prints are required.
fn parse_engine_stats(msg: &str) -> Option<EngineStats> {
    let (head, body) = msg.split_once(": ")?;
    let engine = match head.strip_prefix("Engine ") {
        Some(n) => Some(n.parse().ok()?),
        None if head.ends_with(" Engines Aggregated") => None,
        None => return None,
    };
    let (mut prompt, mut gen_, mut running, mut waiting, mut kv) = (None, None, None, None, None);
    let mut s = EngineStats {
        engine,
        prompt_tps: 0.0,
        gen_tps: 0.0,
        running: 0,
        waiting: 0,
        kv_usage_pct: 0.0,
        prefix_hit_pct: None,
        external_hit_pct: None,
        deferred: None,
        preemptions: None,
    };
    // Parts are joined by ", "; "KV fetch: a, b, c" splits into pieces that
    // match nothing below and are ignored.
    for part in body.split(", ") {
        let num = |p: &str| -> Option<f64> {
            let v = p.trim_end_matches(" tokens/s").trim_end_matches(" reqs");
            v.trim_end_matches('%').trim().parse().ok()
        };
        let int = |p: &str| num(p).filter(|v| *v >= 0.0 && *v <= u32::MAX as f64).map(|v| v as u32);
        if let Some(v) = part.strip_prefix("Avg prompt throughput: ") {
            prompt = num(v);
        } else if let Some(v) = part.strip_prefix("Avg generation throughput: ") {
            gen_ = num(v);
        } else if let Some(v) = part.strip_prefix("Running: ") {
            running = int(v);
        } else if let Some(v) = part.strip_prefix("Waiting: ") {
            waiting = int(v);
        } else if let Some(v) = part.strip_prefix("Deferred: ") {
            s.deferred = int(v);
        } else if let Some(v) = part.strip_prefix("Preemptions: ") {
            s.preemptions = int(v);
        } else if let Some(v) = part.strip_prefix("Prefix cache hit rate: ") {
            s.prefix_hit_pct = num(v);
        } else if let Some(v) = part.strip_prefix("External prefix cache hit rate: ") {
            s.external_hit_pct = num(v);
        } else if let Some(i) = part.find("KV cache usage: ") {
            // "GPU KV cache usage" on CUDA, "<DEVICE> KV cache usage" elsewhere.
            kv = num(&part[i + "KV cache usage: ".len()..]);
        }
    }
    s.prompt_tps = prompt?;
    s.gen_tps = gen_?;
    s.running = running?;
    s.waiting = waiting?;
    s.kv_usage_pct = kv?;
    Some(s)
}

/// `Num successful transfers=2, Avg xfer time (ms)=82.675, ...` (keys have
/// no `=` or `, `; values are numbers).
fn parse_kv_metrics(r: &str) -> KvTransferMetrics {
    let mut m = KvTransferMetrics::default();
    for part in r.trim_end().split(", ") {
        let Some((k, v)) = part.split_once('=') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        let f = v.parse::<f64>().ok().filter(|x| x.is_finite());
        let u = v.parse::<u64>().ok().or_else(|| f.filter(|x| *x >= 0.0).map(|x| x as u64));
        match k {
            // 0.11 printed the single key `num_successful_transfers`.
            "Num successful transfers" | "num_successful_transfers" => m.num_successful_transfers = u,
            "Avg xfer time (ms)" => m.avg_xfer_ms = f,
            "P90 xfer time (ms)" => m.p90_xfer_ms = f,
            "Avg MB per transfer" => m.avg_mb_per_transfer = f,
            "Throughput (MB/s)" => m.throughput_mb_s = f,
            "Num failed transfers" => m.num_failed_transfers = u,
            "Num KV expired reqs" => m.num_kv_expired = u,
            _ => {}
        }
        m.pairs.push((k.to_string(), v.to_string()));
    }
    m
}

/// A Python literal, as far as `repr()` output needs: enough to read
/// `kv_transfer_params` and `KVTransferConfig` values.
#[derive(Debug, Clone, PartialEq)]
enum Py<'a> {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Cow<'a, str>),
    List(Vec<Py<'a>>),
    Dict(Vec<(Py<'a>, Py<'a>)>),
    /// Anything else (`<Enum.X: 0>`, `Foo(a=1)`, ...), kept as its raw text.
    Other(&'a str),
}

impl Py<'_> {
    fn get(&self, key: &str) -> Option<&Self> {
        match self {
            Py::Dict(items) => {
                items.iter().find(|(k, _)| matches!(k, Py::Str(s) if s == key)).map(|(_, v)| v)
            }
            _ => None,
        }
    }

    /// Number of non-list values inside nested lists: `[[1, 2], [3]]` → 3.
    fn count_leaves(&self) -> usize {
        match self {
            Py::List(items) => items.iter().map(Py::count_leaves).sum(),
            _ => 1,
        }
    }
}

/// A byte cursor over Python `repr()` text. Every method stops (returns
/// `None`/`false`) on input it does not understand instead of panicking.
struct Cursor<'a> {
    s: &'a str,
    i: usize,
}

impl<'a> Cursor<'a> {
    fn new(s: &'a str) -> Self {
        Cursor { s, i: 0 }
    }

    fn rest(&self) -> &'a str {
        self.s.get(self.i..).unwrap_or("")
    }

    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.i).copied()
    }

    fn ws(&mut self) {
        while self.peek() == Some(b' ') {
            self.i += 1;
        }
    }

    /// Consumes `b` (after spaces) if it is next.
    fn eat(&mut self, b: u8) -> bool {
        self.ws();
        if self.peek() == Some(b) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    /// `name=` of a keyword-argument repr; `None` at `)` or end.
    fn key_eq(&mut self) -> Option<&'a str> {
        self.ws();
        let start = self.i;
        while self.peek().is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_') {
            self.i += 1;
        }
        let key = &self.s[start..self.i];
        if key.is_empty() || self.peek() != Some(b'=') {
            return None;
        }
        self.i += 1;
        Some(key)
    }

    /// Skips a quoted string starting at the cursor; returns its raw inside.
    fn string(&mut self) -> Option<&'a str> {
        let q = self.peek()?;
        let b = self.s.as_bytes();
        let start = self.i + 1;
        let mut j = start;
        while j < b.len() {
            match b[j] {
                b'\\' => j += 2,
                c if c == q => {
                    self.i = j + 1;
                    return self.s.get(start..j);
                }
                _ => j += 1,
            }
        }
        None
    }

    /// Skips one value of any shape without building it: iterative, so deep
    /// nesting costs no stack. Stops before a `,` `)` `]` `}` at depth 0.
    fn skip_value(&mut self) -> bool {
        self.ws();
        let b = self.s.as_bytes();
        let mut depth = 0usize;
        while self.i < b.len() {
            match b[self.i] {
                b'\'' | b'"' => {
                    if self.string().is_none() {
                        return false;
                    }
                    continue;
                }
                b'(' | b'[' | b'{' | b'<' => depth += 1,
                b')' | b']' | b'}' | b'>' if depth > 0 => depth -= 1,
                b',' | b')' | b']' | b'}' if depth == 0 => return true,
                _ => {}
            }
            self.i += 1;
        }
        depth == 0
    }

    /// Parses one value. `depth` bounds recursion into lists and dicts.
    fn value(&mut self, depth: usize) -> Option<Py<'a>> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.ws();
        match self.peek()? {
            b'\'' | b'"' => {
                let raw = self.string()?;
                Some(Py::Str(unescape(raw)))
            }
            open @ (b'[' | b'(') => {
                let close = if open == b'[' { b']' } else { b')' };
                self.i += 1;
                let mut items = Vec::new();
                loop {
                    if self.eat(close) {
                        return Some(Py::List(items));
                    }
                    items.push(self.value(depth + 1)?);
                    if !self.eat(b',') {
                        return self.eat(close).then_some(Py::List(items));
                    }
                }
            }
            b'{' => {
                self.i += 1;
                let mut items = Vec::new();
                loop {
                    if self.eat(b'}') {
                        return Some(Py::Dict(items));
                    }
                    let k = self.value(depth + 1)?;
                    if !self.eat(b':') {
                        return None;
                    }
                    let v = self.value(depth + 1)?;
                    items.push((k, v));
                    if !self.eat(b',') {
                        return self.eat(b'}').then_some(Py::Dict(items));
                    }
                }
            }
            _ => {
                let start = self.i;
                while self
                    .peek()
                    .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'+'))
                {
                    self.i += 1;
                }
                let tok = &self.s[start..self.i];
                if tok.is_empty() || matches!(self.peek(), Some(b'(' | b'[')) {
                    // A call repr, `<Enum.X: 0>` or similar: keep its text.
                    self.i = start;
                    if !self.skip_value() {
                        return None;
                    }
                    return Some(Py::Other(&self.s[start..self.i]));
                }
                Some(match tok {
                    "None" => Py::None,
                    "True" => Py::Bool(true),
                    "False" => Py::Bool(false),
                    _ => match tok.parse::<i64>() {
                        Ok(n) => Py::Int(n),
                        Err(_) => tok.parse::<f64>().map(Py::Float).unwrap_or(Py::Other(tok)),
                    },
                })
            }
        }
    }
}

/// Undoes the common `repr()` escapes; others are kept as written.
fn unescape(raw: &str) -> Cow<'_, str> {
    if !raw.contains('\\') {
        return Cow::Borrowed(raw);
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some(e @ ('\\' | '\'' | '"')) => out.push(e),
            Some(e) => {
                out.push('\\');
                out.push(e);
            }
            None => out.push('\\'),
        }
    }
    Cow::Owned(out)
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
            VllmEvent::Received { id: "cmpl-abc-0".into(), max_tokens: Some(7), kv_params: None }
        );
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
    fn external_id_suffix() {
        assert_eq!(external_id("cmpl-lab-warmup_p-0-0-8db1b597"), "cmpl-lab-warmup_p-0-0");
        assert_eq!(external_id("cmpl-abc-0"), "cmpl-abc-0");
        assert_eq!(external_id("-deadbeef"), "-deadbeef");
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        let line = format!("Received request x: params: SamplingParams(extra_args={}", "[".repeat(100_000));
        assert!(matches!(ev(&line), VllmEvent::Received { kv_params: None, .. }));
    }
}
