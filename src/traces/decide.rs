//! The decider: one request's facts and what is known around it in, its
//! verdict, confidence and reasons out. Pure: no state is written here and
//! nothing is read but its arguments; `settle.rs` is the only caller and
//! the only writer of outcomes.
//!
//! The rules, in the order they are tried:
//! 1. failures and the client's abort: an error at the failing hop, or a
//!    cancel, ordered by the lines' own stamps (`abort.rs`);
//! 2. what the decode did with the KV: a load by `kv_transfer_params`, an
//!    attributed `External Cache Hit`, a settled shared step, a P2pNccl
//!    tensor, an LMCache lookup; or none: a pull connector given no params
//!    after a prefill, no hit after the wait, the prefill's KV expiring
//!    unread;
//! 3. what time allows: a request with only one side after its window.
//!
//! A verdict on a request joined by arrival order alone is never sure, and
//! never a miss unless the proxy's flow vouches that it was prefilled.

use super::abort::{self, Ordered};
use super::correlator::Style;
use super::evidence::{FactKind as F, Failure};
use super::model::{Confidence, CorrelatorOptions, Hop, Join, Outcome};
use super::proxy::flow::PROXY_WAIT_S;
use super::reason::{Early, Finished, HitHow, Reason as R};
use super::store::Entry;
use crate::feed::LogOrigin;

/// What is known around a request, as `settle.rs` finds it.
#[derive(Debug, Clone)]
pub(crate) struct Ctx<'a> {
    /// The read-time clock.
    pub now: f64,
    /// The end of a check: every deadline has passed.
    pub force: bool,
    pub opts: &'a CorrelatorOptions,
    /// How the decode's connector shows a load.
    pub style: Style,
    pub connector: String,
    /// The proxy's flow proves its prefill (it came through a proxy that
    /// prefills everything it forwards).
    pub guaranteed: bool,
    pub proxy_read: bool,
    pub prefill_read: bool,
    pub decode_read: bool,
    /// Prefill copies reach the prefill without the proxy.
    pub bypass: bool,
    pub flow_established: bool,
    /// The decode's id was forwarded (not invented by the instance), or ids
    /// are shared now: an id on decode alone had no prefill.
    pub id_known: bool,
    pub ids_shared: bool,
    /// Prefill copies sent about when this decode request came, paired with
    /// no decode request, that could be its (no shared id).
    pub waiting_copies: Vec<String>,
    /// Came straight to the decode while the proxy's log is read.
    pub direct: bool,
}

/// A request's verdict.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Verdict {
    pub outcome: Outcome,
    pub confidence: Confidence,
    pub error_at: Option<Hop>,
    pub reasons: Vec<R>,
}

impl Verdict {
    fn new(outcome: Outcome, confidence: Confidence, reasons: Vec<R>) -> Verdict {
        Verdict { outcome, confidence, error_at: None, reasons }
    }

    fn pending() -> Verdict {
        Verdict::new(Outcome::Pending, Confidence::Sure, Vec::new())
    }

    fn with(mut self, r: R) -> Verdict {
        self.reasons.push(r);
        self
    }
}

/// The verdict on one request.
pub(crate) fn decide(e: &Entry, cx: &Ctx) -> Verdict {
    let base = capped(e, cx, pair(e, cx));
    let mut v = faults(e, cx, base);
    // A stuck wait is said whatever became of the request.
    for f in e.facts.iter() {
        match &f.kind {
            F::Stuck { id, secs, begun, since, last, limit } if v.outcome != Outcome::Unknown => {
                v.reasons.push(R::Stuck {
                    id: id.clone(),
                    secs: *secs,
                    begun: *begun,
                    since: *since,
                    last: *last,
                    limit: *limit,
                });
            }
            F::WaitingAtEnd { secs, limit } => v.reasons.push(R::WaitingAtEnd { secs: *secs, limit: *limit }),
            F::NotifyFailed { text }
                if !v.reasons.iter().any(|r| matches!(r, R::Notify { .. } | R::NotifyExplains { .. })) =>
            {
                v.reasons.push(R::Notify { src: f.src, text: text.clone() });
                if e.facts.has(|k| *k == F::KvExpiredUnread) && v.outcome != Outcome::Error {
                    let src = e
                        .facts
                        .last(|k| (*k == F::KvExpiredUnread).then_some(()))
                        .map_or(f.src, |(x, _)| x.src);
                    v.reasons.push(R::ExpiredAsNotified { src });
                }
            }
            _ => {}
        }
    }
    v
}

