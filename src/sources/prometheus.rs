//! A Prometheus server as the source: the fleet read through the server
//! that already scrapes it (or anything that speaks its query API: Thanos,
//! Mimir, VictoriaMetrics), one request per role per refresh instead of one
//! connection per instance.
//!
//! The collector asks for the *raw samples* of each watched instance since
//! its last refresh (`{__name__=~"vllm:.+|process_start_time_seconds|up",
//! <matcher>}[<window>]`), groups them by the `instance` label and by
//! sample timestamp (every series of one server scrape shares its
//! timestamp, and TSDB isolation makes a scrape visible whole or not at
//! all), and re-renders each group as the exposition text that instance
//! served. Each group becomes a [`Msg::Scrape`], so deltas, histograms,
//! restarts, the miss detector, the screen and the report work unchanged,
//! at the server's scrape resolution. Why not `increase(...[60s])`:
//! Prometheus extrapolates `increase` to the window's edges (fractional
//! request counts the miss detector cannot reason with), hides counter
//! resets (pdtop reports restarts), and would need one query per family.
//!
//! Health: a group whose `up` is 0 is a failed server scrape, reported with
//! the `lastError` of `/api/v1/targets`; an instance with no sample for
//! [`STALE_SCRAPES`] of its scrape intervals is stale (the server stopped
//! scraping it, or the server itself is unreachable). Instances are found
//! by `timestamp(up{<matcher>})` at start and every [`REDISCOVER`], and by
//! any sample of a new `instance` in a refresh: the set is dynamic.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use tokio::sync::mpsc::Sender;

use super::{Endpoint, Msg, scrape};
use crate::clock::Clock;
use crate::feed::Role;

/// Environment variable holding a bearer token for the server.
pub const TOKEN_ENV: &str = "PDTOP_PROMETHEUS_TOKEN";
/// Environment variable holding the basic-auth password (`--prometheus-user`).
pub const PASSWORD_ENV: &str = "PDTOP_PROMETHEUS_PASSWORD";
/// How often the instance list is asked for again (new instances also
/// appear as soon as a refresh carries one of their samples).
pub const REDISCOVER: Duration = Duration::from_secs(30);
/// An instance is stale after this many of its scrape intervals without a
/// sample (the server stopped scraping it, or cannot be reached).
pub const STALE_SCRAPES: f64 = 3.0;
/// The longest window asked for after a gap: bounds the answer after a long
/// outage. Samples skipped by the cap only make one interval longer: the
/// counters are cumulative, so no delta is lost.
const MAX_WINDOW: Duration = Duration::from_secs(600);
/// An answer larger than this is refused (64 instances are ~5 MB).
const MAX_BODY_BYTES: usize = 256 * 1024 * 1024;
/// Labels the server adds to every series of a target: not part of what
/// the instance served.
const TARGET_LABELS: [&str; 2] = ["instance", "job"];

#[derive(Debug, Clone, PartialEq)]
pub enum Auth {
    None,
    Basic { user: String, password: String },
    Bearer(String),
}

#[derive(Debug, Clone)]
pub struct PromOptions {
    /// API base without a trailing slash and without credentials
    /// (`http://prom:9090`, `https://mimir.example/prometheus`).
    pub url: String,
    pub auth: Auth,
    /// Each role and the inside of its label matcher (`job="vllm-prefill"`).
    pub roles: Vec<(Role, String)>,
    /// Between refreshes (real time).
    pub interval: Duration,
    pub timeout: Duration,
    /// The speed of pdtop's clock against real time (a sped-up lab), to
    /// place the server's real timestamps on it.
    pub clock_speed: f64,
}

