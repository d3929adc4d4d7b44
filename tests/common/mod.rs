//! Test support: build a deployment in a temp dir, run the real `clawmd` binary on it, and
//! look at the resulting tree. Shared by the integration tests; each test file uses a subset.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A deployment (`container/` + `groups/`) in a fresh temp dir.
pub struct Deployment {
    pub temp: tempfile::TempDir,
}

impl Deployment {
    /// An empty deployment: `container/` and `groups/` exist and are empty.
    pub fn new() -> Self {
        let temp = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(temp.path().join("container/skills")).unwrap();
        std::fs::create_dir_all(temp.path().join("groups")).unwrap();
        Deployment { temp }
    }

    /// A small deployment: a shared base, skills `web` and `hello` with instructions, `quiet`
    /// without, and no groups yet.
    pub fn standard() -> Self {
        Deployment::new()
            .file("container/CLAUDE.md", "BASE\n")
            .file("container/skills/web/SKILL.md", "web skill\n")
            .file("container/skills/web/instructions.md", "WEB\n")
            .file("container/skills/hello/SKILL.md", "hello skill\n")
            .file("container/skills/hello/instructions.md", "HELLO\n")
            .file("container/skills/quiet/SKILL.md", "no instructions\n")
    }

    /// The example deployment checked into this repository, copied.
    pub fn example() -> Self {
        let deployment = Deployment::new();
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        copy_tree(&repo.join("container"), &deployment.path("container"));
        for group in ["main", "research", "ops"] {
            let from = repo.join("groups").join(group);
            let to = deployment.path(&format!("groups/{group}"));
            std::fs::create_dir_all(&to).unwrap();
            for name in ["container.json", "CLAUDE.local.md"] {
                std::fs::copy(from.join(name), to.join(name)).unwrap();
            }
        }
        deployment
    }

    /// Writes a file (creating folders).
    pub fn file(self, rel: &str, content: &str) -> Self {
        self.write(rel, content.as_bytes());
        self
    }

    /// Writes bytes at `rel` (creating folders).
    pub fn write(&self, rel: &str, content: &[u8]) {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    /// Creates a group folder with this `container.json` (`None`: no config file).
    pub fn group(self, name: &str, config: Option<&str>) -> Self {
        std::fs::create_dir_all(self.path(&format!("groups/{name}"))).unwrap();
        match config {
            Some(config) => self.file(&format!("groups/{name}/container.json"), config),
            None => self,
        }
    }

    /// The root of the deployment.
    pub fn root(&self) -> &Path {
        self.temp.path()
    }

    /// An absolute path inside the deployment.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.temp.path().join(rel)
    }

    /// The content of a file, as text.
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
    }

    /// The target of a symlink.
    pub fn link(&self, rel: &str) -> PathBuf {
        std::fs::read_link(self.path(rel)).unwrap_or_else(|e| panic!("read link {rel}: {e}"))
    }

    /// Whether anything (even a dangling link) is at `rel`.
    pub fn exists(&self, rel: &str) -> bool {
        std::fs::symlink_metadata(self.path(rel)).is_ok()
    }

    /// Runs `clawmd ARGS --root <deployment>` (the root is passed through the environment).
    pub fn run<I, S>(&self, args: I) -> Run
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        run_clawmd(args, &[("CLAWMD_ROOT", self.root().as_os_str())])
    }

    /// A snapshot of every path under `groups/` and `container/` with its kind, content or
    /// target, inode and mtime: equal snapshots mean nothing was written.
    pub fn snapshot(&self) -> Vec<(String, String, u64, i64, i64)> {
        let mut out = Vec::new();
        for top in ["groups", "container"] {
            for entry in walkdir::WalkDir::new(self.path(top)).sort_by_file_name() {
                let entry = entry.unwrap();
                let meta = entry.path().symlink_metadata().unwrap();
                let rel = entry
                    .path()
                    .strip_prefix(self.root())
                    .unwrap()
                    .display()
                    .to_string();
                let what = if meta.file_type().is_symlink() {
                    format!("-> {}", std::fs::read_link(entry.path()).unwrap().display())
                } else if meta.is_file() {
                    String::from_utf8_lossy(&std::fs::read(entry.path()).unwrap()).into_owned()
                } else {
                    "dir".to_owned()
                };
                out.push((rel, what, meta.ino(), meta.mtime(), meta.mtime_nsec()));
            }
        }
        out
    }
}

/// The result of running the binary.
#[derive(Debug)]
pub struct Run {
    pub output: Output,
}

impl Run {
    pub fn code(&self) -> i32 {
        self.output.status.code().unwrap_or(-1)
    }
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
    /// stdout parsed as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.output.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
                self.stdout(),
                self.stderr()
            )
        })
    }
    /// Asserts the exit code, showing both streams on failure.
    #[track_caller]
    pub fn expect_code(self, code: i32) -> Self {
        assert_eq!(
            self.code(),
            code,
            "exit code\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout(),
            self.stderr()
        );
        self
    }
    #[track_caller]
    pub fn success(self) -> Self {
        self.expect_code(0)
    }
}

/// Runs the clawmd binary with a cleared environment plus `env`.
pub fn run_clawmd<I, S>(args: I, env: &[(&str, &OsStr)]) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut command = Command::new(env!("CARGO_BIN_EXE_clawmd"));
    command.args(args).env_clear();
    for (key, value) in env {
        command.env(key, value);
    }
    Run {
        output: command.output().expect("run clawmd"),
    }
}

/// Copies a directory tree, keeping symlinks as symlinks.
pub fn copy_tree(from: &Path, to: &Path) {
    for entry in walkdir::WalkDir::new(from) {
        let entry = entry.unwrap();
        let dest = to.join(entry.path().strip_prefix(from).unwrap());
        let kind = entry.file_type();
        if kind.is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path()).unwrap(), &dest).unwrap();
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}
