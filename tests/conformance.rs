//! Conformance: the loader against the real Claude Code 2.1.328, case by case.
//!
//! Every folder in `tests/fixtures/conformance/` is a case recorded with `claude-view`
//! (the real CLI against a local stand-in API): `tree/`, `cwd`, optional `home/`, optional
//! `approve-external`, and `expected.txt`, the memory block the binary sent, with the
//! temporary tree and home written as `{ROOT}` and `{HOME}`. Each case is copied to a fresh
//! temporary directory (symlinks as symlinks), loaded from `tree/<cwd>` exactly as the binary
//! was started, rendered in Claude Code's format and compared byte for byte.

use std::path::{Path, PathBuf};

use clawmd::loader::{
    ExternalImports, Format, HostFs, LoadOptions, Mount, MountedFs, load, render,
};

/// The cases; `CLAWMD_CONFORMANCE_DIR` points elsewhere (e.g. at freshly recorded probes).
fn cases_dir() -> PathBuf {
    match std::env::var_os("CLAWMD_CONFORMANCE_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/conformance"),
    }
}

/// Copy a tree, keeping symlinks as symlinks (no recursion: an explicit stack).
fn copy_tree(from: &Path, to: &Path) {
    let mut stack = vec![(from.to_path_buf(), to.to_path_buf())];
    while let Some((src, dst)) = stack.pop() {
        let meta = std::fs::symlink_metadata(&src).unwrap();
        if meta.file_type().is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src).unwrap(), &dst).unwrap();
        } else if meta.is_dir() {
            std::fs::create_dir_all(&dst).unwrap();
            for entry in std::fs::read_dir(&src).unwrap() {
                let entry = entry.unwrap();
                stack.push((entry.path(), dst.join(entry.file_name())));
            }
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

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

/// Load one case the way `claude-view` ran it; returns the rendered block with placeholders.
fn run_case(case: &Path) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let root = base.join("tree");
    copy_tree(&case.join("tree"), &root);
    make_git_repos(case, &root);
    let home = base.join("home");
    if case.join("home").is_dir() {
        copy_tree(&case.join("home"), &home);
    } else {
        std::fs::create_dir_all(&home).unwrap();
    }
    let cwd_rel = std::fs::read_to_string(case.join("cwd")).unwrap();
    if case.join("mounts").exists() {
        return run_mounted_case(case, &root, cwd_rel.trim());
    }
    let cwd = root.join(cwd_rel.trim());
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
    let memory = load(&HostFs, &opts).unwrap_or_else(|e| panic!("{}: {e}", case.display()));
    render(&memory, Format::Claude)
        .replace(&root.to_string_lossy().into_owned(), "{ROOT}")
        .replace(&home.to_string_lossy().into_owned(), "{HOME}")
}

/// A case recorded inside a container-shaped mount namespace: `cwd` is a container path and
/// `mounts` maps container paths to paths under `tree/`. Loaded through [`MountedFs`].
fn run_mounted_case(case: &Path, root: &Path, cwd: &str) -> String {
    let table = std::fs::read_to_string(case.join("mounts")).unwrap();
    let mounts = table.lines().filter(|l| !l.trim().is_empty()).map(|l| {
        let (container, host) = l.split_once(' ').expect("CONTAINER HOST");
        Mount::new(container, root.join(host.trim()))
    });
    let fs = MountedFs::new(mounts);
    let mut opts = LoadOptions::new(cwd, None);
    // Inside the sandbox only mounted paths exist, so the managed directory can stay at
    // its default: it is there exactly when a case mounts it.
    opts.external_imports = if case.join("approve-external").exists() {
        ExternalImports::Approved
    } else {
        ExternalImports::Denied
    };
    let memory = load(&fs, &opts).unwrap_or_else(|e| panic!("{}: {e}", case.display()));
    render(&memory, Format::Claude).replace(&root.to_string_lossy().into_owned(), "{ROOT}")
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

#[test]
fn every_case_matches_the_real_binary() {
    let mut names: Vec<PathBuf> = std::fs::read_dir(cases_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("expected.txt").exists())
        .collect();
    names.sort();
    assert!(
        !names.is_empty(),
        "no conformance cases in {}",
        cases_dir().display()
    );
    let mut failures = Vec::new();
    for case in &names {
        let expected = std::fs::read_to_string(case.join("expected.txt")).unwrap();
        let actual = run_case(case);
        if actual != expected {
            let name = case.file_name().unwrap().to_string_lossy().into_owned();
            failures.push(format!(
                "== {name} (- real Claude Code, + clawmd)\n{}",
                diff(&expected, &actual)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        names.len(),
        failures.join("\n")
    );
}
