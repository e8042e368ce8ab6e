//! The collector task: discovery and refreshes against the server, the
//! tracker's findings turned into messages stamped on pdtop's clock.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc::Sender;

use super::api::{ROLE_LABEL, client, discovery_query, ms, query, query_into, target_errors, window_query};
use super::options::PromOptions;
use super::tracker::{Out, Tracker};
use crate::clock::Clock;
use crate::feed::{ModelInfo, Msg};
use crate::sources::http::HttpClient;
use crate::sources::{scrape, supervise};

/// How often the instance list is asked for again: a new instance is
/// watched from the next discovery on (the data query names the known
/// instances).
pub const REDISCOVER: Duration = Duration::from_secs(10);
/// The longest window asked for after a gap: bounds the answer after a long
/// outage. Samples skipped by the cap only make one interval longer: the
/// counters are cumulative, so no delta is lost.
const MAX_WINDOW: Duration = Duration::from_secs(600);
/// How long the server's time read from one answer is kept when no answer
/// comes back faster.
const RETELL: Duration = Duration::from_secs(300);

/// Starts the collector on the current runtime, under a supervisor.
/// `first_index`: the state's instance count when it starts.
pub fn spawn(
    opts: PromOptions,
    first_index: usize,
    clock: Arc<dyn Clock>,
    tx: Sender<Msg>,
) -> Result<(), String> {
    let client = client(&opts)?;
    let name = format!("prometheus {}", opts.url);
    let task = tokio::spawn(run(opts, first_index, client, clock.clone(), tx.clone()));
    supervise(name, task, clock, tx);
    Ok(())
}

/// The server's time against pdtop's clock, from one pair of readings:
/// the server's time and pdtop's at the same moment. Sample times are the
/// server's (real seconds); pdtop's clock may be sped up (`speed` of its
/// seconds per real one). Only the injected clock is read through it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct ServerTime {
    server: f64,
    ours: f64,
    speed: f64,
}

impl ServerTime {
    /// Until the server has told its time: assume its clock is this host's.
    fn from_host(ours: f64, speed: f64) -> ServerTime {
        let host = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
        ServerTime { server: host, ours, speed }
    }

    /// The server evaluated a query at `eval` while pdtop's clock read
    /// `sent` and `got` around the request: the midpoint is taken as the
    /// same moment.
    pub(super) fn from_answer(eval: f64, sent: f64, got: f64, speed: f64) -> ServerTime {
        ServerTime { server: eval, ours: (sent + got) / 2.0, speed }
    }

    /// The server's time when pdtop's clock reads `ours`.
    pub(super) fn server_at(&self, ours: f64) -> f64 {
        self.server + (ours - self.ours) / self.speed
    }
}

/// Whether an answer that took `rtt` (pdtop's seconds) should replace the
/// server's time read from an earlier one (its round trip, its age). The
/// fastest answer says the server's time best (the error is at most half
/// the round trip); it is kept until a faster one comes or it is old
/// (clocks drift), so scrape times do not jump at each discovery.
pub(super) fn better_reading(rtt: f64, kept: Option<(f64, Duration)>) -> bool {
    kept.is_none_or(|(kept_rtt, age)| rtt <= kept_rtt || age >= RETELL)
}

