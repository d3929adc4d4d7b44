//! What a look at a group read, so that a later run can tell, without looking the same way
//! again, whether any of it changed.
//!
//! `compose` plans a group from what it reads in the group's folder and in clawmd's state
//! folder, then diffs the plan against them. Every read made through a folder that carries a
//! [`Tap`] ([`crate::disk::fsops::SafeDir::log_reads_in`]) is kept in the look's [`ReadLog`], in
//! order, as what it found ([`Seen`]). When a group is found exactly as planned, its record
//! keeps that log with the report ([`crate::plan::delivery::verdicts`]); the next run replays the
//! reads ([`crate::disk::fsops::replay`]) and, when every one finds what it found then (and the
//! record's key says the shared sources, the settings and the binary are the same), the group
//! is as it was: its report is the recorded one, without planning, diffing or loading again.
//!
//! What a read keeps depends on who writes the folder ([`Watch`]): in the group folder, which
//! the agent writes, a file read keeps its content's SHA-256 (it is read again and compared),
//! and its identity too once its last change is [`SETTLED`] old; in clawmd's own state folder,
//! which nothing else writes, a file read keeps its identity (device, inode, size, modification
//! and change times), so that a no-op does not read the composed documents again. A listing
//! keeps the SHA-256 of its names and kinds, or, in the state folder once settled, the
//! folder's identity ([`Seen::Entries`]).

use std::ffi::OsString;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::file_kind::FileKind;
use crate::key_hash::KeyHasher;

/// Which folder a read's path starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Root {
    /// The group folder.
    Group,
    /// The group's bind folder in clawmd's state (`<state>/binds/<group>`).
    Bind,
    /// The source of a mount of the group's container view, by its place in the view's
    /// table ([`crate::runtime::mounted::MountedFs::log_reads_in`]).
    Mount(u16),
}

/// How a folder's file reads are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watch {
    /// By content (a folder the agent can write).
    Content,
    /// By identity (clawmd's own folders).
    Identity,
}

/// One read: in the folder `dir` (relative to `root`, `""` for the root itself), of `name`
/// (`""` for the folder itself), and what it found.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Read {
    /// Where the path starts.
    pub root: Root,
    /// The folder, relative to the root, `/`-separated.
    pub dir: String,
    /// The name read in it.
    pub name: String,
    /// What the read found.
    pub seen: Seen,
}

impl Read {
    /// Whether the root folder itself was there.
    pub fn root(root: Root, present: bool) -> Read {
        Read {
            root,
            dir: String::new(),
            name: String::new(),
            seen: Seen::Folder(present),
        }
    }
}

/// What a read found.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Seen {
    /// A folder opened (`true`) or missing.
    Folder(bool),
    /// The kind of an entry (`None`: missing).
    Kind(Option<FileKind>),
    /// The size of an entry (0 when missing).
    Size(u64),
    /// A symlink's target, as a SHA-256.
    Link(String),
    /// A regular file read with a size limit: the SHA-256 of its bytes, `None` when missing,
    /// [`TOO_LARGE`] when over the limit; and its identity when it was settled ([`settled`]):
    /// a file found again with that identity holds the same bytes (every write changes its
    /// change time, which nobody can set back), so it is not read again.
    File {
        /// The limit of the read.
        limit: u64,
        /// What was read.
        digest: Option<String>,
        /// Its identity, when its last change was well before the read.
        identity: Option<[i64; 8]>,
    },
    /// A regular file of clawmd's own folders read with a size limit: its identity (`None`
    /// when missing).
    Identity {
        /// The limit of the read.
        limit: u64,
        /// Device, inode, size, mode, modification and change times (seconds, nanoseconds).
        identity: Option<[i64; 8]>,
    },
    /// A listing: the SHA-256 of its names and kinds.
    Listing(String),
    /// A listing of a folder of clawmd's own (the state folder's), by the folder's identity,
    /// taken before it was listed and settled ([`settled`]): every entry made, removed or
    /// renamed in it changes its change time.
    Entries([i64; 8]),
    /// The names of a listing that start with one of `prefixes`: the SHA-256 of them, sorted
    /// (a reader that wants only those names leaves the record standing when others come).
    Prefixed {
        /// The prefixes asked for.
        prefixes: Vec<String>,
        /// What was found.
        digest: String,
    },
    /// An entry found by a lookup that does not follow a final link: its kind and size
    /// (`None`: missing).
    Entry(Option<(FileKind, u64)>),
}

