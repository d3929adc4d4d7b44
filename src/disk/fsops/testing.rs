//! What the unit tests of fsops share: a folder to work in, a FIFO, a journaled folder.

use std::path::Path;
use std::sync::Arc;

use rustix::fs::Mode;

use super::{Leftover, SafeDir, TempJournal, read_leftovers};

/// Makes a FIFO at `path`.
pub(super) fn fifo(path: &Path) {
    let mode = Mode::from_raw_mode(0o644);
    rustix::fs::mknodat(rustix::fs::CWD, path, rustix::fs::FileType::Fifo, mode, 0).unwrap();
}

/// A temp folder, opened.
pub(super) fn dir() -> (tempfile::TempDir, SafeDir) {
    let temp = tempfile::tempdir().unwrap();
    let safe = SafeDir::open(temp.path()).unwrap();
    (temp, safe)
}

/// A directory recording its temps in a journal kept in another (the state folder).
pub(super) fn journaled() -> (tempfile::TempDir, SafeDir, Arc<TempJournal>) {
    let temp = tempfile::tempdir().unwrap();
    std::fs::create_dir(temp.path().join("group")).unwrap();
    let journal = TempJournal::new(temp.path().join("state"), "journal", "g");
    let mut dir = SafeDir::open(&temp.path().join("group")).unwrap();
    dir.record_temps_in(&journal);
    (temp, dir, journal)
}

/// The leftovers the journal of [`journaled`] records.
pub(super) fn leftovers_of(temp: &tempfile::TempDir) -> Vec<Leftover> {
    read_leftovers(&temp.path().join("state"), "journal", "g").unwrap()
}
