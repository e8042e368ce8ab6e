//! The metrics-only silent-miss detector.
//!
//! A healthy decode instance that loaded transferred KV computes only the
//! unaligned tail of each prompt (at most one block plus one token); a
//! decode instance that found nothing computes the whole prompt. vLLM
//! (>= 0.13) observes each request's computed tokens in
//! `request_prefill_kv_computed_tokens`, so every finished decode request
//! can be classified from bucket deltas.
//!
//! Whole-prompt computes are only misses when a prefill ran for them.
//! Prefill completions enter a FIFO pool; each finished decode request takes
//! one. A prefill can only belong to a decode request if it completed before
//! that request arrived, which happened at most `finish - e2e` ago (`e2e`
//! bounded below by its latency bucket). Scrapes only say that a prefill
//! completed somewhere inside the interval that saw it, so an entry is
//! *certainly* before an arrival (the whole interval is) or only *possibly*.
//!
//! - A request that computed only the prompt's tail loaded KV: it takes the
//!   oldest possible entry, even one a whole-prompt request had claimed
//!   (loaded requests must have had a prefill). The claimer then had none,
//!   unless the loaded request could as well have taken another: then which
//!   prefill was whose is open and the claimer is unknown.
//! - A whole-prompt request takes a certain entry: a silent miss, now. With
//!   only a possible one it holds a claim for [`HOLD_SECS`]; if no loaded
//!   request needs that prefill by then, it is a miss. This is what keeps a
//!   decode-only request that ends just as a prefill completes from raising
//!   a false alarm.
//! - Entries expire after [`POOL_TTL_SECS`]: a prefill whose decode request
//!   never came is forgotten.
//!
//! A request with no prefill in the pool had none only if the prefill side
//! was scraped past its arrival. Otherwise (a decode scrape taken ahead of
//! the prefill's) it waits for the prefill's next scrape: with no prefill
//! there that may have preceded it, it had none; with one, which request
//! that prefill was for is open and it is unknown, as it is when no scrape
//! comes within [`HOLD_SECS`] (a prefill that died).

use std::collections::VecDeque;

use crate::metrics::histogram::Histogram;
use crate::metrics::model::{Counter, Hist, InstanceSample};
use crate::traces::Counts;

use super::instance::Interval;

/// How long a completed prefill waits for its decode request.
pub const POOL_TTL_SECS: f64 = 60.0;
/// How long a whole-prompt request's claim on an ambiguous prefill waits
/// for a loaded request that needs it more.
pub const HOLD_SECS: f64 = 5.0;
/// The longest a proxy takes from a prefill's answer to the decode request.
const PROXY_GAP_SECS: f64 = 5.0;
/// The share of a prefill's interval that must lie before a request's
/// arrival bound for its claim on it to be firm.
const FIRM_SHARE: f64 = 0.1;
/// Allowance for the time a scrape takes to answer.
const SCRAPE_SLACK_SECS: f64 = 0.5;

/// One interval in which the decode side recomputed prompts that had a prefill.
#[derive(Debug, Clone, PartialEq)]
pub struct MissEvent {
    pub t: f64,
    pub count: u64,
    pub decode_instance: usize,
    /// Prompt tokens the decode side computed for the requests that
    /// finished in that interval (NaN when the miss was settled later).
    pub local_compute_tokens: f64,
}

/// A completed prefill waiting for its decode request.
#[derive(Debug, Clone, Copy, PartialEq)]
struct PoolEntry {
    /// It completed in `(earliest, latest]`.
    earliest: f64,
    latest: f64,
    /// A whole-prompt request's tentative claim on it.
    claim: Option<Claim>,
}

/// A whole-prompt request's hold on a prefill that may have preceded it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Claim {
    /// When the hold is over and the request is a miss.
    decide_at: f64,
    instance: usize,
    /// The prefill may have completed before the request's arrival bound
    /// itself by more than [`FIRM_SHARE`] of its interval, not only within
    /// a tie or the scrape's slack.
    firm: bool,
}

/// When a decode interval's requests could have arrived, slack included.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Arrival {
    earliest: f64,
    latest: f64,
}

impl Arrival {
    /// The prefill may have completed just before such an arrival.
    fn admits(&self, e: &PoolEntry) -> bool {
        e.earliest < self.latest && e.latest > self.earliest
    }
}

