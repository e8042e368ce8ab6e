//! Router and sidecar lines in the traces: the proxy hop of a request
//! (when, the status of each leg, the failure), as the proxy's JSON lines
//! give it (`proxy_events.rs`).
//!
//! Which name joins a router line to the instances' lines:
//! - vllm-router's PD mode sends each instance `X-Request-Id:
//!   ___prefill_addr_<p>___decode_addr_<d>_<uuid hex>`, not the id of its
//!   own span, and prints it once (`Generated vLLM request ID: ...`, in
//!   that span). vLLM then logs `cmpl-<forwarded>-0`, so the trace is filed
//!   under the forwarded id and later lines of the span's id land on it.
//! - Without that line, the span's id itself: a router that forwards the
//!   client's `X-Request-Id`, which vLLM logs as `cmpl-<id>-0`.
//!
//! llm-d's routing sidecar prints no request id: its lines are events
//! only; `missing 'remote_block_ids' field in prefiller response` is a
//! connector failure (the decode has nothing to pull), an event too.

use crate::feed::LogOrigin;
use crate::logs::proxy::{RequestEvent, Stage};
use crate::logs::signal::{Signal, SignalKind as K, Val};
use crate::traces::correlator::Correlator;
use crate::traces::model::Hop;

/// An id-less backend error and the `request failed` line with the id come
/// this close (the same failure, printed by two layers).
const LEG_WINDOW_S: f64 = 2.0;

/// Kinds that only a router or the sidecar prints.
pub(crate) fn is_router_kind(k: K) -> bool {
    matches!(
        k,
        K::RouterPrefillResponse
            | K::RouterDecodeResponse
            | K::RouterBackendError
            | K::RouterRequestFailed
            | K::RouterWorkers
            | K::RouterRoute
            | K::RouterForwardedId
            | K::RouterBookkeeping
            | K::RouterPrefillErrorBody
            | K::RouterKvParamsMissing
            | K::SidecarPrefillSent
            | K::SidecarMissingKvField
    )
}

