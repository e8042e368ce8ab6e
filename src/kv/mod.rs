//! KV-cache size arithmetic from a Hugging Face `config.json`.
//!
//! Why this exists: a disaggregated pair moves a request's KV cache from the
//! prefill instance to the decode instance, and the only way to tell "the KV
//! moved" from "decode silently recomputed" on the wire or on disk is to know
//! how many bytes a prompt *should* be. Formulas: `shared/docs/kv-and-misses.md`
//! §5; ExampleConnector layout: `shared/docs/vllm-reference.md` §4.3.
//!
//! - [`shape`]: [`ModelShape`] parsed from `config.json` (GQA/MHA and MLA).
//! - [`dtype`]: [`KvCacheDtype`], vLLM's `--kv-cache-dtype`.
//! - [`size`]: bytes per token, tensor-parallel split, block rounding,
//!   ExampleConnector file sizes, link times.
//! - [`cli`]: the `pdtop kv` subcommand ([`KvArgs`], [`run`]).

pub mod cli;
pub mod dtype;
pub mod shape;
pub mod size;

#[cfg(test)]
mod capture_tests;

pub use cli::{KvArgs, run};
pub use dtype::KvCacheDtype;
pub use shape::{Mla, ModelShape, ShapeOptions};
pub use size::{
    LINK_RATES_GBPS, SAFETENSORS_KV_HEADER_BYTES, TpSplit, block_rounded_tokens, bytes_per_token,
    example_connector_layer_file_bytes, example_connector_lookup_tokens, example_connector_saved_tokens,
    link_seconds, predicted_link_bytes, predicted_transfer_bytes, tp_split,
};

use std::fmt;
use std::path::PathBuf;

/// Everything that can go wrong in this module. Every variant says which
/// input was bad so the user can fix the config or the flag.
#[derive(Debug)]
pub enum KvError {
    /// `--model-config` could not be read.
    Io { path: PathBuf, source: std::io::Error },
    /// The config is not JSON at all.
    Json(serde_json::Error),
    /// The config is JSON but not an object.
    NotAnObject,
    /// A field the formula needs is absent (neither top level nor `text_config`).
    MissingField(&'static str),
    /// A field is present but not a usable value (wrong type, zero, too big).
    BadField { field: &'static str, reason: String },
    /// `torch_dtype` / `dtype` names a type we do not know the size of.
    UnknownModelDtype(String),
    /// `--kv-cache-dtype` is not one of vLLM's names.
    UnknownKvCacheDtype(String),
    /// A vLLM KV dtype whose size includes per-block scales that we do not model.
    UnsupportedKvCacheDtype(String),
    /// A product did not fit in 64 bits (absurd token count or shape).
    Overflow(&'static str),
    /// Writing the report failed.
    Write(std::io::Error),
}

impl fmt::Display for KvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KvError::Io { path, source } => write!(f, "cannot read {}: {source}", path.display()),
            KvError::Json(e) => write!(f, "model config is not valid JSON: {e}"),
            KvError::NotAnObject => write!(f, "model config is not a JSON object"),
            KvError::MissingField(name) => {
                write!(f, "model config has no `{name}` (top level or text_config)")
            }
            KvError::BadField { field, reason } => {
                write!(f, "model config field `{field}`: {reason}")
            }
            KvError::UnknownModelDtype(d) => {
                write!(f, "unknown model dtype {d:?} (expected bfloat16, float16 or float32)")
            }
            KvError::UnknownKvCacheDtype(d) => write!(
                f,
                "unknown KV cache dtype {d:?} (expected auto, float16, bfloat16, int8, fp8, \
                 fp8_e4m3, fp8_e5m2, fp8_inc or fp8_ds_mla)"
            ),
            KvError::UnsupportedKvCacheDtype(d) => {
                write!(f, "KV cache dtype {d:?} stores per-block scales; its size is not modelled")
            }
            KvError::Overflow(what) => write!(f, "{what} does not fit in 64 bits"),
            KvError::Write(e) => write!(f, "cannot write output: {e}"),
        }
    }
}

impl std::error::Error for KvError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            KvError::Io { source, .. } => Some(source),
            KvError::Json(e) => Some(e),
            KvError::Write(e) => Some(e),
            _ => None,
        }
    }
}
