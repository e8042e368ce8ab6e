//! The recording format, version 1 (documented in `docs/recording.md`).
//!
//! A recording is one zstd stream of JSON lines. The first line is the
//! [`Header`]; every other line is an [`Entry`]: one thing a collector
//! saw, with the time it saw it. Replaying the entries through
//! `AppState::apply` rebuilds exactly the state the live pdtop had.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::feed::LogOrigin;
use crate::feed::{FolderStat, KvDirSnapshot};
use crate::feed::{IfaceBytes, NetDevSnapshot};
use crate::feed::{ModelInfo, Msg};
use crate::feed::{TailCounts, TailState};

pub const FORMAT: &str = "pdtop-recording";
pub const VERSION: u32 = 1;

/// What was watched: enough to rebuild the same dashboard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub format: String,
    pub version: u32,
    /// Unix seconds when the recording began.
    pub started: f64,
    pub prefill: Vec<String>,
    pub decode: Vec<String>,
    /// Tailed logs: ("prefill#0" | "decode#0" | "proxy", path as given).
    pub logs: Vec<(String, String)>,
    pub iface: Option<String>,
    /// KV bytes per token and where that figure came from, if known.
    pub kv_bytes_per_token: Option<u64>,
    pub kv_source: Option<String>,
    pub window_secs: f64,
}

/// One observation. Field names are short: a recording holds many.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "snake_case")]
pub enum Entry {
    Scrape {
        t: f64,
        i: usize,
        body: String,
    },
    ScrapeFailed {
        t: f64,
        i: usize,
        error: String,
    },
    Models {
        t: f64,
        i: usize,
        id: String,
        root: Option<String>,
        max_model_len: Option<u64>,
    },
    Log {
        t: f64,
        src: String,
        lines: Vec<String>,
        state: String,
        counts: [u64; 4],
    },
    KvDir {
        t: f64,
        folders: Option<BTreeMap<String, (u64, u64)>>,
        error: Option<String>,
    },
    NetDev {
        t: f64,
        ifaces: Option<BTreeMap<String, (u64, u64)>>,
        error: Option<String>,
    },
    SourceFailed {
        t: f64,
        source: String,
        error: String,
    },
    /// An instance found while watching (through a Prometheus server).
    Discovered {
        t: f64,
        i: usize,
        role: String,
        display: String,
        base_url: String,
    },
    /// Every tailed log had been read up to `t`.
    Polled {
        t: f64,
    },
}

impl Entry {
    pub fn t(&self) -> f64 {
        match self {
            Entry::Scrape { t, .. }
            | Entry::ScrapeFailed { t, .. }
            | Entry::Models { t, .. }
            | Entry::Log { t, .. }
            | Entry::KvDir { t, .. }
            | Entry::NetDev { t, .. }
            | Entry::SourceFailed { t, .. }
            | Entry::Discovered { t, .. }
            | Entry::Polled { t } => *t,
        }
    }

    /// The time, to shift (building long recordings from short ones).
    pub fn t_mut(&mut self) -> &mut f64 {
        match self {
            Entry::Scrape { t, .. }
            | Entry::ScrapeFailed { t, .. }
            | Entry::Models { t, .. }
            | Entry::Log { t, .. }
            | Entry::KvDir { t, .. }
            | Entry::NetDev { t, .. }
            | Entry::SourceFailed { t, .. }
            | Entry::Discovered { t, .. }
            | Entry::Polled { t } => t,
        }
    }

