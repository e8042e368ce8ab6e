//! What the doctor says: findings (a cause, its evidence, what to change)
//! and the sources it could not read, with why.

use serde::{Deserialize, Serialize};

/// How bad a finding is. `Problem` fails `pdtop doctor` (exit 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Transfers will fail or every request will be recomputed.
    Problem,
    /// Works, but slower than it should or on a shaky footing.
    Warning,
    /// Worth knowing; nothing to change.
    Note,
}

impl Severity {
    pub fn name(self) -> &'static str {
        match self {
            Severity::Problem => "problem",
            Severity::Warning => "warning",
            Severity::Note => "note",
        }
    }
}

/// One misconfiguration, named.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Finding {
    /// The rule's name (`side_channel_port_shared`), stable in `--json`.
    pub rule: String,
    pub severity: Severity,
    /// Which instance(s): `decode 127.0.0.1:8200`, or `pair`.
    pub subject: String,
    pub cause: String,
    /// Where it was read: a file and line, a value and its source.
    pub evidence: Vec<String>,
    /// What to change: the flag or variable.
    pub fix: String,
}

impl Finding {
    pub fn new(
        rule: &str,
        severity: Severity,
        subject: impl Into<String>,
        cause: impl Into<String>,
    ) -> Finding {
        Finding {
            rule: rule.to_string(),
            severity,
            subject: subject.into(),
            cause: cause.into(),
            evidence: Vec::new(),
            fix: String::new(),
        }
    }

    pub fn evidence(mut self, e: impl Into<String>) -> Finding {
        self.evidence.push(e.into());
        self
    }

    pub fn fix(mut self, f: impl Into<String>) -> Finding {
        self.fix = f.into();
        self
    }
}

/// What a run can say of the pair (`Report::verdict`, the exit code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every source was read and nothing is wrong.
    Clean,
    /// Something is wrong.
    Problems,
    /// Nothing wrong in what was read; some source was not.
    Incomplete,
}

/// A source the doctor could not read, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unread {
    pub source: String,
    pub why: String,
}

/// Everything one run found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Most severe first.
    pub findings: Vec<Finding>,
    /// What was read (for the reader to judge what a clean result covers).
    pub read: Vec<String>,
    pub unread: Vec<Unread>,
}

impl Report {
    pub fn count(&self, s: Severity) -> usize {
        self.findings.iter().filter(|f| f.severity == s).count()
    }

    /// 0 clean: every source read, no problem (warnings and notes
    /// allowed); 1 a problem found; 4 no problem found, but some source
    /// could not be read, so the checks that need it did not run.
    pub fn exit_code(&self) -> u8 {
        match self.verdict() {
            Verdict::Clean => 0,
            Verdict::Problems => 1,
            Verdict::Incomplete => 4,
        }
    }

    /// What the run can say of the pair as a whole.
    pub fn verdict(&self) -> Verdict {
        if self.count(Severity::Problem) > 0 {
            Verdict::Problems
        } else if !self.unread.is_empty() {
            Verdict::Incomplete
        } else {
            Verdict::Clean
        }
    }

    /// The headline for one screen row: `doctor: not clean, 2 sources
    /// not read` where the long one explains.
    pub fn short_headline(&self) -> String {
        match (self.verdict(), self.unread.len()) {
            (Verdict::Incomplete, n) => {
                format!("doctor: not clean, {n} source{} not read", if n == 1 { "" } else { "s" })
            }
            _ => self.headline().split(';').next().unwrap_or_default().to_string(),
        }
    }

    /// The header's words: `doctor: 2 problems, 1 warning` or `doctor: clean`.
    pub fn headline(&self) -> String {
        let plural = |n: usize, w: &str| format!("{n} {w}{}", if n == 1 { "" } else { "s" });
        let (p, w) = (self.count(Severity::Problem), self.count(Severity::Warning));
        let found = match (p, w) {
            (0, 0) => None,
            (0, w) => Some(plural(w, "warning")),
            (p, 0) => Some(plural(p, "problem")),
            (p, w) => Some(format!("{}, {}", plural(p, "problem"), plural(w, "warning"))),
        };
        // Never clean about what it could not see.
        let unread = (!self.unread.is_empty()).then(|| {
            let n = self.unread.len();
            let them = if n == 1 { "it" } else { "them" };
            format!(
                "{} could not be read, so the checks on {them} did not run (see `not read`)",
                plural(n, "source")
            )
        });
        match (found, unread) {
            (None, None) => "doctor: clean".into(),
            (None, Some(u)) => format!("doctor: not clean: nothing wrong in what was read, but {u}"),
            (Some(f), None) => format!("doctor: {f}"),
            (Some(f), Some(u)) => format!("doctor: {f}; {u}"),
        }
    }
}

#[cfg(test)]
mod verdict_tests {
    use super::*;

    #[test]
    fn clean_only_when_every_source_was_read() {
        let mut r = Report { read: vec!["127.0.0.1:8100/metrics".into()], ..Default::default() };
        r.findings.push(Finding::new("ucx_net_devices_unset", Severity::Note, "prefill", "a note"));
        assert_eq!((r.verdict(), r.exit_code(), r.headline().as_str()), (Verdict::Clean, 0, "doctor: clean"));
        r.unread.push(Unread { source: "127.0.0.1:8200/metrics".into(), why: "cannot connect".into() });
        assert_eq!((r.verdict(), r.exit_code()), (Verdict::Incomplete, 4));
        assert!(
            r.headline().starts_with("doctor: not clean: nothing wrong in what was read, but 1 source"),
            "{}",
            r.headline()
        );
        r.findings.push(Finding::new("block_size_differs", Severity::Problem, "decode", "a problem"));
        assert_eq!((r.verdict(), r.exit_code()), (Verdict::Problems, 1));
        assert_eq!(
            r.headline(),
            "doctor: 1 problem; 1 source could not be read, so the checks on it did not run (see `not read`)"
        );
    }
}
