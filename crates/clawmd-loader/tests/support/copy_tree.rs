//! Copies a tree, symlinks as symlinks: the one copy of a fixture tree that the loader's
//! conformance harness and clawmd's test harness (`tests/support/tree.rs`) both use.

use std::path::Path;

/// Copies `from` to `to`, links as links (never followed), folders and files as they are.
pub fn copy_tree(from: &Path, to: &Path) {
    for entry in walkdir::WalkDir::new(from) {
        let entry = entry.unwrap();
        let dest = to.join(entry.path().strip_prefix(from).unwrap());
        let kind = entry.file_type();
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path()).unwrap(), &dest).unwrap();
        } else if kind.is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}
