//! The alert area: what is loud, in which order, for how long, and never
//! something the recording does not hold (a demo loop, a counter reset).

use crate::common;
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
    looped_to(cap, with_logs, cap.t_end - cap.t0 + 1.0)
}

/// As `looped`, the second pass played `upto` seconds into it.
fn looped_to(cap: &Capture, with_logs: bool, upto: f64) -> AppState {
    let span = cap.t_end - cap.t0 + 1.0;
    let gap = span + 3.0;
    let mut st = pdtop::lab::replay::initial_state(cap, with_logs);
    for m in pdtop::lab::replay::messages(cap, span, with_logs) {
        st.apply(m);
    }
    let mut truncated = std::collections::BTreeSet::new();
    // The lab prints the second pass's lines on its clock, which moved on.
    let restamp = |l: String| {
        let later =
            |ts| pdtop::traces::stamp_at(pdtop::traces::anchor(ts, cap.t0, None).unwrap_or(0.0) + gap);
        pdtop::logs::vllm::restamp(&l, later).unwrap_or(l)
    };
    for mut m in pdtop::lab::replay::messages(cap, upto, with_logs) {
        *m.at_mut() += gap;
        st.apply(match m {
            Msg::LogLines { source, at, lines, state, mut counts } => {
                if truncated.insert(source.to_string()) {
                    counts = TailCounts { truncations: 1, ..counts };
                }
                let lines = lines.into_iter().map(restamp).collect();
                Msg::LogLines { source, at, lines, state, counts }
            }
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

/// `pdtop demo`'s own feed (the embedded qwen3-shape-restart served by the
/// lab on loopback, scraped and tailed by the collectors), past its first
/// loop: every event is one the capture holds. Before: the first event was
/// `DIFFER` (the lab served a model path of its own beside the log's), and
/// each loop restarted the prefill.
#[test]
fn the_demo_over_a_loop_shows_only_what_the_capture_holds() {
    use pdtop::pipeline::Feed;
    let cap = common::embedded_capture().clone();
    let (t0, model) = (cap.t0, cap.model_config.clone());
    let speed = 10.0;
    let dir = std::env::temp_dir().join(format!("pdtop-alerts-demo-{}", std::process::id()));
    let opts = pdtop::lab::LabOptions { speed, looping: true, dir: dir.clone(), otlp_to: None };
    let lab = pdtop::modes::demo::start_lab(cap, opts).unwrap();
    let timeout = std::time::Duration::from_secs(2);
    let session = pdtop::modes::demo::lab_session(&lab, t0, model.as_deref(), speed, 60.0, timeout);
    let clock = session.clock();
    let Feed::Live(mut live) = Feed::live(&session, clock.clone()).unwrap() else {
        unreachable!("a live feed")
    };
    let mut st = session.state();
    // Into the second loop, past its misses, before its decode restart.
    while !(lab.clock.now().0 >= 1 && lab.clock.progress() > 0.4) {
        let msg = live.rx.blocking_recv().expect("the collectors run");
        st.apply(msg);
        st.apply(Msg::Tick { at: clock.now() });
    }
    // The lab's writers stop before its folder goes, or they make it again.
    lab.clock.stop();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let _ = std::fs::remove_dir_all(&dir);
    let events: Vec<String> = st.events.iter().map(|e| format!("{} {}", e.kind.name(), e.text)).collect();
    for e in &st.events {
        match e.kind {
            // Which requests: the tmux check at the demo's own speed. At
            // 10x a hit's 1.5 s settle is 150 ms of real time, close to a
            // loaded machine's polling jitter.
            EventKind::SilentMiss => {}
            // The decode's kill and return (80 s and 132 s into the recording).
            EventKind::Down | EventKind::Up | EventKind::Restart | EventKind::Recovered => {
                assert!(e.text.starts_with(&lab.decode.to_string()), "{events:#?}");
            }
            _ => panic!("not in the capture: {} {}\n{events:#?}", e.kind.name(), e.text),
        }
    }
    assert_eq!(st.instances[0].health.restarts, 0, "{events:#?}");
    assert_eq!(st.instances[1].health.restarts, 1, "{events:#?}");
}

/// demo-proxy-qwen3 (README): misses in `steady` (10-20 s in), two
/// requests refused with HTTP 400 (24 s), the decode engine dies with four
/// requests in flight (25.7 s), its instance is down until 75 s in.
#[test]
fn a_dead_engine_comes_first_and_stays_while_its_instance_is_down() {
    let cap = capture("demo-proxy-qwen3");
    let st = played(&cap, 30.0, true);
    let alerts = st.alerts(None);
    let order: Vec<AlertKind> = alerts.iter().map(|a| a.kind).collect();
    assert_eq!(order, [AlertKind::EngineDead, AlertKind::Errors, AlertKind::SilentMiss], "{alerts:#?}");
    assert_eq!(alerts[0].count, 1);
    assert!(alerts[0].text.starts_with("decode#0: EngineCore encountered a fatal error"), "{alerts:#?}");
    // 2 refused, 4 cut off by the death.
    assert_eq!(alerts[1].count, 6, "{alerts:#?}");
    assert!(alerts[1].text.contains("engine died with it in flight"), "{alerts:#?}");
    // 40 s after the death, the instance still down: the death still alerts,
    // the errors and misses are old.
    assert_eq!(kinds(&played(&cap, 65.0, true)), [AlertKind::EngineDead]);
    // Back up (75 s in) and more than 30 s after: the death is over (the
    // misses of `after_restart` alert on their own).
    assert!(!kinds(&played(&cap, 79.0, true)).contains(&AlertKind::EngineDead));

    // The header draws them in that order, loud; Events marks the same
    // events the same way.
    let theme = pdtop::theme::Theme::builtin("dark").unwrap();
    let mut app = pdtop::app::App::new(st, theme.clone());
    let text = common::screen_text(&app, 120, 40);
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with(" ▲ ")).collect();
    assert_eq!(rows.len(), 3, "{text}");
    assert!(rows[0].starts_with(" ▲ ENGINE DEAD ×1  4.3s ago  decode#0: EngineCore"), "{text}");
    assert!(rows[1].starts_with(" ▲ ERRORS ×6  4.0s ago  4 request(s) failed"), "{text}");
    assert!(rows[2].starts_with(" ▲ SILENT MISS ×6  10s ago  cmpl-ab7f7b82dd7eef2a"), "{text}");
    app.view.view = pdtop::ui::View::Events;
    let mut term = ratatui::Terminal::new(ratatui::backend::TestBackend::new(120, 40)).unwrap();
    term.draw(|f| app.draw(f)).unwrap();
    let buf = term.backend().buffer().clone();
    let text = common::buffer_text(&buf);
    for tag in ["▲ DEAD ", "▲ ERROR", "▲ MISS "] {
        let (y, line) = text
            .lines()
            .enumerate()
            .find(|(_, l)| l.contains(&format!(" {tag} ")))
            .unwrap_or_else(|| panic!("{tag}: {text}"));
        let x = line.chars().position(|c| c == '▲').unwrap() as u16;
        assert_eq!(buf[(x, y as u16)].style().bg, theme.alarm().bg, "{tag}");
    }
}

/// qwen3-shape-restart's decode is killed (no death in its log) and
/// answers no scrape for about a minute before its restart, 132 s in: the
/// outage is the loudest row while it lasts, for the demo as for a lab,
/// and gone once the decode answers again.
#[test]
fn a_killed_instance_alerts_while_it_answers_no_scrape() {
    let cap = capture("qwen3-shape-restart");
    for with_logs in [true, false] {
        // The seconds 60 to 139 in which the decode was down, read off one
        // play at its ticks (each the state `played` would give there).
        let mut st = pdtop::lab::replay::initial_state(&cap, with_logs);
        let mut down = Vec::new();
        for m in pdtop::lab::replay::messages(&cap, 139.0, with_logs) {
            let tick = match m {
                Msg::Tick { at } => Some(at - cap.t0),
                _ => None,
            };
            st.apply(m);
            if let Some(s) = tick.filter(|s| *s >= 60.0 && s.fract() == 0.0)
                && !st.instances[1].health.up
            {
                down.push(s);
            }
        }
        assert!(down.len() >= 40, "logs {with_logs}: down {down:?}");
        let st = played(&cap, down[down.len() / 2], with_logs);
        let alerts = st.alerts(None);
        assert_eq!(alerts.first().map(|a| a.kind), Some(AlertKind::Down), "{alerts:#?}");
        assert_eq!(alerts[0].count, 1);
        assert!(alerts[0].text.starts_with("decode 127.0.0.1:"), "{alerts:#?}");
        let app = pdtop::app::App::new(st, pdtop::theme::Theme::builtin("dark").unwrap());
        let text = common::screen_text(&app, 80, 24);
        assert!(text.lines().any(|l| l.starts_with(" ▲ DOWN ×1  ")), "{text}");
        assert!(!kinds(&played(&cap, 140.0, with_logs)).contains(&AlertKind::Down));
    }
}

/// The demo loops the capture, its decode down and restarted in each pass
/// under the recording's one `process_start_time_seconds`: the alert counts
/// both outages, and the uptime starts again at the second restart.
#[test]
fn every_outage_is_counted_and_uptime_starts_again_at_each_restart() {
    let cap = capture("qwen3-shape-restart");
    for with_logs in [true, false] {
        let st = looped_to(&cap, with_logs, 100.0);
        assert!(!st.instances[1].health.up, "mid-way through the second outage");
        let alerts = st.alerts(None);
        let down = alerts.iter().find(|a| a.kind == AlertKind::Down).expect("a DOWN row");
        assert_eq!(down.count, 2, "{alerts:#?}");
        let st = looped(&cap, with_logs);
        assert_eq!(st.instances[1].health.restarts, 2);
        let app = pdtop::app::App::new(st, pdtop::theme::Theme::builtin("dark").unwrap());
        let text = common::screen_text(&app, 120, 40);
        let line = text
            .lines()
            .find(|l| l.contains("DECODE") && l.contains("● up"))
            .unwrap_or_else(|| panic!("{text}"));
        let age = line.split("● up ").nth(1).and_then(|r| r.split_whitespace().next()).unwrap();
        // The second restart was 15 s before the end of the pass.
        assert!(
            age.ends_with('s') && age.trim_end_matches('s').parse::<u32>().is_ok_and(|s| s < 60),
            "{line}"
        );
    }
}

/// The Requests panel's counts: every outcome, cancelled included, and
/// the parts sum to the requests seen (traces and metrics alike).
#[test]
fn every_outcome_is_counted_and_the_parts_sum_to_the_whole() {
    for name in ["demo-proxy-qwen3", "qwen3-shape-restart"] {
        let cap = capture(name);
        for with_logs in [true, false] {
            for secs in [12.0, 24.5, 40.0, cap.t_end - cap.t0 + 1.0] {
                let tally = played(&cap, secs, with_logs).request_tally();
                let sum: u64 = tally.parts.iter().map(|(_, n)| n).sum();
                assert_eq!(sum, tally.seen, "{name} logs {with_logs} at {secs}: {tally:?}");
            }
        }
    }
    // The cancel phase's two streams (README).
    let tally = played(&capture("demo-proxy-qwen3"), 40.0, true).request_tally();
    assert_eq!((tally.source, tally.get("cancelled")), ("traces", 2), "{tally:?}");
}

/// demo-proxy-qwen3 30 s in has three alerts (a death, errors, misses). At
/// 80x24 they take one row, the others named on it, and the Overview keeps
/// every count of its Requests panel; at 120x40 each has its row.
#[test]
fn a_short_screen_gives_the_alerts_one_row_and_keeps_the_counts() {
    let cap = capture("demo-proxy-qwen3");
    let st = played(&cap, 30.0, true);
    assert_eq!(st.alerts(None).len(), 3);
    let app = pdtop::app::App::new(st, pdtop::theme::Theme::builtin("dark").unwrap());
    let text = common::screen_text(&app, 80, 24);
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with(" ▲ ")).collect();
    assert_eq!(rows.len(), 1, "{text}");
    assert!(
        rows[0].starts_with(" ▲ ENGINE DEAD ×1") && rows[0].contains("(+ ERRORS, SILENT MISS)"),
        "{text}"
    );
    for count in ["error", "cancelled", "unknown", "pending"] {
        assert!(text.contains(count), "{count}: {text}");
    }
    let tall = common::screen_text(&app, 120, 40);
    assert_eq!(tall.lines().filter(|l| l.starts_with(" ▲ ")).count(), 3, "{tall}");
}

/// `passes` passes of the capture as the demo loops it, the decode log's
/// lines naming `lost` dropped from the first (a log line lost: the
/// traces miss a miss the metrics saw).
fn passes_losing(cap: &Capture, passes: u32, lost: &str) -> AppState {
    let span = cap.t_end - cap.t0 + 1.0;
    let gap = span + 3.0;
    let mut st = pdtop::lab::replay::initial_state(cap, true);
    for pass in 0..passes {
        let off = gap * f64::from(pass);
        let restamp = |l: String| {
            let later =
                |ts| pdtop::traces::stamp_at(pdtop::traces::anchor(ts, cap.t0, None).unwrap_or(0.0) + off);
            pdtop::logs::vllm::restamp(&l, later).unwrap_or(l)
        };
        let mut truncated = std::collections::BTreeSet::new();
        for mut m in pdtop::lab::replay::messages(cap, span, true) {
            *m.at_mut() += off;
            st.apply(match m {
                Msg::LogLines { source, at, lines, state, mut counts } => {
                    if pass > 0 && truncated.insert(source.to_string()) {
                        counts = TailCounts { truncations: 1, ..counts };
                    }
                    let keep = |l: &String| pass > 0 || !l.contains(lost);
                    let lines = lines.into_iter().filter(keep).map(restamp).collect();
                    Msg::LogLines { source, at, lines, state, counts }
                }
                other => other,
            });
        }
    }
    st
}

/// The metrics-vs-traces note warns while the two disagree over the last
/// `CROSS_CHECK_SECS`, and stops once they agree again: a miss one side
/// lost long ago is history (it stays in the totals, said dimly).
#[test]
fn the_cross_check_warns_only_while_the_two_disagree() {
    use pdtop::state::alerting::CROSS_CHECK_SECS;
    let cap = capture("qwen3-shape-restart");
    let line = |st: AppState| {
        let app = pdtop::app::App::new(st, pdtop::theme::Theme::builtin("dark").unwrap());
        let text = common::screen_text(&app, 120, 40);
        text.lines().find(|l| l.contains("metrics")).map(str::to_string).unwrap_or_else(|| panic!("{text}"))
    };
    let st = passes_losing(&cap, 1, "lab-mismatch-3");
    let cc = st.cross_check().unwrap();
    assert_eq!((cc.metrics, cc.traces, cc.disagree_now()), (8, 7, true));
    assert!(line(st).contains("⚠ metrics: 8 silent miss(es), traces: 7"));
    // Three passes on (more than CROSS_CHECK_SECS), each with its 8 misses on both sides.
    assert!(3.0 * (cap.t_end - cap.t0) > CROSS_CHECK_SECS);
    let st = passes_losing(&cap, 4, "lab-mismatch-3");
    let cc = st.cross_check().unwrap();
    assert_eq!((cc.metrics, cc.traces, cc.disagree_now()), (32, 31, false));
    let l = line(st);
    assert!(l.contains("metrics agree now (32 vs 31 in all)") && !l.contains('⚠'), "{l}");
}
