//! The KV connectors' own Prometheus families, beyond NIXL's: Mooncake
//! (vLLM >= 0.33), the Mooncake store, the OffloadingConnector (two naming
//! generations) and LMCache's in-process `lmcache:*` families. Names,
//! types, labels and units as their sources declare them (the README's
//! "Connectors' own metrics"); absent families stay absent.

use super::counter::Counter;
use super::parse::Sample;
use std::collections::BTreeMap;

/// How a family's series add up to one number.
#[derive(Clone, Copy)]
enum Fold {
    /// Engines (data parallel) each count their own work: summed.
    Sum,
    /// LMCache runs one engine per tensor-parallel worker and each counts
    /// the same tokens: summed per `worker_id`, then the largest taken.
    MaxOverWorkers,
}

/// A counter, its family (with the `_total` suffix the text carries), the
/// labels that select its series, and how they fold.
type Source = (Counter, &'static str, &'static [(&'static str, &'static str)], Fold);

use Fold::{MaxOverWorkers, Sum};

/// Newest name first where a family moved; the first one present wins.
const SOURCES: &[Source] = &[
    // MooncakeConnector: the failures counted where they happen (failed
    // transfers on the sender, the prefill; failed receives on decode;
    // expired KV on the prefill).
    (Counter::MooncakeFailedTransfers, "vllm:mooncake_num_failed_transfers_total", &[], Sum),
    (Counter::MooncakeFailedRecvs, "vllm:mooncake_num_failed_recvs_total", &[], Sum),
    (Counter::MooncakeExpired, "vllm:mooncake_num_kv_expired_reqs_total", &[], Sum),
    // MooncakeStoreConnector: a shared store, labelled by operation
    // (save_exists, save_put, load_get, lookup_exists) and status.
    (Counter::MooncakeStoreFailedKeys, "vllm:mooncake_store_operation_failed_keys_total", &[], Sum),
    (
        Counter::MooncakeStoreLoadBytes,
        "vllm:mooncake_store_operation_bytes_total",
        &[("operation", "load_get"), ("status", "ok")],
        Sum,
    ),
    (
        Counter::MooncakeStoreSaveBytes,
        "vllm:mooncake_store_operation_bytes_total",
        &[("operation", "save_put"), ("status", "ok")],
        Sum,
    ),
    // OffloadingConnector: host memory of the same instance. Newer vLLM
    // splits load and store into families of their own; older ones label
    // one family by transfer_type.
    (Counter::OffloadStoredBytes, "vllm:kv_offload_store_bytes_total", &[], Sum),
    (
        Counter::OffloadStoredBytes,
        "vllm:kv_offload_total_bytes_total",
        &[("transfer_type", "GPU_to_CPU")],
        Sum,
    ),
    (Counter::OffloadLoadedBytes, "vllm:kv_offload_load_bytes_total", &[], Sum),
    (
        Counter::OffloadLoadedBytes,
        "vllm:kv_offload_total_bytes_total",
        &[("transfer_type", "CPU_to_GPU")],
        Sum,
    ),
    (Counter::OffloadStoreSecs, "vllm:kv_offload_store_time_total", &[], Sum),
    (Counter::OffloadStoreSecs, "vllm:kv_offload_total_time_total", &[("transfer_type", "GPU_to_CPU")], Sum),
    (Counter::OffloadLoadSecs, "vllm:kv_offload_load_time_total", &[], Sum),
    (Counter::OffloadLoadSecs, "vllm:kv_offload_total_time_total", &[("transfer_type", "CPU_to_GPU")], Sum),
    // LMCache: every one of these counts tokens (not chunks, not requests).
    (Counter::LmcacheRequestedTokens, "lmcache:num_requested_tokens_total", &[], MaxOverWorkers),
    (Counter::LmcacheHitTokens, "lmcache:num_hit_tokens_total", &[], MaxOverWorkers),
    (Counter::LmcacheLookupTokens, "lmcache:num_lookup_tokens_total", &[], MaxOverWorkers),
    (Counter::LmcacheLookupHitTokens, "lmcache:num_lookup_hits_total", &[], MaxOverWorkers),
    (Counter::LmcacheStoredTokens, "lmcache:num_stored_tokens_total", &[], MaxOverWorkers),
    (Counter::LmcachePromptTokens, "lmcache:num_prompt_tokens_total", &[], MaxOverWorkers),
];

/// The families [`extract`] reads.
pub(super) fn families() -> impl Iterator<Item = &'static str> {
    SOURCES.iter().map(|(_, family, _, _)| *family)
}

/// Adds the connector counters a scrape holds to `out`.
/// `get` gives a name's samples (none when absent).
pub(super) fn extract<'g, 'a: 'g>(
    get: impl Fn(&str) -> &'g [&'g Sample<'a>],
    out: &mut BTreeMap<Counter, f64>,
) {
    for (counter, family, labels, fold) in SOURCES {
        if out.contains_key(counter) {
            continue;
        }
        let all = get(family);
        let series: Vec<&Sample<'_>> = all
            .iter()
            .copied()
            .filter(|s| labels.iter().all(|(k, v)| s.label(k).as_deref() == Some(v)))
            .filter(|s| s.value.is_finite())
            .collect();
        // A labelled family whose selected series is absent (an offload
        // that never loaded yet) is absent, not zero.
        if series.is_empty() {
            continue;
        }
        let total = match fold {
            Sum => series.iter().map(|s| s.value).sum(),
            MaxOverWorkers => {
                let mut per_worker: BTreeMap<String, f64> = BTreeMap::new();
                for s in &series {
                    let w = s.label("worker_id").map(|w| w.into_owned()).unwrap_or_default();
                    *per_worker.entry(w).or_default() += s.value;
                }
                per_worker.values().copied().fold(0.0, f64::max)
            }
        };
        out.insert(*counter, total);
    }
}

