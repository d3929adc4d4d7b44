//! Trees on disk: a temp dir that prints itself when the test fails ([`TempTree`]), content
//! snapshots ([`Tree`], [`tree`]) and their comparison, and [`copy_tree`].

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt;
use std::fmt::Write as _;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// A temporary directory for a test, removed when dropped. When it is dropped because the
/// test panicked, it first prints itself to stderr ([`dump`]): every path with its kind, size,
/// link target and, for small files, the escaped content.
pub struct TempTree {
    temp: tempfile::TempDir,
    /// `temp`'s path, canonical (the loader and the binary see canonical paths).
    root: PathBuf,
}

impl TempTree {
    /// An empty tree in the default temp dir.
    pub fn new() -> Self {
        TempTree::from_temp(tempfile::tempdir().expect("temp dir"))
    }

    /// An empty tree in [`work_dir`]: tmpfs unless `CLAWMD_TEST_DIR` says otherwise.
    pub fn on_work_dir() -> Self {
        TempTree::from_temp(work_dir())
    }

    fn from_temp(temp: tempfile::TempDir) -> Self {
        let root = std::fs::canonicalize(temp.path()).expect("canonical temp dir");
        TempTree { temp, root }
    }

    /// The root of the tree.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// An absolute path inside the tree.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Writes a file (creating folders).
    #[track_caller]
    pub fn file(&self, rel: &str, content: impl AsRef<[u8]>) -> &Self {
        self.write(rel, content.as_ref());
        self
    }

    /// Writes bytes at `rel` (creating folders).
    #[track_caller]
    pub fn write(&self, rel: &str, content: &[u8]) {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap_or_else(|e| panic!("write {rel}: {e}"));
    }

    /// Replaces whatever file is at `rel` with a FIFO.
    #[track_caller]
    pub fn fifo(&self, rel: &str) -> &Self {
        let path = self.path(rel);
        let _ = std::fs::remove_file(&path);
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &path,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap_or_else(|e| panic!("fifo {rel}: {e}"));
        self
    }

    /// Creates a symlink at `rel` (creating folders) pointing at `target`, as given.
    #[track_caller]
    pub fn symlink(&self, rel: &str, target: impl AsRef<Path>) -> &Self {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, &path).unwrap_or_else(|e| panic!("symlink {rel}: {e}"));
        self
    }

    /// The content of a file, as text.
    #[track_caller]
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
    }

    /// The target of a symlink.
    #[track_caller]
    pub fn read_link(&self, rel: &str) -> PathBuf {
        std::fs::read_link(self.path(rel)).unwrap_or_else(|e| panic!("read link {rel}: {e}"))
    }

    /// Whether anything (even a dangling link) is at `rel`.
    pub fn exists(&self, rel: &str) -> bool {
        std::fs::symlink_metadata(self.path(rel)).is_ok()
    }

    /// A content snapshot of `groups/` and `container/` (see [`tree`]).
    pub fn tree(&self) -> Tree {
        tree(self.root())
    }
}

impl Drop for TempTree {
    fn drop(&mut self) {
        if std::thread::panicking() {
            dump_once(self.root());
        }
    }
}

thread_local! {
    /// Trees dumped by this thread (each test runs on its own thread).
    static DUMPED: Cell<usize> = const { Cell::new(0) };
}

/// At most this many trees are printed per failing test (a proptest failure unwinds once per
/// shrinking step).
const MAX_DUMPS: usize = 3;

fn dump_once(root: &Path) {
    let n = DUMPED.with(|d| {
        d.set(d.get() + 1);
        d.get()
    });
    if n <= MAX_DUMPS {
        eprint!("{}", dump(root));
    } else if n == MAX_DUMPS + 1 {
        eprintln!("(further trees of this failing test are not printed)");
    }
}

/// Longest file content [`dump`] prints.
const DUMP_CONTENT: u64 = 512;
/// Most paths [`dump`] lists.
const DUMP_PATHS: usize = 400;

/// A listing of everything under `root`, for a failure message: one line per path with its
/// kind, size, link target and, for regular files of at most 512 bytes, the content escaped.
/// Never follows a link, never opens anything but a small regular file, never panics.
pub fn dump(root: &Path) -> String {
    let mut out = format!("--- tree at {} (the test failed)\n", root.display());
    let mut shown = 0;
    let mut total = 0;
    for entry in walkdir::WalkDir::new(root).min_depth(1).sort_by_file_name() {
        total += 1;
        if shown == DUMP_PATHS {
            continue;
        }
        shown += 1;
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                let _ = writeln!(out, "  ? {e}");
                continue;
            }
        };
        let rel = entry.path().strip_prefix(root).unwrap_or(entry.path());
        let _ = writeln!(
            out,
            "  {}",
            describe(entry.path(), &rel.display().to_string())
        );
    }
    if total > shown {
        let _ = writeln!(out, "  ... {} more", total - shown);
    }
    out.push_str("---\n");
    out
}

