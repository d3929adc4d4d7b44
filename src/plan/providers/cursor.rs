//! Cursor (the `@cursor/sdk` local agent nanoclaw runs): a flat `AGENTS.md`. Cursor publishes
//! no byte cap for it, so it has no budget (nanoclaw's contract declares no `maxBytes`: the
//! document is never cut). Its local rules service also loads `.cursorrules`, `CLAUDE.md` and
//! `CLAUDE.local.md` from the workspace root (nanoclaw's `src/provider-contracts/cursor.ts`,
//! `@cursor/sdk` 1.0.28): the memory note names them, and skills are discovered under the
//! workspace's `.cursor/skills`.
//!
//! No guard yet: clawmd has not measured a Cursor binary, so a Cursor group's verdict says
//! nothing about what an agent's own files can do to its document.

use super::{AGENTS_MD, NativeSkills, ProviderSpec};

pub(super) const SPEC: ProviderSpec = ProviderSpec {
    name: "cursor",
    entry_point: AGENTS_MD,
    claude_code: false,
    budget: u64::MAX,
    memory_note_files: &[".cursorrules", "CLAUDE.md", "CLAUDE.local.md"],
    native_skills: Some(NativeSkills {
        discovery_path: "/workspace/agent/.cursor/skills",
        shared_source: "/app/skills",
        self_authored_home: "~/.cursor/skills",
        persistent_roots: &["~/.cursor"],
        rule_bearing_inlined: true,
    }),
};
