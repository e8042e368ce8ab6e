//! Reading the sources: the logs given, each instance's HTTP endpoints,
//! and (through `sources::host`) the processes and this host's network.
//! Each source that cannot be read is recorded with why, never fatal,
//! except a log file named on the command line (bad usage, exit 2).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::facts::{DirFacts, DirMeta, InstanceFacts, MetricsFacts, PairFacts};
use super::loglines::LogFacts;
use crate::error::{Error, Result};
use crate::feed::Role;
use crate::sources::host::{Listener, Unreadable};
use crate::sources::http::{Auth, HttpClient};
use crate::sources::scrape::{parse_models, parse_version};

/// Every listening socket of the host, or why they could not be listed.
pub type Listing = std::result::Result<Vec<Listener>, Unreadable>;

/// What to read.
#[derive(Debug, Clone)]
pub struct Sources {
    pub prefill: Vec<String>,
    pub decode: Vec<String>,
    pub proxy: Option<String>,
    pub prefill_log: Vec<String>,
    pub decode_log: Vec<String>,
    /// `/proc` (tests and `--netns-pid` give another).
    pub proc_root: PathBuf,
    pub sys_class_net: PathBuf,
    /// `--netns-pid`: sockets and addresses of that process's namespace.
    pub netns_pid: Option<u32>,
    pub timeout: Duration,
    /// pdtop's own pid where it serves the pair itself (the demo's lab): a
    /// port it holds is no vllm serve to read, and no source missed.
    pub own_pid: Option<u32>,
}

impl Sources {
    fn root(&self) -> crate::sources::host::ProcRoot {
        let root = crate::sources::host::ProcRoot::at(&self.proc_root);
        match self.netns_pid {
            Some(pid) => root.with_netns_pid(pid),
            None => root,
        }
    }

    /// Every listening socket of the host, as [`Sources::add_host_listed`]
    /// takes them.
    pub fn all_listeners(&self) -> Listing {
        crate::sources::host::read_listeners(&self.root())
    }

    /// Of `all`, the sockets listening on the instances' and the proxy's
    /// ports (none where they cannot be read): a restarted server has a new one.
    pub fn ours(&self, all: &Listing) -> Vec<Listener> {
        let ports: Vec<u16> = self
            .prefill
            .iter()
            .chain(&self.decode)
            .chain(&self.proxy)
            .filter_map(|ep| super::host::port_of(ep))
            .collect();
        let mut l: Vec<Listener> = all.as_deref().unwrap_or(&[]).to_vec();
        l.retain(|l| ports.contains(&l.addr.port()));
        l.sort();
        l
    }

    /// This host's processes and interfaces, added to the facts.
    pub fn add_host(&self, f: &mut PairFacts) {
        self.add_host_listed(f, self.all_listeners());
    }

    /// [`Sources::add_host`] with the listeners already read.
    pub fn add_host_listed(&self, f: &mut PairFacts, listeners: Listing) {
        let root = self.root();
        let sys = crate::sources::host::SysRoots {
            net: Some(self.sys_class_net.clone()),
            infiniband: Some(PathBuf::from("/sys/class/infiniband")),
        };
        super::host::add_listed_host_facts(f, &root, &sys, self.proxy.as_deref(), self.own_pid, listeners);
    }
}

/// The instances and their logs, read whole; HTTP and host facts are
/// added by [`fetch_http`] and `host`.
pub fn read_logs(s: &Sources) -> Result<PairFacts> {
    instances(s, |path| {
        let text = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
        Ok(LogFacts::read(path, &String::from_utf8_lossy(&text)))
    })
    .map_err(Error::Usage)
}

/// The instances, each with its log as `log_of` reads it.
pub fn instances(
    s: &Sources,
    mut log_of: impl FnMut(&str) -> std::result::Result<LogFacts, String>,
) -> std::result::Result<PairFacts, String> {
    let mut f = PairFacts::default();
    for (role, eps, logs) in
        [(Role::Prefill, &s.prefill, &s.prefill_log), (Role::Decode, &s.decode, &s.decode_log)]
    {
        if logs.len() > eps.len() {
            let r = role.name();
            return Err(format!("{} --{r}-log files for {} --{r} instances", logs.len(), eps.len()));
        }
        for (n, ep) in eps.iter().enumerate() {
            let mut i = InstanceFacts::new(role, ep);
            if let Some(path) = logs.get(n) {
                let log = log_of(path)?;
                i.startup = log.startup.clone();
                f.read.push(format!("{} log {path}", i.name()));
                i.log = Some(log);
            } else {
                f.unread(format!("start-up log of {}", i.name()), format!("no --{}-log given", role.name()));
            }
            f.instances.push(i);
        }
    }
    Ok(f)
}

