//! `compose`: bring one group, or all, to the state its `container.json` describes.
//!
//! For each group: take the group's lock, read its config, compute the [`plan`](crate::plan),
//! [`diff`](crate::reconcile::diff) it against the disk and apply the difference. Groups are
//! independent: a failing group is reported and left as it was, the others are composed.

use std::time::Duration;

use crate::config::{GroupConfig, MAX_CONFIG_BYTES, parse_config};
use crate::delivery::expand::expand_source;
use crate::delivery::verify::verify;
use crate::delivery::{DeliverySettings, GroupInputs, plan_delivery};
use crate::error::{Error, GroupError};
use crate::fsops::{self, FsError, NodeKind, SafeDir};
use crate::layout::{GLOBAL_GROUP, Layout, names};
use crate::names::validate_name;
use crate::plan::{GroupPlan, Sources};
use crate::reconcile::{Step, apply, diff};
use crate::report::{ComposeReport, GroupReport, WarningReport};

/// The largest shared source (`container/CLAUDE.md`, a skill's `instructions.md`) clawmd copies.
pub const MAX_SOURCE_BYTES: u64 = 16 * 1024 * 1024;

/// How to compose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComposeOptions {
    /// Delivery mode, default provider, budgets (from `clawmd.json`, flags and `CLAWMD_*`).
    pub settings: DeliverySettings,
    /// Compute and report the changes without making them.
    pub dry_run: bool,
    /// How long to wait for another run holding a group's lock.
    pub lock_timeout: Duration,
}

impl Default for ComposeOptions {
    fn default() -> Self {
        ComposeOptions {
            settings: DeliverySettings::default(),
            dry_run: false,
            lock_timeout: Duration::from_secs(60),
        }
    }
}

/// Which groups to process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// Every group folder under the groups directory.
    All,
    /// These groups.
    Named(Vec<String>),
}

impl Selection {
    /// The group names selected, listing the groups folder for [`Selection::All`].
    pub fn groups(&self, layout: &Layout) -> Result<Vec<String>, Error> {
        match self {
            Selection::All => list_groups(layout).map_err(Error::Groups),
            Selection::Named(names) => Ok(names.clone()),
        }
    }
}

/// Composes the selected groups. Fails as a whole only when the groups folder or the shared
/// content cannot be read; a group's own failure is in its report.
pub fn compose(
    layout: &Layout,
    selection: &Selection,
    options: &ComposeOptions,
) -> Result<ComposeReport, Error> {
    let groups = selection.groups(layout)?;
    let (sources, warnings) = read_sources(layout).map_err(Error::Sources)?;
    let reports = parallel_map(&groups, |group| {
        match compose_group(layout, &sources, group, options) {
            Ok(report) => report,
            Err(err) => {
                tracing::error!(group, "{err}");
                GroupReport::failed(group, &err)
            }
        }
    });
    Ok(ComposeReport::new(
        options.dry_run,
        options.settings.delivery,
        reports,
        warnings,
    ))
}

/// Applies `work` to every item on a few threads (groups are independent and each takes its own
/// lock), returning the results in the items' order. Sequential for small inputs and under
/// crash injection, where the step numbering must be deterministic.
fn parallel_map<T: Sync, R: Send>(items: &[T], work: impl Fn(&T) -> R + Sync) -> Vec<R> {
    if items.len() < 32 || fsops::crash_injection_enabled() {
        return items.iter().map(work).collect();
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<(usize, R)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let index = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(item) = items.get(index) else { break };
                        done.push((index, work(item)));
                    }
                    done
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().expect("a compose worker panicked"))
            .collect()
    });
    results.sort_by_key(|(index, _)| *index);
    results.into_iter().map(|(_, result)| result).collect()
}

