//! The container's view of the host: a [`MemoryFs`] over a mount table.
//!
//! An agent's memory is loaded *inside* its container, where `/workspace/agent` is the group
//! folder and `/app/CLAUDE.md` the shared base. A symlink such as
//! `groups/main/.claude-shared.md -> /app/CLAUDE.md` dangles on the host but resolves in the
//! container. [`MountedFs`] resolves every path, symlink targets included, component by
//! component in container space (the way the kernel would inside the container), and only
//! then maps the result to a host path through the longest matching mount. Paths outside
//! every mount do not exist, except the directories that hold mount points.

use std::collections::{HashMap, HashSet, VecDeque};
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

use crate::disk::reads::{Read, ReadLog, Root as ReadRoot, Seen};
use crate::loader::fs::{
    DirEntry, FileKind, MemoryFs, Metadata, ReadOutcome, handle_metadata, metadata_of,
    read_through_checked,
};

pub use crate::loader::fs::MAX_SYMLINKS;

/// One bind mount: `container` (absolute, in the container) shows `host`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Mount {
    /// The mount point inside the container.
    pub container: PathBuf,
    /// The host path it shows (a directory or a single file).
    pub host: PathBuf,
}

impl Mount {
    /// A mount of `host` at `container`.
    pub fn new(container: impl Into<PathBuf>, host: impl Into<PathBuf>) -> Self {
        Mount {
            container: container.into(),
            host: host.into(),
        }
    }
}

/// A filesystem seen through a mount table; see the module docs.
///
/// Every mount's host source is opened once, when the view is built (as the runner's bind
/// mounts are made once, at spawn), and every path is then resolved from those handles one
/// name at a time with `openat(O_PATH | O_NOFOLLOW)`: a symlink is read from its own handle
/// and interpreted in container space (an absolute target starts again at the container's
/// root, so `/app/CLAUDE.md` crosses to the `/app` mount), never by the host kernel. A file is
/// read through the very handle the resolution ended on, and only when `fstat` on that
/// handle says it is a regular file, so a FIFO or device is never opened and a name swapped
/// for a link between two steps is never followed on the host.
///
/// ```
/// use clawmd::loader::fs::{MemoryFs, ReadOutcome};
/// use clawmd::runtime::mounted::{Mount, MountedFs};
///
/// let root = tempfile::tempdir().unwrap();
/// let (group, app) = (root.path().join("groups/main"), root.path().join("container"));
/// std::fs::create_dir_all(&group).unwrap();
/// std::fs::create_dir_all(&app).unwrap();
/// std::fs::write(app.join("CLAUDE.md"), "BASE\n").unwrap();
/// // Dangling on the host, fine in the container:
/// std::os::unix::fs::symlink("/app/CLAUDE.md", group.join(".claude-shared.md")).unwrap();
///
/// let fs = MountedFs::new([
///     Mount::new("/workspace/agent", &group),
///     Mount::new("/app/CLAUDE.md", app.join("CLAUDE.md")),
/// ]);
/// let link = std::path::Path::new("/workspace/agent/.claude-shared.md");
/// assert_eq!(fs.canonicalize(link).unwrap(), std::path::Path::new("/app/CLAUDE.md"));
/// assert_eq!(fs.read_limited(link, 100).unwrap(), ReadOutcome::Bytes(b"BASE\n".to_vec()));
/// assert!(fs.metadata("/etc/passwd".as_ref()).is_err()); // not mounted: does not exist
/// ```
#[derive(Debug, Clone)]
pub struct MountedFs {
    /// Longest mount point first.
    roots: Vec<Root>,
    /// Components of the deepest mount point: below that depth no name can be a mount point.
    max_mount_depth: usize,
    /// Path components looked up so far, and how many this view may look up.
    steps: Arc<AtomicU64>,
    step_budget: u64,
    /// Where every read of a host source is logged ([`MountedFs::log_reads_in`]).
    log: Option<Arc<ReadLog>>,
    /// Whether a file read is kept by its identity too, once settled, whatever its pages: only
    /// for trusted host paths ([`MountedFs::new`]: the operator's shared sources). A view of a
    /// group ([`MountedFs::with_sources`]) shows folders the agent writes, where a write
    /// through a shared mapping to a dirty page changes a file's bytes and leaves its change
    /// time (and modification time, size and inode) as they were until the kernel writes the
    /// page back: there a file is kept by its identity only when its pages were clean when it
    /// was read ([`keeps_identity`]), else by its bytes alone.
    identities: bool,
}

/// Path components one view may look up in all (each is one `openat` and one `fstat`), so
/// that imports of very deep paths cannot keep clawmd busy: about half a second of system calls.
/// Past it, every lookup fails with [`io::ErrorKind::QuotaExceeded`], which the loader
/// reports as a `budget-exceeded` diagnostic. A group's memory needs a few hundred.
pub const DEFAULT_STEP_BUDGET: u64 = 100_000;

