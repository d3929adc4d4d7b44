//! `migrate`: the one-time cutover of legacy groups, safe to run at every start-up.
//!
//! * A `.claude-global.md` symlink in a group is removed.
//! * A hand-written `CLAUDE.md` (one without clawmd's header) becomes `CLAUDE.local.md`; when a
//!   `CLAUDE.local.md` already exists, the legacy text is appended to it below a marker.
//! * `groups/global/CLAUDE.md` text is appended to `container/CLAUDE.md` (the new shared base),
//!   then the old file is removed, and the folder too if nothing else is left in it.
//!
//! Nothing is ever deleted before its text is durably somewhere else, and a text already
//! present where it would go is not added twice, so a run killed at any point and run again
//! ends in the same state with nothing lost. A second run does nothing.

use std::time::Duration;

use serde::Serialize;

use crate::compose::list_groups;
use crate::error::{Error, GroupError};
use crate::fsops::{self, FsError, NodeKind, SafeDir};
use crate::layout::{GLOBAL_GROUP, Layout, names};
use crate::plan::is_composed;
use crate::report::{ErrorReport, REPORT_VERSION, Report, Status};

/// The largest legacy file migrate moves; a larger one is refused, never truncated.
pub const MAX_LEGACY_BYTES: u64 = 64 * 1024 * 1024;

/// The line written between a group's own `CLAUDE.local.md` text and legacy text appended to it.
pub const LEGACY_MARKER: &str =
    "<!-- clawmd migrate: the text below was this group's hand-written CLAUDE.md -->";

/// The line written in `container/CLAUDE.md` above text moved from `groups/global/CLAUDE.md`.
pub const GLOBAL_MARKER: &str =
    "<!-- clawmd migrate: the text below was groups/global/CLAUDE.md -->";

/// One change migrate makes (or, in a dry run, would make).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum Action {
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
    /// The emptied `groups/global/` folder was removed.
    RemoveGlobalDir {
        /// The folder.
        path: String,
    },
    /// A temp file left by an interrupted run was removed.
    CleanTemp {
        /// The temp file.
        path: String,
    },
}

/// The result of migrating one group (or `global`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MigrateGroupReport {
    /// The group name (`global` for the retired shared folder).
    pub group: String,
    /// Changed, unchanged or failed.
    pub status: Status,
    /// What was (or would be) done, in order.
    pub actions: Vec<Action>,
    /// Things left in place that an operator should look at.
    pub warnings: Vec<String>,
    /// Why it failed, when it did.
    pub error: Option<ErrorReport>,
}

/// The report of a `migrate` run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MigrateReport {
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

    fn to_human(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let mut changed = 0;
        for group in &self.groups {
            if let Some(error) = &group.error {
                let _ = writeln!(
                    out,
                    "{}: FAILED, left as it was: {}",
                    group.group, error.message
                );
            }
            if !group.actions.is_empty() {
                changed += 1;
                let verb = if self.dry_run {
                    "would migrate"
                } else {
                    "migrated"
                };
                let _ = writeln!(out, "{}: {verb}", group.group);
            }
            for action in &group.actions {
                let _ = writeln!(out, "  {}", describe(action));
            }
            for warning in &group.warnings {
                let _ = writeln!(out, "  warning: {warning}");
            }
        }
        let _ = writeln!(
            out,
            "{} folder(s) checked, {changed} {}{}",
            self.groups.len(),
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
        );
        out
    }
}

fn describe(action: &Action) -> String {
    match action {
        Action::RemoveGlobalLink { path } => format!("- {path} (legacy link)"),
        Action::MoveLegacy { from, to } => format!("{from} -> {to} (hand-written text kept)"),
        Action::MergeLegacy { from, into } => {
            format!("{from} appended to {into} below a marker, then removed")
        }
        Action::RemoveMigrated { path, kept_in } => {
            format!("- {path} (its text is already in {kept_in})")
        }
        Action::MoveGlobal { from, into } => format!("{from} appended to {into}, then removed"),
        Action::RemoveGlobalDir { path } => format!("- {path}/ (empty)"),
        Action::CleanTemp { path } => format!("- {path} (left by an interrupted run)"),
    }
}

/// Migrates every group folder and the retired `global` folder.
pub fn migrate(
    layout: &Layout,
    dry_run: bool,
    lock_timeout: Duration,
) -> Result<MigrateReport, Error> {
    let groups = list_groups(layout).map_err(Error::Groups)?;
    let mut reports: Vec<MigrateGroupReport> = groups
        .iter()
        .map(|group| {
            run_one(group, || {
                migrate_group(layout, group, dry_run, lock_timeout)
            })
        })
        .collect();
    let global = layout.group_dir(GLOBAL_GROUP);
    if std::fs::symlink_metadata(&global).is_ok() {
        reports.push(run_one(GLOBAL_GROUP, || {
            migrate_global(layout, dry_run, lock_timeout)
        }));
    }
    let ok = reports.iter().all(|r| r.error.is_none());
    Ok(MigrateReport {
        version: REPORT_VERSION,
        command: "migrate",
        dry_run,
        ok,
        groups: reports,
    })
}

