//! Reading a deployment: which groups there are, a group's folder (checked and opened without
//! following links), the shared sources in `container/`, a group's `container.json`, and the
//! observation of one group (its folder, config, plan and the steps that would bring the disk
//! to the plan).
//!
//! Every command reads a deployment the same way, so this module is the one place that does
//! it: `compose` applies an observation, `check` reports on one, `render` and `migrate` use the
//! same group list and the same group-name rule. Nothing here writes.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::disk::fsops::{self, FsError, Leftover, Listing, SafeDir, TempJournal};
use crate::disk::reads::{Read, ReadLog, Root, Watch};
use crate::disk::reconcile::{Dirs, Step, check_rescue_budget, diff_listed};
use crate::disk::state;
use crate::disk::written::{self, WrittenFragments};
use crate::error::{Error, GroupError};
use crate::file_kind::FileKind;
use crate::input::config::{
    DEFAULT_CONFIG, GroupConfig, HandedConfig, MAX_CONFIG_BYTES, is_own_config, parse_config,
};
use crate::input::layout::{GLOBAL_GROUP, GroupConfigSource, Layout, names};
use crate::input::recipe::MemoryFile;
use crate::input::sources::Sources;
use crate::input::sources::host_reads::HostLog;
use crate::input::sources::{GroupParts, NoteKind, SourceNote, read_group};
use crate::key_hash::KeyHasher;
use crate::plan::delivery::GroupPlan;
use crate::plan::delivery::guard::{GUARD_DIR, GUARD_DIRS};
use crate::plan::delivery::{DeliverySettings, GroupInputs, plan_delivery};
use crate::plan::{Content, Delivery, Desired, ManagedPath, Place, Warning};
use crate::report::{Code, WarningReport};
use crate::safe_name::validate_name;

pub use crate::input::sources::MAX_SOURCE_BYTES;

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

/// Reads what `container/` holds for the recipe ([`crate::input::sources::read_container`]): the
/// shared files, skill roots and fragment folders, with their own imports expanded where
/// their owner put them. Names that cannot be file names are skipped with a warning.
pub fn read_sources(layout: &Layout) -> Result<(Sources, Vec<WarningReport>), Error> {
    let (sources, notes) = read_sources_logged(layout, &HostLog::new())?;
    Ok((sources, source_warnings(&notes)))
}

/// [`read_sources`] with every host read logged in `log`, and the notes as they are.
pub fn read_sources_logged(
    layout: &Layout,
    log: &HostLog,
) -> Result<(Sources, Vec<SourceNote>), Error> {
    let (mut sources, notes) =
        crate::input::sources::read_container(layout, log).map_err(Error::Sources)?;
    sources.host_managed =
        crate::plan::delivery::managed::read_host_managed(layout, log).map_err(Error::Sources)?;
    sources.guard_bases = crate::plan::delivery::guard::Bases::read(layout, log)?;
    Ok((sources, notes))
}

/// The run's warnings about the container side.
pub fn source_warnings(notes: &[SourceNote]) -> Vec<WarningReport> {
    (notes.iter())
        .map(|note| WarningReport {
            code: match note.kind {
                NoteKind::BadName => Code::BadSkillName,
                NoteKind::ImportNotDelivered => Code::SharedImportNotDelivered,
                NoteKind::MissingSource => Code::MissingSource,
            },
            message: note.message.clone(),
        })
        .collect()
}

/// Plans a group from its config and what was read in its folder (`inputs`: its
/// `CLAUDE.local.md`, read once and never through a link, and what the recipe reads there) with
/// [`plan_delivery`], and adds its backend's guard files.
fn plan_with(
    layout: &Layout,
    dir: &SafeDir,
    config: &GroupConfig,
    own_config: bool,
    sources: &Sources,
    settings: &DeliverySettings,
    inputs: GroupInputs<'_>,
) -> Result<GroupPlan, GroupError> {
    if let Some((section, skill, unusable)) =
        crate::input::sources::unusable_for(layout, config, sources)
    {
        return Err(match skill {
            Some(skill) => GroupError::Skill {
                skill,
                source: unusable.0.clone(),
            },
            None => GroupError::Source {
                section,
                source: unusable.0.clone(),
            },
        });
    }
    let mut plan = plan_delivery(layout, config, sources, inputs, settings).map_err(|source| {
        GroupError::Collision {
            path: dir.path().join(names::CONFIG),
            source,
        }
    })?;
    let provider = plan.target.provider;
    let guard =
        crate::plan::delivery::guard::entries(provider, &settings.budgets, &sources.guard_bases);
    plan.entries.extend(guard);
    if !own_config {
        plan.entries.push(Desired {
            path: ManagedPath::bind(names::CONFIG),
            content: Content::File(DEFAULT_CONFIG.to_vec()),
        });
    }
    Ok(plan)
}

