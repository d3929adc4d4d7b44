//! **Disk**: the group's folders as they are, and the one way they change.
//!
//! * [`fsops`]: the only module that writes (atomic, never through a link, never opening
//!   anything but a regular file), and the per-group lock.
//! * [`deployment`]: how every command looks at a deployment: the group list, a group's
//!   observation (its folders read through [`fsops::SafeDir`], its plan, the [`reconcile`]
//!   steps from the disk to the plan), with every read logged ([`reads`]).
//! * [`reconcile`]: the diff of a plan against the disk, and its application in a reader-safe
//!   order.
//! * [`state`]: clawmd's state folder on the host (bind folders, rescues, journals) and its
//!   sealed records.

pub mod deployment;
pub mod fsops;
pub mod reads;
pub mod reconcile;
pub mod state;
pub mod written;
