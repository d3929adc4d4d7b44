//! The loader's only window on the world: a read-only filesystem trait.
//!
//! The same loader must answer two questions: "what does Claude Code load from this
//! directory on this machine?" ([`HostFs`]) and "what will the agent load inside its
//! container?" (a container view built over a mount table by the caller, where paths are
//! container paths and symlinks resolve through the mount table: clawmd's `MountedFs`). Everything the loader needs goes through
//! [`MemoryFs`], and it only ever reads the files it is asked about.

use std::ffi::OsString;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};

/// What a path is: without following a final symlink for [`MemoryFs::symlink_metadata`]
/// and directory entries, after following it for [`MemoryFs::metadata`]. The crate's one
/// kind vocabulary, shared with the write module of clawmd.
pub use crate::file_kind::FileKind;

/// Linux gives up after 40 symlinks in one resolution (`ELOOP`); so does every resolution the
/// loader, and a container view built for it, makes.
pub const MAX_SYMLINKS: usize = 40;

/// The metadata the loader looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metadata {
    /// The kind of file.
    pub kind: FileKind,
    /// Size in bytes.
    pub len: u64,
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The entry's file name.
    pub name: OsString,
    /// Its kind, not following symlinks.
    pub kind: FileKind,
}

/// The result of [`MemoryFs::read_limited`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadOutcome {
    /// The whole file, at most `limit` bytes.
    Bytes(Vec<u8>),
    /// A regular file larger than the limit; nothing was read.
    TooLarge {
        /// Its size.
        len: u64,
    },
    /// Not a regular file (directory, FIFO, device…); nothing was opened, so a FIFO cannot
    /// block the loader.
    NotAFile {
        /// What it is.
        kind: FileKind,
    },
}

/// Read-only filesystem operations the loader needs. Paths are absolute.
///
/// Errors are plain [`io::Error`]s so callers can match on [`io::ErrorKind`]; the loader
/// attaches the path when it reports them.
///
/// Directory listings must come back in the order the filesystem returns them: Claude Code
/// loads `.claude/rules` in that order (it does not sort).
pub trait MemoryFs {
    /// Metadata of `path` itself (a symlink is reported as [`FileKind::Symlink`]).
    fn symlink_metadata(&self, path: &Path) -> io::Result<Metadata>;
    /// Metadata after following symlinks.
    fn metadata(&self, path: &Path) -> io::Result<Metadata>;
    /// The target of the symlink at `path`, as stored.
    fn read_link(&self, path: &Path) -> io::Result<PathBuf>;
    /// The absolute path with every symlink resolved (`realpath`).
    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf>;
    /// The entries of a directory (following a symlink to it).
    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>>;
    /// Read a regular file (following symlinks) if it is at most `limit` bytes.
    fn read_limited(&self, path: &Path, limit: u64) -> io::Result<ReadOutcome>;
    /// Whether this view knows what is at `path` (a path, links not followed): a container's
    /// view knows its mounts only, so a path elsewhere may exist in the container though it
    /// does not here. Every path, by default.
    fn within_view(&self, path: &Path) -> bool {
        let _ = path;
        true
    }
}

/// The host's own filesystem.
///
/// ```
/// use clawmd_loader::fs::{HostFs, MemoryFs, ReadOutcome};
///
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("CLAUDE.md"), "hi\n").unwrap();
/// let read = HostFs.read_limited(&dir.path().join("CLAUDE.md"), 1024).unwrap();
/// assert_eq!(read, ReadOutcome::Bytes(b"hi\n".to_vec()));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct HostFs;

fn meta(m: std::fs::Metadata) -> Metadata {
    Metadata {
        kind: FileKind::from_std(m.file_type()),
        len: m.len(),
    }
}

#[expect(
    clippy::disallowed_methods,
    reason = "plain io::Errors, as MemoryFs asks: the loader names the path in its diagnostics"
)]
impl MemoryFs for HostFs {
    fn symlink_metadata(&self, path: &Path) -> io::Result<Metadata> {
        std::fs::symlink_metadata(path).map(meta)
    }

    fn metadata(&self, path: &Path) -> io::Result<Metadata> {
        std::fs::metadata(path).map(meta)
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        std::fs::read_link(path)
    }

    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        std::fs::canonicalize(path)
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(path)? {
            let entry = entry?;
            out.push(DirEntry {
                name: entry.file_name(),
                kind: FileKind::from_std(entry.file_type()?),
            });
        }
        Ok(out)
    }

    fn read_limited(&self, path: &Path, limit: u64) -> io::Result<ReadOutcome> {
        // A handle that cannot block or wake a device decides; the read goes through it.
        let handle = rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())?;
        read_through(handle.as_fd(), limit)
    }
}

