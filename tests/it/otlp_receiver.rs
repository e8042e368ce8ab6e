//! The OTLP receiver against what vLLM really sent: every export body of
//! `demo-proxy-qwen3/otlp.bin`, posted over loopback (OTLP/HTTP and gRPC)
//! at its recorded pace (sped up), joined to the traces of the same
//! capture's logs, and checked against `spans.jsonl` and the client's
//! own TTFT in `requests.jsonl`.

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use pdtop::clock::SystemClock;
use pdtop::feed::Msg;
use pdtop::report::spans::{SpansReport, TimingsReport, timings_by_trace};
use pdtop::sources::otlp::{self, ExportTraceServiceRequest, OtlpOptions};
use pdtop::state::AppState;
use serde_json::Value;

const CAPTURE: &str = "demo-proxy-qwen3";

fn bodies() -> Vec<(f64, Vec<u8>)> {
    common::otlp_bodies(CAPTURE)
}

fn jsonl(file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(common::capture_dir(CAPTURE).join(file)).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The decoded request spans, by (service, request id).
fn truth_spans() -> HashMap<(String, String), Value> {
    jsonl("spans.jsonl")
        .into_iter()
        .filter(|s| s["name"] == "llm_request")
        .map(|s| {
            (
                (
                    s["service"].as_str().unwrap().into(),
                    s["attributes"]["gen_ai.request.id"].as_str().unwrap().into(),
                ),
                s,
            )
        })
        .collect()
}

/// Sends each body at its recorded pace, `speed` times faster.
async fn pace<F, Fut>(speed: f64, mut send: F)
where
    F: FnMut(Vec<u8>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let all = bodies();
    let t0 = all[0].0;
    let start = tokio::time::Instant::now();
    for (t, body) in all {
        tokio::time::sleep_until(start + Duration::from_secs_f64((t - t0) / speed)).await;
        send(body).await;
    }
}

/// The capture's logs replayed into a state, then whatever the receiver
/// delivered: the spans joined to the traces of the same requests.
fn with_logs(msgs: Vec<Msg>) -> AppState {
    let cap = common::capture(CAPTURE);
    let mut st = common::replay_with_logs(CAPTURE, cap.t_end - cap.t0 + 5.0);
    for m in msgs {
        st.apply(m);
    }
    st.finish(st.now + 120.0);
    st
}

async fn drain(rx: &mut tokio::sync::mpsc::Receiver<Msg>, want_spans: u64) -> Vec<Msg> {
    let mut out = Vec::new();
    let mut spans = 0;
    while spans < want_spans {
        let m =
            tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.expect("spans in time").unwrap();
        if let Msg::Spans { spans: s, .. } = &m {
            spans += s.len() as u64;
        }
        out.push(m);
    }
    out
}

/// Every request the client made that has a decode span: its timings
/// in the report match the span, and the TTFT from the first hop's
/// start is what the client measured, less the proxy's own start.
fn check_named_requests(st: &AppState) {
    let truth = truth_spans();
    let timings = timings_by_trace(st);
    let by_decode: HashMap<&str, &TimingsReport> =
        timings.values().filter_map(|t| Some((t.decode_request_id.as_deref()?, t))).collect();
    let mut checked = 0;
    for r in jsonl("requests.jsonl") {
        let Some(resp) = r["resp_id"].as_str() else { continue };
        let completion = format!("{resp}-0");
        let id = if resp.starts_with("chatcmpl-") { resp } else { completion.as_str() };
        let Some(span) = truth.get(&("vllm-decode".to_string(), id.to_string())) else { continue };
        let a = &span["attributes"];
        let t = by_decode.get(id).unwrap_or_else(|| panic!("{}: no timings for {id}", r["id"]));
        let ms = |k: &str| a[k].as_f64().unwrap() * 1000.0;
        assert!(
            (t.decode_ttft_ms.unwrap() - ms("gen_ai.latency.time_to_first_token")).abs() < 0.1,
            "{}",
            r["id"]
        );
        assert!(
            (t.decode_ms.unwrap() - ms("gen_ai.latency.time_in_model_decode")).abs() < 0.1,
            "{}",
            r["id"]
        );
        assert_eq!(t.decode_service.as_deref(), Some("vllm-decode"));
        assert_eq!(t.completion_tokens, a["gen_ai.usage.completion_tokens"].as_u64().map(|n| n as u32));
        let client = r["ttft_ms"].as_f64().unwrap();
        let ttft = t.ttft_ms.unwrap();
        if r["mode"] == "decode_only" {
            assert!(t.prefill_ms.is_some() && t.transfer_wait_ms.is_none(), "{}: {t:?}", r["id"]);
        } else {
            // Through the proxy: a prefill hop, then the decode.
            assert_eq!(t.prefill_service.as_deref(), Some("vllm-prefill"), "{}", r["id"]);
            let p =
                &truth[&("vllm-prefill".to_string(), t.prefill_request_id.clone().unwrap())]["attributes"];
            assert!(
                (t.prefill_ms.unwrap()
                    - p["gen_ai.latency.time_in_model_prefill"].as_f64().unwrap() * 1000.0)
                    .abs()
                    < 0.1
            );
            assert!(t.transfer_wait_ms.is_some() && t.handoff_ms.is_some(), "{}: {t:?}", r["id"]);
        }
        // The spans begin after the client sent and end before it read the
        // first token: never more than the client saw, and close to it.
        assert!(ttft <= client + 1.0, "{}: spans {ttft} ms > client {client} ms", r["id"]);
        assert!(ttft >= client * 0.85 - 30.0, "{}: spans {ttft} ms, client {client} ms", r["id"]);
        checked += 1;
    }
    assert!(checked >= 40, "only {checked} requests checked");
}

fn check_counts(st: &AppState) {
    let truth = jsonl("spans.jsonl");
    let requests = truth.iter().filter(|s| s["name"] == "llm_request").count() as u64;
    let r = SpansReport::from_state(st).unwrap();
    assert_eq!(r.count, requests);
    assert_eq!(r.other, truth.len() as u64 - requests);
    assert_eq!((r.errors, r.dropped, r.evicted), (0, 0, 0));
    // Loaded and recomputed decode requests, told apart by the traces,
    // timed by the decode's own span.
    // The decode spans' prompt lengths settle which request of a shared
    // step loaded, so the 8 misses join the 6 no-prefill requests as
    // computed; traces whose spans contradict their logs count neither way.
    let l = r.decode_ttft_ms_loaded.unwrap();
    let c = r.decode_ttft_ms_computed.unwrap();
    assert!(l.count >= 10 && c.count >= 14, "{l:?} {c:?} {r:?}");
    assert!(r.traces_with_spans >= 40, "{r:?}");
}

#[tokio::test]
async fn otlp_http_bodies_at_their_pace_become_timings_of_named_requests() {
    let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
    let opts = OtlpOptions { http: Some("127.0.0.1:0".parse().unwrap()), grpc: None };
    let addr = otlp::spawn(&opts, Arc::new(SystemClock), tx).unwrap()[0];
    let url = format!("http://{addr}/v1/traces");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let sent = tokio::spawn(pace(100.0, move |body| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            let r = client
                .post(&url)
                .header("content-type", "application/x-protobuf")
                .body(body)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
        }
    }));
    let msgs = drain(&mut rx, 84).await;
    sent.await.unwrap();
    let st = with_logs(msgs);
    check_counts(&st);
    check_named_requests(&st);
}

