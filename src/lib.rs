//! clawmd: the host-side composer of the memory (`CLAUDE.md`, `AGENTS.md`, `GEMINI.md`) of
//! containerised agent groups.
//!
//! The library is laid out as the pipeline every command runs (docs/design.md):
//!
//! * `input`: what a run reads, as values: [`settings`] (`clawmd.json`), [`layout`], [`config`]
//!   (`container.json`), the recipe's sources (the shared `container/` side and the group side),
//!   the deployment's pins ([`pin`]);
//! * [`plan`]: the desired state of a group, pure: [`target`] (what it is composed as) and the
//!   delivery modes and backends, with the verdict of what reaches the agent;
//! * `disk`: the group's folders as they are ([`deployment`]: a group's observation, its plan
//!   diffed against the disk), and the one module that writes, atomically (`fsops`);
//! * [`runtime`]: the agent's container seen from the host: its mount table ([`mounts`]), the
//!   container's view of the host ([`runtime::mounted`]) and the loader run in it ([`view`]);
//! * the commands: [`compose`], [`migrate`], [`check`], [`diff`], [`init`], [`watch`],
//!   [`schema`]; each returns a [`report`] and never prints;
//! * [`service`]: a runner's spawns answered by one long-lived service (`clawmd serve`), a
//!   request and its answer a JSON document each.
//!
//! The memory loader, which reproduces how the real Claude Code loads memory release by
//! release, is its own crate ([`loader`]).

#![deny(clippy::print_stdout, clippy::print_stderr, clippy::dbg_macro)]
// clippy.toml keeps std::fs out of the library (fsops writes; fs_err reads trusted paths);
// unit tests build their trees with std::fs.
#![cfg_attr(test, allow(clippy::disallowed_methods))]

mod commands;
mod disk;
pub mod error;
mod input;
mod key_hash;
mod path_memo;
pub mod plan;
pub mod progress;
mod quick_hash;
pub mod report;
pub mod runtime;
pub mod safe_name;
pub mod service;
mod suggest;

// The API: the commands, and what a caller needs to run them and read their reports.
pub use commands::{check, compose, diff, init, migrate, schema, watch};
pub use disk::deployment;
pub use input::{config, layout, names, pin, recipe, settings};
pub use plan::target;
pub use runtime::{mounts, view};

/// The memory loader, its own crate ([`clawmd_loader`]): what Claude Code loads, release by
/// release. clawmd's container view of it is [`runtime::mounted`].
pub use clawmd_loader as loader;
/// The kind of a filesystem entry (the loader's vocabulary, shared with the write module).
pub use clawmd_loader::file_kind;

pub use error::{Error, GroupError};
pub use layout::Layout;
pub use plan::Delivery;

// Internals the integration tests reach into (records, sections, the write module): not the
// API, hidden from its documentation.
#[doc(hidden)]
pub use disk::{fsops, reads, reconcile, state, written};
#[doc(hidden)]
pub use input::sources;
#[doc(hidden)]
pub use plan::{delivery, snapshot};
