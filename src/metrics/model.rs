//! What pdtop reads from one vLLM scrape, tolerant of version drift
//! (see `docs/vllm-reference.md` §1.6 of the lab notes): missing families
//! are `None`, old names are used when the new ones are absent, and series
//! of several engines (data parallel) are summed.

use std::collections::{BTreeMap, HashSet};

use super::histogram::Histogram;
use super::parse::{Exposition, Sample, parse_names};

pub use super::counter::Counter;

/// Histograms pdtop shows or reasons with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Hist {
    Ttft,
    /// Per-request time per output token (one of three names by version).
    Tpot,
    E2e,
    /// New KV tokens computed during prefill, per request (>= 0.13).
    KvComputedTokens,
    PromptTokens,
    NixlXferTime,
    NixlBytes,
    /// MooncakeConnector, recorded by the sender (the prefill side).
    MooncakeXferTime,
    MooncakeBytes,
    MooncakeDescriptors,
}

/// The counters' and histograms' family names, newest first where a name
/// moved between versions.
/// A counter, its family, and the label that selects its series.
type CounterSource = (Counter, &'static str, Option<(&'static str, &'static str)>);

const COUNTER_SOURCES: &[CounterSource] = &[
    (Counter::PromptLocalCompute, "vllm:prompt_tokens_by_source_total", Some(("source", "local_compute"))),
    (Counter::PromptLocalCacheHit, "vllm:prompt_tokens_by_source_total", Some(("source", "local_cache_hit"))),
    (Counter::PromptExternal, "vllm:prompt_tokens_by_source_total", Some(("source", "external_kv_transfer"))),
    (Counter::PromptTokens, "vllm:prompt_tokens_total", None),
    (Counter::GenerationTokens, "vllm:generation_tokens_total", None),
    (Counter::PrefixQueries, "vllm:prefix_cache_queries_total", None),
    (Counter::PrefixQueries, "vllm:gpu_prefix_cache_queries_total", None),
    (Counter::PrefixHits, "vllm:prefix_cache_hits_total", None),
    (Counter::PrefixHits, "vllm:gpu_prefix_cache_hits_total", None),
    (Counter::ExternalQueries, "vllm:external_prefix_cache_queries_total", None),
    (Counter::ExternalHits, "vllm:external_prefix_cache_hits_total", None),
    (Counter::Preemptions, "vllm:num_preemptions_total", None),
    (Counter::NixlFailedTransfers, "vllm:nixl_num_failed_transfers_total", None),
    (Counter::NixlFailedNotifications, "vllm:nixl_num_failed_notifications_total", None),
    (Counter::NixlExpired, "vllm:nixl_num_kv_expired_reqs_total", None),
];

const HIST_SOURCES: &[(Hist, &str)] = &[
    (Hist::Ttft, "vllm:time_to_first_token_seconds"),
    (Hist::Tpot, "vllm:request_time_per_output_token_seconds"),
    (Hist::Tpot, "vllm:time_per_output_token_seconds"),
    (Hist::Tpot, "vllm:inter_token_latency_seconds"),
    (Hist::E2e, "vllm:e2e_request_latency_seconds"),
    (Hist::KvComputedTokens, "vllm:request_prefill_kv_computed_tokens"),
    (Hist::PromptTokens, "vllm:request_prompt_tokens"),
    (Hist::NixlXferTime, "vllm:nixl_xfer_time_seconds"),
    (Hist::NixlBytes, "vllm:nixl_bytes_transferred"),
    (Hist::MooncakeXferTime, "vllm:mooncake_xfer_time_seconds"),
    (Hist::MooncakeBytes, "vllm:mooncake_bytes_transferred"),
    (Hist::MooncakeDescriptors, "vllm:mooncake_num_descriptors"),
];

/// Series read by their name alone (gauges, info and the request counter).
const GAUGES: &[&str] = &[
    PROCESS_START,
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "vllm:cache_config_info",
    "vllm:request_success_total",
];

const PROCESS_START: &str = "process_start_time_seconds";

/// The histograms' series: `<family>_bucket`, `_sum` and `_count`.
pub const HIST_SUFFIXES: [&str; 3] = ["_bucket", "_sum", "_count"];

/// Every series name [`InstanceSample`] reads, histogram families without
/// their suffixes: what a Prometheus server is asked for
/// (`sources/prometheus`), and all the model keeps of a scrape.
pub struct ReadNames {
    /// Gauges and counters, sorted.
    pub plain: Vec<&'static str>,
    /// Histogram families, sorted.
    pub hists: Vec<&'static str>,
}

/// The names, gathered once from the tables that read them.
pub fn read_names() -> &'static ReadNames {
    static NAMES: std::sync::OnceLock<ReadNames> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        let mut plain: Vec<&'static str> = GAUGES.to_vec();
        plain.extend(COUNTER_SOURCES.iter().map(|(_, name, _)| *name));
        plain.extend(super::connectors::families());
        plain.sort_unstable();
        plain.dedup();
        let mut hists: Vec<&'static str> = HIST_SOURCES.iter().map(|(_, f)| *f).collect();
        hists.sort_unstable();
        hists.dedup();
        ReadNames { plain, hists }
    })
}

