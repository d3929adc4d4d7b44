//! File names inside a group folder and inside clawmd's state folder: the one list every
//! module takes them from. A leaf: it imports nothing of the crate.

/// The group's config, owned by the container runner.
pub const CONFIG: &str = "container.json";
/// The composed, import-only entry point.
pub const CLAUDE_MD: &str = "CLAUDE.md";
/// The group's own memory, written by people and by the agent.
pub const CLAUDE_LOCAL_MD: &str = "CLAUDE.local.md";
/// The shared base, a link to (or copy of) `container/CLAUDE.md`.
pub const SHARED: &str = ".claude-shared.md";
/// The directory of skill and MCP fragments.
pub const FRAGMENTS: &str = ".claude-fragments";
/// The legacy link to the old `groups/global/CLAUDE.md`.
pub const LEGACY_GLOBAL_LINK: &str = ".claude-global.md";
/// The folder of skills inside `container/` (and inside the container's app mount).
pub const SKILLS: &str = "skills";
/// A skill's always-in-context guidance, inside `container/skills/<skill>/`.
pub const SKILL_INSTRUCTIONS: &str = "instructions.md";
/// Prefix of the name under which a hand-edited `CLAUDE.md` is kept before it is replaced.
pub const RESCUE_PREFIX: &str = "CLAUDE.md.rescued-";
/// What follows an entry point's name in the name of its rescued copy.
pub const RESCUE_INFIX: &str = ".rescued-";
/// The folder, inside the groups directory, that holds per-group lock files.
pub const LOCK_DIR: &str = ".clawmd-locks";
/// The default state folder, inside the groups directory (see [`Layout::state_dir`](crate::input::layout::Layout::state_dir)).
pub const STATE_DIR: &str = ".clawmd";
/// Inside the state folder: one folder per group holding its rescued hand edits.
pub const RESCUES: &str = "rescues";
/// Inside the state folder: the configs runners handed clawmd, one `<group>.json` each.
pub const CONFIGS: &str = "configs";
/// Inside the state folder: legacy text `migrate` kept aside (`groups/global/CLAUDE.md`).
pub const LEGACY: &str = "legacy";
/// Inside the state folder: one journal per lock of the temp files its runs made
/// (`fsops::TempJournal`).
pub const JOURNAL: &str = "journal";
/// Inside the state folder: one folder per group holding the files the runner binds
/// read-only into that group's container (`clawmd mounts`).
pub const BINDS: &str = "binds";
/// Inside a group's bind folder: the folder bound at the managed-policy mount point
/// (managed delivery).
pub const MANAGED: &str = "managed";
/// Claude Code's managed settings file, in the managed-policy folder.
pub const MANAGED_SETTINGS: &str = "managed-settings.json";
