//! What was read about the pair, per instance and per source. Every source
//! is optional: a `None` (with its reason in `PairFacts::unread`) is
//! unknown, and a rule that needs it says nothing.

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::finding::Unread;
use super::loglines::LogFacts;
use crate::feed::{ModelInfo, Role};
use crate::logs::startup::StartupConfig;

/// One `--prefill` or `--decode` instance.
#[derive(Debug, Clone)]
pub struct InstanceFacts {
    pub role: Role,
    /// As given (`127.0.0.1:8100`).
    pub endpoint: String,
    /// The endpoint's host part.
    pub host: String,
    /// What it runs: the start-up log, filled in from its argv.
    pub startup: StartupConfig,
    pub log: Option<LogFacts>,
    pub metrics: Option<MetricsFacts>,
    pub version: Option<String>,
    pub models: Option<ModelInfo>,
    /// The `vllm serve` process behind the port (same host only).
    pub process: Option<ProcessFacts>,
    /// The ExampleConnector's folder, as seen from this host.
    pub kv_dir: Option<DirFacts>,
}

impl InstanceFacts {
    pub fn new(role: Role, endpoint: &str) -> InstanceFacts {
        InstanceFacts {
            role,
            endpoint: endpoint.to_string(),
            host: endpoint_host(endpoint),
            startup: StartupConfig::default(),
            log: None,
            metrics: None,
            version: None,
            models: None,
            process: None,
            kv_dir: None,
        }
    }

    /// `decode 127.0.0.1:8200`.
    pub fn name(&self) -> String {
        format!("{} {}", self.role.name(), self.endpoint)
    }

    /// The connector it runs, from whichever source said.
    pub fn connector(&self) -> Option<&str> {
        self.startup.connector.as_deref().filter(|c| *c != "none")
    }

    pub fn is_nixl(&self) -> bool {
        self.connector().is_some_and(is_nixl)
    }

    /// A variable of its environment: `Ok(None)` unset, `Err` unreadable.
    pub fn env(&self, key: &str) -> Result<Option<&str>, &str> {
        let p = self.process.as_ref().ok_or("no process found behind the port")?;
        match &p.environ {
            Ok(env) => Ok(env.get(key).map(String::as_str)),
            Err(e) => Err(e.as_str()),
        }
    }
}

/// NixlConnector and the pull/push connectors it became.
pub fn is_nixl(connector: &str) -> bool {
    connector.starts_with("Nixl")
}

/// The host part of `HOST:PORT` or a URL (`[::1]:8100` gives `::1`).
pub fn endpoint_host(endpoint: &str) -> String {
    let s = endpoint.split("://").last().unwrap_or(endpoint);
    let s = s.split('/').next().unwrap_or(s);
    if let Some(rest) = s.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest).to_string();
    }
    s.rsplit_once(':').map_or(s, |(h, _)| h).to_string()
}

/// What `/metrics` says about the instance's config.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricsFacts {
    pub model_name: Option<String>,
    pub block_size: Option<u32>,
    pub cache_dtype: Option<String>,
    /// `vllm:num_requests_kv_fetch_by_stage` is served: vLLM registers it
    /// only for `kv_consumer`/`kv_both` (`v1/metrics/loggers.py`, 0.33).
    pub kv_fetch_family: bool,
    /// The scrape body, kept for the state's comparison of fields.
    pub body: String,
}

impl MetricsFacts {
    pub fn from_text(body: &str) -> MetricsFacts {
        let s = crate::metrics::model::InstanceSample::from_text(body);
        let kv_fetch_family = body.lines().any(|l| {
            let l = l.trim_start_matches("# TYPE ").trim_start_matches("# HELP ");
            l.starts_with("vllm:num_requests_kv_fetch_by_stage")
        });
        MetricsFacts {
            model_name: s.model_name,
            block_size: s.block_size,
            cache_dtype: s.cache_dtype,
            kv_fetch_family,
            body: body.to_string(),
        }
    }
}

