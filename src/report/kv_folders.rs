//! The ExampleConnector's folders matched to the requests that wrote them.
//!
//! What the connector does (`example_connector.py`): a prefill stores the
//! prompt's KV under the hash of its first `(n - 1) // bs * bs` tokens, one
//! `<layer>.safetensors` per layer, `layers x (tokens x bytes per
//! layer-token + 88)` bytes in all, written during its forward pass; a
//! decode looks up `(n - 2) // bs * bs` tokens. A decode that finds nothing
//! stores the prompt again under the same `(n - 1) // bs * bs` key: the
//! prefill's folder, rewritten, never a folder of its own. Only a decode
//! with no prefill before it makes a new folder.
//!
//! So each folder has one writer: a prefill, or a decode that had none. It
//! was created between the scan before the one that first listed it and
//! that scan, while its writer ran. A folder goes to the one writer whose
//! run overlaps that interval and whose stored size is exactly the
//! folder's (the size known from the prompt length its spans report, or
//! from its `Inject` line); else to the one writer of unknown size there.
//! Two candidates that fit equally leave the folder unknown. Matches are
//! repeated until none is added, so each one taken narrows the others.

use crate::kv::{SAFETENSORS_KV_HEADER_BYTES, example_connector_saved_tokens};
use crate::report::kv_ledger::{FolderMatch, Ledger, RequestBytes, set_observed};
use crate::state::AppState;
use crate::traces::{Hop, Outcome, Trace};

/// A log-stamped writer may start this long before the scan preceding its
/// folder (a long prompt's store takes time; stamps are to the second).
const BEFORE_PREV_SCAN_S: f64 = 3.0;
/// Scan-to-stamp slack: vLLM stamps are floored to the second.
const STAMP_SLACK_S: f64 = 1.0;
/// Scan-to-span slack: both are wall-clock times to the millisecond; this
/// covers clocks kept by NTP and the listing's own duration.
const SPAN_SLACK_S: f64 = 0.25;

/// Stored tokens of a folder: `(bytes / files - 88) / bytes per layer-token`.
fn folder_tokens(bytes: u64, files: u64, per_layer_token: Option<u64>) -> Option<u64> {
    let per = per_layer_token.filter(|p| *p > 0)?;
    let file = bytes.checked_div(files)?;
    let body = file.checked_sub(SAFETENSORS_KV_HEADER_BYTES)?;
    (bytes.is_multiple_of(files) && body.is_multiple_of(per)).then_some(body / per)
}

/// A request that may have made a folder.
struct Writer {
    /// Index into the requests.
    req: usize,
    kind: &'static str,
    /// When its folder can have been created (its run, widened by its clock's slack).
    from: f64,
    to: f64,
    /// When it started, and (from its span) ended.
    start: f64,
    end: Option<f64>,
    /// The folder's bytes, from stored tokens known exactly (a prompt
    /// length vLLM reported, its own `Inject` line)...
    exact: Option<u64>,
    /// ... or from a scrape interval with one request, given by order.
    claimed: Option<u64>,
    /// A decode after a prefill: a folder of its own only if no prefill
    /// accounts for one (tried last).
    last: bool,
    /// Its decode loaded the folder (an `Inject` line of its own).
    read: bool,
    taken: bool,
}

/// The folder sizes the run can make.
struct Shape {
    block: u64,
    layers: Option<u64>,
    per_layer_token: Option<u64>,
}

impl Shape {
    fn bytes_of_stored(&self, stored: u64) -> Option<u64> {
        Some(self.layers? * (stored * self.per_layer_token? + SAFETENSORS_KV_HEADER_BYTES))
    }

    fn bytes_of_prompt(&self, n: u64) -> Option<u64> {
        self.bytes_of_stored(example_connector_saved_tokens(n, self.block)?)
    }
}