#[tokio::test]
async fn otlp_grpc_export_with_a_tonic_client() {
    // The client sends opentelemetry-proto's full messages; pdtop decodes its subset.
    use opentelemetry_proto::tonic::collector::trace::v1::{
        ExportTraceServiceRequest as FullRequest, trace_service_client::TraceServiceClient,
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
    let opts = OtlpOptions { http: None, grpc: Some("127.0.0.1:0".parse().unwrap()) };
    let addr = otlp::spawn(&opts, Arc::new(SystemClock), tx).unwrap()[0];
    let client = TraceServiceClient::connect(format!("http://{addr}")).await.unwrap();
    let sent = tokio::spawn(pace(100.0, move |body| {
        use prost::Message;
        let req = FullRequest::decode(&body[..]).unwrap();
        let mut c = client.clone();
        async move {
            c.export(req).await.unwrap();
        }
    }));
    let msgs = drain(&mut rx, 84).await;
    sent.await.unwrap();
    let st = with_logs(msgs);
    check_counts(&st);
    check_named_requests(&st);
}

fn gzip(b: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

/// Bodies that are not export requests get a 400 (or the status that
/// says why), each counted and shown; the receiver goes on serving.
#[tokio::test]
async fn bad_bodies_are_refused_counted_and_the_receiver_goes_on() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
    let opts = OtlpOptions { http: Some("127.0.0.1:0".parse().unwrap()), grpc: None };
    let addr = otlp::spawn(&opts, Arc::new(SystemClock), tx).unwrap()[0];
    let url = format!("http://{addr}/v1/traces");
    let c = reqwest::Client::new();
    let good = bodies()
        .into_iter()
        .map(|(_, b)| b)
        .find(|b| {
            use prost::Message;
            !otlp::request_spans(&ExportTraceServiceRequest::decode(&b[..]).unwrap()).0.is_empty()
        })
        .unwrap();
    let post = |body: Vec<u8>, enc: Option<&'static str>, ctype: &'static str| {
        let mut r = c.post(&url).header("content-type", ctype).body(body);
        if let Some(e) = enc {
            r = r.header("content-encoding", e);
        }
        async move { r.send().await.unwrap().status().as_u16() }
    };
    let pb = "application/x-protobuf";
    assert_eq!(post(b"\xff\xff\xff\xff garbage".to_vec(), None, pb).await, 400);
    assert_eq!(post(good[..good.len() / 2].to_vec(), None, pb).await, 400, "truncated");
    assert_eq!(post(good.clone(), Some("gzip"), pb).await, 400, "says gzip, is not");
    assert_eq!(post(gzip(b"not protobuf at all"), Some("gzip"), pb).await, 400);
    assert_eq!(post(b"{}".to_vec(), None, "application/json").await, 415);
    assert_eq!(post(good.clone(), Some("br"), pb).await, 415);
    assert_eq!(post(vec![0; otlp::MAX_BODY + 1], None, pb).await, 413);
    assert_eq!(c.get(&url).send().await.unwrap().status(), 405);
    assert_eq!(c.post(format!("http://{addr}/v1/metrics")).send().await.unwrap().status(), 404);
    // Still up, plain and gzip.
    assert_eq!(post(good.clone(), None, pb).await, 200);
    assert_eq!(post(gzip(&good), Some("gzip"), pb).await, 200);

    let mut st = AppState::new(common::pair_endpoints(), 60.0);
    let mut spans = 0;
    while spans < 2 {
        let m = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.unwrap().unwrap();
        if let Msg::Spans { spans: s, .. } = &m {
            assert!(!s.is_empty());
            spans += 1;
        }
        st.apply(m);
    }
    assert_eq!(st.spans.stats.rejected, 7, "{:?}", st.spans.errors);
    assert!(
        st.spans.errors.iter().any(|(_, e)| e.contains("400") && e.contains("ExportTraceServiceRequest"))
    );
    assert!(st.spans.errors.iter().any(|(_, e)| e.contains("gzip")));
    // Visible: one event for the burst, and the report's count.
    assert_eq!(st.events.iter().filter(|e| e.text.starts_with("otlp:")).count(), 1);
    let r = SpansReport::from_state(&st).unwrap();
    assert_eq!(r.errors, 7);
    assert!(r.count > 0);
}

/// A full channel never blocks the exporter or grows memory: batches are
/// dropped, and the count arrives with the next batch that gets through.
#[tokio::test]
async fn a_full_channel_drops_and_counts() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (tx, mut rx) = tokio::sync::mpsc::channel(1);
    let opts = OtlpOptions { http: Some("127.0.0.1:0".parse().unwrap()), grpc: None };
    let addr = otlp::spawn(&opts, Arc::new(SystemClock), tx).unwrap()[0];
    let url = format!("http://{addr}/v1/traces");
    let c = reqwest::Client::new();
    let with_spans: Vec<Vec<u8>> = bodies()
        .into_iter()
        .map(|(_, b)| b)
        .filter(|b| {
            use prost::Message;
            !otlp::request_spans(&ExportTraceServiceRequest::decode(&b[..]).unwrap()).0.is_empty()
        })
        .collect();
    let n = |b: &Vec<u8>| {
        use prost::Message;
        otlp::request_spans(&ExportTraceServiceRequest::decode(&b[..]).unwrap()).0.len() as u64
    };
    let mut lost = 0;
    for (i, b) in with_spans.iter().take(5).enumerate() {
        let r = c
            .post(&url)
            .header("content-type", "application/x-protobuf")
            .body(b.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "the exporter is answered even when spans are dropped");
        if i > 0 {
            lost += n(b);
        }
    }
    let Msg::Spans { spans, counts, .. } = rx.recv().await.unwrap() else { panic!() };
    assert_eq!((spans.len() as u64, counts.dropped), (n(&with_spans[0]), 0));
    let b = with_spans[5].clone();
    c.post(&url).header("content-type", "application/x-protobuf").body(b.clone()).send().await.unwrap();
    let Msg::Spans { spans, counts, .. } = rx.recv().await.unwrap() else { panic!() };
    assert_eq!((spans.len() as u64, counts.dropped), (n(&b), lost));
}

