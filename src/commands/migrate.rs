//! `migrate`: the one-time cutover of legacy groups, safe to run at every start-up.
//!
//! * A `.claude-global.md` symlink in a group is removed.
//! * A hand-written `CLAUDE.md` (one without clawmd's or nanoclaw's generated-file header)
//!   becomes `CLAUDE.local.md`; when a `CLAUDE.local.md` already exists, the legacy text is
//!   appended to it below a marker. Its `@./.claude-global.md` line (the legacy link, which
//!   migrate removes) is left out.
//! * `groups/global/CLAUDE.md` text that the shared base (`container/CLAUDE.md`) does not hold
//!   is kept aside in clawmd's state folder (`<state>/legacy/`) and reported: the shared base
//!   belongs to the deployment's owner (nanoclaw's upstream updates it by git merge), and the
//!   old global text is often one group's persona ("You are Main"), not what every group should
//!   read. With `--append-global` it is appended to the shared base instead. Then the old file
//!   is removed, and the folder too if nothing else is left in it.
//! * A `CLAUDE.md` that nanoclaw's own composer generated (its `<!-- Composed at spawn` header)
//!   is nobody's text: it is left to compose, which replaces it.
//!
//! Each folder is migrated in three steps, chezmoi style: [`observe_group`] (or
//! [`observe_global`]) reads what is there, [`plan_group`] (or [`plan_global`]) computes the
//! [`Action`]s from that alone (pure), and [`apply_group`] (or [`apply_global`]) performs them
//! through [`fsops`] (the one module that writes). A dry run stops before
//! applying.
//!
//! Nothing is ever deleted before its text is durably somewhere else, and a text already
//! present where it would go (whole, at line boundaries) is not added twice, so a run killed
//! at any point and run again ends in the same state with nothing lost. A second run does
//! nothing. Legacy text is appended to an existing `CLAUDE.local.md` in place (`O_APPEND`), so
//! an agent appending to its memory at the same moment loses nothing.

use std::path::Path;
use std::time::Duration;

use crate::disk::deployment::{MAX_SOURCE_BYTES, checked_group_dir, list_groups};
use crate::disk::fsops::{self, FsError, GroupLock, Leftover, LockWait, SafeDir};
use crate::disk::state;
use crate::error::{Error, GroupError};
use crate::file_kind::FileKind;
use crate::input::layout::{GLOBAL_GROUP, Layout};
use crate::input::names;
use crate::plan::{PLACEHOLDER_START, has_nanoclaw_header, is_composed, short_hash};
use crate::progress::Progress;
use crate::report::{ActionReport, MigrateGroupReport, MigrateReport, Status};

/// The largest legacy group file migrate moves; a larger one is refused, never truncated.
pub const MAX_LEGACY_BYTES: u64 = 64 * 1024 * 1024;

/// The largest `groups/global/CLAUDE.md` migrate moves, and the largest `container/CLAUDE.md`
/// it leaves: the shared-base limit of compose, so a migrated deployment always composes.
pub const MAX_GLOBAL_BYTES: u64 = MAX_SOURCE_BYTES;

/// The line written between a group's own `CLAUDE.local.md` text and legacy text appended to it.
pub const LEGACY_MARKER: &str =
    "<!-- clawmd migrate: the text below was this group's hand-written CLAUDE.md -->";

/// The line written in `container/CLAUDE.md` above text moved from `groups/global/CLAUDE.md`.
pub const GLOBAL_MARKER: &str =
    "<!-- clawmd migrate: the text below was groups/global/CLAUDE.md -->";

