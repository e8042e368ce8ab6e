//! Joins by prompt length: the same facts give the same pairs whatever
//! order they come in, and a copy goes with what is said of it.

use crate::feed::LogOrigin;
use crate::traces::{Confidence, Correlator, CorrelatorOptions, Hop, Join, Outcome, Trace};

const AT: f64 = 1_796_162_765.0;
/// Prefill copies and decode requests with ids their instances invented
/// (the proxy forwards none).
const P1: &str = "cmpl-a6bd3e434eae2d58-0";
const P2: &str = "cmpl-ae550443b883b66e-0";
const D1: &str = "cmpl-b182411064cd37e2-0";
const D2: &str = "cmpl-aa7ccc423d79c962-0";

/// A `Received request` line of vLLM 0.26.0 (`request_logger.py:63`):
/// the bench capture's, with another pid, time, id and `max_tokens`.
fn received(pid: u32, hms: &str, id: &str, max_tokens: u32) -> String {
    format!(
        "(APIServer pid={pid}) INFO 12-01 {hms} [request_logger.py:63] Received request {id}: params: SamplingParams(n=1, presence_penalty=0.0, frequency_penalty=0.0, repetition_penalty=1.0, temperature=0.0, top_p=1.0, top_k=0, min_p=0.0, seed=None, stop=[], stop_token_ids=[], bad_words=[], thinking_token_budget=None, include_stop_str_in_output=False, ignore_eos=True, max_tokens={max_tokens}, min_tokens=0, logprobs=None, prompt_logprobs=None, skip_special_tokens=True, spaces_between_special_tokens=True, structured_outputs=None, extra_args=None), lora_request: None."
    )
}

/// uvicorn's access line as vLLM's API server prints it (no stamp).
fn access(pid: u32, status: &str) -> String {
    format!("(APIServer pid={pid}) INFO:     127.0.0.1:50642 - \"POST /v1/completions HTTP/1.1\" {status}")
}

/// The bench capture's decode: NIXL, a connector that pulls by params.
fn nixl_decode(c: &mut Correlator) {
    let log = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/lab-captures/nixl-1p2d-bench/vllm-decode.log"
    ))
    .unwrap();
    let args = log.lines().find(|l| l.contains("non-default args")).unwrap();
    c.on_line(LogOrigin::Decode(0), args, AT - 5.0);
}

fn trace<'a>(c: &'a Correlator, id: &str) -> &'a Trace {
    c.get(&id[..id.len() - 2]).unwrap()
}

fn verdict(c: &Correlator, id: &str) -> (Join, Option<usize>, Outcome, Confidence) {
    let t = trace(c, id);
    (t.join, t.prefill, t.outcome, t.confidence)
}

/// One copy of 500 tokens, two decode requests of 500 without params:
/// one of them had no prefill, and which is not known, in whichever order
/// their spans come.
#[test]
fn span_order_does_not_change_the_pairs() {
    let run = |d2_first: bool| {
        let mut c = Correlator::new(CorrelatorOptions::default());
        nixl_decode(&mut c);
        c.on_line(LogOrigin::Prefill(0), &received(579, "22:06:05", P1, 1), AT);
        c.on_line(LogOrigin::Decode(0), &received(1721, "22:06:05", D1, 48), AT + 0.2);
        c.on_line(LogOrigin::Decode(0), &received(1721, "22:06:05", D2, 48), AT + 0.3);
        c.on_prompt_tokens(LogOrigin::Prefill(0), P1, 500, AT + 1.0);
        for d in if d2_first { [D2, D1] } else { [D1, D2] } {
            c.on_prompt_tokens(LogOrigin::Decode(0), d, 500, AT + 2.0);
        }
        c.finish(AT + 100.0);
        [verdict(&c, D1), verdict(&c, D2)]
    };
    let (a, b) = (run(false), run(true));
    assert_eq!(a, b);
    for (join, _, outcome, confidence) in a {
        assert_ne!(join, Join::ByPromptTokens, "{a:?}");
        assert!(outcome == Outcome::Unknown || confidence != Confidence::Sure, "{a:?}");
        assert_ne!(outcome, Outcome::SilentMiss, "{a:?}");
    }
}