/// A request with no prefill in the pool, judged before the prefill side
/// was scraped past its arrival.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Unseen {
    /// The latest it arrived, without slack.
    arrival: f64,
    window: Arrival,
    /// When it was judged.
    at: f64,
    /// It computed the whole prompt (else only the tail: it loaded).
    whole: bool,
}

#[derive(Debug, Clone, Default)]
pub struct MissDetector {
    pool: VecDeque<PoolEntry>,
    unseen: VecDeque<Unseen>,
    /// Request outcomes counted from metrics.
    pub outcomes: Counts,
    pub events: VecDeque<MissEvent>,
    /// The decode intervals' times of the requests counted unknown (the
    /// cross-check: a miss the traces name that the metrics left open is
    /// no disagreement).
    pub unknown_at: VecDeque<f64>,
    /// Since when every prefill instance's completions are counted (the
    /// latest of their first scrapes): a prefill before it is in no pool.
    prefills_from: Option<f64>,
    /// Decode TTFT from intervals where every request loaded KV, and from
    /// intervals where every request computed its prompt.
    pub ttft_loaded: Histogram,
    pub ttft_computed: Histogram,
    /// False when the decode side lacks `request_prefill_kv_computed_tokens`.
    pub supported: Option<bool>,
}

/// The computed-token count above which a request computed its prompt
/// rather than only the tail left after a transfer.
pub fn whole_prompt_threshold(block_size: Option<u32>) -> f64 {
    f64::from(block_size.unwrap_or(16)) + 2.0
}

impl MissDetector {
    /// Either role's counters went back under the same process start (a
    /// recording looping): the prefills before it belong to another run,
    /// none of them can be a later request's. The requests still being
    /// decided (holding a claim, waiting for the prefill's next scrape) are
    /// unknown: what settles them after it is of another run.
    pub fn on_rewind(&mut self) {
        let held: Vec<f64> =
            self.pool.iter().filter_map(|e| e.claim).map(|c| c.decide_at - HOLD_SECS).collect();
        let waiting: Vec<f64> = self.unseen.iter().map(|u| u.at).collect();
        for t in held.into_iter().chain(waiting) {
            self.count_unknown(t);
        }
        self.pool.clear();
        self.unseen.clear();
    }

    fn count_unknown(&mut self, t: f64) {
        self.outcomes.unknown += 1;
        self.unknown_at.push_back(t);
        while self.unknown_at.len() > 1000 {
            self.unknown_at.pop_front();
        }
    }

    /// Prefill requests that completed in an interval join the pool.
    pub fn on_prefill_interval(&mut self, iv: &Interval) {
        let done = iv.counter(Counter::RequestsOk).round() as u64;
        for _ in 0..done {
            self.pool.push_back(PoolEntry { earliest: iv.t - iv.dt, latest: iv.t, claim: None });
        }
    }

