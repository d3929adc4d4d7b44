//! Delivery: how a group's memory reaches its agent, for every mode and every agent backend.
//!
//! Everything that depends on the delivery mode or the backend lives here, so that a new mode
//! or backend is a change to this module only:
//!
//! * [`Delivery`] — `inline` (the default: one generated `CLAUDE.md` that imports only
//!   `CLAUDE.local.md`), `copy` (regular-file copies imported by an import-only `CLAUDE.md`)
//!   and `link` (symlinks into the container's `/app`, as DESIGN §1 specifies; Claude Code
//!   drops those imports unless external imports are approved);
//! * [`Provider`] — the agent backend, from `container.json`'s `provider` key: `claude` gets
//!   `CLAUDE.md` in the chosen mode; `codex` and `opencode` get a flat `AGENTS.md`, `gemini` a
//!   flat `GEMINI.md`;
//! * [`Budgets`] — a byte budget per backend; over budget, whole optional sections are
//!   dropped, largest first (skills, then MCP instructions), and reported;
//! * [`plan_delivery`] — the pure part: the managed files of a group, from the sections the
//!   recipe's [`sources`](crate::sources) make;
//! * [`verify`] — whether everything composed reaches the agent (the loader on the result),
//!   and the digest of what it receives.

pub mod document;
pub mod guard;
pub mod managed;
pub mod snapshot;
pub mod verdicts;
pub mod verify;

pub use crate::sources::expand;

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::config::GroupConfig;
use crate::layout::{Layout, MountNeeds};
use crate::names;
use crate::plan::{
    Content, Desired, FragmentCollision, GroupPlan, ManagedPath, Sources, Warning,
    composed_claude_md, mount_point_placeholder,
};
use crate::recipe::MemoryFile;
use crate::sources::GroupParts;
use crate::sources::alone::Form;

pub use crate::sources::{Section, SectionId};
pub use document::{Dropped, LocalMemory};

/// How the shared base and the skills' guidance reach a Claude Code agent.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
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

/// The agent backend of a group (`container.json`'s `provider`, nanoclaw's key).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// Claude Code (CLI or Agent SDK): `CLAUDE.md` in the chosen delivery mode.
    #[default]
    Claude,
    /// OpenAI Codex: a flat `AGENTS.md` (Codex caps it at 32 KiB by default).
    Codex,
    /// opencode: a flat `AGENTS.md` (it does not expand `@` imports).
    Opencode,
    /// Gemini CLI: a flat `GEMINI.md`.
    Gemini,
}

impl Provider {
    /// Every provider, for messages.
    pub const ALL: [Provider; 4] = [
        Provider::Claude,
        Provider::Codex,
        Provider::Opencode,
        Provider::Gemini,
    ];

    /// The provider spelled `name`, if clawmd knows it.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == name)
    }

    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Claude => "claude",
            Provider::Codex => "codex",
            Provider::Opencode => "opencode",
            Provider::Gemini => "gemini",
        }
    }

    /// The document the backend reads in the agent's working directory.
    pub fn entry_point(self) -> &'static str {
        match self {
            Provider::Claude => names::CLAUDE_MD,
            Provider::Codex | Provider::Opencode => AGENTS_MD,
            Provider::Gemini => GEMINI_MD,
        }
    }

    /// Whether the backend gets one flat document (no import lines, local memory copied in).
    pub fn is_flat(self) -> bool {
        self != Provider::Claude
    }
}

impl std::str::FromStr for Provider {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        Provider::parse(text).ok_or_else(|| {
            format!(
                "unknown provider {text:?}: use {}",
                Provider::ALL.map(Provider::as_str).join(", ")
            )
        })
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The entry points clawmd may compose, for every backend.
pub const ENTRY_POINTS: [&str; 3] = [names::CLAUDE_MD, AGENTS_MD, GEMINI_MD];

/// The flat document of Codex and opencode agents.
pub const AGENTS_MD: &str = "AGENTS.md";
/// The flat document of Gemini CLI agents.
pub const GEMINI_MD: &str = "GEMINI.md";

/// Whether `name` (directly in the group folder) is an entry point clawmd composes.
pub fn is_entry_point_name(name: &str) -> bool {
    ENTRY_POINTS.contains(&name)
}

/// The byte budget of each backend's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budgets {
    /// Claude Code: what it delivers to the agent (every file it loads; it skips a memory
    /// file over 4 MiB).
    pub claude: u64,
    /// Codex's `AGENTS.md` (`project_doc_max_bytes`, 32 KiB by default).
    pub codex: u64,
    /// opencode's `AGENTS.md`.
    pub opencode: u64,
    /// Gemini CLI's `GEMINI.md`.
    pub gemini: u64,
}

