//! The arithmetic checked against real vLLM captures in `tests/fixtures/lab-captures`.

use super::*;
use std::path::PathBuf;

fn shared(rel: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/")).join(rel)
}

fn read(rel: &str) -> String {
    let path = shared(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn read_xz(rel: &str) -> String {
    let path = shared(rel);
    let compressed = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    lzma_rs::xz_decompress(&mut compressed.as_slice(), &mut out).expect("valid xz");
    String::from_utf8(out).expect("utf-8 listing")
}

#[test]
fn qwen3_capture_config_is_147456_bytes_per_token() {
    let s = ModelShape::from_config_json(&read("lab-captures/qwen3-shape-restart/model-config.json"))
        .expect("parses");
    assert_eq!(bytes_per_token(&s, KvCacheDtype::Auto), 147_456);
}

/// Every layer file the ExampleConnector wrote is exactly the predicted size
/// for a block-aligned token count.
#[test]
fn qwen3_capture_every_layer_file_matches_prediction() {
    let s = ModelShape::from_config_json(&read("lab-captures/qwen3-shape-restart/model-config.json"))
        .expect("parses");
    let per_layer_token = 2 * 8 * 128 * 2;
    let listing = read_xz("lab-captures/qwen3-shape-restart/kvdir-listing.txt.xz");
    let mut files = 0u64;
    let mut saw_240 = false;
    for line in listing.lines().filter(|l| l.ends_with(".safetensors")) {
        // `ls -la`: perms links owner group SIZE month day time name
        let size: u64 = line
            .split_whitespace()
            .nth(4)
            .and_then(|f| f.parse().ok())
            .unwrap_or_else(|| panic!("no size in {line:?}"));
        let body = size
            .checked_sub(SAFETENSORS_KV_HEADER_BYTES)
            .unwrap_or_else(|| panic!("smaller than a header: {line}"));
        assert_eq!(body % per_layer_token, 0, "{line}");
        let tokens = body / per_layer_token;
        assert_eq!(tokens % 16, 0, "not block aligned: {line}");
        assert_eq!(example_connector_layer_file_bytes(&s, KvCacheDtype::Auto, tokens), Some(size), "{line}");
        saw_240 |= tokens == 240 && size == 983_128;
        files += 1;
    }
    assert!(files > 0, "no .safetensors files in the listing");
    assert_eq!(files % u64::from(s.layers), 0, "one file per layer per prompt");
    assert!(saw_240, "the 240-token / 983,128-byte case from the docs");
}

#[test]
fn nixl_capture_config_is_131072_bytes_per_token() {
    let s = ModelShape::from_config_json(&read("lab-captures/nixl-llama-shape/model-config.json"))
        .expect("parses");
    assert_eq!(bytes_per_token(&s, KvCacheDtype::Auto), 131_072);
}

/// `vllm:nixl_bytes_transferred_sum` after the decode restart was
/// 1,847,590,912: the block-rounded prediction over those ten requests.
#[test]
fn nixl_after_restart_prediction_equals_bytes_transferred_sum() {
    let s = ModelShape::from_config_json(&read("lab-captures/nixl-llama-shape/model-config.json"))
        .expect("parses");
    let mut n = 0;
    let mut sum = 0u64;
    for line in read("lab-captures/nixl-llama-shape/requests.jsonl").lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("json line");
        if v["phase"] != "after_restart" {
            continue;
        }
        let tokens = v["usage"]["prompt_tokens"].as_u64().expect("prompt_tokens");
        sum += predicted_transfer_bytes(&s, KvCacheDtype::Auto, tokens, 16).expect("fits");
        n += 1;
    }
    assert_eq!(n, 10);
    assert_eq!(sum, 1_847_590_912);
}
