//! Wrapped lines on the read paths (live tail and `--from-logs` both feed
//! the correlator line by line): the real pasted NIXL expiry pair, each
//! message wrapped over two physical lines, is read as two messages with
//! their request id, one event each, and no line left unknown.

use std::path::PathBuf;
use std::process::Command;

use pdtop::feed::LogOrigin;
use pdtop::logs::signal::SignalKind;
use pdtop::traces::{Correlator, CorrelatorOptions};

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/log-excerpts/nixl-expired-lease-wrapped.log")
}

#[test]
fn the_correlator_joins_a_wrapped_line_to_its_head() {
    let text = std::fs::read_to_string(fixture()).unwrap();
    let mut c = Correlator::new(CorrelatorOptions { year: Some(2026), ..CorrelatorOptions::default() });
    for l in text.lines() {
        c.on_line(LogOrigin::Prefill(0), l, 1_786_867_800.0);
    }
    assert_eq!(c.unknown_lines(LogOrigin::Prefill(0)), 0);
    let events = c.drain_log_events();
    // One event for the one invalid read, carrying the id from the second half.
    let reads: Vec<_> = events.iter().filter(|e| e.kind == SignalKind::InvalidKvRead).collect();
    assert_eq!(reads.len(), 1, "{events:?}");
    assert!(reads[0].text.contains("8f07dfc0-...-a2f0e657"), "{}", reads[0].text);
    // The expiry, read whole (`retrieved by 0`), is a miss no request can be blamed for.
    assert_eq!(c.counts().unattributed_misses, 1);
}

#[test]
fn check_from_logs_reads_the_wrapped_lines_whole() {
    let out = Command::new(env!("CARGO_BIN_EXE_pdtop"))
        .args(["check", "--json", "--from-logs", "--prefill-log", fixture().to_str().unwrap()])
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let events = r["events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["kind"], "invalid_kv_read");
    assert!(events[0]["text"].as_str().unwrap().contains("8f07dfc0-...-a2f0e657"));
}
