//! pdtop's HTTP/1.1 client: GETs and POSTs on one server, `http://` or
//! `https://` (rustls), over one connection kept open between them and
//! written and read by hand ([`wire`]).
//!
//! Why not reqwest: a scrape every second through reqwest and hyper (URL
//! parsing, a connection pool, header maps, tower layers) was most of the
//! collector thread's time, and reqwest with url and its ICU crates was a
//! quarter of a first `cargo build --release`. pdtop asks a handful of
//! known servers for small bodies; this does that exchange in a write and
//! a few reads.
//!
//! Errors read: "cannot connect: …", "timed out", "body cut short",
//! "request failed: …", "HTTP 404 Not Found", "body larger than 16 MiB".

mod conn;
mod wire;

use std::sync::Arc;
use std::time::Duration;

use conn::Conn;
pub use conn::tls_config;
use wire::Closed;

/// A body larger than this is refused (a vLLM scrape is about 50 KB).
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// How an error for a server that answered with a status that is not 2xx
/// begins.
pub(crate) const STATUS_ERROR: &str = "HTTP ";
/// Redirects followed (vLLM sends `/metrics` to `/metrics/`).
const MAX_REDIRECTS: usize = 5;

/// How pdtop authenticates to a server.
#[derive(Debug, Clone, PartialEq)]
pub enum Auth {
    None,
    Basic { user: String, password: String },
    Bearer(String),
}

/// A request under the client's base URL.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// `/metrics`, `/api/v1/query`: put after the base URL's path.
    pub path: &'a str,
    /// A POST's content type and body; `None` is a GET.
    pub form: Option<(&'a str, &'a [u8])>,
}

impl<'a> Request<'a> {
    pub fn get(path: &'a str) -> Request<'a> {
        Request { path, form: None }
    }
}

/// Where a client connects.
#[derive(Debug, Clone, PartialEq)]
struct Server {
    tls: bool,
    /// Without brackets (`::1`), as connected to and named to TLS.
    host: String,
    port: u16,
    /// As sent in `Host`: the URL's host, and its port when not the default.
    authority: String,
}

/// Requests on one server, over one connection kept between them.
pub struct HttpClient {
    server: Server,
    /// The base URL's path (`""`, or `/prefix`).
    prefix: String,
    /// The `Authorization` header's value, if any. Never printed.
    authorization: Option<String>,
    /// For `https://`; `None`: the webpki roots, built on first use.
    tls: Option<Arc<rustls::ClientConfig>>,
    /// The longest body taken.
    max_body: usize,
    conn: Option<Conn>,
    /// Bytes read past the end of the last answer (none from a
    /// well-behaved server; kept so a stray byte is never taken as the
    /// next answer's start).
    buf: Vec<u8>,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The credentials stay out of any debug print.
        f.debug_struct("HttpClient").field("server", &self.server).field("prefix", &self.prefix).finish()
    }
}

impl HttpClient {
    /// For a base URL (`http://127.0.0.1:8100`, `https://gw.example/v`). A
    /// user in the URL (`http://user:pw@host`) is basic auth unless `auth`
    /// says otherwise.
    pub fn new(base_url: &str, auth: Auth) -> Result<HttpClient, String> {
        let (server, userinfo, path) = parse_url(base_url)?;
        let prefix = path.trim_end_matches('/').to_string();
        let auth = match (auth, userinfo) {
            (Auth::None, Some((user, password))) => Auth::Basic { user, password },
            (auth, _) => auth,
        };
        let authorization = match auth {
            Auth::None => None,
            Auth::Bearer(t) => Some(format!("Bearer {t}")),
            Auth::Basic { user, password } => {
                Some(format!("Basic {}", base64(format!("{user}:{password}").as_bytes())))
            }
        };
        Ok(HttpClient {
            server,
            prefix,
            authorization,
            tls: None,
            max_body: MAX_BODY_BYTES,
            conn: None,
            buf: Vec::new(),
        })
    }

    /// Trusts these TLS settings instead of the webpki roots (a lab's own CA).
    pub fn with_tls(mut self, config: Arc<rustls::ClientConfig>) -> HttpClient {
        self.tls = Some(config);
        self
    }

    /// Takes bodies up to `bytes` long (16 MiB unless told).
    pub fn with_max_body(mut self, bytes: usize) -> HttpClient {
        self.max_body = bytes;
        self
    }

