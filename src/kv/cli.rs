//! `pdtop kv`: print the predicted KV size of a prompt for a model config.

use super::{
    KvCacheDtype, KvError, LINK_RATES_GBPS, ModelShape, ShapeOptions, block_rounded_tokens, bytes_per_token,
    example_connector_layer_file_bytes, example_connector_lookup_tokens, example_connector_saved_tokens,
    link_seconds, tp_split,
};
use serde::Serialize;
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `pdtop kv`.
#[derive(Debug, Clone, clap::Args)]
pub struct KvArgs {
    /// The model's Hugging Face config.json.
    #[arg(long, value_name = "FILE")]
    pub model_config: PathBuf,
    /// Prompt length in tokens (e.g. a request's usage.prompt_tokens).
    #[arg(long, value_name = "N")]
    pub tokens: u64,
    /// vLLM block size in tokens (see cache_config_info{block_size}).
    #[arg(long, value_name = "B", default_value_t = 16,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub block_size: u64,
    /// vLLM --kv-cache-dtype (auto follows the model dtype).
    #[arg(long, value_name = "D", default_value = "auto")]
    pub kv_cache_dtype: KvCacheDtype,
    /// Tensor-parallel size of the instances.
    #[arg(long, value_name = "T", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub tp: u32,
    /// Count num_nextn_predict_layers (MTP speculative layers) as KV layers.
    #[arg(long)]
    pub include_mtp_layers: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// The numbers `pdtop kv` reports; serialized as-is for `--json`.
#[derive(Debug, Serialize)]
struct Report {
    model_type: Option<String>,
    layers: u32,
    kv_heads: u32,
    head_dim: u32,
    mla: Option<MlaJson>,
    mtp_layers_counted: bool,
    dtype: Option<String>,
    kv_cache_dtype: &'static str,
    element_bytes: u32,
    bytes_per_token: u64,
    tp: u32,
    kv_heads_per_rank: u32,
    replicated: bool,
    per_rank_bytes_per_token: u64,
    link_bytes_per_token: u64,
    /// Set when `tp` does not slice the KV heads: vLLM replicates them (the
    /// bytes grow) or refuses the model (nothing moves).
    tp_warning: Option<String>,
    tokens: u64,
    block_size: u64,
    block_rounded_tokens: u64,
    /// `block_rounded_tokens x bytes_per_token`.
    bytes: u64,
    bytes_formula: &'static str,
    /// `block_rounded_tokens x link_bytes_per_token` (all TP ranks).
    link_bytes: u64,
    /// Seconds for `link_bytes` over one link of each rate.
    link_seconds: LinkTimes,
    example_connector: ExampleConnectorJson,
}

#[derive(Debug, Serialize)]
struct MlaJson {
    kv_lora_rank: u32,
    qk_rope_head_dim: u32,
}

#[derive(Debug, Serialize)]
struct ExampleConnectorJson {
    saved_tokens: u64,
    lookup_tokens: u64,
    /// False when save and lookup folders differ: decode will miss silently.
    lookup_finds_saved: bool,
    layer_file_bytes: u64,
    prompt_folder_bytes: u64,
}

/// `{"1Gbps": s, "2.5Gbps": s, ...}` in rate order (a derived map would sort
/// the keys as strings: "100Gbps" before "1Gbps").
#[derive(Debug)]
struct LinkTimes(Vec<(f64, f64)>);

impl Serialize for LinkTimes {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.collect_map(self.0.iter().map(|(gbps, s)| (format!("{gbps}Gbps"), s)))
    }
}