/// What [`Seen::File`] holds for a file over the read's limit.
pub const TOO_LARGE: &str = "too-large";

/// The reads of one look at a group, in order.
#[derive(Debug, Default)]
pub struct ReadLog {
    /// The reads in order, and the hashes of them (a read is looked for in the list only
    /// when its hash is there).
    reads: Mutex<(Vec<Read>, std::collections::HashSet<u64>)>,
    /// Set when a read found something a log cannot keep (an error other than a missing
    /// entry, a name that is not UTF-8): no record is made from it.
    spoiled: std::sync::atomic::AtomicBool,
}

impl ReadLog {
    /// Adds a read (one made before, finding the same, is not added again: replaying it
    /// once tells as much).
    pub fn push(&self, read: Read) {
        let hash = crate::quick_hash::quick_hash(&read);
        let mut reads = self.lock();
        let (order, hashes) = &mut *reads;
        if hashes.insert(hash) || !order.contains(&read) {
            order.push(read);
        }
    }

    /// The reads so far.
    pub fn reads(&self) -> Vec<Read> {
        self.lock().0.clone()
    }

    /// Says that a read found something the log cannot keep.
    pub fn spoil(&self) {
        self.spoiled
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// The reads, unless one could not be kept ([`ReadLog::spoil`]).
    pub fn kept_reads(&self) -> Option<Vec<Read>> {
        (!self.spoiled.load(std::sync::atomic::Ordering::Relaxed)).then(|| self.reads())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (Vec<Read>, std::collections::HashSet<u64>)> {
        self.reads.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Where a folder's reads go: the log, the folder's place and how its file reads are kept.
#[derive(Debug, Clone)]
pub struct Tap {
    /// The log.
    pub log: Arc<ReadLog>,
    /// Where the folder's path starts.
    pub root: Root,
    /// The folder, relative to the root.
    pub dir: String,
    /// How its file reads are kept.
    pub watch: Watch,
}

impl Tap {
    /// Logs that `name` was found to be `seen`.
    pub fn push(&self, name: &str, seen: Seen) {
        self.log.push(Read {
            root: self.root,
            dir: self.dir.clone(),
            name: name.to_owned(),
            seen,
        });
    }

    /// The tap of the child folder `name`.
    pub fn child(&self, name: &str) -> Tap {
        Tap {
            dir: join(&self.dir, name),
            ..self.clone()
        }
    }
}

/// `dir/name` (`name` when `dir` is the root).
pub fn join(dir: &str, name: &str) -> String {
    match dir.is_empty() {
        true => name.to_owned(),
        false => format!("{dir}/{name}"),
    }
}

/// The lowercase hex SHA-256 of `bytes`.
pub fn digest(bytes: &[u8]) -> String {
    crate::safe_name::hex(&Sha256::digest(bytes))
}

/// What a listing of `entries` found.
pub fn listing(entries: &[(OsString, Option<FileKind>)]) -> Seen {
    Seen::Listing(listing_digest(entries))
}

/// The digest of a listing of `entries` (each name and kind, in order), in lowercase hex.
pub fn listing_digest(entries: &[(OsString, Option<FileKind>)]) -> String {
    let mut key = KeyHasher::new();
    for (name, kind) in entries {
        key.field(name.as_encoded_bytes());
        key.field(format!("{kind:?}").as_bytes());
    }
    crate::safe_name::hex(&key.finish())
}

/// What a listing of `names` found of the names that start with one of `prefixes`.
pub fn prefixed<'a>(names: impl IntoIterator<Item = &'a str>, prefixes: &[&str]) -> Seen {
    let mut found: Vec<&str> = names
        .into_iter()
        .filter(|name| prefixes.iter().any(|prefix| name.starts_with(prefix)))
        .collect();
    found.sort_unstable();
    let mut key = KeyHasher::new();
    for name in found {
        key.field(name.as_bytes());
    }
    Seen::Prefixed {
        prefixes: prefixes.iter().map(|p| (*p).to_owned()).collect(),
        digest: crate::safe_name::hex(&key.finish()),
    }
}

/// How long before a read a file's last change must be for its identity to stand for its
/// bytes: a write in the same tick of the kernel's clock as the read would leave the change
/// time as it was (the same race as git's "racy" index entries); two seconds is hundreds of
/// ticks.
pub const SETTLED: std::time::Duration = std::time::Duration::from_secs(2);

/// The identity of a file whose status is `stat`, when its last change is at least
/// [`SETTLED`] before `now` (else `None`: its bytes must be read again).
pub fn settled(stat: &rustix::fs::Stat, now: std::time::SystemTime) -> Option<[i64; 8]> {
    let since_epoch = now.duration_since(std::time::UNIX_EPOCH).ok()?;
    let changed = std::time::Duration::new(
        u64::try_from(stat.st_ctime).ok()?,
        u32::try_from(stat.st_ctime_nsec).ok()?,
    );
    (changed + SETTLED <= since_epoch).then(|| identity(stat))
}

/// Whether the file behind `fd` has no page dirty or under writeback, on a filesystem whose
/// writeback write-protects a page it cleans (ext2/3/4, XFS, Btrfs): then the next write to
/// the file, through `write` or through any shared mapping (which faults on the protected
/// page), stamps its change time, so the file's identity taken before this call stands for
/// the bytes read after it until it changes. A file with dirty pages may be written through
/// a mapping with its times as they were (the kernel stamps them at the first write to a
/// clean page only); tmpfs keeps no such account (its pages are never cleaned), a file on
/// DAX has no page cache, and a kernel without `cachestat(2)` (Linux 6.5) cannot say: `false`
/// for all three.
pub fn pages_clean(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    use rustix::fs::{AtFlags, StatxAttributes, StatxFlags};
    use std::os::fd::AsRawFd;
    /// `struct cachestat_range` and `struct cachestat` of `<linux/mman.h>`.
    #[repr(C)]
    struct Range {
        off: u64,
        len: u64,
    }
    #[repr(C)]
    #[derive(Default)]
    struct CacheStat {
        cache: u64,
        dirty: u64,
        writeback: u64,
        evicted: u64,
        recently_evicted: u64,
    }
    /// `cachestat`'s number in the generic system call table (x86_64 and aarch64 alike).
    const SYS_CACHESTAT: libc::c_long = 451;
    /// ext2/3/4, XFS, Btrfs (`statfs`'s `f_type`).
    const CLEANING_FILESYSTEMS: [i64; 3] = [0xEF53, 0x5846_5342, 0x9123_683E];
    #[allow(
        clippy::unnecessary_cast,
        reason = "f_type's type differs between targets"
    )]
    let on_cleaning_fs = rustix::fs::fstatfs(fd)
        .is_ok_and(|stat| CLEANING_FILESYSTEMS.contains(&(stat.f_type as i64)));
    // A file on DAX (persistent memory mapped straight in) has no page cache: `cachestat`
    // never counts its pages dirty, and a page mapped for writing stays so until `msync`.
    let dax = rustix::fs::statx(fd, "", AtFlags::EMPTY_PATH, StatxFlags::empty())
        .map_or(true, |statx| {
            statx.stx_attributes.contains(StatxAttributes::DAX)
        });
    if !on_cleaning_fs || dax {
        return false;
    }
    let range = Range { off: 0, len: 0 }; // 0: to the end of the file
    let mut stat = CacheStat::default();
    // SAFETY: `cachestat(fd, range, stat, flags)` reads `range` and writes `stat`, both valid
    // for the call and laid out as the kernel's structs; `fd` is open for the call.
    let done = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            fd.as_raw_fd(),
            &range as *const Range,
            &mut stat as *mut CacheStat,
            0 as libc::c_uint,
        )
    };
    done == 0 && stat.dirty == 0 && stat.writeback == 0
}

/// The identity [`Seen::Identity`] keeps of a file whose status is `stat`.
pub fn identity(stat: &rustix::fs::Stat) -> [i64; 8] {
    [
        stat.st_dev as i64,
        stat.st_ino as i64,
        stat.st_size,
        i64::from(stat.st_mode),
        stat.st_mtime,
        stat.st_mtime_nsec as i64,
        stat.st_ctime,
        stat.st_ctime_nsec as i64,
    ]
}
