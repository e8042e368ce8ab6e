//! How a decode instance's connector shows a load in its log: what the
//! decider asks of a decode, named apart from who keeps it (`correlator`).

/// How a decode instance's connector shows a load in its log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Style {
    /// NIXL, Mooncake...: the decode request must carry `kv_transfer_params`
    /// naming the prefill; without them it cannot pull.
    Params,
    /// ExampleConnector: `External Cache Hit!` + `Inject KV cache` lines, no id.
    Hits,
    /// Nothing known: no verdict from silence.
    Unknown,
}

/// Connectors that pull by the params the prefill response returns.
pub(super) const PARAMS_CONNECTORS: [&str; 4] =
    ["NixlConnector", "MooncakeConnector", "MoRIIOConnector", "P2pNcclConnector"];
/// Connectors that print `External Cache Hit!` per loaded request.
pub(super) const HIT_CONNECTORS: [&str; 2] = ["ExampleConnector", "SharedStorageConnector"];
