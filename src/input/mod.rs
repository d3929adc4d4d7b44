//! **Input**: everything a run reads before it plans, as values.
//!
//! * [`settings`]: `clawmd.json`, merged under the flags and `CLAWMD_*`; [`layout`]: every
//!   host path and container mount point of a deployment, with [`names`], the file names
//!   inside a group folder and the state folder; [`recipe`]: the ordered sources of a group's
//!   memory; [`pin`]: the Claude Code release and consumer the deployment pins in its own files.
//! * [`config`]: a group's `container.json`.
//! * [`sources`]: the container side (`container/`, read once per run, and its record) and
//!   the group side (read per group through the group's safe view), and the sections they
//!   make (pure).
//!
//! Nothing here writes, except the sources' record ([`sources::record`], through
//! [`crate::disk::state`]).

pub mod config;
pub mod layout;
pub mod names;
pub mod pin;
pub mod recipe;
pub mod settings;
pub mod sources;
