//! `mounts`: the binds a runner makes for one group's container, in the order to apply them
//! ([`Layout::mount_table`], for the group's delivery target), so that the runner and clawmd
//! cannot drift: a runner applies the table as it is and adds only its own mounts (a session
//! folder, the agent's home, its own code), none of them over these. The one mount of the
//! runner's that goes *under* some of them is the agent's home (`agentHome`, default
//! `/home/node`): a Codex, Gemini CLI or opencode group's guard binds over paths in it
//! (opencode's config folders), listed last, so the runner mounts the home before them.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::disk::deployment::{
    Observation, checked_group_dir, has_own_config, open_group, parse_config_bytes,
    read_config_bytes,
};
use crate::disk::fsops::SafeDir;
use crate::error::GroupError;
use crate::file_kind::FileKind;
use crate::input::layout::{Bind, Layout};
use crate::input::names;
use crate::key_hash::KeyHasher;
use crate::plan::Content;
use crate::plan::delivery::GroupPlan;
use crate::plan::delivery::guard::{self, GuardPaths, GuardSettings};
use crate::plan::delivery::{LocalMemory, document};
use crate::plan::target::{DeliverySettings, Target};
use crate::report::{Detail, Line, Lines, Report, Tone, escape_path};

/// The group's delivery target, and whether its `container.json` exists.
fn group_target(
    layout: &Layout,
    group: &str,
    settings: &DeliverySettings,
) -> Result<(Target, bool), GroupError> {
    let dir = open_group(&checked_group_dir(layout, group)?)?;
    target_in(layout, &dir, settings)
}

/// For a group whose backend reads its document as it is (Codex, Gemini CLI, opencode,
/// Cursor, pi: no memory loader to model), the backend and the document compose binds for it
/// (`<state>/binds/<group>/AGENTS.md`, …): what `render` shows of such a group. `None` for a
/// Claude Code group.
pub fn flat_document(
    layout: &Layout,
    group: &str,
    settings: &DeliverySettings,
) -> Result<Option<(crate::plan::providers::Provider, PathBuf)>, GroupError> {
    let (target, _) = group_target(layout, group, settings)?;
    Ok(target
        .provider
        .is_flat()
        .then(|| (target.provider, layout.bind_dir(group).join(target.file))))
}

/// [`group_target`] of the group folder opened as `dir`.
fn target_in(
    layout: &Layout,
    dir: &SafeDir,
    settings: &DeliverySettings,
) -> Result<(Target, bool), GroupError> {
    let bytes = read_config_bytes(layout, dir)?;
    let own = has_own_config(dir, &bytes)?;
    let config = parse_config_bytes(&bytes)?;
    Ok((Target::of(&config, settings), own))
}

/// The mount table of `group`'s container with every host path absolute (relative paths of
/// the layout are taken from the current directory), as `clawmd mounts` prints it: the
/// layout's table, then the guard of the group's backend (Codex, Gemini CLI, opencode:
/// [`crate::plan::delivery::guard`]), whose binds under the agent's home (`guards.agent_home`) come
/// last, so that a runner mounts the home before them.
pub fn mounts(
    layout: &Layout,
    group: &str,
    settings: &DeliverySettings,
    guards: &GuardSettings,
) -> Result<MountsReport, GroupError> {
    let (target, exists) = group_target(layout, group, settings)?;
    mounts_of(layout, group, &target, exists, guards)
}

/// [`mounts`] of a group composed as `target`, whose folder holds a `container.json` of its
/// own when `own_config`: what a compose of the group just found ([`GroupReport::own_config`](crate::report::compose::GroupReport::own_config)),
/// so `clawmd serve` does not read the group's config again. The sources are checked as
/// [`mounts`] checks them.
pub fn mounts_of(
    layout: &Layout,
    group: &str,
    target: &Target,
    own_config: bool,
    guards: &GuardSettings,
) -> Result<MountsReport, GroupError> {
    let table = full_table(layout, group, target, own_config, &guards.agent_home);
    check_composed_sources(layout, group, &table)?;
    let binds = table
        .into_iter()
        .filter(|bind| !is_missing_shared_content(layout, bind))
        .map(|bind| Bind {
            host: absolute(&bind.host),
            ..bind
        })
        .collect();
    Ok(MountsReport(binds))
}