    /// Classifies the decode requests that finished in an interval.
    /// `prefill_seen`: how far every prefill instance has been scraped (the
    /// oldest of their latest scrapes' times; infinite with none). A request
    /// that may have arrived after that, with no prefill for it in the pool,
    /// waits for the prefill's next scrape (`recheck`): its prefill may have
    /// completed unseen.
    pub fn on_decode_interval(
        &mut self,
        instance: usize,
        iv: &Interval,
        block_size: Option<u32>,
        prefill_seen: f64,
    ) -> Option<MissEvent> {
        self.expire(iv.t);
        let threshold = whole_prompt_threshold(block_size);
        self.split_ttft(iv, threshold);
        // `finished_reason="abort"`: the client went away (or the request
        // was aborted for it), which is no error of the pair.
        let errors = iv.counter(Counter::RequestsErrored).round() as u64;
        let cancelled = iv.counter(Counter::RequestsAborted).round() as u64;
        self.outcomes.error += errors;
        self.outcomes.cancelled += cancelled;
        self.outcomes.seen += errors + cancelled;

        let Some(computed) = iv.hists.get(&Hist::KvComputedTokens) else {
            // Requests finished and none observed its computed tokens: this
            // vLLM does not have the family (idle intervals prove nothing).
            if self.supported.is_none() && iv.counter(Counter::RequestsOk) > 0.0 {
                self.supported = Some(false);
            }
            return None;
        };
        self.supported = Some(true);
        let total = computed.total().round() as u64;
        let whole_all = (computed.count_above(threshold).round() as u64).min(total);
        // vLLM observes every finished request's computed tokens, the
        // failed and aborted ones too: a load that failed computed nothing
        // it loaded, a whole prompt (router-nixl-1p2d: 27 errors, 27 whole
        // prompts). Up to `failed` of either kind were those; the answered
        // ones that may be either are unknown.
        let failed = (errors + cancelled).min(total);
        let (whole, tail_only) =
            (whole_all.saturating_sub(failed), (total - whole_all).saturating_sub(failed));
        for _ in whole + tail_only..total - failed {
            self.count_unknown(iv.t);
        }
        self.outcomes.seen += total - failed;
        // The latest the requests could have arrived; slack widens what is
        // *possible* (a scrape may lag), never what is *certain*.
        let arrival_bound = iv.t - shortest_latency(iv);
        let latest_arrival = arrival_bound + SCRAPE_SLACK_SECS;
        // A proxy sends to decode as soon as the prefill answers: a prefill
        // that completed long before the earliest arrival was another's.
        let earliest_arrival = iv.t - iv.dt - longest_latency(iv) - PROXY_GAP_SECS;
        let window = Arrival { earliest: earliest_arrival, latest: latest_arrival };
        let seen = prefill_seen >= arrival_bound;
        let unseen = |whole| (!seen).then_some(Unseen { arrival: arrival_bound, window, at: iv.t, whole });
        for _ in 0..tail_only {
            // A request that computed only the tail loaded its KV (or hit
            // the local prefix cache); either way it needed no prefill here.
            if self.take_for_loaded(window) {
                self.outcomes.loaded += 1;
            } else {
                self.no_prefill_unless(unseen(false), window, iv.t);
            }
        }
        let mut missed = 0;
        for _ in 0..whole {
            let possible = |e: &PoolEntry| e.claim.is_none() && window.admits(e);
            if let Some(i) = self.pool.iter().position(|e| possible(e) && e.latest <= arrival_bound) {
                self.pool.remove(i);
                missed += 1;
            } else if let Some(e) = self.pool.iter_mut().find(|e| possible(e)) {
                // More than a tie: two scrapes taken at one instant put a
                // prefill's interval right at the arrival bound.
                let firm = e.earliest + FIRM_SHARE * (e.latest - e.earliest) < arrival_bound;
                e.claim = Some(Claim { decide_at: iv.t + HOLD_SECS, instance, firm });
            } else {
                self.no_prefill_unless(unseen(true), window, iv.t);
            }
        }
        let tokens = computed.sum;
        self.record_misses(iv.t, instance, missed, tokens)
    }

    /// A prefill instance's first scrape. Where it had completed requests
    /// before pdtop looked, one of them may have been for a request that
    /// reaches decode after: its completions count only from here.
    pub fn on_prefill_first_scrape(&mut self, at: f64, sample: Option<&InstanceSample>) {
        let done = sample.and_then(|s| s.counters.get(&Counter::RequestsOk)).copied();
        if done.is_some_and(|n| n > 0.0) {
            self.prefills_from = Some(self.prefills_from.map_or(at, |t| t.max(at)));
        }
    }

    /// A request with no prefill in the pool had none, unless its prefill
    /// may have completed before pdtop counted the prefills (started mid
    /// run: unknown), or the prefill side was not seen past its arrival:
    /// then it waits (`recheck`).
    fn no_prefill_unless(&mut self, unseen: Option<Unseen>, window: Arrival, t: f64) {
        if self.prefills_from.is_some_and(|from| window.earliest < from) {
            self.count_unknown(t);
            return;
        }
        match unseen {
            Some(u) => self.unseen.push_back(u),
            None => self.outcomes.no_prefill += 1,
        }
    }

    /// Decides the requests waiting for the prefill side's next scrape.
    /// Seen past their arrival: a loaded one takes a prefill that came, as
    /// it would have on time; "no prefill" where no unclaimed prefill in
    /// the pool may have preceded them; a whole-prompt one with such a
    /// prefill is unknown (whose it was is open). Unknown too when no such
    /// scrape came within [`HOLD_SECS`].
    pub fn recheck(&mut self, prefill_seen: f64, now: f64) {
        let mut i = 0;
        while let Some(u) = self.unseen.get(i).copied() {
            if prefill_seen >= u.arrival {
                let candidate = self.pool.iter().any(|e| e.claim.is_none() && u.window.admits(e));
                if !u.whole && candidate && self.take_for_loaded(u.window) {
                    self.outcomes.loaded += 1;
                } else if candidate {
                    self.count_unknown(u.at);
                } else {
                    self.outcomes.no_prefill += 1;
                }
            } else if now - u.at >= HOLD_SECS {
                self.count_unknown(u.at);
            } else {
                i += 1;
                continue;
            }
            self.unseen.remove(i);
        }
    }

