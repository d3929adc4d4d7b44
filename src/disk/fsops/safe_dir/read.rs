//! A [`SafeDir`]'s reads: what a name is, a link's target, a regular file's bytes (never
//! through a link, never opening anything else), each logged where the folder's reads are
//! ([`SafeDir::log_reads_in`]).

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

use rustix::fs::{AtFlags, Mode, OFlags, Stat};

use super::SafeDir;
use crate::disk::fsops::regular::{read_limited, refuse_non_regular, reopen};
use crate::disk::fsops::{FsError, Result};
use crate::disk::reads::{self, Seen, Watch};
use crate::file_kind::FileKind;

/// A file's bytes, and the identity it had when opened where that stands for them
/// ([`SafeDir::read_own_file_settled`]).
pub type SettledRead = (Vec<u8>, Option<[i64; 8]>);

impl SafeDir {
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
        let content = self
            .tap
            .as_ref()
            .is_some_and(|tap| tap.watch == Watch::Content);
        let (read, opened) = self.read_as_found(name, limit, content)?;
        if let Some(tap) = self.tap.as_ref().filter(|tap| tap.watch == Watch::Identity) {
            let identity = opened.as_ref().map(|found| reads::identity(&found.stat));
            tap.push(name, Seen::Identity { limit, identity });
        }
        if let Some(tap) = self.tap.as_ref().filter(|tap| tap.watch == Watch::Content)
            && let Some(seen) = file_seen(limit, &read, opened.as_ref())
        {
            tap.push(name, seen);
        }
        read
    }

    /// Reads the regular file `name` of a folder only clawmd writes (its state folder: a
    /// record): opened once, never through a link, without blocking, and refused when it is
    /// not a regular file; with the identity the file had when opened, when it stands for what
    /// was read: its last change well before the open ([`reads::settled`]). `None` when it is
    /// missing.
    pub fn read_own_file_settled(&self, name: &str, limit: u64) -> Result<Option<SettledRead>> {
        let before = std::time::SystemTime::now();
        let Some((fd, stat)) = self.open_if_regular(name, OFlags::RDONLY | OFlags::NONBLOCK)?
        else {
            return Ok(None);
        };
        let path = self.path.join(name);
        let bytes = read_limited(std::fs::File::from(fd), &path, stat.st_size as u64, limit)?;
        Ok(Some((bytes, reads::settled(&stat, before))))
    }

    /// The size of the regular file `name` now (never through a link); `None` when it is
    /// missing or not a regular file.
    pub fn size_now(&self, name: &str) -> Option<usize> {
        self.regular_stat(name)
            .and_then(|stat| usize::try_from(stat.st_size).ok())
    }

    /// The status of `name` when it is a regular file, not following a link.
    fn regular_stat(&self, name: &str) -> Option<Stat> {
        let stat = rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
        (FileKind::from_mode(stat.st_mode) == FileKind::File).then_some(stat)
    }

    /// `name` opened with `flags` (never through a link) and its status, refused when it is not
    /// a regular file; `None` when it is missing.
    pub(super) fn open_if_regular(
        &self,
        name: &str,
        flags: OFlags,
    ) -> Result<Option<(OwnedFd, Stat)>> {
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
    pub(in crate::disk::fsops) fn identity(&self, name: &str) -> Result<Option<[i64; 8]>> {
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => {
                refuse_non_regular(&self.path.join(name), FileKind::from_mode(stat.st_mode))?;
                Ok(Some(reads::identity(&stat)))
            }
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(err) => Err(FsError::io("inspect", self.path.join(name), err)),
        }
    }

    /// [`SafeDir::read_file`] without the log: what was read, and how the file was found
    /// ([`Opened`]). With `ask_clean`, whether its pages were clean before it was read
    /// ([`reads::pages_clean`]; else `false`). `Err` when it cannot be opened; a read that
    /// fails is in the first value.
    #[expect(clippy::type_complexity, reason = "a read and how its file was found")]
    pub(in crate::disk::fsops) fn read_as_found(
        &self,
        name: &str,
        limit: u64,
        ask_clean: bool,
    ) -> Result<(Result<Option<Vec<u8>>>, Option<Opened>)> {
        let before = std::time::SystemTime::now();
        Ok(match self.open_regular(name, OFlags::RDONLY)? {
            None => (Ok(None), None),
            Some((file, stat)) => {
                let path = self.path.join(name);
                let clean = ask_clean && reads::pages_clean(std::os::fd::AsFd::as_fd(&file));
                let read = read_limited(file, &path, stat.st_size as u64, limit).map(Some);
                let opened = Opened {
                    stat,
                    before,
                    clean,
                };
                (read, Some(opened))
            }
        })
    }

    /// Opens `name` with `access` only when it is a regular file: the kind is read from an
    /// `O_PATH` handle, and the file is reopened through that handle. `None` when missing.
    pub(in crate::disk::fsops) fn open_regular(
        &self,
        name: &str,
        access: OFlags,
    ) -> Result<Option<(std::fs::File, Stat)>> {
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
}

/// What a file read found ([`Seen::File`]), with the identity of the file when it was settled
/// at the time of the read (`opened`: its status, and the time before it was opened); `None`
/// for an error other than the file being over `limit` (the look that made it fails).
/// How a file read was found: its status when opened, the time before it was opened, and
/// whether its pages were clean before it was read ([`reads::pages_clean`]).
pub(in crate::disk::fsops) struct Opened {
    pub(in crate::disk::fsops) stat: Stat,
    pub(in crate::disk::fsops) before: std::time::SystemTime,
    pub(in crate::disk::fsops) clean: bool,
}

/// What a read of a file of the group folder found, for the log: its SHA-256, and its
/// identity when that stands for its bytes: its last change well before the read
/// ([`reads::settled`]) and its pages clean when it was read ([`reads::pages_clean`]). The
/// agent writes in the group folder, and a write through a shared mapping to a page already
/// dirty changes a file's bytes and leaves its change time (and modification time, size and
/// inode) as they were; a page kept clean is write-protected, so the next write stamps them.
pub(in crate::disk::fsops) fn file_seen(
    limit: u64,
    read: &Result<Option<Vec<u8>>>,
    opened: Option<&Opened>,
) -> Option<Seen> {
    let digest = match read {
        Ok(Some(bytes)) => Some(reads::digest(bytes)),
        Ok(None) => None,
        Err(FsError::TooLarge { .. }) => Some(reads::TOO_LARGE.to_owned()),
        Err(_) => return None,
    };
    let identity = opened
        .filter(|opened| opened.clean)
        .and_then(|opened| reads::settled(&opened.stat, opened.before));
    Some(Seen::File {
        limit,
        digest,
        identity,
    })
}

#[cfg(test)]
mod tests {
    use crate::disk::fsops::FsError;
    use crate::disk::fsops::testing::dir;

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
}
