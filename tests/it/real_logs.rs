//! The log parsers against every line of the recorded vLLM 0.26 captures in
//! `shared/lab-captures/`. The expected numbers were counted with grep over
//! those fixed files (see each assertion's comment for the pattern), so a
//! parser change that loses or invents events fails here.

use std::collections::BTreeMap;
use std::path::PathBuf;

use pdtop::logs::proxy::{AccessLine, ProxyEvent, parse_proxy_line};
use pdtop::logs::vllm::{KvParams, Level, VllmEvent, VllmLine, parse_vllm_line};

fn capture(rel: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lab-captures").join(rel);
    std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("read {}: {e} (shared/ must sit beside the checkout)", p.display()))
}

fn parse_all(rel: &str) -> Vec<VllmLine> {
    let text = capture(rel);
    let parsed: Vec<VllmLine> = text.lines().filter_map(parse_vllm_line).collect();
    // The captures hold no blank lines, so every line yields something.
    assert_eq!(parsed.len(), text.lines().count(), "{rel}");
    parsed
}

fn kind(e: &VllmEvent) -> &'static str {
    match e {
        VllmEvent::Received { kv_params: Some(_), .. } => "received_kv",
        VllmEvent::Received { kv_params: None, .. } => "received_plain",
        VllmEvent::Added { .. } => "added",
        VllmEvent::Aborted { .. } => "aborted",
        VllmEvent::ExternalCacheHit => "hit",
        VllmEvent::InjectKv { .. } => "inject",
        VllmEvent::KvExpired { .. } => "kv_expired",
        VllmEvent::EngineStats(_) => "engine_stats",
        VllmEvent::KvTransferMetrics(_) => "kv_metrics",
        VllmEvent::EngineDead { .. } => "dead",
        VllmEvent::Traceback => "traceback",
        VllmEvent::Exception { .. } => "exception",
        VllmEvent::Access(_) => "access",
        VllmEvent::ServerStarted { .. } => "started",
        VllmEvent::Shutdown => "shutdown",
        VllmEvent::KvConnectorConfig { .. } => "kv_config",
        VllmEvent::RequestFailed { .. } => "failed",
        VllmEvent::StreamError => "stream_error",
        VllmEvent::RequestDetails { .. } => "details",
        VllmEvent::Other => "other",
    }
}

/// Per-event counts, plus `ts` (lines with a timestamp) and `proc` (lines
/// with a `(Name pid=N)` prefix). `other` is left out: it is whatever remains.
fn tally(lines: &[VllmLine]) -> BTreeMap<&'static str, usize> {
    let mut m = BTreeMap::new();
    for l in lines {
        let k = kind(&l.event);
        if k != "other" {
            *m.entry(k).or_insert(0) += 1;
        }
        if l.timestamp.is_some() {
            *m.entry("ts").or_insert(0) += 1;
        }
        if l.process.is_some() {
            *m.entry("proc").or_insert(0) += 1;
        }
    }
    m
}

