//! Latency over time from the real qwen3 capture: TTFT percentiles per
//! time bin for both roles, with the decode restart as a gap.

use crate::common;

use pdtop::feed::Role;
use pdtop::metrics::model::Hist;
use pdtop::state::EventKind;
use pdtop::state::latency::{BLOCK_S, Bins, Folds, series};

#[test]
fn ttft_series_of_both_roles_with_the_restart_as_a_gap() {
    let st = common::replay_metrics_only("qwen3-shape-restart", 160.0);
    let since = st.started_at.unwrap();
    let count = ((st.now - since) / 2.0) as usize;
    let bins = Bins { start: since, width: (st.now - since) / count as f64, count };
    let p = series(&st, Role::Prefill, Hist::Ttft, bins, None, &Folds::default());
    let d = series(&st, Role::Decode, Hist::Ttft, bins, None, &Folds::default());
    assert!(p.len() >= 10 && d.len() >= 10, "{} {}", p.len(), d.len());
    for pt in p.iter().chain(&d) {
        assert!(pt.p50 > 0.0 && pt.p50 <= pt.p90 && pt.count > 0.0, "{pt:?}");
        assert!(pt.t > since && pt.t <= st.now + 1e-6);
    }
    // While decode is down nothing is observed: no point, not a zero.
    let down = st.events.iter().find(|e| e.kind == EventKind::Down && e.text.contains("8200")).unwrap().t;
    let up = st.events.iter().find(|e| e.kind == EventKind::Up && e.t > down).unwrap().t;
    assert!(up - down > 10.0, "{down} {up}");
    let width = bins.width;
    assert!(!d.iter().any(|pt| pt.t > down + 2.0 * width && pt.t < up - width), "{d:?}");
    // And the series resumes after the restart.
    assert!(d.iter().any(|pt| pt.t > up), "{d:?}");
    // A prefill's TPOT is always 0: no series rather than a flat zero.
    assert!(series(&st, Role::Prefill, Hist::Tpot, bins, None, &Folds::default()).is_empty());
}

/// The charts' bins are whole blocks of 5 s on their edges, and fold the
/// blocks: the points are those of the intervals one by one, each at its
/// bin's end (the newest at now), however far into the run.
#[test]
fn bins_of_whole_blocks_are_the_bins_of_their_intervals() {
    use pdtop::metrics::histogram::Histogram;
    let st = common::replay_metrics_only("qwen3-shape-restart", 160.0);
    let since = st.started_at.unwrap();
    let mut compared = 0;
    for most in [80, 12] {
        let bins = Bins::aligned(since, st.now, most);
        assert!(bins.width >= BLOCK_S && bins.width % BLOCK_S == 0.0 && bins.start % bins.width == 0.0);
        assert!(bins.start <= since && bins.start + bins.count as f64 * bins.width >= st.now);
        assert!(bins.count <= most + 1, "{bins:?}");
        for (role, hist) in
            [(Role::Prefill, Hist::Ttft), (Role::Decode, Hist::Ttft), (Role::Decode, Hist::Tpot)]
        {
            let mut acc: Vec<Option<Histogram>> = vec![None; bins.count];
            for inst in st.instances.iter().filter(|i| i.endpoint.role == role) {
                for iv in inst.history.iter().filter(|iv| iv.t > bins.start) {
                    if let Some(h) = iv.hists.get(&hist) {
                        let b = ((iv.t - bins.start) / bins.width).ceil() as usize - 1;
                        acc[b].get_or_insert_with(Histogram::default).merge(&h);
                    }
                }
            }
            let want: Vec<(f64, f64, f64, f64)> = acc
                .iter()
                .enumerate()
                .filter_map(|(i, h)| {
                    let h = h.as_ref().filter(|h| h.total() > 0.0 && h.sum != 0.0)?;
                    let end = (bins.start + bins.width * (i + 1) as f64).min(st.now);
                    Some((end, h.quantile(0.5)?, h.quantile(0.9)?, h.total()))
                })
                .collect();
            let got: Vec<(f64, f64, f64, f64)> = series(&st, role, hist, bins, None, &Folds::default())
                .iter()
                .map(|p| (p.t, p.p50, p.p90, p.count))
                .collect();
            assert!(want.len() >= 3, "{role:?} {hist:?}: {want:?}");
            assert_eq!(got, want, "{role:?} {hist:?} {bins:?}");
            compared += got.len();
        }
    }
    assert!(compared >= 20, "{compared}");
}

/// A chart's bins summed once and kept from frame to frame draw what
/// summing every block each frame draws, frame after frame as a run goes
/// on: two decodes (one role, two instances), one of them focused, bins
/// that widen as the run grows, and the oldest blocks forgotten as an
/// hour's history forgets them (here past 40 s).
#[test]
fn kept_bin_sums_draw_what_summing_each_frame_draws() {
    let cap = common::capture("example-1p2d-demo-proxy");
    let mut st = pdtop::lab::replay::initial_state(cap, false);
    let (kept, mut frames, mut points) = (Folds::default(), 0, 0);
    let mut next = 0.0;
    for m in pdtop::lab::replay::messages(cap, cap.t_end - cap.t0, false) {
        st.apply(m);
        if st.now < next || st.started_at.is_none() {
            continue;
        }
        next = st.now + 1.0;
        for inst in &mut st.instances {
            inst.latency_blocks.forget_before(st.now - 40.0);
        }
        let since = st.started_at.unwrap().max(st.now - 40.0);
        for (most, only) in [(35, None), (6, Some(2))] {
            let bins = Bins::aligned(since, st.now, most);
            for (role, hist) in
                [(Role::Prefill, Hist::Ttft), (Role::Decode, Hist::Ttft), (Role::Decode, Hist::Tpot)]
            {
                let got = series(&st, role, hist, bins, only, &kept);
                let want = series(&st, role, hist, bins, only, &Folds::default());
                assert_eq!(got, want, "{role:?} {hist:?} {bins:?} at {}", st.now);
                points += got.len();
            }
        }
        kept.end_frame();
        frames += 1;
    }
    assert!(frames >= 60 && points >= 500, "{frames} frames, {points} points");
    // What a frame keeps is what it drew: a sum a bin of each chart's instance.
    assert!(!kept.is_empty() && kept.len() <= 2 * (36 + 7) * 3 * 2, "{}", kept.len());
}
