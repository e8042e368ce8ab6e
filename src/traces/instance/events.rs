//! Events from a vLLM instance's own log (prefill or decode).

use crate::feed::LogOrigin;
use crate::logs::vllm::{KvParams, VllmEvent, VllmLine};
use crate::traces::correlator::{Correlator, process_label};
use crate::traces::evidence::{FactKind, Failure};
use crate::traces::ids::trace_key;
use crate::traces::model::{Confidence, Hop, Join, Outcome};
use crate::traces::reason::deadline_only;

/// One `Received`/`Added` line, as the handlers need it.
pub(crate) struct Arrival<'a> {
    pub id: &'a str,
    pub max_tokens: Option<u32>,
    pub params: Option<&'a KvParams>,
    /// Event time (anchored vLLM stamp, else read time).
    pub t: f64,
    pub at: f64,
    pub process: Option<String>,
}

/// One `Added request` line (engine id and the id the API server gave).
pub(crate) struct Added<'a> {
    pub internal: &'a str,
    pub external: &'a str,
    pub t: f64,
    pub at: f64,
    pub process: Option<String>,
}

impl Correlator {
    /// Returns whether the line meant anything to the correlator.
    /// `noise`: the line is known to carry nothing (`logs::known`).
    pub(crate) fn on_instance(&mut self, src: LogOrigin, line: VllmLine, at: f64, noise: bool) -> bool {
        // `at` is the line's own time: its stamp, or the last stamp before
        // it, on pdtop's clock (`state::timeline` dated it).
        let stamped = line.timestamp.map(|_| at);
        let last_stamp = self.logs.last_stamp.get(&src).copied();
        if let Some(t) = stamped {
            self.logs.last_stamp.insert(src, t);
        }
        // A line without a stamp (uvicorn's access line) happened at about
        // the source's last stamp: its clock, which the reader's may not be.
        let t = stamped.or_else(|| self.logs.last_stamp.get(&src).copied()).unwrap_or(at);
        // Only the lines that open or join a trace keep it: no String per line.
        let process = || process_label(line.process.as_deref(), line.pid);
        if line.pid.is_some() && line.process.as_deref() == Some("APIServer") {
            let old = self.stat(src).pid.replace(line.pid.unwrap_or_default());
            if old.is_some_and(|p| Some(p) != line.pid) {
                // A new API server process: the old one is gone.
                self.on_restart(src, last_stamp, t, at);
            }
        }
        match (&line.event, src) {
            (VllmEvent::Received { id, max_tokens, kv_params, prompt_tokens }, _) => {
                let a = Arrival {
                    id,
                    max_tokens: *max_tokens,
                    params: kv_params.as_ref(),
                    t,
                    at,
                    process: process(),
                };
                let s = match src {
                    LogOrigin::Prefill(i) => self.prefill_arrival(i, &a),
                    LogOrigin::Decode(i) => self.decode_arrival(i, &a),
                    LogOrigin::Proxy => return true,
                };
                self.inflight.begin(src, s, t, self.opts.max_pending);
                if let Some(n) = prompt_tokens.filter(|n| self.logs.max_log_len.get(&src) != Some(n)) {
                    self.on_prompt_tokens(src, id, n, at);
                }
            }
            (VllmEvent::Added { internal_id, external_id }, LogOrigin::Prefill(i)) => {
                self.prefill_added(
                    i,
                    Added { internal: internal_id, external: external_id, t, at, process: process() },
                );
            }
            (VllmEvent::Added { internal_id, external_id }, LogOrigin::Decode(i)) => {
                self.decode_added(
                    i,
                    Added { internal: internal_id, external: external_id, t, at, process: process() },
                );
            }
            (VllmEvent::ExternalCacheHit, LogOrigin::Decode(i)) => self.on_hit(i, t, at),
            (VllmEvent::InjectKv { tokens }, LogOrigin::Decode(i)) => self.on_inject(i, *tokens, t),
            (VllmEvent::KvExpired { id, retrieved_by }, _) => {
                self.on_expired(src, id, *retrieved_by, t, at);
            }
            (VllmEvent::Aborted { ids }, _) => {
                for id in ids {
                    // The line names the request: a paste with no earlier line of it lists it too.
                    let Some(s) = self.find(id).or_else(|| self.trace_named_own(src, id, t, at)) else {
                        continue;
                    };
                    if self.store.get(s).is_some_and(|e| crate::traces::store::Store::touches(e, src)) {
                        self.cancel(s, src, t, at);
                    }
                }
            }
            (VllmEvent::RequestFailed { id, reason }, _) => match self.find(id) {
                Some(s)
                    if self.store.get(s).is_some_and(|e| crate::traces::store::Store::touches(e, src)) =>
                {
                    let (text, generate_failed) = match *reason {
                        "engine dead" => ("engine died with it in flight (`failed (engine dead)`)", false),
                        "bad request" => ("refused it as a bad request (`failed (bad request)`)", false),
                        _ => {
                            ("its generation raised an error and was aborted (`Request <id> failed.`)", true)
                        }
                    };
                    let x = Failure {
                        hop: hop_of(src),
                        what: text.to_string(),
                        confidence: Confidence::Sure,
                        generate_failed,
                        by_proxy: false,
                    };
                    self.fail_with(s, src, x, t, at);
                }
                _ => {
                    self.stat(src).unattributed_errors += 1;
                    let text = format!("request_failed {id} ({reason})");
                    self.push_log_event(src, crate::logs::signal::SignalKind::RequestFailed, text, t);
                }
            },
            (VllmEvent::StreamError, _) => {}
            (VllmEvent::RequestDetails { id, prompt_tokens }, _) => {
                if let Some(n) = prompt_tokens.filter(|n| self.logs.max_log_len.get(&src) != Some(n)) {
                    self.on_prompt_tokens(src, id, n, at);
                }
            }
            (VllmEvent::EngineDead { text }, _) => self.on_death(src, text, t, at),
            (VllmEvent::ServerStarted { .. }, _) => {
                let ran = self.stat(src).starts > 0;
                self.stat(src).starts += 1;
                self.on_restart(src, last_stamp.filter(|_| ran), t, at);
            }
            (VllmEvent::Shutdown, _) => {
                self.stat(src).shutdowns += 1;
                self.inflight.stopping(src, super::inflight::Stop::Orderly);
            }
            (VllmEvent::KvConnectorConfig { fields: f, block_size }, _) => {
                if let Some(b) = block_size {
                    self.logs.blocks.insert(src, *b);
                }
                let st = self.stat(src);
                if f.connector.is_some() {
                    st.connector.clone_from(&f.connector);
                }
                if f.role.is_some() {
                    st.kv_role.clone_from(&f.role);
                }
                // Printed whole at each start: absent is vLLM's default (fail).
                st.failure_policy.clone_from(&f.failure_policy);
                if let (LogOrigin::Decode(i), Some(p)) = (src, f.parallel) {
                    self.decodes.entry(i).or_default().parallel = Some(p);
                }
            }
            (VllmEvent::EngineStats(s), _) => {
                self.on_engine_progress(src, s, t);
                self.inflight.engine_busy(src, s.engine, s.running + s.waiting, t);
                let st = self.stat(src);
                st.waiting = Some(s.waiting);
                if s.external_hit_pct.is_some() {
                    st.external_hit_pct = s.external_hit_pct;
                }
                if let LogOrigin::Decode(i) = src {
                    // The line comes every 10 s: a queue it reports may last that long.
                    let until = if s.waiting > 0 { at + 15.0 } else { at };
                    self.decodes.entry(i).or_default().busy_until = Some(until);
                    self.on_decode_stats(i, s, t, at);
                }
            }
            (VllmEvent::KvTransferMetrics(m), LogOrigin::Decode(i)) => {
                self.on_transfer_metrics(i, m.num_successful_transfers.unwrap_or(0), at);
            }
            (VllmEvent::Access(a), _) => {
                if a.method != "POST" || !a.path.starts_with("/v1/") {
                    return false;
                }
                self.on_instance_access(src, a.status, &a.path, t, at);
            }
            // `KeyError: '<request id>'` ending a traceback (`logs::vllm`).
            (VllmEvent::Exception { .. }, _) if line.signal.is_some() => {
                return line.signal.as_ref().is_some_and(|sig| self.on_signal(src, sig, t, at));
            }
            (VllmEvent::Other, _) => match &line.signal {
                Some(sig) => return self.on_signal(src, sig, t, at),
                None => {
                    let st = self.stat(src);
                    if noise {
                        st.noise += 1;
                    } else {
                        st.unknown += 1;
                    }
                    return false;
                }
            },
            _ => return false,
        }
        true
    }

