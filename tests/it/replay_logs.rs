//! `pdtop replay --from-logs`: the real demo-proxy capture's logs played on
//! screen through the real event loop (`app::run`, TestBackend, tokio's
//! paused clock), paced by the same player as a recording: the keys steer
//! it, panels that need metrics say there are none, and the traces come
//! out as a check after the fact finds them. A pasted excerpt (no year,
//! cut at both ends) plays too.

use crate::common;

use pdtop::app::{self, FRAME, Input};
use pdtop::cli::{ReplayArgs, UiArgs};
use pdtop::pipeline::Feed;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::time::Duration;
use tokio::sync::mpsc;

fn key(c: char) -> Input {
    Input::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
}

fn args(prefill: Vec<String>, decode: Vec<String>, proxy: Option<String>, speed: f64) -> ReplayArgs {
    ReplayArgs {
        file: None,
        from_logs: true,
        prefill_log: prefill,
        decode_log: decode,
        proxy_log: proxy,
        stuck_after: None,
        speed,
        ui: UiArgs { theme: Some("mono".into()) },
    }
}

fn demo_args(speed: f64) -> ReplayArgs {
    let d = common::capture_dir("demo-proxy-qwen3");
    let f = |n: &str| d.join(n).display().to_string();
    args(vec![f("vllm-prefill.log")], vec![f("vllm-decode.log")], Some(f("proxy.log")), speed)
}

#[tokio::test(start_paused = true)]
async fn the_demo_logs_play_on_screen_paced_by_the_player() {
    let (mut app, player) = pdtop::modes::replay_app(&demo_args(4.0)).unwrap();
    let span = player.t_end - player.t0;
    assert!(span > 60.0, "the capture's logs cover minutes: {span}");
    let (in_tx, in_rx) = mpsc::unbounded_channel();
    let mut term = Terminal::new(TestBackend::new(120, 40)).unwrap();
    let keys = tokio::spawn(async move {
        // 2 s of real time at ×4: 8 s of the logs.
        tokio::time::sleep(Duration::from_secs(2)).await;
        in_tx.send(key('p')).unwrap();
        tokio::time::sleep(FRAME * 4).await;
        in_tx.send(key('q')).unwrap();
        tokio::time::sleep(Duration::from_secs(3600)).await;
    });
    app::run(&mut term, &mut app, Feed::Recording(Box::new(player)), in_rx).await.unwrap();
    keys.abort();
    let screen = common::buffer_text(term.backend().buffer());
    // Paused a few seconds in: the badge says where, and nothing is decided yet.
    assert!(screen.contains("replay logs ⏸ 0:0"), "{screen}");
    assert!(screen.contains("logs only, no metrics"), "{screen}");
    assert!(screen.contains("no metrics — logs only"), "{screen}");
    assert!(app.state.instances.is_empty());
}

/// At 80 columns the capture's name gives way, the position stays.
#[tokio::test(start_paused = true)]
async fn at_80_columns_the_replay_still_says_where_it_is() {
    let (mut app, player) = pdtop::modes::replay_app(&demo_args(4.0)).unwrap();
    let (in_tx, in_rx) = mpsc::unbounded_channel();
    let mut term = Terminal::new(TestBackend::new(80, 24)).unwrap();
    let keys = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(3)).await;
        in_tx.send(key('q')).unwrap();
        tokio::time::sleep(Duration::from_secs(3600)).await;
    });
    app::run(&mut term, &mut app, Feed::Recording(Box::new(player)), in_rx).await.unwrap();
    keys.abort();
    let screen = common::buffer_text(term.backend().buffer());
    let title = screen.lines().next().unwrap();
    assert!(title.contains("▶ 0:1") && title.contains("×4"), "{screen}");
    assert!(!title.contains("replay logs"), "{title}");
}

