//! Settling which requests of a scheduling group loaded their KV.
//!
//! ExampleConnector's `External Cache Hit!` names no request, and a miss
//! prints nothing. When two requests wait and one hit comes, the hit is
//! either's: the scheduler takes them first-come first-served, but the
//! older may have been scheduled a step earlier and missed silently (the
//! recorded demo-proxy lab shows both readings, with identical line
//! orders). What settles it is the size of the load: `Inject KV cache of
//! N tokens` moves the prompt aligned down to a block, so N fits only a
//! prompt of N to N + block tokens. Once the members' prompt lengths are
//! known, every assignment of the group's hits to members whose prompts
//! fit them is tried; a member no assignment gives a hit missed, one that
//! every assignment gives the same hit loaded it.

use super::hits::{Group, Waiting};
use crate::feed::LogOrigin;
use crate::traces::correlator::Correlator;
use crate::traces::evidence::{self, FactKind};
use crate::traces::model::{Confidence, Hop, Join, Outcome};

/// Widest gap between a prompt and its injected tokens when the block size
/// is not known (vLLM's blocks are 16 to 128 tokens).
const DEFAULT_FIT: u32 = 128;

/// Whether `Inject KV cache of n tokens` can be a `p`-token prompt's load.
/// The worker injects the prompt aligned down to a block,
/// `(p - 1) // bs * bs` (`ReqMeta.make_meta`), which for a request that
/// hit equals the looked-up `(p - 2) // bs * bs` (`get_num_new_matched_tokens`)
/// unless `p % bs == 1`; either is taken. Without the block size, any
/// prompt up to 128 tokens past `n`.
pub(crate) fn inject_fits(p: u32, n: u32, block: Option<u32>) -> bool {
    match block.filter(|b| *b > 0) {
        Some(bs) => n == p.saturating_sub(1) / bs * bs || n == p.saturating_sub(2) / bs * bs,
        None => p > n && p - n <= DEFAULT_FIT + 1,
    }
}
/// Largest group tried (assignments grow factorially).
const MAX_MEMBERS: usize = 8;

impl Correlator {
    /// `w` got no hit while hits went to its rivals, the older requests
    /// waiting with it: one of them missed. The hits arrival order gave
    /// the rivals are no evidence of whose they were ("the older hit, the
    /// younger missed" and "the older missed, the younger hit" print the
    /// same lines), so every member is unknown until their prompt lengths
    /// settle the group.
    pub(crate) fn shared_step_unknown(&mut self, i: usize, w: Waiting, now: f64) {
        let src = LogOrigin::Decode(i);
        let id = self.store.get(w.serial).map(|e| e.trace.id.clone()).unwrap_or_default();
        let (join, span) =
            self.store.get(w.serial).map_or((Join::ByOrder, None), |e| (e.trace.join, e.side_span()));
        let rivals: Vec<String> =
            w.rivals.iter().filter_map(|r| self.store.get(*r).map(|e| e.trace.id.clone())).collect();
        let counted = join.exact() || self.flow.vouches(span, self.opts.order_window_s);
        if counted {
            self.unattributed_misses += 1;
        }
        let hits = u32::try_from(rivals.len()).unwrap_or(u32::MAX);
        let kind = FactKind::SharedStep { decode: i, others: rivals, hits, inject: None, rival: false };
        self.said(w.serial, now, src, kind, now);
        for &r in &w.rivals {
            let Some(re) = self.store.get(r) else { continue };
            // A rival already settled by its own prompt length stays.
            if re.trace.outcome != Outcome::Loaded || re.trace.confidence == Confidence::Sure {
                continue;
            }
            let inject = re.trace.inject_tokens;
            let kind =
                FactKind::SharedStep { decode: i, others: vec![id.clone()], hits, inject, rival: true };
            self.said(r, now, src, kind, now);
        }
        let mut members = w.rivals.clone();
        members.push(w.serial);
        let hits = w.rivals.iter().map(|r| self.store.get(*r).and_then(|e| e.trace.inject_tokens)).collect();
        // Last: prompt lengths already known settle it now, over the above.
        self.open_group(i, Group { members, hits, counted }, now);
    }

    /// A new group: settled now if the lengths are known, else kept.
    pub(crate) fn open_group(&mut self, i: usize, g: Group, now: f64) {
        if g.members.len() > MAX_MEMBERS {
            return;
        }
        if !self.settle_group(i, &g, now) {
            self.decodes.entry(i).or_default().hits.add_group(g);
        }
    }