/// One change migrate makes, computed by a plan function from what it observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Remove a temp file an interrupted run recorded in the lock's journal and left.
    CleanTemp {
        /// The temp.
        temp: Leftover,
        /// How the report names it.
        shown: String,
    },
    /// Remove the legacy `.claude-global.md` link of a group.
    RemoveGlobalLink,
    /// Create the destination holding `text` (it does not exist), then remove the source.
    Move {
        /// The text.
        text: Vec<u8>,
    },
    /// Append `text` below a marker to the existing destination, then remove the source.
    Append {
        /// The text.
        text: Vec<u8>,
        /// What the destination held when observed (for the shared base, which is replaced
        /// atomically; a group's `CLAUDE.local.md` is appended to in place).
        existing: Vec<u8>,
    },
    /// The source's text is already in the destination: remove the source.
    RemoveMigrated,
    /// Keep `text` aside in the state folder as `name` (`groups/global` text the shared base
    /// does not hold), then remove the source.
    KeepAside {
        /// The text.
        text: Vec<u8>,
        /// Its file name in `<state>/legacy/`.
        name: String,
    },
    /// Remove the emptied `groups/global` folder.
    RemoveGlobalDir,
}

/// What a group folder holds that migrate cares about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupState {
    /// Temp files an interrupted run under the group's lock left (from its journal), each
    /// with the name the report gives it.
    pub temps: Vec<(Leftover, String)>,
    /// What `.claude-global.md` is (`None`: missing).
    pub global_link: Option<FileKind>,
    /// The text of a legacy (not composed) `CLAUDE.md`.
    pub legacy: Option<Vec<u8>>,
    /// The text of `CLAUDE.local.md`, read only when there is legacy text.
    pub local: Option<Vec<u8>>,
}

/// What `groups/global` and `container/` hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobalState {
    /// Temp files an interrupted run under the `global` lock left, in `groups/global` or
    /// `container/` (from its journal), each with the name the report gives it.
    pub temps: Vec<(Leftover, String)>,
    /// What `groups/global/CLAUDE.md` is (`None`: missing).
    pub claude_md: Option<FileKind>,
    /// That text.
    pub text: Option<Vec<u8>>,
    /// Other entries of `groups/global` (never deleted).
    pub others: Vec<String>,
    /// The text of `container/CLAUDE.md` (read only when there is text to move).
    pub shared_base: Option<Vec<u8>>,
}

/// How to migrate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigrateOptions {
    /// Only plan.
    pub dry_run: bool,
    /// How long to wait for a group's lock.
    pub lock_timeout: Duration,
    /// Append `groups/global/CLAUDE.md` text the shared base lacks to `container/CLAUDE.md`
    /// (else it is kept aside in the state folder).
    pub append_global: bool,
}

/// Migrates every group folder and the retired `global` folder; with `dry_run`, only plans.
/// Global text the shared base lacks is kept aside ([`migrate_with`] can append it instead).
pub fn migrate(
    layout: &Layout,
    dry_run: bool,
    lock_timeout: Duration,
) -> Result<MigrateReport, Error> {
    migrate_with(
        layout,
        &MigrateOptions {
            dry_run,
            lock_timeout,
            append_global: false,
        },
    )
}

/// [`migrate`] with every option.
pub fn migrate_with(layout: &Layout, options: &MigrateOptions) -> Result<MigrateReport, Error> {
    migrate_with_progress(layout, options, &())
}

/// [`migrate_with`], telling `progress` when a folder's lock is held by another run.
pub fn migrate_with_progress(
    layout: &Layout,
    options: &MigrateOptions,
    progress: &dyn Progress,
) -> Result<MigrateReport, Error> {
    let MigrateOptions {
        dry_run,
        lock_timeout,
        append_global,
    } = *options;
    let groups = list_groups(layout).map_err(Error::Groups)?;
    let mut reports: Vec<MigrateGroupReport> = groups
        .iter()
        .map(|group| {
            run_one(group, || {
                migrate_group(layout, group, dry_run, lock_timeout, progress)
            })
        })
        .collect();
    let global = layout.group_dir(GLOBAL_GROUP);
    // Also when `groups/global` is gone but a run that retired it was interrupted: its
    // journal is settled (and any temp it left in container/ removed).
    if fs_err::symlink_metadata(&global).is_ok() || state::may_have_leftovers(layout, GLOBAL_GROUP)
    {
        reports.push(run_one(GLOBAL_GROUP, || {
            migrate_global(layout, dry_run, lock_timeout, append_global, progress)
        }));
    }
    Ok(MigrateReport::new(dry_run, reports))
}