/// Refuses a table whose source that compose makes is not there as compose makes it: what
/// clawmd composes in the state must exist (a runner binding a missing source fails to start
/// the container, or with some runtimes binds an empty folder), and a bind inside the group
/// folder (`.claude-fragments`, the group's `container.json`) must be a real folder or file
/// there: the agent owns the group folder, and a runtime binds what a link there points to (a
/// `.claude-fragments` made a link to a host folder would put that folder in the agent's
/// container). Compose refuses such a group too; this holds for a runner that asks for the
/// binds without composing first.
fn check_composed_sources(layout: &Layout, group: &str, table: &[Bind]) -> Result<(), GroupError> {
    refuse_planted_mount_points(layout, group, table)?;
    let group_dir = layout.group_dir(group);
    let in_group = |host: &Path| host.starts_with(&group_dir) && host != group_dir;
    for bind in table {
        let composed = bind.host.starts_with(&layout.state_dir);
        if !composed && !in_group(&bind.host) {
            continue;
        }
        match crate::fsops::kind_no_follow(&bind.host) {
            Some(_) if composed => {}
            Some(FileKind::Dir | FileKind::File) => {}
            None => {
                return Err(GroupError::NotComposed {
                    group: group.to_owned(),
                    path: bind.host.clone(),
                });
            }
            Some(found) => {
                return Err(crate::runtime::view::unsafe_entry(
                    &bind.host,
                    found.describe(),
                    "a real folder or file",
                ));
            }
        }
    }
    Ok(())
}

/// Refuses a table one of whose mount points in the group folder (a bind whose container
/// path is under the workspace mount: the entry point, a guard's `AGENTS.override.md`,
/// `.opencode` or `opencode.json`, a handed config's `container.json`) is reached through a
/// symlink there: a runtime resolves a mount point's links inside the container, so the
/// read-only bind would land where the agent's link points (a folder it can rename) and the
/// name the backend reads would hold whatever the agent puts there.
fn refuse_planted_mount_points(
    layout: &Layout,
    group: &str,
    table: &[Bind],
) -> Result<(), GroupError> {
    let group_dir = layout.group_dir(group);
    for bind in table {
        let Ok(rel) = bind.container.strip_prefix(&layout.workspace_mount) else {
            continue;
        };
        if bind.host == group_dir.join(rel) {
            continue; // its own source, in the group folder: checked as a source is
        }
        if let Some(link) = link_on_the_way(rel, |path| {
            crate::fsops::kind_no_follow(&group_dir.join(path))
        }) {
            return Err(crate::runtime::view::unsafe_entry(
                &group_dir.join(link),
                "a symlink",
                "a regular file or folder (or nothing) where the runner binds",
            ));
        }
    }
    Ok(())
}

/// The first of `rel`'s leading paths (its first component, then two, … up to `rel` itself,
/// each relative to the group folder) that `kind_of` (the kind of what is there, not following
/// a link) finds to be a symlink: a mount point a runtime would reach through it. `None` when
/// none is, or where one is missing (the runtime makes the rest).
pub(crate) fn link_on_the_way(
    rel: &Path,
    kind_of: impl Fn(&Path) -> Option<FileKind>,
) -> Option<PathBuf> {
    let mut point = PathBuf::new();
    for part in rel.components() {
        point.push(part);
        if kind_of(&point)? == FileKind::Symlink {
            return Some(point);
        }
    }
    None
}

/// Whether `bind` is of the operator's shared content (under the container folder: link
/// delivery's shared base, skills and the recipe's folders) and nothing is there: a runtime
/// binding a missing path fails to start the container, and no plan imports what does not
/// exist (compose warns of a missing shared base). Once it exists the table lists it again,
/// and the spawn after the compose that imports it binds it.
fn is_missing_shared_content(layout: &Layout, bind: &Bind) -> bool {
    bind.host.starts_with(&layout.container_dir) && fs_err::symlink_metadata(&bind.host).is_err()
}

