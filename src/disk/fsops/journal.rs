//! Temp names, and the journal that records them: every temp file or link clawmd makes
//! under a lock is named in that lock's [`TempJournal`] before it is made, so that a later run
//! holding the lock removes what a crash left ([`super::leftovers`]), and nothing else.

use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{Mode, OFlags};

use super::leftovers::parse_journal;
use super::regular::too_large;
use super::{FsError, Result, SafeDir, TEMP_PREFIX, Temp, checkpoint};
use crate::file_kind::FileKind;

/// A temp name no one can predict: the prefix and 128 random bits.
pub(super) fn fresh_temp_name() -> String {
    let mut bytes = [0u8; 16];
    if rustix::rand::getrandom(&mut bytes[..], rustix::rand::GetRandomFlags::empty()).is_err() {
        // No getrandom(2): std's hash keys come from the system's randomness too.
        use std::hash::BuildHasher;
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let state = std::collections::hash_map::RandomState::new();
        let count = COUNTER.fetch_add(1, Ordering::Relaxed);
        bytes[..8].copy_from_slice(&state.hash_one((count, 0u8)).to_le_bytes());
        bytes[8..].copy_from_slice(&state.hash_one((count, 1u8)).to_le_bytes());
    }
    let mut name = String::with_capacity(TEMP_PREFIX.len() + 32);
    name.push_str(TEMP_PREFIX);
    name.push_str(&crate::safe_name::hex(&bytes));
    name
}

