//! The doctor's latest report, and which of its findings the event log has
//! told. A finding is told once; after an instance restarts, the next
//! report tells them all again (the restart may have fixed some, or made
//! new ones).

use std::collections::HashSet;

use crate::doctor::{Finding, Report};

#[derive(Debug, Clone, Default)]
pub struct DoctorState {
    pub report: Option<Report>,
    told: HashSet<Finding>,
}

impl DoctorState {
    /// Takes a new report; returns the findings to tell, most severe first.
    pub fn on_report(&mut self, report: Report) -> Vec<Finding> {
        let new: Vec<Finding> = report.findings.iter().filter(|f| !self.told.contains(*f)).cloned().collect();
        self.told = report.findings.iter().cloned().collect();
        self.report = Some(report);
        new
    }

    /// An instance restarted: the next report is told whole.
    pub fn on_restart(&mut self) {
        self.told.clear();
    }
}

/// A finding as one line of the event log.
pub fn event_text(f: &Finding) -> String {
    let fix = if f.fix.is_empty() { String::new() } else { format!(" · change: {}", f.fix) };
    format!("{}: {}{fix}", f.subject, f.cause)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::Severity;

    fn report(rules: &[&str]) -> Report {
        let findings = rules.iter().map(|r| Finding::new(r, Severity::Problem, "pair", "cause")).collect();
        Report { findings, ..Default::default() }
    }

    #[test]
    fn a_finding_is_told_once_and_again_after_a_restart() {
        let mut d = DoctorState::default();
        assert_eq!(d.on_report(report(&["a", "b"])).len(), 2);
        assert!(d.on_report(report(&["a", "b"])).is_empty());
        let new = d.on_report(report(&["a", "c"]));
        assert_eq!(new.iter().map(|f| f.rule.as_str()).collect::<Vec<_>>(), ["c"]);
        d.on_restart();
        assert_eq!(d.on_report(report(&["a", "c"])).len(), 2);
    }
}
