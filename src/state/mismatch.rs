//! Do the two roles run the same thing? The split only works when prefill
//! and decode agree on what a block of KV is and where it goes: same model,
//! block size, KV dtype, a connector that looks where the other stores.
//! When they disagree nothing fails: decode finds no KV, recomputes the
//! prompt and answers 200 OK. So each disagreement is named as a cause.
//!
//! Each field comes from what the instance says about itself: the
//! `vllm:cache_config_info` labels, `/v1/models`, `/version` and its
//! startup log. Only fields both roles report are compared; a field one
//! side lacks is unknown, never a mismatch. Fields that differ by design
//! (`kv_role` producer vs consumer, ports) are not compared, but a role on
//! the wrong side (a consumer behind `--prefill`, a producer behind
//! `--decode`) is said.

use std::collections::BTreeSet;
use std::fmt;

use super::instance::InstanceState;
use crate::feed::Role;

/// A field pdtop compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Field {
    Model,
    ServedName,
    BlockSize,
    CacheDtype,
    MaxModelLen,
    Connector,
    StoragePath,
    Version,
}

/// How a disagreement shows up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Effect {
    /// Decode finds no KV and recomputes: silent misses.
    Misses,
    /// Requests refused by one side: errors.
    Errors,
    /// May keep KV from loading; not certain.
    Risk,
}

impl Field {
    pub const ALL: [Field; 8] = [
        Field::Model,
        Field::ServedName,
        Field::BlockSize,
        Field::CacheDtype,
        Field::MaxModelLen,
        Field::Connector,
        Field::StoragePath,
        Field::Version,
    ];

    /// The name in `check --json`.
    pub fn name(self) -> &'static str {
        match self {
            Field::Model => "model",
            Field::ServedName => "served_model_name",
            Field::BlockSize => "block_size",
            Field::CacheDtype => "cache_dtype",
            Field::MaxModelLen => "max_model_len",
            Field::Connector => "kv_connector",
            Field::StoragePath => "kv_storage_path",
            Field::Version => "vllm_version",
        }
    }

    /// The words before a value in a sentence ("prefill block 16").
    fn label(self) -> &'static str {
        match self {
            Field::Model => "model",
            Field::ServedName => "serves",
            Field::BlockSize => "block",
            Field::CacheDtype => "KV dtype",
            Field::MaxModelLen => "max_model_len",
            Field::Connector => "connector",
            Field::StoragePath => "KV folder",
            Field::Version => "vLLM",
        }
    }

    fn consequence(self) -> &'static str {
        match self {
            Field::Model => "KV computed by one model is useless to the other",
            Field::ServedName => "a request naming one model is refused by the other instance",
            Field::BlockSize => "decode looks for blocks the prefill never stores",
            Field::CacheDtype => "decode cannot use the KV the prefill stores",
            Field::MaxModelLen => "prompts that fit one instance are refused by the other",
            Field::Connector => "decode never looks where the prefill puts its KV",
            Field::StoragePath => {
                "decode looks for KV in a folder the prefill never writes (unless both paths are one storage)"
            }
            Field::Version => "what a connector stores can change between versions, so KV may not load",
        }
    }

    pub fn effect(self) -> Effect {
        match self {
            Field::ServedName | Field::MaxModelLen => Effect::Errors,
            Field::Version => Effect::Risk,
            _ => Effect::Misses,
        }
    }

    /// This instance's value, from the best source it has.
    pub fn value_of(self, i: &InstanceState) -> Option<Value> {
        let s = &i.startup;
        let sample = i.latest.as_ref();
        let info = i.info.as_ref();
        let text = |v: Option<&str>| v.filter(|v| !v.is_empty()).map(|v| Value::Text(v.to_string()));
        match self {
            Field::Model => text(info.and_then(|m| m.root.as_deref()).or(s.model.as_deref())),
            Field::ServedName => text(
                info.map(|m| m.id.as_str())
                    .or(sample.and_then(|x| x.model_name.as_deref()))
                    .or(s.served_name.as_deref()),
            ),
            Field::BlockSize => {
                sample.and_then(|x| x.block_size).or(s.block_size).map(|b| Value::Num(u64::from(b)))
            }
            Field::CacheDtype => {
                text(sample.and_then(|x| x.cache_dtype.as_deref()).or(s.cache_dtype.as_deref()))
            }
            Field::MaxModelLen => info.and_then(|m| m.max_model_len).or(s.max_model_len).map(Value::Num),
            Field::Connector => text(s.connector.as_deref()),
            // Only the ExampleConnector keeps its KV in a folder.
            Field::StoragePath => {
                let example = s
                    .connector
                    .as_deref()
                    .is_some_and(|c| c.ends_with("StorageConnector") || c == "ExampleConnector");
                text(s.storage_path.as_deref().filter(|_| example))
            }
            Field::Version => text(i.version.as_deref().or(s.version.as_deref())),
        }
    }

    /// Whether a prefill's and a decode's value can work together.
    fn agree(self, a: &Value, b: &Value) -> bool {
        if a == b {
            return true;
        }
        match (self, a, b) {
            // `auto` is the model's own dtype: only a quantized KV cache is
            // known to differ from it.
            // The same checkpoint mounted at another path, or named by its
            // hub id on one side: the last component is the model.
            (Field::Model, Value::Text(x), Value::Text(y)) => {
                let base = |p: &str| p.trim_end_matches('/').rsplit('/').next().unwrap_or("").to_string();
                !base(x).is_empty() && base(x) == base(y)
            }
            (Field::CacheDtype, Value::Text(x), Value::Text(y)) => {
                let quantized =
                    |d: &str| d.starts_with("fp8") || d.starts_with("int") || d.starts_with("nvfp4");
                (x == "auto" && !quantized(y)) || (y == "auto" && !quantized(x))
            }
            _ => false,
        }
    }
}

