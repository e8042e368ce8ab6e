//! Pairing by prompt length. Without a shared id a proxy's prefill copy
//! and its decode request are first paired by arrival order (`joiner.rs`);
//! every proxy sends both the same prompt, so once both lengths are known
//! (a span's `gen_ai.usage.prompt_tokens`, vLLM's DEBUG request details)
//! the pair is confirmed, or, when they differ, the prefill of the same
//! length in the window is swapped in. Exact only when no other prefill in
//! the window has that length and no decode of unknown length could take
//! it; otherwise the class of equal lengths is `length_join.rs`'s.

use super::correlator::Correlator;
use super::ids::{base_id, invented};
use super::length_join::api_on;
use super::model::{Hop, Join};
use super::store::failed_prefill;
use crate::feed::LogOrigin;

/// How far back (in ring entries) a prompt length looks for its partner.
const WINDOW_SCAN: usize = 1024;

impl Correlator {
    /// The oldest prefill still waiting for its decode, within the order
    /// window: of the decode request's API where one is (a proxy forwards
    /// to the same endpoint on both sides), else of any (one that prefills
    /// through another endpoint).
    pub(super) fn order_partner(&mut self, t: f64, api: Option<&str>) -> Option<u64> {
        let win = self.opts.order_window_s;
        self.joiner
            .partner(&self.store, t, win, api)
            .or_else(|| api.and_then(|_| self.joiner.partner(&self.store, t, win, None)))
    }

    /// A request's prompt length as an instance reported it (vLLM's DEBUG
    /// request details, an OpenTelemetry span): `id` is the instance's own
    /// id, with or without the engine suffix. On decode it settles which of
    /// several requests scheduled together an injected KV belonged to.
    pub fn on_prompt_tokens(&mut self, src: LogOrigin, id: &str, n: u32, at: f64) {
        self.prompt_tokens(src, id, n, at);
        self.settle_touched(false);
    }

    fn prompt_tokens(&mut self, src: LogOrigin, id: &str, n: u32, at: f64) {
        let at = if at.is_finite() { at } else { self.last_at };
        let Some(s) = self.find(id) else {
            return;
        };
        if let Some(e) = self.store.get_mut(s) {
            match src {
                LogOrigin::Decode(_) if e.trace.decode.is_some() => e.trace.prompt_tokens = Some(n),
                LogOrigin::Prefill(_) if e.trace.prefill.is_some() => e.track.prefill_tokens = Some(n),
                _ => {}
            }
        }
        if let LogOrigin::Decode(i) = src {
            self.resolve_groups_of(i, s, at);
        }
        // The decode requests and copies of this length around it.
        let t = self.store.get(s).map(|e| match src {
            LogOrigin::Decode(_) => e.track.decode_event_t.unwrap_or(e.trace.first_seen),
            _ => e.trace.phase(Hop::Producer).map_or(e.trace.first_seen, |p| p.start),
        });
        if let Some(t) = t {
            self.join_by_length(n, t, at);
            // This length may free the classes that waited for it.
            self.retry_held_lengths(t, at);
        }
        // Both sides' lengths may now settle (or overturn) an order join.
        let Some(s) = self.find(id) else { return };
        self.rejoin_by_tokens(s, at);
        // A prefill's length, once known, may also free the order joins
        // around it that it kept from being exact.
        if matches!(src, LogOrigin::Prefill(_))
            && let Some(e) = self.store.get(s)
        {
            let start = e.trace.phase(Hop::Producer).map_or(e.trace.first_seen, |ph| ph.start);
            let win = self.opts.order_window_s;
            let near: Vec<u64> = self
                .window(start + win, s)
                .into_iter()
                .chain(self.window(start, s))
                .filter(|&o| {
                    self.store.get(o).is_some_and(|x| {
                        x.trace.join == Join::ByOrder
                            && x.trace.prompt_tokens.is_some()
                            && x.trace.prompt_tokens == x.track.prefill_tokens
                    })
                })
                .collect();
            for o in near {
                self.rejoin_by_tokens(o, at);
            }
        }
    }

