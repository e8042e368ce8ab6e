//! A recorded lab session in the layout of `shared/lab-captures/<name>/`:
//! scrapes of both instances every 0.5 s, the instances' and the proxy's
//! logs, and the client's per-request ground truth. The demo embeds one.

use std::path::Path;

use super::instances::{Instance, instances, owner, port_in_cmd, role_of};
use super::kvdir::{creation_order, folder_scans, parse_listing};
use super::log_times::{proxy_lines, stamped_lines, timed_lines};
use crate::feed::{KvDirSnapshot, LogOrigin, Role};

/// One recorded `/metrics` fetch.
#[derive(Debug, Clone)]
pub struct ScrapeRow {
    pub t: f64,
    pub role: Role,
    /// Index into `Capture::instances` (and the replay's endpoints).
    pub instance: usize,
    /// The body, or `None` when the instance was down (`error`).
    pub body: Option<String>,
    pub error: Option<String>,
}

/// A log file to replay line by line at the time each line was printed.
#[derive(Debug, Clone)]
pub struct LogScript {
    pub file_name: String,
    pub source: LogOrigin,
    pub lines: Vec<(f64, String)>,
    /// Why its lines are not replayed (nothing dates them): shown as the
    /// log's state, never placed at a made-up time.
    pub undated: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Capture {
    pub name: String,
    /// The recorded instances, prefills first (the replay's endpoints).
    pub instances: Vec<Instance>,
    pub scrapes: Vec<ScrapeRow>,
    pub logs: Vec<LogScript>,
    pub t0: f64,
    pub t_end: f64,
    pub model_config: Option<String>,
    /// The served model name, as the scrapes' `model_name` label says.
    pub model_name: String,
    /// `/proc/net/dev` text at each tick.
    pub netdev: Vec<(f64, String)>,
    /// The connector directory's folder count at each tick, and the folders
    /// it held at the end (name, file sizes), for replaying it.
    pub kvdir_counts: Vec<(f64, usize, u64)>,
    pub kvdir_folders: Vec<(String, Vec<(String, u64)>)>,
    /// When each folder appeared: (time, index into `kvdir_folders`). The
    /// listing has no creation order, so folders are matched to the
    /// recorded byte totals where a size fits.
    pub kvdir_created: Vec<(f64, usize)>,
    /// The directory as scanned during the run (`kvdir-folders.jsonl.xz`),
    /// when recorded: replayed as it was, not rebuilt from the end.
    pub kvdir_scans: Vec<(f64, KvDirSnapshot)>,
    /// vLLM's OpenTelemetry request spans, each export as it arrived.
    pub spans: Vec<(f64, Vec<crate::feed::RequestSpan>)>,
    /// The export bodies themselves, as vLLM sent them, for the lab to send again.
    pub otlp_frames: Vec<(f64, Vec<u8>)>,
}

/// Errors while loading a capture.
#[derive(Debug)]
pub struct CaptureError(pub String);

impl std::fmt::Display for CaptureError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CaptureError {}

macro_rules! embedded {
    ($file:literal) => {
        include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/lab/qwen3-shape-restart/", $file))
    };
}

/// The files of a capture, whether read from a folder or embedded.
struct Files {
    scrapes_xz: Vec<u8>,
    /// `vllm-<name>.log` by name (`prefill`, `decode2`).
    logs: Vec<(String, Vec<u8>)>,
    /// `--port` of each instance's `<name>.cmd`, where the folder has one.
    ports: Vec<(String, u16)>,
    kvdir_folders_xz: Option<Vec<u8>>,
    proxy_log: Option<Vec<u8>>,
    requests: Option<Vec<u8>>,
    model_config: Option<Vec<u8>>,
    netdev_xz: Option<Vec<u8>>,
    kvdir: Option<Vec<u8>>,
    kvdir_listing_xz: Option<Vec<u8>>,
    otlp: Option<Vec<u8>>,
}

impl Capture {
    /// The capture shipped inside the binary (a real vLLM 0.26 pair with the
    /// ExampleConnector: silent misses and a decode restart).
    pub fn embedded() -> Result<Capture, CaptureError> {
        let files = Files {
            scrapes_xz: embedded!("scrapes.jsonl.xz").to_vec(),
            logs: vec![
                ("prefill".into(), xz(embedded!("vllm-prefill.log.xz"))?),
                ("decode".into(), xz(embedded!("vllm-decode.log.xz"))?),
                ("decode2".into(), xz(embedded!("vllm-decode2.log.xz"))?),
            ],
            ports: Vec::new(),
            kvdir_folders_xz: None,
            proxy_log: Some(embedded!("proxy.log").to_vec()),
            requests: Some(xz(embedded!("requests.jsonl.xz"))?),
            model_config: Some(embedded!("model-config.json").to_vec()),
            netdev_xz: Some(embedded!("netdev.jsonl.xz").to_vec()),
            kvdir: Some(xz(embedded!("kvdir.jsonl.xz"))?),
            kvdir_listing_xz: Some(embedded!("kvdir-listing.txt.xz").to_vec()),
            otlp: None,
        };
        Capture::from_files("qwen3-shape-restart (embedded)".into(), files)
    }

