//! Whether a log of reads ([`crate::disk::reads`]) finds the same again: each read made again, the
//! way it was made, through the folders it was made in (never through a link), so that a
//! run whose reads all hold need not look at a group again.

use std::collections::HashMap;
use std::ffi::OsString;

use super::safe_dir::file_seen;
use super::{Result, SafeDir};
use crate::disk::reads::{self, Root, Seen};
use crate::file_kind::FileKind;

/// Whether every read of `log` finds again what it found ([`crate::disk::reads`]), reading through
/// the folders `open_root` opens (the group folder, its bind folder) and the folders opened
/// from them (never through a link), each the way the read was made. Anything that cannot
/// be read again counts as a change (`None`). `Some(true)`: a file was found the same by its
/// bytes though its identity would now stand for them ([`reads::settled`]), so the reads are
/// worth making again once, that the runs to come do not read that file again.
pub fn replay(
    log: &[reads::Read],
    open_root: impl Fn(Root) -> Result<Option<SafeDir>>,
) -> Option<bool> {
    let mut dirs: HashMap<(Root, String), Option<SafeDir>> = HashMap::new();
    // The folders listed again by this replay and found as they were: what each holds now.
    let mut listed: HashMap<(Root, String), Entries> = HashMap::new();
    let mut settled_since = false;
    for read in log {
        if implied_by_another_read(read, log) {
            continue;
        }
        replay_dir(&mut dirs, read.root, &read.dir, &open_root);
        let dir = dirs
            .get(&(read.root, read.dir.clone()))
            .and_then(Option::as_ref);
        let holds = match (dir, &read.seen) {
            (dir, Seen::Folder(present)) if read.dir.is_empty() && read.name.is_empty() => {
                (dir.is_some() == *present).then_some(false)
            }
            (None, _) => None,
            // A folder found is kept for the reads in it.
            (Some(dir), Seen::Folder(present)) => match dir.open_child(&read.name, false) {
                Ok(child) => {
                    let found = child.is_some() == *present;
                    let path = reads::join(&read.dir, &read.name);
                    dirs.entry((read.root, path)).or_insert(child);
                    found.then_some(false)
                }
                Err(_) => None,
            },
            (Some(dir), Seen::Listing(_)) if read.name.is_empty() => listed_again(dir, &read.seen)
                .map(|entries| {
                    listed.insert((read.root, read.dir.clone()), entries);
                    false
                }),
            (Some(dir), seen) => match listed.get(&(read.root, read.dir.clone())) {
                Some(entries) => holds_in_listing(entries, dir, &read.name, seen),
                None => holds_again(dir, &read.name, seen),
            },
        };
        let Some(settled) = holds else {
            tracing::trace!(?read, "a read finds something else");
            return None;
        };
        settled_since |= settled;
    }
    Some(settled_since)
}

/// Whether what `read` found is implied by another read of the same name in `log` that
/// replaying tells as much: a regular file's kind by a read of its bytes or identity (which
/// holds its type), a folder's kind by the folder opened (never through a link).
fn implied_by_another_read(read: &reads::Read, log: &[reads::Read]) -> bool {
    let same_name = |other: &&reads::Read| {
        (other.root, &other.dir, &other.name) == (read.root, &read.dir, &read.name)
    };
    match read.seen {
        Seen::Kind(Some(FileKind::File)) => log.iter().filter(same_name).any(|other| {
            matches!(
                other.seen,
                Seen::File {
                    digest: Some(_),
                    ..
                } | Seen::File {
                    identity: Some(_),
                    ..
                } | Seen::Identity {
                    identity: Some(_),
                    ..
                }
            )
        }),
        Seen::Kind(Some(FileKind::Dir)) => {
            (log.iter().filter(same_name)).any(|other| other.seen == Seen::Folder(true))
        }
        _ => false,
    }
}

/// A folder's entries, each name with its kind when the listing names it, sorted by name.
type Entries = Vec<(OsString, Option<FileKind>)>;

/// What `dir` holds now, when it is what the listing `seen` found.
fn listed_again(dir: &SafeDir, seen: &Seen) -> Option<Entries> {
    let entries = dir.list_kinds().ok()?;
    (reads::listing(&entries) == *seen).then_some(entries)
}

/// [`holds_again`] in a folder this replay has just listed (`entries`): a name it does not
/// hold is missing, and one whose kind it names is of that kind, without asking the folder
/// again (what an agent adds or removes after the listing, it may as well add after the
/// look: the next spawn finds it).
fn holds_in_listing(
    entries: &[(OsString, Option<FileKind>)],
    dir: &SafeDir,
    name: &str,
    seen: &Seen,
) -> Option<bool> {
    let listed = entries
        .binary_search_by(|(entry, _)| entry.as_encoded_bytes().cmp(name.as_bytes()))
        .ok()
        .map(|index| entries[index].1);
    match (seen, listed) {
        (Seen::Kind(kind), None) => (kind.is_none()).then_some(false),
        (Seen::Kind(kind), Some(Some(found))) => (*kind == Some(found)).then_some(false),
        (Seen::Folder(false), None) => Some(false),
        _ => holds_again(dir, name, seen),
    }
}

