//! What an instance's log says about its latest start. Lines already
//! parsed elsewhere are read through their parser (`logs::startup` for the
//! config lines, `logs::vllm` for the connector's creation and exceptions);
//! the few start-up lines only the doctor needs are parsed here, one
//! function each:
//!
//! - NIXL's own logger: `NIXL INFO    _api.py:405 Backend UCX was instantiated`
//!   (nixl `src/api/python/_api.py`);
//! - NIXL's hardware warnings, `<n> NVIDIA GPU(s) were detected, but UCX CUDA
//!   support was not found! GPU memory is not supported.` and `<n> IB
//!   device(s) were detected, but accelerated IB support was not found!`
//!   (nixl `src/plugins/ucx/ucx_utils.cpp`);
//! - UCX's transport choice at `UCX_LOG_LEVEL=info`: `ucp_worker.c:1912 UCX
//!   INFO    ucp_context_0 intra-node cfg#2 rma_am(tcp/eth1) ...` (nixl#1097);
//! - UCX's warning that `UCX_NET_DEVICES` names no usable device, `UCX  WARN
//!   network device 'ifb0' is not available, please use one or more of:
//!   'eth0'(tcp), 'lo'(tcp)` (`ucp_context.c`; the plural `network devices
//!   'a','b' are not available` in ucx#11220);
//! - the side-channel listener's bind failures, `zmq.error.ZMQError: Address
//!   already in use (addr='tcp://localhost:5557')` (vllm#20965) and
//!   `Cannot assign requested address (addr='tcp://172.17.0.5:34762')`
//!   (dynamo#2706).

use crate::logs::signal::{SignalKind, Val};
use crate::logs::startup::{StartupConfig, config_message};
use crate::logs::vllm::{VllmEvent, parse_vllm_line};

/// A line's place, for evidence: `vllm-decode.log:57`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct At {
    pub line: usize,
    pub text: String,
}

/// Why the side-channel listener could not bind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindFailure {
    /// Another process holds the port.
    InUse,
    /// The host is no address of this machine.
    CannotAssign,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindError {
    pub kind: BindFailure,
    /// `tcp://localhost:5600`.
    pub addr: String,
    /// `Exception in thread X:` before it (`nixl_handshake_listener`).
    pub thread: Option<String>,
    pub at: At,
}

/// `Remote NIXL agent engine ID mismatch. Expected A,received B.`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineMismatch {
    pub expected: String,
    pub received: String,
    pub at: At,
}

/// The start-up facts of one log, as of its latest start.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogFacts {
    pub file: String,
    pub startup: StartupConfig,
    /// The latest `non-default args` line: the start these facts are of.
    pub start: Option<At>,
    /// `Creating v1 connector with name: X and engine_id: Y`.
    pub created: Option<(String, String, At)>,
    /// `Backend UCX was instantiated`: the backend's name.
    pub nixl_backend: Option<(String, At)>,
    pub hw_warnings: Vec<At>,
    /// UCX's transport lines (`UCX_LOG_LEVEL=info`): what follows `cfg#N`.
    pub transports: Vec<(String, At)>,
    /// UCX's `network device(s) '...' ... not available, please use ...`:
    /// (the devices named, what UCX offers instead).
    pub ucx_unavailable: Vec<(Vec<String>, String, At)>,
    pub bind_errors: Vec<BindError>,
    pub engine_mismatches: Vec<EngineMismatch>,
    /// The API server's pid of this start (`(APIServer pid=N)` on its
    /// `non-default args` line): the process when its port never listens.
    pub api_pid: Option<u32>,
    /// The thread of the latest `Exception in thread X:` line.
    last_thread: Option<String>,
}

/// What each line vLLM's parser is asked of holds: the start-up lines
/// (`logs::startup::is_config_message`; the logo's holds ` version `), the
/// connector's creation, the engine-id exception. The rest, a request's
/// arrival or a stats line (most of a serving log, read by the dashboard
/// as it grows), skip the parse.
const PARSED: [&str; 6] = [
    "non-default args",
    "Initializing a V1 LLM engine",
    "KVTransferConfig(",
    " version ",
    "Creating v1 connector",
    "Remote NIXL agent engine ID mismatch",
];

/// Start-up lines are short; a line is clipped in evidence.
const CLIP: usize = 200;

impl LogFacts {
    pub fn new(file: &str) -> LogFacts {
        LogFacts { file: file.to_string(), ..Default::default() }
    }

    /// Reads a whole log.
    pub fn read(file: &str, text: &str) -> LogFacts {
        let mut f = LogFacts::new(file);
        for (i, line) in text.lines().enumerate() {
            f.on_line(i + 1, line);
        }
        f
    }

    /// `vllm-decode.log:57: <line>`.
    pub fn cite(&self, at: &At) -> String {
        format!("{}:{}: {}", self.file, at.line, at.text)
    }