impl PromOptions {
    /// From the command line; `None` without `--prometheus`. Secrets come
    /// from the environment (argv is visible to every user of the host).
    pub fn from_inputs(
        inputs: &crate::cli::Inputs,
        interval: Duration,
        timeout: Duration,
    ) -> Result<Option<PromOptions>, String> {
        let Some(url) = &inputs.prometheus else {
            return Ok(None);
        };
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let (url, url_auth) = parse_url(url)?;
        let auth = match (&inputs.prometheus_user, env(TOKEN_ENV)) {
            (Some(user), _) => {
                Auth::Basic { user: user.clone(), password: env(PASSWORD_ENV).unwrap_or_default() }
            }
            (None, Some(token)) => Auth::Bearer(token),
            (None, None) => url_auth,
        };
        let mut roles = Vec::new();
        for (role, m) in [(Role::Prefill, &inputs.prefill_match), (Role::Decode, &inputs.decode_match)] {
            if let Some(m) = m {
                roles.push((role, matcher_inner(m)?));
            }
        }
        if roles.is_empty() {
            return Err("with --prometheus, give --prefill-match and/or --decode-match, e.g. \
                        --prefill-match '{job=\"vllm-prefill\"}'"
                .into());
        }
        let clock_speed = inputs.clock_speed.filter(|s| s.is_finite() && *s > 0.0).unwrap_or(1.0);
        Ok(Some(PromOptions { url, auth, roles, interval, timeout, clock_speed }))
    }
}

/// Splits credentials out of `http://user:pass@host:9090/prefix`, so that
/// the URL pdtop keeps (and may print in an error) never holds them.
pub fn parse_url(s: &str) -> Result<(String, Auth), String> {
    let s = s.trim().trim_end_matches('/');
    let (scheme, rest) = s
        .split_once("://")
        .filter(|(sc, _)| *sc == "http" || *sc == "https")
        .ok_or_else(|| "--prometheus: give an http:// or https:// URL".to_string())?;
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let (auth, host) = match authority.rsplit_once('@') {
        Some((cred, host)) => {
            let (user, password) = cred.split_once(':').unwrap_or((cred, ""));
            (Auth::Basic { user: user.to_string(), password: password.to_string() }, host)
        }
        None => (Auth::None, authority),
    };
    if host.is_empty() {
        return Err("--prometheus: the URL has no host".into());
    }
    Ok((format!("{scheme}://{host}{path}"), auth))
}

/// The inside of a label matcher: `{job="x"}` and `job="x"` both give
/// `job="x"`, ready to be joined with pdtop's own matchers. The server
/// judges the syntax (and says what is wrong).
pub fn matcher_inner(s: &str) -> Result<String, String> {
    let t = s.trim();
    let inner = match t.strip_prefix('{') {
        Some(rest) => rest.strip_suffix('}').ok_or_else(|| format!("{s}: a matcher ends with }}"))?,
        None => t,
    }
    .trim()
    .trim_end_matches(',');
    if inner.is_empty() || !inner.contains('=') && !inner.contains('~') {
        return Err(format!("{s}: expected a label matcher such as {{job=\"vllm-prefill\"}}"));
    }
    Ok(inner.to_string())
}

/// The raw samples of one role's instances over the last `window`.
pub fn window_query(inner: &str, window: Duration) -> String {
    let ms = window.as_millis().max(1);
    format!("{{__name__=~\"vllm:.+|process_start_time_seconds|up\",{inner}}}[{ms}ms]")
}

/// Each instance of a role with the time of its latest scrape.
pub fn discovery_query(inner: &str) -> String {
    format!("timestamp(up{{{inner}}})")
}

// ---------------------------------------------------------------------------
// The query API's answers.

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
enum ApiData {
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
struct Target {
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default, rename = "lastError")]
    last_error: String,
}

