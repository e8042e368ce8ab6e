//! Waiting for a tailed file to change, so that a quiet log costs no
//! round: inotify on each file for its writes, on its directory for the
//! file coming and going (a rotation, a new file taking the name), and a
//! [`Nudge`] that another thread writes to when it wants a round sooner.
//! Other files of the directory may be written all the time (a server's
//! other logs): their writes are not told. Events only say when to
//! read: every round still reads every file as a poll does, so a change
//! inotify never reports (a network mount written from another host) is
//! read at the next round the timer gives.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use rustix::event::{EventfdFlags, PollFd, PollFlags, Timespec, eventfd, poll};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;

/// Tells a waiting [`Watch`] to look again at what it waits for.
#[derive(Clone)]
pub struct Nudge(Arc<OwnedFd>);

impl Nudge {
    pub fn new() -> io::Result<Nudge> {
        Ok(Nudge(Arc::new(eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?)))
    }

    pub fn nudge(&self) {
        // A full counter (2^64 - 2 nudges unread) already wakes the waiter.
        let _ = rustix::io::write(&*self.0, &1u64.to_ne_bytes());
    }

    fn clear(&self) {
        let mut n = [0u8; 8];
        let _ = rustix::io::read(&*self.0, &mut n);
    }
}

/// Why [`Watch::wait`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woke {
    /// A watched file was written, created, moved or deleted (or the
    /// kernel's queue overflowed: anything may have changed).
    Changed,
    Nudged,
    /// The deadline came.
    Timeout,
}

pub struct Watch {
    inotify: OwnedFd,
    /// Each directory, by its watch descriptor, with the names watched in it.
    dirs: HashMap<i32, (PathBuf, Vec<OsString>)>,
    /// The files watched for writes (what a watched name was when looked at).
    files: HashSet<i32>,
    nudge: Nudge,
    buf: Vec<MaybeUninit<u8>>,
    lost: bool,
}

impl Watch {
    /// Watches `paths` and their directories (each must exist; a file need not).
    pub fn new(paths: &[String], nudge: Nudge) -> io::Result<Watch> {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
        let flags = WatchFlags::CREATE
            | WatchFlags::DELETE
            | WatchFlags::MOVED_FROM
            | WatchFlags::MOVED_TO
            | WatchFlags::DELETE_SELF
            | WatchFlags::MOVE_SELF
            | WatchFlags::ONLYDIR;
        let mut w = Watch {
            inotify: fd,
            dirs: HashMap::new(),
            files: HashSet::new(),
            nudge,
            buf: vec![MaybeUninit::uninit(); 4096],
            lost: false,
        };
        for p in paths {
            let path = Path::new(p);
            // A link's target is written where it lives: its directory too.
            let target = std::fs::canonicalize(path).ok().filter(|t| t != path);
            for path in std::iter::once(path).chain(target.as_deref()) {
                let (Some(name), dir) = (path.file_name(), path.parent()) else {
                    return Err(io::Error::other(format!("{p}: not a file's path")));
                };
                let dir = dir.filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
                // The same directory twice gives the same descriptor.
                let wd = inotify::add_watch(&w.inotify, dir, flags)?;
                let entry = w.dirs.entry(wd).or_insert_with(|| (dir.to_path_buf(), Vec::new()));
                entry.1.push(name.to_os_string());
                w.watch_file(&dir.join(name));
            }
        }
        Ok(w)
    }

    /// Watches the writes of the file `path` names now (none yet: its
    /// directory tells when it comes). One that cannot be watched (the
    /// kernel's limit reached) leaves the timer to do.
    fn watch_file(&mut self, path: &Path) {
        match inotify::add_watch(&self.inotify, path, WatchFlags::MODIFY) {
            Ok(wd) => {
                self.files.insert(wd);
            }
            Err(Errno::NOENT) => {}
            Err(_) => self.lost = true,
        }
    }

    /// Whether a watched directory went away (deleted, moved, unmounted):
    /// its files' changes are no longer told, and a timer must do.
    pub fn lost(&self) -> bool {
        self.lost
    }