/// Of several writers that fit a folder equally, the one that ran before
/// all the others (its folder was made first): with spans, it ended before
/// each other one started; by log stamps, it started a second earlier or
/// more. None when two ran together.
fn first_of(writers: &[Writer], cands: &[usize]) -> Option<usize> {
    let &w = cands.iter().min_by(|a, b| writers[**a].start.total_cmp(&writers[**b].start))?;
    let a = &writers[w];
    let before = |b: &Writer| match (a.end, b.end) {
        (Some(end), Some(_)) => end <= b.start + SPAN_SLACK_S,
        _ => b.start >= a.start + STAMP_SLACK_S,
    };
    cands.iter().filter(|&&c| c != w).all(|&c| before(&writers[c])).then_some(w)
}

/// The writers of trace `t`'s folders: its prefill (or its decode when no
/// prefill ran), and its decode as well when its prompt is known to differ
/// from the prefill's (a different prompt is a different key).
fn writers_of(state: &AppState, t: &Trace, req: usize, r: &RequestBytes, shape: &Shape) -> Vec<Writer> {
    let spans = state.spans.timings_for(t);
    let tokens = |s: Option<&crate::feed::RequestSpan>| s.and_then(|s| s.prompt_tokens).map(u64::from);
    // Prompt lengths vLLM reported (spans, DEBUG log), and those a scrape
    // with one request gave (by order: claims, not exact).
    let decode_prompt = tokens(spans.decode).or(t.prompt_tokens.map(u64::from));
    let prefill_prompt = tokens(spans.prefill).or(decode_prompt);
    let claimed = |src: &str| r.tokens.filter(|_| r.tokens_source.is_some_and(|s| s.contains(src)));
    let prefill_claim = claimed("prefill metrics");
    let decode_claim = r.decode_tokens.or(claimed("decode metrics"));
    // Loaded, or cancelled after its load: the `Inject` line gives the stored tokens.
    let loaded =
        t.outcome == Outcome::Loaded || (t.outcome == Outcome::Cancelled && t.inject_tokens.is_some());
    let inject = t.inject_tokens.filter(|_| loaded).map(u64::from);
    let window = |span: Option<&crate::feed::RequestSpan>, start: f64| match span {
        Some(s) => (s.start - SPAN_SLACK_S, s.end + SPAN_SLACK_S, s.start, Some(s.end)),
        None => (start - STAMP_SLACK_S, start + BEFORE_PREV_SCAN_S, start, None),
    };
    let failed_prefill = t.outcome == Outcome::Error && t.error_at == Some(Hop::Producer);
    let writer = |kind, (from, to, start, end), exact, claimed, last, read| Writer {
        req,
        kind,
        from,
        to,
        start,
        end,
        exact,
        claimed,
        last,
        read,
        taken: false,
    };
    let mut out = Vec::new();
    if t.prefill.is_some() && !failed_prefill {
        let Some(start) = r.prefill_at else { return out };
        let exact = prefill_prompt
            .and_then(|n| shape.bytes_of_prompt(n))
            .or(inject.and_then(|s| shape.bytes_of_stored(s)));
        let claimed = prefill_claim.and_then(|n| shape.bytes_of_prompt(n));
        out.push(writer("prefill", window(spans.prefill, start), exact, claimed, false, loaded));
        // A decode that computed a prompt other than the prefill's.
        let p = tokens(spans.prefill).or(prefill_claim);
        let d = decode_prompt.or(decode_claim);
        if let (Some(p), Some(d), Some(start), false) = (p, d, r.decode_at, loaded)
            && p != d
        {
            let bytes = shape.bytes_of_prompt(d);
            let (exact, claimed) = if decode_prompt.is_some() { (bytes, None) } else { (None, bytes) };
            out.push(writer("decode", window(spans.decode, start), exact, claimed, true, false));
        }
    } else if t.prefill.is_none() && t.decode.is_some() && !loaded {
        let Some(start) = r.decode_at else { return out };
        let exact = decode_prompt.and_then(|n| shape.bytes_of_prompt(n));
        let claimed = decode_claim.or(r.tokens).and_then(|n| shape.bytes_of_prompt(n));
        out.push(writer("decode", window(spans.decode, start), exact, claimed, false, false));
    }
    out
}