/// Linux's `PATH_MAX`: a path this long or longer fails with `ENAMETOOLONG`, as in the kernel.
const PATH_MAX: usize = 4096;

/// The order a view's table holds `mounts` in ([`MountedFs::with_sources`]): the place in
/// `mounts` of each, longest mount point first, mounts of the same depth as given. A logged
/// read names its mount by its place in that order ([`crate::disk::reads::Root::Mount`]).
pub fn table_order(mounts: &[Mount]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..mounts.len()).collect();
    order.sort_by_key(|&i| table_rank(&mounts[i]));
    order
}

/// What a view's table is sorted by, stably: the longest mount point first.
fn table_rank(mount: &Mount) -> std::cmp::Reverse<usize> {
    std::cmp::Reverse(mount.container.components().count())
}

/// A mount and the handle of its host source (or why it could not be opened).
#[derive(Debug, Clone)]
struct Root {
    mount: Mount,
    handle: Result<Arc<OwnedFd>, Errno>,
}

/// Where a resolved container path is.
#[derive(Debug, Clone)]
enum Loc {
    /// On the host, behind this `O_PATH` handle (where it is, when reads are logged).
    Host(Arc<OwnedFd>, Option<At>),
    /// A directory that exists only because mount points lie below it.
    Implied,
}

/// One resolved container path (the path itself is kept by the caller, grown in place).
#[derive(Debug, Clone)]
struct Step {
    loc: Loc,
    meta: Metadata,
    /// Exactly a mount point (or the root): `..` must not follow the host's parent.
    boundary: bool,
    /// Components of the path.
    depth: usize,
}

/// Where a host handle is, for the log: the mount (its place in the table) and the path
/// below the mount's source (`/`-separated, `""` for the source itself).
#[derive(Debug, Clone, PartialEq, Eq)]
struct At {
    mount: u16,
    rel: String,
}

impl At {
    fn child(&self, name: &str) -> At {
        At {
            mount: self.mount,
            rel: crate::disk::reads::join(&self.rel, name),
        }
    }

    fn parent(&self) -> At {
        At {
            mount: self.mount,
            rel: self.split().0.to_owned(),
        }
    }

    /// The folder and the name of the path (both `""` for the source itself).
    fn split(&self) -> (&str, &str) {
        self.rel.rsplit_once('/').unwrap_or(("", &self.rel))
    }

    /// The read of this path that found `seen`.
    fn read(&self, seen: Seen) -> Read {
        let (dir, name) = self.split();
        Read {
            root: ReadRoot::Mount(self.mount),
            dir: dir.to_owned(),
            name: name.to_owned(),
            seen,
        }
    }
}

const PATH_NOFOLLOW: OFlags = OFlags::PATH.union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);

const IMPLIED_DIR: Metadata = Metadata {
    kind: FileKind::Dir,
    len: 0,
};

impl MountedFs {
    /// A mount table over the host filesystem. Each source is opened now, following links
    /// as a bind mount does (for trusted host paths; see [`MountedFs::with_sources`] for
    /// sources opened another way). A source that cannot be opened shows nothing.
    pub fn new(mounts: impl IntoIterator<Item = Mount>) -> Self {
        let mut fs = Self::with_sources(mounts.into_iter().map(|m| {
            let handle = rustix::fs::open(&m.host, OFlags::PATH | OFlags::CLOEXEC, Mode::empty());
            (m, handle)
        }));
        fs.identities = true;
        fs
    }

    /// A mount table whose sources the caller opened (any handle: `O_PATH` is enough), for
    /// example without following links in a folder an agent can write. `Err` means the
    /// source is missing (or unusable): paths under that mount point do not exist.
    pub fn with_sources(
        sources: impl IntoIterator<Item = (Mount, Result<OwnedFd, Errno>)>,
    ) -> Self {
        let mut roots: Vec<Root> = sources
            .into_iter()
            .map(|(mount, handle)| Root {
                mount,
                handle: handle.map(Arc::new),
            })
            .collect();
        roots.sort_by_key(|r| table_rank(&r.mount)); // stable, as table_order sorts
        let max_mount_depth = roots
            .iter()
            .map(|r| r.mount.container.components().count())
            .max()
            .unwrap_or(0);
        MountedFs {
            roots,
            max_mount_depth,
            steps: Arc::new(AtomicU64::new(0)),
            step_budget: DEFAULT_STEP_BUDGET,
            log: None,
            identities: false,
        }
    }

    /// Logs every read of a host source made through this view (and its clones) in `log`,
    /// as what it found ([`crate::disk::reads`]), so that [`MountedFs::holds`] can tell later
    /// whether a view of the same table would find the same: the loader is a function of
    /// what its reads find, so the same reads load the same memory. A file read keeps its
    /// bytes' SHA-256, and its identity once settled ([`crate::disk::reads::settled`]) where
    /// the view keeps identities (see `identities`).
    pub fn log_reads_in(&mut self, log: &Arc<ReadLog>) {
        self.log = Some(log.clone());
    }

