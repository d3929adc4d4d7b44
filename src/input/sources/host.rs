//! What the host and the runner give every group besides the container's sources, read once
//! per run with them: the host's own managed policy ([`HostManaged`]) and the runner's files
//! the guards merge ([`Bases`]).
//!
//! Plain values: reading and merging them is delivery's (`delivery::managed::read_host_managed`,
//! `Bases::read` and `Bases::builtin` in `delivery::guard`).

use std::path::PathBuf;

use serde_json::{Map, Value};

/// The host's own managed policy (`hostManagedDir`), read once per run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostManaged {
    /// The host folder.
    pub dir: PathBuf,
    /// Its `CLAUDE.md`, read as every container-side source is: the imports its owner wrote
    /// expanded from the folder (as the container would see them at the managed mount
    /// point), and the tree they reach, so that the section is made (and its arrival checked)
    /// as the release loads that file alone.
    pub claude_md: Option<super::SourceFile>,
    /// Its `managed-settings.json`, with the drop-ins of its `managed-settings.d/` merged in
    /// as Claude Code merges them (`delivery::managed_drop_ins`).
    pub settings: Option<Map<String, Value>>,
    /// What reading it found that the operator should know: imports of its `CLAUDE.md`
    /// that are not delivered, drop-ins merged or left out (each named in a warning).
    pub notes: Vec<String>,
    /// Its other regular files, copied as they are (`managed-mcp.json`, …), by name.
    pub files: Vec<(String, Vec<u8>)>,
    /// What it holds that is not merged (a folder, a link, a special file, a name that
    /// cannot be a file name), named in a warning.
    pub left_out: Vec<String>,
}

/// What the runner's own files make of the guards (`geminiSystemSettings` in clawmd.json),
/// read and merged once per run with the shared sources: the guard files do not depend on
/// the group beyond its backend and budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bases {
    /// Gemini's system settings: the runner's own (when it names a file) with clawmd's keys.
    pub gemini_settings: Vec<u8>,
    /// The runner's own Codex managed configuration (when it names a file), checked: UTF-8,
    /// not setting `project_doc_max_bytes` (clawmd's key, put first).
    pub codex_config: Option<String>,
}
