//! Bytes a prompt's KV cache should occupy, per rank, on the link, on disk.
//!
//! Functions that scale by a token count return `Option`: `None` means a
//! zero block size or a product beyond 64 bits, never a panic. Per-token
//! figures are plain `u64`: [`super::ModelShape::from_config_json`] rejects
//! shapes whose per-token size would not fit, so for parsed shapes they are
//! exact (for hand-built absurd shapes they saturate at `u64::MAX`).

use super::{KvCacheDtype, ModelShape, dtype::FP8_DS_MLA_BYTES_PER_LAYER_TOKEN};

/// Link rates for the "how long would this take" table, in decimal Gb/s.
pub const LINK_RATES_GBPS: [f64; 7] = [1.0, 2.5, 10.0, 25.0, 100.0, 200.0, 400.0];

/// Safetensors header of one ExampleConnector layer file, in bytes.
///
/// Measured, not derived: every file of `lab-captures/qwen3-shape-restart`
/// (vLLM 0.26, one bf16 tensor named `kv_cache`, 240 to 2496 tokens) is
/// exactly `tokens x 4096 + 88`. The header is 8 bytes of length plus JSON
/// (`dtype`, `shape`, `data_offsets`) padded to a multiple of 8, so it
/// grows to 96 once those numbers gain digits (around 10k tokens for that
/// shape) and may differ for other shapes or vLLM versions.
pub const SAFETENSORS_KV_HEADER_BYTES: u64 = 88;

/// How one token's KV is spread over `tp` tensor-parallel ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TpSplit {
    /// The TP size used (0 is treated as 1).
    pub tp: u32,
    /// KV heads each rank holds (MLA: 1, the whole latent).
    pub kv_heads_per_rank: u32,
    /// True when ranks hold copies rather than slices (MLA, or `tp > kv_heads`),
    /// so the sum over ranks exceeds the unique KV.
    pub replicated: bool,
    /// Bytes per token on one rank.
    pub per_rank_bytes_per_token: u64,
    /// Bytes per token summed over all ranks: what crosses the link(s) when
    /// every decode rank pulls its own share.
    pub link_bytes_per_token: u64,
}

/// Bytes per token per layer for one rank holding `heads` KV heads.
fn layer_token_bytes(shape: &ModelShape, elem: u64, heads: u64) -> Option<u64> {
    match shape.mla {
        // One latent + RoPE key per layer per token: no K/V pair, no heads.
        Some(m) => u64::from(m.kv_lora_rank).checked_add(u64::from(m.qk_rope_head_dim))?.checked_mul(elem),
        None => 2u64.checked_mul(heads)?.checked_mul(u64::from(shape.head_dim))?.checked_mul(elem),
    }
}

fn layer_token_bytes_for(shape: &ModelShape, kv: KvCacheDtype, heads: u64) -> Option<u64> {
    if shape.mla.is_some() && kv == KvCacheDtype::Fp8DsMla {
        return Some(FP8_DS_MLA_BYTES_PER_LAYER_TOKEN);
    }
    layer_token_bytes(shape, u64::from(kv.element_bytes(shape.dtype_bytes)), heads)
}

/// Per-token bytes at a given element size; `None` on overflow. Used by the
/// parser to refuse shapes whose size cannot be represented.
pub(crate) fn checked_bytes_per_token(shape: &ModelShape, elem: u64) -> Option<u64> {
    layer_token_bytes(shape, elem, u64::from(shape.kv_heads))?.checked_mul(u64::from(shape.layers))
}

/// Unique KV bytes per token (all ranks together, one copy):
/// `2 x layers x kv_heads x head_dim x b`, or for MLA
/// `(kv_lora_rank + qk_rope_head_dim) x layers x b`.
pub fn bytes_per_token(shape: &ModelShape, kv: KvCacheDtype) -> u64 {
    layer_token_bytes_for(shape, kv, u64::from(shape.kv_heads))
        .and_then(|b| b.checked_mul(u64::from(shape.layers)))
        .unwrap_or(u64::MAX)
}

