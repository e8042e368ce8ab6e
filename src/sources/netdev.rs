//! Interface byte counters from `/proc/net/dev`.
//!
//! Why: a KV transfer over TCP (NIXL on `tcp/lo`, or a real NIC) shows up as
//! received bytes; comparing them with the predicted KV size is how a silent
//! miss (nothing moved) is seen on the wire. Parsed here (the kernel's
//! `dev_seq_printf_stats`: name, then 8 receive and 8 transmit counters),
//! with per-line errors, snapshots from other network namespaces, and deltas
//! that survive counter resets.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use crate::feed::{IfaceBytes, NetDevSnapshot};

#[derive(Debug)]
pub enum NetDevError {
    /// The file could not be read (no such pid, no permission, not Linux).
    Io { path: PathBuf, source: std::io::Error },
    /// The two header lines are missing: this is not `/proc/net/dev` text.
    Header,
    /// A data line (1-based line number in the text) did not parse.
    Line { line: usize, reason: String },
}

impl fmt::Display for NetDevError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetDevError::Io { path, source } => {
                write!(f, "cannot read {}: {source}", path.display())
            }
            NetDevError::Header => write!(f, "not /proc/net/dev text: header lines missing"),
            NetDevError::Line { line, reason } => write!(f, "/proc/net/dev line {line}: {reason}"),
        }
    }
}

impl std::error::Error for NetDevError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            NetDevError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Parse the text of `/proc/net/dev`.
///
/// The two header lines must be present (`Inter-|` and ` face |`), so that
/// an empty or unrelated file is an error rather than "no interfaces".
/// Blank lines are skipped. An error names the line.
pub fn parse_net_dev(text: &str) -> Result<NetDevSnapshot, NetDevError> {
    let mut lines = text.lines();
    let header_ok = lines.next().is_some_and(|l| l.trim_start().starts_with("Inter-"))
        && lines.next().is_some_and(|l| l.trim_start().starts_with("face"));
    if !header_ok {
        return Err(NetDevError::Header);
    }

    let mut ifaces = BTreeMap::new();
    for (idx, line) in lines.enumerate() {
        let line_no = idx + 3;
        if line.trim().is_empty() {
            continue;
        }
        // Interface names cannot contain ':' (the kernel's dev_valid_name
        // refuses it), so the first ':' ends the name. Old kernels printed
        // "%6s:%8llu", gluing a large rx_bytes to the colon ("eth0:123456789").
        // Nor whitespace, which is what separates the fields.
        let named = |name: &str| !name.trim().is_empty() && !name.trim().contains(char::is_whitespace);
        let Some((name, counters)) = line.split_once(':').filter(|(name, _)| named(name)) else {
            return Err(NetDevError::Line {
                line: line_no,
                reason: "expected `<interface>: <16 counters>`".to_owned(),
            });
        };
        let counters =
            parse_counters(counters).map_err(|reason| NetDevError::Line { line: line_no, reason })?;
        // rx_bytes is the first receive counter, tx_bytes the first transmit one.
        ifaces.insert(
            name.trim().to_owned(),
            IfaceBytes { rx_bytes: counters[0], tx_bytes: counters[RX_COUNTERS] },
        );
    }
    Ok(NetDevSnapshot { ifaces, links: BTreeMap::new() })
}

/// Receive counters per line (bytes, packets, errs, drop, fifo, frame,
/// compressed, multicast); the transmit ones follow.
const RX_COUNTERS: usize = 8;

/// The 16 counters after the name's colon; more (a future kernel's) are ignored.
fn parse_counters(text: &str) -> Result<[u64; 2 * RX_COUNTERS], String> {
    let mut out = [0u64; 2 * RX_COUNTERS];
    let mut fields = text.split_whitespace();
    for (i, slot) in out.iter_mut().enumerate() {
        let field = fields.next().ok_or_else(|| format!("{i} counters, expected {}", 2 * RX_COUNTERS))?;
        *slot = field.parse().map_err(|e| format!("counter {} `{field}`: {e}", i + 1))?;
    }
    Ok(out)
}

