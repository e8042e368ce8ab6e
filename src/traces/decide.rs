//! Deadlines and verdict wording: what `on_tick`/`finish` conclude, and how
//! a hit (or its absence) becomes a verdict.

use super::connector::decode_log::Early;
use super::connector::early::{EARLY_NOTE, wait_words};
use super::connector::hits::{Claim, Waiting};
use super::correlator::{Correlator, Style};
use super::ids::{base_id, invented};
use super::model::{Confidence, Hop, Join, Outcome};
use super::proxy::flow::PROXY_WAIT_S;
use super::store::push_capped;
use crate::feed::LogOrigin;

impl Correlator {
    pub(super) fn sweep(&mut self, now: f64, force: bool) {
        let mut decodes: Vec<usize> = self.decodes.keys().copied().collect();
        decodes.sort_unstable();
        for i in decodes {
            let busy = self.decodes.get(&i).is_some_and(|d| d.busy(now));
            let settle = if busy { self.opts.settle_busy_s } else { self.opts.settle_s };
            let quick = if busy { settle } else { self.hit_wait(i) };
            if let Some(q) = self.decodes.get_mut(&i).map(|d| &mut d.hits)
                && q.step_started().is_some_and(|at| force || now - at >= self.opts.settle_s)
            {
                // A connector that prints no `Inject` line: the step ends with time.
                q.end_step(busy);
            }
            let gone = self
                .decodes
                .get_mut(&i)
                .map(|d| &mut d.hits)
                .map(|q| q.expire(now, settle, quick, force))
                .unwrap_or_default();
            for w in gone {
                let waited = if w.quiet && !busy { quick } else { settle };
                self.no_hit_verdict(i, w, now, busy, false, waited);
            }
            self.confirm_early(i, now, force);
        }
        self.joiner.prune(&self.store, now);
        let store = &self.store;
        // An error or a cancel is final: no later death changes it.
        self.inflight.prune(|s| {
            store.get(s).is_none_or(|e| matches!(e.trace.outcome, Outcome::Error | Outcome::Cancelled))
        });
        if self.proxy_read() {
            let store = &self.store;
            self.flow.check(now, |s| store.get(s).map(|e| e.track.proxy_seen));
        }
        let open = std::mem::take(&mut self.open);
        for s in open {
            let pending = match self.store.get_mut(s) {
                Some(e) if e.trace.outcome == Outcome::Pending => true,
                Some(e) => {
                    e.track.in_open = false;
                    false
                }
                None => false,
            };
            if pending && !self.decide_open(s, now, force) {
                self.open.push_back(s);
            } else if let Some(e) = self.store.get_mut(s) {
                e.track.in_open = false;
            }
        }
        self.judge_waits(now, force);
    }

    /// How long decode#`i`'s requests wait for their hit (`HitQueue::wait`).
    pub(super) fn hit_wait(&self, i: usize) -> f64 {
        let (settle, read) = (self.opts.settle_s, self.opts.read_every_s);
        self.decodes.get(&i).map_or(settle, |d| d.hits.wait(settle, read))
    }