/// The group folders under the groups directory, sorted: every entry that is a directory (or a
/// symlink, so that it is reported and refused), except hidden names and `global`.
pub fn list_groups(layout: &Layout) -> Result<Vec<String>, FsError> {
    let dir = SafeDir::open(&layout.groups_dir)?;
    let mut groups = Vec::new();
    for name in dir.list()? {
        let name = name.to_string_lossy().into_owned();
        if name.starts_with('.') || name == GLOBAL_GROUP {
            continue;
        }
        if matches!(dir.kind(&name)?, NodeKind::Dir | NodeKind::Symlink) {
            groups.push(name);
        }
    }
    Ok(groups)
}

/// Reads what `container/` holds: the shared base and each skill's instructions, with their
/// own imports expanded where their owner put them ([`expand_source`]). Skill folders whose
/// names cannot be file names are skipped with a warning.
pub fn read_sources(layout: &Layout) -> Result<(Sources, Vec<WarningReport>), FsError> {
    let mut warnings = Vec::new();
    let mut notes = Vec::new();
    let mut originals = std::collections::BTreeMap::new();
    let mut expand = |key: String, target: std::path::PathBuf, bytes: Option<Vec<u8>>| {
        bytes.map(|bytes| {
            let expanded = expand_source(&layout.app_mount, &layout.container_dir, &target, &bytes);
            notes.extend(expanded.notes.iter().map(|note| WarningReport {
                code: "shared-import-not-delivered".to_owned(),
                message: note.to_string(),
            }));
            if expanded.text != bytes {
                originals.insert(key, bytes);
            }
            expanded.text
        })
    };
    let shared = fsops::read_host_file(&layout.shared_base_source(), MAX_SOURCE_BYTES)?;
    let mut sources = Sources {
        shared_base: expand(
            names::CLAUDE_MD.to_owned(),
            layout.shared_base_target(),
            shared,
        ),
        ..Sources::default()
    };
    let mut skills = Vec::new();
    let skills_dir = layout.skills_dir();
    let entries = match std::fs::read_dir(&skills_dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok((sources, warnings)),
        Err(err) => {
            return Err(FsError::Io {
                op: "list",
                path: skills_dir,
                source: err,
            });
        }
    };
    for entry in entries {
        let entry = entry.map_err(|err| FsError::Io {
            op: "list",
            path: skills_dir.clone(),
            source: err,
        })?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || !entry.path().is_dir() {
            continue;
        }
        if let Err(problem) = validate_name(&name) {
            skills.push(Err(WarningReport {
                code: "bad-skill-name".to_owned(),
                message: format!(
                    "skipping skill folder {}: {problem} (fix: rename the folder)",
                    entry.path().display()
                ),
            }));
            continue;
        }
        let instructions =
            fsops::read_host_file(&layout.skill_instructions_source(&name), MAX_SOURCE_BYTES)?;
        skills.push(Ok((name, instructions)));
    }
    for skill in skills {
        match skill {
            Ok((name, instructions)) => {
                let key = format!("skills/{name}/{}", names::SKILL_INSTRUCTIONS);
                let target = layout.skill_instructions_target(&name);
                let instructions = expand(key, target, instructions);
                sources.skills.insert(name, instructions);
            }
            Err(warning) => warnings.push(warning),
        }
    }
    warnings.extend(notes);
    sources.originals = originals;
    Ok((sources, warnings))
}

/// Composes one group: lock, read config, plan, diff, apply.
pub fn compose_group(
    layout: &Layout,
    sources: &Sources,
    group: &str,
    options: &ComposeOptions,
) -> Result<GroupReport, GroupError> {
    let group_path = layout.checked_group_dir(group)?;
    // A first look without the lock: a group that is already right (the common case at every
    // spawn) is reported unchanged without taking the lock or writing anything. Anything else
    // is looked at again under the lock, since another run may be changing it.
    match look(layout, sources, &group_path, options, false) {
        Ok(first) if options.dry_run || first.steps.iter().all(is_keep) => {
            let report = GroupReport::from_steps(group, &first.steps, &first.plan);
            return Ok(delivered(layout, sources, &first.plan, options, report));
        }
        Err(err) if options.dry_run || matches!(err, GroupError::Missing { .. }) => {
            return Err(err);
        }
        // Changes to make, or a failure that may come from another run changing the group
        // right now: look again under the lock.
        Ok(_) | Err(_) => {}
    }
    let _lock = fsops::lock(&layout.lock_file(group), options.lock_timeout)?;
    let Look {
        dir,
        fragments,
        plan,
        steps,
    } = look(layout, sources, &group_path, options, true)?;
    let fragments = fragments.expect("open_child with create returns a folder or an error");
    apply(&dir, &fragments, &steps)?;
    let report = GroupReport::from_steps(group, &steps, &plan);
    Ok(delivered(layout, sources, &plan, options, report))
}