pub fn match_folders(
    state: &AppState,
    traces: &[&Trace],
    index: &std::collections::HashMap<String, usize>,
    requests: &mut [RequestBytes],
    bpt: Option<u64>,
    layers: Option<u64>,
    block: u64,
) -> Vec<FolderMatch> {
    let per_layer_token = bpt.zip(layers).map(|(b, l)| b / l.max(1));
    let shape = Shape { block, layers, per_layer_token };
    let mut writers: Vec<Writer> = traces
        .iter()
        .filter_map(|t| Some((t, *index.get(&t.id)?)))
        .flat_map(|(t, i)| writers_of(state, t, i, &requests[i], &shape))
        .collect();
    // Sorted by when they began: a folder looks only at the writers whose
    // run can overlap its window (the ring holds thousands; this runs per frame).
    writers.sort_by(|a, b| a.from.total_cmp(&b.from));
    let longest = writers.iter().map(|w| w.to - w.from).fold(0.0_f64, f64::max);
    let span = |t0: f64, t1: f64| {
        let lo = writers.partition_point(|w| w.from < t0 - longest);
        lo..writers.partition_point(|w| w.from <= t1).max(lo)
    };
    let mut folders: Vec<(&String, &crate::state::link::FolderSeen)> = state.link.folders.iter().collect();
    folders.sort_by(|a, b| a.1.first_seen.total_cmp(&b.1.first_seen).then(a.0.cmp(b.0)));
    let spans: Vec<std::ops::Range<usize>> =
        folders.iter().map(|(_, f)| span(f.prev_scan.unwrap_or(f.first_seen - 10.0), f.first_seen)).collect();
    // Per folder: (writer, matched by size, a rival fitted too).
    let mut pick: Vec<Option<(usize, bool, bool)>> = vec![None; folders.len()];
    // By size (exact or claimed), then by time alone (a claim given by
    // order may be another request's), then decodes after a prefill; each
    // pass until nothing changes.
    for pass in 0..3 {
        loop {
            let mut added = false;
            for (k, (_, f)) in folders.iter().enumerate() {
                if pick[k].is_some() {
                    continue;
                }
                let t0 = f.prev_scan.unwrap_or(f.first_seen - 10.0);
                let near: Vec<usize> = spans[k]
                    .clone()
                    .filter(|&w| {
                        let x = &writers[w];
                        !x.taken && (!x.last || pass == 2) && x.from <= f.first_seen && x.to >= t0
                    })
                    .collect();
                // A decode after a prefill only where no prefill of unknown
                // size is left that may have written it.
                if pass == 2 && near.iter().any(|&w| !writers[w].last && writers[w].exact.is_none()) {
                    continue;
                }
                let of = |keep: &dyn Fn(&Writer) -> bool| -> Vec<usize> {
                    near.iter().copied().filter(|&w| keep(&writers[w])).collect()
                };
                let exact = of(&|w| w.exact == Some(f.bytes));
                let claimed = of(&|w| w.exact.is_none() && w.claimed == Some(f.bytes));
                let open = of(&|w| w.exact.is_none() && (w.claimed.is_none() || pass >= 1));
                let first = |c: &[usize]| first_of(&writers, c);
                // Equal sizes: the one that ran first; else the one whose
                // size is exact over those given by order.
                let fit: Vec<usize> = exact.iter().chain(&claimed).copied().collect();
                let found = match (&fit[..], &exact[..]) {
                    ([w], _) => Some((*w, true, !open.is_empty() || claimed.contains(w))),
                    ([_, ..], [e]) => Some((first(&fit).unwrap_or(*e), true, true)),
                    ([_, ..], _) => first(&fit).map(|w| (w, true, true)),
                    ([], _) if pass >= 1 => first(&open).map(|w| (w, false, true)),
                    _ => None,
                };
                if let Some((w, _, _)) = found {
                    writers[w].taken = true;
                    pick[k] = found;
                    added = true;
                }
            }
            if !added {
                break;
            }
        }
    }
    // Writers left out where a folder fitted them and another request alike.
    let mut shared = vec![0usize; writers.len()];
    for (k, (_, f)) in folders.iter().enumerate() {
        let t0 = f.prev_scan.unwrap_or(f.first_seen - 10.0);
        if pick[k].is_none() {
            for w in spans[k].clone() {
                let x = &writers[w];
                if !x.taken
                    && x.from <= f.first_seen
                    && x.to >= t0
                    && x.exact.or(x.claimed).is_none_or(|b| b == f.bytes)
                {
                    shared[w] += 1;
                }
            }
        }
    }
    for (w, n) in writers.iter().zip(shared).filter(|(_, n)| *n > 0) {
        let r = &mut requests[w.req];
        let note = format!(
            "{n} folder(s) stored while its {} ran fit it as well as another request's: which is its own is not known",
            w.kind
        );
        r.note = if r.note.is_empty() { note } else { format!("{}; {note}", r.note) };
    }
    let mut out = Vec::new();
    for ((name, f), found) in folders.into_iter().zip(pick) {
        let mut m = FolderMatch {
            name: name.clone(),
            files: f.files,
            bytes: f.bytes,
            first_seen: f.first_seen,
            tokens: folder_tokens(f.bytes, f.files, per_layer_token),
            writer: "unknown",
            request: None,
            matched_by: "none",
            predicted: None,
            read: false,
        };
        if let Some((wi, by_size, rival)) = found {
            let w = &writers[wi];
            m.writer = w.kind;
            m.predicted = w.exact.or(w.claimed);
            m.matched_by = if by_size { "time and size" } else { "time" };
            let r = &mut requests[w.req];
            m.request = Some(r.id.clone());
            r.folder = Some(name.clone());
            let confidence = if by_size && !rival { "sure" } else { "likely" };
            if w.kind == "prefill" {
                r.window = Some([r.prefill_at.unwrap_or(f.first_seen), f.first_seen]);
                if w.read {
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
                let note = if w.last {
                    format!(
                        "decode computed a prompt other than its prefill's and stored it in its own folder {name}"
                    )
                } else {
                    format!("decode stored its own folder {name}: no prefill ran for it")
                };
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

#[cfg(test)]
mod tests {
    use super::{Writer, first_of};

    fn w(start: f64, end: Option<f64>) -> Writer {
        let (from, to) = (start - 1.0, start + 3.0);
        Writer {
            req: 0,
            kind: "prefill",
            from,
            to,
            start,
            end,
            exact: None,
            claimed: None,
            last: false,
            read: false,
            taken: false,
        }
    }

    /// Two writers of one size: the earlier takes the earlier folder only
    /// when it ran before the other (spans), or started a stamp-second
    /// earlier (logs); two that ran together settle nothing.
    #[test]
    fn who_ran_first() {
        assert_eq!(first_of(&[w(10.0, Some(10.3)), w(10.5, Some(10.9))], &[0, 1]), Some(0));
        assert_eq!(first_of(&[w(10.5, Some(10.9)), w(10.0, Some(10.3))], &[0, 1]), Some(1));
        assert_eq!(first_of(&[w(10.0, Some(10.6)), w(10.2, Some(10.9))], &[0, 1]), None);
        assert_eq!(first_of(&[w(10.0, None), w(11.0, None)], &[0, 1]), Some(0));
        assert_eq!(first_of(&[w(10.0, None), w(10.0, None)], &[0, 1]), None);
    }
}
