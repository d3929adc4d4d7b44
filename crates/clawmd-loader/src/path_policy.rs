//! Which paths Claude Code refuses to open, whatever imports or the walk ask for: special
//! paths (UNC, `/net`, macOS volume paths), device and process files, and protected folders
//! (`connector-downloads`, session scratchpads). Pure functions on path text; the engine
//! applies them to the path as written and to its real path.

use std::path::Path;

use super::paths::normalize;
use super::version::{Behaviour, ClaudeVersion};

/// JS: `O1` — paths Claude Code never opens: UNC-like `//x`, `\\?\`-style prefixes, the
/// `/net` automount root and macOS `/.vol`-style paths.
pub(crate) fn is_special_path(p: &str) -> bool {
    let b = p.as_bytes();
    if b.len() >= 2 && matches!(b[0], b'/' | b'\\') && matches!(b[1], b'/' | b'\\') {
        return true;
    }
    if b.len() >= 4
        && matches!(b[0], b'/' | b'\\')
        && &b[1..3] == b"??"
        && matches!(b[3], b'/' | b'\\')
    {
        return true;
    }
    if !p.starts_with('/') {
        return false;
    }
    let mut parts: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    let first = parts.first().map(|s| s.to_ascii_lowercase());
    let net = matches!(first.as_deref(), Some("net")) && parts.len() <= 2;
    let mac = matches!(
        first.as_deref(),
        Some(".vol" | ".file" | ".nofollow" | ".resolve")
    );
    net || mac
}

/// JS: `rO` — a device or process file Claude Code refuses to read (`/dev/stdin`,
/// `/proc/self/environ`, a path climbing out of `/proc/<pid>` with `..`, a `/proc/<pid>/cwd/`
/// other than its own…), since 2.1.311. `/proc/self/cwd/…` is first read as the working
/// directory `cwd`, and a `/proc/<pid>/root` or `/proc/<pid>/task/<tid>` prefix is stripped
/// and the rest checked again (cases 75–79): `/proc/self/root/app/x.md` is `/app/x.md`.
/// Plain procfs files such as `/proc/version` are read.
pub(crate) fn is_device_or_process_file(p: &str, cwd: &Path, version: ClaudeVersion) -> bool {
    if !version.has(Behaviour::ProcessFilesRefused) {
        return false;
    }
    if p.starts_with('/') && p.contains("/..") {
        let mut stack: Vec<&str> = Vec::new();
        for seg in p.split('/') {
            match seg {
                ".." => {
                    if stack.len() >= 2
                        && (stack[0] == "proc" || (stack[0] == "dev" && stack[1] != "shm"))
                    {
                        return true;
                    }
                    stack.pop();
                }
                "" | "." => {}
                s => stack.push(s),
            }
        }
    }
    let mut o = normalize(Path::new(p)).to_string_lossy().into_owned();
    for round in 0.. {
        // JS `cd`: the process's own cwd link is the working directory.
        if let Some(rest) = o.strip_prefix("/proc/self/cwd/") {
            o = normalize(&cwd.join(rest)).to_string_lossy().into_owned();
        }
        let under = |root: &str| o == root || o.starts_with(&format!("{root}/"));
        if !under("/proc") && !under("/dev") {
            return false;
        }
        if links_into_a_process(&o) || refused_proc_or_dev(&o) {
            return true;
        }
        // JS: `o.replace(Qz, "").replace(Zz, "$1")`.
        let mut next = match proc_seg(&o, "root") {
            Some((_, rest)) => format!("/{rest}"),
            None => o.clone(),
        };
        if let Some((pid, rest)) = proc_seg(&next, "task")
            && let Some(slash) = rest.find('/')
        {
            next = format!("/proc/{pid}{}", &rest[slash..]);
        }
        if next == o {
            return false;
        }
        if round >= 8 {
            return true;
        }
        o = next;
    }
    true
}