/// Whether pdtop reads this series name.
pub fn is_read(name: &str) -> bool {
    let names = read_names();
    if names.plain.binary_search(&name).is_ok() {
        return true;
    }
    HIST_SUFFIXES
        .iter()
        .any(|suffix| name.strip_suffix(suffix).is_some_and(|f| names.hists.binary_search(&f).is_ok()))
}

/// The last scrape read and what it gave. A scrape that differs from it
/// only in series pdtop does not read (the server process's CPU seconds,
/// memory and GC counts move every second; an idle engine's `vllm:`
/// series do not) gives the same sample, so it is not parsed again.
#[derive(Clone, Default)]
pub struct LastScrape {
    body: String,
    sample: InstanceSample,
}

impl std::fmt::Debug for LastScrape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LastScrape({} bytes)", self.body.len())
    }
}

impl LastScrape {
    /// The sample of `body`, as [`InstanceSample::from_text`] gives it.
    pub fn read(&mut self, body: String) -> InstanceSample {
        if self.body.is_empty() || !reads_the_same(&self.body, &body) {
            self.sample = InstanceSample::from_text(&body);
        }
        self.body = body;
        self.sample.clone()
    }
}

/// Line for line, what [`parse_names`] reads of `a` is in `b`: every line
/// that differs is a sample of an unread name, the same name on both sides.
/// Runs of equal bytes are compared a block at a time; only the few lines
/// that differ are looked at.
fn reads_the_same(a: &str, b: &str) -> bool {
    fn name(l: &str) -> Option<&str> {
        let l = l.strip_suffix('\r').unwrap_or(l).trim_start();
        (!l.is_empty() && !l.starts_with('#')).then(|| crate::metrics::parse::sample_name(l)).flatten()
    }
    let (x, y) = (a.as_bytes(), b.as_bytes());
    // Where the current line starts in each (the same lines so far).
    let (mut i, mut j) = (0, 0);
    loop {
        let n = common_prefix(&x[i..], &y[j..]);
        if i + n == x.len() && j + n == y.len() {
            return true;
        }
        // The line that differs starts after the last newline both share.
        let start = x[i..i + n].iter().rposition(|&c| c == b'\n').map_or(0, |k| k + 1);
        let (li, lj) = (i + start, j + start);
        let ei = x[li..].iter().position(|&c| c == b'\n').map_or(x.len(), |k| li + k);
        let ej = y[lj..].iter().position(|&c| c == b'\n').map_or(y.len(), |k| lj + k);
        match (name(&a[li..ei]), name(&b[lj..ej])) {
            (Some(p), Some(q)) if p == q && !is_read(p) => {}
            _ => return false,
        }
        if ei == x.len() || ej == y.len() {
            return ei == x.len() && ej == y.len();
        }
        (i, j) = (ei + 1, ej + 1);
    }
}