    /// A capture folder in the `shared/lab-captures/` layout.
    pub fn from_dir(dir: &Path) -> Result<Capture, CaptureError> {
        let read = |name: &str| std::fs::read(dir.join(name)).ok();
        let need =
            |name: &str| read(name).ok_or_else(|| CaptureError(format!("{}: missing {name}", dir.display())));
        need("vllm-prefill.log")?;
        need("vllm-decode.log")?;
        let mut logs = Vec::new();
        let mut ports = Vec::new();
        let mut entries: Vec<String> = std::fs::read_dir(dir)
            .map_err(|e| CaptureError(format!("{}: {e}", dir.display())))?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        entries.sort();
        for f in &entries {
            let name = f.strip_prefix("vllm-").and_then(|r| r.strip_suffix(".log"));
            if let Some(name) = name.filter(|n| role_of(n).is_some()) {
                logs.push((name.to_string(), need(f)?));
            }
            let cmd = f.strip_suffix(".cmd").filter(|n| role_of(n).is_some());
            if let Some(port) =
                cmd.and_then(|n| port_in_cmd(&String::from_utf8_lossy(&read(f)?)).map(|p| (n, p)))
            {
                ports.push((port.0.to_string(), port.1));
            }
        }
        let files = Files {
            scrapes_xz: need("scrapes.jsonl.xz")?,
            logs,
            ports,
            kvdir_folders_xz: read("kvdir-folders.jsonl.xz"),
            proxy_log: read("proxy.log"),
            requests: read("requests.jsonl"),
            model_config: read("model-config.json"),
            netdev_xz: read("netdev.jsonl.xz"),
            kvdir: read("kvdir.jsonl"),
            kvdir_listing_xz: read("kvdir-listing.txt.xz"),
            otlp: read("otlp.bin"),
        };
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        Capture::from_files(name, files)
    }