    /// Logs `seen` at `at` (when reads are logged; a read whose place is unknown, a name that
    /// is not UTF-8, spoils the log).
    fn logged(&self, at: Option<&At>, seen: impl FnOnce() -> Option<Seen>) {
        let Some(log) = &self.log else {
            return;
        };
        match (at, seen()) {
            (Some(at), Some(seen)) => log.push(at.read(seen)),
            _ => log.spoil(),
        }
    }

    /// Where the entry `name` of the folder at `at` is, when reads are logged.
    fn at_child(&self, at: Option<&At>, name: &OsStr) -> Option<At> {
        self.log.as_ref()?;
        match (at, name.to_str()) {
            (Some(at), Some(name)) => Some(at.child(name)),
            _ => None,
        }
    }

    /// The same view with another budget of path components (see [`DEFAULT_STEP_BUDGET`]).
    pub fn with_step_budget(mut self, steps: u64) -> Self {
        self.step_budget = steps;
        self
    }

    /// Path components looked up so far by this view (and its clones).
    pub fn steps(&self) -> u64 {
        self.steps.load(Ordering::Relaxed)
    }

    fn spend_step(&self) -> io::Result<()> {
        let spent = self.steps.fetch_add(1, Ordering::Relaxed) + 1;
        if spent > self.step_budget {
            return Err(io::Error::new(
                io::ErrorKind::QuotaExceeded,
                format!(
                    "clawmd's budget of {} path components looked up for this container view is spent",
                    self.step_budget
                ),
            ));
        }
        Ok(())
    }

    /// The mounts, longest mount point first.
    pub fn mounts(&self) -> Vec<Mount> {
        self.roots.iter().map(|r| r.mount.clone()).collect()
    }

    /// The host path a container path maps to lexically (no symlinks followed), if any; for
    /// messages only; nothing is ever opened by this path.
    pub fn host_path(&self, container: &Path) -> Option<PathBuf> {
        let root = self
            .roots
            .iter()
            .find(|r| container.starts_with(&r.mount.container))?;
        let rel = container
            .strip_prefix(&root.mount.container)
            .unwrap_or(Path::new(""));
        Some(if rel.as_os_str().is_empty() {
            root.mount.host.clone()
        } else {
            root.mount.host.join(rel)
        })
    }

    /// The mount at `p`, with its place in the table.
    fn mount_at(&self, p: &Path) -> Option<(u16, &Root)> {
        let index = self.roots.iter().position(|r| r.mount.container == p)?;
        Some((u16::try_from(index).ok()?, &self.roots[index]))
    }

    /// The step for `p` (of `depth` components) if it is a mount point or a directory implied
    /// by deeper mount points.
    fn boundary(&self, p: &Path, depth: usize) -> Option<io::Result<Step>> {
        // Mount points are shallow: a deeper path is never one (keeps each step O(1)).
        if depth > self.max_mount_depth {
            return None;
        }
        if let Some((index, root)) = self.mount_at(p) {
            let at = self.log.as_ref().map(|_| At {
                mount: index,
                rel: String::new(),
            });
            let step = match &root.handle {
                Ok(fd) => handle_metadata(fd.as_fd()).map(|meta| Step {
                    loc: Loc::Host(fd.clone(), at.clone()),
                    meta,
                    boundary: true,
                    depth,
                }),
                Err(errno) if *errno == Errno::NOENT => Err(not_found(p)),
                Err(errno) => Err(io::Error::from(*errno)),
            };
            self.logged(at.as_ref(), || entry_seen(&step));
            return Some(step);
        }
        let implied = self.roots.iter().any(|r| r.mount.container.starts_with(p))
            && !self
                .roots
                .iter()
                .any(|r| p.starts_with(&r.mount.container) && p != r.mount.container);
        implied.then_some(Ok(Step {
            loc: Loc::Implied,
            meta: IMPLIED_DIR,
            boundary: true,
            depth,
        }))
    }

    fn root_step(&self) -> io::Result<Step> {
        self.boundary(Path::new("/"), 0).unwrap_or(Ok(Step {
            loc: Loc::Implied,
            meta: IMPLIED_DIR,
            boundary: true,
            depth: 0,
        }))
    }

    /// The entry `name` of the resolved directory `dir`, whose path (with `name` already
    /// pushed) is `path`; not following it if it is a link.
    fn child(&self, dir: &Step, path: &Path, name: &OsStr) -> io::Result<Step> {
        self.spend_step()?;
        let depth = dir.depth + 1;
        if let Some(step) = self.boundary(path, depth) {
            return step;
        }
        match &dir.loc {
            Loc::Host(fd, at) => {
                let at = self.at_child(at.as_ref(), name);
                let step = rustix::fs::openat(fd.as_fd(), name, PATH_NOFOLLOW, Mode::empty())
                    .map_err(|e| errno_at(e, path))
                    .and_then(|handle| {
                        Ok(Step {
                            meta: handle_metadata(handle.as_fd())?,
                            loc: Loc::Host(Arc::new(handle), at.clone()),
                            boundary: false,
                            depth,
                        })
                    });
                self.logged(at.as_ref(), || entry_seen(&step));
                step
            }
            Loc::Implied => Err(not_found(path)),
        }
    }

