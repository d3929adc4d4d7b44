//! Where things are: the host deployment (groups and shared container content) and the
//! container's mount points. Every path clawmd uses is derived from a [`Layout`], so all of
//! them can be configured and nothing else hard-codes a location.

use std::path::{Path, PathBuf};

use crate::input::recipe::Recipe;
use serde::Serialize;

/// File names inside a group folder (the module [`crate::input::names`], also reachable here).
pub use crate::input::names;

/// The default mount point of `container/` content inside a container.
pub const DEFAULT_APP_MOUNT: &str = "/app";
/// The default `$HOME` of the agent inside a container (nanoclaw's image runs as `node`).
pub const DEFAULT_AGENT_HOME: &str = "/home/node";
/// The default working directory of the agent inside a container (the group is mounted here).
pub const DEFAULT_WORKSPACE_MOUNT: &str = "/workspace/agent";
/// Where Claude Code reads its managed policy (memory and settings) on Linux: the default
/// mount point of a group's managed folder in managed delivery.
pub const DEFAULT_MANAGED_MOUNT: &str = "/etc/claude-code";

/// The name of the group folder that held the old shared memory; retired by `migrate`.
pub const GLOBAL_GROUP: &str = "global";

/// One bind mount of a group's container: `host` shown at `container`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Bind {
    /// The host path (a folder or a single file), absolute when printed by `clawmd mounts`.
    pub host: PathBuf,
    /// The mount point inside the container (absolute).
    pub container: PathBuf,
    /// Whether the container sees it read-only.
    pub readonly: bool,
}

impl Bind {
    /// A read-only bind of `host` at `container`.
    pub fn read_only(host: impl Into<PathBuf>, container: impl Into<PathBuf>) -> Self {
        Bind {
            host: host.into(),
            container: container.into(),
            readonly: true,
        }
    }

    /// A read-write bind of `host` at `container`.
    pub fn read_write(host: impl Into<PathBuf>, container: impl Into<PathBuf>) -> Self {
        Bind {
            readonly: false,
            ..Bind::read_only(host, container)
        }
    }
}

/// What a group's composition needs its container to see, from its delivery target (the
/// `delivery` module says which, for each mode and backend).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MountNeeds {
    /// The entry point the agent's backend reads in the workspace (`CLAUDE.md`, `AGENTS.md`,
    /// `GEMINI.md`), bound from the group's bind folder in clawmd's state.
    pub entry_point: &'static str,
    /// The group's `.claude-fragments` folder (copy and link delivery).
    pub fragments: bool,
    /// The group's managed-policy folder at [`Layout::managed_mount`] (managed delivery).
    pub managed: bool,
    /// `<app>/CLAUDE.md` and `<app>/skills`, where link delivery's links point.
    pub app: bool,
    /// The group has a `container.json` of its own ([`crate::input::config::is_own_config`]): it is
    /// bound read-only, so the agent cannot change its configuration. Without one, the
    /// defaults clawmd writes in the group's bind folder are bound there instead, so the agent
    /// cannot create one either.
    pub config: bool,
}

/// In `claudeHome`: the group's folder name.
pub const GROUP_PLACEHOLDER: &str = "{group}";
/// In `claudeHome`: the runner's id of the group, its config's `agentGroupId` (nanoclaw
/// writes it in every `container.json` it materialises and in the config it hands).
pub const AGENT_GROUP_ID_PLACEHOLDER: &str = "{agentGroupId}";
/// The key of a group's config that [`AGENT_GROUP_ID_PLACEHOLDER`] stands for.
pub const AGENT_GROUP_ID_KEY: &str = "agentGroupId";

