//! What `--prometheus` and its flags say: where the server is, how to
//! authenticate, and which instances belong to which role.

use std::time::Duration;

use crate::feed::Role;

/// Environment variable holding a bearer token for the server.
pub const TOKEN_ENV: &str = "PDTOP_PROMETHEUS_TOKEN";
/// Environment variable holding the basic-auth password (`--prometheus-user`).
pub const PASSWORD_ENV: &str = "PDTOP_PROMETHEUS_PASSWORD";

pub use crate::sources::http::Auth;

#[derive(Debug, Clone)]
pub struct PromOptions {
    /// API base without a trailing slash and without credentials
    /// (`http://prom:9090`, `https://mimir.example/prometheus`).
    pub url: String,
    pub auth: Auth,
    /// Each role and the inside of its label matcher (`job="vllm-prefill"`).
    pub roles: Vec<(Role, String)>,
    /// Between refreshes (real time).
    pub interval: Duration,
    pub timeout: Duration,
    /// The speed of pdtop's clock against real time (a sped-up lab), to
    /// place the server's real timestamps on it.
    pub clock_speed: f64,
}

impl PromOptions {
    /// From the command line; `None` without `--prometheus`. Secrets come
    /// from the environment (argv is visible to every user of the host).
    pub fn from_inputs(
        inputs: &crate::cli::Inputs,
        interval: Duration,
        timeout: Duration,
    ) -> Result<Option<PromOptions>, String> {
        let Some(url) = &inputs.prometheus else {
            return Ok(None);
        };
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let (url, url_auth) = parse_url(url)?;
        let auth = match (&inputs.prometheus_user, env(TOKEN_ENV)) {
            (Some(user), _) => {
                Auth::Basic { user: user.clone(), password: env(PASSWORD_ENV).unwrap_or_default() }
            }
            (None, Some(token)) => Auth::Bearer(token),
            (None, None) => url_auth,
        };
        let mut roles = Vec::new();
        for (role, m) in [(Role::Prefill, &inputs.prefill_match), (Role::Decode, &inputs.decode_match)] {
            if let Some(m) = m {
                roles.push((role, matcher_inner(m)?));
            }
        }
        if roles.is_empty() {
            return Err("with --prometheus, give --prefill-match and/or --decode-match, e.g. \
                        --prefill-match '{job=\"vllm-prefill\"}'"
                .into());
        }
        let clock_speed = inputs.clock_speed.filter(|s| s.is_finite() && *s > 0.0).unwrap_or(1.0);
        Ok(Some(PromOptions { url, auth, roles, interval, timeout, clock_speed }))
    }
}

/// Splits credentials out of `http://user:pass@host:9090/prefix` (as the
/// HTTP client reads a URL's user: percent-decoded), so that the URL pdtop
/// keeps (and may print in an error) never holds them.
pub fn parse_url(s: &str) -> Result<(String, Auth), String> {
    let s = s.trim().trim_end_matches('/');
    if !s.starts_with("http://") && !s.starts_with("https://") {
        return Err("--prometheus: give an http:// or https:// URL".to_string());
    }
    let (url, user) = crate::sources::http::split_user(s);
    let host = url.split_once("://").map_or("", |(_, rest)| rest).split(['/', '?', '#']).next().unwrap_or("");
    if host.is_empty() {
        return Err("--prometheus: the URL has no host".into());
    }
    let auth = user.map_or(Auth::None, |(user, password)| Auth::Basic { user, password });
    Ok((url, auth))
}

/// The inside of a label matcher: `{job="x"}` and `job="x"` both give
/// `job="x"`, ready to be joined with pdtop's own matchers. The server
/// judges the syntax (and says what is wrong).
pub fn matcher_inner(s: &str) -> Result<String, String> {
    let t = s.trim();
    let inner = match t.strip_prefix('{') {
        Some(rest) => rest.strip_suffix('}').ok_or_else(|| format!("{s}: a matcher ends with }}"))?,
        None => t,
    }
    .trim()
    .trim_end_matches(',');
    if inner.is_empty() || !inner.contains('=') && !inner.contains('~') {
        return Err(format!("{s}: expected a label matcher such as {{job=\"vllm-prefill\"}}"));
    }
    Ok(inner.to_string())
}