    /// The entry for a message, or `None` for messages that are not
    /// observations (clock ticks).
    pub fn from_msg(msg: &Msg) -> Option<Entry> {
        Some(match msg {
            Msg::Scrape { instance, at, body } => Entry::Scrape { t: *at, i: *instance, body: body.clone() },
            Msg::ScrapeFailed { instance, at, error } => {
                Entry::ScrapeFailed { t: *at, i: *instance, error: error.clone() }
            }
            Msg::Models { instance, at, info } => Entry::Models {
                t: *at,
                i: *instance,
                id: info.id.clone(),
                root: info.root.clone(),
                max_model_len: info.max_model_len,
            },
            Msg::LogLines { source, at, lines, state, counts } => Entry::Log {
                t: *at,
                src: source.to_string(),
                lines: lines.clone(),
                state: match state {
                    TailState::Following => "following".into(),
                    TailState::Missing => "missing".into(),
                    TailState::Ended => "ended".into(),
                    TailState::Error(e) => format!("error: {e}"),
                },
                counts: [
                    counts.truncations,
                    counts.rotations,
                    counts.long_lines_skipped,
                    counts.invalid_utf8_lines,
                ],
            },
            Msg::KvDir { at, scan } => Entry::KvDir {
                t: *at,
                folders: scan
                    .as_ref()
                    .ok()
                    .map(|s| s.iter().map(|(k, v)| (k.clone(), (v.files, v.bytes))).collect()),
                error: scan.as_ref().err().cloned(),
            },
            Msg::NetDev { at, read } => Entry::NetDev {
                t: *at,
                ifaces: read
                    .as_ref()
                    .ok()
                    .map(|s| s.ifaces.iter().map(|(k, v)| (k.clone(), (v.rx_bytes, v.tx_bytes))).collect()),
                error: read.as_ref().err().cloned(),
            },
            Msg::SourceFailed { source, at, error } => {
                Entry::SourceFailed { t: *at, source: source.clone(), error: error.clone() }
            }
            Msg::Discovered { instance, at, endpoint } => Entry::Discovered {
                t: *at,
                i: *instance,
                role: endpoint.role.name().into(),
                display: endpoint.display.clone(),
                base_url: endpoint.base_url.clone(),
            },
            // Kept: a replay judges miss deadlines against how far the logs
            // had been read, exactly as the live pdtop did.
            Msg::LogsPolled { at } => Entry::Polled { t: *at },
            Msg::Tick { .. } => return None,
        })
    }

    /// The message to replay. A log source that cannot be read back is
    /// reported as an error message rather than dropped.
    pub fn into_msg(self) -> Msg {
        match self {
            Entry::Scrape { t, i, body } => Msg::Scrape { instance: i, at: t, body },
            Entry::ScrapeFailed { t, i, error } => Msg::ScrapeFailed { instance: i, at: t, error },
            Entry::Models { t, i, id, root, max_model_len } => Msg::Models {
                instance: i,
                at: t,
                info: ModelInfo { id, root, max_model_len, config_json: None },
            },
            Entry::Log { t, src, lines, state, counts } => match parse_source(&src) {
                Some(source) => Msg::LogLines {
                    source,
                    at: t,
                    lines,
                    state: match state.as_str() {
                        "following" => TailState::Following,
                        "missing" => TailState::Missing,
                        "ended" => TailState::Ended,
                        other => TailState::Error(other.trim_start_matches("error: ").to_string()),
                    },
                    counts: TailCounts {
                        truncations: counts[0],
                        rotations: counts[1],
                        long_lines_skipped: counts[2],
                        invalid_utf8_lines: counts[3],
                    },
                },
                None => {
                    Msg::SourceFailed { source: src, at: t, error: "unknown log source in recording".into() }
                }
            },
            Entry::KvDir { t, folders, error } => Msg::KvDir {
                at: t,
                scan: match folders {
                    Some(f) => Ok(f
                        .into_iter()
                        .map(|(k, (files, bytes))| (k, FolderStat { files, bytes }))
                        .collect::<KvDirSnapshot>()),
                    None => Err(error.unwrap_or_default()),
                },
            },
            Entry::NetDev { t, ifaces, error } => Msg::NetDev {
                at: t,
                read: match ifaces {
                    Some(m) => Ok(NetDevSnapshot {
                        ifaces: m
                            .into_iter()
                            .map(|(k, (rx_bytes, tx_bytes))| (k, IfaceBytes { rx_bytes, tx_bytes }))
                            .collect(),
                    }),
                    None => Err(error.unwrap_or_default()),
                },
            },
            Entry::SourceFailed { t, source, error } => Msg::SourceFailed { source, at: t, error },
            Entry::Polled { t } => Msg::LogsPolled { at: t },
            Entry::Discovered { t, i, role, display, base_url } => {
                let role = match role.as_str() {
                    "prefill" => crate::feed::Role::Prefill,
                    "decode" => crate::feed::Role::Decode,
                    _ => {
                        let error = format!("unknown role {role:?} for {display} in recording");
                        return Msg::SourceFailed { source: "recording".into(), at: t, error };
                    }
                };
                let endpoint = crate::feed::Endpoint { role, display, base_url };
                Msg::Discovered { instance: i, at: t, endpoint }
            }
        }
    }
}

/// `prefill#0`, `decode#1`, `proxy` back to a source.
pub fn parse_source(s: &str) -> Option<LogOrigin> {
    if s == "proxy" {
        return Some(LogOrigin::Proxy);
    }
    let (role, i) = s.split_once('#')?;
    let i = i.parse().ok()?;
    match role {
        "prefill" => Some(LogOrigin::Prefill(i)),
        "decode" => Some(LogOrigin::Decode(i)),
        _ => None,
    }
}