/// Whether `id` can stand in a path as one plain component: 1 to 128 ASCII letters, digits,
/// `.`, `_` or `-`, not starting with a dot (so never `.` or `..`).
fn is_plain_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The host and container paths of one deployment.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Layout {
    /// `groups/`: one folder per agent group.
    pub groups_dir: PathBuf,
    /// `container/`: the shared base and the skills, mounted at [`Layout::app_mount`].
    pub container_dir: PathBuf,
    /// Where `container/` content appears inside the container (default `/app`).
    pub app_mount: PathBuf,
    /// The agent's working directory inside the container (default `/workspace/agent`).
    pub workspace_mount: PathBuf,
    /// clawmd's own state on the host, outside every group folder, so no agent can plant,
    /// read or remove anything in it (default `groups/.clawmd`; `stateDir` in clawmd.json).
    pub state_dir: PathBuf,
    /// The sources every group's memory is composed from (`sources` and `memory` in
    /// clawmd.json; default: clawmd's built-in recipe).
    pub recipe: Recipe,
    /// Where a group's managed-policy folder is mounted in its container (managed delivery;
    /// default `/etc/claude-code`, where Claude Code reads its managed policy on Linux).
    pub managed_mount: PathBuf,
    /// A host folder holding the image's or the organisation's own managed policy
    /// (`CLAUDE.md`, `managed-settings.json`, …), merged into every group's managed folder,
    /// which the runner binds over the image's (`hostManagedDir` in clawmd.json).
    pub host_managed_dir: Option<PathBuf>,
    /// The runner's own Gemini CLI system settings on the host (`geminiSystemSettings`),
    /// merged into the guard of Gemini CLI groups.
    pub gemini_system_settings: Option<PathBuf>,
    /// The runner's own Codex managed configuration on the host (`codexManagedConfig`),
    /// merged into the guard of Codex groups.
    pub codex_managed_config: Option<PathBuf>,
    /// Where a group's config is read (`groupConfig` in clawmd.json).
    pub group_config: GroupConfigSource,
    /// Configs handed on this run's command line (`--config`), by group: read instead of
    /// any other.
    pub given_configs: std::collections::BTreeMap<String, std::sync::Arc<[u8]>>,
    /// The agent's `$HOME` inside the container (default `/home/node`; `agentHome`).
    pub agent_home: PathBuf,
    /// Where each group's `~/.claude` (the agent's user settings and memory, which the agent
    /// can write) lives on the host, as a path with `{group}` standing for the group's folder
    /// name and `{agentGroupId}` for its config's `agentGroupId` (`claudeHome` in clawmd.json,
    /// e.g. `data/sessions/{group}/.claude`, nanoclaw's
    /// `data/v2-sessions/{agentGroupId}/.claude-shared`). `None`: the runner mounts none, and
    /// the agent's `~/.claude` starts empty at every spawn.
    pub claude_home: Option<PathBuf>,
}

/// Where a group's config comes from.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Deserialize, schemars::JsonSchema,
)]
pub enum GroupConfigSource {
    /// `container.json` in the group folder (the default).
    #[default]
    #[serde(rename = "container.json")]
    File,
    /// What the runner last handed clawmd with `compose GROUP --config` (it keeps the
    /// group's config elsewhere, as nanoclaw keeps `cli_scope` in its database), kept in
    /// `<state>/configs/<group>.json`; a group with none handed yet: its `container.json`.
    #[serde(rename = "handed")]
    Handed,
}

impl Layout {
    /// Whether `self` and `other` are one deployment's layout, the configs handed to the run
    /// aside (what every group of a run, and every spawn of `clawmd serve`, shares: the keys
    /// made from it are kept while it holds).
    pub fn same_but_handed(&self, other: &Layout) -> bool {
        // Every field named, so that a field added is compared too.
        let Layout {
            groups_dir,
            container_dir,
            app_mount,
            workspace_mount,
            state_dir,
            recipe,
            managed_mount,
            host_managed_dir,
            gemini_system_settings,
            codex_managed_config,
            group_config,
            given_configs: _,
            agent_home,
            claude_home,
        } = self;
        *groups_dir == other.groups_dir
            && *container_dir == other.container_dir
            && *app_mount == other.app_mount
            && *workspace_mount == other.workspace_mount
            && *state_dir == other.state_dir
            && *recipe == other.recipe
            && *managed_mount == other.managed_mount
            && *host_managed_dir == other.host_managed_dir
            && *gemini_system_settings == other.gemini_system_settings
            && *codex_managed_config == other.codex_managed_config
            && *group_config == other.group_config
            && *agent_home == other.agent_home
            && *claude_home == other.claude_home
    }

    /// This layout without the configs handed to the run.
    pub fn without_handed(&self) -> Layout {
        Layout {
            given_configs: Default::default(),
            ..self.clone()
        }
    }

