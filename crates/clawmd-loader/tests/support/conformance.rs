//! Conformance: the loader against the real Claude Code releases, case by case.
//!
//! The one harness of the corpus, shared by two test binaries: the loader crate's own
//! (`cargo test -p clawmd-loader --test conformance`, every case on the host filesystem) and
//! clawmd's (`tests/main.rs`, which also runs the cases recorded inside a container's mount
//! table, through its container view).
//!
//! Every folder in `crates/clawmd-loader/tests/fixtures/conformance/` is a case recorded with `claude-view`
//! (the real CLI against a local stand-in API): `tree/`, `cwd`, optional `home/`, optional
//! `approve-external`, and per release the memory block the binary sent — `expected.txt`
//! for the reference release 2.1.328, `expected@X.Y.Z.txt` for release X.Y.Z — with the
//! temporary tree and home written as `{ROOT}` and `{HOME}` and the date older releases
//! print as `{DATE}`. Each case is copied to a fresh temporary directory (symlinks as
//! symlinks), loaded from `tree/<cwd>` exactly as the binary was started, with the loader set
//! to that release, rendered in Claude Code's format and compared byte for byte.
//!
//! `KNOWN-DIFFERENCES` lists the (release, case) pairs the loader does not reproduce yet,
//! each with its reason; the test fails on any other difference *and* on a listed pair that
//! now matches, so the list can only shrink honestly.

use std::path::{Path, PathBuf};

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use clawmd_loader::fs::MemoryFs;
use clawmd_loader::{ClaudeVersion, ExternalImports, Format, HostFs, LoadOptions, load, render};

/// Builds the container view of a mounted case from its mount table: (container path, host
/// path) pairs, in the order the case's `mounts` file lists them.
pub type MountedView = dyn Fn(Vec<(PathBuf, PathBuf)>) -> Box<dyn MemoryFs>;

/// The release `expected.txt` was recorded on.
const REFERENCE: &str = "2.1.328";
/// The date the loader is given; `{DATE}` in a fixture stands for it.
const DATE: &str = "2026-01-02";

/// The cases: `fixtures` (the corpus beside the harness, as the calling test names it), or
/// `CLAWMD_CONFORMANCE_DIR` (e.g. freshly recorded probes).
fn cases_dir(fixtures: &Path) -> PathBuf {
    match std::env::var_os("CLAWMD_CONFORMANCE_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => fixtures.to_owned(),
    }
}

#[path = "copy_tree.rs"]
mod copy_tree;
use copy_tree::copy_tree;

/// Folders listed in `git-repos` get a `.git` directory (git cannot store one in a fixture).
fn make_git_repos(case: &Path, root: &Path) {
    let Ok(listing) = std::fs::read_to_string(case.join("git-repos")) else {
        return;
    };
    for rel in listing.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let git = root.join(rel).join(".git");
        std::fs::create_dir_all(&git).unwrap();
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    }
}

/// Linked worktrees listed in `git-worktrees` ("WORKTREE MAIN [relative]"), laid out as
/// `git worktree add` (with `--relative-paths` when "relative") writes them.
fn make_git_worktrees(case: &Path, root: &Path) {
    let Ok(listing) = std::fs::read_to_string(case.join("git-worktrees")) else {
        return;
    };
    for line in listing.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [wt, main, rest @ ..] = fields.as_slice() else {
            continue;
        };
        let relative = rest == ["relative"];
        let (wt, main) = (root.join(wt), root.join(main));
        let name = wt.file_name().unwrap().to_owned();
        let git = main.join(".git");
        let admin = git.join("worktrees").join(&name);
        std::fs::create_dir_all(&admin).unwrap();
        std::fs::create_dir_all(&wt).unwrap();
        if !git.join("HEAD").exists() {
            std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        }
        let wt_git = wt.join(".git");
        let depth = |p: &Path| p.strip_prefix(root).unwrap().components().count();
        let up = |n: usize| "../".repeat(n);
        let admin_rel = admin.strip_prefix(root).unwrap();
        let wt_git_rel = wt_git.strip_prefix(root).unwrap();
        let gitdir = if relative {
            format!("{}{}", up(depth(&wt)), admin_rel.display())
        } else {
            admin.display().to_string()
        };
        let back = if relative {
            format!("{}{}", up(depth(&admin)), wt_git_rel.display())
        } else {
            wt_git.display().to_string()
        };
        std::fs::write(&wt_git, format!("gitdir: {gitdir}\n")).unwrap();
        std::fs::write(admin.join("gitdir"), format!("{back}\n")).unwrap();
        std::fs::write(admin.join("commondir"), "../..\n").unwrap();
        let head = format!("ref: refs/heads/{}\n", name.to_string_lossy());
        std::fs::write(admin.join("HEAD"), head).unwrap();
    }
}

