//! The report of `check`: per group, the findings with file, message and fix, errors first.

use std::path::PathBuf;

use serde::Serialize;

use super::{Code, Report, escape, escape_path};
pub use crate::loader::Severity;
use crate::plan::Delivery;

/// One problem, with where it is and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Error or warning.
    pub severity: Severity,
    /// Stable machine-readable code (docs/json-report.md).
    pub code: Code,
    /// The file concerned (host path).
    pub file: PathBuf,
    /// What is wrong.
    pub message: String,
    /// How to fix it, in one line.
    pub fix: String,
}

/// The findings of one group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupCheck {
    /// The group.
    pub group: String,
    /// The delivery mode checked against (given, or detected from the disk).
    pub delivery: Delivery,
    /// What was found, errors first.
    pub findings: Vec<Finding>,
}

/// The report of a `check` run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    /// The JSON shape version.
    pub version: u32,
    /// Always "check".
    pub command: &'static str,
    /// True when no finding is an error.
    pub ok: bool,
    /// One entry per group.
    pub groups: Vec<GroupCheck>,
}

impl Report for CheckReport {
    fn ok(&self) -> bool {
        self.ok
    }

    fn to_human(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let (mut errors, mut warnings) = (0, 0);
        for group in &self.groups {
            if group.findings.is_empty() {
                let _ = writeln!(
                    out,
                    "{}: ok ({} delivery)",
                    escape(&group.group),
                    group.delivery
                );
                continue;
            }
            let _ = writeln!(
                out,
                "{} ({} delivery):",
                escape(&group.group),
                group.delivery
            );
            for finding in &group.findings {
                let label = match finding.severity {
                    Severity::Error => {
                        errors += 1;
                        "error"
                    }
                    Severity::Warning => {
                        warnings += 1;
                        "warning"
                    }
                    Severity::Info => "note",
                };
                let _ = writeln!(
                    out,
                    "  {label}[{}] {}: {}\n    fix: {}",
                    finding.code,
                    escape_path(&finding.file),
                    escape(&finding.message),
                    escape(&finding.fix)
                );
            }
        }
        let _ = writeln!(
            out,
            "{} group(s) checked: {errors} error(s), {warnings} warning(s)",
            self.groups.len()
        );
        out
    }
}
