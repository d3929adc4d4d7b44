//! Reading a deployment: which groups there are, a group's folder (checked and opened without
//! following links), the shared sources in `container/`, a group's `container.json`, and the
//! observation of one group (its folder, config, plan and the steps that would bring the disk
//! to the plan).
//!
//! Every command reads a deployment the same way, so this module is the one place that does
//! it: `compose` applies an observation, `check` reports on one, `render` and `migrate` use the
//! same group list and the same group-name rule. Nothing here writes.

use std::path::{Path, PathBuf};

use crate::config::{GroupConfig, MAX_CONFIG_BYTES, parse_config};
use crate::delivery::expand::expand_source;
use crate::delivery::{DeliverySettings, GroupInputs, plan_delivery};
use crate::error::{Error, GroupError};
use crate::file_kind::FileKind;
use crate::fsops::{self, FsError, Listing, SafeDir};
use crate::layout::{GLOBAL_GROUP, Layout, names};
use crate::plan::{Delivery, GroupPlan, Sources};
use crate::reconcile::{Step, diff_listed};
use crate::report::{Code, WarningReport};
use crate::safe_name::validate_name;

/// The largest shared source (`container/CLAUDE.md`, a skill's `instructions.md`) clawmd
/// reads, and so the largest shared base `migrate` may leave behind.
pub const MAX_SOURCE_BYTES: u64 = 16 * 1024 * 1024;

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

/// The group folders under the groups directory, sorted: every entry that is a directory (or a
/// symlink, so that it is reported and refused), except hidden names and `global`.
pub fn list_groups(layout: &Layout) -> Result<Vec<String>, FsError> {
    let dir = SafeDir::open(&layout.groups_dir)?;
    let listing = dir.listing()?;
    let mut groups = Vec::new();
    for name in listing.names() {
        let name = name.to_string_lossy().into_owned();
        if name.starts_with('.') || name == GLOBAL_GROUP {
            continue;
        }
        if matches!(
            listing.kind(&dir, &name)?,
            Some(FileKind::Dir | FileKind::Symlink)
        ) {
            groups.push(name);
        }
    }
    Ok(groups)
}

/// The host folder of a group whose name has been checked to be a single safe folder name
/// that is not reserved (the first step of every per-group command).
pub fn checked_group_dir(layout: &Layout, group: &str) -> Result<PathBuf, GroupError> {
    validate_name(group).map_err(|problem| GroupError::BadName {
        name: group.to_owned(),
        problem,
    })?;
    if group == GLOBAL_GROUP {
        return Err(GroupError::Reserved {
            name: group.to_owned(),
        });
    }
    Ok(layout.group_dir(group))
}

/// Opens a group's folder (never through a link); a missing folder is [`GroupError::Missing`].
pub fn open_group(path: &Path) -> Result<SafeDir, GroupError> {
    match SafeDir::open(path) {
        Err(FsError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            Err(missing_group(path))
        }
        other => Ok(other?),
    }
}

/// The error for a group folder that does not exist, suggesting the existing group with the
/// nearest name (`mian`: did you mean `main`?).
pub fn missing_group(path: &Path) -> GroupError {
    let suggestion = path
        .parent()
        .zip(path.file_name())
        .and_then(|(groups, name)| {
            let siblings: Vec<String> = SafeDir::open(groups)
                .and_then(|dir| dir.list())
                .ok()?
                .into_iter()
                .map(|n| n.to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.') && n != GLOBAL_GROUP)
                .collect();
            crate::suggest::nearest(&name.to_string_lossy(), siblings.iter().map(String::as_str))
                .map(str::to_owned)
        });
    GroupError::Missing {
        path: path.to_owned(),
        suggestion,
    }
}

/// Reads what `container/` holds: the shared base and each skill's instructions, with their
/// own imports expanded where their owner put them ([`expand_source`]). Skill folders whose
/// names cannot be file names are skipped with a warning.
pub fn read_sources(layout: &Layout) -> Result<(Sources, Vec<WarningReport>), FsError> {
    let mut warnings = Vec::new();
    let mut notes = Vec::new();
    let mut originals = std::collections::BTreeMap::new();
    let mut expand = |key: String, target: PathBuf, bytes: Option<Vec<u8>>| {
        bytes.map(|bytes| {
            let expanded = expand_source(&layout.app_mount, &layout.container_dir, &target, &bytes);
            notes.extend(expanded.notes.iter().map(|note| WarningReport {
                code: Code::SharedImportNotDelivered,
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
    #[expect(
        clippy::disallowed_methods,
        reason = "a trusted host folder, and FsError names the path"
    )]
    let entries = match std::fs::read_dir(&skills_dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            warnings.extend(notes);
            sources.originals = originals;
            return Ok((sources, warnings));
        }
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
                code: Code::BadSkillName,
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

/// Plans a group: reads what its target needs from the group (`CLAUDE.local.md`, read once and
/// never through a link) and calls [`plan_delivery`]. `listed` is a listing of the group folder.
pub fn plan_for(
    layout: &Layout,
    dir: &SafeDir,
    listed: &Listing,
    config: &GroupConfig,
    sources: &Sources,
    settings: &DeliverySettings,
) -> Result<GroupPlan, GroupError> {
    // A linked or special CLAUDE.local.md is refused by the diff; one larger than Claude Code
    // reads counts as missing.
    let local = match listed.kind(dir, names::CLAUDE_LOCAL_MD)? {
        Some(FileKind::File) => {
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

/// Reads and parses the group's `container.json` (never through a symlink, never opening
/// anything but a regular file); missing means defaults.
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

/// A group as found on disk, with its plan and the steps that would bring it there.
#[derive(Debug)]
pub struct Observation {
    /// The group folder.
    pub dir: SafeDir,
    /// `.claude-fragments`, when it exists (or was created).
    pub fragments: Option<SafeDir>,
    /// The parsed `container.json`.
    pub config: GroupConfig,
    /// The delivery mode planned for (the deployment's, or `inline` for flat backends).
    pub delivery: Delivery,
    /// The desired state.
    pub plan: GroupPlan,
    /// The difference between the disk and the plan.
    pub steps: Vec<Step>,
}

impl Observation {
    /// Whether the group is exactly as planned (every step is a [`Step::Keep`]).
    pub fn is_up_to_date(&self) -> bool {
        self.steps
            .iter()
            .all(|step| matches!(step, Step::Keep { .. }))
    }
}

/// Opens the group at `group_path`, reads its config, plans it with the deployment's delivery
/// `settings` and diffs the plan against the disk. `create` makes `.claude-fragments` when
/// missing (only under the group's lock).
pub fn observe(
    layout: &Layout,
    sources: &Sources,
    group_path: &Path,
    settings: &DeliverySettings,
    create: bool,
) -> Result<Observation, GroupError> {
    let dir = open_group(group_path)?;
    // One listing of the group folder gives the kind of every entry (no `stat` each) and the
    // leftover temp files.
    let listed = dir.listing()?;
    let config = read_config(&dir)?;
    let plan = plan_for(layout, &dir, &listed, &config, sources, settings)?;
    let delivery = plan.target.delivery;
    let fragments = match listed.kind(&dir, names::FRAGMENTS)? {
        None if !create => None,
        _ => dir.open_child(names::FRAGMENTS, create)?,
    };
    let steps = diff_listed(&dir, &listed, fragments.as_ref(), &plan)?;
    Ok(Observation {
        dir,
        fragments,
        config,
        delivery,
        plan,
        steps,
    })
}