    /// GETs `path` under the base URL within `timeout`: the body of a 2xx
    /// answer as text, or why not.
    pub async fn get(&mut self, path: &str, timeout: Duration) -> Result<String, String> {
        let mut body = Vec::new();
        let status = self.send(Request::get(path), timeout, &mut body).await?;
        if !(200..300).contains(&status) {
            return Err(status_error(status));
        }
        String::from_utf8(body).map_err(|_| "body is not UTF-8 text".to_string())
    }

    /// One request, redirects followed, all of it within `timeout`: the
    /// last answer's status whatever it is, its body in `body`, or why
    /// there was no answer. The body of an answer that is not 2xx or 3xx
    /// is read only when it is short and sized (empty otherwise).
    pub async fn send(
        &mut self,
        req: Request<'_>,
        timeout: Duration,
        body: &mut Vec<u8>,
    ) -> Result<u16, String> {
        match tokio::time::timeout(timeout, self.follow(req, body)).await {
            Ok(got) => got,
            Err(_) => {
                // Half an answer may still be on its way.
                self.conn = None;
                Err("timed out".into())
            }
        }
    }

    async fn follow(&mut self, req: Request<'_>, body: &mut Vec<u8>) -> Result<u16, String> {
        let mut target = format!("{}{}", self.prefix, req.path);
        let mut form = req.form;
        // Another server a redirect sent the request to: asked once, without
        // this one's credentials.
        let mut away: Option<HttpClient> = None;
        for _ in 0..=MAX_REDIRECTS {
            let client = match away.as_mut() {
                Some(c) => c,
                None => &mut *self,
            };
            let (status, location) = client.exchange(&target, form, body).await?;
            if !matches!(status, 301 | 302 | 303 | 307 | 308) {
                return Ok(status);
            }
            let Some(loc) = location else {
                return Err(format!("{STATUS_ERROR}{status} without a Location"));
            };
            // As browsers do: a 303, or a 301/302 to a POST, is asked again by GET.
            if status == 303 || (form.is_some() && status <= 302) {
                form = None;
            }
            match client.resolve(&target, &loc)? {
                (None, path) => target = path,
                (Some(server), path) => {
                    away = Some(HttpClient {
                        server,
                        prefix: String::new(),
                        authorization: None,
                        tls: self.tls.clone(),
                        max_body: self.max_body,
                        conn: None,
                        buf: Vec::new(),
                    });
                    target = path;
                }
            }
        }
        Err("request failed: too many redirects".into())
    }

    /// Where a `Location` sends the request: a path on this server (`None`)
    /// or another server and the path there.
    fn resolve(&self, target: &str, loc: &str) -> Result<(Option<Server>, String), String> {
        // It goes into the request line as it is.
        if loc.is_empty() || loc.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(format!("request failed: bad Location {loc:?}"));
        }
        if loc.starts_with("//") {
            let scheme = if self.server.tls { "https:" } else { "http:" };
            return self.resolve(target, &format!("{scheme}{loc}"));
        }
        if loc.starts_with('/') {
            return Ok((None, loc.to_string()));
        }
        if loc.starts_with("http://") || loc.starts_with("https://") {
            let (server, _, path) =
                parse_url(loc).map_err(|e| format!("request failed: redirected to {e}"))?;
            let path = if path.is_empty() { "/".to_string() } else { path };
            let same = server.tls == self.server.tls
                && server.host.eq_ignore_ascii_case(&self.server.host)
                && server.port == self.server.port;
            return Ok((if same { None } else { Some(server) }, path));
        }
        // Relative to the target's folder.
        let folder = &target[..target.rfind('/').map_or(0, |i| i + 1)];
        Ok((None, format!("{}{loc}", if folder.is_empty() { "/" } else { folder })))
    }

    /// One request and its answer. A kept connection the server closed
    /// while idle is opened again once.
    async fn exchange(
        &mut self,
        target: &str,
        form: Option<(&str, &[u8])>,
        body: &mut Vec<u8>,
    ) -> Result<(u16, Option<String>), String> {
        let mut req = format!(
            "{} {target} HTTP/1.1\r\nHost: {}\r\nUser-Agent: pdtop/{}\r\nAccept: */*\r\n",
            if form.is_some() { "POST" } else { "GET" },
            self.server.authority,
            env!("CARGO_PKG_VERSION")
        );
        if let Some(a) = &self.authorization {
            req.push_str(&format!("Authorization: {a}\r\n"));
        }
        if let Some((content_type, body)) = form {
            req.push_str(&format!("Content-Type: {content_type}\r\nContent-Length: {}\r\n", body.len()));
        }
        req.push_str("\r\n");
        let mut bytes = req.into_bytes();
        if let Some((_, body)) = form {
            bytes.extend_from_slice(body);
        }
        let reused = self.conn.is_some();
        let got = match self.send_and_read(&bytes, body).await {
            Err(Closed::BeforeAnswer) if reused => {
                self.conn = None;
                self.send_and_read(&bytes, body).await
            }
            r => r,
        };
        match got {
            Ok(a) => {
                if !a.reusable {
                    self.conn = None;
                }
                Ok((a.status, a.location))
            }
            Err(e) => {
                self.conn = None;
                Err(e.describe())
            }
        }
    }

    async fn send_and_read(&mut self, req: &[u8], body: &mut Vec<u8>) -> Result<wire::Answer, Closed> {
        if self.conn.is_none() {
            let tls = match (self.server.tls, &self.tls) {
                (false, _) => None,
                (true, Some(c)) => Some(c.clone()),
                (true, None) => {
                    Some(conn::default_tls().map_err(|e| Closed::Other(format!("cannot connect: {e}")))?)
                }
            };
            let c = Conn::open(&self.server.host, self.server.port, tls)
                .await
                .map_err(|e| Closed::Other(format!("cannot connect: {e}")))?;
            self.conn = Some(c);
            self.buf.clear();
        }
        let conn = self.conn.as_mut().ok_or(Closed::BeforeAnswer)?;
        wire::exchange(conn, &mut self.buf, req, body, self.max_body).await
    }
}