/// The mount table of `group`'s container for `target` (`config`: its `container.json`
/// exists): the layout's table, then the guard of the group's backend, whose binds under the
/// agent's home (`agent_home`) come last. Pure.
pub fn full_table(
    layout: &Layout,
    group: &str,
    target: &Target,
    config: bool,
    agent_home: &Path,
) -> Vec<Bind> {
    let mut table = layout.mount_table(group, &target.mount_needs(config));
    let paths = GuardPaths {
        workspace: &layout.workspace_mount,
        home: agent_home,
    };
    // The binds do not depend on the files' bytes (budgets, the runner's own settings).
    let (budgets, bases) = (Default::default(), guard::Bases::builtin());
    if let Some(guard) = guard::guard(target.provider, &budgets, paths, &bases) {
        let entry = layout.workspace_mount.join(target.file);
        let entry_host = table
            .iter()
            .find(|bind| bind.container == entry)
            .map(|bind| bind.host.clone())
            .expect("the mount table binds the entry point");
        let (home, other): (Vec<_>, Vec<_>) = guard
            .binds(&entry_host, &layout.bind_dir(group))
            .into_iter()
            .partition(|(_, container)| container.starts_with(agent_home));
        for (host, container) in other.into_iter().chain(home) {
            table.push(Bind::read_only(host, container));
        }
    }
    table
}

/// What a running container sees of a group's composition, per its mount table: the binds
/// that pin a file at spawn (a file bind keeps the inode it was started with: clawmd replaces
/// the source, never the mount point) and the digest of what they pin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spawn {
    /// `sha256:<hex>` of every read-only file bind's container path and content, in the
    /// table's order: what a container started earlier cannot see without a restart.
    pub digest: String,
    /// The host paths of those file binds.
    pub pinned: Vec<PathBuf>,
    /// The host paths of the read-only folder binds (what is renamed inside them, a running
    /// container sees at once).
    pub live: Vec<PathBuf>,
    /// Whether the group folder holds a `container.json` of its own (the table was made
    /// with it).
    pub own_config: bool,
}

impl Spawn {
    /// Whether a change at `host` (a path clawmd wrote or removed) needs a restart to be seen
    /// by a running container: it is the source of a file bind. Anything else (in a bound
    /// folder, or in the group folder) is seen at the next session.
    pub fn needs_restart(&self, host: &Path) -> bool {
        self.pinned.iter().any(|pinned| pinned == host)
    }
}

/// The [`Spawn`] of the group observed as `seen` once its plan is applied: the plan's own
/// files (the entry point, the guard's files bound as files) from the plan, `container.json`
/// from the group folder (never through a link), the container side's file binds
/// (`/app/CLAUDE.md` in link delivery, the recipe's file mounts) from the host. A flat
/// backend's document is hashed without the agent's own memory, which it carries: like
/// `CLAUDE.local.md`, which is no bind's content, the agent's memory never asks for a restart.
pub fn spawn(layout: &Layout, group: &str, seen: &Observation) -> Result<Spawn, GroupError> {
    let config = seen.own_config.clone();
    let plan = &seen.plan;
    let table = full_table(
        layout,
        group,
        &plan.target,
        config.is_some(),
        &layout.agent_home,
    );
    refuse_planted_mount_points(layout, group, &table)?;
    let config_host = layout.group_dir(group).join(names::CONFIG);
    let mut key = KeyHasher::new();
    let mut spawn = Spawn {
        digest: String::new(),
        pinned: Vec::new(),
        live: Vec::new(),
        own_config: config.is_some(),
    };
    for bind in table.iter().filter(|bind| bind.readonly) {
        let planned = plan
            .entries
            .iter()
            .find(|d| d.path.host_path(layout, group) == bind.host);
        let pinned = match planned.map(|d| &d.content) {
            Some(Content::File(_)) if is_flat_entry(plan, &bind.host, layout, group) => {
                Some(document::document(&plan.sections, LocalMemory::Inline(b"")))
            }
            Some(Content::File(bytes)) => Some(bytes.clone()),
            Some(_) => None,
            None if bind.host == config_host => config.clone(),
            None if bind.host.starts_with(layout.bind_dir(group))
                || bind.host.starts_with(layout.group_dir(group)) =>
            {
                None // clawmd's folders (managed, guard folders) and `.claude-fragments`
            }
            None => host_file(&bind.host)?,
        };
        match pinned {
            Some(bytes) => {
                key.field(bind.container.as_os_str().as_encoded_bytes());
                key.field(&bytes);
                spawn.pinned.push(bind.host.clone());
            }
            None => spawn.live.push(bind.host.clone()),
        }
    }
    spawn.digest = crate::plan::delivery::verify::digest_text(&key.finish());
    Ok(spawn)
}