/// Refreshes until the receiver is gone.
async fn run(
    opts: PromOptions,
    first_index: usize,
    mut client: HttpClient,
    clock: Arc<dyn Clock>,
    tx: Sender<Msg>,
) {
    let mut tracker = Tracker::new(first_index);
    let mut server_time = ServerTime::from_host(clock.now(), opts.clock_speed);
    // The round trip of the answer `server_time` was read from, and when.
    let mut told: Option<(f64, Instant)> = None;
    // Real time: windows and rediscovery are spans of the server's clock.
    let mut last_discovery: Option<Instant> = None;
    let mut last_ok: Option<Instant> = None;
    let mut failures = 0u32;
    let mut last_error: Option<String> = None;
    // Samples are committed when a scrape ends, stamped when it began: the
    // window reaches back this much more than the time since the last
    // refresh, so a scrape in flight during a refresh is caught next time.
    let margin = opts.interval.max(Duration::from_secs(1));
    // The answer's body, kept from one refresh to the next.
    let mut body = Vec::new();
    loop {
        let started = Instant::now();
        let mut outs = Vec::new();
        let mut error = None;
        // Until an instance is known, every refresh asks.
        if tracker.is_empty() || last_discovery.is_none_or(|t| t.elapsed() >= REDISCOVER) {
            let sent = clock.now();
            match query(&mut client, &opts, &discovery_query(&opts.roles)).await {
                Ok(mut series) => {
                    let got = clock.now();
                    if let Some((eval, _)) = series.first().and_then(|s| s.value.as_ref())
                        && better_reading(got - sent, told.map(|(rtt, at)| (rtt, at.elapsed())))
                    {
                        server_time = ServerTime::from_answer(*eval, sent, got, opts.clock_speed);
                        told = Some((got - sent, Instant::now()));
                    }
                    // Role by role, in the order of the command line: an
                    // instance both match is the first role's.
                    for (role, _) in &opts.roles {
                        let (mine, rest) = series
                            .into_iter()
                            .partition(|s| s.metric.get(ROLE_LABEL).map(String::as_str) == Some(role.name()));
                        series = rest;
                        outs.extend(tracker.on_discovery(*role, mine));
                    }
                    last_discovery = Some(Instant::now());
                }
                Err(e) => error = Some(e),
            }
        }
        let window = last_ok.map_or(margin, |t| t.elapsed() + margin).min(MAX_WINDOW);
        let refreshed = Instant::now();
        // One request for every instance of every role.
        let (instances, jobs) = tracker.targets();
        if !instances.is_empty() {
            let promql = window_query(instances, jobs, window);
            let read = match query_into(&mut client, &opts, &promql, &mut body).await {
                Ok(()) => tracker.on_window(&body),
                Err(e) => Err(e),
            };
            match read {
                Ok(found) => {
                    outs.extend(found);
                    last_ok = Some(refreshed);
                }
                Err(e) => error = Some(e),
            }
        }
        let server_now = server_time.server_at(clock.now());
        let stale_floor = opts.interval.max(Duration::from_secs(1));
        outs.extend(tracker.stale(ms(server_now), stale_floor));

        // The scrape errors, only when some scrape failed.
        let errors = if outs.iter().any(|o| matches!(o, Out::Down { .. })) {
            target_errors(&mut client, &opts).await.unwrap_or_default()
        } else {
            BTreeMap::new()
        };
        // A sample's time on pdtop's clock: now, less its age on the
        // server's (never in the future).
        let at_of = |ts_ms: i64| {
            let age = (server_now - ts_ms as f64 / 1000.0).max(0.0);
            clock.now() - age * opts.clock_speed
        };
        for o in outs {
            let msg = message(o, &errors, error.as_deref(), at_of, clock.now());
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

/// What the state is told of one finding. `errors`: each target's last
/// scrape error; `error`: why this refresh failed, if it did; `now`:
/// pdtop's clock.
fn message(
    o: Out,
    errors: &BTreeMap<String, String>,
    error: Option<&str>,
    at_of: impl Fn(i64) -> f64,
    now: f64,
) -> Msg {
    match o {
        Out::Discovered { index, endpoint } => Msg::Discovered { instance: index, at: now, endpoint },
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
            let why = match error {
                Some(e) => format!("Prometheus unreachable: {e}"),
                None => "the server stopped scraping it".into(),
            };
            let error = format!("no sample in Prometheus for {age_s:.0}s ({why})");
            Msg::ScrapeFailed { instance: index, at: now, error }
        }
        Out::Model { index, name } => {
            let info = ModelInfo { id: name, root: None, max_model_len: None, config_json: None };
            Msg::Models { instance: index, at: now, info }
        }
        Out::Warn(text) => Msg::SourceFailed { source: "prometheus".into(), at: now, error: text },
    }
}
