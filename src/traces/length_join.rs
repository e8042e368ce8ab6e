//! Joining by prompt length when no id is shared and arrival order cannot
//! (a prefill that queued longer than the order window, two requests of
//! one length sent together). Every proxy sends the prefill copy and the
//! decode request the same prompt, so a decode request of `n` tokens was
//! prefilled by a copy of `n` tokens sent before it through the same API
//! (`cmpl-`, `chatcmpl-`), and sent at once when that copy answered.
//! Within the window, the decode requests of that length that no id or
//! params joined, and the copies of that length that no decode took (a
//! failed copy is no decode's: the proxy stopped there), make a class:
//! - one decode, one copy, no rival: the pair is exact;
//! - several, and each decode can have a copy of its own: the times often
//!   leave each decode one copy (`assign.rs`), an exact pair; where they
//!   leave several, which is not known, but the verdict rests on what
//!   decode did with it, so it stands, only likely, and those are named;
//! - not a copy for each decode request: one of them had no prefill, and
//!   nothing says which: none is joined, and pairs joined by length before
//!   (a decode request of that length came later) are taken apart;
//! - decode requests of unknown length (no span yet) that could take one
//!   of the copies: the class waits for their lengths, as it does to be
//!   exact for copies of unknown length, which are named meanwhile.
//!
//! The class is found again whenever a length in it comes, whatever the
//! order the spans arrive in: the same facts give the same pairs.

use super::connector::groups::inject_fits;
use super::correlator::Correlator;
use super::evidence::FactKind;
use super::ids::{base_id, external_of_internal, invented};
use super::model::{Hop, Join};
use super::store::{Entry, push_capped};
use crate::feed::LogOrigin;

/// How far back (in ring entries) a length looks for its class.
const SCAN: usize = 2048;
/// Stamps are whole seconds: a copy stamped up to this long after the
/// decode request may still be before it.
const SLACK_S: f64 = 1.0;
/// A proxy sends the decode request the moment its copy answers (vLLM's
/// proxies, the router, LMCache's): a copy answered longer before a
/// decode request came was not its prefill. Under a benchmark's load
/// (`nixl-1p2d-bench`, 256 requests joined by id) the stamps were at most
/// one second apart.
const ANSWER_GAP_S: f64 = 3.0;
/// Classes waiting for a length, at most.
const HELD: usize = 256;

/// One side of a request in the class.
#[derive(Debug, Clone, Copy)]
struct Side {
    serial: u64,
    /// Event time: the decode's arrival, or the copy's start.
    t: f64,
    /// The copy's answer (its access line), when known.
    done: Option<f64>,
    /// Its trace was joined by length before: the class may redo it.
    joined: bool,
    /// The API it came through, by the id vLLM gave it (`chatcmpl-`,
    /// `cmpl-`): a proxy sends the copy to the path the client used.
    api: Option<&'static str>,
}

/// The decode requests and copies of one length around a moment.
#[derive(Debug, Default)]
struct Class {
    decodes: Vec<Side>,
    copies: Vec<Side>,
    unsized_decodes: Vec<Side>,
    unsized_copies: Vec<Side>,
}

/// How far apart a copy and its decode request may be.
#[derive(Debug, Clone, Copy)]
struct Reach {
    /// From the copy's start: it may queue long on a busy prefill.
    win: f64,
    /// From the copy's answer: the proxy sends the decode request as soon
    /// as the copy answers.
    gap: f64,
}

/// Whether copy `c` could be decode request `d`'s: sent before it, within
/// the window, answered before it came and not long before.
fn fits(d: &Side, c: &Side, r: Reach) -> bool {
    c.t <= d.t + SLACK_S
        && d.t - c.t <= r.win
        && (d.api.is_none() || c.api.is_none() || d.api == c.api)
        && c.done.is_none_or(|done| done <= d.t + SLACK_S && d.t - done <= r.gap + SLACK_S)
}

/// The id an instance gave this side.
fn engine_id(e: &Entry, decode: bool) -> Option<&str> {
    e.trace
        .engine_ids
        .iter()
        .find(|(o, _)| matches!(o, LogOrigin::Decode(_)) == decode && !matches!(o, LogOrigin::Proxy))
        .map(|(_, id)| external_of_internal(id))
}

/// The id an instance gave this side, invented (no id was forwarded).
fn invented_on(e: &Entry, decode: bool) -> bool {
    engine_id(e, decode).is_some_and(|id| invented(base_id(id)))
}

/// The API this side came through, by its id's prefix.
pub(super) fn api_on(e: &Entry, decode: bool) -> Option<&'static str> {
    super::ids::api_of(engine_id(e, decode)?)
}

/// The copy failed: the proxy answered the error, no decode followed it.
fn copy_failed(e: &Entry) -> bool {
    e.facts.failures().any(|(_, _, x)| x.hop == Hop::Producer)
}

impl Correlator {
    fn length_window(&self) -> f64 {
        self.opts.prefill_only_timeout_s.max(self.opts.order_window_s)
    }

