//! The environment variables the doctor reads, each as set, or as vLLM's
//! default (`vllm/envs.py`), or unset. Read from the API server's
//! `environ`: vLLM's engine retitles itself with setproctitle, which
//! overwrites the start of its environment block (seen on a real host,
//! `docs/misconfig.md`), and the engine inherits the server's environment.

use std::collections::BTreeMap;

use serde::Serialize;

/// vLLM's own defaults (`vllm/envs.py`; the side-channel port was 5557
/// before v0.11.1, vllm#25059).
pub const VLLM_DEFAULTS: &[(&str, &str)] = &[
    ("VLLM_NIXL_SIDE_CHANNEL_HOST", "localhost"),
    ("VLLM_NIXL_SIDE_CHANNEL_PORT", "5600"),
    ("VLLM_DISABLE_REQUEST_ID_RANDOMIZATION", "0"),
    ("VLLM_GPU_NIC_PCIE_MAPPING", ""),
    ("VLLM_NIC_SELECTION_VARS", ""),
];

/// Read by UCX, CUDA or NIXL, which have no default value to name.
pub const NAMED: &[&str] =
    &["UCX_NET_DEVICES", "UCX_TLS", "UCX_LOG_LEVEL", "UCX_PROTO_INFO", "CUDA_VISIBLE_DEVICES"];

/// Every variable with one of these prefixes that is set.
pub const PREFIXES: &[&str] = &["NCCL_", "OTEL_", "NIXL_"];

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum EnvValue {
    Set(String),
    /// Not set: vLLM uses this default.
    VllmDefault(&'static str),
    /// Not set, and no default of vLLM's applies.
    Unset,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EnvFact {
    pub name: String,
    pub value: EnvValue,
}

impl EnvFact {
    /// The value the process runs with, set or defaulted.
    pub fn effective(&self) -> Option<&str> {
        match &self.value {
            EnvValue::Set(v) => Some(v),
            EnvValue::VllmDefault(v) => Some(v),
            EnvValue::Unset => None,
        }
    }
}

/// `KEY=VALUE` pairs of an `environ` file (NUL-separated).
pub fn parse_environ(bytes: &[u8]) -> BTreeMap<String, String> {
    bytes
        .split(|b| *b == 0)
        .filter_map(|kv| {
            let kv = String::from_utf8_lossy(kv);
            let (k, v) = kv.split_once('=')?;
            (!k.is_empty()).then(|| (k.to_string(), v.to_string()))
        })
        .collect()
}

/// The variables of interest, vLLM's first, then the named ones, then every
/// set `NCCL_*`, `OTEL_*` and `NIXL_*` in name order.
pub fn env_facts(env: &BTreeMap<String, String>) -> Vec<EnvFact> {
    let fact = |name: &str, default: Option<&'static str>| EnvFact {
        name: name.to_string(),
        value: match (env.get(name), default) {
            (Some(v), _) => EnvValue::Set(v.clone()),
            (None, Some(d)) => EnvValue::VllmDefault(d),
            (None, None) => EnvValue::Unset,
        },
    };
    let mut out: Vec<EnvFact> = VLLM_DEFAULTS.iter().map(|(n, d)| fact(n, Some(d))).collect();
    out.extend(NAMED.iter().map(|n| fact(n, None)));
    out.extend(env.keys().filter(|k| PREFIXES.iter().any(|p| k.starts_with(p))).map(|k| fact(k, None)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_default_and_unset_are_told_apart() {
        let env =
            parse_environ(b"PATH=/usr/bin\0VLLM_NIXL_SIDE_CHANNEL_PORT=5601\0UCX_TLS=\0NCCL_IB_HCA=mlx5_0\0");
        let f = env_facts(&env);
        let get = |n: &str| f.iter().find(|e| e.name == n).unwrap().value.clone();
        assert_eq!(get("VLLM_NIXL_SIDE_CHANNEL_PORT"), EnvValue::Set("5601".into()));
        assert_eq!(get("VLLM_NIXL_SIDE_CHANNEL_HOST"), EnvValue::VllmDefault("localhost"));
        // Set to the empty string is set (UCX reads it as given).
        assert_eq!(get("UCX_TLS"), EnvValue::Set(String::new()));
        assert_eq!(get("UCX_NET_DEVICES"), EnvValue::Unset);
        assert_eq!(get("NCCL_IB_HCA"), EnvValue::Set("mlx5_0".into()));
        assert!(!f.iter().any(|e| e.name == "PATH"));
    }
}
