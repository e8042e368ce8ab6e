//! Property tests: neither log parser panics, whatever the line.

use pdtop::logs::proxy::parse_proxy_line;
use pdtop::logs::vllm::parse_vllm_line;
use proptest::prelude::*;

/// Prefixes that steer random tails into each parser's deeper branches.
const PREFIXES: &[&str] = &[
    "",
    "(APIServer pid=1) INFO 11-30 06:24:52 [a.py:1] ",
    "(EngineCore_DP0 pid=",
    "INFO 11-30 06:24:52 [loggers.py:335] Engine 000: ",
    "Received request cmpl-x-0: params: SamplingParams(max_tokens=",
    "Received request cmpl-x-0: params: SamplingParams(n=1, extra_args={'kv_transfer_params': {",
    "Received request cmpl-x-0: prompt: '",
    "KV Transfer metrics: ",
    "Inject KV cache of ",
    "Added request ",
    "KVTransferConfig(",
    "non-default args: {'kv_transfer_config': KVTransferConfig(",
    "INFO:     ",
    "INFO:     127.0.0.1:1 - \"",
    "ERROR:root:Request failed with status ",
    "INFO:__main__:[prefill] done request_id=",
    "{\"ts\": 1, \"request_id\": \"r\", \"event\": ",
    "\x1b[",
    "(APIServer pid=1) DEBUG 11-30 06:25:31 [request_logger.py:50] Request cmpl-x-0 details: prompt: '",
    "Request cmpl-x-0 details: prompt_token_ids: [",
    "(APIServer pid=1) INFO 12-01 07:29:35 [async_llm.py:601] Request ",
    "(<class '",
    "[\"<class '",
    "ERROR:root:ClientError occurred: Cannot connect to host ",
    "Error in completion stream generator",
    "2026-01-15 02:30:17 DEBUG http_request{method=POST request_id=\"c-1\"}: vllm_router_rs::routers::http::vllm_pd_router: a.rs:1: Generated vLLM request ID",
    "2025-09-04 07:15:26 ERROR http_request{request_id=x status=500 latency=",
    "2025-09-04 07:15:26 ERROR http_request{}:http_request{request_id=x latency_ms=",
    "2025-09-04 07:15:26 ERROR http_request{}: sglang_router_rs::routers::pd_router: a.rs:1: Decode server returned error status ",
];

/// A few real lines to cut and splice.
const REAL: &[&str] = &[
    "(APIServer pid=1088) INFO 11-30 06:39:21 [request_logger.py:63] Received request cmpl-lab-warmup_p-0-0: params: SamplingParams(n=1, max_tokens=64, extra_args={'kv_transfer_params': {'do_remote_prefill': True, 'do_remote_decode': False, 'remote_block_ids': [[1, 2, 3]], 'remote_engine_id': '1f8d', 'remote_request_id': 'cmpl-lab-warmup_p-0-0-b6b7842d', 'remote_host': '127.0.0.1', 'remote_port': 5600, 'tp_size': 1, 'remote_num_tokens': 256, 'remote_blocks_expiry_time': None}}), lora_request: None.",
    "(APIServer pid=1088) INFO 11-30 06:39:27 [metrics.py:103] KV Transfer metrics: Num successful transfers=2, Avg xfer time (ms)=82.675, P90 xfer time (ms)=83.424",
    "(APIServer pid=3126) INFO 11-30 06:26:48 [loggers.py:310] Engine 000: Avg prompt throughput: 10.8 tokens/s, Avg generation throughput: 67.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%",
    "(APIServer pid=3126) INFO:     127.0.0.1:55082 - \"GET /metrics HTTP/1.1\" 200 OK",
    "INFO:__main__:[prefill] done request_id=abc status=200 elapsed=0.15s",
    // demo-proxy-qwen3: vLLM's own disagg_proxy_demo.py and a dying engine.
    "ERROR:root:ClientError occurred: Cannot connect to host 127.0.0.1:8100 ssl:default [Connect call failed ('127.0.0.1', 8100)]",
    "(<class 'fastapi.exceptions.HTTPException'>, HTTPException(status_code=502, detail='Bad Gateway: Error communicating with upstream server.'), <traceback object at 0x7efcb3d82e40>)",
    "(APIServer pid=1010) INFO 12-01 07:29:35 [async_llm.py:601] Request cmpl-be795e55122ce50d-0 failed (engine dead).",
    "(APIServer pid=1010) INFO 12-01 07:29:34 [async_llm.py:721] Aborted request(s) cmpl-93f35520d13dc515-0-8d66b835.",
    "(APIServer pid=1010) INFO 12-01 07:28:32 [api_utils.py:273] non-default args: {'block_size': 16, 'kv_transfer_config': KVTransferConfig(kv_connector='ExampleConnector', kv_role='kv_consumer')}",
    "2025-09-04 07:15:26 ERROR http_request{method=POST uri=/v1/completions version=HTTP/1.1}:http_request{method=POST uri=/v1/completions version=HTTP/1.1 request_id=cmpl-hvNcVSx9FaPb13dmSHtom1fF status=500 Internal Server Error latency=2.041450065s}: sglang_router_rs::response: src/middleware.rs:159: request failed with server error",
    "2026-01-15 02:30:16 DEBUG http_request{method=POST uri=/v1/completions version=HTTP/1.1 request_id=\"cmpl-Ed4lG6IlaUQRpaugWzpnIB6a\"}: vllm_router_rs::routers::http::vllm_pd_router: src/routers/http/vllm_pd_router.rs:681: Generated vLLM request ID: ___prefill_addr_10.0.0.1:21001___decode_addr_10.0.0.2:22001_5f0c",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_strings(s in any::<String>()) {
        let _ = parse_vllm_line(&s);
        let _ = parse_proxy_line(&s);
        let _ = pdtop::metrics::router::RouterSample::from_text(&s);
    }

    /// Router lines are read on the proxy log before the proxy parser.
    #[test]
    fn proxy_log_lines_reach_the_traces_without_a_panic(i in 0..REAL.len(), cut in 0usize..400, insert in any::<String>()) {
        let line = REAL[i];
        let mut at = cut.min(line.len());
        while !line.is_char_boundary(at) {
            at -= 1;
        }
        let mut c = pdtop::traces::Correlator::new(Default::default());
        for s in [format!("{}{insert}", &line[..at]), line.to_string(), format!("{insert}{}", &line[at..])] {
            c.on_line(pdtop::feed::LogOrigin::Proxy, &s, 1.0e9);
        }
        c.finish(1.0e9 + 60.0);
    }

    #[test]
    fn steered_strings(i in 0..PREFIXES.len(), tail in "[ -~\\x1b'\"\\\\(){}\\[\\]<>:,=é€]{0,200}") {
        let s = format!("{}{tail}", PREFIXES[i]);
        let _ = parse_vllm_line(&s);
        let _ = parse_proxy_line(&s);
    }

    #[test]
    fn cut_and_spliced_real_lines(i in 0..REAL.len(), cut in 0usize..400, insert in any::<String>()) {
        let line = REAL[i];
        let mut at = cut.min(line.len());
        while !line.is_char_boundary(at) {
            at -= 1;
        }
        let s = format!("{}{insert}", &line[..at]);
        let _ = parse_vllm_line(&s);
        let _ = parse_proxy_line(&s);
        let s = format!("{insert}{}", &line[at..]);
        let _ = parse_vllm_line(&s);
        let _ = parse_proxy_line(&s);
    }
}
