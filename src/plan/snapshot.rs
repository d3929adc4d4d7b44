//! The container's view of a group as compose leaves it, held in memory.
//!
//! To say what reaches the agent, the loader runs on this snapshot rather than on the group
//! folder: it is built from the plan (the bytes and links compose writes), the group's
//! `CLAUDE.local.md` (read once, never through a link) and the shared sources as the runner
//! mounts them (`<app>/CLAUDE.md`, `<app>/skills/...`). So the verdict is the same in a dry run
//! and after the write, nothing the agent plants in its folder is ever read, and no path
//! outside the deployment is touched.
//!
//! A leaf over the loader's [`MemoryFs`]: `sources` (a shared source loaded alone) and
//! `delivery::verify` both build one.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};

use crate::loader::fs::{DirEntry, FileKind, MemoryFs, Metadata, ReadOutcome};

/// Linux gives up after 40 symlinks in one resolution.
const MAX_SYMLINKS: usize = 40;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Dir,
    File(Vec<u8>),
    /// A regular file of this many bytes, too large for anything that reads it here: reading
    /// it says so with its size.
    Oversized(u64),
    Link(PathBuf),
}

/// An in-memory filesystem of absolute paths.
///
/// Nodes are kept by their path's bytes in normal form ([`key`]): a lookup compares bytes, not
/// path components, and the children of a folder still come out sorted by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    nodes: BTreeMap<OsString, Node>,
}

/// `path` in normal form (components joined by single slashes, no trailing slash, no `.`),
/// so that two paths equal as [`Path`]s have the same key.
fn key(path: &Path) -> OsString {
    path.components().collect::<PathBuf>().into_os_string()
}

impl Snapshot {
    /// An empty filesystem (just `/`).
    pub fn new() -> Self {
        let mut nodes = BTreeMap::new();
        nodes.insert(OsString::from("/"), Node::Dir);
        Snapshot { nodes }
    }

    /// Adds a directory and its parents.
    pub fn dir(&mut self, path: &Path) {
        for ancestor in path.ancestors() {
            self.nodes.entry(key(ancestor)).or_insert(Node::Dir);
        }
    }

    /// Adds a file (and its parent directories).
    pub fn file(&mut self, path: &Path, bytes: Vec<u8>) {
        if let Some(parent) = path.parent() {
            self.dir(parent);
        }
        self.nodes.insert(key(path), Node::File(bytes));
    }

    /// Adds a regular file of `len` bytes whose content is not held (and its parent
    /// directories): a read within a limit under `len` says it is too large; any other read
    /// fails.
    pub fn oversized(&mut self, path: &Path, len: u64) {
        if let Some(parent) = path.parent() {
            self.dir(parent);
        }
        self.nodes.insert(key(path), Node::Oversized(len));
    }

    /// Adds a symlink (and its parent directories).
    pub fn link(&mut self, path: &Path, target: &Path) {
        if let Some(parent) = path.parent() {
            self.dir(parent);
        }
        self.nodes
            .insert(key(path), Node::Link(target.to_path_buf()));
    }

    /// Whether any file, link or oversized file in the snapshot is called `name`.
    pub fn has_entry_named(&self, name: &str) -> bool {
        self.nodes.iter().any(|(path, node)| {
            !matches!(node, Node::Dir) && Path::new(path).file_name().is_some_and(|n| n == name)
        })
    }

    /// `path` with every symlink resolved (the last one too when `follow_last`), as the
    /// kernel resolves it: component by component, a link's target replacing the link.
    /// Components are taken as they come (a path thousands of folders deep that is missing
    /// early costs only the steps up to where it is missing).
    fn resolve(&self, path: &Path, follow_last: bool) -> io::Result<PathBuf> {
        // What is left to walk: the path, and in front of it the targets of the links met.
        let mut pending = vec![components(path)];
        let mut current = PathBuf::from("/");
        let mut links = 0;
        while let Some(walking) = pending.last_mut() {
            let Some(component) = walking.next() else {
                pending.pop();
                continue;
            };
            match component {
                Component::RootDir | Component::Prefix(_) => current = PathBuf::from("/"),
                Component::ParentDir => {
                    current.pop();
                }
                Component::CurDir => {}
                Component::Normal(name) => {
                    let next = current.join(name);
                    let last = pending.iter_mut().all(|rest| rest.peek().is_none());
                    // `next` is in normal form: built from `/` by single names.
                    match self.nodes.get(next.as_os_str()) {
                        Some(Node::Link(target)) if follow_last || !last => {
                            links += 1;
                            if links > MAX_SYMLINKS {
                                return Err(io::Error::other("too many levels of symbolic links"));
                            }
                            pending.push(components(target));
                        }
                        // A file cannot be walked through (`f.md/..`), as the kernel says.
                        Some(Node::File(_) | Node::Oversized(_)) if !last => {
                            return Err(io::Error::from(io::ErrorKind::NotADirectory));
                        }
                        Some(_) => current = next,
                        None if last => current = next,
                        None => return Err(not_found()),
                    }
                }
            }
        }
        Ok(current)
    }