fn run_one(
    group: &str,
    work: impl FnOnce() -> Result<(Vec<Action>, Vec<String>), GroupError>,
) -> MigrateGroupReport {
    match work() {
        Ok((actions, warnings)) => MigrateGroupReport {
            group: group.to_owned(),
            status: if actions.is_empty() {
                Status::Unchanged
            } else {
                Status::Changed
            },
            actions,
            warnings,
            error: None,
        },
        Err(err) => {
            tracing::error!(group, "{err}");
            MigrateGroupReport {
                group: group.to_owned(),
                status: Status::Failed,
                actions: Vec::new(),
                warnings: Vec::new(),
                error: Some((&err).into()),
            }
        }
    }
}

fn migrate_group(
    layout: &Layout,
    group: &str,
    dry_run: bool,
    lock_timeout: Duration,
) -> Result<(Vec<Action>, Vec<String>), GroupError> {
    let group_dir = layout.checked_group_dir(group)?;
    let _lock = (!dry_run)
        .then(|| fsops::lock(&layout.lock_file(group), lock_timeout))
        .transpose()?;
    let dir = SafeDir::open(&group_dir)?;
    let mut actions = clean_temps(&dir, dry_run, "")?;
    let mut warnings = Vec::new();

    match dir.kind(names::LEGACY_GLOBAL_LINK)? {
        NodeKind::Symlink => {
            if !dry_run {
                dir.remove(names::LEGACY_GLOBAL_LINK)?;
                dir.sync()?;
            }
            actions.push(Action::RemoveGlobalLink { path: names::LEGACY_GLOBAL_LINK.to_owned() });
        }
        NodeKind::Missing => {}
        other => warnings.push(format!(
            "{} is {}, not a legacy link; left in place (move any text you need into CLAUDE.local.md, then delete it)",
            names::LEGACY_GLOBAL_LINK,
            other.describe()
        )),
    }

    let legacy = read_regular(&dir, names::CLAUDE_MD)?;
    if let Some(text) = legacy.filter(|text| !is_composed(text)) {
        actions.push(move_text(
            &dir,
            names::CLAUDE_MD,
            &dir,
            names::CLAUDE_LOCAL_MD,
            &text,
            LEGACY_MARKER,
            dry_run,
            (
                names::CLAUDE_MD.to_owned(),
                names::CLAUDE_LOCAL_MD.to_owned(),
            ),
        )?);
    }
    Ok((actions, warnings))
}

fn migrate_global(
    layout: &Layout,
    dry_run: bool,
    lock_timeout: Duration,
) -> Result<(Vec<Action>, Vec<String>), GroupError> {
    let _lock = (!dry_run)
        .then(|| fsops::lock(&layout.lock_file(GLOBAL_GROUP), lock_timeout))
        .transpose()?;
    let global = match SafeDir::open(&layout.group_dir(GLOBAL_GROUP)) {
        // Another migrate retired it while this one waited for the lock: nothing left to do.
        Err(FsError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok((Vec::new(), Vec::new()));
        }
        other => other?,
    };
    let mut actions = clean_temps(&global, dry_run, "")?;
    let mut warnings = Vec::new();
    match global.kind(names::CLAUDE_MD)? {
        NodeKind::Missing => {}
        NodeKind::File => {
            let text = global
                .read_file(names::CLAUDE_MD, MAX_LEGACY_BYTES)?
                .unwrap_or_default();
            let container = open_or_create_dir(&layout.container_dir, dry_run)?;
            if let Some(container) = &container {
                // Only this step writes in container/, under the global lock: a temp file
                // there was left by an interrupted run of it.
                let prefix = format!("{}/", container.path().display());
                actions.extend(clean_temps(container, dry_run, &prefix)?);
            }
            let action = match &container {
                Some(container) => move_text(
                    &global,
                    names::CLAUDE_MD,
                    container,
                    names::CLAUDE_MD,
                    &text,
                    GLOBAL_MARKER,
                    dry_run,
                    (
                        display_path(&global, names::CLAUDE_MD),
                        display_path(container, names::CLAUDE_MD),
                    ),
                )?,
                None => Action::MoveGlobal {
                    from: display_path(&global, names::CLAUDE_MD),
                    into: layout.shared_base_source().display().to_string(),
                },
            };
            actions.push(action);
        }
        NodeKind::Symlink => return Err(symlink_refused(&global, names::CLAUDE_MD)),
        NodeKind::Dir | NodeKind::Other => warnings.push(format!(
            "{} is not a regular file; left in place",
            display_path(&global, names::CLAUDE_MD)
        )),
    }
    let left: Vec<String> = global
        .list()?
        .into_iter()
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !(dry_run && n == names::CLAUDE_MD))
        .collect();
    if left.is_empty() {
        let parent = SafeDir::open(&layout.groups_dir)?;
        if dry_run || parent.remove_empty_dir(GLOBAL_GROUP)? {
            actions.push(Action::RemoveGlobalDir {
                path: global.path().display().to_string(),
            });
        }
    } else {
        warnings.push(format!(
            "{} still holds {}; left in place (clawmd never deletes files it did not migrate)",
            global.path().display(),
            left.join(", ")
        ));
    }
    Ok((actions, warnings))
}

