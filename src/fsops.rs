//! The one module that changes the disk.
//!
//! Everything clawmd writes goes through a [`SafeDir`]: a directory opened once with
//! `O_NOFOLLOW` and then used only through `*at` system calls on single-component names, so an
//! agent that swaps a file or folder inside its (read-write mounted) group for a symlink can
//! never make clawmd read, write or delete anything outside the group.
//!
//! Writes are atomic and durable: a file is written to a temp name in the same directory,
//! fsynced, and renamed over the target; a symlink is created under a temp name and renamed
//! over (never unlink-then-create). Renames, links and unlinks in a directory become durable
//! when the directory is fsynced: [`SafeDir::sync`] does that once for a batch of changes (the
//! callers sync wherever the order of two changes matters), and a `SafeDir` dropped with
//! unsynced changes syncs itself. Temp names start with
//! [`TEMP_PREFIX`] so a later run can clear what a crash left behind.
//!
//! Nothing that is not a regular file is ever opened for reading or writing: the decision is
//! made from an `O_PATH` handle (which neither blocks on a FIFO nor runs a device's `open`), and
//! the file is then reopened through that same handle (`/proc/self/fd/N`), so a name swapped in
//! between cannot be opened instead. A file clawmd creates or replaces takes the owner and
//! mode of the file it replaces, or, for a new file, the owner of the folder it is in (and
//! that folder's permissions, without the execute bits): a runner working as root never
//! leaves a group's files root-owned. Runs of zero bytes are written as holes, so a sparse
//! file copied (a rescued hand edit) stays sparse.
//!
//! For crash tests, the environment variable `CLAWMD_CRASH_AT=N` aborts the process just before
//! the N-th disk-changing step (see [`checkpoint`]). It is read once and costs nothing when unset.

// The one place clippy.toml's write ban does not apply.
#![expect(
    clippy::disallowed_methods,
    reason = "fsops is the module that writes (clippy.toml)"
)]

use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use rustix::fs::{AtFlags, Mode, OFlags, Stat};

use crate::file_kind::{self, FileKind};
use crate::reads::{self, Root, Seen, Tap, Watch};

/// Names of temp files and links start with this; a run that holds the group lock removes them.
pub const TEMP_PREFIX: &str = ".clawmd-tmp-";

/// An I/O failure, with the operation and the path it concerned.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// A system call failed.
    #[error("cannot {op} {}", path.display())]
    Io {
        /// What clawmd was doing ("read", "rename", ...).
        op: &'static str,
        /// The path concerned.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A path that must be a real directory or file is something else (typically a symlink).
    #[error("refusing to use {}: it is {found}, not {expected}; fix: {fix}", path.display())]
    Unsafe {
        /// The path concerned.
        path: PathBuf,
        /// What it is ("a symlink", "a directory", ...).
        found: String,
        /// What clawmd needs there.
        expected: &'static str,
        /// How to repair it.
        fix: String,
    },
    /// A file is larger than clawmd is willing to read.
    #[error("{} is larger than {limit} bytes; fix: {fix}", path.display())]
    TooLarge {
        /// The path concerned.
        path: PathBuf,
        /// The limit in bytes.
        limit: u64,
        /// How to repair it.
        fix: String,
    },
    /// Another clawmd process held the lock for too long.
    #[error(
        "timed out after {}s waiting for the lock {} held by another clawmd run; fix: wait for it to finish, or raise CLAWMD_LOCK_TIMEOUT (seconds)",
        waited.as_secs(), path.display()
    )]
    LockTimeout {
        /// The lock file.
        path: PathBuf,
        /// How long clawmd waited.
        waited: Duration,
    },
}

impl FsError {
    fn io(op: &'static str, path: impl Into<PathBuf>, source: impl Into<io::Error>) -> Self {
        FsError::Io {
            op,
            path: path.into(),
            source: source.into(),
        }
    }

    /// The path the error is about.
    pub fn path(&self) -> &Path {
        match self {
            FsError::Io { path, .. }
            | FsError::Unsafe { path, .. }
            | FsError::TooLarge { path, .. }
            | FsError::LockTimeout { path, .. } => path,
        }
    }
}

type Result<T, E = FsError> = std::result::Result<T, E>;

/// A directory entry's state, with a file's bytes or a link's target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// Nothing by that name.
    Missing,
    /// A regular file and its bytes.
    File(Vec<u8>),
    /// A symbolic link and its target (never followed).
    Symlink(PathBuf),
    /// A directory.
    Dir,
    /// A device, socket or fifo.
    Other,
}

impl Node {
    /// The kind of this node (`None`: missing).
    pub fn kind(&self) -> Option<FileKind> {
        match self {
            Node::Missing => None,
            Node::File(_) => Some(FileKind::File),
            Node::Symlink(_) => Some(FileKind::Symlink),
            Node::Dir => Some(FileKind::Dir),
            Node::Other => Some(FileKind::Other),
        }
    }
}

/// What a directory held when it was listed: names and, where the filesystem says, kinds.
///
/// A listing of a folder whose reads are logged ([`SafeDir::log_reads_in`]) logs what is
/// asked of it: all its names when they are walked, or only the kind of each name looked up
/// (so that a file of the agent's own next to them changes no look that never asked for it).
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// Each name with its kind when the listing gave one (`None`: ask the directory).
    entries: Vec<(OsString, Option<FileKind>)>,
    /// Where what is asked of it is logged.
    tap: Option<Tap>,
    /// The folder's identity when only clawmd writes it and it was settled when listed: what
    /// a walk of its names is logged as ([`Seen::Entries`]).
    settled: Option<[i64; 8]>,
}

impl Listing {
    /// The names listed, sorted.
    pub fn names(&self) -> impl Iterator<Item = &OsString> {
        if let Some(tap) = &self.tap {
            tap.push(
                "",
                match self.settled {
                    Some(identity) => Seen::Entries(identity),
                    None => reads::listing(&self.entries),
                },
            );
        }
        self.entries.iter().map(|(name, _)| name)
    }

    /// What `name` was when listed (`None` when it was not there), asking `dir` when the
    /// listing did not say. Whatever is then read is still checked when it is opened.
    pub fn kind(&self, dir: &SafeDir, name: &str) -> Result<Option<FileKind>> {
        let kind = match self
            .entries
            .binary_search_by(|(listed, _)| listed.as_os_str().cmp(std::ffi::OsStr::new(name)))
        {
            Ok(index) => match self.entries[index].1 {
                Some(kind) => Ok(Some(kind)),
                None => dir.kind(name),
            },
            Err(_) => Ok(None),
        };
        if let (Some(tap), Ok(kind)) = (&self.tap, &kind) {
            tap.push(name, Seen::Kind(*kind));
        }
        kind
    }
}