    /// Commits the claims whose hold is over: those were silent misses.
    /// Called on every message, so a held miss shows even when idle.
    pub fn settle(&mut self, now: f64) -> Vec<MissEvent> {
        let mut by_instance: Vec<(usize, u64)> = Vec::new();
        self.pool.retain(|e| match e.claim {
            Some(c) if c.decide_at <= now => {
                match by_instance.iter_mut().find(|(i, _)| *i == c.instance) {
                    Some((_, n)) => *n += 1,
                    None => by_instance.push((c.instance, 1)),
                }
                false
            }
            _ => true,
        });
        by_instance.into_iter().filter_map(|(inst, n)| self.record_misses(now, inst, n, f64::NAN)).collect()
    }

    /// `tokens`: what the decode side computed for them, when known.
    fn record_misses(&mut self, t: f64, instance: usize, n: u64, tokens: f64) -> Option<MissEvent> {
        if n == 0 {
            return None;
        }
        self.outcomes.silent_miss += n;
        let ev = MissEvent { t, count: n, decode_instance: instance, local_compute_tokens: tokens };
        self.events.push_back(ev.clone());
        while self.events.len() > 1000 {
            self.events.pop_front();
        }
        Some(ev)
    }

    /// A loaded request takes the oldest prefill that may have preceded it
    /// (a proxy sends to decode in prefill order). Where a whole-prompt
    /// request had claimed that one, the claimer had no prefill, unless the
    /// loaded request could as well have taken a newer unclaimed one: a
    /// request that recomputed its prompt finishes after loaded ones that
    /// arrived later, so which prefill was whose is then open and the
    /// claimer is unknown. A claim that only a tie or the scrape's slack
    /// allowed (a request sent straight to decode that ended just as a
    /// prefill completed) is no contest.
    fn take_for_loaded(&mut self, window: Arrival) -> bool {
        let Some(i) = self.pool.iter().position(|e| window.admits(e)) else {
            return false;
        };
        let Some(claim) = self.pool.remove(i).and_then(|e| e.claim) else {
            return true;
        };
        let other = self.pool.iter().any(|e| e.claim.is_none() && window.admits(e));
        if claim.firm && other {
            self.count_unknown(claim.decide_at - HOLD_SECS);
        } else {
            self.outcomes.no_prefill += 1;
        }
        true
    }

    fn expire(&mut self, now: f64) {
        // A claimed entry is settled by `settle`, never expired away.
        while self.pool.front().is_some_and(|e| e.claim.is_none() && now - e.latest > POOL_TTL_SECS) {
            self.pool.pop_front();
        }
    }

    /// Attributes an interval's TTFT observations to "loaded" or "computed"
    /// when the prompt-token sources of that interval are unambiguous.
    fn split_ttft(&mut self, iv: &Interval, threshold: f64) {
        let Some(ttft) = iv.hists.get(&Hist::Ttft) else {
            return;
        };
        let n = ttft.total();
        if n <= 0.0 {
            return;
        }
        let external = iv.counter(Counter::PromptExternal);
        let local = iv.counter(Counter::PromptLocalCompute);
        if !iv.counters.contains_key(&Counter::PromptExternal) {
            return;
        }
        if external > 0.0 && local <= n * threshold {
            self.ttft_loaded.merge(&ttft);
        } else if external == 0.0 && local > n * threshold {
            self.ttft_computed.merge(&ttft);
        }
    }

    /// Whole-prompt requests holding a claim on a prefill, not yet decided.
    pub fn held_claims(&self) -> usize {
        self.pool.iter().filter(|e| e.claim.is_some()).count()
    }

    /// Requests not decided yet: holding a claim, or waiting for the
    /// prefill side's next scrape.
    pub fn deciding(&self) -> usize {
        self.held_claims() + self.unseen.len()
    }

