//! The process table under a `/proc` root: each process's parent, name and
//! command line, and which process holds which socket (through the
//! `socket:[INODE]` links in `<root>/PID/fd`).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::root::{ProcRoot, Unreadable, UnreadableKind, read_bytes, read_text};

/// One process as `/proc` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcEntry {
    pub pid: u32,
    pub ppid: Option<u32>,
    /// `Name:` of `status` (the kernel's `comm`, 15 bytes at most).
    pub name: String,
    pub cmdline: Result<Vec<String>, Unreadable>,
}

impl ProcEntry {
    /// What `ps` would show: the command line, which setproctitle rewrites
    /// (`VLLM::EngineCore`), or the kernel's name when that is empty
    /// (a kernel thread, a zombie).
    pub fn title(&self) -> String {
        match &self.cmdline {
            Ok(argv) if !argv.is_empty() => argv.join(" ").trim().to_string(),
            _ => self.name.clone(),
        }
    }
}

/// NUL-separated; setproctitle pads with NULs or spaces, dropped here.
pub fn split_cmdline(bytes: &[u8]) -> Vec<String> {
    bytes
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .skip_while(|a| a.trim().is_empty())
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect()
}

fn parse_status(text: &str) -> (String, Option<u32>) {
    let field = |key: &str| text.lines().find_map(|l| l.strip_prefix(key)).map(|v| v.trim().to_string());
    (field("Name:").unwrap_or_default(), field("PPid:").and_then(|p| p.parse().ok()))
}

/// Reads one process; `None` when it has no readable `status` (it ended).
pub fn read_proc(root: &ProcRoot, pid: u32) -> Option<ProcEntry> {
    let dir = root.pid_dir(pid);
    let (name, ppid) = parse_status(&read_text(&dir.join("status"), Some(&dir)).ok()?);
    let cmdline = read_bytes(&dir.join("cmdline"), Some(&dir)).map(|b| split_cmdline(&b));
    Some(ProcEntry { pid, ppid: ppid.filter(|p| *p != 0), name, cmdline })
}

/// Every process under the root, by pid.
pub fn read_table(root: &ProcRoot) -> BTreeMap<u32, ProcEntry> {
    let Ok(dir) = std::fs::read_dir(&root.root) else { return BTreeMap::new() };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| read_proc(root, pid).map(|p| (pid, p)))
        .collect()
}

/// Who holds the sockets asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SocketOwners {
    pub by_inode: BTreeMap<u64, u32>,
    /// Processes whose `fd` directory could not be listed (another user's,
    /// unless pdtop runs as root): a socket of theirs has no known owner.
    pub fd_unreadable: Vec<Unreadable>,
}

fn socket_inode(link: &std::path::Path) -> Option<u64> {
    link.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
}

/// Looks for `wanted` socket inodes in every listed process's fd links.
pub fn socket_owners(
    root: &ProcRoot,
    pids: impl IntoIterator<Item = u32>,
    wanted: &BTreeSet<u64>,
) -> SocketOwners {
    let mut out = SocketOwners::default();
    for pid in pids {
        let dir = root.pid_dir(pid);
        let fd = dir.join("fd");
        match std::fs::read_dir(&fd) {
            Ok(entries) => {
                for e in entries.flatten() {
                    if let Some(inode) = std::fs::read_link(e.path()).ok().as_deref().and_then(socket_inode)
                        && wanted.contains(&inode)
                    {
                        out.by_inode.entry(inode).or_insert(pid);
                    }
                }
            }
            Err(e) => {
                let u = Unreadable::from_io(&fd, Some(&dir), &e);
                // A process that ended meanwhile held nothing we can name.
                if u.kind != UnreadableKind::Gone {
                    out.fd_unreadable.push(u);
                }
            }
        }
    }
    out
}

/// `pid` and its ancestors, nearest first, as far as the table knows them.
pub fn ancestry(table: &BTreeMap<u32, ProcEntry>, pid: u32) -> Vec<u32> {
    let mut out = vec![pid];
    let mut cur = pid;
    while let Some(parent) = table.get(&cur).and_then(|p| p.ppid) {
        if out.contains(&parent) {
            break;
        }
        out.push(parent);
        cur = parent;
    }
    out
}

/// Every process below `pid`, in pid order.
pub fn descendants(table: &BTreeMap<u32, ProcEntry>, pid: u32) -> Vec<u32> {
    table.keys().copied().filter(|p| *p != pid && ancestry(table, *p).contains(&pid)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmdline_keeps_empty_args_and_drops_title_padding() {
        assert_eq!(
            split_cmdline(b"vllm\0serve\0m\0--chat-template\0\0--port\08100\0"),
            ["vllm", "serve", "m", "--chat-template", "", "--port", "8100"]
        );
        assert_eq!(split_cmdline(b"VLLM::EngineCore\0\0\0\0"), ["VLLM::EngineCore"]);
    }

    #[test]
    fn status_name_and_parent_of_this_process() {
        let text = std::fs::read_to_string("/proc/self/status").unwrap();
        let (name, ppid) = parse_status(&text);
        assert_eq!(ppid, Some(std::os::unix::process::parent_id()));
        let comm = std::fs::read_to_string("/proc/self/comm").unwrap();
        assert_eq!(name, comm.trim_end());
    }
}
