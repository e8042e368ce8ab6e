//! The trace pane's waterfall and the Requests view's span columns, drawn
//! from the real capture: its logs replayed, its recorded OTLP bodies
//! decoded into the spans the receiver would deliver.

use crate::common;

use pdtop::app::App;
use pdtop::feed::{Msg, SpanCounts};
use pdtop::sources::otlp::{ExportTraceServiceRequest, request_spans};
use pdtop::state::AppState;
use pdtop::theme::Theme;
use pdtop::ui::View;
use prost::Message;

const CAPTURE: &str = "demo-proxy-qwen3";

fn state() -> AppState {
    let cap = pdtop::lab::Capture::from_dir(&common::capture_dir(CAPTURE)).unwrap();
    let mut st = common::replay_with_logs(CAPTURE, cap.t_end - cap.t0 + 5.0);
    let raw = std::fs::read(common::capture_dir(CAPTURE).join("otlp.bin")).unwrap();
    let mut rest = &raw[..];
    while !rest.is_empty() {
        let n = u32::from_le_bytes(rest[8..12].try_into().unwrap()) as usize;
        let req = ExportTraceServiceRequest::decode(&rest[12..12 + n]).unwrap();
        let (spans, other) = request_spans(&req);
        st.apply(Msg::Spans { at: st.now, spans, counts: SpanCounts { other, dropped: 0 } });
        rest = &rest[12 + n..];
    }
    st
}

fn app() -> App {
    App::new(state(), Theme::builtin("dark").unwrap())
}

#[test]
fn waterfall_of_one_request_through_the_proxy() {
    let mut app = app();
    app.view.view = View::Requests;
    // lab-steady-3: 1700 prompt tokens, loaded; named by its decode response id.
    app.view.search = "cmpl-99181eb2cac48684".into();
    app.view.detail = true;
    let t = common::screen_text(&app, 140, 44);
    assert!(t.contains("where the time went"), "{t}");
    for hop in ["proxy", "prefill", "connector", "decode"] {
        assert!(t.lines().any(|l| l.trim_start_matches('│').trim_start().starts_with(hop)), "{hop}: {t}");
    }
    assert!(t.contains("vllm-prefill") && t.contains("vllm-decode"), "{t}");
    insta::assert_snapshot!("waterfall_steady_3_140x44", t);
}

/// Bars are to scale: the decode stretch of the decode row is as long,
/// against the proxy row, as the decode time against the whole request.
#[test]
fn bars_are_to_scale() {
    let mut app = app();
    app.view.view = View::Requests;
    app.view.search = "cmpl-99181eb2cac48684".into();
    app.view.detail = true;
    let t = common::screen_text(&app, 200, 50);
    let row = |hop: &str| {
        t.lines()
            .find(|l| l.trim_start_matches('│').trim_start().starts_with(hop) && l.contains('─'))
            .unwrap()
            .to_string()
    };
    let whole = row("proxy").chars().filter(|c| *c == '─').count() as f64;
    let decode = row("decode ").chars().filter(|c| *c == '▓').count() as f64;
    let tr = app
        .state
        .logs
        .as_ref()
        .unwrap()
        .correlator
        .traces()
        .find(|t| t.id == "cmpl-99181eb2cac48684")
        .unwrap();
    let tm = app.state.spans.timings_for(tr);
    let want = (tm.e2e().unwrap()
        - tm.decode.unwrap().ttft.unwrap()
        - (tm.decode.unwrap().start - tm.start().unwrap()))
        / tm.e2e().unwrap();
    assert!((decode / whole - want).abs() < 0.05, "decode {decode} of {whole}, want {want}");
}

/// The Requests view lists TTFT / transfer wait / decode, and `s` sorts
/// by them, slowest first.
#[test]
fn requests_sorted_by_ttft() {
    let mut app = app();
    app.view.view = View::Requests;
    let t = common::screen_text(&app, 160, 30);
    assert!(t.contains("TTFT") && t.contains("WAIT") && t.contains("DEC"), "{t}");
    app.on_action(pdtop::keymap::Action::Sort);
    assert_eq!(app.view.req_sort, pdtop::ui::waterfall::RequestSort::Ttft);
    let rows = pdtop::ui::requests::visible(&app.state, &app.view);
    let ttft: Vec<f64> = rows.iter().filter_map(|r| app.state.spans.timings_for(r).ttft()).collect();
    assert!(ttft.len() >= 40);
    assert!(ttft.windows(2).all(|w| w[0] >= w[1]), "{ttft:?}");
    let t = common::screen_text(&app, 160, 30);
    assert!(t.contains("sorted by TTFT"), "{t}");
}

fn decode_id(name: &str) -> String {
    let text = std::fs::read_to_string(common::capture_dir(CAPTURE).join("requests.jsonl")).unwrap();
    let r: serde_json::Value = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|r| r["id"] == name)
        .unwrap();
    let id = r["resp_id"].as_str().unwrap();
    if id.starts_with("chatcmpl-") { id.to_string() } else { format!("{id}-0") }
}

