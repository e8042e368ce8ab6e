//! Why a verdict was reached, typed; put into words only where they are
//! shown (the screen, `check`'s report). Nothing reads the words back.

mod fault;
mod kinds;
mod pair;

use std::fmt;

pub use kinds::*;

impl Reason {
    /// Whether the reason reads as a note in brackets after the one before it.
    pub(super) fn bracketed(&self) -> bool {
        matches!(self, Reason::PairedByTokens { .. } | Reason::PairedAmong { .. })
    }

    /// The reason's first clause, without ids or numbers, for grouping.
    pub fn headline(&self) -> String {
        let s = self.to_string();
        let cut = s.find(" (").unwrap_or(s.len());
        s[..cut].to_string()
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Every reason is worded in exactly one of the two files.
        debug_assert!(pair::owns(self) != fault::owns(self), "{self:?}");
        if pair::owns(self) { pair::fmt(self, f) } else { fault::fmt(self, f) }
    }
}

/// A verdict reached only because a deadline passed with one side missing:
/// a late partner reopens it.
pub(crate) fn deadline_only(reasons: &[Reason]) -> bool {
    matches!(
        reasons.first(),
        Some(
            Reason::PrefillOnly { .. }
                | Reason::ProxyOnly
                | Reason::NamedOnly { .. }
                | Reason::ExpiredAlone { .. }
                | Reason::Notify { .. }
        )
    )
}