/// One line of [`dump`].
fn describe(path: &Path, rel: &str) -> String {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) => return format!("{rel}  ({e})"),
    };
    let kind = meta.file_type();
    let links = if meta.nlink() > 1 && !kind.is_dir() {
        format!(", {} links", meta.nlink())
    } else {
        String::new()
    };
    let mode = meta.mode() & 0o7777;
    if kind.is_symlink() {
        match std::fs::read_link(path) {
            Ok(target) => format!("{rel} -> {}", target.display()),
            Err(e) => format!("{rel} -> ? ({e})"),
        }
    } else if kind.is_dir() {
        format!("{rel}/  dir {mode:o}")
    } else if kind.is_file() {
        let size = meta.len();
        let content = if size <= DUMP_CONTENT {
            match std::fs::read(path) {
                Ok(bytes) => format!("  \"{}\"", bytes.escape_ascii()),
                Err(e) => format!("  (unreadable: {e})"),
            }
        } else {
            String::new()
        };
        format!("{rel}  file {size} B {mode:o}{links}{content}")
    } else if kind.is_fifo() {
        format!("{rel}  fifo{links}")
    } else if kind.is_socket() {
        format!("{rel}  socket")
    } else if kind.is_char_device() || kind.is_block_device() {
        format!(
            "{rel}  device {}:{}",
            rustix::fs::major(meta.rdev()),
            rustix::fs::minor(meta.rdev())
        )
    } else {
        format!("{rel}  unknown kind")
    }
}

/// What a path holds, ignoring inode, mode and times.
#[derive(Clone, PartialEq, Eq)]
pub enum Entry {
    /// A directory.
    Dir,
    /// A regular file and its bytes.
    File(Vec<u8>),
    /// A symlink and its target (never followed).
    Link(PathBuf),
    /// A fifo, socket or device.
    Other,
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Entry::Dir => write!(f, "dir"),
            Entry::File(bytes) => {
                let text = String::from_utf8_lossy(bytes);
                if text.len() > 300 {
                    let cut = text.char_indices().nth(300).map_or(text.len(), |(i, _)| i);
                    write!(f, "file({} bytes) {:?}...", bytes.len(), &text[..cut])
                } else {
                    write!(f, "file {text:?}")
                }
            }
            Entry::Link(target) => write!(f, "-> {}", target.display()),
            Entry::Other => write!(f, "special"),
        }
    }
}

/// Relative path -> content, for every path under `groups/` and `container/`.
pub type Tree = BTreeMap<String, Entry>;

/// Every path under `root`'s `groups/` and `container/`, sorted, relative to `root`, with its
/// metadata (not following links).
pub fn walk(root: &Path) -> Vec<(String, PathBuf, std::fs::Metadata)> {
    let mut out = Vec::new();
    for top in ["groups", "container"] {
        let start = root.join(top);
        if std::fs::symlink_metadata(&start).is_err() {
            continue;
        }
        for entry in walkdir::WalkDir::new(&start).sort_by_file_name() {
            let entry = entry.unwrap();
            let rel = entry
                .path()
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let meta = entry.path().symlink_metadata().unwrap();
            out.push((rel, entry.into_path(), meta));
        }
    }
    out
}

/// The folder of the shared sources' record in a deployment's state folder.
pub const SOURCES_RECORD: &str = "groups/.clawmd/sources";

/// The records of what clawmd wrote in each group's `.claude-fragments`: written ahead of a
/// compose with the hashes of both what is there and what it is about to write, so a crash or
/// a refused run can leave one that is neither before nor after; what matters of it is that
/// it vouches for every fragment left on disk ([`assert_fragments_vouched`]).
pub const WRITTEN_RECORDS: &str = "groups/.clawmd/written";

/// The groups' records in a deployment's state folder.
pub const VERDICTS: &str = "groups/.clawmd/verdicts/";

/// A content-only snapshot of a deployment (paths relative to `root`). A group's record in
/// the state folder (`groups/.clawmd/verdicts/<group>`) stands as its key and verdict: the
/// look it also keeps names files by identity (inode, times), which two equal deployments
/// never share. The shared sources' record is left out, as in `Deployment::snapshot`.
pub fn tree(root: &Path) -> Tree {
    walk(root)
        .into_iter()
        .filter(|(rel, ..)| !rel.starts_with(SOURCES_RECORD) && !rel.starts_with(WRITTEN_RECORDS))
        .map(|(rel, path, _)| {
            let entry = entry_at(&path).expect("entry vanished while walking");
            let entry = match entry {
                Entry::File(bytes) if rel.starts_with(VERDICTS) => {
                    Entry::File(record_verdict(bytes))
                }
                other => other,
            };
            (rel, entry)
        })
        .collect()
}