/// A value as reported (a number or a word).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Value {
    Num(u64),
    Text(String),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Num(n) => write!(f, "{n}"),
            Value::Text(t) => f.write_str(t),
        }
    }
}

impl Value {
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Num(n) => serde_json::Value::from(*n),
            Value::Text(t) => serde_json::Value::from(t.as_str()),
        }
    }
}

/// One disagreement: every reporting instance's value, and what it does.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// A [`Field::name`], or `kv_role` for a role on the wrong side.
    pub field: &'static str,
    /// (endpoint, role, value) of each instance that reports it.
    pub values: Vec<(String, Role, Value)>,
    pub why: String,
    pub effect: Effect,
}

impl Mismatch {
    /// Identifies it across recomputations (an event is sent for a new
    /// one): the field and which values each role has, so another instance
    /// joining with values already seen is not news.
    pub fn key(&self) -> (&'static str, BTreeSet<(Role, &Value)>) {
        (self.field, self.values.iter().map(|(_, r, v)| (*r, v)).collect())
    }
}

/// Every disagreement between the roles, most harmful first.
pub fn find(instances: &[InstanceState]) -> Vec<Mismatch> {
    let mut out = Vec::new();
    if let Some(m) = role_confusion(instances) {
        out.push(m);
    }
    for field in Field::ALL {
        let values: Vec<(String, Role, Value)> = instances
            .iter()
            .filter_map(|i| Some((i.endpoint.display.clone(), i.endpoint.role, field.value_of(i)?)))
            .collect();
        // Distinct values per role first: a fleet has few of them.
        let of = |role| -> BTreeSet<&Value> {
            values.iter().filter(|(_, r, _)| *r == role).map(|(_, _, v)| v).collect()
        };
        let (prefill, decode) = (of(Role::Prefill), of(Role::Decode));
        let disagree = prefill.iter().any(|p| decode.iter().any(|d| !field.agree(p, d)));
        if disagree {
            let why = format!(
                "{}, {}: {}",
                side(&values, Role::Prefill, field.label()),
                side(&values, Role::Decode, field.label()),
                field.consequence()
            );
            out.push(Mismatch { field: field.name(), values, why, effect: field.effect() });
        }
    }
    out.sort_by_key(|m| m.effect);
    out
}

