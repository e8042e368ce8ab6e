//! A keep-alive HTTP/1.1 GET for a scraper's `http://` endpoint: one
//! connection, written and read by hand. A scrape every second through
//! reqwest and hyper (URL parsing, a connection pool, header maps, tower
//! layers) was most of the collector thread's time; this does the same
//! exchange in a write and a few reads. `https://`, a user in the URL, or
//! anything else unusual goes through reqwest ([`super::scrape::fetch`]).
//!
//! Errors read as reqwest's do through [`super::scrape::describe`]:
//! "cannot connect: …", "timed out", "body cut short", "request failed: …",
//! "HTTP 404 Not Found", "body larger than 16 MiB".

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A body larger than this is refused (a vLLM scrape is about 50 KB).
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// How an error for a server that answered with a status that is not 2xx
/// begins.
pub(crate) const STATUS_ERROR: &str = "HTTP ";

/// Longest response head read (status line and headers).
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Redirects followed on the same server (vLLM sends `/metrics` to `/metrics/`).
const MAX_REDIRECTS: usize = 5;

/// GETs on one `http://host:port`, over one connection kept open between them.
#[derive(Debug)]
pub struct PlainGet {
    /// `host:port`, as connected to and sent in `Host`.
    authority: String,
    /// The base URL's path (`""`, or `/prefix`).
    prefix: String,
    conn: Option<TcpStream>,
    /// Bytes read past the end of the last response (none from a
    /// well-behaved server; kept so a stray byte is never taken as the
    /// next answer's start).
    buf: Vec<u8>,
}

/// What one exchange gave back.
struct Answer {
    status: u16,
    body: Vec<u8>,
    location: Option<String>,
    /// The connection may carry the next request.
    reusable: bool,
}

