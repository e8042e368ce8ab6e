//! A vllm-router on loopback, watched by the real binary (`pdtop check
//! --json --router`): the router fixture's counters rise scrape after
//! scrape, then drop back (the router restarted). The report's `router`
//! object must count what rose, count the restart's new values from zero
//! (never a negative rate), say it restarted, and turn every rise of an
//! error counter into an event. An unreachable router is down, with why.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use pdtop::metrics::router::{RouterCounter, RouterSample};

/// The nth body (1-based) is served with its values times k: 1, 2, ...
/// up to this, then 1, 2, ... again (a restart).
const RESTART_AFTER: u64 = 5;

fn fixture() -> String {
    let p = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/router/vllm-router-pd-metrics.txt");
    std::fs::read_to_string(p).unwrap()
}

/// The fixture with every PD series' value times `k` (a cumulative
/// histogram scaled stays one, with the same quantiles).
fn scaled(body: &str, k: u64) -> String {
    body.lines()
        .map(|l| match l.rsplit_once(' ') {
            Some((series, v)) if l.starts_with("vllm_router_pd_") => {
                let v: f64 = v.parse().unwrap();
                format!("{series} {}\n", v * k as f64)
            }
            _ => format!("{l}\n"),
        })
        .collect()
}

fn read_request(s: &mut TcpStream) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut buf = [0u8; 4096];
    let mut seen = Vec::new();
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 || {
            seen.extend_from_slice(&buf[..n]);
            seen.windows(4).any(|w| w == b"\r\n\r\n")
        } {
            return;
        }
    }
}

fn serve_rising_router() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let served = Arc::new(AtomicU64::new(0));
    let body = fixture();
    thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            read_request(&mut s);
            let n = served.fetch_add(1, Ordering::SeqCst) + 1;
            let k = if n <= RESTART_AFTER { n } else { n - RESTART_AFTER };
            let b = scaled(&body, k);
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}",
                b.len()
            );
        }
    });
    addr
}

fn check(router: &str) -> (Option<i32>, serde_json::Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_pdtop"))
        .args([
            "check",
            "--json",
            "--duration",
            "3",
            "--interval",
            "0.2",
            "--timeout",
            "1",
            "--router",
            router,
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let r = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}; stderr: {stderr}"));
    (out.status.code(), r)
}

#[test]
fn a_rising_router_is_counted_its_restart_from_zero_and_its_errors_are_events() {
    let addr = serve_rising_router();
    let (code, r) = check(&addr);
    let ro = &r["router"];
    assert_eq!(ro["endpoint"], addr.as_str(), "{ro}");
    assert_eq!(ro["up"], true, "{ro}");
    let ok = ro["scrapes_ok"].as_u64().unwrap();
    assert!(ok > RESTART_AFTER + 2, "too few scrapes to see the restart: {ro}");
    assert_eq!(ro["restarts"], 1, "{ro}");
    assert_eq!(ro["pd_families_seen"], true);
    // Each scrape after the first adds one fixture's worth, the restart's
    // included (its values are new since the reset): never less, never negative.
    let base = RouterSample::from_text(&fixture());
    let units = (ok - 1) as f64;
    let want = |c| base.counter(c) * units;
    assert_eq!(base.counter(RouterCounter::Requests), 48.0);
    assert_eq!(ro["requests"], want(RouterCounter::Requests), "{ro}");
    assert_eq!(ro["prefill_requests"], want(RouterCounter::PrefillRequests));
    assert_eq!(ro["decode_requests"], want(RouterCounter::DecodeRequests));
    let e = &ro["errors"];
    assert_eq!(e["router"], want(RouterCounter::Errors), "{e}");
    assert_eq!(e["prefill"], want(RouterCounter::PrefillErrors), "{e}");
    assert_eq!(e["decode"], want(RouterCounter::DecodeErrors), "{e}");
    assert_eq!(e["stream"], want(RouterCounter::StreamErrors), "{e}");
    let rate = ro["requests_per_s"].as_f64().unwrap();
    assert!(rate > 0.0 && rate.is_finite(), "{ro}");
    // Scaling keeps the quantiles: the run's p50/p90 are the fixture's.
    let d = base.duration.unwrap();
    let ms = |q: f64| (d.quantile(q).unwrap() * 1000.0 * 10.0).round() / 10.0;
    assert_eq!(ro["duration_ms"]["p50"].as_f64(), Some(ms(0.5)), "{ro}");
    assert_eq!(ro["duration_ms"]["p90"].as_f64(), Some(ms(0.9)), "{ro}");
    assert_eq!(ro["duration_ms"]["count"], 48 * (ok - 1));
    let events = r["events"].as_array().unwrap();
    let of = |kind: &str| events.iter().filter(|e| e["kind"] == kind).count();
    assert_eq!(of("restart"), 1, "{events:?}");
    assert!(events.iter().any(|e| e["kind"] == "restart" && e["text"].as_str().unwrap().contains(&addr)));
    // Every interval raised every error counter: one event each, with its time.
    assert_eq!(of("router_error") as u64, ok - 1, "{events:?}");
    let first = events.iter().find(|e| e["kind"] == "router_error").unwrap();
    assert!(first["t"].as_f64().unwrap() > 1e9, "{first}");
    assert!(first["text"].as_str().unwrap().contains("2 prefill"), "{first}");
    assert_eq!(r["verdict"], "degraded");
    assert_eq!(code, Some(1));
}

#[test]
fn an_unreachable_router_is_down_with_its_cause() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    drop(l);
    let (code, r) = check(&addr);
    let ro = &r["router"];
    assert_eq!(ro["up"], false, "{ro}");
    assert_eq!(ro["scrapes_ok"], 0);
    assert!(ro["scrapes_failed"].as_u64().unwrap() >= 2, "{ro}");
    assert!(ro["last_error"].as_str().unwrap().contains("cannot connect"), "{ro}");
    assert!(ro["requests_per_s"].is_null() && ro["duration_ms"].is_null(), "{ro}");
    let events = r["events"].as_array().unwrap();
    assert!(events.iter().any(|e| e["kind"] == "down" && e["text"].as_str().unwrap().contains(&addr)));
    assert_eq!(r["verdict"], "degraded");
    assert_eq!(code, Some(1));
}

