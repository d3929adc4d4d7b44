//! How Claude Code vets the links on the way to a memory file before it loads it (since
//! 2.1.333; JS `Ao(fs, path, { judged: true })`, which walks the path link by link instead of
//! asking `realpath`).
//!
//! The walk starts from the path as written, made absolute and with `.` and `..` folded away
//! (JS `path.resolve`), and looks at each folder in turn; at a link it reads the link's text
//! and goes on from there, as the kernel would. Two things make the file *unchecked*, and
//! Claude Code then does not load it, approved or not (it logs "a link on its path leads to a
//! network location, or where it leads could not be checked"):
//!
//! * the text of a link on the way holds U+FFFD: Bun reads link text as UTF-8, so a target
//!   whose name is not UTF-8 cannot be followed by name (`literalLinkText: "undecodable"`;
//!   [`Behaviour::UndecodableLinkTargetsRefused`], case 67);
//! * the walk goes through one of a process's own links, JS
//!   `/^\/(?:dev\/fd|proc\/(?:self|thread-self|\d+)(?:\/task\/\d+)?\/(?:root|cwd|exe|fd|map_files))(?:\/|$)/i`
//!   tested on every link it follows (`onHop`): `/proc/self/cwd/x.md`, `/proc/self/root/…`,
//!   a link whose target goes there ([`Behaviour::ProcessLinksUnchecked`], cases 75, 77, 79,
//!   80).
//!
//! Which files are vetted: every import, and at depth 0 every file that is not the managed
//! one or the user's (JS `judged: h > 0 || !p1n(type)`, `p1n` being managed, or user outside
//! Claude Desktop's local agent): project and local files, `AGENTS.md`, project rules and the
//! project rules folders (managed and user rules are not).
//!
//! procfs is modelled by its shape, not read: the links Claude Code meets there are its own
//! process's (which a container view does not hold, and which on the host would be the
//! loader's own process). `/proc` and `/dev` are folders (Claude Code always has both, a
//! container view need not), `/proc/self` and `/proc/thread-self` links to the process's own
//! folder (not vetted), and `/proc/<pid>/{cwd,root,exe}`, `/proc/<pid>/fd/<n>`,
//! `/proc/<pid>/map_files/<range>` (also below `task/<tid>`) and `/dev/fd` are the process
//! links the walk stops at.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use super::fs::{FileKind, MAX_SYMLINKS, MemoryFs};
use super::paths::normalize;
#[cfg(doc)]
use super::version::Behaviour;

/// Why Claude Code does not follow the links on the way to a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unchecked {
    /// The text of the link at `link` is not UTF-8 (or holds U+FFFD).
    UndecodableTarget { link: PathBuf },
    /// The walk reaches `link`, one of a process's own links in `/proc` (or `/dev/fd`).
    ProcessLink { link: PathBuf },
}

impl Unchecked {
    /// A sentence for diagnostics.
    pub(crate) fn describe(&self) -> String {
        match self {
            Unchecked::UndecodableTarget { link } => format!(
                "is reached through the link {}, whose target's name is not UTF-8: Claude Code cannot check where it leads and does not load it",
                link.display()
            ),
            Unchecked::ProcessLink { link } => format!(
                "is reached through {}, a process's own link: Claude Code does not follow those to memory files and does not load it",
                link.display()
            ),
        }
    }
}

/// Which of the two checks apply (each is its own row of the release table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Vetting {
    /// Link text that is not UTF-8 stops the walk.
    pub(crate) undecodable: bool,
    /// A process's own link stops the walk.
    pub(crate) process_links: bool,
}

impl Vetting {
    /// Whether any check applies.
    pub(crate) fn any(self) -> bool {
        self.undecodable || self.process_links
    }
}

/// Whether the walk to `path` could see a link at all: a path under `/proc` or `/dev` (whose
/// process links are modelled, not looked up), or one whose real path differs from it.
pub(crate) fn worth_walking(path: &Path, real_differs: bool) -> bool {
    real_differs || path.starts_with("/proc") || path.starts_with("/dev")
}

