//! Joining by prompt length when no id is shared and arrival order cannot
//! (a prefill that queued longer than the order window, two requests of
//! one length sent together). Every proxy sends the prefill copy and the
//! decode request the same prompt, so a decode request of `n` tokens was
//! prefilled by a copy of `n` tokens sent before it. Within the window,
//! the decode requests of that length that no id or params joined, and the
//! copies of that length that no decode took, are matched oldest first:
//! - one decode, one copy: the pair is exact;
//! - several, and at least as many copies as decode requests: each decode
//!   takes one; which is not known, but every copy gives the same verdict
//!   (they are one length, and the verdict rests on what decode did), so
//!   the verdict stands, only likely, and the other copies are named;
//! - fewer copies than decode requests: one of them had no prefill, and
//!   nothing says which: none is joined.

use super::correlator::Correlator;
use super::ids::{base_id, external_of_internal, invented};
use super::model::{Hop, Join};
use super::store::Entry;
use crate::feed::LogOrigin;

/// How far back (in ring entries) a length looks for its class.
const SCAN: usize = 2048;
/// Stamps are whole seconds: a copy stamped up to this long after the
/// decode request may still be before it.
const SLACK_S: f64 = 1.0;

/// One side of a request in the class.
#[derive(Debug, Clone, Copy)]
struct Side {
    serial: u64,
    /// Event time: the decode's arrival, or the copy's start.
    t: f64,
    /// The copy's answer (its access line), when known.
    done: Option<f64>,
}

/// The id an instance gave this side, invented (no id was forwarded).
fn invented_on(e: &Entry, decode: bool) -> bool {
    e.trace
        .engine_ids
        .iter()
        .find(|(o, _)| matches!(o, LogOrigin::Decode(_)) == decode && !matches!(o, LogOrigin::Proxy))
        .is_some_and(|(_, id)| invented(base_id(external_of_internal(id))))
}

impl Correlator {
    /// A prefill copy's length came (its copy started at `t`): the classes
    /// of loose decode requests it may have held back (a copy of unknown
    /// length could have been theirs) are tried again.
    pub(super) fn join_lengths_after(&mut self, t: f64, at: f64) {
        let win = self.opts.prefill_only_timeout_s.max(self.opts.order_window_s);
        let mut lengths: Vec<(u32, f64)> = Vec::new();
        for s in self.store.serials().rev().take(SCAN) {
            let Some(e) = self.store.get(s) else { continue };
            if e.trace.first_seen < t - 4.0 * win {
                break;
            }
            let loose = e.trace.prefill.is_none() || !e.trace.join.exact();
            if let (Some(n), Some(dt), Some(_)) =
                (e.trace.prompt_tokens, e.track.decode_event_t, e.trace.decode)
                && loose
                && dt - t >= -SLACK_S
                && dt - t <= win
                && !lengths.iter().any(|(m, _)| *m == n)
            {
                lengths.push((n, dt));
            }
        }
        for (n, dt) in lengths {
            self.join_by_length(n, dt, at);
        }
    }

    /// A prompt length of `n` tokens came for a request at event time `t`:
    /// matches the decode requests and copies of that length around it.
    pub(super) fn join_by_length(&mut self, n: u32, t: f64, at: f64) {
        let win = self.opts.prefill_only_timeout_s.max(self.opts.order_window_s);
        let (mut decodes, mut copies, mut unsized_copies) = (Vec::new(), Vec::new(), Vec::new());
        for s in self.store.serials().rev().take(SCAN) {
            let Some(e) = self.store.get(s) else { continue };
            if e.trace.first_seen < t - 4.0 * win {
                break;
            }
            let loose = !e.trace.join.exact() || e.trace.prefill.is_none() || e.trace.decode.is_none();
            if !loose {
                continue;
            }
            if let (Some(_), Some(dt)) = (e.trace.decode, e.track.decode_event_t)
                && e.trace.prompt_tokens == Some(n)
                && !e.track.decode_has_params
                && invented_on(e, true)
                && (dt - t).abs() <= win
            {
                decodes.push(Side { serial: s, t: dt, done: None });
            }
            if let Some(p) = e.trace.prefill.and(e.trace.phase(Hop::Producer))
                && invented_on(e, false)
                && (p.start - t).abs() <= 2.0 * win
            {
                let side = Side { serial: s, t: p.start, done: e.track.prefill_done };
                match e.track.prefill_tokens {
                    Some(m) if m == n => copies.push(side),
                    Some(_) => {}
                    // A copy whose length no source gave (its span dropped) could be any.
                    None => unsized_copies.push(side),
                }
            }
        }
        if decodes.is_empty() || copies.is_empty() || copies.len() < decodes.len() {
            return;
        }
        decodes.sort_by(|a, b| a.t.total_cmp(&b.t).then(a.serial.cmp(&b.serial)));
        copies.sort_by(|a, b| a.t.total_cmp(&b.t).then(a.serial.cmp(&b.serial)));
        // Oldest decode first takes the oldest copy that could be its.
        let mut used = vec![false; copies.len()];
        let mut pairs = Vec::new();
        for d in &decodes {
            let fits = |c: &Side| {
                c.t <= d.t + SLACK_S && d.t - c.t <= win && c.done.is_none_or(|done| done <= d.t + SLACK_S)
            };
            if unsized_copies.iter().any(fits) {
                // Wait for its length: it may be this decode's copy.
                return;
            }
            let Some(k) = (0..copies.len()).find(|&k| !used[k] && fits(&copies[k])) else {
                // A decode no copy fits: one of them had no prefill.
                return;
            };
            used[k] = true;
            pairs.push((d.serial, copies[k].serial));
        }
        let names: Vec<String> = copies
            .iter()
            .filter_map(|c| self.store.get(c.serial))
            .filter_map(|e| e.trace.engine_ids.iter().find(|(o, _)| matches!(o, LogOrigin::Prefill(_))))
            .map(|(_, id)| id.clone())
            .collect();
        // Which copy each trace holds moves as copies are traded.
        let mut holder: Vec<(u64, u64)> = copies.iter().map(|c| (c.serial, c.serial)).collect();
        let mut touched = Vec::new();
        for (d, c) in pairs {
            let Some(now_at) = holder.iter().find(|(orig, _)| *orig == c).map(|(_, h)| *h) else { continue };
            if now_at != d {
                // The decode's own copy, if any, goes where this one was.
                let mine = holder.iter().position(|(_, h)| *h == d);
                self.swap_prefills(d, now_at);
                if let Some(k) = mine {
                    holder[k].1 = now_at;
                }
                if let Some(k) = holder.iter().position(|(orig, _)| *orig == c) {
                    holder[k].1 = d;
                }
                touched.push(now_at);
            }
            if let Some(e) = self.store.get_mut(d) {
                e.trace.join = Join::ByPromptTokens;
                let own = e.trace.engine_ids.iter().find(|(o, _)| matches!(o, LogOrigin::Prefill(_)));
                let own = own.map(|(_, id)| id.clone());
                e.track.same_length_copies = if names.len() > 1 {
                    names.iter().filter(|x| Some(*x) != own.as_ref()).cloned().collect()
                } else {
                    Vec::new()
                };
            }
            touched.push(d);
        }
        for s in touched {
            // A trace left with neither side held only what moved away.
            if self.store.get(s).is_some_and(|e| e.trace.prefill.is_none() && e.trace.decode.is_none()) {
                self.store.retire(s);
                continue;
            }
            self.settle(s, at);
        }
    }
}
