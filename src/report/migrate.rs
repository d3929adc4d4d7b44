//! The report of `migrate`: per group (and `global`), the actions taken, in order.

use serde::Serialize;

use super::{
    Detail, ErrorReport, Line, Lines, REPORT_VERSION, Report, Status, Tone, count, escape,
};

/// One change migrate made (or, in a dry run, would make), as reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum ActionReport {
    /// The legacy `.claude-global.md` link was removed.
    RemoveGlobalLink {
        /// Path relative to the group folder.
        path: String,
    },
    /// The legacy `CLAUDE.md` became `CLAUDE.local.md`.
    MoveLegacy {
        /// Old path (relative to the group folder).
        from: String,
        /// New path.
        to: String,
    },
    /// The legacy `CLAUDE.md` text was appended to the existing `CLAUDE.local.md`.
    MergeLegacy {
        /// Old path.
        from: String,
        /// Where the text now is.
        into: String,
    },
    /// The legacy file's text was already in place (an earlier, interrupted run), or it held
    /// only white space; the file was removed.
    RemoveMigrated {
        /// Path of the removed file.
        path: String,
        /// Where its text already is.
        kept_in: String,
    },
    /// `groups/global/CLAUDE.md` text was appended to `container/CLAUDE.md`.
    MoveGlobal {
        /// Old path.
        from: String,
        /// Where the text now is.
        into: String,
    },
    /// `groups/global/CLAUDE.md` text that the shared base does not hold was kept aside in
    /// clawmd's state folder (not given to any group; `container/CLAUDE.md` is unchanged).
    KeepGlobal {
        /// Old path.
        from: String,
        /// Where the text now is.
        kept_in: String,
    },
    /// The emptied `groups/global/` folder was removed.
    RemoveGlobalDir {
        /// The folder.
        path: String,
    },
    /// A temp file an interrupted run under the same lock made (recorded in its journal) and
    /// left was removed.
    CleanTemp {
        /// The temp file: relative to the group folder when in it, else its host path.
        path: String,
    },
}

/// The result of migrating one group (or `global`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct MigrateGroupReport {
    /// The group name (`global` for the retired shared folder).
    pub group: String,
    /// Changed, unchanged or failed.
    pub status: Status,
    /// What was (or would be) done, in order.
    pub actions: Vec<ActionReport>,
    /// Things left in place that an operator should look at.
    pub warnings: Vec<String>,
    /// Why it failed, when it did.
    pub error: Option<ErrorReport>,
}

/// The report of a `migrate` run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct MigrateReport {
    /// The `$id` of this report's JSON Schema (`clawmd schema` prints it).
    #[serde(rename = "$schema")]
    #[schemars(schema_with = "crate::report::kind::migrate_report_id")]
    pub schema: &'static str,
    /// The JSON shape version.
    pub version: u32,
    /// Always "migrate".
    pub command: &'static str,
    /// Whether nothing was written.
    pub dry_run: bool,
    /// True when nothing failed.
    pub ok: bool,
    /// One entry per group, then `global` when it exists.
    pub groups: Vec<MigrateGroupReport>,
}

impl Report for MigrateReport {
    fn ok(&self) -> bool {
        self.ok
    }

    fn human(&self, detail: Detail) -> Vec<Line> {
        let mut out = Lines::default();
        let mut changed = 0;
        for group in &self.groups {
            let name = escape(&group.group);
            if let Some(error) = &group.error {
                out.err(
                    Tone::Error,
                    format!("{name}: FAILED, left as it was: {}", escape(&error.message)),
                );
            }
            if !group.actions.is_empty() {
                changed += 1;
            }
            if detail == Detail::Quiet {
                continue;
            }
            if !group.actions.is_empty() {
                let verb = if self.dry_run {
                    "would migrate"
                } else {
                    "migrated"
                };
                out.out(Tone::Changed, format!("{name}: {verb}"));
            } else if detail == Detail::Verbose && group.error.is_none() {
                out.out(Tone::Plain, format!("{name}: nothing to migrate"));
            }
            for action in &group.actions {
                out.out(Tone::Plain, format!("  {}", describe(action)));
            }
            for warning in &group.warnings {
                out.err(
                    Tone::Warning,
                    format!("  warning: {name}: {}", escape(warning)),
                );
            }
        }
        if detail > Detail::Quiet {
            out.out(
                Tone::Plain,
                format!(
                    "{} folder(s) checked, {} {}{}",
                    count(self.groups.len()),
                    count(changed),
                    if self.dry_run {
                        "to migrate"
                    } else {
                        "migrated"
                    },
                    if self.dry_run {
                        " (dry run: nothing written)"
                    } else {
                        ""
                    }
                ),
            );
        }
        out.0
    }
}

fn describe(action: &ActionReport) -> String {
    let e = |text: &str| escape(text).into_owned();
    match action {
        ActionReport::RemoveGlobalLink { path } => format!("- {} (legacy link)", e(path)),
        ActionReport::MoveLegacy { from, to } => {
            format!("{} -> {} (hand-written text kept)", e(from), e(to))
        }
        ActionReport::MergeLegacy { from, into } => format!(
            "{} appended to {} below a marker, then removed",
            e(from),
            e(into)
        ),
        ActionReport::RemoveMigrated { path, kept_in } => {
            format!("- {} (its text is already in {})", e(path), e(kept_in))
        }
        ActionReport::MoveGlobal { from, into } => {
            format!("{} appended to {}, then removed", e(from), e(into))
        }
        ActionReport::KeepGlobal { from, kept_in } => format!(
            "{} kept aside in {} (given to no group: see the warning), then removed",
            e(from),
            e(kept_in)
        ),
        ActionReport::RemoveGlobalDir { path } => format!("- {}/ (empty)", e(path)),
        ActionReport::CleanTemp { path } => {
            format!("- {} (left by an interrupted run)", e(path))
        }
    }
}

impl MigrateReport {
    /// Builds the report, computing `ok`.
    pub fn new(dry_run: bool, groups: Vec<MigrateGroupReport>) -> Self {
        MigrateReport {
            schema: crate::report::SchemaKind::MigrateReport.id(),
            version: REPORT_VERSION,
            command: "migrate",
            dry_run,
            ok: groups.iter().all(|group| group.error.is_none()),
            groups,
        }
    }
}
