//! A real `prometheus` process of the test's own (own config, own port on
//! loopback, own data folder), killed when the handle drops.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Server {
    child: Child,
    pub url: String,
    dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `PDTOP_PROMETHEUS_BIN`, else `prometheus` on the PATH; `None` skips the test.
pub fn binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PDTOP_PROMETHEUS_BIN") {
        return Some(PathBuf::from(p));
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join("prometheus")).find(|p| p.is_file())
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A loopback address nothing answers: its port bound but never listened
/// on, so a connection is refused and, while the socket is kept, no other
/// test's listener can take the port (a port found free and let go could
/// be, with labs starting side by side).
pub fn dead_address() -> (tokio::net::TcpSocket, String) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = socket.local_addr().unwrap().to_string();
    (socket, addr)
}

/// Starts it scraping every `scrape_ms`, one static job per `(name, targets)`;
/// its own log goes to `dir/prometheus.log`.
pub fn start(bin: &Path, dir: &Path, scrape_ms: u64, jobs: &[(&str, &[String])]) -> Server {
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let mut config = format!(
        "global:\n  scrape_interval: {scrape_ms}ms\n  scrape_timeout: {scrape_ms}ms\nscrape_configs:\n"
    );
    for (job, targets) in jobs {
        let list = targets.iter().map(|t| format!("'{t}'")).collect::<Vec<_>>().join(", ");
        config.push_str(&format!("  - job_name: {job}\n    static_configs: [{{targets: [{list}]}}]\n"));
    }
    std::fs::write(dir.join("prometheus.yml"), config).unwrap();
    // A port found free can be taken by another test before the server
    // binds it: then it exits at once, and starts again on another.
    for _ in 0..3 {
        let port = free_port();
        let mut child = Command::new(bin)
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(dir.join("prometheus.log")).unwrap()))
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline && child.try_wait().unwrap().is_none() {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                // Listening, and still running a moment later: its own.
                std::thread::sleep(Duration::from_millis(200));
                if child.try_wait().unwrap().is_none() {
                    return Server { child, url: format!("http://127.0.0.1:{port}"), dir: dir.to_path_buf() };
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!(
        "prometheus did not start: {}",
        std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
    )
}
