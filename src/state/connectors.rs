//! Each KV connector's own figures, per instance, from its Prometheus
//! families (`metrics/connectors.rs`): what it moved, how long it took,
//! what failed. A family the instance does not serve stays absent (never a
//! zero), and the figures count from pdtop's start, like every total.

use serde::Serialize;

use super::instance::InstanceState;
use super::instance::Interval;
use super::link::XFER_FAMILIES;
use super::{AppState, EventKind};
use crate::metrics::connectors::FAILURES;
use crate::metrics::model::{Counter, Hist};

/// A connector that moves KV between instances (NIXL, Mooncake).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Transfers {
    pub transfers: f64,
    pub bytes: f64,
    pub xfer_time_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_transfers: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_notifications: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_recvs: Option<f64>,
    /// Requests whose KV the producer freed unread (counted on prefill).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_expired_reqs: Option<f64>,
}

/// MooncakeStoreConnector: bytes through the shared store.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Store {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_bytes: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub save_bytes: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_keys: Option<f64>,
}

/// OffloadingConnector: this instance's host-memory tier. Not KV moved
/// between instances: never counted as transferred or link bytes.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Offload {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stored_bytes: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loaded_bytes: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store_time_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_time_s: Option<f64>,
}

/// LMCache's own counters, all in tokens.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Lmcache {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_tokens: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hit_tokens: Option<f64>,
    /// Hit over requested tokens (retrieves); absent before any request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hit_ratio: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lookup_tokens: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lookup_hit_tokens: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lookup_hit_ratio: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stored_tokens: Option<f64>,
    /// Prompt tokens of the requests LMCache saw (newer versions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<f64>,
}

/// `check --json`'s `connector_metrics`: only the connectors that report.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ConnectorMetrics {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nixl: Option<Transfers>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mooncake: Option<Transfers>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mooncake_store: Option<Store>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offload: Option<Offload>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lmcache: Option<Lmcache>,
}

/// Totals over a set of instances, each present only where one of them
/// serves the family.
struct Totals<'a>(Vec<&'a InstanceState>);

impl Totals<'_> {
    fn has_counter(&self, c: Counter) -> bool {
        self.0.iter().any(|i| i.latest.as_ref().is_some_and(|s| s.counters.contains_key(&c)))
    }

    fn counter(&self, c: Counter) -> Option<f64> {
        self.has_counter(c).then(|| self.0.iter().filter_map(|i| i.total_counters.get(&c)).sum())
    }

    fn has_hist(&self, h: Hist) -> bool {
        self.0.iter().any(|i| i.latest.as_ref().is_some_and(|s| s.hists.contains_key(&h)))
    }

    /// (observations, sum) of a histogram since pdtop started.
    fn hist(&self, h: Hist) -> (f64, f64) {
        self.0
            .iter()
            .filter_map(|i| i.total_hists.get(&h))
            .fold((0.0, 0.0), |(n, s), h| (n + h.total(), s + h.sum))
    }

    fn transfers(&self, bytes: Hist, time: Hist, failures: [Option<Counter>; 4]) -> Option<Transfers> {
        if !self.has_hist(bytes) {
            return None;
        }
        let (n, b) = self.hist(bytes);
        let c = |c: Option<Counter>| c.and_then(|c| self.counter(c));
        Some(Transfers {
            transfers: n,
            bytes: b,
            xfer_time_s: self.hist(time).1,
            failed_transfers: c(failures[0]),
            failed_notifications: c(failures[1]),
            failed_recvs: c(failures[2]),
            kv_expired_reqs: c(failures[3]),
        })
    }
}

fn ratio(hit: Option<f64>, of: Option<f64>) -> Option<f64> {
    let (h, o) = (hit?, of?);
    (o > 0.0).then(|| (h / o * 1000.0).round() / 1000.0)
}

impl ConnectorMetrics {
    /// The figures of these instances together; `None` when none reports.
    pub fn of<'a>(instances: impl IntoIterator<Item = &'a InstanceState>) -> Option<ConnectorMetrics> {
        use Counter::*;
        let t = Totals(instances.into_iter().collect());
        let nixl = t.transfers(
            Hist::NixlBytes,
            Hist::NixlXferTime,
            [Some(NixlFailedTransfers), Some(NixlFailedNotifications), None, Some(NixlExpired)],
        );
        let mooncake = t.transfers(
            Hist::MooncakeBytes,
            Hist::MooncakeXferTime,
            [Some(MooncakeFailedTransfers), None, Some(MooncakeFailedRecvs), Some(MooncakeExpired)],
        );
        let store = Store {
            load_bytes: t.counter(MooncakeStoreLoadBytes),
            save_bytes: t.counter(MooncakeStoreSaveBytes),
            failed_keys: t.counter(MooncakeStoreFailedKeys),
        };
        let offload = Offload {
            stored_bytes: t.counter(OffloadStoredBytes),
            loaded_bytes: t.counter(OffloadLoadedBytes),
            store_time_s: t.counter(OffloadStoreSecs),
            load_time_s: t.counter(OffloadLoadSecs),
        };
        let (req, hit) = (t.counter(LmcacheRequestedTokens), t.counter(LmcacheHitTokens));
        let (look, look_hit) = (t.counter(LmcacheLookupTokens), t.counter(LmcacheLookupHitTokens));
        let lmcache = Lmcache {
            requested_tokens: req,
            hit_tokens: hit,
            hit_ratio: ratio(hit, req),
            lookup_tokens: look,
            lookup_hit_tokens: look_hit,
            lookup_hit_ratio: ratio(look_hit, look),
            stored_tokens: t.counter(LmcacheStoredTokens),
            prompt_tokens: t.counter(LmcachePromptTokens),
        };
        let m = ConnectorMetrics {
            nixl,
            mooncake,
            mooncake_store: Some(store).filter(|s| *s != Store::default()),
            offload: Some(offload).filter(|o| *o != Offload::default()),
            lmcache: Some(lmcache).filter(|l| *l != Lmcache::default()),
        };
        Some(m).filter(|m| *m != ConnectorMetrics::default())
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
                self.push_event(iv.t, EventKind::Connector(*kind), text);
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
        let mc = m.mooncake.unwrap();
        assert_eq!((mc.transfers, mc.bytes, mc.xfer_time_s), (1.0, 16_515_072.0, 0.012));
        assert_eq!(
            (mc.failed_transfers, mc.failed_recvs, mc.kv_expired_reqs),
            (Some(1.0), Some(0.0), Some(0.0))
        );
        assert_eq!(mc.failed_notifications, None);
        assert!(m.nixl.is_none() && m.offload.is_none() && m.lmcache.is_none() && m.mooncake_store.is_none());
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
        let mc = ConnectorMetrics::of([&st.instances[0]]).unwrap().mooncake.unwrap();
        assert_eq!((mc.transfers, mc.failed_transfers), (1.0, Some(1.0)));
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
        let off = ConnectorMetrics::of([&st.instances[1]]).unwrap().offload.unwrap();
        // engine 1's store and engine 0's load each grew by 16515072.
        assert_eq!((off.stored_bytes, off.loaded_bytes), (Some(16_515_072.0), Some(16_515_072.0)));
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
        let l = ConnectorMetrics::of([&st.instances[1]]).unwrap().lmcache.unwrap();
        assert_eq!((l.requested_tokens, l.hit_tokens, l.hit_ratio), (Some(8192.0), Some(6144.0), Some(0.75)));
        assert_eq!(l.lookup_hit_ratio, Some(0.683));
        assert_eq!(l.prompt_tokens, None);
    }
}
