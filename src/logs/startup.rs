//! What an instance's own startup log says it runs. vLLM prints its
//! non-default arguments (model, served name, block size, max length, the
//! `kv_transfer_config` with connector and `kv_role`), the engine's full
//! config with its version, and the connector's config when it starts:
//!
//! ```text
//! [api_utils.py:345]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.26.0
//! [api_utils.py:273] non-default args: {'model': '/models/x', 'max_model_len': 8192, 'served_model_name': ['lab-8b'], 'block_size': 16, 'kv_transfer_config': KVTransferConfig(kv_connector='ExampleConnector', ..., kv_role='kv_consumer', ..., kv_connector_extra_config={'shared_storage_path': '/lab/kv'}, ...)}
//! [core.py:116] Initializing a V1 LLM engine (v0.26.0) with config: model='/models/x', ..., max_seq_len=8192, ..., kv_cache_dtype=auto, ..., served_model_name=lab-8b, ...
//! [example_connector.py:106] KVTransferConfig(kv_connector='ExampleConnector', ..., kv_role='kv_producer', ...)
//! ```
//!
//! A restarted instance prints them again; the latest start wins.

/// The fields pdtop compares across roles, as the log gave them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StartupConfig {
    pub model: Option<String>,
    pub served_name: Option<String>,
    pub max_model_len: Option<u64>,
    pub block_size: Option<u32>,
    pub cache_dtype: Option<String>,
    /// `none` when the arguments were seen and held no `kv_transfer_config`.
    pub connector: Option<String>,
    pub kv_role: Option<String>,
    /// The ExampleConnector's folder (`shared_storage_path`).
    pub storage_path: Option<String>,
    pub version: Option<String>,
    /// The connector's `engine_id` (a fresh uuid4 per start unless set):
    /// the id the other side names in a NIXL handshake.
    pub engine_id: Option<String>,
    /// The weights' dtype as the engine resolved it (`bfloat16`).
    pub dtype: Option<String>,
    pub tensor_parallel_size: Option<u32>,
}

/// Whether a line's message is a start-up line worth reading: every log
/// line passes here, so only prefixes are compared.
pub fn is_config_message(msg: &str) -> bool {
    msg.starts_with("non-default args")
        || msg.starts_with("Initializing a V1 LLM engine (v")
        || msg.starts_with("KVTransferConfig(")
        || msg.starts_with("vLLM API server version")
        // The logo's last line: ` ▄▄ ▄█ █ ... █  version 0.26.0`.
        || (msg.starts_with(' ') && msg.len() < 120 && msg.contains(" version "))
}

/// The message of a parsed line when it is a start-up line worth reading.
pub fn config_message(raw: &str, line: &super::vllm::VllmLine) -> Option<String> {
    let text = super::line::strip_ansi(raw);
    let msg = text.get(line.message_at..)?;
    is_config_message(msg).then(|| msg.to_string())
}

/// What `/version` and the log call the same release look alike: `0.26.0`.
pub fn normalize_version(v: &str) -> String {
    v.trim().trim_start_matches('v').to_string()
}

impl StartupConfig {
    /// Reads one line; true when it changed what is known.
    pub fn on_line(&mut self, line: &str) -> bool {
        let before = self.clone();
        if let Some(rest) = after(line, "non-default args: ") {
            self.on_args(rest);
        } else if let Some(rest) = after(line, "Initializing a V1 LLM engine (v") {
            // The engine's whole config: fills what the arguments left at default.
            if let Some(v) = rest.split(')').next().filter(|v| looks_like_version(v)) {
                self.version = Some(normalize_version(v));
            }
            let set = |slot: &mut Option<String>, v: Option<&str>| {
                if let Some(v) = v.filter(|v| !v.is_empty() && *v != "None") {
                    *slot = Some(v.to_string());
                }
            };
            set(&mut self.model, quoted(rest, "config: model='"));
            set(&mut self.cache_dtype, bare(rest, "kv_cache_dtype="));
            set(&mut self.served_name, bare(rest, "served_model_name="));
            // `, dtype=`: the comma keeps `kv_cache_dtype=` out.
            set(&mut self.dtype, bare(rest, ", dtype=").map(|d| d.trim_start_matches("torch.")));
            if let Some(n) = number(rest, "tensor_parallel_size=").and_then(|n| u32::try_from(n).ok()) {
                self.tensor_parallel_size = Some(n);
            }
            if let Some(n) = number(rest, "max_seq_len=") {
                self.max_model_len = Some(n);
            }
        } else if line.contains("KVTransferConfig(") {
            self.on_kv_config(line);
        } else if let Some(v) = banner_version(line) {
            self.version = Some(v);
        }
        *self != before
    }

