//! The report as a person reads it.

use std::fmt::Write;

use super::finding::{Report, Severity};

/// Findings most severe first, each with its evidence and fix, then what
/// was read and what could not be.
pub fn text(r: &Report) -> String {
    let mut out = String::new();
    for f in &r.findings {
        let tag = match f.severity {
            Severity::Problem => "PROBLEM",
            Severity::Warning => "WARNING",
            Severity::Note => "NOTE   ",
        };
        let _ = writeln!(out, "{tag} {} [{}]", f.subject, f.rule);
        let _ = writeln!(out, "  cause:    {}", f.cause);
        for e in &f.evidence {
            let _ = writeln!(out, "  evidence: {e}");
        }
        if !f.fix.is_empty() {
            let _ = writeln!(out, "  change:   {}", f.fix);
        }
        out.push('\n');
    }
    if !r.read.is_empty() {
        let _ = writeln!(out, "read:");
        for s in &r.read {
            let _ = writeln!(out, "  {s}");
        }
    }
    if !r.unread.is_empty() {
        let _ = writeln!(out, "not read:");
        for u in &r.unread {
            let _ = writeln!(out, "  {}: {}", u.source, u.why);
        }
    }
    let _ = writeln!(out, "{}", r.headline());
    out
}
