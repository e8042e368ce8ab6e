//! Where `/proc` is, and what "could not read it" means for the user.

use std::fmt;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// An injectable `/proc`. With `netns_pid`, the sockets, routes and addresses
/// are read from `<root>/PID/net/` (that process's network namespace, a
/// container's) instead of `<root>/net/` (the reader's own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcRoot {
    pub root: PathBuf,
    pub netns_pid: Option<u32>,
}

impl Default for ProcRoot {
    fn default() -> Self {
        ProcRoot::system()
    }
}

impl ProcRoot {
    pub fn system() -> ProcRoot {
        ProcRoot::at("/proc")
    }

    pub fn at(root: impl Into<PathBuf>) -> ProcRoot {
        ProcRoot { root: root.into(), netns_pid: None }
    }

    pub fn with_netns_pid(mut self, pid: u32) -> ProcRoot {
        self.netns_pid = Some(pid);
        self
    }

    /// This process's own `/proc` and network namespace: what a system
    /// call answers for it too.
    pub fn is_live(&self) -> bool {
        self.root == std::path::Path::new("/proc") && self.netns_pid.is_none()
    }

    /// `<root>/net` or `<root>/PID/net`.
    pub fn net(&self) -> PathBuf {
        match self.netns_pid {
            Some(pid) => self.pid_dir(pid).join("net"),
            None => self.root.join("net"),
        }
    }

    pub fn pid_dir(&self, pid: u32) -> PathBuf {
        self.root.join(pid.to_string())
    }

    /// sysfs shows the network namespace of whoever mounted it, so for
    /// another namespace the interfaces are those of that process's own
    /// mount of `/sys` (`<root>/PID/root/sys/class/net`), when it has one.
    pub fn netns_sys_net(&self) -> Option<PathBuf> {
        self.netns_pid.map(|pid| self.pid_dir(pid).join("root/sys/class/net"))
    }
}

/// Why a file under `/proc` could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum UnreadableKind {
    /// Another user's process (`environ`, `fd` need the same uid or root).
    Permission { owner_uid: Option<u32> },
    /// The process ended while it was being read.
    Gone,
    /// The file does not exist (a kernel without it, or a root without it).
    Missing,
    /// Anything else, with the system's words.
    Other(String),
}

/// A file that could not be read, and why, in words for the user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unreadable {
    pub path: PathBuf,
    pub kind: UnreadableKind,
}

impl Unreadable {
    /// Classifies an error reading `path`; `pid_dir` tells a process that
    /// ended (its directory went too) from a file that never existed.
    pub fn from_io(path: &Path, pid_dir: Option<&Path>, e: &std::io::Error) -> Unreadable {
        let kind = match e.kind() {
            ErrorKind::PermissionDenied => {
                UnreadableKind::Permission { owner_uid: pid_dir.and_then(owner_uid) }
            }
            ErrorKind::NotFound if pid_dir.is_some_and(|d| !d.exists()) => UnreadableKind::Gone,
            ErrorKind::NotFound => UnreadableKind::Missing,
            // ESRCH: a process that is exiting.
            _ if e.raw_os_error() == Some(3) => UnreadableKind::Gone,
            _ => UnreadableKind::Other(e.to_string()),
        };
        Unreadable { path: path.to_path_buf(), kind }
    }
}

fn owner_uid(dir: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(dir).ok().map(|m| m.uid())
}

impl fmt::Display for Unreadable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.path.display();
        match &self.kind {
            UnreadableKind::Permission { owner_uid: Some(uid) } => write!(
                f,
                "{p}: not readable, the process belongs to uid {uid}; run pdtop as that user or as root"
            ),
            UnreadableKind::Permission { owner_uid: None } => {
                write!(f, "{p}: not readable (permission denied); run pdtop as the process's user or as root")
            }
            UnreadableKind::Gone => write!(f, "{p}: the process ended while it was being read"),
            UnreadableKind::Missing => write!(f, "{p}: no such file"),
            UnreadableKind::Other(e) => write!(f, "{p}: {e}"),
        }
    }
}

/// Reads a file as bytes, classifying a failure.
pub fn read_bytes(path: &Path, pid_dir: Option<&Path>) -> Result<Vec<u8>, Unreadable> {
    use std::io::Read;
    // procfs gives no size: `fs::read` would start at 32 bytes and double,
    // a read each, and `net/tcp` read in small pieces costs the kernel more
    // walks of its connection table (1.7 ms a file here, against 1.1 ms).
    // One page takes most of these files at once.
    let mut out = Vec::with_capacity(8 * 1024);
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(&mut out))
        .map_err(|e| Unreadable::from_io(path, pid_dir, &e))?;
    Ok(out)
}

/// Reads a text file (lossy: `/proc` text is ASCII, a stray byte is no error).
pub fn read_text(path: &Path, pid_dir: Option<&Path>) -> Result<String, Unreadable> {
    read_bytes(path, pid_dir).map(|b| String::from_utf8_lossy(&b).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_in_words() {
        let me = Path::new("/proc/self");
        let denied = std::io::Error::from(ErrorKind::PermissionDenied);
        let u = Unreadable::from_io(&me.join("environ"), Some(me), &denied);
        let uid = owner_uid(me).unwrap();
        assert_eq!(u.kind, UnreadableKind::Permission { owner_uid: Some(uid) });
        assert!(u.to_string().contains(&format!("uid {uid}")), "{u}");
        // The process directory went too: the process ended.
        let gone_dir = Path::new("/proc/does-not-exist");
        let missing = std::io::Error::from(ErrorKind::NotFound);
        assert_eq!(
            Unreadable::from_io(&gone_dir.join("fd"), Some(gone_dir), &missing).kind,
            UnreadableKind::Gone
        );
        // The directory is there, the file is not.
        assert_eq!(Unreadable::from_io(&me.join("nope"), Some(me), &missing).kind, UnreadableKind::Missing);
        let r = ProcRoot::at("/x").with_netns_pid(7);
        assert_eq!(r.net(), Path::new("/x/7/net"));
        assert_eq!(ProcRoot::at("/x").net(), Path::new("/x/net"));
    }
}
