//! The report of `check`: per group, the findings with file, message and fix, errors first.

use std::cmp::Reverse;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{Code, Detail, Line, Lines, Report, Stream, Tone, count, escape, escape_path};
pub use crate::loader::Severity;
use crate::plan::Delivery;

/// One problem, with where it is and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GroupCheck {
    /// The group.
    pub group: String,
    /// The delivery mode checked against (given, or detected from the disk).
    pub delivery: Delivery,
    /// What was found, errors first.
    pub findings: Vec<Finding>,
}

/// The report of a `check` run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct CheckReport {
    /// The `$id` of this report's JSON Schema (`clawmd schema` prints it).
    #[serde(rename = "$schema")]
    #[schemars(schema_with = "crate::report::kind::check_report_id")]
    pub schema: &'static str,
    /// The JSON shape version.
    pub version: u32,
    /// Always "check".
    pub command: &'static str,
    /// True when no finding is an error.
    pub ok: bool,
    /// One entry per group.
    pub groups: Vec<GroupCheck>,
}

/// A finding in more groups than this is printed once, with the groups it is in (unless
/// `-v`), so `check --all` over 10,000 groups does not print the same finding 10,000 times.
const GROUP_FINDINGS_OVER: usize = 3;

/// A group's name and one of its findings.
type GroupFinding<'a> = (&'a str, &'a Finding);

/// How many group names a grouped finding lists before "and N more".
const NAMES_SHOWN: usize = 5;

impl Report for CheckReport {
    fn ok(&self) -> bool {
        self.ok
    }

    fn human(&self, detail: Detail) -> Vec<Line> {
        use std::collections::BTreeMap;
        let mut out = Lines::default();
        let shown =
            |finding: &Finding| detail > Detail::Quiet || finding.severity == Severity::Error;
        // (severity, code) -> groups with such a finding, in order.
        let mut by_kind: BTreeMap<(Reverse<Severity>, Code), Vec<GroupFinding>> = BTreeMap::new();
        for group in &self.groups {
            let mut seen = std::collections::BTreeSet::new();
            for finding in group.findings.iter().filter(|f| shown(f)) {
                if seen.insert(finding.code) {
                    by_kind
                        .entry((Reverse(finding.severity), finding.code))
                        .or_default()
                        .push((&group.group, finding));
                }
            }
        }
        let grouped: std::collections::BTreeSet<Code> = match detail {
            Detail::Verbose => Default::default(),
            _ => by_kind
                .iter()
                .filter(|(_, groups)| groups.len() > GROUP_FINDINGS_OVER)
                .map(|((_, code), _)| *code)
                .collect(),
        };
        let (mut errors, mut warnings) = (0usize, 0usize);
        for finding in self.groups.iter().flat_map(|g| &g.findings) {
            match finding.severity {
                Severity::Error => errors += 1,
                Severity::Warning => warnings += 1,
                Severity::Info => {}
            }
        }
        for ((severity, code), groups) in &by_kind {
            if !grouped.contains(code) {
                continue;
            }
            let (stream, tone) = stream_and_tone(severity.0);
            let mut names: Vec<String> = groups
                .iter()
                .take(NAMES_SHOWN)
                .map(|(name, _)| escape(name).into_owned())
                .collect();
            if groups.len() > NAMES_SHOWN {
                names.push(format!("and {} more", count(groups.len() - NAMES_SHOWN)));
            }
            let (first_group, first) = groups[0];
            out.push(
                stream,
                tone,
                format!(
                    "{}[{code}] {} groups: {}",
                    label(severity.0),
                    count(groups.len()),
                    names.join(", ")
                ),
            );
            out.push(
                stream,
                Tone::Note,
                format!(
                    "  e.g. {}: {}: {}",
                    escape(first_group),
                    escape_path(&first.file),
                    escape(&first.message)
                ),
            );
            out.push(stream, Tone::Note, format!("  fix: {}", escape(&first.fix)));
        }
        for group in &self.groups {
            let findings: Vec<&Finding> = group
                .findings
                .iter()
                .filter(|f| shown(f) && !grouped.contains(&f.code))
                .collect();
            if findings.is_empty() {
                if detail == Detail::Verbose {
                    out.out(
                        Tone::Plain,
                        format!("{}: ok ({} delivery)", escape(&group.group), group.delivery),
                    );
                }
                continue;
            }
            // A group with an error goes to stderr as one block.
            let stream = match findings.iter().any(|f| f.severity == Severity::Error) {
                true => Stream::Stderr,
                false => Stream::Stdout,
            };
            out.push(
                stream,
                Tone::Plain,
                format!("{} ({} delivery):", escape(&group.group), group.delivery),
            );
            for finding in findings {
                let (_, tone) = stream_and_tone(finding.severity);
                out.push(
                    stream,
                    tone,
                    format!(
                        "  {}[{}] {}: {}",
                        label(finding.severity),
                        finding.code,
                        escape_path(&finding.file),
                        escape(&finding.message)
                    ),
                );
                out.push(
                    stream,
                    Tone::Note,
                    format!("    fix: {}", escape(&finding.fix)),
                );
            }
        }
        if detail > Detail::Quiet {
            out.out(
                Tone::Plain,
                format!(
                    "{} group(s) checked: {} error(s), {} warning(s)",
                    count(self.groups.len()),
                    count(errors),
                    count(warnings)
                ),
            );
        }
        out.0
    }
}

fn label(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

fn stream_and_tone(severity: Severity) -> (Stream, Tone) {
    match severity {
        Severity::Error => (Stream::Stderr, Tone::Error),
        Severity::Warning => (Stream::Stdout, Tone::Warning),
        Severity::Info => (Stream::Stdout, Tone::Note),
    }
}
