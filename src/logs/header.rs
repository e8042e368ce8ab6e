//! Headers of the non-vLLM loggers that share a vLLM deployment's output:
//! LMCache (`[2025-09-09 20:06:12,053] LMCache INFO: msg (file.py:N:module)`),
//! glog / klog (Mooncake, llm-d's sidecar: `E0417 19:46:42.567027   481 f.cpp:192] msg`),
//! Rust `tracing` (vllm-router, sglang-router: `2026-01-15 02:30:17 DEBUG span{..}: target: f.rs:N: msg`;
//! Dynamo, RFC 3339 and compact: `2025-12-25T15:06:46.065Z  WARN a:b: dynamo_llm::kv_router: msg`,
//! its Python workers' lines under their module: `... INFO vllm.v1.engine.async_llm: Added request X.`)
//! and yalantinglibs (`2025-04-17 19:46:42.566927 ERROR    [975] [f.hpp:978] msg`).

use super::line::Level;

/// `(month, day, h, m, s)`, as `vllm::Stamp`.
type Stamp = (u8, u8, u8, u8, u8);

/// A foreign header, split.
#[derive(Debug, Clone, PartialEq)]
pub struct Foreign<'a> {
    pub level: Option<Level>,
    /// `(year, month, day, h, m, s)`; glog without a year gives `None` year.
    pub year: Option<u16>,
    pub stamp: Stamp,
    /// The `tracing` spans before the target (`http_request{... request_id="x"}`).
    pub spans: &'a str,
    /// `vllm_router_rs::routers::http::vllm_pd_router` for `tracing`, else "".
    pub target: &'a str,
    pub msg: &'a str,
}

pub fn split_foreign(s: &str) -> Option<Foreign<'_>> {
    let b = s.as_bytes();
    if b.first() == Some(&b'[') {
        return lmcache(s);
    }
    if b.len() > 20 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-' {
        return dated(s);
    }
    if matches!(b.first(), Some(b'I' | b'W' | b'E' | b'F')) {
        return glog(s);
    }
    None
}

fn two(b: &[u8], i: usize) -> Option<u8> {
    let (h, l) = (*b.get(i)?, *b.get(i + 1)?);
    (h.is_ascii_digit() && l.is_ascii_digit()).then(|| (h - b'0') * 10 + (l - b'0'))
}

/// `YYYY-MM-DD HH:MM:SS` (or RFC 3339's `T` between) at `b[0..19]`.
fn ymdhms(b: &[u8]) -> Option<(u16, Stamp)> {
    let sep = b.get(10).is_some_and(|c| *c == b' ' || *c == b'T');
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !sep || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let y = u16::from(two(b, 0)?) * 100 + u16::from(two(b, 2)?);
    Some((y, (two(b, 5)?, two(b, 8)?, two(b, 11)?, two(b, 14)?, two(b, 17)?)))
}

fn lmcache(s: &str) -> Option<Foreign<'_>> {
    let (y, stamp) = ymdhms(&s.as_bytes()[1..])?;
    let close = s.find("] ")?;
    let rest = &s[close + 2..];
    let rest = rest.strip_prefix("LMCache ")?;
    // `INFO: msg`, and as pasted `ERROR:msg`, `WARN : msg` (padded level).
    let colon = rest.find(':')?;
    let level = Level::from_word(rest[..colon].trim_end());
    let msg = strip_py_origin(rest[colon + 1..].trim_start());
    Some(Foreign { level, year: Some(y), stamp, spans: "", target: "", msg })
}

/// Drops LMCache's trailing ` (file.py:N:module)`.
fn strip_py_origin(msg: &str) -> &str {
    let m = msg.trim_end();
    if m.ends_with(')')
        && let Some(open) = m.rfind(" (")
        && m[open + 2..].contains(".py:")
        && !m[open + 2..].contains(' ')
    {
        return &m[..open];
    }
    m
}