/// "prefill block 16", or per value when one role's instances differ:
/// "decode 127.0.0.1:8201 block 32", "decode block 16 on 30 instances".
fn side(values: &[(String, Role, Value)], role: Role, label: &str) -> String {
    let mut by_value: Vec<(&Value, Vec<&str>)> = Vec::new();
    for (e, _, v) in values.iter().filter(|(_, r, _)| *r == role) {
        match by_value.iter_mut().find(|(x, _)| *x == v) {
            Some((_, eps)) => eps.push(e),
            None => by_value.push((v, vec![e])),
        }
    }
    let name = role.name();
    if let [(v, _)] = by_value.as_slice() {
        return format!("{name} {label} {v}");
    }
    let each: Vec<String> = by_value
        .iter()
        .map(|(v, eps)| match eps.as_slice() {
            [one] => format!("{name} {one} {label} {v}"),
            _ => format!("{name} {label} {v} on {} instances", eps.len()),
        })
        .collect();
    each.join(", ")
}

/// A `kv_role` on the wrong side: a consumer behind `--prefill` never
/// stores KV for decode; a producer behind `--decode` never loads any.
fn role_confusion(instances: &[InstanceState]) -> Option<Mismatch> {
    let values: Vec<(String, Role, Value)> = instances
        .iter()
        .filter_map(|i| {
            let r = i.startup.kv_role.as_deref()?;
            Some((i.endpoint.display.clone(), i.endpoint.role, Value::Text(r.to_string())))
        })
        .collect();
    let wrong = |role: Role, bad: &str| -> Vec<&str> {
        values
            .iter()
            .filter(|(_, r, v)| *r == role && *v == Value::Text(bad.into()))
            .map(|(e, _, _)| e.as_str())
            .collect()
    };
    let consumers_as_prefill = wrong(Role::Prefill, "kv_consumer");
    let producers_as_decode = wrong(Role::Decode, "kv_producer");
    let why = match (consumers_as_prefill.is_empty(), producers_as_decode.is_empty()) {
        (true, true) => return None,
        (false, false) => format!(
            "the roles look swapped: --prefill {} runs kv_consumer and --decode {} kv_producer, so no KV reaches decode",
            consumers_as_prefill.join(", "),
            producers_as_decode.join(", ")
        ),
        (false, true) => format!(
            "--prefill {} runs kv_role=kv_consumer: it never stores KV for decode to load",
            consumers_as_prefill.join(", ")
        ),
        (true, false) => format!(
            "--decode {} runs kv_role=kv_producer: producers on both sides, nothing loads the prefill's KV",
            producers_as_decode.join(", ")
        ),
    };
    Some(Mismatch { field: "kv_role", values, why, effect: Effect::Misses })
}

