//! The connector's own byte count (NIXL's or Mooncake's, see
//! [`crate::state::link::XferFamily`]) given to each transfer, the interface's
//! bytes in each transfer window, and which interface carried them.

use std::collections::VecDeque;

use crate::report::kv_ledger::{Ledger, RequestBytes, set_observed};
use crate::state::AppState;
use crate::traces::{Outcome, Trace};

/// A transfer still uncounted this long after its request started is
/// given up (its decode died, or the scrape that counted it was lost).
const STALE_S: f64 = 60.0;
/// Transfer window for connectors pdtop cannot count: around the decode start.
const GUESS_WINDOW: (f64, f64) = (1.0, 2.0);
/// Without logs, the stretch before a scrape that counted NIXL bytes.
const SCRAPE_WINDOW_S: f64 = 1.5;

fn index_of(ledger: &Ledger, id: &str) -> Option<usize> {
    ledger.index.get(id).copied()
}

/// Gives each delta of the connector's byte histogram to the transfers that
/// ended in it. The scrape counts transfers as well as bytes, so a delta of
/// one transfer is that transfer's size (the one of the right size among
/// those in flight, else the oldest); several: split by prompt tokens.
pub fn attribute(state: &AppState, traces: &[&Trace], ledger: &mut Ledger) {
    let mut transfers: Vec<(f64, usize, u64)> = traces
        .iter()
        .filter(|t| t.outcome == Outcome::Loaded)
        .filter_map(|t| {
            let i = index_of(ledger, &t.id)?;
            Some((ledger.requests[i].decode_at?, i, ledger.requests[i].tokens?))
        })
        .collect();
    transfers.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut next = transfers.into_iter().peekable();
    let mut pending: VecDeque<(f64, usize, u64)> = VecDeque::new();
    for p in &state.link.xfer.points {
        // Stamps are to the second and read late: a second of slack.
        while let Some(tr) = next.next_if(|tr| tr.0 - 1.0 <= p.t) {
            pending.push_back(tr);
        }
        pending.retain(|tr| p.t - tr.0 <= STALE_S);
        let count = p.count.round().max(0.0) as usize;
        if count == 0 {
            continue;
        }
        let mut took: Vec<(f64, usize, u64)> = Vec::new();
        if count == 1 {
            let exact = pending.iter().position(|tr| ledger.requests[tr.1].predicted == Some(p.bytes));
            if let Some(tr) = pending.remove(exact.unwrap_or(0)) {
                took.push(tr);
            }
        } else {
            for _ in 0..count {
                took.extend(pending.pop_front());
            }
        }
        if took.is_empty() {
            ledger.unattributed_nixl_bytes += p.bytes;
            continue;
        }
        let in_flight = pending.len();
        let tokens: u64 = took.iter().map(|tr| tr.2).sum();
        for &(start, i, n) in &took {
            let r = &mut ledger.requests[i];
            let overlapped = took.len() > 1 || in_flight > 0;
            let (observed, confidence) = if took.len() == 1 {
                let exact = r.predicted == Some(p.bytes);
                (p.bytes, if exact || !overlapped { "sure" } else { "likely" })
            } else {
                (p.bytes * n as f64 / tokens.max(1) as f64, "likely")
            };
            set_observed(r, observed, state.link.xfer_source(), confidence);
            r.window = Some([start, p.t]);
            if took.len() > 1 {
                r.note =
                    format!("{} transfers ended in one scrape: bytes split by prompt tokens", took.len());
            } else if overlapped {
                r.note = format!("overlapped {in_flight} other transfer(s); this scrape counted one");
            }
            if overlapped {
                ledger.overlapped += 1;
            }
            ledger.windows.push((start, p.t));
            ledger.moved += observed;
        }
    }
    // A prefill whose KV never moved: the connector counted nothing for it.
    for t in traces.iter().filter(|t| t.outcome == Outcome::SilentMiss && t.prefill.is_some()) {
        if let Some(i) = index_of(ledger, &t.id) {
            let r = &mut ledger.requests[i];
            if r.observed.is_none() {
                set_observed(r, 0.0, state.link.xfer_source(), "sure");
                r.note = if t.remote_num_tokens.is_none() {
                    "decode got no kv_transfer_params: nothing pulled, the prefill's blocks wait for the abort timeout"
                        .into()
                } else {
                    "no transfer counted for it".into()
                };
            }
        }
    }
}

