//! A [`SafeDir`]'s listings: its names, sorted, with their kinds where the filesystem says,
//! each walk or look-up logged as what it asked ([`Listing`]).

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

use super::SafeDir;
use crate::disk::fsops::{FsError, Result};
use crate::disk::reads::{self, Seen, Tap, Watch};
use crate::file_kind::FileKind;

/// What a directory held when it was listed: names and, where the filesystem says, kinds.
///
/// A listing of a folder whose reads are logged ([`SafeDir::log_reads_in`]) logs what is
/// asked of it: all its names when they are walked, or only the kind of each name looked up
/// (so that a file of the agent's own next to them changes no look that never asked for it).
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// Each name with its kind when the listing gave one (`None`: ask the directory).
    entries: Vec<(OsString, Option<FileKind>)>,
    /// Where what is asked of it is logged.
    tap: Option<Tap>,
    /// The folder's identity when only clawmd writes it and it was settled when listed: what
    /// a walk of its names is logged as ([`Seen::Entries`]).
    settled: Option<[i64; 8]>,
}

impl Listing {
    /// The names listed, sorted.
    pub fn names(&self) -> impl Iterator<Item = &OsString> {
        if let Some(tap) = &self.tap {
            tap.push(
                "",
                match self.settled {
                    Some(identity) => Seen::Entries(identity),
                    None => reads::listing(&self.entries),
                },
            );
        }
        self.entries.iter().map(|(name, _)| name)
    }

    /// What `name` was when listed (`None` when it was not there), asking `dir` when the
    /// listing did not say. Whatever is then read is still checked when it is opened.
    pub fn kind(&self, dir: &SafeDir, name: &str) -> Result<Option<FileKind>> {
        let kind = match self
            .entries
            .binary_search_by(|(listed, _)| listed.as_os_str().cmp(std::ffi::OsStr::new(name)))
        {
            Ok(index) => match self.entries[index].1 {
                Some(kind) => Ok(Some(kind)),
                None => dir.kind(name),
            },
            Err(_) => Ok(None),
        };
        if let (Some(tap), Ok(kind)) = (&self.tap, &kind) {
            tap.push(name, Seen::Kind(*kind));
        }
        kind
    }
}

impl SafeDir {
    /// One listing of this directory, to look names up in without a system call each.
    pub fn listing(&self) -> Result<Listing> {
        let settled = self.settled_identity();
        Ok(Listing {
            entries: self.read_entries()?,
            tap: self.tap.clone(),
            settled,
        })
    }

    /// This folder's identity, when its reads are logged by identity (a folder only clawmd
    /// writes) and its last change was well before now ([`reads::settled`]); taken before it
    /// is listed, so that an entry made meanwhile changes it.
    fn settled_identity(&self) -> Option<[i64; 8]> {
        self.tap
            .as_ref()
            .filter(|tap| tap.watch == Watch::Identity)?;
        let before = std::time::SystemTime::now();
        let stat = rustix::fs::fstat(&self.fd).ok()?;
        reads::settled(&stat, before)
    }

    /// The names in this directory, sorted. Names that are not valid UTF-8 are returned lossily
    /// converted only for display; callers must treat them as foreign.
    pub fn list(&self) -> Result<Vec<OsString>> {
        Ok(self
            .list_kinds()?
            .into_iter()
            .map(|(name, _)| name)
            .collect())
    }

    /// The names in this directory (as text, lossily) that start with one of `prefixes`,
    /// sorted; logged as those names only ([`Seen::Prefixed`]), so that other names coming
    /// and going leave a record standing.
    pub fn names_starting_with(&self, prefixes: &[&str]) -> Result<Vec<String>> {
        let names: Vec<String> = (self.read_entries()?.into_iter())
            .map(|(name, _)| name.to_string_lossy().into_owned())
            .filter(|name| prefixes.iter().any(|prefix| name.starts_with(prefix)))
            .collect();
        if let Some(tap) = &self.tap {
            tap.push(
                "",
                reads::prefixed(names.iter().map(String::as_str), prefixes),
            );
        }
        Ok(names)
    }

    /// The names in this directory, sorted, each with its kind as the listing gives it
    /// (`None` when the filesystem does not say: ask [`SafeDir::kind`]). A kind is what the
    /// entry was when listed; anything read afterwards is still checked when it is opened.
    pub fn list_kinds(&self) -> Result<Vec<(OsString, Option<FileKind>)>> {
        // A folder only clawmd writes counts by its identity once settled, else by what the
        // listing found.
        let settled = self.settled_identity();
        let names = self.read_entries();
        self.logged("", names, |names| match settled {
            Some(identity) => Seen::Entries(identity),
            None => reads::listing(names),
        })
    }

    pub(super) fn read_entries(&self) -> Result<Vec<(OsString, Option<FileKind>)>> {
        // The listing reads this very descriptor (no second open of the folder): rewind it
        // when it was listed before.
        if self.listed.replace(true) {
            rustix::fs::seek(&self.fd, rustix::fs::SeekFrom::Start(0))
                .map_err(|err| FsError::io("list", &self.path, err))?;
        }
        let mut buf = Vec::with_capacity(8192);
        let mut dir = rustix::fs::RawDir::new(&self.fd, buf.spare_capacity_mut());
        let mut names = Vec::new();
        while let Some(entry) = dir.next() {
            let entry = entry.map_err(|err| FsError::io("list", &self.path, err))?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let kind = FileKind::from_dirent(entry.file_type());
            names.push((OsString::from_vec(name.to_vec()), kind));
        }
        names.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(names)
    }
}
