//! The agent's runtime as clawmd sees it from the host: the container's view of the host
//! through its mount table ([`mounted`]), on which the loader ([`crate::loader`]) runs to say
//! what the agent loads.
//!
//! Everything that depends on how a runner starts the agent's container (bind mounts on one
//! host today) belongs under this module.

pub mod mounted;
