//! The connector directory of a capture (ExampleConnector's shared
//! storage: one folder per stored prompt), as recorded: its scans during
//! the run, or its counts and the listing at the end.

use crate::feed::KvDirSnapshot;

/// `kvdir-folders.jsonl`: the connector directory as scanned every 0.5 s,
/// each folder with its files and bytes.
pub fn folder_scans(text: &str) -> Vec<(f64, KvDirSnapshot)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        let (Some(t), Some(folders)) = (v["t"].as_f64(), v["folders"].as_array()) else { continue };
        let scan: KvDirSnapshot = folders
            .iter()
            .filter_map(|f| {
                let stat =
                    crate::feed::FolderStat { files: f["files"].as_u64()?, bytes: f["bytes"].as_u64()? };
                Some((f["name"].as_str()?.to_string(), stat))
            })
            .collect();
        out.push((t, scan));
    }
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}

/// When each listed folder appeared. A scan can catch folders half
/// written, so only the ticks where every folder holds all its files give
/// exact byte totals; between two such ticks the new folders are the ones
/// whose sizes add up to the growth (smaller first: shorter prompts finish
/// first), placed at the ticks where the count grew. Where no set of sizes
/// fits, the next free folders of the listing.
pub(super) fn creation_order(
    rows: &[(f64, usize, u64, u64)],
    folders: &[(String, Vec<(String, u64)>)],
) -> Vec<(f64, usize)> {
    let size = |i: usize| folders[i].1.iter().map(|(_, s)| *s).sum::<u64>();
    let mut per = std::collections::BTreeMap::<usize, usize>::new();
    for f in folders {
        *per.entry(f.1.len()).or_default() += 1;
    }
    let files_each = per.into_iter().max_by_key(|(_, n)| *n).map_or(0, |(f, _)| f as u64);
    let complete = |r: &(f64, usize, u64, u64)| r.2 == r.1 as u64 * files_each;
    let mut free: Vec<usize> = (0..folders.len()).collect();
    let mut out: Vec<(f64, usize)> = Vec::new();
    let (mut have_n, mut have_b) = (0usize, 0u64);
    let mut pending: Vec<(f64, usize)> = Vec::new(); // (tick, folders added there)
    for (i, r) in rows.iter().enumerate() {
        let n = r.1.min(folders.len());
        let seen = have_n + pending.iter().map(|p| p.1).sum::<usize>();
        if n > seen {
            pending.push((r.0, n - seen));
        }
        let last = i + 1 == rows.len();
        if !(complete(r) || last) || pending.is_empty() {
            continue;
        }
        let k: usize = pending.iter().map(|p| p.1).sum();
        let mut chosen =
            if complete(r) { sized_subset(&free, k, r.3.saturating_sub(have_b), &size) } else { None }
                .unwrap_or_else(|| free[..k.min(free.len())].to_vec());
        chosen.sort_by_key(|&c| size(c));
        let mut it = chosen.into_iter();
        for (t, m) in pending.drain(..) {
            for c in it.by_ref().take(m) {
                free.retain(|f| *f != c);
                have_b += size(c);
                out.push((t, c));
            }
        }
        have_n = out.len();
        if complete(r) {
            have_b = r.3;
        }
    }
    out
}

/// `k` of `free` whose sizes sum to `want`: a search over the distinct
/// sizes (few: one per prompt length), earliest folders of a size first.
fn sized_subset(free: &[usize], k: usize, want: u64, size: &dyn Fn(usize) -> u64) -> Option<Vec<usize>> {
    let mut groups: Vec<(u64, Vec<usize>)> = Vec::new();
    for &f in free {
        match groups.iter_mut().find(|g| g.0 == size(f)) {
            Some(g) => g.1.push(f),
            None => groups.push((size(f), vec![f])),
        }
    }
    fn dfs(
        groups: &[(u64, Vec<usize>)],
        g: usize,
        k: usize,
        want: u64,
        take: &mut Vec<usize>,
        budget: &mut u32,
    ) -> bool {
        if k == 0 {
            return want == 0;
        }
        if g == groups.len() || *budget == 0 {
            return false;
        }
        *budget -= 1;
        let (s, members) = &groups[g];
        for n in (0..=k.min(members.len())).rev() {
            let Some(cost) = s.checked_mul(n as u64).filter(|c| *c <= want) else { continue };
            take.extend(&members[..n]);
            if dfs(groups, g + 1, k - n, want - cost, take, budget) {
                return true;
            }
            take.truncate(take.len() - n);
        }
        false
    }
    let mut take = Vec::new();
    let mut budget = 200_000;
    dfs(&groups, 0, k, want, &mut take, &mut budget).then_some(take)
}

/// The folders of an `ls -laR` of the connector directory, in listing
/// order, each with its files' sizes.
pub(super) fn parse_listing(text: &str) -> Vec<(String, Vec<(String, u64)>)> {
    let mut out: Vec<(String, Vec<(String, u64)>)> = Vec::new();
    let mut root: Option<String> = None;
    let mut current: Option<usize> = None;
    for line in text.lines() {
        if let Some(dir) = line.strip_suffix(':') {
            match &root {
                None => root = Some(dir.to_string()),
                Some(r) => {
                    let name = dir.strip_prefix(r.as_str()).unwrap_or(dir).trim_start_matches('/');
                    out.push((name.to_string(), Vec::new()));
                    current = Some(out.len() - 1);
                }
            }
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        if let (Some(i), true) = (current, line.starts_with('-') && fields.len() >= 9)
            && let Ok(size) = fields[4].parse::<u64>()
        {
            out[i].1.push((fields[8..].join(" "), size));
        }
    }
    out
}