/// How many leading bytes `a` and `b` share.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut k = 0;
    while k + 64 <= n && a[k..k + 64] == b[k..k + 64] {
        k += 64;
    }
    k + a[k..n].iter().zip(&b[k..n]).take_while(|(p, q)| p == q).count()
}

/// A scrape's samples by series name, of the names pdtop reads.
#[derive(Default)]
struct ByName<'s, 'a>(BTreeMap<&'a str, Vec<&'s Sample<'a>>>);

impl<'s, 'a> ByName<'s, 'a> {
    /// A name's samples, none when absent. Only read names are kept, so a
    /// name missing from [`read_names`] would read as absent: caught here
    /// in every debug build and test, not on a fleet in production.
    fn get(&self, name: &str) -> &[&'s Sample<'a>] {
        debug_assert!(is_read(name), "{name} is read but missing from read_names");
        self.0.get(name).map(Vec::as_slice).unwrap_or(&[])
    }
}

/// One instance's scrape, reduced to what pdtop uses.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InstanceSample {
    pub model_name: Option<String>,
    pub process_start: Option<f64>,
    pub running: Option<f64>,
    pub waiting: Option<f64>,
    /// 0..1 fraction, clamped; `None` when absent or NaN.
    pub kv_usage: Option<f64>,
    pub block_size: Option<u32>,
    /// `cache_config_info{cache_dtype}`: `auto` (the model's) or e.g. `fp8`.
    pub cache_dtype: Option<String>,
    pub num_gpu_blocks: Option<u64>,
    pub counters: BTreeMap<Counter, f64>,
    pub hists: BTreeMap<Hist, Histogram>,
    /// Which name the TPOT histogram came from (it moved across versions).
    pub tpot_source: Option<&'static str>,
    /// How many `vllm:` samples the scrape held.
    pub vllm_samples: usize,
    pub bad_lines: usize,
    /// NaN or infinite values seen where a number was expected.
    pub non_finite: usize,
}

impl InstanceSample {
    /// Parses a scrape body and extracts the sample.
    pub fn from_text(text: &str) -> InstanceSample {
        let mut vllm = 0;
        // A histogram's lines come together under one name: asked once.
        let mut last = ("", false);
        let e = parse_names(text, |name| {
            vllm += usize::from(name.starts_with("vllm:"));
            if name != last.0 {
                last = (name, is_read(name));
            }
            last.1
        });
        InstanceSample { vllm_samples: vllm, ..InstanceSample::read(&e, |_| true) }
    }

    pub fn from_exposition(e: &Exposition<'_>) -> InstanceSample {
        InstanceSample::read(e, is_read)
    }

    /// Reads every series, not only the names [`read_names`] lists: what
    /// the tests hold [`from_exposition`](Self::from_exposition) against.
    #[doc(hidden)]
    pub fn from_exposition_unfiltered(e: &Exposition<'_>) -> InstanceSample {
        InstanceSample::read(e, |_| true)
    }