    /// The conventional layout under a project root: `<root>/groups`, `<root>/container`, and
    /// the default mount points.
    pub fn under_root(root: &Path) -> Self {
        let groups_dir = root.join("groups");
        Layout {
            state_dir: groups_dir.join(names::STATE_DIR),
            groups_dir,
            container_dir: root.join("container"),
            app_mount: PathBuf::from(DEFAULT_APP_MOUNT),
            workspace_mount: PathBuf::from(DEFAULT_WORKSPACE_MOUNT),
            recipe: Recipe::default(),
            managed_mount: PathBuf::from(DEFAULT_MANAGED_MOUNT),
            host_managed_dir: None,
            gemini_system_settings: None,
            codex_managed_config: None,
            group_config: GroupConfigSource::File,
            given_configs: std::collections::BTreeMap::new(),
            agent_home: PathBuf::from(DEFAULT_AGENT_HOME),
            claude_home: None,
        }
    }

    /// The host folder mounted as `group`'s `~/.claude` ([`Layout::claude_home`] with the
    /// group's name in place of `{group}`), when the deployment says where it is and names it
    /// by the folder name alone. A home named by the runner's agent group id
    /// ([`Layout::claude_home_by_agent_group_id`]) is the runner's own bind, not the table's:
    /// see [`Layout::claude_home_of`].
    pub fn claude_home_dir(&self, group: &str) -> Option<PathBuf> {
        if self.claude_home_by_agent_group_id() {
            return None;
        }
        self.claude_home_of(group, None).ok().flatten()
    }

    /// Whether `claudeHome` names each group's `~/.claude` by the runner's agent group id
    /// (`{agentGroupId}`: nanoclaw's `data/v2-sessions/<agent group id>/.claude-shared`),
    /// which only the group's config says.
    pub fn claude_home_by_agent_group_id(&self) -> bool {
        self.claude_home
            .as_ref()
            .is_some_and(|t| t.to_string_lossy().contains(AGENT_GROUP_ID_PLACEHOLDER))
    }

    /// The config the runner handed for `group`, when the deployment composes from handed
    /// configs (`"groupConfig": "handed"`) and one was handed: what compose keeps for `check`.
    pub fn handed_config_of(&self, group: &str) -> Option<&[u8]> {
        match self.group_config {
            GroupConfigSource::Handed => self.given_configs.get(group).map(|bytes| &bytes[..]),
            GroupConfigSource::File => None,
        }
    }

    /// The host folder mounted as `group`'s `~/.claude`, for a group whose config carries
    /// `agent_group_id` (its `agentGroupId`), as the verdict reads it. `Ok(None)`: the
    /// deployment names no home. An error says why the home cannot be named: `claudeHome`
    /// needs the agent group id and the config has none, or one that is not a plain name
    /// (it would reach outside the folder `claudeHome` names).
    pub fn claude_home_of(
        &self,
        group: &str,
        agent_group_id: Option<&str>,
    ) -> Result<Option<PathBuf>, String> {
        let Some(template) = self.claude_home.as_ref() else {
            return Ok(None);
        };
        let text = template.to_string_lossy();
        if !self.claude_home_by_agent_group_id() {
            return Ok(Some(PathBuf::from(text.replace(GROUP_PLACEHOLDER, group))));
        }
        let id = match agent_group_id {
            None => return Err("the group's config has no `agentGroupId`".to_owned()),
            Some(id) if !is_plain_id(id) => {
                return Err(format!(
                    "the group's config has `agentGroupId` {id:?}, which is not a plain name (1 to 128 of A-Z a-z 0-9 . _ -, not starting with a dot)"
                ));
            }
            Some(id) => id,
        };
        Ok(Some(PathBuf::from(
            text.replace(GROUP_PLACEHOLDER, group)
                .replace(AGENT_GROUP_ID_PLACEHOLDER, id),
        )))
    }

    /// `~/.claude` inside the container.
    pub fn claude_home_mount(&self) -> PathBuf {
        self.agent_home.join(".claude")
    }

    /// The host folder of a group.
    pub fn group_dir(&self, group: &str) -> PathBuf {
        self.groups_dir.join(group)
    }

    /// The shared base on the host: `container/CLAUDE.md`.
    pub fn shared_base_source(&self) -> PathBuf {
        self.container_dir.join(names::CLAUDE_MD)
    }

    /// The shared base as the container sees it: `<app>/CLAUDE.md`.
    pub fn shared_base_target(&self) -> PathBuf {
        self.app_mount.join(names::CLAUDE_MD)
    }

