//! The temps a journal ([`TempJournal`](super::TempJournal)) records that a run left: read
//! back for a dry run and `check`, removed by the next run holding the same lock, and only if
//! each is still the file or link clawmd made.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use rustix::fs::AtFlags;

use super::journal::{MAX_JOURNAL_BYTES, Record};
use super::{FsError, Result, SafeDir, is_temp_name};
use crate::file_kind::FileKind;

/// A temp file or link a run recorded in its journal and did not put in place or remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    /// The (absolute) folder it is in.
    pub dir: PathBuf,
    /// Its name (always a temp name).
    pub name: String,
    /// The device and inode it was made with, and that of the file it replaced when it was
    /// put in place by an exchange (the temp name then holds the replaced file until it is
    /// removed); none: the run stopped before recording them.
    made: Vec<(u64, u64)>,
}

impl Leftover {
    /// Its path.
    pub fn path(&self) -> PathBuf {
        self.dir.join(&self.name)
    }

    /// Opens its folder (never through a link at the last step); `None` when it is gone or
    /// is no longer a real folder (then nothing in it is clawmd's to remove).
    fn open_dir(&self) -> Option<SafeDir> {
        match SafeDir::open(&self.dir) {
            Ok(dir) => Some(dir),
            Err(err) => {
                tracing::debug!("{}", crate::error::chain_text(&err));
                None
            }
        }
    }

    /// Whether it is still there as clawmd made it: a regular file or a symlink, with the
    /// inode clawmd recorded (when the run got as far as recording it).
    fn is_present_in(&self, dir: &SafeDir) -> Result<bool> {
        match rustix::fs::statat(&dir.fd, self.name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => {
                let kind = FileKind::from_mode(stat.st_mode);
                Ok(matches!(kind, FileKind::File | FileKind::Symlink)
                    && (self.made.is_empty() || self.made.contains(&(stat.st_dev, stat.st_ino))))
            }
            Err(rustix::io::Errno::NOENT) => Ok(false),
            Err(err) => Err(FsError::io("inspect", self.path(), err)),
        }
    }

    /// Whether it is still there as clawmd made it.
    pub fn is_present(&self) -> Result<bool> {
        match self.open_dir() {
            Some(dir) => self.is_present_in(&dir),
            None => Ok(false),
        }
    }

    /// Removes it if it is still there as clawmd made it (checked again right before the
    /// removal), durably. Only while holding the lock whose journal recorded it. Returns
    /// whether it was removed.
    pub fn remove(&self) -> Result<bool> {
        let Some(dir) = self.open_dir() else {
            return Ok(false);
        };
        if !self.is_present_in(&dir)? {
            return Ok(false);
        }
        dir.remove(&self.name)?;
        dir.sync()?;
        Ok(true)
    }
}

/// The temps the journal `bytes` records, each once, in the order first recorded, without
/// those whose creation failed. A line that is not well formed (a journal cut short by a
/// power loss) is skipped; a name that is not a temp name is never returned.
pub(super) fn parse_journal(bytes: &[u8]) -> Vec<Leftover> {
    let mut found: Vec<(Leftover, bool)> = Vec::new();
    for line in bytes.split(|&b| b == b'\n') {
        let Some((record, dir, name, made)) = parse_line(line) else {
            continue;
        };
        let index = match found
            .iter()
            .position(|(known, _)| known.dir == dir && known.name == name)
        {
            Some(index) => index,
            None => {
                found.push((
                    Leftover {
                        dir,
                        name: name.to_owned(),
                        made: Vec::new(),
                    },
                    true,
                ));
                found.len() - 1
            }
        };
        match record {
            Record::Intent => {}
            Record::Made => found[index].0.made.extend(made),
            Record::NotMade => found[index].1 = false,
        }
    }
    found
        .into_iter()
        .filter_map(|(leftover, live)| live.then_some(leftover))
        .collect()
}

/// One journal line: what it records, the folder, the temp name and, for [`Record::Made`],
/// the device and inode.
type Line<'a> = (Record, PathBuf, &'a str, Option<(u64, u64)>);

fn parse_line(line: &[u8]) -> Option<Line<'_>> {
    let line = std::str::from_utf8(line).ok()?;
    let mut fields = line.split(' ');
    let record = match fields.next()? {
        "+" => Record::Intent,
        "=" => Record::Made,
        "-" => Record::NotMade,
        _ => return None,
    };
    let hex = fields.next()?;
    if hex.len() % 2 != 0 {
        return None;
    }
    let dir: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect::<Option<_>>()?;
    let dir = PathBuf::from(OsString::from_vec(dir));
    let name = fields.next()?;
    if !is_temp_name(name) || !dir.is_absolute() {
        return None;
    }
    let made = match record {
        Record::Made => Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?)),
        _ => None,
    };
    if fields.next().is_some() {
        return None;
    }
    Some((record, dir, name, made))
}

