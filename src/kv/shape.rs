//! The few numbers of a model's `config.json` that fix its KV-cache size.

use super::KvError;
use serde_json::{Map, Value};

/// Multi-head latent attention (DeepSeek-V2/V3/R1): one compressed latent plus
/// a shared RoPE key per layer per token, the same for every head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mla {
    pub kv_lora_rank: u32,
    pub qk_rope_head_dim: u32,
}

/// Options for reading a config; the defaults match a plain `vllm serve`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShapeOptions {
    /// Add `num_nextn_predict_layers` (MTP / speculative layers) to `layers`.
    /// Off by default: those layers only hold KV when speculative decoding
    /// with the model's own MTP head is enabled (kv-and-misses.md §5.3).
    pub include_mtp_layers: bool,
}

/// What the KV-size formulas need from a model's config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelShape {
    /// Layers that hold KV: `num_hidden_layers`, plus `mtp_layers` when
    /// [`ShapeOptions::include_mtp_layers`] was set.
    pub layers: u32,
    /// KV heads (`num_key_value_heads`, else `num_attention_heads`). For MLA
    /// this is 1, as vLLM hardcodes it: the config's value is ignored.
    pub kv_heads: u32,
    /// Per-head dimension (`head_dim`, else `hidden_size / num_attention_heads`).
    /// For MLA, `kv_lora_rank + qk_rope_head_dim` (vLLM's MLA head size).
    pub head_dim: u32,
    /// Bytes per element of the model dtype; what `--kv-cache-dtype auto` uses.
    pub dtype_bytes: u32,
    /// The dtype name as written in the config, if it had one.
    pub dtype_name: Option<String>,
    /// Present when the config has `kv_lora_rank`.
    pub mla: Option<Mla>,
    /// `num_nextn_predict_layers` as written (0 when absent), counted or not.
    pub mtp_layers: u32,
    /// `model_type`, for display only.
    pub model_type: Option<String>,
}

impl ModelShape {
    /// Parse with default [`ShapeOptions`] (MTP layers not counted).
    pub fn from_config_json(text: &str) -> Result<ModelShape, KvError> {
        Self::from_config_json_with(text, ShapeOptions::default())
    }