/// Run `pdtop kv`: read the config, compute, write a table or JSON to `out`.
pub fn run(args: &KvArgs, out: &mut dyn Write) -> Result<(), KvError> {
    let text = std::fs::read_to_string(&args.model_config)
        .map_err(|source| KvError::Io { path: args.model_config.clone(), source })?;
    let opts = ShapeOptions { include_mtp_layers: args.include_mtp_layers };
    let shape = ModelShape::from_config_json_with(&text, opts)?;
    let report = build_report(&shape, args)?;
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &report)
            .map_err(|e| KvError::Write(std::io::Error::other(e)))?;
        writeln!(out).map_err(KvError::Write)
    } else {
        write_table(&report, out).map_err(KvError::Write)
    }
}

fn build_report(shape: &ModelShape, args: &KvArgs) -> Result<Report, KvError> {
    let kv = args.kv_cache_dtype;
    let per_token = bytes_per_token(shape, kv);
    let split = tp_split(shape, kv, args.tp);
    let rounded = block_rounded_tokens(args.tokens, args.block_size)
        .ok_or(KvError::Overflow("block-rounded token count"))?;
    let bytes = rounded.checked_mul(per_token).ok_or(KvError::Overflow("predicted bytes"))?;
    let link_bytes =
        rounded.checked_mul(split.link_bytes_per_token).ok_or(KvError::Overflow("predicted link bytes"))?;

    let saved = example_connector_saved_tokens(args.tokens, args.block_size)
        .ok_or(KvError::Overflow("ExampleConnector token count"))?;
    let lookup = example_connector_lookup_tokens(args.tokens, args.block_size)
        .ok_or(KvError::Overflow("ExampleConnector token count"))?;
    let layer_file = example_connector_layer_file_bytes(shape, kv, saved)
        .ok_or(KvError::Overflow("ExampleConnector layer file size"))?;

    Ok(Report {
        model_type: shape.model_type.clone(),
        layers: shape.layers,
        kv_heads: shape.kv_heads,
        head_dim: shape.head_dim,
        mla: shape
            .mla
            .map(|m| MlaJson { kv_lora_rank: m.kv_lora_rank, qk_rope_head_dim: m.qk_rope_head_dim }),
        mtp_layers_counted: args.include_mtp_layers && shape.mtp_layers > 0,
        dtype: shape.dtype_name.clone(),
        kv_cache_dtype: kv.as_str(),
        element_bytes: kv.element_bytes(shape.dtype_bytes),
        bytes_per_token: per_token,
        tp: split.tp,
        kv_heads_per_rank: split.kv_heads_per_rank,
        replicated: split.replicated,
        per_rank_bytes_per_token: split.per_rank_bytes_per_token,
        link_bytes_per_token: split.link_bytes_per_token,
        tp_warning: shape.tp_warning(args.tp),
        tokens: args.tokens,
        block_size: args.block_size,
        block_rounded_tokens: rounded,
        bytes,
        bytes_formula: "block_rounded_tokens x bytes_per_token",
        link_bytes,
        link_seconds: LinkTimes(
            LINK_RATES_GBPS.iter().filter_map(|&g| link_seconds(link_bytes, g).map(|s| (g, s))).collect(),
        ),
        example_connector: ExampleConnectorJson {
            saved_tokens: saved,
            lookup_tokens: lookup,
            lookup_finds_saved: saved == lookup,
            layer_file_bytes: layer_file,
            prompt_folder_bytes: layer_file.saturating_mul(u64::from(shape.layers)),
        },
    })
}