impl Correlator {
    /// A router line's step on its request's trace (from any log).
    pub(crate) fn on_router_signal(&mut self, sig: &Signal, t: f64, at: f64) {
        let rid = sig.ids.first().map(String::as_str);
        let status = sig.get_num("status").filter(|s| (100.0..600.0).contains(s)).map(|s| s as u16);
        let leg = match sig.get("leg") {
            Some(Val::Text(l)) => Some(l.clone()),
            _ => None,
        };
        // A failure is filed at the leg it names (a step carrying an error
        // fails there, `proxy_events.rs`), else as the request's own.
        let failed_at = |leg: Option<&str>| leg.map_or(Stage::Error, leg_stage);
        let (key, stage, error, status) = match (sig.kind, rid) {
            (K::RouterForwardedId, _) => {
                let Some(Val::Text(f)) = sig.get("forwarded") else { return };
                if let Some(r) = rid {
                    self.router.alias(r, f);
                }
                (f.clone(), Stage::Received, None, status)
            }
            (K::RouterPrefillResponse, Some(r)) => (self.router.key(r), Stage::PrefillDone, None, status),
            (K::RouterDecodeResponse, Some(r)) => (self.router.key(r), Stage::DecodeFirstByte, None, status),
            (K::RouterBookkeeping, Some(r)) => {
                // A line of the router's that names the request: its proxy hop.
                let what = match sig.get("what") {
                    Some(Val::Text(w)) => w.clone(),
                    _ => "track".to_string(),
                };
                let key = self.router.key(r);
                let s = match self.store.latest(&key).or_else(|| self.find(&key)) {
                    Some(s) => s,
                    None => self.new_trace(key, at),
                };
                self.with_phase(s, Hop::Proxy, LogOrigin::Proxy, None, t, |p| {
                    let note = format!("the router failed to {what} it (its own bookkeeping)");
                    if p.detail.is_empty() {
                        p.detail = note;
                    }
                });
                if let Some(e) = self.store.get_mut(s) {
                    e.track.proxy_seen = true;
                }
                return;
            }
            (K::RouterBackendError, None) => {
                self.router.last_leg = leg.map(|l| (l, status, t));
                return;
            }
            // The prefill answered an error and the router went on to the
            // decode (direct-URL mode): a failed prefill hidden from the
            // client, on that request.
            (K::RouterPrefillErrorBody, Some(r)) => {
                let what = match sig.get("error") {
                    Some(Val::Text(e)) => format!("prefill answered {e}; the router went on to the decode"),
                    _ => "prefill answered an error; the router went on to the decode".to_string(),
                };
                (self.router.key(r), leg_stage("prefill"), Some(what), status)
            }
            (K::RouterBackendError, Some(r)) => {
                // No leg printed: a failure of the request, no hop guessed.
                let text = format!("{} server returned error status", leg.as_deref().unwrap_or("a backend"));
                (self.router.key(r), failed_at(leg.as_deref()), Some(text), status)
            }
            (K::RouterRequestFailed, None) => {
                if let Some(Val::Text(why)) = sig.get("error") {
                    let why = why.clone();
                    self.on_router_refused(sig, &why, leg.as_deref(), t, at);
                }
                return;
            }
            (K::RouterRequestFailed, Some(r)) => {
                // The id-less backend error just before says which leg
                // failed, and with what status. None is made up.
                let recent =
                    self.router.last_leg.take().filter(|(_, _, when)| (t - when).abs() <= LEG_WINDOW_S);
                let text = match &recent {
                    Some((l, _, _)) => format!("{l} server returned error status; request failed"),
                    None => "request failed".to_string(),
                };
                let leg_status = recent.as_ref().and_then(|(_, st, _)| *st);
                (
                    self.router.key(r),
                    failed_at(recent.as_ref().map(|(l, _, _)| l.as_str())),
                    Some(text),
                    status.or(leg_status),
                )
            }
            _ => return,
        };
        if key.is_empty() {
            return;
        }
        let step = RequestEvent {
            request_id: key.clone(),
            stage,
            ts: Some(t),
            status,
            instance: None,
            elapsed_s: None,
            error,
            prompt_tokens: None,
        };
        self.proxy_request(step, at);
        // `latency=` is the whole request as the router served it.
        if let Some(lat) = sig.get_num("latency_s").filter(|l| *l >= 0.0)
            && let Some(s) = self.store.latest(&key)
            && let Some(e) = self.store.get_mut(s)
            && let Some(p) = e.trace.phase_mut(Hop::Proxy)
        {
            p.start = p.start.min(t - lat);
            p.end = Some(t);
        }
    }
}

fn leg_stage(leg: &str) -> Stage {
    if leg == "prefill" { Stage::PrefillDone } else { Stage::DecodeFirstByte }
}