    /// The host folder of all skills: `container/skills`.
    pub fn skills_dir(&self) -> PathBuf {
        self.container_dir.join(names::SKILLS)
    }

    /// A skill's instructions on the host.
    pub fn skill_instructions_source(&self, skill: &str) -> PathBuf {
        self.skills_dir()
            .join(skill)
            .join(names::SKILL_INSTRUCTIONS)
    }

    /// A skill's instructions as the container sees them.
    pub fn skill_instructions_target(&self, skill: &str) -> PathBuf {
        self.app_mount
            .join(names::SKILLS)
            .join(skill)
            .join(names::SKILL_INSTRUCTIONS)
    }

    /// The binds a runner makes for one group's container, in the order to apply them (a
    /// folder before the binds inside it), from this layout and what the group's composition
    /// `needs` (its delivery target):
    ///
    /// 1. the group folder at the workspace, read-write (the agent's cwd and its memory);
    /// 2. read-only over it: the group's `container.json` (without one of its own, the defaults
    ///    in the group's bind folder, `<state>/binds/<group>/container.json`), the entry point
    ///    composed in the group's bind folder (`<state>/binds/<group>/CLAUDE.md`) over its
    ///    mount point in the group folder, and `.claude-fragments` (copy and link delivery);
    /// 3. the group's managed-policy folder (`<state>/binds/<group>/managed`) at
    ///    [`Layout::managed_mount`] (managed delivery);
    /// 4. `<app>/CLAUDE.md`, `<app>/skills` and the other container folders and files the
    ///    recipe's sources read ([`Recipe::mounts`]; link delivery, whose links point there).
    ///
    /// Everything clawmd composes is then read-only in the container whatever a later compose
    /// does: a file bound from the state folder keeps its inode until the container restarts
    /// (clawmd replaces the source, never the mount point), and a folder bind (the fragments,
    /// the managed folder) keeps showing what is renamed inside it. The one place the table is
    /// written down: `clawmd mounts`, the loader's container view and compose's verdict all
    /// read it.
    pub fn mount_table(&self, group: &str, needs: &MountNeeds) -> Vec<Bind> {
        let group_dir = self.group_dir(group);
        let workspace = &self.workspace_mount;
        let mut table = vec![Bind::read_write(&group_dir, workspace)];
        let config = match needs.config {
            true => group_dir.join(names::CONFIG),
            false => self.bind_dir(group).join(names::CONFIG),
        };
        table.push(Bind::read_only(config, workspace.join(names::CONFIG)));
        table.push(Bind::read_only(
            self.bind_dir(group).join(needs.entry_point),
            workspace.join(needs.entry_point),
        ));
        if needs.fragments {
            table.push(Bind::read_only(
                group_dir.join(names::FRAGMENTS),
                workspace.join(names::FRAGMENTS),
            ));
        }
        // The agent's `~/.claude`, read-write, where the deployment says it lives: the folder
        // whose settings compose's verdict reads.
        if let Some(home) = self.claude_home_dir(group) {
            table.push(Bind::read_write(home, self.claude_home_mount()));
        }
        if needs.managed {
            table.push(Bind::read_only(
                self.managed_dir(group),
                &self.managed_mount,
            ));
        }
        if needs.app {
            table.push(Bind::read_only(
                self.shared_base_source(),
                self.shared_base_target(),
            ));
            table.push(Bind::read_only(
                self.skills_dir(),
                self.app_mount.join(names::SKILLS),
            ));
            // The other container folders and files the recipe's sources read.
            for (container, host) in self.recipe.mounts(&self.app_mount, &self.container_dir) {
                table.push(Bind::read_only(host, container));
            }
        }
        table
    }

    /// The host folder bound at [`Layout::managed_mount`] in one group's container (managed
    /// delivery): `<state>/binds/<group>/managed`.
    pub fn managed_dir(&self, group: &str) -> PathBuf {
        self.bind_dir(group).join(names::MANAGED)
    }

    /// The host folder that keeps one group's rescued hand edits (outside the group folder).
    pub fn rescue_dir(&self, group: &str) -> PathBuf {
        self.state_dir.join(names::RESCUES).join(group)
    }

    /// The config the runner last handed for `group` (`groupConfig: "handed"`).
    pub fn handed_config(&self, group: &str) -> PathBuf {
        self.state_dir
            .join(names::CONFIGS)
            .join(format!("{group}.json"))
    }

