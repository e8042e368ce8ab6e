//! What is being watched, built once: from the command line, from a
//! recording's header (where it is persisted), or from a capture.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cli::Inputs;
use crate::clock::{Clock, ScaledClock, SystemClock};
use crate::config::Settings;
use crate::error::{Error, Result, UsageContext};
use crate::feed::{Endpoint, LogOrigin, Role, RouterEndpoint};
use crate::kv::KvCacheDtype;
use crate::sources::NetDevPath;
use crate::sources::otlp::OtlpOptions;
use crate::sources::prometheus::PromOptions;
use crate::sources::scrape::ScrapeOptions;
use crate::state::AppState;
use crate::state::link::{KvModel, LinkState};

/// Environment variable holding a bearer token for every endpoint.
pub const TOKEN_ENV: &str = "PDTOP_BEARER_TOKEN";

/// The watch: instances, logs, link inputs, window and clock speed. The
/// serialized part is a recording's header; `collect` is how a live pdtop
/// reads it, which a replay does not need.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    /// Unix seconds when watching began.
    pub started: f64,
    /// The instances, in `--prefill` then `--decode` order (empty when a
    /// Prometheus server discovers them).
    pub endpoints: Vec<Endpoint>,
    /// The router whose `vllm_router_pd_*` families are scraped (`--router`);
    /// absent from recordings made before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router: Option<RouterEndpoint>,
    /// Tailed logs: which instance (or the proxy), and the path as given.
    pub logs: Vec<(LogOrigin, String)>,
    /// The interface whose byte counters are watched.
    pub iface: Option<String>,
    /// KV bytes per token, and where that figure came from.
    pub kv_model: Option<KvModel>,
    /// `--kv-cache-dtype`, as given (validated when the session was built).
    #[serde(default)]
    pub kv_cache_dtype: Option<String>,
    /// The sliding window of the histograms (seconds).
    pub window_secs: f64,
    /// How fast pdtop's clock runs against the wall (a sped-up lab).
    #[serde(default = "one")]
    pub clock_speed: f64,
    /// When the sped-up lab's clock started (Unix seconds): pdtop's clock
    /// is then the lab's, whenever pdtop started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_origin: Option<f64>,
    /// `--show-prompts`: traces keep the prompt text the logs print.
    #[serde(default)]
    pub show_prompts: bool,
    #[serde(skip)]
    pub collect: Option<Collect>,
}

fn one() -> f64 {
    1.0
}

/// How live collectors read the session's inputs.
#[derive(Debug, Clone)]
pub struct Collect {
    pub scrape: ScrapeOptions,
    pub prometheus: Option<PromOptions>,
    pub kv_dir: Option<PathBuf>,
    pub net_dev: Option<NetDevPath>,
    /// sysfs roots for link speeds and RDMA devices (none: recorded
    /// counters, whose machine's sysfs is not this one).
    pub sys: Option<crate::sources::sysnet::SysRoots>,
    /// How often logs are polled.
    pub log_poll: Duration,
    /// How often the connector directory and interface are read.
    pub link_interval: Duration,
    /// Where vLLM's OTLP spans are received, if anywhere.
    pub otlp: OtlpOptions,
    /// How far back the logs are read on start (`--since`).
    pub since: f64,
}

/// `--since`'s default: the logs' last ten minutes, what a lab engineer
/// opening pdtop because something looks wrong wants named.
pub const DEFAULT_SINCE_S: f64 = 600.0;

impl PartialEq for Collect {
    /// Live inputs are not part of what a session *is*.
    fn eq(&self, _: &Collect) -> bool {
        true
    }
}