    /// Parse a Hugging Face `config.json`. Multimodal configs keep the language
    /// model's fields under `text_config`; that section is used when the top
    /// level has no `num_hidden_layers`.
    pub fn from_config_json_with(text: &str, opts: ShapeOptions) -> Result<ModelShape, KvError> {
        let root: Value = serde_json::from_str(text).map_err(KvError::Json)?;
        let top = root.as_object().ok_or(KvError::NotAnObject)?;
        let sec = match top.get("text_config").and_then(Value::as_object) {
            Some(text_cfg) if is_absent(top, "num_hidden_layers") => text_cfg,
            _ => top,
        };

        let hidden_layers =
            positive(sec, "num_hidden_layers")?.ok_or(KvError::MissingField("num_hidden_layers"))?;
        let mtp_layers = uint(sec, "num_nextn_predict_layers")?.unwrap_or(0);
        let layers = if opts.include_mtp_layers {
            hidden_layers
                .checked_add(mtp_layers)
                .ok_or(KvError::Overflow("num_hidden_layers + num_nextn_predict_layers"))?
        } else {
            hidden_layers
        };

        // The dtype may sit in the section or only at the top level (some
        // multimodal configs); newer transformers write `dtype`.
        let dtype_name = [sec, top]
            .iter()
            .flat_map(|o| [o.get("torch_dtype"), o.get("dtype")])
            .flatten()
            .find_map(Value::as_str)
            .map(str::to_owned);
        let dtype_bytes = match dtype_name.as_deref() {
            // Without a dtype vLLM runs 16-bit; assuming 2 is the useful guess.
            None => 2,
            Some(name) => model_dtype_bytes(name)?,
        };

        let (kv_heads, head_dim, mla) = match positive(sec, "kv_lora_rank")? {
            Some(kv_lora_rank) => {
                // MLA: num_key_value_heads (128 in DeepSeek-V3) is deliberately
                // not read; using it overstates the KV by ~57x.
                let qk_rope_head_dim =
                    uint(sec, "qk_rope_head_dim")?.ok_or(KvError::MissingField("qk_rope_head_dim"))?;
                let latent = kv_lora_rank
                    .checked_add(qk_rope_head_dim)
                    .ok_or(KvError::Overflow("kv_lora_rank + qk_rope_head_dim"))?;
                let mla = Mla { kv_lora_rank, qk_rope_head_dim };
                (1, latent, Some(mla))
            }
            None => {
                let heads = positive(sec, "num_attention_heads")?;
                let kv_heads = match positive(sec, "num_key_value_heads")? {
                    Some(h) => h,
                    None => heads.ok_or(KvError::MissingField("num_key_value_heads"))?,
                };
                let head_dim = match positive(sec, "head_dim")? {
                    Some(d) => d,
                    None => {
                        let heads = heads.ok_or(KvError::MissingField("num_attention_heads"))?;
                        let hidden =
                            positive(sec, "hidden_size")?.ok_or(KvError::MissingField("head_dim"))?;
                        // Integer division, as transformers does.
                        let d = hidden / heads;
                        if d == 0 {
                            return Err(KvError::BadField {
                                field: "hidden_size",
                                reason: format!("{hidden} is smaller than {heads} heads"),
                            });
                        }
                        d
                    }
                };
                (kv_heads, head_dim, None)
            }
        };

        let shape = ModelShape {
            layers,
            kv_heads,
            head_dim,
            dtype_bytes,
            dtype_name,
            mla,
            mtp_layers,
            model_type: sec
                .get("model_type")
                .or_else(|| top.get("model_type"))
                .and_then(Value::as_str)
                .map(str::to_owned),
        };
        // Reject shapes whose per-token size would not fit at the widest
        // element, so the arithmetic in `size` never saturates for a parsed shape.
        if super::size::checked_bytes_per_token(&shape, 4).is_none() {
            return Err(KvError::Overflow("bytes per token of this shape"));
        }
        Ok(shape)
    }
}

/// Bytes per element for the dtype names Hugging Face writes.
fn model_dtype_bytes(name: &str) -> Result<u32, KvError> {
    match name.trim().to_ascii_lowercase().as_str() {
        "bfloat16" | "bf16" | "float16" | "fp16" | "half" => Ok(2),
        "float32" | "fp32" | "float" => Ok(4),
        _ => Err(KvError::UnknownModelDtype(name.to_owned())),
    }
}

fn is_absent(obj: &Map<String, Value>, field: &str) -> bool {
    obj.get(field).is_none_or(Value::is_null)
}

/// A non-negative integer field that fits in u32; `None` when absent or null.
fn uint(obj: &Map<String, Value>, field: &'static str) -> Result<Option<u32>, KvError> {
    let Some(v) = obj.get(field).filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let n = v.as_u64().ok_or_else(|| KvError::BadField {
        field,
        reason: format!("expected a non-negative integer, got {v}"),
    })?;
    u32::try_from(n).map(Some).map_err(|_| KvError::BadField { field, reason: format!("{n} is too large") })
}

/// Like [`uint`] but zero is an error: a model with no layers, heads or
/// head dimension is a broken config, not a zero-byte KV cache.
fn positive(obj: &Map<String, Value>, field: &'static str) -> Result<Option<u32>, KvError> {
    match uint(obj, field)? {
        Some(0) => Err(KvError::BadField { field, reason: "must be greater than 0".to_owned() }),
        other => Ok(other),
    }
}