    fn node(&self, path: &Path, follow: bool) -> io::Result<(&Node, PathBuf)> {
        let resolved = self.resolve(path, follow)?;
        self.nodes
            .get(resolved.as_os_str())
            .map(|node| (node, resolved))
            .ok_or_else(not_found)
    }
}

/// The components of `path` that move the walk (a leading `.` does not).
fn components(path: &Path) -> std::iter::Peekable<std::path::Components<'_>> {
    let mut components = path.components().peekable();
    components.next_if_eq(&Component::CurDir);
    components
}

fn not_found() -> io::Error {
    io::Error::from(io::ErrorKind::NotFound)
}

fn metadata_of(node: &Node) -> Metadata {
    match node {
        Node::Dir => Metadata {
            kind: FileKind::Dir,
            len: 0,
        },
        Node::File(bytes) => Metadata {
            kind: FileKind::File,
            len: bytes.len() as u64,
        },
        Node::Oversized(len) => Metadata {
            kind: FileKind::File,
            len: *len,
        },
        Node::Link(target) => Metadata {
            kind: FileKind::Symlink,
            len: target.as_os_str().len() as u64,
        },
    }
}

impl MemoryFs for Snapshot {
    fn symlink_metadata(&self, path: &Path) -> io::Result<Metadata> {
        self.node(path, false).map(|(node, _)| metadata_of(node))
    }

