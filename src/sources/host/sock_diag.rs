//! This network namespace's LISTEN sockets from the kernel's socket
//! diagnostics (netlink `NETLINK_SOCK_DIAG`, `SOCK_DIAG_BY_FAMILY` with the
//! state filter LISTEN; linux/inet_diag.h). Reading `net/tcp` makes the
//! kernel walk its whole table of connections, sized by the host's memory
//! (2.5 ms for both files on a 24 GB VM, more on a GPU server with a
//! terabyte); a dump filtered to LISTEN walks the listeners only. Used for
//! the live host only: an injected root or another namespace is read from
//! its files.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use rustix::net::netlink::{SOCK_DIAG, SocketAddrNetlink};
use rustix::net::sockopt::Timeout;
use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x100 | 0x200;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const IPPROTO_TCP: u8 = 6;
const TCP_LISTEN: u32 = 10;
/// `struct nlmsghdr`.
const HEADER: usize = 16;
/// `struct inet_diag_req_v2`.
const REQUEST: usize = 56;
/// `struct inet_diag_msg`: family, state, timer, retrans, the socket's id
/// (ports, addresses, interface, cookie), expires, queues, uid, inode.
const MESSAGE: usize = 72;

/// Every TCP socket listening in this process's network namespace, IPv4
/// and IPv6, as `net/tcp` and `net/tcp6` list them: address and inode.
pub fn listeners() -> io::Result<Vec<(SocketAddr, u64)>> {
    let fd = rustix::net::socket_with(
        AddressFamily::NETLINK,
        SocketType::DGRAM,
        SocketFlags::CLOEXEC,
        Some(SOCK_DIAG),
    )?;
    // The kernel ends each dump; should it not, the collector's thread is
    // not held for long (the caller falls back to the files).
    rustix::net::sockopt::set_socket_timeout(&fd, Timeout::Recv, Some(Duration::from_secs(1)))?;
    let kernel = SocketAddrNetlink::new(0, 0);
    let mut out = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    for (seq, family) in [(1u32, AddressFamily::INET), (2, AddressFamily::INET6)] {
        rustix::net::sendto(&fd, &request(seq, family.as_raw() as u8), SendFlags::empty(), &kernel)?;
        'dump: loop {
            let (_, n) = rustix::net::recv(&fd, &mut buf[..], RecvFlags::empty())?;
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "sock_diag: empty answer"));
            }
            for (kind, body) in messages(&buf[..n]) {
                match kind {
                    NLMSG_DONE => break 'dump,
                    // A kernel without IPv6 refuses its dump: no IPv6
                    // listeners, as a missing `tcp6` is none.
                    NLMSG_ERROR if family == AddressFamily::INET6 => break 'dump,
                    NLMSG_ERROR => {
                        let errno = body.get(..4).map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                        return Err(io::Error::from_raw_os_error(-errno));
                    }
                    SOCK_DIAG_BY_FAMILY => out.extend(listener(body)),
                    _ => {}
                }
            }
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// A dump of `family`'s TCP sockets in state LISTEN.
fn request(seq: u32, family: u8) -> Vec<u8> {
    let mut m = Vec::with_capacity(HEADER + REQUEST);
    m.extend_from_slice(&((HEADER + REQUEST) as u32).to_ne_bytes());
    m.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    m.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    // family, protocol, extensions, padding, states, then a zero socket id.
    m.extend_from_slice(&[family, IPPROTO_TCP, 0, 0]);
    m.extend_from_slice(&(1u32 << TCP_LISTEN).to_ne_bytes());
    m.resize(HEADER + REQUEST, 0);
    m
}

/// The (type, payload) of each netlink message in one datagram; a length
/// that runs past the datagram ends it.
fn messages(mut d: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let len = u32::from_ne_bytes(d.get(..4)?.try_into().ok()?) as usize;
        let kind = u16::from_ne_bytes(d.get(4..6)?.try_into().ok()?);
        let body = d.get(HEADER..len)?;
        // Messages are aligned to 4 bytes.
        d = d.get(len.next_multiple_of(4)..).unwrap_or(&[]);
        Some((kind, body))
    })
}

/// One `inet_diag_msg`'s listening address and inode; its address bytes
/// are in network order, its port big-endian.
fn listener(m: &[u8]) -> Option<(SocketAddr, u64)> {
    if m.len() < MESSAGE || u32::from(m[1]) != TCP_LISTEN {
        return None;
    }
    let port = u16::from_be_bytes([m[4], m[5]]);
    let src = &m[8..24];
    let ip = match m[0] {
        f if u16::from(f) == AddressFamily::INET.as_raw() => {
            std::net::IpAddr::from(Ipv4Addr::new(src[0], src[1], src[2], src[3]))
        }
        f if u16::from(f) == AddressFamily::INET6.as_raw() => {
            std::net::IpAddr::from(Ipv6Addr::from(<[u8; 16]>::try_from(src).ok()?))
        }
        _ => return None,
    };
    let inode = u32::from_ne_bytes(m[68..72].try_into().ok()?);
    Some((SocketAddr::new(ip, port), u64::from(inode)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_cut_short_is_no_listener_and_a_bad_length_ends_the_datagram() {
        let mut m = vec![0u8; MESSAGE];
        m[0] = AddressFamily::INET.as_raw() as u8;
        m[1] = TCP_LISTEN as u8;
        m[4..6].copy_from_slice(&8000u16.to_be_bytes());
        m[8..12].copy_from_slice(&[127, 0, 0, 1]);
        m[68..72].copy_from_slice(&42u32.to_ne_bytes());
        assert_eq!(listener(&m), Some(("127.0.0.1:8000".parse().unwrap(), 42)));
        assert_eq!(listener(&m[..MESSAGE - 1]), None);
        let mut d = Vec::new();
        d.extend_from_slice(&((HEADER + MESSAGE) as u32).to_ne_bytes());
        d.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        d.extend_from_slice(&[0; 10]);
        d.extend_from_slice(&m);
        d.extend_from_slice(&9999u32.to_ne_bytes());
        d.extend_from_slice(&[0; 12]);
        let got: Vec<_> = messages(&d).collect();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, SOCK_DIAG_BY_FAMILY);
    }
}
