//! The Prometheus text parser and the vLLM and router models built on it: any bytes a
//! hostile or broken endpoint can send must parse (bad lines counted) without
//! a panic. Lossy UTF-8 mirrors what the scraper does with a body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pdtop::metrics::model::InstanceSample;
use pdtop::metrics::parse::parse;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let e = parse(&text);
    // Exercise the lookups the model does on every family.
    for s in e.samples.iter().take(64) {
        let _ = e.type_of(s.name);
        let _ = s.labels().count();
    }
    let _ = InstanceSample::from_exposition(&e);
    let _ = pdtop::metrics::router::RouterSample::from_exposition(&e);
});
