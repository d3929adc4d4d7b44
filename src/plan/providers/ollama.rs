//! nanoclaw's `ollama` provider: Claude Code itself, pointed at a local Ollama model
//! (`ANTHROPIC_BASE_URL`; nanoclaw's `src/providers/ollama.ts`), so it reads `CLAUDE.md` by
//! Claude Code's rules and gets Claude Code's delivery. Its nanoclaw contract spreads Claude's
//! surfaces (`src/provider-contracts/ollama.ts`): the same document, cap, no memory note and no
//! native-skills section.

use super::{DEFAULT_BUDGET, ProviderSpec};

pub(super) const SPEC: ProviderSpec = ProviderSpec {
    name: "ollama",
    entry_point: crate::input::names::CLAUDE_MD,
    claude_code: true,
    budget: DEFAULT_BUDGET,
    memory_note_files: &[],
    native_skills: None,
};
