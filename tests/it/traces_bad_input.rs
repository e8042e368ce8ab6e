//! Bad input on the paths the demo proxy exercises: a clear state, never a
//! panic, never a verdict the input does not support.

use pdtop::feed::LogOrigin;
use pdtop::traces::{Correlator, CorrelatorOptions, Hop, Outcome};

const T: f64 = 1_800_000_000.0;

fn fed(lines: &[(LogOrigin, &str)]) -> Correlator {
    let mut c = Correlator::new(CorrelatorOptions::default());
    c.set_instance_addr(LogOrigin::Prefill(0), "127.0.0.1:8100");
    c.set_instance_addr(LogOrigin::Decode(0), "127.0.0.1:8200");
    c.set_instance_addr(LogOrigin::Decode(1), "127.0.0.1:8201");
    for (k, (src, l)) in lines.iter().enumerate() {
        c.on_line(*src, l, T + k as f64 * 0.01);
    }
    c.finish(T + 120.0);
    c
}

const P: LogOrigin = LogOrigin::Prefill(0);
const D: LogOrigin = LogOrigin::Decode(0);
const X: LogOrigin = LogOrigin::Proxy;

#[test]
fn access_line_cut_mid_way() {
    let c = fed(&[
        (P, "Received request cmpl-a1b2c3d4e5f60718-0: params: SamplingParams(max_tokens=1)"),
        (P, "(APIServer pid=1) INFO:     127.0.0.1:34640 - \"POST /v1/completions HTTP/1.1\" 2"),
        (P, "(APIServer pid=1) INFO:     127.0.0.1:34640 - \"POST /v1/compl"),
        (D, "(APIServer pid=2) INFO:     127.0.0.1:40118 - \"POST /v1/completions HTTP/1.1\" 4"),
        (X, "INFO:     127.0.0.1:53002 - \"POST /v1/completions HTTP/1.1\" "),
        (X, "INFO:     127.0.0.1:53002 - \"POST"),
    ]);
    let n = c.counts();
    // A cut access line is not an error of anyone's.
    assert_eq!((n.error, n.silent_miss, n.pending), (0, 0, 0), "{n:?}");
    assert_eq!(n.seen, 1, "{n:?}");
}

#[test]
fn traceback_without_its_header() {
    let c = fed(&[
        (P, "Received request cmpl-a1b2c3d4e5f60718-0: params: SamplingParams(max_tokens=1)"),
        (D, "Received request cmpl-0f1e2d3c4b5a6978-0: params: SamplingParams(max_tokens=9)"),
        (D, "Added request cmpl-0f1e2d3c4b5a6978-0-01234567."),
        (D, "  File \"/lab/site/vllm/v1/engine/core_client.py\", line 1061, in get_output_async"),
        (D, "    raise self._format_exception(outputs) from None"),
        (
            D,
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.",
        ),
        (
            D,
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.",
        ),
        (D, "Error in completion stream generator."),
    ]);
    let st = c.stats();
    let d = st.sources.iter().find(|s| s.source == D).expect("decode");
    // One engine death, however many lines repeat it.
    assert_eq!(d.deaths, 1, "{d:?}");
    let t = c.traces().find(|t| t.decode == Some(0)).expect("trace");
    assert_eq!((t.outcome, t.error_at), (Outcome::Error, Some(Hop::Consumer)), "{}", t.evidence());
}

#[test]
fn a_proxy_log_from_a_proxy_we_do_not_know() {
    let c = fed(&[
        (X, "2026/12/01 07:29:11 [info] 1#1: *1 upstream: \"http://127.0.0.1:8200/v1/completions\""),
        (
            X,
            "127.0.0.1 - - [01/Dec/2026:07:29:11 +0000] \"POST /v1/completions HTTP/1.1\" 200 512 \"-\" \"curl\"",
        ),
        (X, "{\"time\": \"07:29:11\", \"msg\": \"forwarded\", \"upstream\": \"decode\"}"),
        (X, "panic: runtime error: index out of range [3] with length 3"),
        (X, "(<class 'Broken"),
        (X, "[\"<class 'x'>\", '"),
    ]);
    let n = c.counts();
    assert_eq!((n.silent_miss, n.loaded, n.no_prefill, n.pending), (0, 0, 0, 0), "{n:?}");
    for t in c.traces() {
        assert!(matches!(t.outcome, Outcome::Error | Outcome::Unknown), "{t:?}");
    }
}

