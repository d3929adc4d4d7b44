//! The agent backends clawmd composes for, one module each: what a backend reads (its entry
//! point), how much of it (its byte budget), the files its own runtime loads beside the entry
//! point that an agent must not keep memory in (the memory note a shared source's placeholder
//! becomes), and where it discovers skills natively (the "Native Runtime Skills" section).
//!
//! The facts are nanoclaw's provider contracts where nanoclaw has the backend (claude, codex,
//! cursor, opencode, ollama, pi; its `ProviderInstructionFacts`), and clawmd's own measurements
//! of the real CLIs otherwise (docs/delivery.md). A new backend is a file here, a variant of
//! [`Provider`] and its arm in [`Provider::spec`]; its guard, if it needs one, goes in
//! `plan/delivery/guard.rs`.

mod claude;
mod codex;
mod cursor;
mod gemini;
mod ollama;
mod opencode;
mod pi;

use std::fmt;

use serde::{Deserialize, Serialize};

/// The agent backend of a group (`container.json`'s `provider`, nanoclaw's key).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
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
    /// Cursor (its SDK's local agent): a flat `AGENTS.md`, no byte cap.
    Cursor,
    /// Claude Code against a local Ollama model (nanoclaw's `ollama` provider): Claude Code's
    /// `CLAUDE.md`, in the chosen delivery mode, as for `claude`.
    Ollama,
    /// Pi Coding Agent: a flat `CLAUDE.md` (it does not expand `@` imports).
    Pi,
}

/// What a backend reads and what its documents say about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderSpec {
    /// The lowercase name (`container.json`'s `provider`).
    pub name: &'static str,
    /// The document the backend reads in the agent's working directory.
    pub entry_point: &'static str,
    /// The backend is Claude Code (the loader's rules, the delivery modes, the managed
    /// policy); otherwise it gets one flat document.
    pub claude_code: bool,
    /// The default byte budget of its document (`u64::MAX`: none).
    pub budget: u64,
    /// Files the backend's own runtime loads beside its document, where the agent must not
    /// keep memory (nanoclaw's `nativeOverrideFiles`): the memory note.
    pub memory_note_files: &'static [&'static str],
    /// Where the backend discovers the shared skills natively, when its documents must say so.
    pub native_skills: Option<NativeSkills>,
}

/// A backend's native skill discovery (nanoclaw's `nativeSkills` facts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NativeSkills {
    /// Where the selected skills appear inside the container.
    pub discovery_path: &'static str,
    /// The read-only shared skill source the entries point back to.
    pub shared_source: &'static str,
    /// Where skills the agent writes go.
    pub self_authored_home: &'static str,
    /// The only roots where skills persist and are discovered.
    pub persistent_roots: &'static [&'static str],
    /// Skills whose rules must hold before a task is recognised arrive inlined in the
    /// document (their `instructions.md`).
    pub rule_bearing_inlined: bool,
}

impl ProviderSpec {
    /// The one sentence a shared source's memory-note placeholder becomes for this backend
    /// (`None`: the placeholder's paragraph is removed), as nanoclaw's
    /// `renderBaseInstructions` writes it.
    pub fn memory_note(&self) -> Option<String> {
        (!self.memory_note_files.is_empty()).then(|| {
            let files: Vec<String> = (self.memory_note_files.iter())
                .map(|file| format!("`{file}`"))
                .collect();
            format!("Do not use {} for memory.", files.join(" or "))
        })
    }

    /// The body of the "Native Runtime Skills" section for this backend (`None`: its runtime
    /// discovers the shared skills without the document's help), as nanoclaw's
    /// `renderNativeSkillsSection` writes it.
    pub fn native_skills_section(&self) -> Option<String> {
        let skills = self.native_skills?;
        let roots: Vec<String> = (skills.persistent_roots.iter())
            .map(|root| format!("`{root}`"))
            .collect();
        let mut discovery = String::from(
            "Use skill discovery to load these skills only when their descriptions match the task.",
        );
        if skills.rule_bearing_inlined {
            discovery.push_str(" A skill whose rules must hold before the task is recognised ships an `instructions.md` instead, and those arrive inlined as `NanoClaw Skill:` sections of this document.");
        }
        Some(
            [
                format!(
                    "Selected NanoClaw runtime skills are available as provider-native skills at `{}`.",
                    skills.discovery_path
                ),
                format!(
                    "Each skill directory contains a `SKILL.md` with its trigger description plus any supporting files, and points to the read-only shared skill source under `{}`.",
                    skills.shared_source
                ),
                discovery,
                format!(
                    "Skills YOU author or install yourself go in `{}/<name>/SKILL.md` — persistent across sessions and discovered automatically. Never write skills elsewhere: paths outside {} are ephemeral or not discovered.",
                    skills.self_authored_home,
                    roots.join(" and ")
                ),
            ]
            .join("\n\n"),
        )
    }
}