/// Whether `host` is the entry point of a flat backend's group (its document carries the
/// agent's memory).
fn is_flat_entry(plan: &GroupPlan, host: &Path, layout: &Layout, group: &str) -> bool {
    plan.target.provider.is_flat() && host == layout.bind_dir(group).join(plan.target.file)
}

/// A container-side bind's source: its bytes when it is a regular file (following links, as
/// the bind does), `None` for a folder or nothing.
fn host_file(host: &Path) -> Result<Option<Vec<u8>>, GroupError> {
    match fs_err::metadata(host) {
        Ok(meta) if meta.is_file() => {
            Ok(crate::disk::fsops::read_host_file(host, MAX_PINNED_BYTES)?)
        }
        Ok(_) | Err(_) => Ok(None),
    }
}

/// The most bytes of a container-side file bind the spawn digest reads.
const MAX_PINNED_BYTES: u64 = 64 * 1024 * 1024;

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

/// `clawmd mounts GROUP --format json`: a bare JSON array of binds, in the order to apply
/// them, so that a runner iterates over it as it is (`clawmd schema mounts` prints its schema;
/// an array has no room for the `$schema` key the other reports start with).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct MountsReport(pub Vec<Bind>);

impl Report for MountsReport {
    fn ok(&self) -> bool {
        true
    }

