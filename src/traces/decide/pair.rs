//! What the pair did with the KV: loaded, missed, or not known from the
//! lines; the notes a join adds.
//!
//! A table of small rules, tried in order; the first that speaks decides.
//! The order is the meaning: what the decode's own lines proved of the
//! load (a settled group, params, a hit, a tensor, a lookup) outranks what
//! their absence suggests (no params, no hit), and that outranks what
//! only time or a single line can say.

use super::time;
use super::verdict::{Ctx, Verdict, finished};
use crate::feed::LogOrigin;
use crate::traces::evidence::{Fact, FactKind as F};
use crate::traces::model::hop_of;
use crate::traces::model::{Confidence, Join, Outcome};
use crate::traces::proxy::flow::PROXY_WAIT_S;
use crate::traces::reason::{Early, HitHow, Reason as R};
use crate::traces::store::Entry;
use crate::traces::style::Style;

/// The facts several rules read, found once.
pub(super) struct Seen<'a> {
    /// The producer released its KV unread.
    expired: Option<&'a Fact>,
    /// NIXL's `notification_failed`, and its text.
    notified: Option<(&'a Fact, String)>,
}

impl<'a> Seen<'a> {
    fn of(e: &'a Entry) -> Seen<'a> {
        Seen {
            expired: e.facts.last(|k| (*k == F::KvExpiredUnread).then_some(())).map(|(f, _)| f),
            notified: e.facts.last(|k| match k {
                F::NotifyFailed { text } => Some(text.clone()),
                _ => None,
            }),
        }
    }
}

type Rule = fn(&Entry, &Ctx, &Seen) -> Option<Verdict>;

/// The rules, in the order they are tried.
pub(super) const RULES: &[(&str, Rule)] = &[
    ("group settled", group_settled),
    ("shared step", shared_step),
    ("params", params),
    ("hit", hit),
    ("tensor received", tensor_received),
    ("lmcache short among", lmcache_short_among),
    ("lmcache lookup", lmcache_lookup),
    ("no params", no_params),
    ("hit queue full", hit_queue_full),
    ("no hit", no_hit),
    ("expired after decode", expired_after_decode),
    ("restarted before load", restarted_before_load),
    ("cut undated", cut),
    ("served alone", served_alone),
    ("expired alone", expired_alone),
    ("notify alone", notify_alone),
];

/// What the pair did with the request, failures and cancels aside.
pub(super) fn pair(e: &Entry, cx: &Ctx) -> Verdict {
    let seen = Seen::of(e);
    RULES.iter().find_map(|(_, rule)| rule(e, cx, &seen)).unwrap_or_else(|| time::deadline(e, cx))
}

/// The shared step's lengths settled it.
fn group_settled(e: &Entry, _: &Ctx, _: &Seen) -> Option<Verdict> {
    let (_, (decode, hit, inject, own, group)) = e.facts.last(|k| match k {
        F::GroupSettled { decode, hit, inject, own, group } => Some((*decode, *hit, *inject, *own, group)),
        _ => None,
    })?;
    let (o, r) = match hit {
        true => (Outcome::Loaded, R::GroupLoaded { decode, inject, group: group.clone() }),
        false => (Outcome::SilentMiss, R::GroupMiss { decode, own, group: group.clone() }),
    };
    Some(Verdict::new(o, Confidence::Sure, vec![r]))
}

/// Scheduled with others, fewer hits than members: which one missed is open.
fn shared_step(e: &Entry, _: &Ctx, _: &Seen) -> Option<Verdict> {
    let (_, r) = e.facts.last(|k| match k {
        F::SharedStep { decode, others, hits, inject, rival } => Some(R::SharedStep {
            decode: *decode,
            others: others.clone(),
            hits: *hits,
            inject: *inject,
            rival: *rival,
            id: e.trace.id.clone(),
        }),
        _ => None,
    })?;
    Some(Verdict::new(Outcome::Unknown, Confidence::Unsure, vec![r]))
}

/// Loaded by `kv_transfer_params` (NIXL, Mooncake...), unless the KV
/// expired unread, the instance died with it, or it never came.
fn params(e: &Entry, cx: &Ctx, seen: &Seen) -> Option<Verdict> {
    let (t, facts) = (&e.trace, &e.facts);
    let (pf, (remote, tokens, blocks)) = facts.last(|k| match k {
        F::Params { remote, tokens, blocks } => Some((remote.clone(), *tokens, *blocks)),
        _ => None,
    })?;
    if let (Some(xf), None) = (seen.expired, seen.notified.as_ref()) {
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
            v.error_at = Some(hop_of(instance));
            return Some(v);
        }
        // Not read within the producer's lease, which is no recompute: a
        // decode given params reads or fails. NIXL's decode reads late
        // blocks (the producer then says `Potentially invalid`), or fails
        // on a line of its own, and reads even for a full prefix hit, to
        // free them; Mooncake's waits on its pull until that fails. Until
        // one of those lines, it is open; at the run's end, not known.
        if t.join == Join::ById {
            let r = R::NotReadYet { remote: Some(remote) };
            let v = match cx.force {
                false => Verdict::new(Outcome::Pending, Confidence::Sure, vec![r]),
                true => Verdict::new(Outcome::Unknown, Confidence::Likely, vec![r]),
            };
            return Some(v);
        }
    }
    // A full prefix-cache hit read nothing: served from the decode's own
    // cache. Otherwise its read may still fail: NIXL prints failures only,
    // and in router-nixl-1p2d 46 reads said loaded failed later. Sure once
    // its decode's transfer counts covered it, or once the run ended with
    // no failure named.
    let counted = facts.has(|k| matches!(k, F::TransferCounted { .. }));
    let sure = match (seen.notified.is_some(), counted || cx.force) {
        (false, true) => Confidence::Sure,
        _ => Confidence::Likely,
    };
    let (conf, first) = match t.prefill {
        Some(prefill) => {
            (sure, R::ParamsLoaded { prefill, remote, tokens, blocks, finished: finished(e, pf.t) })
        }
        None => (Confidence::Likely, R::ParamsUnseenPrefill { remote, tokens }),
    };
    let mut v = Verdict::new(Outcome::Loaded, conf, vec![first]);
    if t.prefill.is_some() && seen.notified.is_none() && conf == Confidence::Likely {
        v.reasons.push(R::ReadMayFail);
    }
    for f in facts.iter() {
        if let (F::TransferCounted { counted, loads }, LogOrigin::Decode(decode)) = (&f.kind, f.src) {
            v.reasons.push(R::TransferCounted { decode, counted: *counted, loads: *loads });
        }
    }
    let was = |first: R, v: Verdict| {
        Verdict::new(
            Outcome::Unknown,
            Confidence::Likely,
            vec![first, R::Was { outcome: v.outcome, reasons: v.reasons }],
        )
    };
    // The kill may have cut its stream after the load.
    if let Some(r) = cut_undated(e) {
        return Some(was(r, v));
    }
    // Params named the prefill, but the KV never came: not loaded.
    if let Some((_, r)) = facts.last(super::verdict::stuck) {
        return Some(was(r, v));
    }
    Some(v)
}

