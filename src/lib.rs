//! clawmd: the host-side composer of `CLAUDE.md` memory for containerised agent groups.
//!
//! * [`compose`] turns a group's `container.json` into an import-only `CLAUDE.md` plus the
//!   fragments it imports, reconciling the disk to a pure [`plan`] with atomic writes
//!   ([`fsops`] is the only module that writes).
//! * [`migrate`] is the one-time, idempotent cutover of legacy groups.
//! * [`loader`] reproduces how the real Claude Code loads memory; [`view`] runs it inside a
//!   group's container (the mount table) for `render`, and [`check`] turns what it finds, and
//!   the state of the composition, into findings with fixes.
//! * [`deployment`] is how every command reads a deployment (groups, sources, a group's
//!   observation); [`report`] holds every command's report and the one [`report::Code`]
//!   vocabulary.

#![deny(clippy::print_stdout, clippy::print_stderr, clippy::dbg_macro)]
// clippy.toml keeps std::fs out of the library (fsops writes; fs_err reads trusted paths);
// unit tests build their trees with std::fs.
#![cfg_attr(test, allow(clippy::disallowed_methods))]

pub mod check;
pub mod compose;
pub mod config;
pub mod delivery;
pub mod deployment;
pub mod diff;
pub mod error;
pub mod fsops;
pub mod init;
pub mod key_hash;
pub mod layout;
pub mod migrate;
pub mod mounts;
pub mod names;
pub mod pin;
pub mod plan;
pub mod progress;
pub mod reads;
pub mod recipe;
pub mod reconcile;
pub mod report;
pub mod runtime;
pub mod safe_name;
pub mod schema;
pub mod settings;
pub mod snapshot;
pub mod sources;
pub mod state;
pub mod suggest;
pub mod target;
pub mod view;
pub mod watch;

/// The memory loader, its own crate ([`clawmd_loader`]): what Claude Code loads, release by
/// release. clawmd's container view of it is [`runtime::mounted`].
pub use clawmd_loader as loader;
/// The kind of a filesystem entry (the loader's vocabulary, shared with [`fsops`]).
pub use clawmd_loader::file_kind;

pub use error::{Error, GroupError};
pub use layout::Layout;
pub use plan::Delivery;
