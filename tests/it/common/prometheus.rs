//! A real `prometheus` process of the test's own (own config, own port on
//! loopback, own data folder), killed when the handle drops.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

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
    let port = free_port();
    let child = Command::new(bin)
        .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
        .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--log.level=warn")
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(dir.join("prometheus.log")).unwrap()))
        .spawn()
        .unwrap();
    Server { child, url: format!("http://127.0.0.1:{port}"), dir: dir.to_path_buf() }
}
