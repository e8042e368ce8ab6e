//! Parser for one line of a disaggregated-serving proxy's output.
//!
//! Understood sources (`docs/vllm-reference.md` §3):
//!
//! - uvicorn, as used by `disagg_proxy_demo.py` and the NIXL toy proxy:
//!   access lines `INFO:     127.0.0.1:36058 - "POST /v1/completions HTTP/1.1" 200 OK`,
//!   startup (`Started server process`, `Uvicorn running on ...`) and shutdown lines;
//! - `disagg_proxy_demo.py`'s own output: `Error occurred in disagg proxy server`,
//!   `ERROR:root:Request failed with status 500: ...`, `ERROR:root:ClientError occurred: ...`,
//!   `ERROR:root:Unexpected error: ...`;
//! - the NIXL toy proxy: `Error occurred in disagg prefill proxy server - completions endpoint`,
//!   `Initialized 1 prefill clients and 1 decode clients.`;
//! - the 0.14–0.18 benchmark proxy (`disagg_prefill_proxy_server.py`), the only
//!   stock proxy that logs per request: `INFO:__main__:[prefill] start request_id=... url=...`,
//!   `[prefill] done request_id=... status=200 elapsed=0.15s`, `[decode] start ...`,
//!   `[decode] streaming response request_id=... status=200`,
//!   `[decode] finished streaming request_id=...`, and its `ERROR:__main__:` lines;
//! - pdtop's own JSON-lines format, below.
//!
//! # pdtop proxy JSON-lines format
//!
//! A proxy that can be told what to log should write one JSON object per
//! line, one line per step of a request. This is the richest input pdtop
//! reads: it gives per-request prefill and decode timing, which no stock
//! vLLM proxy logs.
//!
//! ```json
//! {"ts": 1764484012.503, "request_id": "lab-steady-3", "event": "prefill_start", "instance": "127.0.0.1:8100"}
//! {"ts": 1764484012.655, "request_id": "lab-steady-3", "event": "prefill_done", "status": 200, "instance": "127.0.0.1:8100", "prompt_tokens": 2048}
//! ```
//!
//! | field | type | required | meaning |
//! | --- | --- | --- | --- |
//! | `ts` | number | yes | Unix time in seconds (float), when the step happened |
//! | `request_id` | string | yes | the id the proxy sent as `X-Request-Id` (so vLLM logs `cmpl-<id>-0`) |
//! | `event` | string | yes | one of the events below |
//! | `status` | integer | no | HTTP status of the upstream response (`*_done`, `error`) |
//! | `instance` | string | no | `host:port` of the prefill or decode instance involved |
//! | `error` | string | no | error text, for `error` |
//! | `prompt_tokens` | integer | no | prompt length in tokens, when the proxy knows it |
//!
//! Events, in the order a healthy request emits them:
//!
//! | `event` | when |
//! | --- | --- |
//! | `received` | the client's request arrived at the proxy |
//! | `prefill_start` | the `max_tokens=1` copy was sent to the prefill instance |
//! | `prefill_done` | the prefill response was fully read |
//! | `decode_start` | the request was sent to the decode instance |
//! | `decode_first_byte` | the first body byte came back from decode (TTFT as the proxy sees it) |
//! | `decode_done` | the decode stream ended |
//! | `error` | the request failed at any step (`status`/`error` say why) |
//!
//! Rules: unknown fields are ignored (so a proxy may add its own); a line
//! with an unknown `event` or a missing required field is read as
//! [`ProxyEvent::Other`]; prompt or completion text must not be logged, and
//! pdtop never stores any that is.

use serde::Deserialize;

// uvicorn colours its level name on a TTY, as vLLM does its prefix.
use super::line::{Level, clip, split_uvicorn_level, strip_ansi};

pub use super::line::{AccessLine, parse_access};

/// A step in one request's life through the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Received,
    PrefillStart,
    PrefillDone,
    DecodeStart,
    /// JSON `decode_first_byte`; the benchmark proxy's `[decode] streaming
    /// response` (decode's response headers arrived) maps here too.
    DecodeFirstByte,
    DecodeDone,
    Error,
}

