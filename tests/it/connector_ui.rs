//! The overview's connector strip on a Mooncake pair (fixtures built from
//! vLLM 0.33's declarations after the real recorded scrapes): a line for
//! what reports, none for what does not.

use crate::common;

use pdtop::app::App;
use pdtop::feed::Msg;
use pdtop::state::AppState;
use pdtop::theme::Theme;

fn fixture(name: &str) -> String {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/connector-metrics");
    std::fs::read_to_string(dir.join(name)).unwrap()
}

fn real(role: &str) -> String {
    let dir = common::capture_dir("qwen3-shape-restart");
    std::fs::read_to_string(dir.join(format!("{role}-metrics-idle.txt"))).unwrap()
}

fn screen(extra: &[(&str, &str)]) -> String {
    screen_at(extra, 180, 50)
}

fn screen_at(extra: &[(&str, &str)], w: u16, h: u16) -> String {
    let mut st = AppState::new(common::pair_endpoints(), 60.0);
    for (t, (p, d)) in [(100.0, ("a", "a")), (101.0, ("b", "b"))] {
        let mut bodies = [
            real("prefill") + &fixture(&format!("mooncake-prefill-{p}.txt")),
            real("decode") + &fixture(&format!("mooncake-decode-{d}.txt")),
        ];
        for (role, name) in extra {
            bodies[usize::from(*role == "decode")] += &fixture(name);
        }
        for (instance, body) in bodies.into_iter().enumerate() {
            st.apply(Msg::Scrape { instance, at: t, body });
        }
    }
    common::screen_text(&App::new(st, Theme::builtin("dark").unwrap()), w, h)
}

#[test]
fn mooncake_reports_a_line_and_absent_connectors_none() {
    let text = screen(&[]);
    assert!(text.contains("KV connectors"), "{text}");
    let line = text.lines().find(|l| l.starts_with("│ Mooncake ")).unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("bytes 15.8 MiB"), "{line}");
    assert!(line.contains("failed transfers 1"), "{line}");
    assert!(line.contains("failed recvs 1"), "{line}");
    assert!(line.contains("  transfers 1  xfer time 12 ms"), "{line}");
    for absent in [" NIXL ", " Offload ", " LMCache ", " Mc store "] {
        assert!(!text.lines().any(|l| l.starts_with(&format!("│{absent}"))), "{absent}: {text}");
    }
}

#[test]
fn an_offload_tier_gets_its_own_line() {
    // The same offload counters in both scrapes: present, nothing new.
    let text = screen(&[("decode", "offload-split-constructed.txt")]);
    let line = text.lines().find(|l| l.starts_with("│ Offload ")).unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("stored bytes 0 B"), "{line}");
    assert!(text.contains("not a transfer"), "{text}");
}

/// The connector strip under the overview at the three sizes every view
/// is drawn at (issue #19).
#[test]
fn the_connector_strip_at_every_size() {
    for (w, h) in [(80, 24), (120, 40), (200, 60)] {
        insta::assert_snapshot!(format!("mooncake_overview_{w}x{h}"), screen_at(&[], w, h));
    }
}
