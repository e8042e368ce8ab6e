//! An OTLP trace receiver, opt-in and local: vLLM's own per-request spans
//! (`--otlp-traces-endpoint`) over OTLP/HTTP (`POST /v1/traces`, protobuf,
//! gzip too) and gRPC (`TraceService/Export`). Spans become
//! [`Msg::Spans`](crate::feed::Msg); a body that is not an export request
//! is answered 400 and reported as `Msg::SpansRejected`. Memory stays
//! bounded whatever the span rate: bodies are size-capped, connections are
//! capped, and a batch the app cannot take at once is dropped and counted.

pub mod convert;
mod grpc;
mod http;
pub mod proto;
mod sink;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::mpsc::Sender;

use crate::clock::Clock;
use crate::feed::Msg;

pub use convert::{REQUEST_ID, request_spans};
pub use proto::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use sink::Sink;
pub use sink::{MAX_BODY, MAX_CONNECTIONS};

/// Where to listen; both `None` means no receiver.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OtlpOptions {
    pub http: Option<SocketAddr>,
    pub grpc: Option<SocketAddr>,
}

impl OtlpOptions {
    /// Parses the flags. A bare port binds 127.0.0.1; an address that is
    /// not loopback is refused unless `allow_remote` (spans hold request
    /// metadata: ids, token counts, timings).
    pub fn new(http: Option<&str>, grpc: Option<&str>, allow_remote: bool) -> Result<OtlpOptions, String> {
        let parse = |flag: &str, s: Option<&str>| s.map(|s| listen_addr(flag, s, allow_remote)).transpose();
        Ok(OtlpOptions { http: parse("--otlp-listen", http)?, grpc: parse("--otlp-grpc-listen", grpc)? })
    }

    pub fn is_on(&self) -> bool {
        self.http.is_some() || self.grpc.is_some()
    }
}

fn listen_addr(flag: &str, s: &str, allow_remote: bool) -> Result<SocketAddr, String> {
    let addr: SocketAddr = match s.parse::<u16>() {
        Ok(port) => SocketAddr::from(([127, 0, 0, 1], port)),
        Err(_) => s.parse().map_err(|_| format!("{flag} {s:?}: expected IP:PORT or PORT"))?,
    };
    if !addr.ip().is_loopback() && !allow_remote {
        return Err(format!(
            "{flag} {addr}: not a loopback address; spans hold request metadata (ids, token counts, \
             timings): add --otlp-allow-remote to listen there anyway"
        ));
    }
    if !addr.ip().is_loopback() {
        eprintln!("warning: {flag} {addr} accepts spans from other machines; they hold request metadata");
    }
    Ok(addr)
}

/// Binds the listeners now (so a taken port is an error at start-up) and
/// serves them on the current runtime.
pub fn spawn(opts: &OtlpOptions, clock: Arc<dyn Clock>, tx: Sender<Msg>) -> Result<Vec<SocketAddr>, String> {
    let sink = Arc::new(Sink::new(tx.clone(), clock.clone()));
    let mut bound = Vec::new();
    if let Some(addr) = opts.http {
        let l = bind(addr, "--otlp-listen")?;
        bound.push(l.local_addr().map_err(|e| e.to_string())?);
        let task = tokio::spawn(http::serve(l, sink.clone()));
        super::supervise("otlp-http".into(), task, clock.clone(), tx.clone());
    }
    if let Some(addr) = opts.grpc {
        let l = bind(addr, "--otlp-grpc-listen")?;
        bound.push(l.local_addr().map_err(|e| e.to_string())?);
        let task = tokio::spawn(grpc::serve(l, sink));
        super::supervise("otlp-grpc".into(), task, clock, tx);
    }
    Ok(bound)
}

fn bind(addr: SocketAddr, flag: &str) -> Result<tokio::net::TcpListener, String> {
    let l = std::net::TcpListener::bind(addr).map_err(|e| format!("{flag} {addr}: {e}"))?;
    l.set_nonblocking(true).map_err(|e| format!("{flag} {addr}: {e}"))?;
    tokio::net::TcpListener::from_std(l).map_err(|e| format!("{flag} {addr}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_by_default_remote_only_when_asked() {
        let o = OtlpOptions::new(Some("4318"), Some("127.0.0.1:4317"), false).unwrap();
        assert_eq!(o.http, Some("127.0.0.1:4318".parse().unwrap()));
        assert_eq!(o.grpc, Some("127.0.0.1:4317".parse().unwrap()));
        let e = OtlpOptions::new(Some("0.0.0.0:4318"), None, false).unwrap_err();
        assert!(e.contains("--otlp-allow-remote"), "{e}");
        assert!(OtlpOptions::new(Some("0.0.0.0:4318"), None, true).is_ok());
        assert!(OtlpOptions::new(Some("[::1]:4318"), None, false).is_ok());
        assert!(OtlpOptions::new(Some("nonsense"), None, false).is_err());
        assert!(!OtlpOptions::new(None, None, false).unwrap().is_on());
    }
}