    /// Deadline verdicts for traces not waiting on a hit. `true` when decided.
    fn decide_open(&mut self, s: u64, now: f64, force: bool) -> bool {
        let Some(e) = self.store.get(s) else {
            return true;
        };
        let (tr, tk) = (&e.trace, &e.track);
        if tk.in_hit_queue {
            return false;
        }
        if let (Some(busy), Some(di)) = (tk.miss_due, tr.decode) {
            let since = tk.decode_added_at.unwrap_or(tr.first_seen);
            if !force && !self.prefill_guaranteed(s) && now - since < PROXY_WAIT_S && !self.flow.bypass {
                return false;
            }
            let waited = if busy { self.opts.settle_busy_s } else { self.opts.settle_s };
            self.miss_now(di, s, busy, now, waited);
            return true;
        }
        let (settle, busy_settle) = (self.opts.settle_s, self.opts.settle_busy_s);
        match (tr.prefill, tr.decode, tk.decode_at) {
            (Some(pi), Some(di), Some(dat)) => {
                // Prefilled, param-less, and no `Added` line came to queue it.
                if !force && now - dat < busy_settle {
                    return false;
                }
                let ev = format!(
                    "prefill on prefill#{pi} ran; decode#{di} logged no `Added request` line, so its KV load cannot be judged"
                );
                self.decide(s, Outcome::Unknown, Confidence::Likely, ev, now);
            }
            (None, Some(di), Some(dat)) => {
                // A late-read prefill may still join within the settle time.
                if !force && now - dat < settle {
                    return false;
                }
                let invented = invented(base_id(&tr.id));
                let id_known = !invented || self.joiner.ids_shared;
                // A prefill copy that no decode took, sent about when this
                // request came: without a shared id it may be this one's.
                let t_dec = tk.decode_event_t.unwrap_or(dat);
                let waiting =
                    self.joiner.waiting(&self.store, t_dec, self.opts.order_window_s).filter(|_| invented);
                let prefill_read = self.stats.keys().any(|k| matches!(k, LogOrigin::Prefill(_)));
                let direct = !tk.proxy_seen && self.proxy_read();
                let (o, c, ev) = if !prefill_read {
                    (
                        Outcome::Unknown,
                        Confidence::Likely,
                        format!("served by decode#{di}; no prefill log is being read"),
                    )
                } else if let Some(w) = waiting {
                    let name = self.store.get(w).map_or_else(String::new, |e| e.trace.id.clone());
                    (
                        Outcome::Unknown,
                        Confidence::Unsure,
                        format!(
                            "served by decode#{di}, and the prefill copy {name} sent about then is paired with no decode request: without a shared id the logs cannot tell whether it was this request's"
                        ),
                    )
                } else if id_known {
                    let c = if self.joiner.ids_shared { Confidence::Sure } else { Confidence::Likely };
                    (
                        Outcome::NoPrefill,
                        c,
                        format!("no prefill instance logged {}: decode#{di} computed it alone", tr.id),
                    )
                } else if direct && self.flow.established() {
                    (Outcome::NoPrefill, Confidence::Likely, self.no_prefill_by_flow(di))
                } else {
                    if direct && !self.flow.bypass {
                        // The flow is not known yet: look again once it is.
                        self.flow.orphan(s);
                    }
                    (
                        Outcome::Unknown,
                        Confidence::Unsure,
                        format!(
                            "the instances share no request ids (no X-Request-Id forwarded) and no prefill arrived within {:.0} s before it",
                            self.opts.order_window_s
                        ),
                    )
                };
                self.decide(s, o, c, ev, now);
            }
            (Some(pi), None, _) => {
                let since = tk.prefill_at.unwrap_or(tr.first_seen);
                if !force && now - since < self.opts.prefill_only_timeout_s {
                    return false;
                }
                let decode_read = self.stats.keys().any(|k| matches!(k, LogOrigin::Decode(_)));
                let mut ev = if decode_read {
                    format!("prefill on prefill#{pi} ran; no decode request was seen for it")
                } else {
                    format!("prefill on prefill#{pi} ran; no decode log is being read")
                };
                if tk.kv_expired_unread {
                    ev.push_str("; its KV expired unread");
                }
                self.decide(s, Outcome::Unknown, Confidence::Likely, ev, now);
                self.set_reopenable(s);
            }
            _ => {
                if !force && now - tr.first_seen < self.opts.proxy_only_timeout_s {
                    return false;
                }
                // Lines of an instance named it (a connector's, a wait),
                // but neither its arrival nor what decode did with it.
                let named: Vec<String> = tr
                    .phases
                    .iter()
                    .filter(|p| p.hop != Hop::Proxy && !p.detail.is_empty())
                    .map(|p| format!("{} on {}: {}", p.hop, p.source, p.detail))
                    .collect();
                let ev = if named.is_empty() {
                    "seen by the proxy only: no instance log names it".to_string()
                } else {
                    format!(
                        "no arrival line for it was read, only {}; whether its KV loaded is not known",
                        named.join("; ")
                    )
                };
                self.decide(s, Outcome::Unknown, Confidence::Unsure, ev, now);
                self.set_reopenable(s);
            }
        }
        true
    }

    fn set_reopenable(&mut self, s: u64) {
        if let Some(e) = self.store.get_mut(s) {
            e.track.reopenable = true;
        }
    }