/// Adds to `report` what reaches the agent of the group composed as `plan`.
fn delivered(
    layout: &Layout,
    sources: &Sources,
    plan: &GroupPlan,
    options: &ComposeOptions,
    mut report: GroupReport,
) -> GroupReport {
    report.set_delivered(verify(layout, plan, sources, &options.settings));
    report
}

fn is_keep(step: &Step) -> bool {
    matches!(step, Step::Keep { .. })
}

/// A group as found on disk, with its plan and the steps that would bring it there.
struct Look {
    dir: SafeDir,
    fragments: Option<SafeDir>,
    plan: GroupPlan,
    steps: Vec<Step>,
}

/// Opens the group, reads its config, plans it and diffs the plan against the disk. `create`
/// makes `.claude-fragments` when missing (only under the lock).
fn look(
    layout: &Layout,
    sources: &Sources,
    group_path: &std::path::Path,
    options: &ComposeOptions,
    create: bool,
) -> Result<Look, GroupError> {
    let dir = match SafeDir::open(group_path) {
        Err(FsError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Err(GroupError::Missing {
                path: group_path.to_owned(),
            });
        }
        other => other?,
    };
    let config = read_config(&dir)?;
    let plan = plan_for(layout, &dir, &config, sources, &options.settings)?;
    let fragments = dir.open_child(names::FRAGMENTS, create)?;
    let steps = diff(&dir, fragments.as_ref(), &plan)?;
    Ok(Look {
        dir,
        fragments,
        plan,
        steps,
    })
}

/// Plans a group: reads what its target needs from the group (the local memory, for flat
/// documents) and calls [`plan_delivery`].
pub fn plan_for(
    layout: &Layout,
    dir: &SafeDir,
    config: &GroupConfig,
    sources: &Sources,
    settings: &DeliverySettings,
) -> Result<GroupPlan, GroupError> {
    // Read once, never through a link (a linked or special CLAUDE.local.md is refused, as
    // the diff refuses it); one larger than Claude Code reads counts as missing.
    let local = match dir.kind(names::CLAUDE_LOCAL_MD)? {
        crate::fsops::NodeKind::File => {
            match dir.read_file(names::CLAUDE_LOCAL_MD, crate::loader::MAX_FILE_BYTES) {
                Err(FsError::TooLarge { .. }) => None,
                other => other?,
            }
        }
        _ => None,
    };
    let inputs = GroupInputs {
        local_memory: local.as_deref(),
    };
    plan_delivery(layout, config, sources, inputs, settings).map_err(|source| {
        GroupError::Collision {
            path: dir.path().join(names::CONFIG),
            source,
        }
    })
}

/// Reads and parses the group's `container.json` (never through a symlink); missing means
/// defaults.
pub fn read_config(dir: &SafeDir) -> Result<GroupConfig, GroupError> {
    let path = dir.path().join(names::CONFIG);
    match dir.read_file(names::CONFIG, MAX_CONFIG_BYTES) {
        Ok(Some(bytes)) => Ok(parse_config(&path, &bytes)?),
        Ok(None) => Ok(GroupConfig::default()),
        Err(FsError::TooLarge { path, limit, .. }) => Err(FsError::TooLarge {
            path,
            limit,
            fix: "container.json should be a few kilobytes; remove what does not belong in it"
                .to_owned(),
        }
        .into()),
        Err(err) => Err(err.into()),
    }
}