    /// The host folder of legacy text `migrate` kept aside.
    pub fn legacy_dir(&self) -> PathBuf {
        self.state_dir.join(names::LEGACY)
    }

    /// The host folder of the files the runner binds read-only into one group's container.
    pub fn bind_dir(&self, group: &str) -> PathBuf {
        self.state_dir.join(names::BINDS).join(group)
    }

    /// The journal of the temp files made by the runs that hold one lock (a group's, or
    /// `global` for migrate's): `<state>/journal/<lock>`.
    pub fn temp_journal(&self, lock: &str) -> PathBuf {
        self.state_dir.join(names::JOURNAL).join(lock)
    }

    /// The lock file that serialises work on one group.
    pub fn lock_file(&self, group: &str) -> PathBuf {
        self.groups_dir
            .join(names::LOCK_DIR)
            .join(format!("{group}.lock"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_home_named_by_the_agent_group_id_takes_a_plain_id_and_is_not_the_tables() {
        let mut layout = Layout::under_root(Path::new("/r"));
        layout.claude_home = Some(PathBuf::from(
            "/r/data/v2-sessions/{agentGroupId}/.claude-shared",
        ));
        assert!(layout.claude_home_by_agent_group_id());
        assert_eq!(layout.claude_home_dir("g"), None, "the runner's own bind");
        assert_eq!(
            layout.claude_home_of("g", Some("ag-1_x.y")),
            Ok(Some(PathBuf::from(
                "/r/data/v2-sessions/ag-1_x.y/.claude-shared"
            )))
        );
        let long = "a".repeat(129);
        for bad in [
            None,
            Some(""),
            Some(".."),
            Some("."),
            Some(".hidden"),
            Some("a/b"),
            Some("a\0b"),
            Some(long.as_str()),
            Some("é"),
        ] {
            assert!(layout.claude_home_of("g", bad).is_err(), "{bad:?}");
        }
        layout.claude_home = Some(PathBuf::from("/r/data/sessions/{group}/.claude"));
        assert!(!layout.claude_home_by_agent_group_id());
        let by_name = Some(PathBuf::from("/r/data/sessions/g/.claude"));
        assert_eq!(layout.claude_home_dir("g"), by_name);
        assert_eq!(layout.claude_home_of("g", None), Ok(by_name));
        layout.claude_home = None;
        assert_eq!(layout.claude_home_of("g", Some("ag-1")), Ok(None));
    }

    #[test]
    fn same_but_handed_ignores_the_handed_configs_and_nothing_else() {
        let layout = Layout::under_root(Path::new("/srv/host"));
        let mut handed = layout.clone();
        handed
            .given_configs
            .insert("main".to_owned(), std::sync::Arc::from(&b"{}"[..]));
        assert!(layout.same_but_handed(&handed) && handed.same_but_handed(&layout));
        assert_eq!(handed.without_handed(), layout);
        let changes: [fn(&mut Layout); 6] = [
            |l| l.groups_dir.push("x"),
            |l| l.state_dir.push("x"),
            |l| l.agent_home.push("x"),
            |l| l.claude_home = Some(PathBuf::from("/h/{group}")),
            |l| l.host_managed_dir = Some(PathBuf::from("/m")),
            |l| l.recipe.sources.clear(),
        ];
        for change in changes {
            let mut other = handed.clone();
            change(&mut other);
            assert!(!layout.same_but_handed(&other), "{other:?}");
        }
    }

    #[test]
    fn default_layout_matches_the_mount_table() {
        let layout = Layout::under_root(Path::new("/srv/host"));
        assert_eq!(layout.group_dir("main"), Path::new("/srv/host/groups/main"));
        assert_eq!(layout.shared_base_target(), Path::new("/app/CLAUDE.md"));
        assert_eq!(
            layout.skill_instructions_target("web"),
            Path::new("/app/skills/web/instructions.md")
        );
        assert_eq!(
            layout.skill_instructions_source("web"),
            Path::new("/srv/host/container/skills/web/instructions.md")
        );
        assert_eq!(
            layout.rescue_dir("main"),
            Path::new("/srv/host/groups/.clawmd/rescues/main")
        );
        assert_eq!(
            layout.bind_dir("main"),
            Path::new("/srv/host/groups/.clawmd/binds/main")
        );
    }
}
