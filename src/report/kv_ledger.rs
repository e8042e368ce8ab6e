//! The per-request byte ledger that the NIXL, folder and interface
//! attributions fill in (`kv_bytes.rs` builds it; `kv_nixl.rs` and
//! `kv_folders.rs` give bytes to its requests).

use serde::Serialize;

use crate::state::wires::Carrier;

/// One request's KV bytes: what should have moved, what did, and how sure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestBytes {
    pub id: String,
    pub outcome: &'static str,
    /// Prompt tokens (or, for the ExampleConnector, the tokens it stores).
    pub tokens: Option<u64>,
    pub tokens_source: Option<&'static str>,
    /// The prefill ran for it: its KV should reach decode.
    pub should_move: bool,
    /// Tokens decode computed itself (a miss, or no prefill), from its metrics.
    pub decode_tokens: Option<u64>,
    pub predicted: Option<f64>,
    pub observed: Option<f64>,
    /// "nixl_bytes_transferred", "mooncake_bytes_transferred", "kv_dir",
    /// "interface:<name>" or "none".
    pub source: String,
    pub ratio: Option<f64>,
    /// "sure", "likely" or "unsure".
    pub confidence: &'static str,
    /// "as_predicted", "moved_nothing", "short", "too_much", "not_expected", "unknown".
    pub verdict: &'static str,
    pub note: String,
    /// The connector folder its prefill stored, or its decode when no
    /// prefill ran (ExampleConnector).
    pub folder: Option<String>,
    /// The transfer window (unix seconds) and the carrier's bytes in it.
    pub window: Option<[f64; 2]>,
    pub window_iface_bytes: Option<f64>,
    /// Worth it: seconds to move its KV on this link, and to compute it on decode.
    pub transfer_s: Option<f64>,
    pub recompute_s: Option<f64>,
    #[serde(skip)]
    pub t: f64,
    /// When its prefill and decode started, on pdtop's clock (the logs'
    /// stamps moved onto it, see [`clock_offset`]).
    #[serde(skip)]
    pub prefill_at: Option<f64>,
    #[serde(skip)]
    pub decode_at: Option<f64>,
}

#[derive(Debug, Clone, Default)]
pub struct Ledger {
    pub requests: Vec<RequestBytes>,
    pub folders: Vec<FolderMatch>,
    /// Connector-counted bytes (NIXL's or Mooncake's) no request could be given.
    pub unattributed_nixl_bytes: f64,
    /// Transfers whose window held another transfer.
    pub overlapped: usize,
    pub carrier: Option<Carrier>,
    /// The transfer windows, for finding the carrier.
    pub windows: Vec<(f64, f64)>,
    /// Bytes moved in those windows (NIXL's count, the folders', or the prediction).
    pub moved: f64,
    /// Request id → index into `requests`.
    pub index: std::collections::HashMap<String, usize>,
}

impl Ledger {
    pub fn get(&self, id: &str) -> Option<&RequestBytes> {
        self.requests.get(*self.index.get(id)?)
    }

    /// Observed over predicted, over the requests that should have moved
    /// and did; `None` without any.
    pub fn ratio(&self) -> Option<(f64, f64, usize)> {
        let moved: Vec<&RequestBytes> =
            self.requests.iter().filter(|r| r.should_move && r.verdict != "moved_nothing").collect();
        let o: f64 = moved.iter().filter_map(|r| r.observed.filter(|_| r.predicted.is_some())).sum();
        let p: f64 = moved.iter().filter_map(|r| r.predicted.filter(|_| r.observed.is_some())).sum();
        (p > 0.0).then_some((o, p, moved.len()))
    }

    pub fn moved_nothing(&self) -> Vec<&str> {
        self.requests.iter().filter(|r| r.verdict == "moved_nothing").map(|r| r.id.as_str()).collect()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FolderMatch {
    pub name: String,
    pub files: u64,
    pub bytes: u64,
    pub first_seen: f64,
    /// Tokens its files hold (from their size), when they divide evenly.
    pub tokens: Option<u64>,
    /// "prefill", "decode" or "unknown".
    pub writer: &'static str,
    pub request: Option<String>,
    /// "time and size", "time" or "none".
    pub matched_by: &'static str,
    /// What the writer's prompt should have stored.
    pub predicted: Option<u64>,
    /// Decode loaded it.
    pub read: bool,
}

pub(crate) fn set_observed(r: &mut RequestBytes, observed: f64, source: &str, confidence: &'static str) {
    r.observed = Some(observed);
    r.source = source.to_string();
    r.confidence = confidence;
    if let Some(p) = r.predicted {
        r.ratio = ratio3(observed, p);
        if r.should_move {
            r.verdict = judge(observed, p);
        }
    } else if r.should_move && observed <= 0.0 {
        r.verdict = "moved_nothing";
    }
}

fn judge(observed: f64, predicted: f64) -> &'static str {
    if observed <= 0.0 {
        "moved_nothing"
    } else if observed < 0.9 * predicted {
        "short"
    } else if observed > 1.1 * predicted {
        "too_much"
    } else {
        "as_predicted"
    }
}

/// Rounds a ratio to three places.
pub fn ratio3(o: f64, p: f64) -> Option<f64> {
    (p > 0.0).then(|| (o / p * 1000.0).round() / 1000.0)
}