/// How vLLM lays a model's KV heads over `tp` tensor-parallel ranks
/// (`QKVParallelLinear.__init__`, vllm/model_executor/layers/linear.py:
/// `tp_size >= total_num_kv_heads` gives one head per rank and
/// `num_kv_head_replicas = divide(tp_size, total_num_kv_heads)`, else
/// `num_kv_heads = divide(total_num_kv_heads, tp_size)`; `divide` asserts
/// `"{} is not divisible by {}"`, vllm/distributed/utils.py).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TpLayout {
    /// Each rank holds `kv_heads / tp` heads: the ranks together hold the
    /// model's bytes per token once.
    Sliced,
    /// `tp` is a multiple of the KV heads: one head per rank, each head on
    /// `replicas` ranks, so the ranks hold (and move) `replicas` x the bytes.
    Replicated { replicas: u32 },
    /// MLA: every rank holds the whole latent, `tp` x the bytes.
    Latent,
    /// Neither divides the other: vLLM's `divide` fails and the model does
    /// not load, so no bytes move at all.
    Refused,
}

impl ModelShape {
    pub fn tp_layout(&self, tp: u32) -> TpLayout {
        let (tp, heads) = (tp.max(1), self.kv_heads.max(1));
        if self.mla.is_some() {
            TpLayout::Latent
        } else if tp <= heads {
            if heads % tp == 0 { TpLayout::Sliced } else { TpLayout::Refused }
        } else if tp % heads == 0 {
            TpLayout::Replicated { replicas: tp / heads }
        } else {
            TpLayout::Refused
        }
    }

