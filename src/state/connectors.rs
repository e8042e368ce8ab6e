//! Each KV connector's own figures, per instance, from its Prometheus
//! families (`metrics/connectors.rs`): what it moved, how long it took,
//! what failed. A family the instance does not serve stays absent (never a
//! zero), and the figures count from pdtop's start, like every total.

use std::collections::BTreeMap;

use serde::Serialize;

use super::instance::{InstanceState, Interval};
use super::link::XFER_FAMILIES;
use super::{AppState, EventKind};
use crate::metrics::connectors::FAILURES;
use crate::metrics::model::{Counter, Hist};

/// Where a figure comes from: a counter, or a histogram's observations or sum.
#[derive(Clone, Copy)]
enum Of {
    C(Counter),
    Count(Hist),
    Sum(Hist),
}

use Of::{C, Count, Sum};

/// `connector_metrics`: (connector, figure, source). Units are in the
/// names: bytes, seconds (`_s`), tokens, or a count. The offload figures
/// are this instance's host-memory tier, never KV moved between instances.
const FIGURES: &[(&str, &str, Of)] = &[
    ("nixl", "transfers", Count(Hist::NixlBytes)),
    ("nixl", "bytes", Sum(Hist::NixlBytes)),
    ("nixl", "xfer_time_s", Sum(Hist::NixlXferTime)),
    ("nixl", "failed_transfers", C(Counter::NixlFailedTransfers)),
    ("nixl", "failed_notifications", C(Counter::NixlFailedNotifications)),
    ("nixl", "kv_expired_reqs", C(Counter::NixlExpired)),
    ("mooncake", "transfers", Count(Hist::MooncakeBytes)),
    ("mooncake", "bytes", Sum(Hist::MooncakeBytes)),
    ("mooncake", "xfer_time_s", Sum(Hist::MooncakeXferTime)),
    ("mooncake", "failed_transfers", C(Counter::MooncakeFailedTransfers)),
    ("mooncake", "failed_recvs", C(Counter::MooncakeFailedRecvs)),
    ("mooncake", "kv_expired_reqs", C(Counter::MooncakeExpired)),
    ("mooncake_store", "load_bytes", C(Counter::MooncakeStoreLoadBytes)),
    ("mooncake_store", "save_bytes", C(Counter::MooncakeStoreSaveBytes)),
    ("mooncake_store", "failed_keys", C(Counter::MooncakeStoreFailedKeys)),
    ("offload", "stored_bytes", C(Counter::OffloadStoredBytes)),
    ("offload", "loaded_bytes", C(Counter::OffloadLoadedBytes)),
    ("offload", "store_time_s", C(Counter::OffloadStoreSecs)),
    ("offload", "load_time_s", C(Counter::OffloadLoadSecs)),
    ("lmcache", "requested_tokens", C(Counter::LmcacheRequestedTokens)),
    ("lmcache", "hit_tokens", C(Counter::LmcacheHitTokens)),
    ("lmcache", "lookup_tokens", C(Counter::LmcacheLookupTokens)),
    ("lmcache", "lookup_hit_tokens", C(Counter::LmcacheLookupHitTokens)),
    ("lmcache", "stored_tokens", C(Counter::LmcacheStoredTokens)),
    ("lmcache", "prompt_tokens", C(Counter::LmcachePromptTokens)),
];

/// (connector, ratio, hits, of what): only where both are there and the
/// second is not zero.
const RATIOS: &[(&str, &str, &str, &str)] = &[
    ("lmcache", "hit_ratio", "hit_tokens", "requested_tokens"),
    ("lmcache", "lookup_hit_ratio", "lookup_hit_tokens", "lookup_tokens"),
];

/// Per connector, its figures since pdtop started; a connector or figure
/// whose family the instances do not serve is left out.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct ConnectorMetrics(pub BTreeMap<&'static str, BTreeMap<&'static str, f64>>);