/// No connector count: the interface's bytes around each loaded request's
/// decode start, a guess at the window.
pub fn by_interface_only(state: &AppState, traces: &[&Trace], ledger: &mut Ledger) {
    let Some(name) = state.link.iface.clone() else { return };
    for t in traces.iter().filter(|t| t.outcome == Outcome::Loaded) {
        let Some(i) = index_of(ledger, &t.id) else { continue };
        let Some(d) = ledger.requests[i].decode_at else { continue };
        let w = (d - GUESS_WINDOW.0, d + GUESS_WINDOW.1);
        let bytes = state.link.wires.bytes_in_windows(&name, &[w]);
        let r = &mut ledger.requests[i];
        r.window = Some([w.0, w.1]);
        if bytes <= 0.0 {
            // A loaded request moved its KV: a guessed window with no bytes
            // in it missed the transfer, it is no sign of none.
            r.verdict = "unknown";
            r.note = "no connector count, and the interface counted nothing in the guessed window around the decode start".into();
            continue;
        }
        set_observed(r, bytes, &format!("interface:{name}"), "unsure");
        r.note = "no connector count: the interface's bytes around the decode start".into();
        ledger.windows.push(w);
        ledger.moved += r.predicted.unwrap_or(0.0);
    }
}

/// The connector's measured rate (bytes over its own transfer time), else
/// the carrier's nominal speed.
pub fn rate(state: &AppState, ledger: &Ledger) -> Option<(String, f64, &'static str)> {
    let link = ledger.carrier.as_ref().map(|c| c.name.clone()).or_else(|| state.link.iface.clone());
    let family = state.link.xfer_family.unwrap_or(crate::state::link::NIXL);
    let name = || link.clone().unwrap_or_else(|| format!("the {} link", family.label));
    if let Some(r) = state.link.compute.transfer_rate() {
        return Some((name(), r, "nixl_xfer_time"));
    }
    // Only overlapping transfers: their times overlap too, so this is low.
    let bytes = state.total_hist(family.role, family.bytes).map(|h| h.sum).unwrap_or(0.0);
    let secs = state.total_hist(family.role, family.time).map(|h| h.sum).unwrap_or(0.0);
    if bytes > 0.0 && secs > 0.0 {
        let src = if family == crate::state::link::NIXL {
            "nixl_xfer_time (overlapping transfers)"
        } else {
            "mooncake_xfer_time (sender's time)"
        };
        return Some((name(), bytes / secs, src));
    }
    let link = link?;
    let mbps = state.link.wires.speed_mbps(&link)?;
    Some((link, mbps as f64 * 1e6 / 8.0, "link speed"))
}

/// The carrier, each request's bytes on it, and the worth-it times.
pub fn finish(state: &AppState, ledger: &mut Ledger, bpt: Option<u64>, block: u64) {
    if ledger.windows.is_empty() {
        // No request to tie bytes to (no logs): the scrapes in which the
        // connector counted bytes are the windows.
        for p in state.link.xfer.points.iter().filter(|p| p.bytes > 0.0) {
            ledger.windows.push((p.t - SCRAPE_WINDOW_S, p.t));
            ledger.moved += p.bytes;
        }
    }
    ledger.carrier = state.link.wires.carrier(&ledger.windows, ledger.moved);
    let wire = ledger.carrier.as_ref().map(|c| c.name.clone()).or_else(|| state.link.iface.clone());
    if let Some(name) = &wire {
        for r in ledger.requests.iter_mut() {
            if let Some([a, b]) = r.window {
                // Scrapes and reads are a second apart: widen to the read before.
                r.window_iface_bytes = Some(state.link.wires.bytes_in_windows(name, &[(a - 0.5, b)]));
            }
        }
    }
    let (Some(bpt), Some((_, rate, _))) = (bpt, rate(state, ledger)) else { return };
    for r in ledger.requests.iter_mut().filter(|r: &&mut RequestBytes| r.should_move) {
        if let Some(n) = r.tokens {
            r.transfer_s = crate::state::worth::transfer_s(n, bpt, block, rate);
            r.recompute_s = state.link.compute.compute_s(n);
        }
    }
}
