//! The server's HTTP query API: the PromQL pdtop asks, the requests that
//! carry it (queries by POST, the target list by GET), and their answers.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::options::PromOptions;
use crate::feed::Role;
use crate::metrics::model::{HIST_SUFFIXES, read_names};
use crate::sources::http::{HttpClient, Request, status_error};

/// An answer larger than this is refused (64 instances are ~5 MB).
pub(super) const MAX_BODY_BYTES: usize = 256 * 1024 * 1024;

/// The label each role's discovery answer is marked with.
pub const ROLE_LABEL: &str = "pdtop_role";

/// The raw samples of the given instances (`instance` labels) over the last
/// `window`, from the given jobs (`None`: any). One selector for every
/// role: the discovery says which instance is which.
pub fn window_query<'a>(
    instances: impl IntoIterator<Item = &'a str>,
    jobs: Option<impl IntoIterator<Item = &'a str>>,
    window: Duration,
) -> String {
    let ms = window.as_millis().max(1);
    let mut q = format!("{{__name__=~\"{}\"", names_regex());
    if let Some(jobs) = jobs {
        q.push_str(",job=~\"");
        alternatives(&mut q, jobs);
        q.push('"');
    }
    q.push_str(",instance=~\"");
    alternatives(&mut q, instances);
    q.push_str(&format!("\"}}[{ms}ms]"));
    q
}

/// The series pdtop reads (a third of what vLLM serves) and `up`:
/// `up|name|…|(family|…)_(bucket|sum|count)`. Names hold only `[a-z_:]`,
/// nothing a regular expression treats specially.
pub(super) fn names_regex() -> &'static str {
    static REGEX: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    REGEX.get_or_init(|| {
        let names = read_names();
        let suffixes: Vec<&str> = HIST_SUFFIXES.iter().map(|s| s.trim_start_matches('_')).collect();
        format!("up|{}|({})_({})", names.plain.join("|"), names.hists.join("|"), suffixes.join("|"))
    })
}

/// `a|b|c` of literal values, as the inside of a PromQL string holding a
/// regular expression: each value's regex characters escaped, then the
/// string's (`\.` is written `\\.`).
fn alternatives<'a>(out: &mut String, values: impl IntoIterator<Item = &'a str>) {
    for (i, v) in values.into_iter().enumerate() {
        if i > 0 {
            out.push('|');
        }
        for c in v.chars() {
            match c {
                // A backslash is escaped twice over: `\\\\`.
                '\\' => out.push_str("\\\\\\\\"),
                '.' | '+' | '*' | '?' | '(' | ')' | '|' | '[' | ']' | '{' | '}' | '^' | '$' => {
                    out.push_str("\\\\");
                    out.push(c);
                }
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
    }
}

/// Every instance of every role with the time of its latest scrape, in one
/// query: each role's answer marked with [`ROLE_LABEL`].
pub fn discovery_query(roles: &[(Role, String)]) -> String {
    let parts: Vec<String> = roles
        .iter()
        .map(|(role, inner)| {
            format!("label_replace(timestamp(up{{{inner}}}),\"{ROLE_LABEL}\",\"{}\",\"\",\"\")", role.name())
        })
        .collect();
    parts.join(" or ")
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

/// The server's client: its URL, its credentials, large answers taken.
pub(super) fn client(opts: &PromOptions) -> Result<HttpClient, String> {
    Ok(HttpClient::new(&opts.url, opts.auth.clone())?.with_max_body(MAX_BODY_BYTES))
}

/// `/api/v1/query` by POST (a fleet's matchers can be long for a URL).
pub(super) async fn query(
    client: &mut HttpClient,
    opts: &PromOptions,
    promql: &str,
) -> Result<Vec<Series>, String> {
    let mut body = Vec::new();
    query_into(client, opts, promql, &mut body).await?;
    match decode(&body)? {
        ApiData::Result { result, .. } => Ok(result),
        ApiData::Targets { .. } => Err("unexpected answer to a query".into()),
    }
}

/// `/api/v1/query` by POST, its answer's body into `body` (a buffer kept
/// from one refresh to the next).
pub(super) async fn query_into(
    client: &mut HttpClient,
    opts: &PromOptions,
    promql: &str,
    body: &mut Vec<u8>,
) -> Result<(), String> {
    let form = format!("query={}", form_encode(promql));
    let req =
        Request { path: "/api/v1/query", form: Some(("application/x-www-form-urlencoded", form.as_bytes())) };
    send(client, req, opts, body).await
}

/// `lastError` of each active target, by `instance` label.
pub(super) async fn target_errors(
    client: &mut HttpClient,
    opts: &PromOptions,
) -> Result<BTreeMap<String, String>, String> {
    let mut body = Vec::new();
    send(client, Request::get("/api/v1/targets?state=active"), opts, &mut body).await?;
    match decode(&body)? {
        ApiData::Targets { active_targets } => Ok(active_targets
            .into_iter()
            .filter_map(|t| Some((t.labels.get("instance")?.clone(), t.last_error)))
            .collect()),
        ApiData::Result { .. } => Err("unexpected answer from /api/v1/targets".into()),
    }
}

async fn send(
    client: &mut HttpClient,
    req: Request<'_>,
    opts: &PromOptions,
    body: &mut Vec<u8>,
) -> Result<(), String> {
    let status = client.send(req, opts.timeout, body).await?;
    // The API answers errors with a JSON body that says what is wrong
    // (400 bad_data: a matcher it cannot parse); keep that text.
    if !(200..300).contains(&status) {
        return Err(match decode(body) {
            Err(e) if !e.starts_with("not a Prometheus") => format!("{}: {e}", status_error(status)),
            _ => status_error(status),
        });
    }
    Ok(())
}

/// `application/x-www-form-urlencoded` for one value.
pub(super) fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => out.push(b as char),
            b' ' => out.push('+'),
            _ => {
                const HEX: &[u8; 16] = b"0123456789ABCDEF";
                out.push('%');
                out.push(HEX[usize::from(b >> 4)] as char);
                out.push(HEX[usize::from(b & 15)] as char);
            }
        }
    }
    out
}