/// A directory opened without following symlinks; all access is relative to it.
#[derive(Debug)]
pub struct SafeDir {
    path: PathBuf,
    fd: OwnedFd,
    /// Entries changed since the last fsync of the directory.
    unsynced: std::cell::Cell<bool>,
    /// Whether the descriptor was listed (its position is then past the first entry).
    listed: std::cell::Cell<bool>,
    /// Where the temp files made here are recorded before they are made (a run that holds
    /// the lock covering this folder sets it; [`TempJournal`]).
    journal: Option<Arc<TempJournal>>,
    /// `path` made absolute, for the journal (worked out the first time it is needed).
    absolute: std::cell::OnceCell<PathBuf>,
    /// Where what is read here is logged ([`SafeDir::log_reads_in`]).
    tap: Option<Tap>,
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
        }
    }

    /// Logs every read made here (and in the folders opened from it) in `log`, as the folder
    /// `root` ([`crate::reads`]): by content, or by identity in clawmd's own folders.
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
                Ok(fd) => Ok(Some(SafeDir::new(path.to_owned(), fd))),
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
        Ok(Some(state))
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

    /// What `name` is, without following a symlink (`None`: nothing by that name).
    pub fn kind(&self, name: &str) -> Result<Option<FileKind>> {
        let kind = match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Ok(Some(FileKind::from_mode(stat.st_mode))),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(err) => Err(FsError::io("inspect", self.path.join(name), err)),
        };
        self.logged(name, kind, |kind| Seen::Kind(*kind))
    }

    /// The size of `name` (not following a link); 0 when it is missing.
    pub fn size(&self, name: &str) -> Result<u64> {
        let size = match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Ok(stat.st_size as u64),
            Err(rustix::io::Errno::NOENT) => Ok(0),
            Err(err) => Err(FsError::io("inspect", self.path.join(name), err)),
        };
        self.logged(name, size, |size| Seen::Size(*size))
    }

    /// The target of the symlink `name` (never followed).
    pub fn read_link(&self, name: &str) -> Result<PathBuf> {
        let target = rustix::fs::readlinkat(&self.fd, name, Vec::new())
            .map(|target| PathBuf::from(OsString::from_vec(target.into_bytes())))
            .map_err(|err| FsError::io("read link", self.path.join(name), err));
        self.logged(name, target, |target| {
            Seen::Link(reads::digest(target.as_os_str().as_encoded_bytes()))
        })
    }

    /// Reads the regular file `name` (never through a symlink, never opening anything else).
    /// `None` when it is missing.
    pub fn read_file(&self, name: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        let (read, opened) = self.read_as_found(name, limit)?;
        if let Some(tap) = self.tap.as_ref().filter(|tap| tap.watch == Watch::Identity) {
            let identity = opened.as_ref().map(|(stat, _)| reads::identity(stat));
            tap.push(name, Seen::Identity { limit, identity });
        }
        if let Some(tap) = self.tap.as_ref().filter(|tap| tap.watch == Watch::Content)
            && let Some(seen) = file_seen(limit, &read, opened.as_ref().map(|(s, t)| (s, *t)))
        {
            tap.push(name, seen);
        }
        read
    }

    /// Reads the regular file `name` of a folder only clawmd writes (its state folder: a
    /// record): opened once, never through a link, without blocking, and refused when it is
    /// not a regular file. `None` when it is missing.
    pub fn read_own_file(&self, name: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        let Some((fd, stat)) = self.open_if_regular(name, OFlags::RDONLY | OFlags::NONBLOCK)?
        else {
            return Ok(None);
        };
        let path = self.path.join(name);
        read_limited(std::fs::File::from(fd), &path, stat.st_size as u64, limit).map(Some)
    }

    /// Writes `bytes` over the regular file `name` of a folder only clawmd writes, in place
    /// (created with the owner and mode of a new file here when missing): no temp, no rename,
    /// no inode freed. Only for a file that every reader checks whole before using it (a sealed
    /// record, [`crate::state::Records`]): a crash, or a reader while it is written, may find it
    /// torn, never whole and other than written. Never through a link, never into anything but
    /// a regular file, without blocking; a file with other names (a hard link) is replaced by a
    /// new one rather than written through. Not synced.
    pub fn overwrite_sealed(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let path = self.path.join(name);
        let owner = self.owner_for_new()?;
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let open = |flags: OFlags| -> Result<(OwnedFd, Stat)> {
            let fd = rustix::fs::openat(&self.fd, name, flags, Mode::from_raw_mode(owner.mode))
                .map_err(|err| FsError::io("open", &path, err))?;
            let stat = rustix::fs::fstat(&fd).map_err(|err| FsError::io("inspect", &path, err))?;
            refuse_non_regular(&path, FileKind::from_mode(stat.st_mode))?;
            Ok((fd, stat))
        };
        checkpoint("overwrite", &path);
        let (mut fd, mut stat) = open(flags)?;
        if stat.st_nlink > 1 {
            drop(fd);
            self.unlink(name)?;
            (fd, stat) = open(flags | OFlags::EXCL)?;
        }
        let file = std::fs::File::from(fd);
        give(&file, &owner, &stat, &path)?;
        file.write_all_at(bytes, 0)
            .map_err(|err| FsError::io("write", &path, err))?;
        if stat.st_size as u64 > bytes.len() as u64 {
            file.set_len(bytes.len() as u64)
                .map_err(|err| FsError::io("write", &path, err))?;
        }
        Ok(())
    }

    /// `name` opened with `flags` (never through a link) and its status, refused when it is not
    /// a regular file; `None` when it is missing.
    fn open_if_regular(&self, name: &str, flags: OFlags) -> Result<Option<(OwnedFd, Stat)>> {
        let path = self.path.join(name);
        let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = match rustix::fs::openat(&self.fd, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(err) => return Err(FsError::io("open", path, err)),
        };
        let stat = rustix::fs::fstat(&fd).map_err(|err| FsError::io("inspect", &path, err))?;
        refuse_non_regular(&path, FileKind::from_mode(stat.st_mode))?;
        Ok(Some((fd, stat)))
    }

    /// The identity of the regular file `name` ([`reads::identity`]; `None` when missing,
    /// an error when it is not a regular file).
    fn identity(&self, name: &str) -> Result<Option<[i64; 8]>> {
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => {
                refuse_non_regular(&self.path.join(name), FileKind::from_mode(stat.st_mode))?;
                Ok(Some(reads::identity(&stat)))
            }
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(err) => Err(FsError::io("inspect", self.path.join(name), err)),
        }
    }

    /// [`SafeDir::read_file`] without the log: what was read, and the status of the file
    /// opened with the time before it was opened (its identity stands for what is read only
    /// when its last change was well before: [`reads::settled`]). `Err` when it cannot be
    /// opened; a read that fails is in the first value.
    #[expect(clippy::type_complexity, reason = "a read and where it was made from")]
    fn read_as_found(
        &self,
        name: &str,
        limit: u64,
    ) -> Result<(
        Result<Option<Vec<u8>>>,
        Option<(Stat, std::time::SystemTime)>,
    )> {
        let before = std::time::SystemTime::now();
        Ok(match self.open_regular(name, OFlags::RDONLY)? {
            None => (Ok(None), None),
            Some((file, stat)) => {
                let path = self.path.join(name);
                let read = read_limited(file, &path, stat.st_size as u64, limit).map(Some);
                (read, Some((stat, before)))
            }
        })
    }

    /// Opens `name` with `access` only when it is a regular file: the kind is read from an
    /// `O_PATH` handle, and the file is reopened through that handle. `None` when missing.
    fn open_regular(&self, name: &str, access: OFlags) -> Result<Option<(std::fs::File, Stat)>> {
        let path = self.path.join(name);
        let Some((handle, stat)) = self.open_if_regular(name, OFlags::PATH)? else {
            return Ok(None);
        };
        let file = reopen(&handle, &stat, access, || {
            rustix::fs::openat(
                &self.fd,
                name,
                access | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
                Mode::empty(),
            )
        })
        .map_err(|err| FsError::io("open", &path, err))?;
        Ok(Some((file, stat)))
    }

    /// Appends, in place, the bytes `tail` makes from the last byte of the regular file `name`
    /// (`None` when it is empty). Writers appending at the same time lose nothing: every write
    /// goes to the end of the file (`O_APPEND`), and the inode, owner and mode stay. Space is
    /// reserved first where the filesystem allows it, so a full disk fails before a byte is
    /// written. The bytes are durable when this returns.
    pub fn append_file(&self, name: &str, tail: impl FnOnce(Option<u8>) -> Vec<u8>) -> Result<()> {
        let path = self.path.join(name);
        let Some((file, _)) = self.open_regular(name, OFlags::RDWR | OFlags::APPEND)? else {
            return Err(FsError::io(
                "append to",
                path,
                io::Error::from(io::ErrorKind::NotFound),
            ));
        };
        let size = file
            .metadata()
            .map_err(|err| FsError::io("inspect", &path, err))?
            .len();
        let last = if size == 0 {
            None
        } else {
            let mut byte = [0u8];
            file.read_exact_at(&mut byte, size - 1)
                .map_err(|err| FsError::io("read", &path, err))?;
            Some(byte[0])
        };
        let bytes = tail(last);
        match rustix::fs::fallocate(
            &file,
            rustix::fs::FallocateFlags::KEEP_SIZE,
            size,
            bytes.len() as u64,
        ) {
            Ok(()) | Err(rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::NOSYS) => {}
            Err(err) => return Err(FsError::io("reserve space in", path, err)),
        }
        checkpoint("append", &path);
        (&file)
            .write_all(&bytes)
            .map_err(|err| FsError::io("append to", &path, err))?;
        file.sync_all()
            .map_err(|err| FsError::io("sync", &path, err))
    }

    /// One listing of this directory, to look names up in without a system call each.
    pub fn listing(&self) -> Result<Listing> {
        let settled = self.settled_identity();
        Ok(Listing {
            entries: self.read_entries()?,
            tap: self.tap.clone(),
            settled,
        })
    }

    /// This folder's identity, when its reads are logged by identity (a folder only clawmd
    /// writes) and its last change was well before now ([`reads::settled`]); taken before it
    /// is listed, so that an entry made meanwhile changes it.
    fn settled_identity(&self) -> Option<[i64; 8]> {
        self.tap
            .as_ref()
            .filter(|tap| tap.watch == Watch::Identity)?;
        let before = std::time::SystemTime::now();
        let stat = rustix::fs::fstat(&self.fd).ok()?;
        reads::settled(&stat, before)
    }

    /// The names in this directory, sorted. Names that are not valid UTF-8 are returned lossily
    /// converted only for display; callers must treat them as foreign.
    pub fn list(&self) -> Result<Vec<OsString>> {
        Ok(self
            .list_kinds()?
            .into_iter()
            .map(|(name, _)| name)
            .collect())
    }

    /// The names in this directory (as text, lossily) that start with one of `prefixes`,
    /// sorted; logged as those names only ([`Seen::Prefixed`]), so that other names coming
    /// and going leave a record standing.
    pub fn names_starting_with(&self, prefixes: &[&str]) -> Result<Vec<String>> {
        let names: Vec<String> = (self.read_entries()?.into_iter())
            .map(|(name, _)| name.to_string_lossy().into_owned())
            .filter(|name| prefixes.iter().any(|prefix| name.starts_with(prefix)))
            .collect();
        if let Some(tap) = &self.tap {
            tap.push(
                "",
                reads::prefixed(names.iter().map(String::as_str), prefixes),
            );
        }
        Ok(names)
    }

    /// The names in this directory, sorted, each with its kind as the listing gives it
    /// (`None` when the filesystem does not say: ask [`SafeDir::kind`]). A kind is what the
    /// entry was when listed; anything read afterwards is still checked when it is opened.
    pub fn list_kinds(&self) -> Result<Vec<(OsString, Option<FileKind>)>> {
        // A folder only clawmd writes counts by its identity once settled, else by what the
        // listing found.
        let settled = self.settled_identity();
        let names = self.read_entries();
        self.logged("", names, |names| match settled {
            Some(identity) => Seen::Entries(identity),
            None => reads::listing(names),
        })
    }

    fn read_entries(&self) -> Result<Vec<(OsString, Option<FileKind>)>> {
        // The listing reads this very descriptor (no second open of the folder): rewind it
        // when it was listed before.
        if self.listed.replace(true) {
            rustix::fs::seek(&self.fd, rustix::fs::SeekFrom::Start(0))
                .map_err(|err| FsError::io("list", &self.path, err))?;
        }
        let mut buf = Vec::with_capacity(8192);
        let mut dir = rustix::fs::RawDir::new(&self.fd, buf.spare_capacity_mut());
        let mut names = Vec::new();
        while let Some(entry) = dir.next() {
            let entry = entry.map_err(|err| FsError::io("list", &self.path, err))?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let kind = FileKind::from_dirent(entry.file_type());
            names.push((OsString::from_vec(name.to_vec()), kind));
        }
        names.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(names)
    }

    /// Atomically replaces (or creates) the regular file `name` with `bytes`.
    pub fn write_file(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let owner = self.owner_for(name)?;
        let temp = self.write_temp_with(bytes, &owner, true)?;
        self.rename_into_place(temp, name)
    }

    /// Creates the file `name` holding `bytes` only if nothing by that name exists; the file
    /// appears whole or not at all. Returns `false` (and writes nothing) when it exists.
    pub fn create_new_file(&self, name: &str, bytes: &[u8]) -> Result<bool> {
        if self.kind(name)?.is_some() {
            return Ok(false);
        }
        let temp = self.stage_new_file(bytes, true)?;
        self.link_new(temp, name)
    }

    /// Writes `bytes` under a temp name, with the owner and mode a file replacing `name`
    /// takes, to be put in place later ([`SafeDir::put_in_place`]). `durable`: fsynced before
    /// this returns; else the caller makes it durable (with [`SafeDir::sync_filesystem`]) before it is
    /// put in place.
    pub fn stage_file(&self, name: &str, bytes: &[u8], durable: bool) -> Result<Temp> {
        let owner = self.owner_for(name)?;
        self.write_temp_with(bytes, &owner, durable)
    }

    /// Writes `bytes` under a temp name with the owner and mode of a new file, to be linked
    /// in place only if nothing has the name by then ([`SafeDir::link_new`]).
    pub fn stage_new_file(&self, bytes: &[u8], durable: bool) -> Result<Temp> {
        let owner = self.owner_for_new()?;
        self.write_temp_with(bytes, &owner, durable)
    }

    /// Makes a symlink to `target` under a temp name, owned as `name` would be.
    pub fn stage_symlink(&self, name: &str, target: &Path) -> Result<Temp> {
        let temp = self.fresh_temp_name()?;
        let path = self.path.join(&temp);
        checkpoint("symlink", &path);
        if let Err(err) = rustix::fs::symlinkat(target, &self.fd, &temp) {
            self.not_made(&temp);
            return Err(FsError::io("create symlink", path, err));
        }
        self.unsynced.set(true);
        let made = rustix::fs::statat(&self.fd, &temp, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|err| FsError::io("inspect", &path, err))
            .and_then(|stat| {
                let temp = Temp {
                    name: temp.clone(),
                    identity: (stat.st_dev, stat.st_ino),
                };
                self.made(&temp)?;
                Ok(temp)
            });
        let temp = match made {
            Ok(temp) => temp,
            Err(err) => {
                let _ = self.unlink(&temp);
                return Err(err);
            }
        };
        let owner = self.owner_for(name)?;
        if let Err(err) = self.give_name(&temp.name, &owner) {
            self.discard(temp);
            return Err(err);
        }
        Ok(temp)
    }

    /// Renames the staged `temp` over `name` (atomic: a reader sees the old or the new).
    pub fn put_in_place(&self, temp: Temp, name: &str) -> Result<()> {
        self.rename_into_place(temp, name)
    }

    /// Links the staged `temp` at `name` only if nothing has that name, then removes the temp
    /// name. Returns whether it was linked.
    pub fn link_new(&self, temp: Temp, name: &str) -> Result<bool> {
        self.check_temp(&temp)?;
        checkpoint("link", &self.path.join(name));
        let linked = rustix::fs::linkat(&self.fd, &temp.name, &self.fd, name, AtFlags::empty());
        let created = match linked {
            Ok(()) => {
                self.unsynced.set(true);
                true
            }
            Err(rustix::io::Errno::EXIST) => false,
            Err(err) => {
                self.discard(temp);
                return Err(FsError::io("create", self.path.join(name), err));
            }
        };
        self.unlink(&temp.name)?;
        Ok(created)
    }

    /// Removes a staged temp that will not be used (best effort: a leftover temp is removed
    /// by the next run that holds the lock). A temp that is no longer the file clawmd made
    /// (something replaced it) is left alone.
    pub fn discard(&self, temp: Temp) {
        if self.check_temp(&temp).is_ok() {
            let _ = self.unlink(&temp.name);
        }
    }

    /// Records that everything changed in this folder is durable (after [`SafeDir::sync_filesystem`]).
    pub fn mark_synced(&self) {
        self.unsynced.set(false);
    }

    /// The device of the filesystem this folder is on.
    pub fn device(&self) -> Result<u64> {
        rustix::fs::fstat(&self.fd)
            .map(|stat| stat.st_dev)
            .map_err(|err| FsError::io("inspect", &self.path, err))
    }

    /// Makes everything written on this folder's filesystem durable (`syncfs`): the data of
    /// every staged temp, and every rename, link and unlink made so far, in one call.
    pub fn sync_filesystem(&self) -> Result<()> {
        rustix::fs::syncfs(&self.fd)
            .map_err(|err| FsError::io("sync the filesystem of", &self.path, err))
    }

    /// Atomically replaces (or creates) `name` with a symlink to `target`.
    pub fn symlink(&self, name: &str, target: &Path) -> Result<()> {
        let temp = self.stage_symlink(name, target)?;
        self.rename_into_place(temp, name)
    }

    /// Removes the file or symlink `name` (never a directory). Missing is fine.
    pub fn remove(&self, name: &str) -> Result<()> {
        match self.unlink(name) {
            Ok(()) => Ok(()),
            Err(FsError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// Removes the directory `name` if it is empty. Returns whether it was removed.
    pub fn remove_empty_dir(&self, name: &str) -> Result<bool> {
        let path = self.path.join(name);
        checkpoint("rmdir", &path);
        match rustix::fs::unlinkat(&self.fd, name, AtFlags::REMOVEDIR) {
            Ok(()) => {
                self.unsynced.set(true);
                self.sync().map(|()| true)
            }
            Err(rustix::io::Errno::NOTEMPTY | rustix::io::Errno::EXIST) => Ok(false),
            Err(rustix::io::Errno::NOENT) => Ok(false),
            Err(err) => Err(FsError::io("remove directory", path, err)),
        }
    }

    /// The owner and mode a file replacing `name` takes: those of the regular file there, or
    /// for a new name those of a new file ([`SafeDir::owner_for_new`]).
    fn owner_for(&self, name: &str) -> Result<Owner> {
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) if FileKind::from_mode(stat.st_mode) == FileKind::File => Ok(Owner {
                uid: stat.st_uid,
                gid: stat.st_gid,
                mode: stat.st_mode & 0o777,
            }),
            Ok(_) | Err(rustix::io::Errno::NOENT) => self.owner_for_new(),
            Err(err) => Err(FsError::io("inspect", self.path.join(name), err)),
        }
    }

    /// The owner and mode of a new file here: the folder's owner and group, and the folder's
    /// permissions without execute bits (always readable and writable by its owner).
    fn owner_for_new(&self) -> Result<Owner> {
        let stat =
            rustix::fs::fstat(&self.fd).map_err(|err| FsError::io("inspect", &self.path, err))?;
        Ok(Owner {
            uid: stat.st_uid,
            gid: stat.st_gid,
            mode: (stat.st_mode & 0o666) | 0o600,
        })
    }

    /// Gives the entry `name` (a temp file, link or new folder, not followed) `owner`'s owner.
    fn give_name(&self, name: &str, owner: &Owner) -> Result<()> {
        let result = rustix::fs::chownat(
            &self.fd,
            name,
            Some(rustix::fs::Uid::from_raw(owner.uid)),
            Some(rustix::fs::Gid::from_raw(owner.gid)),
            AtFlags::SYMLINK_NOFOLLOW,
        );
        match result {
            // A runner that is not root cannot give files away; they stay its own, as before.
            Ok(()) | Err(rustix::io::Errno::PERM) => Ok(()),
            Err(err) => Err(FsError::io("set the owner of", self.path.join(name), err)),
        }
    }

    /// fsyncs the directory if anything in it changed since the last call, making the renames,
    /// links and unlinks in it durable.
    pub fn sync(&self) -> Result<()> {
        if !self.unsynced.replace(false) {
            return Ok(());
        }
        rustix::fs::fsync(&self.fd).map_err(|err| {
            self.unsynced.set(true);
            FsError::io("sync directory", &self.path, err)
        })
    }

    fn unlink(&self, name: &str) -> Result<()> {
        checkpoint("unlink", &self.path.join(name));
        rustix::fs::unlinkat(&self.fd, name, AtFlags::empty())
            .map_err(|err| FsError::io("remove", self.path.join(name), err))?;
        self.unsynced.set(true);
        Ok(())
    }

    fn write_temp_with(&self, bytes: &[u8], owner: &Owner, durable: bool) -> Result<Temp> {
        let name = self.fresh_temp_name()?;
        let path = self.path.join(&name);
        checkpoint("create temp file", &path);
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mode = Mode::from_raw_mode(owner.mode);
        let fd = match rustix::fs::openat(&self.fd, &name, flags, mode) {
            Ok(fd) => fd,
            Err(err) => {
                self.not_made(&name);
                return Err(FsError::io("create", &path, err));
            }
        };
        self.unsynced.set(true);
        let mut file = std::fs::File::from(fd);
        let result = rustix::fs::fstat(&file)
            .map_err(|err| FsError::io("inspect", &path, err))
            .and_then(|stat| {
                let temp = Temp {
                    name: name.clone(),
                    identity: (stat.st_dev, stat.st_ino),
                };
                self.made(&temp)?;
                give(&file, owner, &stat, &path)?;
                write_contents(&mut file, bytes, &path, durable)?;
                Ok(temp)
            });
        if result.is_err() {
            let _ = self.unlink(&name);
        }
        result
    }

    /// Renames the temp over `name`, once it is checked to still be the file clawmd made.
    fn rename_into_place(&self, temp: Temp, name: &str) -> Result<()> {
        self.check_temp(&temp)?;
        let path = self.path.join(name);
        checkpoint("rename", &path);
        if let Err(err) = rustix::fs::renameat(&self.fd, &temp.name, &self.fd, name) {
            self.discard(temp);
            return Err(FsError::io("replace", path, err));
        }
        self.unsynced.set(true);
        Ok(())
    }

    /// Refuses a temp name that is no longer the file or link clawmd made there (the agent
    /// can rename anything in its folder): its content is not clawmd's, so it is never put
    /// in place, and never removed.
    fn check_temp(&self, temp: &Temp) -> Result<()> {
        let path = self.path.join(&temp.name);
        match rustix::fs::statat(&self.fd, &temp.name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) if (stat.st_dev, stat.st_ino) == temp.identity => Ok(()),
            Ok(_) | Err(rustix::io::Errno::NOENT) => Err(FsError::Unsafe {
                path,
                found: "something other than the temp file clawmd wrote there".to_owned(),
                expected: "clawmd's temp file",
                fix: "something changed this folder while clawmd wrote it (nothing of it was put in place); run again".to_owned(),
            }),
            Err(err) => Err(FsError::io("inspect", path, err)),
        }
    }

    /// A new temp name, unpredictable, recorded in the journal (when there is one) before
    /// anything is made under it.
    fn fresh_temp_name(&self) -> Result<String> {
        let name = fresh_temp_name();
        if let Some(journal) = &self.journal {
            journal.record(Record::Intent, self.absolute_path(), &name, None)?;
        }
        Ok(name)
    }

    /// Records in the journal that `temp` was made (with its identity).
    fn made(&self, temp: &Temp) -> Result<()> {
        match &self.journal {
            Some(journal) => journal.record(
                Record::Made,
                self.absolute_path(),
                &temp.name,
                Some(temp.identity),
            ),
            None => Ok(()),
        }
    }

    /// Records in the journal that nothing was made under `name` (best effort).
    fn not_made(&self, name: &str) {
        if let Some(journal) = &self.journal {
            let _ = journal.record(Record::NotMade, self.absolute_path(), name, None);
        }
    }

    /// This folder's path, absolute (the journal is read by later runs, from any directory).
    fn absolute_path(&self) -> &Path {
        self.absolute
            .get_or_init(|| std::path::absolute(&self.path).unwrap_or_else(|_| self.path.clone()))
    }
}