/// A group's `CLAUDE.local.md` as read for its plan.
#[derive(Debug, Default)]
struct LocalMemory {
    /// Its bytes (`None`: missing, not a regular file, or larger than Claude Code reads).
    bytes: Option<Vec<u8>>,
    /// Its size when it is larger than Claude Code reads (it is not read).
    too_large: Option<u64>,
}

impl LocalMemory {
    fn inputs<'a>(&'a self, group: &'a GroupParts) -> GroupInputs<'a> {
        GroupInputs {
            local_memory: self.bytes.as_deref(),
            local_memory_too_large: self.too_large,
            group: Some(group),
        }
    }
}

/// The group's `CLAUDE.local.md`. A linked or special one is refused by the diff; one larger
/// than Claude Code reads is not read, only its size is kept (the agent gets none of it). With
/// the recipe's `"memory": "none"` it is not read at all.
fn read_local_memory(
    layout: &Layout,
    dir: &SafeDir,
    listed: &Listing,
) -> Result<LocalMemory, GroupError> {
    if layout.recipe.memory == MemoryFile::None {
        return Ok(LocalMemory::default());
    }
    match listed.kind(dir, names::CLAUDE_LOCAL_MD)? {
        Some(FileKind::File) => {
            match dir.read_file(names::CLAUDE_LOCAL_MD, crate::loader::MAX_FILE_BYTES) {
                Err(FsError::TooLarge { .. }) => Ok(LocalMemory {
                    bytes: None,
                    too_large: Some(dir.size(names::CLAUDE_LOCAL_MD)?),
                }),
                other => Ok(LocalMemory {
                    bytes: other?,
                    too_large: None,
                }),
            }
        }
        _ => Ok(LocalMemory::default()),
    }
}

/// Reads and parses the group's config (see [`read_config_bytes`]); missing means defaults.
pub fn read_config(layout: &Layout, dir: &SafeDir) -> Result<GroupConfig, GroupError> {
    let config = read_config_bytes(layout, dir)?;
    parse_config_bytes(&config)
}

/// A group's config as read: its bytes (`None`: missing) and the file they came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigBytes {
    /// The bytes.
    pub bytes: Option<Vec<u8>>,
    /// Where they came from (for messages).
    pub path: PathBuf,
    /// They are the group folder's `container.json` (not a config handed by the runner).
    pub from_group: bool,
}

/// The bytes of the group's config: the one handed on this run's command line, else (with
/// `"groupConfig": "handed"`) the one the runner last handed, else its `container.json`
/// (never through a symlink, never opening anything but a regular file).
pub fn read_config_bytes(layout: &Layout, dir: &SafeDir) -> Result<ConfigBytes, GroupError> {
    let group = dir
        .path()
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    if let Some(given) = layout.given_configs.get(&group) {
        return Ok(ConfigBytes {
            bytes: Some(given.to_vec()),
            path: PathBuf::from(format!("--config ({group})")),
            from_group: false,
        });
    }
    let too_large = |path: PathBuf, limit| FsError::TooLarge {
        path,
        limit,
        fix: "a group's config should be a few kilobytes; remove what does not belong in it"
            .to_owned(),
    };
    if layout.group_config == GroupConfigSource::Handed {
        let path = layout.handed_config(&group);
        match fsops::read_host_file(&path, MAX_CONFIG_BYTES) {
            Ok(Some(bytes)) => {
                return Ok(ConfigBytes {
                    bytes: Some(bytes),
                    path,
                    from_group: false,
                });
            }
            Ok(None) => {}
            Err(FsError::TooLarge { path, limit, .. }) => {
                return Err(too_large(path, limit).into());
            }
            Err(err) => return Err(err.into()),
        }
    }
    let path = dir.path().join(names::CONFIG);
    match dir.read_file(names::CONFIG, MAX_CONFIG_BYTES) {
        Ok(bytes) => Ok(ConfigBytes {
            bytes,
            path,
            from_group: true,
        }),
        Err(FsError::TooLarge { path, limit, .. }) => Err(too_large(path, limit).into()),
        Err(err) => Err(err.into()),
    }
}

