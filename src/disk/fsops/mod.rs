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
//!
//! One file per concern:
//!
//! * `safe_dir/`: [`SafeDir`] itself, opened without following links (`mod.rs`), its reads
//!   (`read.rs`) and listings (`listing.rs`), its atomic writes and [`Temp`]s (`write.rs`), its
//!   in-place writes (`in_place.rs`), the owner and mode a written file takes (`owner.rs`) and
//!   the holes a file's zeros become (`sparse.rs`);
//! * `regular.rs`: opening only regular files, and reading them within a limit;
//! * `journal.rs`: temp names and the [`TempJournal`] that records them;
//! * `leftovers.rs`: the [`Leftover`]s read back from a journal;
//! * `replay.rs`: whether a log of reads ([`crate::disk::reads`]) finds the same again;
//! * `host.rs`: reads and writes of trusted host paths;
//! * `lock.rs`: the per-group lock and how a run waits for it;
//! * `crash.rs`: the crash points of the crash tests.
//!
//! clippy.toml bans every writing call outside this module: each file here that writes opts in
//! with its own `#![expect(clippy::disallowed_methods)]` (an `expect`, so one that stops
//! writing must drop it).

use std::borrow::Cow;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::file_kind::FileKind;

mod crash;
mod host;
mod journal;
mod leftovers;
mod lock;
mod regular;
mod replay;
mod safe_dir;
#[cfg(test)]
mod testing;

pub use crash::{checkpoint, crash_injection_enabled};
pub use host::{
    create_dir_all, kind_no_follow, read_host_file, read_host_file_as_found, write_host_file,
};
pub use journal::{TempJournal, is_temp_name, journal_has_records};
pub use leftovers::{Leftover, read_leftovers};
pub use lock::{GroupLock, LockWait, lock, lock_if_made};
pub use replay::replay;
pub use safe_dir::{Listing, SafeDir, Temp};

/// How long what a write puts in place must last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Through a power loss: each temp fsynced before its rename, each folder after.
    PowerLoss,
    /// Until the machine stops: renamed into place unsynced (whole to every reader of this
    /// boot, the page cache being the file). For files clawmd derives again and checks byte for
    /// byte in the next boot, before any agent reads them: the records that let a run trust a
    /// file by its identity are this boot's only ([`crate::disk::state::binary_identity`]).
    ThisBoot,
}

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
    #[error("{}; fix: {fix}", self.problem().unwrap_or_default())]
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
    #[error("{}; fix: {fix}", self.problem().unwrap_or_default())]
    TooLarge {
        /// The path concerned.
        path: PathBuf,
        /// The limit in bytes.
        limit: u64,
        /// How to repair it.
        fix: String,
    },
    /// Another clawmd process held the lock for too long.
    #[error("{}; fix: {LOCK_TIMEOUT_FIX}", self.problem().unwrap_or_default())]
    LockTimeout {
        /// The lock file.
        path: PathBuf,
        /// How long clawmd waited.
        waited: Duration,
    },
}

/// [`FsError::LockTimeout`]'s fix.
const LOCK_TIMEOUT_FIX: &str = "wait for it to finish, or raise CLAWMD_LOCK_TIMEOUT (seconds)";

/// Where clawmd writes, for the fixes of a failed call ("clawmd writes in …").
const WRITES: &str = "writes in its state folder (`stateDir` in clawmd.json, default \
                      groups/.clawmd) and in the group folders";

impl FsError {
    /// How to fix the error, when clawmd knows: the text its message ends with, after
    /// "; fix: ". A failed system call ([`FsError::Io`]) has one when its error number says
    /// what clawmd lacks (see [`io_fix`]); its message says it after the cause
    /// ([`crate::error::chain_text`]).
    pub fn fix(&self) -> Option<Cow<'_, str>> {
        match self {
            FsError::Io { op, path, source } => io_fix(op, path, source).map(Cow::Owned),
            FsError::Unsafe { fix, .. } | FsError::TooLarge { fix, .. } => {
                Some(fix.as_str().into())
            }
            FsError::LockTimeout { .. } => Some(LOCK_TIMEOUT_FIX.into()),
        }
    }

    /// What the message says before its fix, for the errors whose message ends with one.
    pub fn problem(&self) -> Option<String> {
        match self {
            FsError::Io { .. } => None,
            FsError::Unsafe {
                path,
                found,
                expected,
                ..
            } => Some(format!(
                "refusing to use {}: it is {found}, not {expected}",
                path.display()
            )),
            FsError::TooLarge { path, limit, .. } => {
                Some(format!("{} is larger than {limit} bytes", path.display()))
            }
            FsError::LockTimeout { path, waited } => Some(format!(
                "timed out after {}s waiting for the lock {} held by another clawmd run",
                waited.as_secs(),
                path.display()
            )),
        }
    }

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

/// The fix of a system call `op` on `path` that failed with `err`, for the error numbers that
/// say what clawmd lacks there: a file system mounted read-only, a permission refused, no
/// space left, a disk quota reached. It names what clawmd needs, not why it lacks it. The
/// place named is the folder when the call makes, replaces or removes an entry in it, or the
/// path is a temp file's (whose name means nothing to the reader), else the path itself.
fn io_fix(op: &str, path: &Path, err: &io::Error) -> Option<String> {
    use rustix::io::Errno;
    let in_folder = matches!(
        op,
        "create"
            | "create directory"
            | "create symlink"
            | "create lock directory"
            | "replace"
            | "remove"
            | "remove directory"
    ) || path
        .file_name()
        .and_then(|name| name.to_str())
        .is_some_and(is_temp_name);
    let place = match path.parent() {
        Some(folder) if in_folder && !folder.as_os_str().is_empty() => folder,
        _ => path,
    }
    .display();
    Some(match Errno::from_io_error(err)? {
        Errno::ROFS => {
            format!(
                "mount the file system of {place} read-write where clawmd runs: clawmd {WRITES}"
            )
        }
        Errno::ACCESS | Errno::PERM => format!(
            "give the user clawmd runs as access to {place}: clawmd reads the shared content \
             and the group folders, and {WRITES}"
        ),
        Errno::NOSPC => format!("free space (or inodes) on the file system of {place}"),
        Errno::DQUOT => format!(
            "free space on the file system of {place}, or raise the disk quota of the user \
             clawmd runs as"
        ),
        _ => return None,
    })
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
