//! The `pdtop check --json` report: pdtop's machine interface. Field names
//! are stable; new fields may be added.

pub mod arrival;
pub mod kv;
pub mod kv_bytes;
pub mod kv_folders;
pub mod kv_ledger;
pub mod kv_nixl;
pub mod quantiles;
pub mod request_ids;
pub mod span_evidence;
pub mod spans;
pub mod text;
pub mod timed;
pub mod traces;

use serde::Serialize;

use crate::metrics::histogram::Histogram;
use crate::metrics::model::{Counter, Hist};
use crate::traces::Counts;

use crate::feed::Role;
use crate::state::AppState;
pub use quantiles::Quantiles;
pub use traces::{TraceReport, UnknownReason, VllmId, origin_endpoint, unknown_reasons};

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub instances: Vec<InstanceReport>,
    pub ttft_ms: ByRole<Option<Quantiles>>,
    pub tpot_ms: ByRole<Option<Quantiles>>,
    pub kv_usage: ByRole<Option<f64>>,
    pub decode_prompt_tokens: PromptTokens,
    pub requests: Counts,
    /// The `id` of every trace called a silent miss.
    pub silent_miss_ids: Vec<String>,
    /// Every request the traces hold, oldest first (empty without logs).
    pub traces: Vec<TraceReport>,
    /// Why `requests.unknown` are unknown, grouped.
    pub unknown_reasons: Vec<UnknownReason>,
    /// Where `requests` came from: "metrics" (histogram deltas) or "traces".
    pub requests_source: &'static str,
    /// The metrics-only count, always: a cross-check of the traces.
    pub requests_metrics: Counts,
    /// Set when traces and metrics disagree on silent misses, saying how.
    pub disagreement: Option<String>,
    /// Misses the traces know happened but cannot pin on one request.
    pub unattributed_misses: u64,
    /// Decode TTFT of intervals where requests loaded KV vs computed it.
    pub decode_ttft_ms_loaded: Option<Quantiles>,
    pub decode_ttft_ms_computed: Option<Quantiles>,
    pub duration_s: f64,
    /// Link bytes against the KV size the model predicts.
    pub kv: KvReport,
    /// Misses, restarts and outages, oldest first (the last 100).
    pub events: Vec<EventReport>,
    /// What the roles disagree on (block size, KV dtype, model, connector,
    /// version...): each field with every reporting endpoint's value and
    /// what the disagreement does. Fields one side lacks are not compared.
    pub mismatches: Vec<MismatchReport>,
    /// Things that make the numbers above less than they seem: an endpoint
    /// that answers without vLLM metrics, a detector the version lacks.
    pub warnings: Vec<String>,
    pub verdict: Verdict,
    /// vLLM's own spans (`--otlp-listen`); absent when none arrived.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spans: Option<spans::SpansReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub router: Option<crate::state::router_view::RouterReport>,
}

#[derive(Debug, Clone, Serialize)]
pub struct KvReport {
    pub bytes_per_token: Option<u64>,
    /// Where it came from: --model-config, /v1/models' root, --kv-bytes-per-token.
    pub bytes_per_token_source: Option<String>,
    /// Prefill requests completed: their KV should have moved.
    pub requests_with_bytes: u64,
    /// The best observation: a connector's count (`XferFamily::source`), "kv_dir" or "interface_rx".
    pub observed_source: Option<&'static str>,
    pub observed_bytes: Option<f64>,
    /// Prompt tokens processed by the prefill side × bytes per token.
    pub predicted_bytes: Option<f64>,
    pub ratio: Option<f64>,
    pub verdict: crate::state::link::LinkVerdict,
    pub nixl_bytes: f64,
    pub kv_dir_bytes: f64,
    pub kv_dir_folders: usize,
    pub iface: Option<IfaceReport>,
    /// Per request, the carrier, the folders, worth it (`kv_report.rs`).
    #[serde(flatten)]
    pub per_request: kv::KvRequests,
}

#[derive(Debug, Clone, Serialize)]
pub struct IfaceReport {
    pub name: String,
    pub rx_bytes: f64,
    pub tx_bytes: f64,
    pub resets: u32,
    pub error: Option<String>,
}