/// An order join caps the verdict: never sure, and a miss only where the
/// proxy's flow vouches for the prefill.
fn capped(e: &Entry, cx: &Ctx, mut v: Verdict) -> Verdict {
    match e.trace.join {
        Join::ByOrder if v.outcome == Outcome::SilentMiss && !cx.guaranteed => {
            v = Verdict::new(Outcome::Unknown, Confidence::Unsure, vec![R::OrderOnly(v.reasons)]);
        }
        Join::ByOrder if matches!(v.outcome, Outcome::Pending | Outcome::Error | Outcome::Cancelled) => {}
        Join::ByOrder if cx.guaranteed => v.confidence = v.confidence.max(Confidence::Likely),
        Join::ByOrder => v.confidence = Confidence::Unsure,
        Join::ByPromptTokens | Join::ById => {}
    }
    v
}

/// The prefill's answer time against `t`.
fn finished(e: &Entry, t: f64) -> Finished {
    Finished::of(e.track.prefill_done, t)
}

/// What the pair did with the request, failures and cancels aside.
fn pair(e: &Entry, cx: &Ctx) -> Verdict {
    let (t, tk, facts) = (&e.trace, &e.track, &e.facts);
    let expired = facts.last(|k| (*k == F::KvExpiredUnread).then_some(()));
    let notified = facts.last(|k| match k {
        F::NotifyFailed { text } => Some(text.clone()),
        _ => None,
    });
    let joined = join_note(e);
    // The shared step's lengths settled it, or left it open.
    if let Some((_, (decode, hit, inject, own, group))) = facts.last(|k| match k {
        F::GroupSettled { decode, hit, inject, own, group } => Some((*decode, *hit, *inject, *own, group)),
        _ => None,
    }) {
        let (o, r) = match hit {
            true => (Outcome::Loaded, R::GroupLoaded { decode, inject, group: group.clone() }),
            false => (Outcome::SilentMiss, R::GroupMiss { decode, own, group: group.clone() }),
        };
        return Verdict::new(o, Confidence::Sure, vec![r]);
    }
    if let Some((_, r)) = facts.last(|k| match k {
        F::SharedStep { decode, others, hits, inject, rival } => Some(R::SharedStep {
            decode: *decode,
            others: others.clone(),
            hits: *hits,
            inject: *inject,
            rival: *rival,
            id: t.id.clone(),
        }),
        _ => None,
    }) {
        return Verdict::new(Outcome::Unknown, Confidence::Unsure, vec![r]);
    }
    // Loaded by kv_transfer_params (NIXL, Mooncake...).
    if let Some((pf, (remote, tokens, blocks))) = facts.last(|k| match k {
        F::Params { remote, tokens, blocks } => Some((remote.clone(), *tokens, *blocks)),
        _ => None,
    }) {
        if let (Some((xf, _)), None) = (expired, notified.as_ref()) {
            // Its instance died with it open: the expiry is the death's echo.
            if let Some((_, instance)) = facts.last(|k| match k {
                F::CutUndated { instance, .. } => Some(*instance),
                _ => None,
            }) {
                let mut v = Verdict::new(
                    Outcome::Error,
                    Confidence::Likely,
                    vec![R::DiedBeforePull { instance, src: xf.src }],
                );
                v.error_at = Some(Hop::Consumer);
                return v;
            }
            if t.join == Join::ById {
                return Verdict::new(
                    Outcome::SilentMiss,
                    Confidence::Sure,
                    vec![R::NeverPulled { remote: Some(remote) }],
                );
            }
        }
        // A full prefix-cache hit read nothing: served from the decode's own cache.
        let sure = if notified.is_some() { Confidence::Likely } else { Confidence::Sure };
        let (conf, first) = match t.prefill {
            Some(prefill) => {
                (sure, R::ParamsLoaded { prefill, remote, tokens, blocks, finished: finished(e, pf.t) })
            }
            None => (Confidence::Likely, R::ParamsUnseenPrefill { remote, tokens }),
        };
        let mut v = Verdict::new(Outcome::Loaded, conf, vec![first]);
        for f in facts.iter() {
            match &f.kind {
                F::TransferCounted { n } => {
                    if let LogOrigin::Decode(decode) = f.src {
                        v.reasons.push(R::TransferCounted { decode, n: *n });
                    }
                }
                F::TransferUncounted => {
                    v.confidence = v.confidence.max(Confidence::Likely);
                    v.reasons.push(R::TransferUncounted);
                }
                _ => {}
            }
        }
        if let Some((_, r)) = facts.last(|k| match k {
            F::Stuck { id, secs, begun, since, last, limit } => Some(R::Stuck {
                id: id.clone(),
                secs: *secs,
                begun: *begun,
                since: *since,
                last: *last,
                limit: *limit,
            }),
            _ => None,
        }) {
            // Params named the prefill, but the KV never came: not loaded.
            return Verdict::new(
                Outcome::Unknown,
                Confidence::Likely,
                vec![r, R::Was { outcome: Outcome::Loaded, reasons: v.reasons }],
            );
        }
        return v;
    }
    // An `External Cache Hit` the queue gave it.
    if let Some((hf, (contested, from_orphan))) = facts.last(|k| match k {
        F::Hit { contested, from_orphan, .. } => Some((*contested, *from_orphan)),
        _ => None,
    }) {
        let conf = if contested > 0 || from_orphan { Confidence::Likely } else { Confidence::Sure };
        let how = match (t.join, contested > 0) {
            (Join::ByOrder, _) => HitHow::PairedByOrder,
            (_, true) => HitHow::Contested,
            _ => HitHow::Alone,
        };
        let r =
            R::HitLoaded { inject: t.inject_tokens, prefill: t.prefill, finished: finished(e, hf.t), how };
        return Verdict::new(Outcome::Loaded, conf, vec![r]).with_all(joined);
    }
    if let Some((_, r)) = facts.last(|k| match k {
        F::TensorReceived { decode, peer, tensor } => {
            Some(R::TensorReceived { decode: *decode, peer: peer.clone(), tensor: tensor.clone() })
        }
        _ => None,
    }) {
        return Verdict::new(Outcome::Loaded, Confidence::Likely, vec![r]);
    }
    if let Some((_, decode)) = facts.last(|k| match k {
        F::LmcacheShortAmong { decode } => Some(*decode),
        _ => None,
    }) {
        return Verdict::new(Outcome::Unknown, Confidence::Likely, vec![R::LmcacheShortAmong { decode }]);
    }
    if let Some((_, (decode, hit, total, id))) = facts.last(|k| match k {
        F::LmcacheLookup { decode, hit, total, id } => Some((*decode, *hit, *total, id.clone())),
        _ => None,
    }) {
        let assumed = t.prefill.is_none();
        let conf = if assumed || hit <= 0.0 { Confidence::Likely } else { Confidence::Sure };
        let o = if hit > 0.0 { Outcome::Loaded } else { Outcome::SilentMiss };
        let r = R::Lmcache { decode, hit, total, id, assumed_prefill: assumed };
        return Verdict::new(o, conf, vec![r]);
    }
    // An early miss whose hit came late after all.
    if let Some((_, (decode, after))) = facts.last(|k| match k {
        F::LateHit { decode, after } => Some((*decode, *after)),
        _ => None,
    }) {
        return Verdict::new(Outcome::Unknown, Confidence::Unsure, vec![R::LateHit { decode, after }]);
    }
    let miss = |v: Verdict| match (notified.as_ref(), expired) {
        // A full prefix-cache hit read nothing: the expiry is no miss.
        (Some((nf, text)), Some(_)) => Verdict::new(
            Outcome::Unknown,
            Confidence::Likely,
            vec![
                R::NotifyExplains { src: nf.src, text: text.clone() },
                R::Was { outcome: v.outcome, reasons: v.reasons },
            ],
        ),
        (None, Some((xf, _))) => v.with(R::ExpiryConfirms { src: xf.src }),
        _ => v,
    };
    // A pull connector's decode request without params, after a prefill.
    if let (true, Some(prefill), Some(_)) = (facts.has(|k| *k == F::NoParams), t.prefill, t.decode)
        && cx.style == Style::Params
    {
        let v = Verdict::new(
            Outcome::SilentMiss,
            Confidence::Sure,
            vec![R::NoParams { prefill, connector: cx.connector.clone() }],
        )
        .with_all(joined);
        return miss(v);
    }
    if let Some((_, decode)) = facts.last(|k| match k {
        F::HitQueueFull { decode } => Some(*decode),
        _ => None,
    }) {
        return Verdict::new(Outcome::Unknown, Confidence::Unsure, vec![R::HitQueueFull { decode }]);
    }
    if let Some((nf, (decode, waited, busy, added_at))) = facts.last(|k| match k {
        F::NoHit { decode, waited, busy, added_at } => Some((*decode, *waited, *busy, *added_at)),
        _ => None,
    }) {
        if cx.style == Style::Unknown {
            let r = R::StyleUnknown { decode, connector: cx.connector.clone() };
            return Verdict::new(Outcome::Unknown, Confidence::Unsure, vec![r]);
        }
        // Paired by order: the proxy line that proves the prefill may still come.
        if t.join == Join::ByOrder
            && !cx.guaranteed
            && cx.proxy_read
            && !cx.bypass
            && !cx.force
            && cx.now - added_at < PROXY_WAIT_S
        {
            return Verdict::pending();
        }
        let prefill = t.prefill.unwrap_or(0);
        if cx.style == Style::Params {
            let v = Verdict::new(
                Outcome::SilentMiss,
                if busy { Confidence::Likely } else { Confidence::Sure },
                vec![R::NoParams { prefill, connector: cx.connector.clone() }],
            );
            return miss(v.with_all(joined));
        }
        let settle = cx.opts.settle_s;
        let called_early = !busy && waited < settle;
        let early = match (called_early, facts.has(|k| *k == F::EarlyContested)) {
            (false, _) => None,
            (true, true) => Some(Early::Contested),
            (true, false) if cx.force || cx.now - added_at >= settle => None,
            (true, false) => Some(Early::Due),
        };
        // Confirmed by `settle_s`: the whole wait is what it waited.
        let waited = if called_early && early.is_none() { settle } else { waited };
        let conf = if early.is_some() || busy { Confidence::Likely } else { Confidence::Sure };
        let r = R::NoHit {
            prefill,
            finished: finished(e, tk.decode_event_t.unwrap_or(nf.t)),
            waited,
            busy,
            early,
        };
        return miss(Verdict::new(Outcome::SilentMiss, conf, vec![r]).with_all(joined));
    }
    // The producer's KV expired unread, and the decode of the same id ran it.
    if let (Some((xf, _)), Some(decode), Some(_)) = (expired, t.decode, tk.decode_at)
        && t.join == Join::ById
    {
        let v = Verdict::new(
            Outcome::SilentMiss,
            Confidence::Likely,
            vec![R::ExpiredAfterDecode { decode, src: xf.src }],
        );
        return match notified {
            Some((nf, text)) => Verdict::new(
                Outcome::Unknown,
                Confidence::Likely,
                vec![
                    R::NotifyExplains { src: nf.src, text },
                    R::Was { outcome: v.outcome, reasons: v.reasons },
                ],
            ),
            None => v,
        };
    }
    if facts.has(|k| *k == F::RestartedBeforeLoad) {
        let r = R::RestartedBeforeLoad { decode: t.decode.unwrap_or(0) };
        return Verdict::new(Outcome::Unknown, Confidence::Likely, vec![r]);
    }
    if let Some((_, (instance, gap_s, stats_seen))) = facts.last(|k| match k {
        F::CutUndated { instance, gap_s, stats_seen } => Some((*instance, *gap_s, *stats_seen)),
        _ => None,
    }) {
        let r = R::CutUndated { instance, gap_s, stats_seen };
        return Verdict::new(Outcome::Unknown, Confidence::Likely, vec![r]);
    }
    if let Some((f, max_tokens)) = facts.last(|k| match k {
        F::ServedAlone { max_tokens } => Some(*max_tokens),
        _ => None,
    }) {
        return Verdict::new(
            Outcome::Unknown,
            Confidence::Sure,
            vec![R::ServedAlone { src: f.src, max_tokens }],
        );
    }
    if let Some((xf, _)) = expired
        && t.prefill.is_none()
        && t.decode.is_none()
    {
        // Only this line names it: no deadline of either side will judge it.
        return Verdict::new(Outcome::Unknown, Confidence::Likely, vec![R::ExpiredAlone { src: xf.src }]);
    }
    if let Some((nf, text)) = notified
        && t.prefill.is_none()
        && tk.decode_at.is_none()
    {
        // Only this line names it: nothing later will judge it.
        return Verdict::new(Outcome::Unknown, Confidence::Likely, vec![R::Notify { src: nf.src, text }]);
    }
    deadline(e, cx)
}

