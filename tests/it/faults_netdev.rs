//! The interface pdtop counts disappearing and coming back (a container or
//! veth restart), through the `/proc/net/dev` collector's own functions.
//! No UI reads these counters yet on this branch; what is asserted is that
//! the collector reports the fault as a state instead of a number or a panic.

use pdtop::sources::netdev::{ByteDelta, IfaceChange, NetDevError, parse_net_dev, read_net_dev};

const HEADER: &str = "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n";

fn dev(rows: &[(&str, u64, u64)]) -> String {
    let mut s = HEADER.to_string();
    for (name, rx, tx) in rows {
        s.push_str(&format!("{name:>6}: {rx} 10 0 0 0 0 0 0 {tx} 10 0 0 0 0 0 0\n"));
    }
    s
}

#[test]
fn an_interface_that_disappears_is_gone_and_comes_back_without_a_negative_rate() {
    let a = parse_net_dev(&dev(&[("lo", 100, 100), ("veth0", 5_000_000, 4_000_000)])).unwrap();
    let b = parse_net_dev(&dev(&[("lo", 200, 200)])).unwrap();
    let changes = b.changes_since(&a);
    assert_eq!(changes.get("veth0"), Some(&IfaceChange::Gone));
    // Back, recreated: counters from zero. Seen as appeared, not as a
    // delta against the old values.
    let c = parse_net_dev(&dev(&[("lo", 300, 300), ("veth0", 1_000, 2_000)])).unwrap();
    assert!(matches!(c.changes_since(&b).get("veth0"), Some(IfaceChange::Appeared(_))));
    // Compared directly with the read before it vanished: a reset, with
    // no byte count claimed.
    match c.changes_since(&a).get("veth0") {
        Some(IfaceChange::Counted { rx, tx }) => {
            assert_eq!(*rx, ByteDelta::Reset { since_reset: 1_000 });
            assert_eq!(rx.bytes(), None);
            assert_eq!(tx.bytes(), None);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_namespace_that_is_gone_or_a_garbled_file_is_an_error_not_a_panic() {
    // A pid that cannot exist (above pid_max): the container's namespace is gone.
    assert!(matches!(read_net_dev(Some(u32::MAX)), Err(NetDevError::Io { .. })));
    assert!(parse_net_dev("").is_err());
    assert!(parse_net_dev("\u{fffd}\u{0}garbage\n").is_err());
    // A cut line among good ones does not take the good ones down with it.
    let mut text = dev(&[("lo", 1, 2)]);
    text.push_str("  eth0: 12 3\n");
    let _ = parse_net_dev(&text);
    // The real file of this machine parses.
    assert!(read_net_dev(None).is_ok());
}