    fn read(e: &Exposition<'_>, keep: fn(&str) -> bool) -> InstanceSample {
        let mut out = InstanceSample { bad_lines: e.bad_line_count, ..Default::default() };
        let mut by_name = ByName::default();
        // A series given twice (a broken exporter, two registries merged)
        // would be summed as if it were two engines, doubling the numbers:
        // the first one wins and the repeat counts as a bad line. A set, not
        // a scan of the family, so a hostile body cannot make this quadratic.
        // Series pdtop does not read are counted and skipped, unhashed.
        let mut seen: HashSet<(&str, &str)> = HashSet::with_capacity(128);
        for s in &e.samples {
            if s.name.starts_with("vllm:") {
                out.vllm_samples += 1;
            }
            if !keep(s.name) {
                continue;
            }
            if !seen.insert((s.name, s.labels_text())) {
                out.bad_lines += 1;
                continue;
            }
            by_name.0.entry(s.name).or_default().push(s);
        }
        let get = |name: &str| by_name.get(name);

        out.process_start = get(PROCESS_START).first().map(|s| s.value).filter(|v| v.is_finite());
        out.model_name = e
            .samples
            .iter()
            .find(|s| s.name.starts_with("vllm:"))
            .and_then(|s| s.label("model_name"))
            .map(|v| v.into_owned());
        out.running = out.sum_gauge(get("vllm:num_requests_running"));
        out.waiting = out.sum_gauge(get("vllm:num_requests_waiting"));
        let usage = if !get("vllm:kv_cache_usage_perc").is_empty() {
            get("vllm:kv_cache_usage_perc")
        } else {
            get("vllm:gpu_cache_usage_perc")
        };
        out.kv_usage = out.mean_gauge(usage).map(|v| v.clamp(0.0, 1.0));
        if let Some(info) = get("vllm:cache_config_info").first() {
            out.block_size = info.label("block_size").and_then(|v| v.parse().ok());
            out.cache_dtype = info.label("cache_dtype").map(|v| v.into_owned());
            out.num_gpu_blocks = info.label("num_gpu_blocks").and_then(|v| v.parse().ok());
        }

        for (counter, name, label) in COUNTER_SOURCES {
            if out.counters.contains_key(counter) {
                continue;
            }
            let series = get(name);
            if series.is_empty() {
                continue;
            }
            let total = series
                .iter()
                .filter(|s| label.is_none_or(|(k, v)| s.label(k).as_deref() == Some(v)))
                .map(|s| s.value)
                .filter(|v| v.is_finite())
                .sum::<f64>();
            out.counters.insert(*counter, total);
        }
        super::connectors::extract(|name| by_name.get(name), &mut out.counters);
        let success = get("vllm:request_success_total");
        if !success.is_empty() {
            let mut ok = 0.0;
            let mut aborted = 0.0;
            let mut errored = 0.0;
            for s in success.iter().filter(|s| s.value.is_finite()) {
                match s.label("finished_reason").as_deref() {
                    Some("abort") => aborted += s.value,
                    Some("error") => errored += s.value,
                    _ => ok += s.value,
                }
            }
            out.counters.insert(Counter::RequestsOk, ok);
            out.counters.insert(Counter::RequestsAborted, aborted);
            out.counters.insert(Counter::RequestsErrored, errored);
        }

        for (hist, family) in HIST_SOURCES {
            if out.hists.contains_key(hist) {
                continue;
            }
            if let Some(h) = out.histogram(&by_name, family) {
                if *hist == Hist::Tpot {
                    out.tpot_source = Some(family);
                }
                out.hists.insert(*hist, h);
            }
        }
        out
    }