impl Verdict {
    fn with_all(mut self, rs: Vec<R>) -> Verdict {
        self.reasons.extend(rs);
        self
    }
}

/// The notes a join adds: the prompt length that made it, the copy it
/// was re-paired with.
fn join_note(e: &Entry) -> Vec<R> {
    let mut out = Vec::new();
    if e.trace.join == Join::ByPromptTokens
        && let Some(n) = e.trace.prompt_tokens.or(e.track.prefill_tokens)
    {
        if e.track.same_length_copies.is_empty() {
            out.push(R::PairedByTokens { n });
        } else {
            out.push(R::PairedAmong { n, copies: e.track.same_length_copies.clone() });
        }
    }
    if e.track.repaired
        && let Some((_, id)) = e.trace.engine_ids.iter().find(|(o, _)| matches!(o, LogOrigin::Prefill(_)))
    {
        out.push(R::RepairedCopy { id: id.clone() });
    }
    out
}

/// Verdicts time allows: a request seen on one side only, once its window
/// has passed.
fn deadline(e: &Entry, cx: &Ctx) -> Verdict {
    let (t, tk, o) = (&e.trace, &e.track, cx.opts);
    let due = |since: f64, wait: f64| cx.force || cx.now - since >= wait;
    let expired = e.facts.last(|k| (*k == F::KvExpiredUnread).then_some(()));
    match (t.prefill, t.decode, tk.decode_at) {
        (Some(prefill), Some(decode), Some(dat)) => {
            // Prefilled, param-less, and no `Added` line came to queue it.
            if tk.in_hit_queue || !due(dat, o.settle_busy_s) {
                return Verdict::pending();
            }
            Verdict::new(Outcome::Unknown, Confidence::Likely, vec![R::NoAddedLine { prefill, decode }])
        }
        (None, Some(decode), Some(dat)) => {
            // A late-read prefill may still join within the settle time.
            if !due(dat, o.settle_s) {
                return Verdict::pending();
            }
            if !cx.prefill_read {
                Verdict::new(Outcome::Unknown, Confidence::Likely, vec![R::NoPrefillLog { decode }])
            } else if !cx.waiting_copies.is_empty() {
                let r = R::CopyWaiting { decode, copies: cx.waiting_copies.clone() };
                Verdict::new(Outcome::Unknown, Confidence::Unsure, vec![r])
            } else if cx.id_known {
                let c = if cx.ids_shared { Confidence::Sure } else { Confidence::Likely };
                Verdict::new(Outcome::NoPrefill, c, vec![R::NoPrefillById { id: t.id.clone(), decode }])
            } else if cx.direct && cx.flow_established {
                Verdict::new(Outcome::NoPrefill, Confidence::Likely, vec![R::NoPrefillByFlow { decode }])
            } else {
                let r = R::NoSharedIds { window: o.order_window_s };
                Verdict::new(Outcome::Unknown, Confidence::Unsure, vec![r])
            }
        }
        (Some(prefill), None, _) => {
            if !due(tk.prefill_at.unwrap_or(t.first_seen), o.prefill_only_timeout_s) {
                return Verdict::pending();
            }
            let r = R::PrefillOnly { prefill, decode_read: cx.decode_read, expired: expired.is_some() };
            Verdict::new(Outcome::Unknown, Confidence::Likely, vec![r])
        }
        _ => {
            if !due(t.first_seen, o.proxy_only_timeout_s) {
                return Verdict::pending();
            }
            // Lines of an instance named it (a connector's, a wait), but
            // neither its arrival nor what decode did with it.
            let named: Vec<(Hop, LogOrigin, String)> = t
                .phases
                .iter()
                .filter(|p| p.hop != Hop::Proxy && !p.detail.is_empty())
                .map(|p| (p.hop, p.source, p.detail.clone()))
                .collect();
            let r = if named.is_empty() { R::ProxyOnly } else { R::NamedOnly { named } };
            Verdict::new(Outcome::Unknown, Confidence::Unsure, vec![r])
        }
    }
}

