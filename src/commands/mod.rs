//! **Commands**: each of clawmd's commands over the pipeline (input → plan → disk), returning
//! a report ([`crate::report`]) and never printing.
//!
//! [`compose`] (the runner's call at every spawn), [`migrate`] (the one-time cutover),
//! [`check`] (findings with fixes), [`diff`] (`compose --diff`), [`init`] (`clawmd.json` for
//! a deployment clawmd recognises), [`watch`] (compose on change), [`schema`] (the JSON
//! Schemas of the reports). `render` and `mounts` are the runtime's ([`crate::runtime`]).

pub mod check;
pub mod compose;
pub mod diff;
pub mod init;
pub mod migrate;
pub mod schema;
pub mod watch;