/// Split one token's KV over `tp` ranks.
///
/// - GQA with `kv_heads >= tp`: each rank holds `kv_heads / tp` heads; the sum
///   over ranks equals [`bytes_per_token`]. (vLLM refuses a `tp` that does not
///   divide `kv_heads`; we round heads up, so the figure is an upper bound.)
/// - GQA with `tp > kv_heads`: heads are replicated, each rank holds one, and
///   the sum is `tp` heads' worth.
/// - MLA: the latent cannot be split, every rank holds all of it, so the link
///   carries `tp x` the per-request figure (kv-and-misses.md §5.3).
pub fn tp_split(shape: &ModelShape, kv: KvCacheDtype, tp: u32) -> TpSplit {
    let tp = tp.max(1);
    let (heads, replicated) = if shape.mla.is_some() {
        (1, true)
    } else if shape.kv_heads >= tp {
        (shape.kv_heads.div_ceil(tp), false)
    } else {
        (1, true)
    };
    let per_rank = layer_token_bytes_for(shape, kv, u64::from(heads))
        .and_then(|b| b.checked_mul(u64::from(shape.layers)))
        .unwrap_or(u64::MAX);
    TpSplit {
        tp,
        kv_heads_per_rank: heads,
        replicated,
        per_rank_bytes_per_token: per_rank,
        link_bytes_per_token: per_rank.saturating_mul(u64::from(tp)),
    }
}

/// Tokens rounded up to whole blocks: paged KV moves whole blocks, the last
/// partial one included. `None` for a zero block size or on overflow.
pub fn block_rounded_tokens(tokens: u64, block_size: u64) -> Option<u64> {
    if block_size == 0 {
        return None;
    }
    tokens.div_ceil(block_size).checked_mul(block_size)
}

/// Predicted bytes moved for a prompt of `tokens` at TP 1:
/// `ceil(tokens / block) x block x bytes_per_token`. Checked live against
/// `vllm:nixl_bytes_transferred_sum` (lab-captures/nixl-llama-shape).
pub fn predicted_transfer_bytes(
    shape: &ModelShape,
    kv: KvCacheDtype,
    tokens: u64,
    block_size: u64,
) -> Option<u64> {
    block_rounded_tokens(tokens, block_size)?.checked_mul(bytes_per_token(shape, kv))
}

/// Like [`predicted_transfer_bytes`] but summed over `tp` ranks
/// ([`TpSplit::link_bytes_per_token`]).
pub fn predicted_link_bytes(
    shape: &ModelShape,
    kv: KvCacheDtype,
    tokens: u64,
    block_size: u64,
    tp: u32,
) -> Option<u64> {
    block_rounded_tokens(tokens, block_size)?.checked_mul(tp_split(shape, kv, tp).link_bytes_per_token)
}

/// vLLM's `align_to_block_size(n, bs) = (n - 1) // bs * bs`, clamped at 0
/// (Python gives a negative number for n = 0, which then slices to nothing).
fn align_to_block_size(n: u64, block_size: u64) -> Option<u64> {
    if block_size == 0 {
        return None;
    }
    Some(n.saturating_sub(1) / block_size * block_size)
}

/// Tokens the ExampleConnector *saves* for a prompt of `prompt_len` tokens:
/// `align(L, bs) = (L - 1) // bs * bs` (vllm-reference.md §4.3).
pub fn example_connector_saved_tokens(prompt_len: u64, block_size: u64) -> Option<u64> {
    align_to_block_size(prompt_len, block_size)
}

/// Tokens whose folder the ExampleConnector *looks up*:
/// `align(L - 1, bs) = (L - 2) // bs * bs`. When it differs from
/// [`example_connector_saved_tokens`] (L - 1 a multiple of bs) decode
/// misses silently even though prefill saved.
pub fn example_connector_lookup_tokens(prompt_len: u64, block_size: u64) -> Option<u64> {
    align_to_block_size(prompt_len.saturating_sub(1), block_size)
}

/// Size of one ExampleConnector `<layer>.safetensors` file holding
/// `stored_tokens` tokens at TP 1: `tokens x 2 x kv_heads x head_dim x b`
/// (MLA: `tokens x (rank + rope) x b`) plus [`SAFETENSORS_KV_HEADER_BYTES`].
pub fn example_connector_layer_file_bytes(
    shape: &ModelShape,
    kv: KvCacheDtype,
    stored_tokens: u64,
) -> Option<u64> {
    layer_token_bytes_for(shape, kv, u64::from(shape.kv_heads))?
        .checked_mul(stored_tokens)?
        .checked_add(SAFETENSORS_KV_HEADER_BYTES)
}

