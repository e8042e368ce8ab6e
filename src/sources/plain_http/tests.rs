use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::*;

/// The idle decode scrape recorded from a real vLLM.
fn capture_body() -> String {
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/lab-captures/qwen3-shape-restart/decode-metrics-idle.txt"
    );
    std::fs::read_to_string(p).expect("capture")
}

/// Time for one GET in these tests.
const T: Duration = Duration::from_secs(5);

/// Reads one request head; `None` once the client has gone.
fn read_head(s: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut b) {
            Ok(1) => head.push(b[0]),
            _ => return None,
        }
    }
    Some(String::from_utf8(head).unwrap())
}

/// A server on loopback: `answer(request head)` is written back for each
/// request; `per_conn` requests per connection, then it closes. Counts
/// the connections it accepted.
fn serve(
    per_conn: usize,
    answer: impl Fn(&str) -> Vec<u8> + Send + Sync + 'static,
) -> (String, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let accepted = Arc::new(AtomicUsize::new(0));
    let (n, answer) = (accepted.clone(), Arc::new(answer));
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            n.fetch_add(1, Ordering::SeqCst);
            let answer = answer.clone();
            std::thread::spawn(move || {
                for _ in 0..per_conn {
                    let Some(head) = read_head(&mut s) else { return };
                    if s.write_all(&answer(&head)).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, accepted)
}

fn with_length(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn chunked(body: &str) -> Vec<u8> {
    let mut out = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
    for piece in body.as_bytes().chunks(7000) {
        out.extend(format!("{:x}\r\n", piece.len()).as_bytes());
        out.extend(piece);
        out.extend(b"\r\n");
    }
    out.extend(b"0\r\n\r\n");
    out
}

#[tokio::test]
async fn many_scrapes_go_over_one_connection_and_read_as_reqwest_reads_them() {
    let body = capture_body();
    let b = body.clone();
    let (addr, accepted) = serve(usize::MAX, move |_| with_length(&b));
    let mut get = PlainGet::for_base(&format!("http://{addr}")).unwrap();
    for _ in 0..3 {
        assert_eq!(get.get("/metrics", T, None).await.unwrap(), body);
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "one kept connection");
    let client = crate::sources::scrape::http_client(Duration::from_secs(5)).unwrap();
    let opts = crate::sources::scrape::ScrapeOptions { interval: T, timeout: T, bearer_token: None };
    let by_reqwest = crate::sources::scrape::fetch(&client, &format!("http://{addr}/metrics"), &opts).await;
    assert_eq!(by_reqwest.unwrap(), body);
}

#[tokio::test]
async fn vllms_redirect_to_the_slash_path_is_followed_and_a_chunked_body_read() {
    let body = capture_body();
    let b = body.clone();
    let (addr, _) = serve(usize::MAX, move |head| {
        if head.starts_with("GET /metrics HTTP/1.1") {
            // As Starlette's mount answers: an absolute Location.
            let host = head.lines().find_map(|l| l.strip_prefix("Host: ")).unwrap().to_string();
            format!("HTTP/1.1 307 Temporary Redirect\r\nlocation: http://{host}/metrics/\r\ncontent-length: 0\r\n\r\n")
                .into_bytes()
        } else {
            chunked(&b)
        }
    });
    let mut get = PlainGet::for_base(&format!("http://{addr}")).unwrap();
    assert_eq!(get.get("/metrics", T, None).await.unwrap(), body);
}

#[tokio::test]
async fn a_kept_connection_the_server_closed_is_opened_again_once() {
    let (addr, accepted) = serve(1, |_| with_length("vllm:num_requests_running 0.0\n"));
    let mut get = PlainGet::for_base(&format!("http://{addr}")).unwrap();
    for _ in 0..3 {
        assert_eq!(get.get("/metrics", T, None).await.unwrap(), "vllm:num_requests_running 0.0\n");
        // The server has closed its side by the next request.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn the_token_is_sent_and_a_refusal_reads_as_its_status() {
    let (addr, _) = serve(usize::MAX, |head| {
        if head.contains("\r\nAuthorization: Bearer s3cret\r\n") && head.contains("\r\nHost: 127.0.0.1:") {
            with_length("ok")
        } else {
            b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n".to_vec()
        }
    });
    let mut get = PlainGet::for_base(&format!("http://{addr}/")).unwrap();
    assert_eq!(get.get("/metrics", T, Some("s3cret")).await.unwrap(), "ok");
    assert_eq!(get.get("/metrics", T, None).await.unwrap_err(), "HTTP 401 Unauthorized");
    // The connection went on after the refusal (one connection: see the next test).
    assert_eq!(get.get("/metrics", T, Some("s3cret")).await.unwrap(), "ok");
}

#[tokio::test]
async fn a_refused_port_cannot_connect_and_a_redirect_elsewhere_is_not_followed() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let gone = l.local_addr().unwrap().to_string();
    drop(l);
    let mut get = PlainGet::for_base(&format!("http://{gone}")).unwrap();
    let err = get.get("/metrics", T, None).await.unwrap_err();
    assert!(err.starts_with("cannot connect: "), "{err}");
    let (addr, _) = serve(usize::MAX, |_| {
        b"HTTP/1.1 302 Found\r\nlocation: http://example.invalid/login\r\ncontent-length: 0\r\n\r\n".to_vec()
    });
    let mut get = PlainGet::for_base(&format!("http://{addr}")).unwrap();
    let err = get.get("/metrics", T, None).await.unwrap_err();
    assert_eq!(err, "redirected to another server: http://example.invalid/login");
}

#[test]
fn only_plain_http_bases_are_taken() {
    let a = |s: &str| PlainGet::for_base(s).map(|g| (g.authority, g.prefix));
    assert_eq!(a("http://127.0.0.1:8100"), Some(("127.0.0.1:8100".into(), "".into())));
    assert_eq!(a("http://gpu-3.lab:8000/v"), Some(("gpu-3.lab:8000".into(), "/v".into())));
    assert_eq!(a("http://[::1]:8000"), Some(("[::1]:8000".into(), "".into())));
    assert_eq!(a("http://[::1]"), Some(("[::1]:80".into(), "".into())));
    assert_eq!(a("http://node"), Some(("node:80".into(), "".into())));
    assert_eq!(a("https://127.0.0.1:8100"), None);
    assert_eq!(a("http://user:pw@127.0.0.1:8100"), None);
    assert_eq!(a("http://"), None);
}

#[tokio::test]
async fn an_error_answer_keeps_the_connection_when_sized_and_is_not_waited_on_when_not() {
    // vLLM with --api-key: `/v1/models` is refused on every scrape, `/metrics` is not.
    let (addr, accepted) = serve(usize::MAX, |head| {
        if head.starts_with("GET /v1/models ") {
            b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 25\r\n\r\n{\"error\":\"Unauthorized\"}\n".to_vec()
        } else {
            with_length("vllm:num_requests_running 0.0\n")
        }
    });
    let mut get = PlainGet::for_base(&format!("http://{addr}")).unwrap();
    for _ in 0..3 {
        assert!(get.get("/metrics", T, None).await.is_ok());
        assert_eq!(get.get("/v1/models", T, None).await.unwrap_err(), "HTTP 401 Unauthorized");
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "one kept connection through the refusals");
    // An error with no length on a connection held open: the status at once, not a timeout.
    let (addr, _) = serve(usize::MAX, |_| b"HTTP/1.1 503 Service Unavailable\r\n\r\n".to_vec());
    let mut get = PlainGet::for_base(&format!("http://{addr}")).unwrap();
    assert_eq!(get.get("/metrics", T, None).await.unwrap_err(), "HTTP 503 Service Unavailable");
}

#[tokio::test]
async fn interim_answers_trailers_and_bad_chunks() {
    let (addr, accepted) = serve(usize::MAX, |head| {
        if head.starts_with("GET /bad ") {
            return b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabcd\r\n0\r\n\r\n".to_vec();
        }
        let mut out = b"HTTP/1.1 100 Continue\r\n\r\n".to_vec();
        out.extend(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n4\r\nvllm\r\n0\r\nx-trailer: 1\r\n\r\n",
        );
        out
    });
    let mut get = PlainGet::for_base(&format!("http://{addr}")).unwrap();
    for _ in 0..2 {
        assert_eq!(get.get("/metrics", T, None).await.unwrap(), "vllm");
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "the trailer was read to its end");
    assert_eq!(get.get("/bad", T, None).await.unwrap_err(), "request failed: bad chunk");
}
