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
    let mut get = HttpClient::new(&format!("http://{addr}"), Auth::None).unwrap();
    for _ in 0..3 {
        assert_eq!(get.get("/metrics", T).await.unwrap(), body);
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "one kept connection");
    // Another HTTP stack reads the same bytes.
    let by_reqwest = reqwest::get(format!("http://{addr}/metrics")).await.unwrap().text().await.unwrap();
    assert_eq!(by_reqwest, body);
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
    let mut get = HttpClient::new(&format!("http://{addr}"), Auth::None).unwrap();
    assert_eq!(get.get("/metrics", T).await.unwrap(), body);
}

#[tokio::test]
async fn a_kept_connection_the_server_closed_is_opened_again_once() {
    let (addr, accepted) = serve(1, |_| with_length("vllm:num_requests_running 0.0\n"));
    let mut get = HttpClient::new(&format!("http://{addr}"), Auth::None).unwrap();
    for _ in 0..3 {
        assert_eq!(get.get("/metrics", T).await.unwrap(), "vllm:num_requests_running 0.0\n");
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
    let mut get = HttpClient::new(&format!("http://{addr}/"), Auth::Bearer("s3cret".into())).unwrap();
    assert_eq!(get.get("/metrics", T).await.unwrap(), "ok");
    let mut without = HttpClient::new(&format!("http://{addr}/"), Auth::None).unwrap();
    assert_eq!(without.get("/metrics", T).await.unwrap_err(), "HTTP 401 Unauthorized");
    // The connection went on after the refusal (one connection: see the next test).
    assert_eq!(without.get("/metrics", T).await.unwrap_err(), "HTTP 401 Unauthorized");
    // The credentials stay out of a debug print.
    assert!(!format!("{get:?}").contains("s3cret"));
}

#[tokio::test]
async fn a_refused_port_cannot_connect_and_a_redirect_elsewhere_goes_there_without_credentials() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let gone = l.local_addr().unwrap().to_string();
    drop(l);
    let mut get = HttpClient::new(&format!("http://{gone}"), Auth::None).unwrap();
    let err = get.get("/metrics", T).await.unwrap_err();
    assert!(err.starts_with("cannot connect: "), "{err}");
    // A second server answers only a request without credentials.
    let (there, _) = serve(usize::MAX, |head| {
        if head.starts_with("GET /elsewhere/metrics HTTP/1.1") && !head.contains("Authorization") {
            with_length("vllm:num_requests_running 0.0\n")
        } else {
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n".to_vec()
        }
    });
    let (addr, _) = serve(usize::MAX, move |_| {
        format!(
            "HTTP/1.1 302 Found\r\nlocation: http://{there}/elsewhere/metrics\r\ncontent-length: 0\r\n\r\n"
        )
        .into_bytes()
    });
    let mut get = HttpClient::new(&format!("http://{addr}"), Auth::Bearer("s3cret".into())).unwrap();
    assert_eq!(get.get("/metrics", T).await.unwrap(), "vllm:num_requests_running 0.0\n");
    // A loop of redirects ends.
    let (addr, _) = serve(usize::MAX, |_| {
        b"HTTP/1.1 307 Temporary Redirect\r\nlocation: /again\r\ncontent-length: 0\r\n\r\n".to_vec()
    });
    let mut get = HttpClient::new(&format!("http://{addr}"), Auth::None).unwrap();
    assert_eq!(get.get("/metrics", T).await.unwrap_err(), "request failed: too many redirects");
}

