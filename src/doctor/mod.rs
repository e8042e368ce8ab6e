//! `pdtop doctor`: what can be read about a pair without sending a
//! request (start-up logs, `/metrics`, `/version`, `/v1/models`, the
//! processes' `/proc` files and this host's network), and each
//! misconfiguration named with its cause, its evidence and what to change.
//!
//! `facts` holds what was read (each source optional), `rules` turns facts
//! into findings with no I/O, `gather` does the reading, `render` the text.

pub mod facts;
pub mod finding;
pub mod gather;
pub mod host;
pub mod loglines;
pub mod render;
pub mod rules;
pub mod watch;

pub use facts::PairFacts;
pub use finding::{Finding, Report, Severity, Unread, Verdict};

/// The findings of a set of facts, with what was and was not read.
pub fn diagnose(facts: &PairFacts) -> Report {
    Report { findings: rules::run(facts), read: facts.read.clone(), unread: facts.unread.clone() }
}