    fn prefill_arrival(&mut self, i: usize, a: &Arrival) -> u64 {
        let src = LogOrigin::Prefill(i);
        let base = trace_key(a.id);
        let reuse = self.store.latest(&base).filter(|s| {
            self.store.get(*s).is_some_and(|e| {
                e.trace.prefill.is_none()
                    && (e.trace.outcome == Outcome::Pending || deadline_only(&e.trace.reasons))
            })
        });
        // A decode refusal read just before this copy (the two logs are read
        // apart): the refused request's own prefill.
        let refused = match (reuse, a.max_tokens) {
            (None, Some(1)) if !self.joiner.forwarded(a.id) => self.flow.take_refusal(a.at),
            _ => None,
        };
        let s = match (reuse, refused) {
            (Some(s), _) => {
                self.reopen(s);
                s
            }
            (None, Some(s)) => {
                self.store.alias(&base, s);
                if let Some(e) = self.store.get_mut(s) {
                    e.trace.id = base.clone();
                    e.trace.join = Join::ByOrder;
                }
                s
            }
            (None, None) => self.new_trace(base.clone(), a.at),
        };
        let wants_pull = a.params.and_then(|p| p.do_remote_decode) == Some(true);
        let detail = match (a.max_tokens, wants_pull) {
            (Some(m), true) => format!("max_tokens={m}, do_remote_decode"),
            (Some(m), false) => format!("max_tokens={m}"),
            (None, _) => "prefill".to_string(),
        };
        self.with_phase(s, Hop::Producer, src, a.process.clone(), a.t, |p| p.detail = detail);
        let mut has_decode = false;
        if let Some(e) = self.store.get_mut(s) {
            e.trace.prefill = Some(i);
            e.trace.engine_ids.push((src, a.id.to_string()));
            e.track.prefill_at = Some(a.at);
            e.track.arrived = true;
            e.track.prefill_wants_pull = wants_pull;
            has_decode = e.trace.decode.is_some();
        }
        if !self.arrivals_logged.contains(&src) {
            self.arrivals_logged.push(src);
        }
        self.joiner.await_access(src, s, self.opts.max_pending);
        if refused.is_some() {
            return s;
        }
        if a.max_tokens == Some(1) && !self.joiner.forwarded(a.id) {
            self.flow.watch(s, a.at, a.t);
        }
        if let Some(max_tokens) = a.max_tokens.filter(|m| *m > 1) {
            self.said(s, a.t, src, FactKind::ServedAlone { max_tokens }, a.at);
            return s;
        }
        if has_decode {
            // The decode side was read first (tail order): join it now.
            self.shared_id_join(a.t);
            self.late_prefill_join(s);
        } else {
            self.joiner.unpaired(s, self.opts.max_pending);
        }
        s
    }

    fn prefill_added(&mut self, i: usize, added: Added<'_>) {
        let Added { internal, external, t, at, process } = added;
        let src = LogOrigin::Prefill(i);
        let base = trace_key(external);
        let found = self.store.latest(&base).filter(|s| {
            self.store
                .get(*s)
                .is_some_and(|e| e.trace.prefill == Some(i) && e.track.prefill_internal.is_none())
        });
        let s = match found {
            Some(s) => s,
            // `Received` was not logged (request logging off): the `Added` line opens it.
            None => {
                let a = Arrival { id: external, max_tokens: None, params: None, t, at, process };
                self.prefill_arrival(i, &a)
            }
        };
        if let Some(e) = self.store.get_mut(s) {
            e.track.prefill_internal = Some(internal.to_string());
            e.trace.engine_ids.push((src, internal.to_string()));
        }
        self.store.index_engine(internal, s);
    }
}

pub(crate) use crate::traces::model::hop_of;