/// The likeliest reason for silent misses among the mismatches: one that
/// causes misses, else one that may.
pub fn likely_miss_cause(mismatches: &[Mismatch]) -> Option<String> {
    if let Some(m) = mismatches.iter().find(|m| m.effect == Effect::Misses) {
        return Some(format!("likely cause: {}", m.why));
    }
    mismatches.iter().find(|m| m.effect == Effect::Risk).map(|m| format!("possible cause: {}", m.why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feed::Endpoint;
    use crate::metrics::model::InstanceSample;

    /// A real idle scrape of the recorded prefill instance.
    fn idle_body() -> String {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/lab-captures/qwen3-shape-restart");
        std::fs::read_to_string(format!("{dir}/prefill-metrics-idle.txt")).unwrap()
    }

    fn instance(role: Role, addr: &str, body: &str) -> InstanceState {
        let mut i = InstanceState::new(Endpoint::parse(role, addr).unwrap());
        i.on_scrape(1.0, InstanceSample::from_text(body));
        i
    }

    fn pair(decode_body: &str) -> Vec<InstanceState> {
        vec![
            instance(Role::Prefill, "127.0.0.1:8100", &idle_body()),
            instance(Role::Decode, "127.0.0.1:8200", decode_body),
        ]
    }

    #[test]
    fn the_same_scrape_on_both_sides_agrees() {
        assert!(find(&pair(&idle_body())).is_empty());
    }

    #[test]
    fn a_block_size_changed_in_a_copy_of_the_real_scrape_is_named() {
        // Only the block_size label of the real scrape is changed.
        let body = idle_body().replace("block_size=\"16\"", "block_size=\"32\"");
        let found = find(&pair(&body));
        assert_eq!(found.len(), 1, "{found:?}");
        let m = &found[0];
        assert_eq!(m.field, "block_size");
        assert_eq!(
            m.why,
            "prefill block 16, decode block 32: decode looks for blocks the prefill never stores"
        );
        assert_eq!(m.effect, Effect::Misses);
        assert_eq!(m.values[1], ("127.0.0.1:8200".into(), Role::Decode, Value::Num(32)));
        assert!(likely_miss_cause(&found).unwrap().starts_with("likely cause: prefill block 16"));
    }

    #[test]
    fn a_field_one_side_lacks_is_not_a_mismatch() {
        let mut insts = pair(&idle_body());
        insts[0].version = Some("0.26.0".into());
        insts[0].startup.connector = Some("ExampleConnector".into());
        assert!(find(&insts).is_empty());
        insts[1].version = Some("0.18.1".into());
        let found = find(&insts);
        assert_eq!(found[0].field, "vllm_version");
        assert_eq!(found[0].effect, Effect::Risk);
    }

    #[test]
    fn one_model_at_two_paths_is_the_same_model() {
        let mut insts = pair(&idle_body());
        let info = |root: &str| crate::feed::ModelInfo {
            id: "lab-8b".into(),
            root: Some(root.into()),
            ..Default::default()
        };
        insts[0].info = Some(info("/models/qwen3-8b-shape"));
        insts[1].info = Some(info("/mnt/ckpt/qwen3-8b-shape/"));
        assert!(find(&insts).is_empty());
        insts[1].info = Some(info("/models/llama-8b"));
        assert_eq!(find(&insts)[0].field, "model");
    }

    #[test]
    fn auto_dtype_differs_only_from_a_quantized_one() {
        let mut insts = pair(&idle_body());
        insts[1].latest.as_mut().unwrap().cache_dtype = Some("bfloat16".into());
        assert!(find(&insts).is_empty());
        insts[1].latest.as_mut().unwrap().cache_dtype = Some("fp8_e4m3".into());
        assert_eq!(
            find(&insts)[0].why,
            "prefill KV dtype auto, decode KV dtype fp8_e4m3: decode cannot use the KV the prefill stores"
        );
    }

    #[test]
    fn roles_on_the_wrong_side_are_said_but_producer_and_consumer_are_not() {
        let mut insts = pair(&idle_body());
        insts[0].startup.kv_role = Some("kv_producer".into());
        insts[1].startup.kv_role = Some("kv_consumer".into());
        assert!(find(&insts).is_empty());
        insts[1].startup.kv_role = Some("kv_producer".into());
        let found = find(&insts);
        assert_eq!(found[0].field, "kv_role");
        assert!(
            found[0].why.contains("--decode 127.0.0.1:8200 runs kv_role=kv_producer"),
            "{}",
            found[0].why
        );
        insts[0].startup.kv_role = Some("kv_consumer".into());
        assert!(find(&insts)[0].why.starts_with("the roles look swapped"));
        insts[1].startup.kv_role = Some("kv_both".into());
        assert!(find(&insts)[0].why.contains("--prefill 127.0.0.1:8100 runs kv_role=kv_consumer"));
    }

    #[test]
    fn with_two_decodes_the_odd_one_is_named_by_endpoint() {
        let body = idle_body().replace("block_size=\"16\"", "block_size=\"32\"");
        let mut insts = pair(&idle_body());
        insts.push(instance(Role::Decode, "127.0.0.1:8201", &body));
        let found = find(&insts);
        assert_eq!(
            found[0].why,
            "prefill block 16, decode 127.0.0.1:8200 block 16, decode 127.0.0.1:8201 block 32: decode looks for blocks the prefill never stores"
        );
        assert_eq!(found[0].values.len(), 3);
    }
}