fn write_table(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    let model = r.model_type.as_deref().unwrap_or("model");
    let dtype = r.dtype.as_deref().unwrap_or("dtype unset, 16-bit assumed");
    match &r.mla {
        Some(m) => writeln!(
            out,
            "model            {model}: {} layers, MLA latent {}+{}, {dtype}",
            r.layers, m.kv_lora_rank, m.qk_rope_head_dim
        )?,
        None => writeln!(
            out,
            "model            {model}: {} layers x {} KV heads x {} dim, {dtype}",
            r.layers, r.kv_heads, r.head_dim
        )?,
    }
    writeln!(out, "kv cache dtype   {} ({} B/element)", r.kv_cache_dtype, r.element_bytes)?;
    writeln!(out, "bytes per token  {} ({})", r.bytes_per_token, human_bytes(r.bytes_per_token))?;
    writeln!(
        out,
        "tensor parallel  tp {}: {} B/token per rank, {} B/token summed over ranks{}",
        r.tp,
        r.per_rank_bytes_per_token,
        r.link_bytes_per_token,
        if r.replicated { " (replicated)" } else { "" }
    )?;
    if let Some(w) = &r.tp_warning {
        writeln!(out, "warning          {w}")?;
    }
    writeln!(out, "tokens           {} -> {} (block {})", r.tokens, r.block_rounded_tokens, r.block_size)?;
    writeln!(
        out,
        "bytes            {} ({}) = {} x {}",
        r.bytes,
        human_bytes(r.bytes),
        r.block_rounded_tokens,
        r.bytes_per_token
    )?;
    if r.tp > 1 {
        writeln!(out, "link bytes       {} ({}), all ranks", r.link_bytes, human_bytes(r.link_bytes))?;
    }
    let times: Vec<String> =
        r.link_seconds.0.iter().map(|(g, s)| format!("{g} Gb/s {}", human_seconds(*s))).collect();
    writeln!(out, "link time        {}", times.join(" | "))?;
    let ec = &r.example_connector;
    writeln!(
        out,
        "ExampleConnector saves {} tokens, looks up {}{}; {} B per layer file",
        ec.saved_tokens,
        ec.lookup_tokens,
        if ec.lookup_finds_saved { "" } else { " (MISMATCH: decode will miss)" },
        ec.layer_file_bytes
    )
}

/// Binary units, since KV sizes are quoted in KiB/MiB in vLLM docs and logs.
fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{b} B") } else { format!("{v:.2} {}", UNITS[unit]) }
}