fn decode(body: &[u8]) -> Result<ApiData, String> {
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

fn parse_sample_value(s: &str) -> Option<f64> {
    match s {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ => s.parse().ok(),
    }
}

/// Seconds (as the API writes them, millisecond precision) to exact
/// milliseconds, so samples of one scrape group together.
fn ms(ts: f64) -> i64 {
    (ts * 1000.0).round() as i64
}

// ---------------------------------------------------------------------------
// The tracker: pure bookkeeping, answers in, what to tell the state out.

/// What the tracker wants said to the state.
#[derive(Debug, Clone, PartialEq)]
pub enum Out {
    /// A new instance, with the index the state will give it.
    Discovered { index: usize, endpoint: Endpoint },
    /// One server scrape, re-rendered as exposition text.
    Scrape { index: usize, ts_ms: i64, body: String },
    /// The server's scrape failed (`up == 0`); the error is filled in from
    /// `/api/v1/targets`.
    Down { index: usize, ts_ms: i64, instance: String },
    /// No sample for too long.
    Stale { index: usize, age_s: f64 },
    /// The served model, from the series' `model_name` label (what
    /// `/v1/models` would say; the server cannot be asked for that).
    Model { index: usize, name: String },
    /// Something the user should know (a misconfiguration).
    Warn(String),
}

#[derive(Debug, Clone)]
struct Watched {
    index: usize,
    role: Role,
    /// The job whose series are used (two jobs scraping one target would
    /// double every counter).
    job: Option<String>,
    /// The newest server scrape fed to the state.
    last_fed: Option<i64>,
    /// The newest sample seen (discovery included).
    newest: Option<i64>,
    /// The latest gap between two scrapes: the server's scrape interval.
    gap_ms: Option<i64>,
    stale: bool,
    model_told: bool,
}

#[derive(Debug, Default)]
pub struct Tracker {
    /// By `instance` label.
    watched: BTreeMap<String, Watched>,
    next_index: usize,
    warned: BTreeSet<String>,
}

/// One server scrape of one instance, being rebuilt.
#[derive(Default)]
struct Group {
    text: String,
    up: Option<f64>,
    samples: usize,
}

impl Tracker {
    /// `first_index`: the index the state gives the first new instance.
    pub fn new(first_index: usize) -> Tracker {
        Tracker { next_index: first_index, ..Default::default() }
    }

    pub fn len(&self) -> usize {
        self.watched.len()
    }

    pub fn is_empty(&self) -> bool {
        self.watched.is_empty()
    }

    /// The entry for an instance seen under `role`, new or known; `None`
    /// when it belongs to the other role (told once).
    fn entry(
        &mut self,
        role: Role,
        instance: &str,
        job: Option<&str>,
        out: &mut Vec<Out>,
    ) -> Option<&mut Watched> {
        if !self.watched.contains_key(instance) {
            let index = self.next_index;
            self.next_index += 1;
            let base_url =
                if instance.contains("://") { instance.to_string() } else { format!("http://{instance}") };
            let endpoint = Endpoint { role, display: instance.to_string(), base_url };
            out.push(Out::Discovered { index, endpoint });
            self.watched.insert(
                instance.to_string(),
                Watched {
                    index,
                    role,
                    job: job.map(str::to_owned),
                    last_fed: None,
                    newest: None,
                    gap_ms: None,
                    stale: false,
                    model_told: false,
                },
            );
        }
        let w = self.watched.get_mut(instance)?;
        if w.role != role {
            if self.warned.insert(instance.to_string()) {
                out.push(Out::Warn(format!(
                    "{instance} matches both --prefill-match and --decode-match; watched as {}",
                    w.role.name()
                )));
            }
            return None;
        }
        Some(w)
    }

    /// Takes `timestamp(up{...})`: every instance of the role and the time
    /// of its latest scrape.
    pub fn on_discovery(&mut self, role: Role, mut series: Vec<Series>) -> Vec<Out> {
        let mut out = Vec::new();
        // Stable indices: the same fleet gets the same order every time.
        series.sort_by(|a, b| a.metric.get("instance").cmp(&b.metric.get("instance")));
        for s in series {
            let Some(instance) = s.metric.get("instance") else {
                continue;
            };
            let job = s.metric.get("job").map(String::as_str);
            let ts = s.value.as_ref().and_then(|(_, v)| parse_sample_value(v)).filter(|v| v.is_finite());
            if let Some(w) = self.entry(role, instance, job, &mut out)
                && w.job.as_deref() == job
                && let Some(ts) = ts
            {
                w.newest = w.newest.max(Some(ms(ts)));
            }
        }
        out
    }

    /// Takes the raw samples of a role's instances over a window and says
    /// which server scrapes are new, oldest first per instance.
    pub fn on_window(&mut self, role: Role, mut series: Vec<Series>) -> Vec<Out> {
        let mut out = Vec::new();
        series.sort_by(|a, b| {
            (a.metric.get("instance"), a.metric.get("job"))
                .cmp(&(b.metric.get("instance"), b.metric.get("job")))
        });
        // instance -> scrape time -> the rebuilt text.
        let mut groups: BTreeMap<String, BTreeMap<i64, Group>> = BTreeMap::new();
        for s in &series {
            let Some(instance) = s.metric.get("instance") else {
                continue;
            };
            let job = s.metric.get("job").map(String::as_str);
            let Some(w) = self.entry(role, instance, job, &mut out) else {
                continue;
            };
            if w.job.is_none() {
                w.job = job.map(str::to_owned);
            }
            if w.job.as_deref() != job {
                continue;
            }
            let last_fed = w.last_fed;
            if !w.model_told
                && let Some(model) = s.metric.get("model_name")
            {
                w.model_told = true;
                out.push(Out::Model { index: w.index, name: model.clone() });
            }
            let Some(name) = s.metric.get("__name__") else {
                continue;
            };
            let per_ts = groups.entry(instance.clone()).or_default();
            let prefix = if name == "up" { None } else { render_prefix(name, &s.metric) };
            for (t, v) in &s.values {
                let ts = ms(*t);
                if last_fed.is_some_and(|f| ts <= f) {
                    continue;
                }
                let g = per_ts.entry(ts).or_default();
                if name == "up" {
                    g.up = parse_sample_value(v);
                    continue;
                }
                let Some(prefix) = &prefix else {
                    continue;
                };
                g.text.push_str(prefix);
                g.text.push_str(v);
                g.text.push('\n');
                g.samples += 1;
            }
        }
        for (instance, per_ts) in groups {
            let Some(w) = self.watched.get_mut(&instance) else {
                continue;
            };
            // The first sight of an instance is its baseline: only its
            // newest scrape, as a direct scraper's first fetch would be.
            let skip = if w.last_fed.is_none() { per_ts.len().saturating_sub(1) } else { 0 };
            for (ts, g) in per_ts.into_iter().skip(skip) {
                if let Some(prev) = w.newest.filter(|p| *p < ts) {
                    w.gap_ms = Some(ts - prev);
                }
                w.newest = w.newest.max(Some(ts));
                w.last_fed = Some(ts);
                w.stale = false;
                // A group without `up` (a rule or federation dropped it) is
                // taken as a good scrape when it holds samples.
                match g.up {
                    Some(up) if up < 0.5 => {
                        out.push(Out::Down { index: w.index, ts_ms: ts, instance: instance.clone() })
                    }
                    _ if g.samples == 0 && g.up.is_none() => {}
                    _ => out.push(Out::Scrape { index: w.index, ts_ms: ts, body: g.text }),
                }
            }
        }
        out
    }

    /// Instances with no sample for [`STALE_SCRAPES`] of their intervals
    /// (at least `min_interval`), each told once per outage.
    pub fn stale(&mut self, server_now_ms: i64, min_interval: Duration) -> Vec<Out> {
        let mut out = Vec::new();
        let floor = min_interval.as_millis() as i64;
        for w in self.watched.values_mut() {
            let Some(newest) = w.newest else {
                continue;
            };
            let gap = w.gap_ms.unwrap_or(floor).max(floor);
            let age = server_now_ms - newest;
            if !w.stale && age as f64 > STALE_SCRAPES * gap as f64 {
                w.stale = true;
                out.push(Out::Stale { index: w.index, age_s: age as f64 / 1000.0 });
            }
        }
        out
    }
}

/// `name{labels} ` for one series, without the target's own labels;
/// `None` for a name the text format cannot carry (UTF-8 names of
/// Prometheus 3).
fn render_prefix(name: &str, labels: &BTreeMap<String, String>) -> Option<String> {
    let legal = |s: &str, colon: bool| {
        let mut chars = s.chars();
        chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || colon && c == ':')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || colon && c == ':')
    };
    if !legal(name, true) {
        return None;
    }
    let mut out = String::with_capacity(name.len() + 64);
    out.push_str(name);
    let mut first = true;
    for (k, v) in labels {
        if k == "__name__" || TARGET_LABELS.contains(&k.as_str()) || !legal(k, false) {
            continue;
        }
        out.push(if first { '{' } else { ',' });
        first = false;
        out.push_str(k);
        out.push_str("=\"");
        for c in v.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    if !first {
        out.push('}');
    }
    out.push(' ');
    Some(out)
}

