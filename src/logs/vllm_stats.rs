//! The periodic lines of a vLLM engine: `Engine 000: ...` stats and
//! `KV Transfer metrics: ...`.

/// The periodic `Engine 000: Avg prompt throughput: ...` line (§2.2).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EngineStats {
    /// `Engine 000` → `Some(0)`; `N Engines Aggregated` → `None`.
    pub engine: Option<u32>,
    pub prompt_tps: f64,
    pub gen_tps: f64,
    pub running: u32,
    pub waiting: u32,
    pub kv_usage_pct: f64,
    /// Only printed once the prefix cache has seen queries (v0.33).
    pub prefix_hit_pct: Option<f64>,
    /// Only printed when a KV connector reports stats.
    pub external_hit_pct: Option<f64>,
    /// `Deferred: N reqs` (≥0.24, only when non-zero).
    pub deferred: Option<u32>,
    /// `Preemptions: N` (only when non-zero in the interval).
    pub preemptions: Option<u32>,
}

/// `KV Transfer metrics: k=v, ...` (§2.3). `pairs` keeps every key in order,
/// so keys added by later vLLM versions are not lost; the named fields are
/// the ones the dashboard uses.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KvTransferMetrics {
    pub pairs: Vec<(String, String)>,
    pub num_successful_transfers: Option<u64>,
    pub avg_xfer_ms: Option<f64>,
    pub p90_xfer_ms: Option<f64>,
    pub avg_mb_per_transfer: Option<f64>,
    pub throughput_mb_s: Option<f64>,
    pub num_failed_transfers: Option<u64>,
    pub num_kv_expired: Option<u64>,
    /// The ~0.9 shape: a dataclass repr, `KVTransferAggregatedStats(k=v, ...)`.
    pub repr: bool,
}

/// `Engine 000: Avg prompt throughput: 0.5 tokens/s, ...` (see §2.2 for the
/// optional parts). The five parts every version prints are required.
pub(crate) fn parse_engine_stats(msg: &str) -> Option<EngineStats> {
    let (head, body) = msg.split_once(": ")?;
    let engine = match head.strip_prefix("Engine ") {
        Some(n) => Some(n.parse().ok()?),
        None if head.ends_with(" Engines Aggregated") => None,
        None => return None,
    };
    let (mut prompt, mut gen_, mut running, mut waiting, mut kv) = (None, None, None, None, None);
    let mut s = EngineStats { engine, ..EngineStats::default() };
    // Parts are joined by ", "; "KV fetch: a, b, c" splits into pieces that
    // match nothing below and are ignored.
    for part in body.split(", ") {
        let num = |p: &str| -> Option<f64> {
            let v = p.trim_end_matches(" tokens/s").trim_end_matches(" reqs");
            v.trim_end_matches('%').trim().parse().ok()
        };
        let int = |p: &str| num(p).filter(|v| *v >= 0.0 && *v <= u32::MAX as f64).map(|v| v as u32);
        if let Some(v) = part.strip_prefix("Avg prompt throughput: ") {
            prompt = num(v);
        } else if let Some(v) = part.strip_prefix("Avg generation throughput: ") {
            gen_ = num(v);
        } else if let Some(v) = part.strip_prefix("Running: ") {
            running = int(v);
        } else if let Some(v) = part.strip_prefix("Waiting: ") {
            waiting = int(v);
        } else if let Some(v) = part.strip_prefix("Deferred: ") {
            s.deferred = int(v);
        } else if let Some(v) = part.strip_prefix("Preemptions: ") {
            s.preemptions = int(v);
        } else if let Some(v) = part.strip_prefix("Prefix cache hit rate: ") {
            s.prefix_hit_pct = num(v);
        } else if let Some(v) = part.strip_prefix("External prefix cache hit rate: ") {
            s.external_hit_pct = num(v);
        } else if let Some(i) = part.find("KV cache usage: ") {
            // "GPU KV cache usage" on CUDA, "<DEVICE> KV cache usage" elsewhere.
            kv = num(&part[i + "KV cache usage: ".len()..]);
        }
    }
    s.prompt_tps = prompt?;
    s.gen_tps = gen_?;
    s.running = running?;
    s.waiting = waiting?;
    s.kv_usage_pct = kv?;
    Some(s)
}

/// `Num successful transfers=2, Avg xfer time (ms)=82.675, ...` (keys have
/// no `=` or `, `; values are numbers).
pub(crate) fn parse_kv_metrics(r: &str) -> KvTransferMetrics {
    let mut m = KvTransferMetrics::default();
    let mut r = r.trim_end();
    if let Some(open) = r.find('(')
        && r[..open].bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !r[..open].is_empty()
    {
        m.repr = true;
        r = r[open + 1..].trim_end_matches(')');
    }
    for part in r.split(", ") {
        // Keys carry spaces and parentheses, never `=`: split on the last one.
        let Some((k, v)) = part.rsplit_once('=') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        let f = v.parse::<f64>().ok().filter(|x| x.is_finite());
        let u = v.parse::<u64>().ok().or_else(|| f.filter(|x| *x >= 0.0).map(|x| x as u64));
        match k {
            // 0.11 printed the single key `num_successful_transfers`.
            "Num successful transfers" | "num_successful_transfers" => m.num_successful_transfers = u,
            "Avg xfer time (ms)" => m.avg_xfer_ms = f,
            "P90 xfer time (ms)" => m.p90_xfer_ms = f,
            "Avg MB per transfer" => m.avg_mb_per_transfer = f,
            "Throughput (MB/s)" => m.throughput_mb_s = f,
            "Num failed transfers" => m.num_failed_transfers = u,
            "Num KV expired reqs" => m.num_kv_expired = u,
            _ => {}
        }
        m.pairs.push((k.to_string(), v.to_string()));
    }
    m
}

/// V0's periodic line (`metrics.py`): `Avg prompt throughput: X tokens/s, ...,
/// Running: N reqs, Swapped: N reqs, Pending: N reqs, GPU KV cache usage: X%, CPU KV cache usage: X%.`
pub(crate) fn parse_v0_stats(msg: &str) -> Option<super::signal::Signal> {
    use super::scan::num_after;
    use super::signal::{Signal, SignalKind};
    if !msg.starts_with("Avg prompt throughput: ") || !msg.contains("Swapped: ") {
        return None;
    }
    let m = msg.trim_end().trim_end_matches('.');
    let s = Signal::new(SignalKind::Stats)
        .text("engine_version", Some("v0"))
        .num("prompt_tps", num_after(m, "Avg prompt throughput: "))
        .num("gen_tps", num_after(m, "Avg generation throughput: "))
        .num("running", num_after(m, "Running: "))
        .num("swapped", num_after(m, "Swapped: "))
        .num("pending", num_after(m, "Pending: "))
        .num("gpu_kv_pct", num_after(m, "GPU KV cache usage: "))
        .num("cpu_kv_pct", num_after(m, "CPU KV cache usage: "));
    Some(s)
}
