//! A [`SafeDir`]'s writes in place, for the two files that are never replaced: a sealed record
//! overwritten ([`SafeDir::overwrite_sealed`]) and a file appended to
//! ([`SafeDir::append_file`]).

// Space is reserved for an append here (clippy.toml's write ban).
#![expect(
    clippy::disallowed_methods,
    reason = "fsops is the module that writes (clippy.toml)"
)]

use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;

use rustix::fs::{Mode, OFlags, Stat};

use super::SafeDir;
use super::owner::give;
use crate::disk::fsops::regular::refuse_non_regular;
use crate::disk::fsops::{FsError, Result, checkpoint};
use crate::file_kind::FileKind;

impl SafeDir {
    /// Writes `bytes` over the regular file `name` of a folder only clawmd writes, in place
    /// (created with the owner and mode of a new file here when missing): no temp, no rename,
    /// no inode freed. Only for a file that every reader checks whole before using it (a sealed
    /// record, [`crate::disk::state::Records`]): a crash, or a reader while it is written, may find it
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
            // Written, not yet cut short: the file holds the new bytes and the old tail.
            checkpoint("cut short", &path);
            file.set_len(bytes.len() as u64)
                .map_err(|err| FsError::io("write", &path, err))?;
        }
        Ok(())
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
}

#[cfg(test)]
mod tests {
    use crate::disk::fsops::testing::{dir, fifo};
    use crate::file_kind::FileKind;

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
}