/// JS `Ao(…, { judged: true })`: walks `path` link by link; `Some` when a link on the way
/// makes it unchecked. A path that cannot be walked to the end (missing, a loop, a folder that
/// cannot be searched) is not unchecked here: its read fails as it does in Claude Code.
pub(crate) fn vet<F: MemoryFs + ?Sized>(
    fs: &F,
    path: &Path,
    vetting: Vetting,
) -> Option<Unchecked> {
    if !vetting.any() {
        return None;
    }
    let mut rest: VecDeque<OsString> = names(&normalize(path));
    let mut at = PathBuf::from("/");
    let mut links = 0;
    while let Some(name) = rest.pop_front() {
        match name.as_bytes() {
            b"" | b"." => continue,
            b".." => {
                at.pop();
                continue;
            }
            _ => {}
        }
        let next = at.join(&name);
        if is_process_link(&next) {
            return vetting
                .process_links
                .then_some(Unchecked::ProcessLink { link: next });
        }
        if is_modelled_dir(&next) {
            at = next;
            continue;
        }
        let Ok(meta) = fs.symlink_metadata(&next) else {
            return None;
        };
        if meta.kind != FileKind::Symlink {
            at = next;
            continue;
        }
        links += 1;
        if links > MAX_SYMLINKS {
            return None;
        }
        let Ok(target) = fs.read_link(&next) else {
            return None;
        };
        let text = target.as_os_str().as_bytes();
        if vetting.undecodable && String::from_utf8_lossy(text).contains('\u{FFFD}') {
            return Some(Unchecked::UndecodableTarget { link: next });
        }
        if target.is_absolute() {
            at = PathBuf::from("/");
        }
        for n in target_names(text).into_iter().rev() {
            rest.push_front(n);
        }
    }
    None
}

/// The names of an absolute, normalised path.
fn names(p: &Path) -> VecDeque<OsString> {
    p.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_owned()),
            _ => None,
        })
        .collect()
}

/// The names of a link's text, `.` and `..` kept (they apply where the link is).
fn target_names(text: &[u8]) -> Vec<OsString> {
    text.split(|b| *b == b'/')
        .filter(|n| !n.is_empty())
        .map(|n| OsString::from(std::ffi::OsStr::from_bytes(n)))
        .collect()
}

/// `/proc`, `/dev` (always there for Claude Code, even where a container view holds neither),
/// and `/proc/self`, `/proc/thread-self`: links to the process's own folder, followed without
/// a check (JS `Kt` needs a `cwd`, `root`… after them).
fn is_modelled_dir(p: &Path) -> bool {
    ["/proc", "/dev", "/proc/self", "/proc/thread-self"]
        .iter()
        .any(|d| p == Path::new(d))
}