/// `/metrics`, `/version` and `/v1/models` of every instance.
pub async fn fetch_http(f: &mut PairFacts, timeout: Duration) {
    let mut read = Vec::new();
    let mut unread = Vec::new();
    for i in &mut f.instances {
        let base = crate::feed::Endpoint::parse(i.role, &i.endpoint).map(|e| e.base_url);
        let client = base
            .map_err(|_| "not HOST:PORT or a URL".to_string())
            .and_then(|base| HttpClient::new(&base, Auth::None));
        let mut client = match client {
            Ok(c) => c,
            Err(e) => {
                unread.push((i.name(), e));
                continue;
            }
        };
        match client.get("/metrics", timeout).await {
            Ok(body) => {
                i.metrics = Some(MetricsFacts::from_text(&body));
                read.push(format!("{}/metrics", i.endpoint));
            }
            Err(e) => unread.push((format!("{}/metrics", i.endpoint), e)),
        }
        match client.get("/version", timeout).await.map(|b| parse_version(&b)) {
            Ok(Some(v)) => {
                i.version = Some(crate::logs::startup::normalize_version(&v));
                read.push(format!("{}/version", i.endpoint));
            }
            Ok(None) => unread.push((format!("{}/version", i.endpoint), "no version in the answer".into())),
            Err(e) => unread.push((format!("{}/version", i.endpoint), e)),
        }
        match client.get("/v1/models", timeout).await.map(|b| parse_models(&b)) {
            Ok(Some(m)) => {
                i.models = Some(m);
                read.push(format!("{}/v1/models", i.endpoint));
            }
            Ok(None) => unread.push((format!("{}/v1/models", i.endpoint), "no model in the answer".into())),
            Err(e) => unread.push((format!("{}/v1/models", i.endpoint), e)),
        }
        // The log's version stands in for an endpoint that did not answer.
        if i.version.is_none() {
            i.version = i.startup.version.clone();
        }
    }
    f.read.extend(read);
    for (s, why) in unread {
        f.unread(s, why);
    }
}

/// Filesystems another host can mount too.
const NETWORK_FS: [&str; 12] = [
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "lustre",
    "ceph",
    "glusterfs",
    "gpfs",
    "beegfs",
    "9p",
    "virtiofs",
    "fuse",
];

/// The ExampleConnector folder of every instance on this host.
pub fn read_kv_dirs(f: &mut PairFacts, proc_root: &Path) {
    let mounts = std::fs::read_to_string(proc_root.join("mounts")).ok();
    for i in &mut f.instances {
        // A log read after the fact names a folder of the host it ran on
        // (a recording served on loopback too): only a server process found
        // here says this host's folder is the one it uses.
        let Some(path) = i.startup.storage_path.clone().filter(|_| i.process.is_some()) else { continue };
        let meta = dir_meta(Path::new(&path), mounts.as_deref());
        i.kv_dir = Some(DirFacts { path, meta });
    }
}

fn dir_meta(path: &Path, mounts: Option<&str>) -> std::result::Result<DirMeta, String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if !m.is_dir() {
        return Err("not a folder".into());
    }
    let canon = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    Ok(DirMeta {
        id: (m.dev(), m.ino()),
        writable: m.mode() & 0o222 != 0,
        network_fs: on_network_fs(&canon, mounts),
    })
}

/// The filesystem of the longest mount point above `path` (`/proc/mounts`).
fn on_network_fs(path: &Path, mounts: Option<&str>) -> bool {
    let Some(mounts) = mounts else { return false };
    let best = mounts
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (_, point, fstype) = (w.next()?, w.next()?, w.next()?);
            path.starts_with(point).then_some((point.len(), fstype))
        })
        .max_by_key(|(n, _)| *n);
    best.is_some_and(|(_, t)| NETWORK_FS.iter().any(|n| t == *n || t.starts_with("fuse")))
}
