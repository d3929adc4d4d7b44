//! What reading the container side looked at on the host, so that a later run can tell,
//! without reading and expanding it all again, whether any of it changed
//! ([`HostReads::hold`]).
//!
//! [`read_container`](super::read_container), the host's managed policy and the runner's
//! files are read through a [`HostLog`]: every host path they look at (a file read, a folder
//! listed, an entry's kind, a link's target) is logged as what it found, and every container
//! view they expand imports through logs its own reads ([`MountedFs::log_reads_in`]). A file
//! counts by its identity when its last change was well before the read
//! ([`crate::reads::settled`]: the status of the very file read, taken before its bytes), else
//! by the SHA-256 of its bytes; a listing by its names; an entry by its kind; a link by its
//! target. What the container side holds is a function of what those reads find (and of the
//! layout), so the same reads make the same sources.
//!
//! A read that ends in an error other than a missing entry spoils the log: no record is made
//! from it.

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::file_kind::FileKind;
use crate::fsops::{self, FsError};
use crate::loader::{Mount, MountedFs};
use crate::reads::{Read, ReadLog};

/// One look at a host path, and what it found.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Probe {
    /// A file read with a size limit, following links: its identity when settled, and the
    /// SHA-256 of its bytes (`None`: missing).
    File {
        /// The path read.
        path: PathBuf,
        /// The limit of the read.
        limit: u64,
        /// The file's identity, when its last change was well before the read.
        identity: Option<[i64; 8]>,
        /// What was read.
        digest: Option<String>,
    },
    /// The kind of an entry, through a final link or not (`None`: missing).
    Kind {
        /// The path looked at.
        path: PathBuf,
        /// Whether a final link was followed.
        follow: bool,
        /// What was found.
        kind: Option<FileKind>,
    },
    /// The names in a folder, following links (the SHA-256 of them, sorted; `None`: missing).
    Listing {
        /// The folder.
        path: PathBuf,
        /// What was found.
        digest: Option<String>,
    },
    /// A link's target (its SHA-256; `None`: not a link, or missing).
    Link {
        /// The path looked at.
        path: PathBuf,
        /// What was found.
        target: Option<String>,
    },
}

/// The host reads of one reading of the container side, logged as they are made.
#[derive(Debug)]
pub struct HostLog {
    /// When the reading started: a file changed less than [`crate::reads::SETTLED`] before
    /// is kept by its bytes only.
    now: SystemTime,
    probes: Mutex<(Vec<Probe>, HashSet<Probe>)>,
    /// Each container view's mount table and the log of its reads.
    views: Mutex<Vec<(Vec<Mount>, Arc<ReadLog>)>>,
    spoiled: AtomicBool,
}

impl Default for HostLog {
    fn default() -> Self {
        HostLog::new()
    }
}

impl HostLog {
    /// An empty log, starting now.
    pub fn new() -> HostLog {
        HostLog {
            now: SystemTime::now(),
            probes: Mutex::new((Vec::new(), HashSet::new())),
            views: Mutex::new(Vec::new()),
            spoiled: AtomicBool::new(false),
        }
    }

    /// [`fsops::read_host_file`], logged.
    pub fn read_file(&self, path: &Path, limit: u64) -> Result<Option<Vec<u8>>, FsError> {
        match fsops::read_host_file_as_found(path, limit) {
            Ok(found) => {
                let identity =
                    (found.as_ref()).and_then(|(_, stat)| crate::reads::settled(stat, self.now));
                let digest = found.as_ref().map(|(bytes, _)| crate::reads::digest(bytes));
                self.push(Probe::File {
                    path: path.to_owned(),
                    limit,
                    identity,
                    digest,
                });
                Ok(found.map(|(bytes, _)| bytes))
            }
            Err(err) => {
                self.spoil();
                Err(err)
            }
        }
    }

    /// The kind of what is at `path` (through a final link when `follow`), logged; `None`
    /// when nothing is there.
    pub fn kind(&self, path: &Path, follow: bool) -> io::Result<Option<FileKind>> {
        match kind_at(path, follow) {
            Ok(kind) => {
                self.push(Probe::Kind {
                    path: path.to_owned(),
                    follow,
                    kind,
                });
                Ok(kind)
            }
            Err(err) => {
                self.spoil();
                Err(err)
            }
        }
    }

    /// The names in the folder `dir` (following links), sorted, logged; `None` when it is
    /// missing.
    pub fn list(&self, dir: &Path) -> io::Result<Option<Vec<std::ffi::OsString>>> {
        match names_in(dir) {
            Ok(names) => {
                self.push(Probe::Listing {
                    path: dir.to_owned(),
                    digest: names.as_deref().map(names_digest),
                });
                Ok(names)
            }
            Err(err) => {
                self.spoil();
                Err(err)
            }
        }
    }