/// An `External Cache Hit` the queue gave it.
fn hit(e: &Entry, _: &Ctx, _: &Seen) -> Option<Verdict> {
    let t = &e.trace;
    let (hf, (contested, from_orphan)) = e.facts.last(|k| match k {
        F::Hit { contested, from_orphan, .. } => Some((*contested, *from_orphan)),
        _ => None,
    })?;
    let conf = if contested > 0 || from_orphan { Confidence::Likely } else { Confidence::Sure };
    let how = match (t.join, contested > 0) {
        (Join::ByOrder, _) => HitHow::PairedByOrder,
        (_, true) => HitHow::Contested,
        _ => HitHow::Alone,
    };
    let r = R::HitLoaded { inject: t.inject_tokens, prefill: t.prefill, finished: finished(e, hf.t), how };
    Some(Verdict::new(Outcome::Loaded, conf, vec![r]))
}

/// P2pNccl: its KV tensor arrived on the decode.
fn tensor_received(e: &Entry, _: &Ctx, _: &Seen) -> Option<Verdict> {
    let (_, r) = e.facts.last(|k| match k {
        F::TensorReceived { decode, peer, tensor } => {
            Some(R::TensorReceived { decode: *decode, peer: peer.clone(), tensor: tensor.clone() })
        }
        _ => None,
    })?;
    Some(Verdict::new(Outcome::Loaded, Confidence::Likely, vec![r]))
}

/// An LMCache load came back short among several that had just hit.
fn lmcache_short_among(e: &Entry, _: &Ctx, _: &Seen) -> Option<Verdict> {
    let (_, decode) = e.facts.last(|k| match k {
        F::LmcacheShortAmong { decode } => Some(*decode),
        _ => None,
    })?;
    Some(Verdict::new(Outcome::Unknown, Confidence::Likely, vec![R::LmcacheShortAmong { decode }]))
}

