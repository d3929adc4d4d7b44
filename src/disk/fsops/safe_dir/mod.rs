//! [`SafeDir`]: a directory opened once with `O_NOFOLLOW`, then used only through `*at`
//! system calls on single-component names, so that a link swapped in anywhere inside a group
//! never leads clawmd outside it. This file opens one (and the folders opened from it); the
//! other files of this folder read, list and write through it.

// Folders are created here (clippy.toml's write ban).
#![expect(
    clippy::disallowed_methods,
    reason = "fsops is the module that writes (clippy.toml)"
)]

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, Mode, OFlags};

use super::host::{create_dir_all, kind_of_path};
use super::{FsError, Result, TempJournal, checkpoint};
use crate::disk::reads::{self, Root, Seen, Tap, Watch};
use crate::file_kind::{self, FileKind};

mod in_place;
mod listing;
mod owner;
mod read;
mod sparse;
mod write;

pub use listing::Listing;
use owner::Owner;
pub(super) use read::file_seen;
pub use write::Temp;

/// A directory opened without following symlinks; all access is relative to it.
#[derive(Debug)]
pub struct SafeDir {
    pub(super) path: PathBuf,
    pub(super) fd: OwnedFd,
    /// Entries changed since the last fsync of the directory.
    pub(super) unsynced: std::cell::Cell<bool>,
    /// Whether the descriptor was listed (its position is then past the first entry).
    listed: std::cell::Cell<bool>,
    /// Where the temp files made here are recorded before they are made (a run that holds
    /// the lock covering this folder sets it; [`TempJournal`]).
    pub(super) journal: Option<Arc<TempJournal>>,
    /// `path` made absolute, for the journal (worked out the first time it is needed).
    pub(super) absolute: std::cell::OnceCell<PathBuf>,
    /// Where what is read here is logged ([`SafeDir::log_reads_in`]).
    tap: Option<Tap>,
    /// A folder only clawmd writes (clawmd's state folder and what it opens in it): no one
    /// else renames or replaces its entries.
    pub(super) only_clawmd: bool,
}

/// The opened folder itself (for a caller that must name exactly this folder, as
/// `/proc/self/fd/N`, and never its path again).
impl AsFd for SafeDir {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Drop for SafeDir {
    fn drop(&mut self) {
        if let Err(err) = self.sync() {
            tracing::error!("{}", crate::error::chain_text(&err));
        }
    }
}

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

impl SafeDir {
    fn new(path: PathBuf, fd: OwnedFd) -> Self {
        SafeDir {
            path,
            fd,
            unsynced: std::cell::Cell::new(false),
            listed: std::cell::Cell::new(false),
            journal: None,
            absolute: std::cell::OnceCell::new(),
            tap: None,
            only_clawmd: false,
        }
    }

    /// This folder as clawmd's state folder (see [`SafeDir::only_clawmd`]).
    fn of_state(mut self) -> SafeDir {
        self.only_clawmd = true;
        self
    }

    /// Logs every read made here (and in the folders opened from it) in `log`, as the folder
    /// `root` ([`crate::disk::reads`]): by content, or by identity in clawmd's own folders.
    pub fn log_reads_in(&mut self, log: &Arc<reads::ReadLog>, root: Root, watch: Watch) {
        self.tap = Some(Tap {
            log: log.clone(),
            root,
            dir: String::new(),
            watch,
        });
    }

    fn logged<T>(&self, name: &str, result: Result<T>, seen: impl FnOnce(&T) -> Seen) -> Result<T> {
        if let (Some(tap), Ok(value)) = (&self.tap, &result) {
            tap.push(name, seen(value));
        }
        result
    }

    /// Records every temp file or link made in this folder (and in the folders opened from
    /// it) in `journal` before it is made, so that a later run holding the same lock can
    /// remove what a crash left, and nothing else. Only for a folder the caller holds the
    /// lock of.
    pub fn record_temps_in(&mut self, journal: &Arc<TempJournal>) {
        self.journal = Some(journal.clone());
    }

