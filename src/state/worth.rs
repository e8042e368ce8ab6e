//! Is the split worth it on this link? Moving a prompt's KV takes
//! `bytes / rate`; computing it on decode takes what decode took for
//! prompts it computed itself (scrape intervals where one request's prompt
//! was computed locally). Past some prompt length one wins over the other.

use std::collections::VecDeque;

use crate::kv::block_rounded_tokens;
use crate::metrics::model::{Counter, Hist};
use crate::state::instance::Interval;

/// Samples kept (the newest).
const SAMPLES_CAP: usize = 512;
/// Prompt lengths scanned for the break-even, in blocks of this many tokens.
const SCAN_STEP: u64 = 16;

/// One decode scrape interval in which a single request computed its prompt.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ComputeSample {
    pub t: f64,
    pub tokens: u64,
    /// Its time to first token (seconds).
    pub ttft_s: f64,
}

#[derive(Debug, Clone, Default)]
pub struct ComputeSamples {
    pub samples: VecDeque<ComputeSample>,
    /// Bytes per second of scrape intervals that held one NIXL transfer
    /// (its bytes over its own transfer time; overlapping ones share a link).
    pub transfer_rates: VecDeque<f64>,
}

impl ComputeSamples {
    /// Keeps an interval where exactly one first token came out and the
    /// prompt tokens were computed on decode (none arrived by transfer).
    pub fn on_decode_interval(&mut self, iv: &Interval) {
        if let (Some(b), Some(t)) = (iv.hists.get(&Hist::NixlBytes), iv.hists.get(&Hist::NixlXferTime))
            && b.total().round() == 1.0
            && t.total().round() == 1.0
            && t.sum > 0.0
        {
            self.transfer_rates.push_back(b.sum / t.sum);
            while self.transfer_rates.len() > SAMPLES_CAP {
                self.transfer_rates.pop_front();
            }
        }
        let Some(ttft) = iv.hists.get(&Hist::Ttft) else { return };
        let tokens = iv.counter(Counter::PromptTokens);
        let local = iv.counter(Counter::PromptLocalCompute);
        let external = iv.counter(Counter::PromptExternal);
        if ttft.total().round() != 1.0 || tokens < SCAN_STEP as f64 || external > 0.0 || local < 0.9 * tokens
        {
            return;
        }
        self.samples.push_back(ComputeSample { t: iv.t, tokens: tokens.round() as u64, ttft_s: ttft.sum });
        while self.samples.len() > SAMPLES_CAP {
            self.samples.pop_front();
        }
    }

    /// The median single-transfer rate, if any transfer ran alone.
    pub fn transfer_rate(&self) -> Option<f64> {
        let mut v: Vec<f64> = self.transfer_rates.iter().copied().collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    }

    /// Median compute time per prompt length (the lower of the middle two:
    /// a first request's warm-up is not what computing costs), by length.
    fn curve(&self) -> Vec<(u64, f64)> {
        let mut by: std::collections::BTreeMap<u64, Vec<f64>> = Default::default();
        for s in &self.samples {
            by.entry(s.tokens).or_default().push(s.ttft_s);
        }
        by.into_iter()
            .map(|(n, mut v)| {
                v.sort_by(f64::total_cmp);
                (n, v[(v.len() - 1) / 2])
            })
            .collect()
    }

    /// Seconds decode takes to compute `tokens` itself: interpolated between
    /// the lengths it computed, proportional below the shortest, the last
    /// slope beyond the longest.
    pub fn compute_s(&self, tokens: u64) -> Option<f64> {
        compute_on(&self.curve(), tokens)
    }
}

fn compute_on(curve: &[(u64, f64)], tokens: u64) -> Option<f64> {
    let n = tokens as f64;
    let &(n0, t0) = curve.first()?;
    if tokens <= n0 || curve.len() == 1 {
        return Some(t0 * n / n0 as f64);
    }
    for w in curve.windows(2) {
        let ((a, ta), (b, tb)) = (w[0], w[1]);
        if tokens <= b {
            return Some(ta + (tb - ta) * (n - a as f64) / (b - a) as f64);
        }
    }
    let ((a, ta), (b, tb)) = (curve[curve.len() - 2], curve[curve.len() - 1]);
    let slope = ((tb - ta) / (b - a) as f64).max(0.0);
    Some(tb + slope * (n - b as f64))
}

/// The verdict for one link.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Worth {
    pub link: String,
    pub rate_bytes_per_s: f64,
    /// "nixl_xfer_time" (bytes over NIXL's own transfer time) or "link speed".
    pub rate_source: &'static str,
    pub computed_samples: usize,
    pub longest_computed_tokens: u64,
    /// The length where moving starts (or stops) paying off; `None`: one
    /// side wins at every length scanned.
    pub break_even_tokens: Option<u64>,
    /// True when moving the KV is faster at `break_even_tokens` and above.
    pub pays_above: bool,
    /// At every length scanned (up to `scanned_to`), which side won.
    pub transfer_always_slower: bool,
    pub transfer_always_faster: bool,
    pub scanned_to: u64,
    pub text: String,
}

