//! Claude Code (the CLI or the Agent SDK): `CLAUDE.md`, loaded by Claude Code's own rules
//! (imports, the managed policy), up to 4 MiB a file. nanoclaw's default project document
//! (`DEFAULT_PROJECT_DOC`): no memory note (the placeholder is removed), no native-skills
//! section (Claude Code discovers `~/.claude/skills` itself).

use super::{DEFAULT_BUDGET, ProviderSpec};

pub(super) const SPEC: ProviderSpec = ProviderSpec {
    name: "claude",
    entry_point: crate::input::names::CLAUDE_MD,
    claude_code: true,
    budget: DEFAULT_BUDGET,
    memory_note_files: &[],
    native_skills: None,
};
