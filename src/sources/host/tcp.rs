//! LISTEN sockets from `net/tcp` and `net/tcp6` (kernel doc "The
//! proc/net/tcp and proc/net/tcp6 variables"). Each address is hex of
//! 32-bit words as the kernel holds them in memory: network-order bytes
//! printed as a host-order integer, so on the little-endian hosts vLLM runs
//! on (x86-64, aarch64) `0100007F` is 127.0.0.1. Parsed as little-endian
//! whatever the reading machine, so a captured file reads the same anywhere.

use std::io::BufRead;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

use serde::Serialize;

use super::root::{ProcRoot, Unreadable};

/// A socket in state LISTEN (`st` = `0A`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Listener {
    pub addr: SocketAddr,
    pub inode: u64,
}

const LISTEN: &str = "0A";
/// `SYN_RECV`: kernels before 4.4 print a listener's pending connections
/// right after it, among the listeners.
const SYN_RECV: &str = "03";
/// One row of `tcp` (the kernel pads each to 150 bytes; `tcp6`'s are longer).
const ROW: usize = 150;

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

/// Every listener of the namespace `root` looks at. A missing `tcp6` (a
/// kernel without IPv6) is no error; a missing `tcp` is.
pub fn read_listeners(root: &ProcRoot) -> Result<Vec<Listener>, Unreadable> {
    let net = root.net();
    let mut out = read_listening(&net.join("tcp"))?;
    if let Ok(l6) = read_listening(&net.join("tcp6")) {
        out.extend(l6);
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// The LISTEN rows of one file, read no further than the listeners. The
/// kernel prints them first, then walks its whole table of connections,
/// every bucket of it, to print the rest: read to the end, a file cost
/// 1.4 ms on a 2-core VM with five sockets open, and the doctor reads two
/// files twice in a round. Read a row at a time, the walk goes only as far
/// as the first connection (the kernel looks one row ahead).
fn read_listening(path: &Path) -> Result<Vec<Listener>, Unreadable> {
    let unreadable = |e: std::io::Error| Unreadable::from_io(path, None, &e);
    let file = std::fs::File::open(path).map_err(unreadable)?;
    let mut rows = std::io::BufReader::with_capacity(ROW, file);
    let mut out = Vec::new();
    let mut row = Vec::with_capacity(2 * ROW);
    loop {
        row.clear();
        if rows.read_until(b'\n', &mut row).map_err(unreadable)? == 0 {
            return Ok(out);
        }
        let text = String::from_utf8_lossy(&row);
        match text.split_whitespace().nth(3) {
            Some(LISTEN) => out.extend(parse_listeners(&text)),
            Some(SYN_RECV) => {}
            // A connection: the listeners are behind.
            Some(st) if st.len() == 2 && u8::from_str_radix(st, 16).is_ok() => return Ok(out),
            // The header, a damaged row.
            _ => {}
        }
    }
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

    /// A row after the first connection is never read: on a live host the
    /// kernel walks its whole connection table to print those rows. A
    /// pending connection among the listeners (kernels before 4.4) reads on.
    #[test]
    fn reads_no_further_than_the_listeners() {
        let dir = std::env::temp_dir().join(format!("pdtop-tcp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let rows: Vec<&str> = TCP.lines().collect();
        let syn_recv = rows[1].replace(" 0A ", " 03 ").replace(":944F", ":9450");
        let after = rows[2].replace(":15E0", ":15E1");
        let text = [rows[0], rows[1], &syn_recv, rows[2], rows[3], &after].join("\n");
        let path = dir.join("tcp");
        std::fs::write(&path, text).unwrap();
        let ports: Vec<u16> = read_listening(&path).unwrap().iter().map(|l| l.addr.port()).collect();
        assert_eq!(ports, vec![0x944F, 0x15E0]);
        let six = dir.join("tcp6");
        std::fs::write(&six, TCP6).unwrap();
        assert_eq!(read_listening(&six).unwrap(), parse_listeners(TCP6));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
