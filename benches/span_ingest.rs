//! Span ingestion: the recorded OTLP export bodies of `demo-proxy-qwen3`
//! (what vLLM 0.26 really sent) decoded and reduced to request spans, the
//! span store fed, and the whole path over loopback OTLP/HTTP into the
//! app's channel. Throughput is in spans/s (criterion's `Elements`).
//! Memory per 1000 traced requests (a prefill and a decode span each) is
//! measured with a counting allocator and printed.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pdtop::clock::SystemClock;
use pdtop::feed::{Msg, RequestSpan, SpanCounts};
use pdtop::sources::otlp::{self, ExportTraceServiceRequest, OtlpOptions, request_spans};
use pdtop::state::spans::SpanStore;
use prost::Message;

struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn bodies() -> Vec<Vec<u8>> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/lab-captures/demo-proxy-qwen3/otlp.bin");
    let raw = std::fs::read(&p).unwrap();
    let (mut out, mut rest) = (Vec::new(), &raw[..]);
    while !rest.is_empty() {
        let n = u32::from_le_bytes(rest[8..12].try_into().unwrap()) as usize;
        out.push(rest[12..12 + n].to_vec());
        rest = &rest[12 + n..];
    }
    out
}

/// The real spans, made into `n` distinct requests (ids and trace ids
/// rewritten) in prefill/decode pairs.
fn many(real: &[RequestSpan], n: usize) -> Vec<RequestSpan> {
    (0..n)
        .map(|i| {
            let mut s = real[i % real.len()].clone();
            s.request_id = format!("cmpl-{:016x}-0", i);
            s.trace_id = format!("{:032x}", i / 2);
            s
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let bodies = bodies();
    let real: Vec<RequestSpan> = bodies
        .iter()
        .flat_map(|b| request_spans(&ExportTraceServiceRequest::decode(&b[..]).unwrap()).0)
        .collect();
    let mut g = c.benchmark_group("span_ingest");
    g.measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));

    g.throughput(Throughput::Elements(real.len() as u64));
    g.bench_function("decode_and_reduce", |b| {
        b.iter(|| {
            for body in &bodies {
                black_box(request_spans(&ExportTraceServiceRequest::decode(&body[..]).unwrap()));
            }
        })
    });

    let batch = many(&real, 20_000);
    g.throughput(Throughput::Elements(batch.len() as u64));
    g.bench_function("store_20k", |b| {
        b.iter(|| {
            let mut st = SpanStore::new(pdtop::state::spans::SPANS_CAP);
            st.on_spans(batch.clone(), SpanCounts::default());
            black_box(st.len())
        })
    });

    // Over loopback: every recorded body posted in turn, the spans read
    // off the app's channel.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
    let opts = OtlpOptions { http: Some("127.0.0.1:0".parse().unwrap()), grpc: None };
    let addr = rt.block_on(async { otlp::spawn(&opts, Arc::new(SystemClock), tx).unwrap()[0] });
    let url = format!("http://{addr}/v1/traces");
    let client = reqwest::Client::new();
    g.throughput(Throughput::Elements(real.len() as u64));
    g.bench_function("loopback_http", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    for body in &bodies {
                        let r = client.post(&url).body(body.clone()).send().await.unwrap();
                        assert_eq!(r.status(), 200);
                    }
                    while let Ok(m) = rx.try_recv() {
                        black_box(matches!(m, Msg::Spans { .. }));
                    }
                }
                start.elapsed()
            })
        })
    });
    g.finish();

    let pairs = many(&real, 2000);
    let before = LIVE.load(Ordering::Relaxed);
    let mut st = SpanStore::new(pdtop::state::spans::SPANS_CAP);
    st.on_spans(pairs, SpanCounts::default());
    let bytes = LIVE.load(Ordering::Relaxed) - before;
    eprintln!(
        "span store: {} spans of 1000 requests (prefill + decode) hold {} bytes: {:.0} KiB per 1000 traces",
        st.len(),
        bytes,
        bytes as f64 / 1024.0
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