    /// The parent of a resolved directory, as the kernel finds it: through the handle inside
    /// a mount, through the mount table at a mount point. `path` is popped to the parent.
    fn parent(&self, step: &Step, path: &mut PathBuf) -> io::Result<Step> {
        if !path.pop() {
            return Ok(step.clone());
        }
        self.spend_step()?;
        let depth = step.depth.saturating_sub(1);
        match (&step.loc, step.boundary) {
            (Loc::Host(fd, at), false) => {
                let flags = PATH_NOFOLLOW | OFlags::DIRECTORY;
                let handle = rustix::fs::openat(fd.as_fd(), "..", flags, Mode::empty());
                let handle = handle.inspect_err(|_| self.logged(None, || None))?;
                Ok(match self.boundary(path, depth) {
                    // The parent is a mount point: the mount's own handle, not the host's.
                    Some(step) => step?,
                    None => {
                        // Inside a mount, the parent of a folder reached from the mount's
                        // source is the folder it was reached through.
                        let at = at.as_ref().map(At::parent);
                        let step = handle_metadata(handle.as_fd()).map(|meta| Step {
                            meta,
                            loc: Loc::Host(Arc::new(handle), at.clone()),
                            boundary: false,
                            depth,
                        });
                        self.logged(at.as_ref(), || entry_seen(&step));
                        step?
                    }
                })
            }
            // Leaving a mount point: walk down to its parent again from the root (a few
            // names: mount points are shallow), never through the host's `..`.
            _ => self.resolve(path, false).map(|(_, step)| step),
        }
    }

    /// The target of a resolved symlink, read from its own handle.
    fn link_target(&self, step: &Step, path: &Path) -> io::Result<PathBuf> {
        match &step.loc {
            Loc::Host(fd, at) if step.meta.kind == FileKind::Symlink => {
                let target = rustix::fs::readlinkat(fd.as_fd(), "", Vec::new());
                self.logged(at.as_ref(), || {
                    let target = target.as_ref().ok()?;
                    Some(Seen::Link(crate::disk::reads::digest(target.as_bytes())))
                });
                Ok(PathBuf::from(OsString::from_vec(target?.into_bytes())))
            }
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a symlink", path.display()),
            )),
        }
    }

    /// Resolve `path` in container space, one name at a time: the real container path and
    /// its last step (the link itself when `follow_last` is false and it is one). Each
    /// component costs one lookup, whatever the depth.
    fn resolve(&self, path: &Path, follow_last: bool) -> io::Result<(PathBuf, Step)> {
        if !path.is_absolute() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not absolute", path.display()),
            ));
        }
        if path.as_os_str().len() >= PATH_MAX {
            return Err(io::Error::from(Errno::NAMETOOLONG));
        }
        let mut work: VecDeque<OsString> = components(path);
        let mut real = PathBuf::from("/");
        let mut cur = self.root_step()?;
        let mut links = 0;
        while let Some(name) = work.pop_front() {
            if name == "." {
                continue;
            }
            if cur.meta.kind != FileKind::Dir {
                return Err(not_a_dir(&real));
            }
            if name == ".." {
                cur = self.parent(&cur, &mut real)?;
                continue;
            }
            real.push(&name);
            let next = self.child(&cur, &real, &name)?;
            if next.meta.kind == FileKind::Symlink && (!work.is_empty() || follow_last) {
                links += 1;
                if links > MAX_SYMLINKS {
                    return Err(io::Error::from(Errno::LOOP));
                }
                let target = self.link_target(&next, &real)?;
                real.pop();
                if target.is_absolute() {
                    real = PathBuf::from("/");
                    cur = self.root_step()?;
                }
                for c in components(&target).into_iter().rev() {
                    work.push_front(c);
                }
                continue;
            }
            cur = next;
        }
        Ok((real, cur))
    }

    fn entries_of(&self, dir: &Step, dir_path: &Path) -> io::Result<Vec<DirEntry>> {
        let mut out = match &dir.loc {
            Loc::Host(fd, at) => {
                let listed = list(fd.as_fd());
                self.logged(at.as_ref(), || {
                    listed.as_ref().ok().map(|l| listing_seen(l))
                });
                listed?
            }
            Loc::Implied => Vec::new(),
        };
        // Mount points directly below `dir` shadow (or add) entries.
        for r in self.roots.iter().rev() {
            let m = &r.mount;
            if m.container.parent() != Some(dir_path) {
                continue;
            }
            let Some(name) = m.container.file_name() else {
                continue;
            };
            let kind = self
                .boundary(&m.container, m.container.components().count() - 1)
                .and_then(Result::ok)
                .map_or(FileKind::Other, |s| s.meta.kind);
            out.retain(|e| e.name != name);
            out.push(DirEntry {
                name: name.to_os_string(),
                kind,
            });
        }
        for r in &self.roots {
            // Deeper mounts make implied directories appear.
            if let Ok(rel) = r.mount.container.strip_prefix(dir_path)
                && let Some(Component::Normal(first)) = rel.components().next()
                && rel.components().count() > 1
                && !out.iter().any(|e| e.name == first)
            {
                out.push(DirEntry {
                    name: first.to_os_string(),
                    kind: FileKind::Dir,
                });
            }
        }
        Ok(out)
    }
}