type Outcome = (Vec<ActionReport>, Vec<String>);

fn run_one(group: &str, work: impl FnOnce() -> Result<Outcome, GroupError>) -> MigrateGroupReport {
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
            tracing::error!(group, "{}", crate::error::chain_text(&err));
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

/// Takes the lock `lock` (a group's, or `global`'s) unless this is a dry run, telling
/// `progress` when another run holds it for more than a moment ([`LockWait::up_to`]).
fn lock_unless_dry_run(
    layout: &Layout,
    lock: &str,
    dry_run: bool,
    timeout: Duration,
    progress: &dyn Progress,
) -> Result<Option<GroupLock>, FsError> {
    if dry_run {
        return Ok(None);
    }
    let on_wait = |path: &Path| progress.waiting_for_lock(lock, path);
    fsops::lock(&layout.lock_file(lock), LockWait::up_to(timeout, &on_wait)).map(Some)
}

fn migrate_group(
    layout: &Layout,
    group: &str,
    dry_run: bool,
    lock_timeout: Duration,
    progress: &dyn Progress,
) -> Result<Outcome, GroupError> {
    let group_dir = checked_group_dir(layout, group)?;
    let _lock = lock_unless_dry_run(layout, group, dry_run, lock_timeout, progress)?;
    let mut dir = SafeDir::open(&group_dir)?;
    let (actions, warnings) = plan_group(&observe_group(layout, group, &dir)?);
    if !dry_run {
        let journal = state::journal(layout, group)?;
        dir.record_temps_in(&journal);
        apply_group(&dir, &actions)?;
        journal.settle()?;
    }
    Ok((actions.iter().map(report_group_action).collect(), warnings))
}

/// The temps runs under the lock `lock` recorded and left, each with the name the report
/// gives it (relative to `dir` when in it).
fn leftovers(
    layout: &Layout,
    lock: &str,
    dir: &Path,
) -> Result<Vec<(Leftover, String)>, GroupError> {
    if !state::may_have_leftovers(layout, lock) {
        return Ok(Vec::new());
    }
    Ok(state::leftovers(layout, lock)?
        .into_iter()
        .map(|leftover| {
            let shown = state::describe_leftover(&leftover, dir);
            (leftover, shown)
        })
        .collect())
}

/// Reads what migrate needs to know about the folder `dir` of `group` (never through a link,
/// never opening anything but a regular file).
pub fn observe_group(
    layout: &Layout,
    group: &str,
    dir: &SafeDir,
) -> Result<GroupState, GroupError> {
    // What clawmd or nanoclaw's composer generated, or the placeholder of the mount point
    // (edited or not), is compose's business, not legacy text.
    let legacy = read_regular(dir, names::CLAUDE_MD, MAX_LEGACY_BYTES)?.filter(|text| {
        !is_composed(text)
            && !has_nanoclaw_header(text)
            && !text.starts_with(PLACEHOLDER_START.as_bytes())
    });
    let local = match legacy {
        Some(_) => read_regular(dir, names::CLAUDE_LOCAL_MD, MAX_LEGACY_BYTES)?,
        None => None,
    };
    Ok(GroupState {
        temps: leftovers(layout, group, dir.path())?,
        global_link: dir.kind(names::LEGACY_GLOBAL_LINK)?,
        legacy,
        local,
    })
}

/// The actions that migrate a group in `state`, and warnings about what is left alone. Pure.
pub fn plan_group(state: &GroupState) -> (Vec<Action>, Vec<String>) {
    let mut actions: Vec<Action> = clean(&state.temps);
    let mut warnings = Vec::new();
    match state.global_link {
        Some(FileKind::Symlink) => actions.push(Action::RemoveGlobalLink),
        None => {}
        Some(other) => warnings.push(format!(
            "{} is {}, not a legacy link; left in place (move any text you need into CLAUDE.local.md, then delete it)",
            names::LEGACY_GLOBAL_LINK,
            other.describe()
        )),
    }
    if let Some(text) = &state.legacy {
        actions.push(move_into(
            &without_global_import(text),
            state.local.as_deref(),
        ));
    }
    (actions, warnings)
}

/// `text` without its `@./.claude-global.md` lines: the legacy link they import is removed by
/// the same migration, so in `CLAUDE.local.md` they would be imports of nothing.
fn without_global_import(text: &[u8]) -> Vec<u8> {
    let import = format!("@./{}", names::LEGACY_GLOBAL_LINK);
    let mut out = Vec::with_capacity(text.len());
    for line in text.split_inclusive(|b| *b == b'\n') {
        if line.trim_ascii() != import.as_bytes() {
            out.extend_from_slice(line);
        }
    }
    out
}

/// Moving `text` into a destination that holds `existing` (`None`: missing).
fn move_into(text: &[u8], existing: Option<&[u8]>) -> Action {
    match existing {
        None => Action::Move {
            text: text.to_vec(),
        },
        Some(existing) if holds(existing, text) => Action::RemoveMigrated,
        Some(existing) => Action::Append {
            text: text.to_vec(),
            existing: existing.to_vec(),
        },
    }
}

/// Performs a group's actions. The caller holds the group's lock.
pub fn apply_group(dir: &SafeDir, actions: &[Action]) -> Result<(), GroupError> {
    for action in actions {
        match action {
            Action::CleanTemp { temp, .. } => {
                temp.remove()?;
            }
            Action::RemoveGlobalLink => dir.remove(names::LEGACY_GLOBAL_LINK)?,
            Action::Move { text } => {
                if !dir.create_new_file(names::CLAUDE_LOCAL_MD, text)? {
                    // The agent created its CLAUDE.local.md since it was observed: the text
                    // goes below a marker, as if the file had been there then.
                    append_legacy(dir, text)?;
                }
            }
            Action::Append { text, .. } => append_legacy(dir, text)?,
            Action::RemoveMigrated | Action::RemoveGlobalDir | Action::KeepAside { .. } => {}
        }
        // The text is durable in its new place before the old file goes.
        dir.sync()?;
        if matches!(
            action,
            Action::Move { .. } | Action::Append { .. } | Action::RemoveMigrated
        ) {
            dir.remove(names::CLAUDE_MD)?;
            dir.sync()?;
        }
    }
    Ok(())
}

/// Appends legacy text below the marker to the group's `CLAUDE.local.md`, in place.
fn append_legacy(dir: &SafeDir, text: &[u8]) -> Result<(), GroupError> {
    dir.append_file(names::CLAUDE_LOCAL_MD, |last| {
        below_marker(last, LEGACY_MARKER, text)
    })?;
    Ok(())
}

fn report_group_action(action: &Action) -> ActionReport {
    let (legacy, local) = (
        names::CLAUDE_MD.to_owned(),
        names::CLAUDE_LOCAL_MD.to_owned(),
    );
    match action {
        Action::CleanTemp { shown, .. } => ActionReport::CleanTemp {
            path: shown.clone(),
        },
        Action::RemoveGlobalLink => ActionReport::RemoveGlobalLink {
            path: names::LEGACY_GLOBAL_LINK.to_owned(),
        },
        Action::Move { .. } => ActionReport::MoveLegacy {
            from: legacy,
            to: local,
        },
        Action::Append { .. } => ActionReport::MergeLegacy {
            from: legacy,
            into: local,
        },
        // (`RemoveGlobalDir` and `KeepAside` are never planned for a group.)
        Action::RemoveMigrated | Action::RemoveGlobalDir | Action::KeepAside { .. } => {
            ActionReport::RemoveMigrated {
                path: legacy,
                kept_in: local,
            }
        }
    }
}

fn migrate_global(
    layout: &Layout,
    dry_run: bool,
    lock_timeout: Duration,
    append: bool,
    progress: &dyn Progress,
) -> Result<Outcome, GroupError> {
    let _lock = lock_unless_dry_run(layout, GLOBAL_GROUP, dry_run, lock_timeout, progress)?;
    let mut global = match SafeDir::open(&layout.group_dir(GLOBAL_GROUP)) {
        // Retired already (by another migrate while this one waited for the lock, or by an
        // interrupted one): only what that run left is cleaned.
        Err(FsError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            let temps = leftovers(layout, GLOBAL_GROUP, &layout.group_dir(GLOBAL_GROUP))?;
            let actions = clean(&temps);
            let reports = actions
                .iter()
                .map(|action| report_global_action(layout, action))
                .collect();
            if !dry_run {
                for action in &actions {
                    if let Action::CleanTemp { temp, .. } = action {
                        temp.remove()?;
                    }
                }
                state::journal(layout, GLOBAL_GROUP)?.settle()?;
            }
            return Ok((reports, Vec::new()));
        }
        other => other?,
    };
    let state = observe_global(layout, &global)?;
    let (actions, warnings) = plan_global(&state, layout, append)?;
    let reports = actions
        .iter()
        .map(|action| report_global_action(layout, action))
        .collect();
    if dry_run {
        return Ok((reports, warnings));
    }
    let journal = state::journal(layout, GLOBAL_GROUP)?;
    global.record_temps_in(&journal);
    let done = apply_global(layout, &global, &actions, &journal)?;
    journal.settle()?;
    let reports = actions
        .iter()
        .zip(reports)
        .filter(|(action, _)| **action != Action::RemoveGlobalDir || done.removed_dir)
        .map(|(_, report)| report)
        .collect();
    Ok((reports, warnings))
}

/// Reads what migrate needs to know about `groups/global` and, only when there is text to move,
/// the `container/` folder (missing is fine).
pub fn observe_global(layout: &Layout, global: &SafeDir) -> Result<GlobalState, GroupError> {
    let container_dir = &layout.container_dir;
    let temps = leftovers(layout, GLOBAL_GROUP, global.path())?;
    // (A temp in `groups/global` is shown by its name alone.)
    let global_temp = |name: &str| temps.iter().any(|(_, shown)| shown == name);
    let claude_md = global.kind(names::CLAUDE_MD)?;
    let text = match claude_md {
        Some(FileKind::File) => read_regular(global, names::CLAUDE_MD, MAX_GLOBAL_BYTES)?,
        Some(FileKind::Symlink) => return Err(symlink_refused(global, names::CLAUDE_MD)),
        _ => None,
    };
    let others = global
        .list()?
        .into_iter()
        .map(|name| name.to_string_lossy().into_owned())
        .filter(|name| !(global_temp(name) || (name == names::CLAUDE_MD && text.is_some())))
        .collect();
    let container = match &text {
        None => None,
        Some(_) => match SafeDir::open(container_dir) {
            Err(FsError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                None
            }
            other => Some(other?),
        },
    };
    let shared_base = match &container {
        Some(container) => read_regular(container, names::CLAUDE_MD, MAX_GLOBAL_BYTES)?,
        None => None,
    };
    Ok(GlobalState {
        temps,
        claude_md,
        text,
        others,
        shared_base,
    })
}

/// The actions that retire `groups/global` in `state`. Pure; refuses a move that would leave a
/// shared base larger than compose reads.
pub fn plan_global(
    state: &GlobalState,
    layout: &Layout,
    append: bool,
) -> Result<(Vec<Action>, Vec<String>), GroupError> {
    let global_dir = layout.group_dir(GLOBAL_GROUP);
    let mut actions = clean(&state.temps);
    let mut warnings = Vec::new();
    let held = |text: &[u8]| {
        state
            .shared_base
            .as_deref()
            .is_some_and(|base| holds(base, text))
    };
    if let Some(text) = state.text.as_deref().filter(|text| !append && !held(text)) {
        let name = legacy_global_name(text);
        warnings.push(format!(
            "{} holds text that {} does not: it was kept in {} and is not given to any group; {} is left as it is (fix: put what every group should read into it, or a group's own text into that group's CLAUDE.local.md; to append it to the shared base instead, run `clawmd migrate --append-global` before the first migrate)",
            global_dir.join(names::CLAUDE_MD).display(),
            layout.shared_base_source().display(),
            layout.legacy_dir().join(&name).display(),
            layout.shared_base_source().display(),
        ));
        actions.push(Action::KeepAside {
            text: text.to_vec(),
            name,
        });
    } else if let Some(text) = &state.text {
        let action = move_into(text, state.shared_base.as_deref());
        let size = match &action {
            Action::Move { text } => text.len(),
            Action::Append { text, existing } => appended(existing, GLOBAL_MARKER, text).len(),
            _ => 0,
        } as u64;
        if size > MAX_GLOBAL_BYTES {
            return Err(FsError::TooLarge {
                path: layout.shared_base_source(),
                limit: MAX_GLOBAL_BYTES,
                fix: format!(
                    "moving {} into it would make it {size} bytes, and compose reads at most {MAX_GLOBAL_BYTES}; shorten one of the two, then run migrate again (nothing was changed)",
                    global_dir.join(names::CLAUDE_MD).display()
                ),
            }
            .into());
        }
        actions.push(action);
    } else if state.claude_md.is_some() {
        warnings.push(format!(
            "{} is not a regular file; left in place",
            global_dir.join(names::CLAUDE_MD).display()
        ));
    }
    if state.others.is_empty() {
        actions.push(Action::RemoveGlobalDir);
    } else {
        warnings.push(format!(
            "{} still holds {}; left in place (clawmd never deletes files it did not migrate)",
            global_dir.display(),
            state.others.join(", ")
        ));
    }
    Ok((actions, warnings))
}

/// The file name under `<state>/legacy/` of `groups/global/CLAUDE.md` text kept aside: the
/// same text always gets the same name, so it is kept once.
pub fn legacy_global_name(text: &[u8]) -> String {
    format!("global-CLAUDE.md.{}", short_hash(text))
}

/// What [`apply_global`] did beyond the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GlobalDone {
    /// Whether `groups/global` was removed (something may have appeared in it meanwhile).
    pub removed_dir: bool,
}