/// Failures and the client's abort over what the pair did (`base`).
fn faults(e: &Entry, cx: &Ctx, base: Verdict) -> Verdict {
    let facts = &e.facts;
    let fails: Vec<(usize, &super::evidence::Fact, &Failure)> = facts.failures().collect();
    let abort = facts.abort();
    if fails.is_empty() && abort.is_none() {
        return base;
    }
    let before = || match base.outcome {
        Outcome::Pending | Outcome::Error | Outcome::Cancelled => Vec::new(),
        Outcome::Loaded | Outcome::SilentMiss => {
            vec![R::CancelledAfter { outcome: base.outcome, reasons: base.reasons.clone() }]
        }
        _ => Vec::new(),
    };
    if fails.is_empty() {
        let (_, c) = abort.expect("an abort");
        let mut reasons = vec![R::Cancelled { src: c.src }];
        reasons.extend(before());
        if let Some((xf, _)) = facts.last(|k| (*k == F::KvExpiredUnread).then_some(())) {
            reasons.push(R::ExpiredAfterAbort { src: xf.src });
        }
        return Verdict::new(Outcome::Cancelled, Confidence::Sure, reasons);
    }
    let words = |f: &super::evidence::Fact, x: &Failure| R::Failed {
        hop: x.hop,
        src: f.src,
        what: x.what.clone(),
        by_proxy: x.by_proxy,
    };
    if let Some((ci, c)) = abort {
        match abort::order(c, ci, &fails) {
            Ordered::Cancel { ties } => {
                let mut reasons = vec![R::Cancelled { src: c.src }];
                reasons.extend(before());
                let mut conf = Confidence::Sure;
                for (_, f, x) in &fails {
                    let w = Box::new(words(f, x));
                    if ties.contains(&(f.src, f.t)) {
                        conf = Confidence::Likely;
                        reasons.push(R::SameSecond { what: w });
                    } else {
                        reasons.push(R::AbortEcho { what: w });
                    }
                }
                if let Some((xf, _)) = facts.last(|k| (*k == F::KvExpiredUnread).then_some(())) {
                    reasons.push(R::ExpiredAfterAbort { src: xf.src });
                }
                return Verdict::new(Outcome::Cancelled, conf, reasons);
            }
            Ordered::Error { own_abort } => {
                let mut v = error(e, cx, &fails, base);
                v.reasons.push(if own_abort { R::VllmOwnAbort } else { R::AbortCameAfter });
                return v;
            }
        }
    }
    error(e, cx, &fails, base)
}