/// A process link the walk stops at (JS `Kt`, on a path that is a link in procfs).
pub(crate) fn is_process_link(p: &Path) -> bool {
    let Some(s) = p.to_str() else {
        return false;
    };
    if s == "/dev/fd" {
        return true;
    }
    let Some(rest) = s.strip_prefix("/proc/") else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let segs: Vec<&str> = rest.split('/').collect();
    let (pid, mut tail) = match segs.split_first() {
        Some((pid, tail)) => (*pid, tail),
        None => return false,
    };
    if !(pid == "self" || pid == "thread-self" || digits(pid)) {
        return false;
    }
    if let ["task", tid, after @ ..] = tail
        && digits(tid)
    {
        tail = after;
    }
    matches!(tail, ["cwd" | "root" | "exe"])
        || matches!(tail, ["fd" | "map_files", entry] if !entry.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::HostFs;
    use std::os::unix::fs::symlink;

    /// A view that holds nothing at all.
    struct Nothing;

    impl MemoryFs for Nothing {
        fn symlink_metadata(&self, _: &Path) -> std::io::Result<crate::fs::Metadata> {
            Err(std::io::ErrorKind::NotFound.into())
        }
        fn metadata(&self, _: &Path) -> std::io::Result<crate::fs::Metadata> {
            Err(std::io::ErrorKind::NotFound.into())
        }
        fn read_link(&self, _: &Path) -> std::io::Result<PathBuf> {
            Err(std::io::ErrorKind::NotFound.into())
        }
        fn canonicalize(&self, _: &Path) -> std::io::Result<PathBuf> {
            Err(std::io::ErrorKind::NotFound.into())
        }
        fn read_dir(&self, _: &Path) -> std::io::Result<Vec<crate::fs::DirEntry>> {
            Err(std::io::ErrorKind::NotFound.into())
        }
        fn read_limited(&self, _: &Path, _: u64) -> std::io::Result<crate::fs::ReadOutcome> {
            Err(std::io::ErrorKind::NotFound.into())
        }
    }

    const ALL: Vetting = Vetting {
        undecodable: true,
        process_links: true,
    };

    #[test]
    fn process_link_shapes() {
        for p in [
            "/proc/self/cwd",
            "/proc/self/root",
            "/proc/thread-self/root",
            "/proc/12/exe",
            "/proc/self/fd/3",
            "/proc/12/task/13/cwd",
            "/proc/self/map_files/7f-80",
            "/dev/fd",
        ] {
            assert!(is_process_link(Path::new(p)), "{p}");
        }
        for p in [
            "/proc/self",
            "/proc/self/fd",
            "/proc/self/environ",
            "/proc/version",
            "/proc/x/cwd",
            "/proc/self/cwd/x.md",
            "/dev/stdin",
            "/dev/fd/0",
        ] {
            assert!(!is_process_link(Path::new(p)), "{p}");
        }
    }

    #[test]
    fn vets_links_on_the_way() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("p/real")).unwrap();
        std::fs::write(root.join("p/real/a.md"), "A").unwrap();
        std::fs::write(root.join(std::ffi::OsStr::from_bytes(b"p/t\xfe.md")), "T").unwrap();
        symlink("real", root.join("p/dir")).unwrap();
        symlink("real/a.md", root.join("p/plain.md")).unwrap();
        symlink(
            std::ffi::OsStr::from_bytes(b"t\xfe.md"),
            root.join("p/odd.md"),
        )
        .unwrap();
        symlink("/proc/self/cwd/a.md", root.join("p/proc.md")).unwrap();
        symlink("../dir/../odd.md", root.join("p/real/back.md")).unwrap();
        let check = |rel: &str| vet(&HostFs, &root.join(rel), ALL);
        assert_eq!(check("p/plain.md"), None);
        assert_eq!(check("p/dir/a.md"), None);
        assert_eq!(check("p/missing.md"), None);
        assert_eq!(
            check("p/odd.md"),
            Some(Unchecked::UndecodableTarget {
                link: root.join("p/odd.md")
            })
        );
        // `..` after a link applies where the link leads (`p/dir/..` is `p/real/..`, `p`).
        assert_eq!(
            check("p/dir/back.md"),
            Some(Unchecked::UndecodableTarget {
                link: root.join("p/odd.md")
            })
        );
        assert_eq!(
            check("p/proc.md"),
            Some(Unchecked::ProcessLink {
                link: PathBuf::from("/proc/self/cwd")
            })
        );
        // Written under /proc: never looked up.
        assert_eq!(
            vet(&HostFs, Path::new("/proc/thread-self/root/etc/x.md"), ALL),
            Some(Unchecked::ProcessLink {
                link: PathBuf::from("/proc/thread-self/root")
            })
        );
        // procfs is modelled, never looked up: a view without /proc (a container's) says the
        // same.
        assert_eq!(
            vet(&Nothing, Path::new("/proc/self/root/app/x.md"), ALL),
            Some(Unchecked::ProcessLink {
                link: PathBuf::from("/proc/self/root")
            })
        );
        assert_eq!(
            vet(&Nothing, Path::new("/dev/fd/3"), ALL),
            Some(Unchecked::ProcessLink {
                link: PathBuf::from("/dev/fd")
            })
        );
        assert_eq!(vet(&Nothing, Path::new("/w/x.md"), ALL), None);
        // `..` written in the path is folded first (JS `path.resolve`).
        assert_eq!(vet(&HostFs, Path::new("/proc/self/cwd/../x.md"), ALL), None);
        // Each check on its own.
        let only = |undecodable, process_links| Vetting {
            undecodable,
            process_links,
        };
        assert_eq!(
            vet(&HostFs, &root.join("p/odd.md"), only(false, true)),
            None
        );
        assert_eq!(
            vet(&HostFs, &root.join("p/proc.md"), only(true, false)),
            None
        );
    }

    /// What loads around links Claude Code 2.1.333 vets, against 2.1.331, as measured with
    /// the real binaries (the SDK 0.3.333's and the CLI's) on this tree, external imports
    /// approved: on 2.1.333 the user's file found by name still loads through a link to a
    /// name that is not UTF-8 (not vetted), but no import, local file or project rule does,
    /// nor an import whose link leads through `/proc/self/cwd`; the folder's other rules load.
    #[test]
    fn what_loads_on_2_1_333() {
        use crate::{DiagnosticCode, ExternalImports, LoadOptions, load};
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        let bytes = |s: &[u8]| root.join(std::ffi::OsStr::from_bytes(s));
        let write = |p: PathBuf, text: &str| {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        let link = |target: &[u8], at: &str| {
            symlink(std::ffi::OsStr::from_bytes(target), root.join(at)).unwrap()
        };
        write(
            root.join("p/CLAUDE.md"),
            "P\n@./imp-link.md\n@./l-proc.md\n",
        );
        write(bytes(b"p/t\xfe1.md"), "IMPORTED THROUGH BAD LINK\n");
        link(b"t\xfe1.md", "p/imp-link.md");
        write(root.join("p/x.md"), "X\n");
        link(b"/proc/self/cwd/x.md", "p/l-proc.md");
        write(bytes(b"p/r\xfe.md"), "RULE THROUGH BAD LINK\n");
        write(root.join("p/.claude/rules/good.md"), "GOOD RULE\n");
        link(b"../../r\xfe.md", "p/.claude/rules/bad.md");
        write(bytes(b"p/rd\xfe/sub.md"), "RULE IN BAD DIR\n");
        link(b"../../rd\xfe", "p/.claude/rules/sub");
        write(bytes(b"p/ld\xfe/local.md"), "LOCAL VIA BAD DIR\n");
        link(b"ld\xfe/local.md", "p/CLAUDE.local.md");
        write(
            bytes(b"home/u\xfe.md"),
            "USER THROUGH BAD LINK\n@~/uimp.md\n",
        );
        std::fs::create_dir_all(root.join("home/.claude")).unwrap();
        link(b"../u\xfe.md", "home/.claude/CLAUDE.md");
        write(bytes(b"home/ui\xfe.md"), "USER IMPORT THROUGH BAD LINK\n");
        link(b"ui\xfe.md", "home/uimp.md");
        let run = |version: &str| {
            let mut opts = LoadOptions::new(root.join("p"), Some(root.join("home")));
            opts.managed_dir = None;
            opts.external_imports = ExternalImports::Approved;
            opts.claude_version = version.parse().unwrap();
            let memory = load(&HostFs, &opts).unwrap();
            let bodies: Vec<String> = memory.files.iter().map(|f| f.body.clone()).collect();
            let unchecked = memory
                .diagnostics
                .iter()
                .filter(|d| d.code == DiagnosticCode::LinkUnchecked)
                .count();
            (bodies, unchecked)
        };
        let (bodies, unchecked) = run("2.1.333");
        assert_eq!(
            bodies,
            [
                "USER THROUGH BAD LINK\n@~/uimp.md\n",
                "P\n@./imp-link.md\n@./l-proc.md\n",
                "GOOD RULE\n"
            ]
        );
        // The user's import, the project's two imports, the two rules, the local file.
        assert_eq!(unchecked, 6);
        // 2.1.331 follows the links to files (the /proc/self/cwd link target is left out of
        // this comparison: see docs/loader.md, "Not modelled"), but the rules folder's walk
        // ends at its first link to a path that is not UTF-8: none of its rules load, not even
        // `good.md` (case 113), and that one link is reported.
        let (bodies, unchecked) = run("2.1.331");
        for body in [
            "USER IMPORT THROUGH BAD LINK\n",
            "IMPORTED THROUGH BAD LINK\n",
            "LOCAL VIA BAD DIR\n",
        ] {
            assert!(bodies.iter().any(|b| b == body), "{body:?} in {bodies:?}");
        }
        for body in [
            "GOOD RULE\n",
            "RULE THROUGH BAD LINK\n",
            "RULE IN BAD DIR\n",
        ] {
            assert!(!bodies.iter().any(|b| b == body), "{body:?} in {bodies:?}");
        }
        assert_eq!(unchecked, 1);
    }
}
