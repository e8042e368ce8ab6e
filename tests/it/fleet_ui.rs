//! XpYd: role summaries in the header, the Instances grid, and the drill
//! into one instance, at 8P/8D in an 80x24 pane and 32P/32D in a large one.

use crate::common;

use pdtop::app::App;
use pdtop::feed::Role;
use pdtop::feed::{Endpoint, Msg};
use pdtop::keymap::Action;
use pdtop::state::AppState;
use pdtop::theme::Theme;
use pdtop::ui::View;

/// A fleet fed from the real recording: every prefill instance serves the
/// recorded prefill scrapes, every decode the decode ones; the third
/// decode instance has been unreachable since the start.
fn fleet(p: usize, d: usize, secs: f64) -> AppState {
    let mut eps = Vec::new();
    for i in 0..p {
        eps.push(Endpoint::parse(Role::Prefill, &format!("10.0.0.{}:8100", i + 1)).unwrap());
    }
    for i in 0..d {
        eps.push(Endpoint::parse(Role::Decode, &format!("10.0.1.{}:8200", i + 1)).unwrap());
    }
    let mut st = AppState::new(eps, 60.0);
    let rows = common::scrapes("qwen3-shape-restart");
    let t0 = rows[0].0;
    for (n, (t, inst, body, error)) in rows.into_iter().enumerate() {
        if t > t0 + secs {
            break;
        }
        if (n / 2) % 2 == 1 {
            continue;
        }
        let (first, count) = if inst == "prefill" { (0, p) } else { (p, d) };
        for i in first..first + count {
            let msg = match (&body, i == p + 2) {
                (_, true) => Msg::ScrapeFailed {
                    instance: i,
                    at: t,
                    error: "cannot connect: Connection refused".into(),
                },
                (Some(b), _) => Msg::Scrape { instance: i, at: t, body: b.clone() },
                (None, _) => {
                    Msg::ScrapeFailed { instance: i, at: t, error: error.clone().unwrap_or_default() }
                }
            };
            st.apply(msg);
        }
    }
    st.apply(Msg::Tick { at: t0 + secs });
    st
}

fn text(app: &App, w: u16, h: u16) -> String {
    common::screen_text(app, w, h)
}

#[test]
fn eight_by_eight_in_a_small_pane() {
    let mut app = App::new(fleet(8, 8, 70.0), Theme::builtin("dark").unwrap());
    let overview = text(&app, 80, 24);
    assert!(overview.contains("8 instances"), "{overview}");
    assert!(overview.contains("1 down"), "{overview}");
    insta::assert_snapshot!("fleet_8x8_overview_80x24", overview);
    app.view.view = View::Instances;
    let grid = text(&app, 80, 24);
    assert!(grid.contains("10.0.1.3:8200") || grid.contains("decode 8"), "{grid}");
    insta::assert_snapshot!("fleet_8x8_instances_80x24", grid);
}

#[test]
fn thirty_two_by_thirty_two_in_a_large_pane_and_drill_down() {
    let mut app = App::new(fleet(32, 32, 70.0), Theme::builtin("dark").unwrap());
    app.view.view = View::Instances;
    let grid = text(&app, 200, 80);
    assert!(grid.contains("prefill 32") && grid.contains("decode 32"), "{grid}");
    insta::assert_snapshot!("fleet_32x32_instances_200x80", grid);
    // Sort by health: the unreachable decode instance first among decode.
    app.on_action(Action::Sort);
    let sorted = text(&app, 200, 80);
    let decode_part = &sorted[sorted.find("decode 32").unwrap()..];
    let first_row = decode_part.lines().nth(2).unwrap();
    assert!(first_row.contains("10.0.1.3:8200"), "{first_row}");
    // Enter drills the overview into the selected instance; Esc goes back.
    app.on_action(Action::Open);
    let one = text(&app, 200, 80);
    assert!(one.contains("only 10.0.0."), "{one}");
    app.on_action(Action::Back);
    assert!(!text(&app, 200, 80).contains("only 10.0.0."));
    assert!(!app.quit);
}
