//! The real dashboard in a real terminal (tmux): the terminal comes back
//! (alternate screen left, cooked mode, cursor shown) after SIGTERM, SIGHUP,
//! SIGINT, a panic and an error exit; a collector that panics becomes an
//! error state on screen while pdtop keeps running; no listening socket.
//!
//! Each test has its own tmux server (`-L`), so they run in parallel and
//! never touch a user's sessions. Skipped, with a note, where tmux is absent.
//! Every wait is a bounded poll of the pane.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

struct Tmux {
    socket: String,
    dir: PathBuf,
}

impl Tmux {
    /// A 120x40 pane running a plain shell, or None without tmux.
    fn start(name: &str) -> Option<Tmux> {
        if Command::new("tmux").arg("-V").output().is_err() {
            eprintln!("tmux not installed: terminal test skipped");
            return None;
        }
        let socket = format!("pdtop-test-{name}-{}", std::process::id());
        let dir = std::env::temp_dir().join(&socket);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let t = Tmux { socket, dir };
        let ok = t
            .cmd(&[
                "new-session",
                "-d",
                "-x",
                "120",
                "-y",
                "40",
                "-s",
                "t",
                "env -i PATH=/usr/bin:/bin TERM=xterm-256color HOME=/tmp PS1='$ ' bash --norc --noprofile",
            ])
            .status
            .success();
        assert!(ok, "tmux new-session failed");
        Some(t)
    }

    fn cmd(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux").arg("-L").arg(&self.socket).args(args).output().unwrap()
    }

    fn send(&self, text: &str) {
        self.cmd(&["send-keys", "-t", "t", "-l", text]);
        self.cmd(&["send-keys", "-t", "t", "Enter"]);
    }

    fn pane(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", "t"]).stdout).into_owned()
    }

    fn var(&self, v: &str) -> String {
        String::from_utf8_lossy(&self.cmd(&["display-message", "-p", "-t", "t", v]).stdout).trim().to_string()
    }

