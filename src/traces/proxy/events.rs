//! Events from the proxy's log.
//!
//! The demo proxy logs only uvicorn access lines: no id, no clock. Those
//! are pinned, by arrival order within a short window, on a trace the
//! instances already opened, or open a proxy-only trace that can only end
//! `Unknown` (or `Error`). Pinned on a prefilled request, an access line is
//! what proves the proxy's flow (`flow.rs`). Its failures print before the
//! `200 OK` that hides them: `Error occurred in disagg proxy server`, the
//! exception tuple, `ClientError occurred: Cannot connect to host ...`; the
//! access line that follows is that failed request's. The JSON-lines
//! format carries `request_id` and `ts` and joins by id.

use crate::feed::LogOrigin;
use crate::logs::proxy::{ProxyErrorKind, ProxyEvent, RequestEvent, Stage};
use crate::traces::correlator::{Correlator, LineTime};
use crate::traces::evidence::{FactKind, Failure};
use crate::traces::instance::events::hop_of;
use crate::traces::model::{Confidence, Hop, Outcome};

/// Lines of one proxy failure arrive within this long of each other.
const ERROR_BURST_S: f64 = 1.0;
/// The access line that ends a failed request comes within this long.
const ERROR_ACCESS_S: f64 = 2.0;

/// How far back (in ring entries) an id-less access line looks for its trace.
const ATTACH_SCAN: usize = 256;

