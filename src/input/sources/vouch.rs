//! What a long-lived holder of the shared sources (`clawmd serve`) knows has not changed since
//! it last replayed a part of the sources' record ([`super::record::Proof`]): the kernel
//! watches every path the part read and every folder above it (inotify), so a part replayed
//! once need not be replayed at every spawn while nothing it read has changed.
//!
//! A part is vouched for only when every path it read is absolute, holds no symbolic link in
//! any of its components (a link's target folders would change what the path names unseen),
//! and lies on a local filesystem whose changes the kernel reports (ext2/3/4, XFS, Btrfs,
//! tmpfs, overlayfs; a network or userspace filesystem changed from elsewhere reports nothing). The
//! watches are added before the part is replayed, so a change made while it is replayed is
//! reported after it; a path watched since the last change counted keeps its watches and is
//! not walked again when a lapsed part is armed anew. What counts as a change: anything done to a file read (written, its
//! attributes or links changed, removed, renamed), an entry added, removed or renamed in a
//! folder read whole, and, in each folder above a path, anything done to the entry the path
//! goes through; an overflow of the kernel's queue counts as a change of everything. Any change
//! drops every part vouched for (they are replayed again at the next spawn that needs them).
//!
//! What the kernel does not report (a file changed through a memory map, a filesystem mounted
//! over a folder) is caught by the replay every part is due after [`VOUCH_FOR`] anyway.

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;

use super::host_reads::{PartReads, Probe};
use crate::disk::reads::Root;

/// How long a part stays vouched for without being replayed, whatever the kernel reported:
/// the most a change it does not report (see the module docs) goes unseen.
pub const VOUCH_FOR: Duration = Duration::from_secs(1);

/// The most watches one holder adds (each folder and file once); past it, parts are replayed.
const MAX_WATCHES: usize = 4096;

/// The most events one look at the queue reads: events that keep coming as fast as they are
/// read (a folder above the deployment busy with entries coming and going) count as a change
/// rather than hold the spawn.
const MAX_EVENTS: usize = 4096;

/// What is watched on a file read.
const FILE_EVENTS: WatchFlags = WatchFlags::MODIFY
    .union(WatchFlags::ATTRIB)
    .union(WatchFlags::CLOSE_WRITE)
    .union(WatchFlags::DELETE_SELF)
    .union(WatchFlags::MOVE_SELF)
    .union(WatchFlags::MASK_ADD);

/// What is watched on a folder: its entries coming and going, and the folder itself. Not
/// what is written in the files in it: a file read has a watch of its own, and a folder above
/// a path may hold files written all the time (a log beside the deployment).
const FOLDER_EVENTS: WatchFlags = WatchFlags::CREATE
    .union(WatchFlags::DELETE)
    .union(WatchFlags::MOVED_FROM)
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::ATTRIB)
    .union(WatchFlags::DELETE_SELF)
    .union(WatchFlags::MOVE_SELF)
    .union(WatchFlags::MASK_ADD);

/// Filesystems whose changes the kernel reports to inotify whoever makes them on this machine
/// (`statfs`'s `f_type`): ext2/3/4, XFS, Btrfs, tmpfs, and overlayfs (a container's own
/// root, changed through its mount).
const LOCAL_FILESYSTEMS: [i64; 5] = [0xEF53, 0x5846_5342, 0x9123_683E, 0x0102_1994, 0x794C_7630];

/// The parts vouched for and the watches that vouch for them (see the module docs). Only
/// a holder that answers many runs makes one ([`Vouchers::enabled`]); the default vouches
/// for nothing and watches nothing.
#[derive(Debug, Default)]
pub struct Vouchers(Option<Mutex<Watching>>);

#[derive(Debug)]
struct Watching {
    /// `None` once inotify could not be had: nothing is vouched for then.
    fd: Option<OwnedFd>,
    /// Which events of each watch count as a change.
    rules: HashMap<i32, Rule>,
    /// Every change seen so far (a part is vouched for only when none came while it was
    /// replayed).
    changes: u64,
    /// Each part vouched for, by its item: its bytes in the record and when it was replayed.
    vouched: HashMap<Option<String>, (Vec<u8>, Instant)>,
    /// The paths whose watches were all added since the last change counted: a part armed
    /// again (its vouch lapsed, [`VOUCH_FOR`]) adds none for them, as nothing they go through
    /// has changed since.
    watched: HashSet<PathBuf>,
}

