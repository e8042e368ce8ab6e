//! The prefixes that deployments put in front of a vLLM log line, peeled
//! outermost first: the system journal (`déc. 19 02:07:16 host bash[42]: `,
//! `journalctl`/syslog), `kubectl logs --prefix` (`[pod/NAME/CONTAINER] `), a
//! CI timestamp (`[2024-09-10T16:54:45Z] `), docker compose (`name  | `),
//! stern / llm-d (`pod container `), then vLLM's own process prefixes,
//! possibly doubled (`(Worker pid=7) (Worker_DP0_TP1_EP1 pid=7) `).

use super::line::{Level, Stamp};

/// What was peeled off one line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Peeled<'a> {
    /// How many prefixes were peeled (counted, not listed: this runs on
    /// every line, and a list would be an allocation per line).
    pub prefixes: usize,
    /// Everything peeled, as printed.
    pub prefix: &'a str,
    /// The pod (or compose service) the line came from: the instance's name
    /// when many pods share one stream (their pids repeat).
    pub pod: Option<&'a str>,
    /// Innermost vLLM process name (`EngineCore_DP0`, `Worker_TP1`, `VllmWorker`).
    pub process: Option<&'a str>,
    pub pid: Option<u32>,
    /// Tensor-parallel rank, from `rank=N` or a `_TPn` in the process name.
    pub tp_rank: Option<u32>,
    pub rest: &'a str,
}

/// Peels every prefix it knows; `rest` is the line from its own header on.
pub fn peel(line: &str) -> Peeled<'_> {
    let mut p = Peeled { rest: line, ..Peeled::default() };
    // A `^C` echoed by the terminal glued to the next line.
    while let Some(r) = p.rest.strip_prefix("^C") {
        p.rest = r;
    }
    if let Some(end) = journal_len(p.rest) {
        p.prefixes += 1;
        p.rest = &p.rest[end..];
    }
    if let Some(r) = p.rest.strip_prefix("[pod/")
        && let Some(end) = r.find("] ")
    {
        let inner = &r[..end];
        p.prefixes += 1;
        p.pod = inner.split('/').next();
        p.rest = &r[end + 2..];
    }
    if let Some(end) = ci_stamp_len(p.rest) {
        p.prefixes += 1;
        p.rest = p.rest[end..].trim_start_matches(' ');
    }
    if let Some((name, end)) = compose_prefix(p.rest) {
        p.prefixes += 1;
        p.pod = Some(name);
        p.rest = &p.rest[end..];
    }
    if let Some((pod, words_end)) = pod_words(p.rest) {
        p.prefixes += p.rest[..words_end].split(' ').filter(|w| !w.is_empty()).count();
        p.pod = Some(pod);
        p.rest = &p.rest[words_end..];
    }
    while let Some((inner, after)) = process_prefix(p.rest) {
        p.prefixes += 1;
        let name = inner.split(' ').next().unwrap_or("");
        p.process = Some(name);
        p.pid = inner.rfind("pid=").and_then(|i| inner[i + 4..].parse().ok());
        p.tp_rank = rank_of(inner).or(p.tp_rank);
        p.rest = after;
    }
    p.prefix = &line[..line.len() - p.rest.len()];
    p
}

/// `(Name [k=v ...] pid=N) rest` → `("Name ... pid=N", rest)`.
fn process_prefix(s: &str) -> Option<(&str, &str)> {
    let r = s.strip_prefix('(')?;
    let end = r.find(')')?;
    let inner = &r[..end];
    let name = inner.split(' ').next().filter(|n| !n.is_empty())?;
    if !inner.contains("pid=") || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return None;
    }
    let after = &r[end + 1..];
    Some((inner, after.strip_prefix(' ').unwrap_or(after)))
}

fn rank_of(inner: &str) -> Option<u32> {
    if let Some(i) = inner.find("rank=") {
        return super::line::leading_u64(&inner[i + 5..]).and_then(|n| u32::try_from(n).ok());
    }
    let name = inner.split(' ').next()?;
    let i = name.find("TP")?;
    (i == 0 || name.as_bytes()[i - 1] == b'_')
        .then(|| super::line::leading_u64(&name[i + 2..]).and_then(|n| u32::try_from(n).ok()))
        .flatten()
}

/// `[2024-09-10T16:54:45Z] ` (a CI runner's own stamp) → its length.
fn ci_stamp_len(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    if b.len() < 22
        || b[0] != b'['
        || !b[1..5].iter().all(u8::is_ascii_digit)
        || b[5] != b'-'
        || b[11] != b'T'
    {
        return None;
    }
    // A byte limit, not a char one: the stamp is ASCII, what follows may not be.
    let end = s[..s.floor_char_boundary(40)].find("] ")?;
    Some(end + 2)
}