    fn from_files(name: String, files: Files) -> Result<Capture, CaptureError> {
        let scrapes_text = String::from_utf8(xz(&files.scrapes_xz)?)
            .map_err(|_| CaptureError("scrapes are not UTF-8".into()))?;
        let mut raw = Vec::new();
        for (i, line) in scrapes_text.lines().enumerate() {
            let row: RawScrape = serde_json::from_str(line)
                .map_err(|e| CaptureError(format!("scrapes line {}: {e}", i + 1)))?;
            raw.push(row);
        }
        // Every instance scraped or logged: a log of an instance the
        // scrapes never name still plays (unless it is a restart's log).
        let mut names: Vec<String> = raw.iter().map(|r| r.instance.clone()).collect();
        names.sort();
        names.dedup();
        let scraped = instances(&names, &|_| None);
        for (n, _) in &files.logs {
            if owner(&scraped, n).is_none() && !names.contains(n) {
                names.push(n.clone());
            }
        }
        let port_of = |n: &str| files.ports.iter().find(|(m, _)| m == n).map(|(_, p)| *p);
        let instances = instances(&names, &port_of);
        let mut scrapes = Vec::new();
        for row in raw {
            // vllm-router's own /metrics (router-nixl-1p2d) is no instance:
            // taken for the decode, its bodies would stand between the
            // decode's own.
            if row.instance == "router" {
                continue;
            }
            // A name that is no role (an old capture's `decode` spelled
            // otherwise) is the decode, as it always was.
            let k = instances.iter().position(|i| i.name == row.instance);
            let k = k.or_else(|| instances.iter().position(|i| i.role == Role::Decode)).unwrap_or(0);
            let body = row.text.filter(|_| row.error.is_none());
            scrapes.push(ScrapeRow {
                t: row.t,
                role: instances.get(k).map_or(Role::Decode, |i| i.role),
                instance: k,
                error: row.error.or_else(|| body.is_none().then(|| "no body".into())),
                body,
            });
        }
        scrapes.sort_by(|a, b| a.t.total_cmp(&b.t));
        let t0 = scrapes.first().map(|s| s.t).ok_or_else(|| CaptureError("no scrapes".into()))?;
        let t_end = scrapes.last().map(|s| s.t).unwrap_or(t0);
        let model_name = scrapes
            .iter()
            .find_map(|s| s.body.as_deref().and_then(model_label))
            .unwrap_or_else(|| "model".into());

        let mut logs: Vec<LogScript> = instances
            .iter()
            .map(|i| LogScript {
                file_name: i.file_name.clone(),
                source: i.source,
                lines: Vec::new(),
                undated: None,
            })
            .collect();
        // Shorter names first: an instance's own log before its restart's.
        let mut by_name: Vec<&(String, Vec<u8>)> = files.logs.iter().collect();
        by_name.sort_by_key(|(n, _)| (n.len(), n.clone()));
        for (n, bytes) in by_name {
            if let Some(k) = owner(&instances, n).and_then(|o| instances.iter().position(|i| i == o)) {
                logs[k].lines.extend(timed_lines(bytes, t0));
            }
        }
        logs.retain(|l| !l.lines.is_empty());
        if let Some(proxy) = &files.proxy_log {
            // A proxy that stamps its lines (vllm-router) is placed by them.
            let lines =
                stamped_lines(proxy, t0).or_else(|| proxy_lines(proxy, files.requests.as_deref(), t0));
            let script = match lines {
                Some(lines) => LogScript { file_name: "proxy.log".into(), source: LogOrigin::Proxy, lines, undated: None },
                None => LogScript {
                    file_name: "proxy.log".into(),
                    source: LogOrigin::Proxy,
                    lines: Vec::new(),
                    undated: Some(
                        "no timestamps, and no client record (requests.jsonl) of when each request was answered: its lines cannot be placed against the other logs, not replayed".into(),
                    ),
                },
            };
            logs.push(script);
        }
        let kvdir_counts: Vec<(f64, usize, u64)> = files
            .kvdir
            .as_deref()
            .map(|b| {
                json_rows(b, |v| {
                    Some((v["t"].as_f64()?, v["folders"].as_u64()? as usize, v["bytes"].as_u64()?))
                })
            })
            .unwrap_or_default();
        let kvdir_folders = match &files.kvdir_listing_xz {
            Some(b) => parse_listing(&String::from_utf8_lossy(&xz(b)?)),
            None => Vec::new(),
        };
        let kvdir_rows: Vec<(f64, usize, u64, u64)> = files
            .kvdir
            .as_deref()
            .map(|b| {
                json_rows(b, |v| {
                    Some((
                        v["t"].as_f64()?,
                        v["folders"].as_u64()? as usize,
                        v["files"].as_u64()?,
                        v["bytes"].as_u64()?,
                    ))
                })
            })
            .unwrap_or_default();
        let kvdir_created = creation_order(&kvdir_rows, &kvdir_folders);
        let kvdir_scans = match &files.kvdir_folders_xz {
            Some(b) => folder_scans(&String::from_utf8_lossy(&xz(b)?)),
            None => Vec::new(),
        };
        Ok(Capture {
            name,
            instances,
            scrapes,
            logs,
            t0,
            t_end,
            model_config: files.model_config.and_then(|b| String::from_utf8(b).ok()),
            model_name,
            netdev: match &files.netdev_xz {
                Some(b) => json_rows(&xz(b)?, |v| Some((v["t"].as_f64()?, v["text"].as_str()?.to_string()))),
                None => Vec::new(),
            },
            kvdir_counts,
            kvdir_folders,
            kvdir_created,
            kvdir_scans,
            spans: match &files.otlp {
                Some(b) => super::spans::read_otlp_bin(b).map_err(CaptureError)?,
                None => Vec::new(),
            },
            otlp_frames: match &files.otlp {
                Some(b) => super::spans::otlp_frames(b)
                    .map_err(CaptureError)?
                    .into_iter()
                    .map(|(t, body)| (t, body.to_vec()))
                    .collect(),
                None => Vec::new(),
            },
        })
    }
}

/// Rows of a JSON-lines file, keeping those `f` can read.
fn json_rows<T>(bytes: &[u8], f: impl Fn(&serde_json::Value) -> Option<T>) -> Vec<T> {
    String::from_utf8_lossy(bytes)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| f(&v))
        .collect()
}

#[derive(serde::Deserialize)]
struct RawScrape {
    t: f64,
    instance: String,
    text: Option<String>,
    error: Option<String>,
}

fn xz(bytes: &[u8]) -> Result<Vec<u8>, CaptureError> {
    let mut out = Vec::new();
    lzma_rs::xz_decompress(&mut std::io::BufReader::new(bytes), &mut out)
        .map_err(|e| CaptureError(format!("xz: {e}")))?;
    Ok(out)
}

fn model_label(body: &str) -> Option<String> {
    let at = body.find("vllm:num_requests_running{")?;
    let rest = &body[at..];
    let key = "model_name=\"";
    let start = rest.find(key)? + key.len();
    let end = rest[start..].find('"')?;
    Some(rest[start..start + end].to_string())
}