/// A config that is missing or empty means the defaults ([`is_own_config`]).
pub fn parse_config_bytes(config: &ConfigBytes) -> Result<GroupConfig, GroupError> {
    match &config.bytes {
        Some(bytes) if is_own_config(Some(bytes)) => Ok(parse_config(&config.path, bytes)?),
        _ => Ok(GroupConfig::default()),
    }
}

/// Whether the group folder `dir` holds a `container.json` of its own ([`is_own_config`]),
/// given its config as read (`config`, which is the group folder's unless the runner handed
/// one): without one, the runner binds the defaults from clawmd's state over it.
pub fn has_own_config(dir: &SafeDir, config: &ConfigBytes) -> Result<bool, GroupError> {
    Ok(own_config(dir, config)?.is_some())
}

/// The bytes of the group folder's own `container.json` (the group folder opened as `dir`)
/// when it is one ([`has_own_config`]); `config` is the group's config as read.
pub fn own_config(dir: &SafeDir, config: &ConfigBytes) -> Result<Option<Vec<u8>>, GroupError> {
    let own = if config.from_group {
        config.bytes.clone()
    } else if dir.kind(names::CONFIG)? == Some(FileKind::File) {
        dir.read_file(names::CONFIG, MAX_CONFIG_BYTES)?
    } else {
        None
    };
    Ok(own.filter(|bytes| is_own_config(Some(bytes))))
}

/// Puts `config`, `group`'s handed config, into `layout` (read instead of the group's own):
/// `compose GROUP --config`, and a `clawmd serve` request's `config`. With `"groupConfig":
/// "handed"`, a compose keeps it where handed configs are read ([`keep_handed_config`]) under
/// the group's lock, beside the documents it makes from it.
pub fn hand_config(
    layout: &mut Layout,
    group: &str,
    config: HandedConfig,
) -> Result<(), GroupError> {
    checked_group_dir(layout, group)?;
    layout
        .given_configs
        .insert(group.to_owned(), Arc::from(config.into_bytes()));
    Ok(())
}

/// Whether the config kept for `group` (`<state>/configs/<group>.json`) holds `bytes`: one
/// `lstat` when this process found it holding them and it is unchanged since, else read.
pub fn kept_config_holds(layout: &Layout, group: &str, bytes: &[u8]) -> bool {
    let path = layout.handed_config(group);
    match kept_configs::held(&path, bytes) {
        kept_configs::Held::These => return true,
        kept_configs::Held::Others => return false,
        kept_configs::Held::Unknown => {}
    }
    let folder = path.parent().unwrap_or(&layout.state_dir);
    let Ok(Some(dir)) = SafeDir::open_state(folder, false) else {
        return false;
    };
    let name = format!("{group}.json");
    let holds = dir
        .read_file(&name, MAX_CONFIG_BYTES)
        .ok()
        .flatten()
        .as_deref()
        == Some(bytes);
    if holds {
        kept_configs::found(&path, bytes);
    }
    holds
}

/// Keeps the config the runner handed for `group` ([`Layout::handed_config_of`]: only for the
/// runs that read handed configs, `"groupConfig": "handed"`, and only when one was handed) in
/// `<state>/configs/<group>.json`, written atomically, to last as [`state::durability`] says:
/// the runner hands it again at every spawn.
///
/// Its temp is recorded in `journal`, the group's (the caller holds the group's lock), so a
/// run stopped before the rename leaves nothing the next run under the lock does not remove.
pub fn keep_handed_config(
    layout: &Layout,
    group: &str,
    journal: &Arc<crate::disk::fsops::TempJournal>,
) -> Result<(), GroupError> {
    let Some(bytes) = layout.handed_config_of(group) else {
        return Ok(());
    };
    checked_group_dir(layout, group)?;
    if kept_config_holds(layout, group, bytes) {
        return Ok(());
    }
    let path = layout.handed_config(group);
    let folder = path.parent().unwrap_or(&layout.state_dir);
    let mut dir =
        SafeDir::open_state(folder, true)?.expect("open_state with create returns a folder");
    dir.record_temps_in(journal);
    dir.write_file_lasting(&format!("{group}.json"), bytes, state::durability())?;
    kept_configs::found(&path, bytes);
    Ok(())
}

