//! What a `vllm serve` command line sets, read the way vLLM's
//! `FlexibleArgumentParser` (`vllm/utils/argparse_utils.py`) reads it:
//! `--flag value` and `--flag=value`; `_` and `-` alike in a flag's name
//! (up to its first `.`); dotted keys (`--kv-transfer-config.kv_role
//! kv_producer`) gathered into one JSON object that is appended after the
//! other arguments, so it replaces a whole `--kv-transfer-config` given
//! before (argparse keeps the last value); `vllm serve --model M` is the
//! positional model. A `--config FILE` YAML is not read: what it sets is
//! unknown here, and `config_file` says so.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How the API server was started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Entry {
    /// `vllm serve` (the console script, or `-m vllm.entrypoints.cli.main serve`).
    Serve,
    /// `python -m vllm.entrypoints.openai.api_server` (no positional model).
    ApiServerModule,
}

/// `--kv-transfer-config` as JSON (`vllm/config/kv_transfer.py`); fields not
/// named here are kept in `other`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KvTransferConfig {
    pub kv_connector: Option<String>,
    pub kv_role: Option<String>,
    pub engine_id: Option<String>,
    pub kv_port: Option<Value>,
    pub kv_ip: Option<String>,
    pub kv_connector_extra_config: Option<Value>,
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// The settings of one `vllm serve` command line that the doctor compares.
/// `None` (or empty): not on the command line, vLLM's default applies.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ServeArgs {
    /// `None`: the command line is no vLLM API server's.
    pub entry: Option<Entry>,
    pub model: Option<String>,
    pub served_model_name: Vec<String>,
    pub host: Option<String>,
    pub port: Option<u16>,
    pub block_size: Option<u32>,
    pub dtype: Option<String>,
    pub kv_cache_dtype: Option<String>,
    pub tensor_parallel_size: Option<u32>,
    pub data_parallel_size: Option<u32>,
    pub enable_prefix_caching: Option<bool>,
    /// The JSON as given, and what it parsed to (or serde's words why not).
    pub kv_transfer_config: Option<(String, Result<KvTransferConfig, String>)>,
    /// `--config FILE`: its settings were not read.
    pub config_file: Option<String>,
    /// Values vLLM would reject (`--port abc`), in words.
    pub problems: Vec<String>,
}

/// vLLM's defaults for what `ServeArgs` leaves `None`.
pub const DEFAULT_PORT: u16 = 8000;
pub const DEFAULT_TP: u32 = 1;
pub const DEFAULT_DP: u32 = 1;
pub const DEFAULT_DTYPE: &str = "auto";
pub const DEFAULT_KV_CACHE_DTYPE: &str = "auto";

fn base(arg: &str) -> Option<&str> {
    arg.rsplit('/').next()
}

/// Where the API server's own arguments begin, and how it was started.
pub fn find_entry(argv: &[String]) -> Option<(Entry, usize)> {
    for (i, a) in argv.iter().enumerate() {
        let next = argv.get(i + 1).map(String::as_str);
        if base(a) == Some("vllm") && next == Some("serve") {
            return Some((Entry::Serve, i + 2));
        }
        if a == "-m"
            && next == Some("vllm.entrypoints.cli.main")
            && argv.get(i + 2).map(String::as_str) == Some("serve")
        {
            return Some((Entry::Serve, i + 3));
        }
        if a == "-m" && next == Some("vllm.entrypoints.openai.api_server") {
            return Some((Entry::ApiServerModule, i + 2));
        }
    }
    None
}

/// `--a_b.c_d=v` → (`--a-b.c_d`, `Some(v)`): dashes for underscores up to
/// the first `.`, as vLLM does.
fn normalise(arg: &str) -> (String, Option<String>) {
    let (key, value) = match arg.split_once('=') {
        Some((k, v)) => (k, Some(v.to_string())),
        None => (arg, None),
    };
    let key = match key.split_once('.') {
        Some((head, rest)) => format!("{}.{rest}", head.replace('_', "-")),
        None => key.replace('_', "-"),
    };
    (key, value)
}

/// The flags read here that take one value, under their long spelling.
fn value_flag(key: &str) -> Option<&'static str> {
    Some(match key {
        "--model" => "--model",
        "--host" => "--host",
        "--port" => "--port",
        "--block-size" => "--block-size",
        "--dtype" => "--dtype",
        "--kv-cache-dtype" => "--kv-cache-dtype",
        "--tensor-parallel-size" | "-tp" => "--tensor-parallel-size",
        "--data-parallel-size" | "-dp" => "--data-parallel-size",
        "--kv-transfer-config" => "--kv-transfer-config",
        "--config" => "--config",
        _ => return None,
    })
}

