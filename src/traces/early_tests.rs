//! Live misses called early: a quiet request's missing hit is likely after
//! the engine's scheduling lag plus two reads, sure at `settle_s`; it
//! waits on until then, so a hit before is its own. Fed the real lines of
//! the qwen3 capture.

use crate::feed::LogOrigin;
use crate::traces::{Confidence, Correlator, CorrelatorOptions, Outcome};

const T0: f64 = 1_800_000_000.0;

fn lines(file: &str, from: usize, to: usize) -> Vec<String> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/lab-captures/qwen3-shape-restart")
        .join(file);
    let text = std::fs::read_to_string(p).expect("capture log");
    text.lines().skip(from - 1).take(to + 1 - from).map(str::to_string).collect()
}

fn feed(c: &mut Correlator, src: LogOrigin, file: &str, from: usize, to: usize, at: f64) {
    for l in lines(file, from, to) {
        c.on_line(src, &l, at);
    }
}

/// Both logs up to just before the request at decode line `next`, read
/// long ago and decided; then a tailed, live correlator.
fn live_before(prefill_to: usize, next: usize) -> Correlator {
    let mut c = Correlator::new(CorrelatorOptions::default());
    c.set_read_every(Some(0.25));
    feed(&mut c, LogOrigin::Prefill(0), "vllm-prefill.log", 1, prefill_to, T0);
    feed(&mut c, LogOrigin::Decode(0), "vllm-decode.log", 1, next - 1, T0);
    c.on_tick(T0 + 10.0);
    c
}

/// edge_block-0's decode lines read live at the returned time (a 1025-token
/// prompt whose folder the decode looks up under 1008: a miss), with no
/// other request near it.
fn edge_block_0_added() -> (Correlator, f64) {
    let mut c = live_before(199, 256);
    let t = T0 + 20.0;
    feed(&mut c, LogOrigin::Decode(0), "vllm-decode.log", 256, 258, t);
    (c, t)
}

fn verdict(c: &Correlator, id: &str) -> (Outcome, Confidence) {
    let t = c.get(id).expect(id);
    (t.outcome, t.confidence)
}

/// edge_block-0, added with no other request near it: its hit was due
/// within 0.25 s + two reads of 0.25 s.
#[test]
fn a_quiet_miss_is_likely_at_the_engines_lag_and_sure_at_the_settle_time() {
    let (mut c, t) = edge_block_0_added();
    c.on_tick(t + 0.6);
    assert_eq!(c.get("lab-edge_block-0").expect("traced").outcome, Outcome::Pending);
    c.on_tick(t + 0.8);
    assert_eq!(verdict(&c, "lab-edge_block-0"), (Outcome::SilentMiss, Confidence::Likely));
    assert!(c.get("lab-edge_block-0").unwrap().evidence().contains("within 750 ms"));
    // Sure once 1.5 s passed by the decode log's clock: with no later
    // line of it, a second behind the reads.
    c.on_tick(t + 1.6);
    assert_eq!(verdict(&c, "lab-edge_block-0"), (Outcome::SilentMiss, Confidence::Likely));
    c.on_tick(t + 2.6);
    let tr = c.get("lab-edge_block-0").unwrap();
    assert_eq!((tr.outcome, tr.confidence), (Outcome::SilentMiss, Confidence::Sure), "{}", tr.evidence());
    assert!(
        tr.evidence().contains("within 1.5 s") && !tr.evidence().contains("sure if"),
        "{}",
        tr.evidence()
    );
}

/// The same request, but a hit prints a second after its `Added` line:
/// called early, it was still waiting, so the hit is its own, as it would
/// be had the lines been read with no early call (the verdict does not
/// depend on how often the log was read).
#[test]
fn a_hit_within_the_settle_time_is_the_early_called_requests_own() {
    let (mut c, t) = edge_block_0_added();
    c.on_tick(t + 0.8);
    assert_eq!(verdict(&c, "lab-edge_block-0"), (Outcome::SilentMiss, Confidence::Likely));
    // A real hit line of this decode (steady-4's, line 354).
    feed(&mut c, LogOrigin::Decode(0), "vllm-decode.log", 354, 354, t + 1.0);
    c.on_tick(t + 1.6);
    let early = verdict(&c, "lab-edge_block-0");
    let mut stamped = live_before(199, 256);
    stamped.set_read_every(None);
    feed(&mut stamped, LogOrigin::Decode(0), "vllm-decode.log", 256, 258, t);
    feed(&mut stamped, LogOrigin::Decode(0), "vllm-decode.log", 354, 354, t + 1.0);
    stamped.on_tick(t + 1.6);
    assert_eq!(early, verdict(&stamped, "lab-edge_block-0"));
    assert_eq!(early.0, Outcome::Loaded);
    assert_eq!(c.counts().silent_miss, 0);
}

/// steady-5 and steady-3 were added while steady-4's load ran, and their
/// hits printed a second later (06:26:17 → :18): requests added together
/// wait the whole settle time, so neither is called a miss.
#[test]
fn requests_added_together_wait_the_settle_time() {
    let mut c = live_before(293, 351);
    let t = T0 + 20.0;
    feed(&mut c, LogOrigin::Decode(0), "vllm-decode.log", 351, 361, t);
    c.on_tick(t + 0.9);
    for id in ["lab-steady-5", "lab-steady-3"] {
        assert_eq!(c.get(id).expect(id).outcome, Outcome::Pending, "{id}");
    }
    feed(&mut c, LogOrigin::Decode(0), "vllm-decode.log", 362, 365, t + 1.0);
    c.on_tick(t + 2.0);
    for id in ["lab-steady-4", "lab-steady-5", "lab-steady-3"] {
        assert_eq!(verdict(&c, id), (Outcome::Loaded, Confidence::Sure), "{id}");
    }
}

/// Lines timed by their stamps (`check --from-logs`): no early call; sure
/// once the settle time passed by the decode log's clock (idle after the
/// request, a second behind the reads).
#[test]
fn stamped_lines_wait_the_settle_time() {
    let mut c = live_before(199, 256);
    c.set_read_every(None);
    let t = T0 + 20.0;
    feed(&mut c, LogOrigin::Decode(0), "vllm-decode.log", 256, 258, t);
    c.on_tick(t + 2.4);
    assert_eq!(c.get("lab-edge_block-0").expect("traced").outcome, Outcome::Pending);
    c.on_tick(t + 2.6);
    assert_eq!(verdict(&c, "lab-edge_block-0"), (Outcome::SilentMiss, Confidence::Sure));
}
