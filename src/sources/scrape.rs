//! The `/metrics` scraper: one task per instance, GETs only.
//!
//! Each attempt ends in a [`Msg::Scrape`] or a [`Msg::ScrapeFailed`] with a
//! readable cause. After failures the next attempt waits longer, doubling
//! from the interval up to a cap, so a dead instance is not hammered but is
//! seen again within seconds of coming back. `/v1/models` and `/version`
//! are asked once per (re)connect.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::Sender;

use crate::clock::Clock;
use crate::feed::{Endpoint, ModelInfo, Msg};

use super::http::{Auth, HttpClient, STATUS_ERROR};
/// The longest wait between attempts while an instance is failing.
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// `/version` requests that got no answer before pdtop stops asking.
const VERSION_TRIES: u32 = 3;

#[derive(Debug, Clone)]
pub struct ScrapeOptions {
    pub interval: Duration,
    pub timeout: Duration,
    /// Sent as `Authorization: Bearer ...`; never printed.
    pub bearer_token: Option<String>,
}

/// Prefix of the per-endpoint token variables: `PDTOP_BEARER_TOKEN_<HOST>_<PORT>`.
pub const TOKEN_ENV_PREFIX: &str = "PDTOP_BEARER_TOKEN_";

/// The per-endpoint token variable's name: host and port upper-cased, every
/// other character `_` (`127.0.0.1:8100` → `PDTOP_BEARER_TOKEN_127_0_0_1_8100`,
/// `https://gw.example` → `PDTOP_BEARER_TOKEN_GW_EXAMPLE_443`). Environment
/// names cannot hold `.` or `:`, hence the mapping.
pub fn endpoint_token_var(endpoint: &Endpoint) -> String {
    let (scheme, rest) = endpoint.base_url.split_once("://").unwrap_or(("http", &endpoint.base_url));
    let authority = rest.split('/').next().unwrap_or_default();
    // An IPv6 literal keeps its colons inside brackets.
    let has_port = authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    let hostport = if has_port {
        authority.to_string()
    } else {
        format!("{authority}:{}", if scheme == "https" { 443 } else { 80 })
    };
    let key: String = hostport
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' })
        .collect();
    format!("{TOKEN_ENV_PREFIX}{key}")
}

/// The token for one endpoint: its own variable wins over the global one.
pub fn token_for(
    endpoint: &Endpoint,
    global: Option<&str>,
    lookup: impl Fn(&str) -> Option<String>,
) -> Option<String> {
    lookup(&endpoint_token_var(endpoint)).filter(|t| !t.is_empty()).or_else(|| global.map(str::to_owned))
}

/// The wait before the next attempt after `failures` consecutive failures.
pub fn backoff(interval: Duration, failures: u32) -> Duration {
    if failures == 0 {
        return interval;
    }
    // Capped at eight intervals (and 10 s), never below one interval.
    let cap = interval.saturating_mul(8).min(MAX_BACKOFF).max(interval);
    let factor = 1u32 << failures.min(8);
    interval.saturating_mul(factor).min(cap)
}

/// Scrapes one instance until the receiver is gone.
pub async fn run(
    instance: usize,
    endpoint: Endpoint,
    opts: ScrapeOptions,
    clock: Arc<dyn Clock>,
    tx: Sender<Msg>,
) {
    let mut http = match client(&endpoint, &opts) {
        Ok(c) => c,
        Err(error) => {
            let _ = tx.send(Msg::ScrapeFailed { instance, at: clock.now(), error }).await;
            return;
        }
    };
    let mut failures = 0u32;
    let mut need_models = true;
    let mut need_version = true;
    let mut version_tries = 0u32;
    loop {
        // Real time: the interval is a real wait even on a sped-up clock.
        let started = tokio::time::Instant::now();
        let msg = match http.get("/metrics", opts.timeout).await {
            Ok(body) => {
                failures = 0;
                Msg::Scrape { instance, at: clock.now(), body }
            }
            Err(error) => {
                failures += 1;
                need_models = true;
                need_version = true;
                version_tries = 0;
                Msg::ScrapeFailed { instance, at: clock.now(), error }
            }
        };
        let ok = matches!(msg, Msg::Scrape { .. });
        if tx.send(msg).await.is_err() {
            return;
        }
        #[cfg(debug_assertions)]
        if ok {
            test_panic_once();
        }
        if ok
            && need_models
            && let Ok(body) = http.get("/v1/models", opts.timeout).await
            && let Some(mut info) = parse_models(&body)
        {
            info.config_json = local_config(info.root.as_deref()).await;
            need_models = false;
            let msg = Msg::Models { instance, at: clock.now(), info };
            if tx.send(msg).await.is_err() {
                return;
            }
        }
        // Asked once per connect when the server answers: a server without
        // it (not vLLM, or an old one) is not asked every interval. A request
        // that got no answer at all (a timeout, a dropped connection) is
        // tried again on the next few scrapes, or one blip hides the version
        // until the next reconnect.
        if ok && need_version {
            version_tries += 1;
            let answer = http.get("/version", opts.timeout).await;
            let answered = answer.as_ref().map_or_else(|e| e.starts_with(STATUS_ERROR), |_| true);
            if answered || version_tries >= VERSION_TRIES {
                need_version = false;
                version_tries = 0;
            }
            if let Ok(body) = answer
                && let Some(version) = parse_version(&body)
                && tx.send(Msg::Version { instance, at: clock.now(), version }).await.is_err()
            {
                return;
            }
        }
        let spent = started.elapsed();
        let wait = backoff(opts.interval, failures).saturating_sub(spent);
        clock.sleep(wait).await;
    }
}

