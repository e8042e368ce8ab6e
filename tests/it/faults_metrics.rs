//! Bodies that answer 200 but lie, or come from an older vLLM: fed through
//! `AppState::apply` as a scraper would, and judged on what the user sees:
//! the `check` report and the header and panels drawn into a TestBackend.

use crate::common;

use pdtop::app::App;
use pdtop::feed::Role;
use pdtop::feed::{Endpoint, Msg};
use pdtop::metrics::model::Counter;
use pdtop::report::Report;
use pdtop::state::AppState;
use pdtop::theme::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

fn fixture(name: &str) -> String {
    std::fs::read_to_string(common::capture_dir("qwen3-shape-restart").join(name)).unwrap()
}

fn decode_only() -> AppState {
    AppState::new(vec![Endpoint::parse(Role::Decode, "127.0.0.1:8200").unwrap()], 60.0)
}

fn screen(state: &AppState, w: u16, h: u16) -> String {
    let app = App::new(state.clone(), Theme::builtin("dark").unwrap());
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    term.draw(|f| app.draw(f)).unwrap();
    let buf = term.backend().buffer();
    let mut out = String::new();
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            out.push_str(buf[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

/// Sets the value of every sample line that starts with `series`.
fn set(body: &str, series: &str, value: &str) -> String {
    let mut hit = false;
    let out = body
        .lines()
        .map(|l| {
            if l.starts_with(series) {
                hit = true;
                let (head, _) = l.rsplit_once(' ').unwrap();
                format!("{head} {value}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(hit, "{series} not in the fixture");
    out + "\n"
}

/// Drops every line (samples and comments) of the families given.
fn without(body: &str, families: &[&str]) -> String {
    body.lines()
        .filter(|l| {
            let name = l.trim_start_matches("# HELP ").trim_start_matches("# TYPE ");
            !families.iter().any(|f| name.starts_with(f))
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

fn scrape(st: &mut AppState, at: f64, body: String) {
    st.apply(Msg::Scrape { instance: 0, at, body });
}

#[test]
fn nan_and_infinities_never_reach_the_screen_or_the_report() {
    let body = fixture("decode-metrics-idle.txt");
    let body = set(&body, "vllm:kv_cache_usage_perc{", "NaN");
    let body = set(&body, "vllm:num_requests_running{", "+Inf");
    let body = set(&body, "vllm:num_requests_waiting{", "-Inf");
    let body = set(&body, "vllm:prompt_tokens_total{", "NaN");
    let body = set(&body, "vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"0.001\"", "+Inf");
    let mut st = decode_only();
    scrape(&mut st, 100.0, body.clone());
    scrape(&mut st, 101.0, body);
    let r = Report::from_state(&st);
    assert!(r.instances[0].up);
    assert_eq!(r.kv_usage.decode, None, "NaN usage is unknown, not a number");
    // The JSON stays valid JSON (serde would write NaN as null anyway; the
    // point is that no NaN or inf is computed into a shown value).
    let json = serde_json::to_string(&r).unwrap();
    assert!(!json.contains("NaN") && !json.contains("inf"), "{json}");
    let text = screen(&st, 120, 40);
    assert!(!text.contains("NaN") && !text.to_lowercase().contains("inf%"), "{text}");
    assert!(!text.contains(" inf"), "{text}");
    let header = text.lines().find(|l| l.contains("127.0.0.1:8200")).unwrap();
    assert!(header.contains("● up"), "{header}");
    assert!(header.contains("n/a"), "KV usage shown as n/a: {header}");
}

#[test]
fn duplicate_series_are_not_counted_twice() {
    let base = fixture("decode-metrics-idle.txt");
    let body = |prompt: u32| set(&base, "vllm:prompt_tokens_total{", &format!("{prompt}.0"));
    // The same series twice in one body (and one whole histogram repeated).
    let dup = |prompt: u32| {
        let b = body(prompt);
        let repeated: String = b
            .lines()
            .filter(|l| {
                l.starts_with("vllm:prompt_tokens_total{") || l.starts_with("vllm:time_to_first_token")
            })
            .map(|l| format!("{l}\n"))
            .collect();
        b + &repeated
    };
    let mut st = decode_only();
    scrape(&mut st, 100.0, dup(1000));
    scrape(&mut st, 101.0, dup(1500));
    let inst = &st.instances[0];
    assert_eq!(inst.total_counters.get(&Counter::PromptTokens).copied(), Some(500.0));
    // Said, not hidden: each repeat is a bad line on the header.
    assert!(inst.health.bad_lines_last > 0);
    let text = screen(&st, 120, 40);
    assert!(text.contains("bad lines"), "{text}");
}

#[test]
fn a_counter_that_goes_down_is_a_restart_and_up_again_counts_from_zero() {
    // No process_start_time_seconds (vLLM's multiprocess metrics export
    // none): only the counter tells. (Under an unchanged process start a
    // counter going back is no new process: `a_counter_back_under_the_same_process_start_is_no_restart`.)
    let base: String = fixture("decode-metrics-idle.txt")
        .lines()
        .filter(|l| !l.contains("process_start_time_seconds"))
        .map(|l| format!("{l}\n"))
        .collect();
    let at = |v: u32| set(&base, "vllm:prompt_tokens_total{", &format!("{v}.0"));
    let mut st = decode_only();
    scrape(&mut st, 100.0, at(1000));
    scrape(&mut st, 101.0, at(1200));
    scrape(&mut st, 102.0, at(10));
    scrape(&mut st, 103.0, at(500));
    let inst = &st.instances[0];
    assert_eq!(inst.health.restarts, 1);
    // 200 before, 10 after the restart (from zero), 490 since: never negative.
    assert_eq!(inst.total_counters.get(&Counter::PromptTokens).copied(), Some(700.0));
    assert!(inst.history.iter().all(|iv| iv.counters.values().all(|v| *v >= 0.0)));
    let r = Report::from_state(&st);
    assert_eq!(r.instances[0].restarts, 1);
    assert!(r.events.iter().any(|e| e.kind == "restart"), "{:?}", r.events);
    let text = screen(&st, 120, 40);
    assert!(text.contains("↻ 1 restart"), "{text}");
}

/// vLLM's single API server exports its process start; a process never
/// starts before the one it replaced, so counters going back under the
/// same start are the same process seen again (a looping recording):
/// no restart, and the interval counts nothing.
#[test]
fn a_counter_back_under_the_same_process_start_is_no_restart() {
    let base = fixture("decode-metrics-idle.txt");
    assert!(base.contains("process_start_time_seconds"));
    let at = |v: u32| set(&base, "vllm:prompt_tokens_total{", &format!("{v}.0"));
    let mut st = decode_only();
    scrape(&mut st, 100.0, at(1000));
    scrape(&mut st, 101.0, at(1200));
    scrape(&mut st, 102.0, at(10));
    scrape(&mut st, 103.0, at(500));
    let inst = &st.instances[0];
    assert_eq!(inst.health.restarts, 0);
    // 200 before, nothing at the rewind, 490 since.
    assert_eq!(inst.total_counters.get(&Counter::PromptTokens).copied(), Some(690.0));
    assert!(!Report::from_state(&st).events.iter().any(|e| e.kind == "restart"));
}

/// The decode idle scrape as an older vLLM would have served it, per the
/// version matrix (shared docs, vllm-reference §1.6).
fn as_version(version: &str) -> String {
    let now = fixture("decode-metrics-idle.txt");
    // Added in 0.18: by-source prompt tokens; 0.24: waiting_by_reason.
    let pre_018 = without(
        &now,
        &["vllm:prompt_tokens_by_source", "vllm:prompt_tokens_cached", "vllm:num_requests_waiting_by_reason"],
    );
    match version {
        "0.13" => pre_018,
        // Before 0.13: no request_prefill_kv_computed_tokens.
        "0.12" => without(&pre_018, &["vllm:request_prefill_kv_computed_tokens"]),
        // 0.10.1.1: TPOT is time_per_output_token_seconds, KV usage also as
        // gpu_cache_usage_perc, and none of the 0.12 additions.
        "0.10" => {
            let b = without(
                &pre_018,
                &[
                    "vllm:request_prefill_kv_computed_tokens",
                    "vllm:request_time_per_output_token_seconds",
                    "vllm:external_prefix_cache",
                    "vllm:mm_cache",
                    "vllm:engine_sleep_state",
                    "vllm:corrupted_requests",
                ],
            );
            let b = b.replace("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds");
            // The v0 engine had only the old KV usage name.
            b.replace("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
        }
        _ => unreachable!(),
    }
}

#[test]
fn older_vllm_without_kv_computed_tokens_says_miss_detection_is_unavailable() {
    for version in ["0.12", "0.10"] {
        let body = as_version(version);
        assert!(!body.contains("request_prefill_kv_computed_tokens"));
        let mut st = decode_only();
        let body = set(&body, "vllm:generation_tokens_total{", "0.0");
        scrape(&mut st, 100.0, body.clone());
        // A request finished: the detector would have had something to judge.
        let next = set(&body, "vllm:request_success_total{engine=\"0\",finished_reason=\"stop\"", "1.0");
        scrape(&mut st, 101.0, next);
        assert_eq!(st.misses.supported, Some(false), "{version}");
        let text = screen(&st, 120, 40);
        assert!(text.contains("miss detection needs vLLM ≥ 0.13"), "{version}: {text}");
        let r = Report::from_state(&st);
        assert!(
            r.warnings.iter().any(|w| w.contains("cannot be counted from metrics")),
            "{version}: {:?}",
            r.warnings
        );
        // Not an "ok": nothing could be judged.
        assert_ne!(format!("{:?}", r.verdict), "Ok", "{version}");
        assert!(r.instances[0].up && r.instances[0].bad_lines == 0, "{version}");
    }
}

#[test]
fn older_vllm_names_still_give_kv_usage_and_tpot() {
    let body = as_version("0.10");
    let body = set(&body, "vllm:gpu_cache_usage_perc{", "0.25");
    let mut st = decode_only();
    scrape(&mut st, 100.0, body.clone());
    let s = st.instances[0].latest.as_ref().unwrap();
    assert_eq!(s.kv_usage, Some(0.25));
    assert_eq!(s.tpot_source, Some("vllm:time_per_output_token_seconds"));
    let text = screen(&st, 120, 40);
    let header = text.lines().find(|l| l.contains("127.0.0.1:8200")).unwrap();
    assert!(header.contains("25"), "{header}");
}

#[test]
fn vllm_0_13_detects_misses_but_has_no_prompt_sources() {
    let body = as_version("0.13");
    let mut st = decode_only();
    scrape(&mut st, 100.0, body.clone());
    scrape(&mut st, 101.0, body);
    assert_ne!(st.misses.supported, Some(false));
    let r = Report::from_state(&st);
    assert!(!r.warnings.iter().any(|w| w.contains("cannot be counted")), "{:?}", r.warnings);
    // No by-source family: the token panel and the report must not claim
    // that zero tokens were transferred.
    let inst = &st.instances[0];
    assert_eq!(inst.total_counters.get(&Counter::PromptExternal), None);
    assert!(r.warnings.iter().any(|w| w.contains("decode_prompt_tokens unknown")), "{:?}", r.warnings);
    let text = screen(&st, 120, 40);
    assert!(text.contains("prompt tokens by source: n/a"), "{text}");
    assert!(!text.contains("transferred 0"), "{text}");
}