    /// `non-default args: {...}`: printed once per start, before anything
    /// else of that start, so what it lacks is back to unknown (or none).
    fn on_args(&mut self, args: &str) {
        self.model = quoted(args, "'model': '").map(str::to_owned);
        // A list (`['lab-8b']`) or a plain string.
        self.served_name = after(args, "'served_model_name': ")
            .and_then(|r| quoted(r.trim_start_matches('['), "'"))
            .map(str::to_owned);
        self.max_model_len = number(args, "'max_model_len': ");
        self.block_size = number(args, "'block_size': ").and_then(|n| u32::try_from(n).ok());
        self.cache_dtype = quoted(args, "'kv_cache_dtype': '").map(str::to_owned);
        self.dtype = quoted(args, "'dtype': '").map(str::to_owned);
        self.tensor_parallel_size =
            number(args, "'tensor_parallel_size': ").and_then(|n| u32::try_from(n).ok());
        self.engine_id = None;
        if args.contains("KVTransferConfig(") || args.contains("'kv_transfer_config': {") {
            self.on_kv_config(args);
        } else {
            self.connector = Some("none".into());
            self.kv_role = None;
            self.storage_path = None;
        }
    }

    /// `KVTransferConfig(kv_connector='X', ..., kv_role='Y', ...)`, or the
    /// same given as JSON-ish dict keys.
    fn on_kv_config(&mut self, text: &str) {
        let connector = quoted(text, "kv_connector='").or_else(|| quoted(text, "'kv_connector': '"));
        if let Some(c) = connector {
            self.connector = Some(c.to_string());
        }
        let role = quoted(text, "kv_role='").or_else(|| quoted(text, "'kv_role': '"));
        if let Some(r) = role {
            self.kv_role = Some(r.to_string());
        }
        if let Some(p) = quoted(text, "'shared_storage_path': '") {
            self.storage_path = Some(p.to_string());
        }
        let id = quoted(text, "engine_id='").or_else(|| quoted(text, "'engine_id': '"));
        if let Some(id) = id.filter(|i| !i.is_empty()) {
            self.engine_id = Some(id.to_string());
        }
    }
}

fn after<'a>(s: &'a str, key: &str) -> Option<&'a str> {
    s.find(key).map(|i| &s[i + key.len()..])
}

/// The text after `key` up to the next `'` (key ends with the opening quote).
fn quoted<'a>(s: &'a str, key: &str) -> Option<&'a str> {
    let rest = after(s, key)?;
    rest.find('\'').map(|end| &rest[..end])
}

/// An unquoted value: up to `,`, `)` or whitespace.
fn bare<'a>(s: &'a str, key: &str) -> Option<&'a str> {
    let rest = after(s, key)?;
    let end = rest.find([',', ')', ' ']).unwrap_or(rest.len());
    Some(&rest[..end])
}

fn number(s: &str, key: &str) -> Option<u64> {
    let rest = after(s, key)?;
    let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    rest[..end].parse().ok()
}

