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
    let cap = common::capture(CAPTURE);
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
        st.apply(Msg::LogsPolled { at });
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

/// The overview's newest requests are the Requests list's first rows,
/// whatever the count asked, the sort or the search.
#[test]
fn the_newest_few_are_the_lists_first_rows() {
    use pdtop::ui::requests::{visible, visible_first};
    let mut app = app();
    let serials = |v: Vec<&pdtop::traces::Trace>| v.iter().map(|t| t.serial).collect::<Vec<u64>>();
    let all = serials(visible(&app.state, &app.view));
    assert!(all.len() >= 40, "{}", all.len());
    for k in [0, 1, 5, 39, all.len(), all.len() + 3] {
        assert_eq!(serials(visible_first(&app.state, &app.view, k)), all[..k.min(all.len())], "{k}");
    }
    app.view.view = View::Requests;
    app.on_action(pdtop::keymap::Action::Sort);
    let by_ttft = serials(visible(&app.state, &app.view));
    assert_ne!(by_ttft, all);
    assert_eq!(serials(visible_first(&app.state, &app.view, 7)), by_ttft[..7]);
}

/// The serials of the rows a search lists.
fn found(app: &App, query: &str) -> Vec<u64> {
    let mut view = app.view.clone();
    view.search = query.into();
    pdtop::ui::requests::visible(&app.state, &view).iter().map(|t| t.serial).collect()
}

/// Any id a user can copy for a request finds it: the trace's own, each
/// instance's vLLM ids (prefill and decode, with and without `-0` and
/// `-<8 hex>`), its spans' trace id; the filter stays in sight at 120
/// columns and says which id found the row.
#[test]
fn every_id_of_a_request_finds_it() {
    use pdtop::feed::LogOrigin;
    use pdtop::report::request_ids::{IdKind, ids_of};
    let mut app = app();
    app.view.view = View::Requests;
    let logs = app.state.logs.as_ref().unwrap();
    let t = logs.correlator.traces().find(|t| t.id == "cmpl-99181eb2cac48684").unwrap();
    let ids = ids_of(&app.state.spans, t);
    let of =
        |k: fn(&IdKind) -> bool| ids.iter().filter(|r| k(&r.kind)).map(|r| r.id.clone()).collect::<Vec<_>>();
    let prefill = of(|k| matches!(k, IdKind::Vllm(LogOrigin::Prefill(_))));
    let decode = of(|k| matches!(k, IdKind::Vllm(LogOrigin::Decode(_))));
    let trace_ids = of(|k| *k == IdKind::SpanTrace);
    // The capture has each kind for this request: no kind is skipped.
    assert_eq!(prefill, ["cmpl-81af8f5dc2ed76b1-0", "cmpl-81af8f5dc2ed76b1-0-8c57d680"], "{ids:?}");
    assert_eq!(decode, ["cmpl-99181eb2cac48684-0", "cmpl-99181eb2cac48684-0-b534c5a3"], "{ids:?}");
    // No proxy propagated `traceparent` here: each span has its own.
    assert_eq!(trace_ids.len(), 2, "{ids:?}");
    let serial = t.serial;
    let mut queries: Vec<String> = prefill.iter().chain(&decode).cloned().collect();
    // The prefill's response id, a hex run from the middle, the engine's
    // suffix alone, upper case, and a copy with the log line's quotes.
    queries.extend(
        [
            "cmpl-81af8f5dc2ed76b1",
            "81af8f5d",
            "8c57d680",
            "CMPL-81AF8F5DC2ED76B1-0",
            "'cmpl-99181eb2cac48684-0'",
        ]
        .map(String::from),
    );
    for tid in &trace_ids {
        queries.push(tid.clone());
        queries.push(tid[8..20].to_string());
    }
    for q in &queries {
        assert_eq!(found(&app, q), [serial], "{q}");
    }
    assert!(found(&app, "no-such-id-anywhere").is_empty());
    app.view.search = "81af8f5d".into();
    let screen = common::screen_text(&app, 120, 40);
    let title = screen.lines().find(|l| l.starts_with('┌')).unwrap();
    assert!(
        title.contains("/81af8f5d") && title.contains("1 found, this one by its prefill#0 vLLM id"),
        "{screen}"
    );
    assert!(screen.contains("cmpl-99181eb2cac48684"), "{screen}");
}

/// Ids wider than the ID column end in `…` and keep head and tail.
#[test]
fn long_ids_are_cut_with_an_ellipsis() {
    use pdtop::ui::requests::cut_id;
    assert_eq!(cut_id("chatcmpl-89d07f0f1c1de0b5", 24), "chatcmpl…9d07f0f1c1de0b5");
    assert_eq!(cut_id("lab-steady-3", 14), "lab-steady-3  ");
    assert_eq!(cut_id("abc", 1), "…");
    let mut app = app();
    app.view.view = View::Requests;
    let screen = common::screen_text(&app, 200, 60);
    let logs = app.state.logs.as_ref().unwrap();
    let long: Vec<&str> =
        logs.correlator.traces().map(|t| t.id.as_str()).filter(|id| id.chars().count() > 24).collect();
    assert!(!long.is_empty());
    let rows: Vec<&str> = screen.lines().filter(|l| l.starts_with("│ 0")).collect();
    assert!(rows.iter().any(|r| r.contains('…')), "{screen}");
    for id in long {
        // The whole id is never cut silently to its first 24 characters.
        let head: String = id.chars().take(24).collect();
        assert!(!rows.iter().any(|r| r.contains(&format!(" {head} "))), "{id}: {screen}");
    }
}