/// The `cwd` file: bytes, since a case may start in a folder whose name is not UTF-8.
fn read_cwd(case: &Path) -> PathBuf {
    let bytes = std::fs::read(case.join("cwd")).unwrap();
    let trimmed = bytes.trim_ascii();
    PathBuf::from(OsStr::from_bytes(trimmed))
}

/// Whether `case` was recorded inside a container's mount table (it has a `mounts` file).
fn is_mounted(case: &Path) -> bool {
    case.join("mounts").exists()
}

/// Load one case the way `claude-view` ran it with `version`; returns the rendered block
/// with placeholders. A mounted case is loaded through `mounted`.
fn run_case(case: &Path, version: ClaudeVersion, mounted: Option<&MountedView>) -> Vec<u8> {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().to_path_buf();
    let root = base.join("tree");
    copy_tree(&case.join("tree"), &root);
    make_git_repos(case, &root);
    make_git_worktrees(case, &root);
    let home = base.join("home");
    if case.join("home").is_dir() {
        copy_tree(&case.join("home"), &home);
    } else {
        std::fs::create_dir_all(&home).unwrap();
    }
    let cwd_rel = read_cwd(case);
    if let Some(mounted) = mounted.filter(|_| is_mounted(case)) {
        return run_mounted_case(case, &root, &cwd_rel, version, mounted);
    }
    let cwd = root.join(&cwd_rel);
    std::fs::create_dir_all(&cwd).unwrap();
    if let Ok(what) = std::fs::read_to_string(case.join("approve-external")) {
        // What `claude-view --approve-external` (or `--approve-path`) writes, read back by
        // the loader: "yes" approves the cwd, anything else names a folder under tree/.
        let project = match what.trim() {
            "" | "yes" => cwd.clone(),
            folder => root.join(folder),
        };
        let config = serde_json::json!({ "projects": { project.to_string_lossy(): {
            "hasClaudeMdExternalIncludesApproved": true,
            "hasClaudeMdExternalIncludesWarningShown": true,
        }}});
        std::fs::write(home.join(".claude.json"), config.to_string()).unwrap();
    }
    let mut opts = LoadOptions::new(&cwd, Some(home.clone()));
    opts.managed_dir = None;
    opts.external_imports = ExternalImports::FromConfig;
    opts.claude_version = version;
    opts.current_date = Some(DATE.into());
    let memory = load(&HostFs, &opts).unwrap_or_else(|e| panic!("{}: {e}", case.display()));
    let text = render(&memory, Format::Claude);
    replace(
        &replace(text.as_bytes(), root.as_os_str().as_bytes(), b"{ROOT}"),
        home.as_os_str().as_bytes(),
        b"{HOME}",
    )
}

/// Replace every `from` in `text` by `to`, on bytes.
fn replace(text: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if !from.is_empty() && text[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
    out
}

/// A case recorded inside a container-shaped mount namespace: `cwd` is a container path and
/// `mounts` maps container paths to paths under `tree/`. Loaded through the caller's view.
fn run_mounted_case(
    case: &Path,
    root: &Path,
    cwd: &Path,
    version: ClaudeVersion,
    mounted: &MountedView,
) -> Vec<u8> {
    let table = std::fs::read_to_string(case.join("mounts")).unwrap();
    let mounts = table.lines().filter(|l| !l.trim().is_empty()).map(|l| {
        let (container, host) = l.split_once(' ').expect("CONTAINER HOST");
        (PathBuf::from(container), root.join(host.trim()))
    });
    let fs = mounted(mounts.collect());
    let mut opts = LoadOptions::new(cwd, None);
    // Inside the sandbox only mounted paths exist, so the managed directory can stay at
    // its default: it is there exactly when a case mounts it.
    opts.external_imports = if case.join("approve-external").exists() {
        ExternalImports::Approved
    } else {
        ExternalImports::Denied
    };
    opts.claude_version = version;
    opts.current_date = Some(DATE.into());
    let memory = load(fs.as_ref(), &opts).unwrap_or_else(|e| panic!("{}: {e}", case.display()));
    let text = render(&memory, Format::Claude);
    replace(text.as_bytes(), root.as_os_str().as_bytes(), b"{ROOT}")
}

/// A line diff (longest common subsequence), `-` expected, `+` actual.
fn diff(expected: &str, actual: &str) -> String {
    let split =
        |s: &str| -> Vec<String> { s.split('\n').map(|l| l.replace('\r', "\\r")).collect() };
    let (a, b) = (split(expected), split(actual));
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out += &format!("  {}\n", a[i]);
            (i, j) = (i + 1, j + 1);
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out += &format!("+ {}\n", b[j]);
            j += 1;
        } else {
            out += &format!("- {}\n", a[i]);
            i += 1;
        }
    }
    out
}