/// Where the engine reads a `/proc/self/…` path from: Claude Code's own process links, which
/// for the agent are its working directory (`/proc/self/cwd`) and its root
/// (`/proc/self/root`, `/proc/thread-self/root`). Other paths are read as they are.
pub(crate) fn own_process_alias(p: &Path, cwd: &Path) -> Option<std::path::PathBuf> {
    // An alias inside an alias (`/proc/self/root/proc/self/cwd/x.md` is the agent's root's
    // `/proc/self/cwd/x.md`, its own cwd: measured on 2.1.328, it loads `x.md` in the cwd) is
    // followed to the end, a few rounds at most.
    let mut current = one_alias(p, cwd)?;
    for _ in 0..8 {
        match one_alias(&current, cwd) {
            Some(next) => current = next,
            None => break,
        }
    }
    Some(current)
}

/// One round of [`own_process_alias`].
fn one_alias(p: &Path, cwd: &Path) -> Option<std::path::PathBuf> {
    let s = p.to_str()?;
    // (`/proc/thread-self/cwd/` is refused since 2.1.311; before, it is the cwd too.)
    for own_cwd in ["/proc/self/cwd/", "/proc/thread-self/cwd/"] {
        if let Some(rest) = s.strip_prefix(own_cwd) {
            return Some(normalize(&cwd.join(rest)));
        }
    }
    for root in ["/proc/self/root/", "/proc/thread-self/root/"] {
        if let Some(rest) = s.strip_prefix(root) {
            return Some(normalize(&Path::new("/").join(rest)));
        }
    }
    None
}

/// `/proc/<pid>/<name>/<rest>` → `(pid, rest)`.
fn proc_seg<'a>(o: &'a str, name: &str) -> Option<(&'a str, &'a str)> {
    let rest = o.strip_prefix("/proc/")?;
    let (pid, rest) = rest.split_once('/')?;
    let rest = rest.strip_prefix(name)?.strip_prefix('/')?;
    Some((pid, rest))
}

/// JS `eO`: a process's cwd or fd link, `/dev/fd/N` or `/dev/std*`, used as a folder.
fn links_into_a_process(o: &str) -> bool {
    let segs: Vec<&str> = o.split('/').skip(1).collect();
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    matches!(
        segs.as_slice(),
        ["proc", _, "cwd", _, ..] | ["dev", "stdin" | "stdout" | "stderr", _, ..]
    ) || matches!(segs.as_slice(), ["proc", _, "fd", n, _, ..] | ["dev", "fd", n, _, ..] if digits(n))
}

/// The fixed lists and shapes of JS `rO` (`Jz`, `nO`, `tO`, `sO` and the per-process
/// files).
fn refused_proc_or_dev(o: &str) -> bool {
    const FILES: &[&str] = &[
        "/dev/zero",
        "/dev/random",
        "/dev/urandom",
        "/dev/full",
        "/dev/hwrng",
        "/dev/stdin",
        "/dev/tty",
        "/dev/console",
        "/proc/kmsg",
        "/dev/kmsg",
        "/proc/kcore",
        "/proc/vmcore",
        "/dev/core",
        "/dev/mem",
        "/dev/kmem",
        "/dev/port",
        "/dev/stdout",
        "/dev/stderr",
        "/dev/fd/0",
        "/dev/fd/1",
        "/dev/fd/2",
    ];
    const PER_PROCESS: &[&str] = &[
        "environ",
        "cmdline",
        "auxv",
        "maps",
        "smaps",
        "smaps_rollup",
        "numa_maps",
        "pagemap",
        "mem",
        "stat",
        "statm",
        "status",
        "syscall",
        "stack",
    ];
    if FILES.contains(&o) {
        return true;
    }
    if o.starts_with("/proc/")
        && (o.ends_with("/fd/0") || o.ends_with("/fd/1") || o.ends_with("/fd/2"))
    {
        return true;
    }
    let segs: Vec<&str> = o.split('/').skip(1).collect();
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match segs.as_slice() {
        // nO: terminals
        ["dev", "pts", n] if digits(n) || *n == "ptmx" => true,
        ["dev", "ptmx"] => true,
        ["dev", t] if t.starts_with("tty") => true,
        // tO: map_files
        ["proc", _, "map_files", ..] => true,
        // sO: another process's descriptors (its own, `self`, are not refused here)
        ["proc", pid, "fd", n] if digits(n) && *pid != "self" => true,
        ["proc", _, f] if PER_PROCESS.contains(f) => true,
        _ => false,
    }
}