/// Whether `name` has the shape of a temp name this module makes (the prefix and 32 hex
/// digits). Only a shape: anyone can name a file so, and clawmd removes a temp only when a
/// journal records it ([`read_leftovers`](super::read_leftovers)).
pub fn is_temp_name(name: &str) -> bool {
    name.len() == TEMP_PREFIX.len() + 32
        && name.starts_with(TEMP_PREFIX)
        && name[TEMP_PREFIX.len()..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// What a journal line says about a temp name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Record {
    /// About to be made (written before anything exists under the name).
    Intent,
    /// Made, with the device and inode it got.
    Made,
    /// Nothing was made under it (its creation failed).
    NotMade,
}

impl Record {
    fn tag(self) -> u8 {
        match self {
            Record::Intent => b'+',
            Record::Made => b'=',
            Record::NotMade => b'-',
        }
    }
}

/// The journal of the temp files and links made by the runs that hold one lock, kept in
/// clawmd's state folder (never in a folder an agent can write): each temp name is recorded
/// before anything is made under it, and again with its device and inode once made. A later
/// run holding the same lock removes what a crash left by reading it
/// ([`read_leftovers`](super::read_leftovers)): only names recorded here, only if they are
/// still a file or link clawmd made (the same inode, when the journal says which), and never
/// by name alone. A temp name carries 128 random bits, so no one can create one before clawmd
/// does.
///
/// The journal is created (with the state folder) the first time a temp is recorded, and
/// emptied by [`TempJournal::settle`] once none of its temps is left (when dropped, if the
/// run did not settle it: drop it before the lock).
#[derive(Debug)]
pub struct TempJournal {
    /// clawmd's state folder.
    state: PathBuf,
    /// The folder inside it that holds the journals.
    folder: &'static str,
    /// This journal's name in that folder (the lock's name).
    name: String,
    /// The journal file, opened for appending on first use.
    file: std::sync::Mutex<Option<std::fs::File>>,
    /// Whether [`TempJournal::settle`] ran (after the last temp was recorded).
    settled: std::sync::atomic::AtomicBool,
    /// Whether the folders made for this run (the journal's own file, the group's folders in
    /// the state folder) are left to the run's `syncfs` instead of being fsynced one by one
    /// ([`TempJournal::defer_folder_syncs`]).
    deferred: std::sync::atomic::AtomicBool,
}

impl Drop for TempJournal {
    /// A run that stops on an error still settles its journal (while it holds the lock: the
    /// journal is dropped before the lock), so a failure that removed its temps leaves no
    /// records behind.
    fn drop(&mut self) {
        if !self.settled.load(Ordering::Relaxed)
            && let Err(err) = self.settle()
        {
            tracing::warn!("{}", crate::error::chain_text(&err));
        }
    }
}

/// The largest journal read: a run records two short lines per temp it makes.
pub(super) const MAX_JOURNAL_BYTES: u64 = 16 * 1024 * 1024;

impl TempJournal {
    /// The journal `<state>/<folder>/<name>`; nothing is created until a temp is recorded.
    pub fn new(state: PathBuf, folder: &'static str, name: &str) -> Arc<TempJournal> {
        Arc::new(TempJournal {
            state,
            folder,
            name: name.to_owned(),
            file: std::sync::Mutex::new(None),
            settled: std::sync::atomic::AtomicBool::new(false),
            deferred: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// For a run that syncs the whole filesystem (`syncfs`) after making its temps and before
    /// renaming anything into place (a batch of groups): the entries it makes for this
    /// journal's lock in the state folder (the journal file, the group's bind folder) are made
    /// durable by that sync rather than by an fsync of their folder each. Nothing relies on
    /// them before it.
    pub fn defer_folder_syncs(&self) {
        self.deferred.store(true, Ordering::Relaxed);
    }

    /// Whether [`TempJournal::defer_folder_syncs`] was asked.
    pub fn folder_syncs_deferred(&self) -> bool {
        self.deferred.load(Ordering::Relaxed)
    }

    /// The journal's path.
    pub fn path(&self) -> PathBuf {
        self.state.join(self.folder).join(&self.name)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<std::fs::File>> {
        self.file
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The journal file, opened (and created, with its folders) on first use.
    fn open(&self) -> Result<std::fs::File> {
        let state = SafeDir::open_state(&self.state, true)?
            .expect("open_state with create returns a folder or an error");
        let folder = state
            .open_child(self.folder, true)?
            .expect("open_child with create returns a folder or an error");
        let flags = OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let path = self.path();
        // Created if missing (never through a link); then opened only if it is a regular
        // file.
        match rustix::fs::openat(
            &folder.fd,
            &self.name,
            flags | OFlags::EXCL | OFlags::WRONLY,
            Mode::from_raw_mode(0o600),
        ) {
            Ok(_) if self.folder_syncs_deferred() => {}
            Ok(_) => folder.unsynced.set(true),
            Err(rustix::io::Errno::EXIST) => {}
            Err(err) => return Err(FsError::io("create", &path, err)),
        }
        match folder.open_regular(&self.name, OFlags::RDWR | OFlags::APPEND)? {
            Some((file, _)) => Ok(file),
            None => Err(FsError::io(
                "open",
                path,
                io::Error::from(io::ErrorKind::NotFound),
            )),
        }
    }

    pub(super) fn record(
        &self,
        record: Record,
        dir: &Path,
        name: &str,
        identity: Option<(u64, u64)>,
    ) -> Result<()> {
        let mut line = Vec::with_capacity(128);
        line.push(record.tag());
        line.push(b' ');
        line.extend_from_slice(
            crate::safe_name::hex(dir.as_os_str().as_encoded_bytes()).as_bytes(),
        );
        line.push(b' ');
        line.extend_from_slice(name.as_bytes());
        if let Some((dev, ino)) = identity {
            line.extend_from_slice(format!(" {dev} {ino}").as_bytes());
        }
        line.push(b'\n');
        let mut file = self.lock();
        if file.is_none() {
            *file = Some(self.open()?);
        }
        self.settled.store(false, Ordering::Relaxed);
        let file = file.as_mut().expect("opened above");
        // One write with O_APPEND: the line is whole in the journal or not there.
        file.write_all(&line)
            .map_err(|err| FsError::io("write", self.path(), err))
    }

    /// Once a run is done: when none of the temps recorded (by this run or an interrupted
    /// one) is left, empties the journal, so that runs that find nothing to clean never read
    /// it. When some are (a temp a failed step could not remove), keeps them for the next run.
    pub fn settle(&self) -> Result<()> {
        self.settled.store(true, Ordering::Relaxed);
        let path = self.path();
        let mut file = self.lock();
        if file.is_none() {
            // Nothing recorded by this run: an earlier one's records, if any, are settled too.
            if !journal_has_records(&path) {
                return Ok(());
            }
            *file = Some(self.open()?);
        }
        let file = file.as_mut().expect("opened above");
        let size = file
            .metadata()
            .map_err(|err| FsError::io("inspect", &path, err))?
            .len();
        if size > MAX_JOURNAL_BYTES {
            return Err(too_large(&path, MAX_JOURNAL_BYTES));
        }
        let mut bytes = vec![0; size as usize];
        file.read_exact_at(&mut bytes, 0)
            .map_err(|err| FsError::io("read", &path, err))?;
        for leftover in parse_journal(&bytes) {
            if leftover.is_present()? {
                return Ok(());
            }
        }
        checkpoint("truncate", &path);
        file.set_len(0)
            .map_err(|err| FsError::io("truncate", &path, err))
    }
}

/// Whether the journal at `path` may record a temp: it is a regular file (not a link:
/// never followed) and not empty.
pub fn journal_has_records(path: &Path) -> bool {
    rustix::fs::lstat(path)
        .is_ok_and(|stat| FileKind::from_mode(stat.st_mode) == FileKind::File && stat.st_size > 0)
}

/// The journal's part in a [`SafeDir`]'s writes: each temp name is recorded before anything
/// is made under it, and again once made (or not made).
impl SafeDir {
    /// A new temp name, unpredictable, recorded in the journal (when there is one) before
    /// anything is made under it.
    pub(super) fn fresh_temp_name(&self) -> Result<String> {
        let name = fresh_temp_name();
        if let Some(journal) = &self.journal {
            journal.record(Record::Intent, self.absolute_path(), &name, None)?;
        }
        Ok(name)
    }

    /// Records in the journal that `temp` was made (with its identity).
    pub(super) fn made(&self, temp: &Temp) -> Result<()> {
        match &self.journal {
            Some(journal) => journal.record(
                Record::Made,
                self.absolute_path(),
                &temp.name,
                Some(temp.identity),
            ),
            None => Ok(()),
        }
    }

    /// Records in the journal that nothing was made under `name` (best effort).
    pub(super) fn not_made(&self, name: &str) {
        if let Some(journal) = &self.journal {
            let _ = journal.record(Record::NotMade, self.absolute_path(), name, None);
        }
    }

    /// This folder's path, absolute (the journal is read by later runs, from any directory).
    pub(super) fn absolute_path(&self) -> &Path {
        self.absolute
            .get_or_init(|| std::path::absolute(&self.path).unwrap_or_else(|_| self.path.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::fsops::testing::{journaled, leftovers_of};

    #[test]
    fn a_journal_is_emptied_only_when_none_of_its_temps_is_left() {
        // Every temp put in place (or removed): the journal is emptied.
        let (temp, dir, journal) = journaled();
        let file = dir.stage_file("a.md", b"A", true).unwrap();
        dir.put_in_place(file, "a.md").unwrap();
        let link = dir.stage_symlink("b.md", Path::new("/app/x")).unwrap();
        dir.put_in_place(link, "b.md").unwrap();
        let unused = dir.stage_file("c.md", b"C", true).unwrap();
        dir.discard(unused);
        let new = dir.stage_new_file(b"D", true).unwrap();
        assert!(dir.link_new(new, "d.md").unwrap());
        assert!(std::fs::metadata(journal.path()).unwrap().len() > 0);
        journal.settle().unwrap();
        assert_eq!(std::fs::metadata(journal.path()).unwrap().len(), 0);
        assert!(leftovers_of(&temp).is_empty());
        // A temp the run left where it made it keeps the journal, which names it.
        let (temp, dir, journal) = journaled();
        let placed = dir.stage_file("a.md", b"A", true).unwrap();
        dir.put_in_place(placed, "a.md").unwrap();
        let left = dir.stage_file("b.md", b"B", true).unwrap();
        journal.settle().unwrap();
        let found: Vec<String> = leftovers_of(&temp).into_iter().map(|l| l.name).collect();
        assert_eq!(found, [left.name.as_str()]);
        // A later run that finds it (the journal it opens holds records) empties the journal
        // only once it is gone.
        let later = TempJournal::new(temp.path().join("state"), "journal", "g");
        let mut again = SafeDir::open(&temp.path().join("group")).unwrap();
        again.record_temps_in(&later);
        let own = again.stage_file("c.md", b"C", true).unwrap();
        again.put_in_place(own, "c.md").unwrap();
        later.settle().unwrap();
        assert_eq!(
            leftovers_of(&temp).len(),
            1,
            "the earlier run's temp is still there"
        );
        assert!(leftovers_of(&temp)[0].remove().unwrap());
        later.settle().unwrap();
        assert_eq!(std::fs::metadata(later.path()).unwrap().len(), 0);
        drop(left);
    }

    #[test]
    fn temp_names_differ_every_time() {
        let names: std::collections::BTreeSet<String> =
            (0..1000).map(|_| fresh_temp_name()).collect();
        assert_eq!(names.len(), 1000);
        for name in &names {
            assert_eq!(name.len(), TEMP_PREFIX.len() + 32);
        }
    }
}