/// A hop timed from vLLM's 1-second log stamps never shows milliseconds;
/// where a span times the same hop, its milliseconds are shown.
#[test]
fn a_log_stamped_hop_never_shows_milliseconds() {
    let mut app = app();
    app.view.view = View::Requests;
    app.view.detail = true;
    // Without spans every hop is timed by log stamps.
    app.state.spans = Default::default();
    let hops = |app: &App| {
        let t = common::screen_text(app, 140, 44);
        let rows: Vec<String> = t
            .lines()
            .filter(|l| ["prefill#", "decode#"].iter().any(|s| l.contains(s)) && l.contains(" +"))
            .map(String::from)
            .collect();
        (t, rows)
    };
    for q in ["cmpl-99181eb2cac48684", "cmpl-a54b81896ccfb85f"] {
        app.view.search = q.into();
        let (t, rows) = hops(&app);
        assert!(!rows.is_empty(), "{t}");
        for r in &rows {
            assert!(!r.contains(" ms ") && !r.contains(".0s"), "{r}");
        }
    }
    let mut app = self::app();
    app.view.view = View::Requests;
    app.view.detail = true;
    app.view.search = "cmpl-99181eb2cac48684".into();
    let (t, rows) = hops(&app);
    let prefill = rows.iter().find(|r| r.contains("prefill#0")).unwrap();
    assert!(prefill.contains("636 ms"), "the prefill span's time: {t}");
}

/// A P2pNccl tensor id (`<request id>kv` here, V1's `<request id>#<layer>`)
/// pasted from the decode's log finds the request it carried; the line is
/// the real one pasted in vLLM PR #15806 (MANIFEST: v0-stats-p2pnccl-decode.log).
#[test]
fn a_p2p_nccl_tensor_id_finds_its_request() {
    use pdtop::feed::{LogOrigin, Msg, TailCounts, TailState};
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/log-excerpts/v0-stats-p2pnccl-decode.log");
    let text = std::fs::read_to_string(path).unwrap();
    let logs = vec![(LogOrigin::Decode(0), "d.log".to_string())];
    let mut st = AppState::new(common::pair_endpoints(), 60.0).with_logs(&logs);
    let lines: Vec<String> = text.lines().map(String::from).collect();
    let tensor = lines[3].split("tensor_id:").nth(1).unwrap().split(',').next().unwrap().to_string();
    assert!(tensor.ends_with("-0kv"), "{tensor}");
    st.apply(Msg::LogLines {
        source: LogOrigin::Decode(0),
        at: 1_796_019_931.0,
        lines,
        state: TailState::Following,
        counts: TailCounts::default(),
    });
    st.apply(Msg::LogsPolled { at: 1_796_019_931.0 });
    let app = App::new(st, Theme::builtin("dark").unwrap());
    let all = found(&app, "");
    assert_eq!(all.len(), 1);
    assert_eq!(found(&app, &tensor), all);
    let base = tensor.strip_suffix("kv").unwrap();
    assert_eq!(found(&app, &format!("{base}#model.layers.0.self_attn.attn")), all);
    // The tensor id of another request finds nothing.
    assert!(found(&app, &tensor.replace("1025d17a", "99999999")).is_empty());
}

/// With a forwarded `X-Request-Id` (qwen3-shape-restart: `lab-steady-3`,
/// vLLM's `cmpl-lab-steady-3-0` and `…-0-<8 hex>` on both instances), the
/// client's id, the response id and each engine id find the request, and a
/// whole id comes first, before `lab-steady-30`…`39` that contain it.
#[test]
fn a_forwarded_id_and_its_vllm_forms_select_their_request() {
    const Q: &str = "qwen3-shape-restart";
    let cap = common::capture(Q);
    let st = common::replay_with_logs(Q, cap.t_end - cap.t0 + 5.0);
    let app = App::new(st, Theme::builtin("dark").unwrap());
    let logs = app.state.logs.as_ref().unwrap();
    let t = logs.correlator.traces().find(|t| t.id == "lab-steady-3").unwrap();
    let engine: Vec<&str> = t.engine_ids.iter().map(|(_, id)| id.as_str()).collect();
    assert!(engine.contains(&"cmpl-lab-steady-3-0") && engine.len() >= 3, "{engine:?}");
    let mut queries = vec!["lab-steady-3", "cmpl-lab-steady-3", "cmpl-lab-steady-3-0"];
    queries.extend(engine.iter().copied());
    for q in queries {
        let rows = found(&app, q);
        assert_eq!(rows.first(), Some(&t.serial), "{q}");
    }
    assert!(found(&app, "lab-steady-3").len() > 1, "lab-steady-30… contain it too");
}