/// A pair joined by length alone, then another decode request of that
/// length in its window: one of the two had no prefill, so the pair is
/// taken apart, not left sure.
#[test]
fn a_later_decode_of_the_same_length_takes_the_pair_apart() {
    let mut c = Correlator::new(CorrelatorOptions::default());
    nixl_decode(&mut c);
    c.on_line(LogOrigin::Prefill(0), &received(579, "22:06:05", P1, 1), AT);
    c.on_line(LogOrigin::Decode(0), &received(1721, "22:06:05", D1, 48), AT + 0.2);
    c.on_prompt_tokens(LogOrigin::Prefill(0), P1, 500, AT + 1.0);
    c.on_prompt_tokens(LogOrigin::Decode(0), D1, 500, AT + 2.0);
    assert_eq!(verdict(&c, D1).0, Join::ByPromptTokens);
    c.on_line(LogOrigin::Decode(0), &received(1721, "22:06:09", D2, 48), AT + 4.0);
    c.on_prompt_tokens(LogOrigin::Decode(0), D2, 500, AT + 6.0);
    c.finish(AT + 100.0);
    for d in [D1, D2] {
        let (join, prefill, outcome, _) = verdict(&c, d);
        assert_eq!((join, prefill), (Join::ById, None), "{d}: {:?}", trace(&c, d));
        assert_eq!(outcome, Outcome::Unknown, "{d}: {}", trace(&c, d).evidence());
    }
    // The copy is a trace of its own again, found by its id.
    let copy = trace(&c, P1);
    assert_eq!((copy.prefill, copy.decode), (Some(0), None));
}

/// The client retried after its prefill copy failed: the failed copy is
/// no decode request's (the proxy stopped there), so the retry's copy is
/// the decode's, and the failure stays on the request it ended.
#[test]
fn a_failed_copy_is_no_decodes() {
    let mut c = Correlator::new(CorrelatorOptions::default());
    c.on_line(LogOrigin::Prefill(0), &received(579, "22:06:05", P1, 1), AT);
    c.on_line(LogOrigin::Prefill(0), &access(579, "500 Internal Server Error"), AT + 0.1);
    c.on_line(LogOrigin::Prefill(0), &received(579, "22:06:06", P2, 1), AT + 1.0);
    c.on_line(LogOrigin::Decode(0), &received(1721, "22:06:06", D1, 48), AT + 1.3);
    c.on_prompt_tokens(LogOrigin::Prefill(0), P1, 500, AT + 2.0);
    c.on_prompt_tokens(LogOrigin::Decode(0), D1, 500, AT + 2.0);
    c.on_prompt_tokens(LogOrigin::Prefill(0), P2, 500, AT + 2.0);
    c.finish(AT + 100.0);
    let d = trace(&c, D1);
    assert_ne!(d.outcome, Outcome::Error, "{}", d.evidence());
    assert!(d.engine_ids.iter().any(|(o, id)| *o == LogOrigin::Prefill(0) && id == P2), "{d:?}");
    let failed = trace(&c, P1);
    assert_eq!((failed.outcome, failed.error_at, failed.decode), (Outcome::Error, Some(Hop::Producer), None));
}

/// A copy moved to another trace by its length: the access line it waited
/// for answers the trace that holds it now, and the next line the next copy.
#[test]
fn a_moved_copys_access_line_follows_it() {
    let mut c = Correlator::new(CorrelatorOptions::default());
    c.on_line(LogOrigin::Prefill(0), &received(579, "22:06:05", P1, 1), AT);
    c.on_line(LogOrigin::Prefill(0), &received(579, "22:06:30", P2, 1), AT + 21.0);
    c.on_line(LogOrigin::Decode(0), &received(1721, "22:06:25", D1, 48), AT + 21.5);
    c.on_prompt_tokens(LogOrigin::Prefill(0), P1, 500, AT + 22.0);
    c.on_prompt_tokens(LogOrigin::Decode(0), D1, 500, AT + 22.0);
    assert_eq!(verdict(&c, D1).1, Some(0));
    assert!(trace(&c, D1).engine_ids.iter().any(|(_, id)| id == P1));
    // The prefill log's access lines, in its order: P1 answered, P2 failed.
    c.on_line(LogOrigin::Prefill(0), &access(579, "200 OK"), AT + 23.0);
    c.on_line(LogOrigin::Prefill(0), &access(579, "500 Internal Server Error"), AT + 23.1);
    c.finish(AT + 200.0);
    assert_ne!(trace(&c, D1).outcome, Outcome::Error, "{}", trace(&c, D1).evidence());
    let p2 = trace(&c, P2);
    assert_eq!((p2.outcome, p2.error_at), (Outcome::Error, Some(Hop::Producer)), "{}", p2.evidence());
    // No error of its own made up for a line that found no request.
    assert!(
        c.traces().all(|t| !t.id.contains("error")),
        "{:?}",
        c.traces().map(|t| &t.id).collect::<Vec<_>>()
    );
}

