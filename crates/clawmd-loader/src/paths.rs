//! Lexical path rules, spelled the way Claude Code (Node's `path` module) spells them.
//!
//! Import targets are resolved without touching the disk (`~` expansion, `.`/`..`), the
//! "inside the working directory" test is a case-insensitive prefix test, and the set of
//! already-loaded files is keyed by normalised path. Keeping these in one place makes the
//! differences from Rust's own path handling (which keeps `..`, and has no `extname`) visible.

use std::path::{Component, Path, PathBuf};

use super::markdown::js_trim;

/// `path.normalize` for an absolute path: resolve `.` and `..`, collapse separators, drop a
/// trailing slash. (`..` above `/` stays at `/`.)
pub fn normalize(p: &Path) -> PathBuf {
    // Most paths are normal already; checking costs one pass and no allocation, where
    // rebuilding costs a push per component (hostile imports are thousands of folders deep).
    if is_normal(p) {
        return p.to_path_buf();
    }
    normalize_by_components(p)
}

/// Whether `p` is what [`normalize`] would make of it: absolute, and every component a name
/// (no empty one, no `.` or `..`, no trailing `/`).
fn is_normal(p: &Path) -> bool {
    let bytes = p.as_os_str().as_encoded_bytes();
    match bytes {
        [b'/'] => true,
        [b'/', rest @ ..] => rest
            .split(|&b| b == b'/')
            .all(|name| !name.is_empty() && name != b"." && name != b".."),
        _ => false,
    }
}