/// Seconds to move a prompt's KV at `rate` bytes per second.
pub fn transfer_s(tokens: u64, bpt: u64, block: u64, rate: f64) -> Option<f64> {
    let bytes = block_rounded_tokens(tokens, block)?.checked_mul(bpt)?;
    (rate > 0.0).then(|| bytes as f64 / rate)
}

pub fn worth(
    samples: &ComputeSamples,
    link: &str,
    bpt: u64,
    block: u64,
    rate: f64,
    rate_source: &'static str,
) -> Option<Worth> {
    let curve = samples.curve();
    let longest = curve.last()?.0;
    let scanned_to = (longest * 8).max(32_768);
    let mut flips: Vec<(u64, bool)> = Vec::new();
    let mut last: Option<bool> = None;
    let (mut any_faster, mut any_slower) = (false, false);
    let mut n = SCAN_STEP;
    while n <= scanned_to {
        let faster = transfer_s(n, bpt, block, rate)? < compute_on(&curve, n)?;
        any_faster |= faster;
        any_slower |= !faster;
        if last.is_some_and(|l| l != faster) {
            flips.push((n, faster));
        }
        last = Some(faster);
        n += SCAN_STEP;
    }
    // The last flip is the one that holds for long prompts.
    let (break_even, pays_above) = flips.last().copied().map_or((None, false), |(n, f)| (Some(n), f));
    let mbs = rate / 1e6;
    let sample_note = {
        let t = compute_on(&curve, longest)?;
        let m = transfer_s(longest, bpt, block, rate)?;
        format!(
            "decode computed {longest} tokens in {:.0} ms; moving them takes {:.0} ms",
            t * 1000.0,
            m * 1000.0
        )
    };
    let k = |n: u64| if n >= 1000 { format!("{:.1}k", n as f64 / 1000.0) } else { n.to_string() };
    let text = match break_even {
        Some(n) if pays_above => format!(
            "on {link} at {mbs:.0} MB/s the transfer costs more than recomputing below {} tokens ({sample_note})",
            k(n)
        ),
        Some(n) => format!(
            "on {link} at {mbs:.0} MB/s the transfer costs more than recomputing above {} tokens ({sample_note})",
            k(n)
        ),
        None if any_slower => format!(
            "on {link} at {mbs:.0} MB/s the transfer costs more than recomputing at every prompt length up to {} tokens: the split does not pay on this link ({sample_note})",
            k(scanned_to)
        ),
        None => format!(
            "on {link} at {mbs:.0} MB/s the transfer beats recomputing at every prompt length ({sample_note})"
        ),
    };
    Some(Worth {
        link: link.to_string(),
        rate_bytes_per_s: rate.round(),
        rate_source,
        computed_samples: samples.samples.len(),
        longest_computed_tokens: longest,
        break_even_tokens: break_even,
        pays_above,
        transfer_always_slower: !any_faster,
        transfer_always_faster: !any_slower && any_faster,
        scanned_to,
        text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(v: &[(u64, f64)]) -> ComputeSamples {
        ComputeSamples {
            samples: v.iter().map(|&(tokens, ttft_s)| ComputeSample { t: 0.0, tokens, ttft_s }).collect(),
            transfer_rates: Default::default(),
        }
    }

    #[test]
    fn break_even_where_quadratic_compute_overtakes_a_linear_transfer() {
        // Compute 10 µs a token up to 1000, then 100 µs a token: transfer at
        // 50 µs a token (1 B/token at 20 kB/s) wins past the point they cross.
        let s = samples(&[(1000, 0.01), (2000, 0.11)]);
        let w = worth(&s, "eth0", 1, 16, 20_000.0, "link speed").unwrap();
        assert!(w.pays_above, "{w:?}");
        let n = w.break_even_tokens.unwrap();
        // 0.01 + 1e-4 (n - 1000) = 5e-5 n  →  n = 1800 (to the block).
        assert!((1792..=1824).contains(&n), "{n}");
        assert!(w.text.contains("below 1.8k tokens"), "{}", w.text);
        // A slow link never pays off at these compute times.
        let w =
            worth(&samples(&[(512, 0.05), (4000, 0.1)]), "lo", 131_072, 16, 420e6, "nixl_xfer_time").unwrap();
        assert!(w.transfer_always_slower && w.break_even_tokens.is_none(), "{w:?}");
        assert!(w.text.starts_with("on lo at 420 MB/s the transfer costs more"), "{}", w.text);
        assert_eq!(worth(&ComputeSamples::default(), "lo", 1, 16, 1.0, "x"), None);
    }
}