    /// Where `path` points when it is a symlink (`None`: missing, or not a link), logged.
    pub fn link(&self, path: &Path) -> Option<PathBuf> {
        let target = link_at(path);
        self.push(Probe::Link {
            path: path.to_owned(),
            target: target.as_deref().map(link_digest),
        });
        target
    }

    /// A view of the host through `mounts` whose reads are logged here.
    pub fn view(&self, mounts: &[Mount]) -> MountedFs {
        let mut views = self.views.lock().unwrap_or_else(|p| p.into_inner());
        let log = match views.iter().find(|(table, _)| table == mounts) {
            Some((_, log)) => log.clone(),
            None => {
                let log = Arc::new(ReadLog::default());
                views.push((mounts.to_vec(), log.clone()));
                log
            }
        };
        let mut fs = MountedFs::new(mounts.iter().cloned());
        fs.log_reads_in(&log);
        fs
    }

    /// What was read, unless a read could not be kept.
    pub fn kept(&self) -> Option<HostReads> {
        if self.spoiled.load(Ordering::Relaxed) {
            return None;
        }
        let views = self.views.lock().unwrap_or_else(|p| p.into_inner());
        let views = (views.iter())
            .map(|(mounts, log)| Some((mounts.clone(), log.kept_reads()?)))
            .collect::<Option<Vec<_>>>()?;
        let probes = self.probes.lock().unwrap_or_else(|p| p.into_inner());
        Some(HostReads {
            made: self.now,
            probes: probes.0.clone(),
            views,
        })
    }

    fn push(&self, probe: Probe) {
        let mut probes = self.probes.lock().unwrap_or_else(|p| p.into_inner());
        let (order, seen) = &mut *probes;
        if seen.insert(probe.clone()) {
            order.push(probe);
        }
    }

    fn spoil(&self) {
        self.spoiled.store(true, Ordering::Relaxed);
    }
}

/// The host reads of one reading of the container side, as a record keeps them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostReads {
    /// When the reads began.
    pub made: SystemTime,
    /// The host paths looked at, in order.
    pub probes: Vec<Probe>,
    /// Each container view's mount table and its reads.
    pub views: Vec<(Vec<Mount>, Vec<Read>)>,
}

impl HostReads {
    /// Whether every read finds what it found: each path looked at again the same way (a
    /// file whose identity is the same is not read again), each view's reads replayed through
    /// a view of the same mounts ([`MountedFs::holds`]).
    pub fn hold(&self) -> bool {
        self.replay(SystemTime::now()).is_some()
    }

    /// [`HostReads::hold`], saying too whether a file was found the same by its bytes though
    /// its identity now stands for them ([`crate::reads::settled`]): the reads are then worth
    /// making again once, so that the runs to come do not read that file again. `None`: a
    /// read finds something else.
    pub fn replay(&self, now: SystemTime) -> Option<Stale> {
        let mut stale = Stale(false);
        for probe in &self.probes {
            stale.0 |= probe.replay(now)?.0;
        }
        for (mounts, reads) in &self.views {
            stale.0 |= MountedFs::new(mounts.iter().cloned()).replay(reads, now)?;
        }
        Some(stale)
    }
}

/// Whether reads that hold are worth making again ([`HostReads::replay`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stale(pub bool);

impl Probe {
    /// Whether looking again at `now` finds the same (and whether a file was found the same
    /// by its bytes while its identity would do now).
    fn replay(&self, now: SystemTime) -> Option<Stale> {
        let found = match self {
            Probe::File {
                path,
                limit,
                identity,
                digest,
            } => {
                let stat = rustix::fs::stat(path).ok();
                let same =
                    identity.is_some() && stat.as_ref().map(crate::reads::identity) == *identity;
                if same {
                    Some(Stale(false))
                } else {
                    let bytes = fsops::read_host_file(path, *limit).ok()?;
                    (bytes.as_deref().map(crate::reads::digest) == *digest).then(|| {
                        Stale(stat.is_some_and(|stat| crate::reads::settled(&stat, now).is_some()))
                    })
                }
            }
            Probe::Kind { path, follow, kind } => {
                (kind_at(path, *follow).ok()? == *kind).then_some(Stale(false))
            }
            Probe::Listing { path, digest } => (names_in(path).ok()?.as_deref().map(names_digest)
                == *digest)
                .then_some(Stale(false)),
            Probe::Link { path, target } => {
                (link_at(path).as_deref().map(link_digest) == *target).then_some(Stale(false))
            }
        };
        if found.is_none() {
            tracing::trace!(?self, "a read of the container side finds something else");
        }
        found
    }
}

/// The kind at `path` (`None`: missing, or a folder on the way is not one).
fn kind_at(path: &Path, follow: bool) -> io::Result<Option<FileKind>> {
    let stat = match follow {
        true => rustix::fs::stat(path),
        false => rustix::fs::lstat(path),
    };
    match stat {
        Ok(stat) => Ok(Some(FileKind::from_mode(stat.st_mode))),
        Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR) => Ok(None),
        Err(err) => Err(err.into()),
    }
}

