//! Latency over time from the real qwen3 capture: TTFT percentiles per
//! time bin for both roles, with the decode restart as a gap.

use crate::common;

use pdtop::feed::Role;
use pdtop::metrics::model::Hist;
use pdtop::state::EventKind;
use pdtop::state::latency::series;

#[test]
fn ttft_series_of_both_roles_with_the_restart_as_a_gap() {
    let st = common::replay_metrics_only("qwen3-shape-restart", 160.0);
    let since = st.started_at.unwrap();
    let bins = ((st.now - since) / 2.0) as usize;
    let p = series(&st, Role::Prefill, Hist::Ttft, since, bins, None);
    let d = series(&st, Role::Decode, Hist::Ttft, since, bins, None);
    assert!(p.len() >= 10 && d.len() >= 10, "{} {}", p.len(), d.len());
    for pt in p.iter().chain(&d) {
        assert!(pt.p50 > 0.0 && pt.p50 <= pt.p90 && pt.count > 0.0, "{pt:?}");
        assert!(pt.t > since && pt.t <= st.now + 1e-6);
    }
    // While decode is down nothing is observed: no point, not a zero.
    let down = st.events.iter().find(|e| e.kind == EventKind::Down && e.text.contains("8200")).unwrap().t;
    let up = st.events.iter().find(|e| e.kind == EventKind::Up && e.t > down).unwrap().t;
    assert!(up - down > 10.0, "{down} {up}");
    let width = (st.now - since) / bins as f64;
    assert!(!d.iter().any(|pt| pt.t > down + 2.0 * width && pt.t < up - width), "{d:?}");
    // And the series resumes after the restart.
    assert!(d.iter().any(|pt| pt.t > up), "{d:?}");
    // A prefill's TPOT is always 0: no series rather than a flat zero.
    assert!(series(&st, Role::Prefill, Hist::Tpot, since, bins, None).is_empty());
}
