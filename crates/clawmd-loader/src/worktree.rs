//! Nested git worktrees (JS `Ebn`, `Tbn`, and the `.git`-file check `ce`).
//!
//! When the working directory is inside a linked worktree that lies inside its main checkout,
//! Claude Code skips the main checkout's project files (`CLAUDE.md`, `.claude/CLAUDE.md`,
//! rules) in the folders between the main checkout's root and the worktree's root; their
//! `CLAUDE.local.md` still loads (cases 57–62). Since 2.1.69; for a worktree written with
//! relative paths, not in 2.1.84–2.1.197.

use std::path::{Path, PathBuf};

use super::fs::{MemoryFs, ReadOutcome};
use super::paths::{is_within, normalize, walk_dirs};
use super::version::{Behaviour, ClaudeVersion};

/// A linked worktree nested in its main checkout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NestedWorktree {
    /// The worktree's root (the folder holding the `.git` file).
    pub(super) worktree_root: PathBuf,
    /// The main checkout's root.
    pub(super) main_root: PathBuf,
}

impl NestedWorktree {
    /// JS `Tbn`: are `dir`'s project files skipped?
    pub(super) fn skips(&self, dir: &Path) -> bool {
        is_within(dir, &self.main_root) && !is_within(dir, &self.worktree_root)
    }
}

/// JS `Ebn`: the nested worktree `cwd` is in, if any (and if this release skips).
pub(super) fn nested_worktree<F: MemoryFs + ?Sized>(
    fs: &F,
    cwd: &Path,
    version: ClaudeVersion,
) -> Option<NestedWorktree> {
    if !version.has(Behaviour::WorktreeSkipsMainCheckout) {
        return None;
    }
    // JS `Ar`: the nearest folder holding `.git` (a folder or a file).
    let worktree_root = walk_dirs(cwd)
        .into_iter()
        .rev()
        .find(|d| fs.symlink_metadata(&d.join(".git")).is_ok())?;
    let dot_git = read_small(fs, &worktree_root.join(".git"))?;
    let (main_root, relative) = main_checkout(fs, &worktree_root, &dot_git)?;
    if relative && !version.has(Behaviour::RelativeWorktreeSkipsMainCheckout) {
        return None;
    }
    (main_root != worktree_root && is_within(&worktree_root, &main_root)).then_some(
        NestedWorktree {
            worktree_root,
            main_root,
        },
    )
}

/// JS `ce`: a `.git` file `gitdir: <admin>` whose admin folder is
/// `<main>/.git/worktrees/<name>` with a `commondir` and a `gitdir` pointing back at this
/// `.git` file. Returns the main checkout's root and whether the paths were relative.
fn main_checkout<F: MemoryFs + ?Sized>(
    fs: &F,
    root: &Path,
    dot_git: &str,
) -> Option<(PathBuf, bool)> {
    let gitdir = dot_git.trim().strip_prefix("gitdir:")?.trim();
    let admin = normalize(&root.join(gitdir));
    let common = read_small(fs, &admin.join("commondir"))?;
    let common_dir = normalize(&admin.join(common.trim()));
    if normalize(admin.parent()?) != common_dir.join("worktrees") {
        return None;
    }
    let back = read_small(fs, &admin.join("gitdir"))?;
    let back = back.trim();
    let back_real = fs.canonicalize(&normalize(&admin.join(back))).ok()?;
    let root_real = fs.canonicalize(root).ok()?;
    if back_real != root_real.join(".git") {
        return None;
    }
    // A bare common repository (not named `.git`) has no main checkout to skip.
    if common_dir.file_name()? != ".git" {
        return None;
    }
    let relative = !gitdir.starts_with('/') || !back.starts_with('/');
    Some((common_dir.parent()?.to_path_buf(), relative))
}

fn read_small<F: MemoryFs + ?Sized>(fs: &F, path: &Path) -> Option<String> {
    match fs.read_limited(path, 64 * 1024).ok()? {
        ReadOutcome::Bytes(b) => Some(String::from_utf8_lossy(&b).into_owned()),
        _ => None,
    }
}