impl Correlator {
    /// vLLM-router failed a request itself (`Transparent proxy request
    /// failed: prefill=P, decode=D, error=E`, answered 500) and names no id:
    /// a request of its own, an error at the hop the error names, at the
    /// time the router logged it. A network error never reached vLLM, so
    /// no instance line is its; an error status came from an instance that
    /// logged the request, so only the event is kept.
    fn on_router_refused(&mut self, sig: &Signal, why: &str, leg: Option<&str>, t: f64, at: f64) {
        let reached = !(why.contains("Network error") || why.contains("error sending request"));
        if reached {
            self.stat(LogOrigin::Proxy).unattributed_errors += 1;
            return;
        }
        let hop = match leg {
            Some("prefill") => Hop::Producer,
            Some("decode") => Hop::Consumer,
            _ => Hop::Proxy,
        };
        let url = |k: &str| match sig.get(k) {
            Some(Val::Text(u)) => u.clone(),
            _ => "?".to_string(),
        };
        let id = self.synthetic_id("router-error");
        let s = self.new_trace(id, at);
        if let Some(e) = self.store.get_mut(s) {
            e.track.proxy_seen = true;
        }
        let (p, d) = (url("prefill"), url("decode"));
        self.with_phase(s, Hop::Proxy, LogOrigin::Proxy, None, t, |ph| {
            ph.detail = format!("vllm-router chose prefill {p}, decode {d}; answered 500");
            ph.end = Some(t);
        });
        let why: String = why.chars().take(240).collect();
        let what = format!("the router failed it before any instance saw it: {why}");
        self.fail(s, hop, LogOrigin::Proxy, what, t, at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traces::model::{CorrelatorOptions, Outcome};

    const SPAN: &str = r#"http_request{method=POST uri=/v1/completions version=HTTP/1.1 request_id="cmpl-Ed4lG6IlaUQRpaugWzpnIB6a"}"#;
    const TARGET: &str =
        "vllm_router_rs::routers::http::vllm_pd_router: src/routers/http/vllm_pd_router.rs:681:";

    #[test]
    fn forwarded_id_names_the_trace_and_a_decode_failure_fails_its_hop() {
        let mut c = Correlator::new(CorrelatorOptions::default());
        let fwd =
            "___prefill_addr_10.0.0.1:21001___decode_addr_10.0.0.2:22001_5f0c0e1b9a2d4c8e9f1a2b3c4d5e6f70";
        for (k, l) in [
            format!("2026-01-15 02:30:16 DEBUG {SPAN}: {TARGET} Generated vLLM request ID: {fwd}"),
            format!("2026-01-15 02:30:17 DEBUG {SPAN}: {TARGET} 📥 Prefill response status: 200 OK"),
            format!(
                "2026-01-15 02:30:18 ERROR {SPAN}: {TARGET} Decode server returned error status decode_url=http://10.0.0.2:8200 status=500 Internal Server Error"
            ),
        ]
        .iter()
        .enumerate()
        {
            // Each line at its own stamp (`state::timeline` dates them).
            c.on_line(LogOrigin::Proxy, l, 1_768_444_216.0 + k as f64);
        }
        let t = c.get(fwd).expect("filed under the forwarded id");
        let p = t.phase(Hop::Proxy).expect("proxy hop");
        assert_eq!(p.start, 1_768_444_216.0, "{p:?}");
        assert_eq!(t.outcome, Outcome::Error, "{t:?}");
        let err = t.evidence();
        assert!(err.contains("decode server returned error status") && err.contains("500"), "{err}");
        assert!(c.get("cmpl-Ed4lG6IlaUQRpaugWzpnIB6a").is_none());
    }

    /// The leg from an id-less backend error, then `request failed` with no
    /// status: the prefill hop failed, and no HTTP status is made up.
    #[test]
    fn a_failure_without_a_status_fails_the_named_leg_and_invents_none() {
        let mut c = Correlator::new(CorrelatorOptions::default());
        let fwd =
            "___prefill_addr_10.0.0.1:21001___decode_addr_10.0.0.2:22001_0a1b2c3d4e5f60718293a4b5c6d7e8f9";
        for l in [
            format!("2026-01-15 02:30:16 DEBUG {SPAN}: {TARGET} Generated vLLM request ID: {fwd}"),
            format!(
                "2026-01-15 02:30:17 ERROR {TARGET} Prefill server returned error status prefill_url=http://10.0.0.1:8100"
            ),
            format!("2026-01-15 02:30:17 ERROR {SPAN}: {TARGET} request failed"),
        ] {
            c.on_line(LogOrigin::Proxy, &l, 1_768_444_300.0);
        }
        let t = c.get(fwd).expect("filed under the forwarded id");
        assert_eq!(t.outcome, Outcome::Error, "{t:?}");
        assert_eq!(t.error_at, Some(Hop::Producer), "{t:?}");
        assert!(t.evidence().contains("prefill server returned error status"), "{}", t.evidence());
        assert!(!t.evidence().contains("500"), "no status was printed: {}", t.evidence());
    }
}