impl ConnectorMetrics {
    /// The figures of these instances together; `None` when none reports.
    pub fn of<'a>(instances: impl IntoIterator<Item = &'a InstanceState>) -> Option<ConnectorMetrics> {
        let all: Vec<&InstanceState> = instances.into_iter().collect();
        let served = |f: &dyn Fn(&crate::metrics::model::InstanceSample) -> bool| {
            all.iter().any(|i| i.latest.as_ref().is_some_and(f))
        };
        let mut out = ConnectorMetrics::default();
        for (connector, figure, of) in FIGURES {
            let value = match *of {
                C(c) if served(&|s| s.counters.contains_key(&c)) => {
                    all.iter().filter_map(|i| i.total_counters.get(&c)).sum()
                }
                Count(h) | Sum(h) if served(&|s| s.hists.contains_key(&h)) => {
                    let hists = all.iter().filter_map(|i| i.total_hists.get(&h));
                    hists.map(|h| if matches!(of, Count(_)) { h.total() } else { h.sum }).sum()
                }
                _ => continue,
            };
            out.0.entry(connector).or_default().insert(figure, value);
        }
        for (connector, ratio, hits, of) in RATIOS {
            if let (Some(h), Some(n)) = (out.get(connector, hits), out.get(connector, of))
                && n > 0.0
            {
                out.0.entry(connector).or_default().insert(ratio, (h / n * 1000.0).round() / 1000.0);
            }
        }
        (!out.0.is_empty()).then_some(out)
    }

    pub fn get(&self, connector: &str, figure: &str) -> Option<f64> {
        self.0.get(connector)?.get(figure).copied()
    }
}

