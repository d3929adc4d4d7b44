//! The agent's view of its memory: the [`loader`](crate::loader) evaluated inside a group's
//! container, through the runner's mount table (DESIGN §1), so links that dangle on the host
//! (`.claude-shared.md -> /app/CLAUDE.md`) resolve as they do in the container and every path
//! is printed as the agent sees it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::disk::fsops::{FsError, SafeDir};
use crate::disk::reads::{Read, Root as ReadRoot};
use crate::error::GroupError;
use crate::input::layout::{AGENT_GROUP_ID_KEY, Layout, MountNeeds};
use crate::input::names;
use crate::loader::fs::MemoryFs;
use crate::loader::{LoadOptions, LoaderError, Memory, SettingsEvaluation, Severity, load};
use crate::plan::delivery::verify::AgentSettings;
use crate::plan::target::Target;
use crate::report::{escape, escape_path};
use crate::runtime::mounted::{Mount, MountedFs, table_order};

pub use crate::input::pin::Consumer;
pub use crate::plan::target::{DEFAULT_CONTAINER_HOME, ViewOptions, load_options};

/// The container's mounts for `group`, whose composition needs `needs`:
/// [`Layout::mount_table`] as the container view's [`Mount`]s.
///
/// ```
/// use clawmd::layout::{Layout, MountNeeds};
/// use clawmd::runtime::mounted::Mount;
///
/// let layout = Layout::under_root("/srv".as_ref());
/// let needs = MountNeeds {
///     entry_point: "CLAUDE.md",
///     fragments: true,
///     managed: false,
///     app: true,
///     config: true,
/// };
/// let mounts = clawmd::view::container_mounts(&layout, "main", &needs);
/// assert!(mounts.contains(&Mount::new("/app/CLAUDE.md", "/srv/container/CLAUDE.md")));
/// assert!(mounts.contains(&Mount::new("/workspace/agent", "/srv/groups/main")));
/// ```
pub fn container_mounts(layout: &Layout, group: &str, needs: &MountNeeds) -> Vec<Mount> {
    layout
        .mount_table(group, needs)
        .into_iter()
        .map(|bind| Mount::new(bind.container, bind.host))
        .collect()
}

/// The mounts of the container of `group` (the group's `~/.claude` among them where the
/// deployment says it lives, [`Layout::claude_home`]), the home in its place when given.
pub fn group_mounts(
    layout: &Layout,
    group: &str,
    needs: &MountNeeds,
    options: &ViewOptions,
) -> Vec<Mount> {
    let mut mounts = container_mounts(layout, group, needs);
    // A home given for the view stands for the whole home, `~/.claude` included.
    if let Some(home) = &options.home {
        let claude = layout.claude_home_mount();
        mounts.retain(|mount| mount.container != claude);
        mounts.push(Mount::new(container_home(options), home));
    }
    mounts
}

/// The agent's `$HOME` in the view: the mounted home, or the deployment's `agentHome` when
/// only its `~/.claude` is mounted.
fn view_home(layout: &Layout, options: &ViewOptions) -> Option<PathBuf> {
    match &options.home {
        Some(_) => Some(container_home(options)),
        None => layout
            .claude_home
            .as_ref()
            .map(|_| layout.agent_home.clone()),
    }
}

/// The options the loader runs with for `group`'s container seen through `fs`.
fn group_load_options(layout: &Layout, fs: &MountedFs, options: &ViewOptions) -> LoadOptions {
    let mut load_options =
        load_options(&layout.workspace_mount, view_home(layout, options), options);
    // The managed-policy mount point, where the table binds the group's managed folder
    // (managed delivery); the image's own managed policy is not modelled.
    let managed = &layout.managed_mount;
    load_options.managed_dir = fs
        .mounts()
        .iter()
        .any(|m| m.container.starts_with(managed))
        .then(|| managed.to_owned());
    load_options
}

