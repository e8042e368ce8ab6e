//! The alert area: what is loud, in which order, for how long, and never
//! something the recording does not hold (a demo loop, a counter reset).

use crate::common::{self, capture_dir};
use crate::recovery_real::capture;

use pdtop::feed::{Msg, TailCounts};
use pdtop::lab::Capture;
use pdtop::state::alerts::{ALERT_SECS, AlertKind};
use pdtop::state::{AppState, EventKind};

fn kinds(st: &AppState) -> Vec<AlertKind> {
    st.alerts(None).iter().map(|a| a.kind).collect()
}

/// Plays `cap` from its start up to `secs` into it.
fn played(cap: &Capture, secs: f64, with_logs: bool) -> AppState {
    let mut st = pdtop::lab::replay::initial_state(cap, with_logs);
    for m in pdtop::lab::replay::messages(cap, secs, with_logs) {
        st.apply(m);
    }
    st
}

/// The newest silent miss of qwen3-shape-restart (`lab-mismatch-3`) is
/// named 44.5 s in; the decode restarts 132 s in. The alert stays
/// `ALERT_SECS` after the newest miss, and the restart brings no miss back.
#[test]
fn a_miss_alerts_for_its_30_s_and_a_restart_brings_none_back() {
    assert_eq!(ALERT_SECS, 30.0);
    let cap = capture("qwen3-shape-restart");
    for with_logs in [true, false] {
        let (st, last) = {
            let st = played(&cap, 40.0, with_logs);
            let last = st.alerts(None).into_iter().find(|a| a.kind == AlertKind::SilentMiss);
            (st, last)
        };
        let a = last.unwrap_or_else(|| panic!("logs {with_logs}: {:?}", st.alerts(None)));
        assert!(a.count >= 4, "{a:?}");
        // The newest miss: named by the traces, or counted by metrics.
        let newest = played(&cap, 50.0, with_logs).alerts(None)[0].clone();
        assert_eq!((newest.kind, newest.count), (AlertKind::SilentMiss, 8), "logs {with_logs}");
        let t = newest.last.unwrap() - cap.t0;
        assert_eq!(kinds(&played(&cap, t + ALERT_SECS - 1.0, with_logs)), [AlertKind::SilentMiss]);
        assert_eq!(kinds(&played(&cap, t + ALERT_SECS + 1.0, with_logs)), []);
        // After the decode's restart and its first requests: still 8.
        let after = played(&cap, 140.0, with_logs);
        assert_eq!(after.instances[1].health.restarts, 1);
        assert_eq!(kinds(&after), [], "logs {with_logs}: {:?}", after.alerts(None));
        assert_eq!(after.misses.outcomes.silent_miss, 8, "logs {with_logs}");
    }
}

/// The recording played twice, as the demo's lab loops it: the second
/// pass's times follow the first, every log is truncated, and the counters
/// go back to the recording's first scrape, under the same process start.
fn looped(cap: &Capture, with_logs: bool) -> AppState {
    let span = cap.t_end - cap.t0 + 1.0;
    let gap = span + 3.0;
    let mut st = pdtop::lab::replay::initial_state(cap, with_logs);
    for m in pdtop::lab::replay::messages(cap, span, with_logs) {
        st.apply(m);
    }
    let mut truncated = std::collections::BTreeSet::new();
    for m in pdtop::lab::replay::messages(cap, span, with_logs) {
        st.apply(match m {
            Msg::LogLines { source, at, lines, state, mut counts } => {
                if truncated.insert(source.to_string()) {
                    counts = TailCounts { truncations: 1, ..counts };
                }
                Msg::LogLines { source, at: at + gap, lines, state, counts }
            }
            Msg::Scrape { instance, at, body } => Msg::Scrape { instance, at: at + gap, body },
            Msg::ScrapeFailed { instance, at, error } => Msg::ScrapeFailed { instance, at: at + gap, error },
            Msg::Tick { at } => Msg::Tick { at: at + gap },
            Msg::NetDev { at, read } => Msg::NetDev { at: at + gap, read },
            Msg::KvDir { at, scan } => Msg::KvDir { at: at + gap, scan },
            other => other,
        });
    }
    st
}

/// A loop of the recording is no restart and brings no new miss: only the
/// decode's own restart (once per pass) and the eight misses of each pass.
#[test]
fn a_looped_recording_is_no_restart_and_no_new_miss() {
    let cap = capture("qwen3-shape-restart");
    for with_logs in [false, true] {
        let st = looped(&cap, with_logs);
        let restarts: Vec<&str> =
            st.events.iter().filter(|e| e.kind == EventKind::Restart).map(|e| e.text.as_str()).collect();
        assert_eq!(restarts.len(), 2, "logs {with_logs}: {restarts:?}");
        assert!(restarts.iter().all(|t| t.starts_with("127.0.0.1:8200 restarted")), "{restarts:?}");
        assert_eq!(st.instances[0].health.restarts, 0);
        assert_eq!(st.instances[1].health.restarts, 2);
        assert_eq!(st.misses.outcomes.silent_miss, 16, "logs {with_logs}");
        // The second pass shows what the first did, and nothing else: no
        // DIFFER, no restart of the prefill, no miss of another pass.
        let t1 = cap.t_end + 1.0;
        let pass = |second: bool| -> Vec<(&str, String)> {
            let ev = st.events.iter().filter(|e| (e.t > t1) == second);
            ev.map(|e| (e.kind.name(), e.text.clone())).collect()
        };
        assert_eq!(pass(true), pass(false), "logs {with_logs}");
        assert!(pass(false).iter().all(|(k, _)| *k != "mismatch"), "{:?}", pass(false));
    }
}
