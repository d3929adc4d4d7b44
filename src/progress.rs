//! What a long run tells the one who started it while it works: how many groups there are,
//! each group done, and a wait for a lock another run holds. The library only calls these
//! hooks; the binary decides what to show (a progress bar on a terminal, nothing otherwise).

use std::path::Path;

/// Hooks called during a multi-group run, possibly from several threads. Every method does
/// nothing by default; `()` is the run that shows nothing.
pub trait Progress: Sync {
    /// The run is about to process `groups` groups.
    fn start(&self, _groups: usize) {}
    /// `group` is done (whatever its outcome).
    fn done(&self, _group: &str) {}
    /// `group`'s lock at `lock` is held by another run; this run waits for it.
    fn waiting_for_lock(&self, _group: &str, _lock: &Path) {}
}

impl Progress for () {}