impl PlainGet {
    /// For a base URL (`http://127.0.0.1:8100`, `http://host:8000/prefix`)
    /// this client can serve; `None` for any other (reqwest's then).
    pub fn for_base(base_url: &str) -> Option<PlainGet> {
        let rest = base_url.strip_prefix("http://")?;
        let (authority, prefix) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let plain = |s: &str| s.bytes().all(|b| b.is_ascii_alphanumeric() || b".-:[]/_~%".contains(&b));
        if authority.is_empty() || !plain(authority) || !plain(prefix) || authority.contains('/') {
            return None;
        }
        // A bare IPv6 literal or a host without a port gets the default one.
        let has_port = authority.rsplit_once(':').is_some_and(|(h, p)| {
            !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) && (!h.contains(':') || h.ends_with(']'))
        });
        let authority = if has_port { authority.to_string() } else { format!("{authority}:80") };
        Some(PlainGet { authority, prefix: prefix.to_string(), conn: None, buf: Vec::new() })
    }

    /// GETs `path` (`/metrics`) under the base URL, all of it within
    /// `timeout`: the body of a 2xx answer as text, or why not.
    pub async fn get(
        &mut self,
        path: &str,
        timeout: std::time::Duration,
        token: Option<&str>,
    ) -> Result<String, String> {
        let got = tokio::time::timeout(timeout, self.follow(path, token)).await;
        // An answer that is an error (a 401 from `/v1/models` on a server
        // with an API key) keeps the connection; a failed exchange does not.
        let got = got.unwrap_or_else(|_| Err(Failed::Transport("timed out".into())));
        let body = got.map_err(|e| match e {
            Failed::Status(s) => s,
            Failed::Transport(s) => {
                self.conn = None;
                s
            }
        })?;
        String::from_utf8(body).map_err(|_| "body is not UTF-8 text".to_string())
    }

    async fn follow(&mut self, path: &str, token: Option<&str>) -> Result<Vec<u8>, Failed> {
        let mut target = format!("{}{path}", self.prefix);
        for _ in 0..=MAX_REDIRECTS {
            let a = self.exchange(&target, token).await.map_err(Failed::Transport)?;
            if !a.reusable {
                self.conn = None;
            }
            match a.status {
                200..=299 => return Ok(a.body),
                301 | 302 | 303 | 307 | 308 => {
                    let loc = a.location.ok_or_else(|| {
                        Failed::Status(format!("{STATUS_ERROR}{} without a Location", a.status))
                    })?;
                    target = self
                        .same_server(&loc)
                        .ok_or_else(|| Failed::Status(format!("redirected to another server: {loc}")))?;
                }
                s => {
                    let reason = reqwest::StatusCode::from_u16(s).ok().and_then(|c| c.canonical_reason());
                    return Err(Failed::Status(format!(
                        "{STATUS_ERROR}{s}{}",
                        reason.map(|r| format!(" {r}")).unwrap_or_default()
                    )));
                }
            }
        }
        Err(Failed::Status("request failed: too many redirects".into()))
    }

    /// The path a `Location` names on this server, or `None` for another one.
    fn same_server(&self, loc: &str) -> Option<String> {
        // It goes into the request line as it is.
        if loc.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return None;
        }
        if loc.starts_with('/') && !loc.starts_with("//") {
            return Some(loc.to_string());
        }
        let rest = loc.strip_prefix("http://")?;
        let (auth, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let auth =
            if auth.contains(':') && !auth.ends_with(']') { auth.to_string() } else { format!("{auth}:80") };
        (auth == self.authority).then(|| if path.is_empty() { "/".to_string() } else { path.to_string() })
    }

    /// One request and its answer. A kept connection the server closed
    /// while idle is opened again once.
    async fn exchange(&mut self, target: &str, token: Option<&str>) -> Result<Answer, String> {
        let mut req = format!(
            "GET {target} HTTP/1.1\r\nHost: {}\r\nUser-Agent: pdtop/{}\r\nAccept: */*\r\n",
            self.authority,
            env!("CARGO_PKG_VERSION")
        );
        if let Some(t) = token {
            req.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        req.push_str("\r\n");
        let reused = self.conn.is_some();
        match self.send_and_read(req.as_bytes()).await {
            Err(Closed::BeforeAnswer) if reused => {
                self.conn = None;
                self.send_and_read(req.as_bytes()).await.map_err(Closed::describe)
            }
            r => r.map_err(Closed::describe),
        }
    }

    async fn send_and_read(&mut self, req: &[u8]) -> Result<Answer, Closed> {
        if self.conn.is_none() {
            let s = TcpStream::connect(&self.authority)
                .await
                .map_err(|e| Closed::Other(format!("cannot connect: {e}")))?;
            let _ = s.set_nodelay(true);
            self.conn = Some(s);
            self.buf.clear();
        }
        let conn = self.conn.as_mut().expect("connected above");
        if let Err(e) = conn.write_all(req).await {
            self.conn = None;
            return Err(Closed::BeforeAnswer.or_io(e));
        }
        // An interim answer (100 Continue, 103 Early Hints) is passed over.
        let (status, head) = loop {
            let head_end = read_head(conn, &mut self.buf).await?;
            let head = std::str::from_utf8(&self.buf[..head_end])
                .map_err(|_| Closed::Other("request failed: not an HTTP answer".into()))?
                .to_string();
            self.buf.drain(..head_end);
            let status = head
                .split("\r\n")
                .next()
                .and_then(|l| l.strip_prefix("HTTP/1."))
                .filter(|l| l.len() == 5 || l.as_bytes().get(5) == Some(&b' '))
                .and_then(|l| l.get(2..5).filter(|_| l.as_bytes().get(1) == Some(&b' ')))
                .and_then(|c| c.parse::<u16>().ok())
                .filter(|c| *c >= 100)
                .ok_or_else(|| Closed::Other("request failed: not an HTTP answer".into()))?;
            if !(100..200).contains(&status) || status == 101 {
                break (status, head);
            }
        };
        let (mut length, mut chunked, mut close, mut location) =
            (None, false, head.starts_with("HTTP/1.0"), None);
        for l in head.split("\r\n").skip(1) {
            let Some((k, v)) = l.split_once(':') else { continue };
            let v = v.trim();
            if k.eq_ignore_ascii_case("content-length") {
                length = Some(
                    v.parse::<u64>()
                        .map_err(|_| Closed::Other("request failed: bad Content-Length".into()))?,
                );
            } else if k.eq_ignore_ascii_case("transfer-encoding") {
                chunked = v.to_ascii_lowercase().ends_with("chunked");
            } else if k.eq_ignore_ascii_case("connection") {
                close |= v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close"));
            } else if k.eq_ignore_ascii_case("location") {
                location = Some(v.to_string());
            }
        }
        // Both framings at once: read as chunked, as the RFC says, and not
        // trusted after; a switched protocol is no HTTP to go on with.
        close |= (chunked && length.is_some()) || status == 101;
        let wanted = (200..400).contains(&status);
        let body = if status == 101 || status == 204 || status == 304 {
            Vec::new()
        } else if !wanted && length.is_none_or(|n| n > MAX_HEAD_BYTES as u64) {
            // An error's body is not read unless short and sized: the status
            // is the answer, and the connection is not kept.
            close = true;
            Vec::new()
        } else if chunked {
            read_chunked(conn, &mut self.buf).await?
        } else if let Some(n) = length {
            if n > MAX_BODY_BYTES as u64 {
                return Err(Closed::Other(too_large()));
            }
            read_sized(conn, &mut self.buf, n as usize).await?
        } else {
            // No length: the body runs to the connection's end.
            close = true;
            let mut body = std::mem::take(&mut self.buf);
            loop {
                if body.len() > MAX_BODY_BYTES {
                    return Err(Closed::Other(too_large()));
                }
                match read_more(conn, &mut body).await {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) => return Err(Closed::Other(format!("body cut short: {e}"))),
                }
            }
            body
        };
        // A large chunked body grew the read-ahead: not kept for every scrape after.
        if self.buf.capacity() > 4 * 64 * 1024 {
            self.buf.shrink_to(64 * 1024);
        }
        Ok(Answer { status, body, location, reusable: !close && self.buf.is_empty() })
    }
}

