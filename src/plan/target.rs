//! What a group is composed as, in plain values: the agent backend ([`Provider`]), the delivery
//! mode ([`Delivery`]), the entry points, the byte budgets ([`DocumentBudgets`]), the deployment-wide
//! [`DeliverySettings`] and one group's [`Target`]; and how the loader looks at a group's
//! container for those settings ([`ViewOptions`], [`load_options`]), which `verify` and `view`
//! share.
//!
//! It imports only modules below it (`names`, `layout`'s `MountNeeds`, `pin`, `loader`), so
//! that `config` can name a group's provider and every module above can name a mode without
//! importing [`crate::plan::delivery`], which plans from these values (and keeps [`Target::of`],
//! which reads a group's config).

use std::fmt;
use std::path::{Path, PathBuf};

pub use crate::plan::providers::{AGENTS_MD, CODEX_BUDGET, DEFAULT_BUDGET, GEMINI_MD, Provider};

use serde::{Deserialize, Serialize};

use crate::input::layout::MountNeeds;
use crate::input::names;
use crate::input::pin::Consumer;
use crate::loader::{ClaudeVersion, ExternalImports, LoadOptions};

/// How the shared base and the skills' guidance reach a Claude Code agent.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Delivery {
    /// The composed guardrails (shared base, enabled skills, MCP instructions) as Claude
    /// Code's managed policy: one flat `CLAUDE.md` and a `managed-settings.json` that pins the
    /// settings by which the agent's own settings files could turn memory off, in a folder
    /// the runner binds read-only at the managed-policy mount point (`/etc/claude-code`). No
    /// file of the agent's can exclude or disable them, and a recompose reaches a running
    /// container at its next session. The workspace's `CLAUDE.md` only imports
    /// `CLAUDE.local.md`.
    #[default]
    Managed,
    /// One generated `CLAUDE.md` holding the shared base, the skills' guidance and the MCP
    /// instructions, importing only `CLAUDE.local.md`: loaded whole by stock Claude Code,
    /// read-only in the container (bound from clawmd's state folder).
    Inline,
    /// Regular-file copies refreshed at every compose, imported by an import-only `CLAUDE.md`:
    /// loaded by stock Claude Code.
    Copy,
    /// Symlinks into the container's `/app` mount: the real Claude Code drops these imports
    /// unless external imports are approved.
    Link,
}

impl Delivery {
    /// Every mode.
    pub const ALL: [Delivery; 4] = [
        Delivery::Managed,
        Delivery::Inline,
        Delivery::Copy,
        Delivery::Link,
    ];

    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Delivery::Managed => "managed",
            Delivery::Inline => "inline",
            Delivery::Copy => "copy",
            Delivery::Link => "link",
        }
    }
}

impl std::str::FromStr for Delivery {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        Delivery::ALL
            .into_iter()
            .find(|delivery| delivery.as_str() == text)
            .ok_or_else(|| {
                format!("unknown delivery mode {text:?}: use managed, inline, copy or link")
            })
    }
}

impl fmt::Display for Delivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The entry points clawmd may compose, for every backend.
pub const ENTRY_POINTS: [&str; 3] = [names::CLAUDE_MD, AGENTS_MD, GEMINI_MD];

/// Whether `name` (directly in the group folder) is an entry point clawmd composes.
pub fn is_entry_point_name(name: &str) -> bool {
    ENTRY_POINTS.contains(&name)
}

/// The byte budget of each backend's memory (`u64::MAX`: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DocumentBudgets {
    /// Claude Code: what it delivers to the agent (every file it loads; it skips a memory
    /// file over 4 MiB).
    pub claude: u64,
    /// Codex's `AGENTS.md` (`project_doc_max_bytes`, 32 KiB by default).
    pub codex: u64,
    /// opencode's `AGENTS.md`.
    pub opencode: u64,
    /// Gemini CLI's `GEMINI.md`.
    pub gemini: u64,
    /// Cursor's `AGENTS.md` (no cap by default).
    pub cursor: u64,
    /// Claude Code against Ollama (as `claude`).
    pub ollama: u64,
    /// Pi's `CLAUDE.md`.
    pub pi: u64,
}

impl Default for DocumentBudgets {
    fn default() -> Self {
        let of = |provider: Provider| provider.spec().budget;
        DocumentBudgets {
            claude: of(Provider::Claude),
            codex: of(Provider::Codex),
            opencode: of(Provider::Opencode),
            gemini: of(Provider::Gemini),
            cursor: of(Provider::Cursor),
            ollama: of(Provider::Ollama),
            pi: of(Provider::Pi),
        }
    }
}

impl DocumentBudgets {
    /// The budget of `provider`.
    pub fn of(&self, provider: Provider) -> u64 {
        match provider {
            Provider::Claude => self.claude,
            Provider::Codex => self.codex,
            Provider::Opencode => self.opencode,
            Provider::Gemini => self.gemini,
            Provider::Cursor => self.cursor,
            Provider::Ollama => self.ollama,
            Provider::Pi => self.pi,
        }
    }

    /// Sets the budget of `provider`.
    pub fn set(&mut self, provider: Provider, bytes: u64) {
        let slot = match provider {
            Provider::Claude => &mut self.claude,
            Provider::Codex => &mut self.codex,
            Provider::Opencode => &mut self.opencode,
            Provider::Gemini => &mut self.gemini,
            Provider::Cursor => &mut self.cursor,
            Provider::Ollama => &mut self.ollama,
            Provider::Pi => &mut self.pi,
        };
        *slot = bytes;
    }
}