    /// The one instance that logged `id` (a span's `gen_ai.request.id`,
    /// without the engine suffix): none when both sides share it.
    pub fn side_of(&self, id: &str) -> Option<LogOrigin> {
        let e = self.store.get(self.find(id)?)?;
        let mut sides = e.trace.engine_ids.iter().filter(|(_, x)| x == id).map(|(o, _)| *o);
        let first = sides.next()?;
        sides.all(|o| o == first).then_some(first)
    }

    /// The prefill instance that ran the request an instance id names.
    pub fn prefill_of(&self, id: &str) -> Option<usize> {
        self.store.get(self.find(id)?).and_then(|e| e.trace.prefill)
    }

    /// Checks trace `s`'s order join against the prompt lengths known.
    pub(super) fn rejoin_by_tokens(&mut self, s: u64, at: f64) {
        let Some(e) = self.store.get(s) else { return };
        if e.trace.join != Join::ByOrder || e.trace.prefill.is_none() {
            return;
        }
        if e.trace.decode.is_none() {
            // A prefill copy whose length came late: the order-joined
            // trace of that length in its window may want it.
            if e.track.prefill_tokens.is_none() {
                return;
            }
            let start = e.trace.phase(Hop::Producer).map_or(e.trace.first_seen, |ph| ph.start);
            let p = e.track.prefill_tokens;
            let wants = self.window(start, s).into_iter().find(|&o| {
                self.store.get(o).is_some_and(|x| {
                    x.trace.join == Join::ByOrder
                        && x.trace.prompt_tokens == p
                        && x.track.prefill_tokens.is_some_and(|q| Some(q) != p)
                })
            });
            if let Some(o) = wants {
                self.rejoin_by_tokens(o, at);
            }
            return;
        }
        let (p, d) = (e.track.prefill_tokens, e.trace.prompt_tokens);
        let t = e.track.decode_event_t.unwrap_or(e.trace.first_seen);
        let Some(d) = d else { return };
        // Other prefills of this length started in the decode's window,
        // through the decode's API (a proxy copies to the client's path).
        let api = api_on(e, true);
        let same: Vec<u64> = self
            .window(t, s)
            .into_iter()
            .filter(|&o| {
                self.store.get(o).is_some_and(|x| {
                    let theirs = api_on(x, false);
                    x.track.prefill_tokens == Some(d) && (api.is_none() || theirs.is_none() || api == theirs)
                })
            })
            .collect();
        let Some(p) = p else { return };
        if p == d {
            // Exact only when no other prefill copy in the window could be
            // this one's: none of the same length, none whose length no
            // source gave (a dropped span, no DEBUG line) still free.
            let unknown = self.window(t, s).into_iter().any(|o| {
                self.store.get(o).is_some_and(|x| {
                    x.track.prefill_tokens.is_none() && (x.trace.decode.is_none() || !x.trace.join.exact())
                })
            });
            if same.is_empty() && !unknown && !self.rival_decodes(s, d) {
                self.confirm(s, d, at);
            }
            return;
        }
        // Its prefill was another request's: take the one of this length,
        // if exactly one fits (one not known to be another decode's own).
        let [o] = same[..] else { return };
        // A failed prefill's error is its trace's verdict: moving prefill
        // sides would leave it on the other request, so it stays by order.
        let failed = |c: &Correlator, x: u64| c.store.get(x).is_some_and(failed_prefill);
        if failed(self, s) || failed(self, o) {
            return;
        }
        let fits = self.store.get(o).is_some_and(|x| !x.trace.join.exact() || x.trace.decode.is_none());
        let theirs = self.store.get(o).and_then(|x| x.trace.decode.and(x.trace.prompt_tokens));
        if !fits || theirs.is_some_and(|q| q == d) {
            return;
        }
        self.swap_prefills(s, o);
        self.confirm(s, d, at);
        // The other trace now holds this one's old prefill: check it too.
        self.rejoin_by_tokens(o, at);
    }

    /// Traces other than `s` with a prefill that started within the order
    /// window before `t` (or a second after: stamps are whole seconds).
    fn window(&self, t: f64, s: u64) -> Vec<u64> {
        let win = self.opts.order_window_s;
        let mut out = Vec::new();
        // Bounded: a span comes within seconds of its request.
        for o in self.store.serials().rev().take(WINDOW_SCAN) {
            let Some(x) = self.store.get(o) else { continue };
            if x.trace.first_seen < t - 4.0 * win {
                break;
            }
            let start = x.trace.prefill.and(x.trace.phase(Hop::Producer)).map(|ph| ph.start);
            if o != s && start.is_some_and(|st| st >= t - win && st <= t + 1.0) {
                out.push(o);
            }
        }
        out
    }

