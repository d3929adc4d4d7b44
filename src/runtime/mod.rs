//! **Runtime**: the agent's container as clawmd sees it from the host.
//!
//! * [`mounts`]: a group's mount table (`clawmd mounts`), what a running container pins at
//!   spawn (`spawn_digest`), and whether a change is seen at its next session or after a
//!   restart;
//! * [`mounted`]: the container's view of the host through that table, on which the loader
//!   ([`crate::loader`]) runs;
//! * [`view`]: the loader run inside a group's container, for `render` and `check`, with what
//!   the agent's own settings files do to its memory.
//!
//! Everything that depends on how a runner starts the agent's container (bind mounts on one
//! host today; a new runtime, such as pods on Kubernetes, gets a module of its own here)
//! belongs under this module.

pub mod mounted;
pub mod mounts;
pub mod view;