/// The names in the folder `dir`, sorted (`None`: missing).
fn names_in(dir: &Path) -> io::Result<Option<Vec<std::ffi::OsString>>> {
    #[expect(
        clippy::disallowed_methods,
        reason = "a trusted host folder, listed following links as the runner's bind mount does"
    )]
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err),
    };
    let mut names =
        (entries.map(|entry| entry.map(|e| e.file_name()))).collect::<io::Result<Vec<_>>>()?;
    names.sort();
    Ok(Some(names))
}

fn names_digest(names: &[std::ffi::OsString]) -> String {
    let mut bytes = Vec::new();
    for name in names {
        let name = name.as_encoded_bytes();
        bytes.extend_from_slice(&(name.len() as u64).to_le_bytes());
        bytes.extend_from_slice(name);
    }
    crate::reads::digest(&bytes)
}

/// Where `path` points when it is a symlink.
fn link_at(path: &Path) -> Option<PathBuf> {
    let is_link = fs_err::symlink_metadata(path)
        .ok()?
        .file_type()
        .is_symlink();
    match is_link {
        true => fs_err::read_link(path).ok(),
        false => None,
    }
}

fn link_digest(target: &Path) -> String {
    crate::reads::digest(target.as_os_str().as_encoded_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder with a file, a folder of two entries and a link, each read through a log.
    fn logged(root: &Path) -> HostReads {
        let log = HostLog::new();
        assert_eq!(
            log.read_file(&root.join("a.md"), 1024).unwrap().unwrap(),
            b"AAAA\n"
        );
        assert_eq!(
            log.kind(&root.join("d"), true).unwrap(),
            Some(FileKind::Dir)
        );
        assert_eq!(log.list(&root.join("d")).unwrap().unwrap().len(), 2);
        assert_eq!(log.link(&root.join("l")), Some(PathBuf::from("x")));
        assert_eq!(log.read_file(&root.join("missing.md"), 1024).unwrap(), None);
        log.kept().unwrap()
    }

    fn tree() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        fs_err::write(root.path().join("a.md"), "AAAA\n").unwrap();
        fs_err::create_dir(root.path().join("d")).unwrap();
        fs_err::write(root.path().join("d/one"), "1").unwrap();
        fs_err::write(root.path().join("d/two"), "2").unwrap();
        std::os::unix::fs::symlink("x", root.path().join("l")).unwrap();
        root
    }

    #[test]
    fn a_logged_reading_holds_until_a_read_would_find_something_else() {
        type Change = (&'static str, fn(&Path));
        let changes: [Change; 7] = [
            ("file, same size", |r| {
                fs_err::write(r.join("a.md"), "AAAB\n").unwrap()
            }),
            ("file replaced by a folder", |r| {
                fs_err::remove_file(r.join("a.md")).unwrap();
                fs_err::create_dir(r.join("a.md")).unwrap();
            }),
            ("entry added", |r| {
                fs_err::write(r.join("d/three"), "3").unwrap()
            }),
            ("entry renamed", |r| {
                fs_err::rename(r.join("d/two"), r.join("d/deux")).unwrap()
            }),
            ("folder replaced by a file", |r| {
                fs_err::remove_dir_all(r.join("d")).unwrap();
                fs_err::write(r.join("d"), "").unwrap();
            }),
            ("link pointed elsewhere", |r| {
                fs_err::remove_file(r.join("l")).unwrap();
                std::os::unix::fs::symlink("y", r.join("l")).unwrap();
            }),
            ("missing file made", |r| {
                fs_err::write(r.join("missing.md"), "").unwrap()
            }),
        ];
        for (name, change) in changes {
            let root = tree();
            let reads = logged(root.path());
            assert!(reads.hold(), "{name}: unchanged");
            change(root.path());
            assert!(!reads.hold(), "{name}");
        }
    }

    #[test]
    fn a_file_changed_just_before_it_was_read_is_kept_by_its_bytes() {
        let root = tree();
        let reads = logged(root.path());
        let Probe::File {
            identity, digest, ..
        } = &reads.probes[0]
        else {
            panic!("the file's read comes first");
        };
        assert_eq!((identity, digest.is_some()), (&None, true));
        // Found again by its bytes; worth reading again once its identity stands for them.
        assert_eq!(reads.replay(reads.made), Some(Stale(false)));
        assert_eq!(
            reads.replay(reads.made + crate::reads::SETTLED * 2),
            Some(Stale(true))
        );
    }

    #[test]
    fn a_read_that_fails_spoils_the_log() {
        let root = tree();
        let log = HostLog::new();
        assert!(log.read_file(&root.path().join("d"), 1024).is_err());
        assert!(log.kept().is_none());
    }
}