    fn reach(&self) -> Reach {
        Reach { win: self.length_window(), gap: ANSWER_GAP_S.min(self.opts.order_window_s) }
    }

    /// A length came for a request at event time `t`: the classes around
    /// it that waited for a length are tried again.
    pub(super) fn retry_held_lengths(&mut self, t: f64, at: f64) {
        let win = self.length_window();
        let near = |ht: f64| (ht - t).abs() <= 2.0 * win;
        let due: Vec<(u32, f64)> = self.held.iter().copied().filter(|(_, ht)| near(*ht)).collect();
        // Those long past wait for nothing that can still come.
        self.held.retain(|(_, ht)| !near(*ht) && *ht >= t - 4.0 * win);
        for (n, ht) in due {
            self.join_by_length(n, ht, at);
        }
    }

    /// The KV a decode request of unknown length surely loaded (a hit no
    /// other request could own) is too short or too long for `n` tokens:
    /// the worker injects the prompt less its last block.
    fn load_rules_out(&self, e: &Entry, n: u32) -> bool {
        let (Some(i), Some(inject)) = (e.trace.decode, e.trace.inject_tokens) else {
            return false;
        };
        let sole = e.facts.last(|k| match k {
            FactKind::Hit { contested, .. } => Some(*contested),
            _ => None,
        });
        let block = self.logs.blocks.get(&LogOrigin::Decode(i)).copied();
        matches!(sole, Some((_, 0))) && !inject_fits(n, inject, block)
    }

    /// The class of length `n` around event time `t`.
    fn class_of(&self, n: u32, t: f64) -> Class {
        let win = self.length_window();
        let mut c = Class::default();
        for s in self.store.serials().rev().take(SCAN) {
            let Some(e) = self.store.get(s) else { continue };
            let (tr, tk) = (&e.trace, &e.track);
            if tr.first_seen < t - 4.0 * win {
                break;
            }
            let both = tr.prefill.is_some() && tr.decode.is_some();
            let joined = both && tr.join == Join::ByPromptTokens;
            let loose = !both || tr.join == Join::ByOrder;
            if !(loose || joined) {
                continue;
            }
            if let (Some(_), Some(dt)) = (tr.decode, tk.decode_event_t)
                && !tk.decode_has_params
                && (dt - t).abs() <= win
                && tr.prompt_tokens.map_or(loose, |m| m == n)
                && invented_on(e, true)
            {
                let side = Side { serial: s, t: dt, done: None, joined, api: api_on(e, true) };
                match tr.prompt_tokens {
                    Some(_) => c.decodes.push(side),
                    None if self.load_rules_out(e, n) => {}
                    None => c.unsized_decodes.push(side),
                }
            }
            if let Some(p) = tr.prefill.and(tr.phase(Hop::Producer))
                && (p.start - t).abs() <= 2.0 * win
                && tk.prefill_tokens.map_or(loose, |m| m == n)
                && !copy_failed(e)
                && invented_on(e, false)
            {
                let side =
                    Side { serial: s, t: p.start, done: tk.prefill_done, joined, api: api_on(e, false) };
                match tk.prefill_tokens {
                    Some(_) => c.copies.push(side),
                    None => c.unsized_copies.push(side),
                }
            }
        }
        for v in [&mut c.decodes, &mut c.copies] {
            v.sort_by(|a, b| a.t.total_cmp(&b.t).then(a.serial.cmp(&b.serial)));
        }
        c
    }