/// The deployment-wide delivery settings (from `clawmd.json`, flags and `CLAWMD_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DeliverySettings {
    /// The delivery mode for Claude Code groups.
    pub delivery: Delivery,
    /// The backend of groups whose `container.json` has no `provider`.
    pub provider: Provider,
    /// Byte budgets.
    pub budgets: DocumentBudgets,
    /// The agent's runtime approves external imports for its workspace (only matters for
    /// link delivery): used to work out what reaches the agent.
    pub approve_external: bool,
    /// The Claude Code release the agents run: the loader's rules for working out what
    /// reaches them.
    pub claude_version: crate::loader::ClaudeVersion,
    /// Where `claude_version` comes from.
    pub claude_version_from: crate::input::pin::PinSource,
    /// The front end the agents run (the CLI, or the Agent SDK).
    pub consumer: crate::input::pin::Consumer,
    /// Where `consumer` comes from.
    pub consumer_from: crate::input::pin::PinSource,
    /// A release outside the conformance corpus the operator accepts to be judged by the
    /// nearest recorded rules (`acceptUnrecordedRelease` in `clawmd.json`): `check` then
    /// warns about it instead of failing.
    pub accepted_unrecorded: Option<crate::loader::ClaudeVersion>,
}

impl DeliverySettings {
    /// What a Claude Code group's verdict judges: the release and the consumer, and where
    /// each comes from.
    pub fn judged(&self) -> crate::input::pin::Judged {
        crate::input::pin::Judged {
            claude_code: self.claude_version,
            verified: self.claude_version.is_verified(),
            modelled_on: match self.claude_version.is_verified() {
                true => self.claude_version,
                false => self.claude_version.nearest_verified(),
            },
            claude_code_from: self.claude_version_from,
            consumer: self.consumer,
            consumer_from: self.consumer_from,
        }
    }
}

impl DeliverySettings {
    /// The default settings with this delivery mode.
    pub fn with_delivery(delivery: Delivery) -> Self {
        DeliverySettings {
            delivery,
            ..DeliverySettings::default()
        }
    }
}

/// What a group is composed as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, schemars::JsonSchema)]
pub struct Target {
    /// The backend.
    pub provider: Provider,
    /// The delivery mode (for flat backends, always `inline`).
    pub delivery: Delivery,
    /// The entry point file.
    pub file: &'static str,
    /// The byte budget.
    pub budget: u64,
}

impl Target {
    /// What the container of a group composed as this needs bound ([`Layout::mount_table`](crate::input::layout::Layout::mount_table));
    /// `config`: the group has a `container.json`.
    pub fn mount_needs(&self, config: bool) -> MountNeeds {
        let claude = !self.provider.is_flat();
        MountNeeds {
            entry_point: self.file,
            fragments: claude && matches!(self.delivery, Delivery::Copy | Delivery::Link),
            managed: claude && self.delivery == Delivery::Managed,
            app: claude && self.delivery == Delivery::Link,
            config,
        }
    }

    /// Whether the container binds the group's `.claude-fragments` (copy and link delivery
    /// of Claude Code), which must then exist, empty or not.
    pub fn binds_fragments(&self) -> bool {
        self.mount_needs(false).fragments
    }
}

/// The default `$HOME` of the agent inside the container.
pub const DEFAULT_CONTAINER_HOME: &str = "/home/node";

/// How to look at a group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ViewOptions {
    /// Treat external imports as approved for the workspace (else: as `~/.claude.json` in the
    /// mounted home says, i.e. not approved when there is no home).
    pub approve_external: bool,
    /// A host folder mounted as the agent's `$HOME` (user memory, `~/.claude.json`).
    pub home: Option<PathBuf>,
    /// Where that home is mounted in the container (default [`DEFAULT_CONTAINER_HOME`]).
    pub container_home: Option<PathBuf>,
    /// The front end.
    pub consumer: Consumer,
    /// The Claude Code release whose loader to reproduce (default: the newest the conformance
    /// corpus covers). Deployments pin a release; set it from their settings.
    pub claude_version: ClaudeVersion,
    /// The deployment's delivery mode: which binds the group's container has.
    pub delivery: Delivery,
    /// The backend of a group whose `container.json` names none.
    pub provider: Provider,
}

impl ViewOptions {
    /// The delivery settings these options stand for (what decides the container's binds).
    pub fn delivery_settings(&self) -> DeliverySettings {
        DeliverySettings {
            delivery: self.delivery,
            provider: self.provider,
            approve_external: self.approve_external,
            claude_version: self.claude_version,
            ..DeliverySettings::default()
        }
    }
}

/// The options the loader runs with for a container started in `cwd`.
pub fn load_options(cwd: &Path, home: Option<PathBuf>, options: &ViewOptions) -> LoadOptions {
    let mut load_options = LoadOptions::new(cwd, home);
    load_options.claude_version = options.claude_version;
    if options.approve_external {
        load_options.external_imports = ExternalImports::Approved;
    }
    if options.consumer == Consumer::Sdk {
        load_options.load_local = false;
    }
    load_options
}
