//! What the pair did with the KV: loaded, missed, or not known from the
//! lines; the notes a join adds.

use super::time;
use super::verdict::{Ctx, Verdict, finished};
use crate::feed::LogOrigin;
use crate::traces::evidence::FactKind as F;
use crate::traces::model::hop_of;
use crate::traces::model::{Confidence, Join, Outcome};
use crate::traces::proxy::flow::PROXY_WAIT_S;
use crate::traces::reason::{Early, HitHow, Reason as R};
use crate::traces::store::Entry;
use crate::traces::style::Style;

/// What the pair did with the request, failures and cancels aside.
pub(super) fn pair(e: &Entry, cx: &Ctx) -> Verdict {
    let (t, tk, facts) = (&e.trace, &e.track, &e.facts);
    let expired = facts.last(|k| (*k == F::KvExpiredUnread).then_some(()));
    let notified = facts.last(|k| match k {
        F::NotifyFailed { text } => Some(text.clone()),
        _ => None,
    });
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
                v.error_at = Some(hop_of(instance));
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
        if let Some(r) = cut_undated(e) {
            // The kill may have cut its stream after the load.
            return Verdict::new(
                Outcome::Unknown,
                Confidence::Likely,
                vec![r, R::Was { outcome: Outcome::Loaded, reasons: v.reasons }],
            );
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
        return Verdict::new(Outcome::Loaded, conf, vec![r]);
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
        );
        return miss(v);
    }
    if let Some((_, decode)) = facts.last(|k| match k {
        F::HitQueueFull { decode } => Some(*decode),
        _ => None,
    }) {
        return Verdict::new(Outcome::Unknown, Confidence::Unsure, vec![R::HitQueueFull { decode }]);
    }
    // No hit after the whole wait; or, called early, none yet.
    let no_hit = facts.last(|k| match k {
        F::NoHit { decode, waited, busy, added_at } => Some((*decode, *waited, *busy, *added_at, false)),
        _ => None,
    });
    let no_hit = no_hit.or_else(|| {
        facts.last(|k| match k {
            F::NoHitYet { decode, waited, added_at } => Some((*decode, *waited, false, *added_at, true)),
            _ => None,
        })
    });
    if let Some((nf, (decode, waited, busy, added_at, early))) = no_hit {
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
            return miss(v);
        }
        let early = early.then_some(Early::Due);
        let conf = if early.is_some() || busy { Confidence::Likely } else { Confidence::Sure };
        let r = R::NoHit {
            prefill,
            finished: finished(e, tk.decode_event_t.unwrap_or(nf.t)),
            waited,
            busy,
            early,
        };
        return miss(Verdict::new(Outcome::SilentMiss, conf, vec![r]));
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
    if let Some(r) = cut_undated(e) {
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
    time::deadline(e, cx)
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
