//! The reliability suite (docs/reliability.md): crashes, kills, concurrent runs, resource
//! faults, hostile filesystems and hostile input, all through the real binary.
//!
//! One test binary (`cargo test --test reliability crash::` runs one file's tests); the
//! harness is `tests/support/`. The heavy tests use tmpfs unless `CLAWMD_TEST_DIR` is set.

#![allow(clippy::disallowed_methods)] // tests build their trees with std::fs (clippy.toml)

mod support;

#[path = "reliability/concurrency.rs"]
mod concurrency;
#[path = "reliability/crash.rs"]
mod crash;
#[path = "reliability/faults.rs"]
mod faults;
#[path = "reliability/hostile_fs.rs"]
mod hostile_fs;
#[path = "reliability/input.rs"]
mod input;
#[path = "reliability/operator_input.rs"]
mod operator_input;