/// "HTTP 404 Not Found": a status as an error.
pub fn status_error(status: u16) -> String {
    let reason = http::StatusCode::from_u16(status).ok().and_then(|c| c.canonical_reason());
    format!("{STATUS_ERROR}{status}{}", reason.map(|r| format!(" {r}")).unwrap_or_default())
}

/// A URL's server, user and password, and path (with its query).
#[allow(clippy::type_complexity)]
fn parse_url(given: &str) -> Result<(Server, Option<(String, String)>, String), String> {
    // Errors name the URL without its credentials.
    let (shown, userinfo) = split_user(given);
    let url = &shown;
    let (tls, rest) = match shown.split_once("://") {
        Some(("http", rest)) => (false, rest),
        Some(("https", rest)) => (true, rest),
        _ => return Err(format!("{url}: not an http:// or https:// URL")),
    };
    let (authority, path) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
    let path = path.split('#').next().unwrap_or_default();
    if path.bytes().any(|b| b <= b' ' || b >= 0x7f) {
        return Err(format!("{url}: the path must be printable ASCII (percent-encode the rest)"));
    }
    let hostport = authority;
    let (host, port) = match hostport.strip_prefix('[') {
        Some(v6) => {
            let (h, rest) = v6.split_once(']').ok_or_else(|| format!("{url}: unclosed [ in the host"))?;
            (h, rest.strip_prefix(':'))
        }
        None => match hostport.rsplit_once(':') {
            // An IPv6 address goes in brackets.
            Some((h, _)) if h.contains(':') => return Err(format!("{url}: put an IPv6 host in [ ]")),
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        },
    };
    if host.is_empty() || !host.bytes().all(|b| b.is_ascii_alphanumeric() || b".-_:%".contains(&b)) {
        return Err(format!("{url}: no host, or a host that is not ASCII letters, digits, '.', '-'"));
    }
    let port = match port {
        None | Some("") => {
            if tls {
                443
            } else {
                80
            }
        }
        Some(p) => {
            p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| format!("{url}: bad port {p:?}"))?
        }
    };
    let server =
        Server { tls, host: host.to_string(), port, authority: hostport.trim_end_matches(':').to_string() };
    Ok((server, userinfo, path.to_string()))
}

/// A URL without its credentials (as it may be printed), and the user and
/// password it held, percent-decoded: `http://u:p%40ss@host/x` →
/// (`http://host/x`, `("u", "p@ss")`).
pub fn split_user(url: &str) -> (String, Option<(String, String)>) {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let Some(at) = rest[..end].rfind('@') else { return (url.to_string(), None) };
    let (user, password) = rest[..at].split_once(':').unwrap_or((&rest[..at], ""));
    let sep = if scheme.is_empty() { "" } else { "://" };
    (format!("{scheme}{sep}{}", &rest[at + 1..]), Some((percent_decode(user), percent_decode(password))))
}

/// `%40` → `@` in a URL's user and password.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (b[i], b.get(i + 1).copied().and_then(hex), b.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Standard base64 with padding (basic auth's credentials).
fn base64(input: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
