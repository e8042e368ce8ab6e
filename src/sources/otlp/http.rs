//! OTLP/HTTP: `POST /v1/traces` with a protobuf `ExportTraceServiceRequest`,
//! plain or gzip. Each connection is served by hyper on its own task.

use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode, header};
use hyper_util::rt::TokioIo;
use prost::Message;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::proto::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use super::sink::{MAX_BODY, MAX_CONNECTIONS, Sink};

pub(super) async fn serve(listener: TcpListener, sink: Arc<Sink>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else { return };
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            // Out of descriptors and the like: wait, never spin or die.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let sink = sink.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let sink = sink.clone();
                async move { Ok::<_, std::convert::Infallible>(handle(req, &sink).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), svc)
                .await;
            drop(permit);
        });
    }
}

async fn handle(req: Request<Incoming>, sink: &Sink) -> Response<Full<Bytes>> {
    if req.uri().path() != "/v1/traces" {
        return reply(StatusCode::NOT_FOUND, "only /v1/traces is served here");
    }
    if req.method() != Method::POST {
        return reply(StatusCode::METHOD_NOT_ALLOWED, "POST an ExportTraceServiceRequest");
    }
    let header = |h: header::HeaderName| {
        req.headers().get(h).and_then(|v| v.to_str().ok()).unwrap_or("").to_ascii_lowercase()
    };
    let ctype = header(header::CONTENT_TYPE);
    if ctype.contains("json") {
        // OTLP/JSON exists; vLLM sends protobuf. Said plainly, not guessed at.
        return reject(
            sink,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "OTLP/JSON is not supported: use http/protobuf",
        );
    }
    let gzip = match header(header::CONTENT_ENCODING).as_str() {
        "" | "identity" => false,
        "gzip" => true,
        other => {
            return reject(sink, StatusCode::UNSUPPORTED_MEDIA_TYPE, &format!("content-encoding {other}"));
        }
    };
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return reject(sink, StatusCode::PAYLOAD_TOO_LARGE, &format!("body: {e}")),
    };
    let body = if gzip {
        match gunzip(&body) {
            Ok(b) => Bytes::from(b),
            Err(e) => return reject(sink, StatusCode::BAD_REQUEST, &e),
        }
    } else {
        body
    };
    match ExportTraceServiceRequest::decode(body) {
        Ok(export) => {
            sink.deliver(&export);
            let mut r =
                Response::new(Full::new(Bytes::from(ExportTraceServiceResponse::default().encode_to_vec())));
            r.headers_mut().insert(header::CONTENT_TYPE, "application/x-protobuf".parse().expect("static"));
            r
        }
        Err(e) => reject(sink, StatusCode::BAD_REQUEST, &format!("not an ExportTraceServiceRequest: {e}")),
    }
}

/// Decompressed size is capped like the body: a small gzip bomb stays small.
fn gunzip(body: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(body)
        .take(MAX_BODY as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("gzip: {e}"))?;
    if out.len() > MAX_BODY {
        return Err(format!("gzip: more than {MAX_BODY} bytes decompressed"));
    }
    Ok(out)
}

fn reject(sink: &Sink, status: StatusCode, why: &str) -> Response<Full<Bytes>> {
    sink.reject(format!("OTLP/HTTP {}: {why}", status.as_u16()));
    reply(status, why)
}

fn reply(status: StatusCode, text: &str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(format!("{text}\n"))));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, "text/plain".parse().expect("static"));
    r
}
