//! The proxy in front of the pair, from its command line.

use crate::doctor::facts::{InstanceFacts, PairFacts};
use crate::doctor::finding::{Finding, Severity};

/// vLLM's `disagg_proxy_demo.py` sends no `kv_transfer_params`: with NIXL
/// the prefill frees its blocks, decode matches 0 tokens, and every prompt
/// is computed twice, with no warning (`pull_scheduler.py`, 0.33; the
/// `--nixl` flag of vllm#42703 was never merged).
pub fn demo_proxy_with_nixl(f: &PairFacts) -> Vec<Finding> {
    let Some(p) = &f.proxy else { return Vec::new() };
    let nixl: Vec<String> = f.instances.iter().filter(|i| i.is_nixl()).map(InstanceFacts::name).collect();
    if !p.is_demo_proxy() || nixl.is_empty() {
        return Vec::new();
    }
    vec![
        Finding::new(
            "demo_proxy_with_nixl",
            Severity::Problem,
            format!("proxy {}", p.endpoint),
            "the demo proxy passes no kv_transfer_params, which NixlConnector needs: every request is recomputed on decode, silently",
        )
        .evidence(format!("argv of PID {}: {}", p.pid, p.argv.join(" ")))
        .evidence(format!("NixlConnector on {}", nixl.join(", ")))
        .fix("a proxy that forwards the prefill's kv_transfer_params to decode: vLLM's toy_proxy_server.py (tests/v1/kv_connector/nixl_integration), vllm-router or llm-d"),
    ]
}

/// A proxy (or a connector) that pairs prefill and decode by request id,
/// while vLLM appends a random `-xxxxxxxx` to every id (vllm#27987): the
/// two sides never see one id.
pub fn id_randomization(f: &PairFacts) -> Vec<Finding> {
    const VAR: &str = "VLLM_DISABLE_REQUEST_ID_RANDOMIZATION";
    let by_proxy = f.proxy.as_ref().filter(|p| p.joins_by_id());
    let mut out = Vec::new();
    for i in &f.instances {
        let by_connector = i.connector().is_some_and(|c| c.starts_with("P2pNccl"));
        if by_proxy.is_none() && !by_connector {
            continue;
        }
        let Ok(v) = i.env(VAR) else { continue };
        if v.is_some_and(|v| matches!(v.trim(), "1" | "true" | "True")) || !randomizes(i.version.as_deref()) {
            continue;
        }
        let pid = i.process.as_ref().map_or(0, |p| p.pid);
        let who = match by_proxy {
            Some(p) => format!("the proxy ({}) joins prefill and decode by request id", p.script()),
            None => format!("{} matches transfers by request id", i.connector().unwrap_or("the connector")),
        };
        out.push(
            Finding::new("request_id_randomized", Severity::Problem, i.name(), format!("{who}, but vLLM appends a random suffix to each id on each instance: the ids never match and transfers hang or miss"))
                .evidence(format!("{VAR} {} in the environ of PID {pid}", v.map_or("unset".to_string(), |v| format!("= {v}"))))
                .fix(format!("{VAR}=1 on every instance")),
        );
    }
    out
}

/// vLLM appends `-<8 hex>` to request ids from 0.14 on (the engine's
/// suffix `logs::vllm` strips); an unknown version is taken to.
fn randomizes(version: Option<&str>) -> bool {
    let v: Vec<u32> = version.unwrap_or("").split('.').map_while(|p| p.parse().ok()).collect();
    !matches!(v.as_slice(), [0, minor, ..] if *minor < 14)
}