    /// Polls the pane until `f` holds; fails with the pane after 15 s.
    fn until(&self, what: &str, f: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let p = self.pane();
            if f(&p) {
                return p;
            }
            assert!(Instant::now() < deadline, "no {what} within 15 s; pane:\n{p}");
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Runs pdtop in the shell with `env` set (from a script, so that no
    /// value is typed into the pane); its pid lands in a file. After it
    /// exits the shell prints `EXITED=<status>` on a line of its own.
    fn run_pdtop(&self, env: &str, args: &str) {
        let script = self.dir.join("run.sh");
        let pidfile = self.dir.join("pid");
        let _ = std::fs::remove_file(&pidfile);
        std::fs::write(
            &script,
            format!(
                "echo $$ > {}\n{}exec {} {args}\n",
                pidfile.display(),
                if env.is_empty() { String::new() } else { format!("export {env}\n") },
                env!("CARGO_BIN_EXE_pdtop")
            ),
        )
        .unwrap();
        self.send(&format!("sh {}; echo EXITED=$?", script.display()));
    }

    fn pid(&self) -> u32 {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(p) =
                std::fs::read_to_string(self.dir.join("pid")).ok().and_then(|s| s.trim().parse().ok())
            {
                return p;
            }
            assert!(Instant::now() < deadline, "pdtop did not start");
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// The terminal is the shell's again: not on the alternate screen, the
    /// cursor shown, and the line discipline cooked (echo, canonical).
    fn assert_restored(&self) {
        assert_eq!(self.var("#{alternate_on}"), "0", "still on the alternate screen:\n{}", self.pane());
        assert_eq!(self.var("#{cursor_flag}"), "1", "cursor left hidden");
        self.send("stty -a | tr ' ' '\\n' | grep -E '^-?(icanon|echo)$' | tr '\\n' ' '; echo STTY-$((40+2))");
        let p =
            self.until("stty output", |p| p.lines().any(|l| l.ends_with("STTY-42") && l.contains("icanon")));
        let line = p.lines().find(|l| l.ends_with("STTY-42") && l.contains("icanon")).unwrap();
        assert!(
            line.contains("icanon echo") && !line.contains("-icanon") && !line.contains("-echo"),
            "{line}"
        );
    }
}

/// The shell's `EXITED=<n>` line (not the typed command, which has `$?`).
fn exited(p: &str) -> bool {
    p.lines().any(|l| l.strip_prefix("EXITED=").is_some_and(|n| n.starts_with(|c: char| c.is_ascii_digit())))
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A loopback `/metrics` endpoint serving the capture's idle scrape.
fn healthy_endpoint() -> String {
    let body =
        std::fs::read_to_string(common::capture_dir("qwen3-shape-restart").join("decode-metrics-idle.txt"))
            .unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let body = body.clone();
            thread::spawn(move || {
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    addr
}

fn refused() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap().to_string();
    drop(l);
    a
}

fn signal_restores(sig: &str, name: &str) {
    let Some(t) = Tmux::start(name) else { return };
    let ep = refused();
    t.run_pdtop("", &format!("--decode {ep} --interval 0.2 --timeout 0.5"));
    t.until("the dashboard", |p| p.contains("DOWN") && p.contains(&ep));
    assert_eq!(t.var("#{alternate_on}"), "1");
    let pid = t.pid();
    assert!(Command::new("kill").arg(format!("-{sig}")).arg(pid.to_string()).status().unwrap().success());
    let p = t.until("pdtop to exit", exited);
    assert!(p.contains("EXITED=0"), "{sig}: {p}");
    t.assert_restored();
}

#[test]
fn sigterm_restores_the_terminal() {
    let _turn = common::real_time_turn_blocking();
    signal_restores("TERM", "term");
}

#[test]
fn sighup_restores_the_terminal() {
    let _turn = common::real_time_turn_blocking();
    signal_restores("HUP", "hup");
}

#[test]
fn sigint_restores_the_terminal() {
    let _turn = common::real_time_turn_blocking();
    signal_restores("INT", "int");
}

#[test]
fn a_panic_and_an_error_exit_restore_the_terminal() {
    let _turn = common::real_time_turn_blocking();
    let Some(t) = Tmux::start("panic") else { return };
    let ep = refused();
    t.run_pdtop("PDTOP_TEST_UI_FAULT=panic", &format!("--decode {ep}"));
    let p = t.until("pdtop to exit", exited);
    // The message is on the shell's screen, whole (not overwritten by a
    // second restore moving the cursor back).
    assert!(p.contains("test hook PDTOP_TEST_UI_FAULT"), "the panic message is readable: {p}");
    assert!(p.lines().any(|l| l.trim_end().ends_with("panicked (crashed).")), "{p}");
    assert!(p.lines().any(|l| l == "EXITED=101"), "{p}");
    t.assert_restored();
    t.send("clear");
    // The first run's EXITED line gone: else it could pass for the second's.
    t.until("the screen cleared", |p| !exited(p));
    t.run_pdtop("PDTOP_TEST_UI_FAULT=error", &format!("--decode {ep}"));
    let p = t.until("pdtop to exit", exited);
    assert!(p.contains("pdtop:") && p.contains("test hook PDTOP_TEST_UI_FAULT"), "{p}");
    assert!(p.contains("EXITED=3"), "{p}");
    t.assert_restored();
}

/// Socket inodes of `pid` that are listening TCP sockets, with their local
/// address as `/proc/net/tcp{,6}` writes it.
fn listening_sockets(pid: u32) -> Vec<String> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .filter_map(|l| l.to_str()?.strip_prefix("socket:[")?.strip_suffix(']').map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let mut out = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        for line in std::fs::read_to_string(table).unwrap_or_default().lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // local_address, state (0A = LISTEN), inode
            if f.len() > 9 && f[3] == "0A" && inodes.iter().any(|i| i == f[9]) {
                out.push(f[1].to_string());
            }
        }
    }
    out
}

#[test]
fn a_collector_panic_is_shown_as_that_source_failing_and_pdtop_keeps_running() {
    let _turn = common::real_time_turn_blocking();
    let Some(t) = Tmux::start("collector") else { return };
    let ep = healthy_endpoint();
    let token = "tok-3f9a1c-NEVER-SHOWN";
    t.run_pdtop(
        &format!("PDTOP_TEST_PANIC_SCRAPER=1 PDTOP_BEARER_TOKEN={token}"),
        &format!("--decode {ep} --interval 0.2"),
    );
    let p = t.until("the scraper's panic on screen", |p| {
        p.contains(&format!("scraper {ep}: stopped: test hook PDTOP_TEST_PANIC_SCRAPER"))
    });
    assert!(!p.contains("panicked at"), "the panic message must not tear the screen: {p}");
    // The scraper was restarted: the instance is up again, the error stays shown.
    let p = t.until("the instance back up", |p| {
        p.lines().any(|l| l.contains(&ep) && l.contains("● up")) && p.contains("stopped: test hook")
    });
    assert!(!p.contains(token));
    // The dashboard opens no listening port.
    let pid = t.pid();
    assert_eq!(listening_sockets(pid), Vec::<String>::new());
    // Still alive and answering keys.
    t.cmd(&["send-keys", "-t", "t", "q"]);
    let p = t.until("pdtop to exit", exited);
    assert!(p.contains("EXITED=0"), "{p}");
    assert!(!p.contains(token));
    t.assert_restored();
}

#[test]
fn demo_listens_on_loopback_only_and_check_listens_nowhere() {
    let _turn = common::real_time_turn_blocking();
    // `demo --serve-only` runs the lab without a screen.
    let mut demo = Command::new(env!("CARGO_BIN_EXE_pdtop"))
        .args(["demo", "--serve-only", "--speed", "20"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = demo.stdout.take().unwrap();
    let mut first = [0u8; 64];
    // It prints once it is serving.
    let _ = out.read(&mut first);
    let socks = listening_sockets(demo.id());
    let folder = std::env::temp_dir().join(format!("pdtop-demo-{}", demo.id()));
    assert!(folder.is_dir(), "the lab writes its logs under {}", folder.display());
    // `kill` stops it as Ctrl-C would: cleanly, its folder gone.
    let killed = Command::new("kill").arg(demo.id().to_string()).status().unwrap();
    assert!(killed.success());
    let status = demo.wait().unwrap();
    assert!(status.success(), "demo --serve-only on SIGTERM: {status}");
    assert!(!folder.exists(), "{} left behind", folder.display());
    assert!(!socks.is_empty(), "the demo serves its endpoints");
    for s in &socks {
        // 0100007F:PORT is 127.0.0.1 in /proc/net/tcp's byte order.
        assert!(s.starts_with("0100007F:"), "demo listens beyond loopback: {socks:?}");
    }
    let mut check = Command::new(env!("CARGO_BIN_EXE_pdtop"))
        .args(["check", "--duration", "3", "--interval", "0.2", "--decode", &healthy_endpoint()])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Looked at while it runs (bounded: a few tries over its 3 s).
    let mut seen_any_fd = false;
    for _ in 0..10 {
        thread::sleep(Duration::from_millis(200));
        seen_any_fd |= std::fs::read_dir(format!("/proc/{}/fd", check.id())).is_ok();
        assert_eq!(listening_sockets(check.id()), Vec::<String>::new());
    }
    let _ = check.wait();
    assert!(seen_any_fd);
}

/// The demo's folder goes with its terminal: the tmux server killed (the
/// pane's process gets SIGHUP, then writes to a dead terminal fail), or
/// the pane closed.
#[test]
fn the_demo_folder_goes_when_its_terminal_goes() {
    for how in [&["kill-server"][..], &["kill-pane", "-t", "t"][..]] {
        let Some(t) = Tmux::start("demo-gone") else { return };
        t.run_pdtop("", "demo --speed 2");
        let pid = t.pid();
        let folder = std::env::temp_dir().join(format!("pdtop-demo-{pid}"));
        t.until("the dashboard", |p| p.contains("PREFILL"));
        assert!(folder.is_dir(), "{}", folder.display());
        t.cmd(how);
        let deadline = Instant::now() + Duration::from_secs(15);
        while std::path::Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(100));
        }
        assert!(!folder.exists(), "{how:?} left {}", folder.display());
    }
}