#[test]
fn colliding_ids() {
    // Two requests reuse one id at once, and one random id shows up on both
    // instances (a collision, not a forwarded id).
    let c = fed(&[
        (D, "KVTransferConfig(kv_connector='ExampleConnector', kv_role='kv_consumer')"),
        (P, "Received request cmpl-dup-0: params: SamplingParams(max_tokens=1)"),
        (P, "Received request cmpl-dup-0: params: SamplingParams(max_tokens=1)"),
        (D, "Received request cmpl-dup-0: params: SamplingParams(max_tokens=9)"),
        (D, "Received request cmpl-dup-0: params: SamplingParams(max_tokens=9)"),
        (D, "Added request cmpl-dup-0-00000001."),
        (D, "Added request cmpl-dup-0-00000001."),
        (D, "External Cache Hit!"),
        (D, "Inject KV cache of 32 tokens to the paged memory"),
        (D, "Aborted request(s) cmpl-dup-0-00000001."),
        (D, "Request cmpl-dup-0 failed (engine dead)."),
        (X, "ERROR:root:ClientError occurred: Cannot connect to host 127.0.0.1:8201 ssl:default"),
    ]);
    let n = c.counts();
    assert_eq!(n.pending, 0, "{n:?}");
    assert!(n.seen >= 1 && n.seen <= 6, "{n:?}");
    assert_eq!(n.silent_miss, 0, "{n:?}");
}

/// XpYd: which decode served each request; a request sent to a decode that
/// is down is an error at that decode.
#[test]
fn two_decodes_and_one_down() {
    let d1 = LogOrigin::Decode(1);
    let c = fed(&[
        (D, "KVTransferConfig(kv_connector='ExampleConnector', kv_role='kv_consumer')"),
        (d1, "KVTransferConfig(kv_connector='ExampleConnector', kv_role='kv_consumer')"),
        (X, "INFO:     Started server process [1308]"),
        (P, "Received request cmpl-1111111111111111-0: params: SamplingParams(max_tokens=1)"),
        (P, "INFO:     127.0.0.1:1 - \"POST /v1/completions HTTP/1.1\" 200 OK"),
        (X, "INFO:     127.0.0.1:2 - \"POST /v1/completions HTTP/1.1\" 200 OK"),
        (D, "Received request cmpl-aaaaaaaaaaaaaaaa-0: params: SamplingParams(max_tokens=9)"),
        (D, "Added request cmpl-aaaaaaaaaaaaaaaa-0-00000001."),
        (D, "External Cache Hit!"),
        (D, "Inject KV cache of 32 tokens to the paged memory"),
        (P, "Received request cmpl-2222222222222222-0: params: SamplingParams(max_tokens=1)"),
        (P, "INFO:     127.0.0.1:3 - \"POST /v1/completions HTTP/1.1\" 200 OK"),
        (X, "INFO:     127.0.0.1:4 - \"POST /v1/completions HTTP/1.1\" 200 OK"),
        (
            X,
            "ERROR:root:ClientError occurred: Cannot connect to host 127.0.0.1:8201 ssl:default [Connect call failed ('127.0.0.1', 8201)]",
        ),
    ]);
    let a = c.get("cmpl-aaaaaaaaaaaaaaaa").expect("served");
    assert_eq!((a.outcome, a.decode), (Outcome::Loaded, Some(0)), "{}", a.evidence());
    let down = c.traces().find(|t| t.outcome == Outcome::Error).expect("error");
    assert_eq!((down.decode, down.error_at), (Some(1), Some(Hop::Consumer)), "{}", down.evidence());
    assert!(down.evidence().contains("127.0.0.1:8201"), "{}", down.evidence());
    assert_eq!(c.counts().error, 1);
}

