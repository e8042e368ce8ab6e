//! The recorded spans sent again, as vLLM's OTLP/HTTP exporter sent them.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::capture::Capture;
use super::clock::LabClock;

/// Sends each recorded export body to `to` (`POST /v1/traces`, OTLP/HTTP
/// protobuf) when its time comes, as vLLM's exporter did; again at each
/// loop. A receiver that is not there yet, or fails, loses that body only.
pub(super) async fn send_spans(to: SocketAddr, capture: Arc<Capture>, clock: LabClock) {
    let (mut loop_no, mut next) = (0, 0);
    loop {
        if clock.stopped() {
            return;
        }
        let (l, t) = clock.now();
        if l != loop_no {
            (loop_no, next) = (l, 0);
        }
        while let Some((ft, body)) = capture.otlp_frames.get(next).filter(|(ft, _)| *ft <= t) {
            let _ = ft;
            post(to, body).await;
            next += 1;
        }
        if clock.finished() && next >= capture.otlp_frames.len() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// One HTTP/1.1 POST of a protobuf body, its answer read and dropped.
async fn post(to: SocketAddr, body: &[u8]) {
    let Ok(Ok(mut s)) =
        tokio::time::timeout(std::time::Duration::from_secs(2), tokio::net::TcpStream::connect(to)).await
    else {
        return;
    };
    let head = format!(
        "POST /v1/traces HTTP/1.1\r\nhost: {to}\r\ncontent-type: application/x-protobuf\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    if s.write_all(head.as_bytes()).await.is_err() || s.write_all(body).await.is_err() {
        return;
    }
    let mut sink = Vec::new();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), s.read_to_end(&mut sink)).await;
}