/// The kept configs ([`keep_handed_config`]) this process found holding the bytes it keeps,
/// by path, with the file's identity then, taken only once settled
/// ([`crate::disk::reads::settled`]): while the file keeps that identity it holds those bytes,
/// and a spawn handing the same config again looks at the file (one `lstat`) instead of
/// reading it. Bounded ([`crate::path_memo::PathMemo`]).
mod kept_configs {
    use std::path::Path;
    use std::time::SystemTime;

    use crate::path_memo::PathMemo;

    static KEPT: PathMemo<([i64; 8], Vec<u8>)> = PathMemo::new();

    /// The settled identity of the file at `path`, not following a link.
    fn identity(path: &Path) -> Option<[i64; 8]> {
        let stat = rustix::fs::lstat(path).ok()?;
        crate::disk::reads::settled(&stat, SystemTime::now())
    }

    /// What the file at `path` is known to hold, measured against `bytes`.
    pub(super) enum Held {
        /// It is the file found holding `bytes`, unchanged since.
        These,
        /// It is a file found holding other bytes, unchanged since.
        Others,
        /// Nothing is known of it.
        Unknown,
    }

    /// What the file at `path` holds, as far as this process found it ([`Held`]).
    pub(super) fn held(path: &Path, bytes: &[u8]) -> Held {
        let Some(now) = identity(path) else {
            return Held::Unknown;
        };
        KEPT.get(path, |(found, held)| {
            (*found == now).then_some(match held == bytes {
                true => Held::These,
                false => Held::Others,
            })
        })
        .unwrap_or(Held::Unknown)
    }

    /// The file at `path` holds `bytes` (just read, or just written): kept once settled.
    pub(super) fn found(path: &Path, bytes: &[u8]) {
        match identity(path) {
            Some(identity) => KEPT.put(path, (identity, bytes.to_vec())),
            None => KEPT.forget(path),
        }
    }
}