/// LMCache's lookup on the decode: a hit loads, none recomputes.
fn lmcache_lookup(e: &Entry, _: &Ctx, _: &Seen) -> Option<Verdict> {
    let (_, (decode, hit, total, id)) = e.facts.last(|k| match k {
        F::LmcacheLookup { decode, hit, total, id } => Some((*decode, *hit, *total, id.clone())),
        _ => None,
    })?;
    let assumed = e.trace.prefill.is_none();
    let conf = if assumed || hit <= 0.0 { Confidence::Likely } else { Confidence::Sure };
    let o = if hit > 0.0 { Outcome::Loaded } else { Outcome::SilentMiss };
    let r = R::Lmcache { decode, hit, total, id, assumed_prefill: assumed };
    Some(Verdict::new(o, conf, vec![r]))
}

/// A miss as the expiry and NIXL's notification leave it: the expiry
/// confirms it, unless the decode's own prefix cache explains both.
fn miss(v: Verdict, seen: &Seen) -> Verdict {
    match (seen.notified.as_ref(), seen.expired) {
        // A full prefix-cache hit read nothing: the expiry is no miss.
        (Some((nf, text)), Some(_)) => Verdict::new(
            Outcome::Unknown,
            Confidence::Likely,
            vec![
                R::NotifyExplains { src: nf.src, text: text.clone() },
                R::Was { outcome: v.outcome, reasons: v.reasons },
            ],
        ),
        (None, Some(xf)) => v.with(R::ExpiryConfirms { src: xf.src }),
        _ => v,
    }
}

/// A pull connector's decode request without params, after a prefill.
fn no_params(e: &Entry, cx: &Ctx, seen: &Seen) -> Option<Verdict> {
    let t = &e.trace;
    let (true, Some(prefill), Some(_)) = (e.facts.has(|k| *k == F::NoParams), t.prefill, t.decode) else {
        return None;
    };
    if cx.style != Style::Params {
        return None;
    }
    let r = R::NoParams { prefill, connector: cx.connector.clone() };
    Some(miss(Verdict::new(Outcome::SilentMiss, Confidence::Sure, vec![r]), seen))
}

/// Too many requests waited for a hit to follow this one.
fn hit_queue_full(e: &Entry, _: &Ctx, _: &Seen) -> Option<Verdict> {
    let (_, decode) = e.facts.last(|k| match k {
        F::HitQueueFull { decode } => Some(*decode),
        _ => None,
    })?;
    Some(Verdict::new(Outcome::Unknown, Confidence::Unsure, vec![R::HitQueueFull { decode }]))
}

/// No hit after the whole wait; or, called early, none yet.
fn no_hit(e: &Entry, cx: &Ctx, seen: &Seen) -> Option<Verdict> {
    let (t, tk) = (&e.trace, &e.track);
    let found = e
        .facts
        .last(|k| match k {
            F::NoHit { decode, waited, busy, added_at } => Some((*decode, *waited, *busy, *added_at, false)),
            _ => None,
        })
        .or_else(|| {
            e.facts.last(|k| match k {
                F::NoHitYet { decode, waited, added_at } => Some((*decode, *waited, false, *added_at, true)),
                _ => None,
            })
        });
    let (nf, (decode, waited, busy, added_at, early)) = found?;
    if cx.style == Style::Unknown {
        let r = R::StyleUnknown { decode, connector: cx.connector.clone() };
        return Some(Verdict::new(Outcome::Unknown, Confidence::Unsure, vec![r]));
    }
    // Paired by order: the proxy line that proves the prefill may still come.
    if t.join == Join::ByOrder
        && !cx.guaranteed
        && cx.proxy_read
        && !cx.bypass
        && !cx.force
        && cx.now - added_at < PROXY_WAIT_S
    {
        return Some(Verdict::pending());
    }
    let prefill = t.prefill.unwrap_or(0);
    if cx.style == Style::Params {
        let conf = if busy { Confidence::Likely } else { Confidence::Sure };
        let r = R::NoParams { prefill, connector: cx.connector.clone() };
        return Some(miss(Verdict::new(Outcome::SilentMiss, conf, vec![r]), seen));
    }
    let early = early.then_some(Early::Due);
    let conf = if early.is_some() || busy { Confidence::Likely } else { Confidence::Sure };
    let finished = finished(e, tk.decode_event_t.unwrap_or(nf.t));
    let r = R::NoHit { prefill, by_order: t.join == Join::ByOrder, finished, waited, busy, early };
    Some(miss(Verdict::new(Outcome::SilentMiss, conf, vec![r]), seen))
}

