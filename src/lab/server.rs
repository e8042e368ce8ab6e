//! Plays a [`Capture`] back as a live lab on loopback: each instance is a
//! real HTTP server on 127.0.0.1 serving the `/metrics` body that was
//! recorded at the current lab time (and refusing connections while the
//! recording says it was down); each log is a real file that grows line by
//! line as its time comes. At the end the lab starts over, as a restarted
//! lab would: logs are truncated and counters begin again.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use super::capture::{Capture, ScrapeRow};
use super::clock::LabClock;
use crate::feed::Role;

/// How often the lab looks at its clock (in real time).
const STEP: Duration = Duration::from_millis(20);

#[derive(Debug, Clone)]
pub struct LabOptions {
    /// Lab seconds per real second.
    pub speed: f64,
    /// Start over at the end (the demo); tests play once.
    pub looping: bool,
    /// Folder for the log files.
    pub dir: PathBuf,
    /// Where the recorded spans are sent, as vLLM's OTLP/HTTP exporter sent
    /// them (`http://ADDR/v1/traces`), at their times; `None`: not sent.
    pub otlp_to: Option<SocketAddr>,
}

/// One recorded instance, served.
#[derive(Debug, Clone)]
pub struct LabInstance {
    pub role: Role,
    pub addr: SocketAddr,
    /// Its log, as the recording printed it (a restart's appended).
    pub log: PathBuf,
}

/// Where the running lab can be reached.
#[derive(Debug, Clone)]
pub struct LabHandle {
    /// Every recorded instance, prefills first (`prefill`, `decode` and
    /// their logs below are the first of each role).
    pub instances: Vec<LabInstance>,
    pub prefill: SocketAddr,
    pub decode: SocketAddr,
    pub prefill_log: PathBuf,
    pub decode_log: PathBuf,
    pub proxy_log: Option<PathBuf>,
    /// A file in `/proc/net/dev` format holding the recorded counters.
    pub net_dev_file: Option<PathBuf>,
    /// The connector directory, refilled as the recording stored prompts.
    pub kv_dir: Option<PathBuf>,
    pub clock: LabClock,
}

/// Starts the lab's servers and log writers on the current tokio runtime.
pub async fn start(capture: Capture, opts: LabOptions) -> std::io::Result<LabHandle> {
    start_at(capture, opts, Instant::now()).await
}

/// As [`start`], with the recording starting at `at`: until then the lab
/// serves its first moment. Gives a slow observer (a Prometheus server
/// takes seconds to begin scraping new targets) time to get going.
pub async fn start_at(capture: Capture, opts: LabOptions, at: Instant) -> std::io::Result<LabHandle> {
    std::fs::create_dir_all(&opts.dir)?;
    let mut listeners = Vec::new();
    let mut instances = Vec::new();
    for i in &capture.instances {
        let l = TcpListener::bind("127.0.0.1:0").await?;
        instances.push(LabInstance { role: i.role, addr: l.local_addr()?, log: opts.dir.join(&i.file_name) });
        listeners.push(l);
    }
    // The proxy names the instances by the addresses they had when
    // recorded (`Cannot connect to host 127.0.0.1:8201`); the lab serves
    // them on others, which pdtop is told of.
    let moved: Vec<(String, String)> =
        capture.instances.iter().zip(&instances).map(|(i, l)| (i.addr.clone(), l.addr.to_string())).collect();
    let first = |role: Role| {
        instances.iter().find(|i| i.role == role).cloned().ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("the recording has no {} instance", role.name()),
            )
        })
    };
    let (prefill, decode) = (first(Role::Prefill)?, first(Role::Decode)?);
    let now = Instant::now();
    let ahead =
        at.saturating_duration_since(now).as_secs_f64() - now.saturating_duration_since(at).as_secs_f64();
    let clock = LabClock {
        start: at,
        wall0: crate::clock::Clock::now(&crate::clock::SystemClock) + ahead,
        t0: capture.t0,
        t_end: capture.t_end,
        speed: opts.speed.max(0.01),
        looping: opts.looping,
        stop: Default::default(),
    };
    let path_of = |name: &str| opts.dir.join(name);
    let handle = LabHandle {
        instances,
        prefill: prefill.addr,
        decode: decode.addr,
        prefill_log: prefill.log,
        decode_log: decode.log,
        proxy_log: capture.logs.iter().any(|l| l.file_name == "proxy.log").then(|| path_of("proxy.log")),
        // Beside the logs, not among them: rewritten every second, it would
        // stir the screen's log tailer each time, as /proc/net/dev does not.
        net_dev_file: (!capture.netdev.is_empty()).then(|| path_of("link/net-dev")),
        kv_dir: (!capture.kvdir_counts.is_empty() && !capture.kvdir_folders.is_empty())
            .then(|| path_of("kv")),
        clock: clock.clone(),
    };
    let mut capture = capture;
    for script in capture.logs.iter_mut().filter(|l| l.source == crate::feed::LogOrigin::Proxy) {
        for (_, line) in &mut script.lines {
            for (from, to) in &moved {
                *line = readdress(line, from, to);
            }
        }
    }
    let capture = Arc::new(capture);
    for (k, listener) in listeners.into_iter().enumerate() {
        tokio::spawn(serve_instance(k, listener, capture.clone(), clock.clone()));
    }
    let paths: Vec<PathBuf> = capture.logs.iter().map(|l| path_of(&l.file_name)).collect();
    // Every log is there once the lab is, as a server's log redirected to
    // a file is: a reader started at once finds it.
    for p in &paths {
        std::fs::write(p, b"")?;
    }
    if let Some(dir) = handle.net_dev_file.as_ref().and_then(|p| p.parent()) {
        std::fs::create_dir_all(dir)?;
    }
    tokio::spawn(write_logs(paths, capture.clone(), clock.clone()));
    tokio::spawn(write_link(
        handle.net_dev_file.clone(),
        handle.kv_dir.clone(),
        capture.clone(),
        clock.clone(),
    ));
    if let Some(to) = opts.otlp_to.filter(|_| !capture.otlp_frames.is_empty()) {
        tokio::spawn(super::sender::send_spans(to, capture.clone(), clock.clone()));
    }
    Ok(handle)
}