/// What a lookup of an entry found, for the log (`None`: an error the log cannot keep).
fn entry_seen(step: &io::Result<Step>) -> Option<Seen> {
    match step {
        Ok(step) => Some(Seen::Entry(Some((step.meta.kind, step.meta.len)))),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Some(Seen::Entry(None)),
        Err(_) => None,
    }
}

/// What a listing found, for the log: its names and kinds in the filesystem's order.
fn listing_seen(entries: &[DirEntry]) -> Seen {
    let entries: Vec<(OsString, Option<FileKind>)> = (entries.iter())
        .map(|entry| (entry.name.clone(), Some(entry.kind)))
        .collect();
    crate::disk::reads::listing(&entries)
}

/// What a file read found, for the log: the SHA-256 of its bytes (or what it was instead of
/// bytes), with its identity when settled.
fn file_seen(limit: u64, outcome: &ReadOutcome, identity: Option<[i64; 8]>) -> Seen {
    let digest = match outcome {
        ReadOutcome::Bytes(bytes) => crate::disk::reads::digest(bytes),
        ReadOutcome::TooLarge { len } => format!("{} {len}", crate::disk::reads::TOO_LARGE),
        ReadOutcome::NotAFile { kind } => format!("not a file: {kind:?}"),
    };
    Seen::File {
        limit,
        digest: Some(digest),
        identity,
    }
}

/// The entries of the directory behind an `O_PATH` handle, in the filesystem's order.
fn list(dir: BorrowedFd<'_>) -> io::Result<Vec<DirEntry>> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, ".", flags, Mode::empty())?;
    let mut out = Vec::new();
    for entry in rustix::fs::Dir::read_from(&fd)? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let kind = FileKind::from_dirent(entry.file_type()).unwrap_or_else(|| {
            rustix::fs::statat(&fd, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW)
                .map_or(FileKind::Other, |st| FileKind::from_mode(st.st_mode))
        });
        out.push(DirEntry {
            name: OsString::from_vec(name.to_vec()),
            kind,
        });
    }
    Ok(out)
}

fn components(p: &Path) -> VecDeque<OsString> {
    p.components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::CurDir => Some(OsString::from(".")),
            Component::RootDir | Component::Prefix(_) => None,
        })
        .collect()
}

fn errno_at(err: Errno, p: &Path) -> io::Error {
    if err == Errno::NOENT {
        not_found(p)
    } else {
        io::Error::from(err)
    }
}

fn not_found(p: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} does not exist in the container", p.display()),
    )
}

fn not_a_dir(p: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotADirectory,
        format!("{} is not a directory", p.display()),
    )
}

/// The paths the replays sharing it opened, by mount and path below its source (`None`:
/// missing), and the reads that held (each looked at once: the shared folders on the way to
/// every skill's file, say).
#[derive(Debug, Default)]
pub struct Opened {
    handles: HashMap<(u16, String), Option<Arc<OwnedFd>>>,
    held: HashSet<Read>,
}

impl MountedFs {
    /// Whether every read of `reads` (logged by a view of the same mount table,
    /// [`MountedFs::log_reads_in`]) finds again what it found, through this view's handles:
    /// each path opened again from its mount's source one name at a time, never following a
    /// link. A file kept with its identity and found with the same is not read again.
    /// Anything that cannot be read again counts as a change.
    pub fn holds(&self, reads: &[Read]) -> bool {
        self.holds_fresh(reads).is_some()
    }

    /// [`MountedFs::holds`], saying too whether a file was found the same by its bytes though
    /// its identity would now stand for them ([`MountedFs::replay`]): `Some(true)`, the reads
    /// are worth making again once.
    pub fn holds_fresh(&self, reads: &[Read]) -> Option<bool> {
        let now = std::time::SystemTime::now();
        self.replay(reads, now, &mut Opened::default())
    }