    /// A prompt length arrived for `serial`: retry the groups it is in.
    pub(crate) fn resolve_groups_of(&mut self, i: usize, serial: u64, now: f64) {
        let Some(q) = self.decodes.get(&i).map(|d| &d.hits) else {
            return;
        };
        let mine: Vec<Group> = q.groups.iter().filter(|g| g.members.contains(&serial)).cloned().collect();
        for g in mine {
            if self.settle_group(i, &g, now)
                && let Some(q) = self.decodes.get_mut(&i).map(|d| &mut d.hits)
            {
                q.groups.retain(|x| *x != g);
            }
        }
    }

    /// Settles every member if the lengths allow; `true` when settled.
    fn settle_group(&mut self, i: usize, g: &Group, now: f64) -> bool {
        let block = self.logs.blocks.get(&LogOrigin::Decode(i)).copied();
        let lens: Vec<Option<u32>> =
            g.members.iter().map(|s| self.store.get(*s).and_then(|e| e.trace.prompt_tokens)).collect();
        let fits = |m: usize, h: usize| match (lens[m], g.hits[h]) {
            (Some(p), Some(n)) => inject_fits(p, n, block),
            _ => true,
        };
        // owner[m]: the hits member m took in some valid assignment.
        let mut took: Vec<Vec<Option<usize>>> = vec![Vec::new(); g.members.len()];
        let mut used = vec![false; g.members.len()];
        let mut pick = Vec::new();
        assign(g.hits.len(), g.members.len(), &fits, &mut used, &mut pick, &mut took);
        let valid = took.first().map_or(0, Vec::len);
        if valid == 0 {
            return false;
        }
        // Every member must come out the same in every assignment.
        let mut verdicts = Vec::new();
        for (m, t) in took.iter().enumerate() {
            let first = t[0];
            if t.iter().any(|x| x.map(|h| g.hits[h]) != first.map(|h| g.hits[h])) {
                return false;
            }
            verdicts.push((g.members[m], first.and_then(|h| g.hits[h]), first.is_some(), lens[m]));
        }
        let group = evidence::Group {
            members: g
                .members
                .iter()
                .zip(&lens)
                .map(|(s, l)| (self.store.get(*s).map(|e| e.trace.id.clone()).unwrap_or_default(), *l))
                .collect(),
            hits: g.hits.clone(),
        };
        let mut attributed = 0;
        for (s, tokens, hit, own) in verdicts {
            let was = self.store.outcome(s);
            if !matches!(
                was,
                Some(Outcome::Pending | Outcome::Loaded | Outcome::Unknown | Outcome::SilentMiss)
            ) {
                continue;
            }
            if let Some(e) = self.store.get_mut(s) {
                e.trace.inject_tokens = tokens;
                if !hit {
                    e.trace.phases.retain(|p| p.hop != Hop::Connector);
                }
            }
            if hit {
                let n = tokens.map_or("?".into(), |n| n.to_string());
                self.with_phase(s, Hop::Connector, LogOrigin::Decode(i), None, now, |p| {
                    p.detail = format!("External Cache Hit, Inject {n} tokens");
                });
            } else {
                attributed += 1;
            }
            let kind = FactKind::GroupSettled { decode: i, hit, inject: tokens, own, group: group.clone() };
            self.said(s, now, LogOrigin::Decode(i), kind, now);
        }
        if g.counted {
            self.unattributed_misses = self.unattributed_misses.saturating_sub(attributed);
        }
        true
    }
}

