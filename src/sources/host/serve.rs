//! From a listening port to the `vllm serve` process that owns it: the
//! socket's holder (the API server for the HTTP port, its `VLLM::EngineCore`
//! child for the NIXL side channel, vllm `core.py` binds it there), then up
//! the parents to the process whose command line is an API server's.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use super::args::{ServeArgs, find_entry};
use super::env::{EnvFact, env_facts, parse_environ};
use super::procs::{ProcEntry, SocketOwners, ancestry, descendants};
use super::root::{ProcRoot, Unreadable, read_bytes};
use super::tcp::Listener;

/// One vLLM API server and its process tree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServeProcess {
    pub pid: u32,
    pub argv: Vec<String>,
    pub args: ServeArgs,
    /// The API server's environment (same user or root only).
    pub env: Result<BTreeMap<String, String>, Unreadable>,
    /// Every listener of the tree, with the pid that holds it.
    pub listeners: Vec<(u32, Listener)>,
    /// Every process below the server, with its title (`VLLM::EngineCore`).
    pub children: Vec<(u32, String)>,
}

impl ServeProcess {
    /// The environment variables of interest, or why the environment is unknown.
    pub fn env_facts(&self) -> Result<Vec<EnvFact>, &Unreadable> {
        self.env.as_ref().map(env_facts)
    }
}

/// Why no API server was found for a port.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum NotFound {
    /// The listening sockets themselves could not be read.
    Listeners(Unreadable),
    /// Nothing listens on the port in the namespace read.
    NoListener { port: u16 },
    /// Something listens, but no readable `fd` directory holds its socket.
    OwnerUnseen { port: u16, inodes: Vec<u64>, fd_unreadable: usize },
    /// The holder and its parents are no vLLM API server (a proxy, say):
    /// its title and command line, for rules about what it is.
    NotVllm { port: u16, pid: u32, title: String, argv: Vec<String> },
}

impl fmt::Display for NotFound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotFound::Listeners(u) => write!(f, "listening sockets unknown: {u}"),
            NotFound::NoListener { port } => {
                write!(f, "nothing listens on port {port} in this network namespace")
            }
            NotFound::OwnerUnseen { port, fd_unreadable, .. } => write!(
                f,
                "port {port} listens, but its process is not among those whose open files could be read ({fd_unreadable} could not); run pdtop as the server's user or as root"
            ),
            NotFound::NotVllm { port, pid, title, .. } => {
                write!(
                    f,
                    "port {port} is held by pid {pid} ({title}), and neither it nor its parents is a vllm serve"
                )
            }
        }
    }
}

fn is_server(p: &ProcEntry) -> bool {
    p.cmdline.as_ref().is_ok_and(|argv| find_entry(argv).is_some())
}

/// The API server owning `port`, from the listeners, their holders and the
/// process table.
pub fn find_server(
    root: &ProcRoot,
    port: u16,
    listeners: &[Listener],
    owners: &SocketOwners,
    table: &BTreeMap<u32, ProcEntry>,
) -> Result<ServeProcess, NotFound> {
    let on_port: Vec<&Listener> = listeners.iter().filter(|l| l.addr.port() == port).collect();
    if on_port.is_empty() {
        return Err(NotFound::NoListener { port });
    }
    let Some(holder) = on_port.iter().find_map(|l| owners.by_inode.get(&l.inode).copied()) else {
        return Err(NotFound::OwnerUnseen {
            port,
            inodes: on_port.iter().map(|l| l.inode).collect(),
            fd_unreadable: owners.fd_unreadable.len(),
        });
    };
    let Some(pid) = ancestry(table, holder).into_iter().find(|p| table.get(p).is_some_and(is_server)) else {
        let entry = table.get(&holder);
        let title = entry.map(ProcEntry::title).unwrap_or_default();
        let argv = entry.and_then(|e| e.cmdline.clone().ok()).unwrap_or_default();
        return Err(NotFound::NotVllm { port, pid: holder, title, argv });
    };
    let argv = table[&pid].cmdline.clone().unwrap_or_default();
    let children: Vec<(u32, String)> =
        descendants(table, pid).into_iter().map(|c| (c, table[&c].title())).collect();
    let tree: Vec<u32> = std::iter::once(pid).chain(children.iter().map(|c| c.0)).collect();
    let held = listeners
        .iter()
        .filter_map(|l| owners.by_inode.get(&l.inode).filter(|o| tree.contains(o)).map(|o| (*o, *l)))
        .collect();
    let dir = root.pid_dir(pid);
    Ok(ServeProcess {
        pid,
        args: ServeArgs::from_argv(&argv),
        argv,
        env: read_bytes(&dir.join("environ"), Some(&dir)).map(|b| parse_environ(&b)),
        listeners: held,
        children,
    })
}