#[test]
fn base_urls_name_their_server_credentials_and_path() {
    let a = |s: &str| {
        parse_url(s).map(|(srv, user, path)| (srv.tls, srv.host, srv.port, srv.authority, user, path))
    };
    let none = None::<(String, String)>;
    assert_eq!(
        a("http://127.0.0.1:8100"),
        Ok((false, "127.0.0.1".into(), 8100, "127.0.0.1:8100".into(), none.clone(), "".into()))
    );
    assert_eq!(
        a("http://gpu-3.lab:8000/v/"),
        Ok((false, "gpu-3.lab".into(), 8000, "gpu-3.lab:8000".into(), none.clone(), "/v/".into()))
    );
    assert_eq!(
        a("http://[::1]:8000"),
        Ok((false, "::1".into(), 8000, "[::1]:8000".into(), none.clone(), "".into()))
    );
    assert_eq!(a("http://[::1]"), Ok((false, "::1".into(), 80, "[::1]".into(), none.clone(), "".into())));
    assert_eq!(
        a("https://gw.example/p"),
        Ok((true, "gw.example".into(), 443, "gw.example".into(), none.clone(), "/p".into()))
    );
    let user = Some(("lab user".to_string(), "p@ss:w".to_string()));
    assert_eq!(
        a("http://lab%20user:p%40ss:w@node:9090"),
        Ok((false, "node".into(), 9090, "node:9090".into(), user, "".into()))
    );
    // An error never shows the password.
    let e = parse_url("http://lab:s3cret@node:99999/v").unwrap_err();
    assert!(e.starts_with("http://node:99999/v: bad port") && !e.contains("s3cret"), "{e}");
    for bad in [
        "http://a:b:80",
        "http://",
        "ftp://node:1",
        "node:8000",
        "http://node:0",
        "http://node:99999",
        "http://[::1",
        "http://nodé:80",
        "http://node/a b",
    ] {
        assert!(parse_url(bad).is_err(), "{bad}");
    }
}