/// The failure counters, each with the event kind it raises when it rises.
pub const FAILURES: &[(Counter, &str, &str)] = &[
    (Counter::NixlFailedTransfers, "nixl_failed_transfers", "NIXL transfer(s) failed"),
    (Counter::NixlFailedNotifications, "nixl_failed_notifications", "NIXL notification(s) failed"),
    (Counter::NixlExpired, "nixl_kv_expired", "request(s) whose KV expired unread on the producer (NIXL)"),
    (Counter::MooncakeFailedTransfers, "mooncake_failed_transfers", "Mooncake transfer(s) failed"),
    (Counter::MooncakeFailedRecvs, "mooncake_failed_recvs", "Mooncake receive(s) failed"),
    (
        Counter::MooncakeExpired,
        "mooncake_kv_expired",
        "request(s) whose KV expired unread on the producer (Mooncake)",
    ),
    (Counter::MooncakeStoreFailedKeys, "mooncake_store_failed_keys", "Mooncake store key(s) failed"),
];

/// The event kind name and wording of a failure counter.
pub fn failure(c: Counter) -> Option<(&'static str, &'static str)> {
    FAILURES.iter().find(|(f, _, _)| *f == c).map(|(_, kind, text)| (*kind, *text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::model::{Hist, InstanceSample};
    use Counter::*;

    fn fixture(name: &str) -> InstanceSample {
        let path = format!("{}/tests/fixtures/connector-metrics/{name}", env!("CARGO_MANIFEST_DIR"));
        InstanceSample::from_text(&std::fs::read_to_string(path).unwrap())
    }

    /// The values of `which` in the scrape, `None` where absent.
    fn read(s: &InstanceSample, which: &[Counter]) -> Vec<Option<f64>> {
        which.iter().map(|c| s.counters.get(c).copied()).collect()
    }

    #[test]
    fn mooncake_histograms_and_counters() {
        let s = fixture("mooncake-prefill-b.txt");
        assert_eq!(s.bad_lines, 0);
        let bytes = &s.hists[&Hist::MooncakeBytes];
        assert_eq!((bytes.total(), bytes.sum), (1.0, 16_515_072.0));
        assert_eq!(s.hists[&Hist::MooncakeXferTime].sum, 0.012);
        assert_eq!(s.hists[&Hist::MooncakeDescriptors].sum, 72.0);
        let got = read(&s, &[MooncakeFailedTransfers, MooncakeFailedRecvs, MooncakeExpired]);
        assert_eq!(got, [Some(1.0), Some(0.0), Some(0.0)]);
        // Nothing of the other connectors appears, not even as a zero.
        assert_eq!(read(&s, &[OffloadStoredBytes, LmcacheHitTokens, NixlFailedTransfers]), [None; 3]);
        assert!(!s.hists.contains_key(&Hist::NixlBytes));
    }

    #[test]
    fn lmcache_real_excerpt_reads_hit_and_prompt_tokens() {
        let s = fixture("lmcache-qwen3-8b-real.txt");
        assert_eq!(s.bad_lines, 0);
        // The excerpt was grepped: what it does not hold stays absent.
        let got = read(&s, &[LmcacheHitTokens, LmcachePromptTokens, LmcacheRequestedTokens]);
        assert_eq!(got, [Some(1529.0), Some(36089.0), None]);
    }

    #[test]
    fn lmcache_tensor_parallel_workers_are_not_added_up() {
        let s = fixture("lmcache-tp2-constructed.txt");
        let which = [LmcacheRequestedTokens, LmcacheHitTokens, LmcacheStoredTokens, LmcacheLookupTokens];
        assert_eq!(read(&s, &which), [Some(8192.0), Some(6144.0), Some(10240.0), Some(9000.0)]);
        assert_eq!(read(&s, &[LmcacheLookupHitTokens]), [Some(6144.0)]);
    }

    #[test]
    fn offload_both_generations() {
        let which = [OffloadStoredBytes, OffloadLoadedBytes, OffloadLoadSecs];
        // Two data-parallel engines stored: summed.
        let old = fixture("offload-legacy-constructed.txt");
        assert_eq!(read(&old, &which), [Some(49_545_216.0), Some(16_515_072.0), Some(0.003)]);
        assert!((old.counters[&OffloadStoreSecs] - 0.006).abs() < 1e-12);
        // The newer family wins over a legacy one beside it.
        let new = fixture("offload-split-constructed.txt");
        assert_eq!(read(&new, &which), [Some(49_545_216.0), Some(0.0), Some(0.0)]);
        assert_eq!(new.counters[&OffloadStoreSecs], 0.006);
    }

    #[test]
    fn mooncake_store_by_operation() {
        let s = fixture("mooncake-store-constructed.txt");
        // Only successful loads count as bytes loaded.
        let got = read(&s, &[MooncakeStoreSaveBytes, MooncakeStoreLoadBytes, MooncakeStoreFailedKeys]);
        assert_eq!(got, [Some(16_515_072.0), Some(8_257_536.0), Some(3.0)]);
    }

    #[test]
    fn a_selected_series_absent_is_absent() {
        let s = InstanceSample::from_text(
            "vllm:kv_offload_total_bytes_total{engine=\"0\",transfer_type=\"GPU_to_CPU\"} 5\n",
        );
        assert_eq!(read(&s, &[OffloadStoredBytes, OffloadLoadedBytes]), [Some(5.0), None]);
        let nan = InstanceSample::from_text("lmcache:num_hit_tokens_total{worker_id=\"0\"} NaN\n");
        assert_eq!(read(&nan, &[LmcacheHitTokens]), [None]);
    }
}