/// Which events of a watch count as a change.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Rule {
    /// Every one (a file read, a folder read whole).
    Any,
    /// Those about these entries of the folder, or about the folder itself.
    Entries(HashSet<OsString>),
}

/// A part's watches, added before it was replayed: the changes seen then.
#[derive(Debug, Clone, Copy)]
pub struct Armed(u64);

impl Vouchers {
    /// Vouchers that watch (for a holder that answers many runs).
    pub fn enabled() -> Vouchers {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)
            .inspect_err(|err| tracing::debug!(%err, "no inotify: every part is replayed"))
            .ok();
        Vouchers(Some(Mutex::new(Watching {
            fd,
            rules: HashMap::new(),
            changes: 0,
            vouched: HashMap::new(),
            watched: HashSet::new(),
        })))
    }

    fn watching(&self) -> Option<std::sync::MutexGuard<'_, Watching>> {
        let watching = self.0.as_ref()?.lock().unwrap_or_else(|p| p.into_inner());
        watching.fd.is_some().then_some(watching)
    }

    /// Reads the changes the kernel reported so far: [`Vouchers::vouched`] answers as of
    /// this moment.
    pub fn look(&self) {
        if let Some(mut watching) = self.watching() {
            watching.drain();
        }
    }

    /// Whether the part of `item` written as `bytes` in the record was replayed less than
    /// [`VOUCH_FOR`] ago and nothing it read had changed at the last [`Vouchers::look`] (or
    /// [`Vouchers::arm`], [`Vouchers::vouch`]): a caller looks once as a request comes in,
    /// then asks for each part.
    pub fn vouched(&self, item: &Option<String>, bytes: &[u8]) -> bool {
        let Some(watching) = self.watching() else {
            return false;
        };
        watching
            .vouched
            .get(item)
            .is_some_and(|(vouched, when)| vouched == bytes && when.elapsed() < VOUCH_FOR)
    }

    /// Watches everything `part` reads, before it is replayed; `None` when it cannot be
    /// vouched for (see the module docs).
    pub fn arm(&self, part: &PartReads) -> Option<Armed> {
        self.arm_paths(read_paths(part)?)
    }

    /// [`Vouchers::arm`] for what reads `paths` (absolute host paths, looked at following no
    /// link): the holder's own files, say, whose identities it checks at every request.
    pub fn arm_paths(&self, paths: impl IntoIterator<Item = PathBuf>) -> Option<Armed> {
        let mut watching = self.watching()?;
        for path in paths {
            if !watching.watched.contains(&path) {
                watching.watch_path(&path)?;
                watching.watched.insert(path);
            }
        }
        watching.drain();
        Some(Armed(watching.changes))
    }

    /// Vouches for the part of `item` written as `bytes`, found the same by a replay made
    /// after it was `armed`, unless something changed since.
    pub fn vouch(&self, item: &Option<String>, bytes: &[u8], armed: Armed) {
        let Some(mut watching) = self.watching() else {
            return;
        };
        watching.drain();
        if watching.changes == armed.0 {
            let now = Instant::now();
            watching.vouched.insert(item.clone(), (bytes.to_vec(), now));
        }
    }
}

impl Watching {
    /// Reads every queued event; one that counts drops every part vouched for.
    fn drain(&mut self) {
        let Some(fd) = &self.fd else { return };
        let mut buffer = [MaybeUninit::<u8>::uninit(); 4096];
        let mut reader = inotify::Reader::new(fd, &mut buffer);
        let mut changed = false;
        let mut ignored = Vec::new();
        for events in 0.. {
            if events == MAX_EVENTS {
                changed = true; // still coming
                break;
            }
            let event = match reader.next() {
                Ok(event) => event,
                Err(Errno::INTR) => continue,
                Err(Errno::AGAIN) => break,
                // Events that cannot be read may be changes.
                Err(_) => {
                    changed = true;
                    break;
                }
            };
            let flags = event.events();
            if flags.intersects(ReadFlags::QUEUE_OVERFLOW | ReadFlags::IGNORED) {
                changed = true;
                if flags.contains(ReadFlags::IGNORED) {
                    ignored.push(event.wd());
                }
                continue;
            }
            let name = event
                .file_name()
                .map(|name| OsStr::from_bytes(name.to_bytes()));
            changed |= match self.rules.get(&event.wd()) {
                None => false,
                Some(Rule::Any) => true,
                // An event about the folder itself has no name.
                Some(Rule::Entries(names)) => name.is_none_or(|name| names.contains(name)),
            };
        }
        for wd in ignored {
            self.rules.remove(&wd);
        }
        if changed {
            self.changes += 1;
            self.vouched.clear();
            self.watched.clear();
        }
    }