    /// Prefill completions still waiting for their decode request.
    pub fn pending_prefills(&self) -> usize {
        self.pool.len()
    }
}

/// An upper bound of the longest end-to-end latency among the requests
/// that finished in the interval (infinite when unknown).
fn longest_latency(iv: &Interval) -> f64 {
    let Some(e2e) = iv.hists.get(&Hist::E2e) else {
        return f64::INFINITY;
    };
    let per = e2e.per_bucket();
    match per.iter().rposition(|n| *n > 0.0) {
        Some(i) => e2e.bounds.get(i).copied().unwrap_or(f64::INFINITY),
        None => f64::INFINITY,
    }
}

/// A lower bound of the shortest end-to-end latency among the requests
/// that finished in the interval (0 when unknown).
fn shortest_latency(iv: &Interval) -> f64 {
    let Some(e2e) = iv.hists.get(&Hist::E2e) else {
        return 0.0;
    };
    let per = e2e.per_bucket();
    match per.iter().position(|n| *n > 0.0) {
        Some(0) | None => 0.0,
        Some(i) => e2e.bounds[i - 1],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn computed(per_bucket: &[f64]) -> Histogram {
        let mut h = Histogram::empty(&[1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 1000.0]);
        let mut run = 0.0;
        for (i, n) in per_bucket.iter().enumerate() {
            run += n;
            h.counts[i] = run;
        }
        for i in per_bucket.len()..h.counts.len() {
            h.counts[i] = run;
        }
        h.count = run;
        h
    }

    /// Judged with the prefill side scraped past it.
    fn judge(d: &mut MissDetector, iv: &Interval) -> Option<MissEvent> {
        d.on_decode_interval(1, iv, Some(16), f64::INFINITY)
    }

    fn interval(t: f64, ok: f64, hist: Option<Histogram>) -> Interval {
        let mut iv = Interval { t, ..Default::default() };
        iv.counters.insert(Counter::RequestsOk, ok);
        if let Some(h) = hist {
            iv.hists.insert(Hist::KvComputedTokens, h);
        }
        iv
    }

    #[test]
    fn whole_prompt_after_prefill_is_a_miss_and_without_is_no_prefill() {
        let mut d = MissDetector::default();
        // Two decode-only requests computing 1000 tokens: no prefill ran.
        judge(&mut d, &interval(1.0, 2.0, Some(computed(&[0., 0., 0., 0., 0., 0., 0., 2.]))));
        assert_eq!(d.outcomes.no_prefill, 2);
        // One prefill completes, then its decode computes the whole prompt.
        d.on_prefill_interval(&interval(2.0, 1.0, None));
        let ev = judge(&mut d, &interval(3.0, 1.0, Some(computed(&[0., 0., 0., 0., 0., 0., 0., 1.]))));
        assert_eq!(ev.map(|e| e.count), Some(1));
        // Two prefills, two decodes loading (16 tokens computed each).
        d.on_prefill_interval(&interval(4.0, 2.0, None));
        judge(&mut d, &interval(5.0, 2.0, Some(computed(&[0., 0., 0., 0., 2.]))));
        assert_eq!(
            d.outcomes,
            Counts { seen: 5, loaded: 2, silent_miss: 1, no_prefill: 2, ..Counts::default() }
        );
    }

    /// vLLM observes the computed tokens of every finished request, the
    /// failed ones too: a decode whose loads failed (router-nixl-1p2d, the
    /// prefill killed) observes whole prompts for them. They are errors,
    /// not misses; an answered request that may have been either is unknown.
    #[test]
    fn a_failed_request_is_no_miss_and_counts_once() {
        let mut d = MissDetector::default();
        d.on_prefill_interval(&interval(1.0, 3.0, None));
        let mut iv = interval(2.0, 0.0, Some(computed(&[0., 0., 0., 0., 0., 0., 0., 2.])));
        iv.counters.insert(Counter::RequestsErrored, 2.0);
        assert_eq!(judge(&mut d, &iv), None);
        assert_eq!(d.outcomes, Counts { seen: 2, error: 2, ..Counts::default() });
        // One failed, one answered, one whole prompt and one tail: which
        // was the failed one is open.
        let mut iv = interval(3.0, 1.0, Some(computed(&[0., 0., 0., 0., 1., 0., 0., 1.])));
        iv.counters.insert(Counter::RequestsErrored, 1.0);
        assert_eq!(judge(&mut d, &iv), None);
        assert_eq!(d.outcomes, Counts { seen: 4, error: 3, unknown: 1, ..Counts::default() });
    }

    /// The decode's scrape saw a whole-prompt request finish before the
    /// prefill side was scraped past its arrival: it waits for the next
    /// prefill scrape. Nothing there that may have preceded it: no prefill.
    /// A prefill there: whose is open, unknown. No scrape in time: unknown.
    #[test]
    fn a_prefill_not_scraped_past_the_arrival_is_waited_for() {
        let whole = |t: f64| interval(t, 1.0, Some(computed(&[0., 0., 0., 0., 0., 0., 0., 1.])));
        let mut d = MissDetector::default();
        assert!(d.on_decode_interval(1, &whole(10.0), Some(16), 9.0).is_none());
        assert_eq!((d.deciding(), d.outcomes.seen), (1, 1));
        d.recheck(10.5, 10.5);
        assert_eq!((d.deciding(), d.outcomes.no_prefill), (0, 1));

        assert!(d.on_decode_interval(1, &whole(20.0), Some(16), 19.0).is_none());
        let mut p = interval(20.5, 1.0, None);
        p.dt = 1.0;
        d.on_prefill_interval(&p);
        d.recheck(20.5, 20.5);
        assert_eq!((d.deciding(), d.outcomes.unknown), (0, 1));

        let mut d = MissDetector::default();
        assert!(d.on_decode_interval(1, &whole(30.0), Some(16), 29.0).is_none());
        d.recheck(29.0, 30.0 + HOLD_SECS - 0.5);
        assert_eq!(d.deciding(), 1);
        d.recheck(29.0, 30.0 + HOLD_SECS);
        assert_eq!((d.deciding(), d.outcomes.unknown), (0, 1));
    }

    /// A loaded request judged before its prefill was scraped takes it
    /// when it comes, as it would have on time: loaded, and the prefill is
    /// no later whole-prompt request's.
    #[test]
    fn a_waiting_loaded_request_takes_the_prefill_that_comes() {
        let mut d = MissDetector::default();
        let loaded = interval(10.0, 1.0, Some(computed(&[0., 0., 0., 0., 1.])));
        assert!(d.on_decode_interval(1, &loaded, Some(16), 9.0).is_none());
        let mut p = interval(10.5, 1.0, None);
        p.dt = 1.0;
        d.on_prefill_interval(&p);
        d.recheck(10.5, 10.5);
        assert_eq!((d.deciding(), d.pending_prefills(), d.outcomes.loaded), (0, 0, 1));
        let whole = interval(12.0, 1.0, Some(computed(&[0., 0., 0., 0., 0., 0., 0., 1.])));
        assert!(d.on_decode_interval(1, &whole, Some(16), 12.0).is_none());
        assert_eq!(d.outcomes, Counts { seen: 2, loaded: 1, no_prefill: 1, ..Counts::default() });
    }

    /// A rewind leaves nothing undecided: a held claim and a request
    /// waiting for the prefill's scrape are unknown, and every request seen
    /// has its outcome.
    #[test]
    fn a_rewind_decides_what_was_being_decided_as_unknown() {
        let mut d = MissDetector::default();
        let mut p = interval(10.5, 1.0, None);
        p.dt = 1.0;
        d.on_prefill_interval(&p);
        let whole = |t: f64| interval(t, 1.0, Some(computed(&[0., 0., 0., 0., 0., 0., 0., 1.])));
        judge(&mut d, &whole(10.2));
        assert!(d.on_decode_interval(1, &whole(11.0), Some(16), 10.5).is_none());
        assert_eq!(d.deciding(), 2);
        d.on_rewind();
        assert_eq!(d.deciding(), 0);
        assert_eq!(d.outcomes, Counts { seen: 2, unknown: 2, ..Counts::default() });
    }

    /// Started mid-run: a request that may have arrived within reach of a
    /// prefill completed before the prefills were first counted, with none
    /// in the pool, is unknown; one that arrived long after had none.
    #[test]
    fn a_prefill_before_the_first_scrape_leaves_a_request_unknown() {
        let mut d = MissDetector::default();
        let mut before = InstanceSample::default();
        before.counters.insert(Counter::RequestsOk, 3.0);
        d.on_prefill_first_scrape(100.0, Some(&before));
        let mut whole = interval(101.0, 1.0, Some(computed(&[0., 0., 0., 0., 0., 0., 0., 1.])));
        whole.dt = 1.0;
        let mut e2e = Histogram::empty(&[1.0, 2.0]);
        e2e.counts = vec![0.0, 1.0, 1.0];
        e2e.count = 1.0;
        whole.hists.insert(Hist::E2e, e2e.clone());
        assert!(d.on_decode_interval(1, &whole, Some(16), f64::INFINITY).is_none());
        assert_eq!(d.outcomes, Counts { seen: 1, unknown: 1, ..Counts::default() });
        whole.t = 120.0;
        assert!(d.on_decode_interval(1, &whole, Some(16), f64::INFINITY).is_none());
        assert_eq!(d.outcomes.no_prefill, 1);
    }

    /// Two prefills, one claimed by a whole-prompt request; a loaded request
    /// that may have followed either takes the older: which was whose is
    /// open, so the claimer is unknown, not a miss and not "no prefill".
    #[test]
    fn a_claim_a_loaded_request_contests_is_unknown() {
        let mut d = MissDetector::default();
        let mut p = interval(10.5, 1.0, None);
        p.dt = 1.0;
        d.on_prefill_interval(&p);
        let whole = interval(10.2, 1.0, Some(computed(&[0., 0., 0., 0., 0., 0., 0., 1.])));
        assert!(judge(&mut d, &whole).is_none());
        assert_eq!(d.held_claims(), 1);
        let mut p = interval(11.5, 1.0, None);
        p.dt = 1.0;
        d.on_prefill_interval(&p);
        judge(&mut d, &interval(12.0, 1.0, Some(computed(&[0., 0., 0., 0., 1.]))));
        assert_eq!(d.held_claims(), 0);
        assert!(d.settle(10.2 + HOLD_SECS).is_empty());
        assert_eq!(d.outcomes, Counts { seen: 2, loaded: 1, unknown: 1, ..Counts::default() });
    }

    #[test]
    fn a_prefill_completing_after_a_decode_only_request_arrived_is_not_its_prefill() {
        let mut d = MissDetector::default();
        // A prefill completes in (9.5, 10.0]...
        let mut p = interval(10.0, 1.0, None);
        p.dt = 0.5;
        d.on_prefill_interval(&p);
        // ...and a decode-only request that took at least 1.5 s finishes at
        // 10.1: it arrived by 8.6, before that prefill existed.
        let mut iv = interval(10.1, 1.0, Some(computed(&[0., 0., 0., 0., 0., 0., 0., 1.])));
        let mut e2e = Histogram::empty(&[1.0, 1.5, 2.0]);
        e2e.counts = vec![0.0, 0.0, 1.0, 1.0];
        e2e.count = 1.0;
        iv.hists.insert(Hist::E2e, e2e);
        assert!(judge(&mut d, &iv).is_none());
        assert_eq!(d.outcomes.no_prefill, 1);
        // The prefill is still waiting for its own decode request.
        assert_eq!(d.pending_prefills(), 1);
    }

    /// After a rewind (the demo's loop) the prefills before it are no
    /// later request's: the whole-prompt request is no miss.
    #[test]
    fn a_rewind_forgets_the_prefills_before_it() {
        let mut d = MissDetector::default();
        d.on_prefill_interval(&interval(2.0, 1.0, None));
        d.on_rewind();
        assert_eq!(d.pending_prefills(), 0);
        let iv = interval(3.0, 1.0, Some(computed(&[0., 0., 0., 0., 0., 0., 0., 1.])));
        assert!(judge(&mut d, &iv).is_none());
        assert_eq!(d.outcomes, Counts { seen: 1, no_prefill: 1, ..Counts::default() });
    }

    #[test]
    fn stale_prefills_expire() {
        let mut d = MissDetector::default();
        d.on_prefill_interval(&interval(0.0, 1.0, None));
        judge(&mut d, &interval(POOL_TTL_SECS + 1.0, 1.0, Some(computed(&[0., 0., 0., 0., 0., 0., 0., 1.]))));
        assert_eq!(d.outcomes.silent_miss, 0);
        assert_eq!(d.outcomes.no_prefill, 1);
    }
}