/// Why a GET gave no body: the server's answer (the connection may go
/// on), or the exchange itself (the connection is dropped).
enum Failed {
    Status(String),
    Transport(String),
}

/// How an exchange failed: before any byte of the answer (a kept
/// connection the server had closed: worth one retry), or otherwise.
enum Closed {
    BeforeAnswer,
    Other(String),
}

impl Closed {
    fn or_io(self, e: std::io::Error) -> Closed {
        match e.kind() {
            std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::BrokenPipe
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::UnexpectedEof => self,
            _ => Closed::Other(format!("request failed: {e}")),
        }
    }

    fn describe(self) -> String {
        match self {
            Closed::BeforeAnswer => "request failed: connection closed before an answer".into(),
            Closed::Other(s) => s,
        }
    }
}

fn too_large() -> String {
    format!("body larger than {} MiB", MAX_BODY_BYTES >> 20)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Reads until `buf` holds a whole answer head; its length.
async fn read_head(conn: &mut TcpStream, buf: &mut Vec<u8>) -> Result<usize, Closed> {
    let mut from = 0;
    loop {
        if let Some(i) = find(&buf[from..], b"\r\n\r\n") {
            return Ok(from + i + 4);
        }
        if buf.len() > MAX_HEAD_BYTES {
            return Err(Closed::Other("request failed: response head too large".into()));
        }
        let before = buf.len();
        from = before.saturating_sub(3);
        match read_more(conn, buf).await {
            Ok(0) if before == 0 => return Err(Closed::BeforeAnswer),
            Ok(0) => {
                return Err(Closed::Other("request failed: connection closed in the answer's head".into()));
            }
            Ok(_) => {}
            Err(e) if before == 0 => return Err(Closed::BeforeAnswer.or_io(e)),
            Err(e) => return Err(Closed::Other(format!("request failed: {e}"))),
        }
    }
}

/// A body of `n` bytes, the first of them already in `buf`, read into
/// one allocation of its size.
async fn read_sized(conn: &mut TcpStream, buf: &mut Vec<u8>, n: usize) -> Result<Vec<u8>, Closed> {
    // Read into spare capacity: zeroing the body first was 6 of the 33
    // samples of a scrape's reading in a live `perf` profile.
    let mut body = Vec::with_capacity(n);
    let filled = buf.len().min(n);
    body.extend_from_slice(&buf[..filled]);
    buf.drain(..filled);
    while body.len() < n {
        let rest = (n - body.len()) as u64;
        match (&mut *conn).take(rest).read_buf(&mut body).await {
            Ok(0) => return Err(Closed::Other("body cut short".into())),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Closed::Other(format!("body cut short: {e}"))),
        }
    }
    Ok(body)
}

