//! One log read line by line: every line is either a `Signal` pdtop knows
//! or counted as unknown — never guessed. Also joins a line a terminal
//! wrapped (`... for request` / `        <id> which were ...`).

use super::signal::{Signal, SignalKind as K};
use super::vllm::{VllmEvent, VllmLine, parse_vllm_line};

/// What one line said.
#[derive(Debug, Clone, PartialEq)]
pub struct Classified {
    pub line: Option<VllmLine>,
    /// Request ids the line names (as printed), with or without a signal
    /// (a router's span names its request on every line).
    pub ids: Vec<String>,
    pub signal: Option<Signal>,
    /// This line continues the previous one; `signal` is the joined line's,
    /// and replaces what the previous line said.
    pub continues: bool,
}

/// Per-log reading state and counts.
#[derive(Debug, Default, Clone)]
pub struct Reader {
    prev: String,
    pub known: u64,
    pub unknown: u64,
}

impl Reader {
    pub fn new() -> Reader {
        Reader::default()
    }

    pub fn classify(&mut self, raw: &str) -> Classified {
        let raw = raw.trim_end_matches(['\n', '\r']);
        let indented = raw.starts_with("  ") || raw.starts_with('\t');
        if indented && !self.prev.is_empty() && !raw.trim().is_empty() {
            let joined = format!("{} {}", self.prev.trim_end(), raw.trim());
            let line = parse_vllm_line(&joined);
            if let Some(sig) = line.as_ref().and_then(|l| describe(l, &joined)) {
                self.prev.clear();
                self.known += 1;
                let ids = sig.ids.clone();
                return Classified { line, ids, signal: Some(sig), continues: true };
            }
        }
        let line = parse_vllm_line(raw);
        let signal = line.as_ref().and_then(|l| describe(l, raw));
        self.prev.clear();
        if line.as_ref().is_some_and(|l| l.timestamp.is_some()) {
            self.prev.push_str(raw);
        }
        if signal.is_some() {
            self.known += 1
        } else {
            self.unknown += 1
        }
        let ids = match &signal {
            Some(s) => s.ids.clone(),
            None if raw.contains("request_id=") => {
                let spans = raw.split("}: ").next().unwrap_or("");
                super::proxies::span_ids(spans).map(String::from).collect()
            }
            None => Vec::new(),
        };
        Classified { line, ids, signal, continues: false }
    }
}

/// The signal of a parsed line (`raw` for the parts the event does not keep).
pub fn describe(l: &VllmLine, raw: &str) -> Option<Signal> {
    let s = match &l.event {
        VllmEvent::Received { id, max_tokens, .. } => Signal::new(K::RequestReceived)
            .id(id)
            .num("max_tokens", max_tokens.map(f64::from))
            .num("prompt_tokens", token_ids(raw)),
        VllmEvent::Added { internal_id, .. } => Signal::new(K::RequestAdded).id(internal_id),
        VllmEvent::Aborted { ids } => ids.iter().fold(Signal::new(K::RequestAborted), |s, i| s.id(i)),
        VllmEvent::ExternalCacheHit => Signal::new(K::ExampleConnectorHit),
        VllmEvent::InjectKv { tokens } => {
            Signal::new(K::ExampleConnectorInject).num("tokens", Some(f64::from(*tokens)))
        }
        VllmEvent::KvExpired { id, retrieved_by } => Signal::new(K::ExpiredKv)
            .id(id)
            .num("retrieved_by", retrieved_by.map(f64::from))
            .num("timeout_s", raw.find(" within ").and_then(|i| super::scan::lead_num(&raw[i + 8..]))),
        VllmEvent::EngineStats(e) => Signal::new(K::Stats)
            .num("engine", e.engine.map(f64::from))
            .num("prompt_tps", Some(e.prompt_tps))
            .num("gen_tps", Some(e.gen_tps))
            .num("running", Some(f64::from(e.running)))
            .num("waiting", Some(f64::from(e.waiting)))
            .num("gpu_kv_pct", Some(e.kv_usage_pct))
            .num("prefix_hit_pct", e.prefix_hit_pct)
            .num("external_prefix_hit_pct", e.external_hit_pct),
        VllmEvent::KvTransferMetrics(m) => {
            let shape = if m.repr { "aggregated_stats_repr" } else { "key_eq_value" };
            let mut s = Signal::new(K::NixlTransferMetrics).text("shape", Some(shape));
            for (k, v) in &m.pairs {
                if let Some(name) = metric_name(k) {
                    s = s.num(name, v.parse().ok());
                }
            }
            s
        }
        VllmEvent::EngineDead { text } => {
            Signal::new(K::EngineDead).text("process", l.process.as_deref()).text("reason", Some(text))
        }
        VllmEvent::RequestFailed { id, reason } => {
            Signal::new(K::RequestFailed).id(id).text("reason", Some(reason))
        }
        VllmEvent::StreamError => {
            let endpoint = if raw.contains("chat completion stream") { "chat" } else { "completion" };
            Signal::new(K::StreamError).text("endpoint", Some(endpoint))
        }
        VllmEvent::RequestDetails { id, prompt_tokens } => {
            Signal::new(K::RequestDetails).id(id).num("prompt_tokens", prompt_tokens.map(f64::from))
        }
        VllmEvent::Access(a) => Signal::new(K::HttpAccess)
            .text("method", Some(&a.method))
            .text("path", Some(&a.path))
            .num("status", Some(f64::from(a.status))),
        VllmEvent::ServerStarted { port } => Signal::new(K::ServerStarted).num("port", port.map(f64::from)),
        VllmEvent::Shutdown => Signal::new(K::ServerShutdown),
        VllmEvent::KvConnectorConfig { fields: f, .. } => Signal::new(K::KvConfig)
            .text("role", f.role.as_deref())
            .text("connector", f.connector.as_deref())
            .text("failure_policy", f.failure_policy.as_deref()),
        VllmEvent::Traceback | VllmEvent::Exception { .. } | VllmEvent::Other => l.signal.clone()?,
    };
    Some(s.num("tp_rank", l.tp_rank.map(f64::from)))
}

/// `KV Transfer metrics` keys in both shapes, by their report names.
fn metric_name(k: &str) -> Option<&'static str> {
    Some(match k {
        "Num successful transfers" | "num_successful_transfers" => "num_successful_transfers",
        "Num failed transfers" | "num_failed_transfers" => "num_failed_transfers",
        "Num KV expired reqs" => "num_kv_expired",
        "Avg xfer time (ms)" => "avg_xfer_ms",
        "P90 xfer time (ms)" => "p90_xfer_ms",
        "Avg post time (ms)" => "avg_post_ms",
        "P90 post time (ms)" => "p90_post_ms",
        "Avg MB per transfer" => "avg_mb_per_transfer",
        "Throughput (MB/s)" => "throughput_mb_s",
        "Avg number of descriptors" => "avg_descriptors",
        "avg_transfer_durations" => "avg_transfer_durations",
        "avg_bytes_transferred" => "avg_bytes_transferred",
        "num_blocks_transferred" => "num_blocks_transferred",
        _ => return None,
    })
}

/// `prompt_token_ids: [1, 2, 3]` after the sampling params (0.8–0.10 print it
/// in `Received request`); `None` when cut or `None`.
fn token_ids(raw: &str) -> Option<f64> {
    let i = raw.rfind("), prompt_token_ids: [")?;
    let r = &raw[i + 22..];
    let body = &r[..r.find(']')?];
    Some(if body.trim().is_empty() { 0.0 } else { body.split(',').count() as f64 })
}