/// Read `/proc/net/dev` of this process's network namespace, or, with
/// `Some(pid)`, `/proc/<pid>/net/dev`: the namespace of that process (e.g.
/// a vLLM container's), which needs permission to see that pid.
pub fn read_net_dev(netns_pid: Option<u32>) -> Result<NetDevSnapshot, NetDevError> {
    read_net_dev_into(netns_pid, &mut String::new())
}

/// [`read_net_dev`] through a buffer kept between reads: procfs gives no
/// size, so a fresh string grows from 32 bytes over seven reads, every
/// second; a kept one takes the file in one.
pub fn read_net_dev_into(netns_pid: Option<u32>, text: &mut String) -> Result<NetDevSnapshot, NetDevError> {
    NetDevReader::new(netns_pid).read_with(text)
}

/// Reads one namespace's `/proc/.../net/dev` again and again. This
/// process's own stays open and is read again from its start (procfs makes
/// the text anew on each read from 0): opening it walked `/proc/self` and
/// built the file, half of a read's cost. Another process's is opened each
/// time, so a process gone or a pid reused is seen as such.
#[derive(Debug)]
pub struct NetDevReader {
    netns_pid: Option<u32>,
    open: Option<std::fs::File>,
    text: String,
}

impl NetDevReader {
    pub fn new(netns_pid: Option<u32>) -> NetDevReader {
        NetDevReader { netns_pid, open: None, text: String::new() }
    }

    pub fn read(&mut self) -> Result<NetDevSnapshot, NetDevError> {
        let mut text = std::mem::take(&mut self.text);
        let read = self.read_with(&mut text);
        self.text = text;
        read
    }

    fn read_with(&mut self, text: &mut String) -> Result<NetDevSnapshot, NetDevError> {
        use std::io::{Read, Seek, SeekFrom};
        let path = match self.netns_pid {
            Some(pid) => PathBuf::from(format!("/proc/{pid}/net/dev")),
            None => PathBuf::from("/proc/net/dev"),
        };
        text.clear();
        text.reserve(16 * 1024);
        let mut file = match self.open.take() {
            Some(f) => f,
            None => {
                std::fs::File::open(&path).map_err(|source| NetDevError::Io { path: path.clone(), source })?
            }
        };
        file.seek(SeekFrom::Start(0))
            .and_then(|_| file.read_to_string(text))
            .map_err(|source| NetDevError::Io { path, source })?;
        if self.netns_pid.is_none() {
            self.open = Some(file);
        }
        parse_net_dev(text)
    }
}

/// Change of one counter between two reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteDelta {
    /// `cur - prev`.
    Delta(u64),
    /// A 32-bit counter wrapped past `u32::MAX`; the value is the bytes moved.
    Wrapped(u64),
    /// The counter went down: the interface was recreated (container or
    /// veth restart) or the counters were cleared. The true delta is
    /// unknown; `since_reset` (= the current value) is a lower bound.
    Reset { since_reset: u64 },
}

impl ByteDelta {
    /// Bytes moved, when known.
    pub fn bytes(self) -> Option<u64> {
        match self {
            ByteDelta::Delta(b) | ByteDelta::Wrapped(b) => Some(b),
            ByteDelta::Reset { .. } => None,
        }
    }
}

/// How close to `u32::MAX` the previous value must be, and how small the new
/// one, for a decrease to count as a 32-bit wrap (1 GiB each way).
pub const WRAP_WINDOW: u64 = 1 << 30;