    /// Both sides reported `n` prompt tokens: the pair is one request.
    fn confirm(&mut self, s: u64, _n: u32, at: f64) {
        let Some(e) = self.store.get_mut(s) else { return };
        e.trace.join = Join::ByPromptTokens;
        self.settle(s, at);
    }

    /// Another decode request of length `n` (or of a length not known
    /// yet) that trace `s`'s copy could be for.
    fn rival_decodes(&self, s: u64, n: u32) -> bool {
        let Some(e) = self.store.get(s) else { return false };
        let Some(start) = e.trace.phase(Hop::Producer).map(|p| p.start) else { return false };
        let win = self.opts.prefill_only_timeout_s.max(self.opts.order_window_s);
        self.store.serials().rev().take(WINDOW_SCAN).any(|o| {
            self.store.get(o).is_some_and(|x| {
                o != s
                    && x.trace.decode.is_some()
                    && (x.trace.prefill.is_none() || !x.trace.join.exact())
                    && !x.track.decode_has_params
                    && x.trace.prompt_tokens.is_none_or(|m| m == n)
                    && x.track.decode_event_t.is_some_and(|dt| dt >= start - 1.0 && dt - start <= win)
                    && invented(base_id(&x.trace.id))
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::feed::LogOrigin;
    use crate::traces::{Correlator, CorrelatorOptions, Join};

    /// A `Received request` line of vLLM 0.26.0 (`request_logger.py:63`):
    /// the 2P2D capture's `vllm-decode.log` line for cmpl-97ef464d61aa9738-0,
    /// with another pid, time, id and `max_tokens`.
    fn received(pid: u32, hms: &str, id: &str, max_tokens: u32) -> String {
        format!(
            "(APIServer pid={pid}) INFO 12-01 {hms} [request_logger.py:63] Received request {id}: params: SamplingParams(n=1, presence_penalty=0.0, frequency_penalty=0.0, repetition_penalty=1.0, temperature=0.0, top_p=1.0, top_k=0, min_p=0.0, seed=None, stop=[], stop_token_ids=[], bad_words=[], thinking_token_budget=None, include_stop_str_in_output=False, ignore_eos=True, max_tokens={max_tokens}, min_tokens=0, logprobs=None, prompt_logprobs=None, skip_special_tokens=True, spaces_between_special_tokens=True, structured_outputs=None, extra_args=None), lora_request: None."
        )
    }

    #[test]
    fn prompt_lengths_swap_two_concurrent_order_pairs() {
        let mut c = Correlator::new(CorrelatorOptions::default());
        let at = 1_796_162_765.0;
        let (p1, p2) = ("cmpl-a6bd3e434eae2d58-0", "cmpl-ae550443b883b66e-0");
        let (d1, d2) = ("cmpl-b182411064cd37e2-0", "cmpl-aa7ccc423d79c962-0");
        c.on_line(LogOrigin::Prefill(0), &received(579, "22:06:05", p1, 1), at);
        c.on_line(LogOrigin::Prefill(1), &received(580, "22:06:05", p2, 1), at);
        // The decodes arrive in the other order: arrival order pairs d1 with p1.
        c.on_line(LogOrigin::Decode(0), &received(1721, "22:06:05", d2, 48), at + 0.2);
        c.on_line(LogOrigin::Decode(1), &received(1722, "22:06:05", d1, 48), at + 0.3);
        let first = c.get("cmpl-aa7ccc423d79c962").unwrap();
        assert_eq!((first.join, first.prefill), (Join::ByOrder, Some(0)));
        // Spans: p1 had 412 tokens, p2 1025; the decodes d1 412, d2 1025.
        c.on_prompt_tokens(LogOrigin::Prefill(0), p1, 412, at + 1.0);
        c.on_prompt_tokens(LogOrigin::Prefill(1), p2, 1025, at + 1.0);
        c.on_prompt_tokens(LogOrigin::Decode(0), d2, 1025, at + 2.0);
        let t2 = c.get("cmpl-aa7ccc423d79c962").unwrap();
        assert_eq!((t2.join, t2.prefill), (Join::ByPromptTokens, Some(1)), "{t2:?}");
        assert!(t2.engine_ids.iter().any(|(o, id)| *o == LogOrigin::Prefill(1) && id == p2));
        c.on_prompt_tokens(LogOrigin::Decode(1), d1, 412, at + 2.0);
        let t1 = c.get("cmpl-b182411064cd37e2").unwrap();
        assert_eq!((t1.join, t1.prefill), (Join::ByPromptTokens, Some(0)), "{t1:?}");
        // The prefill ids now find the right traces.
        assert_eq!(c.decode_of(p2), Some(0));
        assert_eq!(c.decode_of(p1), Some(1));
    }

    /// Two copies of one length: either could be the decode's. The join
    /// is by length among them (the verdict holds for each), never exact.
    #[test]
    fn equal_lengths_name_every_copy_and_stay_unsure_of_which() {
        let mut c = Correlator::new(CorrelatorOptions::default());
        let at = 1_796_162_765.0;
        let (p1, p2) = ("cmpl-a6bd3e434eae2d58-0", "cmpl-ae550443b883b66e-0");
        let (d1, d2) = ("cmpl-b182411064cd37e2-0", "cmpl-aa7ccc423d79c962-0");
        c.on_line(LogOrigin::Prefill(0), &received(579, "22:06:05", p1, 1), at);
        c.on_line(LogOrigin::Prefill(1), &received(580, "22:06:05", p2, 1), at);
        c.on_line(LogOrigin::Decode(0), &received(1721, "22:06:05", d1, 48), at + 0.2);
        c.on_line(LogOrigin::Decode(1), &received(1722, "22:06:05", d2, 48), at + 0.3);
        for (o, id) in [(LogOrigin::Prefill(0), p1), (LogOrigin::Prefill(1), p2)] {
            c.on_prompt_tokens(o, id, 500, at + 1.0);
        }
        c.on_prompt_tokens(LogOrigin::Decode(0), d1, 500, at + 2.0);
        // Two prefills of 500 tokens in the window: either could be its.
        let t = c.get("cmpl-b182411064cd37e2").unwrap();
        assert_eq!(t.join, Join::ByPromptTokens, "{t:?}");
        c.finish(at + 20.0);
        let t = c.get("cmpl-b182411064cd37e2").unwrap();
        assert!(
            t.evidence().contains("one of 2 copies of 500 tokens, each giving this verdict"),
            "{}",
            t.evidence()
        );
        assert_ne!(t.confidence, crate::traces::Confidence::Sure, "{t:?}");
    }

    /// A rival prefill copy whose length no source gave (its span dropped)
    /// could be the decode's: the join by length names it, and is not sure
    /// until its length is known.
    #[test]
    fn an_unknown_length_in_the_window_keeps_the_join_by_order() {
        let mut c = Correlator::new(CorrelatorOptions::default());
        let at = 1_796_162_765.0;
        let (p1, p2) = ("cmpl-a6bd3e434eae2d58-0", "cmpl-ae550443b883b66e-0");
        let d1 = "cmpl-b182411064cd37e2-0";
        c.on_line(LogOrigin::Prefill(0), &received(579, "22:06:05", p1, 1), at);
        c.on_line(LogOrigin::Prefill(1), &received(580, "22:06:05", p2, 1), at);
        c.on_line(LogOrigin::Decode(0), &received(1721, "22:06:05", d1, 48), at + 0.2);
        c.on_prompt_tokens(LogOrigin::Prefill(0), p1, 412, at + 1.0);
        c.on_prompt_tokens(LogOrigin::Decode(0), d1, 412, at + 2.0);
        c.sweep(at + 40.0, false);
        let t = c.get("cmpl-b182411064cd37e2").unwrap();
        assert!(t.evidence().contains(&format!("or a copy of unknown length: {p2}")), "{}", t.evidence());
        assert_ne!(t.confidence, crate::traces::Confidence::Sure, "{t:?}");
        // The rival's length comes, and differs: now the join is exact.
        c.on_prompt_tokens(LogOrigin::Prefill(1), p2, 1025, at + 3.0);
        let t = c.get("cmpl-b182411064cd37e2").unwrap();
        assert_eq!((t.join, t.prefill), (Join::ByPromptTokens, Some(0)), "{t:?}");
    }
}
