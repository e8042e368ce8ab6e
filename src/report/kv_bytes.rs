//! Bytes per request: did this request's KV move, and was it the size the
//! arithmetic predicts? Built on demand from the state (traces, the NIXL
//! histogram's deltas, the connector directory's folders, every
//! interface's counters); nothing here is kept between frames.
//!
//! Sources, best first:
//! - The connector's count: each scrape's `vllm:nixl_bytes_transferred`
//!   (decode) or `vllm:mooncake_bytes_transferred` (prefill) delta, given to the
//!   transfers (decode requests with `kv_transfer_params`) that started
//!   before it, first in first out, an exact size preferred. Several
//!   transfers in one delta: split by prompt tokens, and said so.
//! - ExampleConnector: the folder a request's prefill stored, matched by
//!   time (it appears after the request started) and size (its files hold
//!   exactly `tokens x bytes per token` plus an 88-byte header a layer).
//! - The interface: its bytes inside the request's transfer window.

use crate::feed::Role;
use crate::kv::{SAFETENSORS_KV_HEADER_BYTES, block_rounded_tokens, example_connector_saved_tokens};
use crate::report::kv_folders::match_folders;
pub use crate::report::kv_ledger::{FolderMatch, Ledger, RequestBytes, ratio3};
use crate::state::AppState;
use crate::traces::{Hop, Outcome, Trace};

fn stamp_of(t: &Trace, hop: Hop) -> Option<f64> {
    t.phase(hop).map(|p| p.start)
}

/// Seconds to add to a log's stamps to put them on pdtop's clock: the
/// median of (read time of a trace's first line - that line's stamp). The
/// logs' clock (often local time, to the second) and the scrapes' need not
/// agree; the transfer windows mix both.
pub fn clock_offset(traces: &[&Trace]) -> f64 {
    let mut d: Vec<f64> = traces
        .iter()
        .filter_map(|t| {
            let first = t.phases.iter().map(|p| p.start).min_by(f64::total_cmp)?;
            Some(t.first_seen - first).filter(|x| x.is_finite())
        })
        .collect();
    d.sort_by(f64::total_cmp);
    d.get(d.len() / 2).copied().unwrap_or(0.0)
}

/// How long after a request's (second-resolution) start the scrape that
/// counts it may come.
const CLAIM_WINDOW_S: f64 = 4.0;
/// A log stamp is floored to the second and read a poll later.
const STAMP_SLACK_S: f64 = 1.0;

/// Tokens of scrape intervals that saw requests finish: (time, tokens,
/// requests, taken). The first unclaimed interval after a request's start
/// is its own; only one holding a single request gives a token count.
struct Claims {
    points: Vec<(f64, u64, u64, bool)>,
}

impl Claims {
    fn claim(&mut self, start: f64) -> Option<u64> {
        // Points are in time order: start at the first one not before `start`.
        let from = self.points.partition_point(|p| p.0 < start);
        let i = from + self.points[from..].iter().position(|(_, _, _, used)| !used)?;
        let (t, n, count, _) = self.points[i];
        if t > start + CLAIM_WINDOW_S {
            return None;
        }
        if count <= 1 {
            self.points[i].3 = true;
        } else {
            // Shared: the others of that interval take it too, but no count.
            self.points[i].2 -= 1;
            return None;
        }
        Some(n).filter(|n| *n > 0)
    }
}

