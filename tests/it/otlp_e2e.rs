//! End to end: the demo-proxy capture served by the lab (sped up), its
//! recorded OTLP bodies posted at the lab's pace to `pdtop check --json`
//! and `pdtop record` (both with `--otlp-listen`), then the recording
//! checked again with `--replay`: the spans and their timings survive.

use crate::common;

use std::process::Command;
use std::time::Duration;

use pdtop::lab::{self, LabOptions};
use serde_json::Value;

const CAPTURE: &str = "demo-proxy-qwen3";
/// Lab seconds per real second. The spans are posted at the lab's pace
/// and the check's settle windows run on its clock: at 8x a lab second was
/// 125 ms, and scheduling jitter on a busy 2-core runner sometimes let a
/// shared step be settled before its decode spans came (a miss named on its
/// neighbour, 2 runs in 7). At 3x: 0 in 5, two of them beside a busy core.
const SPEED: f64 = 3.0;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn bodies() -> Vec<(f64, Vec<u8>)> {
    common::otlp_bodies(CAPTURE)
}

fn json_of(out: &std::process::Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("not JSON ({e}): {stdout}\nstderr: {}", String::from_utf8_lossy(&out.stderr))
    })
}

/// The timings of the request the client called `name`, by its decode id.
fn timings_of<'a>(report: &'a Value, name: &str) -> &'a Value {
    let reqs = std::fs::read_to_string(common::capture_dir(CAPTURE).join("requests.jsonl")).unwrap();
    let r: Value =
        reqs.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()).find(|r| r["id"] == name).unwrap();
    let id = format!("{}-0", r["resp_id"].as_str().unwrap());
    report["traces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["timings"])
        .find(|t| t["decode_request_id"] == id.as_str())
        .unwrap_or_else(|| panic!("no timings for {name} ({id}): {}", report["traces"]))
}

#[tokio::test]
async fn check_and_record_receive_the_spans_and_replay_keeps_them() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cap = common::capture(CAPTURE).clone();
    let secs = (cap.t_end - cap.t0) / SPEED + 2.0;
    let dir = std::env::temp_dir().join(format!("pdtop-otlp-e2e-{}", std::process::id()));
    let lab = lab::start(cap, LabOptions { speed: SPEED, looping: false, dir: dir.clone(), otlp_to: None })
        .await
        .unwrap();
    let (p_check, p_record) = (free_port(), free_port());
    let path = |p: &std::path::Path| p.display().to_string();
    let mut args: Vec<String> = vec![
        "--prefill".into(),
        lab.prefill.to_string(),
        "--decode".into(),
        lab.decode.to_string(),
        "--interval".into(),
        "0.1".into(),
        "--clock-speed".into(),
        SPEED.to_string(),
        "--clock-origin".into(),
        lab.clock.stamp_origin().to_string(),
        "--duration".into(),
        secs.to_string(),
        "--prefill-log".into(),
        path(&lab.prefill_log),
        "--decode-log".into(),
        path(&lab.decode_log),
    ];
    if let Some(p) = &lab.proxy_log {
        args.extend(["--proxy-log".into(), path(p)]);
    }
    let file = dir.join("rec.pdtop");
    let mut cargs: Vec<String> =
        vec!["check".into(), "--json".into(), "--otlp-listen".into(), p_check.to_string()];
    cargs.extend(args.iter().cloned());
    let mut rargs: Vec<String> =
        vec!["record".into(), "-o".into(), path(&file), "--otlp-grpc-listen".into(), p_record.to_string()];
    rargs.extend(args);
    let bin = env!("CARGO_BIN_EXE_pdtop");
    let check = tokio::task::spawn_blocking(move || Command::new(bin).args(&cargs).output().unwrap());
    let record = tokio::task::spawn_blocking(move || Command::new(bin).args(&rargs).output().unwrap());

    // vLLM's exporters: OTLP/HTTP to check, gRPC to record, at the lab's pace.
    let http = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{p_check}/v1/traces");
    use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
    let mut grpc = loop {
        match TraceServiceClient::connect(format!("http://127.0.0.1:{p_record}")).await {
            Ok(c) => break c,
            Err(e) if record.is_finished() => {
                let o = record.await.unwrap();
                panic!("{e}: record ended: {}", String::from_utf8_lossy(&o.stderr));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    for (t, body) in bodies() {
        while lab.clock.now().1 < t {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let r = loop {
            match http
                .post(&url)
                .header("content-type", "application/x-protobuf")
                .body(body.clone())
                .send()
                .await
            {
                Ok(r) => break r,
                // A check that ended has no receiver: fail, not wait forever.
                Err(e) if check.is_finished() => {
                    let o = check.await.unwrap();
                    panic!("{e}: check ended: {}", String::from_utf8_lossy(&o.stderr));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        };
        assert_eq!(r.status(), 200);
        use prost::Message;
        let req =
            opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest::decode(&body[..])
                .unwrap();
        grpc.export(req).await.unwrap();
    }
    let live = json_of(&check.await.unwrap());
    let rec = record.await.unwrap();
    assert!(rec.status.success(), "record: {}", String::from_utf8_lossy(&rec.stderr));

    assert_eq!(live["spans"]["count"], 84, "{}", live["spans"]);
    assert_eq!(live["spans"]["errors"], 0);
    let t = timings_of(&live, "lab-steady-3");
    // vLLM's own figures for this request (spans.jsonl), and the client's TTFT 984.5 ms.
    assert_eq!(t["decode_ttft_ms"], 340.6);
    assert_eq!(t["decode_ms"], 787.8);
    assert_eq!(t["prefill_service"], "vllm-prefill");
    let ttft = t["ttft_ms"].as_f64().unwrap();
    assert!(ttft > 900.0 && ttft <= 984.5, "{t}");
    // Logs and spans together name every silent miss by the id its client
    // got (issue #13): the decode spans' prompt lengths settle which
    // request of a shared scheduling step loaded the KV.
    let mut named: Vec<&str> =
        live["silent_miss_ids"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    named.sort();
    assert_eq!(named, common::demo_proxy_misses(), "{}", live["requests"]);
    let odd: Vec<String> = live["traces"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["outcome"] == "unknown")
        .map(|t| format!("{} {}: {}", t["id"], t["join"], t["evidence"]))
        .collect();
    assert_eq!(live["requests"]["unknown"], 0, "{}: {odd:#?}", live["requests"]);

    let out = Command::new(bin).args(["check", "--json", "--replay", &path(&file)]).output().unwrap();
    let replayed = json_of(&out);
    assert_eq!(replayed["spans"]["count"], 84, "{}", replayed["spans"]);
    let r = timings_of(&replayed, "lab-steady-3");
    assert_eq!(r["decode_ttft_ms"], 340.6);
    assert_eq!(r["decode_ms"], 787.8);
    let _ = std::fs::remove_dir_all(&dir);
}