/// `déc. 19 02:07:16 host bash[2211352]: ` (journalctl's default, syslog's
/// RFC 3164 header; the month is the locale's word) or the same after an
/// ISO stamp with its zone (`journalctl -o short-iso`) → its length.
fn journal_len(s: &str) -> Option<usize> {
    let mut words = s.split(' ');
    let first = words.next()?;
    let iso = first.len() >= 19
        && first.as_bytes()[10] == b'T'
        && first.as_bytes()[..4].iter().all(u8::is_ascii_digit);
    let mut used = first.len() + 1;
    if !iso {
        // `Dec`, `déc.`, `Dez`: a month word, then the day (padded with a
        // second space when it has one digit) and `HH:MM:SS`.
        let month_ok = (2..=5).contains(&first.chars().count())
            && Level::from_word(first).is_none()
            && first.chars().all(|c| c.is_alphabetic() || c == '.');
        let mut day = words.next()?;
        if day.is_empty() {
            used += 1;
            day = words.next()?;
        }
        let time = words.next()?;
        let t = time.as_bytes();
        let day_ok = (1..=2).contains(&day.len()) && day.bytes().all(|b| b.is_ascii_digit());
        if !month_ok || !day_ok || t.len() != 8 || t[2] != b':' || t[5] != b':' {
            return None;
        }
        used += day.len() + 1 + time.len() + 1;
    }
    // Not `2025-09-17T08:22:52Z INFO target::path: msg` (Rust tracing).
    let host =
        words.next().filter(|h| !h.is_empty() && !h.contains(['[', '(']) && Level::from_word(h).is_none())?;
    let ident = words.next().filter(|i| !i.contains("::"))?;
    let ident_ok = ident.len() > 1 && (ident.ends_with("]:") && ident.contains('[') || ident.ends_with(':'));
    (ident_ok && !ident.starts_with('[')).then_some(used + host.len() + 1 + ident.len() + 1)
}

/// `service-1  | rest` (docker compose): one word, spaces, `| `.
fn compose_prefix(s: &str) -> Option<(&str, usize)> {
    // One word, spaces, `| `: found from the first space, not by a scan of
    // every line for " | " (this runs on every line read).
    let name_end = s.as_bytes().iter().position(|&b| b == b' ')?;
    let name = &s[..name_end];
    let spaces = s[name_end..].bytes().take_while(|&b| b == b' ').count();
    let bar = name_end + spaces - 1;
    if !s[bar..].starts_with(" | ") || bar + 3 > 120 {
        return None;
    }
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic()) {
        return None;
    }
    // Only in front of what vLLM prints, so prose with a `|` stays whole.
    let after = &s[bar + 3..];
    let known = starts_with_vllm_header(after)
        || process_prefix(after).is_some()
        || super::line::split_uvicorn_level(after).is_some();
    known.then_some((name, bar + 3))
}

/// `pod container (Proc pid=N) ...` or `pod container LEVEL MM-DD ...`
/// (stern, llm-d): one or two plain words before a vLLM prefix or header.
fn pod_words(s: &str) -> Option<(&str, usize)> {
    let plain = |w: &str| {
        !w.is_empty()
            && Level::from_word(w).is_none()
            && w.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
            && !w.bytes().all(|b| b.is_ascii_digit())
    };
    let mut end = 0;
    let mut first = None;
    for _ in 0..2 {
        let rest = &s[end..];
        let sp = rest.find(' ')?;
        let w = &rest[..sp];
        if !plain(w) {
            return None;
        }
        first.get_or_insert(w);
        end += sp + 1;
        let after = &s[end..];
        if process_prefix(after).is_some() || starts_with_vllm_header(after) {
            return first.map(|f| (f, end));
        }
    }
    None
}

/// `LEVEL MM-DD HH:MM:SS` at the start.
pub(crate) fn starts_with_vllm_header(s: &str) -> bool {
    let Some(sp) = s.find(' ') else { return false };
    if Level::from_word(&s[..sp]).is_none() {
        return false;
    }
    let b = s[sp..].trim_start_matches(' ').as_bytes();
    b.len() >= 14 && b[2] == b'-' && b[5] == b' ' && b[8] == b':' && b[0].is_ascii_digit()
}