/// The guard folders ([`GUARD_DIRS`]) in the group's bind folder `bind` that exist, and those
/// `create` says to make (with their parents), opened without following links, parents first.
fn open_guard_dirs(
    bind: &SafeDir,
    create: impl Fn(&str) -> bool,
) -> Result<Vec<(&'static str, SafeDir)>, FsError> {
    let mut opened: Vec<(&'static str, SafeDir)> = Vec::new();
    for folder in GUARD_DIRS {
        let path = Path::new(folder);
        let parent = path.parent().and_then(Path::to_str).unwrap_or_default();
        let parent = match parent.is_empty() {
            true => Some(bind),
            false => opened.iter().find(|(p, _)| *p == parent).map(|(_, d)| d),
        };
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if let Some(parent) = parent
            && let Some(dir) = parent.open_child(name, create(folder))?
        {
            opened.push((folder, dir));
        }
    }
    Ok(opened)
}

/// A group as found on disk, with its plan and the steps that would bring it there.
#[derive(Debug)]
pub struct Observation {
    /// The group folder.
    pub dir: SafeDir,
    /// `.claude-fragments`, when it exists (or was created).
    pub fragments: Option<SafeDir>,
    /// The group's bind folder in clawmd's state, when it exists (or was created).
    pub bind: Option<SafeDir>,
    /// The group's managed folder in its bind folder, when it exists (or was created).
    pub managed: Option<SafeDir>,
    /// The group's guard folders that exist (or were created), by path relative to the bind
    /// folder, parents first.
    pub guard: Vec<(&'static str, SafeDir)>,
    /// The group's rescue folder (outside the group), when it exists (or was created for a
    /// rescue).
    pub rescues: Option<SafeDir>,
    /// Temp files an interrupted run under the group's lock made and left (from its journal;
    /// never merely something named like a temp file).
    pub leftovers: Vec<Leftover>,
    /// Whether the group's journal still has records (an interrupted run's, even when none
    /// of its temps is left): a run under the lock empties it.
    pub journal_pending: bool,
    /// The parsed `container.json`.
    pub config: GroupConfig,
    /// The delivery mode planned for (the deployment's, or `inline` for flat backends).
    pub delivery: Delivery,
    /// The desired state.
    pub plan: GroupPlan,
    /// The difference between the disk and the plan.
    pub steps: Vec<Step>,
    /// Every read made through the group's folders so far, in order ([`crate::disk::reads`]): what
    /// the group's record keeps when it is found as planned.
    pub reads: Arc<ReadLog>,
    /// What clawmd wrote in `.claude-fragments`, by its record ([`written`]; `None`: no
    /// `.claude-fragments`, or no whole record).
    pub written: Option<WrittenFragments>,
    /// The group folder's `container.json`, as read, when it is the group's own config
    /// ([`own_config`]): the runner binds it, and the spawn digest pins it.
    pub own_config: Option<Vec<u8>>,
}

impl Observation {
    /// Whether the group is exactly as planned (every step is a [`Step::Keep`]), with every
    /// folder of the group that its container binds there.
    pub fn is_up_to_date(&self) -> bool {
        self.leftovers.is_empty()
            && !self.journal_pending
            && self.all_kept()
            && !self.lacks_fragments_folder()
    }

    /// Whether the container of a copy or link delivery binds `.claude-fragments` (`clawmd
    /// mounts` lists it) and the group has none: a plan without fragments writes nothing
    /// there, and a runtime binding a missing folder fails to start the container (or makes
    /// it, as root).
    pub fn lacks_fragments_folder(&self) -> bool {
        self.fragments.is_none() && self.plan.target.binds_fragments()
    }

    /// Whether every step keeps what is there ([`Step::Keep`], [`Step::Shadowed`],
    /// [`Step::LeftAlone`], [`Step::Foreign`]).
    pub fn all_kept(&self) -> bool {
        self.steps.iter().all(|step| {
            matches!(
                step,
                Step::Keep { .. }
                    | Step::Shadowed { .. }
                    | Step::LeftAlone { .. }
                    | Step::Foreign { .. }
            )
        })
    }

    /// The group's folders (under the lock, every folder the steps write in is made).
    pub fn dirs(&self) -> Dirs<'_> {
        Dirs {
            group: &self.dir,
            fragments: self.fragments.as_ref(),
            bind: self.bind.as_ref(),
            managed: self.managed.as_ref(),
            rescues: self.rescues.as_ref(),
            guard: &self.guard,
            fragments_bound: self.plan.target.binds_fragments(),
        }
    }

    /// How the report names each leftover temp.
    pub fn leftover_names(&self) -> Vec<String> {
        self.leftovers
            .iter()
            .map(|leftover| state::describe_leftover(leftover, self.dir.path()))
            .collect()
    }
}

/// Opens the group at `group_path`, reads its config, plans it with the deployment's delivery
/// `settings` and diffs the plan against the disk. `writer`: the journal of the run that
/// holds the group's lock, which makes `.claude-fragments` when missing (and the rescue
/// folder when a hand edit is to be kept) and records every temp the run makes in the
/// journal; `None` to only look.
pub fn observe(
    layout: &Layout,
    sources: &Sources,
    group_path: &Path,
    settings: &DeliverySettings,
    writer: Option<&Arc<TempJournal>>,
) -> Result<Observation, GroupError> {
    observe_opened(layout, sources, open_group(group_path)?, settings, writer)
}

/// [`observe`] for a report that changes nothing (a dry run, `check`) of `group` (its folder
/// at `group_path`): a group found as planned is reported from this look, without the lock. A
/// group found needing work, or that could not be looked at, is looked at again holding its
/// lock, waited for as `wait` says, so that the report never catches a group another run is
/// midway through: composing it, or keeping its books after its answer, as `clawmd serve` and
/// the Node addon do. A group whose lock was never made (no run has composed it) stands by the
/// first look.
pub fn observe_settled(
    layout: &Layout,
    sources: &Sources,
    group: &str,
    group_path: &Path,
    settings: &DeliverySettings,
    wait: fsops::LockWait<'_>,
) -> Result<Observation, GroupError> {
    let first = observe(layout, sources, group_path, settings, None);
    settled(layout, sources, group, group_path, settings, first, wait)
}

/// The `first` look of [`observe_settled`], or the look made again once the group's lock is
/// held when it found the group needing work or failed for a reason another run may have made
/// (not a missing group or a bad name).
pub fn settled(
    layout: &Layout,
    sources: &Sources,
    group: &str,
    group_path: &Path,
    settings: &DeliverySettings,
    first: Result<Observation, GroupError>,
    wait: fsops::LockWait<'_>,
) -> Result<Observation, GroupError> {
    match &first {
        Ok(seen) if seen.is_up_to_date() => return first,
        Err(
            GroupError::Missing { .. } | GroupError::BadName { .. } | GroupError::Reserved { .. },
        ) => return first,
        _ => {}
    }
    match state::lock_group_if_made(layout, group, wait)? {
        Some(_lock) => observe(layout, sources, group_path, settings, None),
        None => first,
    }
}

/// [`observe`] of a group folder `dir` already opened ([`open_group`]), not read through yet.
pub fn observe_opened(
    layout: &Layout,
    sources: &Sources,
    mut dir: SafeDir,
    settings: &DeliverySettings,
    writer: Option<&Arc<TempJournal>>,
) -> Result<Observation, GroupError> {
    let group_path = dir.path().to_owned();
    let reads = Arc::new(ReadLog::default());
    reads.push(Read::root(Root::Group, true));
    dir.log_reads_in(&reads, Root::Group, Watch::Content);
    if let Some(journal) = writer {
        dir.record_temps_in(journal);
    }
    let group = group_path
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or_default();
    // One listing of the group folder gives the kind of every entry (no `stat` each) and the
    // leftover temp files.
    let listed = dir.listing()?;
    let config_bytes = read_config_bytes(layout, &dir)?;
    let config = parse_config_bytes(&config_bytes)?;
    let group_parts = read_group(layout, &dir)?;
    let local = read_local_memory(layout, &dir, &listed)?;
    let plan_inputs = plan_inputs(layout, &dir, &config_bytes, &group_parts, &local);
    let own_config = own_config(&dir, &config_bytes)?;
    let mut plan = GroupPlan {
        made_from: Some(plan_inputs),
        ..plan_with(
            layout,
            &dir,
            &config,
            own_config.is_some(),
            sources,
            settings,
            local.inputs(&group_parts),
        )?
    };
    // The deployment reads handed configs and none was handed for the group yet: its
    // container.json lacks what the runner keeps apart (nanoclaw's `cli_scope`).
    if config_bytes.from_group && layout.group_config == GroupConfigSource::Handed {
        plan.warnings.push(Warning::ConfigNotHanded {
            path: config_bytes.path.clone(),
        });
    }
    let delivery = plan.target.delivery;
    // The folders that exist are opened (for what is stale in them too); a missing one is
    // created (under the lock) only once the diff found nothing to refuse, and only when the
    // plan writes in it: a refused group is left exactly as it was.
    let mut fragments = match listed.kind(&dir, names::FRAGMENTS)? {
        None => None,
        Some(_) => dir.open_child(names::FRAGMENTS, false)?,
    };
    let mut bind = state::bind_dir(layout, group)?;
    reads.push(Read::root(Root::Bind, bind.is_some()));
    if let Some(bind) = &mut bind {
        bind.log_reads_in(&reads, Root::Bind, Watch::Identity);
    }
    let mut managed = match &bind {
        Some(bind) => bind.open_child(names::MANAGED, false)?,
        None => None,
    };
    let mut guard = match &bind {
        Some(bind) => open_guard_dirs(bind, |_| false)?,
        None => Vec::new(),
    };
    let dirs = Dirs {
        group: &dir,
        fragments: fragments.as_ref(),
        bind: bind.as_ref(),
        managed: managed.as_ref(),
        rescues: None,
        guard: &guard,
        fragments_bound: plan.target.binds_fragments(),
    };
    // What clawmd wrote in `.claude-fragments`, when there is one: it removes or replaces only
    // that. (A record an interrupted run left after removing the folder names only what clawmd
    // wrote; the next compose that writes fragments replaces it.)
    let written = fragments
        .as_ref()
        .and_then(|_| written::read(layout, group));
    let steps = diff_listed(
        &dirs,
        &listed,
        &layout.rescue_dir(group),
        &plan,
        written.as_ref(),
        &config.mcp_instructions,
    )?;
    // The rescue folder is looked at only when a hand edit is to be kept; its budget is
    // checked before anything is created, so a refused group is left exactly as it was.
    let rescuing = steps.iter().any(|step| matches!(step, Step::Rescue { .. }));
    let mut rescues = None;
    if rescuing {
        rescues = state::rescue_dir(layout, group)?;
        check_rescue_budget(rescues.as_ref(), &steps, &layout.recipe.own_text_file())?;
    }
    if let Some(journal) = writer {
        let wants = |place: Place| plan.entries.iter().any(|d| d.path.place == place);
        // Made empty where the container binds it and no fragment is planned.
        // Planned as an empty folder: one moved there since the listing is not written over.
        if fragments.is_none() && (wants(Place::Fragments) || plan.target.binds_fragments()) {
            fragments = Some(dir.open_empty_child(names::FRAGMENTS)?);
        }
        if let Some(fragments) = &mut fragments {
            fragments.record_temps_in(journal);
        }
        let guarded = |folder: &str| {
            plan.entries.iter().any(|d| match d.path.place {
                Place::Guard(wanted) => Path::new(wanted).starts_with(folder),
                _ => false,
            })
        };
        let state_wanted = wants(Place::Bind) || wants(Place::Managed) || guarded(GUARD_DIR);
        if bind.is_none() && state_wanted {
            bind = Some(state::create_bind_dir(layout, group, journal)?);
        }
        if let Some(bind) = &mut bind {
            bind.record_temps_in(journal);
            if managed.is_none() && wants(Place::Managed) {
                managed = bind.open_child(names::MANAGED, true)?;
            }
            if GUARD_DIRS.iter().any(|folder| guarded(folder)) {
                guard = open_guard_dirs(bind, guarded)?;
            }
        }
        if let Some(managed) = &mut managed {
            managed.record_temps_in(journal);
        }
        for (_, dir) in &mut guard {
            dir.record_temps_in(journal);
        }
        if rescuing {
            match &mut rescues {
                Some(rescues) => rescues.record_temps_in(journal),
                None => rescues = Some(state::create_rescue_dir(layout, group, &dir, journal)?),
            }
        }
    }
    let journal_pending = state::may_have_leftovers(layout, group);
    let leftovers = match journal_pending {
        true => state::leftovers(layout, group)?,
        false => Vec::new(),
    };
    Ok(Observation {
        dir,
        fragments,
        bind,
        managed,
        guard,
        rescues,
        leftovers,
        journal_pending,
        config,
        delivery,
        plan,
        steps,
        reads,
        written,
        own_config,
    })
}

/// What a plan made from a look at a group is made from there ([`GroupPlan::made_from`]):
/// equal inputs, equal plan.
/// The config counts by where it came from relative to the group folder or the state folder,
/// so that a deployment composed elsewhere names the same plans.
fn plan_inputs(
    layout: &Layout,
    dir: &SafeDir,
    config: &ConfigBytes,
    group: &GroupParts,
    local: &LocalMemory,
) -> [u8; 32] {
    let mut key = KeyHasher::new();
    key.field(config.bytes.as_deref().unwrap_or(b"-"));
    let origin = (config.path.strip_prefix(dir.path()))
        .or_else(|_| config.path.strip_prefix(&layout.state_dir))
        .unwrap_or(&config.path);
    key.field(origin.as_os_str().as_encoded_bytes());
    key.field(&group.digest());
    // No local memory reads as an empty one, as in the verdict's key (the plan seeds it
    // empty, and a plan misses nothing of an empty one): the run that seeds it and the runs
    // after it name the same plan.
    key.field(local.bytes.as_deref().unwrap_or_default());
    key.field(format!("{:?}", local.too_large).as_bytes());
    key.finish()
}

/// Whether the group `group` still reads as `reads` recorded (every read finds again what it
/// found: [`crate::disk::fsops::replay`]), opening its folder and its bind folder as [`observe`] does.
/// `dir` is the group folder, opened with [`open_group`]; `bind` opens its bind folder (as
/// [`state::bind_dir`] does).
pub fn reads_hold(
    dir: SafeDir,
    bind: impl Fn() -> Result<Option<SafeDir>, FsError>,
    reads: &[Read],
) -> bool {
    reads_found(dir, bind, reads).is_some()
}

/// [`reads_hold`], saying too whether a file was found the same by its bytes though its
/// identity would now stand for them (`Some(true)`: the look is worth recording again,
/// [`crate::disk::fsops::replay`]); `None` when a read finds something else.
pub fn reads_found(
    dir: SafeDir,
    bind: impl Fn() -> Result<Option<SafeDir>, FsError>,
    reads: &[Read],
) -> Option<bool> {
    let dir = std::cell::Cell::new(Some(dir));
    crate::disk::fsops::replay(reads, |root| match root {
        Root::Group => Ok(dir.take()),
        Root::Bind => bind(),
        // A container view's reads are replayed by the view (`MountedFs::holds`).
        Root::Mount(_) => Ok(None),
    })
}
