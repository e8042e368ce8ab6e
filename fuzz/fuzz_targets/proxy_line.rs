//! One proxy log line (disagg_proxy_demo, NIXL toy proxy, uvicorn access,
//! JSON lines): never a panic. `parse_access` is also reached directly since
//! it is public and takes the text after the level prefix.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pdtop::logs::proxy::{parse_access, parse_proxy_line};

fuzz_target!(|data: &[u8]| {
    let line = String::from_utf8_lossy(data);
    let _ = parse_proxy_line(&line);
    let _ = parse_access(&line);
});