fn normalize_by_components(p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::Normal(s) => out.push(s),
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// `cwd` and its ancestors, root-most first, without `/` itself.
pub fn walk_dirs(cwd: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = normalize(cwd)
        .ancestors()
        .filter(|d| d.parent().is_some())
        .map(Path::to_path_buf)
        .collect();
    dirs.reverse();
    dirs
}

/// Resolve an import path as written (JS `Tt(path, dirname(importer))`): trimmed, `~` and
/// `~/…` against `home`, absolute paths normalised, anything else relative to `base_dir`.
/// Like Node's `path.resolve`, a trailing `/` is dropped (`@./a.md/` loads `a.md`: case 18).
/// `None` when it needs a home directory and there is none.
pub fn resolve_import(written: &str, base_dir: &Path, home: Option<&Path>) -> Option<PathBuf> {
    let r = js_trim(written);
    if r.is_empty() {
        return Some(normalize(base_dir));
    }
    if r == "~" {
        return home.map(normalize);
    }
    if let Some(rest) = r.strip_prefix("~/") {
        return home.map(|h| normalize(&h.join(rest)));
    }
    if r.starts_with('/') {
        return Some(normalize(Path::new(r)));
    }
    Some(normalize(&base_dir.join(r)))
}

/// JS `Tc(path, dir)` with its default `caseFold: true`: is `path` equal to `dir` or below
/// it, compared case-insensitively (and with macOS's `/private/var` spelled `/var`)?
pub fn is_within(path: &Path, dir: &Path) -> bool {
    let fold = |p: &Path| {
        let s = normalize(p).to_string_lossy().into_owned();
        let s = if let Some(rest) = s.strip_prefix("/private/var/") {
            format!("/var/{rest}")
        } else if s == "/private/tmp" || s.starts_with("/private/tmp/") {
            s["/private".len()..].to_string()
        } else {
            s
        };
        s.to_lowercase()
    };
    let (p, d) = (fold(path), fold(dir));
    p == d || d == "/" || p.strip_prefix(&d).is_some_and(|rest| rest.starts_with('/'))
}

/// JS `jh`: the key of the "already loaded" set.
pub fn key(p: &Path) -> String {
    normalize(p).to_string_lossy().into_owned()
}

/// Node's `path.extname` on the last component.
pub fn extname(p: &str) -> &str {
    let base = p.trim_end_matches('/');
    let base = base.rsplit('/').next().unwrap_or(base);
    let Some(dot) = base.rfind('.') else {
        return "";
    };
    let before = &base[..dot];
    if before.is_empty() {
        return ""; // ".md": a dotfile has no extension
    }
    if before.bytes().all(|b| b == b'.') && dot == base.len() - 1 && dot == 1 {
        return ""; // ".."
    }
    &base[dot..]
}

/// The extensions Claude Code reads as text when imported (JS `$Zr`); a path without an
/// extension is read too.
const TEXT_EXTENSIONS: &[&str] = &[
    ".md",
    ".txt",
    ".text",
    ".json",
    ".yaml",
    ".yml",
    ".toml",
    ".xml",
    ".csv",
    ".html",
    ".htm",
    ".css",
    ".scss",
    ".sass",
    ".less",
    ".js",
    ".ts",
    ".tsx",
    ".jsx",
    ".mjs",
    ".cjs",
    ".mts",
    ".cts",
    ".py",
    ".pyi",
    ".pyw",
    ".rb",
    ".erb",
    ".rake",
    ".go",
    ".rs",
    ".java",
    ".kt",
    ".kts",
    ".scala",
    ".c",
    ".cpp",
    ".cc",
    ".cxx",
    ".h",
    ".hpp",
    ".hxx",
    ".cs",
    ".swift",
    ".sh",
    ".bash",
    ".zsh",
    ".fish",
    ".ps1",
    ".bat",
    ".cmd",
    ".env",
    ".ini",
    ".cfg",
    ".conf",
    ".config",
    ".properties",
    ".sql",
    ".graphql",
    ".gql",
    ".proto",
    ".vue",
    ".svelte",
    ".astro",
    ".ejs",
    ".hbs",
    ".pug",
    ".jade",
    ".php",
    ".pl",
    ".pm",
    ".lua",
    ".r",
    ".dart",
    ".ex",
    ".exs",
    ".erl",
    ".hrl",
    ".clj",
    ".cljs",
    ".cljc",
    ".edn",
    ".hs",
    ".lhs",
    ".elm",
    ".ml",
    ".mli",
    ".f",
    ".f90",
    ".f95",
    ".for",
    ".cmake",
    ".make",
    ".makefile",
    ".gradle",
    ".sbt",
    ".rst",
    ".adoc",
    ".asciidoc",
    ".org",
    ".tex",
    ".latex",
    ".lock",
    ".log",
    ".diff",
    ".patch",
];

/// Would Claude Code read `path` as text (by its extension, lower-cased)?
pub fn is_text_path(path: &Path) -> bool {
    let s = path.to_string_lossy();
    let ext = extname(&s).to_lowercase();
    ext.is_empty() || TEXT_EXTENSIONS.contains(&ext.as_str())
}

/// JS `kpn`: the project directory a memory file belongs to (the directory holding it, or
/// the one holding its `.claude` folder).
pub fn project_dir_of(path: &Path) -> PathBuf {
    let s = path.to_string_lossy();
    let cut = s.rfind("/.claude/").or_else(|| s.rfind('/'));
    match cut {
        Some(n) if n > 0 => PathBuf::from(&s[..n]),
        _ => PathBuf::from("/"),
    }
}

/// JS `DLr(a, b)`: is `a` strictly below `b`?
pub fn is_below(a: &Path, b: &Path) -> bool {
    let (a, b) = (a.to_string_lossy(), b.to_string_lossy());
    let b = b.trim_end_matches('/');
    a.starts_with(&format!("{b}/"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The shortcut for paths already normal gives what rebuilding them gives.
        #[test]
        fn normalize_equals_rebuilding_by_components(
            parts in proptest::collection::vec(
                prop_oneof![Just(""), Just("."), Just(".."), Just("a"), Just("b.md"), Just("..."), Just(".x")],
                0..8,
            ),
            absolute in any::<bool>(),
            trailing in any::<bool>(),
        ) {
            let mut text = parts.join("/");
            if absolute {
                text.insert(0, '/');
            }
            if trailing {
                text.push('/');
            }
            let path = Path::new(&text);
            prop_assert_eq!(normalize(path), normalize_by_components(path));
        }
    }

    #[test]
    fn already_normal_paths_are_recognised() {
        for p in ["/", "/a", "/a/b.md", "/a/.x/...", "/a/b c"] {
            assert!(is_normal(Path::new(p)), "{p}");
        }
        for p in [
            "", "a", "/a/", "//a", "/a//b", "/./a", "/a/.", "/a/..", "/../a",
        ] {
            assert!(!is_normal(Path::new(p)), "{p}");
        }
    }

    #[test]
    fn extname_like_node() {
        for (p, e) in [
            (".md", ""),
            ("a.md", ".md"),
            ("a.", "."),
            ("..md", ".md"),
            ("...", "."),
            ("x/.env", ""),
            ("file.md,", ".md,"),
            ("dir/", ""),
            ("..", ""),
        ] {
            assert_eq!(extname(p), e, "{p}");
        }
    }

    #[test]
    fn within_is_case_insensitive_and_component_wise() {
        assert!(is_within(Path::new("/a/B/c"), Path::new("/a/b")));
        assert!(is_within(Path::new("/a/b"), Path::new("/a/b/")));
        assert!(!is_within(Path::new("/a/bc"), Path::new("/a/b")));
        assert!(!is_within(Path::new("/a/b/../c"), Path::new("/a/b")));
    }

    #[test]
    fn imports_resolve_lexically() {
        let home = Path::new("/home/u");
        let base = Path::new("/p");
        assert_eq!(
            resolve_import("~/x.md", base, Some(home)).unwrap(),
            Path::new("/home/u/x.md")
        );
        assert_eq!(
            resolve_import("../x.md", base, Some(home)).unwrap(),
            Path::new("/x.md")
        );
        assert_eq!(
            resolve_import("/a/./b/../c", base, None).unwrap(),
            Path::new("/a/c")
        );
        assert_eq!(resolve_import("~/x", base, None), None);
    }

    #[test]
    fn project_dirs() {
        assert_eq!(
            project_dir_of(Path::new("/a/b/.claude/rules/x.md")),
            Path::new("/a/b")
        );
        assert_eq!(project_dir_of(Path::new("/a/AGENTS.md")), Path::new("/a"));
        assert_eq!(project_dir_of(Path::new("/AGENTS.md")), Path::new("/"));
    }
}