    /// A prompt length of `n` tokens came for a request at event time `t`:
    /// matches the decode requests and copies of that length around it.
    pub(super) fn join_by_length(&mut self, n: u32, t: f64, at: f64) {
        let win = self.reach();
        let mut c = self.class_of(n, t);
        // A decode request no copy of the class fits had none of them (sent
        // straight to decode, or its copy is of another window): not theirs.
        let copies = &c.copies;
        c.decodes.retain(|d| copies.iter().any(|k| fits(d, k, win)));
        if c.decodes.is_empty() {
            return;
        }
        let fit: Vec<Vec<bool>> =
            c.decodes.iter().map(|d| c.copies.iter().map(|k| fits(d, k, win)).collect()).collect();
        let Some(plan) = assign::assign(&fit) else {
            // One of them had no prefill: nobody knows which.
            self.unjoin(&c, at);
            return;
        };
        // Decode requests of unknown length that one of these copies fits:
        // if one is of this length, one of these may have had no prefill.
        let rivals: Vec<Vec<bool>> = c
            .unsized_decodes
            .iter()
            .map(|u| c.copies.iter().map(|k| fits(u, k, win)).collect::<Vec<bool>>())
            .filter(|row| row.contains(&true))
            .collect();
        let both: Vec<Vec<bool>> = fit.iter().chain(&rivals).cloned().collect();
        let everyone: Vec<usize> = (0..both.len()).collect();
        if assign::matched(&both, &everyone, &[]) < both.len() {
            // Their lengths will say. Pairs joined before those requests
            // came stand until then.
            push_capped(&mut self.held, (n, t), HELD);
            if c.decodes.iter().any(|d| !d.joined) {
                return;
            }
        }
        let pairs: Vec<(u64, u64)> =
            c.decodes.iter().zip(&plan.taken).map(|(d, &k)| (d.serial, c.copies[k].serial)).collect();
        let id_of = |s: u64| {
            let e = self.store.get(s)?;
            e.trace
                .engine_ids
                .iter()
                .find(|(o, _)| matches!(o, LogOrigin::Prefill(_)))
                .map(|(_, id)| id.clone())
        };
        // The copies each decode request could have had, its own among them.
        let possible: Vec<Vec<String>> = plan
            .possible
            .iter()
            .map(|ks| ks.iter().filter_map(|&k| id_of(c.copies[k].serial)).collect())
            .collect();
        let of_unknown_length: Vec<(Side, String)> = c
            .unsized_copies
            .iter()
            .filter(|u| c.decodes.iter().any(|d| fits(d, u, win)))
            .filter_map(|u| Some((*u, id_of(u.serial)?)))
            .collect();
        if !of_unknown_length.is_empty() {
            // Exact once their lengths come.
            push_capped(&mut self.held, (n, t), HELD);
        }
        // Which copy each trace holds moves as copies are traded.
        let mut holder: Vec<(u64, u64)> = c.copies.iter().map(|k| (k.serial, k.serial)).collect();
        let mut touched = Vec::new();
        // (trace that gave a copy, trace that took it).
        let mut gave = Vec::new();
        for (i, (d, k)) in pairs.into_iter().enumerate() {
            let Some(now_at) = holder.iter().find(|(orig, _)| *orig == k).map(|(_, h)| *h) else { continue };
            if now_at != d {
                gave.push((now_at, d));
                // The decode's own copy, if any, goes where this one was.
                let mine = holder.iter().position(|(_, h)| *h == d);
                self.swap_prefills(d, now_at);
                if let Some(j) = mine {
                    holder[j].1 = now_at;
                }
                if let Some(j) = holder.iter().position(|(orig, _)| *orig == k) {
                    holder[j].1 = d;
                }
                touched.push(now_at);
            }
            if let Some(e) = self.store.get_mut(d) {
                e.trace.join = Join::ByPromptTokens;
                let own = e.trace.engine_ids.iter().find(|(o, _)| matches!(o, LogOrigin::Prefill(_)));
                let own = own.map(|(_, id)| id.clone());
                e.track.same_length_copies =
                    possible[i].iter().filter(|x| Some(*x) != own.as_ref()).cloned().collect();
                let me = Side { done: None, joined: true, ..c.decodes[i] };
                e.track.unsized_copies = of_unknown_length
                    .iter()
                    .filter(|(u, _)| fits(&me, u, win))
                    .map(|(_, id)| id.clone())
                    .collect();
            }
            touched.push(d);
        }
        // A trace left with neither side held only what moved away. Every
        // answer line goes with its copy first; one with nowhere to go is
        // placed again after, among the traces as they now are.
        let empty = |c: &Self, s: u64| {
            c.store.get(s).is_some_and(|e| e.trace.prefill.is_none() && e.trace.decode.is_none())
        };
        let mut unplaced = Vec::new();
        for &s in &touched {
            if empty(self, s) {
                if let Some(&(_, to)) = gave.iter().find(|(from, _)| *from == s) {
                    unplaced.extend(self.hand_proxy_phase(s, to));
                }
                self.store.retire(s);
            }
        }
        for s in touched {
            self.settle(s, at);
        }
        for (status, t) in unplaced {
            self.proxy_ok_access(status, t);
        }
    }

    /// A prefill copy's own trace may have been given the proxy's id-less
    /// answer line (it was the oldest request the line could be). The line
    /// goes with the copy to the decode that took it; where that one has
    /// its own, the line was another request's: its status and time are
    /// returned, to be placed again.
    fn hand_proxy_phase(&mut self, from: u64, to: u64) -> Option<(u16, f64)> {
        let (phase, status) = self.store.get_mut(from).and_then(|e| {
            let i = e.trace.phases.iter().position(|p| p.hop == Hop::Proxy)?;
            let status = e.track.proxy_answer?;
            e.track.proxy_seen = false;
            e.track.proxy_answer = None;
            Some((e.trace.phases.remove(i), status))
        })?;
        match self.store.get_mut(to) {
            Some(e) if !e.track.proxy_seen => {
                e.track.proxy_seen = true;
                e.track.proxy_answer = Some(status);
                e.trace.phases.insert(0, phase);
                None
            }
            _ => Some((status, phase.start)),
        }
    }

    /// The class cannot be matched: the pairs it joined by length before
    /// are taken apart, each copy back on a trace of its own.
    fn unjoin(&mut self, c: &Class, at: f64) {
        for d in c.decodes.iter().filter(|d| d.joined) {
            self.detach_prefill(d.serial, at);
        }
    }
}

mod assign;
#[cfg(test)]
mod tests;
