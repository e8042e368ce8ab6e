//! What the connector, LMCache, Mooncake and scheduler lines add to the
//! traces: evidence on a request where the line names one, and an event
//! (kind, instance, time) for a failure whether it names one or not.

use crate::feed::LogOrigin;
use crate::logs::signal::{Signal, SignalKind as K, Val};
use crate::traces::correlator::Correlator;
use crate::traces::model::LogEvent;

impl Correlator {
    /// A proxy-log line that is a router's or the sidecar's, read before
    /// the proxy parser (which would take a router ERROR for an anonymous
    /// failure). `None`: not such a line.
    pub(crate) fn on_router_line(&mut self, line: &str, at: f64) -> Option<bool> {
        let l = crate::logs::vllm::parse_vllm_line(line)?;
        let sig = l.signal.as_ref().filter(|s| crate::traces::proxy::router::is_router_kind(s.kind))?;
        // `at` is the line's own time (`state::timeline` dated it by its stamp).
        Some(self.on_signal(LogOrigin::Proxy, sig, at, at))
    }

    /// Returns whether the signal meant anything to the correlator.
    pub(crate) fn on_signal(&mut self, src: LogOrigin, sig: &Signal, t: f64, at: f64) -> bool {
        // LMCache's receiver retries every 10 ms: one event per 10 s of it.
        let repeat = sig.kind == K::LmcachePdAllocRetry
            && self
                .log_events
                .iter()
                .rev()
                .take(8)
                .any(|e| e.kind == sig.kind && e.source == src && t - e.t < 10.0);
        if sig.kind.is_failure() && !repeat {
            self.push_log_event(src, sig.kind, summary(sig), t);
        }
        match sig.kind {
            // A failure that names its requests: evidence on each (`named.rs`).
            K::TransferFailed
            | K::HandshakeFailed
            | K::KvLoadFailed
            | K::InvalidKvRead
            | K::RequestKeyError => {
                let lmcache = sig.get("connector") == Some(&Val::Text("LMCache".into()));
                if let (LogOrigin::Decode(i), true, true) = (src, sig.ids.is_empty(), lmcache) {
                    self.on_lmcache_short_unnamed(i, t, at);
                }
                self.on_named_failure(src, sig, t, at);
            }
            K::KvLoadRecovered => self.on_load_recovered(src, sig, t),
            // Mooncake's producer-side expiry (NIXL's is `VllmEvent::KvExpired`).
            K::ExpiredKv => {
                let n = sig.get_num("retrieved_by").map(|n| n as u32);
                for id in &sig.ids {
                    self.on_expired(src, id, n, t, at);
                }
            }
            // LMCache on decode: its own word on whether the KV was found.
            K::LmcacheHit => {
                if let LogOrigin::Decode(i) = src {
                    return self.on_lmcache_lookup(i, sig, t, at);
                }
                return false;
            }
            K::LmcacheStoring | K::LmcacheScheduledLoad => return self.on_lmcache_progress(src, sig, t),
            k if crate::traces::proxy::router::is_router_kind(k) => self.on_router_signal(sig, t, at),
            K::WaitingRemoteKvs | K::NixlStartLoadKv => return self.on_remote_wait(src, sig, t, at),
            // The prefill's connector finished it: it was prefilled (`named.rs`).
            K::ConnectorRequestFinished if matches!(src, LogOrigin::Prefill(_)) => {
                return self.on_prefill_finished(src, sig, t, at);
            }
            K::P2pTensorReceived => return self.on_tensor_received(src, sig, t, at),
            K::TransferStarted => return self.on_transfer_started(src, sig, t, at),
            K::KvTransferFinished => return self.on_transfer_finished(src, sig, t, at),
            // The connector is done with the request on decode: it went on.
            K::ConnectorRequestFinished if matches!(src, LogOrigin::Decode(_)) => {
                for id in &sig.ids {
                    if let Some(s) = self.find(id) {
                        self.end_wait(s, t);
                    }
                }
            }
            // The instance logged the response's end (`--enable-log-outputs`).
            K::ResponseDone => return self.on_response_done(src, sig, t),
            K::ConnectorCreated => {
                if let Some(Val::Text(c)) = sig.get("connector") {
                    let c = c.clone();
                    self.stat(src).connector.get_or_insert(c);
                }
            }
            _ => return sig.kind.is_failure(),
        }
        true
    }

    /// Lines of a log that pdtop does not know (no event, no signal).
    pub fn unknown_lines(&self, src: LogOrigin) -> u64 {
        self.stats.get(&src).map_or(0, |s| s.unknown)
    }

    /// Lines of a log known to carry nothing (`logs::known`).
    pub fn noise_lines(&self, src: LogOrigin) -> u64 {
        self.stats.get(&src).map_or(0, |s| s.noise)
    }

    /// Failures read since the last call, oldest first.
    pub fn drain_log_events(&mut self) -> Vec<LogEvent> {
        self.log_events.drain(..).collect()
    }
}

/// `transfer_failed cmpl-1 (connector=NixlConnector, state=ERR)`.
pub fn summary(sig: &Signal) -> String {
    let mut s = sig.kind.as_str().to_string();
    for id in sig.ids.iter().take(3) {
        s.push(' ');
        s.push_str(id);
    }
    let parts: Vec<String> = sig
        .fields
        .iter()
        .take(6)
        .map(|(k, v)| match v {
            Val::Num(n) => format!("{k}={n}"),
            Val::Bool(b) => format!("{k}={b}"),
            Val::Text(t) => format!("{k}={t}"),
        })
        .collect();
    if !parts.is_empty() {
        s.push_str(&format!(" ({})", parts.join(", ")));
    }
    s
}
