//! Do both sides run the same thing? Model, served name, KV dtype, length,
//! connector, folder and version are compared by the state's own rule
//! (`state::mismatch`, which the dashboard applies after traffic); block
//! size, dtype and TP have rules of their own here, since NIXL accepts some
//! differences there.

use crate::doctor::facts::{InstanceFacts, PairFacts};
use crate::doctor::finding::{Finding, Severity};
use crate::feed::{Endpoint, Role};
use crate::metrics::model::InstanceSample;
use crate::state::instance::InstanceState;
use crate::state::mismatch::{self, Effect};

/// The facts as the state holds an instance, for `mismatch::find`.
fn as_state(i: &InstanceFacts) -> Option<InstanceState> {
    let mut s = InstanceState::new(Endpoint::parse(i.role, &i.endpoint).ok()?);
    s.startup = i.startup.clone();
    s.version = i.version.clone();
    s.info = i.models.clone();
    if let Some(m) = &i.metrics {
        s.on_scrape(0.0, InstanceSample::from_text(&m.body));
    }
    Some(s)
}

/// Fields whose rule lives elsewhere: roles (`roles`) and block size (below).
const OWN_RULES: [&str; 2] = ["kv_role", "block_size"];

/// Model, served name, KV dtype, max length, connector, KV folder and
/// vLLM version, as `state::mismatch` compares them.
pub fn config_mismatches(f: &PairFacts) -> Vec<Finding> {
    let states: Vec<InstanceState> = f.instances.iter().filter_map(as_state).collect();
    let nixl = f.instances.iter().any(InstanceFacts::is_nixl);
    mismatch::find(&states)
        .into_iter()
        .filter(|m| !OWN_RULES.contains(&m.field))
        .map(|m| {
            // NIXL's handshake hashes the exact version: a difference fails it.
            let severity = match m.effect {
                Effect::Risk if !nixl => Severity::Warning,
                _ => Severity::Problem,
            };
            let mut out = Finding::new(&format!("{}_differs", m.field), severity, "pair", m.why.clone());
            for (endpoint, role, value) in &m.values {
                out = out.evidence(format!("{} {endpoint}: {} = {value}", role.name(), m.field));
            }
            out.fix(fix_for(m.field))
        })
        .collect()
}

fn fix_for(field: &str) -> &'static str {
    match field {
        "model" => "serve the same checkpoint on both: the same MODEL in `vllm serve MODEL`",
        "served_model_name" => "the same --served-model-name on both",
        "cache_dtype" => "the same --kv-cache-dtype on both",
        "max_model_len" => "the same --max-model-len on both",
        "kv_connector" => "the same \"kv_connector\" in --kv-transfer-config on both",
        "kv_storage_path" => "the same \"shared_storage_path\" in kv_connector_extra_config on both",
        "vllm_version" => "install the same vLLM release on both",
        _ => "make both sides agree",
    }
}

fn block_of(i: &InstanceFacts) -> Option<(u32, &'static str)> {
    if let Some(b) = i.metrics.as_ref().and_then(|m| m.block_size) {
        return Some((b, "cache_config_info on /metrics"));
    }
    i.startup.block_size.map(|b| (b, "start-up arguments"))
}