impl AppState {
    /// A scrape's interval, for the connectors: the byte count that feeds
    /// the ledger (read on the side that records it), and an event for
    /// every failure counter that rose, whether or not a log said so.
    pub(super) fn on_connector_interval(&mut self, idx: usize, iv: &Interval) {
        let Some(inst) = self.instances.get(idx) else { return };
        let (role, display) = (inst.endpoint.role, inst.endpoint.display.clone());
        for family in XFER_FAMILIES.iter().filter(|f| f.role == role) {
            if let Some(h) = iv.hists.get(&family.bytes) {
                self.link.on_xfer(*family, iv.t, h.sum, h.total());
            }
        }
        for (counter, kind, text) in FAILURES {
            let n = iv.counter(*counter);
            if n > 0.0 {
                let after = if iv.after_restart { " since its restart" } else { "" };
                let text = format!("{display}: {n:.0} {text}{after} (its /metrics counter rose)");
                self.push_event(iv.t, EventKind::Connector(kind), text);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feed::{Endpoint, Msg, Role};

    fn body(name: &str) -> String {
        let path = format!("{}/tests/fixtures/connector-metrics/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(path).unwrap()
    }

    fn pair() -> AppState {
        AppState::new(
            vec![
                Endpoint::parse(Role::Prefill, "127.0.0.1:8100").unwrap(),
                Endpoint::parse(Role::Decode, "127.0.0.1:8200").unwrap(),
            ],
            60.0,
        )
    }

    fn scrape(st: &mut AppState, instance: usize, at: f64, name: &str) {
        st.apply(Msg::Scrape { instance, at, body: body(name) });
    }

    fn kinds(st: &AppState) -> Vec<&'static str> {
        st.events.iter().map(|e| e.kind.name()).collect()
    }

    #[test]
    fn mooncake_bytes_feed_the_ledger_from_the_prefill_and_failures_are_events() {
        let mut st = pair();
        scrape(&mut st, 0, 100.0, "mooncake-prefill-a.txt");
        scrape(&mut st, 1, 100.0, "mooncake-decode-a.txt");
        assert!(st.link.xfer.points.is_empty());
        assert!(st.events.is_empty(), "a first scrape is a baseline: {:?}", st.events);
        scrape(&mut st, 0, 101.0, "mooncake-prefill-b.txt");
        scrape(&mut st, 1, 101.0, "mooncake-decode-b.txt");
        assert_eq!(st.link.xfer_family, Some(super::super::link::MOONCAKE));
        assert_eq!(st.link.xfer.total_bytes, 16_515_072.0);
        assert_eq!(st.link.observed_since(0.0), Some(("mooncake_bytes_transferred", 16_515_072.0)));
        assert_eq!(kinds(&st), vec!["mooncake_failed_transfers", "mooncake_failed_recvs"]);
        assert!(
            st.events[0].text.starts_with("127.0.0.1:8100: 1 Mooncake transfer(s) failed"),
            "{:?}",
            st.events
        );
        assert!(st.events[1].text.starts_with("127.0.0.1:8200: 1 Mooncake receive(s) failed"));
        let m = ConnectorMetrics::of([&st.instances[0]]).unwrap();
        let mc = |f| m.get("mooncake", f);
        assert_eq!(
            (mc("transfers"), mc("bytes"), mc("xfer_time_s")),
            (Some(1.0), Some(16_515_072.0), Some(0.012))
        );
        assert_eq!(
            (mc("failed_transfers"), mc("failed_recvs"), mc("kv_expired_reqs")),
            (Some(1.0), Some(0.0), Some(0.0))
        );
        assert_eq!(mc("failed_notifications"), None);
        assert_eq!(m.0.keys().collect::<Vec<_>>(), vec![&"mooncake"]);
    }

    #[test]
    fn a_counter_reset_is_a_restart_not_a_negative_rate() {
        let mut st = pair();
        scrape(&mut st, 0, 100.0, "mooncake-prefill-b.txt");
        scrape(&mut st, 0, 101.0, "mooncake-prefill-a.txt");
        assert_eq!(st.instances[0].health.restarts, 1);
        assert_eq!(kinds(&st), vec!["restart"]);
        assert!(st.link.xfer.points.iter().all(|p| p.bytes >= 0.0 && p.count >= 0.0));
        assert_eq!(st.link.xfer.total_bytes, 0.0);
        // After the restart the counters rise again from zero: counted once.
        scrape(&mut st, 0, 102.0, "mooncake-prefill-b.txt");
        assert_eq!(st.link.xfer.total_bytes, 16_515_072.0);
        assert_eq!(kinds(&st), vec!["restart", "mooncake_failed_transfers"]);
        let m = ConnectorMetrics::of([&st.instances[0]]).unwrap();
        assert_eq!(
            (m.get("mooncake", "transfers"), m.get("mooncake", "failed_transfers")),
            (Some(1.0), Some(1.0))
        );
    }

    #[test]
    fn offload_is_a_local_tier_never_link_bytes() {
        let mut st = pair();
        let old = body("offload-legacy-constructed.txt");
        st.apply(Msg::Scrape { instance: 1, at: 100.0, body: old.clone() });
        let more = old.replace("1.6515072e+07", "3.3030144e+07");
        st.apply(Msg::Scrape { instance: 1, at: 101.0, body: more });
        assert!(st.link.xfer.points.is_empty());
        assert_eq!(st.link.observed_since(0.0), None);
        let m = ConnectorMetrics::of([&st.instances[1]]).unwrap();
        // engine 1's store and engine 0's load each grew by 16515072.
        assert_eq!(m.get("offload", "stored_bytes"), Some(16_515_072.0));
        assert_eq!(m.get("offload", "loaded_bytes"), Some(16_515_072.0));
        assert!(ConnectorMetrics::of([&st.instances[0]]).is_none());
    }

    #[test]
    fn lmcache_hit_ratio_in_tokens() {
        let mut st = pair();
        let b = body("lmcache-tp2-constructed.txt");
        let zero = b
            .lines()
            .map(|l| {
                if l.starts_with('#') {
                    l.to_string()
                } else {
                    format!("{} 0.0", l.rsplit_once(' ').unwrap().0)
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        st.apply(Msg::Scrape { instance: 1, at: 100.0, body: zero });
        st.apply(Msg::Scrape { instance: 1, at: 101.0, body: b });
        let m = ConnectorMetrics::of([&st.instances[1]]).unwrap();
        let l = |f| m.get("lmcache", f);
        assert_eq!(
            (l("requested_tokens"), l("hit_tokens"), l("hit_ratio")),
            (Some(8192.0), Some(6144.0), Some(0.75))
        );
        assert_eq!(l("lookup_hit_ratio"), Some(0.683));
        assert_eq!(l("prompt_tokens"), None);
    }
}