/// Counter delta that never goes negative.
///
/// Linux exports 64-bit counters on 64-bit kernels, which do not wrap in
/// practice, so any decrease is normally a reset. Some 32-bit kernels and
/// drivers still wrap at 2^32; we call a decrease a wrap only when `prev` is
/// within [`WRAP_WINDOW`] of `u32::MAX` and `cur` is below `WRAP_WINDOW`,
/// where a reset would be the less likely story. Everything else that
/// decreases is [`ByteDelta::Reset`].
pub fn byte_delta(prev: u64, cur: u64) -> ByteDelta {
    if let Some(d) = cur.checked_sub(prev) {
        return ByteDelta::Delta(d);
    }
    let max32 = u64::from(u32::MAX);
    if prev <= max32 && max32 - prev < WRAP_WINDOW && cur < WRAP_WINDOW {
        return ByteDelta::Wrapped(max32 - prev + 1 + cur);
    }
    ByteDelta::Reset { since_reset: cur }
}

/// What happened to one interface between two snapshots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfaceChange {
    /// Present in both reads.
    Counted { rx: ByteDelta, tx: ByteDelta },
    /// Only in the newer read; its counters are since it was created.
    Appeared(IfaceBytes),
    /// Only in the older read (container stopped, veth removed).
    Gone,
}

impl NetDevSnapshot {
    /// Counters of one interface, if present.
    pub fn get(&self, iface: &str) -> Option<IfaceBytes> {
        self.ifaces.get(iface).copied()
    }

    /// What happened to `iface` from `prev` to `self`; `None` when neither
    /// read has it.
    pub fn change_of(&self, prev: &NetDevSnapshot, iface: &str) -> Option<IfaceChange> {
        match (prev.ifaces.get(iface), self.ifaces.get(iface)) {
            (Some(p), Some(cur)) => Some(IfaceChange::Counted {
                rx: byte_delta(p.rx_bytes, cur.rx_bytes),
                tx: byte_delta(p.tx_bytes, cur.tx_bytes),
            }),
            (None, Some(cur)) => Some(IfaceChange::Appeared(*cur)),
            (Some(_), None) => Some(IfaceChange::Gone),
            (None, None) => None,
        }
    }

