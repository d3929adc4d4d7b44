//! The container's view of the host: a [`MemoryFs`] over a mount table.
//!
//! An agent's memory is loaded *inside* its container, where `/workspace/agent` is the group
//! folder and `/app/CLAUDE.md` the shared base. A symlink such as
//! `groups/main/.claude-shared.md -> /app/CLAUDE.md` dangles on the host but resolves in the
//! container. [`MountedFs`] resolves every path, symlink targets included, component by
//! component in container space (the way the kernel would inside the container), and only
//! then maps the result to a host path through the longest matching mount. Paths outside
//! every mount do not exist, except the directories that hold mount points.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};

use super::fs::{DirEntry, FileKind, HostFs, MemoryFs, Metadata, ReadOutcome};

/// Linux gives up after 40 symlinks in one resolution (`ELOOP`); so do we.
pub const MAX_SYMLINKS: usize = 40;

/// One bind mount: `container` (absolute, in the container) shows `host`.
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// The nanoclaw runner's mounts for one group (DESIGN §1), given the host's groups and
/// container directories and the container-side mount points.
///
/// ```
/// use clawmd::loader::mounted::{nanoclaw_mounts, Mount};
///
/// let m = nanoclaw_mounts("/srv/groups/main".as_ref(), "/srv/container".as_ref(), "/workspace/agent".as_ref(), "/app".as_ref());
/// assert!(m.contains(&Mount::new("/app/CLAUDE.md", "/srv/container/CLAUDE.md")));
/// ```
pub fn nanoclaw_mounts(
    group_dir: &Path,
    container_dir: &Path,
    agent: &Path,
    app: &Path,
) -> Vec<Mount> {
    vec![
        Mount::new(agent, group_dir),
        Mount::new(agent.join("CLAUDE.md"), group_dir.join("CLAUDE.md")),
        Mount::new(
            agent.join(".claude-fragments"),
            group_dir.join(".claude-fragments"),
        ),
        Mount::new(
            agent.join("container.json"),
            group_dir.join("container.json"),
        ),
        Mount::new(app.join("CLAUDE.md"), container_dir.join("CLAUDE.md")),
        Mount::new(app.join("skills"), container_dir.join("skills")),
    ]
}

/// A filesystem seen through a mount table; see the module docs.
///
/// ```
/// use clawmd::loader::fs::{MemoryFs, ReadOutcome};
/// use clawmd::loader::mounted::{Mount, MountedFs};
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
pub struct MountedFs<F = HostFs> {
    /// Longest mount point first.
    mounts: Vec<Mount>,
    host: F,
}

/// Where a container path lands.
enum Node {
    /// On the host, at this path (reached through a mount).
    Host { path: PathBuf, exact_mount: bool },
    /// A directory that exists only because mount points lie below it.
    Implied,
}

impl MountedFs<HostFs> {
    /// A mount table over the host filesystem.
    pub fn new(mounts: impl IntoIterator<Item = Mount>) -> Self {
        Self::with_host_fs(HostFs, mounts)
    }
}

impl<F: MemoryFs> MountedFs<F> {
    /// A mount table over another [`MemoryFs`] (for tests, or to stack views).
    pub fn with_host_fs(host: F, mounts: impl IntoIterator<Item = Mount>) -> Self {
        let mut mounts: Vec<Mount> = mounts.into_iter().collect();
        mounts.sort_by_key(|m| std::cmp::Reverse(m.container.components().count()));
        MountedFs { mounts, host }
    }

    /// The mounts, longest mount point first.
    pub fn mounts(&self) -> &[Mount] {
        &self.mounts
    }

    /// The host path a container path maps to lexically (no symlinks followed), if any.
    pub fn host_path(&self, container: &Path) -> Option<PathBuf> {
        match self.node(container) {
            Some(Node::Host { path, .. }) => Some(path),
            _ => None,
        }
    }

    fn node(&self, p: &Path) -> Option<Node> {
        if let Some(m) = self.mounts.iter().find(|m| p.starts_with(&m.container)) {
            let rel = p.strip_prefix(&m.container).unwrap_or(Path::new(""));
            let exact = rel.as_os_str().is_empty();
            let path = if exact {
                m.host.clone()
            } else {
                m.host.join(rel)
            };
            return Some(Node::Host {
                path,
                exact_mount: exact,
            });
        }
        self.mounts
            .iter()
            .any(|m| m.container.starts_with(p))
            .then_some(Node::Implied)
    }

