//! opencode: a flat `AGENTS.md` (it expands no `@` import; it reads `CLAUDE.md` only where no
//! `AGENTS.md` is). Measured with opencode 1.18.33 (`tests/e2e/backends.rs`); its guard is in
//! `plan/delivery/guard.rs`. nanoclaw's contract (`src/provider-contracts/opencode.ts`) spreads
//! Claude's surfaces: no memory note, no native-skills section.

use super::{AGENTS_MD, DEFAULT_BUDGET, ProviderSpec};

pub(super) const SPEC: ProviderSpec = ProviderSpec {
    name: "opencode",
    entry_point: AGENTS_MD,
    claude_code: false,
    budget: DEFAULT_BUDGET,
    memory_note_files: &[],
    native_skills: None,
};
