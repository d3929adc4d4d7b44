//! End to end: the real Claude Code CLI and Agent SDK read what clawmd composed, in a
//! bubblewrap sandbox laid out like the agent container (see `e2e/delivery.rs`).
//!
//! One test binary; the harness (sandbox, stand-in API) is `tests/support/`.

#![allow(clippy::disallowed_methods)] // tests build their trees with std::fs (clippy.toml)

mod support;

#[path = "e2e/addon.rs"]
mod addon;
#[path = "e2e/backends.rs"]
mod backends;
#[path = "e2e/delivery.rs"]
mod delivery;
#[path = "e2e/guardrails.rs"]
mod guardrails;
#[path = "e2e/kubernetes.rs"]
mod kubernetes;
#[path = "e2e/nanoclaw.rs"]
mod nanoclaw;
#[path = "e2e/nanoclaw_seam.rs"]
mod nanoclaw_seam;
#[path = "e2e/nanoclaw_spawn.rs"]
mod nanoclaw_spawn;
#[path = "e2e/nanoclaw_spawn_v23.rs"]
mod nanoclaw_spawn_v23;
#[path = "e2e/nanoclaw_v23.rs"]
mod nanoclaw_v23;
#[path = "e2e/npm.rs"]
mod npm;
#[path = "e2e/recipes.rs"]
mod recipes;
#[path = "e2e/running.rs"]
mod running;
#[path = "e2e/settings.rs"]
mod settings;
#[path = "e2e/typescript.rs"]
mod typescript;
