//! The memory loader: reproduces, byte for byte, how the real Claude Code discovers and loads
//! `CLAUDE.md` memory — release by release ([`version`]: one table of behaviour → first
//! release; default the newest release of the conformance corpus) — and says what it drops on
//! the way.
//!
//! Three steps, usable without the CLI:
//! * [`discover`] lists the places Claude Code looks, in order (pure);
//! * [`load`] reads them through a [`MemoryFs`] — the host ([`HostFs`]) or a container's
//!   view of it (any [`MemoryFs`] over a mount table; clawmd's is `MountedFs`) — and returns a [`Memory`]: the files in load order with
//!   their labels and bodies, plus [`Diagnostic`]s (imports dropped as external, missing,
//!   too deep or cyclic, mentions in code, oversized files…);
//! * [`render`] prints it as Claude Code's own block, a flat markdown file, or chat messages.
//!
//! ```
//! use clawmd_loader::{load, render, Format, HostFs, LoadOptions};
//!
//! let root = tempfile::tempdir().unwrap();
//! let p = root.path().join("p");
//! std::fs::create_dir_all(&p).unwrap();
//! std::fs::write(p.join("CLAUDE.md"), "Use @./style.md\n").unwrap();
//! std::fs::write(p.join("style.md"), "Tabs.\n").unwrap();
//!
//! let mut opts = LoadOptions::new(&p, None);
//! opts.managed_dir = None;
//! let memory = load(&HostFs, &opts).unwrap();
//! assert_eq!(memory.files.len(), 2);
//! let text = render(&memory, Format::Claude);
//! assert!(text.starts_with("<system-reminder>\n"));
//! assert!(text.contains("(project instructions, checked into the codebase):\n\nTabs.\n"));
//! ```
//!
//! The rules, and the conformance case that proves each, are in `docs/loader.md`; the corpus
//! is `tests/fixtures/conformance/` beside this crate, replayed by
//! `cargo test -p clawmd-loader` on its own.
//!
//! The crate depends on nothing of clawmd: it reads, never writes, and knows no group,
//! deployment or delivery.

#![deny(clippy::print_stdout, clippy::print_stderr, clippy::dbg_macro)]
// clippy.toml keeps std::fs reads out of library code; the loader's HostFs reads the host on
// purpose (fs.rs opts in where it does), and unit tests build their trees with std::fs.
#![cfg_attr(test, allow(clippy::disallowed_methods))]

mod agents;
mod claude_json;
pub mod content;
mod engine;
pub mod file_kind;
mod frontmatter;
pub mod fs;
pub(crate) mod js_json;
mod links;
pub mod managed;
pub(crate) mod markdown;
mod model;
mod path_policy;
pub mod paths;
mod permissions;
mod picomatch;
mod render;
mod rules;
pub mod settings;
pub mod version;
mod worktree;

pub use engine::{
    Candidate, MAX_FILE_BYTES, MAX_IMPORT_DEPTH, WARN_FILE_CHARS, WARN_TOTAL_CHARS, discover, load,
    load_alone,
};
pub use file_kind::FileKind;
pub use fs::{HostFs, MemoryFs};
pub use model::{
    AgentsMd, Budgets, Diagnostic, DiagnosticCode, ExternalImports, LoadOptions, LoadedFile,
    LoaderError, ManagedMemory, Memory, MemoryKind, Origin, Severity,
};
pub use render::{Format, PREAMBLE, claude_block, render};
pub use settings::{SettingsEvaluation, Undecided};
pub use version::{Behaviour, ClaudeVersion};
