//! The server's HTTP query API: the PromQL pdtop asks, the requests that
//! carry it (queries by POST, the target list by GET), and their answers.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::options::{Auth, PromOptions};
use crate::sources::scrape::describe;

/// An answer larger than this is refused (64 instances are ~5 MB).
const MAX_BODY_BYTES: usize = 256 * 1024 * 1024;

/// The raw samples of one role's instances over the last `window`.
pub fn window_query(inner: &str, window: Duration) -> String {
    let ms = window.as_millis().max(1);
    format!("{{__name__=~\"vllm:.+|process_start_time_seconds|up\",{inner}}}[{ms}ms]")
}

/// Each instance of a role with the time of its latest scrape.
pub fn discovery_query(inner: &str) -> String {
    format!("timestamp(up{{{inner}}})")
}

#[derive(Debug, Deserialize)]
struct ApiResponse {
    status: String,
    #[serde(default)]
    data: Option<ApiData>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum ApiData {
    Result {
        #[serde(rename = "resultType")]
        _result_type: String,
        result: Vec<Series>,
    },
    Targets {
        #[serde(rename = "activeTargets", default)]
        active_targets: Vec<Target>,
    },
}

/// One series of a vector (`value`) or matrix (`values`) answer.
#[derive(Debug, Default, Deserialize)]
pub struct Series {
    pub metric: BTreeMap<String, String>,
    #[serde(default)]
    pub value: Option<(f64, String)>,
    #[serde(default)]
    pub values: Vec<(f64, String)>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Target {
    #[serde(default)]
    pub(super) labels: BTreeMap<String, String>,
    #[serde(default, rename = "lastError")]
    pub(super) last_error: String,
}

pub(super) fn decode(body: &[u8]) -> Result<ApiData, String> {
    let r: ApiResponse =
        serde_json::from_slice(body).map_err(|e| format!("not a Prometheus API answer: {e}"))?;
    if r.status != "success" {
        return Err(format!(
            "{}: {}",
            r.error_type.as_deref().unwrap_or("error"),
            r.error.as_deref().unwrap_or("no error text")
        ));
    }
    r.data.ok_or_else(|| "answer without data".to_string())
}

pub(super) fn parse_sample_value(s: &str) -> Option<f64> {
    match s {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ => s.parse().ok(),
    }
}

/// Seconds (as the API writes them, millisecond precision) to exact
/// milliseconds, so samples of one scrape group together.
pub(super) fn ms(ts: f64) -> i64 {
    (ts * 1000.0).round() as i64
}

/// `/api/v1/query` by POST (a fleet's matchers can be long for a URL).
pub(super) async fn query(
    client: &reqwest::Client,
    opts: &PromOptions,
    promql: &str,
) -> Result<Vec<Series>, String> {
    let body = format!("query={}", form_encode(promql));
    let req = client
        .post(format!("{}/api/v1/query", opts.url))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body);
    match decode(&send(req, opts).await?)? {
        ApiData::Result { result, .. } => Ok(result),
        ApiData::Targets { .. } => Err("unexpected answer to a query".into()),
    }
}

/// `lastError` of each active target, by `instance` label.
pub(super) async fn target_errors(
    client: &reqwest::Client,
    opts: &PromOptions,
) -> Result<BTreeMap<String, String>, String> {
    let req = client.get(format!("{}/api/v1/targets?state=active", opts.url));
    match decode(&send(req, opts).await?)? {
        ApiData::Targets { active_targets } => Ok(active_targets
            .into_iter()
            .filter_map(|t| Some((t.labels.get("instance")?.clone(), t.last_error)))
            .collect()),
        ApiData::Result { .. } => Err("unexpected answer from /api/v1/targets".into()),
    }
}

async fn send(req: reqwest::RequestBuilder, opts: &PromOptions) -> Result<Vec<u8>, String> {
    let req = match &opts.auth {
        Auth::None => req,
        Auth::Basic { user, password } => req.basic_auth(user, Some(password)),
        Auth::Bearer(token) => req.bearer_auth(token),
    };
    let mut resp = req.send().await.map_err(|e| describe(&e))?;
    let status = resp.status();
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| describe(&e))? {
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(format!("answer larger than {} MiB", MAX_BODY_BYTES >> 20));
        }
        body.extend_from_slice(&chunk);
    }
    // The API answers errors with a JSON body that says what is wrong
    // (400 bad_data: a matcher it cannot parse); keep that text.
    if !status.is_success() {
        return Err(match decode(&body) {
            Err(e) if !e.starts_with("not a Prometheus") => format!("HTTP {status}: {e}"),
            _ => format!("HTTP {status}"),
        });
    }
    Ok(body)
}

/// `application/x-www-form-urlencoded` for one value.
pub(super) fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => out.push(b as char),
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}
