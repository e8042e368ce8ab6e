//! The ExampleConnector's folders matched to the requests that wrote them.
//!
//! A folder appears in the first scan after its writer stored it: the
//! prefill of a request, or decode itself after it computed a prompt it
//! found no folder for (the connector stores whatever it did not load).
//! Each is matched to a writer that started before it, by size when the
//! writer's token count is known (`layers x (tokens x bytes per
//! layer-token + 88)`), else by order. Read by decode: the prefill folder of a request
//! that loaded. Everything else is written and never read.

use crate::kv::SAFETENSORS_KV_HEADER_BYTES;
use crate::report::kv_ledger::{FolderMatch, Ledger, RequestBytes, set_observed};
use crate::state::AppState;
use crate::traces::{Outcome, Trace};

/// A writer's request may start this long before the scan preceding its
/// folder (a long prompt's store takes time; stamps are to the second).
const BEFORE_PREV_SCAN_S: f64 = 3.0;
/// Scan-to-stamp slack: vLLM stamps are floored to the second.
const STAMP_SLACK_S: f64 = 1.0;

/// Stored tokens of a folder: `(bytes / files - 88) / bytes per layer-token`.
fn folder_tokens(bytes: u64, files: u64, per_layer_token: Option<u64>) -> Option<u64> {
    let per = per_layer_token.filter(|p| *p > 0)?;
    let file = bytes.checked_div(files)?;
    let body = file.checked_sub(SAFETENSORS_KV_HEADER_BYTES)?;
    (bytes.is_multiple_of(files) && body.is_multiple_of(per)).then_some(body / per)
}

pub fn match_folders(
    state: &AppState,
    traces: &[&Trace],
    index: &std::collections::HashMap<String, usize>,
    requests: &mut [RequestBytes],
    bpt: Option<u64>,
    layers: Option<u64>,
) -> Vec<FolderMatch> {
    let per_layer_token = bpt.zip(layers).map(|(b, l)| b / l.max(1));
    let block = 16;
    // (start, request index, writer, expected bytes, taken)
    let mut writers: Vec<(f64, usize, &'static str, Option<u64>, bool)> = Vec::new();
    for t in traces {
        let Some(&i) = index.get(&t.id) else { continue };
        if let Some(p) = requests[i].prefill_at {
            writers.push((p, i, "prefill", requests[i].predicted.map(|b| b as u64), false));
        }
        if let Some(d) = requests[i].decode_at
            && t.outcome != Outcome::Loaded
        {
            let r = &requests[i];
            let folder_of = |n: u64| {
                let s = crate::kv::example_connector_saved_tokens(n, block)?;
                Some(layers? * (s * per_layer_token? + SAFETENSORS_KV_HEADER_BYTES))
            };
            // The same prompt as the prefill's: decode rewrites that folder.
            if t.prefill.is_some() && r.decode_tokens.is_some() && r.decode_tokens == r.tokens {
                continue;
            }
            writers.push((d, i, "decode", r.decode_tokens.and_then(folder_of), false));
        }
    }
    writers.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut folders: Vec<(&String, &crate::state::link::FolderSeen)> = state.link.folders.iter().collect();
    folders.sort_by(|a, b| a.1.first_seen.total_cmp(&b.1.first_seen).then(a.0.cmp(b.0)));
    let mut out = Vec::new();
    for (name, f) in folders {
        let lo = f.prev_scan.unwrap_or(f.first_seen - 10.0) - BEFORE_PREV_SCAN_S;
        let hi = f.first_seen + STAMP_SLACK_S;
        // Writers are in time order: only those inside the window.
        let from = writers.partition_point(|w| w.0 < lo);
        let upto = writers.partition_point(|w| w.0 <= hi).max(from);
        let near = &writers[from..upto];
        let by_size = near.iter().position(|w| !w.4 && w.3 == Some(f.bytes)).map(|i| i + from);
        // By time alone only a writer whose size is not known: one whose
        // size is known and differs did not write this folder.
        let by_time = near.iter().position(|w| !w.4 && w.3.is_none()).map(|i| i + from);
        let (pick, matched_by) = match (by_size, by_time) {
            (Some(i), _) => (Some(i), "time and size"),
            (None, Some(i)) => (Some(i), "time"),
            _ => (None, "none"),
        };
        let mut m = FolderMatch {
            name: name.clone(),
            files: f.files,
            bytes: f.bytes,
            first_seen: f.first_seen,
            tokens: folder_tokens(f.bytes, f.files, per_layer_token),
            writer: "unknown",
            request: None,
            matched_by,
            predicted: None,
            read: false,
        };
        if let Some(wi) = pick {
            writers[wi].4 = true;
            let (start, ri, writer, expected, _) = writers[wi];
            m.writer = writer;
            m.predicted = expected;
            let r = &mut requests[ri];
            m.request = Some(r.id.clone());
            let confidence = if matched_by == "time and size" { "sure" } else { "likely" };
            if writer == "prefill" {
                r.folder = Some(name.clone());
                r.window = Some([start, f.first_seen]);
                if r.outcome == "loaded" {
                    m.read = true;
                    set_observed(r, f.bytes as f64, "kv_dir", confidence);
                } else if r.should_move {
                    set_observed(r, 0.0, "kv_dir", confidence);
                    r.note = format!(
                        "prefill stored {:.1} MiB in {name}; decode looked for another folder and never read it",
                        f.bytes as f64 / 1048576.0
                    );
                }
            } else {
                let note = format!("decode stored its own folder {name} after computing the prompt");
                r.note = if r.note.is_empty() { note } else { format!("{}; {note}", r.note) };
            }
        }
        out.push(m);
    }
    out
}

/// The windows and bytes of the folders decode read: what moved.
pub fn moved(ledger: &mut Ledger) {
    for r in &ledger.requests {
        if let (Some([a, b]), Some(o)) = (r.window, r.observed)
            && r.source == "kv_dir"
            && o > 0.0
        {
            ledger.windows.push((a, b));
            ledger.moved += o;
        }
    }
}