    fn sum_gauge(&mut self, series: &[&Sample<'_>]) -> Option<f64> {
        let mut total = None;
        for s in series {
            if s.value.is_finite() {
                *total.get_or_insert(0.0) += s.value;
            } else {
                self.non_finite += 1;
            }
        }
        total
    }

    fn mean_gauge(&mut self, series: &[&Sample<'_>]) -> Option<f64> {
        let n = series.iter().filter(|s| s.value.is_finite()).count();
        self.sum_gauge(series).map(|t| t / n.max(1) as f64)
    }

    /// Builds one histogram from `<family>_bucket/_sum/_count`, summing the
    /// buckets of every engine (the same `le` set across engines).
    fn histogram(&mut self, by_name: &ByName<'_, '_>, family: &str) -> Option<Histogram> {
        let buckets = by_name.get(&format!("{family}_bucket"));
        if buckets.is_empty() {
            return None;
        }
        let mut per_le: Vec<(f64, f64)> = Vec::with_capacity(32);
        for s in buckets {
            let Some(le) = s.label("le").as_deref().and_then(parse_le) else {
                continue;
            };
            let value = if s.value.is_finite() {
                s.value
            } else {
                self.non_finite += 1;
                0.0
            };
            per_le.push((le, value));
        }
        if per_le.is_empty() {
            return None;
        }
        super::histogram::merge_bounds(&mut per_le);
        if per_le.last().is_none_or(|(b, _)| b.is_finite()) {
            // No +Inf bucket: the text is cut or odd. Use the _count instead.
            per_le.push((f64::INFINITY, f64::NAN));
        }
        let sum_of = |suffix: &str| -> f64 {
            by_name.get(&format!("{family}{suffix}")).iter().map(|s| s.value).filter(|x| x.is_finite()).sum()
        };
        let count = sum_of("_count");
        let sum = sum_of("_sum");
        let mut hist = Histogram {
            bounds: per_le.iter().map(|(b, _)| *b).collect(),
            counts: per_le.iter().map(|(_, c)| *c).collect(),
            sum,
            count,
        };
        if let Some(last) = hist.counts.last_mut()
            && last.is_nan()
        {
            *last = count;
        }
        // Cumulative counts never go down; clamp a malformed text so that
        // quantiles stay sane.
        let mut running: f64 = 0.0;
        for c in &mut hist.counts {
            running = running.max(*c);
            *c = running;
        }
        Some(hist)
    }
}

fn parse_le(s: &str) -> Option<f64> {
    match s {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        _ => s.parse().ok().filter(|v: &f64| v.is_finite()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(name: &str) -> String {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/lab-captures/qwen3-shape-restart/");
        std::fs::read_to_string(format!("{dir}{name}")).unwrap()
    }

    /// `body` with line `i`'s last word (a sample's value) replaced.
    fn with_value(body: &str, i: usize, value: &str) -> String {
        let mut lines: Vec<String> = body.split('\n').map(str::to_owned).collect();
        if let Some((head, _)) = lines[i].rsplit_once(' ') {
            lines[i] = format!("{head} {value}");
        }
        lines.join("\n")
    }

    #[test]
    fn a_scrape_read_after_another_gives_what_a_fresh_parse_gives_whatever_line_moved() {
        // Every line of a real vLLM scrape in turn, a served value changed:
        // the memo's answer is always the full parse's.
        let body = capture("decode-metrics-end.txt");
        let mut skipped = 0;
        for i in 0..body.split('\n').count() {
            let moved = with_value(&body, i, "12345.5");
            let mut last = LastScrape::default();
            assert_eq!(last.read(body.clone()), InstanceSample::from_text(&body));
            assert_eq!(last.read(moved.clone()), InstanceSample::from_text(&moved), "line {i}");
            skipped += usize::from(reads_the_same(&body, &moved));
        }
        // The process's own series (CPU seconds, memory, GC) are most of what is skipped.
        assert!(skipped > 20, "{skipped}");
    }

    #[test]
    fn only_unread_series_may_differ() {
        let body = capture("decode-metrics-idle.txt");
        let line_of = |prefix: &str| body.split('\n').position(|l| l.starts_with(prefix)).unwrap();
        let cpu = line_of("process_cpu_seconds_total");
        assert!(reads_the_same(&body, &with_value(&body, cpu, "99.9")));
        let running = line_of("vllm:num_requests_running");
        assert!(!reads_the_same(&body, &with_value(&body, running, "3.0")));
        // A line more or less, or a comment changed: parsed again.
        assert!(!reads_the_same(&body, &format!("{body}\nprocess_open_fds 3.0")));
        assert!(!reads_the_same(&body, &body.replacen("# TYPE", "# TYPO", 1)));
        // A line that is no sample where there was one: parsed again.
        assert!(!reads_the_same(&body, &body.replacen("process_cpu_seconds_total ", "{ ", 1)));
    }
}