fn human_seconds(s: f64) -> String {
    if s >= 1.0 { format!("{s:.2} s") } else { format!("{:.1} ms", s * 1000.0) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        kv: KvArgs,
    }

    fn shared(rel: &str) -> String {
        format!("{}/tests/fixtures/{rel}", env!("CARGO_MANIFEST_DIR"))
    }

    fn run_to_string(argv: &[&str]) -> Result<String, KvError> {
        let cli = Cli::try_parse_from(argv).expect("argv parses");
        let mut out = Vec::new();
        run(&cli.kv, &mut out)?;
        Ok(String::from_utf8(out).expect("utf-8 output"))
    }

    #[test]
    fn json_output_for_qwen3_capture() {
        let cfg = shared("lab-captures/qwen3-shape-restart/model-config.json");
        let text =
            run_to_string(&["kv", "--model-config", &cfg, "--tokens", "1025", "--json"]).expect("runs");
        let v: serde_json::Value = serde_json::from_str(&text).expect("json");
        assert_eq!(v["bytes_per_token"], 147_456);
        assert_eq!(v["tokens"], 1025);
        assert_eq!(v["block_rounded_tokens"], 1040);
        assert_eq!(v["bytes"], 1040 * 147_456);
        assert_eq!(v["tp"], 1);
        assert_eq!(v["dtype"], "bfloat16");
        assert_eq!(v["kv_cache_dtype"], "auto");
        assert_eq!(v["mla"], serde_json::Value::Null);
        let one = v["link_seconds"]["1Gbps"].as_f64().expect("1Gbps");
        assert!((one - 1040.0 * 147_456.0 * 8.0 / 1e9).abs() < 1e-9);
        for key in ["1Gbps", "2.5Gbps", "10Gbps", "25Gbps", "100Gbps", "200Gbps", "400Gbps"] {
            assert!(v["link_seconds"][key].is_f64(), "{key}");
        }
        // The lab's edge_block silent miss, predicted.
        assert_eq!(v["example_connector"]["saved_tokens"], 1024);
        assert_eq!(v["example_connector"]["lookup_tokens"], 1008);
        assert_eq!(v["example_connector"]["lookup_finds_saved"], false);
        // Keys come out in rate order, not string order.
        let one_at = text.find("\"1Gbps\"").expect("1Gbps key");
        let hundred_at = text.find("\"100Gbps\"").expect("100Gbps key");
        assert!(one_at < hundred_at);
    }

    #[test]
    fn table_output_with_fp8_and_tp() {
        let cfg = shared("lab-captures/nixl-llama-shape/model-config.json");
        let text = run_to_string(&[
            "kv",
            "--model-config",
            &cfg,
            "--tokens",
            "1000",
            "--kv-cache-dtype",
            "fp8",
            "--tp",
            "2",
        ])
        .expect("runs");
        assert!(text.contains("bytes per token  65536 (64.00 KiB)"), "{text}");
        assert!(text.contains("tp 2: 32768 B/token per rank"), "{text}");
        assert!(text.contains("1000 -> 1008 (block 16)"), "{text}");
        assert!(text.contains("1 Gb/s "), "{text}");
    }

    #[test]
    fn a_tp_that_does_not_fit_the_kv_heads_is_said() {
        // Qwen3-8B: 8 KV heads.
        let cfg = shared("lab-captures/qwen3-shape-restart/model-config.json");
        let run = |tp: &str, json: bool| {
            let mut argv = vec!["kv", "--model-config", &cfg, "--tokens", "1000", "--tp", tp];
            if json {
                argv.push("--json");
            }
            run_to_string(&argv).expect("runs")
        };
        let text = run("3", false);
        let warning = text.lines().find(|l| l.starts_with("warning")).unwrap_or_else(|| panic!("{text}"));
        assert!(
            warning.contains("tp 3 does not fit the 8 KV heads") && warning.contains("refuses"),
            "{text}"
        );
        let v: serde_json::Value = serde_json::from_str(&run("16", true)).expect("json");
        assert!(v["tp_warning"].as_str().unwrap().contains("2x the bytes"), "{v}");
        assert_eq!(v["link_bytes_per_token"], 2 * 147_456);
        assert!(!run("4", false).contains("warning"));
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&run("8", true)).unwrap()["tp_warning"],
            serde_json::Value::Null
        );
    }

    #[test]
    fn missing_file_and_bad_flags_are_errors() {
        let err = run_to_string(&["kv", "--model-config", "/nonexistent/config.json", "--tokens", "1"])
            .expect_err("missing file");
        assert!(matches!(err, KvError::Io { .. }));
        assert!(Cli::try_parse_from(["kv", "--model-config", "x", "--tokens", "1", "--tp", "0"]).is_err());
        assert!(
            Cli::try_parse_from(["kv", "--model-config", "x", "--tokens", "1", "--block-size", "0"]).is_err()
        );
        assert!(
            Cli::try_parse_from(["kv", "--model-config", "x", "--tokens", "1", "--kv-cache-dtype", "fp4"])
                .is_err()
        );
        assert!(Cli::try_parse_from(["kv", "--model-config", "x", "--tokens", "-5"]).is_err());
    }

    #[test]
    fn huge_token_count_is_an_overflow_error() {
        let cfg = shared("lab-captures/nixl-llama-shape/model-config.json");
        let max = u64::MAX.to_string();
        let err = run_to_string(&["kv", "--model-config", &cfg, "--tokens", &max]).expect_err("overflow");
        assert!(matches!(err, KvError::Overflow(_)), "{err:?}");
    }

    #[test]
    fn human_units() {
        assert_eq!(human_bytes(88), "88 B");
        assert_eq!(human_bytes(147_456), "144.00 KiB");
        assert_eq!(human_bytes(128 << 20), "128.00 MiB");
        assert_eq!(human_seconds(0.0125), "12.5 ms");
        assert_eq!(human_seconds(2.0), "2.00 s");
    }
}