/// The metadata of an open handle (an `O_PATH` one is fine: `fstat` opens nothing).
pub fn handle_metadata(handle: BorrowedFd<'_>) -> io::Result<Metadata> {
    Ok(metadata_of(&rustix::fs::fstat(handle)?))
}

/// The metadata a status `stat` gives.
pub fn metadata_of(stat: &rustix::fs::Stat) -> Metadata {
    Metadata {
        kind: FileKind::from_mode(stat.st_mode),
        len: stat.st_size.max(0) as u64,
    }
}

/// Reads the file behind `handle` — typically an `O_PATH` handle, which opened nothing —
/// if it is a regular file of at most `limit` bytes.
///
/// The decision is made with `fstat` on the handle, so a FIFO is never opened (no hang) and a
/// device is never opened (no side effect). A regular file is then reopened *through the
/// handle* (`/proc/self/fd/N`), never by its path, so a name swapped for a link or a FIFO in
/// the meantime changes nothing: the bytes read are those of the inode that was checked.
pub fn read_through(handle: BorrowedFd<'_>, limit: u64) -> io::Result<ReadOutcome> {
    read_through_stat(handle, limit).map(|(outcome, _)| outcome)
}

/// [`read_through`], with the status of the file the bytes are from.
pub fn read_through_stat(
    handle: BorrowedFd<'_>,
    limit: u64,
) -> io::Result<(ReadOutcome, rustix::fs::Stat)> {
    read_through_checked(handle, limit, |_| ()).map(|(outcome, stat, _)| (outcome, stat))
}

/// [`read_through_stat`], calling `before_read` on the reopened regular file after its status
/// was taken and before its bytes are read (a caller asks there what the kernel knows of the
/// file's pages), with what it returned (`None`: no regular file within `limit` was opened).
pub fn read_through_checked<T>(
    handle: BorrowedFd<'_>,
    limit: u64,
    before_read: impl FnOnce(BorrowedFd<'_>) -> T,
) -> io::Result<(ReadOutcome, rustix::fs::Stat, Option<T>)> {
    let stat = rustix::fs::fstat(handle)?;
    let kind = FileKind::from_mode(stat.st_mode);
    if kind != FileKind::File {
        return Ok((ReadOutcome::NotAFile { kind }, stat, None));
    }
    let len = stat.st_size.max(0) as u64;
    if len > limit {
        return Ok((ReadOutcome::TooLarge { len }, stat, None));
    }
    let proc_path = format!("/proc/self/fd/{}", handle.as_raw_fd());
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
    let fd = rustix::fs::open(proc_path.as_str(), flags, Mode::empty()).map_err(|err| {
        if err == rustix::io::Errno::NOENT {
            io::Error::other(
                "cannot reopen a checked file through its handle: /proc is not mounted; fix: mount procfs at /proc",
            )
        } else {
            io::Error::from(err)
        }
    })?;
    let reopened = rustix::fs::fstat(&fd)?;
    if (reopened.st_dev, reopened.st_ino) != (stat.st_dev, stat.st_ino)
        || FileKind::from_mode(reopened.st_mode) != FileKind::File
    {
        return Err(io::Error::other(
            "the file changed while it was being opened; nothing was read",
        ));
    }
    let checked = before_read(fd.as_fd());
    let mut bytes = Vec::with_capacity(len as usize);
    std::fs::File::from(fd)
        .take(limit + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        let len = bytes.len() as u64;
        return Ok((ReadOutcome::TooLarge { len }, stat, Some(checked)));
    }
    Ok((ReadOutcome::Bytes(bytes), stat, Some(checked)))
}

impl<T: MemoryFs + ?Sized> MemoryFs for &T {
    fn symlink_metadata(&self, path: &Path) -> io::Result<Metadata> {
        (**self).symlink_metadata(path)
    }
    fn metadata(&self, path: &Path) -> io::Result<Metadata> {
        (**self).metadata(path)
    }
    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        (**self).read_link(path)
    }
    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        (**self).canonicalize(path)
    }
    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        (**self).read_dir(path)
    }
    fn read_limited(&self, path: &Path, limit: u64) -> io::Result<ReadOutcome> {
        (**self).read_limited(path, limit)
    }
}

/// Whether `e` is a symlink loop (`ELOOP`).
pub(super) fn is_loop(e: &io::Error) -> bool {
    e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error())
}