/// 4 MiB: Claude Code's limit per memory file, and nanoclaw's cap on a generated document.
pub const DEFAULT_BUDGET: u64 = crate::loader::MAX_FILE_BYTES;
/// Codex's default `project_doc_max_bytes`.
pub const CODEX_BUDGET: u64 = 32 * 1024;

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            claude: DEFAULT_BUDGET,
            codex: CODEX_BUDGET,
            opencode: DEFAULT_BUDGET,
            gemini: DEFAULT_BUDGET,
        }
    }
}

impl Budgets {
    /// The budget of `provider`.
    pub fn of(&self, provider: Provider) -> u64 {
        match provider {
            Provider::Claude => self.claude,
            Provider::Codex => self.codex,
            Provider::Opencode => self.opencode,
            Provider::Gemini => self.gemini,
        }
    }

    /// Sets the budget of `provider`.
    pub fn set(&mut self, provider: Provider, bytes: u64) {
        let slot = match provider {
            Provider::Claude => &mut self.claude,
            Provider::Codex => &mut self.codex,
            Provider::Opencode => &mut self.opencode,
            Provider::Gemini => &mut self.gemini,
        };
        *slot = bytes;
    }
}

/// The deployment-wide delivery settings (from `clawmd.json`, flags and `CLAWMD_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DeliverySettings {
    /// The delivery mode for Claude Code groups.
    pub delivery: Delivery,
    /// The backend of groups whose `container.json` has no `provider`.
    pub provider: Provider,
    /// Byte budgets.
    pub budgets: Budgets,
    /// The agent's runtime approves external imports for its workspace (only matters for
    /// link delivery): used to work out what reaches the agent.
    pub approve_external: bool,
    /// The Claude Code release the agents run: the loader's rules for working out what
    /// reaches them.
    pub claude_version: crate::loader::ClaudeVersion,
    /// Where `claude_version` comes from.
    pub claude_version_from: crate::pin::PinSource,
    /// The front end the agents run (the CLI, or the Agent SDK).
    pub consumer: crate::pin::Consumer,
    /// Where `consumer` comes from.
    pub consumer_from: crate::pin::PinSource,
}