/// Every fragment clawmd left in a group's `.claude-fragments` (whatever a crash left) is
/// vouched for by the group's record of what it wrote, so that no later compose takes it for
/// someone else's and keeps it aside. Returns the number of fragments checked.
#[track_caller]
pub fn assert_fragments_vouched(root: &Path, context: &str) -> usize {
    use std::os::unix::ffi::OsStrExt;
    let mut checked = 0;
    let groups = root.join("groups");
    for group in std::fs::read_dir(&groups).unwrap().flatten() {
        let fragments = group.path().join(".claude-fragments");
        let Ok(entries) = std::fs::read_dir(&fragments) else {
            continue;
        };
        let name = group.file_name().to_string_lossy().into_owned();
        let record = std::fs::read(root.join(WRITTEN_RECORDS).join(&name))
            .ok()
            .and_then(clawmd::state::record_json::<clawmd::written::WrittenRecord>)
            .map(|(_, json)| json);
        for entry in entries.flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            if file.starts_with(".clawmd-tmp-") {
                continue;
            }
            let meta = entry.path().symlink_metadata().unwrap();
            let bytes = if meta.file_type().is_symlink() {
                std::fs::read_link(entry.path())
                    .unwrap()
                    .as_os_str()
                    .as_bytes()
                    .to_vec()
            } else {
                std::fs::read(entry.path()).unwrap()
            };
            let hash = clawmd::written::content_hash(&bytes);
            let vouched = record.as_ref().is_some_and(|json| {
                json[&file]
                    .as_array()
                    .is_some_and(|hashes| hashes.iter().any(|h| h == hash.as_str()))
            });
            assert!(
                vouched,
                "{context}: groups/{name}/.claude-fragments/{file} is not vouched for by the record: {record:?}"
            );
            checked += 1;
        }
    }
    checked
}

/// A record's key and verdict (a torn or foreign record as it is).
pub fn record_verdict(bytes: Vec<u8>) -> Vec<u8> {
    match clawmd::state::record_json::<clawmd::compose::GroupRecord>(bytes.clone()) {
        Some((key, json)) => {
            let mut out = key.to_vec();
            out.extend(serde_json::to_vec(&json["delivered"]).unwrap());
            out
        }
        None => bytes,
    }
}

/// Everything under `root` (nothing where there is no `root`), relative to it: each folder,
/// each file's bytes, each link's target (never followed).
pub fn everything(root: &Path) -> Tree {
    if std::fs::symlink_metadata(root).is_err() {
        return Tree::new();
    }
    walkdir::WalkDir::new(root)
        .min_depth(1)
        .into_iter()
        .map(|entry| {
            let path = entry.unwrap().into_path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned();
            let now = entry_at(&path).unwrap_or_else(|| panic!("{} went away", path.display()));
            (rel, now)
        })
        .collect()
}

/// What changed from `before` to `after`: each path added or changed, with what it holds now,
/// and each path removed, with `None`.
pub fn changes<'a>(before: &Tree, after: &'a Tree) -> BTreeMap<String, Option<&'a Entry>> {
    let mut changed: BTreeMap<String, Option<&Entry>> = after
        .iter()
        .filter(|(path, now)| before.get(*path) != Some(*now))
        .map(|(path, now)| (path.clone(), Some(now)))
        .collect();
    for path in before.keys().filter(|path| !after.contains_key(*path)) {
        changed.insert(path.clone(), None);
    }
    changed
}

/// What is at `path` right now (`None`: nothing).
pub fn entry_at(path: &Path) -> Option<Entry> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    let kind = meta.file_type();
    Some(if kind.is_symlink() {
        Entry::Link(std::fs::read_link(path).ok()?)
    } else if kind.is_dir() {
        Entry::Dir
    } else if kind.is_file() {
        Entry::File(std::fs::read(path).ok()?)
    } else {
        Entry::Other
    })
}

/// Whether the last component of `rel` is a clawmd temp name.
pub fn is_temp(rel: &str) -> bool {
    Path::new(rel)
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(clawmd::fsops::is_temp_name)
}