/// A per-request event, from the JSON-lines format or the benchmark proxy.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestEvent {
    pub request_id: String,
    pub stage: Stage,
    /// Unix seconds; only the JSON format carries it (other lines have no clock).
    pub ts: Option<f64>,
    pub status: Option<u16>,
    /// `host:port` of the instance involved.
    pub instance: Option<String>,
    /// Benchmark proxy `[prefill] done ... elapsed=0.15s`.
    pub elapsed_s: Option<f64>,
    pub error: Option<String>,
    pub prompt_tokens: Option<u32>,
}

/// What kind of failure a proxy error line reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyErrorKind {
    /// `print("Error occurred in disagg proxy server")` (disagg_proxy_demo).
    DisaggProxy,
    /// `Error occurred in disagg prefill proxy server - <api> endpoint` (NIXL toy proxy).
    ToyProxy,
    /// An upstream answered with a failing status (`status` is set when printed).
    UpstreamStatus,
    /// Could not talk to an upstream (`ClientError occurred`, `Connection error to`).
    Connection,
    Timeout,
    /// `Unexpected error: ...`, `Error processing request`, `Decode service error at ...`.
    Unexpected,
    /// The benchmark proxy's `Request cancelled ...`.
    Cancelled,
    /// The line `disagg_proxy_demo.py` prints after `Error occurred in disagg
    /// proxy server`: `sys.exc_info()` as a tuple (completions) or a list of
    /// strings (chat), naming the exception and any HTTP status in it.
    Detail,
    /// uvicorn's `Exception in ASGI application`: the app raised and did
    /// not handle it. Followed by a failing access line, the request got
    /// that answer; with none, the stream it had begun answering broke.
    Asgi,
    /// The exception a traceback under `Asgi` ends with, where it names a
    /// host (`aiohttp.client_exceptions.ClientConnectorError: Cannot
    /// connect to host ...`): a detail of that exception, never one more.
    Traceback,
    /// Any other ERROR/CRITICAL record.
    Other,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ProxyEvent {
    Access(AccessLine),
    Request(RequestEvent),
    Error {
        kind: ProxyErrorKind,
        status: Option<u16>,
        text: String,
        /// `host:port` the line names (`Cannot connect to host 127.0.0.1:8100`).
        instance: Option<String>,
    },
    /// Server startup; `port` from `Uvicorn running on http://127.0.0.1:8000`.
    Startup {
        port: Option<u16>,
    },
    Shutdown,
    Other,
}

/// Parses one proxy output line. `None` only for blank lines.
pub fn parse_proxy_line(line: &str) -> Option<ProxyEvent> {
    let line = strip_ansi(line);
    let line = line.trim_end_matches(['\n', '\r']);
    let trimmed = line.trim();
    if trimmed.is_empty() {
        return None;
    }
    if trimmed.starts_with('{') {
        return Some(parse_json(trimmed).unwrap_or(ProxyEvent::Other));
    }
    if let Some((level, rest)) = split_uvicorn_level(line) {
        return Some(parse_uvicorn(level, rest));
    }
    // Python `logging.basicConfig`: `LEVEL:logger:message`.
    let (level, msg) = match split_basic_config(line) {
        Some((level, msg)) => (Some(level), msg),
        None => (None, trimmed),
    };
    Some(parse_message(level, msg))
}

fn parse_uvicorn(level: Level, rest: &str) -> ProxyEvent {
    if let Some(a) = parse_access(rest) {
        return ProxyEvent::Access(a);
    }
    if let Some(r) = rest.strip_prefix("Uvicorn running on ") {
        let url = r.split(' ').next().unwrap_or("");
        return ProxyEvent::Startup { port: url_port(url) };
    }
    const STARTUP: [&str; 3] =
        ["Started server process", "Waiting for application startup", "Application startup complete"];
    const SHUTDOWN: [&str; 4] = [
        "Shutting down",
        "Waiting for application shutdown",
        "Application shutdown complete",
        "Finished server process",
    ];
    if STARTUP.iter().any(|p| rest.starts_with(p)) {
        return ProxyEvent::Startup { port: None };
    }
    if SHUTDOWN.iter().any(|p| rest.starts_with(p)) {
        return ProxyEvent::Shutdown;
    }
    if matches!(level, Level::Error | Level::Critical)
        && rest.trim_start().starts_with("Exception in ASGI application")
    {
        return error(ProxyErrorKind::Asgi, None, rest);
    }
    if matches!(level, Level::Error | Level::Critical) {
        return error(ProxyErrorKind::Other, None, rest);
    }
    ProxyEvent::Other
}