/// Builds the expected map, dropping zero entries (absent keys mean zero).
fn expect(pairs: &[(&'static str, usize)]) -> BTreeMap<&'static str, usize> {
    pairs.iter().filter(|(_, n)| *n > 0).copied().collect()
}

// grep patterns behind the numbers, per file:
//   received_kv / received_plain: '\] Received request ' with "extra_args={'kv_transfer_params'" / 'extra_args=None'
//   added '\] Added request '; hit '\] External Cache Hit!'; inject '\] Inject KV cache of'
//   engine_stats '\] Engine 000: '; kv_metrics '\] KV Transfer metrics: '
//   access '^(APIServer pid=[0-9]*) INFO:     [0-9.:]* - "'; started 'Starting vLLM server on'
//   kv_config '\] KVTransferConfig(' + 'non-default args' (which embeds the same repr)
//   traceback 'Traceback (most recent call last)'; exception -E '\] [A-Za-z_.]*(Error|Exception):'
//   kv_expired 'Releasing expired KV'; shutdown '\] \[shutdown\]'
//   ts -E '^\([A-Za-z_0-9]+ pid=[0-9]+\) [A-Z]+ [0-9]{2}-[0-9]{2} [0-9:]{8} '; proc '^([A-Za-z_0-9]* pid=[0-9]*) '

#[test]
fn qwen3_decode_counts() {
    let t = tally(&parse_all("qwen3-shape-restart/vllm-decode.log"));
    let e = expect(&[
        ("received_plain", 64),
        ("added", 64),
        ("hit", 48),
        ("inject", 48),
        ("engine_stats", 8),
        ("access", 225),
        ("started", 1),
        ("kv_config", 3),
        ("shutdown", 15),
        ("ts", 410),
        ("proc", 643),
    ]);
    assert_eq!(t, e);
}

#[test]
fn qwen3_decode2_counts() {
    let t = tally(&parse_all("qwen3-shape-restart/vllm-decode2.log"));
    let e = expect(&[
        ("received_plain", 12),
        ("added", 12),
        ("hit", 12),
        ("inject", 12),
        ("engine_stats", 1),
        ("access", 43),
        ("started", 1),
        ("kv_config", 3),
        ("ts", 148),
        ("proc", 196),
    ]);
    assert_eq!(t, e);
}

#[test]
fn qwen3_prefill_counts() {
    let t = tally(&parse_all("qwen3-shape-restart/vllm-prefill.log"));
    let e = expect(&[
        ("received_kv", 64),
        ("received_plain", 4),
        ("added", 68),
        ("engine_stats", 10),
        ("access", 362),
        ("started", 1),
        ("kv_config", 3),
        ("ts", 305),
        ("proc", 672),
    ]);
    assert_eq!(t, e);
}

#[test]
fn nixl_decode_counts() {
    let t = tally(&parse_all("nixl-llama-shape/vllm-decode.log"));
    let e = expect(&[
        ("received_kv", 42),
        ("received_plain", 12),
        ("added", 54),
        ("engine_stats", 7),
        ("kv_metrics", 7),
        ("access", 207),
        ("started", 1),
        ("kv_config", 1),
        ("traceback", 2),
        ("exception", 2),
        ("shutdown", 15),
        ("ts", 306),
        ("proc", 523),
    ]);
    assert_eq!(t, e);
}

#[test]
fn nixl_decode2_counts() {
    let t = tally(&parse_all("nixl-llama-shape/vllm-decode2.log"));
    let e = expect(&[
        ("received_kv", 10),
        ("added", 10),
        ("engine_stats", 1),
        ("kv_metrics", 1),
        ("access", 39),
        ("started", 1),
        ("kv_config", 1),
        ("traceback", 2),
        ("exception", 2),
        ("ts", 191),
        ("proc", 237),
    ]);
    assert_eq!(t, e);
}

#[test]
fn nixl_prefill_counts() {
    let t = tally(&parse_all("nixl-llama-shape/vllm-prefill.log"));
    let e = expect(&[
        ("received_kv", 56),
        ("added", 56),
        ("kv_expired", 4),
        ("engine_stats", 10),
        ("kv_metrics", 1),
        ("access", 347),
        ("started", 1),
        ("kv_config", 1),
        ("traceback", 2),
        ("exception", 2),
        ("ts", 294),
        ("proc", 648),
    ]);
    assert_eq!(t, e);
}

#[test]
fn ids_received_and_added() {
    let lines = parse_all("qwen3-shape-restart/vllm-decode.log");
    assert!(lines.iter().any(|l| matches!(&l.event,
        VllmEvent::Received { id, max_tokens: Some(64), kv_params: None, .. } if id == "cmpl-lab-warmup_p-0-0")));
    assert!(lines.iter().any(|l| l.event
        == VllmEvent::Added {
            internal_id: "cmpl-lab-warmup_p-0-0-8db1b597".into(),
            external_id: "cmpl-lab-warmup_p-0-0".into(),
        }));
    // Every Added id's external part was Received first, in the same file.
    let mut received = std::collections::HashSet::new();
    for l in &lines {
        match &l.event {
            VllmEvent::Received { id, .. } => {
                received.insert(id.clone());
            }
            VllmEvent::Added { external_id, .. } => {
                assert!(received.contains(external_id), "{external_id}")
            }
            _ => {}
        }
    }
}

#[test]
fn header_of_a_real_line() {
    let lines = parse_all("qwen3-shape-restart/vllm-decode.log");
    let hit = lines.iter().find(|l| l.event == VllmEvent::ExternalCacheHit).expect("a hit");
    assert_eq!(hit.process.as_deref(), Some("EngineCore"));
    assert_eq!(hit.pid, Some(3214));
    assert_eq!(hit.level, Some(Level::Info));
    let acc = lines.iter().find(|l| matches!(l.event, VllmEvent::Access(_))).expect("an access line");
    assert_eq!((acc.process.as_deref(), acc.timestamp), (Some("APIServer"), None));
}

#[test]
fn inject_token_values() {
    let lines = parse_all("qwen3-shape-restart/vllm-decode.log");
    let tokens: Vec<u32> = lines
        .iter()
        .filter_map(|l| match l.event {
            VllmEvent::InjectKv { tokens } => Some(tokens),
            _ => None,
        })
        .collect();
    // grep -o 'Inject KV cache of [0-9]*': first three 240, 240, 496; sum 68064.
    assert_eq!(&tokens[..3], &[240, 240, 496]);
    assert_eq!(tokens.iter().map(|&t| u64::from(t)).sum::<u64>(), 68064);
    let lines = parse_all("qwen3-shape-restart/vllm-decode2.log");
    let sum: u64 = lines
        .iter()
        .filter_map(|l| match l.event {
            VllmEvent::InjectKv { tokens } => Some(u64::from(tokens)),
            _ => None,
        })
        .sum();
    assert_eq!(sum, 17920);
}

#[test]
fn engine_stats_line_values() {
    let lines = parse_all("qwen3-shape-restart/vllm-decode.log");
    // (APIServer pid=3126) INFO 11-30 06:26:48 [loggers.py:310] Engine 000: Avg prompt throughput: 10.8 tokens/s,
    // Avg generation throughput: 67.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%,
    // Prefix cache hit rate: 0.0%, External prefix cache hit rate: 70.6%
    let l = lines
        .iter()
        .find(|l| l.timestamp == Some((11, 30, 6, 26, 48)) && matches!(l.event, VllmEvent::EngineStats(_)))
        .expect("the 06:26:48 stats line");
    let VllmEvent::EngineStats(s) = &l.event else { unreachable!() };
    assert_eq!(s.engine, Some(0));
    assert_eq!((s.prompt_tps, s.gen_tps), (10.8, 67.0));
    assert_eq!((s.running, s.waiting), (1, 0));
    assert_eq!((s.kv_usage_pct, s.prefix_hit_pct, s.external_hit_pct), (1.0, Some(0.0), Some(70.6)));
    assert_eq!((s.deferred, s.preemptions), (None, None));

    // The one line with the optional "Deferred: 1 reqs" part (nixl decode2, 06:41:37).
    let lines = parse_all("nixl-llama-shape/vllm-decode2.log");
    let s = lines
        .iter()
        .find_map(|l| match &l.event {
            VllmEvent::EngineStats(s) => Some(s),
            _ => None,
        })
        .expect("stats");
    assert_eq!((s.running, s.waiting, s.deferred, s.external_hit_pct), (1, 1, Some(1), Some(100.0)));
}

#[test]
fn nixl_kv_transfer_metrics_values() {
    let lines = parse_all("nixl-llama-shape/vllm-decode.log");
    // KV Transfer metrics: Num successful transfers=2, Avg xfer time (ms)=82.675, P90 xfer time (ms)=83.424,
    // Avg post time (ms)=0.672, P90 post time (ms)=0.865, Avg MB per transfer=32.0, Throughput (MB/s)=387.058,
    // Avg number of descriptors=32.0
    let m = lines
        .iter()
        .find_map(|l| match &l.event {
            VllmEvent::KvTransferMetrics(m) => Some(m),
            _ => None,
        })
        .expect("metrics");
    assert_eq!(m.num_successful_transfers, Some(2));
    assert_eq!((m.avg_xfer_ms, m.p90_xfer_ms), (Some(82.675), Some(83.424)));
    assert_eq!((m.avg_mb_per_transfer, m.throughput_mb_s), (Some(32.0), Some(387.058)));
    // v0.26 prints the first 8 keys only: no failure / expiry counts.
    assert_eq!((m.num_failed_transfers, m.num_kv_expired), (None, None));
    assert_eq!(m.pairs.len(), 8);
    assert_eq!(m.pairs[7], ("Avg number of descriptors".to_string(), "32.0".to_string()));
}

#[test]
fn nixl_kv_params_link_decode_to_prefill() {
    let prefill = parse_all("nixl-llama-shape/vllm-prefill.log");
    let decode = parse_all("nixl-llama-shape/vllm-decode.log");
    let prefill_engine = prefill
        .iter()
        .find_map(|l| match &l.event {
            VllmEvent::KvConnectorConfig { fields: f, .. } => {
                assert_eq!(
                    (f.role.as_deref(), f.connector.as_deref()),
                    (Some("kv_producer"), Some("NixlConnector"))
                );
                f.engine_id.clone()
            }
            _ => None,
        })
        .expect("prefill engine id");
    assert_eq!(prefill_engine, "1f8d6044-4da8-4db0-b477-02f87e9b75f6");
    let prefill_added: std::collections::HashSet<&str> = prefill
        .iter()
        .filter_map(|l| match &l.event {
            VllmEvent::Added { internal_id, .. } => Some(internal_id.as_str()),
            _ => None,
        })
        .collect();

    let params: Vec<(&str, &KvParams)> = decode
        .iter()
        .filter_map(|l| match &l.event {
            VllmEvent::Received { id, kv_params: Some(p), .. } => Some((id.as_str(), p)),
            _ => None,
        })
        .collect();
    assert_eq!(params.len(), 42);
    let (id, first) = params[0];
    assert_eq!(id, "cmpl-lab-warmup_p-0-0");
    assert_eq!(
        *first,
        KvParams {
            do_remote_prefill: Some(true),
            do_remote_decode: Some(false),
            remote_request_id: Some("cmpl-lab-warmup_p-0-0-b6b7842d".into()),
            remote_engine_id: Some(prefill_engine.clone()),
            remote_num_tokens: Some(256),
            remote_block_count: Some(16),
            remote_host: Some("127.0.0.1".into()),
            remote_port: Some(5600),
            tp_size: Some(1),
        }
    );
    for (id, p) in &params {
        // Each decode request points at a prefill request that really ran...
        let rid = p.remote_request_id.as_deref().expect("remote id");
        assert!(prefill_added.contains(rid), "{id} -> {rid}");
        assert_eq!(p.remote_engine_id.as_deref(), Some(prefill_engine.as_str()));
        // ...and NIXL moves whole 16-token blocks: blocks = ceil(tokens / 16).
        let tokens = p.remote_num_tokens.expect("tokens") as usize;
        assert_eq!(p.remote_block_count, Some(tokens.div_ceil(16)), "{id}");
    }
    // The prefill side: toy-proxy style params, every request max_tokens=1.
    for l in &prefill {
        if let VllmEvent::Received { max_tokens, kv_params, .. } = &l.event {
            assert_eq!(*max_tokens, Some(1));
            let p = kv_params.as_ref().expect("params");
            assert_eq!(
                (p.do_remote_decode, p.do_remote_prefill, p.remote_block_count),
                (Some(true), Some(false), None)
            );
        }
    }
}

#[test]
fn nixl_expired_blocks_are_the_noparams_requests() {
    let prefill = parse_all("nixl-llama-shape/vllm-prefill.log");
    let expired: Vec<_> = prefill
        .iter()
        .filter_map(|l| match &l.event {
            VllmEvent::KvExpired { id, retrieved_by } => Some((id.as_str(), *retrieved_by)),
            _ => None,
        })
        .collect();
    assert_eq!(expired.len(), 4);
    assert_eq!(expired[0], ("cmpl-lab-noparams-0-0-bb80f6f5", Some(0)));
    assert!(expired.iter().all(|(id, n)| id.starts_with("cmpl-lab-noparams-") && *n == Some(0)));
}

#[test]
fn roles_ports_and_no_false_deaths() {
    for (file, role, port) in [
        ("qwen3-shape-restart/vllm-prefill.log", "kv_producer", 8100),
        ("qwen3-shape-restart/vllm-decode.log", "kv_consumer", 8200),
        ("qwen3-shape-restart/vllm-decode2.log", "kv_consumer", 8200),
        ("nixl-llama-shape/vllm-prefill.log", "kv_producer", 8100),
        ("nixl-llama-shape/vllm-decode.log", "kv_consumer", 8200),
        ("nixl-llama-shape/vllm-decode2.log", "kv_consumer", 8200),
    ] {
        let lines = parse_all(file);
        for l in &lines {
            match &l.event {
                VllmEvent::KvConnectorConfig { fields, .. } => {
                    assert_eq!(fields.role.as_deref(), Some(role), "{file}")
                }
                VllmEvent::ServerStarted { port: p } => assert_eq!(*p, Some(port), "{file}"),
                // The NIXL import-probe tracebacks are WARNINGs, and nothing here died.
                VllmEvent::Traceback | VllmEvent::Exception { .. } => {
                    assert_eq!(l.level, Some(Level::Warning))
                }
                VllmEvent::EngineDead { .. } => panic!("{file}: false EngineDead {l:?}"),
                _ => {}
            }
            // v0.26 with TP=1: only these two processes log.
            if let Some(p) = &l.process {
                assert!(p == "APIServer" || p == "EngineCore", "{file}: {p}");
            }
        }
    }
}

#[test]
fn proxy_logs_every_line() {
    // grep -c ' - "POST /v1/completions HTTP/1.1" 200 OK': 52 and 40; 4 uvicorn startup lines each.
    for (file, posts) in [("qwen3-shape-restart/proxy.log", 52), ("nixl-llama-shape/proxy.log", 40)] {
        let text = capture(file);
        let (mut access, mut startup, mut ports) = (0, 0, Vec::new());
        for line in text.lines() {
            match parse_proxy_line(line) {
                Some(ProxyEvent::Access(AccessLine { method, path, status, client })) => {
                    assert_eq!((method.as_str(), path.as_str(), status), ("POST", "/v1/completions", 200));
                    assert!(client.starts_with("127.0.0.1:"), "{client}");
                    access += 1;
                }
                Some(ProxyEvent::Startup { port }) => {
                    startup += 1;
                    ports.extend(port);
                }
                other => panic!("{file}: unexpected {other:?} for {line}"),
            }
        }
        assert_eq!((access, startup, ports), (posts, 4, vec![8000]), "{file}");
    }
}
