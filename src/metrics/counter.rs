//! The counters pdtop reads from an instance's scrape.

/// Counters pdtop turns into rates and window totals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Counter {
    PromptLocalCompute,
    PromptLocalCacheHit,
    PromptExternal,
    PromptTokens,
    GenerationTokens,
    PrefixQueries,
    PrefixHits,
    ExternalQueries,
    ExternalHits,
    Preemptions,
    /// `request_success_total`, all reasons but abort and error.
    RequestsOk,
    RequestsAborted,
    RequestsErrored,
    NixlFailedTransfers,
    NixlFailedNotifications,
    NixlExpired,
    MooncakeFailedTransfers,
    MooncakeFailedRecvs,
    MooncakeExpired,
    MooncakeStoreFailedKeys,
    MooncakeStoreLoadBytes,
    MooncakeStoreSaveBytes,
    /// OffloadingConnector: GPU to host memory (stored) and back (loaded).
    OffloadStoredBytes,
    OffloadLoadedBytes,
    OffloadStoreSecs,
    OffloadLoadSecs,
    /// LMCache, in tokens: retrieves asked and hit, lookups asked and hit, stored.
    LmcacheRequestedTokens,
    LmcacheHitTokens,
    LmcacheLookupTokens,
    LmcacheLookupHitTokens,
    LmcacheStoredTokens,
    /// LMCache: prompt tokens of the requests it saw (newer versions).
    LmcachePromptTokens,
}

impl Counter {
    /// Every counter, in declaration (and `Ord`) order.
    pub const ALL: [Counter; 32] = [
        Counter::PromptLocalCompute,
        Counter::PromptLocalCacheHit,
        Counter::PromptExternal,
        Counter::PromptTokens,
        Counter::GenerationTokens,
        Counter::PrefixQueries,
        Counter::PrefixHits,
        Counter::ExternalQueries,
        Counter::ExternalHits,
        Counter::Preemptions,
        Counter::RequestsOk,
        Counter::RequestsAborted,
        Counter::RequestsErrored,
        Counter::NixlFailedTransfers,
        Counter::NixlFailedNotifications,
        Counter::NixlExpired,
        Counter::MooncakeFailedTransfers,
        Counter::MooncakeFailedRecvs,
        Counter::MooncakeExpired,
        Counter::MooncakeStoreFailedKeys,
        Counter::MooncakeStoreLoadBytes,
        Counter::MooncakeStoreSaveBytes,
        Counter::OffloadStoredBytes,
        Counter::OffloadLoadedBytes,
        Counter::OffloadStoreSecs,
        Counter::OffloadLoadSecs,
        Counter::LmcacheRequestedTokens,
        Counter::LmcacheHitTokens,
        Counter::LmcacheLookupTokens,
        Counter::LmcacheLookupHitTokens,
        Counter::LmcacheStoredTokens,
        Counter::LmcachePromptTokens,
    ];
}
