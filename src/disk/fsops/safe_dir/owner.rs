//! The owner and mode a file clawmd writes takes: those of the file it replaces, or, for a
//! new one, those of its folder (without the execute bits), so that a runner working as root
//! never leaves a group's files root-owned.

// Owners and modes are set here (clippy.toml's write ban).
#![expect(
    clippy::disallowed_methods,
    reason = "fsops is the module that writes (clippy.toml)"
)]

use std::path::Path;

use rustix::fs::{AtFlags, Mode, Stat};

use super::SafeDir;
use crate::disk::fsops::{FsError, Result};
use crate::file_kind::FileKind;

/// The owner and permission bits a written file takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Owner {
    pub(super) uid: u32,
    pub(super) gid: u32,
    pub(super) mode: u32,
}

/// Gives the open file, whose status is `stat`, `owner`'s owner (when permitted) and mode,
/// where they differ.
pub(super) fn give(file: &std::fs::File, owner: &Owner, stat: &Stat, path: &Path) -> Result<()> {
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

impl SafeDir {
    /// The owner and mode a file replacing `name` takes: those of the regular file there, or
    /// for a new name those of a new file ([`SafeDir::owner_for_new`]).
    pub(super) fn owner_for(&self, name: &str) -> Result<Owner> {
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
    pub(super) fn owner_for_new(&self) -> Result<Owner> {
        let stat =
            rustix::fs::fstat(&self.fd).map_err(|err| FsError::io("inspect", &self.path, err))?;
        Ok(Owner {
            uid: stat.st_uid,
            gid: stat.st_gid,
            mode: (stat.st_mode & 0o666) | 0o600,
        })
    }

    /// Gives the entry `name` (a temp file, link or new folder, not followed) `owner`'s owner.
    pub(super) fn give_name(&self, name: &str, owner: &Owner) -> Result<()> {
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
}

#[cfg(test)]
mod tests {
    use crate::disk::fsops::testing::dir;

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
}