fn looks_like_version(v: &str) -> bool {
    let v = v.trim_start_matches('v');
    v.split('.').count() >= 2
        && v.split('.').next().is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// The start banner: `vLLM API server version 0.x` (older) or the ASCII
/// logo ending in `version 0.26.0` (newer).
fn banner_version(line: &str) -> Option<String> {
    let rest = if let Some(r) = after(line, "vLLM API server version ") {
        r
    } else if line.contains('█') {
        after(line, " version ")?
    } else {
        return None;
    };
    let v = rest.split_whitespace().next()?;
    looks_like_version(v).then(|| normalize_version(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The message after `[file.py:123] `, as the parser finds it.
    fn message(line: &str) -> Option<&str> {
        let l = crate::logs::vllm::parse_vllm_line(line)?;
        line.get(l.message_at..)
    }

    /// Every line of a real recorded instance log, read as a tailer would.
    fn read_log(capture: &str, file: &str) -> StartupConfig {
        let path = format!("{}/tests/fixtures/lab-captures/{capture}/{file}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap();
        let mut c = StartupConfig::default();
        let worth = |l: &&str| message(l).is_some_and(is_config_message);
        for line in text.lines().filter(worth) {
            c.on_line(line);
        }
        c
    }

    #[test]
    fn the_recorded_pair_says_what_it_runs() {
        let p = read_log("qwen3-shape-restart", "vllm-prefill.log");
        assert_eq!(p.model.as_deref(), Some("/models/lab-qwen3-8b-shape"));
        assert_eq!(p.served_name.as_deref(), Some("lab-8b"));
        assert_eq!(p.max_model_len, Some(8192));
        assert_eq!(p.block_size, Some(16));
        assert_eq!(p.cache_dtype.as_deref(), Some("auto"));
        assert_eq!(p.connector.as_deref(), Some("ExampleConnector"));
        assert_eq!(p.kv_role.as_deref(), Some("kv_producer"));
        assert_eq!(p.storage_path.as_deref(), Some("/lab/kv"));
        assert_eq!(p.version.as_deref(), Some("0.26.0"));
        let d = read_log("qwen3-shape-restart", "vllm-decode.log");
        assert_eq!(d.kv_role.as_deref(), Some("kv_consumer"));
        assert_eq!(d.block_size, Some(16));
        let n = read_log("nixl-llama-shape", "vllm-decode2.log");
        assert_eq!(n.connector.as_deref(), Some("NixlConnector"));
        assert_eq!(n.kv_role.as_deref(), Some("kv_consumer"));
        assert_eq!(n.storage_path, None);
        assert_eq!(n.version.as_deref(), Some("0.26.0"));
        assert_eq!(n.engine_id.as_deref(), Some("c7493e62-f2ad-4335-ad0e-19942661f025"));
        assert_eq!(n.dtype.as_deref(), Some("bfloat16"));
        assert_eq!(n.tensor_parallel_size, Some(1));
    }

    #[test]
    fn a_new_start_replaces_what_the_old_one_said() {
        let mut c = read_log("qwen3-shape-restart", "vllm-decode.log");
        // The same instance started again without a connector or block size.
        assert!(c.on_line(
            "(APIServer pid=9) INFO 12-01 07:30:00 [api_utils.py:273] non-default args: {'model': '/models/other', 'max_model_len': 4096}"
        ));
        assert_eq!(c.model.as_deref(), Some("/models/other"));
        assert_eq!(c.max_model_len, Some(4096));
        assert_eq!(c.block_size, None);
        assert_eq!(c.connector.as_deref(), Some("none"));
        assert_eq!(c.kv_role, None);
    }

    #[test]
    fn odd_lines_give_nothing_and_never_panic() {
        let mut c = StartupConfig::default();
        for line in [
            "non-default args: ",
            "non-default args: {'block_size': 99999999999999999999, 'model': '",
            "Initializing a V1 LLM engine (v",
            "KVTransferConfig(kv_role='",
            "INFO Using FlashAttention version 3",
            "█ version",
            "vLLM API server version ",
        ] {
            c.on_line(line);
        }
        assert_eq!(c.block_size, None);
        assert_eq!(c.version, None);
        assert_eq!(c.kv_role, None);
        let access = "INFO:     127.0.0.1:1 - \"GET /metrics HTTP/1.1\" 200 OK";
        assert!(!StartupConfig::default().on_line(access));
        assert!(!message(access).is_some_and(is_config_message));
    }
}