    /// Watches `path` (a file or folder, or nothing) and, in every folder above it, the entry
    /// it goes through; `None` when it cannot be vouched for.
    fn watch_path(&mut self, path: &Path) -> Option<()> {
        if !path.is_absolute()
            || path
                .components()
                .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
        {
            return None;
        }
        let mut folder = PathBuf::from("/");
        let names: Vec<&OsStr> = path
            .components()
            .filter_map(|c| match c {
                Component::Normal(name) => Some(name),
                _ => None,
            })
            .collect();
        local_filesystem(&folder)?;
        for (index, name) in names.iter().enumerate() {
            self.watch(
                &folder,
                FOLDER_EVENTS,
                Rule::Entries(HashSet::from([name.into()])),
            )?;
            let next = folder.join(name);
            let last = index + 1 == names.len();
            match rustix::fs::lstat(&next) {
                Err(Errno::NOENT) => return Some(()), // missing: its folder's entry is watched
                Err(_) => return None,
                Ok(stat) => match rustix::fs::FileType::from_raw_mode(stat.st_mode) {
                    rustix::fs::FileType::Directory => {
                        local_filesystem(&next)?;
                        if last {
                            self.watch(&next, FOLDER_EVENTS, Rule::Any)?;
                        }
                    }
                    rustix::fs::FileType::RegularFile if last => {
                        local_filesystem(&next)?; // a file bound from elsewhere, say
                        self.watch(&next, FILE_EVENTS, Rule::Any)?;
                    }
                    _ => return None, // a link, or something else
                },
            }
            folder = next;
        }
        Some(())
    }

    /// Adds (or widens) the watch of `path`, counting `rule`'s events as changes.
    fn watch(&mut self, path: &Path, flags: WatchFlags, rule: Rule) -> Option<()> {
        let fd = self.fd.as_ref()?;
        if self.rules.len() >= MAX_WATCHES {
            return None;
        }
        let wd = inotify::add_watch(fd, path, flags | WatchFlags::DONT_FOLLOW).ok()?;
        let merged = match (self.rules.remove(&wd), rule) {
            (Some(Rule::Any), _) | (_, Rule::Any) => Rule::Any,
            (Some(Rule::Entries(mut had)), Rule::Entries(more)) => {
                had.extend(more);
                Rule::Entries(had)
            }
            (None, rule) => rule,
        };
        self.rules.insert(wd, merged);
        Some(())
    }
}

/// Whether `path` lies on a filesystem whose changes the kernel reports ([`LOCAL_FILESYSTEMS`]).
fn local_filesystem(path: &Path) -> Option<()> {
    let stat = rustix::fs::statfs(path).ok()?;
    #[allow(
        clippy::unnecessary_cast,
        reason = "f_type's type differs between targets"
    )]
    let kind = stat.f_type as i64;
    LOCAL_FILESYSTEMS.contains(&kind).then_some(())
}

