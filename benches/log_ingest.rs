//! Parses every line of the recorded vLLM prefill + decode logs (both
//! captures) and the proxy logs, and feeds proxy and router logs to the
//! correlator. Throughput is reported in lines/s
//! (criterion's `Elements`), so `cargo bench --bench log_ingest` prints
//! "thrpt: ... Kelem/s" = lines per second.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pdtop::logs::proxy::parse_proxy_line;
use pdtop::logs::reader::Reader;
use pdtop::logs::vllm::parse_vllm_line;

fn read(rel: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lab-captures").join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

fn bench(c: &mut Criterion) {
    let vllm: String = [
        "qwen3-shape-restart/vllm-prefill.log",
        "qwen3-shape-restart/vllm-decode.log",
        "qwen3-shape-restart/vllm-decode2.log",
        "nixl-llama-shape/vllm-prefill.log",
        "nixl-llama-shape/vllm-decode.log",
        "nixl-llama-shape/vllm-decode2.log",
    ]
    .iter()
    .map(|f| read(f))
    .collect();
    let proxy: String =
        ["qwen3-shape-restart/proxy.log", "nixl-llama-shape/proxy.log"].iter().map(|f| read(f)).collect();

    let mut g = c.benchmark_group("log_ingest");
    g.measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));

    g.throughput(Throughput::Elements(vllm.lines().count() as u64));
    g.bench_function("vllm_lines", |b| {
        b.iter(|| {
            for line in vllm.lines() {
                black_box(parse_vllm_line(black_box(line)));
            }
        })
    });

    // The same lines through the `Reader` (signals, unknown counting).
    g.bench_function("vllm_lines_reader", |b| {
        b.iter(|| {
            let mut r = Reader::new();
            for line in vllm.lines() {
                black_box(r.classify(black_box(line)));
            }
        })
    });

    // The same lines through the correlator, as the live tail and
    // `--from-logs` feed it: wrapped-line joins, known noise, traces.
    g.bench_function("vllm_lines_correlator", |b| {
        b.iter(|| {
            let mut c = pdtop::traces::Correlator::new(pdtop::traces::CorrelatorOptions::default());
            for (i, line) in vllm.lines().enumerate() {
                let src = pdtop::feed::LogOrigin::Decode(0);
                c.on_line(src, black_box(line), 1.8e9 + i as f64 * 0.01);
            }
            black_box(c.counts())
        })
    });

    // The real-log corpus (57 excerpts of other deployments' output).
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/log-excerpts");
    let mut corpus = String::new();
    for e in std::fs::read_dir(&dir).expect("corpus").flatten() {
        if e.path().extension().is_some_and(|x| x == "log") {
            corpus.push_str(&std::fs::read_to_string(e.path()).expect("excerpt"));
        }
    }
    g.throughput(Throughput::Elements(corpus.lines().count() as u64));
    g.bench_function("corpus_lines_reader", |b| {
        b.iter(|| {
            let mut r = Reader::new();
            for line in corpus.lines() {
                black_box(r.classify(black_box(line)));
            }
        })
    });

    g.throughput(Throughput::Elements(proxy.lines().count() as u64));
    g.bench_function("proxy_lines", |b| {
        b.iter(|| {
            for line in proxy.lines() {
                black_box(parse_proxy_line(black_box(line)));
            }
        })
    });

    // Proxy-log lines through the correlator, where a router's or the
    // sidecar's line is tried before the proxy parser: the recorded proxy
    // logs (no router line), then the router log (every line joined).
    g.bench_function("proxy_lines_correlator", |b| {
        b.iter(|| {
            let mut c = pdtop::traces::Correlator::new(Default::default());
            for line in proxy.lines() {
                c.on_line(pdtop::feed::LogOrigin::Proxy, black_box(line), 1.0e9);
            }
        })
    });
    let router = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/router/vllm-router-pd-lab.log"),
    )
    .expect("router log")
    .repeat(200);
    g.throughput(Throughput::Elements(router.lines().count() as u64));
    g.bench_function("router_lines_correlator", |b| {
        b.iter(|| {
            let mut c = pdtop::traces::Correlator::new(Default::default());
            for line in router.lines() {
                c.on_line(pdtop::feed::LogOrigin::Proxy, black_box(line), 1.0e9);
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