/// `INFO:root:msg`, `ERROR:__main__:msg` → `(level, msg)`.
fn split_basic_config(line: &str) -> Option<(Level, &str)> {
    let (word, rest) = line.split_once(':')?;
    let level = match word {
        "DEBUG" => Level::Debug,
        "INFO" => Level::Info,
        "WARNING" => Level::Warning,
        "ERROR" => Level::Error,
        "CRITICAL" => Level::Critical,
        _ => return None,
    };
    let (_logger, msg) = rest.split_once(':')?;
    Some((level, msg))
}

fn parse_message(level: Option<Level>, msg: &str) -> ProxyEvent {
    use ProxyErrorKind as K;
    if let Some(r) = msg.strip_prefix("[prefill] ") {
        return bench_request(r, true).unwrap_or(ProxyEvent::Other);
    }
    if let Some(r) = msg.strip_prefix("[decode] ") {
        return bench_request(r, false).unwrap_or(ProxyEvent::Other);
    }
    if let Some(ev) = exc_info_line(msg) {
        return ev;
    }
    if msg.starts_with("Error occurred in disagg proxy server") {
        return error(K::DisaggProxy, None, msg);
    }
    if msg.starts_with("Error occurred in disagg prefill proxy server") {
        return error(K::ToyProxy, None, msg);
    }
    if msg.starts_with("Initialized ") && msg.contains(" prefill clients") {
        return ProxyEvent::Startup { port: None };
    }
    // disagg_proxy_demo: "Request failed with status %s: %s".
    if let Some(r) = msg.strip_prefix("Request failed with status ") {
        return error(K::UpstreamStatus, leading_status(r), msg);
    }
    // benchmark 0.14–0.18: "Decode backend error %s - %s"; 0.10/0.11: "Backend service error: %s - %s".
    if let Some(r) = msg.strip_prefix("Decode backend error ") {
        return error(K::UpstreamStatus, leading_status(r), msg);
    }
    if let Some(r) = msg.strip_prefix("Backend service error: ") {
        return error(K::UpstreamStatus, leading_status(r), msg);
    }
    const KINDS: [(&str, ProxyErrorKind); 7] = [
        ("ClientError occurred", K::Connection),
        ("Connection error to ", K::Connection),
        ("Unexpected error", K::Unexpected),
        ("Error processing request", K::Unexpected),
        ("Decode service error at ", K::Unexpected),
        ("Decode service timeout at ", K::Timeout),
        ("Timeout connecting to ", K::Timeout),
    ];
    if let Some((_, kind)) = KINDS.iter().find(|(p, _)| msg.starts_with(p)) {
        return error(*kind, None, msg);
    }
    if msg.starts_with("Request cancelled") {
        return error(K::Cancelled, None, msg);
    }
    if matches!(level, Some(Level::Error | Level::Critical)) {
        return error(K::Other, None, msg);
    }
    if level.is_none() {
        return traceback_connection(msg).unwrap_or(ProxyEvent::Other);
    }
    ProxyEvent::Other
}

/// The exception a Python traceback ends with (`module.ClassError:
/// message`, under uvicorn's `Exception in ASGI application`), where it
/// names the host it could not reach: aiohttp's `ClientConnectorError:
/// Cannot connect to host 127.0.0.1:8201 ...`.
fn traceback_connection(msg: &str) -> Option<ProxyEvent> {
    let (class, _) = msg.split_once(": ")?;
    let python_class = class.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        && (class.ends_with("Error") || class.ends_with("Exception"));
    if !python_class {
        return None;
    }
    let ev = error(ProxyErrorKind::Traceback, None, msg);
    matches!(ev, ProxyEvent::Error { instance: Some(_), .. }).then_some(ev)
}

