//! Known noise vs unknown lines on the real vLLM 0.26 captures: start-up
//! output, route lists, tracebacks' bodies, uvicorn's lifecycle, idle-step
//! connector warnings and UCX's set-up lines are known (counted as noise);
//! a line pdtop does not know still counts unknown, start-up or not.

use crate::common;

use pdtop::feed::LogOrigin;
use pdtop::traces::{Correlator, CorrelatorOptions};

fn read(capture: &str, file: &str) -> (Correlator, LogOrigin, String) {
    let text = std::fs::read_to_string(common::capture_dir(capture).join(file)).unwrap();
    let src = if file.contains("prefill") { LogOrigin::Prefill(0) } else { LogOrigin::Decode(0) };
    let mut c = Correlator::new(CorrelatorOptions { year: Some(2026), ..CorrelatorOptions::default() });
    for line in text.lines() {
        c.on_line(src, line, 1_796_000_000.0);
    }
    (c, src, text)
}

#[test]
fn the_real_capture_logs_have_no_unknown_lines() {
    let logs = [
        ("demo-proxy-qwen3", "vllm-prefill.log"),
        ("demo-proxy-qwen3", "vllm-decode.log"),
        ("qwen3-shape-restart", "vllm-prefill.log"),
        ("qwen3-shape-restart", "vllm-decode.log"),
        ("qwen3-shape-restart", "vllm-decode2.log"),
        ("nixl-llama-shape", "vllm-prefill.log"),
        ("nixl-llama-shape", "vllm-decode.log"),
        ("nixl-llama-shape", "vllm-decode2.log"),
    ];
    for (cap, file) in logs {
        let (c, src, text) = read(cap, file);
        assert_eq!(c.unknown_lines(src), 0, "{cap}/{file}");
        // Start-up alone is a hundred lines and more: counted, not hidden.
        assert!(c.noise_lines(src) > 90, "{cap}/{file}: {}", c.noise_lines(src));
        assert!(c.noise_lines(src) < text.lines().count() as u64);
    }
}

#[test]
fn a_made_up_line_still_counts_unknown() {
    let (mut c, src, _) = read("demo-proxy-qwen3", "vllm-decode.log");
    let made_up = [
        // vLLM's header, a message no vLLM prints, after start-up.
        "(APIServer pid=1422) WARNING 12-01 07:30:44 [frobnicate.py:12] The flux capacitor is at 88%",
        "(APIServer pid=1422) INFO 12-01 07:30:44 [frobnicate.py:13] Frobnicating 3 requests",
        "complete gibberish that no program printed",
    ];
    for l in made_up {
        c.on_line(src, l, 1_796_000_100.0);
    }
    assert_eq!(c.unknown_lines(src), 3);
    // During a start-up, an ERROR pdtop does not know is not noise either.
    c.on_line(src, "(APIServer pid=9) INFO 12-01 07:31:00 [api_utils.py:273] non-default args: {}", 1e9);
    let noise = c.noise_lines(src);
    c.on_line(src, "(APIServer pid=9) WARNING 12-01 07:31:01 [model.py:1] Using max model len 8192", 1e9);
    c.on_line(src, "(APIServer pid=9) ERROR 12-01 07:31:01 [x.py:1] the frobnicator refused", 1e9);
    assert_eq!(c.noise_lines(src), noise + 1);
    assert_eq!(c.unknown_lines(src), 4);
}
