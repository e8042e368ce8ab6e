//! The screen names a disagreement between the roles at once, on every
//! view, and as the likely cause once silent misses happen. The demo-proxy
//! recording is replayed with its decode scrapes changed in one label
//! (`block_size` 16 → 32; no recording has a real pair that differs).

use crate::common;

use pdtop::app::App;
use pdtop::feed::Role;
use pdtop::lab::Capture;
use pdtop::theme::Theme;

fn capture_with_decode_block(block: u32) -> Capture {
    let mut cap = common::capture("demo-proxy-qwen3").clone();
    for row in cap.scrapes.iter_mut().filter(|r| r.role == Role::Decode) {
        if let Some(body) = &mut row.body {
            *body = body.replace("block_size=\"16\"", &format!("block_size=\"{block}\""));
        }
    }
    cap
}

#[test]
fn the_header_names_the_mismatch_then_calls_it_the_likely_cause() {
    let cap = capture_with_decode_block(32);
    let theme = Theme::builtin("dark").unwrap();
    // Before any request: the roles already disagree.
    let early = App::new(pdtop::lab::replay::state_at(&cap, 2.0, false), theme.clone());
    let text = common::screen_text(&early, 140, 40);
    assert!(
        text.contains(
            "▲ CONFIG DIFFERS ×1  2.0s ago  prefill block 16, decode block 32: decode looks for blocks the prefill"
        ),
        "{text}"
    );
    // After the steady phase's misses, it is their likely cause.
    let late = App::new(pdtop::lab::replay::state_at(&cap, 16.0, false), theme);
    let text = common::screen_text(&late, 140, 40);
    assert!(text.contains("likely cause: prefill block 16, decode block 32"), "{text}");
    assert!(text.contains("SILENT MISS"), "{text}");
}

#[test]
fn agreeing_roles_show_no_mismatch_line() {
    let cap = capture_with_decode_block(16);
    let app = App::new(pdtop::lab::replay::state_at(&cap, 16.0, false), Theme::builtin("dark").unwrap());
    let text = common::screen_text(&app, 140, 40);
    assert!(!text.contains("CONFIG DIFFERS") && !text.contains("likely cause"), "{text}");
}
