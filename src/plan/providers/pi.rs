//! Pi Coding Agent (`@earendil-works/pi-coding-agent`, nanoclaw's `pi` provider): a flat
//! `CLAUDE.md` in the workspace, as nanoclaw composes for a provider without a contract
//! (`DEFAULT_PROJECT_DOC`, 4 MiB; `src/providers/pi.ts` declares no agent surfaces). Pi reads
//! its context files as text and expands no `@` import, so it gets one flat document, with no
//! memory note and no native-skills section.
//!
//! No guard yet: clawmd has not measured a pi binary.

use super::{DEFAULT_BUDGET, ProviderSpec};

pub(super) const SPEC: ProviderSpec = ProviderSpec {
    name: "pi",
    entry_point: crate::input::names::CLAUDE_MD,
    claude_code: false,
    budget: DEFAULT_BUDGET,
    memory_note_files: &[],
    native_skills: None,
};