/// What the settings files the agent can write do to its memory, for the CLI and for the
/// Agent SDK (`settingSources: ['project','user']`), read through `fs`, the view of the
/// group's container ([`group_view`]: the group folder and the group's `~/.claude` where the
/// deployment says where it is; every read bounded, never following a link on the host, never
/// opening a FIFO or device).
pub fn agent_settings_in(
    layout: &Layout,
    fs: &MountedFs,
    options: &ViewOptions,
) -> Result<AgentSettings, GroupError> {
    if let Some(err) = unnamed_claude_home(layout, fs) {
        return Err(err);
    }
    let evaluate = |consumer: Consumer| -> Result<SettingsEvaluation, GroupError> {
        let options = ViewOptions {
            consumer,
            ..options.clone()
        };
        let load_options = group_load_options(layout, fs, &options);
        let cwd = fs
            .canonicalize(&load_options.cwd)
            .map_err(|source| LoaderError::Cwd {
                path: load_options.cwd.clone(),
                source,
            })?;
        Ok(crate::loader::settings::evaluate(fs, &load_options, &cwd))
    };
    Ok(AgentSettings {
        cli: evaluate(Consumer::Cli)?,
        sdk: evaluate(Consumer::Sdk)?,
    })
}

fn container_home(options: &ViewOptions) -> PathBuf {
    options
        .container_home
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CONTAINER_HOME))
}

/// Loads what the agent of `group` gets at spawn. Returns the memory and the mounted
/// filesystem it was read through (to map container paths back to the host).
///
/// The group folder, and the group's `CLAUDE.md`, `.claude-fragments` and `container.json`
/// (mounted on their own, so the runner would bind whatever a link there points to), are
/// refused when they are symlinks, as compose and check refuse them; everything else in the
/// group is resolved as the container resolves it.
pub fn load_group(
    layout: &Layout,
    group: &str,
    options: &ViewOptions,
) -> Result<(Memory, MountedFs), GroupError> {
    let fs = group_view(layout, group, options)?;
    let memory = load_in(layout, &fs, options)?;
    Ok((memory, fs))
}

/// [`load_group`] through `fs`, the group's view ([`group_view`]).
pub fn load_in(
    layout: &Layout,
    fs: &MountedFs,
    options: &ViewOptions,
) -> Result<Memory, GroupError> {
    Ok(load(fs, &group_load_options(layout, fs, options))?)
}

/// The container view of `group`, through its mount table for `options`' delivery settings
/// (see [`load_group`] for what is refused).
pub fn group_view(
    layout: &Layout,
    group: &str,
    options: &ViewOptions,
) -> Result<MountedFs, GroupError> {
    let group_dir = crate::disk::deployment::checked_group_dir(layout, group)?;
    let dir = crate::disk::deployment::open_group(&group_dir)?;
    let seen = SeenConfig::of(layout, &dir)?;
    drop(dir);
    view_with_config(layout, group, &group_dir, &seen, options)
}

/// A group's config as its view is made from it: whether something is at `container.json`,
/// and the config read as compose reads it (the handed one where configs are handed).
struct SeenConfig {
    present: bool,
    bytes: Option<crate::disk::deployment::ConfigBytes>,
}

impl SeenConfig {
    fn of(layout: &Layout, dir: &SafeDir) -> Result<SeenConfig, GroupError> {
        Ok(SeenConfig {
            present: dir.kind(names::CONFIG)?.is_some(),
            bytes: crate::disk::deployment::read_config_bytes(layout, dir).ok(),
        })
    }
}

/// [`group_view`] of the group at `group_dir` whose config is `seen`.
fn view_with_config(
    layout: &Layout,
    group: &str,
    group_dir: &Path,
    seen: &SeenConfig,
    options: &ViewOptions,
) -> Result<MountedFs, GroupError> {
    open_view(
        layout,
        group_dir,
        mounts_with_config(layout, group, seen, options),
    )
}