impl DeliverySettings {
    /// What a Claude Code group's verdict judges: the release and the consumer, and where
    /// each comes from.
    pub fn judged(&self) -> crate::pin::Judged {
        crate::pin::Judged {
            claude_code: self.claude_version,
            verified: self.claude_version.is_verified(),
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
    /// The target of a group with this config.
    pub fn of(config: &GroupConfig, settings: &DeliverySettings) -> Self {
        let provider = config.provider.unwrap_or(settings.provider);
        Target {
            provider,
            delivery: if provider.is_flat() {
                Delivery::Inline
            } else {
                settings.delivery
            },
            file: provider.entry_point(),
            budget: settings.budgets.of(provider),
        }
    }
}

impl Target {
    /// What the container of a group composed as this needs bound ([`Layout::mount_table`]);
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
}

/// The group's inputs besides its config: its own memory and what the recipe reads in its
/// folder.
#[derive(Debug, Clone, Copy, Default)]
pub struct GroupInputs<'a> {
    /// `CLAUDE.local.md`'s bytes (for flat documents, and the verdict).
    pub local_memory: Option<&'a [u8]>,
    /// The group side of the recipe (`None`: the recipe reads nothing in the group folder).
    pub group: Option<&'a GroupParts>,
    /// The size of a `CLAUDE.local.md` larger than Claude Code reads (`local_memory` is then
    /// `None`).
    pub local_memory_too_large: Option<u64>,
}

/// The desired state of a group: pure, from its config, the shared sources and the settings.
pub fn plan_delivery(
    layout: &Layout,
    config: &GroupConfig,
    sources: &Sources,
    inputs: GroupInputs<'_>,
    settings: &DeliverySettings,
) -> Result<GroupPlan, FragmentCollision> {
    let target = Target::of(config, settings);
    let empty = GroupParts::default();
    let (all, mut warnings) = crate::sources::sections(
        layout,
        config,
        sources,
        inputs.group.unwrap_or(&empty),
        target.delivery == Delivery::Link,
    )?;
    let has_memory = layout.recipe.memory == MemoryFile::Local;
    let mut all = all;
    let managed = target.delivery == Delivery::Managed && !target.provider.is_flat();
    if managed && let Some(section) = managed::host_section(sources) {
        // The host's own managed policy first: the group's managed folder hides the image's.
        all.insert(0, section);
    }
    // Each source as the release loads that file alone (frontmatter, comments, line endings,
    // its imports from its own folder to the depth limit), closed so that it cannot change
    // how the next is read.
    let form = match target.delivery {
        _ if target.provider.is_flat() => Form::Document,
        Delivery::Link => Form::Link,
        Delivery::Copy => Form::OwnFile,
        Delivery::Inline | Delivery::Managed => Form::Document,
    };
    for section in &mut all {
        sources
            .prepared
            .prepare(section, settings.claude_version, form);
    }
    let local = match inputs.local_memory {
        _ if !has_memory => LocalMemory::None,
        Some(bytes) if target.provider.is_flat() => LocalMemory::Inline(bytes),
        _ if target.provider.is_flat() => LocalMemory::Inline(b""),
        // The managed document holds no import at all: the agent can approve the external
        // includes an import there needs, and point them at its own files.
        _ if managed => LocalMemory::None,
        _ => LocalMemory::Import,
    };
    // The one document is built to be measured; the last one built is the one for the
    // sections kept (`fit` measures them last), so it is not built again.
    let last_document = std::cell::RefCell::new(Vec::new());
    let fitted = match target.delivery {
        Delivery::Inline | Delivery::Managed => document::fit(&all, target.budget, |kept| {
            let built = document::document(kept, local);
            let len = built.len() as u64;
            *last_document.borrow_mut() = built;
            len
        }),
        Delivery::Copy | Delivery::Link => document::fit(&all, target.budget, |kept| {
            kept.iter().map(|s| s.text.len() as u64).sum()
        }),
    };
    for dropped in &fitted.dropped {
        warnings.push(Warning::SectionDropped {
            section: dropped.section.clone(),
            bytes: dropped.bytes,
            target: target.file.to_owned(),
            budget: target.budget,
        });
    }
    if fitted.size > target.budget {
        warnings.push(Warning::OverBudget {
            target: target.file.to_owned(),
            bytes: fitted.size,
            budget: target.budget,
        });
    }

    // In the order they are applied: what the entry point imports (and the managed
    // folder), the group's own memory, then the entry point, bound over its mount point in
    // the group folder, and the mount point itself.
    let mut entries = Vec::new();
    let local_import: Vec<String> = match has_memory {
        true => vec![format!("@./{}", names::CLAUDE_LOCAL_MD)],
        false => Vec::new(),
    };
    let entry = match target.delivery {
        _ if !managed && !matches!(target.delivery, Delivery::Copy | Delivery::Link) => {
            last_document.take()
        }
        Delivery::Copy | Delivery::Link => {
            let mut imports = Vec::new();
            for section in &fitted.kept {
                let (path, content) = fragment(section, target.delivery);
                imports.push(format!("@./{path}"));
                entries.push(Desired { path, content });
            }
            imports.extend(local_import);
            composed_claude_md(&imports)
        }
        _ => {
            // What the agent can write (a group file, the group's own skills) is never the
            // operator's policy: it goes in the workspace's entry point, after the guardrails.
            // Split (and the policy document built again) only for a group that has such a
            // section: every other group keeps the document `fit` built.
            let split: Option<(Vec<Section>, Vec<Section>)> = fitted
                .kept
                .iter()
                .any(|s| s.group_owned)
                .then(|| fitted.kept.iter().cloned().partition(|s| s.group_owned));
            let managed_document = match &split {
                None => last_document.take(),
                Some((_, policy)) => document::document(policy, LocalMemory::None),
            };
            entries.push(Desired {
                path: ManagedPath::managed(names::CLAUDE_MD),
                content: Content::File(managed_document),
            });
            let (settings_file, settings_warnings) = managed::settings_file(sources);
            warnings.extend(settings_warnings);
            entries.push(Desired {
                path: ManagedPath::managed(names::MANAGED_SETTINGS),
                content: Content::File(settings_file),
            });
            for (name, bytes) in managed::host_files(sources) {
                entries.push(Desired {
                    path: ManagedPath::managed(name),
                    content: Content::File(bytes.to_vec()),
                });
            }
            match split {
                None => composed_claude_md(&local_import),
                Some((own, _)) if has_memory => document::document(&own, LocalMemory::Import),
                Some((own, _)) => document::document(&own, LocalMemory::None),
            }
        }
    };
    if has_memory {
        entries.push(Desired {
            path: ManagedPath::top(names::CLAUDE_LOCAL_MD),
            content: Content::Seed,
        });
    }
    entries.push(Desired {
        path: ManagedPath::bind(target.file),
        content: Content::File(entry),
    });
    entries.push(Desired {
        path: ManagedPath::top(target.file),
        content: Content::Placeholder(mount_point_placeholder(target.file)),
    });
    Ok(GroupPlan {
        entries,
        warnings,
        target,
        sections: fitted.kept,
        dropped: fitted.dropped,
        local_memory: inputs.local_memory.map(<[u8]>::to_vec),
        local_memory_too_large: inputs.local_memory_too_large,
    })
}

/// The managed path and content of one section in copy or link delivery: a link to the
/// owner's file when the section has one and links are delivered, else a copy of its text;
/// always in `.claude-fragments/`, which the runner binds read-only as a folder. (The shared
/// base, which DESIGN §1 puts at `.claude-shared.md` in the group folder, is
/// `.claude-fragments/.claude-shared.md`, a name no fragment can have: a file in the
/// read-write group folder would be the agent's to change.)
fn fragment(section: &Section, delivery: Delivery) -> (ManagedPath, Content) {
    let content = match (&section.link, delivery) {
        (Some(target), Delivery::Link) => Content::Symlink(target.clone()),
        _ => Content::File(section.text.clone()),
    };
    (ManagedPath::fragment(&section.file.name), content)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SkillSelection;
    use crate::loader::content::scan_markdown;
    use std::collections::BTreeMap;
    use std::path::Path;

    fn sources() -> Sources {
        Sources::builtin(
            Some(b"BASE\n".to_vec()),
            BTreeMap::from([
                ("big".to_owned(), Some(vec![b'B'; 40 * 1024])),
                ("small".to_owned(), Some(b"SMALL\n".to_vec())),
                ("off".to_owned(), Some(b"OFF\n".to_vec())),
            ]),
        )
    }

    fn config(provider: Option<Provider>) -> GroupConfig {
        GroupConfig {
            skills: SkillSelection::Only(["big", "small"].map(String::from).into()),
            mcp_instructions: BTreeMap::from([("db".to_owned(), "@/etc/x\nRO".to_owned())]),
            provider,
            ..GroupConfig::default()
        }
    }

    fn plan(provider: Option<Provider>, delivery: Delivery) -> GroupPlan {
        plan_delivery(
            &Layout::under_root(Path::new("/host")),
            &config(provider),
            &sources(),
            GroupInputs {
                local_memory: Some(b"LOCAL\n"),
                ..GroupInputs::default()
            },
            &DeliverySettings::with_delivery(delivery),
        )
        .unwrap()
    }

    fn file(plan: &GroupPlan, name: &str) -> String {
        let entry = plan.entries.iter().find(|d| d.path.name == name).unwrap();
        match &entry.content {
            Content::File(bytes) => String::from_utf8(bytes.clone()).unwrap(),
            other => panic!("{other:?}"),
        }
    }

    fn content<'a>(plan: &'a GroupPlan, path: &ManagedPath) -> &'a Content {
        &plan
            .entries
            .iter()
            .find(|d| &d.path == path)
            .unwrap()
            .content
    }

    fn text(plan: &GroupPlan, path: &ManagedPath) -> String {
        match content(plan, path) {
            Content::File(bytes) => String::from_utf8(bytes.clone()).unwrap(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_default_is_the_managed_policy_with_no_import() {
        let plan = plan(None, Delivery::default());
        assert_eq!(plan.target.delivery, Delivery::Managed);
        let names: Vec<String> = plan.entries.iter().map(|d| d.path.to_string()).collect();
        assert_eq!(
            names,
            [
                "state:managed/CLAUDE.md",
                "state:managed/managed-settings.json",
                "CLAUDE.local.md",
                "state:CLAUDE.md",
                "CLAUDE.md"
            ]
        );
        // The guardrails: flat, no import at all (the agent could approve external ones).
        let managed = text(&plan, &ManagedPath::managed("CLAUDE.md"));
        assert!(
            scan_markdown(&managed).unwrap().imports.is_empty(),
            "{managed}"
        );
        assert!(managed.contains("BASE") && managed.contains("SMALL") && managed.contains("RO"));
        assert!(!managed.contains("OFF"), "a disabled skill is absent");
        assert!(
            !managed.contains("LOCAL"),
            "the local memory stays the agent's"
        );
        let settings: serde_json::Value =
            serde_json::from_str(&text(&plan, &ManagedPath::managed("managed-settings.json")))
                .unwrap();
        for switch in managed::MEMORY_SWITCHES {
            assert_eq!(settings["env"][switch], "", "{switch}");
        }
        // The workspace's entry point only imports the local memory, whatever the sources.
        let entry = text(&plan, &ManagedPath::bind("CLAUDE.md"));
        assert_eq!(
            scan_markdown(&entry).unwrap().imports,
            ["./CLAUDE.local.md"]
        );
        assert!(!entry.contains("BASE"));
        assert_eq!(
            content(&plan, &ManagedPath::top("CLAUDE.md")),
            &Content::Placeholder(mount_point_placeholder("CLAUDE.md"))
        );
        assert!(plan.dropped.is_empty());
    }

    #[test]
    fn inline_is_one_claude_md_in_the_bind_folder() {
        let plan = plan(None, Delivery::Inline);
        let names: Vec<String> = plan.entries.iter().map(|d| d.path.to_string()).collect();
        assert_eq!(names, ["CLAUDE.local.md", "state:CLAUDE.md", "CLAUDE.md"]);
        let text = text(&plan, &ManagedPath::bind("CLAUDE.md"));
        assert_eq!(scan_markdown(&text).unwrap().imports, ["./CLAUDE.local.md"]);
        assert!(text.contains("BASE") && text.contains("SMALL") && text.contains("RO"));
        assert!(!text.contains("OFF"), "a disabled skill is absent");
        assert!(plan.dropped.is_empty());
    }

    #[test]
    fn codex_gets_a_flat_agents_md_within_32_kib_dropping_the_largest_skill() {
        let plan = plan(Some(Provider::Codex), Delivery::Link);
        assert_eq!(plan.target.file, "AGENTS.md");
        assert_eq!(plan.target.delivery, Delivery::Inline);
        let text = file(&plan, "AGENTS.md");
        assert!(text.len() as u64 <= CODEX_BUDGET, "{}", text.len());
        assert!(scan_markdown(&text).unwrap().imports.is_empty());
        assert!(text.contains("BASE") && text.contains("SMALL") && text.contains("LOCAL"));
        assert_eq!(
            plan.dropped,
            [Dropped {
                section: "skill:big".into(),
                bytes: 40 * 1024
            }]
        );
        assert!(plan.warnings.iter().any(|w| matches!(
            w,
            Warning::SectionDropped { section, .. } if section == "skill:big"
        )));
        // The document measured last is the one written: exactly the sections kept.
        assert_eq!(
            text.as_bytes(),
            document::document(&plan.sections, LocalMemory::Inline(b"LOCAL\n"))
        );
    }

    #[test]
    fn opencode_and_gemini_get_their_own_flat_documents() {
        assert_eq!(
            plan(Some(Provider::Opencode), Delivery::Copy).target.file,
            "AGENTS.md"
        );
        let gemini = plan(Some(Provider::Gemini), Delivery::Copy);
        assert_eq!(gemini.target.file, "GEMINI.md");
        assert!(file(&gemini, "GEMINI.md").contains(&"B".repeat(1000)));
    }

    #[test]
    fn copy_and_link_keep_the_import_only_layout() {
        let plan = plan(None, Delivery::Link);
        let names: Vec<String> = plan.entries.iter().map(|d| d.path.to_string()).collect();
        assert_eq!(
            names,
            [
                ".claude-fragments/.claude-shared.md",
                ".claude-fragments/big.md",
                ".claude-fragments/small.md",
                ".claude-fragments/mcp-db.md",
                "CLAUDE.local.md",
                "state:CLAUDE.md",
                "CLAUDE.md"
            ]
        );
    }

    #[test]
    fn a_deployment_default_provider_applies_only_when_the_group_has_none() {
        let settings = DeliverySettings {
            provider: Provider::Gemini,
            ..DeliverySettings::default()
        };
        assert_eq!(Target::of(&config(None), &settings).file, "GEMINI.md");
        assert_eq!(
            Target::of(&config(Some(Provider::Claude)), &settings).file,
            "CLAUDE.md"
        );
    }
}