impl KvReport {
    pub fn from_state(state: &AppState) -> KvReport {
        let l = &state.link;
        let model = l.model.as_ref();
        let predicted = model.map(|_| l.predicted.total_bytes);
        let observed = l.observed_since(f64::NEG_INFINITY);
        let ratio = match (observed, predicted) {
            (Some((_, o)), Some(p)) if p > 0.0 => Some((o / p * 1000.0).round() / 1000.0),
            _ => None,
        };
        let verdict = match (observed, predicted) {
            (Some((_, o)), Some(p)) => crate::state::link::verdict(o, p),
            _ => crate::state::link::LinkVerdict::TooLittle,
        };
        KvReport {
            bytes_per_token: model.map(|m| m.bytes_per_token),
            bytes_per_token_source: model.map(|m| m.source.clone()),
            requests_with_bytes: l.predicted.total_count.round() as u64,
            observed_source: observed.map(|(s, _)| s),
            observed_bytes: observed.map(|(_, b)| b),
            predicted_bytes: predicted,
            ratio,
            verdict,
            nixl_bytes: l.xfer_bytes_of(crate::state::link::NIXL),
            kv_dir_bytes: l.kvdir.total_bytes,
            kv_dir_folders: l.kvdir_folders,
            iface: l.iface.as_ref().map(|name| IfaceReport {
                name: name.clone(),
                rx_bytes: l.iface_rx.total_bytes,
                tx_bytes: l.iface_tx.total_bytes,
                resets: l.iface_resets,
                error: l.iface_error.clone(),
            }),
            per_request: kv::KvRequests::from_state(state),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct MismatchReport {
    pub field: &'static str,
    /// Endpoint → value (a number or a string, as the instance gave it).
    pub values: std::collections::BTreeMap<String, serde_json::Value>,
    pub why: String,
}

impl MismatchReport {
    fn of(m: &crate::state::mismatch::Mismatch) -> MismatchReport {
        MismatchReport {
            field: m.field,
            values: m.values.iter().map(|(e, _, v)| (e.clone(), v.to_json())).collect(),
            why: m.why.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct EventReport {
    pub t: f64,
    pub kind: &'static str,
    pub text: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct ByRole<T> {
    pub prefill: T,
    pub decode: T,
}

#[derive(Debug, Clone, Serialize)]
pub struct InstanceReport {
    pub role: Role,
    pub endpoint: String,
    pub up: bool,
    pub scrapes_ok: u64,
    pub scrapes_failed: u64,
    pub restarts: u32,
    pub last_error: Option<String>,
    pub model: Option<String>,
    pub block_size: Option<u32>,
    pub bad_lines: u64,
    /// From `/version`, else the startup log.
    pub vllm_version: Option<String>,
    /// From the startup log, when it is tailed.
    pub kv_connector: Option<String>,
    pub kv_role: Option<String>,
    /// The connectors' own Prometheus figures, since pdtop started; absent
    /// when the instance serves none of their families.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connector_metrics: Option<crate::state::connectors::ConnectorMetrics>,
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct PromptTokens {
    pub local_compute: f64,
    pub local_cache_hit: f64,
    pub external_kv_transfer: f64,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Ok,
    SilentMisses,
    Degraded,
    NoData,
}

impl Verdict {
    /// The JSON's word for it (`silent_misses`), for the text summary.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::SilentMisses => "silent_misses",
            Verdict::Degraded => "degraded",
            Verdict::NoData => "no_data",
        }
    }

    /// `check` exits 0 only when nothing went wrong.
    pub fn exit_code(self) -> i32 {
        match self {
            Verdict::Ok | Verdict::NoData => 0,
            Verdict::SilentMisses | Verdict::Degraded => 1,
        }
    }
}

impl Report {
    pub fn from_state(state: &AppState) -> Report {
        let instances: Vec<InstanceReport> = state
            .instances
            .iter()
            .map(|i| InstanceReport {
                role: i.endpoint.role,
                endpoint: i.endpoint.display.clone(),
                up: i.health.up,
                scrapes_ok: i.health.scrapes_ok,
                scrapes_failed: i.health.scrapes_failed,
                restarts: i.health.restarts,
                last_error: i.health.last_error.clone(),
                model: i.model_name().map(str::to_owned),
                block_size: i.block_size(),
                bad_lines: i.health.bad_lines_total,
                vllm_version: i.version.clone().or_else(|| i.startup.version.clone()),
                kv_connector: i.startup.connector.clone(),
                kv_role: i.startup.kv_role.clone(),
                connector_metrics: crate::state::connectors::ConnectorMetrics::of([i]),
            })
            .collect();
        let q = |role, hist| state.total_hist(role, hist).as_ref().and_then(Quantiles::ms);
        let mut tokens = PromptTokens::default();
        for i in state.instances_of(Role::Decode) {
            let c = |k| i.total_counters.get(&k).copied().unwrap_or(0.0);
            tokens.local_compute += c(Counter::PromptLocalCompute);
            tokens.local_cache_hit += c(Counter::PromptLocalCacheHit);
            tokens.external_kv_transfer += c(Counter::PromptExternal);
        }
        let metrics = state.misses.outcomes;
        // Traces count the requests where a decode log is read, or where no
        // instance was scraped (logs read after the fact): a prefill log
        // alone cannot say what decode did, the decode metrics can.
        let scraped = state.instances.iter().any(|i| i.latest_at.is_some());
        let traced = state.logs.as_ref().filter(|l| l.has_decode_log() || !scraped).map(|l| {
            let c = l.correlator.counts();
            (c, l.correlator.silent_miss_ids(), c.unattributed_misses)
        });
        // Listed where an instance's log is read, or where logs alone are
        // read after the fact (a proxy's pasted lines name requests too).
        let (traces, unknown_reasons) = match &state.logs {
            Some(l) if l.has_decode_log() || l.has_prefill_log() || !scraped => (
                {
                    let cx = traces::TraceContext::new(state);
                    l.correlator.traces().map(|t| TraceReport::from_trace(t, state, &cx)).collect()
                },
                unknown_reasons(l.correlator.traces()),
            ),
            _ => (Vec::new(), Vec::new()),
        };
        let (requests, silent_miss_ids, unattributed, source) = match traced {
            Some((c, ids, u)) => (c, ids, u, "traces"),
            None => (metrics, Vec::new(), 0, "metrics"),
        };
        // Misses the traces know of but cannot name count on their side.
        // Metrics saw only what finished after pdtop started: of the misses
        // that began before, any number.
        let known = requests.silent_miss_since_start() + unattributed;
        // Those the metrics left unknown may be any of the traces' too.
        let agree = known.saturating_sub(metrics.unknown)..=known + requests.silent_miss_before_start;
        let disagreement = (source == "traces" && !agree.contains(&metrics.silent_miss)).then(|| {
            format!(
                "traces name {} silent miss(es), metrics count {}{}",
                requests.silent_miss_since_start(),
                metrics.silent_miss,
                if unattributed > 0 {
                    format!(" ({unattributed} more known but not attributable)")
                } else {
                    String::new()
                }
            )
        });
        let mut warnings = Vec::new();
        // A 200 that holds no vLLM sample (a login page, the wrong port):
        // reachable, but nothing is being watched, so not "ok".
        let not_vllm: Vec<&str> = state
            .instances
            .iter()
            .filter(|i| i.health.up && i.health.no_vllm_metrics)
            .map(|i| i.endpoint.display.as_str())
            .collect();
        for ep in &not_vllm {
            warnings
                .push(format!("{ep} answers but with no vllm: metrics (wrong port? --disable-log-stats?)"));
        }
        if source == "metrics" && state.misses.supported == Some(false) {
            // Zero misses from a detector that cannot run is not a zero.
            warnings.push(
                "silent misses cannot be counted from metrics: the decode instance has no \
                 vllm:request_prefill_kv_computed_tokens (vLLM < 0.13); tail its log (--decode-log) to name them"
                    .into(),
            );
        }
        if !by_source_known(state) {
            warnings.push(
                "decode_prompt_tokens unknown: no vllm:prompt_tokens_by_source_total (vLLM < 0.18)".into(),
            );
        }
        warnings.extend(crate::state::router_view::router_warning(state));
        // A log that could not be read, or not placed in time, says why.
        for l in state.logs.iter().flat_map(|l| &l.sources) {
            if let Some(crate::feed::TailState::Error(why)) = &l.state {
                warnings.push(format!("{}: {why}", l.path));
            }
        }
        let kv = KvReport::from_state(state);
        // A silent slow split is as loud as a silent miss.
        warnings.extend(kv.per_request.wire_warning.clone());
        // A mismatch shows up as misses, not errors: say it beside them.
        let misses = requests.silent_miss.max(metrics.silent_miss) + unattributed;
        if let (true, Some(cause)) = (misses > 0, state.miss_cause()) {
            warnings.push(format!("{misses} silent miss(es): {cause}"));
        }
        let unreachable = instances.iter().any(|i| i.scrapes_failed > 0 || !i.up) || !not_vllm.is_empty();
        let restarted = instances.iter().any(|i| i.restarts > 0);
        // Roles that cannot work together are degraded before any request shows it.
        let disagree = state.mismatches.iter().any(|m| m.effect != crate::state::mismatch::Effect::Risk);
        // Either count is enough for the verdict: metrics see misses that
        // logs without shared ids cannot name.
        let verdict = if requests.silent_miss > 0 || metrics.silent_miss > 0 || unattributed > 0 {
            Verdict::SilentMisses
        } else if unreachable
            || crate::state::router_view::degraded(state)
            || restarted
            || disagree
            || requests.error > 0
            || requests.stuck > 0
            || state.events.iter().any(|e| e.kind.is_failure())
            || kv.per_request.wire_warning.is_some()
        {
            Verdict::Degraded
        } else if requests.seen > 0 {
            Verdict::Ok
        } else {
            Verdict::NoData
        };
        let nonempty = |h: &Histogram| (h.total() > 0.0).then(|| Quantiles::ms(h)).flatten();
        Report {
            instances,
            ttft_ms: ByRole { prefill: q(Role::Prefill, Hist::Ttft), decode: q(Role::Decode, Hist::Ttft) },
            tpot_ms: ByRole { prefill: q(Role::Prefill, Hist::Tpot), decode: q(Role::Decode, Hist::Tpot) },
            kv_usage: ByRole {
                prefill: last_kv_usage(state, Role::Prefill),
                decode: last_kv_usage(state, Role::Decode),
            },
            decode_prompt_tokens: tokens,
            requests,
            silent_miss_ids,
            traces,
            unknown_reasons,
            requests_source: source,
            requests_metrics: metrics,
            disagreement,
            unattributed_misses: unattributed,
            decode_ttft_ms_loaded: nonempty(&state.misses.ttft_loaded),
            decode_ttft_ms_computed: nonempty(&state.misses.ttft_computed),
            duration_s: state.started_at.map(|s| state.now - s).unwrap_or(0.0),
            kv,
            events: state
                .events
                .iter()
                .rev()
                .take(100)
                .rev()
                .map(|e| EventReport { t: e.t, kind: e.kind.name(), text: e.text.clone() })
                .collect(),
            mismatches: state.mismatches.iter().map(MismatchReport::of).collect(),
            warnings,
            verdict,
            spans: spans::SpansReport::from_state(state),
            router: crate::state::router_view::RouterReport::from_state(state),
        }
    }
}

/// The last KV usage seen for a role (mean over its instances), even if an
/// instance is down now: the report says what was last known.
fn last_kv_usage(state: &AppState, role: Role) -> Option<f64> {
    let vals: Vec<f64> = state.instances_of(role).filter_map(|i| i.latest.as_ref()?.kv_usage).collect();
    (!vals.is_empty()).then(|| vals.iter().sum::<f64>() / vals.len() as f64)
}

/// False once a decode instance answered without the by-source family
/// (and none with it); true before any scrape, when "no tokens yet" is right.
pub fn by_source_known(state: &AppState) -> bool {
    let mut scraped = state.instances_of(Role::Decode).filter_map(|i| i.latest.as_ref()).peekable();
    scraped.peek().is_none() || scraped.any(|s| s.counters.contains_key(&Counter::PromptExternal))
}

#[cfg(test)]
mod tests {
    use super::Verdict;

    #[test]
    fn the_summary_says_the_jsons_verdict_words() {
        for v in [Verdict::Ok, Verdict::SilentMisses, Verdict::Degraded, Verdict::NoData] {
            assert_eq!(serde_json::to_value(v).unwrap(), v.name());
        }
    }
}