    /// Blocks until a watched file changes, the nudge, or `until`.
    pub fn wait(&mut self, until: Instant) -> io::Result<Woke> {
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Woke::Timeout);
            }
            let timeout = Timespec { tv_sec: left.as_secs() as _, tv_nsec: left.subsec_nanos() as _ };
            let (changed, nudged) = {
                let mut fds =
                    [PollFd::new(&self.inotify, PollFlags::IN), PollFd::new(&*self.nudge.0, PollFlags::IN)];
                match poll(&mut fds, Some(&timeout)) {
                    Err(Errno::INTR) => continue,
                    Err(e) => return Err(e.into()),
                    Ok(_) => (!fds[0].revents().is_empty(), !fds[1].revents().is_empty()),
                }
            };
            if nudged {
                self.nudge.clear();
            }
            if changed && self.drain()? {
                return Ok(Woke::Changed);
            }
            if nudged {
                return Ok(Woke::Nudged);
            }
        }
    }

    /// Forgets the changes told so far (the round about to begin reads
    /// them), keeping what they said of the directories.
    pub fn clear(&mut self) {
        if self.drain().is_err() {
            self.lost = true;
        }
    }

    /// Reads every queued event; whether one concerns a watched file.
    fn drain(&mut self) -> io::Result<bool> {
        let mut hit = false;
        let mut arrived: Vec<PathBuf> = Vec::new();
        let mut gone: Vec<i32> = Vec::new();
        let mut reader = inotify::Reader::new(&self.inotify, &mut self.buf);
        loop {
            let ev = match reader.next() {
                Ok(ev) => ev,
                Err(Errno::AGAIN) => break,
                Err(Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            };
            let flags = ev.events();
            if flags.intersects(ReadFlags::QUEUE_OVERFLOW) {
                // A file's arrival may be among the events lost: every
                // name is watched again (a watched inode keeps its watch).
                hit = true;
                arrived.extend(self.dirs.values().flat_map(|(dir, names)| names.iter().map(|n| dir.join(n))));
            } else if let Some((dir, names)) = self.dirs.get(&ev.wd()) {
                if flags.intersects(
                    ReadFlags::IGNORED | ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF | ReadFlags::UNMOUNT,
                ) {
                    self.lost = true;
                    hit = true;
                } else if let Some(n) =
                    ev.file_name().filter(|n| names.iter().any(|w| w.as_bytes() == n.to_bytes()))
                {
                    hit = true;
                    if flags.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO) {
                        arrived.push(dir.join(std::ffi::OsStr::from_bytes(n.to_bytes())));
                    }
                }
            } else if self.files.contains(&ev.wd()) {
                // Its inode is gone; the name's next file comes through the directory.
                if flags.intersects(ReadFlags::IGNORED) {
                    gone.push(ev.wd());
                } else {
                    hit = true;
                }
            }
        }
        for wd in gone {
            self.files.remove(&wd);
        }
        for path in arrived {
            self.watch_file(&path);
        }
        Ok(hit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::Duration;

    fn dir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("pdtop-watch-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_millis(200)
    }

    #[test]
    fn a_write_a_rotation_and_a_new_file_are_told_and_other_files_are_not() {
        let d = dir("events");
        let log = d.join("decode.log");
        let path = log.to_string_lossy().into_owned();
        let mut w = Watch::new(std::slice::from_ref(&path), Nudge::new().unwrap()).unwrap();
        assert_eq!(w.wait(soon()).unwrap(), Woke::Timeout, "nothing happened");
        // Not there yet: its creation is a change.
        let mut f = std::fs::File::create(&log).unwrap();
        assert_eq!(w.wait(soon()).unwrap(), Woke::Changed);
        f.write_all(b"INFO Added request x\n").unwrap();
        assert_eq!(w.wait(soon()).unwrap(), Woke::Changed);
        // Another file of the directory (another server's log) is not.
        let mut other = std::fs::File::create(d.join("router.log")).unwrap();
        let _ = w.wait(soon());
        other.write_all(b"a line of another log\n").unwrap();
        assert_eq!(w.wait(soon()).unwrap(), Woke::Timeout);
        // Rotation: moved away, then a new one, whose writes are told.
        std::fs::rename(&log, d.join("decode.log.1")).unwrap();
        assert_eq!(w.wait(soon()).unwrap(), Woke::Changed);
        let mut g = std::fs::File::create(&log).unwrap();
        assert_eq!(w.wait(soon()).unwrap(), Woke::Changed);
        g.write_all(b"INFO again\n").unwrap();
        assert_eq!(w.wait(soon()).unwrap(), Woke::Changed);
        // The old file, still written by a process that holds it, is too
        // (the tailer finishes it).
        f.write_all(b"INFO a last line\n").unwrap();
        assert_eq!(w.wait(soon()).unwrap(), Woke::Changed);
        // Truncated in place.
        g.set_len(0).unwrap();
        assert_eq!(w.wait(soon()).unwrap(), Woke::Changed);
        assert!(!w.lost());
        drop((f, g, other));
        std::fs::remove_dir_all(&d).unwrap();
        assert_eq!(w.wait(soon()).unwrap(), Woke::Changed);
        // The directory's own end is told with its files' or after them.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !w.lost() && Instant::now() < deadline {
            let _ = w.wait(soon());
        }
        assert!(w.lost(), "its directory is gone");
    }

    #[test]
    fn a_link_is_followed_to_where_its_file_is_written() {
        let (d, elsewhere) = (dir("link"), dir("target"));
        let target = elsewhere.join("run-1.log");
        std::fs::write(&target, "").unwrap();
        let link = d.join("decode.log");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let mut w = Watch::new(&[link.to_string_lossy().into_owned()], Nudge::new().unwrap()).unwrap();
        std::fs::write(&target, "INFO Added request x\n").unwrap();
        assert_eq!(w.wait(soon()).unwrap(), Woke::Changed);
        std::fs::remove_dir_all(&d).unwrap();
        std::fs::remove_dir_all(&elsewhere).unwrap();
    }

    #[test]
    fn a_nudge_from_another_thread_ends_the_wait_and_is_taken_once() {
        let d = dir("nudge");
        let path = d.join("a.log").to_string_lossy().into_owned();
        let nudge = Nudge::new().unwrap();
        let mut w = Watch::new(&[path], nudge.clone()).unwrap();
        let other = nudge.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            other.nudge();
        });
        let started = Instant::now();
        assert_eq!(w.wait(Instant::now() + Duration::from_secs(30)).unwrap(), Woke::Nudged);
        assert!(started.elapsed() < Duration::from_secs(10));
        t.join().unwrap();
        assert_eq!(w.wait(soon()).unwrap(), Woke::Timeout, "a nudge is taken once");
        // Nudges not yet taken are one wake. (Two sent from a thread while
        // a wait is under way may fall either side of its wake: two wakes.)
        nudge.nudge();
        nudge.nudge();
        assert_eq!(w.wait(soon()).unwrap(), Woke::Nudged);
        assert_eq!(w.wait(soon()).unwrap(), Woke::Timeout, "two nudges are one");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_directory_that_is_not_there_is_an_error() {
        let r = Watch::new(&["/nonexistent-pdtop-dir/x.log".to_string()], Nudge::new().unwrap());
        assert!(r.is_err());
    }
}