/// Is `p` in a protected folder for this release: a folder named `connector-downloads` (any
/// case, trailing dots or spaces, an NTFS stream suffix; since 2.1.319, cases 69–71, 74), or a
/// session scratchpad `claude[-N]/<project>/<uuid>/scratchpad/` (since 2.1.327, cases 72–74)?
pub(crate) fn is_protected(p: &Path, version: ClaudeVersion) -> bool {
    let s = p.to_string_lossy();
    if version.has(Behaviour::ConnectorDownloadsProtected) {
        let mut dirs: Vec<&str> = s.split(['/', '\\']).collect();
        dirs.pop();
        if dirs.iter().any(|d| is_connector_downloads(d)) {
            return true;
        }
    }
    version.has(Behaviour::ScratchpadProtected) && in_scratchpad(&s)
}

/// JS `ssn`: `^connector-downloads[. ]*(?::.*)?$` on the lower-cased name, `ſ` read as `s`
/// and default-ignorable characters removed.
fn is_connector_downloads(name: &str) -> bool {
    // An ASCII name folds to its ASCII lower case (the characters folded or removed below are
    // all outside ASCII): compared in place, with no allocation for each folder of a path
    // (hostile imports are thousands of folders deep).
    if name.is_ascii() {
        return name
            .get(..CONNECTOR_DOWNLOADS.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(CONNECTOR_DOWNLOADS))
            && is_stream_or_dots(&name[CONNECTOR_DOWNLOADS.len()..]);
    }
    folded_is_connector_downloads(name)
}

const CONNECTOR_DOWNLOADS: &str = "connector-downloads";

/// What may follow the name: trailing dots or spaces, then nothing or an NTFS stream (`:…`).
fn is_stream_or_dots(rest: &str) -> bool {
    let rest = rest.trim_start_matches(['.', ' ']);
    rest.is_empty() || rest.starts_with(':')
}

/// [`is_connector_downloads`] for any name: folded as JS does, then compared.
fn folded_is_connector_downloads(name: &str) -> bool {
    let folded: String = name
        .to_lowercase()
        .chars()
        .map(|c| if c == '\u{17f}' { 's' } else { c })
        .filter(|c| !is_default_ignorable(*c))
        .collect();
    folded
        .strip_prefix(CONNECTOR_DOWNLOADS)
        .is_some_and(is_stream_or_dots)
}

/// The common default-ignorable code points (soft hyphen, zero-width and bidi controls,
/// variation selectors, BOM).
fn is_default_ignorable(c: char) -> bool {
    matches!(c,
        '\u{ad}' | '\u{34f}' | '\u{61c}' | '\u{115f}' | '\u{1160}' | '\u{17b4}' | '\u{17b5}'
        | '\u{180b}'..='\u{180f}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
        | '\u{2060}'..='\u{206f}' | '\u{3164}' | '\u{fe00}'..='\u{fe0f}' | '\u{feff}'
        | '\u{ffa0}' | '\u{fff0}'..='\u{fff8}' | '\u{1bca0}'..='\u{1bca3}'
        | '\u{1d173}'..='\u{1d17a}' | '\u{e0000}'..='\u{e0fff}')
}