/// Every injective assignment of `hits` to members that `fits`, recorded
/// per member as the hit it took (or None).
fn assign(
    hits: usize,
    members: usize,
    fits: &dyn Fn(usize, usize) -> bool,
    used: &mut [bool],
    pick: &mut Vec<usize>,
    took: &mut [Vec<Option<usize>>],
) {
    let h = pick.len();
    if h == hits {
        for (m, t) in took.iter_mut().enumerate() {
            t.push(pick.iter().position(|x| *x == m));
        }
        return;
    }
    for m in 0..members {
        if !used[m] && fits(m, h) {
            used[m] = true;
            pick.push(m);
            assign(hits, members, fits, used, pick, took);
            pick.pop();
            used[m] = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::inject_fits;
    use crate::feed::LogOrigin;
    use crate::traces::{Confidence, Correlator, CorrelatorOptions, Outcome};

    /// Prefill and decode lines of requests `(id, prompt tokens)` that
    /// the decode adds back to back, then one hit of `inject` tokens.
    /// `debug`: vLLM's DEBUG request details give the prompt lengths.
    fn shared_step(reqs: &[(&str, usize)], inject: u32, debug: bool) -> Correlator {
        let mut c = Correlator::new(CorrelatorOptions::default());
        let at = 1_800_000_000.0;
        let (p, d) = (LogOrigin::Prefill(0), LogOrigin::Decode(0));
        c.on_line(d, "non-default args: {'block_size': 16, 'kv_transfer_config': KVTransferConfig(kv_connector='ExampleConnector', kv_role='kv_consumer')}", at);
        for (k, (id, n)) in reqs.iter().enumerate() {
            c.on_line(p, &format!("Received request cmpl-{id}-0: params: SamplingParams(max_tokens=1)"), at);
            c.on_line(d, &format!("Received request cmpl-{id}-0: params: SamplingParams(max_tokens=9)"), at);
            if debug {
                let ids = vec!["7"; *n].join(", ");
                let line = format!(
                    "DEBUG 11-30 06:25:31 [r.py:1] Request cmpl-{id}-0 details: prompt: None, prompt_token_ids: [{ids}], prompt_embeds shape: None."
                );
                c.on_line(d, &line, at);
            }
            c.on_line(d, &format!("Added request cmpl-{id}-0-0000000{k}."), at);
        }
        c.on_line(d, "External Cache Hit!", at);
        c.on_line(d, &format!("Inject KV cache of {inject} tokens to the paged memory"), at);
        // The decode's log says nothing more: its idle clock is a second
        // behind the reads (`sweep.rs`), so the 1.5 s wait is over at 2.5.
        c.on_tick(at + 3.0);
        c
    }

    fn verdict(c: &Correlator, id: &str) -> (Outcome, Confidence) {
        let t = c.get(id).expect(id);
        (t.outcome, t.confidence)
    }

    /// Two requests scheduled together, one hit of 896 tokens: with vLLM's
    /// DEBUG request details (prompt lengths 900 and 1025) the 1025-token
    /// one is the miss, by name and sure; without them, neither is named,
    /// and neither is called loaded (the hit printed for whichever found
    /// its folder: the older may have missed).
    #[test]
    fn prompt_lengths_settle_a_shared_step() {
        for debug in [true, false] {
            let c = shared_step(&[("a", 900), ("b", 1025)], 896, debug);
            let (a, b) = (c.get("a").expect("a"), c.get("b").expect("b"));
            if debug {
                assert_eq!(
                    (a.outcome, a.confidence, a.inject_tokens),
                    (Outcome::Loaded, Confidence::Sure, Some(896))
                );
                assert_eq!(
                    (b.outcome, b.confidence),
                    (Outcome::SilentMiss, Confidence::Sure),
                    "{}",
                    b.evidence()
                );
                assert_eq!(c.counts().unattributed_misses, 0);
            } else {
                assert_eq!((a.outcome, b.outcome), (Outcome::Unknown, Outcome::Unknown), "{}", a.evidence());
                assert!(
                    a.evidence().contains("while b was waiting too") && a.evidence().contains("896"),
                    "{}",
                    a.evidence()
                );
                assert_eq!(c.counts().unattributed_misses, 1);
            }
        }
    }

    /// The older request missed (1025 tokens: its folder is looked up
    /// under 1008, the prefill stored 1024) and the one hit was the
    /// younger's: the order of the lines is the same as above, the
    /// injected size names the younger.
    #[test]
    fn the_hit_of_the_younger_request() {
        let c = shared_step(&[("a", 1025), ("b", 903)], 896, true);
        assert_eq!(verdict(&c, "a"), (Outcome::SilentMiss, Confidence::Sure));
        assert_eq!(verdict(&c, "b"), (Outcome::Loaded, Confidence::Sure));
        assert_eq!(c.get("b").and_then(|t| t.inject_tokens), Some(896));
        // Without the lengths: neither is named.
        let c = shared_step(&[("a", 1025), ("b", 903)], 896, false);
        assert_eq!(verdict(&c, "a").0, Outcome::Unknown);
        assert_eq!(verdict(&c, "b").0, Outcome::Unknown);
    }

    /// Both prompts fit the injected size (900 and 905 tokens both load
    /// 896): the lengths cannot say whose hit it was.
    #[test]
    fn lengths_that_both_fit_settle_nothing() {
        let c = shared_step(&[("a", 900), ("b", 905)], 896, true);
        assert_eq!(verdict(&c, "a").0, Outcome::Unknown);
        assert_eq!(verdict(&c, "b").0, Outcome::Unknown);
    }

    #[test]
    fn inject_sizes() {
        // 903 tokens: stored and looked up under 896.
        assert!(inject_fits(903, 896, Some(16)));
        assert!(!inject_fits(1025, 896, Some(16)));
        // 1025 = 16*64+1: looked up under 1008, injected as 1024.
        assert!(inject_fits(1025, 1024, Some(16)) && inject_fits(1025, 1008, Some(16)));
        assert!(!inject_fits(896, 896, Some(16)));
        assert!(inject_fits(1000, 896, None) && !inject_fits(1100, 896, None));
    }
}
