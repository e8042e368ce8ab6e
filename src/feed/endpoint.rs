//! What is watched: an instance's role, address and what it serves.

use serde::{Deserialize, Serialize};

/// Which side of the split an instance is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Prefill,
    Decode,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Prefill => "prefill",
            Role::Decode => "decode",
        }
    }
}

/// What `/v1/models` says about an instance.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelInfo {
    pub id: String,
    pub root: Option<String>,
    pub max_model_len: Option<u64>,
    /// `config.json` of `root`, when that is a local directory holding one
    /// (read by the collector: the state does no I/O). Recorded too, so a
    /// replay predicts the same KV size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_json: Option<String>,
}

/// One instance to watch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Endpoint {
    pub role: Role,
    /// As the user wrote it (`127.0.0.1:8100`), for display.
    pub display: String,
    /// Base URL without a trailing slash (`http://127.0.0.1:8100`).
    pub base_url: String,
}

impl Endpoint {
    /// Accepts `host:port` (as vLLM's demo proxy takes it) or a full URL.
    pub fn parse(role: Role, s: &str) -> Result<Endpoint, String> {
        let s = s.trim();
        if s.is_empty() {
            return Err("empty endpoint".into());
        }
        let base = if s.starts_with("http://") || s.starts_with("https://") {
            s.trim_end_matches('/').trim_end_matches("/metrics").to_string()
        } else if s.contains("://") {
            return Err(format!("{s}: only http:// and https:// are supported"));
        } else {
            if !s.contains(':') {
                return Err(format!("{s}: expected HOST:PORT or a URL"));
            }
            format!("http://{}", s.trim_end_matches('/'))
        };
        let display = base.trim_start_matches("http://").trim_start_matches("https://").to_string();
        check_authority(display.split('/').next().unwrap_or_default(), s.contains("://"))
            .map_err(|e| format!("{s}: {e}"))?;
        Ok(Endpoint { role, display, base_url: base })
    }
}

/// `host[:port]` of an endpoint: a host, and a port of 1 to 65535 (one
/// out of range used to become an instance that is always DOWN).
fn check_authority(auth: &str, url: bool) -> Result<(), String> {
    let auth = auth.rsplit_once('@').map_or(auth, |(_, a)| a);
    let (host, port) = match auth.strip_prefix('[') {
        Some(v6) => {
            let (host, rest) = v6.split_once(']').ok_or("unclosed [ in the host")?;
            (host, rest.strip_prefix(':'))
        }
        None => match auth.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (auth, None),
        },
    };
    if host.is_empty() {
        return Err("no host".into());
    }
    match port {
        Some(p) => match p.parse::<u16>() {
            Ok(1..) => Ok(()),
            _ => Err(format!("port {p:?} is not 1 to 65535")),
        },
        None if url => Ok(()),
        None => Err("expected HOST:PORT or a URL".into()),
    }
}

/// A vllm-router (`--vllm-pd-disaggregation`): its Prometheus exporter's
/// address (`--prometheus-port`, 29000 by default), not its serving port.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RouterEndpoint {
    pub display: String,
    pub base_url: String,
}

impl RouterEndpoint {
    /// Same forms as an instance: `host:port` or a URL (a `/metrics` tail is dropped).
    pub fn parse(s: &str) -> Result<RouterEndpoint, String> {
        let e = Endpoint::parse(Role::Prefill, s)?;
        Ok(RouterEndpoint { display: e.display, base_url: e.base_url })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_from_host_port_and_urls() {
        let e = Endpoint::parse(Role::Prefill, "127.0.0.1:8100").unwrap();
        assert_eq!(e.base_url, "http://127.0.0.1:8100");
        assert_eq!(e.display, "127.0.0.1:8100");
        let e = Endpoint::parse(Role::Decode, "https://gw.example/v/metrics").unwrap();
        assert_eq!(e.base_url, "https://gw.example/v");
        assert!(Endpoint::parse(Role::Decode, "localhost").is_err());
        assert!(Endpoint::parse(Role::Decode, "ftp://x:1").is_err());
        assert!(Endpoint::parse(Role::Decode, "[::1]:8200").is_ok());
        assert!(Endpoint::parse(Role::Decode, "http://[::1]/metrics").is_ok());
        for bad in ["127.0.0.1:99999", "127.0.0.1:0", ":8100", "h:", "h:x", "http://h:70000/", "[::1"] {
            assert!(Endpoint::parse(Role::Decode, bad).is_err(), "{bad}");
        }
    }
}