    fn metadata(&self, path: &Path) -> io::Result<Metadata> {
        self.node(path, true).map(|(node, _)| metadata_of(node))
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        match self.node(path, false)? {
            (Node::Link(target), _) => Ok(target.clone()),
            _ => Err(io::Error::from(io::ErrorKind::InvalidInput)),
        }
    }

    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        self.node(path, true).map(|(_, resolved)| resolved)
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        let (node, dir) = self.node(path, true)?;
        if *node != Node::Dir {
            return Err(io::Error::from(io::ErrorKind::NotADirectory));
        }
        Ok(self
            .nodes
            .iter()
            .map(|(p, node)| (Path::new(p), node))
            .filter(|(p, _)| p.parent() == Some(dir.as_path()) && *p != dir)
            .map(|(p, node)| DirEntry {
                name: p.file_name().unwrap_or_default().to_os_string(),
                kind: metadata_of(node).kind,
            })
            .collect())
    }

    fn read_limited(&self, path: &Path, limit: u64) -> io::Result<ReadOutcome> {
        match self.node(path, true)? {
            (Node::File(bytes), _) if bytes.len() as u64 <= limit => {
                Ok(ReadOutcome::Bytes(bytes.clone()))
            }
            (Node::File(bytes), _) => Ok(ReadOutcome::TooLarge {
                len: bytes.len() as u64,
            }),
            (Node::Oversized(len), _) if *len > limit => Ok(ReadOutcome::TooLarge { len: *len }),
            (Node::Oversized(_), _) => Err(io::Error::other(
                "the content of this file was not read (it is larger than Claude Code reads)",
            )),
            (node, _) => Ok(ReadOutcome::NotAFile {
                kind: metadata_of(node).kind,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_paths_in_normal_form() {
        assert_eq!(key(Path::new("/a//b/./c/")), "/a/b/c");
        assert_eq!(key(Path::new("/")), "/");
        assert_eq!(key(Path::new("/a/../b")), "/a/../b");
        // A file added under a path spelled differently is the same node.
        let mut fs = Snapshot::new();
        fs.file(Path::new("/w//x.md"), b"X".to_vec());
        assert_eq!(
            fs.read_limited(Path::new("/w/x.md"), 10).unwrap(),
            ReadOutcome::Bytes(b"X".to_vec())
        );
        // Children come out sorted by name (as in path order), a folder's own entries
        // (`a/z`, between `a-b` and `x.md` by bytes) left out.
        fs.file(Path::new("/w/a-b"), Vec::new());
        fs.dir(Path::new("/w/a/"));
        fs.file(Path::new("/w/a/z"), Vec::new());
        let names: Vec<_> = fs
            .read_dir(Path::new("/w"))
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, ["a", "a-b", "x.md"]);
    }

    #[test]
    /// Resolution agrees with the kernel's on the same tree (relative links, so that it can
    /// be built on disk): links in the middle of a path, `..` after a link, `./` targets,
    /// chains, loops and paths missing early or late.
    fn resolution_agrees_with_the_kernel() {
        let disk = tempfile::tempdir().unwrap();
        let mut fs = Snapshot::new();
        let files = ["w/a/b/f.md", "w/c/g.md", "w/d/e/h.md"];
        let links = [
            ("w/l1", "a/b"),
            ("w/l2", "./c"),
            ("w/a/up", "../d/e"),
            ("w/chain", "l1"),
            ("w/loop1", "loop2"),
            ("w/loop2", "loop1"),
            ("w/d/back", "../a/../c/g.md"),
            ("w/dot", "."),
        ];
        for file in files {
            let on_disk = disk.path().join(file);
            std::fs::create_dir_all(on_disk.parent().unwrap()).unwrap();
            std::fs::write(&on_disk, file).unwrap();
            fs.file(&Path::new("/").join(file), file.as_bytes().to_vec());
        }
        for (link, target) in links {
            std::os::unix::fs::symlink(target, disk.path().join(link)).unwrap();
            fs.link(&Path::new("/").join(link), Path::new(target));
        }
        let deep = format!("w/{}x.md", "a/".repeat(300));
        let queries = [
            "w/l1/f.md",
            "w/l2/g.md",
            "w/a/up/h.md",
            "w/a/up/../../c/g.md",
            "w/chain/f.md",
            "w/chain/../b/f.md",
            "w/loop1",
            "w/loop1/x",
            "w/d/back",
            "w/dot/dot/dot/l2/g.md",
            "w/missing/f.md",
            "w/l1/missing.md",
            "w/c/g.md/x",
            "w/l1",
            "w/chain",
            "w/a/up",
            "w/l2/../l1",
            "w/chain/../l2",
            "w/missing/../c/g.md",
            "w/c/g.md/../g.md",
            &deep,
        ];
        for query in queries {
            let kernel = std::fs::canonicalize(disk.path().join(query))
                .map(|p| Path::new("/").join(p.strip_prefix(disk.path()).unwrap()));
            let ours = fs.canonicalize(&Path::new("/").join(query));
            match (&kernel, &ours) {
                (Ok(k), Ok(o)) => assert_eq!(k, o, "{query}"),
                (Err(_), Err(_)) => {}
                _ => panic!("{query}: kernel {kernel:?}, snapshot {ours:?}"),
            }
            // Without following the last link (lstat): links before it are still followed.
            let kernel = std::fs::symlink_metadata(disk.path().join(query))
                .ok()
                .map(|m| FileKind::from_mode(std::os::unix::fs::MetadataExt::mode(&m)));
            let ours = fs
                .symlink_metadata(&Path::new("/").join(query))
                .ok()
                .map(|m| m.kind);
            assert_eq!(kernel, ours, "lstat {query}");
        }
    }

    #[test]
    fn links_resolve_in_container_space() {
        let mut fs = Snapshot::new();
        fs.file(Path::new("/app/CLAUDE.md"), b"BASE".to_vec());
        fs.link(
            Path::new("/workspace/agent/.claude-shared.md"),
            Path::new("/app/CLAUDE.md"),
        );
        fs.link(
            Path::new("/workspace/agent/rel.md"),
            Path::new("../../app/CLAUDE.md"),
        );
        fs.link(Path::new("/workspace/agent/loop"), Path::new("loop"));
        let shared = Path::new("/workspace/agent/.claude-shared.md");
        assert_eq!(
            fs.canonicalize(shared).unwrap(),
            Path::new("/app/CLAUDE.md")
        );
        assert_eq!(
            fs.read_limited(Path::new("/workspace/agent/rel.md"), 10)
                .unwrap(),
            ReadOutcome::Bytes(b"BASE".to_vec())
        );
        assert_eq!(fs.symlink_metadata(shared).unwrap().kind, FileKind::Symlink);
        assert!(fs.metadata(Path::new("/workspace/agent/loop")).is_err());
        assert!(fs.metadata(Path::new("/etc/passwd")).is_err());
        let names: Vec<_> = fs
            .read_dir(Path::new("/workspace/agent"))
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, [".claude-shared.md", "loop", "rel.md"]);
    }
}