/// A temp name no one can predict: the prefix and 128 random bits.
fn fresh_temp_name() -> String {
    let mut bytes = [0u8; 16];
    if rustix::rand::getrandom(&mut bytes[..], rustix::rand::GetRandomFlags::empty()).is_err() {
        // No getrandom(2): std's hash keys come from the system's randomness too.
        use std::hash::BuildHasher;
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let state = std::collections::hash_map::RandomState::new();
        let count = COUNTER.fetch_add(1, Ordering::Relaxed);
        bytes[..8].copy_from_slice(&state.hash_one((count, 0u8)).to_le_bytes());
        bytes[8..].copy_from_slice(&state.hash_one((count, 1u8)).to_le_bytes());
    }
    let mut name = String::with_capacity(TEMP_PREFIX.len() + 32);
    name.push_str(TEMP_PREFIX);
    for byte in bytes {
        name.push_str(&format!("{byte:02x}"));
    }
    name
}

/// A file or link written under a temp name in a [`SafeDir`], waiting to be put in place.
#[derive(Debug)]
#[must_use = "a staged temp is put in place, linked or discarded"]
pub struct Temp {
    name: String,
    /// The device and inode clawmd made under that name.
    identity: (u64, u64),
}

/// What a journal line says about a temp name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Record {
    /// About to be made (written before anything exists under the name).
    Intent,
    /// Made, with the device and inode it got.
    Made,
    /// Nothing was made under it (its creation failed).
    NotMade,
}

