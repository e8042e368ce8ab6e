//! Misbehaving `/metrics` endpoints on loopback, watched by the real binary
//! (`pdtop check --json`): each fault must show up as that instance's state
//! with a readable cause, while pdtop keeps running and keeps scraping the
//! healthy instance beside it.
//!
//! All endpoints go into one `check` run so the whole file costs one
//! bounded wait (a few seconds), not one per fault.

use crate::common;

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::thread;
use std::time::Duration;

/// What a fake endpoint does with each connection.
#[derive(Clone, Copy)]
enum Fault {
    /// The capture's idle scrape, as vLLM serves it.
    Healthy,
    /// Reads the request, then never answers.
    Silent,
    /// Headers, then one byte of body a second.
    OneByteASecond,
    Http500,
    /// A web page where the metrics should be (a wrong port, a login page).
    Html,
    /// Announces 100 MB and starts sending it.
    Huge100MbWithLength,
    /// Sends 100 MB chunked, with no length to refuse up front.
    Huge100MbChunked,
    /// Announces a length, sends part of it and closes.
    CutBody,
    /// Random bytes instead of an HTTP answer.
    RandomResponse,
    /// A 200 whose body is random bytes (not text).
    RandomBody,
}

fn idle_body() -> String {
    std::fs::read_to_string(common::capture_dir("qwen3-shape-restart").join("decode-metrics-idle.txt"))
        .unwrap()
}

/// Deterministic noise (xorshift), so a failure can be reproduced.
fn noise(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 24) as u8
        })
        .collect()
}