    /// [`MountedFs::holds`], each path opened once for all the replays that share `opened`,
    /// saying too whether a file was found the same by its bytes though its identity would
    /// now stand for them ([`crate::disk::reads::settled`] at `now`): `Some(true)`, the reads are
    /// worth making again once. `None`: a read finds something else.
    pub fn replay(
        &self,
        reads: &[Read],
        now: std::time::SystemTime,
        opened: &mut Opened,
    ) -> Option<bool> {
        let mut stale = false;
        for read in reads {
            if opened.held.contains(read) {
                continue;
            }
            let again = match read.root {
                ReadRoot::Mount(mount) => {
                    let rel = crate::disk::reads::join(&read.dir, &read.name);
                    match &read.seen {
                        // An entry's kind and size, looked at from its folder (not opened).
                        Seen::Entry(entry)
                            if !read.name.is_empty()
                                && !opened.handles.contains_key(&(mount, rel.clone())) =>
                        {
                            let found = self.entry_at(&mut opened.handles, mount, read);
                            (found.ok()? == *entry).then_some(false)
                        }
                        seen => (self.reopen(&mut opened.handles, mount, &rel).ok()).and_then(
                            |handle| {
                                let handle = handle.as_deref().map(AsFd::as_fd);
                                holds_again(handle, seen, now, self.identities)
                            },
                        ),
                    }
                }
                _ => None,
            };
            let Some(again) = again else {
                tracing::trace!(?read, "a read of the container view finds something else");
                return None;
            };
            if !again {
                opened.held.insert(read.clone());
            }
            stale |= again;
        }
        Some(stale)
    }

    /// The kind and size of the entry `read` names below the source of mount `mount`, from
    /// its folder's handle, never following a link (`Err` when it cannot be looked at:
    /// `Ok(None)` when it is missing), as [`holds_again`] finds them through its handle.
    fn entry_at(
        &self,
        opened: &mut HashMap<(u16, String), Option<Arc<OwnedFd>>>,
        mount: u16,
        read: &Read,
    ) -> Result<Option<(FileKind, u64)>, ()> {
        let Some(dir) = self.reopen(opened, mount, &read.dir)? else {
            return Err(());
        };
        match rustix::fs::statat(dir.as_fd(), read.name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => {
                let meta = metadata_of(&stat);
                Ok(Some((meta.kind, meta.len)))
            }
            Err(Errno::NOENT) => Ok(None),
            Err(_) => Err(()),
        }
    }

    /// The handle of `rel` below the source of mount `mount` (`Err` when it cannot be
    /// opened: `Ok(None)` when it is missing), opened once per replay.
    fn reopen(
        &self,
        opened: &mut HashMap<(u16, String), Option<Arc<OwnedFd>>>,
        mount: u16,
        rel: &str,
    ) -> Result<Option<Arc<OwnedFd>>, ()> {
        if let Some(handle) = opened.get(&(mount, rel.to_owned())) {
            return Ok(handle.clone());
        }
        let handle = match rel.rsplit_once('/').unwrap_or(("", rel)) {
            (_, "") => match &self.roots.get(usize::from(mount)).ok_or(())?.handle {
                Ok(fd) => Some(fd.clone()),
                Err(Errno::NOENT) => None,
                Err(_) => return Err(()),
            },
            (dir, name) => {
                let Some(dir) = self.reopen(opened, mount, dir)? else {
                    return Err(());
                };
                match rustix::fs::openat(dir.as_fd(), name, PATH_NOFOLLOW, Mode::empty()) {
                    Ok(fd) => Some(Arc::new(fd)),
                    Err(Errno::NOENT) => None,
                    Err(_) => return Err(()),
                }
            }
        };
        opened.insert((mount, rel.to_owned()), handle.clone());
        Ok(handle)
    }
}

/// Whether a file read through a view, opened as `file` and not read yet, may be kept by its
/// identity once settled: always in a view of trusted host paths (`identities`); in a view of
/// folders the agent writes, only when none of its pages is dirty or under writeback
/// ([`crate::disk::reads::pages_clean`]), so that any later write to it, through a shared
/// mapping too, stamps its change time.
fn keeps_identity(identities: bool, file: BorrowedFd<'_>) -> bool {
    identities || crate::disk::reads::pages_clean(file)
}

/// The identity a view keeps for a file read through it ([`read_through_checked`] with
/// [`keeps_identity`]: `clean`), whose status was `stat` before `at`: the rule a read is
/// recorded by and a replay tells a stale read by, so the two never disagree.
fn kept_identity(
    clean: Option<bool>,
    stat: &rustix::fs::Stat,
    at: std::time::SystemTime,
) -> Option<[i64; 8]> {
    (clean == Some(true))
        .then(|| crate::disk::reads::settled(stat, at))
        .flatten()
}

