//! The words for what the pair did: loads, misses, how the sides were joined.

use std::fmt;

use super::kinds::*;
use crate::feed::LogOrigin;

/// Whether the reason is one of this file's.
pub(super) fn owns(r: &Reason) -> bool {
    use Reason as R;
    matches!(
        r,
        R::ParamsLoaded { .. }
            | R::ParamsUnseenPrefill { .. }
            | R::HitLoaded { .. }
            | R::TensorReceived { .. }
            | R::Lmcache { .. }
            | R::GroupLoaded { .. }
            | R::TransferCounted { .. }
            | R::ReadMayFail
            | R::NoParams { .. }
            | R::NoHit { .. }
            | R::NotReadYet { .. }
            | R::ExpiredAfterDecode { .. }
            | R::ExpiryConfirms { .. }
            | R::GroupMiss { .. }
            | R::Recomputed { .. }
            | R::RecomputedByPolicy { .. }
            | R::StaleKv { .. }
            | R::PairedByTokens { .. }
            | R::PairedAmong { .. }
            | R::RepairedCopy { .. }
            | R::DiedBeforePull { .. }
    )
}

pub(super) fn fmt(r: &Reason, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    use Reason as R;
    match r {
        R::ParamsLoaded { prefill, remote, tokens, blocks, finished } => write!(
            f,
            "kv_transfer_params from prefill#{prefill}: {} tokens in {} blocks ({remote}){finished}",
            opt(*tokens),
            opt(*blocks)
        ),
        R::ParamsUnseenPrefill { remote, tokens } => write!(
            f,
            "kv_transfer_params name prefill request {remote} ({} tokens), which no prefill log showed",
            opt(*tokens)
        ),
        R::HitLoaded { inject, prefill, finished, how } => {
            match inject {
                Some(n) => write!(f, "Inject {n} tokens")?,
                None => f.write_str("External Cache Hit")?,
            }
            if let Some(pi) = prefill {
                write!(f, " after prefill on prefill#{pi} finished{finished}")?;
            }
            match how {
                HitHow::PairedByOrder => f.write_str(" (prefill paired by arrival order only)"),
                HitHow::Contested => f.write_str(" (attributed by arrival order among concurrent requests)"),
                HitHow::Alone => Ok(()),
            }
        }
        R::TensorReceived { decode, peer, tensor } => {
            write!(f, "P2pNccl on decode#{decode} received its KV tensor from {peer} ({tensor})")
        }
        R::Lmcache { decode, hit, total, id, assumed_prefill } => {
            let src = LogOrigin::Decode(*decode);
            if *hit > 0.0 {
                write!(f, "LMCache on {src}: hit {hit} of {total} tokens (`Reqid: {id}`)")?;
            } else {
                write!(f, "LMCache on {src}: hit tokens 0 of {total}, prompt recomputed (`Reqid: {id}`)")?;
            }
            if *assumed_prefill {
                f.write_str("; no prefill log: prefilled is assumed from the decode role")?;
            }
            Ok(())
        }
        R::GroupLoaded { decode, inject, group } => {
            write!(f, "Inject {} tokens fits its own prompt: {}", opt(*inject), together(*decode, group))
        }
        R::TransferCounted { decode, counted, loads } => write!(
            f,
            "decode#{decode}'s KV Transfer metrics had counted {counted} transfers for {loads} loads, this one among them, when it was next idle"
        ),
        R::ReadMayFail => f.write_str(
            "likely, not sure: its read prints nothing unless it fails, and nothing has counted it yet",
        ),
        R::NoParams { prefill, connector } => write!(
            f,
            "decode got no kv_transfer_params although prefill#{prefill} ran it: {connector} cannot pull without them"
        ),
        R::NoHit { prefill, by_order, finished, waited, busy, early } => {
            // As a load paired by order says it: which prefill ran it is a guess.
            let order = if *by_order { " (prefill paired by arrival order only)" } else { "" };
            write!(
                f,
                "prefill on prefill#{prefill} finished{finished}{order}, decode computed the prompt itself: no External Cache Hit within {} of its Added line",
                wait_words(*waited)
            )?;
            if *busy {
                f.write_str(" (decode was queueing requests)")?;
            }
            match early {
                Some(Early::Due) => f.write_str(
                    " (no other request was being added, so it was due; sure if none comes within 1.5 s)",
                ),
                None => Ok(()),
            }
        }
        R::NotReadYet { remote } => {
            f.write_str("decode got kv_transfer_params")?;
            if let Some(r) = remote {
                write!(f, " ({r})")?;
            }
            f.write_str(
                " but had not read it when the prefill released it unread (lease expired); no decode line yet said it read it late or failed",
            )
        }
        R::ExpiredAfterDecode { decode, src } => write!(
            f,
            "decode#{decode} ran it, but {src} released its KV unread (lease expired): decode recomputed the prompt"
        ),
        R::ExpiryConfirms { src } => write!(f, "confirmed: {src} released its KV unread (lease expired)"),
        R::GroupMiss { decode, own, group } => {
            let own = own.map_or("its".into(), |n| format!("its {n}-token"));
            write!(
                f,
                "prefill ran, decode recomputed {own} prompt: no injected size fits it ({})",
                together(*decode, group)
            )
        }
        R::Recomputed { src, n } => write!(
            f,
            "{src} then recomputed it (`Recovered from KV load failure`: {n} rescheduled): the transferred KV was not used"
        ),
        R::RecomputedByPolicy { src } => write!(
            f,
            "{src} recomputed it: its kv_load_failure_policy is recompute, so the failed load was computed again and answered 200"
        ),
        R::StaleKv { src } => write!(
            f,
            "but {src} had already released these blocks (its lease ran out) when the decode read them: they may have been reused, so the answer may be wrong (`Potentially invalid KV blocks`)"
        ),
        R::PairedByTokens { n } => write!(f, "(prefill paired by prompt length: {n} tokens)"),
        R::PairedAmong { n, copies, unknown_length } => {
            write!(f, "(prefill paired by prompt length: ")?;
            if copies.is_empty() {
                write!(f, "its copy of {n} tokens")?;
            } else {
                write!(f, "one of {} copies of {n} tokens", copies.len() + 1)?;
            }
            write!(f, ", each giving this verdict")?;
            if !copies.is_empty() {
                let others = if copies.len() == 1 { "the other" } else { "the others" };
                write!(f, "; {others}: {}", copies.join(", "))?;
            }
            if !unknown_length.is_empty() {
                write!(f, "; or a copy of unknown length: {}", unknown_length.join(", "))?;
            }
            write!(f, ")")
        }
        R::RepairedCopy { id } => write!(f, "its prefill copy is {id} (re-paired by prompt length)"),
        R::DiedBeforePull { instance, src } => write!(
            f,
            "{instance} died with it open before it pulled its KV: {src} released that KV unread (lease expired), so it neither loaded nor finished"
        ),
        _ => Ok(()),
    }
}