/// Three requests at a time through the demo proxy: the ExampleConnector's
/// hit lines carry no id, so the logs alone cannot say which request of a
/// shared step loaded. The decode spans' prompt sizes settle it: the
/// 2049-token miss and the 3100-token load of one step each get the
/// verdict the capture's truth gives them, and their spans then agree with
/// their hit lines.
#[test]
fn spans_settle_which_request_of_a_step_loaded() {
    use pdtop::report::spans::timings_by_trace;
    use pdtop::traces::Outcome;
    let st = state();
    assert_eq!(st.decode_block_size(), Some(16));
    let timings = timings_by_trace(&st);
    let of = |name: &str| {
        let id = decode_id(name);
        let (trace, t) =
            timings.iter().find(|(_, t)| t.decode_request_id.as_deref() == Some(id.as_str())).unwrap();
        (trace.clone(), t.clone())
    };
    let outcome =
        |trace: &str| st.logs.as_ref().unwrap().correlator.traces().find(|t| t.id == trace).unwrap().outcome;
    // 1700 tokens, Inject 1696: agrees.
    assert_eq!(of("lab-steady-3").1.disagreement, None);
    assert_eq!(of("lab-chat-2").1.disagreement, None);
    let (miss, t) = of("lab-steady-4");
    assert_eq!((outcome(&miss), t.disagreement), (Outcome::SilentMiss, None));
    let (loaded, t) = of("lab-steady-5");
    assert_eq!((outcome(&loaded), t.disagreement), (Outcome::Loaded, None));
    let (miss, _) = of("lab-steady-11");
    assert_eq!(outcome(&miss), Outcome::SilentMiss);

    let mut app = App::new(st, Theme::builtin("dark").unwrap());
    app.view.view = View::Requests;
    app.view.search = miss;
    app.view.detail = true;
    let t = common::screen_text(&app, 160, 50);
    assert!(t.contains("SILENT MISS") && t.contains("where the time went"), "{t}");
}

/// The ExampleConnector loads KV from disk inside the model step: on
/// decode a loaded request's prompt time is like a computed one's, so a
/// span's prefill time alone names no miss here, and pdtop says so.
#[test]
fn spans_alone_name_no_miss_when_loading_costs_like_computing() {
    let st = state();
    let r = pdtop::report::spans::SpansReport::from_state(&st).unwrap();
    let b = r.prefill_baseline;
    assert!(b.computed_n >= 3 && b.loaded_n >= 3, "{b:?}");
    let (c, l) = (b.computed_ms_per_ktok.unwrap(), b.loaded_ms_per_ktok.unwrap());
    assert!(c < pdtop::report::span_evidence::SEPARATION * l, "{b:?}");
    assert!(r.miss_evidence.contains("too close"), "{}", r.miss_evidence);
    assert!(r.span_misses.is_empty(), "{:?}", r.span_misses);
}

/// A reused id (`pdtop demo` loops its capture): each row opens its own
/// trace. lab-disagg-0 of the qwen3 capture (its real prefill lines 144-148
/// and decode lines 188-192) played twice 150 s apart, the second time
/// without the decode's `External Cache Hit!`/`Inject` lines (188-190
/// only), so the two loops end differently: loaded, then a silent miss.
#[test]
fn each_row_of_a_reused_id_opens_its_own_trace() {
    use pdtop::feed::{Endpoint, LogOrigin, Role, TailCounts, TailState};
    let dir = common::capture_dir("qwen3-shape-restart");
    let pick = |name: &str, from: usize, n: usize| -> Vec<String> {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        text.lines().skip(from - 1).take(n).map(String::from).collect()
    };
    let eps = vec![
        Endpoint::parse(Role::Prefill, "127.0.0.1:8100").unwrap(),
        Endpoint::parse(Role::Decode, "127.0.0.1:8200").unwrap(),
    ];
    let mut st = AppState::new(eps, 60.0).with_logs(&[
        (LogOrigin::Prefill(0), "prefill.log".to_string()),
        (LogOrigin::Decode(0), "decode.log".to_string()),
    ]);
    let t0 = 1_796_019_947.0;
    for (at, decode_lines) in [(t0, 5), (t0 + 150.0, 3)] {
        for (source, lines) in [
            (LogOrigin::Prefill(0), pick("vllm-prefill.log", 144, 5)),
            (LogOrigin::Decode(0), pick("vllm-decode.log", 188, decode_lines)),
        ] {
            st.apply(Msg::LogLines {
                source,
                at,
                lines,
                state: TailState::Following,
                counts: TailCounts::default(),
            });
        }
        st.apply(Msg::Tick { at: at + 5.0 });
    }
    let mut app = App::new(st, Theme::builtin("dark").unwrap());
    app.view.view = View::Requests;
    app.view.detail = true;
    let title = |app: &App| {
        let t = common::screen_text(app, 140, 30);
        t.lines()
            .find(|l| l.contains("trace lab-disagg-0"))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("{t}"))
    };
    // Newest first: row 0 is loop 2's miss, row 1 loop 1's load.
    app.view.selected = 0;
    assert!(title(&app).contains("SILENT MISS"), "{}", title(&app));
    app.view.selected = 1;
    assert!(title(&app).contains("loaded"), "{}", title(&app));
}