impl Session {
    /// From the command line and the resolved settings.
    pub fn from_inputs(inputs: &Inputs, settings: &Settings) -> Result<Session> {
        let dtype = match &inputs.kv_cache_dtype {
            Some(d) => Some(d.parse::<KvCacheDtype>().usage()?),
            None => None,
        };
        let kv_model = match &inputs.model_config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| Error::Usage(format!("{}: {e}", path.display())))?;
                let source = format!("--model-config {}", path.display());
                Some(
                    KvModel::from_config(&text, source, dtype.unwrap_or_default())
                        .map_err(|e| Error::Usage(format!("{}: {e}", path.display())))?,
                )
            }
            None => inputs.kv_bytes_per_token.map(|n| KvModel {
                bytes_per_token: n,
                source: "--kv-bytes-per-token".into(),
                layers: None,
            }),
        };
        let prometheus = PromOptions::from_inputs(inputs, settings.interval, settings.timeout).usage()?;
        let router = settings.router.as_deref().map(RouterEndpoint::parse).transpose().usage()?;
        let endpoints = if prometheus.is_some() { Vec::new() } else { endpoints(inputs, router.is_some())? };
        // Every interface is read, named or not: pdtop finds the one that
        // carried the KV by itself.
        let net_dev = Some(match &inputs.net_dev_file {
            Some(f) => NetDevPath::File(f.clone()),
            None => NetDevPath::Proc { netns_pid: inputs.netns_pid },
        });
        let sys = sys_roots(inputs);
        let collect = Collect {
            scrape: ScrapeOptions {
                interval: settings.interval,
                timeout: settings.timeout,
                bearer_token: std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty()),
            },
            prometheus,
            kv_dir: inputs.kv_dir.clone(),
            net_dev,
            sys,
            // Often enough that a verdict lands within one refresh.
            log_poll: (settings.interval / 4).clamp(Duration::from_millis(50), Duration::from_millis(250)),
            link_interval: settings.interval,
            otlp: OtlpOptions::new(
                inputs.otlp_listen.as_deref(),
                inputs.otlp_grpc_listen.as_deref(),
                inputs.otlp_allow_remote,
            )
            .usage()?,
            since: inputs.since.unwrap_or(DEFAULT_SINCE_S),
        };
        Ok(Session {
            started: SystemClock.now(),
            endpoints,
            router,
            logs: log_sources(inputs)?,
            iface: inputs.iface.clone(),
            kv_model,
            kv_cache_dtype: dtype.map(|d| d.to_string()),
            window_secs: settings.window_secs,
            clock_speed: inputs.clock_speed.filter(|s| s.is_finite() && *s > 0.0).unwrap_or(1.0),
            clock_origin: inputs.clock_origin.filter(|t| t.is_finite()),
            show_prompts: inputs.show_prompts,
            collect: Some(collect),
        })
    }

    /// A fresh state watching what the session watches.
    pub fn state(&self) -> AppState {
        let dtype = self.kv_cache_dtype.as_deref().and_then(|d| d.parse::<KvCacheDtype>().ok());
        AppState::new(self.endpoints.clone(), self.window_secs)
            .with_logs(&self.logs)
            .with_link(LinkState::new(self.iface.clone(), self.kv_model.clone(), dtype))
            .show_prompts(self.show_prompts)
            .with_router(self.router.clone())
            .reading_every(self.collect.as_ref().map(|c| c.log_poll.as_secs_f64() * self.clock_speed))
            .reading_since(self.collect.as_ref().map(|c| c.since))
    }

    /// The system clock, or a faster one for a sped-up lab.
    pub fn clock(&self) -> Arc<dyn Clock> {
        if let Some(wall0) = self.clock_origin {
            Arc::new(ScaledClock::of_lab(wall0, self.clock_speed))
        } else if self.clock_speed != 1.0 {
            Arc::new(ScaledClock::new(SystemClock.now(), self.clock_speed))
        } else {
            Arc::new(SystemClock)
        }
    }

    /// The endpoints of one role, as the user wrote them.
    pub fn displays(&self, role: Role) -> impl Iterator<Item = &str> {
        self.endpoints.iter().filter(move |e| e.role == role).map(|e| e.display.as_str())
    }
}

/// Where link speeds are read: the given roots; with recorded counters
/// (`--net-dev-file`) only given ones; in another namespace, its own sysfs.
fn sys_roots(inputs: &Inputs) -> Option<crate::sources::sysnet::SysRoots> {
    use crate::sources::sysnet::SysRoots;
    let given =
        SysRoots { net: inputs.sys_class_net.clone(), infiniband: inputs.sys_class_infiniband.clone() };
    if given.net.is_some() || given.infiniband.is_some() {
        return Some(given);
    }
    if inputs.net_dev_file.is_some() {
        return None;
    }
    Some(match inputs.netns_pid {
        Some(pid) => SysRoots {
            net: Some(PathBuf::from(format!("/proc/{pid}/root/sys/class/net"))),
            infiniband: Some(PathBuf::from(format!("/proc/{pid}/root/sys/class/infiniband"))),
        },
        None => SysRoots::system(),
    })
}

/// The instances given on the command line (none is fine beside a router).
fn endpoints(inputs: &Inputs, router: bool) -> Result<Vec<Endpoint>> {
    let mut out = Vec::new();
    for (role, list) in [(Role::Prefill, &inputs.prefill), (Role::Decode, &inputs.decode)] {
        for s in list {
            out.push(Endpoint::parse(role, s).usage()?);
        }
    }
    if out.is_empty() && !router {
        return Err(Error::usage(
            "give at least one instance: --prefill HOST:PORT and/or --decode HOST:PORT (or try `pdtop demo`)",
        ));
    }
    Ok(out)
}

/// The tailed logs, tied to the instance each belongs to.
fn log_sources(inputs: &Inputs) -> Result<Vec<(LogOrigin, String)>> {
    if inputs.prefill_log.len() > inputs.prefill.len().max(1)
        || inputs.decode_log.len() > inputs.decode.len().max(1)
    {
        return Err(Error::usage(
            "give at most one --prefill-log per --prefill and one --decode-log per --decode, in the same order",
        ));
    }
    let mut out: Vec<(LogOrigin, String)> = Vec::new();
    out.extend(inputs.prefill_log.iter().enumerate().map(|(i, p)| (LogOrigin::Prefill(i), p.clone())));
    out.extend(inputs.decode_log.iter().enumerate().map(|(i, p)| (LogOrigin::Decode(i), p.clone())));
    out.extend(inputs.proxy_log.iter().map(|p| (LogOrigin::Proxy, p.clone())));
    if out.iter().filter(|(_, p)| p == "-").count() > 1 {
        return Err(Error::usage("only one log can be read from stdin (-)"));
    }
    Ok(out)
}