/// One read appended to `buf` (grown in 64 KiB steps).
async fn read_more(conn: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    if buf.capacity() - buf.len() < 16 * 1024 {
        buf.reserve(64 * 1024);
    }
    conn.read_buf(buf).await
}

/// A chunked body, `buf` holding what was read past the head.
async fn read_chunked(conn: &mut TcpStream, buf: &mut Vec<u8>) -> Result<Vec<u8>, Closed> {
    let cut = |e: Option<std::io::Error>| {
        Closed::Other(e.map_or_else(|| "body cut short".into(), |e| format!("body cut short: {e}")))
    };
    let mut body = Vec::new();
    let mut at = 0;
    loop {
        // The size line.
        let line_end = loop {
            if let Some(i) = find(&buf[at..], b"\r\n") {
                break at + i;
            }
            if buf.len() - at > 1024 {
                return Err(Closed::Other("request failed: bad chunk size".into()));
            }
            match read_more(conn, buf).await {
                Ok(0) => return Err(cut(None)),
                Ok(_) => {}
                Err(e) => return Err(cut(Some(e))),
            }
        };
        let size_text = std::str::from_utf8(&buf[at..line_end]).unwrap_or("");
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| Closed::Other("request failed: bad chunk size".into()))?;
        at = line_end + 2;
        if body.len().saturating_add(size) > MAX_BODY_BYTES {
            return Err(Closed::Other(too_large()));
        }
        if size == 0 {
            // Trailer lines, if any, to the empty line that ends the body.
            loop {
                let end = loop {
                    if let Some(i) = find(&buf[at..], b"\r\n") {
                        break at + i;
                    }
                    if buf.len() - at > MAX_HEAD_BYTES {
                        return Err(Closed::Other("request failed: trailers too large".into()));
                    }
                    match read_more(conn, buf).await {
                        Ok(0) => return Err(cut(None)),
                        Ok(_) => {}
                        Err(e) => return Err(cut(Some(e))),
                    }
                };
                let empty = end == at;
                at = end + 2;
                if empty {
                    buf.drain(..at);
                    return Ok(body);
                }
            }
        }
        // The chunk and the CRLF that closes it.
        let want = size + 2;
        while buf.len() - at < want {
            match read_more(conn, buf).await {
                Ok(0) => return Err(cut(None)),
                Ok(_) => {}
                Err(e) => return Err(cut(Some(e))),
            }
        }
        if &buf[at + size..at + want] != b"\r\n" {
            return Err(Closed::Other("request failed: bad chunk".into()));
        }
        body.extend_from_slice(&buf[at..at + size]);
        at += want;
        // Keep the buffer from holding the whole body twice.
        if at > 256 * 1024 {
            buf.drain(..at);
            at = 0;
        }
    }
}

#[cfg(test)]
mod tests;
