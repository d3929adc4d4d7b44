//! Reads and writes of trusted host paths (the deployment's `clawmd.json`, the shared
//! `container/` folder, the parents of clawmd's state folder): links on the way are followed,
//! but nothing that is not a regular file is ever opened, and a file is still replaced
//! atomically.

// Host folders are created here (clippy.toml's write ban), and looked at without following
// a link at their last component (clippy.toml's read ban: the error names the path).
#![expect(
    clippy::disallowed_methods,
    reason = "fsops is the module that writes (clippy.toml)"
)]

use std::io;
use std::path::Path;

use rustix::fs::{Mode, OFlags};

use super::regular::{read_limited, refuse_non_regular, reopen};
use super::{FsError, Result, SafeDir, checkpoint};
use crate::file_kind::FileKind;

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

/// What is at `path`, without following a link at its last component (`None`: nothing, or
/// it cannot be looked at).
pub fn kind_no_follow(path: &Path) -> Option<FileKind> {
    rustix::fs::lstat(path)
        .ok()
        .map(|stat| FileKind::from_mode(stat.st_mode))
}

/// What is at `path`, without following a link at its last component (`None`: nothing).
pub(super) fn kind_of_path(path: &Path) -> Result<Option<FileKind>> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) => Ok(Some(FileKind::from_std(meta.file_type()))),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(FsError::io("inspect", path, err)),
    }
}
