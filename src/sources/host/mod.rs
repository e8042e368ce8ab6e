//! What `pdtop doctor` reads from this host, without sending a request:
//! which processes listen where (`net/tcp*`, `PID/fd`), the `vllm serve`
//! API server behind each instance port (its command line and
//! environment, its children's listeners), and the host's interfaces and
//! addresses. Facts only: every rule lives in the doctor. Whatever could not
//! be read is kept with the reason, in words for the user.

mod args;
mod env;
mod facts;
mod ifaces;
mod procs;
mod root;
mod serve;
#[cfg(target_os = "linux")]
mod sock_diag;
mod tcp;

pub use crate::sources::sysnet::SysRoots;
pub use args::{
    DEFAULT_DP, DEFAULT_DTYPE, DEFAULT_KV_CACHE_DTYPE, DEFAULT_PORT, DEFAULT_TP, Entry, KvTransferConfig,
    ServeArgs,
};
pub use env::{EnvFact, EnvValue, env_facts, parse_environ};
pub use facts::HostFacts;
pub use ifaces::{Interface, Interfaces, parse_fib_trie_local, parse_if_inet6, read_interfaces};
pub use procs::{ProcEntry, SocketOwners, read_table, socket_owners};
pub use root::{ProcRoot, Unreadable, UnreadableKind};
pub use serve::{NotFound, ServeProcess, find_server};
pub use tcp::{Listener, parse_listeners, read_listeners};