impl Record {
    fn tag(self) -> u8 {
        match self {
            Record::Intent => b'+',
            Record::Made => b'=',
            Record::NotMade => b'-',
        }
    }
}

/// The journal of the temp files and links made by the runs that hold one lock, kept in
/// clawmd's state folder (never in a folder an agent can write): each temp name is recorded
/// before anything is made under it, and again with its device and inode once made. A later
/// run holding the same lock removes what a crash left by reading it ([`read_leftovers`]):
/// only names recorded here, only if they are still a file or link clawmd made (the same
/// inode, when the journal says which), and never by name alone. A temp name carries 128
/// random bits, so no one can create one before clawmd does.
///
/// The journal is created (with the state folder) the first time a temp is recorded, and
/// emptied by [`TempJournal::settle`] once none of its temps is left (when dropped, if the
/// run did not settle it: drop it before the lock).
#[derive(Debug)]
pub struct TempJournal {
    /// clawmd's state folder.
    state: PathBuf,
    /// The folder inside it that holds the journals.
    folder: &'static str,
    /// This journal's name in that folder (the lock's name).
    name: String,
    /// The journal file, opened for appending on first use.
    file: std::sync::Mutex<Option<std::fs::File>>,
    /// Whether [`TempJournal::settle`] ran (after the last temp was recorded).
    settled: std::sync::atomic::AtomicBool,
    /// Whether the folders made for this run (the journal's own file, the group's folders in
    /// the state folder) are left to the run's `syncfs` instead of being fsynced one by one
    /// ([`TempJournal::defer_folder_syncs`]).
    deferred: std::sync::atomic::AtomicBool,
}

impl Drop for TempJournal {
    /// A run that stops on an error still settles its journal (while it holds the lock: the
    /// journal is dropped before the lock), so a failure that removed its temps leaves no
    /// records behind.
    fn drop(&mut self) {
        if !self.settled.load(Ordering::Relaxed)
            && let Err(err) = self.settle()
        {
            tracing::warn!("{}", crate::error::chain_text(&err));
        }
    }
}

/// The largest journal read: a run records two short lines per temp it makes.
const MAX_JOURNAL_BYTES: u64 = 16 * 1024 * 1024;