    /// `lstat` of a container path whose parent is already resolved.
    fn lstat_here(&self, p: &Path) -> io::Result<Metadata> {
        match self.node(p) {
            // A bind mount shows its source, links followed, at the mount point.
            Some(Node::Host {
                path,
                exact_mount: true,
            }) => self.host.metadata(&path),
            Some(Node::Host {
                path,
                exact_mount: false,
            }) => self.host.symlink_metadata(&path),
            Some(Node::Implied) => Ok(Metadata {
                kind: FileKind::Dir,
                len: 0,
            }),
            None => Err(not_found(p)),
        }
    }

    fn link_here(&self, p: &Path) -> io::Result<PathBuf> {
        match self.node(p) {
            Some(Node::Host {
                path,
                exact_mount: false,
            }) => self.host.read_link(&path),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a symlink", p.display()),
            )),
        }
    }

    /// Resolve `path` in container space; returns the real container path and its
    /// metadata (of the link itself when `follow_last` is false and it is one).
    fn resolve(&self, path: &Path, follow_last: bool) -> io::Result<(PathBuf, Metadata)> {
        if !path.is_absolute() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not absolute", path.display()),
            ));
        }
        let mut work: VecDeque<OsString> = components(path);
        let mut cur = PathBuf::from("/");
        let mut meta = self.lstat_here(&cur).unwrap_or(Metadata {
            kind: FileKind::Dir,
            len: 0,
        });
        let mut links = 0;
        while let Some(name) = work.pop_front() {
            if name == "." {
                continue;
            }
            if meta.kind != FileKind::Dir {
                return Err(not_a_dir(&cur));
            }
            if name == ".." {
                cur.pop();
                meta = self.lstat_here(&cur)?;
                continue;
            }
            let cand = cur.join(&name);
            let m = self.lstat_here(&cand)?;
            let last = work.is_empty();
            if m.kind == FileKind::Symlink && (!last || follow_last) {
                links += 1;
                if links > MAX_SYMLINKS {
                    return Err(io::Error::from(rustix::io::Errno::LOOP));
                }
                let target = self.link_here(&cand)?;
                if target.is_absolute() {
                    cur = PathBuf::from("/");
                    meta = self.lstat_here(&cur).unwrap_or(Metadata {
                        kind: FileKind::Dir,
                        len: 0,
                    });
                }
                for c in components(&target).into_iter().rev() {
                    work.push_front(c);
                }
                continue;
            }
            cur = cand;
            meta = m;
        }
        Ok((cur, meta))
    }

    fn entries_of(&self, dir: &Path) -> io::Result<Vec<DirEntry>> {
        let mut out = match self.node(dir) {
            Some(Node::Host { path, .. }) => self.host.read_dir(&path)?,
            Some(Node::Implied) => Vec::new(),
            None => return Err(not_found(dir)),
        };
        // Mount points directly below `dir` shadow (or add) entries.
        for m in self.mounts.iter().rev() {
            let Some(parent) = m.container.parent() else {
                continue;
            };
            if parent != dir {
                continue;
            }
            let Some(name) = m.container.file_name() else {
                continue;
            };
            let kind = self
                .lstat_here(&m.container)
                .map_or(FileKind::Other, |md| md.kind);
            out.retain(|e| e.name != name);
            out.push(DirEntry {
                name: name.to_os_string(),
                kind,
            });
        }
        for m in &self.mounts {
            // Deeper mounts make implied directories appear.
            if let Ok(rel) = m.container.strip_prefix(dir)
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

impl<F: MemoryFs> MemoryFs for MountedFs<F> {
    fn symlink_metadata(&self, path: &Path) -> io::Result<Metadata> {
        self.resolve(path, false).map(|(_, m)| m)
    }

    fn metadata(&self, path: &Path) -> io::Result<Metadata> {
        self.resolve(path, true).map(|(_, m)| m)
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        let (real, m) = self.resolve(path, false)?;
        if m.kind != FileKind::Symlink {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a symlink", path.display()),
            ));
        }
        self.link_here(&real)
    }

    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        self.resolve(path, true).map(|(p, _)| p)
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        let (real, m) = self.resolve(path, true)?;
        if m.kind != FileKind::Dir {
            return Err(not_a_dir(path));
        }
        self.entries_of(&real)
    }

    fn read_limited(&self, path: &Path, limit: u64) -> io::Result<ReadOutcome> {
        let (real, m) = self.resolve(path, true)?;
        match (m.kind, self.node(&real)) {
            (FileKind::File, Some(Node::Host { path, .. })) => self.host.read_limited(&path, limit),
            (kind, _) => Ok(ReadOutcome::NotAFile { kind }),
        }
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
        let fs = MountedFs::new(nanoclaw_mounts(
            &group,
            &r.join("container"),
            "/workspace/agent".as_ref(),
            "/app".as_ref(),
        ));
        (root, fs)
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