/// A decode refusal read before the prefill copy of the same request (two
/// logs are read apart): still one request, prefilled, refused at decode.
#[test]
fn refusal_read_before_its_prefill_copy() {
    let c = fed(&[
        (X, "INFO:     Started server process [1308]"),
        (
            D,
            "(APIServer pid=2) INFO:     127.0.0.1:40118 - \"POST /v1/completions HTTP/1.1\" 400 Bad Request",
        ),
        (
            P,
            "(APIServer pid=1) INFO 12-01 07:29:33 [r.py:63] Received request cmpl-930ade776847f6ff-0: params: SamplingParams(max_tokens=1)",
        ),
        (P, "(APIServer pid=1) INFO:     127.0.0.1:45758 - \"POST /v1/completions HTTP/1.1\" 200 OK"),
    ]);
    let n = c.counts();
    assert_eq!((n.seen, n.error), (1, 1), "{n:?}");
    let t = c.get("cmpl-930ade776847f6ff").expect("named by its prefill id");
    assert_eq!(
        (t.error_at, t.prefill, t.decode),
        (Some(Hop::Consumer), Some(0), Some(0)),
        "{}",
        t.evidence()
    );
}

/// The demo proxy's lines and a dying decode's, shuffled, cut and fed to
/// four logs at random times: never a panic, every trace decided at the
/// end, and the counts add up.
mod shuffled {
    use super::*;
    use proptest::prelude::*;

    const LINES: &[&str] = &[
        "(APIServer pid=1) INFO 12-01 07:29:17 [r.py:63] Received request cmpl-a5d98b4f6ef33d5f-0: params: SamplingParams(max_tokens=1)",
        "(APIServer pid=1) INFO 12-01 07:29:17 [r.py:63] Received request cmpl-a5d98b4f6ef33d5f-0: params: SamplingParams(max_tokens=48)",
        "(APIServer pid=1) INFO 12-01 07:29:17 [a.py:415] Added request cmpl-a5d98b4f6ef33d5f-0-b799c6d3.",
        "(APIServer pid=1) INFO 12-01 07:29:28 [r.py:63] Received request chatcmpl-93027e735c56c0b4: params: SamplingParams(max_tokens=1)",
        "(APIServer pid=1) INFO 12-01 07:29:28 [a.py:415] Added request chatcmpl-93027e735c56c0b4-a14f8b60.",
        "(EngineCore pid=2) INFO 12-01 07:29:17 [e.py:279] External Cache Hit!",
        "(EngineCore pid=2) INFO 12-01 07:29:17 [e.py:164] Inject KV cache of 384 tokens to the paged memory",
        "(APIServer pid=1) INFO:     127.0.0.1:43304 - \"POST /v1/completions HTTP/1.1\" 200 OK",
        "(APIServer pid=1) INFO:     127.0.0.1:40118 - \"POST /v1/completions HTTP/1.1\" 400 Bad Request",
        "(APIServer pid=1) INFO 12-01 07:29:34 [a.py:721] Aborted request(s) cmpl-a5d98b4f6ef33d5f-0-b799c6d3.",
        "(EngineCore pid=2) ERROR 12-01 07:29:35 [core.py:1332] EngineCore encountered a fatal error.",
        "(APIServer pid=1) INFO 12-01 07:29:35 [a.py:601] Request cmpl-a5d98b4f6ef33d5f-0 failed (engine dead).",
        "(APIServer pid=1) ERROR 12-01 07:29:35 [serving.py:495] Error in completion stream generator.",
        "(APIServer pid=1) INFO 12-01 07:30:23 [api_server.py:677] Starting vLLM server on http://127.0.0.1:8200",
        "(APIServer pid=1) DEBUG 12-01 07:29:17 [r.py:50] Request cmpl-a5d98b4f6ef33d5f-0 details: prompt: None, prompt_token_ids: [1, 2, 3], prompt_embeds shape: None.",
        "INFO:     127.0.0.1:53002 - \"POST /v1/completions HTTP/1.1\" 200 OK",
        "ERROR:root:ClientError occurred: Cannot connect to host 127.0.0.1:8100 ssl:default [Connect call failed ('127.0.0.1', 8100)]",
        "Error occurred in disagg proxy server",
        "(<class 'fastapi.exceptions.HTTPException'>, HTTPException(status_code=502, detail='Bad Gateway'), <traceback object at 0x7e>)",
        "(<class 'StopIteration'>, StopIteration(), <traceback object at 0x7e>)",
        "[\"<class 'fastapi.exceptions.HTTPException'>\", '502: Bad Gateway', '<traceback object at 0x7f>']",
        "ERROR:root:ClientError occurred: Cannot connect to host 127.0.0.1:8201 ssl:default",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn never_panics_and_decides_everything(
            input in proptest::collection::vec((0u8..4, 0..LINES.len(), 0usize..300, 0.0f64..30.0), 0..60)
        ) {
            let mut c = Correlator::new(CorrelatorOptions { capacity: 16, max_pending: 8, ..CorrelatorOptions::default() });
            c.set_instance_addr(LogOrigin::Prefill(0), "127.0.0.1:8100");
            c.set_instance_addr(LogOrigin::Decode(1), "127.0.0.1:8201");
            for (k, i, cut, dt) in &input {
                let src = match k {
                    0 => LogOrigin::Prefill(0),
                    1 => LogOrigin::Decode(0),
                    2 => LogOrigin::Decode(1),
                    _ => LogOrigin::Proxy,
                };
                let line = LINES[*i];
                let mut at = (*cut).min(line.len());
                while !line.is_char_boundary(at) {
                    at -= 1;
                }
                let line = if *cut < 250 { line } else { &line[..at] };
                c.on_line(src, line, T + dt);
                c.on_prompt_tokens(src, "cmpl-a5d98b4f6ef33d5f-0", 384, T + dt);
                c.on_tick(T + dt);
            }
            c.finish(T + 1000.0);
            let n = c.counts();
            prop_assert_eq!(n.pending, 0);
            prop_assert_eq!(n.seen, n.loaded + n.silent_miss + n.no_prefill + n.error + n.cancelled + n.unknown);
            prop_assert!(n.seen - n.evicted <= 16);
        }
    }
}

