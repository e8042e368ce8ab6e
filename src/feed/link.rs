//! What the link collectors read: the connector directory and interface
//! byte counters.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One folder of the connector directory: its files and their bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FolderStat {
    pub files: u64,
    pub bytes: u64,
}

/// The directory at one moment: folder name → its files and bytes.
pub type KvDirSnapshot = BTreeMap<String, FolderStat>;

/// Received and transmitted byte counters of one interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IfaceBytes {
    pub rx_bytes: u64,
    pub tx_bytes: u64,
}

/// One read of `/proc/net/dev`: interface name → counters. A `BTreeMap` so
/// iteration (and display) order is stable.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetDevSnapshot {
    pub ifaces: BTreeMap<String, IfaceBytes>,
    /// What sysfs says of each link (speed, RDMA), when it was read.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub links: BTreeMap<String, LinkInfo>,
}

/// One link as `/sys/class/net` and `/sys/class/infiniband` describe it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkInfo {
    /// `/sys/class/net/<if>/speed` (Mb/s), or an RDMA port's rate; `None`
    /// for virtual links (lo, veth) that report none.
    pub speed_mbps: Option<u64>,
    /// The RDMA device behind it (`mlx5_0`), or the device itself for an
    /// `rdma:` entry, whose bytes are the port counters (RDMA traffic
    /// bypasses `/proc/net/dev`).
    pub rdma: Option<String>,
    pub loopback: bool,
}
