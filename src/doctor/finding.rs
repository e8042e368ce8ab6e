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

    /// 0 clean (warnings and notes allowed), 1 a problem found.
    pub fn exit_code(&self) -> u8 {
        u8::from(self.count(Severity::Problem) > 0)
    }

    /// The header's words: `doctor: 2 problems, 1 warning` or `doctor: clean`.
    pub fn headline(&self) -> String {
        let plural = |n: usize, w: &str| format!("{n} {w}{}", if n == 1 { "" } else { "s" });
        let (p, w) = (self.count(Severity::Problem), self.count(Severity::Warning));
        match (p, w) {
            (0, 0) => "doctor: clean".into(),
            (0, w) => format!("doctor: {}", plural(w, "warning")),
            (p, 0) => format!("doctor: {}", plural(p, "problem")),
            (p, w) => format!("doctor: {}, {}", plural(p, "problem"), plural(w, "warning")),
        }
    }
}