#[tokio::test(start_paused = true)]
async fn played_to_the_end_the_logs_give_the_checks_answers() {
    let (mut app, player) = pdtop::modes::replay_app(&demo_args(256.0)).unwrap();
    let (in_tx, in_rx) = mpsc::unbounded_channel();
    let keys = tokio::spawn(async move {
        // Fast forward with the keys the user has: → seeks 10 s of logs.
        for _ in 0..60 {
            in_tx.send(Input::Key(KeyEvent::new(KeyCode::Right, KeyModifiers::NONE))).unwrap();
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
        in_tx.send(key('q')).unwrap();
        tokio::time::sleep(Duration::from_secs(3600)).await;
    });
    let mut term = Terminal::new(TestBackend::new(120, 40)).unwrap();
    app::run(&mut term, &mut app, Feed::Recording(Box::new(player)), in_rx).await.unwrap();
    keys.abort();
    let logs = app.state.logs.as_ref().expect("logs state");
    // At the end, the screen holds what `check --from-logs` reports.
    let c = logs.correlator.counts();
    let d = common::capture_dir("demo-proxy-qwen3");
    let f = |n: &str| d.join(n).display().to_string();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pdtop"))
        .args(["check", "--json", "--from-logs", "--prefill-log", &f("vllm-prefill.log")])
        .args(["--decode-log", &f("vllm-decode.log"), "--proxy-log", &f("proxy.log")])
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let q = &r["requests"];
    let got = [c.seen, c.loaded, c.silent_miss, c.no_prefill, c.error, c.cancelled, c.unknown, c.pending];
    let want: Vec<u64> =
        ["seen", "loaded", "silent_miss", "no_prefill", "error", "cancelled", "unknown", "pending"]
            .iter()
            .map(|k| q[k].as_u64().unwrap())
            .collect();
    assert_eq!(got.to_vec(), want);
    // The ground truth has 27 loaded: logs alone cannot say which request
    // of a shared scheduling step had the hit, so 8 of them are unknown
    // beside the 8 misses they shared a step with (the spans settle them),
    // with the 6 the proxy's unstamped log leaves open; 2 cancelled, none pending.
    assert_eq!((c.loaded, c.unknown, c.cancelled, c.pending), (19, 22, 2, 0));
    let screen = common::buffer_text(term.backend().buffer());
    assert!(screen.contains("replay logs ▶"), "{screen}");
    // What the logs could not say is on screen, as `check` warns it.
    assert!(screen.contains("NOTE    proxy.log: no timestamps"), "{screen}");
    insta::assert_snapshot!("replay_logs_overview_demo_proxy_120x40", screen);
}

#[tokio::test(start_paused = true)]
async fn a_pasted_excerpt_without_year_cut_at_both_ends_still_plays() {
    let real =
        std::fs::read_to_string(common::capture_dir("demo-proxy-qwen3").join("vllm-decode.log")).unwrap();
    // The middle of the decode log, the first line cut mid-way.
    let lines: Vec<&str> = real.lines().collect();
    let mut excerpt = lines[300][20..].to_string() + "\n";
    for l in &lines[301..420] {
        excerpt.push_str(l);
        excerpt.push('\n');
    }
    excerpt.push_str(&lines[420][..30]);
    let dir = std::env::temp_dir().join(format!("pdtop-replay-excerpt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("pasted.log");
    std::fs::write(&path, excerpt).unwrap();
    let (mut app, player) =
        pdtop::modes::replay_app(&args(vec![], vec![path.display().to_string()], None, 64.0)).unwrap();
    assert!(player.t_end > player.t0);
    let (in_tx, in_rx) = mpsc::unbounded_channel();
    let keys = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(10)).await;
        in_tx.send(key('q')).unwrap();
        tokio::time::sleep(Duration::from_secs(3600)).await;
    });
    let mut term = Terminal::new(TestBackend::new(100, 30)).unwrap();
    app::run(&mut term, &mut app, Feed::Recording(Box::new(player)), in_rx).await.unwrap();
    keys.abort();
    let logs = app.state.logs.as_ref().unwrap();
    assert_eq!(logs.sources[0].lines as usize, 121, "every line of the excerpt was played");
    assert!(logs.correlator.traces().count() > 0, "requests read from the excerpt");
    let screen = common::buffer_text(term.backend().buffer());
    assert!(screen.contains("pasted.log"), "{screen}");
    let _ = std::fs::remove_dir_all(&dir);
}
