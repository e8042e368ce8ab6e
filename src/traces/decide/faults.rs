//! Failures and the client's abort: an error at the failing hop or a
//! cancel, over what the pair did.

use super::verdict::{Ctx, Verdict};
use crate::traces::abort::{self, Ordered};
use crate::traces::evidence::{Fact, FactKind as F, Failure};
use crate::traces::model::{Confidence, Hop, Join, Outcome};
use crate::traces::reason::Reason as R;
use crate::traces::store::Entry;

/// Failures and the client's abort over what the pair did (`base`).
pub(super) fn faults(e: &Entry, cx: &Ctx, base: Verdict) -> Verdict {
    let facts = &e.facts;
    // In the order they happened (two logs are read apart), then as read.
    let mut fails: Vec<(usize, &Fact, &Failure)> = facts.failures().collect();
    fails.sort_by(|a, b| a.1.t.total_cmp(&b.1.t).then(a.0.cmp(&b.0)));
    let abort = facts.abort();
    if fails.is_empty() && abort.is_none() {
        return base;
    }
    // The client gave up on a decode that was waiting for KV that could
    // no longer come: the load failed, whatever the connector printed
    // after (Mooncake's decode waits on; nothing fails it).
    if let Some((_, c)) = abort
        && let Some(r) = never_came(facts, c.t)
    {
        let mut v = Verdict::new(Outcome::Error, Confidence::Likely, vec![r, R::Cancelled { src: c.src }]);
        v.error_at = Some(Hop::Connector);
        return v;
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
    let words = |f: &Fact, x: &Failure| R::Failed {
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
fn error(e: &Entry, cx: &Ctx, fails: &[(usize, &Fact, &Failure)], base: Verdict) -> Verdict {
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
        let computed = pull || facts.has(|k| matches!(k, F::NoHit { .. }));
        if facts.has(|k| matches!(k, F::Hit { .. })) {
            reasons.push(R::LoadedDespiteFailedPrefill { decode, by_order });
            if by_order {
                conf = Confidence::Unsure;
            }
        } else if computed {
            if !pull {
                reasons.push(R::FoundNoKv { decode });
            }
            // The proxy hid the prefill's failure and decode served the
            // request whole, computing the prompt: the client got its
            // answer, and it is a miss, the prefill's failure its cause.
            // Paired by order with the refusal, a request whose id was
            // forwarded was surely proxied: only which refusal was its
            // copy is a guess.
            let forwarded = !crate::traces::ids::invented(crate::traces::ids::base_id(&e.trace.id));
            let decode_failed = fails.iter().any(|(_, _, x)| x.hop != Hop::Producer);
            if (!by_order || forwarded) && !decode_failed && e.trace.decode.is_some() {
                let conf = if by_order { Confidence::Likely } else { conf };
                return Verdict::new(Outcome::SilentMiss, conf, reasons);
            }
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
    // The decode's policy is to recompute a failed load: it did (vLLM's
    // scheduler reschedules every request with invalid blocks).
    if let Some((rf, _)) = facts.last(|k| (*k == F::PolicyRecompute).then_some(())) {
        reasons.push(R::RecomputedByPolicy { src: rf.src });
        return Verdict::new(Outcome::SilentMiss, Confidence::Sure, reasons);
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

/// The decode was to load (it got params) and read nothing, and before
/// the abort its KV was gone: died with its prefill, or freed unread.
fn never_came(facts: &crate::traces::evidence::Facts, abort_t: f64) -> Option<R> {
    if !facts.has(|k| matches!(k, F::Params { .. })) || facts.has(F::is_read) {
        return None;
    }
    facts.iter().find_map(|f| match f.kind {
        F::KvLost if f.t <= abort_t => Some(R::KvNeverCame { src: f.src, lost: true }),
        F::KvExpiredUnread if f.t <= abort_t => Some(R::KvNeverCame { src: f.src, lost: false }),
        _ => None,
    })
}
