//! Events from the proxy's log.
//!
//! The demo proxy logs only uvicorn access lines: no id, no clock. Those
//! are pinned, by arrival order within a short window, on a trace the
//! instances already opened (annotation only: they never change a
//! verdict), or open a proxy-only trace that can only end `Unknown` (or
//! `Error`). The JSON-lines format carries `request_id` and `ts` and joins
//! by id.

use super::correlator::Correlator;
use super::instance_events::hop_of;
use super::model::{Confidence, Hop, Outcome};
use crate::feed::LogOrigin;
use crate::logs::proxy::{ProxyEvent, RequestEvent, Stage};

/// How far back (in ring entries) an id-less access line looks for its trace.
const ATTACH_SCAN: usize = 256;

impl Correlator {
    pub(super) fn on_proxy(&mut self, ev: ProxyEvent, at: f64) -> bool {
        match ev {
            ProxyEvent::Startup { .. } => {
                self.stat(LogOrigin::Proxy).starts += 1;
                true
            }
            ProxyEvent::Shutdown => {
                self.stat(LogOrigin::Proxy).shutdowns += 1;
                true
            }
            ProxyEvent::Access(a) => {
                if a.method != "POST" || !a.path.starts_with("/v1/") {
                    return false;
                }
                if (200..300).contains(&a.status) {
                    self.proxy_ok_access(a.status, at);
                } else {
                    self.stat(LogOrigin::Proxy).unattributed_errors += 1;
                    self.error_trace(LogOrigin::Proxy, format!("proxy answered HTTP {}", a.status), at, at);
                }
                true
            }
            ProxyEvent::Error { status, text, .. } => {
                self.stat(LogOrigin::Proxy).unattributed_errors += 1;
                let text = match status {
                    Some(s) => format!("proxy error (HTTP {s}): {text}"),
                    None => format!("proxy error: {text}"),
                };
                self.error_trace(LogOrigin::Proxy, text, at, at);
                true
            }
            ProxyEvent::Request(r) => {
                self.proxy_request(r, at);
                true
            }
            ProxyEvent::Other => false,
        }
    }

    /// An id-less `200` from the proxy: the oldest recent trace with no proxy
    /// phase yet, else a proxy-only trace.
    fn proxy_ok_access(&mut self, status: u16, at: f64) {
        let win = self.opts.proxy_window_s;
        let serials = self.store.serials();
        let from = serials.end.saturating_sub(ATTACH_SCAN as u64).max(serials.start);
        let target = (from..serials.end).find(|s| {
            self.store.get(*s).is_some_and(|e| {
                !e.track.proxy_seen
                    && (e.trace.prefill.is_some() || e.trace.decode.is_some())
                    && e.trace.first_seen >= at - win
                    && e.trace.first_seen <= at + 1.0
            })
        });
        let (s, detail) = match target {
            Some(s) => (s, format!("HTTP {status} (matched to this request by arrival order)")),
            None => {
                let id = self.synthetic_id("proxy");
                (self.new_trace(id, at), format!("HTTP {status}"))
            }
        };
        self.with_phase(s, Hop::Proxy, LogOrigin::Proxy, None, at, |p| p.detail = detail);
        if let Some(e) = self.store.get_mut(s) {
            e.track.proxy_seen = true;
        }
    }

    /// A JSON-lines step: joined by `request_id`, which is the base id.
    fn proxy_request(&mut self, r: RequestEvent, at: f64) {
        let t = r.ts.filter(|x| x.is_finite()).unwrap_or(at);
        let id = r.request_id.trim();
        if id.is_empty() {
            return;
        }
        let s = match self.store.latest(id) {
            // A decided trace with a finished proxy phase belongs to an
            // earlier request with the same id (a looping client): start anew.
            Some(s)
                if !(r.stage == Stage::Received
                    && self.store.get(s).is_some_and(|e| {
                        e.trace.outcome != Outcome::Pending
                            && e.trace.phase(Hop::Proxy).is_some_and(|p| p.end.is_some())
                    })) =>
            {
                s
            }
            _ => self.new_trace(id.to_string(), at),
        };
        let stage = format!("{:?}", r.stage);
        self.with_phase(s, Hop::Proxy, LogOrigin::Proxy, None, t, |p| {
            p.detail = match r.status {
                Some(st) => format!("{stage} (HTTP {st})"),
                None => stage.clone(),
            };
            if r.stage == Stage::DecodeDone {
                p.end = Some(t);
            }
        });
        let mut last_stage = None;
        if let Some(e) = self.store.get_mut(s) {
            e.track.proxy_seen = true;
            if r.stage != Stage::Error {
                e.track.proxy_stage = Some(r.stage);
            }
            last_stage = e.track.proxy_stage;
        }
        let bad_status = r.status.is_some_and(|st| !(200..300).contains(&st));
        if r.stage == Stage::Error || bad_status {
            // Name the hop the proxy was talking to when it failed.
            let stage = if r.stage == Stage::Error { last_stage } else { Some(r.stage) };
            let hop = match stage {
                Some(Stage::PrefillStart | Stage::PrefillDone) => Hop::Producer,
                Some(Stage::DecodeStart | Stage::DecodeFirstByte | Stage::DecodeDone) => Hop::Consumer,
                _ => self.store.get(s).map_or(Hop::Proxy, |e| {
                    if e.trace.decode.is_some() {
                        Hop::Consumer
                    } else if e.trace.prefill.is_some() {
                        Hop::Producer
                    } else {
                        Hop::Proxy
                    }
                }),
            };
            let text = match (r.error.as_deref(), r.status) {
                (Some(e), Some(st)) => format!("HTTP {st}: {e}"),
                (Some(e), None) => e.to_string(),
                (None, Some(st)) => format!("HTTP {st}"),
                (None, None) => "failed".to_string(),
            };
            let src = match hop {
                Hop::Producer => self
                    .store
                    .get(s)
                    .and_then(|e| e.trace.prefill)
                    .map_or(LogOrigin::Proxy, LogOrigin::Prefill),
                Hop::Consumer => {
                    self.store.get(s).and_then(|e| e.trace.decode).map_or(LogOrigin::Proxy, LogOrigin::Decode)
                }
                _ => LogOrigin::Proxy,
            };
            let text = if hop_of(src) == hop { format!("proxy reports {text}") } else { text };
            self.fail(s, hop, src, text, t, at);
            if let Some(e) = self.store.get_mut(s) {
                e.trace.confidence = Confidence::Sure;
            }
        }
    }
}
