//! The integration tests that run in seconds: the binary's commands (check, compose, migrate,
//! render), the loader as a library, and its conformance to the real Claude Code releases.
//!
//! One test binary for all of them (each file below is a module; `cargo test --test main
//! compose::` runs one); the harness is `tests/support/`.

#![allow(clippy::disallowed_methods)] // tests build their trees with std::fs (clippy.toml)

mod support;

#[path = "main/agent_settings.rs"]
mod agent_settings;
#[path = "main/check.rs"]
mod check;
#[path = "main/cli.rs"]
mod cli;
#[path = "main/compose.rs"]
mod compose;
#[path = "main/conformance.rs"]
mod conformance;
#[path = "../crates/clawmd-loader/tests/support/conformance.rs"]
mod conformance_harness;
#[path = "main/doc_examples.rs"]
mod doc_examples;
#[path = "main/equivalence.rs"]
mod equivalence;
#[path = "main/harness.rs"]
mod harness;
#[path = "main/k8s.rs"]
mod k8s;
#[path = "main/loader_api.rs"]
mod loader_api;
#[path = "main/migrate.rs"]
mod migrate;
#[path = "main/nanoclaw.rs"]
mod nanoclaw;
#[path = "main/recipes.rs"]
mod recipes;
#[path = "main/records.rs"]
mod records;
#[path = "main/render.rs"]
mod render;
#[path = "main/serve.rs"]
mod serve;
#[path = "main/settings_oracle.rs"]
mod settings_oracle;
#[path = "main/watch.rs"]
mod watch;
