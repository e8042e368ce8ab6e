//! One vLLM server log line, as the tailer hands it over (lossy UTF-8, any
//! length): never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pdtop::logs::vllm::parse_vllm_line;

fuzz_target!(|data: &[u8]| {
    let line = String::from_utf8_lossy(data);
    let _ = parse_vllm_line(&line);
});