/// A rival copy whose length is not known yet is named, and the verdict
/// is likely; once its length comes and differs, the pair is exact.
#[test]
fn a_copy_of_unknown_length_is_named_until_its_length_comes() {
    let mut c = Correlator::new(CorrelatorOptions::default());
    nixl_decode(&mut c);
    c.on_line(LogOrigin::Prefill(0), &received(579, "22:06:05", P1, 1), AT);
    c.on_line(LogOrigin::Prefill(0), &received(579, "22:06:05", P2, 1), AT + 0.1);
    c.on_line(LogOrigin::Decode(0), &received(1721, "22:06:06", D1, 48), AT + 1.2);
    c.on_prompt_tokens(LogOrigin::Prefill(0), P1, 500, AT + 2.0);
    c.on_prompt_tokens(LogOrigin::Decode(0), D1, 500, AT + 2.0);
    c.sweep(AT + 40.0, false);
    let t = trace(&c, D1);
    assert_eq!(t.join, Join::ByPromptTokens);
    assert_eq!(t.outcome, Outcome::SilentMiss, "{}", t.evidence());
    assert_eq!(t.confidence, Confidence::Likely, "{}", t.evidence());
    assert!(t.evidence().contains(&format!("or a copy of unknown length: {P2}")), "{}", t.evidence());
    c.on_prompt_tokens(LogOrigin::Prefill(0), P2, 812, AT + 41.0);
    let t = trace(&c, D1);
    assert_eq!(
        (t.join, t.outcome, t.confidence),
        (Join::ByPromptTokens, Outcome::SilentMiss, Confidence::Sure)
    );
    assert!(!t.evidence().contains("unknown length"), "{}", t.evidence());
}

/// One copy and one decode request of 500 tokens, answered and sent in the
/// same second; two requests whose length never comes (aborted: no span)
/// near them. One came through the chat API, the other six seconds after
/// the copy answered: neither can have been its, so the pair is exact
/// (`demo-proxy-qwen3`: the cancels and decode errors around its misses).
#[test]
fn requests_the_copy_cannot_be_for_do_not_hold_its_length() {
    let mut c = Correlator::new(CorrelatorOptions::default());
    nixl_decode(&mut c);
    let chat = "chatcmpl-93f35520d13dc515";
    c.on_line(LogOrigin::Prefill(0), &received(579, "22:06:05", P1, 1), AT);
    c.on_line(LogOrigin::Prefill(0), &access(579, "200 OK"), AT + 0.5);
    c.on_line(LogOrigin::Decode(0), &received(1721, "22:06:05", D1, 48), AT + 0.6);
    c.on_line(LogOrigin::Decode(0), &received(1721, "22:06:06", chat, 48), AT + 1.0);
    c.on_line(LogOrigin::Decode(0), &received(1721, "22:06:11", D2, 48), AT + 6.0);
    c.on_prompt_tokens(LogOrigin::Prefill(0), P1, 500, AT + 7.0);
    c.on_prompt_tokens(LogOrigin::Decode(0), D1, 500, AT + 7.0);
    let (join, prefill, _, _) = verdict(&c, D1);
    assert_eq!((join, prefill.is_some()), (Join::ByPromptTokens, true), "{}", trace(&c, D1).evidence());
    assert!(!trace(&c, D1).evidence().contains("copies"), "{}", trace(&c, D1).evidence());
}

/// A decode request of 500 tokens sent straight to decode seven seconds
/// before a copy and its decode request of 500: no copy fits it, so it is
/// not the class's, and the pair is exact (the demo capture's no-prefill
/// requests, live: they had taken the class apart and left a phantom).
#[test]
fn a_decode_no_copy_fits_is_not_of_the_class() {
    let mut c = Correlator::new(CorrelatorOptions::default());
    nixl_decode(&mut c);
    c.on_line(LogOrigin::Decode(0), &received(1721, "22:05:58", D2, 48), AT - 7.0);
    c.on_prompt_tokens(LogOrigin::Decode(0), D2, 500, AT - 6.0);
    c.on_line(LogOrigin::Prefill(0), &received(579, "22:06:05", P1, 1), AT);
    c.on_line(LogOrigin::Prefill(0), &access(579, "200 OK"), AT + 0.5);
    c.on_line(LogOrigin::Decode(0), &received(1721, "22:06:05", D1, 48), AT + 0.6);
    c.on_prompt_tokens(LogOrigin::Prefill(0), P1, 500, AT + 2.0);
    c.on_prompt_tokens(LogOrigin::Decode(0), D1, 500, AT + 2.0);
    let (join, prefill, _, _) = verdict(&c, D1);
    assert_eq!((join, prefill.is_some()), (Join::ByPromptTokens, true), "{}", trace(&c, D1).evidence());
    assert!(trace(&c, D2).prefill.is_none(), "{}", trace(&c, D2).evidence());
}