/// `YYYY-MM-DD HH:MM:SS[.frac] LEVEL ...` (tracing, yalantinglibs, NIXL's logger).
fn dated(s: &str) -> Option<Foreign<'_>> {
    let (y, stamp) = ymdhms(s.as_bytes())?;
    let mut rest = &s[19..];
    if let Some(r) = rest.strip_prefix('.') {
        rest = r.trim_start_matches(|c: char| c.is_ascii_digit());
    }
    // RFC 3339's zone (`Z`, `+01:00`): Rust `tracing`'s and Dynamo's stamps.
    if let Some(r) = rest.strip_prefix('Z') {
        rest = r;
    } else if rest.starts_with(['+', '-']) && rest.as_bytes().get(1).is_some_and(u8::is_ascii_digit) {
        rest = rest.trim_start_matches(|c: char| c.is_ascii_digit() || c == '+' || c == '-' || c == ':');
    }
    let rest = rest.trim_start();
    let sp = rest.find(' ')?;
    let level = Level::from_word(&rest[..sp]);
    let mut body = rest[sp..].trim_start();
    level?;
    // yalantinglibs: `[tid] [file:line] msg`.
    if body.starts_with('[') {
        let mut b = body;
        for _ in 0..2 {
            if let Some(r) = b.strip_prefix('[')
                && let Some(e) = r.find("] ")
            {
                b = &r[e + 2..];
            }
        }
        return Some(Foreign { level, year: Some(y), stamp, spans: "", target: "", msg: b });
    }
    // tracing: `[spans: ]target: file.rs:N: msg`. Spans end with `}:`.
    let mut spans = "";
    if let Some(i) = body.rfind("}: ") {
        spans = &body[..i + 1];
        body = &body[i + 3..];
    }
    let (mut target, mut msg) = match body.split_once(": ") {
        Some((t, m)) if t.contains("::") || !t.contains(' ') => (t, m),
        _ => ("", body),
    };
    // The compact format's spans (`http-request:completions: target: msg`)
    // carry no braces: the target is the next word naming a module.
    if spans.is_empty()
        && !target.contains("::")
        && let Some((t, m)) = msg.split_once(": ")
        && t.contains("::")
        && !t.contains(' ')
    {
        spans = target;
        (target, msg) = (t, m);
    }
    // `src/x.rs:681: msg`.
    let msg = match msg.split_once(": ") {
        Some((f, m)) if f.contains(".rs:") && !f.contains(' ') => m,
        _ => msg,
    };
    Some(Foreign { level, year: Some(y), stamp, spans, target, msg })
}

/// `Lmmdd hh:mm:ss.uuuuuu threadid file:line] msg`, also with an 8-digit date.
fn glog(s: &str) -> Option<Foreign<'_>> {
    let level = match s.as_bytes()[0] {
        b'I' => Level::Info,
        b'W' => Level::Warning,
        b'E' => Level::Error,
        _ => Level::Critical,
    };
    let sp = s.find(' ')?;
    let date = &s[1..sp];
    let d = date.as_bytes();
    let (year, md) = match d.len() {
        4 => (None, d),
        8 => (Some(u16::from(two(d, 0)?) * 100 + u16::from(two(d, 2)?)), &d[4..]),
        _ => return None,
    };
    if !d.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let t = &s.as_bytes()[sp + 1..];
    if t.len() < 9 || t[2] != b':' || t[5] != b':' {
        return None;
    }
    let stamp = (two(md, 0)?, two(md, 2)?, two(t, 0)?, two(t, 3)?, two(t, 6)?);
    let close = s.find("] ")?;
    Some(Foreign { level: Some(level), year, stamp, spans: "", target: "", msg: &s[close + 2..] })
}

