//! Collectors: each runs as its own task, sends owned data to the app over a
//! channel, and never touches the terminal or the state.

pub mod logtail;
pub mod netdev;
pub mod scrape;

use crate::state::Role;
use crate::traces::Source;
use logtail::{TailCounts, TailState};

/// Everything a collector can tell the app. Timestamps are unix seconds from
/// the injected clock, so the state itself never reads a clock.
#[derive(Debug, Clone)]
pub enum Msg {
    /// A `/metrics` body was fetched.
    Scrape { instance: usize, at: f64, body: String },
    /// A fetch failed (refused, timeout, HTTP status, body too large...).
    ScrapeFailed { instance: usize, at: f64, error: String },
    /// `/v1/models` answered, after a (re)connect.
    Models { instance: usize, at: f64, info: ModelInfo },
    /// The clock moved (ages on screen depend on it).
    Tick { at: f64 },
    /// A collector task ended unexpectedly (a panic is caught and reported).
    SourceFailed { source: String, at: f64, error: String },
    /// New lines from a tailed log, and how the file is doing.
    LogLines { source: Source, at: f64, lines: Vec<String>, state: TailState, counts: TailCounts },
}

/// What `/v1/models` says about an instance.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct ModelInfo {
    pub id: String,
    pub root: Option<String>,
    pub max_model_len: Option<u64>,
}

/// One instance to watch.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    pub role: Role,
    /// As the user wrote it (`127.0.0.1:8100`), for display.
    pub display: String,
    /// Base URL without a trailing slash (`http://127.0.0.1:8100`).
    pub base_url: String,
}

impl Endpoint {
    /// Accepts `host:port` (as vLLM's demo proxy takes it) or a full URL.
    pub fn parse(role: Role, s: &str) -> Result<Endpoint, String> {
        let s = s.trim();
        if s.is_empty() {
            return Err("empty endpoint".into());
        }
        let base = if s.starts_with("http://") || s.starts_with("https://") {
            s.trim_end_matches('/').trim_end_matches("/metrics").to_string()
        } else if s.contains("://") {
            return Err(format!("{s}: only http:// and https:// are supported"));
        } else {
            if !s.contains(':') {
                return Err(format!("{s}: expected HOST:PORT or a URL"));
            }
            format!("http://{}", s.trim_end_matches('/'))
        };
        let display = base.trim_start_matches("http://").trim_start_matches("https://").to_string();
        Ok(Endpoint { role, display, base_url: base })
    }
}

/// Starts one scraper per endpoint on the current runtime, each under a
/// supervisor: a collector that panics becomes a [`Msg::SourceFailed`] (an
/// error state on screen), never a torn terminal or a silent stop.
pub fn spawn_scrapers(
    endpoints: &[Endpoint],
    opts: &scrape::ScrapeOptions,
    clock: std::sync::Arc<dyn crate::clock::Clock>,
    tx: tokio::sync::mpsc::Sender<Msg>,
) -> Result<(), String> {
    let client = scrape::http_client(opts.timeout)?;
    for (i, ep) in endpoints.iter().enumerate() {
        let task =
            tokio::spawn(scrape::run(i, ep.clone(), client.clone(), opts.clone(), clock.clone(), tx.clone()));
        supervise(format!("scraper {}", ep.display), task, clock.clone(), tx.clone());
    }
    Ok(())
}

/// Starts one tailer per log (`-` is stdin), each under a supervisor.
pub fn spawn_log_tailers(
    logs: &[(Source, String)],
    interval: std::time::Duration,
    clock: std::sync::Arc<dyn crate::clock::Clock>,
    tx: tokio::sync::mpsc::Sender<Msg>,
) {
    for (source, path) in logs.iter().cloned() {
        let (btx, mut brx) = tokio::sync::mpsc::channel(64);
        let task = tokio::spawn(async move {
            logtail::run_source(&path, logtail::TailOptions::default(), interval, btx).await;
        });
        supervise(format!("log {source}"), task, clock.clone(), tx.clone());
        let (clock, tx) = (clock.clone(), tx.clone());
        tokio::spawn(async move {
            while let Some(b) = brx.recv().await {
                let msg = Msg::LogLines {
                    source,
                    at: clock.now(),
                    lines: b.lines,
                    state: b.state,
                    counts: b.counts,
                };
                if tx.send(msg).await.is_err() {
                    return;
                }
            }
        });
    }
}

/// Reports a task that ended by panicking.
pub fn supervise(
    name: String,
    task: tokio::task::JoinHandle<()>,
    clock: std::sync::Arc<dyn crate::clock::Clock>,
    tx: tokio::sync::mpsc::Sender<Msg>,
) {
    tokio::spawn(async move {
        if let Err(e) = task.await
            && e.is_panic()
        {
            let payload = e.into_panic();
            let error = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panicked".into());
            let _ = tx
                .send(Msg::SourceFailed { source: name, at: clock.now(), error: format!("stopped: {error}") })
                .await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_from_host_port_and_urls() {
        let e = Endpoint::parse(Role::Prefill, "127.0.0.1:8100").unwrap();
        assert_eq!(e.base_url, "http://127.0.0.1:8100");
        assert_eq!(e.display, "127.0.0.1:8100");
        let e = Endpoint::parse(Role::Decode, "https://gw.example/v/metrics").unwrap();
        assert_eq!(e.base_url, "https://gw.example/v");
        assert!(Endpoint::parse(Role::Decode, "localhost").is_err());
        assert!(Endpoint::parse(Role::Decode, "ftp://x:1").is_err());
    }
}
