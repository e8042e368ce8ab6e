//! Pieces every log line parser needs: levels, ANSI stripping, uvicorn
//! access lines, and small text helpers. Shared by the vLLM and proxy
//! parsers so that neither imports the other.

use std::borrow::Cow;

/// Longest text kept in a free-text event, so a giant exception message
/// does not get copied whole into app state.
pub(crate) const MAX_TEXT: usize = 512;

/// Log level, from vLLM's `LEVEL MM-DD` header or uvicorn's `LEVEL:` prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warning,
    Error,
    Critical,
}

impl Level {
    pub(crate) fn from_word(w: &str) -> Option<Level> {
        Some(match w {
            "TRACE" => Level::Trace,
            "DEBUG" => Level::Debug,
            "INFO" => Level::Info,
            "WARNING" | "WARN" => Level::Warning,
            "ERROR" => Level::Error,
            "CRITICAL" | "FATAL" => Level::Critical,
            _ => return None,
        })
    }
}

/// A vLLM stamp as printed, with no year: `(month, day, h, m, s)`.
pub type Stamp = (u8, u8, u8, u8, u8);

/// One uvicorn access line (proxy or vLLM API server).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessLine {
    /// `ip:port` of the client as uvicorn printed it.
    pub client: String,
    pub method: String,
    /// Path with query string, as printed.
    pub path: String,
    pub status: u16,
}

/// Removes ANSI colour escapes (`ESC [ ... letter`). vLLM colours its prefix
/// on a TTY; a log captured through `script` or a pty would carry them.
/// Borrowed when there is nothing to strip, which is the common case.
pub(crate) fn strip_ansi(line: &str) -> Cow<'_, str> {
    if !line.contains('\x1b') {
        return Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.peek() == Some(&'[') {
                chars.next();
                // Parameters and intermediates, then one final byte in @..~.
                for c2 in chars.by_ref() {
                    if ('@'..='~').contains(&c2) {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    Cow::Owned(out)
}

/// Uvicorn's level prefix: `INFO:` padded with spaces. Requires the space so
/// Python's `INFO:root:msg` (basicConfig) is not mistaken for it.
pub(crate) fn split_uvicorn_level(s: &str) -> Option<(Level, &str)> {
    // Level words are ASCII, so a ':' within the first 10 bytes is a char boundary.
    let colon = s.bytes().take(10).position(|b| b == b':')?;
    let level = Level::from_word(&s[..colon])?;
    let after = &s[colon + 1..];
    if !after.starts_with(' ') {
        return None;
    }
    Some((level, after.trim_start_matches(' ')))
}

/// `127.0.0.1:36058 - "POST /v1/completions HTTP/1.1" 200 OK` (after the level prefix).
pub fn parse_access(s: &str) -> Option<AccessLine> {
    let (client, rest) = s.split_once(" - \"")?;
    let close = rest.rfind('"')?;
    let request = &rest[..close];
    let mut words = request.split(' ');
    let method = words.next().filter(|m| !m.is_empty())?;
    let path = words.next()?;
    let status = rest[close + 1..].trim_start();
    let end = status.bytes().position(|b| !b.is_ascii_digit()).unwrap_or(status.len());
    // A line cut mid-way leaves a partial status: only a whole one counts.
    let status = status[..end].parse().ok().filter(|s| (100..600).contains(s) && end == 3)?;
    Some(AccessLine {
        client: client.trim().to_string(),
        method: method.to_string(),
        path: path.to_string(),
        status,
    })
}

/// Keeps at most `MAX_TEXT` bytes, cut on a char boundary.
pub(crate) fn clip(s: &str) -> String {
    if s.len() <= MAX_TEXT {
        return s.to_string();
    }
    let mut end = MAX_TEXT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// Leading decimal digits of `s`, if any.
pub(crate) fn leading_u64(s: &str) -> Option<u64> {
    let end = s.bytes().position(|b| !b.is_ascii_digit()).unwrap_or(s.len());
    s[..end].parse().ok()
}

/// Port of `http://host:port[/...]`, `host:port` or `[::1]:port`.
pub(crate) fn url_port(url: &str) -> Option<u16> {
    let hostport = url.split("://").last()?.split('/').next()?;
    let (_, port) = hostport.rsplit_once(':')?;
    leading_u64(port).and_then(|p| u16::try_from(p).ok())
}
