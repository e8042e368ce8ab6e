//! LISTEN sockets from `net/tcp` and `net/tcp6` (kernel doc "The
//! proc/net/tcp and proc/net/tcp6 variables"). Each address is hex of
//! 32-bit words as the kernel holds them in memory: network-order bytes
//! printed as a host-order integer, so on the little-endian hosts vLLM runs
//! on (x86-64, aarch64) `0100007F` is 127.0.0.1. Parsed as little-endian
//! whatever the reading machine, so a captured file reads the same anywhere.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

use serde::Serialize;

use super::root::{ProcRoot, Unreadable, read_text};

/// A socket in state LISTEN (`st` = `0A`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Listener {
    pub addr: SocketAddr,
    pub inode: u64,
}

const LISTEN: &str = "0A";

fn word(hex: &str) -> Option<[u8; 4]> {
    Some(u32::from_str_radix(hex, 16).ok()?.to_le_bytes())
}

fn addr(field: &str) -> Option<SocketAddr> {
    let (ip, port) = field.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    match ip.len() {
        8 => Some(SocketAddr::from((Ipv4Addr::from(word(ip)?), port))),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                b[i * 4..i * 4 + 4].copy_from_slice(&word(&ip[i * 8..i * 8 + 8])?);
            }
            Some(SocketAddr::from((Ipv6Addr::from(b), port)))
        }
        _ => None,
    }
}

/// The LISTEN rows of one `tcp`/`tcp6` file; a row that does not parse is
/// skipped (the header, a truncated capture).
pub fn parse_listeners(text: &str) -> Vec<Listener> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 10 || f[3] != LISTEN {
                return None;
            }
            Some(Listener { addr: addr(f[1])?, inode: f[9].parse().ok()? })
        })
        .collect()
}

/// Every listener of the namespace `root` looks at: this host's own from
/// the kernel's socket diagnostics (`sock_diag`), which list listeners
/// without walking every connection, else from `net/tcp*`.
pub fn read_listeners(root: &ProcRoot) -> Result<Vec<Listener>, Unreadable> {
    #[cfg(target_os = "linux")]
    if root.is_live()
        && let Ok(l) = super::sock_diag::listeners()
    {
        return Ok(l.into_iter().map(|(addr, inode)| Listener { addr, inode }).collect());
    }
    read_files(root)
}

/// The listeners of `net/tcp` and `net/tcp6`. A missing `tcp6` (a kernel
/// without IPv6) is no error; a missing `tcp` is.
fn read_files(root: &ProcRoot) -> Result<Vec<Listener>, Unreadable> {
    let net = root.net();
    let mut out = parse_listeners(&read_text(&net.join("tcp"), None)?);
    if let Ok(t6) = read_text(&net.join("tcp6"), None) {
        out.extend(parse_listeners(&t6));
    }
    out.sort();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Rows of this host's real /proc/net/tcp and tcp6 while Python listened on
    // 192.0.2.2:5600, [::]:8080 and [::1]:8081 and one connection was open.
    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:944F 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 653794 1 000000007084ad54 100 0 0 10 0
  16: 020200C0:15E0 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 697628 1 000000007dfa8573 100 0 0 10 0
 881: 0100007F:B034 0100007F:1FA4 01 00000000:00000000 00:00000000 00000000     0        0 697632 2 000000008443efd9 20 0 0 10 -1
";
    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 697629 1 00000000c90ffc6d 100 0 0 10 0
   1: 00000000000000000000000001000000:1F91 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 697630 1 000000000421b577 100 0 0 10 0
";

    /// The kernel's socket diagnostics give this process's own listeners
    /// as `/proc/net/tcp` and `tcp6` print them, inode for inode.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_live_hosts_listeners_are_those_of_its_files() {
        let v4 = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let v6 = std::net::TcpListener::bind("[::1]:0").ok();
        let ours: Vec<SocketAddr> =
            std::iter::once(&v4).chain(v6.as_ref()).map(|l| l.local_addr().unwrap()).collect();
        let live = ProcRoot::system();
        assert!(live.is_live() && !ProcRoot::at("/tmp/proc").is_live());
        let of = |l: &[Listener]| l.iter().filter(|l| ours.contains(&l.addr)).copied().collect::<Vec<_>>();
        // The kernel's answer itself: `read_listeners` would fall back.
        let by_diag: Vec<Listener> = super::super::sock_diag::listeners()
            .unwrap()
            .into_iter()
            .map(|(addr, inode)| Listener { addr, inode })
            .collect();
        assert_eq!(of(&read_listeners(&live).unwrap()), of(&by_diag));
        let by_file = read_files(&live).unwrap();
        assert_eq!(of(&by_diag).len(), ours.len(), "{by_diag:?}");
        assert_eq!(of(&by_diag), of(&by_file));
        assert!(of(&by_diag).iter().all(|l| l.inode > 0));
        drop(v4);
        assert!(
            !read_listeners(&live).unwrap().iter().any(|l| l.addr == ours[0]),
            "a closed listener is gone"
        );
    }

    #[test]
    fn listen_rows_only_with_little_endian_words() {
        let l = parse_listeners(TCP);
        assert_eq!(
            l,
            vec![
                Listener { addr: "127.0.0.1:37967".parse().unwrap(), inode: 653794 },
                Listener { addr: "192.0.2.2:5600".parse().unwrap(), inode: 697628 },
            ]
        );
        let l6 = parse_listeners(TCP6);
        assert_eq!(l6[0].addr, "[::]:8080".parse().unwrap());
        assert_eq!(l6[1].addr, "[::1]:8081".parse().unwrap());
    }
}
