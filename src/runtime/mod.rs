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
//! * [`k8s`]: the same table as Kubernetes objects (`clawmd mounts GROUP --format k8s`):
//!   ConfigMaps carrying the composed files and the Pod that mounts them.
//!
//! Everything that depends on how a runner starts the agent's container (bind mounts on one
//! host today; a new runtime, such as pods on Kubernetes, gets a module of its own here)
//! belongs under this module.

pub mod k8s;
pub mod mounted;
pub mod mounts;
pub mod view;
