//! Gemini CLI: a flat `GEMINI.md` (not a nanoclaw provider). Its guard is in
//! `plan/delivery/guard.rs`.

use super::{DEFAULT_BUDGET, GEMINI_MD, ProviderSpec};

pub(super) const SPEC: ProviderSpec = ProviderSpec {
    name: "gemini",
    entry_point: GEMINI_MD,
    claude_code: false,
    budget: DEFAULT_BUDGET,
    memory_note_files: &[],
    native_skills: None,
};