/// `INFO 11-30 06:24:52 [file.py:345] message` → `(Info, stamp, "message")`.
pub(crate) fn split_vllm_header(s: &str) -> Option<(Level, Stamp, &str)> {
    let sp = s.find(' ')?;
    let level = Level::from_word(&s[..sp])?;
    // `ERROR   08-16 ...`: some formatters pad the level.
    let rest = s[sp + 1..].trim_start_matches(' ');
    let b = rest.as_bytes();
    // "MM-DD HH:MM:SS " is 15 bytes, all ASCII.
    if b.len() < 15 || b[2] != b'-' || b[5] != b' ' || b[8] != b':' || b[11] != b':' {
        return None;
    }
    let num = |i: usize| -> Option<u8> {
        let (h, l) = (b[i], b[i + 1]);
        (h.is_ascii_digit() && l.is_ascii_digit()).then(|| (h - b'0') * 10 + (l - b'0'))
    };
    let ts = (num(0)?, num(3)?, num(6)?, num(9)?, num(12)?);
    let rest = rest.get(14..)?.trim_start_matches(' ');
    // `[fileinfo:lineno]`; fileinfo never contains "] ".
    let msg = match rest.strip_prefix('[') {
        Some(r) => match r.find(']') {
            Some(end) => r[end + 1..].strip_prefix(' ').unwrap_or(&r[end + 1..]),
            None => rest,
        },
        // V0 (≤0.8): `file.py:N] message`, no opening bracket.
        None => match rest.split_once("] ") {
            Some((f, m)) if f.contains(".py:") && !f.contains(' ') => m,
            _ => rest,
        },
    };
    Some((level, ts, msg))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// cargo-fuzz (`vllm_line`): a CI stamp followed by multibyte text
    /// sliced the line inside a character. Now it is cut at a boundary, and
    /// a compose prefix before text with non-ASCII near the limit is kept.
    #[test]
    fn multibyte_text_after_a_prefix_is_cut_at_a_char_boundary() {
        let line = format!("[2024-09-10T16:55:11Z{}] INFO 09-10 09:55:11 metrics", "\u{FFFD}".repeat(40));
        let p = peel(&line);
        assert_eq!(p.prefixes, 0, "{p:?}");
        let line = format!("vllm-1  | INFO 09-10 09:55:11 [a.py:1] {}", "é".repeat(80));
        assert_eq!(peel(&line).prefixes, 1);
    }

    #[test]
    fn stacks() {
        let p = peel(
            "ms-pd-prefill-6458459f69-qxv6j vllm (APIServer pid=1) (EngineCore_DP0 pid=72) DEBUG 12-07 22:14:56 [a.py:1] x",
        );
        assert_eq!(p.pod, Some("ms-pd-prefill-6458459f69-qxv6j"));
        assert_eq!(p.prefixes, 4);
        assert_eq!(p.process, Some("EngineCore_DP0"));
        assert!(p.rest.starts_with("DEBUG"));
        let p = peel("(Worker pid=7) (Worker_DP0_TP1_EP1 pid=7) ERROR 03-31 02:49:30 [m.py:1] x");
        assert_eq!((p.process, p.tp_rank, p.pid), (Some("Worker_DP0_TP1_EP1"), Some(1), Some(7)));
        let p = peel("(VllmWorker rank=1 pid=98474) DEBUG 07-08 02:13:53 [n.py:1] x");
        assert_eq!(p.tp_rank, Some(1));
        let p = peel("déc. 19 02:07:16 s-a60003 bash[2211352]: (EngineCore_DP0 pid=2211352) [2025-12-19 x");
        assert_eq!((p.prefixes, p.process, p.pid), (2, Some("EngineCore_DP0"), Some(2211352)));
        let p = peel("Dec  9 02:07:16 gpu1 vllm[7]: INFO 12-09 02:07:16 [a.py:1] x");
        assert!(p.rest.starts_with("INFO 12-09"), "{p:?}");
        let p = peel("2025-12-19T02:07:16+0100 gpu1 vllm[7]: INFO 12-19 02:07:16 [a.py:1] x");
        assert!(p.rest.starts_with("INFO 12-19"), "{p:?}");
        // A V0 header and Rust tracing are not a journal.
        assert_eq!(
            peel("2025-09-17T08:22:52Z INFO sglang_router_rs::server: src/server.rs:261: x").prefixes,
            0
        );
        assert_eq!(peel("INFO 01-17 03:11:25 async_llm_engine.py:134] Aborted request 0e89.").prefixes, 0);
        let p = peel("qwen-1  | INFO 02-22 16:52:30 a.py:433] x");
        assert_eq!(p.pod, Some("qwen-1"));
        assert!(p.rest.starts_with("INFO"));
        let p = peel("[2024-09-10T16:54:45Z] INFO 09-10 09:54:45 a.py:206] x");
        assert!(p.rest.starts_with("INFO"), "{:?}", p.rest);
        let p = peel("[pod/vllm-0/vllm] INFO 09-10 09:54:45 [a.py:206] x");
        assert_eq!(p.pod, Some("vllm-0"));
        // Prose is not a pod prefix.
        assert_eq!(peel("Loading safetensors checkpoint shards: 1/1").prefixes, 0);
        assert_eq!(peel("INFO:     Started server process [5521]").prefixes, 0);
    }
}