    fn human(&self, _detail: Detail) -> Vec<Line> {
        let mut lines = Lines::default();
        let width = self
            .0
            .iter()
            .map(|bind| escape_path(&bind.container).chars().count())
            .max()
            .unwrap_or(0);
        for bind in &self.0 {
            let container = escape_path(&bind.container);
            let pad = width - container.chars().count();
            lines.out(
                Tone::Plain,
                format!(
                    "{container}{} <- {} ({})",
                    " ".repeat(pad),
                    escape_path(&bind.host),
                    if bind.readonly {
                        "read-only"
                    } else {
                        "read-write"
                    }
                ),
            );
        }
        lines.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_starts_with_the_workspace_and_binds_the_composition_over_it() {
        let root = tempfile::tempdir().unwrap();
        let layout = Layout::under_root(root.path());
        std::fs::create_dir_all(layout.group_dir("main")).unwrap();
        let settings = DeliverySettings::default();
        // Not composed yet: the binds would name files that are not there.
        assert!(matches!(
            mounts(&layout, "main", &settings, &GuardSettings::default()),
            Err(GroupError::NotComposed { .. })
        ));
        let compose = |layout: &Layout| {
            let options = crate::commands::compose::ComposeOptions::default();
            let report = crate::commands::compose::compose(
                layout,
                &crate::disk::deployment::Selection::Named(vec!["main".to_owned()]),
                &options,
            )
            .unwrap();
            assert!(report.ok, "{report:?}");
        };
        compose(&layout);
        let table = mounts(&layout, "main", &settings, &GuardSettings::default())
            .unwrap()
            .0;
        assert_eq!(
            table[0],
            Bind::read_write(layout.group_dir("main"), "/workspace/agent")
        );
        assert!(table[1..].iter().all(|bind| bind.readonly));
        assert!(table.iter().all(|bind| bind.host.is_absolute()));
        // No container.json: the defaults compose wrote in the bind folder are bound over
        // it, read-only, so the agent cannot create one; an empty one (the mount point a
        // runtime leaves for that bind) is the same; with one of its own, it is bound.
        let config = Path::new("/workspace/agent/container.json");
        let config_source = |table: &[Bind]| {
            let bind = table.iter().find(|bind| bind.container == config).unwrap();
            assert!(bind.readonly);
            bind.host.clone()
        };
        let defaults = absolute(&layout.bind_dir("main").join("container.json"));
        assert_eq!(config_source(&table), defaults);
        assert_eq!(
            std::fs::read(&defaults).unwrap(),
            crate::input::config::DEFAULT_CONFIG
        );
        std::fs::write(layout.group_dir("main").join("container.json"), "").unwrap();
        compose(&layout);
        let table = mounts(&layout, "main", &settings, &GuardSettings::default())
            .unwrap()
            .0;
        assert_eq!(config_source(&table), defaults);
        std::fs::write(layout.group_dir("main").join("container.json"), "{}").unwrap();
        compose(&layout);
        let table = mounts(&layout, "main", &settings, &GuardSettings::default())
            .unwrap()
            .0;
        assert_eq!(
            config_source(&table),
            absolute(&layout.group_dir("main").join("container.json"))
        );
        assert!(!defaults.exists(), "the defaults are pruned once unused");
        // A Codex group binds its AGENTS.md.
        std::fs::write(
            layout.group_dir("main").join("container.json"),
            r#"{"provider": "codex"}"#,
        )
        .unwrap();
        compose(&layout);
        let table = mounts(&layout, "main", &settings, &GuardSettings::default())
            .unwrap()
            .0;
        assert!(
            table
                .iter()
                .any(|bind| bind.container == Path::new("/workspace/agent/AGENTS.md"))
        );
        // Its guard: the document again as AGENTS.override.md, and Codex's managed config.
        let entry = table
            .iter()
            .find(|b| b.container == Path::new("/workspace/agent/AGENTS.md"))
            .unwrap();
        let over = table
            .iter()
            .find(|b| b.container == Path::new("/workspace/agent/AGENTS.override.md"))
            .unwrap();
        assert_eq!((&over.host, over.readonly), (&entry.host, true));
        let managed = table
            .iter()
            .find(|b| b.container == Path::new("/etc/codex/managed_config.toml"))
            .unwrap();
        assert_eq!(
            managed.host,
            layout
                .bind_dir("main")
                .join("guard/codex/managed_config.toml")
        );
        // opencode: the binds under the agent's home come last, at the configured home.
        std::fs::write(
            layout.group_dir("main").join("container.json"),
            r#"{"provider": "opencode"}"#,
        )
        .unwrap();
        compose(&layout);
        let guards = GuardSettings {
            agent_home: PathBuf::from("/home/agent"),
        };
        let table = mounts(&layout, "main", &settings, &guards).unwrap().0;
        let first_home = table
            .iter()
            .position(|b| b.container.starts_with("/home/agent"))
            .unwrap();
        assert!(
            table[first_home..]
                .iter()
                .all(|b| b.container.starts_with("/home/agent"))
        );
        assert!(
            table
                .iter()
                .any(|b| b.container == Path::new("/home/agent/.config"))
        );
        assert!(table.iter().all(|b| !b.container.starts_with("/home/node")));
        assert!(!table.iter().any(|bind| bind.container.starts_with("/app")));
    }

    #[test]
    fn the_agents_claude_home_is_bound_read_write_where_the_deployment_says() {
        let root = tempfile::tempdir().unwrap();
        let mut layout = Layout::under_root(root.path());
        let needs = crate::plan::delivery::Target::of(
            &crate::input::config::GroupConfig::default(),
            &DeliverySettings::default(),
        )
        .mount_needs(false);
        let home = Path::new("/home/node/.claude");
        assert!(
            !layout
                .mount_table("main", &needs)
                .iter()
                .any(|bind| bind.container == home)
        );
        layout.claude_home = Some(root.path().join("data/sessions/{group}/.claude"));
        let table = layout.mount_table("main", &needs);
        assert!(table.contains(&Bind::read_write(
            root.path().join("data/sessions/main/.claude"),
            home
        )));
    }

    #[test]
    fn a_missing_or_linked_group_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let layout = Layout::under_root(root.path());
        std::fs::create_dir_all(&layout.groups_dir).unwrap();
        let settings = DeliverySettings::default();
        assert!(matches!(
            mounts(&layout, "nope", &settings, &GuardSettings::default()),
            Err(GroupError::Missing { .. })
        ));
        std::os::unix::fs::symlink("/etc", layout.group_dir("evil")).unwrap();
        assert!(mounts(&layout, "evil", &settings, &GuardSettings::default()).is_err());
        assert!(mounts(&layout, "../x", &settings, &GuardSettings::default()).is_err());
    }
}