/// The recorded row of instance `k` at lab time `t`: `Ok(body)` or `Err(down)`.
fn row_at(capture: &Capture, k: usize, t: f64) -> Result<&str, ()> {
    let rows = &capture.scrapes;
    let idx = rows.partition_point(|r| r.t <= t);
    let mine = |r: &&ScrapeRow| r.instance == k;
    let row = rows[..idx].iter().rev().find(mine).or_else(|| rows.iter().find(mine));
    match row.and_then(|r| r.body.as_deref()) {
        Some(body) => Ok(body),
        None => Err(()),
    }
}

async fn serve_instance(k: usize, listener: TcpListener, capture: Arc<Capture>, clock: LabClock) {
    let Ok(addr) = listener.local_addr() else {
        return;
    };
    let mut listener = Some(listener);
    loop {
        if clock.stopped() {
            return;
        }
        let (_, t) = clock.now();
        let down = row_at(&capture, k, t).is_err();
        if down {
            // Closing the socket makes connections fail with "refused",
            // exactly as when the recorded instance was dead.
            listener = None;
        } else if listener.is_none() {
            listener = TcpListener::bind(addr).await.ok();
        }
        let Some(l) = &listener else {
            tokio::time::sleep(STEP).await;
            continue;
        };
        tokio::select! {
            conn = l.accept() => {
                if let Ok((stream, _)) = conn {
                    tokio::spawn(answer(stream, k, capture.clone(), clock.clone()));
                }
            }
            _ = tokio::time::sleep(STEP) => {}
        }
    }
}

