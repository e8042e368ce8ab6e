//! vLLM's `--kv-cache-dtype`: the element type of the cache that is moved.

use super::KvError;
use std::fmt;
use std::str::FromStr;

/// The values of vLLM's `CacheDType` whose size is a plain bytes-per-element
/// (`vllm/config/cache.py`). The newer scaled formats (`nvfp4`,
/// `turboquant_*`, `*_per_token_head`) carry per-block scales and are
/// rejected rather than guessed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KvCacheDtype {
    /// Follow the model dtype ([`super::ModelShape::dtype_bytes`]).
    #[default]
    Auto,
    Float16,
    BFloat16,
    Int8,
    /// `fp8`, an alias of `fp8_e4m3` on CUDA.
    Fp8,
    Fp8E4m3,
    Fp8E5m2,
    /// Intel Gaudi fp8.
    Fp8Inc,
    /// DeepSeek sparse-MLA packed format: 656 bytes per token per layer for
    /// MLA models (512 fp8 latent + 4 f32 scales + 64 bf16 RoPE; vLLM's
    /// FlashMLA-sparse `get_kv_cache_shape`). Read from source, not measured.
    Fp8DsMla,
}

/// Bytes per layer per token of the `fp8_ds_mla` packed record.
pub const FP8_DS_MLA_BYTES_PER_LAYER_TOKEN: u64 = 656;

impl KvCacheDtype {
    /// Bytes per element; `Auto` resolves to the model's dtype size.
    /// `Fp8DsMla` reports 1 here; its MLA record size is special-cased in
    /// [`super::bytes_per_token`].
    pub fn element_bytes(self, model_dtype_bytes: u32) -> u32 {
        match self {
            KvCacheDtype::Auto => model_dtype_bytes,
            KvCacheDtype::Float16 | KvCacheDtype::BFloat16 => 2,
            KvCacheDtype::Int8
            | KvCacheDtype::Fp8
            | KvCacheDtype::Fp8E4m3
            | KvCacheDtype::Fp8E5m2
            | KvCacheDtype::Fp8Inc
            | KvCacheDtype::Fp8DsMla => 1,
        }
    }

    /// The vLLM spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            KvCacheDtype::Auto => "auto",
            KvCacheDtype::Float16 => "float16",
            KvCacheDtype::BFloat16 => "bfloat16",
            KvCacheDtype::Int8 => "int8",
            KvCacheDtype::Fp8 => "fp8",
            KvCacheDtype::Fp8E4m3 => "fp8_e4m3",
            KvCacheDtype::Fp8E5m2 => "fp8_e5m2",
            KvCacheDtype::Fp8Inc => "fp8_inc",
            KvCacheDtype::Fp8DsMla => "fp8_ds_mla",
        }
    }
}

impl FromStr for KvCacheDtype {
    type Err = KvError;

    /// vLLM's names, case-insensitively; `half`/`fp16`/`bf16` are accepted as
    /// obvious aliases even though vLLM itself does not.
    fn from_str(s: &str) -> Result<Self, KvError> {
        let lower = s.trim().to_ascii_lowercase();
        Ok(match lower.as_str() {
            "auto" => KvCacheDtype::Auto,
            "float16" | "half" | "fp16" => KvCacheDtype::Float16,
            "bfloat16" | "bf16" => KvCacheDtype::BFloat16,
            "int8" => KvCacheDtype::Int8,
            "fp8" => KvCacheDtype::Fp8,
            "fp8_e4m3" => KvCacheDtype::Fp8E4m3,
            "fp8_e5m2" => KvCacheDtype::Fp8E5m2,
            "fp8_inc" => KvCacheDtype::Fp8Inc,
            "fp8_ds_mla" => KvCacheDtype::Fp8DsMla,
            _ if lower == "nvfp4"
                || lower.starts_with("turboquant")
                || lower.ends_with("_per_token_head") =>
            {
                return Err(KvError::UnsupportedKvCacheDtype(s.to_owned()));
            }
            _ => return Err(KvError::UnknownKvCacheDtype(s.to_owned())),
        })
    }
}

impl fmt::Display for KvCacheDtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_vllm_names_and_round_trips() {
        let all = [
            KvCacheDtype::Auto,
            KvCacheDtype::Float16,
            KvCacheDtype::BFloat16,
            KvCacheDtype::Int8,
            KvCacheDtype::Fp8,
            KvCacheDtype::Fp8E4m3,
            KvCacheDtype::Fp8E5m2,
            KvCacheDtype::Fp8Inc,
            KvCacheDtype::Fp8DsMla,
        ];
        for d in all {
            assert_eq!(d.as_str().parse::<KvCacheDtype>().ok(), Some(d));
        }
        assert_eq!("FP8".parse::<KvCacheDtype>().ok(), Some(KvCacheDtype::Fp8));
    }

    #[test]
    fn element_bytes() {
        assert_eq!(KvCacheDtype::Auto.element_bytes(2), 2);
        assert_eq!(KvCacheDtype::Auto.element_bytes(4), 4);
        assert_eq!(KvCacheDtype::BFloat16.element_bytes(4), 2);
        assert_eq!(KvCacheDtype::Fp8E5m2.element_bytes(2), 1);
    }

    #[test]
    fn unknown_and_scaled_formats_are_errors() {
        assert!(matches!("fp4".parse::<KvCacheDtype>(), Err(KvError::UnknownKvCacheDtype(_))));
        assert!(matches!("".parse::<KvCacheDtype>(), Err(KvError::UnknownKvCacheDtype(_))));
        for s in ["nvfp4", "turboquant_k8v4", "fp8_per_token_head"] {
            assert!(matches!(s.parse::<KvCacheDtype>(), Err(KvError::UnsupportedKvCacheDtype(_))));
        }
    }
}
