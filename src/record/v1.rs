//! Reading recordings of format version 1 (pdtop before the shared
//! vocabulary): a header with the watched endpoints as strings, and
//! entries that mirrored the messages field by field. Version 2 writes the
//! session and the messages themselves; these are only read, and turned
//! into those.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::feed::{
    Endpoint, FolderStat, IfaceBytes, KvDirSnapshot, LogOrigin, ModelInfo, Msg, NetDevSnapshot, Role,
    TailCounts, TailState,
};
use crate::pipeline::Session;
use crate::state::link::KvModel;

/// What was watched, as version 1 wrote it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Header {
    /// Unix seconds when the recording began.
    pub started: f64,
    pub prefill: Vec<String>,
    pub decode: Vec<String>,
    /// Tailed logs: ("prefill#0" | "decode#0" | "proxy", path as given).
    pub logs: Vec<(String, String)>,
    pub iface: Option<String>,
    pub kv_bytes_per_token: Option<u64>,
    pub kv_source: Option<String>,
    pub window_secs: f64,
}

impl Header {
    /// The session it describes; an endpoint or log that does not parse
    /// any more is an error naming it.
    pub fn into_session(self) -> Result<Session, String> {
        let mut endpoints = Vec::new();
        for (role, list) in [(Role::Prefill, &self.prefill), (Role::Decode, &self.decode)] {
            for s in list {
                endpoints.push(Endpoint::parse(role, s)?);
            }
        }
        let mut logs = Vec::new();
        for (origin, path) in self.logs {
            logs.push((origin.parse::<LogOrigin>()?, path));
        }
        let kv_model = self.kv_bytes_per_token.map(|n| KvModel {
            bytes_per_token: n,
            source: self.kv_source.unwrap_or_else(|| "the recording".into()),
            layers: None,
        });
        Ok(Session {
            started: self.started,
            endpoints,
            router: None,
            logs,
            iface: self.iface,
            kv_model,
            kv_cache_dtype: None,
            window_secs: self.window_secs,
            clock_speed: 1.0,
            clock_origin: None,
            show_prompts: false,
            collect: None,
        })
    }
}

/// One observation. Field names are short: a recording holds many.
#[derive(Debug, Clone, PartialEq, Deserialize)]
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
            Entry::Log { t, src, lines, state, counts } => match src.parse::<LogOrigin>() {
                Ok(source) => Msg::LogLines {
                    source,
                    at: t,
                    lines,
                    state: match state.as_str() {
                        "following" => TailState::Following,
                        "catching_up" => TailState::CatchingUp,
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
                Err(_) => {
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
                        links: Default::default(),
                    }),
                    None => Err(error.unwrap_or_default()),
                },
            },
            Entry::SourceFailed { t, source, error } => Msg::SourceFailed { source, at: t, error },
            Entry::Polled { t } => Msg::LogsPolled { at: t },
            Entry::Discovered { t, i, role, display, base_url } => {
                let role = match role.as_str() {
                    "prefill" => Role::Prefill,
                    "decode" => Role::Decode,
                    _ => {
                        let error = format!("unknown role {role:?} for {display} in recording");
                        return Msg::SourceFailed { source: "recording".into(), at: t, error };
                    }
                };
                let endpoint = Endpoint { role, display, base_url };
                Msg::Discovered { instance: i, at: t, endpoint }
            }
        }
    }
}