/// The producer's KV expired unread, and the decode of the same id ran it.
fn expired_after_decode(e: &Entry, _: &Ctx, seen: &Seen) -> Option<Verdict> {
    let (t, tk) = (&e.trace, &e.track);
    let (Some(xf), Some(decode), Some(_)) = (seen.expired, t.decode, tk.decode_at) else {
        return None;
    };
    if t.join != Join::ById {
        return None;
    }
    let v = Verdict::new(
        Outcome::SilentMiss,
        Confidence::Likely,
        vec![R::ExpiredAfterDecode { decode, src: xf.src }],
    );
    Some(match &seen.notified {
        Some((nf, text)) => Verdict::new(
            Outcome::Unknown,
            Confidence::Likely,
            vec![
                R::NotifyExplains { src: nf.src, text: text.clone() },
                R::Was { outcome: v.outcome, reasons: v.reasons },
            ],
        ),
        None => v,
    })
}

/// The decode restarted before its load could be seen.
fn restarted_before_load(e: &Entry, _: &Ctx, _: &Seen) -> Option<Verdict> {
    e.facts.has(|k| *k == F::RestartedBeforeLoad).then(|| {
        let r = R::RestartedBeforeLoad { decode: e.trace.decode.unwrap_or(0) };
        Verdict::new(Outcome::Unknown, Confidence::Likely, vec![r])
    })
}

/// Its instance was killed with its stream open, when is not known.
fn cut(e: &Entry, _: &Ctx, _: &Seen) -> Option<Verdict> {
    cut_undated(e).map(|r| Verdict::new(Outcome::Unknown, Confidence::Likely, vec![r]))
}

/// The prefill instance served it alone: no pair was asked to.
fn served_alone(e: &Entry, _: &Ctx, _: &Seen) -> Option<Verdict> {
    let (f, max_tokens) = e.facts.last(|k| match k {
        F::ServedAlone { max_tokens } => Some(*max_tokens),
        _ => None,
    })?;
    Some(Verdict::new(Outcome::Unknown, Confidence::Sure, vec![R::ServedAlone { src: f.src, max_tokens }]))
}

/// Only the expiry names it: no deadline of either side will judge it.
fn expired_alone(e: &Entry, _: &Ctx, seen: &Seen) -> Option<Verdict> {
    let xf = seen.expired?;
    (e.trace.prefill.is_none() && e.trace.decode.is_none())
        .then(|| Verdict::new(Outcome::Unknown, Confidence::Likely, vec![R::ExpiredAlone { src: xf.src }]))
}

/// Only NIXL's notification names it: nothing later will judge it.
fn notify_alone(e: &Entry, _: &Ctx, seen: &Seen) -> Option<Verdict> {
    let (nf, text) = seen.notified.as_ref()?;
    (e.trace.prefill.is_none() && e.track.decode_at.is_none()).then(|| {
        Verdict::new(
            Outcome::Unknown,
            Confidence::Likely,
            vec![R::Notify { src: nf.src, text: text.clone() }],
        )
    })
}

/// Its instance was killed with its stream open at an unknown moment.
fn cut_undated(e: &Entry) -> Option<R> {
    e.facts
        .last(|k| match k {
            F::CutUndated { instance, gap_s, stats_seen } => {
                Some(R::CutUndated { instance: *instance, gap_s: *gap_s, stats_seen: *stats_seen })
            }
            _ => None,
        })
        .map(|(_, r)| r)
}

/// The notes a join adds: the prompt length that made it, the copy it
/// was re-paired with.
pub(super) fn join_note(e: &Entry) -> Vec<R> {
    let mut out = Vec::new();
    if e.trace.join == Join::ByPromptTokens
        && let Some(n) = e.trace.prompt_tokens.or(e.track.prefill_tokens)
    {
        if e.track.same_length_copies.is_empty() && e.track.unsized_copies.is_empty() {
            out.push(R::PairedByTokens { n });
        } else {
            out.push(R::PairedAmong {
                n,
                copies: e.track.same_length_copies.clone(),
                unknown_length: e.track.unsized_copies.clone(),
            });
        }
    }
    if e.track.repaired
        && let Some((_, id)) = e.trace.engine_ids.iter().find(|(o, _)| matches!(o, LogOrigin::Prefill(_)))
    {
        out.push(R::RepairedCopy { id: id.clone() });
    }
    out
}

#[cfg(test)]
mod tests;