impl TempJournal {
    /// The journal `<state>/<folder>/<name>`; nothing is created until a temp is recorded.
    pub fn new(state: PathBuf, folder: &'static str, name: &str) -> Arc<TempJournal> {
        Arc::new(TempJournal {
            state,
            folder,
            name: name.to_owned(),
            file: std::sync::Mutex::new(None),
            settled: std::sync::atomic::AtomicBool::new(false),
            deferred: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// For a run that syncs the whole filesystem (`syncfs`) after making its temps and before
    /// renaming anything into place (a batch of groups): the entries it makes for this
    /// journal's lock in the state folder (the journal file, the group's bind folder) are made
    /// durable by that sync rather than by an fsync of their folder each. Nothing relies on
    /// them before it.
    pub fn defer_folder_syncs(&self) {
        self.deferred.store(true, Ordering::Relaxed);
    }

    /// Whether [`TempJournal::defer_folder_syncs`] was asked.
    pub fn folder_syncs_deferred(&self) -> bool {
        self.deferred.load(Ordering::Relaxed)
    }

    /// The journal's path.
    pub fn path(&self) -> PathBuf {
        self.state.join(self.folder).join(&self.name)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<std::fs::File>> {
        self.file
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The journal file, opened (and created, with its folders) on first use.
    fn open(&self) -> Result<std::fs::File> {
        let state = SafeDir::open_state(&self.state, true)?
            .expect("open_state with create returns a folder or an error");
        let folder = state
            .open_child(self.folder, true)?
            .expect("open_child with create returns a folder or an error");
        let flags = OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let path = self.path();
        // Created if missing (never through a link); then opened only if it is a regular
        // file.
        match rustix::fs::openat(
            &folder.fd,
            &self.name,
            flags | OFlags::EXCL | OFlags::WRONLY,
            Mode::from_raw_mode(0o600),
        ) {
            Ok(_) if self.folder_syncs_deferred() => {}
            Ok(_) => folder.unsynced.set(true),
            Err(rustix::io::Errno::EXIST) => {}
            Err(err) => return Err(FsError::io("create", &path, err)),
        }
        match folder.open_regular(&self.name, OFlags::RDWR | OFlags::APPEND)? {
            Some((file, _)) => Ok(file),
            None => Err(FsError::io(
                "open",
                path,
                io::Error::from(io::ErrorKind::NotFound),
            )),
        }
    }

    fn record(
        &self,
        record: Record,
        dir: &Path,
        name: &str,
        identity: Option<(u64, u64)>,
    ) -> Result<()> {
        let mut line = Vec::with_capacity(128);
        line.push(record.tag());
        line.push(b' ');
        for byte in dir.as_os_str().as_encoded_bytes() {
            line.extend_from_slice(format!("{byte:02x}").as_bytes());
        }
        line.push(b' ');
        line.extend_from_slice(name.as_bytes());
        if let Some((dev, ino)) = identity {
            line.extend_from_slice(format!(" {dev} {ino}").as_bytes());
        }
        line.push(b'\n');
        let mut file = self.lock();
        if file.is_none() {
            *file = Some(self.open()?);
        }
        self.settled.store(false, Ordering::Relaxed);
        let file = file.as_mut().expect("opened above");
        // One write with O_APPEND: the line is whole in the journal or not there.
        file.write_all(&line)
            .map_err(|err| FsError::io("write", self.path(), err))
    }

    /// Once a run is done: when none of the temps recorded (by this run or an interrupted
    /// one) is left, empties the journal, so that runs that find nothing to clean never read
    /// it. When some are (a temp a failed step could not remove), keeps them for the next run.
    pub fn settle(&self) -> Result<()> {
        self.settled.store(true, Ordering::Relaxed);
        let path = self.path();
        let mut file = self.lock();
        if file.is_none() {
            // Nothing recorded by this run: an earlier one's records, if any, are settled too.
            if !journal_has_records(&path) {
                return Ok(());
            }
            *file = Some(self.open()?);
        }
        let file = file.as_mut().expect("opened above");
        let size = file
            .metadata()
            .map_err(|err| FsError::io("inspect", &path, err))?
            .len();
        if size > MAX_JOURNAL_BYTES {
            return Err(too_large(&path, MAX_JOURNAL_BYTES));
        }
        let mut bytes = vec![0; size as usize];
        file.read_exact_at(&mut bytes, 0)
            .map_err(|err| FsError::io("read", &path, err))?;
        for leftover in parse_journal(&bytes) {
            if leftover.is_present()? {
                return Ok(());
            }
        }
        checkpoint("truncate", &path);
        file.set_len(0)
            .map_err(|err| FsError::io("truncate", &path, err))
    }
}

/// What a file read found ([`Seen::File`]), with the identity of the file when it was settled
/// at the time of the read (`opened`: its status, and the time before it was opened); `None`
/// for an error other than the file being over `limit` (the look that made it fails).
fn file_seen(
    limit: u64,
    read: &Result<Option<Vec<u8>>>,
    opened: Option<(&Stat, std::time::SystemTime)>,
) -> Option<Seen> {
    let digest = match read {
        Ok(Some(bytes)) => Some(reads::digest(bytes)),
        Ok(None) => None,
        Err(FsError::TooLarge { .. }) => Some(reads::TOO_LARGE.to_owned()),
        Err(_) => return None,
    };
    let identity = opened.and_then(|(stat, before)| reads::settled(stat, before));
    Some(Seen::File {
        limit,
        digest,
        identity,
    })
}

/// Whether every read of `log` finds again what it found ([`crate::reads`]), reading through
/// the folders `open_root` opens (the group folder, its bind folder) and the folders opened
/// from them (never through a link), each the way the read was made. Anything that cannot
/// be read again counts as a change (`None`). `Some(true)`: a file was found the same by its
/// bytes though its identity would now stand for them ([`reads::settled`]), so the reads are
/// worth making again once, that the runs to come do not read that file again.
pub fn replay(
    log: &[reads::Read],
    open_root: impl Fn(Root) -> Result<Option<SafeDir>>,
) -> Option<bool> {
    let mut dirs: std::collections::HashMap<(Root, String), Option<SafeDir>> =
        std::collections::HashMap::new();
    let mut settled_since = false;
    for read in log {
        if implied_by_another_read(read, log) {
            continue;
        }
        replay_dir(&mut dirs, read.root, &read.dir, &open_root);
        let dir = dirs
            .get(&(read.root, read.dir.clone()))
            .and_then(Option::as_ref);
        let holds = match (dir, &read.seen) {
            (dir, Seen::Folder(present)) if read.dir.is_empty() && read.name.is_empty() => {
                (dir.is_some() == *present).then_some(false)
            }
            (None, _) => None,
            // A folder found is kept for the reads in it.
            (Some(dir), Seen::Folder(present)) => match dir.open_child(&read.name, false) {
                Ok(child) => {
                    let found = child.is_some() == *present;
                    let path = reads::join(&read.dir, &read.name);
                    dirs.entry((read.root, path)).or_insert(child);
                    found.then_some(false)
                }
                Err(_) => None,
            },
            (Some(dir), seen) => holds_again(dir, &read.name, seen),
        };
        let Some(settled) = holds else {
            tracing::trace!(?read, "a read finds something else");
            return None;
        };
        settled_since |= settled;
    }
    Some(settled_since)
}

/// Whether what `read` found is implied by another read of the same name in `log` that
/// replaying tells as much: a regular file's kind by a read of its bytes or identity (which
/// holds its type), a folder's kind by the folder opened (never through a link).
fn implied_by_another_read(read: &reads::Read, log: &[reads::Read]) -> bool {
    let same_name = |other: &&reads::Read| {
        (other.root, &other.dir, &other.name) == (read.root, &read.dir, &read.name)
    };
    match read.seen {
        Seen::Kind(Some(FileKind::File)) => log.iter().filter(same_name).any(|other| {
            matches!(
                other.seen,
                Seen::File {
                    digest: Some(_),
                    ..
                } | Seen::File {
                    identity: Some(_),
                    ..
                } | Seen::Identity {
                    identity: Some(_),
                    ..
                }
            )
        }),
        Seen::Kind(Some(FileKind::Dir)) => {
            (log.iter().filter(same_name)).any(|other| other.seen == Seen::Folder(true))
        }
        _ => false,
    }
}

/// Opens (once) the folder `dir` of `root` and its parents for [`replay`].
fn replay_dir(
    dirs: &mut std::collections::HashMap<(Root, String), Option<SafeDir>>,
    root: Root,
    dir: &str,
    open_root: &impl Fn(Root) -> Result<Option<SafeDir>>,
) {
    if dirs.contains_key(&(root, dir.to_owned())) {
        return;
    }
    let opened = if dir.is_empty() {
        open_root(root).ok().flatten()
    } else {
        let (parent, name) = dir.rsplit_once('/').unwrap_or(("", dir));
        replay_dir(dirs, root, parent, open_root);
        dirs.get(&(root, parent.to_owned()))
            .and_then(Option::as_ref)
            .and_then(|parent| parent.open_child(name, false).ok().flatten())
    };
    dirs.insert((root, dir.to_owned()), opened);
}

/// Whether reading `name` in `dir` the way `seen` was read finds the same again (a read that
/// fails finds something else). A file kept with its identity and found with the same is not
/// read again.
fn holds_again(dir: &SafeDir, name: &str, seen: &Seen) -> Option<bool> {
    let same = match seen {
        Seen::Folder(present) => dir
            .open_child(name, false)
            .is_ok_and(|found| found.is_some() == *present),
        Seen::Kind(kind) => dir.kind(name).is_ok_and(|found| found == *kind),
        Seen::Size(size) => dir.size(name).is_ok_and(|found| found == *size),
        Seen::Link(digest) => dir
            .read_link(name)
            .is_ok_and(|target| reads::digest(target.as_os_str().as_encoded_bytes()) == *digest),
        Seen::File {
            limit,
            digest,
            identity,
        } => {
            if identity.is_some() && dir.identity(name).ok().flatten() == *identity {
                return Some(false);
            }
            // Read again; would its identity stand for its bytes now?
            let (read, opened) = dir.read_as_found(name, *limit).ok()?;
            return match file_seen(*limit, &read, opened.as_ref().map(|(s, t)| (s, *t))) {
                Some(Seen::File {
                    digest: again,
                    identity: now,
                    ..
                }) if again == *digest => Some(now.is_some()),
                _ => None,
            };
        }
        Seen::Identity { identity, .. } => dir.identity(name).is_ok_and(|found| found == *identity),
        Seen::Listing(_) => dir
            .list_kinds()
            .is_ok_and(|entries| reads::listing(&entries) == *seen),
        Seen::Entries(identity) => {
            name.is_empty()
                && rustix::fs::fstat(&dir.fd).is_ok_and(|stat| reads::identity(&stat) == *identity)
        }
        Seen::Prefixed { prefixes, .. } => {
            let prefixes: Vec<&str> = prefixes.iter().map(String::as_str).collect();
            dir.names_starting_with(&prefixes).is_ok_and(|names| {
                reads::prefixed(names.iter().map(String::as_str), &prefixes) == *seen
            })
        }
        // Only a container view logs these, and replays them itself
        // (`MountedFs::holds`): a folder read never finds one.
        Seen::Entry(_) => false,
    };
    same.then_some(false)
}

/// A temp file or link a run recorded in its journal and did not put in place or remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    /// The (absolute) folder it is in.
    pub dir: PathBuf,
    /// Its name (always a temp name).
    pub name: String,
    /// The device and inode it was made with (`None`: the run stopped before recording them).
    made: Option<(u64, u64)>,
}

impl Leftover {
    /// Its path.
    pub fn path(&self) -> PathBuf {
        self.dir.join(&self.name)
    }

    /// Opens its folder (never through a link at the last step); `None` when it is gone or
    /// is no longer a real folder (then nothing in it is clawmd's to remove).
    fn open_dir(&self) -> Option<SafeDir> {
        match SafeDir::open(&self.dir) {
            Ok(dir) => Some(dir),
            Err(err) => {
                tracing::debug!("{}", crate::error::chain_text(&err));
                None
            }
        }
    }

    /// Whether it is still there as clawmd made it: a regular file or a symlink, with the
    /// inode clawmd recorded (when the run got as far as recording it).
    fn is_present_in(&self, dir: &SafeDir) -> Result<bool> {
        match rustix::fs::statat(&dir.fd, self.name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => {
                let kind = FileKind::from_mode(stat.st_mode);
                Ok(matches!(kind, FileKind::File | FileKind::Symlink)
                    && self
                        .made
                        .is_none_or(|made| made == (stat.st_dev, stat.st_ino)))
            }
            Err(rustix::io::Errno::NOENT) => Ok(false),
            Err(err) => Err(FsError::io("inspect", self.path(), err)),
        }
    }

    /// Whether it is still there as clawmd made it.
    pub fn is_present(&self) -> Result<bool> {
        match self.open_dir() {
            Some(dir) => self.is_present_in(&dir),
            None => Ok(false),
        }
    }

    /// Removes it if it is still there as clawmd made it (checked again right before the
    /// removal), durably. Only while holding the lock whose journal recorded it. Returns
    /// whether it was removed.
    pub fn remove(&self) -> Result<bool> {
        let Some(dir) = self.open_dir() else {
            return Ok(false);
        };
        if !self.is_present_in(&dir)? {
            return Ok(false);
        }
        dir.remove(&self.name)?;
        dir.sync()?;
        Ok(true)
    }
}

/// The temps the journal `bytes` records, each once, in the order first recorded, without
/// those whose creation failed. A line that is not well formed (a journal cut short by a
/// power loss) is skipped; a name that is not a temp name is never returned.
fn parse_journal(bytes: &[u8]) -> Vec<Leftover> {
    let mut found: Vec<(Leftover, bool)> = Vec::new();
    for line in bytes.split(|&b| b == b'\n') {
        let Some((record, dir, name, made)) = parse_line(line) else {
            continue;
        };
        let index = match found
            .iter()
            .position(|(known, _)| known.dir == dir && known.name == name)
        {
            Some(index) => index,
            None => {
                found.push((
                    Leftover {
                        dir,
                        name: name.to_owned(),
                        made: None,
                    },
                    true,
                ));
                found.len() - 1
            }
        };
        match record {
            Record::Intent => {}
            Record::Made => found[index].0.made = made,
            Record::NotMade => found[index].1 = false,
        }
    }
    found
        .into_iter()
        .filter_map(|(leftover, live)| live.then_some(leftover))
        .collect()
}

/// One journal line: what it records, the folder, the temp name and, for [`Record::Made`],
/// the device and inode.
type Line<'a> = (Record, PathBuf, &'a str, Option<(u64, u64)>);

fn parse_line(line: &[u8]) -> Option<Line<'_>> {
    let line = std::str::from_utf8(line).ok()?;
    let mut fields = line.split(' ');
    let record = match fields.next()? {
        "+" => Record::Intent,
        "=" => Record::Made,
        "-" => Record::NotMade,
        _ => return None,
    };
    let hex = fields.next()?;
    if hex.len() % 2 != 0 {
        return None;
    }
    let dir: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect::<Option<_>>()?;
    let dir = PathBuf::from(OsString::from_vec(dir));
    let name = fields.next()?;
    if !is_temp_name(name) || !dir.is_absolute() {
        return None;
    }
    let made = match record {
        Record::Made => Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?)),
        _ => None,
    };
    if fields.next().is_some() {
        return None;
    }
    Some((record, dir, name, made))
}

/// The temps the journal at `<state>/<folder>/<name>` records that are still there as clawmd
/// made them (read only: for a dry run and `check`, or for the run holding the lock to
/// remove). A missing state folder or journal holds none; a state folder that is a link or
/// not a folder is refused.
pub fn read_leftovers(state: &Path, folder: &str, name: &str) -> Result<Vec<Leftover>> {
    let Some(state) = SafeDir::open_state(state, false)? else {
        return Ok(Vec::new());
    };
    let Some(journals) = state.open_child(folder, false)? else {
        return Ok(Vec::new());
    };
    let Some(bytes) = journals.read_file(name, MAX_JOURNAL_BYTES)? else {
        return Ok(Vec::new());
    };
    let mut present = Vec::new();
    for leftover in parse_journal(&bytes) {
        if leftover.is_present()? {
            present.push(leftover);
        }
    }
    Ok(present)
}