/// The temps the journal at `<state>/<folder>/<name>` records that are still there as clawmd
/// made them (read only: for a dry run and `check`, or for the run holding the lock to
/// remove). A missing state folder or journal holds none; a state folder that is a link or
/// not a folder is refused.
pub fn read_leftovers(state: &Path, folder: &str, name: &str) -> Result<Vec<Leftover>> {
    let Some(state) = SafeDir::open_state(state, false)? else {
        return Ok(Vec::new());
    };
    let Some(journals) = state.open_child(folder, false)? else {
        return Ok(Vec::new());
    };
    let Some(bytes) = journals.read_file(name, MAX_JOURNAL_BYTES)? else {
        return Ok(Vec::new());
    };
    let mut present = Vec::new();
    for leftover in parse_journal(&bytes) {
        if leftover.is_present()? {
            present.push(leftover);
        }
    }
    Ok(present)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::fsops::TEMP_PREFIX;
    use crate::disk::fsops::journal::fresh_temp_name;
    use crate::disk::fsops::testing::{journaled, leftovers_of};

    #[test]
    fn only_recorded_temps_clawmd_made_are_leftovers() {
        let (temp, dir, journal) = journaled();
        // What an interrupted run leaves: two staged temps never put in place.
        let file = dir.stage_file("a.md", b"half", true).unwrap();
        let link = dir.stage_symlink("b.md", Path::new("/app/x")).unwrap();
        // What the agent can name: files named like temps, one like a real temp name.
        let planted = [
            format!("{TEMP_PREFIX}notes"),
            format!("{TEMP_PREFIX}{}", "ab".repeat(16)),
            format!("{TEMP_PREFIX}1-2-3"),
        ];
        for name in &planted {
            std::fs::write(dir.path().join(name), "the agent's").unwrap();
        }
        let found: Vec<String> = leftovers_of(&temp).into_iter().map(|l| l.name).collect();
        assert_eq!(found, [file.name.clone(), link.name.clone()]);
        // The run holding the lock removes exactly those, then the journal empties.
        for leftover in leftovers_of(&temp) {
            assert!(leftover.remove().unwrap());
        }
        journal.settle().unwrap();
        assert_eq!(std::fs::metadata(journal.path()).unwrap().len(), 0);
        let mut left: Vec<String> = dir
            .list()
            .unwrap()
            .into_iter()
            .map(|n| n.into_string().unwrap())
            .collect();
        left.sort();
        let mut expected = planted.to_vec();
        expected.sort();
        assert_eq!(left, expected, "the agent's files are untouched");
        for name in &planted {
            assert_eq!(
                std::fs::read_to_string(dir.path().join(name)).unwrap(),
                "the agent's"
            );
        }
    }

    #[test]
    fn a_recorded_temp_replaced_by_another_file_is_not_clawmds() {
        let (temp, dir, journal) = journaled();
        let staged = dir.stage_file("a.md", b"mine", true).unwrap();
        // The agent swaps the temp for its own file under the same name.
        let path = dir.path().join(&staged.name);
        std::fs::rename(&path, dir.path().join("moved")).unwrap();
        std::fs::write(&path, "the agent's").unwrap();
        // Never put in place (the entry point would get the agent's text) ...
        let err = dir.put_in_place(staged, "a.md").unwrap_err();
        assert!(matches!(err, FsError::Unsafe { .. }), "{err}");
        assert!(dir.kind("a.md").unwrap().is_none());
        // ... and never removed as a leftover.
        assert!(leftovers_of(&temp).is_empty());
        journal.settle().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "the agent's");
    }

    #[test]
    fn a_temp_recorded_before_it_was_made_is_a_leftover_when_it_is_a_file() {
        let (temp, dir, journal) = journaled();
        // A run that stopped between recording the name and recording what it made: the
        // name is in the journal, unpredictable, and a regular file is there.
        let name = fresh_temp_name();
        journal
            .record(Record::Intent, dir.absolute_path(), &name, None)
            .unwrap();
        std::fs::write(dir.path().join(&name), "half").unwrap();
        let leftovers = leftovers_of(&temp);
        assert_eq!(leftovers.len(), 1);
        assert!(leftovers[0].remove().unwrap());
        // A folder there is never removed; a name whose creation failed is forgotten.
        let other = fresh_temp_name();
        journal
            .record(Record::Intent, dir.absolute_path(), &other, None)
            .unwrap();
        std::fs::create_dir(dir.path().join(&other)).unwrap();
        assert!(leftovers_of(&temp).is_empty());
        let failed = fresh_temp_name();
        journal
            .record(Record::Intent, dir.absolute_path(), &failed, None)
            .unwrap();
        journal
            .record(Record::NotMade, dir.absolute_path(), &failed, None)
            .unwrap();
        std::fs::write(dir.path().join(&failed), "x").unwrap();
        assert!(leftovers_of(&temp).is_empty());
        // settle keeps nothing it need not: none of its temps is left.
        journal.settle().unwrap();
        assert_eq!(std::fs::metadata(journal.path()).unwrap().len(), 0);
    }

    #[test]
    fn a_journal_names_only_temp_names_in_absolute_folders() {
        let hex = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
        let name = format!("{TEMP_PREFIX}{}", "0f".repeat(16));
        let journal = format!(
            "+ {dir} {name}\n= {dir} {name} 1 2\n+ {dir} CLAUDE.local.md\n+ {rel} {name}\n+ {dir} {TEMP_PREFIX}x\n+ zz {name}\n= {dir} {name} 1\n+ {dir} {name} extra\n+ {dir}",
            dir = hex("/srv/groups/g"),
            rel = hex("groups/g"),
        );
        let parsed = parse_journal(journal.as_bytes());
        assert_eq!(
            parsed,
            [Leftover {
                dir: PathBuf::from("/srv/groups/g"),
                name,
                made: vec![(1, 2)],
            }]
        );
    }
}