/// Performs the actions that retire `groups/global`. The caller holds the global lock.
pub fn apply_global(
    layout: &Layout,
    global: &SafeDir,
    actions: &[Action],
    journal: &std::sync::Arc<fsops::TempJournal>,
) -> Result<GlobalDone, GroupError> {
    let mut done = GlobalDone { removed_dir: false };
    let mut container: Option<SafeDir> = None;
    let open_container = |container: &mut Option<SafeDir>| -> Result<(), GroupError> {
        if container.is_none() {
            fsops::create_dir_all(&layout.container_dir)?;
            let mut opened = SafeDir::open(&layout.container_dir)?;
            opened.record_temps_in(journal);
            *container = Some(opened);
        }
        Ok(())
    };
    for action in actions {
        match action {
            Action::CleanTemp { temp, .. } => {
                temp.remove()?;
            }
            Action::Move { .. } | Action::Append { .. } | Action::RemoveMigrated => {
                open_container(&mut container)?;
                if let Some(container) = &container {
                    match action {
                        Action::Move { text } => create_new(container, names::CLAUDE_MD, text)?,
                        Action::Append { text, existing } => container.write_file(
                            names::CLAUDE_MD,
                            &appended(existing, GLOBAL_MARKER, text),
                        )?,
                        _ => {}
                    }
                    // The text is durable in the shared base before the old file goes.
                    container.sync()?;
                }
                global.remove(names::CLAUDE_MD)?;
            }
            Action::KeepAside { text, name } => {
                fsops::create_dir_all(&layout.legacy_dir())?;
                let mut legacy = SafeDir::open(&layout.legacy_dir())?;
                // Its temps are recorded in the global lock's journal, so a run that is
                // interrupted leaves nothing the next one does not clean.
                legacy.record_temps_in(journal);
                // Named by its text's hash: a file already there holds this very text.
                legacy.create_new_file(name, text)?;
                // The text is durable in the state folder before the old file goes.
                legacy.sync()?;
                global.remove(names::CLAUDE_MD)?;
            }
            Action::RemoveGlobalDir => {
                global.sync()?;
                let parent = SafeDir::open(&layout.groups_dir)?;
                done.removed_dir = parent.remove_empty_dir(GLOBAL_GROUP)?;
            }
            Action::RemoveGlobalLink => {}
        }
        global.sync()?;
    }
    Ok(done)
}