    /// A queued request's hit never came (`capped`: pushed out of a full queue).
    pub(super) fn no_hit_verdict(
        &mut self,
        i: usize,
        w: Waiting,
        now: f64,
        busy: bool,
        capped: bool,
        waited_s: f64,
    ) {
        let Some(e) = self.store.get_mut(w.serial) else {
            return;
        };
        e.track.in_hit_queue = false;
        if super::store::failed_prefill(e) {
            e.trace.evidence.push_str(&format!(
                "; decode#{i} found no KV for it (no External Cache Hit) and computed the prompt itself"
            ));
        }
        if e.trace.outcome != Outcome::Pending {
            return;
        }
        let join = e.trace.join;
        if capped {
            let ev = format!("decode#{i} had too many requests waiting for a hit to follow this one");
            self.decide(w.serial, Outcome::Unknown, Confidence::Unsure, ev, now);
            return;
        }
        if !w.rivals.is_empty() {
            self.shared_step_unknown(i, w, join, now);
            return;
        }
        if join == Join::ByOrder
            && !self.prefill_guaranteed(w.serial)
            && self.proxy_read()
            && !self.flow.bypass
        {
            // The proxy line that proves the prefill may still be on its way.
            if let Some(e) = self.store.get_mut(w.serial) {
                e.track.miss_due = Some(busy);
            }
            self.mark_open(w.serial);
            return;
        }
        self.miss_now(i, w.serial, busy, now, waited_s);
    }

    /// The verdict on a request whose hit never came.
    /// `waited_s`: how long its hit was waited for.
    pub(super) fn miss_now(&mut self, i: usize, serial: u64, busy: bool, now: f64, waited_s: f64) {
        let Some(e) = self.store.get_mut(serial) else {
            return;
        };
        e.track.miss_due = None;
        if e.trace.outcome != Outcome::Pending {
            return;
        }
        let prefill = e.trace.prefill.unwrap_or(0);
        let t_dec = e.track.decode_event_t.unwrap_or(now);
        let settle = waited_s;
        let style = self.style(i);
        if style == Style::Unknown {
            let ev = format!(
                "decode#{i}'s connector ({}) logs nothing per request that pdtop reads: no verdict",
                self.connector_name(i)
            );
            self.decide(serial, Outcome::Unknown, Confidence::Unsure, ev, now);
            return;
        }
        let finished = self.finished_note(serial, t_dec);
        let ev = if style == Style::Params {
            format!(
                "decode got no kv_transfer_params although prefill#{prefill} ran it: {} cannot pull without them",
                self.connector_name(i)
            )
        } else {
            format!(
                "prefill on prefill#{prefill} finished{finished}, decode computed the prompt itself: no External Cache Hit within {} of its Added line{}",
                wait_words(settle),
                if busy { " (decode was queueing requests)" } else { "" }
            )
        };
        // Called before `settle_s`: likely, until the rest of it passes.
        let early = !busy && style == Style::Hits && waited_s < self.opts.settle_s;
        let (conf, ev) = match early {
            true => (Confidence::Likely, format!("{ev}{EARLY_NOTE}")),
            false if busy => (Confidence::Likely, ev),
            false => (Confidence::Sure, ev),
        };
        let added = self.store.get(serial).and_then(|e| e.track.decode_added_at).unwrap_or(now);
        self.decide(serial, Outcome::SilentMiss, conf, ev, now);
        // `decide` may have made it unknown (paired by order only): then
        // there is no miss for 1.5 s to confirm.
        let kept = self.store.get_mut(serial).filter(|e| e.trace.outcome == Outcome::SilentMiss);
        if early && kept.is_none() {
            if let Some(e) = self.store.get_mut(serial) {
                e.trace.evidence = e.trace.evidence.replace(EARLY_NOTE, "");
            }
        } else if early {
            let d = self.decodes.entry(i).or_default();
            let e = Early { serial, added_at: added, waited: waited_s, contested: false };
            push_capped(&mut d.early, e, self.opts.max_pending);
        }
    }

    fn no_prefill_by_flow(&self, di: usize) -> String {
        format!(
            "decode#{di} served it with no prefill copy before it and no proxy access line for it: it bypassed the proxy, which prefills every request it forwards"
        )
    }