/// The mounts of the view of `group` whose config is `seen`. Pure.
fn mounts_with_config(
    layout: &Layout,
    group: &str,
    seen: &SeenConfig,
    options: &ViewOptions,
) -> Vec<Mount> {
    // A config that cannot be read (malformed, a device, a link: check reports it) gives the
    // binds of a group with the default config; whatever is at `container.json` is bound (and
    // a link there refused below, as the runner would bind through it).
    let config =
        (seen.bytes.as_ref()).and_then(|b| crate::disk::deployment::parse_config_bytes(b).ok());
    let default = crate::input::config::GroupConfig::default();
    let settings = options.delivery_settings();
    let mut needs =
        Target::of(config.as_ref().unwrap_or(&default), &settings).mount_needs(seen.present);
    needs.config = seen.present;
    let mut mounts = group_mounts(layout, group, &needs, options);
    if options.home.is_none()
        && let Some(home) = runners_claude_home(layout, group, config.as_ref())
    {
        mounts.push(Mount::new(layout.claude_home_mount(), home));
    }
    mounts
}

/// What the agent's settings files did to its memory, kept per group by a caller that works
/// out verdicts again and again in one process (`clawmd serve`), with every read of the
/// container view that found it ([`MountedFs::log_reads_in`]). A later spawn of the group uses
/// it only while the deployment and the view's options are the ones it was found with, the
/// view's mount table (made from the group's config as it is now) is the same, and every one
/// of those reads, made again, finds what it found: the settings files themselves (by their
/// bytes), every folder on their paths and every name
/// looked up and missing. The evaluation is a function of the table and those reads, so it is
/// never older than the disk. (The settings files are compared by their bytes, never by their
/// identity, which a write through a shared mapping leaves as it was.)
///
/// [`Default`] keeps nothing (a one-shot run); [`AgentSettingsKept::enabled`] keeps.
#[derive(Debug, Default)]
pub struct AgentSettingsKept {
    enabled: bool,
    kept: std::sync::Mutex<KeptAgents>,
}

#[derive(Debug, Default)]
struct KeptAgents {
    /// The deployment and options every kept entry was found with.
    made_for: Option<(Layout, ViewOptions)>,
    groups: std::collections::HashMap<String, Arc<KeptAgent>>,
}

#[derive(Debug)]
struct KeptAgent {
    /// The config the mounts were made from (whether something is at `container.json`, and
    /// its bytes): the same config makes the same table.
    config: (bool, Option<Vec<u8>>),
    view: Arc<AgentView>,
    agent: AgentSettings,
}

/// The container view the agent's settings were read through, and every read of it.
#[derive(Debug)]
pub struct AgentView {
    /// The view's mount table.
    pub mounts: Vec<Mount>,
    /// Every read the settings' evaluation made through it.
    pub reads: Vec<crate::disk::reads::Read>,
}

/// What the agent's settings files do to its memory, with the view and reads that found it
/// when every read could be kept ([`crate::disk::reads::ReadLog::kept_reads`]).
#[derive(Debug)]
pub struct AgentFound {
    /// What the settings do.
    pub agent: AgentSettings,
    /// The view and its reads.
    pub view: Option<Arc<AgentView>>,
}

/// At most this many groups are kept (then every entry is dropped and kept again as spawns
/// come).
const MAX_KEPT_AGENTS: usize = 16_384;