/// NIXL (decode reads): decode's block size must be a multiple of the
/// prefill's (`Local block size ... is not divisible by remote block
/// size`, at the first request). Other connectors key stored KV by
/// block-aligned prompt length: any difference misses.
pub fn block_size(f: &PairFacts) -> Vec<Finding> {
    let mut out = Vec::new();
    for p in f.of(Role::Prefill) {
        for d in f.of(Role::Decode) {
            let (Some((pb, ps)), Some((db, ds))) = (block_of(p), block_of(d)) else {
                continue;
            };
            if pb == db {
                continue;
            }
            let nixl = p.is_nixl() && d.is_nixl();
            let evidence = [
                format!("{}: block_size {pb} ({ps})", p.name()),
                format!("{}: block_size {db} ({ds})", d.name()),
            ];
            let finding = if nixl && db % pb == 0 {
                Finding::new(
                    "block_size_differs",
                    Severity::Note,
                    format!("{}, {}", p.name(), d.name()),
                    format!(
                        "decode's block size {db} is a multiple of the prefill's {pb}: NIXL maps the blocks"
                    ),
                )
            } else {
                let why = if nixl {
                    format!(
                        "decode's block size {db} is not a multiple of the prefill's {pb}: the first transfer fails its handshake (Local block size {db} is not divisible by remote block size {pb})"
                    )
                } else {
                    format!(
                        "prefill block {pb}, decode block {db}: decode looks for blocks the prefill never stores"
                    )
                };
                Finding::new(
                    "block_size_differs",
                    Severity::Problem,
                    format!("{}, {}", p.name(), d.name()),
                    why,
                )
                .fix(if nixl {
                    format!(
                        "--block-size {db} on the prefill (or a decode block size that is a multiple of {pb})"
                    )
                } else {
                    format!("the same --block-size on both (e.g. --block-size {pb} on the decode)")
                })
            };
            out.push(evidence.into_iter().fold(finding, Finding::evidence));
        }
    }
    out
}

/// Pairs of (prefill, decode) values of one start-up field that differ.
fn differing<T: PartialEq + Clone>(
    f: &PairFacts,
    get: impl Fn(&InstanceFacts) -> Option<T>,
) -> Vec<(&InstanceFacts, T, &InstanceFacts, T)> {
    let mut out = Vec::new();
    for p in f.of(Role::Prefill) {
        for d in f.of(Role::Decode) {
            if let (Some(a), Some(b)) = (get(p), get(d))
                && a != b
            {
                out.push((p, a, d, b));
            }
        }
    }
    out
}

/// The weights' dtype: NIXL's compatibility hash includes it (the first
/// handshake fails); other connectors load KV of the wrong width.
pub fn dtype(f: &PairFacts) -> Vec<Finding> {
    differing(f, |i| i.startup.dtype.clone())
        .into_iter()
        .map(|(p, a, d, b)| {
            Finding::new(
                "dtype_differs",
                Severity::Problem,
                format!("{}, {}", p.name(), d.name()),
                format!(
                    "prefill dtype {a}, decode dtype {b}: the KV one computes is not the KV the other reads"
                ),
            )
            .evidence(format!("{}: dtype={a} (Initializing a V1 LLM engine)", p.name()))
            .evidence(format!("{}: dtype={b} (Initializing a V1 LLM engine)", d.name()))
            .fix(format!("the same --dtype on both (e.g. --dtype {a})"))
        })
        .collect()
}

/// Tensor parallelism: NIXL maps heterogeneous TP when one size divides
/// the other (`Local tensor parallel size %d is not divisible by remote`);
/// other connectors store per-rank KV that the other side cannot split.
pub fn tensor_parallel(f: &PairFacts) -> Vec<Finding> {
    differing(f, |i| i.startup.tensor_parallel_size)
        .into_iter()
        .map(|(p, a, d, b)| {
            let divides = a % b == 0 || b % a == 0;
            let nixl = p.is_nixl() && d.is_nixl();
            let (severity, why) = if nixl && divides {
                (Severity::Note, format!("prefill TP {a}, decode TP {b}: NIXL maps heterogeneous TP (a block-contiguous layout on the prefill side)"))
            } else {
                (Severity::Problem, format!("prefill TP {a}, decode TP {b}: the KV shards do not line up"))
            };
            Finding::new("tensor_parallel_differs", severity, format!("{}, {}", p.name(), d.name()), why)
                .evidence(format!("{}: tensor_parallel_size={a}", p.name()))
                .evidence(format!("{}: tensor_parallel_size={b}", d.name()))
                .fix("the same --tensor-parallel-size on both, or sizes that divide each other with NIXL")
        })
        .collect()
}