fn report_global_action(layout: &Layout, action: &Action) -> ActionReport {
    let global_dir = layout.group_dir(GLOBAL_GROUP);
    let from = global_dir.join(names::CLAUDE_MD).display().to_string();
    let into = layout.shared_base_source().display().to_string();
    match action {
        Action::CleanTemp { shown, .. } => ActionReport::CleanTemp {
            path: shown.clone(),
        },
        Action::Move { .. } | Action::Append { .. } => ActionReport::MoveGlobal { from, into },
        Action::KeepAside { name, .. } => ActionReport::KeepGlobal {
            from,
            kept_in: layout.legacy_dir().join(name).display().to_string(),
        },
        Action::RemoveMigrated => ActionReport::RemoveMigrated {
            path: from,
            kept_in: into,
        },
        // (`RemoveGlobalLink` is never planned for `global`.)
        Action::RemoveGlobalDir | Action::RemoveGlobalLink => ActionReport::RemoveGlobalDir {
            path: global_dir.display().to_string(),
        },
    }
}

fn clean(temps: &[(Leftover, String)]) -> Vec<Action> {
    temps
        .iter()
        .map(|(temp, shown)| Action::CleanTemp {
            temp: temp.clone(),
            shown: shown.clone(),
        })
        .collect()
}

fn create_new(dir: &SafeDir, name: &str, text: &[u8]) -> Result<(), GroupError> {
    if dir.create_new_file(name, text)? {
        return Ok(());
    }
    Err(FsError::Unsafe {
        path: dir.path().join(name),
        found: "a file created meanwhile by someone else".to_owned(),
        expected: "no file",
        fix: "run migrate again".to_owned(),
    }
    .into())
}