/// `start request_id=X url=U`, `done request_id=X status=200 elapsed=0.15s`,
/// `streaming response request_id=X status=200`, `finished streaming request_id=X`.
fn bench_request(r: &str, prefill: bool) -> Option<ProxyEvent> {
    let stage = match (prefill, r.split(' ').next()?) {
        (true, "start") => Stage::PrefillStart,
        (true, "done") => Stage::PrefillDone,
        (false, "start") => Stage::DecodeStart,
        (false, "streaming") => Stage::DecodeFirstByte,
        (false, "finished") => Stage::DecodeDone,
        _ => return None,
    };
    let mut ev = RequestEvent {
        request_id: String::new(),
        stage,
        ts: None,
        status: None,
        instance: None,
        elapsed_s: None,
        error: None,
        prompt_tokens: None,
    };
    for kv in r.split(' ') {
        let Some((k, v)) = kv.split_once('=') else {
            continue;
        };
        match k {
            "request_id" => ev.request_id = v.to_string(),
            "status" => ev.status = v.parse().ok(),
            "elapsed" => ev.elapsed_s = v.trim_end_matches('s').parse().ok().filter(|x: &f64| x.is_finite()),
            "url" => ev.instance = host_port(v).map(String::from),
            _ => {}
        }
    }
    if ev.request_id.is_empty() {
        return None;
    }
    Some(ProxyEvent::Request(ev))
}

/// The JSON-lines record of the module docs.
#[derive(Deserialize)]
struct JsonRecord {
    ts: f64,
    request_id: String,
    event: String,
    status: Option<i64>,
    instance: Option<String>,
    error: Option<String>,
    prompt_tokens: Option<i64>,
}

fn parse_json(s: &str) -> Option<ProxyEvent> {
    let r: JsonRecord = serde_json::from_str(s).ok()?;
    let stage = match r.event.as_str() {
        "received" => Stage::Received,
        "prefill_start" => Stage::PrefillStart,
        "prefill_done" => Stage::PrefillDone,
        "decode_start" => Stage::DecodeStart,
        "decode_first_byte" => Stage::DecodeFirstByte,
        "decode_done" => Stage::DecodeDone,
        "error" => Stage::Error,
        _ => return None,
    };
    Some(ProxyEvent::Request(RequestEvent {
        request_id: r.request_id,
        stage,
        ts: Some(r.ts).filter(|t| t.is_finite()),
        status: r.status.and_then(|s| u16::try_from(s).ok()),
        instance: r.instance,
        elapsed_s: None,
        error: r.error.map(|e| clip(&e)),
        prompt_tokens: r.prompt_tokens.and_then(|n| u32::try_from(n).ok()),
    }))
}

fn error(kind: ProxyErrorKind, status: Option<u16>, text: &str) -> ProxyEvent {
    ProxyEvent::Error { kind, status, text: clip(text.trim()), instance: named_host(text) }
}

/// `host:port` after `Cannot connect to host ` (aiohttp) or `Connection error to `.
fn named_host(text: &str) -> Option<String> {
    const MARKS: [&str; 3] = ["Cannot connect to host ", "Connection error to ", "Timeout connecting to "];
    let (i, m) = MARKS.iter().find_map(|m| text.find(m).map(|i| (i, *m)))?;
    let rest = &text[i + m.len()..];
    let word = rest.split([' ', ',']).next()?;
    let hp = host_port(word)?;
    hp.contains(':').then(|| hp.trim_end_matches(['.', ':']).to_string())
}

/// `(<class 'X'>, X(status_code=502, ...), <traceback ...>)` or
/// `["<class 'X'>", '502: Bad Gateway...', '<traceback ...>']`.
fn exc_info_line(msg: &str) -> Option<ProxyEvent> {
    let m = msg.trim();
    let inner = m
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .or_else(|| m.strip_prefix('[').and_then(|r| r.strip_suffix(']')))?;
    let c = inner.find("<class '")?;
    let after = &inner[c + "<class '".len()..];
    let class = &after[..after.find('\'')?];
    let status = inner
        .find("status_code=")
        .and_then(|i| leading_status(&inner[i + "status_code=".len()..]))
        .or_else(|| {
            // chat prints `str(HTTPException)`: '502: Bad Gateway...'.
            let i = inner.find(", '").or_else(|| inner.find(", \""))?;
            leading_status(&inner[i + 3..])
        });
    let name = class.rsplit('.').next().unwrap_or(class);
    let text = match status {
        Some(s) => format!("{name} (HTTP {s})"),
        None => name.to_string(),
    };
    Some(ProxyEvent::Error { kind: ProxyErrorKind::Detail, status, text: clip(&text), instance: None })
}

