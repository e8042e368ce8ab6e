//! Verdicts the passing of time allows.

use super::verdict::{Ctx, Verdict};
use crate::feed::LogOrigin;
use crate::traces::evidence::FactKind as F;
use crate::traces::model::{Confidence, Hop, Outcome};
use crate::traces::reason::Reason as R;
use crate::traces::store::Entry;

/// Verdicts time allows: a request seen on one side only, once its window
/// has passed.
pub(super) fn deadline(e: &Entry, cx: &Ctx) -> Verdict {
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
            } else if cx.copy_unread {
                let r = R::CopyBeforeRead { decode, window: o.order_window_s };
                Verdict::new(Outcome::Unknown, Confidence::Likely, vec![r])
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
            // neither its arrival nor what decode did with it: the hops
            // decide, their words are only shown.
            let named: Vec<(Hop, LogOrigin, String)> = t
                .phases
                .iter()
                .filter(|p| p.hop != Hop::Proxy)
                .map(|p| (p.hop, p.source, p.detail.clone()))
                .collect();
            let r = if named.is_empty() { R::ProxyOnly } else { R::NamedOnly { named } };
            Verdict::new(Outcome::Unknown, Confidence::Unsure, vec![r])
        }
    }
}