    /// Per-interface change from `prev` to `self`, over the union of names.
    pub fn changes_since(&self, prev: &NetDevSnapshot) -> BTreeMap<String, IfaceChange> {
        self.ifaces
            .keys()
            .chain(prev.ifaces.keys())
            .filter_map(|name| Some((name.clone(), self.change_of(prev, name)?)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HEADER: &str = "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n";

    /// The `text` of every sample in the NIXL capture, in time order.
    fn capture_samples() -> Vec<String> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/lab-captures/nixl-llama-shape/netdev.jsonl.xz"
        );
        let compressed = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let mut raw = Vec::new();
        lzma_rs::xz_decompress(&mut compressed.as_slice(), &mut raw).expect("valid xz");
        let raw = String::from_utf8(raw).expect("utf-8");
        raw.lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("json line");
                v["text"].as_str().expect("text field").to_owned()
            })
            .collect()
    }

    #[test]
    fn parses_every_capture_sample() {
        let samples = capture_samples();
        assert!(samples.len() > 100);
        let snaps: Vec<_> =
            samples.iter().map(|t| parse_net_dev(t).expect("real /proc/net/dev parses")).collect();
        let first = &snaps[0];
        assert_eq!(first.ifaces.keys().collect::<Vec<_>>(), ["eth0", "ifb0", "ifb1", "lo"]);
        assert_eq!(first.get("lo"), Some(IfaceBytes { rx_bytes: 276_361, tx_bytes: 276_361 }));
        assert_eq!(first.get("eth0"), Some(IfaceBytes { rx_bytes: 625, tx_bytes: 1473 }));
        let last = snaps.last().expect("samples");
        assert_eq!(last.get("lo").map(|b| b.rx_bytes), Some(9_791_442_389));
        // Loopback: every byte sent is received; counters only go up here.
        for pair in snaps.windows(2) {
            let lo = pair[1].get("lo").expect("lo");
            assert_eq!(lo.rx_bytes, lo.tx_bytes);
            match pair[1].changes_since(&pair[0]).get("lo") {
                Some(IfaceChange::Counted { rx: ByteDelta::Delta(_), tx: ByteDelta::Delta(_) }) => {}
                other => panic!("lo should only grow, got {other:?}"),
            }
        }
    }

    #[test]
    fn counter_reset_between_real_samples() {
        let samples = capture_samples();
        let late = parse_net_dev(samples.last().expect("samples")).expect("parses");
        let early = parse_net_dev(&samples[0]).expect("parses");
        // Going from the late sample back to the first looks like lo being
        // recreated: counters fell from 9.79 GB to 276 kB.
        let changes = early.changes_since(&late);
        assert_eq!(
            changes.get("lo"),
            Some(&IfaceChange::Counted {
                rx: ByteDelta::Reset { since_reset: 276_361 },
                tx: ByteDelta::Reset { since_reset: 276_361 },
            })
        );
        // eth0 did not move at all.
        assert_eq!(
            changes.get("eth0"),
            Some(&IfaceChange::Counted { rx: ByteDelta::Delta(0), tx: ByteDelta::Delta(0) })
        );
    }

    #[test]
    fn interface_that_disappears_and_one_that_appears() {
        let samples = capture_samples();
        let before = parse_net_dev(&samples[0]).expect("parses");
        let without_eth0: String = samples[1]
            .lines()
            .filter(|l| !l.trim_start().starts_with("eth0:"))
            .map(|l| format!("{l}\n"))
            .collect();
        let after = parse_net_dev(&without_eth0).expect("parses");
        assert_eq!(after.get("eth0"), None);
        let changes = after.changes_since(&before);
        assert_eq!(changes.get("eth0"), Some(&IfaceChange::Gone));
        assert!(matches!(
            changes.get("lo"),
            Some(IfaceChange::Counted { rx: ByteDelta::Delta(109_731), .. })
        ));
        // And back: eth0 reappears with its own counters.
        let back = before.changes_since(&after);
        assert_eq!(
            back.get("eth0"),
            Some(&IfaceChange::Appeared(IfaceBytes { rx_bytes: 625, tx_bytes: 1473 }))
        );
    }

    #[test]
    fn colon_glued_to_large_counter_parses() {
        // Old kernels' "%6s:%8llu" format: no space once rx_bytes has 8+ digits.
        let samples = capture_samples();
        let last = samples.last().expect("samples");
        let glued = last.replace("lo: 9791442389", "lo:9791442389");
        assert_ne!(&glued, last);
        let snap = parse_net_dev(&glued).expect("parses");
        assert_eq!(snap.get("lo").map(|b| b.rx_bytes), Some(9_791_442_389));
        assert_eq!(snap.get("lo").map(|b| b.tx_bytes), Some(9_791_442_389));
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(matches!(parse_net_dev(""), Err(NetDevError::Header)));
        assert!(matches!(parse_net_dev("hello\nworld\n"), Err(NetDevError::Header)));
        assert!(matches!(parse_net_dev("\u{0}\u{fffd}garbage"), Err(NetDevError::Header)));
        let cases = [
            format!("{HEADER}  eth0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n"),
            format!("{HEADER}  eth0: 1 2 3\n"),
            format!("{HEADER}  : 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n"),
            format!("{HEADER}  eth0: x 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n"),
            format!("{HEADER}  eth0: -1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n"),
            format!("{HEADER}  eth0: 99999999999999999999 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n"),
            format!("{HEADER}  lo: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n  truncated: 4 5\n"),
        ];
        for text in &cases {
            match parse_net_dev(text) {
                Err(NetDevError::Line { line, .. }) => assert!(line >= 3, "{text}"),
                other => panic!("expected a line error for {text:?}, got {other:?}"),
            }
        }
    }

    #[test]
    fn header_only_is_no_interfaces() {
        let snap = parse_net_dev(HEADER).expect("parses");
        assert!(snap.ifaces.is_empty());
    }

    #[test]
    fn byte_delta_cases() {
        assert_eq!(byte_delta(10, 25), ByteDelta::Delta(15));
        assert_eq!(byte_delta(7, 7), ByteDelta::Delta(0));
        assert_eq!(byte_delta(1000, 10), ByteDelta::Reset { since_reset: 10 });
        // Near u32::MAX and small after: a 32-bit wrap.
        let max = u64::from(u32::MAX);
        assert_eq!(byte_delta(max - 9, 5), ByteDelta::Wrapped(15));
        assert_eq!(byte_delta(max, 0), ByteDelta::Wrapped(1));
        // Far from u32::MAX: a reset, even below 2^32.
        assert_eq!(byte_delta(max / 2, 5), ByteDelta::Reset { since_reset: 5 });
        // Above 2^32 the counter is 64-bit: a decrease is a reset.
        assert_eq!(byte_delta(9_791_442_389, 5), ByteDelta::Reset { since_reset: 5 });
        assert_eq!(ByteDelta::Wrapped(3).bytes(), Some(3));
        assert_eq!(ByteDelta::Reset { since_reset: 3 }.bytes(), None);
    }

    #[test]
    fn the_kept_file_reads_fresh_counters_each_time() {
        use std::io::{Read, Write};
        let mut r = NetDevReader::new(None);
        let before = r.read().expect("first read").get("lo").map(|b| b.rx_bytes);
        assert!(r.open.is_some(), "this namespace's file is kept open");
        // Traffic on loopback between the reads.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        c.write_all(&[7u8; 64 * 1024]).unwrap();
        s.read_exact(&mut [0u8; 64 * 1024]).unwrap();
        let after = r.read().expect("second read").get("lo").map(|b| b.rx_bytes);
        match (before, after) {
            (Some(b), Some(a)) => assert!(a >= b + 64 * 1024, "{b} -> {a}: the second read was not fresh"),
            // A namespace without a loopback counter to watch: still two good reads.
            _ => assert_eq!(before, after),
        }
        let mut other = NetDevReader::new(Some(std::process::id()));
        assert!(other.read().is_ok());
        assert!(other.open.is_none(), "another process's file is opened each time");
    }

    #[test]
    fn read_net_dev_errors_for_missing_pid() {
        // Pid numbers are capped well below u32::MAX (pid_max <= 2^22).
        match read_net_dev(Some(u32::MAX)) {
            Err(NetDevError::Io { path, .. }) => {
                assert_eq!(path, PathBuf::from(format!("/proc/{}/net/dev", u32::MAX)))
            }
            other => panic!("expected an io error, got {other:?}"),
        }
    }

    proptest! {
        #[test]
        fn parse_never_panics(s in "\\PC*") {
            let _ = parse_net_dev(&s);
        }

        #[test]
        fn parse_never_panics_after_a_valid_header(body in "[ -~\n:]{0,400}") {
            let _ = parse_net_dev(&format!("{HEADER}{body}"));
        }

        #[test]
        fn any_counters_round_trip(name in "[a-z][a-z0-9.]{0,14}", rx: u64, tx: u64) {
            let text = format!("{HEADER}{name:>6}: {rx:>7} 1 0 0 0 0 0 0 {tx:>8} 1 0 0 0 0 0 0\n");
            let snap = parse_net_dev(&text).expect("well-formed line");
            prop_assert_eq!(snap.get(&name), Some(IfaceBytes { rx_bytes: rx, tx_bytes: tx }));
        }

        #[test]
        fn byte_delta_is_exact_when_counters_grow(prev: u64, d: u64) {
            let cur = prev.saturating_add(d);
            prop_assert_eq!(byte_delta(prev, cur), ByteDelta::Delta(cur - prev));
        }
    }
}