    pub fn on_line(&mut self, n: usize, raw: &str) {
        let at = || At { line: n, text: clip(raw.trim()) };
        if PARSED.iter().any(|needle| raw.contains(needle))
            && let Some(l) = parse_vllm_line(raw)
        {
            if let Some(msg) = config_message(raw, &l) {
                if msg.starts_with("non-default args") {
                    // A new start: what the previous one printed is history.
                    *self = LogFacts { file: std::mem::take(&mut self.file), ..Default::default() };
                    self.start = Some(at());
                    self.api_pid = l.pid.filter(|_| l.process.as_deref() == Some("APIServer"));
                }
                self.startup.on_line(&msg);
            }
            if let Some(s) = l.signal.as_ref().filter(|s| s.kind == SignalKind::ConnectorCreated) {
                let get = |k| match s.get(k) {
                    Some(Val::Text(t)) => t.clone(),
                    _ => String::new(),
                };
                self.created = Some((get("connector"), get("engine_id"), at()));
            }
            if let VllmEvent::Exception { text, .. } = &l.event
                && let Some((expected, received)) = engine_mismatch(text)
            {
                self.engine_mismatches.push(EngineMismatch { expected, received, at: at() });
            }
        }
        if let Some(t) = raw.split_once("Exception in thread ").and_then(|(_, r)| r.split(':').next()) {
            self.last_thread = Some(t.trim().to_string());
        }
        if let Some(b) = nixl_backend(raw) {
            self.nixl_backend = Some((b.to_string(), at()));
        } else if nixl_hw_warning(raw) {
            self.hw_warnings.push(at());
        } else if let Some((devs, offered)) = ucx_devices_unavailable(raw) {
            self.ucx_unavailable.push((devs, offered.to_string(), at()));
        } else if let Some(t) = ucx_transports(raw) {
            self.transports.push((t.to_string(), at()));
        } else if let Some((kind, addr)) = bind_error(raw) {
            let thread = self.last_thread.clone();
            self.bind_errors.push(BindError { kind, addr: addr.to_string(), thread, at: at() });
        }
    }

    /// The engine id of this start: the connector's creation line, else
    /// the `kv_transfer_config` of the arguments.
    pub fn engine_id(&self) -> Option<&str> {
        self.created
            .as_ref()
            .map(|(_, id, _)| id.as_str())
            .filter(|id| !id.is_empty())
            .or(self.startup.engine_id.as_deref())
    }
}

fn clip(s: &str) -> String {
    match s.char_indices().nth(CLIP) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// `Remote NIXL agent engine ID mismatch. Expected A,received B.` (the
/// exception's text; no space after the comma in vLLM's f-string).
pub fn engine_mismatch(text: &str) -> Option<(String, String)> {
    let r = text.strip_prefix("Remote NIXL agent engine ID mismatch. Expected ")?;
    let (expected, rest) = r.split_once(',')?;
    let received = rest.trim_start().strip_prefix("received ")?.trim().trim_end_matches('.');
    Some((expected.trim().to_string(), received.to_string()))
}

/// `... NIXL INFO    _api.py:405 Backend UCX was instantiated`.
pub fn nixl_backend(line: &str) -> Option<&str> {
    let i = line.find(" NIXL ")?;
    let r = &line[i..];
    let r = &r[r.find("Backend ")? + "Backend ".len()..];
    r.strip_suffix(" was instantiated").or_else(|| r.split_once(" was instantiated").map(|(b, _)| b))
}

/// NIXL's `<n> ... were detected, but ... support was not found!` warnings.
pub fn nixl_hw_warning(line: &str) -> bool {
    line.contains(" were detected, but ") && line.contains("support was not found")
}

/// `UCX  INFO    ucp_context_0 intra-node cfg#2 rma_am(tcp/eth1) ...`: the
/// text after `cfg#N`.
pub fn ucx_transports(line: &str) -> Option<&str> {
    if !line.contains("UCX  INFO") {
        return None;
    }
    let i = line.find(" cfg#")?;
    let r = &line[i + 5..];
    r.split_once(' ').map(|(_, t)| t.trim())
}

/// `ZMQError: Address already in use (addr='tcp://h:p')` or `Cannot assign
/// requested address (addr='...')`.
pub fn bind_error(line: &str) -> Option<(BindFailure, &str)> {
    let kind = if line.contains("Address already in use") {
        BindFailure::InUse
    } else if line.contains("Cannot assign requested address") {
        BindFailure::CannotAssign
    } else {
        return None;
    };
    if !line.contains("ZMQError") {
        return None;
    }
    let addr = line.split_once("(addr='").and_then(|(_, r)| r.split_once('\'')).map_or("", |(a, _)| a);
    Some((kind, addr))
}

/// `UCX  WARN  network device 'ifb0' is not available, please use one or
/// more of: 'eth0'(tcp), 'lo'(tcp)`: the devices, and what UCX offers.
pub fn ucx_devices_unavailable(line: &str) -> Option<(Vec<String>, &str)> {
    if !line.contains("UCX  WARN") {
        return None;
    }
    let r = line.split_once("network device")?.1;
    let (names, rest) = r.split_once(" not available")?;
    let devs: Vec<String> = names.split('\'').skip(1).step_by(2).map(str::to_owned).collect();
    let offered = rest.split_once("one or more of: ").map_or("", |(_, o)| o.trim());
    (!devs.is_empty()).then_some((devs, offered))
}
