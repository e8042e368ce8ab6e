//! Which tailed log a line came from.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The index is the order of the `--prefill` / `--decode` endpoints on the
/// command line. Written `prefill#0`, `decode#1`, `proxy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LogOrigin {
    Prefill(usize),
    Decode(usize),
    Proxy,
}

impl fmt::Display for LogOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LogOrigin::Prefill(i) => write!(f, "prefill#{i}"),
            LogOrigin::Decode(i) => write!(f, "decode#{i}"),
            LogOrigin::Proxy => f.write_str("proxy"),
        }
    }
}

impl std::str::FromStr for LogOrigin {
    type Err = String;

    fn from_str(s: &str) -> Result<LogOrigin, String> {
        let bad = || format!("unknown log origin {s:?} (expected prefill#N, decode#N or proxy)");
        if s == "proxy" {
            return Ok(LogOrigin::Proxy);
        }
        let (role, i) = s.split_once('#').ok_or_else(bad)?;
        let i = i.parse().map_err(|_| bad())?;
        match role {
            "prefill" => Ok(LogOrigin::Prefill(i)),
            "decode" => Ok(LogOrigin::Decode(i)),
            _ => Err(bad()),
        }
    }
}

impl Serialize for LogOrigin {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for LogOrigin {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<LogOrigin, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_round_trip_as_text() {
        for o in [LogOrigin::Prefill(0), LogOrigin::Decode(3), LogOrigin::Proxy] {
            assert_eq!(o.to_string().parse::<LogOrigin>(), Ok(o));
        }
        assert!("decode#x".parse::<LogOrigin>().is_err());
        assert!("router".parse::<LogOrigin>().is_err());
    }
}