fn handle(mut s: TcpStream, fault: Fault) {
    common::read_request(&mut s);
    // Write errors mean pdtop hung up (as it should on a cap or timeout).
    let _ = match fault {
        Fault::Healthy => {
            let body = idle_body();
            write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
        }
        Fault::Silent => {
            // Hold the connection open past the client's timeout.
            thread::sleep(Duration::from_secs(30));
            Ok(())
        }
        Fault::OneByteASecond => {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n");
            for _ in 0..30 {
                if s.write_all(b"#").is_err() {
                    break;
                }
                thread::sleep(Duration::from_secs(1));
            }
            Ok(())
        }
        Fault::Http500 => s.write_all(
            b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 21\r\n\r\nInternal Server Error",
        ),
        Fault::Html => {
            let body = "<!DOCTYPE html>\n<html><head><title>Sign in</title></head>\n<body><p>Please log in</p></body></html>\n";
            write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
        }
        Fault::Huge100MbWithLength => {
            let _ =
                s.write_all(format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", 100 << 20).as_bytes());
            let line = b"vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 1.0\n".repeat(1000);
            let mut sent = 0;
            while sent < 100 << 20 {
                if s.write_all(&line).is_err() {
                    break;
                }
                sent += line.len();
            }
            Ok(())
        }
        Fault::Huge100MbChunked => {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
            let line = b"vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 1.0\n".repeat(1000);
            let chunk = [format!("{:x}\r\n", line.len()).as_bytes(), &line, b"\r\n"].concat();
            let mut sent = 0;
            while sent < 100 << 20 {
                if s.write_all(&chunk).is_err() {
                    break;
                }
                sent += line.len();
            }
            s.write_all(b"0\r\n\r\n")
        }
        Fault::CutBody => {
            let body = idle_body();
            let half = &body.as_bytes()[..body.len() / 2];
            let _ = write!(s, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
            let r = s.write_all(half);
            let _ = s.shutdown(std::net::Shutdown::Both);
            r
        }
        Fault::RandomResponse => s.write_all(&noise(4096, 0x9e37_79b9_7f4a_7c15)),
        Fault::RandomBody => {
            let body = noise(8192, 42);
            let _ = write!(s, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
            s.write_all(&body)
        }
    };
}

/// Serves `fault` on a fresh loopback port; the threads end with the test
/// process.
fn serve(fault: Fault) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    thread::spawn(move || {
        for s in l.incoming().flatten() {
            thread::spawn(move || handle(s, fault));
        }
    });
    addr
}

/// A port that refuses: bound once to get a free number, then closed.
fn refused() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    drop(l);
    addr
}

#[test]
fn every_broken_endpoint_is_down_with_its_cause_and_pdtop_keeps_going() {
    // (endpoint, what the report's last_error must say; None: it is up)
    let cases: Vec<(&str, String, Option<&str>)> = vec![
        ("healthy", serve(Fault::Healthy), None),
        ("refused", refused(), Some("cannot connect")),
        ("silent", serve(Fault::Silent), Some("timed out")),
        ("one byte a second", serve(Fault::OneByteASecond), Some("timed out")),
        ("HTTP 500", serve(Fault::Http500), Some("HTTP 500")),
        ("100 MB, announced", serve(Fault::Huge100MbWithLength), Some("body larger than 16 MiB")),
        ("100 MB, chunked", serve(Fault::Huge100MbChunked), Some("body larger than 16 MiB")),
        ("body cut in the middle", serve(Fault::CutBody), Some("body cut short")),
        ("random bytes for an answer", serve(Fault::RandomResponse), Some("request failed")),
        ("random bytes for a body", serve(Fault::RandomBody), Some("not UTF-8")),
    ];
    let mut args: Vec<String> =
        ["check", "--json", "--duration", "4", "--interval", "0.25", "--timeout", "1"]
            .map(String::from)
            .to_vec();
    for (_, addr, _) in &cases {
        args.push("--decode".into());
        args.push(addr.clone());
    }
    let out = Command::new(env!("CARGO_BIN_EXE_pdtop")).args(&args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // It ran to the end and said so: exit 1 (degraded), a full report.
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["verdict"], "degraded");
    let inst = r["instances"].as_array().unwrap();
    assert_eq!(inst.len(), cases.len());
    for ((name, addr, want), i) in cases.iter().zip(inst) {
        assert_eq!(i["endpoint"], addr.as_str(), "{name}");
        match want {
            None => {
                assert_eq!(i["up"], true, "{name}: {i}");
                // The healthy one was scraped all along, not held up by the others.
                assert!(i["scrapes_ok"].as_u64().unwrap() >= 4, "{name}: {i}");
                assert!(i["last_error"].is_null(), "{name}: {i}");
            }
            Some(cause) => {
                assert_eq!(i["up"], false, "{name}: {i}");
                assert_eq!(i["scrapes_ok"], 0, "{name}: {i}");
                // Retried, not given up on after one failure.
                assert!(i["scrapes_failed"].as_u64().unwrap() >= 2, "{name}: {i}");
                let err = i["last_error"].as_str().unwrap_or_default();
                assert!(err.contains(cause), "{name}: last_error {err:?} should say {cause:?}");
            }
        }
    }
    // Each outage is an event naming the endpoint.
    let events = r["events"].as_array().unwrap();
    for (name, addr, want) in &cases {
        if want.is_some() {
            assert!(
                events
                    .iter()
                    .any(|e| e["kind"] == "down" && e["text"].as_str().unwrap().contains(addr.as_str())),
                "{name}: no down event in {events:?}"
            );
        }
    }
}

#[test]
fn an_html_page_is_not_taken_for_an_idle_instance() {
    // A 200 with a web page: reachable, but there is nothing to watch. The
    // report says so instead of passing it as a quiet healthy instance.
    let html = serve(Fault::Html);
    let out = Command::new(env!("CARGO_BIN_EXE_pdtop"))
        .args(["check", "--json", "--duration", "1", "--interval", "0.2", "--decode", &html])
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let i = &r["instances"][0];
    assert_eq!(i["up"], true, "{i}");
    assert!(i["bad_lines"].as_u64().unwrap() > 0, "{i}");
    let warnings = r["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().contains(&html) && w.as_str().unwrap().contains("no vllm:")),
        "{warnings:?}"
    );
    assert_eq!(r["verdict"], "degraded");
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn a_version_request_dropped_once_is_asked_again() {
    // The first `/version` connection is closed unanswered (a blip); the
    // version must still be known, not hidden until a reconnect.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let dropped = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let dropped = dropped.clone();
            thread::spawn(move || {
                let head = String::from_utf8_lossy(&common::read_request(&mut s)).into_owned();
                let body = match head.split_whitespace().nth(1) {
                    Some("/metrics") => idle_body(),
                    Some("/version") if !dropped.swap(true, std::sync::atomic::Ordering::SeqCst) => return,
                    Some("/version") => r#"{"version":"0.26.0"}"#.to_string(),
                    _ => String::new(),
                };
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    let out = Command::new(env!("CARGO_BIN_EXE_pdtop"))
        .args([
            "check",
            "--json",
            "--duration",
            "1.5",
            "--interval",
            "0.2",
            "--timeout",
            "1",
            "--decode",
            &addr,
        ])
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let i = &r["instances"][0];
    assert_eq!(i["vllm_version"], "0.26.0", "{i}");
}
