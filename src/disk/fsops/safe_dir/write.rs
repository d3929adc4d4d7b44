//! A [`SafeDir`]'s atomic writes: a file or link is made under a temp name ([`Temp`]), then
//! renamed over its name or linked at a new one; removals; and the directory syncs that make
//! them durable.

// Renames, links, symlinks and unlinks (clippy.toml's write ban).
#![expect(
    clippy::disallowed_methods,
    reason = "fsops is the module that writes (clippy.toml)"
)]

use std::io;
use std::path::Path;

use rustix::fs::{AtFlags, Mode, OFlags};

use super::SafeDir;
use super::owner::{Owner, give};
use super::sparse::write_contents;
use crate::disk::fsops::{Durability, FsError, Result, checkpoint};
use crate::file_kind::FileKind;

/// A file or link written under a temp name in a [`SafeDir`], waiting to be put in place.
#[derive(Debug)]
#[must_use = "a staged temp is put in place, linked or discarded"]
pub struct Temp {
    pub(in crate::disk::fsops) name: String,
    /// The device and inode clawmd made under that name.
    pub(in crate::disk::fsops) identity: (u64, u64),
    /// A regular file whose data was not synced when it was written.
    pub(in crate::disk::fsops) unsynced_data: bool,
}

impl SafeDir {
    /// Atomically replaces (or creates) the regular file `name` with `bytes`.
    pub fn write_file(&self, name: &str, bytes: &[u8]) -> Result<()> {
        self.write_file_lasting(name, bytes, Durability::PowerLoss)
    }

    /// [`SafeDir::write_file`], made to last as `durability` says: for
    /// [`Durability::ThisBoot`], neither the file nor the folder is fsynced.
    pub fn write_file_lasting(
        &self,
        name: &str,
        bytes: &[u8],
        durability: Durability,
    ) -> Result<()> {
        let owner = self.owner_for(name)?;
        let durable = durability == Durability::PowerLoss;
        let temp = self.write_temp_with(bytes, &owner, durable)?;
        self.rename_into_place(temp, name)?;
        if !durable {
            self.mark_synced();
        }
        Ok(())
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
                    unsynced_data: false,
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

    pub(super) fn unlink(&self, name: &str) -> Result<()> {
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
                    unsynced_data: !durable,
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
        match self.exchange_into_place(&temp, name) {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(err) => {
                self.discard(temp);
                return Err(err);
            }
        }
        checkpoint("rename", &path);
        if let Err(err) = rustix::fs::renameat(&self.fd, &temp.name, &self.fd, name) {
            self.discard(temp);
            return Err(FsError::io("replace", path, err));
        }
        self.unsynced.set(true);
        Ok(())
    }

    /// In a folder only clawmd writes, puts a temp whose data was not synced in place of the
    /// regular file `name` by exchanging the two names, then removes the old file under the
    /// temp name (recorded in the journal first, so that a crash in between leaves nothing
    /// the next run does not remove): as atomic for readers as a rename, without the write-out
    /// of the new file's data that ext4 starts when a rename replaces a file (about 0.1–0.2
    /// ms, where the data needs no more durability than this boot: [`Durability::ThisBoot`]).
    /// Returns `false` where it does not apply (a synced temp, another folder, no regular
    /// file at `name`, a filesystem without the exchange): the caller renames. On an error
    /// the caller discards the temp (it is not clawmd's temp any more once exchanged).
    fn exchange_into_place(&self, temp: &Temp, name: &str) -> Result<bool> {
        if !self.only_clawmd || !temp.unsynced_data {
            return Ok(false);
        }
        let path = self.path.join(name);
        let old = match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) if FileKind::from_mode(stat.st_mode) == FileKind::File => {
                (stat.st_dev, stat.st_ino)
            }
            _ => return Ok(false),
        };
        // The temp name is about to hold the old file: a crash leaves it for the next run.
        self.made(&Temp {
            name: temp.name.clone(),
            identity: old,
            unsynced_data: false,
        })?;
        checkpoint("exchange", &path);
        let exchanged = rustix::fs::renameat_with(
            &self.fd,
            &temp.name,
            &self.fd,
            name,
            rustix::fs::RenameFlags::EXCHANGE,
        );
        match exchanged {
            Ok(()) => {}
            Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => return Ok(false),
            Err(err) => return Err(FsError::io("replace", path, err)),
        }
        self.unsynced.set(true);
        checkpoint("remove the replaced file", &self.path.join(&temp.name));
        self.unlink(&temp.name)?;
        Ok(true)
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
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;
    use std::path::Path;

    use crate::disk::fsops::FsError;
    use crate::disk::fsops::testing::dir;
    use crate::file_kind::FileKind;

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
    fn create_new_file_never_overwrites() {
        let (_temp, dir) = dir();
        assert!(dir.create_new_file("n", b"first").unwrap());
        assert!(!dir.create_new_file("n", b"second").unwrap());
        assert_eq!(dir.read_file("n", 100).unwrap(), Some(b"first".to_vec()));
        assert_eq!(dir.list().unwrap().len(), 1, "no temp file left");
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
}
