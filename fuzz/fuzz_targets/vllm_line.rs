//! One vLLM server log line, as the tailer hands it over (lossy UTF-8, any
//! length): never a panic. Also through the `Reader` (prefix stacks,
//! foreign headers, connector signals, wrapped-line joins), two lines at a
//! time so that a continuation is exercised, and the known-noise rules.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pdtop::logs::reader::Reader;
use pdtop::logs::vllm::parse_vllm_line;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = parse_vllm_line(&text);
    let mut r = Reader::new();
    let mut noise = pdtop::logs::known::NoiseState::default();
    for line in text.split('\n') {
        if let Some(l) = r.classify(line).line {
            let _ = noise.classify(line, &l);
        }
    }
});