/// Every host path `part` reads (`None`: one of its reads is not by a host path).
fn read_paths(part: &PartReads) -> Option<Vec<PathBuf>> {
    let mut paths = Vec::new();
    for probe in &part.probes {
        paths.push(match probe {
            Probe::File { path, .. }
            | Probe::Kind { path, .. }
            | Probe::Listing { path, .. }
            | Probe::Link { path, .. } => path.clone(),
        });
    }
    for (mounts, reads) in &part.views {
        paths.extend(mounts.iter().map(|mount| mount.host.clone()));
        for read in reads {
            let Root::Mount(index) = read.root else {
                return None;
            };
            let mount = mounts.get(usize::from(index))?;
            let mut path = mount.host.clone();
            for name in (read.dir.split('/')).chain([read.name.as_str()]) {
                if !name.is_empty() {
                    path.push(name);
                }
            }
            paths.push(path);
        }
    }
    paths.sort();
    paths.dedup();
    Some(paths)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::sources::host_reads::HostLog;
    use std::os::unix::fs::{PermissionsExt, symlink};

    /// `vouchers` once they have read the kernel's reports, as a request starts.
    fn looked(vouchers: &Vouchers) -> &Vouchers {
        vouchers.look();
        vouchers
    }

    const ITEM: &str = "skill:x";

    /// A change made to what a part read, named.
    type Change<'a> = (&'a str, Box<dyn Fn() + 'a>);

    /// The part of the reads `read` makes for the item [`ITEM`].
    fn part_reading(read: impl Fn(&HostLog)) -> PartReads {
        let log = HostLog::new();
        log.begin_item(ITEM);
        read(&log);
        log.end_item();
        let reads = log.kept().expect("the reads are kept");
        reads
            .parts
            .into_iter()
            .find(|part| part.item.is_some())
            .unwrap()
    }

    fn item() -> Option<String> {
        Some(ITEM.to_owned())
    }

    /// A folder holding `a.md`, and the part that reads it.
    fn one_file_read() -> (tempfile::TempDir, PathBuf, PartReads) {
        let root = tempfile::tempdir().unwrap();
        let file = root.path().join("a.md");
        std::fs::write(&file, "A").unwrap();
        let part = part_reading(|log| {
            log.read_file(&file, 1024).unwrap();
        });
        (root, file, part)
    }

    /// Arms `part`, vouches for it as replayed, and checks it is vouched for.
    fn vouch(vouchers: &Vouchers, part: &PartReads) {
        let armed = vouchers
            .arm(part)
            .expect("a part on a local filesystem is armed");
        vouchers.vouch(&item(), b"part", armed);
        assert!(looked(vouchers).vouched(&item(), b"part"));
    }

    #[test]
    fn a_part_is_vouched_for_as_of_the_last_look() {
        let (_root, file, part) = one_file_read();
        let vouchers = Vouchers::enabled();
        vouch(&vouchers, &part);
        std::fs::write(&file, "B").unwrap();
        // Until the next look (the next request), the answer is the one of the last look.
        assert!(vouchers.vouched(&item(), b"part"));
        assert!(!looked(&vouchers).vouched(&item(), b"part"));
    }

    #[test]
    fn a_part_stays_vouched_for_until_something_it_read_changes() {
        let root = tempfile::tempdir().unwrap();
        let skill = root.path().join("skills/x");
        std::fs::create_dir_all(&skill).unwrap();
        let file = skill.join("instructions.md");
        std::fs::write(&file, "X").unwrap();
        let missing = skill.join("missing.md");
        let part = part_reading(|log| {
            log.read_file(&file, 1024).unwrap();
            log.kind(&missing, false).unwrap();
        });
        let vouchers = Vouchers::enabled();
        vouch(&vouchers, &part);
        // What the part did not read: a file beside it, a folder and a file above it.
        std::fs::write(skill.join("other.md"), "O").unwrap();
        std::fs::write(root.path().join("unrelated.md"), "U").unwrap();
        std::fs::create_dir(root.path().join("skills/y")).unwrap();
        let log = root.path().join("busy.log");
        std::fs::write(&log, "start\n").unwrap();
        for _ in 0..100 {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
            f.write_all(b"a line\n").unwrap();
        }
        assert!(
            looked(&vouchers).vouched(&item(), b"part"),
            "an unrelated change"
        );
        assert!(
            !looked(&vouchers).vouched(&item(), b"other bytes"),
            "another part"
        );
        let aside = root.path().join("aside");
        let changes: Vec<Change<'_>> = vec![
            (
                "the file written in place",
                Box::new(|| {
                    use std::io::Write;
                    let mut f = std::fs::OpenOptions::new()
                        .append(true)
                        .open(&file)
                        .unwrap();
                    f.write_all(b"Y").unwrap();
                }),
            ),
            (
                "the file replaced by a rename",
                Box::new(|| {
                    std::fs::write(&aside, "Z").unwrap();
                    std::fs::rename(&aside, &file).unwrap();
                }),
            ),
            (
                "the file's mode changed",
                Box::new(|| {
                    let mode = std::fs::Permissions::from_mode(0o600);
                    std::fs::set_permissions(&file, mode).unwrap();
                }),
            ),
            (
                "the missing file made",
                Box::new(|| std::fs::write(&missing, "M").unwrap()),
            ),
            (
                "the missing file removed again",
                Box::new(|| std::fs::remove_file(&missing).unwrap()),
            ),
            (
                "its folder renamed and back",
                Box::new(|| {
                    std::fs::rename(&skill, &aside).unwrap();
                    std::fs::rename(&aside, &skill).unwrap();
                }),
            ),
            (
                "a folder above renamed and back",
                Box::new(|| {
                    let skills = root.path().join("skills");
                    std::fs::rename(&skills, &aside).unwrap();
                    std::fs::rename(&aside, &skills).unwrap();
                }),
            ),
        ];
        for (what, change) in changes {
            vouch(&vouchers, &part);
            change();
            assert!(
                !looked(&vouchers).vouched(&item(), b"part"),
                "{what}: still vouched for"
            );
        }
    }

    #[test]
    fn more_events_than_one_look_reads_count_as_a_change() {
        let (root, _file, part) = one_file_read();
        let vouchers = Vouchers::enabled();
        vouch(&vouchers, &part);
        // Entries of other names come and go beside the file, more than one look reads.
        for n in 0..MAX_EVENTS {
            std::fs::write(root.path().join(format!("other-{n}")), "").unwrap();
        }
        assert!(!looked(&vouchers).vouched(&item(), b"part"));
        vouch(&vouchers, &part);
        assert!(
            looked(&vouchers).vouched(&item(), b"part"),
            "once the queue is read"
        );
    }

    #[test]
    fn a_folder_read_whole_is_unvouched_by_any_new_entry() {
        let root = tempfile::tempdir().unwrap();
        let skills = root.path().join("skills");
        std::fs::create_dir(&skills).unwrap();
        let part = part_reading(|log| {
            log.list(&skills).unwrap();
        });
        let vouchers = Vouchers::enabled();
        vouch(&vouchers, &part);
        std::fs::create_dir(skills.join("new")).unwrap();
        assert!(!looked(&vouchers).vouched(&item(), b"part"));
    }

    #[test]
    fn a_path_through_a_link_is_never_vouched_for() {
        let root = tempfile::tempdir().unwrap();
        let real = root.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::fs::write(real.join("a.md"), "A").unwrap();
        symlink(&real, root.path().join("link")).unwrap();
        symlink(real.join("a.md"), root.path().join("b.md")).unwrap();
        let vouchers = Vouchers::enabled();
        for path in [root.path().join("link/a.md"), root.path().join("b.md")] {
            let part = part_reading(|log| {
                log.read_file(&path, 1024).unwrap();
            });
            assert!(vouchers.arm(&part).is_none(), "{}", path.display());
        }
    }

    #[test]
    fn a_vouch_lapses_after_its_time_and_the_default_vouches_for_nothing() {
        let (_root, _file, part) = one_file_read();
        let vouchers = Vouchers::enabled();
        vouch(&vouchers, &part);
        lapse(&vouchers);
        assert!(!looked(&vouchers).vouched(&item(), b"part"));
        let default = Vouchers::default();
        assert!(default.arm(&part).is_none());
        assert!(!looked(&default).vouched(&item(), b"part"));
    }

    /// Lets the vouch for [`ITEM`] lapse, as [`VOUCH_FOR`] after it was made.
    fn lapse(vouchers: &Vouchers) {
        let mut watching = vouchers.watching().unwrap();
        let (_, when) = watching.vouched.get_mut(&item()).unwrap();
        *when = Instant::now() - VOUCH_FOR;
    }

    #[test]
    fn a_lapsed_part_is_armed_again_without_new_watches_until_something_changes() {
        let (root, file, part) = one_file_read();
        let vouchers = Vouchers::enabled();
        vouch(&vouchers, &part);
        let watches = vouchers.watching().unwrap().rules.len();
        lapse(&vouchers);
        assert!(!looked(&vouchers).vouched(&item(), b"part"));
        vouch(&vouchers, &part);
        assert_eq!(vouchers.watching().unwrap().rules.len(), watches);
        // The file replaced by another (a rename over it, as an editor saves): a change, so
        // the next arming watches the new file, and a write to it unvouches the part.
        let new = root.path().join("a.md.new");
        std::fs::write(&new, "C").unwrap();
        std::fs::rename(&new, &file).unwrap();
        assert!(!looked(&vouchers).vouched(&item(), b"part"));
        assert!(vouchers.watching().unwrap().watched.is_empty());
        vouch(&vouchers, &part);
        std::fs::write(&file, "D").unwrap();
        assert!(!looked(&vouchers).vouched(&item(), b"part"));
    }

    #[test]
    fn a_change_while_a_part_is_replayed_keeps_it_unvouched() {
        let (_root, file, part) = one_file_read();
        let vouchers = Vouchers::enabled();
        let armed = vouchers.arm(&part).unwrap();
        std::fs::write(&file, "changed after it was armed").unwrap();
        vouchers.vouch(&item(), b"part", armed);
        assert!(!looked(&vouchers).vouched(&item(), b"part"));
    }
}