/// The tree without the lock folder (a run that refuses has still taken the group's lock)
/// and without empty temp journals and the folders that hold them (a run that fails may have
/// made its journal before the failure; it is emptied when nothing of it is left). A journal
/// that still records something stays in the tree.
pub fn without_locks(tree: &Tree) -> Tree {
    tree.iter()
        .filter(|(path, entry)| {
            let empty_journal = path.starts_with("groups/.clawmd/journal/")
                && matches!(entry, Entry::File(bytes) if bytes.is_empty());
            !(path.starts_with("groups/.clawmd-locks")
                || empty_journal
                || (matches!(entry, Entry::Dir)
                    && ["groups/.clawmd", "groups/.clawmd/journal"].contains(&path.as_str())))
        })
        .map(|(path, entry)| (path.clone(), entry.clone()))
        .collect()
}

/// Temp files left in a tree.
pub fn temps(tree: &Tree) -> Vec<String> {
    tree.keys().filter(|k| is_temp(k)).cloned().collect()
}

/// A readable list of the paths where two trees differ (empty when equal).
pub fn tree_diff(expected: &Tree, actual: &Tree) -> String {
    let mut out = String::new();
    let keys: std::collections::BTreeSet<&String> = expected.keys().chain(actual.keys()).collect();
    for key in keys {
        let (a, b) = (expected.get(key), actual.get(key));
        if a != b {
            out.push_str(&format!(
                "  {key}:\n    expected {a:?}\n    actual   {b:?}\n"
            ));
        }
    }
    out
}

/// Asserts two trees are equal, listing the differences.
#[track_caller]
pub fn assert_same_tree(expected: &Tree, actual: &Tree, context: &str) {
    let diff = tree_diff(expected, actual);
    assert!(diff.is_empty(), "{context}: trees differ:\n{diff}");
}

/// Every `@./path` import of every composed `CLAUDE.md` in the tree names something that
/// exists (a file, or a link: link targets live in the container and are not checked here).
/// Returns the number of imports checked.
#[track_caller]
pub fn assert_imports_resolve(tree: &Tree, context: &str) -> usize {
    let mut checked = 0;
    for (path, entry) in tree {
        let Entry::File(bytes) = entry else { continue };
        if !path.ends_with("/CLAUDE.md") || !path.starts_with("groups/") {
            continue;
        }
        if !clawmd::plan::is_composed(bytes) {
            continue;
        }
        // A composed CLAUDE.md in a group's bind folder in the state is bound over the group
        // folder's, so its imports resolve in the group folder.
        let dir = match path
            .strip_prefix("groups/.clawmd/binds/")
            .and_then(|rest| rest.strip_suffix("/CLAUDE.md"))
        {
            Some(group) if !group.contains('/') => PathBuf::from(format!("groups/{group}")),
            _ => Path::new(path).parent().unwrap().to_owned(),
        };
        for line in String::from_utf8_lossy(bytes).lines() {
            let Some(rel) = line.strip_prefix("@./") else {
                continue;
            };
            let target = dir.join(rel).to_string_lossy().into_owned();
            assert!(
                matches!(tree.get(&target), Some(Entry::File(_) | Entry::Link(_))),
                "{context}: {path} imports {line} but {target} is {:?}",
                tree.get(&target)
            );
            checked += 1;
        }
    }
    checked
}

/// Whether `haystack` holds `needle` byte for byte.
pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

/// Asserts that every one of `parts` is in `text`, in this order (each after the previous).
#[track_caller]
pub fn in_order(text: &str, parts: &[&str]) {
    let mut at = 0;
    for part in parts {
        match text[at..].find(part) {
            Some(found) => at += found + part.len(),
            None => panic!("{part:?} missing (or out of order) in:\n{text}"),
        }
    }
}

// The one copy_tree, the loader's conformance harness's; tests/main.rs loads that harness too,
// so the file is a module twice in that test binary (the same function, no state).
#[path = "../../crates/clawmd-loader/tests/support/copy_tree.rs"]
#[allow(clippy::duplicate_mod)]
mod copy_tree_shared;
pub use copy_tree_shared::copy_tree;

/// A fresh temp dir for a deployment. The heavy tests run many fsync-bound processes; a kill or
/// an abort loses nothing the kernel already has, whatever the filesystem, so by default they
/// use tmpfs (`/dev/shm`) when it exists. `CLAWMD_TEST_DIR=<dir>` picks another place (the soak
/// script runs the suite again on the disk-backed temp dir).
pub fn work_dir() -> tempfile::TempDir {
    let base = std::env::var_os("CLAWMD_TEST_DIR")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let shm = Path::new("/dev/shm");
            if shm.is_dir() {
                shm.to_owned()
            } else {
                std::env::temp_dir()
            }
        });
    tempfile::Builder::new()
        .prefix("clawmd-rel-")
        .tempdir_in(base)
        .expect("temp dir")
}