/// A leading 3-digit HTTP status, as in `500: ...` or `503 - ...`.
fn leading_status(s: &str) -> Option<u16> {
    let end = s.bytes().position(|b| !b.is_ascii_digit()).unwrap_or(s.len());
    s[..end].parse().ok().filter(|n| (100..600).contains(n))
}

/// `http://localhost:8100/v1/completions` → `localhost:8100`.
fn host_port(url: &str) -> Option<&str> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.split('/').next().filter(|h| !h.is_empty())
}

fn url_port(url: &str) -> Option<u16> {
    let (_, port) = host_port(url)?.rsplit_once(':')?;
    port.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(line: &str) -> ProxyEvent {
        parse_proxy_line(line).unwrap_or(ProxyEvent::Other)
    }

    #[test]
    fn access_and_startup() {
        assert_eq!(
            p("INFO:     127.0.0.1:36058 - \"POST /v1/completions HTTP/1.1\" 200 OK\n"),
            ProxyEvent::Access(AccessLine {
                client: "127.0.0.1:36058".into(),
                method: "POST".into(),
                path: "/v1/completions".into(),
                status: 200,
            })
        );
        assert_eq!(
            p("INFO:     Uvicorn running on http://127.0.0.1:8000 (Press CTRL+C to quit)"),
            ProxyEvent::Startup { port: Some(8000) }
        );
        assert_eq!(p("INFO:     Started server process [3370]"), ProxyEvent::Startup { port: None });
        assert_eq!(parse_proxy_line("\r\n"), None);
    }

    #[test]
    fn demo_and_toy_errors() {
        let kind = |l: &str| match p(l) {
            ProxyEvent::Error { kind, status, .. } => Some((kind, status)),
            _ => None,
        };
        use ProxyErrorKind as K;
        assert_eq!(kind("Error occurred in disagg proxy server"), Some((K::DisaggProxy, None)));
        assert_eq!(
            kind("ERROR:root:Request failed with status 500: {\"error\": \"x\"}"),
            Some((K::UpstreamStatus, Some(500)))
        );
        assert_eq!(kind("ERROR:root:ClientError occurred: Cannot connect"), Some((K::Connection, None)));
        assert_eq!(kind("ERROR:root:Unexpected error: boom"), Some((K::Unexpected, None)));
        // uvicorn, as the bench run's proxy printed it when a decode died.
        assert_eq!(kind("ERROR:    Exception in ASGI application"), Some((K::Asgi, None)));
        assert_eq!(kind("ERROR:    Something else"), Some((K::Other, None)));
        assert_eq!(
            kind("Error occurred in disagg prefill proxy server - completions endpoint"),
            Some((K::ToyProxy, None))
        );
        assert_eq!(
            kind("ERROR:__main__:Decode backend error 503 - busy"),
            Some((K::UpstreamStatus, Some(503)))
        );
        assert_eq!(p("INFO:root:Verifying 1.2.3.4:8 ..."), ProxyEvent::Other);
        // What the demo proxy really printed (demo-proxy-qwen3/proxy.log).
        let host = |l: &str| match p(l) {
            ProxyEvent::Error { instance, .. } => instance,
            _ => None,
        };
        assert_eq!(
            host(
                "ERROR:root:ClientError occurred: Cannot connect to host 127.0.0.1:8100 ssl:default [Connect call failed ('127.0.0.1', 8100)]"
            ),
            Some("127.0.0.1:8100".into())
        );
        let tuple = "(<class 'fastapi.exceptions.HTTPException'>, HTTPException(status_code=502, detail='Bad Gateway: Error communicating with upstream server.'), <traceback object at 0x7efcb3d82e40>)";
        assert_eq!(kind(tuple), Some((K::Detail, Some(502))));
        let stop = "(<class 'StopIteration'>, StopIteration(), <traceback object at 0x7efcb3477fc0>)";
        assert!(
            matches!(p(stop), ProxyEvent::Error { kind: K::Detail, status: None, ref text, .. } if text == "StopIteration")
        );
        let chat = "[\"<class 'fastapi.exceptions.HTTPException'>\", '502: Bad Gateway: Error communicating with upstream server.', '<traceback object at 0x7f>']";
        assert_eq!(kind(chat), Some((K::Detail, Some(502))));
        // Cut mid-way: still an error line, never a panic.
        assert_eq!(kind("(<class 'fastapi.exceptions.HTTPExc"), None);
        assert_eq!(host("ERROR:root:ClientError occurred: Cannot connect to host "), None);
        // A traceback's last lines under uvicorn's exception
        // (nixl-1p2d-cascade/proxy.log): the one naming a host is a detail
        // of that exception; the chained one before it and the frames are not.
        let end = "aiohttp.client_exceptions.ClientConnectorError: Cannot connect to host 127.0.0.1:8201 ssl:default [Connect call failed ('127.0.0.1', 8201)]";
        assert_eq!(kind(end), Some((K::Traceback, None)));
        assert_eq!(host(end), Some("127.0.0.1:8201".into()));
        assert_eq!(
            p("ConnectionRefusedError: [Errno 111] Connect call failed ('127.0.0.1', 8201)"),
            ProxyEvent::Other
        );
        assert_eq!(
            p("  File \"/lab/site/aiohttp/connector.py\", line 1324, in _wrap_create_connection"),
            ProxyEvent::Other
        );
        // The miniproxy's print of the exception's args names a host, but no class.
        assert_eq!(
            p(
                "[\"Cannot connect to host 127.0.0.1:8100 ssl:default [Connect call failed ('127.0.0.1', 8100)]\"]"
            ),
            ProxyEvent::Other
        );
    }

    #[test]
    fn benchmark_proxy_lines() {
        let id =
            "___prefill_addr_localhost:14579___decode_addr_localhost:14580_0123456789abcdef0123456789abcdef";
        let ProxyEvent::Request(e) = p(&format!(
            "INFO:__main__:[prefill] start request_id={id} url=http://localhost:8100/v1/completions"
        )) else {
            panic!("not a request event")
        };
        assert_eq!(
            (e.stage, e.request_id.as_str(), e.instance.as_deref()),
            (Stage::PrefillStart, id, Some("localhost:8100"))
        );
        let ProxyEvent::Request(e) =
            p(&format!("INFO:__main__:[prefill] done request_id={id} status=200 elapsed=0.15s"))
        else {
            panic!("not a request event")
        };
        assert_eq!((e.stage, e.status, e.elapsed_s), (Stage::PrefillDone, Some(200), Some(0.15)));
        let ProxyEvent::Request(e) = p(&format!("INFO:__main__:[decode] finished streaming request_id={id}"))
        else {
            panic!("not a request event")
        };
        assert_eq!(e.stage, Stage::DecodeDone);
    }

    #[test]
    fn json_lines() {
        let ProxyEvent::Request(e) = p(
            r#"{"ts": 1764484012.5, "request_id": "r1", "event": "prefill_done", "status": 200, "instance": "127.0.0.1:8100", "prompt_tokens": 2048, "extra": [1]}"#,
        ) else {
            panic!("not a request event")
        };
        assert_eq!(e.stage, Stage::PrefillDone);
        assert_eq!((e.ts, e.status, e.prompt_tokens), (Some(1764484012.5), Some(200), Some(2048)));
        assert_eq!(e.instance.as_deref(), Some("127.0.0.1:8100"));
        // Unknown event, missing field, bad JSON: read, not fatal.
        assert_eq!(p(r#"{"ts": 1, "request_id": "r", "event": "teleport"}"#), ProxyEvent::Other);
        assert_eq!(p(r#"{"request_id": "r", "event": "received"}"#), ProxyEvent::Other);
        assert_eq!(p("{not json"), ProxyEvent::Other);
    }
}
