//! Opening only regular files: a file's kind is read from an `O_PATH` handle (which neither
//! blocks on a FIFO nor runs a device's `open`), the file is then reopened through that very
//! handle, and read whole within a limit.

use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use rustix::fs::{Mode, OFlags, Stat};

use super::{FsError, Result};
use crate::file_kind::FileKind;

/// Refuses anything but a regular file, before it is opened.
pub(super) fn refuse_non_regular(path: &Path, kind: FileKind) -> Result<()> {
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
pub(super) fn reopen(
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
pub(super) fn read_limited(
    file: std::fs::File,
    path: &Path,
    size: u64,
    limit: u64,
) -> Result<Vec<u8>> {
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

pub(super) fn too_large(path: &Path, limit: u64) -> FsError {
    FsError::TooLarge {
        path: path.to_owned(),
        limit,
        fix: "shrink the file; memory files this large would not fit in the agent's context"
            .to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::fsops::read_host_file;
    use crate::disk::fsops::testing::{dir, fifo};

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
}