/// Whether the journal at `path` may record a temp: it is a regular file (not a link:
/// never followed) and not empty.
pub fn journal_has_records(path: &Path) -> bool {
    rustix::fs::lstat(path)
        .is_ok_and(|stat| FileKind::from_mode(stat.st_mode) == FileKind::File && stat.st_size > 0)
}

/// What is at `path`, without following a link at its last component (`None`: nothing, or
/// it cannot be looked at).
pub fn kind_no_follow(path: &Path) -> Option<FileKind> {
    rustix::fs::lstat(path)
        .ok()
        .map(|stat| FileKind::from_mode(stat.st_mode))
}

/// The owner and permission bits a written file takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Owner {
    uid: u32,
    gid: u32,
    mode: u32,
}

/// Gives the open file, whose status is `stat`, `owner`'s owner (when permitted) and mode,
/// where they differ.
fn give(file: &std::fs::File, owner: &Owner, stat: &Stat, path: &Path) -> Result<()> {
    let mode = stat.st_mode & 0o7777;
    if (stat.st_uid, stat.st_gid, mode) == (owner.uid, owner.gid, owner.mode) {
        return Ok(());
    }
    if (stat.st_uid, stat.st_gid) == (owner.uid, owner.gid) {
        return rustix::fs::fchmod(file, Mode::from_raw_mode(owner.mode))
            .map_err(|err| FsError::io("set the mode of", path, err));
    }
    match rustix::fs::fchown(
        file,
        Some(rustix::fs::Uid::from_raw(owner.uid)),
        Some(rustix::fs::Gid::from_raw(owner.gid)),
    ) {
        // A runner that is not root cannot give files away; they stay its own, as before.
        Ok(()) | Err(rustix::io::Errno::PERM) => {}
        Err(err) => return Err(FsError::io("set the owner of", path, err)),
    }
    rustix::fs::fchmod(file, Mode::from_raw_mode(owner.mode))
        .map_err(|err| FsError::io("set the mode of", path, err))
}

/// Blocks of zeros are left as holes rather than written.
const HOLE_BLOCK: usize = 4096;

/// Writes `bytes` into the new `file`; `durable`: fsyncs it too (else the caller makes it
/// durable, for many files at once, with [`SafeDir::sync_filesystem`]).
fn write_contents(
    file: &mut std::fs::File,
    bytes: &[u8],
    path: &Path,
    durable: bool,
) -> Result<()> {
    // Crash tests stop between the two halves (a file written half); a run can stop there
    // only by a crash, so otherwise it is one write.
    let half = match crash_injection_enabled() {
        true => bytes.len() / 2,
        false => 0,
    };
    write_sparse(file, bytes, 0, half).map_err(|err| FsError::io("write", path, err))?;
    checkpoint("write second half", path);
    let written = write_sparse(file, bytes, half, bytes.len())
        .map_err(|err| FsError::io("write", path, err))?;
    // A new file is as long as what was written into it: only a hole at its end is set.
    if written < bytes.len() {
        file.set_len(bytes.len() as u64)
            .map_err(|err| FsError::io("write", path, err))?;
    }
    if !durable {
        return Ok(());
    }
    file.sync_all()
        .map_err(|err| FsError::io("sync", path, err))
}

/// Writes `bytes[start..end]` at its offset, skipping every whole block of zeros (aligned to
/// [`HOLE_BLOCK`]) so that it stays a hole, each run of other blocks in one write; returns
/// where the last write ended (`start` when nothing was written), so the caller sets the final
/// length when the file ends in a hole.
fn write_sparse(file: &std::fs::File, bytes: &[u8], start: usize, end: usize) -> io::Result<usize> {
    let mut at = start;
    let mut run = start;
    let mut written = start;
    while at < end {
        let block_end = ((at / HOLE_BLOCK + 1) * HOLE_BLOCK).min(end);
        let block = &bytes[at..block_end];
        let whole_block = at.is_multiple_of(HOLE_BLOCK) && block.len() == HOLE_BLOCK;
        if whole_block && block.iter().all(|&b| b == 0) {
            if run < at {
                file.write_all_at(&bytes[run..at], run as u64)?;
                written = at;
            }
            run = block_end;
        }
        at = block_end;
    }
    if run < end {
        file.write_all_at(&bytes[run..end], run as u64)?;
        written = end;
    }
    Ok(written)
}

/// Whether `name` has the shape of a temp name this module makes (the prefix and 32 hex
/// digits). Only a shape: anyone can name a file so, and clawmd removes a temp only when a
/// journal records it ([`read_leftovers`]).
pub fn is_temp_name(name: &str) -> bool {
    name.len() == TEMP_PREFIX.len() + 32
        && name.starts_with(TEMP_PREFIX)
        && name[TEMP_PREFIX.len()..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Reads at most `limit` bytes of `path` (following links: for trusted host files only; but
/// never opening anything that is not a regular file). `None` when it is missing.
pub fn read_host_file(path: &Path, limit: u64) -> Result<Option<Vec<u8>>> {
    Ok(read_host_file_as_found(path, limit)?.map(|(bytes, _)| bytes))
}

/// [`read_host_file`], with the status of the file read, taken before its bytes were (what
/// a later run compares to tell whether they can have changed).
pub fn read_host_file_as_found(
    path: &Path,
    limit: u64,
) -> Result<Option<(Vec<u8>, rustix::fs::Stat)>> {
    let handle = match rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(err) => return Err(FsError::io("open", path, err)),
    };
    let stat = rustix::fs::fstat(&handle).map_err(|err| FsError::io("inspect", path, err))?;
    refuse_non_regular(path, FileKind::from_mode(stat.st_mode))?;
    let file = reopen(&handle, &stat, OFlags::RDONLY, || {
        rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )
    })
    .map_err(|err| FsError::io("open", path, err))?;
    let bytes = read_limited(file, path, stat.st_size as u64, limit)?;
    Ok(Some((bytes, stat)))
}

/// Refuses anything but a regular file, before it is opened.
fn refuse_non_regular(path: &Path, kind: FileKind) -> Result<()> {
    if kind == FileKind::File {
        return Ok(());
    }
    Err(FsError::Unsafe {
        path: path.to_owned(),
        found: kind.describe().to_owned(),
        expected: "a regular file",
        fix: match kind {
            FileKind::Symlink => "replace the link with a regular file".to_owned(),
            _ => "replace it with a regular file".to_owned(),
        },
    })
}

/// Opens the regular file behind the `O_PATH` `handle` (whose `stat` is known) with `access`,
/// through `/proc/self/fd`, so the very inode that was checked is opened. Without `/proc`,
/// `by_name` opens it by name again, and the result is accepted only if it is the same inode
/// (a swap in between is refused; a device node planted in that instant would be opened, but
/// creating one needs privileges an agent does not have).
fn reopen(
    handle: &OwnedFd,
    stat: &Stat,
    access: OFlags,
    by_name: impl FnOnce() -> rustix::io::Result<OwnedFd>,
) -> io::Result<std::fs::File> {
    let proc = format!("/proc/self/fd/{}", handle.as_raw_fd());
    let flags = access | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = match rustix::fs::open(proc.as_str(), flags, Mode::empty()) {
        // The magic link opens the very inode the handle holds: nothing to compare.
        Ok(fd) => return Ok(std::fs::File::from(fd)),
        Err(rustix::io::Errno::NOENT) => by_name()?,
        Err(err) => return Err(err.into()),
    };
    let opened = rustix::fs::fstat(&fd)?;
    if (opened.st_dev, opened.st_ino) != (stat.st_dev, stat.st_ino) {
        return Err(io::Error::other(
            "the file was replaced while clawmd opened it; run again",
        ));
    }
    Ok(std::fs::File::from(fd))
}

/// Reads the whole file, at most `limit` bytes; `size` is its size from `fstat`, used to refuse
/// an oversized file without reading it and to read the rest in one go.
fn read_limited(file: std::fs::File, path: &Path, size: u64, limit: u64) -> Result<Vec<u8>> {
    if size > limit {
        return Err(too_large(path, limit));
    }
    // The `size` bytes `fstat` reported, and no more: no second read to find the end. A file
    // appended to meanwhile is read as it was when looked at; one that shrank, to its end.
    let mut bytes = vec![0; size as usize];
    let mut filled = 0;
    while filled < bytes.len() {
        match (&file).read(&mut bytes[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(FsError::io("read", path, err)),
        }
    }
    bytes.truncate(filled);
    Ok(bytes)
}

fn too_large(path: &Path, limit: u64) -> FsError {
    FsError::TooLarge {
        path: path.to_owned(),
        limit,
        fix: "shrink the file; memory files this large would not fit in the agent's context"
            .to_owned(),
    }
}

fn kind_of_path(path: &Path) -> Result<Option<FileKind>> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) => Ok(Some(FileKind::from_std(meta.file_type()))),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(FsError::io("inspect", path, err)),
    }
}

/// Atomically replaces (or creates) the trusted host file `path` (such as the deployment's
/// `clawmd.json`) with `bytes`, durably.
pub fn write_host_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(FsError::io(
            "write",
            path,
            io::Error::new(io::ErrorKind::InvalidInput, "not a file path"),
        ));
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let dir = SafeDir::open(parent)?;
    dir.write_file(&name.to_string_lossy(), bytes)?;
    dir.sync()
}

/// Creates a host folder and its parents (for trusted host paths such as `container/`).
pub fn create_dir_all(path: &Path) -> Result<()> {
    checkpoint("mkdir", path);
    std::fs::create_dir_all(path).map_err(|err| FsError::io("create directory", path, err))
}

/// A held per-group lock; released when dropped (or when the process dies).
#[derive(Debug)]
pub struct GroupLock {
    _file: std::fs::File,
}