/// Moves `text` (the content of `from_name` in `from`) into `to_name` in `to`: created when
/// missing, appended below `marker` when it exists and does not hold the text yet. Only then
/// is the source removed.
#[allow(clippy::too_many_arguments)]
fn move_text(
    from: &SafeDir,
    from_name: &str,
    to: &SafeDir,
    to_name: &str,
    text: &[u8],
    marker: &str,
    dry_run: bool,
    labels: (String, String),
) -> Result<Action, GroupError> {
    let (from_path, to_path) = labels;
    let existing = read_regular(to, to_name)?;
    let action = match &existing {
        None => Action::MoveLegacy {
            from: from_path,
            to: to_path,
        },
        Some(existing) if contains(existing, text.trim_ascii()) => Action::RemoveMigrated {
            path: from_path,
            kept_in: to_path,
        },
        Some(_) => Action::MergeLegacy {
            from: from_path,
            into: to_path,
        },
    };
    let action = match action {
        Action::MergeLegacy { from, into } if marker == GLOBAL_MARKER => {
            Action::MoveGlobal { from, into }
        }
        Action::MoveLegacy { from, to } if marker == GLOBAL_MARKER => {
            Action::MoveGlobal { from, into: to }
        }
        other => other,
    };
    if dry_run {
        return Ok(action);
    }
    match &existing {
        None => {
            if !to.create_new_file(to_name, text)? {
                return Err(FsError::Unsafe {
                    path: to.path().join(to_name),
                    found: "a file created meanwhile by someone else".to_owned(),
                    expected: "no file",
                    fix: "run migrate again".to_owned(),
                }
                .into());
            }
        }
        Some(existing) if contains(existing, text.trim_ascii()) => {}
        Some(existing) => to.write_file(to_name, &appended(existing, marker, text))?,
    }
    // The text is durable in its new place before the old file goes.
    to.sync()?;
    from.remove(from_name)?;
    from.sync()?;
    Ok(action)
}

/// `existing`, a blank line, `marker`, then `text`.
pub fn appended(existing: &[u8], marker: &str, text: &[u8]) -> Vec<u8> {
    let mut out = existing.to_vec();
    if !out.is_empty() && !out.ends_with(b"\n") {
        out.push(b'\n');
    }
    if !out.is_empty() {
        out.push(b'\n');
    }
    out.extend_from_slice(marker.as_bytes());
    out.push(b'\n');
    out.extend_from_slice(text);
    out
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

fn clean_temps(dir: &SafeDir, dry_run: bool, prefix: &str) -> Result<Vec<Action>, GroupError> {
    if dry_run {
        return Ok(Vec::new());
    }
    Ok(dir
        .clear_stale_temps()?
        .into_iter()
        .map(|name| Action::CleanTemp {
            path: format!("{prefix}{name}"),
        })
        .collect())
}

fn open_or_create_dir(
    path: &std::path::Path,
    dry_run: bool,
) -> Result<Option<SafeDir>, GroupError> {
    if !dry_run {
        fsops::create_dir_all(path)?;
    }
    match SafeDir::open(path) {
        Ok(dir) => Ok(Some(dir)),
        Err(FsError::Io { source, .. })
            if dry_run && source.kind() == std::io::ErrorKind::NotFound =>
        {
            Ok(None)
        }
        Err(err) => Err(err.into()),
    }
}

/// The bytes of the regular file `name`; `None` when missing; an error for anything else.
fn read_regular(dir: &SafeDir, name: &str) -> Result<Option<Vec<u8>>, GroupError> {
    match dir.kind(name)? {
        NodeKind::Missing => Ok(None),
        NodeKind::File => Ok(dir.read_file(name, MAX_LEGACY_BYTES)?),
        NodeKind::Symlink => Err(symlink_refused(dir, name)),
        other => Err(FsError::Unsafe {
            path: dir.path().join(name),
            found: other.describe().to_owned(),
            expected: "a regular file",
            fix: "move it aside".to_owned(),
        }
        .into()),
    }
}

fn display_path(dir: &SafeDir, name: &str) -> String {
    dir.path().join(name).display().to_string()
}

fn symlink_refused(dir: &SafeDir, name: &str) -> GroupError {
    FsError::Unsafe {
        path: dir.path().join(name),
        found: "a symlink".to_owned(),
        expected: "a regular file",
        fix: "replace the link with the text it should hold (clawmd never writes through a link)"
            .to_owned(),
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appended_separates_with_a_marker() {
        assert_eq!(appended(b"mine", "M", b"old\n"), b"mine\n\nM\nold\n");
        assert_eq!(appended(b"mine\n", "M", b"old"), b"mine\n\nM\nold");
        assert_eq!(appended(b"", "M", b"old"), b"M\nold");
    }

    #[test]
    fn containment_is_byte_exact() {
        assert!(contains(b"abc", b"b"));
        assert!(contains(b"abc", b""));
        assert!(!contains(b"abc", b"abcd"));
    }
}
