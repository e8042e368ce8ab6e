//! What a `vllm serve` command line sets, read the way vLLM's
//! `FlexibleArgumentParser` (`vllm/utils/argparse_utils.py`, checked in the
//! 0.26.0 wheel and at main) reads it:
//! `--flag value` and `--flag=value`; `_` and `-` alike in a flag's name
//! (up to its first `.`); dotted keys (`--kv-transfer-config.kv_role
//! kv_producer`) gathered into one JSON object that is appended after the
//! other arguments, so it replaces a whole `--kv-transfer-config` given
//! before (argparse keeps the last value); `vllm serve --model M` is the
//! positional model. A `--config FILE` YAML is not read: what it sets is
//! unknown here, and `config_file` says so. vLLM's parser keeps argparse's
//! prefix abbreviations (`--kv-transfer` for `--kv-transfer-config`), which
//! need vLLM's whole option list to resolve: such a flag is listed in
//! `abbreviated`, its value not read.

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
    /// `None`: the platform picks it at start-up (not guessed here).
    pub block_size: Option<u32>,
    pub dtype: Option<String>,
    pub kv_cache_dtype: Option<String>,
    pub tensor_parallel_size: Option<u32>,
    pub data_parallel_size: Option<u32>,
    /// `None`: vLLM decides from the model (`arg_utils.py`,
    /// `_set_default_chunked_prefill_and_prefix_caching_args`).
    pub enable_prefix_caching: Option<bool>,
    /// The JSON as given, and what it parsed to (or serde's words why not).
    pub kv_transfer_config: Option<(String, Result<KvTransferConfig, String>)>,
    /// `--config FILE`: its settings were not read.
    pub config_file: Option<String>,
    /// Flags that argparse may read as an abbreviation of one read here.
    pub abbreviated: Vec<String>,
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

const LONG_FLAGS: &[&str] = &[
    "--model",
    "--host",
    "--port",
    "--block-size",
    "--dtype",
    "--kv-cache-dtype",
    "--tensor-parallel-size",
    "--data-parallel-size",
    "--kv-transfer-config",
    "--config",
    "--served-model-name",
    "--enable-prefix-caching",
    "--no-enable-prefix-caching",
];

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
                k if k != "--" && LONG_FLAGS.iter().any(|f| f.starts_with(k)) => {
                    out.abbreviated.push(args[i - 1].clone());
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

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    // The decode's command line as /work/shared/lab/gpu-run.sh builds it
    // (CONNECTOR=nixl); its log's `non-default args` line (vLLM 0.26.0,
    // lab-captures/nixl-llama-shape/vllm-decode.log) gives what vLLM read:
    // model /models/lab-llama-8b-shape, host 127.0.0.1, port 8200,
    // served_model_name ['lab-8b'], block_size 16, kv_role kv_consumer.
    const LAB_DECODE: &str = "python3 -m vllm.entrypoints.cli.main serve /models/lab-llama-8b-shape --port 8200 --served-model-name lab-8b --block-size 16 --load-format dummy --enforce-eager --max-model-len 8192 --gpu-memory-utilization 0.40 --enable-log-requests --enable-prompt-tokens-details --host 127.0.0.1 --kv-transfer-config {\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_consumer\"}";

    #[test]
    fn the_lab_decode_reads_as_vllm_read_it() {
        let a = ServeArgs::from_argv(&argv(LAB_DECODE));
        assert_eq!(a.entry, Some(Entry::Serve));
        assert_eq!(a.model.as_deref(), Some("/models/lab-llama-8b-shape"));
        assert_eq!(a.served_model_name, ["lab-8b"]);
        assert_eq!((a.host.as_deref(), a.port, a.block_size), (Some("127.0.0.1"), Some(8200), Some(16)));
        let kv = a.kv_transfer_config.unwrap().1.unwrap();
        assert_eq!(kv.kv_connector.as_deref(), Some("NixlConnector"));
        assert_eq!(kv.kv_role.as_deref(), Some("kv_consumer"));
        assert_eq!((a.tensor_parallel_size, a.dtype, a.enable_prefix_caching), (None, None, None));
        assert!(a.problems.is_empty());
    }

    #[test]
    fn spellings_vllm_accepts() {
        let a = ServeArgs::from_argv(&argv(
            "/venv/bin/python3 /venv/bin/vllm serve --model=m --tensor_parallel_size=4 -tp 2 --data-parallel-size=2 --block_size 32 --kv_cache_dtype=fp8 --dtype bfloat16 --no-enable-prefix-caching --served_model_name a b --port=8100",
        ));
        assert_eq!(a.model.as_deref(), Some("m"));
        // argparse keeps the last of two spellings of one option.
        assert_eq!((a.tensor_parallel_size, a.data_parallel_size), (Some(2), Some(2)));
        assert_eq!(
            (a.block_size, a.kv_cache_dtype.as_deref(), a.dtype.as_deref()),
            (Some(32), Some("fp8"), Some("bfloat16"))
        );
        assert_eq!(a.enable_prefix_caching, Some(false));
        assert_eq!(a.served_model_name, ["a", "b"]);
        assert_eq!(a.port, Some(8100));
    }

    #[test]
    fn dotted_keys_build_the_json_and_replace_an_earlier_one() {
        let a = ServeArgs::from_argv(&argv(
            "vllm serve m --kv-transfer-config {\"kv_connector\":\"ExampleConnector\"} --kv_transfer_config.kv_connector NixlConnector --kv-transfer-config.kv_role=kv_producer --kv-transfer-config.kv_connector_extra_config.kv_lease_duration 60",
        ));
        let (raw, kv) = a.kv_transfer_config.unwrap();
        let kv = kv.unwrap();
        assert_eq!(kv.kv_connector.as_deref(), Some("NixlConnector"), "{raw}");
        assert_eq!(kv.kv_role.as_deref(), Some("kv_producer"));
        assert_eq!(kv.kv_connector_extra_config, Some(serde_json::json!({"kv_lease_duration": 60})));
    }

    #[test]
    fn what_cannot_be_read_is_said() {
        let a = ServeArgs::from_argv(&argv(
            "vllm serve --config cfg.yaml --port x --kv-transfer-config {kv_role:1}",
        ));
        assert_eq!(a.config_file.as_deref(), Some("cfg.yaml"));
        assert_eq!(a.model, None);
        assert_eq!(a.port, None);
        assert_eq!(a.problems.len(), 1, "{:?}", a.problems);
        assert!(a.kv_transfer_config.unwrap().1.is_err());
        let ab = ServeArgs::from_argv(&argv("vllm serve m --kv-transfer {} --served-model x"));
        assert_eq!(ab.abbreviated, ["--kv-transfer", "--served-model"]);
        assert_eq!((ab.kv_transfer_config, ab.served_model_name.len()), (None, 0));
        // Not a vLLM server at all.
        assert_eq!(ServeArgs::from_argv(&argv("python3 miniproxy.py --port 8000")).entry, None);
        let m =
            ServeArgs::from_argv(&argv("python -m vllm.entrypoints.openai.api_server --model x --port 9000"));
        assert_eq!(
            (m.entry, m.model.as_deref(), m.port),
            (Some(Entry::ApiServerModule), Some("x"), Some(9000))
        );
    }
}