/// `check --from-logs` with only a router's log: its own stamps (which
/// carry a year) are the clock, and the request it failed at decode is a
/// failure the report states, as events and as the verdict.
#[test]
fn a_router_log_alone_is_read_after_the_fact() {
    let log = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/router/vllm-router-pd-lab.log");
    let out = Command::new(env!("CARGO_BIN_EXE_pdtop"))
        .args(["check", "--from-logs", "--json", "--proxy-log", log])
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let events: Vec<(&str, f64)> = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["kind"].as_str().unwrap(), e["t"].as_f64().unwrap()))
        .collect();
    // 2026-11-30 06:26:13 UTC, from the line itself.
    assert_eq!(
        events,
        [("router_backend_error", 1_796_019_973.0), ("router_request_failed", 1_796_019_973.0)]
    );
    let warnings = r["warnings"].to_string();
    assert!(!warnings.contains("carry no year"), "{warnings}");
    assert!(warnings.contains("no decode log"), "{warnings}");
    assert_eq!(r["verdict"], "degraded");
    assert_eq!(out.status.code(), Some(1));
}

/// `pdtop record --router` keeps the router in the recording's header and
/// its scrapes as messages: `check --replay` gives the same router numbers
/// without the router, and the human summary has its line.
#[test]
fn a_recording_carries_the_router() {
    let addr = serve_rising_router();
    let dir = std::env::temp_dir().join(format!("pdtop-router-rec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("router.pdrec");
    let out = Command::new(env!("CARGO_BIN_EXE_pdtop"))
        .args([
            "record",
            "-o",
            rec.to_str().unwrap(),
            "--duration",
            "2",
            "--interval",
            "0.2",
            "--router",
            &addr,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let replay = |json: bool| {
        let mut args = vec!["check", "--replay", rec.to_str().unwrap()];
        if json {
            args.push("--json");
        }
        Command::new(env!("CARGO_BIN_EXE_pdtop")).args(&args).output().unwrap()
    };
    let r: serde_json::Value = serde_json::from_slice(&replay(true).stdout).unwrap();
    let ro = &r["router"];
    assert_eq!(ro["endpoint"], addr.as_str(), "{r}");
    let ok = ro["scrapes_ok"].as_u64().unwrap();
    assert!(ok >= 3, "{ro}");
    assert_eq!(ro["requests"].as_f64(), Some(48.0 * (ok - 1) as f64), "{ro}");
    let text = String::from_utf8_lossy(&replay(false).stdout).into_owned();
    let line = text.lines().find(|l| l.starts_with("router")).unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains(&addr) && line.contains("up") && line.contains(&format!("requests={}", 48 * (ok - 1))),
        "{line}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
