//! What reading the container side looked at on the host, so that a later run can tell,
//! without reading and expanding it all again, whether any of it changed
//! ([`HostReads::replay`]).
//!
//! [`read_container`](super::read_container), the host's managed policy and the runner's
//! files are read through a [`HostLog`]: every host path they look at (a file read, a folder
//! listed, an entry's kind, a link's target) is logged as what it found, and every container
//! view they expand imports through logs its own reads ([`MountedFs::log_reads_in`]). A file
//! counts by its identity when its last change was well before the read
//! ([`crate::disk::reads::settled`]: the status of the very file read, taken before its bytes), else
//! by the SHA-256 of its bytes; a listing by its names and their kinds (and by its folder's
//! identity too, the same way, when no entry is a link); an entry by its kind; a link by its
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

use crate::disk::fsops::{self, FsError};
use crate::disk::reads::{Read, ReadLog};
use crate::file_kind::FileKind;
use crate::runtime::mounted::Opened;
use crate::runtime::mounted::{Mount, MountedFs};

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
    /// The entries of a folder, following links, with their kinds (the SHA-256 of them,
    /// sorted; `None`: missing).
    Listing {
        /// The folder.
        path: PathBuf,
        /// The folder's identity, taken before it was listed, when its last change was well
        /// before and none of its entries is a link: any entry added, removed, renamed or
        /// replaced changes it (a link's target may change without it).
        identity: Option<[i64; 8]>,
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

/// The host reads of one reading of the container side, logged as they are made, by the
/// item being read ([`HostLog::begin_item`]).
#[derive(Debug)]
pub struct HostLog {
    /// When the reading started: a file changed less than [`crate::disk::reads::SETTLED`] before
    /// is kept by its bytes only.
    now: SystemTime,
    /// The item being read (`None`: what every group depends on).
    item: Mutex<Option<String>>,
    parts: Mutex<Vec<PartLog>>,
    spoiled: AtomicBool,
}

/// The reads made for one item (or for none).
#[derive(Debug, Default)]
struct PartLog {
    item: Option<String>,
    probes: Vec<Probe>,
    seen: HashSet<Probe>,
    /// Each container view's mount table and the log of its reads.
    views: Vec<(Vec<Mount>, Arc<ReadLog>)>,
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
            item: Mutex::new(None),
            parts: Mutex::new(Vec::new()),
            spoiled: AtomicBool::new(false),
        }
    }

    /// Logs the reads that follow as made for the item `section` (a skill or a fragment of
    /// the container side, by its section name, [`super::container_items`]), until
    /// [`HostLog::end_item`]: a group that does not get that item does not depend on them.
    pub fn begin_item(&self, section: &str) {
        *self.item.lock().unwrap_or_else(|p| p.into_inner()) = Some(section.to_owned());
    }

    /// Logs the reads that follow as what every group depends on.
    pub fn end_item(&self) {
        *self.item.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// Runs `log` on the part of the item being read.
    fn in_part<R>(&self, log: impl FnOnce(&mut PartLog) -> R) -> R {
        let item = self.item.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut parts = self.parts.lock().unwrap_or_else(|p| p.into_inner());
        let index = match parts.iter().position(|part| part.item == item) {
            Some(index) => index,
            None => {
                parts.push(PartLog {
                    item,
                    ..PartLog::default()
                });
                parts.len() - 1
            }
        };
        log(&mut parts[index])
    }

    /// [`fsops::read_host_file`], logged.
    pub fn read_file(&self, path: &Path, limit: u64) -> Result<Option<Vec<u8>>, FsError> {
        match fsops::read_host_file_as_found(path, limit) {
            Ok(found) => {
                let identity = (found.as_ref())
                    .and_then(|(_, stat)| crate::disk::reads::settled(stat, self.now));
                let digest = found
                    .as_ref()
                    .map(|(bytes, _)| crate::disk::reads::digest(bytes));
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
    pub fn list(&self, dir: &Path) -> io::Result<Option<Vec<Entry>>> {
        let before = rustix::fs::stat(dir).ok();
        match entries_in(dir) {
            Ok(found) => {
                let identity = before.and_then(|stat| kept_by_identity(&stat, &found, self.now));
                let entries = found.map(|found| found.entries);
                self.push(Probe::Listing {
                    path: dir.to_owned(),
                    identity,
                    digest: entries.as_deref().map(entries_digest),
                });
                Ok(entries)
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
        let log = self.in_part(
            |part| match part.views.iter().find(|(table, _)| table == mounts) {
                Some((_, log)) => log.clone(),
                None => {
                    let log = Arc::new(ReadLog::default());
                    part.views.push((mounts.to_vec(), log.clone()));
                    log
                }
            },
        );
        let mut fs = MountedFs::new(mounts.iter().cloned());
        fs.log_reads_in(&log);
        fs
    }

    /// What was read, unless a read could not be kept.
    pub fn kept(&self) -> Option<HostReads> {
        if self.spoiled.load(Ordering::Relaxed) {
            return None;
        }
        let parts = self.parts.lock().unwrap_or_else(|p| p.into_inner());
        let parts = (parts.iter())
            .map(|part| {
                let views = (part.views.iter())
                    .map(|(mounts, log)| Some((mounts.clone(), log.kept_reads()?)))
                    .collect::<Option<Vec<_>>>()?;
                Some(PartReads {
                    item: part.item.clone(),
                    probes: part.probes.clone(),
                    views,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(HostReads {
            made: self.now,
            parts,
        })
    }

    fn push(&self, probe: Probe) {
        self.in_part(|part| {
            if part.seen.insert(probe.clone()) {
                part.probes.push(probe);
            }
        });
    }

    fn spoil(&self) {
        self.spoiled.store(true, Ordering::Relaxed);
    }
}

/// The host reads of one reading of the container side (a record keeps each part on its
/// own, [`crate::input::sources::record`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostReads {
    /// When the reads began.
    pub made: SystemTime,
    /// The reads, by the item they were made for.
    pub parts: Vec<PartReads>,
}

/// The reads made for one item of the container side (`item`: its section name), or for
/// none (what every group depends on).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartReads {
    /// The item.
    pub item: Option<String>,
    /// The host paths looked at, in order.
    pub probes: Vec<Probe>,
    /// Each container view's mount table and its reads.
    pub views: Vec<(Vec<Mount>, Vec<Read>)>,
}

impl HostReads {
    /// Whether every read finds what it found at `now` (`None` when one does not): each path
    /// looked at again the same way (a file whose identity is the same is not read again), each
    /// view's reads replayed through a view of the same mounts ([`MountedFs::replay`]); and
    /// whether a file was found the same by its bytes though its identity now stands for them
    /// ([`crate::disk::reads::settled`]): the reads are then worth making again once, so that the
    /// runs to come do not read that file again.
    pub fn replay(&self, now: SystemTime) -> Option<Stale> {
        let mut stale = Stale(false);
        let mut views = Views::default();
        for part in &self.parts {
            stale.0 |= part.replay(now, &mut views)?.0;
        }
        Some(stale)
    }
}

impl PartReads {
    /// [`HostReads::replay`] for this part's reads, through `views`.
    pub fn replay(&self, now: SystemTime, views: &mut Views) -> Option<Stale> {
        let mut stale = Stale(false);
        for probe in &self.probes {
            stale.0 |= probe.replay(now)?.0;
        }
        for (mounts, reads) in &self.views {
            let (fs, opened) = views.of(mounts);
            stale.0 |= fs.replay(reads, now, opened)?;
        }
        Some(stale)
    }
}

/// The container views replays go through: one per mount table, each path in it opened
/// once.
#[derive(Debug, Default)]
pub struct Views(Vec<(Vec<Mount>, MountedFs, Opened)>);

impl Views {
    fn of(&mut self, mounts: &[Mount]) -> (&MountedFs, &mut Opened) {
        let index = match self.0.iter().position(|(table, ..)| table == mounts) {
            Some(index) => index,
            None => {
                let fs = MountedFs::new(mounts.iter().cloned());
                self.0.push((mounts.to_vec(), fs, Opened::default()));
                self.0.len() - 1
            }
        };
        let (_, fs, opened) = &mut self.0[index];
        (fs, opened)
    }
}

/// Whether reads that hold are worth making again ([`HostReads::replay`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stale(pub bool);

impl Probe {
    /// Whether looking again at `now` finds the same (and whether a file was found the same
    /// by its bytes while its identity would do now).
    fn replay(&self, now: SystemTime) -> Option<Stale> {
        let found =
            match self {
                Probe::File {
                    path,
                    limit,
                    identity,
                    digest,
                } => {
                    let stat = rustix::fs::stat(path);
                    let same = identity.is_some()
                        && stat.as_ref().ok().map(crate::disk::reads::identity) == *identity;
                    if same {
                        Some(Stale(false))
                    } else if digest.is_none() {
                        // Found missing: still missing (a file there now is read as one).
                        matches!(stat, Err(rustix::io::Errno::NOENT)).then_some(Stale(false))
                    } else {
                        let stat = stat.ok();
                        let bytes = fsops::read_host_file(path, *limit).ok()?;
                        (bytes.as_deref().map(crate::disk::reads::digest) == *digest).then(|| {
                            Stale(stat.is_some_and(|stat| {
                                crate::disk::reads::settled(&stat, now).is_some()
                            }))
                        })
                    }
                }
                Probe::Kind { path, follow, kind } => {
                    (kind_at(path, *follow).ok()? == *kind).then_some(Stale(false))
                }
                Probe::Listing {
                    path,
                    identity,
                    digest,
                } => {
                    let stat = rustix::fs::stat(path).ok();
                    if identity.is_some()
                        && stat.as_ref().map(crate::disk::reads::identity) == *identity
                    {
                        return Some(Stale(false));
                    }
                    let again = entries_in(path).ok()?;
                    let settled = stat.and_then(|stat| kept_by_identity(&stat, &again, now));
                    let entries = again.map(|found| found.entries);
                    (entries.as_deref().map(entries_digest) == *digest)
                        .then_some(Stale(settled.is_some()))
                }
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

/// An entry of a folder: its name and its kind through a final link (`None`: a link to
/// nothing, or an entry that cannot be looked at).
pub type Entry = (std::ffi::OsString, Option<FileKind>);

/// The entries of a folder, and whether one of them is a link.
struct FolderEntries {
    entries: Vec<Entry>,
    through_links: bool,
}

/// The identity of the folder whose status `stat` was taken before it was listed as `found`,
/// when a look at it can stand for a listing: settled at `now`, and no entry a link.
fn kept_by_identity(
    stat: &rustix::fs::Stat,
    found: &Option<FolderEntries>,
    now: SystemTime,
) -> Option<[i64; 8]> {
    let found = found.as_ref()?;
    (!found.through_links)
        .then(|| crate::disk::reads::settled(stat, now))
        .flatten()
}

/// The entries of the folder `dir`, sorted (`None`: missing).
fn entries_in(dir: &Path) -> io::Result<Option<FolderEntries>> {
    #[expect(
        clippy::disallowed_methods,
        reason = "a trusted host folder, listed following links as the runner's bind mount does"
    )]
    let listing = match std::fs::read_dir(dir) {
        Ok(listing) => listing,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err),
    };
    let mut entries = Vec::new();
    let mut through_links = false;
    for entry in listing {
        let entry = entry?;
        let kind = match entry.file_type() {
            Ok(kind) if !kind.is_symlink() => Some(FileKind::from_std(kind)),
            _ => {
                through_links = true;
                kind_at(&entry.path(), true).ok().flatten()
            }
        };
        entries.push((entry.file_name(), kind));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Some(FolderEntries {
        entries,
        through_links,
    }))
}

fn entries_digest(entries: &[Entry]) -> String {
    crate::disk::reads::listing_digest(entries)
}

/// Where `path` points when it is a symlink.
fn link_at(path: &Path) -> Option<PathBuf> {
    // One call: anything but a link (or nothing at all) is an error of readlink(2).
    use std::os::unix::ffi::OsStringExt;
    let target = rustix::fs::readlink(path, Vec::new()).ok()?;
    Some(PathBuf::from(std::ffi::OsString::from_vec(
        target.into_bytes(),
    )))
}

fn link_digest(target: &Path) -> String {
    crate::disk::reads::digest(target.as_os_str().as_encoded_bytes())
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
        assert_eq!(
            log.kind(&root.join("d/one"), true).unwrap(),
            Some(FileKind::File)
        );
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
        let changes: [Change; 8] = [
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
            ("entry replaced by a folder", |r| {
                fs_err::remove_file(r.join("d/two")).unwrap();
                fs_err::create_dir(r.join("d/two")).unwrap();
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
            let holds = || reads.replay(SystemTime::now()).is_some();
            assert!(holds(), "{name}: unchanged");
            change(root.path());
            assert!(!holds(), "{name}");
        }
    }

    /// A listing made once its folder has settled is kept by the folder's identity, and still
    /// finds every change of its entries; one with a link among them never is (the link's
    /// target may change kind without the folder changing).
    #[test]
    fn a_settled_listing_is_kept_by_its_folders_identity_and_still_sees_every_change() {
        type Change = (&'static str, fn(&Path));
        let changes: [Change; 6] = [
            ("entry added", |r| {
                fs_err::write(r.join("d/three"), "3").unwrap()
            }),
            ("entry removed", |r| {
                fs_err::remove_file(r.join("d/one")).unwrap()
            }),
            ("entry renamed", |r| {
                fs_err::rename(r.join("d/two"), r.join("d/deux")).unwrap()
            }),
            ("file replaced by a folder", |r| {
                fs_err::remove_file(r.join("d/one")).unwrap();
                fs_err::create_dir(r.join("d/one")).unwrap();
            }),
            ("file replaced by a link to a folder", |r| {
                fs_err::remove_file(r.join("d/one")).unwrap();
                std::os::unix::fs::symlink(r, r.join("d/one")).unwrap();
            }),
            ("a linked entry's target made a folder", |r| {
                fs_err::remove_file(r.join("target")).unwrap();
                fs_err::create_dir(r.join("target")).unwrap();
            }),
        ];
        let trees: Vec<tempfile::TempDir> = (0..changes.len())
            .map(|_| {
                let root = tree();
                fs_err::write(root.path().join("target"), "t").unwrap();
                root
            })
            .collect();
        let linked = |root: &Path| root.join("d/linked");
        std::os::unix::fs::symlink(trees[5].path().join("target"), linked(trees[5].path()))
            .unwrap();
        std::thread::sleep(crate::disk::reads::SETTLED + std::time::Duration::from_millis(100));
        for ((name, change), root) in changes.into_iter().zip(&trees) {
            let log = HostLog::new();
            log.list(&root.path().join("d")).unwrap();
            let reads = log.kept().unwrap();
            let Probe::Listing { identity, .. } = &reads.parts[0].probes[0] else {
                panic!("{name}: a listing");
            };
            let through_link = linked(root.path()).exists();
            assert_eq!(identity.is_some(), !through_link, "{name}");
            let holds = || reads.replay(SystemTime::now());
            assert_eq!(holds(), Some(Stale(false)), "{name}: unchanged");
            change(root.path());
            assert_eq!(holds(), None, "{name}");
        }
    }

    #[test]
    fn a_file_changed_just_before_it_was_read_is_kept_by_its_bytes() {
        let root = tree();
        let reads = logged(root.path());
        let Probe::File {
            identity, digest, ..
        } = &reads.parts[0].probes[0]
        else {
            panic!("the file's read comes first");
        };
        assert_eq!((identity, digest.is_some()), (&None, true));
        // Found again by its bytes; worth reading again once its identity stands for them.
        assert_eq!(reads.replay(reads.made), Some(Stale(false)));
        assert_eq!(
            reads.replay(reads.made + crate::disk::reads::SETTLED * 2),
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