/// Whether what is behind `handle` (`None`: nothing) is found as `seen` again (`None`: not),
/// and whether a file found the same by its bytes would be kept by its identity at `now`.
///
/// `identities`: whether the view keeps files by their identity whatever their pages
/// ([`MountedFs::new`]); else only files whose pages were clean when read
/// ([`keeps_identity`]). A read kept with an identity is found again by it.
fn holds_again(
    handle: Option<BorrowedFd<'_>>,
    seen: &Seen,
    now: std::time::SystemTime,
    identities: bool,
) -> Option<bool> {
    let holds = match (handle, seen) {
        (None, Seen::Entry(None)) => true,
        (Some(fd), Seen::Entry(Some(entry))) => {
            handle_metadata(fd).is_ok_and(|meta| (meta.kind, meta.len) == *entry)
        }
        (Some(fd), Seen::Link(digest)) => rustix::fs::readlinkat(fd, "", Vec::new())
            .is_ok_and(|target| crate::disk::reads::digest(target.as_bytes()) == *digest),
        (Some(fd), Seen::Listing(_)) => {
            list(fd).is_ok_and(|entries| listing_seen(&entries) == *seen)
        }
        (
            Some(fd),
            Seen::File {
                limit,
                digest,
                identity,
            },
        ) => {
            // An identity is kept only where it stands for the bytes (see `keeps_identity`).
            if identity.is_some()
                && rustix::fs::fstat(fd)
                    .ok()
                    .as_ref()
                    .map(crate::disk::reads::identity)
                    == *identity
            {
                return Some(false);
            }
            let read = read_through_checked(fd, *limit, |file| keeps_identity(identities, file));
            return read.ok().and_then(|(outcome, stat, clean)| {
                let same = matches!(file_seen(*limit, &outcome, None), Seen::File { digest: again, .. } if again == *digest);
                same.then(|| kept_identity(clean, &stat, now).is_some())
            });
        }
        _ => false,
    };
    holds.then_some(false)
}

impl MemoryFs for MountedFs {
    fn symlink_metadata(&self, path: &Path) -> io::Result<Metadata> {
        self.resolve(path, false).map(|(_, s)| s.meta)
    }

