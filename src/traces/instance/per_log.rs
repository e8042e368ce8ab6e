//! What the correlator keeps of one log between two of its lines.

/// What the previous physical line of a log came to.
#[derive(Debug, Clone, Default)]
pub(crate) struct PrevLine {
    pub(crate) unknown: bool,
    pub(crate) noise: bool,
    pub(crate) ids: usize,
    /// The failure event it raised, withdrawn if the joined line replaces it.
    pub(crate) event: Option<crate::traces::model::LogEvent>,
}

/// The last stats line of one log, and whether its stall was reported.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Stall {
    pub(crate) last_stats_at: Option<f64>,
    pub(crate) reported: bool,
}