    /// Opens the host folder `path` following links on the way (a trusted host path, for
    /// the parent of clawmd's state folder).
    fn open_host(path: &Path) -> Result<SafeDir> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        rustix::fs::open(path, flags, Mode::empty())
            .map(|fd| SafeDir::new(path.to_owned(), fd))
            .map_err(|err| FsError::io("open directory", path, err))
    }

    /// Opens clawmd's state folder at `path` (its parents are the host's and may be links;
    /// the folder itself must be a real directory, never a link). `create`: made when
    /// missing, with its parents. `None` when it is missing and `create` is not set.
    pub fn open_state(path: &Path, create: bool) -> Result<Option<SafeDir>> {
        if !create {
            return match rustix::fs::open(path, DIR_FLAGS, Mode::empty()) {
                Ok(fd) => Ok(Some(SafeDir::new(path.to_owned(), fd).of_state())),
                Err(rustix::io::Errno::NOENT) => Ok(None),
                Err(err) => Err(Self::explain_open_failure(path, err, || kind_of_path(path))),
            };
        }
        let (Some(parent), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str()))
        else {
            return Err(FsError::Unsafe {
                path: path.to_owned(),
                found: "a path without a folder name".to_owned(),
                expected: "a folder for clawmd's state",
                fix: "set stateDir in clawmd.json to a folder such as groups/.clawmd".to_owned(),
            });
        };
        let parent = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        if kind_of_path(parent)?.is_none() {
            create_dir_all(parent)?;
        }
        let parent = SafeDir::open_host(parent)?;
        let state = parent.open_child(name, true)?;
        let mut state = state.expect("open_child with create returns a folder or an error");
        state.path = path.to_owned();
        Ok(Some(state.of_state()))
    }

    /// Opens `path`, refusing when its last component is a symlink or not a directory.
    pub fn open(path: &Path) -> Result<SafeDir> {
        match rustix::fs::open(path, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => Ok(SafeDir::new(path.to_owned(), fd)),
            Err(err) => Err(Self::explain_open_failure(path, err, || kind_of_path(path))),
        }
    }

    /// Opens the child directory `name`, creating it when missing and `create` is set.
    /// Returns `None` when it is missing and `create` is not set.
    pub fn open_child(&self, name: &str, create: bool) -> Result<Option<SafeDir>> {
        let path = self.path.join(name);
        if create && self.kind(name)?.is_none() {
            checkpoint("mkdir", &path);
            match rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(0o755)) {
                Ok(()) => {
                    // Made durable with the next sync of this folder (every caller syncs it
                    // before anything depends on the new folder surviving a crash).
                    self.unsynced.set(true);
                    let owner = self.owner_for_new()?;
                    self.give_name(name, &owner)?;
                }
                Err(rustix::io::Errno::EXIST) => {}
                Err(err) => return Err(FsError::io("create directory", path, err)),
            }
        }
        let opened = match rustix::fs::openat(&self.fd, name, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => Ok(Some(self.child(path, fd))),
            Err(rustix::io::Errno::NOENT) if !create => Ok(None),
            // With `create`, a folder removed between mkdir and open is an error, never `None`.
            Err(err) => Err(Self::explain_open_failure(&path, err, || self.kind(name))),
        };
        self.logged(name, opened, |dir| Seen::Folder(dir.is_some()))
    }

    /// Opens the child directory `name`, creating it when missing, for a caller that found no
    /// `name` here and planned to fill an empty folder: a folder that holds anything (moved
    /// there since, by someone else) is refused, so that nothing in it is written over
    /// unseen.
    pub fn open_empty_child(&self, name: &str) -> Result<SafeDir> {
        let child = self.open_child(name, true)?;
        let child = child.expect("open_child with create returns a folder or an error");
        if child.read_entries()?.is_empty() {
            return Ok(child);
        }
        Err(FsError::Unsafe {
            path: child.path.clone(),
            found: "a folder with files in it that was not there when clawmd looked".to_owned(),
            expected: "the empty folder clawmd created",
            fix: format!(
                "run the command again; if this repeats, something is moving {} while clawmd runs",
                child.path.display()
            ),
        })
    }

    /// Opens the child directory `name`, creating it when missing with the owner and
    /// permissions of the folder `like` (a group's rescue folder takes the group's).
    pub fn open_child_like(&self, name: &str, like: &SafeDir) -> Result<SafeDir> {
        let path = self.path.join(name);
        if self.kind(name)?.is_none() {
            let model = rustix::fs::fstat(&like.fd)
                .map_err(|err| FsError::io("inspect", &like.path, err))?;
            checkpoint("mkdir", &path);
            match rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(0o700)) {
                Ok(()) => {
                    self.unsynced.set(true);
                    let owner = Owner {
                        uid: model.st_uid,
                        gid: model.st_gid,
                        mode: model.st_mode & 0o7777,
                    };
                    self.give_name(name, &owner)?;
                    rustix::fs::chmodat(
                        &self.fd,
                        name,
                        Mode::from_raw_mode(owner.mode),
                        AtFlags::empty(),
                    )
                    .map_err(|err| FsError::io("set the mode of", &path, err))?;
                }
                Err(rustix::io::Errno::EXIST) => {}
                Err(err) => return Err(FsError::io("create directory", path, err)),
            }
        }
        match rustix::fs::openat(&self.fd, name, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => Ok(self.child(path, fd)),
            Err(err) => Err(Self::explain_open_failure(&path, err, || self.kind(name))),
        }
    }

    /// A folder opened from this one: it records its temps in the same journal.
    fn child(&self, path: PathBuf, fd: OwnedFd) -> SafeDir {
        let mut child = SafeDir::new(path, fd);
        child.journal = self.journal.clone();
        child.only_clawmd = self.only_clawmd;
        child.tap = self.tap.as_ref().and_then(|tap| {
            let name = child.path.file_name()?.to_str()?;
            Some(tap.child(name))
        });
        child
    }

    fn explain_open_failure(
        path: &Path,
        err: rustix::io::Errno,
        kind: impl FnOnce() -> Result<Option<FileKind>>,
    ) -> FsError {
        if matches!(err, rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR)
            && let Ok(found) = kind()
        {
            return FsError::Unsafe {
                path: path.to_owned(),
                found: file_kind::describe(found).to_owned(),
                expected: "a real directory",
                fix: format!(
                    "move it aside and recreate {} as a directory",
                    path.display()
                ),
            };
        }
        FsError::io("open directory", path, err)
    }

    /// The path this directory was opened at (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::fsops::testing::dir;

    #[test]
    fn refuses_a_symlinked_directory() {
        let (temp, dir) = dir();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), temp.path().join("sub")).unwrap();
        let err = dir.open_child("sub", true).unwrap_err();
        assert!(matches!(err, FsError::Unsafe { .. }), "{err}");
        assert!(err.to_string().contains("a symlink"), "{err}");
        let err = SafeDir::open(&temp.path().join("sub")).unwrap_err();
        assert!(matches!(err, FsError::Unsafe { .. }), "{err}");
    }

    #[test]
    fn an_empty_child_is_created_or_taken_and_one_with_files_is_refused_untouched() {
        let (temp, dir) = dir();
        let made = dir.open_empty_child("new").unwrap();
        assert!(made.read_entries().unwrap().is_empty());
        assert!(temp.path().join("new").is_dir());
        // An empty folder already there holds nothing to write over.
        dir.open_empty_child("new").unwrap();
        // One that holds a file (moved in since the caller looked) is refused, as it is.
        std::fs::write(temp.path().join("new/mine.md"), "MINE").unwrap();
        let err = dir.open_empty_child("new").unwrap_err();
        assert!(matches!(err, FsError::Unsafe { .. }), "{err}");
        assert!(err.to_string().contains("run the command again"), "{err}");
        assert_eq!(
            std::fs::read(temp.path().join("new/mine.md")).unwrap(),
            b"MINE"
        );
    }
}
