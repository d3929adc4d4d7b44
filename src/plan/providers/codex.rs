//! OpenAI Codex: a flat `AGENTS.md`, read up to `project_doc_max_bytes` (32 KiB by default;
//! nanoclaw's `CODEX_PROJECT_DOC_MAX_BYTES`). Codex reads `AGENTS.override.md` in place of
//! `AGENTS.md` (guarded: `plan/delivery/guard.rs`). nanoclaw's contract
//! (`src/provider-contracts/codex.ts`) names `AGENTS.local.md` and `AGENTS.override.md` as files
//! not to keep memory in, and the skills Codex discovers under the workspace's `.agents/skills`.

use super::{AGENTS_MD, CODEX_BUDGET, NativeSkills, ProviderSpec};

pub(super) const SPEC: ProviderSpec = ProviderSpec {
    name: "codex",
    entry_point: AGENTS_MD,
    claude_code: false,
    budget: CODEX_BUDGET,
    memory_note_files: &["AGENTS.local.md", "AGENTS.override.md"],
    native_skills: Some(NativeSkills {
        discovery_path: "/workspace/agent/.agents/skills",
        shared_source: "/app/skills",
        self_authored_home: "~/.codex/skills",
        persistent_roots: &["~/.codex", "~/.agents"],
        rule_bearing_inlined: true,
    }),
};
