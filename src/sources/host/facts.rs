//! One read of everything this host says about its vLLM instances.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::ifaces::{Interfaces, read_interfaces};
use super::procs::{read_table, socket_owners};
use super::root::{ProcRoot, Unreadable};
use super::serve::{NotFound, ServeProcess, find_server};
use super::tcp::{Listener, read_listeners};
use crate::sources::sysnet::SysRoots;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostFacts {
    /// The namespace read (`--netns-pid`), `None` for pdtop's own.
    pub netns_pid: Option<u32>,
    /// Every LISTEN socket, with its holder where one was seen.
    pub listeners: Result<Vec<(Option<u32>, Listener)>, Unreadable>,
    /// `fd` directories that could not be listed (their sockets' owners are unknown).
    pub fd_unreadable: Vec<Unreadable>,
    /// Per instance port asked for: its API server, or why none was found.
    pub instances: BTreeMap<u16, Result<ServeProcess, NotFound>>,
    pub interfaces: Interfaces,
}

impl HostFacts {
    /// Reads it all once. With `root.netns_pid`, pass sysfs as that
    /// namespace sees it (`ProcRoot::netns_sys_net`), or the interfaces'
    /// state and speed are the reader's namespace's.
    pub fn read(root: &ProcRoot, sys: &SysRoots, ports: &[u16]) -> HostFacts {
        HostFacts::read_listed(root, sys, ports, read_listeners(root))
    }

    /// [`HostFacts::read`] with the listeners already read this round:
    /// listing them walks the kernel's whole connection table.
    pub fn read_listed(
        root: &ProcRoot,
        sys: &SysRoots,
        ports: &[u16],
        listeners: Result<Vec<Listener>, Unreadable>,
    ) -> HostFacts {
        let table = read_table(root);
        let all: &[Listener] = listeners.as_deref().unwrap_or(&[]);
        let wanted: BTreeSet<u64> = all.iter().map(|l| l.inode).collect();
        let owners = socket_owners(root, table.keys().copied(), &wanted);
        let instances = ports
            .iter()
            .map(|&port| {
                let found = match &listeners {
                    Ok(l) => find_server(root, port, l, &owners, &table),
                    Err(e) => Err(NotFound::Listeners(e.clone())),
                };
                (port, found)
            })
            .collect();
        HostFacts {
            netns_pid: root.netns_pid,
            listeners: listeners
                .map(|l| l.into_iter().map(|l| (owners.by_inode.get(&l.inode).copied(), l)).collect()),
            fd_unreadable: owners.fd_unreadable,
            instances,
            interfaces: read_interfaces(root, sys),
        }
    }
}