fn insert_path(obj: &mut serde_json::Map<String, Value>, keys: &[&str], value: Value) {
    match keys {
        [] => {}
        [last] => {
            // Lists given piecewise (`key+`) accumulate, as vLLM merges them.
            match (obj.get_mut(*last), value) {
                (Some(Value::Array(a)), Value::Array(b)) => a.extend(b),
                (_, v) => {
                    obj.insert(last.to_string(), v);
                }
            }
        }
        [first, rest @ ..] => {
            let child = obj.entry(first.to_string()).or_insert_with(|| Value::Object(Default::default()));
            if !child.is_object() {
                *child = Value::Object(Default::default());
            }
            if let Value::Object(m) = child {
                insert_path(m, rest, value);
            }
        }
    }
}

impl ServeArgs {
    /// Reads a full command line (`/proc/PID/cmdline`, interpreter included).
    pub fn from_argv(argv: &[String]) -> ServeArgs {
        let mut out = ServeArgs::default();
        let Some((entry, start)) = find_entry(argv) else { return out };
        out.entry = Some(entry);
        let args = &argv[start..];
        let mut values: BTreeMap<&str, String> = BTreeMap::new();
        let mut dotted: BTreeMap<String, serde_json::Map<String, Value>> = BTreeMap::new();
        let mut i = 0;
        if entry == Entry::Serve && args.first().is_some_and(|a| !a.starts_with('-')) {
            values.insert("--model", args[0].clone());
            i = 1;
        }
        while i < args.len() {
            let (key, inline) = normalise(&args[i]);
            i += 1;
            if !key.starts_with('-') {
                continue;
            }
            if let Some((head, path)) = key.split_once('.').filter(|_| key.starts_with("--")) {
                let raw = match inline {
                    Some(v) => v,
                    None => {
                        i += 1;
                        args.get(i - 1).cloned().unwrap_or_default()
                    }
                };
                let (path, value) = match path.strip_suffix('+') {
                    Some(p) => (p, Value::Array(raw.split(',').map(|s| Value::String(s.into())).collect())),
                    None => (path, serde_json::from_str(&raw).unwrap_or(Value::String(raw))),
                };
                let keys: Vec<&str> = path.split('.').collect();
                insert_path(dotted.entry(head.to_string()).or_default(), &keys, value);
                continue;
            }
            if let Some(flag) = value_flag(&key) {
                let v = match inline {
                    Some(v) => Some(v),
                    None => {
                        i += 1;
                        args.get(i - 1).cloned()
                    }
                };
                match v {
                    Some(v) => {
                        values.insert(flag, v);
                    }
                    None => out.problems.push(format!("{key} has no value")),
                }
                continue;
            }
            match key.as_str() {
                "--enable-prefix-caching" => out.enable_prefix_caching = Some(true),
                "--no-enable-prefix-caching" => out.enable_prefix_caching = Some(false),
                "--served-model-name" => {
                    // nargs="+": every following word up to the next flag.
                    out.served_model_name = inline.into_iter().collect();
                    while i < args.len() && !args[i].starts_with('-') {
                        out.served_model_name.push(args[i].clone());
                        i += 1;
                    }
                }
                _ => {}
            }
        }
        for (head, obj) in dotted {
            if head == "--kv-transfer-config" {
                values.insert("--kv-transfer-config", Value::Object(obj).to_string());
            }
        }
        out.fill(values);
        out
    }

    fn fill(&mut self, mut v: BTreeMap<&str, String>) {
        let mut num = |problems: &mut Vec<String>, key: &str| -> Option<u32> {
            let raw = v.remove(key)?;
            raw.trim().parse().map_err(|_| problems.push(format!("{key} {raw:?} is not a whole number"))).ok()
        };
        self.tensor_parallel_size = num(&mut self.problems, "--tensor-parallel-size");
        self.data_parallel_size = num(&mut self.problems, "--data-parallel-size");
        self.block_size = num(&mut self.problems, "--block-size");
        if let Some(p) = num(&mut self.problems, "--port") {
            match u16::try_from(p) {
                Ok(p) => self.port = Some(p),
                Err(_) => self.problems.push(format!("--port {p} is not a port")),
            }
        }
        self.model = v.remove("--model");
        self.host = v.remove("--host");
        self.dtype = v.remove("--dtype");
        self.kv_cache_dtype = v.remove("--kv-cache-dtype");
        self.config_file = v.remove("--config");
        self.kv_transfer_config = v.remove("--kv-transfer-config").map(|raw| {
            let parsed = serde_json::from_str::<KvTransferConfig>(&raw).map_err(|e| e.to_string());
            (raw, parsed)
        });
    }

    pub fn port_or_default(&self) -> u16 {
        self.port.unwrap_or(DEFAULT_PORT)
    }
}