/// The evidence names what the proxy's lines show, never a proxy it may
/// not be. Lines 44-46 of example-2p2d-demo-proxy's proxy.log (vLLM
/// 0.26.0's demo proxy, prefill 8100 unreachable), then the access line
/// that answered: its real one (line 47, `200 OK`), or a `502` as the lab's
/// `miniproxy.py`, which prints the same error line, answers (rendered from
/// uvicorn's access format `%s - "%s %s HTTP/%s" %d` + the status phrase).
#[test]
fn a_proxy_error_names_the_answer_the_proxy_gave() {
    let head = [
        (
            X,
            "ERROR:root:ClientError occurred: Cannot connect to host 127.0.0.1:8100 ssl:default [Connect call failed ('127.0.0.1', 8100)]",
        ),
        (X, "Error occurred in disagg proxy server"),
        (
            X,
            "(<class 'fastapi.exceptions.HTTPException'>, HTTPException(status_code=502, detail='Bad Gateway: Error communicating with upstream server.'), <traceback object at 0x7f55ceb92480>)",
        ),
    ];
    for (answer, says) in [
        (
            "INFO:     127.0.0.1:55236 - \"POST /v1/completions HTTP/1.1\" 200 OK",
            "answered HTTP 200: the proxy answered success for a request that failed",
        ),
        (
            "INFO:     127.0.0.1:55236 - \"POST /v1/completions HTTP/1.1\" 502 Bad Gateway",
            "answered HTTP 502",
        ),
    ] {
        let mut lines = head.to_vec();
        lines.push((X, answer));
        let c = fed(&lines);
        let errors: Vec<_> = c.traces().filter(|t| t.outcome == Outcome::Error).collect();
        assert_eq!(errors.len(), 1, "one failure, one trace");
        let t = errors[0];
        assert_eq!(t.error_at, Some(Hop::Producer));
        assert!(t.evidence().contains("prefill#0 (127.0.0.1:8100) unreachable"), "{}", t.evidence());
        assert!(t.evidence().contains("`Error occurred in disagg proxy server`"), "{}", t.evidence());
        assert!(t.evidence().contains(says), "{}", t.evidence());
        assert!(
            !t.evidence().contains("demo proxy") && !t.evidence().contains("empty body"),
            "{}",
            t.evidence()
        );
    }
}