#[test]
fn basic_auth_is_base64_of_user_and_password() {
    // RFC 7617's example.
    assert_eq!(base64(b"Aladdin:open sesame"), "QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
    assert_eq!(base64(b""), "");
    assert_eq!(base64(b"a"), "YQ==");
    assert_eq!(base64(b"ab"), "YWI=");
    assert_eq!(base64(b"abc"), "YWJj");
}

#[tokio::test]
async fn a_post_carries_its_form_and_a_url_user_is_basic_auth() {
    // What Prometheus's API gets from the collector: a form-encoded query.
    let (addr, accepted) = serve(usize::MAX, |head| {
        let form = "query=up";
        let ok = head.starts_with("POST /prom/api/v1/query HTTP/1.1\r\n")
            && head.contains("\r\nContent-Type: application/x-www-form-urlencoded\r\n")
            && head.contains(&format!("\r\nContent-Length: {}\r\n", form.len()))
            && head.contains("\r\nAuthorization: Basic bGFiOnBAc3M=\r\n");
        if ok {
            with_length(r#"{"status":"success"}"#)
        } else {
            let err = r#"{"status":"error","error":"bad request"}"#;
            format!("HTTP/1.1 400 Bad Request\r\ncontent-length: {}\r\n\r\n{err}", err.len()).into_bytes()
        }
    });
    // `serve` reads heads only: the form's bytes come before the next head.
    let mut c = HttpClient::new(&format!("http://lab:p%40ss@{addr}/prom"), Auth::None).unwrap();
    let mut body = Vec::new();
    let req =
        Request { path: "/api/v1/query", form: Some(("application/x-www-form-urlencoded", b"query=up")) };
    assert_eq!(c.send(req, T, &mut body).await.unwrap(), 200);
    assert_eq!(body, br#"{"status":"success"}"#);
    // An error's short, sized body is kept: the API says there what is wrong.
    let mut c = HttpClient::new(&format!("http://{addr}/prom"), Auth::None).unwrap();
    assert_eq!(c.send(req, T, &mut body).await.unwrap(), 400);
    assert_eq!(body, br#"{"status":"error","error":"bad request"}"#);
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
    // A chunked error's words are read too (Go chunks them past ~2 KB).
    let (addr, _) = serve(usize::MAX, |_| {
        let mut out = b"HTTP/1.1 422 Unprocessable Entity\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
        out.extend(b"1a\r\n{\"status\":\"error\",\"a\":\"b\"}\r\n0\r\n\r\n");
        out
    });
    let mut c = HttpClient::new(&format!("http://{addr}"), Auth::None).unwrap();
    assert_eq!(c.send(req, T, &mut body).await.unwrap(), 422);
    assert_eq!(body, br#"{"status":"error","a":"b"}"#);
}

#[tokio::test]
async fn a_body_over_the_clients_limit_is_refused() {
    let (addr, _) = serve(usize::MAX, |_| with_length(&"x".repeat(3 << 20)));
    let mut c = HttpClient::new(&format!("http://{addr}"), Auth::None).unwrap().with_max_body(2 << 20);
    assert_eq!(c.get("/metrics", T).await.unwrap_err(), "body larger than 2 MiB");
    let mut c = HttpClient::new(&format!("http://{addr}"), Auth::None).unwrap();
    assert_eq!(c.get("/metrics", T).await.unwrap().len(), 3 << 20);
}

/// A TLS server on loopback with the test CA's `localhost` certificate
/// (tests/fixtures/tls): answers `answer` to each request on a connection.
async fn serve_tls(answer: &'static str) -> (String, Arc<AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tls/");
    let cert = rustls::pki_types::CertificateDer::from(std::fs::read(format!("{dir}localhost.der")).unwrap());
    let key = rustls::pki_types::PrivatePkcs8KeyDer::from(
        std::fs::read(format!("{dir}localhost.key.der")).unwrap(),
    );
    let config =
        rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert], key.into())
            .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let accepted = Arc::new(AtomicUsize::new(0));
    let n = accepted.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = l.accept().await else { return };
            n.fetch_add(1, Ordering::SeqCst);
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut s) = acceptor.accept(tcp).await else { return };
                let mut head = Vec::new();
                let mut b = [0u8; 1];
                loop {
                    while !head.ends_with(b"\r\n\r\n") {
                        if s.read(&mut b).await.unwrap_or(0) == 0 {
                            return;
                        }
                        head.push(b[0]);
                    }
                    head.clear();
                    let out = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{answer}", answer.len());
                    if s.write_all(out.as_bytes()).await.is_err() || s.flush().await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, accepted)
}

#[tokio::test]
async fn https_is_read_over_one_kept_tls_connection_and_an_unknown_issuer_refused() {
    let (addr, accepted) = serve_tls("vllm:num_requests_running 0.0\n").await;
    let port = addr.rsplit_once(':').unwrap().1;
    let ca = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tls/ca.der")).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(rustls::pki_types::CertificateDer::from(ca)).unwrap();
    let config = tls_config(roots).unwrap();
    // By name and by address: the certificate holds both.
    for host in ["localhost", "127.0.0.1"] {
        let mut c =
            HttpClient::new(&format!("https://{host}:{port}"), Auth::None).unwrap().with_tls(config.clone());
        for _ in 0..3 {
            assert_eq!(c.get("/metrics", T).await.unwrap(), "vllm:num_requests_running 0.0\n");
        }
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 2, "one kept connection per client");
    // The public roots do not know the test CA.
    let mut c = HttpClient::new(&format!("https://localhost:{port}"), Auth::None).unwrap();
    let err = c.get("/metrics", T).await.unwrap_err();
    assert!(err.starts_with("cannot connect: ") && err.contains("UnknownIssuer"), "{err}");
    // Nor does the certificate name another host.
    let mut c = HttpClient::new(&format!("https://127.0.0.2:{port}"), Auth::None).unwrap().with_tls(config);
    let err = c.get("/metrics", T).await.unwrap_err();
    assert!(err.starts_with("cannot connect: "), "{err}");
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
    let mut get = HttpClient::new(&format!("http://{addr}"), Auth::None).unwrap();
    for _ in 0..3 {
        assert!(get.get("/metrics", T).await.is_ok());
        assert_eq!(get.get("/v1/models", T).await.unwrap_err(), "HTTP 401 Unauthorized");
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "one kept connection through the refusals");
    // An error with no length on a connection held open: the status at once, not a timeout.
    let (addr, _) = serve(usize::MAX, |_| b"HTTP/1.1 503 Service Unavailable\r\n\r\n".to_vec());
    let mut get = HttpClient::new(&format!("http://{addr}"), Auth::None).unwrap();
    assert_eq!(get.get("/metrics", T).await.unwrap_err(), "HTTP 503 Service Unavailable");
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
    let mut get = HttpClient::new(&format!("http://{addr}"), Auth::None).unwrap();
    for _ in 0..2 {
        assert_eq!(get.get("/metrics", T).await.unwrap(), "vllm");
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "the trailer was read to its end");
    assert_eq!(get.get("/bad", T).await.unwrap_err(), "request failed: bad chunk");
}
