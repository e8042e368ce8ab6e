//! The metrics parser against prometheus-parse and prom_text_format_parser
//! on a real vLLM 0.26 scrape
//! (`tests/fixtures/qwen3-decode-metrics-end.txt`, 48 KB). Both are given
//! the same text; prometheus-parse needs owned lines, and that copy is part
//! of what using it costs. The samples each keeps are printed first:
//! prometheus-parse keeps none of the `vllm:` ones.
//!
//! `cargo bench --bench parse`

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pdtop::metrics::model::InstanceSample;
use pdtop::metrics::parse::parse;

const SCRAPE: &str = include_str!("../tests/fixtures/qwen3-decode-metrics-end.txt");

fn prometheus_parse(text: &str) -> prometheus_parse::Scrape {
    let lines = text.lines().map(|l| Ok(l.to_owned()));
    prometheus_parse::Scrape::parse(lines).expect("prometheus-parse")
}

/// prom_text_format_parser: all or nothing (an error keeps no sample).
fn prom_text(text: &str) -> Vec<prom_text_format_parser::Metric> {
    prom_text_format_parser::Scrape::parse(text).map(|s| s.metrics).unwrap_or_default()
}

fn bench(c: &mut Criterion) {
    let ours = parse(SCRAPE);
    let theirs = prometheus_parse(SCRAPE);
    let third = prom_text(SCRAPE);
    let third_samples: usize = third.iter().map(|m| m.samples.len()).sum();
    let third_vllm: usize =
        third.iter().filter(|m| m.name.starts_with("vllm:")).map(|m| m.samples.len()).sum();
    println!("samples kept: prom_text_format_parser {third_samples} ({third_vllm} vllm:)");
    let vllm = |names: &mut dyn Iterator<Item = &str>| names.filter(|n| n.starts_with("vllm:")).count();
    println!(
        "samples kept: pdtop {} ({} vllm:), prometheus-parse {} ({} vllm:)",
        ours.samples.len(),
        vllm(&mut ours.samples.iter().map(|s| s.name)),
        theirs.samples.len(),
        vllm(&mut theirs.samples.iter().map(|s| s.metric.as_str())),
    );
    let mut g = c.benchmark_group("parse_48k_vllm_scrape");
    g.throughput(Throughput::Bytes(SCRAPE.len() as u64));
    g.measurement_time(Duration::from_secs(3));
    g.bench_function("pdtop", |b| b.iter(|| black_box(parse(black_box(SCRAPE)))));
    g.bench_function("pdtop_parse_and_model", |b| {
        b.iter(|| black_box(InstanceSample::from_text(black_box(SCRAPE))))
    });
    g.bench_function("prometheus_parse", |b| b.iter(|| black_box(prometheus_parse(black_box(SCRAPE)))));
    g.bench_function("prom_text_format_parser", |b| b.iter(|| black_box(prom_text(black_box(SCRAPE)))));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
