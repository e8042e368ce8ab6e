//! Bytes per request on the real recordings (issue #14): did each
//! request's KV move, over which wire, and was it the size predicted.

mod common;

use pdtop::state::kv_bytes::build;

#[test]
fn dump() {
    for cap in common::CAPTURES {
        let st = common::replay_with_logs(cap, 400.0);
        let l = build(&st);
        for r in &l.requests {
            println!(
                "{cap} {} {} tok={:?} pred={:?} obs={:?} {} {} {} {:?} {}",
                r.id,
                r.outcome,
                r.tokens,
                r.predicted,
                r.observed,
                r.source,
                r.confidence,
                r.verdict,
                r.window_iface_bytes,
                r.note
            );
        }
        for f in &l.folders {
            println!(
                "F {} {} {:?} {} {:?} {} {:?} {}",
                f.name, f.bytes, f.tokens, f.writer, f.request, f.matched_by, f.predicted, f.read
            );
        }
        println!(
            "{cap} ratio {:?} nothing {:?} carrier {:?} unattr {} overlapped {}",
            l.ratio(),
            l.moved_nothing(),
            l.carrier,
            l.unattributed_nixl_bytes,
            l.overlapped
        );
    }
}