/// Takes the exclusive lock at `lock_path` (creating its folder), waiting up to `timeout`.
/// A lock held by a process that died is released by the kernel, so it never blocks.
pub fn lock(lock_path: &Path, timeout: Duration) -> Result<GroupLock> {
    let flags = OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mode = Mode::from_raw_mode(0o644);
    let fd = match rustix::fs::open(lock_path, flags, mode) {
        Err(rustix::io::Errno::NOENT) if lock_path.parent().is_some() => {
            let parent = lock_path.parent().unwrap_or(lock_path);
            std::fs::create_dir_all(parent)
                .map_err(|err| FsError::io("create lock directory", parent, err))?;
            rustix::fs::open(lock_path, flags, mode)
        }
        other => other,
    }
    .map_err(|err| FsError::io("open lock file", lock_path, err))?;
    let file = std::fs::File::from(fd);
    let started = Instant::now();
    let mut announced = false;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(GroupLock { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(err)) => {
                return Err(FsError::io("lock", lock_path, err));
            }
        }
        if !announced {
            tracing::info!(lock = %lock_path.display(), "waiting for another clawmd run to release the lock");
            announced = true;
        }
        if started.elapsed() >= timeout {
            return Err(FsError::LockTimeout {
                path: lock_path.to_owned(),
                waited: started.elapsed(),
            });
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn crash_at() -> Option<u64> {
    static CRASH_AT: OnceLock<Option<u64>> = OnceLock::new();
    *CRASH_AT.get_or_init(|| {
        std::env::var("CLAWMD_CRASH_AT")
            .ok()
            .and_then(|v| v.parse().ok())
    })
}

/// Whether `CLAWMD_CRASH_AT` is set (callers then keep the order of steps deterministic).
pub fn crash_injection_enabled() -> bool {
    crash_at().is_some()
}

/// Marks a point just before a disk-changing step. With `CLAWMD_CRASH_AT=N` set, the N-th call
/// in this process aborts it, simulating a crash at that point (used by the crash tests).
pub fn checkpoint(step: &str, path: &Path) {
    static STEPS: AtomicU64 = AtomicU64::new(0);
    let Some(crash_at) = crash_at() else { return };
    let step_number = STEPS.fetch_add(1, Ordering::SeqCst) + 1;
    if step_number == crash_at {
        let _ = writeln!(
            io::stderr(),
            "clawmd: CLAWMD_CRASH_AT={crash_at}: crashing before {step} {}",
            path.display()
        );
        std::process::abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Makes a FIFO at `path`.
    fn fifo(path: &Path) {
        let mode = Mode::from_raw_mode(0o644);
        rustix::fs::mknodat(rustix::fs::CWD, path, rustix::fs::FileType::Fifo, mode, 0).unwrap();
    }

    fn dir() -> (tempfile::TempDir, SafeDir) {
        let temp = tempfile::tempdir().unwrap();
        let safe = SafeDir::open(temp.path()).unwrap();
        (temp, safe)
    }

    #[test]
    fn a_kind_read_left_to_the_content_read_after_it_still_decides() {
        let (temp, dir) = dir();
        dir.write_file("a.md", b"text").unwrap();
        let read = |seen| reads::Read {
            root: Root::Group,
            dir: String::new(),
            name: "a.md".to_owned(),
            seen,
        };
        let log = [
            read(Seen::Kind(Some(FileKind::File))),
            read(Seen::File {
                limit: 100,
                digest: Some(reads::digest(b"text")),
                identity: None,
            }),
        ];
        let holds = || replay(&log, |_| SafeDir::open(temp.path()).map(Some)).is_some();
        assert!(holds());
        std::fs::remove_file(temp.path().join("a.md")).unwrap();
        assert!(!holds(), "missing");
        fifo(&temp.path().join("a.md"));
        assert!(!holds(), "a FIFO");
    }

    #[test]
    fn blocks_of_zeros_stay_holes_and_every_byte_is_written() {
        use std::os::unix::fs::MetadataExt;
        let (temp, dir) = dir();
        let zeros = vec![0u8; 4 * HOLE_BLOCK];
        let cases: [(&str, Vec<u8>); 5] = [
            ("text", b"text".repeat(5000)),
            ("empty", Vec::new()),
            ("zeros", zeros.clone()),
            (
                "zeros inside",
                [b"a".repeat(100), zeros.clone(), b"b".repeat(5000)].concat(),
            ),
            (
                "zeros at the end",
                [b"a".repeat(HOLE_BLOCK), zeros.clone()].concat(),
            ),
        ];
        for (name, bytes) in cases {
            dir.write_file(name, &bytes).unwrap();
            let limit = bytes.len() as u64 + 1;
            assert_eq!(
                dir.read_file(name, limit).unwrap(),
                Some(bytes.clone()),
                "{name}"
            );
            let meta = std::fs::metadata(temp.path().join(name)).unwrap();
            assert_eq!(meta.len(), bytes.len() as u64, "{name}");
            // (The block where the two halves meet is written whole.)
            if name.starts_with("zeros") {
                assert!(meta.blocks() * 512 < bytes.len() as u64, "{name}: {meta:?}");
            }
        }
    }

    #[test]
    fn writes_reads_and_replaces_files_atomically() {
        let (_temp, dir) = dir();
        dir.write_file("a.md", b"one").unwrap();
        assert_eq!(dir.read_file("a.md", 100).unwrap(), Some(b"one".to_vec()));
        dir.write_file("a.md", b"two").unwrap();
        assert_eq!(dir.read_file("a.md", 100).unwrap(), Some(b"two".to_vec()));
        assert_eq!(dir.list().unwrap(), vec![OsString::from("a.md")]);
    }

    #[test]
    fn a_sealed_file_is_overwritten_in_place_and_never_through_a_link_or_into_a_fifo() {
        use std::os::unix::fs::MetadataExt;
        let (temp, dir) = dir();
        let inode = |name: &str| std::fs::metadata(temp.path().join(name)).unwrap().ino();
        dir.overwrite_sealed("r", b"a longer first record").unwrap();
        let first = inode("r");
        dir.overwrite_sealed("r", b"shorter").unwrap();
        assert_eq!(std::fs::read(temp.path().join("r")).unwrap(), b"shorter");
        assert_eq!(inode("r"), first, "the same file, written in place");
        dir.overwrite_sealed("r", b"longer than the one before")
            .unwrap();
        assert_eq!(
            std::fs::read(temp.path().join("r")).unwrap(),
            b"longer than the one before"
        );
        // A link is not followed, a FIFO neither blocks nor is written: both refused.
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::os::unix::fs::symlink(&victim, temp.path().join("link")).unwrap();
        assert!(dir.overwrite_sealed("link", b"record").is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        fifo(&temp.path().join("fifo"));
        assert!(dir.overwrite_sealed("fifo", b"record").is_err());
        assert_eq!(dir.kind("fifo").unwrap(), Some(FileKind::Other));
        // A hard link to an outside file is replaced, not written through.
        std::fs::hard_link(&victim, temp.path().join("hard")).unwrap();
        dir.overwrite_sealed("hard", b"record").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(std::fs::read(temp.path().join("hard")).unwrap(), b"record");
        assert_ne!(inode("hard"), std::fs::metadata(&victim).unwrap().ino());
    }

    #[test]
    fn replaces_a_symlink_without_a_gap_and_never_follows_it() {
        let (temp, dir) = dir();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::os::unix::fs::symlink(&victim, temp.path().join("x")).unwrap();
        assert!(matches!(
            dir.read_file("x", 100),
            Err(FsError::Unsafe { .. })
        ));
        dir.write_file("x", b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        dir.symlink("x", Path::new("/app/CLAUDE.md")).unwrap();
        assert_eq!(dir.kind("x").unwrap(), Some(FileKind::Symlink));
        assert_eq!(dir.read_link("x").unwrap(), Path::new("/app/CLAUDE.md"));
    }

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
    fn create_new_file_never_overwrites() {
        let (_temp, dir) = dir();
        assert!(dir.create_new_file("n", b"first").unwrap());
        assert!(!dir.create_new_file("n", b"second").unwrap());
        assert_eq!(dir.read_file("n", 100).unwrap(), Some(b"first".to_vec()));
        assert_eq!(dir.list().unwrap().len(), 1, "no temp file left");
    }

    /// A directory recording its temps in a journal kept in another (the state folder).
    fn journaled() -> (tempfile::TempDir, SafeDir, Arc<TempJournal>) {
        let temp = tempfile::tempdir().unwrap();
        std::fs::create_dir(temp.path().join("group")).unwrap();
        let journal = TempJournal::new(temp.path().join("state"), "journal", "g");
        let mut dir = SafeDir::open(&temp.path().join("group")).unwrap();
        dir.record_temps_in(&journal);
        (temp, dir, journal)
    }

    fn leftovers_of(temp: &tempfile::TempDir) -> Vec<Leftover> {
        read_leftovers(&temp.path().join("state"), "journal", "g").unwrap()
    }

    #[test]
    fn only_recorded_temps_clawmd_made_are_leftovers() {
        let (temp, dir, journal) = journaled();
        // What an interrupted run leaves: two staged temps never put in place.
        let file = dir.stage_file("a.md", b"half", true).unwrap();
        let link = dir.stage_symlink("b.md", Path::new("/app/x")).unwrap();
        // What the agent can name: files named like temps, one like a real temp name.
        let planted = [
            format!("{TEMP_PREFIX}notes"),
            format!("{TEMP_PREFIX}{}", "ab".repeat(16)),
            format!("{TEMP_PREFIX}1-2-3"),
        ];
        for name in &planted {
            std::fs::write(dir.path().join(name), "the agent's").unwrap();
        }
        let found: Vec<String> = leftovers_of(&temp).into_iter().map(|l| l.name).collect();
        assert_eq!(found, [file.name.clone(), link.name.clone()]);
        // The run holding the lock removes exactly those, then the journal empties.
        for leftover in leftovers_of(&temp) {
            assert!(leftover.remove().unwrap());
        }
        journal.settle().unwrap();
        assert_eq!(std::fs::metadata(journal.path()).unwrap().len(), 0);
        let mut left: Vec<String> = dir
            .list()
            .unwrap()
            .into_iter()
            .map(|n| n.into_string().unwrap())
            .collect();
        left.sort();
        let mut expected = planted.to_vec();
        expected.sort();
        assert_eq!(left, expected, "the agent's files are untouched");
        for name in &planted {
            assert_eq!(
                std::fs::read_to_string(dir.path().join(name)).unwrap(),
                "the agent's"
            );
        }
    }

    #[test]
    fn a_journal_is_emptied_only_when_none_of_its_temps_is_left() {
        // Every temp put in place (or removed): the journal is emptied.
        let (temp, dir, journal) = journaled();
        let file = dir.stage_file("a.md", b"A", true).unwrap();
        dir.put_in_place(file, "a.md").unwrap();
        let link = dir.stage_symlink("b.md", Path::new("/app/x")).unwrap();
        dir.put_in_place(link, "b.md").unwrap();
        let unused = dir.stage_file("c.md", b"C", true).unwrap();
        dir.discard(unused);
        let new = dir.stage_new_file(b"D", true).unwrap();
        assert!(dir.link_new(new, "d.md").unwrap());
        assert!(std::fs::metadata(journal.path()).unwrap().len() > 0);
        journal.settle().unwrap();
        assert_eq!(std::fs::metadata(journal.path()).unwrap().len(), 0);
        assert!(leftovers_of(&temp).is_empty());
        // A temp the run left where it made it keeps the journal, which names it.
        let (temp, dir, journal) = journaled();
        let placed = dir.stage_file("a.md", b"A", true).unwrap();
        dir.put_in_place(placed, "a.md").unwrap();
        let left = dir.stage_file("b.md", b"B", true).unwrap();
        journal.settle().unwrap();
        let found: Vec<String> = leftovers_of(&temp).into_iter().map(|l| l.name).collect();
        assert_eq!(found, [left.name.as_str()]);
        // A later run that finds it (the journal it opens holds records) empties the journal
        // only once it is gone.
        let later = TempJournal::new(temp.path().join("state"), "journal", "g");
        let mut again = SafeDir::open(&temp.path().join("group")).unwrap();
        again.record_temps_in(&later);
        let own = again.stage_file("c.md", b"C", true).unwrap();
        again.put_in_place(own, "c.md").unwrap();
        later.settle().unwrap();
        assert_eq!(
            leftovers_of(&temp).len(),
            1,
            "the earlier run's temp is still there"
        );
        assert!(leftovers_of(&temp)[0].remove().unwrap());
        later.settle().unwrap();
        assert_eq!(std::fs::metadata(later.path()).unwrap().len(), 0);
        drop(left);
    }

    #[test]
    fn a_recorded_temp_replaced_by_another_file_is_not_clawmds() {
        let (temp, dir, journal) = journaled();
        let staged = dir.stage_file("a.md", b"mine", true).unwrap();
        // The agent swaps the temp for its own file under the same name.
        let path = dir.path().join(&staged.name);
        std::fs::rename(&path, dir.path().join("moved")).unwrap();
        std::fs::write(&path, "the agent's").unwrap();
        // Never put in place (the entry point would get the agent's text) ...
        let err = dir.put_in_place(staged, "a.md").unwrap_err();
        assert!(matches!(err, FsError::Unsafe { .. }), "{err}");
        assert!(dir.kind("a.md").unwrap().is_none());
        // ... and never removed as a leftover.
        assert!(leftovers_of(&temp).is_empty());
        journal.settle().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "the agent's");
    }

    #[test]
    fn a_temp_recorded_before_it_was_made_is_a_leftover_when_it_is_a_file() {
        let (temp, dir, journal) = journaled();
        // A run that stopped between recording the name and recording what it made: the
        // name is in the journal, unpredictable, and a regular file is there.
        let name = fresh_temp_name();
        journal
            .record(Record::Intent, dir.absolute_path(), &name, None)
            .unwrap();
        std::fs::write(dir.path().join(&name), "half").unwrap();
        let leftovers = leftovers_of(&temp);
        assert_eq!(leftovers.len(), 1);
        assert!(leftovers[0].remove().unwrap());
        // A folder there is never removed; a name whose creation failed is forgotten.
        let other = fresh_temp_name();
        journal
            .record(Record::Intent, dir.absolute_path(), &other, None)
            .unwrap();
        std::fs::create_dir(dir.path().join(&other)).unwrap();
        assert!(leftovers_of(&temp).is_empty());
        let failed = fresh_temp_name();
        journal
            .record(Record::Intent, dir.absolute_path(), &failed, None)
            .unwrap();
        journal
            .record(Record::NotMade, dir.absolute_path(), &failed, None)
            .unwrap();
        std::fs::write(dir.path().join(&failed), "x").unwrap();
        assert!(leftovers_of(&temp).is_empty());
        // settle keeps nothing it need not: none of its temps is left.
        journal.settle().unwrap();
        assert_eq!(std::fs::metadata(journal.path()).unwrap().len(), 0);
    }

    #[test]
    fn a_journal_names_only_temp_names_in_absolute_folders() {
        let hex = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
        let name = format!("{TEMP_PREFIX}{}", "0f".repeat(16));
        let journal = format!(
            "+ {dir} {name}\n= {dir} {name} 1 2\n+ {dir} CLAUDE.local.md\n+ {rel} {name}\n+ {dir} {TEMP_PREFIX}x\n+ zz {name}\n= {dir} {name} 1\n+ {dir} {name} extra\n+ {dir}",
            dir = hex("/srv/groups/g"),
            rel = hex("groups/g"),
        );
        let parsed = parse_journal(journal.as_bytes());
        assert_eq!(
            parsed,
            [Leftover {
                dir: PathBuf::from("/srv/groups/g"),
                name,
                made: Some((1, 2)),
            }]
        );
    }

    #[test]
    fn temp_names_differ_every_time() {
        let names: std::collections::BTreeSet<String> =
            (0..1000).map(|_| fresh_temp_name()).collect();
        assert_eq!(names.len(), 1000);
        for name in &names {
            assert_eq!(name.len(), TEMP_PREFIX.len() + 32);
        }
    }

    #[test]
    fn size_limit_is_enforced() {
        let (_temp, dir) = dir();
        dir.write_file("big", &[b'x'; 11]).unwrap();
        assert!(matches!(
            dir.read_file("big", 10),
            Err(FsError::TooLarge { .. })
        ));
        assert!(dir.read_file("big", 11).is_ok());
    }

    #[test]
    fn removal_is_idempotent_and_spares_directories() {
        let (temp, dir) = dir();
        dir.write_file("f", b"x").unwrap();
        dir.remove("f").unwrap();
        dir.remove("f").unwrap();
        std::fs::create_dir(temp.path().join("d")).unwrap();
        std::fs::write(temp.path().join("d/x"), "x").unwrap();
        assert!(dir.remove("d").is_err());
        assert!(!dir.remove_empty_dir("d").unwrap());
    }

    #[test]
    fn a_fifo_or_device_is_refused_without_being_opened() {
        let (temp, dir) = dir();
        fifo(&temp.path().join("fifo"));
        // A blocking open of a FIFO with no writer would hang here.
        let err = dir.read_file("fifo", 100).unwrap_err();
        assert!(err.to_string().contains("a special file"), "{err}");
        let err = read_host_file(&temp.path().join("fifo"), 100).unwrap_err();
        assert!(matches!(err, FsError::Unsafe { .. }), "{err}");
        let err = dir.append_file("fifo", |_| b"x".to_vec()).unwrap_err();
        assert!(matches!(err, FsError::Unsafe { .. }), "{err}");
    }

    #[test]
    fn a_replaced_file_keeps_its_mode_and_a_new_one_follows_the_folder() {
        use std::os::unix::fs::PermissionsExt;
        let (temp, dir) = dir();
        let mode = |name: &str| {
            std::fs::metadata(temp.path().join(name))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        std::fs::set_permissions(temp.path(), std::fs::Permissions::from_mode(0o750)).unwrap();
        dir.write_file("new", b"x").unwrap();
        assert_eq!(mode("new"), 0o640);
        std::fs::set_permissions(
            temp.path().join("new"),
            std::fs::Permissions::from_mode(0o604),
        )
        .unwrap();
        dir.write_file("new", b"y").unwrap();
        assert_eq!(mode("new"), 0o604);
        assert!(dir.create_new_file("seed", b"").unwrap());
        assert_eq!(mode("seed"), 0o640);
    }

    #[test]
    fn zero_blocks_are_written_as_holes_and_read_back_whole() {
        use std::os::unix::fs::MetadataExt;
        let (temp, dir) = dir();
        let mut bytes = vec![0u8; 8 * 1024 * 1024];
        bytes[..5].copy_from_slice(b"start");
        bytes[4097] = b'x';
        let last = bytes.len() - 1;
        bytes[last] = b'\n';
        dir.write_file("sparse", &bytes).unwrap();
        assert_eq!(std::fs::read(temp.path().join("sparse")).unwrap(), bytes);
        let allocated = std::fs::metadata(temp.path().join("sparse"))
            .unwrap()
            .blocks()
            * 512;
        assert!(allocated < 1024 * 1024, "{allocated} bytes allocated");
    }

    #[test]
    fn append_file_appends_in_place() {
        use std::os::unix::fs::MetadataExt;
        let (temp, dir) = dir();
        dir.write_file("log", b"one").unwrap();
        let inode = std::fs::metadata(temp.path().join("log")).unwrap().ino();
        dir.append_file("log", |last| {
            assert_eq!(last, Some(b'e'));
            b"\ntwo\n".to_vec()
        })
        .unwrap();
        assert_eq!(
            dir.read_file("log", 100).unwrap(),
            Some(b"one\ntwo\n".to_vec())
        );
        assert_eq!(
            std::fs::metadata(temp.path().join("log")).unwrap().ino(),
            inode
        );
        dir.write_file("empty", b"").unwrap();
        dir.append_file("empty", |last| {
            assert_eq!(last, None);
            b"x".to_vec()
        })
        .unwrap();
        assert!(dir.append_file("missing", |_| Vec::new()).is_err());
    }

    #[test]
    fn lock_times_out_while_held_and_is_free_after_drop() {
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join("locks/g.lock");
        let held = lock(&path, Duration::from_secs(1)).unwrap();
        let err = lock(&path, Duration::from_millis(20)).unwrap_err();
        assert!(matches!(err, FsError::LockTimeout { .. }), "{err}");
        assert!(err.to_string().contains("CLAWMD_LOCK_TIMEOUT"), "{err}");
        drop(held);
        lock(&path, Duration::from_millis(20)).unwrap();
    }
}
