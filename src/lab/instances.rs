//! The instances of a capture folder: one prefill and one decode in the
//! first captures, several of each in later ones. The scrapes name each
//! instance (`prefill`, `prefill2`, `decode`, `decode2`) and each has its
//! own `vllm-<name>.log`; a log whose name is not a scraped instance but
//! extends one (`vllm-decode2.log` where only `decode` was scraped) is that
//! instance after a restart.

use crate::feed::{LogOrigin, Role};

/// One recorded vLLM instance.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    /// As the scrapes name it (`prefill2`).
    pub name: String,
    pub role: Role,
    /// `127.0.0.1:<port>`: from its `<name>.cmd` (`--port N`), else the
    /// lab's ports (8100 + k for the k-th prefill, 8200 + k for decode).
    pub addr: String,
    /// Its log's source in the replay: `Prefill(k)` / `Decode(k)`.
    pub source: LogOrigin,
    /// The log file a replay names (`prefill.log`, `decode2.log`).
    pub file_name: String,
}

/// The role an instance name says (`prefill2` is a prefill).
pub fn role_of(name: &str) -> Option<Role> {
    if name.starts_with("prefill") {
        Some(Role::Prefill)
    } else if name.starts_with("decode") {
        Some(Role::Decode)
    } else {
        None
    }
}

/// The instances the scrapes name, prefills first, each role in name
/// order (`prefill` before `prefill2`), with their addresses.
pub fn instances(names: &[String], port_of: &dyn Fn(&str) -> Option<u16>) -> Vec<Instance> {
    let mut out = Vec::new();
    for (role, base) in [(Role::Prefill, 8100u16), (Role::Decode, 8200u16)] {
        let mut mine: Vec<&String> = names.iter().filter(|n| role_of(n) == Some(role)).collect();
        mine.sort_by_key(|n| (n.len(), n.as_str().to_owned()));
        mine.dedup();
        for (k, name) in mine.into_iter().enumerate() {
            let port = port_of(name).unwrap_or(base + k as u16);
            let source = match role {
                Role::Prefill => LogOrigin::Prefill(k),
                Role::Decode => LogOrigin::Decode(k),
            };
            out.push(Instance {
                name: name.clone(),
                role,
                addr: format!("127.0.0.1:{port}"),
                source,
                file_name: format!("{name}.log"),
            });
        }
    }
    out
}

/// The instance a `vllm-<name>.log` belongs to: the one of that name, else
/// the one its name extends (a restart's log), else none.
pub fn owner<'a>(instances: &'a [Instance], log_name: &str) -> Option<&'a Instance> {
    instances.iter().find(|i| i.name == log_name).or_else(|| {
        instances
            .iter()
            .filter(|i| {
                log_name
                    .strip_prefix(i.name.as_str())
                    .is_some_and(|rest| rest.bytes().all(|b| b.is_ascii_digit()))
            })
            .max_by_key(|i| i.name.len())
    })
}

/// `--port N` of a command line.
pub fn port_in_cmd(cmd: &str) -> Option<u16> {
    let mut words = cmd.split_whitespace();
    while let Some(w) = words.next() {
        if w == "--port" {
            return words.next()?.parse().ok();
        }
        if let Some(p) = w.strip_prefix("--port=") {
            return p.parse().ok();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_ports_and_owners() {
        let names: Vec<String> = ["decode2", "prefill", "decode", "prefill2"].map(String::from).to_vec();
        let port = |n: &str| (n == "prefill2").then_some(8111);
        let got = instances(&names, &port);
        let seen: Vec<(&str, &str, LogOrigin)> =
            got.iter().map(|i| (i.name.as_str(), i.addr.as_str(), i.source)).collect();
        assert_eq!(
            seen,
            vec![
                ("prefill", "127.0.0.1:8100", LogOrigin::Prefill(0)),
                ("prefill2", "127.0.0.1:8111", LogOrigin::Prefill(1)),
                ("decode", "127.0.0.1:8200", LogOrigin::Decode(0)),
                ("decode2", "127.0.0.1:8201", LogOrigin::Decode(1)),
            ]
        );
        assert_eq!(owner(&got, "decode2").map(|i| i.source), Some(LogOrigin::Decode(1)));
        let pair = instances(&["prefill".into(), "decode".into()], &|_| None);
        // The old layout: `vllm-decode2.log` is decode after its restart.
        assert_eq!(owner(&pair, "decode2").map(|i| i.source), Some(LogOrigin::Decode(0)));
        assert_eq!(owner(&pair, "decoder").map(|i| i.source), None);
        assert_eq!(port_in_cmd("vllm serve m --port 8101 --x"), Some(8101));
        assert_eq!(port_in_cmd("vllm serve m --port=8102"), Some(8102));
    }
}