    /// What `kv --tp` says when the layout is not a plain slice: which rule
    /// vLLM applies and what it does to the bytes.
    pub fn tp_warning(&self, tp: u32) -> Option<String> {
        let heads = self.kv_heads;
        match self.tp_layout(tp) {
            TpLayout::Sliced => None,
            TpLayout::Latent if tp <= 1 => None,
            TpLayout::Latent => Some(format!(
                "MLA: each of the {tp} ranks holds the whole latent KV, so together they hold and move \
                 {tp}x the bytes per token"
            )),
            TpLayout::Replicated { replicas } => Some(format!(
                "tp {tp} is above the {heads} KV heads: vLLM replicates each KV head on {replicas} ranks \
                 (one head per rank), so the ranks hold and move {replicas}x the bytes per token"
            )),
            TpLayout::Refused => {
                let (a, b) = if tp < heads { (heads, tp) } else { (tp, heads) };
                Some(format!(
                    "tp {tp} does not fit the {heads} KV heads: vLLM splits them only when tp divides them \
                     (or replicates them when tp is a multiple of them), and refuses to load this model \
                     (`{a} is not divisible by {b}`); the per-rank bytes below are no layout vLLM runs"
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_dim_falls_back_to_hidden_over_heads() {
        let s = ModelShape::from_config_json(
            r#"{"num_hidden_layers":24,"num_attention_heads":14,"num_key_value_heads":2,
                "hidden_size":896,"torch_dtype":"bfloat16"}"#,
        )
        .expect("valid");
        assert_eq!((s.layers, s.kv_heads, s.head_dim, s.dtype_bytes), (24, 2, 64, 2));
    }

    #[test]
    fn kv_heads_default_to_attention_heads() {
        let s = ModelShape::from_config_json(
            r#"{"num_hidden_layers":2,"num_attention_heads":12,"hidden_size":768,"dtype":"float32"}"#,
        )
        .expect("valid");
        assert_eq!((s.kv_heads, s.head_dim, s.dtype_bytes), (12, 64, 4));
    }

    #[test]
    fn null_head_dim_is_treated_as_absent() {
        let s = ModelShape::from_config_json(
            r#"{"num_hidden_layers":2,"num_attention_heads":32,"num_key_value_heads":8,
                "hidden_size":4096,"head_dim":null,"torch_dtype":"float16"}"#,
        )
        .expect("valid");
        assert_eq!(s.head_dim, 128);
    }

    #[test]
    fn text_config_used_when_top_level_lacks_fields() {
        let s = ModelShape::from_config_json(
            r#"{"model_type":"gemma3","torch_dtype":"bfloat16","vision_config":{"num_hidden_layers":27},
                "text_config":{"model_type":"gemma3_text","num_hidden_layers":34,
                "num_attention_heads":8,"num_key_value_heads":4,"head_dim":256,"hidden_size":2560}}"#,
        )
        .expect("valid");
        assert_eq!((s.layers, s.kv_heads, s.head_dim), (34, 4, 256));
        assert_eq!(s.dtype_bytes, 2, "dtype read from the top level");
        assert_eq!(s.model_type.as_deref(), Some("gemma3_text"));
    }

    #[test]
    fn mtp_layers_only_counted_when_asked() {
        let cfg = r#"{"num_hidden_layers":61,"kv_lora_rank":512,"qk_rope_head_dim":64,
                      "num_nextn_predict_layers":1,"torch_dtype":"bfloat16"}"#;
        let off = ModelShape::from_config_json(cfg).expect("valid");
        assert_eq!((off.layers, off.mtp_layers), (61, 1));
        let on =
            ModelShape::from_config_json_with(cfg, ShapeOptions { include_mtp_layers: true }).expect("valid");
        assert_eq!(on.layers, 62);
    }

    #[test]
    fn bad_configs_are_errors_not_panics() {
        let cases = [
            ("", "Json"),
            ("[1,2]", "NotAnObject"),
            (r#"{"num_attention_heads":8}"#, "MissingField"),
            (r#"{"num_hidden_layers":0,"num_attention_heads":8,"head_dim":4}"#, "BadField"),
            (r#"{"num_hidden_layers":-3}"#, "BadField"),
            (r#"{"num_hidden_layers":2.5}"#, "BadField"),
            (r#"{"num_hidden_layers":"32"}"#, "BadField"),
            (r#"{"num_hidden_layers":99999999999}"#, "BadField"),
            (r#"{"num_hidden_layers":2,"num_attention_heads":8}"#, "MissingField"),
            (r#"{"num_hidden_layers":2,"num_attention_heads":8,"hidden_size":4}"#, "BadField"),
            (r#"{"num_hidden_layers":2,"kv_lora_rank":512}"#, "MissingField"),
            (
                r#"{"num_hidden_layers":2,"num_attention_heads":8,"head_dim":4,"torch_dtype":"int4"}"#,
                "UnknownModelDtype",
            ),
            (
                r#"{"num_hidden_layers":4294967295,"num_attention_heads":4294967295,
                    "head_dim":4294967295}"#,
                "Overflow",
            ),
        ];
        for (cfg, want) in cases {
            let err = ModelShape::from_config_json(cfg).expect_err(cfg);
            assert!(format!("{err:?}").starts_with(want), "{cfg}: got {err:?}");
        }
    }

    #[test]
    fn tp_must_divide_the_kv_heads_or_be_a_multiple_of_them() {
        let gqa = ModelShape::from_config_json(
            r#"{"num_hidden_layers":2,"num_attention_heads":32,"num_key_value_heads":8,
                "hidden_size":4096,"torch_dtype":"bfloat16"}"#,
        )
        .expect("valid");
        assert_eq!(gqa.tp_layout(1), TpLayout::Sliced);
        assert_eq!(gqa.tp_layout(4), TpLayout::Sliced);
        assert_eq!(gqa.tp_layout(8), TpLayout::Sliced);
        assert_eq!(gqa.tp_layout(3), TpLayout::Refused);
        assert_eq!(gqa.tp_layout(12), TpLayout::Refused);
        assert_eq!(gqa.tp_layout(16), TpLayout::Replicated { replicas: 2 });
        assert_eq!(gqa.tp_warning(4), None);
        let w = gqa.tp_warning(3).unwrap();
        assert!(w.contains("refuses") && w.contains("`8 is not divisible by 3`"), "{w}");
        assert!(gqa.tp_warning(12).unwrap().contains("`12 is not divisible by 8`"));
        assert!(gqa.tp_warning(16).unwrap().contains("2x the bytes"));
    }
}