/// Answers HTTP/1.1 requests on one connection, kept alive between them as
/// uvicorn keeps a scraper's. While the recorded instance is down the
/// connection is dropped unanswered, as a dead process's is.
async fn answer(mut stream: TcpStream, k: usize, capture: Arc<Capture>, clock: LabClock) {
    let mut buf = vec![0u8; 8192];
    loop {
        let mut n = 0;
        while n < buf.len() {
            // uvicorn's keep-alive timeout is 5 s.
            match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf[n..])).await {
                Ok(Ok(0)) | Err(_) | Ok(Err(_)) => return,
                Ok(Ok(k)) => {
                    n += k;
                    if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
            }
        }
        let head = String::from_utf8_lossy(&buf[..n]);
        let path = head.split_whitespace().nth(1).unwrap_or("/");
        let (_, t) = clock.now();
        let (status, ctype, body) = match path {
            "/metrics" => match row_at(&capture, k, t) {
                Ok(body) => (
                    "200 OK",
                    "text/plain; version=0.0.4; charset=utf-8",
                    // Started once, whichever loop plays: a loop is no restart.
                    restamp_start(body, |t| clock.stamp_time(0, t)),
                ),
                Err(()) => return,
            },
            "/v1/models" => ("200 OK", "application/json", models_json(&capture, k)),
            "/version" => match version_of(&capture, k) {
                Some(v) => ("200 OK", "application/json", serde_json::json!({ "version": v }).to_string()),
                None => ("404 Not Found", "text/plain", "not found\n".to_string()),
            },
            "/health" => ("200 OK", "text/plain", String::new()),
            _ => ("404 Not Found", "text/plain", "not found\n".to_string()),
        };
        let resp = format!(
            "HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        if stream.write_all(resp.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// The scrape with `process_start_time_seconds` moved to the lab's clock,
/// as its log stamps are: an uptime is then the recording's, whenever the
/// lab plays it.
fn restamp_start(body: &str, when: impl Fn(f64) -> f64) -> String {
    const NAME: &str = "process_start_time_seconds ";
    let Some((at, _)) = body.match_indices(NAME).find(|&(i, _)| i == 0 || body.as_bytes()[i - 1] == b'\n')
    else {
        return body.to_string();
    };
    let from = at + NAME.len();
    let end = body[from..].find('\n').map_or(body.len(), |e| from + e);
    match body[from..end].trim().parse::<f64>() {
        Ok(v) => format!("{}{:.2}{}", &body[..from], when(v), &body[end..]),
        Err(_) => body.to_string(),
    }
}

/// What the recorded instance's `/v1/models` said, as far as its own
/// startup log tells: vLLM's `root` is the `--model` path and
/// `max_model_len` its length. Both roles come from their own log, so the
/// lab never shows a pair that disagrees where the recording did not.
fn models_json(capture: &Capture, k: usize) -> String {
    let config = startup_of(capture, k);
    serde_json::json!({
        "object": "list",
        "data": [{
            "id": capture.model_name,
            "object": "model",
            "owned_by": "vllm",
            "root": config.model,
            "max_model_len": config.max_model_len,
        }]
    })
    .to_string()
}

/// The vLLM version the recorded instance ran, as its own log printed it.
fn version_of(capture: &Capture, k: usize) -> Option<String> {
    startup_of(capture, k).version
}

/// What the recorded instance's startup lines say of it.
fn startup_of(capture: &Capture, k: usize) -> crate::logs::startup::StartupConfig {
    let mut config = crate::logs::startup::StartupConfig::default();
    let file = capture.instances.get(k).map(|i| i.file_name.as_str());
    if let Some(log) = capture.logs.iter().find(|l| Some(l.file_name.as_str()) == file) {
        for (_, line) in log.lines.iter().take(2000) {
            config.on_line(line);
        }
    }
    config
}

/// Appends each line of each log when its time comes; truncates at a new
/// loop. One task writes every file, prefill first and decode last, as the
/// real processes did: a prefill finishes before its decode request starts.
async fn write_logs(paths: Vec<PathBuf>, capture: Arc<Capture>, clock: LabClock) {
    let rank = |name: &str| match name {
        "prefill.log" => 0,
        "proxy.log" => 1,
        _ => 2,
    };
    let mut order: Vec<usize> = (0..capture.logs.len()).collect();
    order.sort_by_key(|i| rank(&capture.logs[*i].file_name));
    let mut next = vec![0usize; capture.logs.len()];
    let mut loop_no = 0;
    loop {
        if clock.stopped() {
            return;
        }
        let (l, t) = clock.now();
        if l != loop_no {
            loop_no = l;
            next.iter_mut().for_each(|n| *n = 0);
            for p in &paths {
                let _ = std::fs::write(p, b"");
            }
        }
        for &i in &order {
            let lines = &capture.logs[i].lines;
            let end = next[i] + lines[next[i]..].partition_point(|(lt, _)| *lt <= t);
            if end > next[i] {
                append(&paths[i], &lines[next[i]..end], |lt| clock.stamp_time(loop_no, lt));
                next[i] = end;
            }
        }
        tokio::time::sleep(STEP).await;
    }
}

/// Keeps the recorded interface counters in a file, and the connector
/// directory holding as many stored prompts as the recording had: each a
/// folder of sparse layer files of the recorded sizes (no disk is used).
async fn write_link(
    net_dev: Option<PathBuf>,
    kv_dir: Option<PathBuf>,
    capture: Arc<Capture>,
    clock: LabClock,
) {
    let mut last_netdev = usize::MAX;
    let mut created: Vec<usize> = Vec::new();
    let mut loop_no = u64::MAX;
    loop {
        if clock.stopped() {
            return;
        }
        let (l, t) = clock.now();
        if let Some(path) = &net_dev {
            let idx = capture.netdev.partition_point(|(nt, _)| *nt <= t).saturating_sub(1);
            if idx != last_netdev && idx < capture.netdev.len() {
                last_netdev = idx;
                let tmp = path.with_extension("tmp");
                if std::fs::write(&tmp, &capture.netdev[idx].1).is_ok() {
                    let _ = std::fs::rename(&tmp, path);
                }
            }
        }
        if let Some(dir) = &kv_dir {
            if l != loop_no {
                loop_no = l;
                created.clear();
                let _ = std::fs::remove_dir_all(dir);
                let _ = std::fs::create_dir_all(dir);
            }
            let due = capture.kvdir_created.partition_point(|(ct, _)| *ct <= t);
            while created.len() < due {
                let i = capture.kvdir_created[created.len()].1;
                created.push(i);
                let (name, files) = &capture.kvdir_folders[i];
                let folder = dir.join(name);
                let _ = std::fs::create_dir_all(&folder);
                for (file, size) in files {
                    if let Ok(f) = std::fs::File::create(folder.join(file)) {
                        let _ = f.set_len(*size);
                    }
                }
            }
        }
        tokio::time::sleep(STEP * 5).await;
    }
}

/// Appends recorded lines, each stamped with the lab's own time for it
/// (`when`: recording time to the lab's clock).
/// `line` with the address `from` (`127.0.0.1:8201`, or `localhost:8201`)
/// as `to` wherever it stands whole (not `127.0.0.1:82010`).
fn readdress(line: &str, from: &str, to: &str) -> String {
    let port = from.rsplit_once(':').map_or(from, |(_, p)| p);
    let mut out = line.to_string();
    for form in [from.to_string(), format!("localhost:{port}")] {
        let mut at = 0;
        while let Some(k) = out[at..].find(&form) {
            let (start, end) = (at + k, at + k + form.len());
            let whole = !out[end..].starts_with(|c: char| c.is_ascii_digit())
                && !out[..start].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '.');
            if whole {
                out.replace_range(start..end, to);
                at = start + to.len();
            } else {
                at = end;
            }
        }
    }
    out
}

fn append(path: &Path, lines: &[(f64, String)], when: impl Fn(f64) -> f64) {
    use std::io::Write;
    let mut text = String::new();
    for (lt, line) in lines {
        let at = when(*lt);
        let moved = crate::logs::vllm::restamp(line, |_| crate::traces::stamp_at(at))
            .or_else(|| crate::logs::restamp_dated(line, at));
        text.push_str(moved.as_deref().unwrap_or(line));
        text.push('\n');
    }
    if let Ok(mut f) = std::fs::OpenOptions::new().append(true).create(true).open(path) {
        let _ = f.write_all(text.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proxy_names_each_instance_where_the_lab_serves_it() {
        // nixl-1p2d-cascade/proxy.log's traceback, decode2 served on 40001.
        let line = "aiohttp.client_exceptions.ClientConnectorError: Cannot connect to host 127.0.0.1:8201 ssl:default [Connect call failed ('127.0.0.1', 8201)]";
        assert_eq!(
            readdress(line, "127.0.0.1:8201", "127.0.0.1:40001"),
            line.replace("127.0.0.1:8201", "127.0.0.1:40001")
        );
        assert_eq!(
            readdress("Connection error to localhost:8200/v1", "127.0.0.1:8200", "127.0.0.1:4"),
            "Connection error to 127.0.0.1:4/v1"
        );
        // Another port, or another host, that starts or ends the same: as it was.
        for other in ["127.0.0.1:82010", "10.127.0.0.1:8201", "127.0.0.1:820"] {
            assert_eq!(readdress(other, "127.0.0.1:8201", "127.0.0.1:4"), other);
        }
    }

    #[test]
    fn process_start_moves_to_the_lab_clock_and_nothing_else_does() {
        let body = "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1.7960198006e+09\nvllm:num_requests_running{engine=\"0\"} 1.0\n";
        let moved = restamp_start(body, |t| t + 100.0);
        assert_eq!(
            moved,
            "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1796019900.60\nvllm:num_requests_running{engine=\"0\"} 1.0\n"
        );
        // No such line, or a value that is no number: the body as it was.
        assert_eq!(restamp_start("vllm:x 1\n", |t| t + 1.0), "vllm:x 1\n");
        let bad = "process_start_time_seconds NaNx\n";
        assert_eq!(restamp_start(bad, |t| t + 1.0), bad);
    }
}