/// The API-server process of an instance, read from `/proc`.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessFacts {
    pub pid: u32,
    pub argv: Vec<String>,
    /// Readable only by the same user or root; `Err` says why not.
    pub environ: Result<BTreeMap<String, String>, String>,
    /// TCP listeners of the process and its children (the NIXL side
    /// channel is bound in the engine process).
    pub listeners: Vec<(IpAddr, u16)>,
}

/// A connector folder as this host sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct DirFacts {
    pub path: String,
    /// `Err`: why it could not be read (missing, no permission).
    pub meta: Result<DirMeta, String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirMeta {
    /// (device, inode): one folder under two paths has one identity.
    pub id: (u64, u64),
    /// Some write bit is set (the server's user is not known here).
    pub writable: bool,
    /// On NFS, CIFS, Lustre, Ceph, a FUSE mount...: what another host can share.
    pub network_fs: bool,
}

/// An interface of this host.
#[derive(Debug, Clone, PartialEq)]
pub struct Iface {
    pub name: String,
    pub up: bool,
    /// `/sys/class/net/X/speed`, when the driver reports one.
    pub speed_mbps: Option<u64>,
    pub addrs: Vec<IpAddr>,
}

/// The network of the host pdtop runs on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostNet {
    pub ifaces: Vec<Iface>,
    /// The default route's interface: the management network, as a rule.
    pub default_iface: Option<String>,
}

impl HostNet {
    pub fn has_addr(&self, ip: IpAddr) -> bool {
        ip.is_loopback() || ip.is_unspecified() || self.ifaces.iter().any(|i| i.addrs.contains(&ip))
    }

    pub fn iface(&self, name: &str) -> Option<&Iface> {
        self.ifaces.iter().find(|i| i.name == name)
    }
}

/// The proxy in front of the pair, found by its port.
#[derive(Debug, Clone, PartialEq)]
pub struct ProxyFacts {
    pub endpoint: String,
    pub pid: u32,
    pub argv: Vec<String>,
}

impl ProxyFacts {
    /// vLLM's `disagg_proxy_demo.py` (benchmarks/disagg_benchmarks): it
    /// sends no `kv_transfer_params`.
    pub fn is_demo_proxy(&self) -> bool {
        self.argv.iter().any(|a| a.contains("disagg_proxy_demo"))
    }

    /// A proxy that pairs prefill and decode by the request id it sends
    /// (the P2pNccl xPyD proxy puts the peers' addresses into the id).
    pub fn joins_by_id(&self) -> bool {
        self.argv.iter().any(|a| a.contains("p2p_nccl") || a.contains("disagg_proxy_p2p"))
    }

    pub fn script(&self) -> String {
        self.argv.iter().find(|a| a.ends_with(".py")).cloned().unwrap_or_else(|| self.argv.join(" "))
    }
}

/// Everything read about the pair.
#[derive(Debug, Clone, Default)]
pub struct PairFacts {
    pub instances: Vec<InstanceFacts>,
    pub proxy: Option<ProxyFacts>,
    pub host_net: Option<HostNet>,
    pub read: Vec<String>,
    pub unread: Vec<Unread>,
}

impl PairFacts {
    pub fn of(&self, role: Role) -> impl Iterator<Item = &InstanceFacts> {
        self.instances.iter().filter(move |i| i.role == role)
    }

    pub fn unread(&mut self, source: impl Into<String>, why: impl Into<String>) {
        self.unread.push(Unread { source: source.into(), why: why.into() });
    }

    /// Whether every instance is on this host (all loopback or all one
    /// host name), so `localhost` reaches the other side.
    pub fn one_host(&self) -> bool {
        let local = |h: &str| h == "localhost" || h.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
        let first = self.instances.first().map(|i| i.host.as_str());
        self.instances.iter().all(|i| local(&i.host) || Some(i.host.as_str()) == first)
    }
}

/// `localhost` or a loopback address: this host.
pub fn is_local_host(host: &str) -> bool {
    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}