/// The error the failures make, with what else was known.
fn error(e: &Entry, cx: &Ctx, fails: &[(usize, &super::evidence::Fact, &Failure)], base: Verdict) -> Verdict {
    let facts = &e.facts;
    let (_, f0, x0) = fails[0];
    // The first failure names the hop; a later one that names an
    // instance's or the connector's hop replaces a blame on the proxy.
    let (hop, conf0) = fails
        .iter()
        .find(|(_, _, x)| x0.hop == Hop::Proxy && x.hop != Hop::Proxy)
        .map_or((x0.hop, x0.confidence), |(_, _, x)| (x.hop, x.confidence));
    let mut reasons = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for (k, (_, f, x)) in fails.iter().enumerate() {
        if seen.contains(&x.what.as_str()) {
            continue;
        }
        seen.push(&x.what);
        let r = R::Failed { hop: x.hop, src: f.src, what: x.what.clone(), by_proxy: x.by_proxy };
        reasons.push(if k == 0 { r } else { R::Then(Box::new(r)) });
    }
    let _ = f0;
    let mut conf = conf0;
    if x0.by_proxy && e.trace.join == Join::ByOrder {
        conf = conf.max(Confidence::Likely);
    }
    let after = facts.last(|k| match k {
        F::AfterFailedPrefill { decode, pull_without_params } => Some((*decode, *pull_without_params)),
        _ => None,
    });
    let failed_prefill = hop == Hop::Producer && e.trace.prefill.is_some();
    if let (Some((_, (decode, pull))), true) = (after, failed_prefill) {
        let by_order = e.trace.join == Join::ByOrder;
        if by_order {
            conf = Confidence::Unsure;
        }
        let pull_without_params = pull.then(|| cx.connector.clone());
        reasons.push(R::AfterFailedPrefill { decode, by_order, pull_without_params });
        // What decode did is evidence on the error, not a second verdict.
        if facts.has(|k| matches!(k, F::Hit { .. })) {
            reasons.push(R::LoadedDespiteFailedPrefill { decode, by_order });
            if by_order {
                conf = Confidence::Unsure;
            }
        } else if facts.has(|k| matches!(k, F::NoHit { .. })) {
            reasons.push(R::FoundNoKv { decode });
        }
    } else if !matches!(base.outcome, Outcome::Pending | Outcome::Error | Outcome::Cancelled) {
        reasons.push(R::Was { outcome: base.outcome, reasons: base.reasons });
    }
    for f in facts.iter() {
        match &f.kind {
            F::ProxyAnswered { status } => reasons.push(R::ProxyAnswered { status: *status }),
            F::KvExpiredUnread => reasons.push(R::Expired { src: f.src }),
            F::LoadRecovered { n, matched: false } => {
                conf = conf.max(Confidence::Likely);
                reasons.push(R::MaybeRecomputed { src: f.src, n: *n });
            }
            _ => {}
        }
    }
    // The scheduler recomputed the failed load: the KV moved was not used.
    if let Some((rf, n)) = facts.last(|k| match k {
        F::LoadRecovered { n, matched: true } => Some(*n),
        _ => None,
    }) {
        reasons.push(R::Recomputed { src: rf.src, n });
        return Verdict::new(Outcome::SilentMiss, Confidence::Likely, reasons);
    }
    let mut v = Verdict::new(Outcome::Error, conf, reasons);
    v.error_at = Some(hop);
    v
}