/// Seconds to move `bytes` over one link of `gbps` decimal gigabits per
/// second (1 Gb/s = 10^9 bit/s). `None` for a rate that is not positive.
pub fn link_seconds(bytes: u64, gbps: f64) -> Option<f64> {
    // Precision: u64 -> f64 is exact below 2^53 bytes (8 PiB), plenty here.
    (gbps > 0.0).then(|| bytes as f64 * 8.0 / (gbps * 1e9))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LLAMA_31_8B: &str = r#"{"architectures":["LlamaForCausalLM"],"model_type":"llama",
        "hidden_size":4096,"num_hidden_layers":32,"num_attention_heads":32,
        "num_key_value_heads":8,"torch_dtype":"bfloat16"}"#;
    const QWEN3_8B: &str = r#"{"model_type":"qwen3","hidden_size":4096,"num_hidden_layers":36,
        "num_attention_heads":32,"num_key_value_heads":8,"head_dim":128,"torch_dtype":"bfloat16"}"#;
    const QWEN25_05B: &str = r#"{"model_type":"qwen2","hidden_size":896,"num_hidden_layers":24,
        "num_attention_heads":14,"num_key_value_heads":2,"torch_dtype":"bfloat16"}"#;
    const LLAMA_3_70B: &str = r#"{"model_type":"llama","hidden_size":8192,"num_hidden_layers":80,
        "num_attention_heads":64,"num_key_value_heads":8,"torch_dtype":"bfloat16"}"#;
    // num_key_value_heads 128 is in the real config and must be ignored.
    const DEEPSEEK_V3: &str = r#"{"model_type":"deepseek_v3","hidden_size":7168,
        "num_hidden_layers":61,"num_attention_heads":128,"num_key_value_heads":128,
        "kv_lora_rank":512,"q_lora_rank":1536,"qk_rope_head_dim":64,"qk_nope_head_dim":128,
        "v_head_dim":128,"num_nextn_predict_layers":1,"torch_dtype":"bfloat16"}"#;

    fn shape(cfg: &str) -> ModelShape {
        ModelShape::from_config_json(cfg).expect("test config parses")
    }

    const PUBLISHED: [(&str, &str, u64); 5] = [
        ("Llama-3.1-8B", LLAMA_31_8B, 131_072),
        ("Qwen3-8B", QWEN3_8B, 147_456),
        ("Qwen2.5-0.5B", QWEN25_05B, 12_288),
        ("Llama-3-70B", LLAMA_3_70B, 327_680),
        ("DeepSeek-V3", DEEPSEEK_V3, 70_272),
    ];

    #[test]
    fn published_shapes_bf16_bytes_per_token() {
        for (name, cfg, want) in PUBLISHED {
            assert_eq!(bytes_per_token(&shape(cfg), KvCacheDtype::Auto), want, "{name}");
            assert_eq!(bytes_per_token(&shape(cfg), KvCacheDtype::BFloat16), want, "{name}");
        }
    }

    #[test]
    fn fp8_halves_each_published_shape() {
        for (name, cfg, want) in PUBLISHED {
            for kv in [KvCacheDtype::Fp8, KvCacheDtype::Fp8E4m3, KvCacheDtype::Fp8E5m2] {
                assert_eq!(bytes_per_token(&shape(cfg), kv), want / 2, "{name} {kv}");
            }
        }
    }

    #[test]
    fn deepseek_v3_is_mla_and_ignores_kv_heads() {
        let s = shape(DEEPSEEK_V3);
        assert_eq!(s.mla, Some(super::super::Mla { kv_lora_rank: 512, qk_rope_head_dim: 64 }));
        assert_eq!((s.kv_heads, s.head_dim, s.layers), (1, 576, 61));
        // The GQA formula with the config's 128 heads would give ~3.8 MiB.
        assert!(bytes_per_token(&s, KvCacheDtype::Auto) < 100_000);
    }

    #[test]
    fn deepseek_v3_with_mtp_layer_counts_62_layers() {
        let s = ModelShape::from_config_json_with(
            DEEPSEEK_V3,
            super::super::ShapeOptions { include_mtp_layers: true },
        )
        .expect("parses");
        assert_eq!(bytes_per_token(&s, KvCacheDtype::Auto), 71_424);
    }

    #[test]
    fn fp8_ds_mla_uses_656_byte_record_for_mla() {
        assert_eq!(bytes_per_token(&shape(DEEPSEEK_V3), KvCacheDtype::Fp8DsMla), 656 * 61);
    }

    #[test]
    fn tp_split_gqa_divides_llama_8b_over_2_ranks() {
        let t = tp_split(&shape(LLAMA_31_8B), KvCacheDtype::Auto, 2);
        assert_eq!(t.per_rank_bytes_per_token, 65_536);
        assert_eq!(t.link_bytes_per_token, 131_072);
        assert_eq!(t.kv_heads_per_rank, 4);
        assert!(!t.replicated);
    }

    #[test]
    fn tp_split_replicates_heads_when_tp_exceeds_kv_heads() {
        let t = tp_split(&shape(QWEN25_05B), KvCacheDtype::Auto, 4);
        assert_eq!(t.kv_heads_per_rank, 1);
        assert_eq!(t.per_rank_bytes_per_token, 6_144);
        assert_eq!(t.link_bytes_per_token, 24_576);
        assert!(t.replicated);
    }

    #[test]
    fn tp_split_mla_is_always_replicated() {
        let t = tp_split(&shape(DEEPSEEK_V3), KvCacheDtype::Auto, 8);
        assert_eq!(t.per_rank_bytes_per_token, 70_272);
        assert_eq!(t.link_bytes_per_token, 8 * 70_272);
        assert!(t.replicated);
        let s = shape(DEEPSEEK_V3);
        assert_eq!(predicted_link_bytes(&s, KvCacheDtype::Auto, 1000, 16, 8), Some(8 * 1008 * 70_272));
    }

    #[test]
    fn tp_1_and_tp_0_are_the_whole_cache() {
        let s = shape(QWEN3_8B);
        for tp in [0, 1] {
            let t = tp_split(&s, KvCacheDtype::Auto, tp);
            assert_eq!(t.tp, 1);
            assert_eq!(t.per_rank_bytes_per_token, 147_456);
            assert_eq!(t.link_bytes_per_token, 147_456);
        }
    }

    #[test]
    fn block_rounding() {
        assert_eq!(block_rounded_tokens(0, 16), Some(0));
        assert_eq!(block_rounded_tokens(1, 16), Some(16));
        assert_eq!(block_rounded_tokens(16, 16), Some(16));
        assert_eq!(block_rounded_tokens(1025, 16), Some(1040));
        assert_eq!(block_rounded_tokens(5, 0), None);
        assert_eq!(block_rounded_tokens(u64::MAX, 16), None);
    }

    #[test]
    fn predicted_transfer_bytes_matches_doc_table() {
        let s = shape(LLAMA_31_8B);
        // kv-and-misses.md §5.2: a 16-token block is 2 MiB, 1024 tokens 128 MiB.
        assert_eq!(predicted_transfer_bytes(&s, KvCacheDtype::Auto, 16, 16), Some(2 << 20));
        assert_eq!(predicted_transfer_bytes(&s, KvCacheDtype::Auto, 1024, 16), Some(128 << 20));
        // A partial last block still moves whole.
        assert_eq!(predicted_transfer_bytes(&s, KvCacheDtype::Auto, 1025, 16), Some(1040 * 131_072));
        assert_eq!(predicted_transfer_bytes(&s, KvCacheDtype::Auto, u64::MAX / 2, 16), None);
    }

    #[test]
    fn example_connector_alignment_save_vs_lookup() {
        // (prompt length, saved, looked up)
        let cases = [
            (0, 0, 0),
            (1, 0, 0),
            (17, 16, 0), // L-1 a multiple of 16: silent miss
            (18, 16, 16),
            (256, 240, 240),    // lab warmup_p: "cached 240 of 256"
            (1025, 1024, 1008), // lab edge_block: silent miss
            (2049, 2048, 2032),
        ];
        for (len, saved, looked_up) in cases {
            assert_eq!(example_connector_saved_tokens(len, 16), Some(saved), "{len}");
            assert_eq!(example_connector_lookup_tokens(len, 16), Some(looked_up), "{len}");
        }
        assert_eq!(example_connector_saved_tokens(10, 0), None);
    }

    #[test]
    fn example_connector_layer_file_size() {
        let s = shape(QWEN3_8B);
        assert_eq!(example_connector_layer_file_bytes(&s, KvCacheDtype::Auto, 240), Some(983_128));
        // MLA: tokens x (rank + rope) x b + header.
        assert_eq!(
            example_connector_layer_file_bytes(&shape(DEEPSEEK_V3), KvCacheDtype::Auto, 16),
            Some(16 * 576 * 2 + 88)
        );
    }

    #[test]
    fn link_seconds_decimal_gigabits() {
        assert_eq!(link_seconds(125_000_000, 1.0), Some(1.0));
        assert_eq!(link_seconds(125_000_000, 10.0), Some(0.1));
        assert_eq!(link_seconds(1, 0.0), None);
        assert_eq!(link_seconds(1, f64::NAN), None);
    }
}
