//! How well a line's time is known: stamped, read as it came, or found
//! undated by the first read (`state::timeline` dates every line).

/// How well a line's time is known.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) enum LineTime {
    /// Its source printed it (a stamp).
    #[default]
    Stamped,
    /// Read after `from` (the read before) and by its time: a log that
    /// prints no time, followed as it grows.
    Read { from: f64 },
    /// Found by the first read: printed at some time before pdtop started.
    Undated,
}

impl LineTime {
    pub(super) fn new(from: f64, at: f64) -> LineTime {
        if from == f64::NEG_INFINITY {
            LineTime::Undated
        } else if from < at {
            LineTime::Read { from }
        } else {
            LineTime::Stamped
        }
    }

    /// The earliest the line can have been printed.
    pub fn earliest(self, at: f64) -> f64 {
        match self {
            LineTime::Stamped => at,
            LineTime::Read { from } => from.min(at),
            LineTime::Undated => f64::NEG_INFINITY,
        }
    }

    /// Its time says nothing of its order against its own log's lines:
    /// they are taken in file order.
    pub fn by_order(self) -> bool {
        self != LineTime::Stamped
    }
}
