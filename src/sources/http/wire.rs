//! One HTTP/1.1 exchange on a connection: the request written, the
//! answer's head and body read (sized, chunked, or to the connection's end).

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::conn::Conn;

/// Longest answer head read (status line and headers).
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// What one exchange gave back (its body apart).
pub(super) struct Answer {
    pub status: u16,
    pub location: Option<String>,
    /// The connection may carry the next request.
    pub reusable: bool,
}

/// Writes `req` and reads its answer, its body into `body` (emptied
/// first) up to `max_body` bytes; `buf` holds bytes read past the last
/// answer and keeps those past this one.
pub(super) async fn exchange(
    conn: &mut Conn,
    buf: &mut Vec<u8>,
    req: &[u8],
    body: &mut Vec<u8>,
    max_body: usize,
) -> Result<Answer, Closed> {
    body.clear();
    // A TLS stream holds what is written until flushed.
    if let Err(e) = async {
        conn.write_all(req).await?;
        conn.flush().await
    }
    .await
    {
        return Err(Closed::BeforeAnswer.or_io(e));
    }
    // An interim answer (100 Continue, 103 Early Hints) is passed over.
    let (status, head) = loop {
        let head_end = read_head(conn, buf).await?;
        // A stray byte that is not UTF-8 in a header pdtop does not read
        // spoils nothing: the status line and the headers it reads are ASCII.
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        buf.drain(..head_end);
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
                v.parse::<u64>().map_err(|_| Closed::Other("request failed: bad Content-Length".into()))?,
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
    if status == 101 || status == 204 || status == 304 {
        // These have no body.
    } else if !wanted && chunked {
        // Go chunks an error's words past about 2 KB (Prometheus's API):
        // read up to 64 KiB of them, then the connection is not kept.
        close = true;
        if read_chunked(conn, buf, body, MAX_HEAD_BYTES).await.is_err() {
            body.clear();
        }
    } else if !wanted && length.is_none_or(|n| n > MAX_HEAD_BYTES as u64) {
        // An error's body is not read unless short and sized: the status
        // is the answer, and the connection is not kept.
        close = true;
    } else if chunked {
        read_chunked(conn, buf, body, max_body).await?;
    } else if let Some(n) = length {
        if n > max_body as u64 {
            return Err(Closed::Other(too_large(max_body)));
        }
        read_sized(conn, buf, body, n as usize).await?;
    } else {
        // No length: the body runs to the connection's end.
        close = true;
        body.append(buf);
        loop {
            if body.len() > max_body {
                return Err(Closed::Other(too_large(max_body)));
            }
            match read_more(conn, body).await {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => return Err(Closed::Other(format!("body cut short: {e}"))),
            }
        }
    }
    // A large chunked body grew the read-ahead: not kept for every scrape after.
    if buf.capacity() > 4 * 64 * 1024 {
        buf.shrink_to(64 * 1024);
    }
    Ok(Answer { status, location, reusable: !close && buf.is_empty() })
}

/// How an exchange failed: before any byte of the answer (a kept
/// connection the server had closed: worth one retry), or otherwise.
pub(super) enum Closed {
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

    pub(super) fn describe(self) -> String {
        match self {
            Closed::BeforeAnswer => "request failed: connection closed before an answer".into(),
            Closed::Other(s) => s,
        }
    }
}

fn too_large(max_body: usize) -> String {
    format!("body larger than {} MiB", max_body >> 20)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Reads until `buf` holds a whole answer head; its length.
async fn read_head(conn: &mut Conn, buf: &mut Vec<u8>) -> Result<usize, Closed> {
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
async fn read_sized(conn: &mut Conn, buf: &mut Vec<u8>, body: &mut Vec<u8>, n: usize) -> Result<(), Closed> {
    // Read into spare capacity: zeroing the body first was 6 of the 33
    // samples of a scrape's reading in a live `perf` profile.
    body.reserve_exact(n);
    let filled = buf.len().min(n);
    body.extend_from_slice(&buf[..filled]);
    buf.drain(..filled);
    while body.len() < n {
        let rest = (n - body.len()) as u64;
        match (&mut *conn).take(rest).read_buf(body).await {
            Ok(0) => return Err(Closed::Other("body cut short".into())),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Closed::Other(format!("body cut short: {e}"))),
        }
    }
    Ok(())
}

/// One read appended to `buf` (grown in 64 KiB steps).
async fn read_more(conn: &mut Conn, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    if buf.capacity() - buf.len() < 16 * 1024 {
        buf.reserve(64 * 1024);
    }
    conn.read_buf(buf).await
}

/// A chunked body, `buf` holding what was read past the head.
async fn read_chunked(
    conn: &mut Conn,
    buf: &mut Vec<u8>,
    body: &mut Vec<u8>,
    max_body: usize,
) -> Result<(), Closed> {
    let cut = |e: Option<std::io::Error>| {
        Closed::Other(e.map_or_else(|| "body cut short".into(), |e| format!("body cut short: {e}")))
    };
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
        if body.len().saturating_add(size) > max_body {
            return Err(Closed::Other(too_large(max_body)));
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
                    return Ok(());
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