/// `existing`, a blank line, `marker`, then `text`.
pub fn appended(existing: &[u8], marker: &str, text: &[u8]) -> Vec<u8> {
    let mut out = existing.to_vec();
    out.extend_from_slice(&below_marker(existing.last().copied(), marker, text));
    out
}

/// What is appended to a file whose last byte is `last` (`None`: empty): the end of its last
/// line and a blank line when it has text, then `marker` on its own line, then `text`.
fn below_marker(last: Option<u8>, marker: &str, text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(marker.len() + text.len() + 3);
    match last {
        None => {}
        Some(b'\n') => out.push(b'\n'),
        Some(_) => out.extend_from_slice(b"\n\n"),
    }
    out.extend_from_slice(marker.as_bytes());
    out.push(b'\n');
    out.extend_from_slice(text);
    out
}

/// Whether `haystack` already holds the whole of `text` (without its surrounding blank lines
/// and trailing white space) starting at the start of a line and ending at the end of one.
/// Text that is only white space is held anywhere.
pub fn holds(haystack: &[u8], text: &[u8]) -> bool {
    let start = text
        .iter()
        .position(|b| !matches!(b, b'\n' | b'\r'))
        .unwrap_or(text.len());
    let needle = text[start..].trim_ascii_end();
    if needle.is_empty() {
        return true;
    }
    let mut from = 0;
    while let Some(offset) = find(&haystack[from..], needle) {
        let at = from + offset;
        let end = at + needle.len();
        let starts_line = at == 0 || haystack[at - 1] == b'\n';
        let ends_line = end == haystack.len() || matches!(haystack[end], b'\n' | b'\r');
        if starts_line && ends_line {
            return true;
        }
        from = at + 1;
    }
    false
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The bytes of the regular file `name`; `None` when missing; an error for anything else.
fn read_regular(dir: &SafeDir, name: &str, limit: u64) -> Result<Option<Vec<u8>>, GroupError> {
    match dir.kind(name)? {
        None => Ok(None),
        Some(FileKind::File) => Ok(dir.read_file(name, limit)?),
        Some(FileKind::Symlink) => Err(symlink_refused(dir, name)),
        Some(other) => Err(FsError::Unsafe {
            path: dir.path().join(name),
            found: other.describe().to_owned(),
            expected: "a regular file",
            fix: "move it aside".to_owned(),
        }
        .into()),
    }
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
    fn held_text_is_whole_and_at_line_boundaries() {
        assert!(holds(b"intro\nGLOBAL RULES\nmore\n", b"GLOBAL RULES\n"));
        assert!(holds(b"a\n\nM\nold rules\n", b"\nold rules\n\n"));
        assert!(holds(b"abc", b"  \n"));
        assert!(holds(
            b"x\r\ndeploy on fridays\r\n",
            b"deploy on fridays\r\n"
        ));
        // A substring of a line is not the text.
        assert!(!holds(b"never deploy on fridays\n", b"deploy on fridays\n"));
        assert!(!holds(b"deploy on fridays only\n", b"deploy on fridays\n"));
        assert!(!holds(b"abc", b"abcd"));
        // Leading spaces are part of the text.
        assert!(!holds(b"indented\n", b"  indented\n"));
    }

    #[test]
    fn a_local_file_the_agent_created_since_the_observation_gets_the_text_below_a_marker() {
        let temp = tempfile::tempdir().unwrap();
        std::fs::write(temp.path().join(names::CLAUDE_MD), "legacy\n").unwrap();
        let dir = SafeDir::open(temp.path()).unwrap();
        let layout = Layout::under_root(temp.path());
        let (actions, _) = plan_group(&observe_group(&layout, "g", &dir).unwrap());
        assert_eq!(
            actions,
            [Action::Move {
                text: b"legacy\n".to_vec()
            }]
        );
        std::fs::write(temp.path().join(names::CLAUDE_LOCAL_MD), "agent\n").unwrap();
        apply_group(&dir, &actions).unwrap();
        assert_eq!(
            std::fs::read(temp.path().join(names::CLAUDE_LOCAL_MD)).unwrap(),
            appended(b"agent\n", LEGACY_MARKER, b"legacy\n")
        );
        assert!(!temp.path().join(names::CLAUDE_MD).exists());
    }

    #[test]
    fn the_plan_is_pure_and_idempotent() {
        let state = GroupState {
            temps: vec![],
            global_link: Some(FileKind::Symlink),
            legacy: Some(b"deploy on fridays\n".to_vec()),
            local: Some(b"never deploy on fridays\n".to_vec()),
        };
        let (actions, warnings) = plan_group(&state);
        assert!(warnings.is_empty());
        assert_eq!(actions[0], Action::RemoveGlobalLink);
        assert!(matches!(actions[1], Action::Append { .. }), "{actions:?}");
        let merged = appended(
            state.local.as_deref().unwrap(),
            LEGACY_MARKER,
            state.legacy.as_deref().unwrap(),
        );
        let again = GroupState {
            global_link: None,
            local: Some(merged),
            ..state
        };
        assert_eq!(plan_group(&again).0, vec![Action::RemoveMigrated]);
    }
}