/// A line stamped with a full date (a router's `tracing` output, Dynamo's
/// RFC 3339: `2026-12-06 06:33:43`, `2026-03-02T10:21:44.518Z`, ANSI codes
/// around it) with that date and time replaced by `t`'s in UTC, to the
/// second (a fraction kept as printed); `None` when the first 48 bytes hold
/// no such stamp. The demo's lab prints a router's lines on its own clock
/// with it, as it does vLLM's (`vllm::restamp`).
pub fn restamp_dated(line: &str, t: f64) -> Option<String> {
    let b = line.as_bytes();
    let fits = |i: usize| {
        let d = |k: usize| b.get(i + k).is_some_and(u8::is_ascii_digit);
        (0..4).all(d)
            && b.get(i + 4) == Some(&b'-')
            && d(5)
            && d(6)
            && b.get(i + 7) == Some(&b'-')
            && d(8)
            && d(9)
            && matches!(b.get(i + 10), Some(b' ' | b'T'))
            && d(11)
            && d(12)
            && b.get(i + 13) == Some(&b':')
            && d(14)
            && d(15)
            && b.get(i + 16) == Some(&b':')
            && d(17)
            && d(18)
    };
    let i = (0..b.len().min(48)).find(|&i| fits(i))?;
    let (mo, d, h, mi, s) = crate::traces::stamp_at(t);
    let sep = b[i + 10] as char;
    let stamp = format!("{:04}-{mo:02}-{d:02}{sep}{h:02}:{mi:02}:{s:02}", crate::traces::year_of(t));
    Some(format!("{}{stamp}{}", &line[..i], &line[i + 19..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        let f = split_foreign("[2025-09-09 20:06:12,053] LMCache INFO: Reqid: x, Total tokens 3 (vllm_v1_adapter.py:802:lmcache.integration.vllm.vllm_v1_adapter)").unwrap();
        assert_eq!((f.year, f.msg), (Some(2025), "Reqid: x, Total tokens 3"));
        let f = split_foreign(
            "E0417 19:46:42.567027   481 master_client.cpp:192] Failed to mount segment due to rpc error",
        )
        .unwrap();
        assert_eq!((f.year, f.stamp.0, f.msg), (None, 4, "Failed to mount segment due to rpc error"));
        let f = split_foreign("E20260106 06:43:02.966156  5793 a.cpp:820] Failed").unwrap();
        assert_eq!(f.year, Some(2026));
        let f = split_foreign(r#"2026-01-15 02:30:17 DEBUG http_request{method=POST request_id="c-1"}: vllm_router_rs::routers::http::vllm_pd_router: src/routers/http/vllm_pd_router.rs:681: Prefill response status: 200 OK"#).unwrap();
        assert_eq!(f.msg, "Prefill response status: 200 OK");
        assert!(f.spans.contains("c-1") && f.target.ends_with("vllm_pd_router"));
        let f = split_foreign(
            "2025-04-17 19:46:42.566927 ERROR    [975] [coro_rpc_client.hpp:978] read rpc body failed",
        )
        .unwrap();
        assert_eq!(f.msg, "read rpc body failed");
        assert!(split_foreign("Initialized 1 prefill clients").is_none());
    }

    #[test]
    fn a_dated_stamp_is_moved_to_another_time() {
        let l = "\x1b[2m2026-12-06 06:33:43\x1b[0m \x1b[31mERROR\x1b[0m x: Transparent proxy request failed";
        let t = 1_796_540_400.0; // 2026-12-06 07:00:00 UTC
        assert_eq!(
            restamp_dated(l, t).unwrap(),
            "\x1b[2m2026-12-06 07:00:00\x1b[0m \x1b[31mERROR\x1b[0m x: Transparent proxy request failed"
        );
        assert_eq!(
            restamp_dated("2026-03-02T10:21:44.518203Z DEBUG a", t).unwrap(),
            "2026-12-06T07:00:00.518203Z DEBUG a"
        );
        assert_eq!(
            restamp_dated("INFO:     127.0.0.1:1 - \"POST /v1/completions HTTP/1.1\" 200 OK", t),
            None
        );
    }
}