/// Opens (once) the folder `dir` of `root` and its parents for [`replay`].
fn replay_dir(
    dirs: &mut HashMap<(Root, String), Option<SafeDir>>,
    root: Root,
    dir: &str,
    open_root: &impl Fn(Root) -> Result<Option<SafeDir>>,
) {
    if dirs.contains_key(&(root, dir.to_owned())) {
        return;
    }
    let opened = if dir.is_empty() {
        open_root(root).ok().flatten()
    } else {
        let (parent, name) = dir.rsplit_once('/').unwrap_or(("", dir));
        replay_dir(dirs, root, parent, open_root);
        dirs.get(&(root, parent.to_owned()))
            .and_then(Option::as_ref)
            .and_then(|parent| parent.open_child(name, false).ok().flatten())
    };
    dirs.insert((root, dir.to_owned()), opened);
}

/// Whether reading `name` in `dir` the way `seen` was read finds the same again (a read that
/// fails finds something else). A file kept with its identity and found with the same is not
/// read again.
fn holds_again(dir: &SafeDir, name: &str, seen: &Seen) -> Option<bool> {
    let same = match seen {
        Seen::Folder(present) => dir
            .open_child(name, false)
            .is_ok_and(|found| found.is_some() == *present),
        Seen::Kind(kind) => dir.kind(name).is_ok_and(|found| found == *kind),
        Seen::Size(size) => dir.size(name).is_ok_and(|found| found == *size),
        Seen::Link(digest) => dir
            .read_link(name)
            .is_ok_and(|target| reads::digest(target.as_os_str().as_encoded_bytes()) == *digest),
        // Kept by its identity only where that stands for its bytes (`file_seen`): then the
        // same identity is the same bytes.
        Seen::File {
            limit,
            digest,
            identity,
        } => {
            if identity.is_some() && dir.identity(name).ok().flatten() == *identity {
                return Some(false);
            }
            // Read again; would its identity stand for its bytes now?
            let (read, opened) = dir.read_as_found(name, *limit, true).ok()?;
            return match file_seen(*limit, &read, opened.as_ref()) {
                Some(Seen::File {
                    digest: again,
                    identity: now,
                    ..
                }) if again == *digest => Some(now.is_some()),
                _ => None,
            };
        }
        Seen::Identity { identity, .. } => dir.identity(name).is_ok_and(|found| found == *identity),
        Seen::Listing(_) => dir
            .list_kinds()
            .is_ok_and(|entries| reads::listing(&entries) == *seen),
        Seen::Entries(identity) => {
            name.is_empty()
                && rustix::fs::fstat(&dir.fd).is_ok_and(|stat| reads::identity(&stat) == *identity)
        }
        Seen::Prefixed { prefixes, .. } => {
            let prefixes: Vec<&str> = prefixes.iter().map(String::as_str).collect();
            dir.names_starting_with(&prefixes).is_ok_and(|names| {
                reads::prefixed(names.iter().map(String::as_str), &prefixes) == *seen
            })
        }
        // Only a container view logs these, and replays them itself
        // (`MountedFs::holds`): a folder read never finds one.
        Seen::Entry(_) => false,
    };
    same.then_some(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::fsops::testing::{dir, fifo};

    #[test]
    fn a_kind_read_left_to_the_content_read_after_it_still_decides() {
        let (temp, dir) = dir();
        dir.write_file("a.md", b"text").unwrap();
        let read = |seen| reads::Read {
            root: Root::Group,
            dir: String::new(),
            name: "a.md".to_owned(),
            seen,
        };
        let log = [
            read(Seen::Kind(Some(FileKind::File))),
            read(Seen::File {
                limit: 100,
                digest: Some(reads::digest(b"text")),
                identity: None,
            }),
        ];
        let holds = || replay(&log, |_| SafeDir::open(temp.path()).map(Some)).is_some();
        assert!(holds());
        std::fs::remove_file(temp.path().join("a.md")).unwrap();
        assert!(!holds(), "missing");
        fifo(&temp.path().join("a.md"));
        assert!(!holds(), "a FIFO");
    }

    /// A folder listed again answers the kinds asked in it: a name the listing holds is
    /// found whatever the look said of it then (a look that raced the agent: the listing
    /// taken with the name, the kind asked once it was gone), a missing one is missing.
    #[test]
    fn kinds_asked_in_a_listed_folder_are_answered_by_what_it_holds_now() {
        let (temp, dir) = dir();
        dir.write_file("a.md", b"text").unwrap();
        std::fs::create_dir(temp.path().join("sub")).unwrap();
        let read = |name: &str, seen| reads::Read {
            root: Root::Group,
            dir: String::new(),
            name: name.to_owned(),
            seen,
        };
        let listing = reads::listing(&dir.list_kinds().unwrap());
        let log = |kind_of_a: Option<FileKind>, kind_of_x: Option<FileKind>| {
            vec![
                read("", listing.clone()),
                read("a.md", Seen::Kind(kind_of_a)),
                read("sub", Seen::Kind(Some(FileKind::Dir))),
                read("x", Seen::Kind(kind_of_x)),
                read("y", Seen::Folder(false)),
            ]
        };
        let holds =
            |log: &[reads::Read]| replay(log, |_| SafeDir::open(temp.path()).map(Some)).is_some();
        assert!(holds(&log(Some(FileKind::File), None)));
        assert!(!holds(&log(None, None)), "a.md said missing, listed");
        assert!(
            !holds(&log(Some(FileKind::Dir), None)),
            "a.md said a folder"
        );
        assert!(
            !holds(&log(Some(FileKind::File), Some(FileKind::File))),
            "x said there"
        );
        std::fs::write(temp.path().join("x"), b"new").unwrap();
        assert!(
            !holds(&log(Some(FileKind::File), None)),
            "x made after the look"
        );
    }
}