impl Correlator {
    pub(crate) fn on_proxy(&mut self, ev: ProxyEvent, at: f64) -> bool {
        // A traceback's lines follow its header with nothing between.
        let header = self.flow.asgi_header.take();
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
                // The failed request's own answer follows its failure: a
                // failing status, or vLLM's demo proxy's 200 (it answers
                // success for a failure). A 2xx after an exception raised
                // mid-stream (uvicorn's `Exception in ASGI application`)
                // is another request's: that stream's answer began before.
                let pending = self.flow.error.take();
                let answers = |ok: bool| !(200..300).contains(&a.status) || ok;
                // Lines no stamp dates are in file order, whatever their read time.
                let by_order = self.line_time.by_order();
                if let Some((s, when)) = pending
                    && (by_order || at - when <= ERROR_ACCESS_S)
                    && self.store.get(s).is_some()
                    && answers(self.flow.error_answers_ok)
                {
                    // The failed request's own answer, as the proxy's access
                    // line gives it (vLLM's demo proxy says 200, others 502).
                    let detail = if (200..300).contains(&a.status) {
                        format!("HTTP {}: the proxy answered success for a request that failed", a.status)
                    } else {
                        format!("HTTP {}", a.status)
                    };
                    self.with_phase(s, Hop::Proxy, LogOrigin::Proxy, None, at, |p| {
                        p.detail = detail.clone();
                        p.end = Some(at);
                    });
                    self.said(s, at, LogOrigin::Proxy, FactKind::ProxyAnswered { status: a.status }, at);
                } else if (200..300).contains(&a.status) {
                    self.proxy_ok_access(a.status, at);
                } else {
                    // One access line answers one request: never merged.
                    self.stat(LogOrigin::Proxy).unattributed_errors += 1;
                    let id = self.synthetic_id("proxy-error");
                    let s = self.new_trace(id, at);
                    if let Some(e) = self.store.get_mut(s) {
                        e.track.proxy_seen = true;
                    }
                    self.fail(
                        s,
                        Hop::Proxy,
                        LogOrigin::Proxy,
                        format!("proxy answered HTTP {}", a.status),
                        at,
                        at,
                    );
                }
                true
            }
            ProxyEvent::Error { kind: ProxyErrorKind::Traceback, text, instance, .. } => {
                if let Some(h) = header {
                    self.traceback_detail(h, &text, instance.as_deref(), at);
                }
                true
            }
            ProxyEvent::Other => {
                self.flow.asgi_header = header;
                false
            }
            ProxyEvent::Error { kind, status, text, instance } => {
                self.stat(LogOrigin::Proxy).unattributed_errors += 1;
                self.proxy_error(kind, status, &text, instance.as_deref(), at);
                true
            }
            ProxyEvent::Request(r) => {
                self.proxy_request(r, at);
                true
            }
        }
    }

    /// An id-less `200` from the proxy: the oldest recent trace with no proxy
    /// phase yet, else a proxy-only trace.
    pub(crate) fn proxy_ok_access(&mut self, status: u16, at: f64) {
        let win = self.opts.proxy_window_s;
        // A line no stamp dates was printed between the read before and its
        // own; one the first read found, at any time before.
        let earliest = self.line_time.earliest(at);
        let undated = self.line_time == LineTime::Undated;
        let serials = self.store.serials();
        let from = serials.end.saturating_sub(ATTACH_SCAN as u64).max(serials.start);
        // The proxy's answer starts with the decode's stream: a request is
        // near its access line by its decode's arrival (a prefill may have
        // queued long before it), else by its first line.
        let fits = |s: &u64, prefilled: bool| {
            self.store.get(*s).is_some_and(|e| {
                let near = e.track.decode_at.unwrap_or(e.trace.first_seen);
                !e.track.proxy_seen
                    && (e.trace.prefill.is_some() || (!prefilled && e.trace.decode.is_some()))
                    && near >= earliest - win
                    && near <= at + 1.0
            })
        };
        // A proxied request was prefilled: those first, direct ones only if none.
        // Answers start in the order the decodes were reached: the earliest.
        let near = |s: &u64| {
            self.store.get(*s).map_or(f64::MAX, |e| e.track.decode_at.unwrap_or(e.trace.first_seen))
        };
        let earliest_fit = |prefilled: bool| {
            (from..serials.end).filter(|s| fits(s, prefilled)).min_by(|a, b| near(a).total_cmp(&near(b)))
        };
        // Undated, it fits any request by time: only a proxied (prefilled)
        // one takes it, and none is no request of its own.
        let target = earliest_fit(true).or_else(|| (!undated).then(|| earliest_fit(false)).flatten());
        let (s, detail) = match target {
            Some(s) if undated => (
                s,
                format!(
                    "HTTP {status} (read before pdtop started, undated: matched to this request by order)"
                ),
            ),
            Some(s) => (s, format!("HTTP {status} (matched to this request by arrival order)")),
            // A 2xx the proxy gave that no request an instance logged fits:
            // placed late or early (its time is its read's), it is no
            // request of its own while an instance's log names them all.
            None if undated || self.decode_read() => {
                self.stat(LogOrigin::Proxy).unplaced_answers += 1;
                return;
            }
            None => {
                let id = self.synthetic_id("proxy");
                (self.new_trace(id, at), format!("HTTP {status}"))
            }
        };
        self.with_phase(s, Hop::Proxy, LogOrigin::Proxy, None, at, |p| p.detail = detail);
        let mut prefilled = false;
        if let Some(e) = self.store.get_mut(s) {
            // Its progress by the decode's arrival, not by this line's read.
            if let Some(d) = e.track.decode_at {
                self.flow.answered(d);
            }
            e.track.proxy_seen = true;
            e.track.proxy_answer = Some(status);
            prefilled = e.trace.prefill.is_some();
        }
        if prefilled && !self.flow.proxied {
            self.flow.proxied = true;
            self.settle_orphans(at);
        }
        // The flow may now vouch for its prefill.
        self.settle(s, at);
    }

    /// One line of a proxy failure; the lines of one failure make one trace.
    fn proxy_error(
        &mut self,
        kind: ProxyErrorKind,
        status: Option<u16>,
        text: &str,
        instance: Option<&str>,
        at: f64,
    ) {
        let named = instance.and_then(|a| self.flow.source_of(a));
        if let (ProxyErrorKind::UpstreamStatus, None, Some(st)) = (kind, instance, status) {
            // The first line of a failure: it opens its own, whatever
            // failure's lines came just before (another request's).
            let s = self.upstream_report(st, text, at);
            self.flow.error = Some((s, at));
            self.flow.error_answers_ok = false;
            return;
        }
        let (mut hop, mut what) = match (named, instance) {
            (Some(src @ LogOrigin::Prefill(_)), Some(a)) => {
                (Hop::Producer, format!("{src} ({a}) unreachable: {text}"))
            }
            (Some(src @ LogOrigin::Decode(_)), Some(a)) => {
                (Hop::Consumer, format!("{src} ({a}) unreachable: {text}"))
            }
            _ => (
                Hop::Proxy,
                match status {
                    Some(s) => format!("proxy error (HTTP {s}): {text}"),
                    None => format!("proxy error: {text}"),
                },
            ),
        };
        if let (Some(LogOrigin::Prefill(_)), Some(a)) = (named, instance)
            && !self.flow.dropped.iter().any(|d| d == a)
        {
            // vLLM's demo proxy removes a prefill instance after its failure.
            self.flow.dropped.push(a.to_string());
        }
        if kind == ProxyErrorKind::Detail && text.starts_with("StopIteration") {
            // vLLM's demo proxy empties only its prefill list (one failure
            // drops an instance); its decode list never shrinks.
            hop = Hop::Producer;
            let dropped = match self.flow.dropped.is_empty() {
                true => "every prefill instance after a failure".to_string(),
                false => format!("{} after its failure", self.flow.dropped.join(", ")),
            };
            what = format!(
                "the proxy has no prefill instance left (it dropped {dropped}) and failed the request itself (StopIteration)"
            );
        }
        if let (None, Some(a)) = (named, instance) {
            // A host pdtop was not told of: remembered, in case the proxy's
            // next line says which stage it served.
            self.flow.unnamed_host = Some(a.to_string());
        }
        if kind == ProxyErrorKind::DisaggProxy {
            if let Some(h) = self.flow.unnamed_host.take()
                && !self.flow.dropped.contains(&h)
            {
                self.flow.dropped.push(h);
            }
            // `disagg_proxy_demo.py` prints this only for a failure before
            // the decode stream starts: the prefill stage (a decode failure
            // surfaces later, inside the stream).
            hop = Hop::Producer;
            // Printed by vLLM's demo proxy and by proxies made from it: the
            // line says no more than that; the access line says the answer.
            what = "the proxy failed the request before decode (its prefill stage): `Error occurred in disagg proxy server`".into();
        }
        if hop == Hop::Producer {
            // This proxy fails a request whose prefill failed: it sends no decode.
            self.joiner.proxy_stops_at_prefill_error = true;
        }
        // vLLM's demo proxy answers 200 for the request it failed.
        self.flow.error_answers_ok = matches!(kind, ProxyErrorKind::DisaggProxy | ProxyErrorKind::Detail);
        if let (Some(LogOrigin::Decode(i)), Some(_)) = (named, instance)
            && !self.joiner.ids_shared
            && let Some(s) = self.order_partner(at, None)
        {
            // A decode that cannot be reached: the prefilled request waiting for it.
            if let Some(e) = self.store.get_mut(s) {
                e.trace.decode = Some(i);
                e.trace.join = crate::traces::model::Join::ByOrder;
            }
            self.fail(s, Hop::Consumer, LogOrigin::Proxy, what, at, at);
            self.flow.reported = Some((s, at));
            return;
        }
        let asgi = kind == ProxyErrorKind::Asgi;
        // The proxy reported a failure in its own words and re-raised it:
        // uvicorn's exception that comes next (after another request's
        // answer line, as vLLM's demo proxy streams) is the same failure.
        if asgi
            && let Some((s, when)) = self.flow.reported.take()
            && (self.line_time.by_order() || at - when <= ERROR_BURST_S)
            && self.store.get(s).is_some()
        {
            self.fail(s, hop, LogOrigin::Proxy, what, at, at);
            self.flow.asgi_header = Some(s);
            return;
        }
        // Each uvicorn exception is one request's: a burst of them (a dead
        // decode breaks every stream it served) is as many failures. One
        // after a proxy's own report of a failure (the toy proxy re-raises)
        // is that failure's.
        let by_order = self.line_time.by_order();
        let recent = self.flow.error.filter(|(s, when)| {
            (by_order || at - when <= ERROR_BURST_S)
                && self.store.get(*s).is_some_and(|e| !(asgi && e.track.proxy_exception))
        });
        match recent {
            Some((s, _)) => {
                // The lines of one failure: a later one may name the hop.
                // Reported by the proxy's own words too, it is no bare
                // exception that a dead decode's stream could echo.
                if let Some(e) = self.store.get_mut(s) {
                    e.track.proxy_exception &= asgi;
                }
                self.fail(s, hop, LogOrigin::Proxy, what, at, at);
                self.flow.error = Some((s, at));
                if !asgi {
                    self.flow.reported = Some((s, at));
                }
                self.flow.asgi_header = asgi.then_some(s);
            }
            None => {
                let id = self.synthetic_id("proxy-error");
                let s = self.new_trace(id, at);
                if let Some(e) = self.store.get_mut(s) {
                    e.track.proxy_seen = true;
                    e.track.proxy_exception = asgi;
                    e.track.undated = self.line_time == LineTime::Undated;
                }
                self.fail(s, hop, LogOrigin::Proxy, what, at, at);
                self.flow.error = Some((s, at));
                self.flow.reported = (!asgi).then_some((s, at));
                self.flow.asgi_header = asgi.then_some(s);
            }
        }
    }

    /// A JSON-lines step: joined by `request_id`, which is the base id.
    pub(crate) fn proxy_request(&mut self, r: RequestEvent, at: f64) {
        let t = r.ts.filter(|x| x.is_finite()).unwrap_or(at);
        let id = r.request_id.trim();
        if id.is_empty() {
            return;
        }
        // A step that opens a request, on a trace the proxy already took
        // as far (or that was decided with its proxy phase ended), is an
        // earlier request with the same id (a looping client): start anew.
        let opens = matches!(r.stage, Stage::Received | Stage::PrefillStart);
        let s = match self.store.latest(id) {
            Some(s)
                if !(opens
                    && self.store.get(s).is_some_and(|e| {
                        let proxied = e.trace.phase(Hop::Proxy);
                        e.track.proxy_stage.is_some_and(|old| rank(old) >= rank(r.stage))
                            || (e.trace.outcome != Outcome::Pending
                                && proxied.is_some_and(|p| p.end.is_some()))
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
        // A step that carries an error failed there, with or without a status.
        let errored = r.error.as_deref().is_some_and(|e| !e.trim().is_empty());
        if r.stage == Stage::Error || bad_status || errored {
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
            // The JSON line names the request: sure, however it was joined.
            let by_proxy = src == LogOrigin::Proxy && hop != Hop::Proxy;
            let x =
                Failure { hop, what: text, confidence: Confidence::Sure, generate_failed: false, by_proxy };
            self.fail_with(s, src, x, t, at);
        }
    }
}

/// A proxy step's place in a request's life.
fn rank(s: Stage) -> u8 {
    match s {
        Stage::Received => 0,
        Stage::PrefillStart => 1,
        Stage::PrefillDone => 2,
        Stage::DecodeStart => 3,
        Stage::DecodeFirstByte => 4,
        Stage::DecodeDone => 5,
        Stage::Error => 6,
    }
}
