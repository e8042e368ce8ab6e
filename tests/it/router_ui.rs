//! The router's header row, drawn from state only: up with its rate,
//! duration quantiles and errors per leg (the router fixture's numbers,
//! risen once), then down with its cause.

use crate::common;

use pdtop::app::App;
use pdtop::feed::{Endpoint, Msg, Role, RouterEndpoint};
use pdtop::state::AppState;
use pdtop::theme::Theme;

fn fixture() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/router/vllm-router-pd-metrics.txt"
    ))
    .unwrap()
}

/// The fixture's PD series times `k`.
fn scaled(k: f64) -> String {
    fixture()
        .lines()
        .map(|l| match l.rsplit_once(' ') {
            Some((series, v)) if l.starts_with("vllm_router_pd_") => {
                format!("{series} {}\n", v.parse::<f64>().unwrap() * k)
            }
            _ => format!("{l}\n"),
        })
        .collect()
}

#[test]
fn the_router_row_shows_rate_latency_errors_then_why_it_is_down() {
    let eps = vec![Endpoint::parse(Role::Decode, "127.0.0.1:8200").unwrap()];
    let router = RouterEndpoint::parse("127.0.0.1:29000").unwrap();
    let mut st = AppState::new(eps, 60.0).with_router(Some(router));
    let t0 = 1_796_019_931.0;
    st.apply(Msg::Router { at: t0, scrape: Ok(scaled(1.0)) });
    st.apply(Msg::Router { at: t0 + 2.0, scrape: Ok(scaled(2.0)) });
    let app = App::new(st.clone(), Theme::builtin("dark").unwrap());
    let screen = common::screen_text(&app, 140, 30);
    let row =
        screen.lines().find(|l| l.contains("ROUTER")).unwrap_or_else(|| panic!("no router row:\n{screen}"));
    // 48 requests in 2 s; the fixture's errors: 1 router, 2 prefill, 1 decode, 1 stream.
    assert!(row.contains("127.0.0.1:29000") && row.contains("● up"), "{row}");
    assert!(row.contains("workers 3/3"), "{row}");
    assert!(row.contains("req  24.0/s"), "{row}");
    assert!(row.contains("router 1 prefill 2 decode 1 stream 1"), "{row}");
    let d = pdtop::metrics::router::RouterSample::from_text(&fixture()).duration.unwrap();
    let p50 = pdtop::ui::fmt::secs(d.quantile(0.5));
    assert!(row.contains(&format!("p50 {p50}")), "{row} (want p50 {p50})");

    st.apply(Msg::Router { at: t0 + 3.0, scrape: Err("cannot connect: Connection refused".into()) });
    let app = App::new(st, Theme::builtin("dark").unwrap());
    let screen = common::screen_text(&app, 140, 30);
    let row = screen.lines().find(|l| l.contains("ROUTER")).unwrap();
    assert!(row.contains("✖ DOWN cannot connect: Connection refused"), "{row}");
}

/// `--router` alone (no instance): every view draws, the router row included.
#[test]
fn a_router_alone_draws_every_view() {
    let router = RouterEndpoint::parse("127.0.0.1:29000").unwrap();
    let mut st = AppState::new(Vec::new(), 60.0).with_router(Some(router));
    st.apply(Msg::Router { at: 1.0e9, scrape: Ok(scaled(1.0)) });
    st.apply(Msg::Router { at: 1.0e9 + 1.0, scrape: Ok(scaled(3.0)) });
    let mut app = App::new(st, Theme::builtin("dark").unwrap());
    for _ in 0..4 {
        let screen = common::screen_text(&app, 100, 24);
        assert!(screen.contains("ROUTER  127.0.0.1:29000"), "{screen}");
        app.on_action(pdtop::keymap::Action::NextView);
    }
}

/// A router that exports no PD series (regular mode) says so, not zeros.
#[test]
fn a_router_without_pd_series_says_so_instead_of_zeros() {
    let regular: String =
        fixture().lines().filter(|l| !l.contains("vllm_router_pd_")).map(|l| format!("{l}\n")).collect();
    assert!(regular.contains("vllm_router_"), "the fixture keeps the router's other series");
    let router = RouterEndpoint::parse("127.0.0.1:29000").unwrap();
    let mut st = AppState::new(Vec::new(), 60.0).with_router(Some(router));
    st.apply(Msg::Router { at: 1.0e9, scrape: Ok(regular.clone()) });
    st.apply(Msg::Router { at: 1.0e9 + 1.0, scrape: Ok(regular) });
    let app = App::new(st, Theme::builtin("dark").unwrap());
    let screen = common::screen_text(&app, 140, 30);
    let row = screen.lines().find(|l| l.contains("ROUTER")).unwrap();
    assert!(row.contains("● up") && row.contains("no vllm_router_pd_ series"), "{row}");
    assert!(!row.contains("req "), "{row}");
}

/// The router row above a live overview, at the three sizes every view is
/// drawn at (issue #19): its numbers whole or left out, never cut.
#[test]
fn the_router_row_at_every_size() {
    let router = RouterEndpoint::parse("127.0.0.1:29000").unwrap();
    let mut st = common::replay_metrics_only("qwen3-shape-restart", 45.0).with_router(Some(router));
    let now = st.now;
    st.apply(Msg::Router { at: now - 2.0, scrape: Ok(scaled(1.0)) });
    st.apply(Msg::Router { at: now, scrape: Ok(scaled(2.0)) });
    let app = App::new(st, Theme::builtin("dark").unwrap());
    for (w, h) in [(80, 24), (120, 40), (200, 60)] {
        insta::assert_snapshot!(format!("router_overview_{w}x{h}"), common::screen_text(&app, w, h));
    }
}