    fn metadata(&self, path: &Path) -> io::Result<Metadata> {
        self.resolve(path, true).map(|(_, s)| s.meta)
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        let (real, step) = self.resolve(path, false)?;
        self.link_target(&step, &real)
    }

    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        self.resolve(path, true).map(|(p, _)| p)
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        let (real, step) = self.resolve(path, true)?;
        if step.meta.kind != FileKind::Dir {
            return Err(not_a_dir(path));
        }
        self.entries_of(&step, &real)
    }

    fn read_limited(&self, path: &Path, limit: u64) -> io::Result<ReadOutcome> {
        let (_, step) = self.resolve(path, true)?;
        match (&step.loc, step.meta.kind) {
            // Read through the handle the resolution ended on: never reopened by path.
            (Loc::Host(fd, at), FileKind::File) => {
                let before = std::time::SystemTime::now();
                let identities = self.identities;
                let read = read_through_checked(fd.as_fd(), limit, |file| {
                    keeps_identity(identities, file)
                });
                self.logged(at.as_ref(), || {
                    let (outcome, stat, clean) = read.as_ref().ok()?;
                    Some(file_seen(
                        limit,
                        outcome,
                        kept_identity(*clean, stat, before),
                    ))
                });
                read.map(|(outcome, _, _)| outcome)
            }
            (_, kind) => Ok(ReadOutcome::NotAFile { kind }),
        }
    }

    fn within_view(&self, path: &Path) -> bool {
        self.roots
            .iter()
            .any(|r| path.starts_with(&r.mount.container))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, MountedFs) {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        let group = r.join("groups/main");
        std::fs::create_dir_all(group.join(".claude-fragments")).unwrap();
        std::fs::create_dir_all(r.join("container/skills/web")).unwrap();
        std::fs::write(r.join("container/CLAUDE.md"), "BASE\n").unwrap();
        std::fs::write(r.join("container/skills/web/instructions.md"), "WEB\n").unwrap();
        std::fs::write(group.join("CLAUDE.md"), "@./.claude-shared.md\n").unwrap();
        symlink("/app/CLAUDE.md", group.join(".claude-shared.md")).unwrap();
        symlink(
            "/app/skills/web/instructions.md",
            group.join(".claude-fragments/web.md"),
        )
        .unwrap();
        symlink("loop-b", group.join("loop-a")).unwrap();
        symlink("loop-a", group.join("loop-b")).unwrap();
        symlink("../../../../etc/passwd", group.join("escape")).unwrap();
        let fs = MountedFs::new([
            Mount::new("/workspace/agent", &group),
            Mount::new("/app/CLAUDE.md", r.join("container/CLAUDE.md")),
            Mount::new("/app/skills", r.join("container/skills")),
        ]);
        (root, fs)
    }

    /// Reads a few things through `fs` the way the loader does.
    /// Moves the file at `rel` aside (to `copy.md`) and puts a link to it in its place.
    fn swap_for_link_to_copy(root: &Path, rel: &str) {
        let source = root.join(rel);
        std::fs::rename(&source, root.join("copy.md")).unwrap();
        symlink(root.join("copy.md"), source).unwrap();
    }

    fn look(fs: &MountedFs) {
        let agent = Path::new("/workspace/agent");
        let _ = fs.read_limited(&agent.join("CLAUDE.md"), 1 << 20).unwrap();
        let _ = fs
            .read_limited(&agent.join(".claude-shared.md"), 1 << 20)
            .unwrap();
        let _ = fs.read_dir(&agent.join(".claude-fragments")).unwrap();
        let _ = fs.read_limited(&agent.join(".claude-fragments/web.md"), 1 << 20);
        assert!(fs.metadata(&agent.join("missing.md")).is_err());
        let _ = fs
            .canonicalize(&agent.join(".claude-fragments/../CLAUDE.md"))
            .unwrap();
    }

    #[test]
    fn a_logged_view_holds_until_a_read_would_find_something_else() {
        type Change = fn(&Path);
        let changes: [(&str, Change, bool); 11] = [
            ("nothing", |_| {}, true),
            (
                "a link to nothing where a file was missing",
                |r| symlink("nowhere", r.join("groups/main/missing.md")).unwrap(),
                false,
            ),
            (
                "a folder where a file was missing",
                |r| std::fs::create_dir(r.join("groups/main/missing.md")).unwrap(),
                false,
            ),
            (
                "a file in a mounted folder swapped for a link to its copy",
                |r| swap_for_link_to_copy(r, "container/skills/web/instructions.md"),
                false,
            ),
            (
                "a mounted file swapped for a link to its copy (a bind follows it)",
                |r| swap_for_link_to_copy(r, "container/CLAUDE.md"),
                true,
            ),
            (
                "a file the look never read",
                |r| std::fs::write(r.join("groups/main/notes.txt"), "mine").unwrap(),
                true,
            ),
            (
                "a source, same size",
                |r| std::fs::write(r.join("container/CLAUDE.md"), "BASX\n").unwrap(),
                false,
            ),
            (
                "a file where one was missing",
                |r| std::fs::write(r.join("groups/main/missing.md"), "x").unwrap(),
                false,
            ),
            (
                "a listed folder",
                |r| std::fs::write(r.join("groups/main/.claude-fragments/new.md"), "x").unwrap(),
                false,
            ),
            (
                "a link's target",
                |r| {
                    let link = r.join("groups/main/.claude-shared.md");
                    std::fs::remove_file(&link).unwrap();
                    symlink("/app/skills/web/instructions.md", link).unwrap();
                },
                false,
            ),
            (
                "a folder swapped for a link to its copy",
                |r| {
                    let group = r.join("groups/main");
                    std::fs::rename(group.join(".claude-fragments"), r.join("copy")).unwrap();
                    symlink(r.join("copy"), group.join(".claude-fragments")).unwrap();
                },
                false,
            ),
        ];
        for (what, change, holds) in changes {
            let (root, mut fs) = setup();
            let log = Arc::new(ReadLog::default());
            fs.log_reads_in(&log);
            look(&fs);
            let reads = log.kept_reads().expect("nothing spoils these reads");
            assert!(reads.len() > 5, "{reads:?}");
            change(root.path());
            let again = MountedFs::new(fs.mounts());
            assert_eq!(again.holds(&reads), holds, "{what}");
        }
    }

    #[test]
    fn links_resolve_in_container_space() {
        let (_root, fs) = setup();
        let p = Path::new("/workspace/agent/.claude-fragments/web.md");
        assert_eq!(
            fs.canonicalize(p).unwrap(),
            Path::new("/app/skills/web/instructions.md")
        );
        assert_eq!(
            fs.read_limited(p, 10).unwrap(),
            ReadOutcome::Bytes(b"WEB\n".to_vec())
        );
        assert_eq!(fs.symlink_metadata(p).unwrap().kind, FileKind::Symlink);
    }

    #[test]
    fn loops_end_with_eloop() {
        let (_root, fs) = setup();
        let err = fs
            .canonicalize(Path::new("/workspace/agent/loop-a"))
            .unwrap_err();
        assert_eq!(
            err.raw_os_error(),
            Some(rustix::io::Errno::LOOP.raw_os_error())
        );
    }

    #[test]
    fn nothing_outside_the_mounts() {
        let (_root, fs) = setup();
        let err = fs
            .read_limited(Path::new("/workspace/agent/escape"), 10)
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert_eq!(
            fs.metadata(Path::new("/workspace")).unwrap().kind,
            FileKind::Dir
        );
        assert!(fs.metadata(Path::new("/workspace/other")).is_err());
        let names: Vec<_> = fs
            .read_dir(Path::new("/app"))
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert!(
            names.contains(&OsString::from("CLAUDE.md"))
                && names.contains(&OsString::from("skills"))
        );
    }

    #[test]
    fn dotdot_is_resolved_after_links() {
        let (_root, fs) = setup();
        let p = Path::new("/workspace/agent/.claude-fragments/web.md/../instructions.md");
        // web.md is a file after resolution, so `..` below it is ENOTDIR, as in the kernel.
        assert!(fs.metadata(p).is_err());
        let q = Path::new("/workspace/agent/../agent/CLAUDE.md");
        assert_eq!(
            fs.canonicalize(q).unwrap(),
            Path::new("/workspace/agent/CLAUDE.md")
        );
    }
}
