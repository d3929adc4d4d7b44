//! The test harness, shared by the three test binaries (`tests/main.rs`, `tests/e2e.rs`,
//! `tests/reliability.rs`); each binary uses a subset.
//!
//! - [`Deployment`]: a deployment (`container/` + `groups/`) built in a temp dir, the real
//!   binary run on it ([`Deployment::run`]), and identity snapshots ([`Deployment::snapshot`]);
//! - [`TempTree`]: any temp tree (the deployment's, the loader's); printed to stderr when the
//!   test that owns it fails;
//! - [`run`]: the binary with a cleared environment and a hang guard ([`run_clawmd`],
//!   [`clawmd`]), and [`Run`], its result;
//! - [`tree`]: content snapshots ([`Tree`]) and their comparison, [`copy_tree`], [`work_dir`];
//! - [`snapshot`]: insta settings that hide temp paths, pids and timings in human output;
//! - [`soak`]: counts and seeds for the heavy tests; [`faults`]: mounts and sentinels;
//! - [`k8s`]: the route-2 Pod of docs/kubernetes.md; [`mapped`]: a file written through a
//!   shared mapping, as an agent can, which leaves its times as they were;
//! - [`sandbox`] and [`api`]: the bubblewrap container and the stand-in Anthropic API of the
//!   end-to-end tests; [`running`]: a sandbox kept running across recomposes;
//! - [`memory`]: the sections of a memory block Claude Code sends, lines in order;
//! - [`recording`]: anchor folders (code this repository does not keep) and the recordings of
//!   what it produced, compared or rewritten; [`nanoclaw`]: what the nanoclaw tests share.
#![allow(dead_code, unused_imports)]

pub mod api;
pub mod backends;
pub mod deployment;
pub mod faults;
pub mod k8s;
pub mod mapped;
pub mod memory;
pub mod nanoclaw;
pub mod recording;
pub mod run;
pub mod running;
pub mod sandbox;
pub mod snapshot;
pub mod soak;
pub mod tree;

pub use deployment::Deployment;
pub use faults::*;
pub use run::*;
pub use soak::*;
pub use tree::*;