// ---------------------------------------------------------------------------
// The collector.

/// Starts the collector on the current runtime, under a supervisor.
/// `first_index`: the state's instance count when it starts.
pub fn spawn(
    opts: PromOptions,
    first_index: usize,
    clock: Arc<dyn Clock>,
    tx: Sender<Msg>,
) -> Result<(), String> {
    let client = scrape::http_client(opts.timeout)?;
    let name = format!("prometheus {}", opts.url);
    let task = tokio::spawn(run(opts, first_index, client, clock.clone(), tx.clone()));
    super::supervise(name, task, clock, tx);
    Ok(())
}

fn real_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// Refreshes until the receiver is gone.
async fn run(
    opts: PromOptions,
    first_index: usize,
    client: reqwest::Client,
    clock: Arc<dyn Clock>,
    tx: Sender<Msg>,
) {
    let mut tracker = Tracker::new(first_index);
    // The server's clock minus ours: sample times are the server's.
    let mut offset = 0.0;
    let mut last_discovery: Option<Instant> = None;
    let mut last_ok: Option<Instant> = None;
    let mut failures = 0u32;
    let mut last_error: Option<String> = None;
    // Samples are committed when a scrape ends, stamped when it began: the
    // window reaches back this much more than the time since the last
    // refresh, so a scrape in flight during a refresh is caught next time.
    let margin = opts.interval.max(Duration::from_secs(1));
    loop {
        let started = Instant::now();
        let mut outs = Vec::new();
        let mut error = None;
        if last_discovery.is_none_or(|t| t.elapsed() >= REDISCOVER) {
            let mut ok = true;
            for (role, inner) in &opts.roles {
                let sent = real_now();
                match query(&client, &opts, &discovery_query(inner)).await {
                    Ok(series) => {
                        let got = real_now();
                        if let Some((eval, _)) = series.first().and_then(|s| s.value.as_ref()) {
                            offset = eval - (sent + got) / 2.0;
                        }
                        outs.extend(tracker.on_discovery(*role, series));
                    }
                    Err(e) => {
                        ok = false;
                        error = Some(e);
                    }
                }
            }
            if ok {
                last_discovery = Some(Instant::now());
            }
        }
        let window = last_ok.map_or(margin, |t| t.elapsed() + margin).min(MAX_WINDOW);
        let refreshed = Instant::now();
        let mut ok = true;
        for (role, inner) in &opts.roles {
            match query(&client, &opts, &window_query(inner, window)).await {
                Ok(series) => outs.extend(tracker.on_window(*role, series)),
                Err(e) => {
                    ok = false;
                    error = Some(e);
                }
            }
        }
        if ok {
            last_ok = Some(refreshed);
        }
        let server_now = real_now() + offset;
        let stale_floor = opts.interval.max(Duration::from_secs(1));
        outs.extend(tracker.stale(ms(server_now), stale_floor));

        // The scrape errors, only when some scrape failed.
        let errors = if outs.iter().any(|o| matches!(o, Out::Down { .. })) {
            target_errors(&client, &opts).await.unwrap_or_default()
        } else {
            BTreeMap::new()
        };
        let at_of = |ts_ms: i64| {
            let now = clock.now();
            let age = (server_now - ts_ms as f64 / 1000.0).max(0.0);
            now - age * opts.clock_speed
        };
        for o in outs {
            let msg = match o {
                Out::Discovered { index, endpoint } => {
                    Msg::Discovered { instance: index, at: clock.now(), endpoint }
                }
                Out::Scrape { index, ts_ms, body } => Msg::Scrape { instance: index, at: at_of(ts_ms), body },
                Out::Down { index, ts_ms, instance } => {
                    let error = errors
                        .get(&instance)
                        .filter(|e| !e.is_empty())
                        .cloned()
                        .unwrap_or_else(|| "down (up == 0 in Prometheus)".into());
                    Msg::ScrapeFailed { instance: index, at: at_of(ts_ms), error }
                }
                Out::Stale { index, age_s } => {
                    let why = match &error {
                        Some(e) => format!("Prometheus unreachable: {e}"),
                        None => "the server stopped scraping it".into(),
                    };
                    let error = format!("no sample in Prometheus for {age_s:.0}s ({why})");
                    Msg::ScrapeFailed { instance: index, at: clock.now(), error }
                }
                Out::Model { index, name } => {
                    let info = crate::feed::ModelInfo {
                        id: name,
                        root: None,
                        max_model_len: None,
                        config_json: None,
                    };
                    Msg::Models { instance: index, at: clock.now(), info }
                }
                Out::Warn(text) => {
                    Msg::SourceFailed { source: "prometheus".into(), at: clock.now(), error: text }
                }
            };
            if tx.send(msg).await.is_err() {
                return;
            }
        }
        match error {
            Some(e) => {
                failures += 1;
                // Told once per kind of trouble, not at every refresh.
                if last_error.as_ref() != Some(&e) {
                    let msg = Msg::SourceFailed {
                        source: format!("prometheus {}", opts.url),
                        at: clock.now(),
                        error: e.clone(),
                    };
                    if tx.send(msg).await.is_err() {
                        return;
                    }
                    last_error = Some(e);
                }
            }
            None => {
                failures = 0;
                last_error = None;
            }
        }
        let wait = scrape::backoff(opts.interval, failures).saturating_sub(started.elapsed());
        clock.sleep(wait).await;
    }
}