impl AgentSettingsKept {
    /// Keeps what it is given, for a holder that answers many runs.
    pub fn enabled() -> AgentSettingsKept {
        AgentSettingsKept {
            enabled: true,
            kept: Default::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, KeptAgents> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The kept mounts, reads and findings of `group`'s view, when they were found for
    /// `layout` and `options` and the group's config `seen` (or another config making the
    /// same mount table) makes that view.
    fn entry(
        &self,
        layout: &Layout,
        options: &ViewOptions,
        group: &str,
        seen: &SeenConfig,
    ) -> Option<Arc<KeptAgent>> {
        let kept = self.lock();
        let (made_layout, made_options) = kept.made_for.as_ref()?;
        if made_options != options || !made_layout.same_but_handed(layout) {
            return None;
        }
        let entry = kept.groups.get(group)?;
        let config = seen.bytes.as_ref().and_then(|b| b.bytes.as_deref());
        let same_config = entry.config.0 == seen.present && entry.config.1.as_deref() == config;
        let same_view =
            same_config || entry.view.mounts == mounts_with_config(layout, group, seen, options);
        same_view.then(|| entry.clone())
    }

    fn keep(&self, layout: &Layout, options: &ViewOptions, group: &str, entry: KeptAgent) {
        let mut kept = self.lock();
        let same = kept
            .made_for
            .as_ref()
            .is_some_and(|(made_layout, made_options)| {
                made_options == options && made_layout.same_but_handed(layout)
            });
        if !same || kept.groups.len() >= MAX_KEPT_AGENTS {
            kept.groups.clear();
            kept.made_for = Some((layout.without_handed(), options.clone()));
        }
        kept.groups.insert(group.to_owned(), Arc::new(entry));
    }
}

/// [`agent_settings_in`] of the group folder opened as `dir`, through its view, answered from
/// `kept` when its entry for the group holds, and kept there when worked out.
pub fn agent_settings_kept(
    layout: &Layout,
    dir: &SafeDir,
    group: &str,
    options: &ViewOptions,
    kept: &AgentSettingsKept,
) -> Result<AgentFound, GroupError> {
    let group_dir = crate::disk::deployment::checked_group_dir(layout, group)?;
    let seen = SeenConfig::of(layout, dir)?;
    if kept.enabled
        && let Some(entry) = kept.entry(layout, options, group, &seen)
    {
        let (mounts, reads) = (entry.view.mounts.clone(), &entry.view.reads);
        let fs = open_view_for(layout, &group_dir, mounts, Some(reads))?;
        // Read again (once) when a file was found by its bytes though its identity would now
        // do, so that the spawns to come look at its identity alone.
        if fs.holds_fresh(&entry.view.reads) == Some(false) {
            return Ok(AgentFound {
                agent: entry.agent.clone(),
                view: Some(entry.view.clone()),
            });
        }
    }
    let mounts = mounts_with_config(layout, group, &seen, options);
    let mut fs = open_view(layout, &group_dir, mounts.clone())?;
    let log = Arc::new(crate::disk::reads::ReadLog::default());
    fs.log_reads_in(&log);
    let agent = agent_settings_in(layout, &fs, options)?;
    let view = (log.kept_reads()).map(|reads| Arc::new(AgentView { mounts, reads }));
    if kept.enabled
        && let Some(view) = &view
    {
        let entry = KeptAgent {
            config: (seen.present, seen.bytes.and_then(|b| b.bytes)),
            view: view.clone(),
            agent: agent.clone(),
        };
        kept.keep(layout, options, group, entry);
    }
    Ok(AgentFound { agent, view })
}

/// The group's `~/.claude` on the host where the runner names it by the group's agent group
/// id (`claudeHome` holding `{agentGroupId}`), which the mount table does not bind (the
/// runner's own bind) and the view adds; `None` when it cannot be named
/// ([`agent_settings_in`] then says the agent's settings are undecided).
fn runners_claude_home(
    layout: &Layout,
    group: &str,
    config: Option<&crate::input::config::GroupConfig>,
) -> Option<PathBuf> {
    if !layout.claude_home_by_agent_group_id() {
        return None;
    }
    let id = config.and_then(|c| c.switch_text(AGENT_GROUP_ID_KEY));
    layout.claude_home_of(group, id.as_deref()).ok().flatten()
}

/// Why the group's `~/.claude` cannot be named from its config, when `claudeHome` needs its
/// agent group id and its view ([`group_view`]) has no `~/.claude` mount.
fn unnamed_claude_home(layout: &Layout, fs: &MountedFs) -> Option<GroupError> {
    let home = layout.claude_home_mount();
    if !layout.claude_home_by_agent_group_id()
        || fs
            .mounts()
            .iter()
            .any(|mount| home.starts_with(&mount.container))
    {
        return None;
    }
    Some(GroupError::AgentHomeUnknown {
        template: layout.claude_home.clone().unwrap_or_default(),
    })
}

/// The container view of `group` through `mounts`, a table [`group_view`] made before (its
/// [`MountedFs::mounts`]) from the same config and settings, to replay `reads` (logged by a
/// view of that table): no config is read, and only the mounts the reads go through are
/// opened (a read through another finds nothing the same, [`MountedFs::replay`]).
pub fn view_of_table(
    layout: &Layout,
    group: &str,
    mounts: Vec<Mount>,
    reads: &[Read],
) -> Result<MountedFs, GroupError> {
    let group_dir = crate::disk::deployment::checked_group_dir(layout, group)?;
    open_view_for(layout, &group_dir, mounts, Some(reads))
}

/// Which of `mounts` (as given) `reads` go through.
fn mounts_read(mounts: &[Mount], reads: &[Read]) -> Vec<bool> {
    let order = table_order(mounts);
    let mut read = vec![false; mounts.len()];
    for r in reads {
        if let ReadRoot::Mount(place) = r.root
            && let Some(&index) = order.get(usize::from(place))
        {
            read[index] = true;
        }
    }
    read
}

/// The view through `mounts`, the mounts whose source is in the group folder `group_dir`
/// opened without following links.
fn open_view(
    layout: &Layout,
    group_dir: &Path,
    mounts: Vec<Mount>,
) -> Result<MountedFs, GroupError> {
    open_view_for(layout, group_dir, mounts, None)
}

/// [`open_view`], opening only the mounts `replayed` go through when given (the others
/// unopened: `EOPNOTSUPP`).
fn open_view_for(
    layout: &Layout,
    group_dir: &Path,
    mounts: Vec<Mount>,
    replayed: Option<&[Read]>,
) -> Result<MountedFs, GroupError> {
    let read = replayed.map(|reads| mounts_read(&mounts, reads));
    let dir_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let dir = match rustix::fs::open(group_dir, dir_flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => {
            return Err(crate::disk::deployment::missing_group(group_dir));
        }
        Err(Errno::NOTDIR | Errno::LOOP) => {
            let found = match fs_err::symlink_metadata(group_dir) {
                Ok(m) if m.file_type().is_symlink() => "a symlink",
                _ => "not a directory",
            };
            return Err(unsafe_entry(group_dir, found, "a real directory"));
        }
        Err(err) => {
            return Err(FsError::Io {
                op: "open directory",
                path: group_dir.to_owned(),
                source: err.into(),
            }
            .into());
        }
    };
    let mut sources = Vec::new();
    for (index, mount) in mounts.into_iter().enumerate() {
        if read.as_ref().is_some_and(|read| !read[index]) {
            sources.push((mount, Err(Errno::OPNOTSUPP)));
            continue;
        }
        let handle = match mount.host.strip_prefix(group_dir) {
            Ok(rel) if rel.as_os_str().is_empty() => {
                rustix::fs::openat(&dir, ".", OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
            }
            Ok(rel) => {
                let handle = rustix::fs::openat(
                    &dir,
                    rel,
                    OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                );
                if let Ok(fd) = &handle {
                    let is_link = rustix::fs::fstat(fd)
                        .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink);
                    if is_link {
                        let expected = if rel == Path::new(names::FRAGMENTS) {
                            "a real directory"
                        } else {
                            "a regular file"
                        };
                        return Err(unsafe_entry(&mount.host, "a symlink", expected));
                    }
                }
                handle
            }
            // Not in the group folder (the state, container/, the home): trusted host paths,
            // opened following links as a bind mount does. Its mount point may be in the
            // group folder (the entry point bound over `CLAUDE.md`): the runner would mount
            // through a link planted there, so it is refused like one at a bind's source.
            Err(_) => {
                let point = mount
                    .container
                    .strip_prefix(&layout.workspace_mount)
                    .ok()
                    .filter(|rel| !rel.as_os_str().is_empty());
                let planted = point.and_then(|rel| {
                    crate::runtime::mounts::link_on_the_way(rel, |path| {
                        rustix::fs::statat(&dir, path, AtFlags::SYMLINK_NOFOLLOW)
                            .ok()
                            .map(|st| crate::file_kind::FileKind::from_mode(st.st_mode))
                    })
                });
                if let Some(link) = planted {
                    return Err(unsafe_entry(
                        &group_dir.join(link),
                        "a symlink",
                        "a regular file",
                    ));
                }
                rustix::fs::open(&mount.host, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
            }
        };
        sources.push((mount, handle));
    }
    Ok(MountedFs::with_sources(sources))
}

/// The error for `path` in the group folder found as `found` where clawmd needs `expected`
/// (an agent may have planted it).
pub(crate) fn unsafe_entry(path: &Path, found: &str, expected: &'static str) -> GroupError {
    GroupError::Fs(FsError::Unsafe {
        path: path.to_owned(),
        found: found.to_owned(),
        expected,
        fix: format!(
            "an agent may have planted it: move {} aside and run `clawmd compose` for the group",
            path.display()
        ),
    })
}

/// A listing of what reaches the agent and what is dropped, for `render --delivery-view`.
/// Every name and text that came from disk is passed through [`escape`], so a file
/// name or an import an agent chose cannot move the cursor, clear the screen or forge a line.
pub fn delivery_view(memory: &Memory) -> String {
    let mut out = String::new();
    let approval = if memory.external_imports_approved {
        "approved"
    } else {
        "not approved"
    };
    let _ = writeln!(
        out,
        "memory for {} (external imports {approval}):",
        shown(&memory.cwd)
    );
    for file in &memory.files {
        let chars = file.body.chars().count();
        let via = match (&file.import, &file.parent) {
            (Some(import), Some(parent)) => {
                format!(" via {} in {}", escape(import), shown(parent))
            }
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "  loaded   {} ({chars} chars, {}){via}",
            shown(&file.path),
            memory.label_of(file)
        );
    }
    for diagnostic in &memory.diagnostics {
        let mark = match diagnostic.severity {
            Severity::Error => "error   ",
            Severity::Warning => "warning ",
            Severity::Info => "note    ",
        };
        // Each line names its file, unless its message already does (or names the import).
        let path = shown(&diagnostic.path);
        let message = escape(&diagnostic.message);
        let names_import = (diagnostic.import.as_deref())
            .is_some_and(|import| diagnostic.message.contains(import));
        match names_import || message.contains(&path) {
            true => writeln!(out, "  {mark} {message}"),
            false => writeln!(out, "  {mark} {path}: {message}"),
        }
        .ok();
    }
    if memory.files.is_empty() {
        let _ = writeln!(out, "  (nothing: Claude Code sends no memory block)");
    }
    out
}

fn shown(path: &Path) -> String {
    escape_path(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::reads::Seen;

    fn read_through(place: u16) -> Read {
        Read {
            root: ReadRoot::Mount(place),
            dir: String::new(),
            name: "settings.json".to_owned(),
            seen: Seen::Entry(None),
        }
    }

    #[test]
    fn a_replay_opens_the_mounts_its_reads_name_by_their_place_in_the_table() {
        // As given: the workspace, a file bound in it, the home. The table holds the deepest
        // mount point first: the file (0), then the two of two components (1, 2) as given.
        let mounts = vec![
            Mount::new("/workspace/agent", "/g"),
            Mount::new("/workspace/agent/AGENTS.md", "/s/AGENTS.md"),
            Mount::new("/home/node", "/h"),
        ];
        let table = MountedFs::with_sources(
            mounts
                .iter()
                .map(|mount| (mount.clone(), Err(Errno::NOENT))),
        )
        .mounts();
        let order = table_order(&mounts);
        let ordered: Vec<Mount> = order.iter().map(|&i| mounts[i].clone()).collect();
        assert_eq!(ordered, table);
        assert_eq!(table[0].container, Path::new("/workspace/agent/AGENTS.md"));
        // Reads through the home (place 2) and the workspace (place 1): the file is not opened.
        let read = mounts_read(&mounts, &[read_through(2), read_through(1)]);
        assert_eq!(read, vec![true, false, true]);
        assert_eq!(
            mounts_read(&mounts, &[read_through(0)]),
            vec![false, true, false]
        );
        assert_eq!(mounts_read(&mounts, &[]), vec![false, false, false]);
    }
}