impl Provider {
    /// Every provider, for messages.
    pub const ALL: [Provider; 7] = [
        Provider::Claude,
        Provider::Codex,
        Provider::Opencode,
        Provider::Gemini,
        Provider::Cursor,
        Provider::Ollama,
        Provider::Pi,
    ];

    /// What the backend reads and what its documents say about it.
    pub fn spec(self) -> &'static ProviderSpec {
        match self {
            Provider::Claude => &claude::SPEC,
            Provider::Codex => &codex::SPEC,
            Provider::Opencode => &opencode::SPEC,
            Provider::Gemini => &gemini::SPEC,
            Provider::Cursor => &cursor::SPEC,
            Provider::Ollama => &ollama::SPEC,
            Provider::Pi => &pi::SPEC,
        }
    }

    /// The provider spelled `name`, if clawmd knows it.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == name)
    }

    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        self.spec().name
    }

    /// The document the backend reads in the agent's working directory.
    pub fn entry_point(self) -> &'static str {
        self.spec().entry_point
    }

    /// Whether the backend gets one flat document (no import lines, local memory copied in):
    /// every backend but Claude Code.
    pub fn is_flat(self) -> bool {
        !self.spec().claude_code
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

/// 4 MiB: Claude Code's limit per memory file, and nanoclaw's cap on a generated document.
pub const DEFAULT_BUDGET: u64 = crate::loader::MAX_FILE_BYTES;

/// Codex's default `project_doc_max_bytes`.
pub const CODEX_BUDGET: u64 = 32 * 1024;

/// The flat document of Codex, opencode and Cursor agents.
pub const AGENTS_MD: &str = "AGENTS.md";

/// The flat document of Gemini CLI agents.
pub const GEMINI_MD: &str = "GEMINI.md";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_provider_parses_back_from_its_name() {
        for provider in Provider::ALL {
            assert_eq!(Provider::parse(provider.as_str()), Some(provider));
            assert_eq!(provider.to_string(), provider.as_str());
            let json = serde_json::to_string(&provider).unwrap();
            assert_eq!(json, format!("\"{}\"", provider.as_str()));
        }
    }

    #[test]
    fn the_memory_note_is_nanoclaws_sentence_and_only_where_a_runtime_loads_other_files() {
        assert_eq!(
            Provider::Codex.spec().memory_note().as_deref(),
            Some("Do not use `AGENTS.local.md` or `AGENTS.override.md` for memory.")
        );
        assert_eq!(
            Provider::Cursor.spec().memory_note().as_deref(),
            Some("Do not use `.cursorrules` or `CLAUDE.md` or `CLAUDE.local.md` for memory.")
        );
        for provider in [
            Provider::Claude,
            Provider::Opencode,
            Provider::Ollama,
            Provider::Pi,
        ] {
            assert_eq!(provider.spec().memory_note(), None, "{provider}");
        }
    }

    #[test]
    fn native_skills_are_said_for_codex_and_cursor_only() {
        let codex = Provider::Codex.spec().native_skills_section().unwrap();
        assert!(codex.starts_with("Selected NanoClaw runtime skills are available as provider-native skills at `/workspace/agent/.agents/skills`."));
        assert!(codex.contains("`~/.codex/skills/<name>/SKILL.md`"));
        assert!(codex.ends_with(
            "paths outside `~/.codex` and `~/.agents` are ephemeral or not discovered."
        ));
        assert!(codex.contains("inlined as `NanoClaw Skill:` sections"));
        let cursor = Provider::Cursor.spec().native_skills_section().unwrap();
        assert!(cursor.contains("`/workspace/agent/.cursor/skills`"));
        assert!(cursor.ends_with("paths outside `~/.cursor` are ephemeral or not discovered."));
        for provider in [
            Provider::Claude,
            Provider::Opencode,
            Provider::Ollama,
            Provider::Pi,
            Provider::Gemini,
        ] {
            assert_eq!(provider.spec().native_skills_section(), None, "{provider}");
        }
    }

    #[test]
    fn entry_points_and_budgets_are_nanoclaws() {
        let of = |p: Provider| (p.entry_point(), p.spec().budget, p.is_flat());
        assert_eq!(of(Provider::Claude), ("CLAUDE.md", DEFAULT_BUDGET, false));
        assert_eq!(of(Provider::Ollama), ("CLAUDE.md", DEFAULT_BUDGET, false));
        assert_eq!(of(Provider::Pi), ("CLAUDE.md", DEFAULT_BUDGET, true));
        assert_eq!(of(Provider::Codex), ("AGENTS.md", CODEX_BUDGET, true));
        assert_eq!(of(Provider::Cursor), ("AGENTS.md", u64::MAX, true));
    }
}