/// `/api/v1/query` by POST (a fleet's matchers can be long for a URL).
async fn query(client: &reqwest::Client, opts: &PromOptions, promql: &str) -> Result<Vec<Series>, String> {
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
async fn target_errors(
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
    let mut resp = req.send().await.map_err(|e| super::scrape::describe(&e))?;
    let status = resp.status();
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| super::scrape::describe(&e))? {
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
fn form_encode(s: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn series(labels: &[(&str, &str)], values: &[(f64, &str)]) -> Series {
        Series {
            metric: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            value: None,
            values: values.iter().map(|(t, v)| (*t, v.to_string())).collect(),
        }
    }

    fn target(name: &str, inst: &str, extra: &[(&str, &str)]) -> Vec<(&'static str, String)> {
        let mut v: Vec<(&'static str, String)> = vec![
            ("__name__", name.to_string()),
            ("instance", inst.to_string()),
            ("job", "vllm-decode".into()),
        ];
        for (k, val) in extra {
            v.push((Box::leak(k.to_string().into_boxed_str()), val.to_string()));
        }
        v
    }

    fn s(labels: Vec<(&'static str, String)>, values: &[(f64, &str)]) -> Series {
        let l: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
        series(&l, values)
    }

    #[test]
    fn matchers_and_urls() {
        assert_eq!(matcher_inner(r#"{job="vllm-prefill"}"#).unwrap(), r#"job="vllm-prefill""#);
        assert_eq!(matcher_inner(r#" job=~"p.*", env="lab" "#).unwrap(), r#"job=~"p.*", env="lab""#);
        assert!(matcher_inner("{}").is_err());
        assert!(matcher_inner("vllm").is_err());
        assert!(matcher_inner(r#"{job="x""#).is_err());
        assert_eq!(
            window_query(r#"job="d""#, Duration::from_millis(2500)),
            r#"{__name__=~"vllm:.+|process_start_time_seconds|up",job="d"}[2500ms]"#
        );
        let (u, a) = parse_url("https://bob:s3cret@mimir.example/prometheus/").unwrap();
        assert_eq!(u, "https://mimir.example/prometheus");
        assert_eq!(a, Auth::Basic { user: "bob".into(), password: "s3cret".into() });
        assert_eq!(parse_url("http://127.0.0.1:9090").unwrap(), ("http://127.0.0.1:9090".into(), Auth::None));
        assert!(parse_url("127.0.0.1:9090").is_err());
        assert!(parse_url("http://").is_err());
        assert_eq!(form_encode(r#"{a="b c"}[1ms]"#), "%7Ba%3D%22b+c%22%7D%5B1ms%5D");
    }

    #[test]
    fn groups_by_scrape_and_renders_exposition_text() {
        let mut t = Tracker::new(0);
        let a = "10.0.0.1:8200";
        let win = vec![
            s(target("up", a, &[]), &[(100.0, "1"), (101.0, "1")]),
            s(
                target("vllm:num_requests_running", a, &[("model_name", "m\"x")]),
                &[(100.0, "1"), (101.0, "2")],
            ),
            s(
                target("vllm:time_to_first_token_seconds_bucket", a, &[("le", "+Inf"), ("model_name", "m")]),
                &[(100.0, "3"), (101.0, "NaN")],
            ),
        ];
        let out = t.on_window(Role::Decode, win);
        // First sight: discovered, then only the newest scrape as baseline.
        assert!(
            matches!(&out[0], Out::Discovered { index: 0, endpoint } if endpoint.display == a && endpoint.role == Role::Decode)
        );
        assert_eq!(out.len(), 3, "{out:?}");
        assert!(matches!(&out[1], Out::Model { index: 0, name } if name == "m\"x"), "{out:?}");
        let Out::Scrape { index: 0, ts_ms: 101_000, body } = &out[2] else { panic!("{out:?}") };
        assert_eq!(
            body,
            "vllm:num_requests_running{model_name=\"m\\\"x\"} 2\n\
             vllm:time_to_first_token_seconds_bucket{le=\"+Inf\",model_name=\"m\"} NaN\n"
        );
        // The text reads back as pdtop reads an instance.
        let sample = crate::metrics::model::InstanceSample::from_text(body);
        assert_eq!(sample.running, Some(2.0));
        assert_eq!(sample.bad_lines, 0);

        // The next window overlaps: only the newer scrapes come out, in order.
        let win = vec![
            s(target("up", a, &[]), &[(101.0, "1"), (102.0, "1"), (103.0, "0")]),
            s(target("vllm:num_requests_running", a, &[]), &[(101.0, "2"), (102.0, "5")]),
        ];
        let out = t.on_window(Role::Decode, win);
        assert_eq!(out.len(), 2, "{out:?}");
        assert!(
            matches!(&out[0], Out::Scrape { ts_ms: 102_000, body, .. } if body == "vllm:num_requests_running 5\n")
        );
        assert!(matches!(&out[1], Out::Down { ts_ms: 103_000, instance, .. } if instance == a));
        // Nothing new: nothing out; stale only after three scrape intervals.
        assert!(t.on_window(Role::Decode, vec![]).is_empty());
        assert!(t.stale(105_000, Duration::from_secs(1)).is_empty());
        let st = t.stale(106_500, Duration::from_secs(1));
        assert!(matches!(st.as_slice(), [Out::Stale { index: 0, .. }]), "{st:?}");
        assert!(t.stale(107_000, Duration::from_secs(1)).is_empty(), "told once");
    }

    #[test]
    fn instances_get_stable_indices_and_one_role() {
        let mut t = Tracker::new(2);
        let disc = |inst: &str, ts: &str| Series {
            metric: [("instance", inst), ("job", "j")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            value: Some((200.0, ts.to_string())),
            values: vec![],
        };
        let out = t.on_discovery(Role::Prefill, vec![disc("b:1", "199.5"), disc("a:1", "199")]);
        let names: Vec<(usize, String)> = out
            .iter()
            .filter_map(|o| match o {
                Out::Discovered { index, endpoint } => Some((*index, endpoint.display.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(names, vec![(2, "a:1".to_string()), (3, "b:1".to_string())]);
        // Seen again by discovery: nothing new. Matched by the other role: a warning, once.
        assert!(t.on_discovery(Role::Prefill, vec![disc("a:1", "200")]).is_empty());
        let out = t.on_discovery(Role::Decode, vec![disc("a:1", "200"), disc("c:1", "200")]);
        assert!(matches!(&out[0], Out::Warn(w) if w.contains("a:1")));
        assert!(matches!(&out[1], Out::Discovered { index: 4, .. }));
        assert!(t.on_discovery(Role::Decode, vec![disc("a:1", "200")]).is_empty());
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn a_second_job_on_the_same_target_is_not_double_counted() {
        let mut t = Tracker::new(0);
        let mut other = target("vllm:num_requests_running", "h:1", &[]);
        other[2].1 = "zzz-other".into();
        let out = t.on_window(
            Role::Decode,
            vec![s(target("vllm:num_requests_running", "h:1", &[]), &[(1.0, "1")]), s(other, &[(1.0, "7")])],
        );
        assert!(
            matches!(&out[1], Out::Scrape { body, .. } if body == "vllm:num_requests_running 1\n"),
            "{out:?}"
        );
    }

    #[test]
    fn api_answers_and_errors() {
        let ok = br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"up","instance":"x:1"},"values":[[1700000000.123,"1"]]}]}}"#;
        let ApiData::Result { result, .. } = decode(ok).unwrap() else { panic!() };
        assert_eq!(ms(result[0].values[0].0), 1_700_000_000_123);
        let bad = br#"{"status":"error","errorType":"bad_data","error":"parse error"}"#;
        assert_eq!(decode(bad).unwrap_err(), "bad_data: parse error");
        assert!(decode(b"<html>").is_err());
        let targets = br#"{"status":"success","data":{"activeTargets":[{"labels":{"instance":"x:1","job":"j"},"lastError":"connection refused","health":"down"}],"droppedTargets":[]}}"#;
        let ApiData::Targets { active_targets } = decode(targets).unwrap() else { panic!() };
        assert_eq!(active_targets[0].last_error, "connection refused");
    }

    #[test]
    fn odd_names_and_values_never_panic() {
        let mut t = Tracker::new(0);
        let out = t.on_window(
            Role::Decode,
            vec![
                s(
                    target("vllm:ok", "h:1", &[("bad label", "v")]),
                    &[(1.0, "x"), (f64::NAN, "1"), (1e300, "1")],
                ),
                s(target("weird.name", "h:1", &[]), &[(1.0, "1")]),
                series(&[("__name__", "vllm:x")], &[(1.0, "1")]),
                series(&[("instance", "h:2")], &[(1.0, "1")]),
            ],
        );
        assert!(!out.is_empty());
    }
}