/// A non-loopback address is refused unless asked for, with the reason.
#[test]
fn remote_listen_is_refused_without_the_flag() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pdtop"))
        .args(["check", "--decode", "127.0.0.1:1", "--duration", "1", "--otlp-listen", "0.0.0.0:4318"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--otlp-allow-remote") && err.contains("request metadata"), "{err}");
}

/// Not an export request (field 1 as a number, where a message belongs).
#[derive(Clone, PartialEq, prost::Message)]
struct NotAnExport {
    #[prost(uint64, tag = "1")]
    resource_spans: u64,
}

/// A gRPC message that does not decode is answered with an error status
/// by tonic; the receiver goes on serving.
#[tokio::test]
async fn a_bad_grpc_message_gets_an_error_and_the_receiver_goes_on() {
    use opentelemetry_proto::tonic::collector::trace::v1::{
        ExportTraceServiceRequest as FullRequest, ExportTraceServiceResponse,
        trace_service_client::TraceServiceClient,
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
    let opts = OtlpOptions { http: None, grpc: Some("127.0.0.1:0".parse().unwrap()) };
    let addr = otlp::spawn(&opts, Arc::new(SystemClock), tx).unwrap()[0];
    let channel =
        tonic::transport::Channel::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap();
    let mut raw = tonic::client::Grpc::new(channel.clone());
    raw.ready().await.unwrap();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(
        "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
    );
    let codec = tonic_prost::ProstCodec::<NotAnExport, ExportTraceServiceResponse>::default();
    let err =
        raw.unary(tonic::Request::new(NotAnExport { resource_spans: 7 }), path, codec).await.unwrap_err();
    assert_ne!(err.code(), tonic::Code::Ok);
    let good = bodies()
        .into_iter()
        .find(|(_, b)| {
            use prost::Message;
            !otlp::request_spans(&ExportTraceServiceRequest::decode(&b[..]).unwrap()).0.is_empty()
        })
        .map(|(_, b)| {
            use prost::Message;
            FullRequest::decode(&b[..]).unwrap()
        })
        .unwrap();
    TraceServiceClient::new(channel).export(good).await.unwrap();
    let m = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.unwrap().unwrap();
    assert!(matches!(m, Msg::Spans { ref spans, .. } if !spans.is_empty()), "{m:?}");
}