    /// The flow just became known: requests left Unknown for want of it
    /// are decided now.
    pub(super) fn settle_orphans(&mut self, now: f64) {
        let orphans: Vec<u64> = self.flow.orphans.drain(..).collect();
        for s in orphans {
            let Some(e) = self.store.get(s) else { continue };
            let still = e.trace.outcome == Outcome::Unknown
                && e.trace.prefill.is_none()
                && !e.track.proxy_seen
                && e.trace.decode.is_some();
            if let (true, Some(di)) = (still, e.trace.decode) {
                let ev = self.no_prefill_by_flow(di);
                self.decide(s, Outcome::NoPrefill, Confidence::Likely, ev, now);
            }
        }
    }

    /// A hit attributed to a request: `Loaded`, as sure as the queue allows.
    pub(super) fn apply_claim(&mut self, i: usize, c: Claim, t: f64, at: f64) {
        self.with_phase(c.serial, Hop::Connector, LogOrigin::Decode(i), None, t, |p| {
            p.detail = "External Cache Hit".into();
        });
        if let Some(e) = self.store.get_mut(c.serial) {
            if super::store::failed_prefill(e) {
                e.trace
                    .evidence
                    .push_str(&format!("; decode#{i} loaded KV for it nonetheless (External Cache Hit)"));
                // A failed prefill stores nothing: paired by order, the KV
                // says the decode may have been another request's.
                if e.trace.join == Join::ByOrder {
                    e.trace.evidence.push_str(", which speaks against the order pairing");
                    e.trace.confidence = Confidence::Unsure;
                }
            }
            e.track.hit = true;
            e.track.in_hit_queue = false;
            e.track.contested = u32::try_from(c.contested_by).unwrap_or(u32::MAX);
        }
        // Every rival this request had has now been matched by a hit: one
        // less open alternative for each of them.
        for r in &c.rivals {
            if let Some(re) = self.store.get_mut(*r) {
                re.track.contested = re.track.contested.saturating_sub(1);
                if re.track.contested == 0 && re.trace.outcome == Outcome::Loaded && re.trace.join.exact() {
                    re.trace.confidence = Confidence::Sure;
                }
            }
        }
        if self.store.outcome(c.serial) != Some(Outcome::Pending) {
            return;
        }
        let conf = if c.contested_by > 0 || c.from_orphan { Confidence::Likely } else { Confidence::Sure };
        let ev = self.hit_evidence(c.serial, t);
        self.decide(c.serial, Outcome::Loaded, conf, ev, at);
    }

    /// "Inject 2032 tokens after prefill on prefill#0 finished 1.0 s earlier".
    pub(super) fn hit_evidence(&self, s: u64, t: f64) -> String {
        let Some(e) = self.store.get(s) else {
            return String::new();
        };
        let what = match e.trace.inject_tokens {
            Some(n) => format!("Inject {n} tokens"),
            None => "External Cache Hit".to_string(),
        };
        let prefill = match e.trace.prefill {
            Some(pi) => format!(" after prefill on prefill#{pi} finished{}", self.finished_note(s, t)),
            None => String::new(),
        };
        let how = match (e.trace.join, e.track.contested > 0) {
            (Join::ByOrder, _) => " (prefill paired by arrival order only)",
            (_, true) => " (attributed by arrival order among concurrent requests)",
            _ => "",
        };
        format!("{what}{prefill}{how}")
    }

    /// " 1.0 s earlier" when the prefill's answer time is known.
    pub(super) fn finished_note(&self, s: u64, t: f64) -> String {
        match self.store.get(s).and_then(|e| e.track.prefill_done) {
            // Stamps have one-second resolution: below that, say so.
            Some(done) if t >= done && t - done < 1.0 => " under a second earlier".to_string(),
            Some(done) if t >= done => format!(" {:.1} s earlier", t - done),
            _ => String::new(),
        }
    }

    pub(super) fn expired_note(&self, s: u64) -> &'static str {
        if self.store.get(s).is_some_and(|e| e.track.kv_expired_unread) {
            "; its KV expired unread"
        } else {
            ""
        }
    }
}