/// Every recorded (case, release, expected file), sorted.
fn recordings(cases: &Path) -> Vec<(PathBuf, ClaudeVersion, PathBuf)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(cases).unwrap() {
        let case = entry.unwrap().path();
        if !case.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(&case).unwrap() {
            let file = file.unwrap().path();
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            let version = if name == "expected.txt" {
                REFERENCE
            } else if let Some(v) = name
                .strip_prefix("expected@")
                .and_then(|n| n.strip_suffix(".txt"))
            {
                v
            } else {
                continue;
            };
            let version: ClaudeVersion = version
                .parse()
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            out.push((case.clone(), version, file));
        }
    }
    out.sort();
    out
}

/// `KNOWN-DIFFERENCES`: "RELEASE CASE  # reason" a line.
fn known_differences(cases: &Path) -> BTreeSet<(String, String)> {
    let Ok(text) = std::fs::read_to_string(cases.join("KNOWN-DIFFERENCES")) else {
        return BTreeSet::new();
    };
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (v, case) = l.split_once(char::is_whitespace).expect("RELEASE CASE");
            (v.to_string(), case.trim().to_string())
        })
        .collect()
}

/// Replays every recording of the corpus in `fixtures` and fails on any difference not listed
/// in `KNOWN-DIFFERENCES`, and on a listed one that matches now. Without `mounted`, the cases
/// recorded in a container's mount table are left out (and said so): the loader crate has no
/// container view; clawmd, which has one, runs them all.
pub fn every_case_matches_the_real_binary(fixtures: &Path, mounted: Option<&MountedView>) {
    let cases = cases_dir(fixtures);
    let recorded = recordings(&cases);
    assert!(
        !recorded.is_empty(),
        "no conformance cases in {}",
        cases.display()
    );
    let (all, left_out): (Vec<_>, Vec<_>) = recorded
        .into_iter()
        .partition(|(case, _, _)| mounted.is_some() || !is_mounted(case));
    let known: BTreeSet<_> = known_differences(&cases)
        .into_iter()
        .filter(|(_, name)| {
            left_out
                .iter()
                .all(|(case, _, _)| case.file_name().unwrap().to_string_lossy() != *name)
        })
        .collect();
    if !left_out.is_empty() {
        eprintln!(
            "conformance: {} recordings of cases in a container's mount table left out (no container view here)",
            left_out.len()
        );
    }
    let mut failures = Vec::new();
    let mut differing = BTreeSet::new();
    let mut per_version: std::collections::BTreeMap<ClaudeVersion, (usize, usize)> =
        Default::default();
    for (case, version, file) in &all {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let expected = replace(&std::fs::read(file).unwrap(), b"{DATE}", DATE.as_bytes());
        let actual = run_case(case, *version, mounted);
        let tally = per_version.entry(*version).or_default();
        tally.1 += 1;
        if actual == expected {
            tally.0 += 1;
            continue;
        }
        differing.insert((version.to_string(), name.clone()));
        if !known.contains(&(version.to_string(), name.clone())) {
            failures.push(format!(
                "== {name} on {version} (- real Claude Code, + clawmd)\n{}",
                diff(
                    &String::from_utf8_lossy(&expected),
                    &String::from_utf8_lossy(&actual)
                )
            ));
        }
    }
    for (v, (ok, n)) in per_version.iter().rev() {
        eprintln!("conformance: {v}: {ok} of {n} cases byte-identical");
    }
    let stale: Vec<String> = known
        .difference(&differing)
        .map(|(v, c)| format!("{v} {c}"))
        .collect();
    assert!(
        failures.is_empty() && stale.is_empty(),
        "{} of {} recordings differ:\n{}\nlisted in KNOWN-DIFFERENCES but matching now (remove them): {stale:?}",
        failures.len(),
        all.len(),
        failures.join("\n")
    )
}