/// JS `ei`: `/(^|\/)claude(-\d+)?\/[^/]+\/[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}\/scratchpad\//i`.
fn in_scratchpad(s: &str) -> bool {
    let segs: Vec<&str> = s.split('/').collect();
    // `claude` in any ASCII case, then nothing or `-` and digits (lower-casing changes neither).
    let is_claude = |seg: &str| match seg.get(..6) {
        Some(head) if head.eq_ignore_ascii_case("claude") => match &seg[6..] {
            "" => true,
            rest => rest
                .strip_prefix('-')
                .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())),
        },
        _ => false,
    };
    let is_uuid = |seg: &str| {
        let b = seg.as_bytes();
        b.len() == 36
            && b.iter().enumerate().all(|(i, c)| {
                if matches!(i, 8 | 13 | 18 | 23) {
                    *c == b'-'
                } else {
                    c.is_ascii_hexdigit()
                }
            })
    };
    // `claude/<project>/<uuid>/scratchpad/` followed by at least one more segment (the `/`).
    segs.windows(5).any(|w| {
        is_claude(w[0])
            && !w[1].is_empty()
            && is_uuid(w[2])
            && w[3].eq_ignore_ascii_case("scratchpad")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The in-place comparison for ASCII names gives what folding them gives.
    #[test]
    fn ascii_names_compare_as_folded() {
        for name in [
            "connector-downloads",
            "Connector-Downloads",
            "CONNECTOR-DOWNLOADS.. ",
            "connector-downloads:stream",
            "connector-downloads. :x",
            "connector-downloadsx",
            "connector-download",
            "xconnector-downloads",
            "connector_downloads",
            "",
            ".",
            "a",
        ] {
            assert_eq!(
                is_connector_downloads(name),
                folded_is_connector_downloads(name),
                "{name:?}"
            );
        }
        // Non-ASCII names still fold: the long s, a zero-width space.
        assert!(is_connector_downloads("connector-download\u{17f}"));
        assert!(is_connector_downloads("connector-\u{200b}downloads"));
    }

    #[test]
    fn process_files() {
        let v = ClaudeVersion::default();
        let cwd = Path::new("/w/p");
        let refused = |p: &str| is_device_or_process_file(p, cwd, v);
        for p in [
            "/proc/self/environ",
            "/dev/stdin",
            "/proc/1/../self/environ",
            "/proc/thread-self/cwd/z.md",
            "/proc/self/root/proc/self/environ",
            "/dev/fd/0",
        ] {
            assert!(refused(p), "{p}");
        }
        for p in [
            "/proc/self/cwd/x.md",
            "/proc/self/root/etc/hostname",
            "/proc/thread-self/root/w/z.md",
            "/proc/version",
            "/proc/self/fd/7",
            "/etc/passwd",
        ] {
            assert!(!refused(p), "{p}");
        }
        assert!(!is_device_or_process_file(
            "/proc/self/environ",
            cwd,
            ClaudeVersion::new(2, 1, 310)
        ));
    }

    #[test]
    fn protected_folders() {
        let v = ClaudeVersion::default();
        let p = |s: &str| is_protected(Path::new(s), v);
        assert!(p("/w/connector-downloads/a.md"));
        assert!(p("/w/Connector-Downloads./a.md"));
        assert!(p("/w/CONNECTOR-DOWNLOADS../x/a.md"));
        assert!(!p("/w/connector-downloads-x/a.md"));
        assert!(!p("/w/connector-downloads"));
        assert!(p(
            "/w/claude/proj/0b1e4f5a-7c2d-4e8f-9a3b-1c2d3e4f5a6b/scratchpad/s.md"
        ));
        assert!(p(
            "/w/claude-2/proj/0B1E4F5A-7C2D-4E8F-9A3B-1C2D3E4F5A6B/scratchpad/d/s.md"
        ));
        assert!(!p("/w/claude/proj/not-a-uuid/scratchpad/t.md"));
        assert!(!p(
            "/w/claude/proj/0b1e4f5a-7c2d-4e8f-9a3b-1c2d3e4f5a6b/scratchpad-x/v.md"
        ));
        assert!(!p(
            "/w/clod/proj/0b1e4f5a-7c2d-4e8f-9a3b-1c2d3e4f5a6b/scratchpad/y.md"
        ));
        let before = ClaudeVersion::new(2, 1, 318);
        assert!(!is_protected(
            Path::new("/w/connector-downloads/a.md"),
            before
        ));
        let before = ClaudeVersion::new(2, 1, 326);
        assert!(!is_protected(
            Path::new("/w/claude/p/0b1e4f5a-7c2d-4e8f-9a3b-1c2d3e4f5a6b/scratchpad/s.md"),
            before
        ));
    }
}