/// Test hook, debug builds only: with `PDTOP_TEST_PANIC_SCRAPER` set, the
/// first scraper to get a good scrape panics once, so the tests can watch a
/// collector panic become an error state (there is no other way to make
/// the real code panic on purpose). Release builds do not contain it.
#[cfg(debug_assertions)]
fn test_panic_once() {
    use std::sync::atomic::{AtomicBool, Ordering};
    static FIRED: AtomicBool = AtomicBool::new(false);
    if std::env::var_os("PDTOP_TEST_PANIC_SCRAPER").is_some() && !FIRED.swap(true, Ordering::SeqCst) {
        panic!("test hook PDTOP_TEST_PANIC_SCRAPER");
    }
}

/// The client for one instance, with its token.
pub fn client(endpoint: &Endpoint, opts: &ScrapeOptions) -> Result<HttpClient, String> {
    let auth = opts.bearer_token.clone().map_or(Auth::None, Auth::Bearer);
    HttpClient::new(&endpoint.base_url, auth)
}

/// The model's `config.json` when `/v1/models` names a local directory:
/// the KV arithmetic needs the model's shape.
async fn local_config(root: Option<&str>) -> Option<String> {
    let path = std::path::Path::new(root?).join("config.json");
    tokio::fs::read_to_string(path).await.ok()
}

/// Reads `/v1/models`: `{"data":[{"id":..,"root":..,"max_model_len":..}]}`.
pub fn parse_models(body: &str) -> Option<ModelInfo> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    let m = v.get("data")?.get(0)?;
    Some(ModelInfo {
        id: m.get("id")?.as_str()?.to_string(),
        root: m.get("root").and_then(|r| r.as_str()).map(str::to_owned),
        max_model_len: m.get("max_model_len").and_then(|x| x.as_u64()),
        config_json: None,
    })
}

/// Reads `/version`: `{"version":"0.26.0"}`.
pub fn parse_version(body: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    let version = v.get("version")?.as_str()?.trim();
    (!version.is_empty() && version.len() <= 64).then(|| version.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let i = Duration::from_secs(1);
        assert_eq!(backoff(i, 0), i);
        assert_eq!(backoff(i, 1), Duration::from_secs(2));
        assert_eq!(backoff(i, 3), Duration::from_secs(8));
        assert_eq!(backoff(i, 30), Duration::from_secs(8));
        assert_eq!(backoff(Duration::from_secs(2), 30), MAX_BACKOFF);
        // A long interval is never shortened by the cap.
        assert_eq!(backoff(Duration::from_secs(30), 2), Duration::from_secs(30));
    }

    #[test]
    fn per_endpoint_token_names() {
        use crate::feed::Role;
        let ep = |s| Endpoint::parse(Role::Decode, s).unwrap();
        assert_eq!(endpoint_token_var(&ep("127.0.0.1:8100")), "PDTOP_BEARER_TOKEN_127_0_0_1_8100");
        assert_eq!(endpoint_token_var(&ep("https://gw.example/v1")), "PDTOP_BEARER_TOKEN_GW_EXAMPLE_443");
        assert_eq!(endpoint_token_var(&ep("http://gw-a.lab")), "PDTOP_BEARER_TOKEN_GW_A_LAB_80");
        let lookup = |k: &str| (k == "PDTOP_BEARER_TOKEN_127_0_0_1_8100").then(|| "own".to_string());
        assert_eq!(token_for(&ep("127.0.0.1:8100"), Some("all"), lookup).as_deref(), Some("own"));
        assert_eq!(token_for(&ep("127.0.0.1:8200"), Some("all"), lookup).as_deref(), Some("all"));
        assert_eq!(token_for(&ep("127.0.0.1:8200"), None, lookup), None);
    }

    #[test]
    fn models_body() {
        let body = r#"{"object":"list","data":[{"id":"lab-8b","object":"model","root":"/models/x","max_model_len":8192}]}"#;
        let m = parse_models(body).unwrap();
        assert_eq!(m.id, "lab-8b");
        assert_eq!(m.root.as_deref(), Some("/models/x"));
        assert_eq!(m.max_model_len, Some(8192));
        assert!(parse_models("<html>").is_none());
    }

    #[test]
    fn version_body() {
        assert_eq!(parse_version(r#"{"version":"0.26.0"}"#).as_deref(), Some("0.26.0"));
        assert!(parse_version(r#"{"version":""}"#).is_none());
        assert!(parse_version(r#"{"version":5}"#).is_none());
        assert!(parse_version("not found").is_none());
    }
}