pub fn build(state: &AppState) -> Ledger {
    let mut ledger = Ledger::default();
    let Some(logs) = &state.logs else {
        crate::report::kv_nixl::finish(state, &mut ledger, None, 16);
        return ledger;
    };
    let l = &state.link;
    let bpt = l.model.as_ref().map(|m| m.bytes_per_token);
    let layers = l.model.as_ref().and_then(|m| m.layers).map(u64::from);
    let block = state.instances_of(Role::Decode).find_map(|i| i.block_size()).unwrap_or(16) as u64;
    let nixl = !l.xfer.points.is_empty() || logs.correlator.traces().any(|t| t.remote_num_tokens.is_some());
    let kvdir = !l.folders.is_empty();
    // Single-request intervals: prefill prompt tokens (always claimed in
    // request order, or the claims drift), decode computed prompts.
    let mut prefill_claims = Claims {
        points: l
            .predicted
            .points
            .iter()
            .filter(|p| p.count > 0.0)
            .map(|p| {
                // Tokens only from an interval of one request; a shared
                // one is still taken, once by each of its requests.
                let count = p.count.round() as u64;
                let n = if count == 1 { bpt.map_or(0, |b| (p.bytes / b as f64).round() as u64) } else { 0 };
                (p.t, n, count, false)
            })
            .collect(),
    };
    let mut decode_claims =
        Claims { points: l.compute.samples.iter().map(|s| (s.t, s.tokens, 1, false)).collect() };
    let mut traces: Vec<&Trace> =
        logs.correlator.traces().filter(|t| t.prefill.is_some() || t.decode.is_some()).collect();
    let offset = clock_offset(&traces);
    let start_of = |t: &Trace, hop: Hop| stamp_of(t, hop).map(|s| s + offset);
    traces.sort_by(|a, b| {
        let k = |t: &Trace| start_of(t, Hop::Producer).or(start_of(t, Hop::Consumer)).unwrap_or(t.first_seen);
        k(a).total_cmp(&k(b))
    });
    for t in &traces {
        let should_move = t.prefill.is_some() && matches!(t.outcome, Outcome::Loaded | Outcome::SilentMiss);
        // A prompt length vLLM reported for this request (its spans, its DEBUG log).
        let spans = state.spans.timings_for(t);
        let prompt = [spans.prefill, spans.decode].into_iter().flatten().find_map(|s| s.prompt_tokens);
        // An `Inject` line is this request's only once it is called loaded
        // (one shared by requests scheduled together leaves them unknown).
        let inject = t.inject_tokens.filter(|_| matches!(t.outcome, Outcome::Loaded | Outcome::Cancelled));
        let (mut tokens, mut tokens_source) = match (t.remote_num_tokens, inject, prompt, t.prompt_tokens) {
            (Some(n), ..) => (Some(u64::from(n)), Some("kv_transfer_params remote_num_tokens")),
            (None, Some(n), ..) => {
                (Some(u64::from(n)), Some("decode's Inject KV cache line (stored tokens)"))
            }
            (None, None, Some(n), _) => (Some(u64::from(n)), Some("the request's spans (prompt tokens)")),
            (None, None, None, Some(n)) => (Some(u64::from(n)), Some("vLLM's log (prompt tokens)")),
            _ => (None, None),
        };
        if let Some(s) = start_of(t, Hop::Producer) {
            let claimed = prefill_claims.claim(s - STAMP_SLACK_S);
            if tokens.is_none() {
                tokens = claimed;
                tokens_source = claimed.map(|_| "prefill metrics (one request in the scrape)");
            }
        }
        let decode_tokens = match start_of(t, Hop::Consumer) {
            Some(s) if t.outcome != Outcome::Loaded => decode_claims.claim(s - STAMP_SLACK_S),
            _ => None,
        };
        if t.prefill.is_none() && tokens.is_none() {
            tokens = decode_tokens;
            tokens_source = decode_tokens.map(|_| "decode metrics (one request in the scrape)");
        }
        let stored =
            |n: u64| if inject.is_some() { Some(n) } else { example_connector_saved_tokens(n, block) };
        let predicted = match (tokens, bpt) {
            (Some(n), Some(b)) if kvdir && !nixl => stored(n).map(|s| match layers {
                Some(ly) => (ly * (s * b / ly + SAFETENSORS_KV_HEADER_BYTES)) as f64,
                None => (s * b) as f64,
            }),
            (Some(n), Some(b)) => block_rounded_tokens(n, block).map(|r| (r * b) as f64),
            _ => None,
        };
        ledger.requests.push(RequestBytes {
            id: t.id.clone(),
            outcome: t.outcome.name(),
            tokens,
            tokens_source,
            should_move,
            decode_tokens,
            predicted,
            observed: None,
            source: "none".into(),
            ratio: None,
            confidence: "unsure",
            verdict: if should_move { "unknown" } else { "not_expected" },
            note: String::new(),
            folder: None,
            window: None,
            window_iface_bytes: None,
            transfer_s: None,
            recompute_s: None,
            t: start_of(t, Hop::Consumer).or(start_of(t, Hop::Producer)).unwrap_or(t.first_seen),
            prefill_at: start_of(t, Hop::Producer),
            decode_at: start_of(t, Hop::Consumer),
        });
    }
    ledger.index = ledger.requests.iter().enumerate().map(|(i, r)| (r.id.clone(), i)).collect();
    if nixl {
        crate::report::kv_nixl::attribute(state, &traces, &mut ledger);
    } else if kvdir {
        ledger.folders =
            match_folders(state, &traces, &ledger.index, &mut ledger.requests, bpt, layers, block);
        crate::report::kv_folders::moved(&mut ledger);
    } else {
        crate::report::kv_nixl::by_interface_only(state, &traces, &mut ledger);
    }
    crate::report::kv_nixl::finish(state, &mut ledger, bpt, block);
    ledger
}
