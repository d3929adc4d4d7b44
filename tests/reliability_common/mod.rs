//! Helpers shared by the reliability suite (`tests/reliability_*.rs`): content-only tree
//! snapshots, a binary runner with a hang guard and extra environment, a seeded RNG, mount
//! guards for the resource-fault tests, and the `[reliability]` figure lines that
//! docs/reliability.md quotes.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Once;
use std::time::{Duration, Instant};

use crate::common::{Deployment, copy_tree};

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

/// A content-only snapshot of a deployment (paths relative to `root`).
pub fn tree(root: &Path) -> Tree {
    let mut out = Tree::new();
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
            out.insert(
                rel,
                entry_at(entry.path()).expect("entry vanished while walking"),
            );
        }
    }
    out
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

/// The tree without the lock folder (a run that refuses has still taken the group's lock).
pub fn without_locks(tree: &Tree) -> Tree {
    tree.iter()
        .filter(|(path, _)| !path.starts_with("groups/.clawmd-locks"))
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
        let dir = Path::new(path).parent().unwrap();
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

/// The result of one run of the binary.
#[derive(Debug)]
pub struct Outcome {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Outcome {
    /// The exit code (`None` when killed by a signal).
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// Whether the run was stopped by `CLAWMD_CRASH_AT` (SIGABRT).
    pub fn aborted(&self) -> bool {
        self.status.signal() == Some(6)
    }

    /// Both streams, for assertion messages.
    pub fn show(&self) -> String {
        format!(
            "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.status, self.stdout, self.stderr
        )
    }

    /// Asserts exit code `code` and no panic message.
    #[track_caller]
    pub fn expect(&self, code: i32, context: &str) -> &Self {
        assert_eq!(self.code(), Some(code), "{context}: {}", self.show());
        assert!(
            !self.stderr.contains("panicked"),
            "{context}: panic: {}",
            self.show()
        );
        self
    }
}

/// How long one run may take before it counts as a hang.
pub const HANG_LIMIT: Duration = Duration::from_secs(60);

/// Runs `clawmd ARGS` on the deployment at `root` (through `CLAWMD_ROOT`), with a cleared
/// environment plus `env`; panics if it hangs.
pub fn clawmd(root: &Path, args: &[&str], env: &[(&str, &str)]) -> Outcome {
    clawmd_in(root, args, env, HANG_LIMIT)
}

/// [`clawmd`] with an explicit hang limit.
pub fn clawmd_in(root: &Path, args: &[&str], env: &[(&str, &str)], limit: Duration) -> Outcome {
    let mut command = command(root, args, env);
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let started = Instant::now();
    let child = command.spawn().expect("spawn clawmd");
    let pid = child.id();
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(child.wait_with_output());
    });
    let output = match receive.recv_timeout(limit) {
        Ok(output) => output.expect("wait for clawmd"),
        Err(_) => {
            kill(pid, rustix::process::Signal::KILL);
            panic!(
                "clawmd {args:?} hung for more than {limit:?} on {}",
                root.display()
            );
        }
    };
    Outcome {
        status: output.status,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        elapsed: started.elapsed(),
    }
}

/// The `Command` that runs clawmd on `root`, not yet spawned (its output is not captured).
pub fn command(root: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    no_core_dumps();
    let mut command = Command::new(env!("CARGO_BIN_EXE_clawmd"));
    command
        .args(args)
        .env_clear()
        .env("CLAWMD_ROOT", root)
        .current_dir(root)
        .stdin(Stdio::null());
    for (key, value) in env {
        command.env(key, value);
    }
    command
}

/// Sends `signal` to the process `pid`.
pub fn kill(pid: u32, signal: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_raw(pid as i32).expect("pid");
    let _ = rustix::process::kill_process(pid, signal);
}

/// Crash tests abort the binary hundreds of times: make sure no core file is written.
fn no_core_dumps() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
        let limit = getrlimit(Resource::Core);
        let _ = setrlimit(
            Resource::Core,
            Rlimit {
                current: Some(0),
                maximum: limit.maximum,
            },
        );
    });
}

/// Whether the longer, opt-in variants run (`CLAWMD_SOAK=1`).
pub fn soak() -> bool {
    std::env::var("CLAWMD_SOAK").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// `default`, or `soak` under `CLAWMD_SOAK=1`, or the number in `var` when set.
pub fn scale(var: &str, default: u64, soak_value: u64) -> u64 {
    if let Some(n) = std::env::var(var).ok().and_then(|v| v.parse().ok()) {
        return n;
    }
    if soak() { soak_value } else { default }
}

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

/// The filesystem type of `path` (from /proc/self/mounts), for the figures.
pub fn fs_type(path: &Path) -> String {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let mut best: Option<(usize, String)> = None;
    for line in mounts.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 3 {
            continue;
        }
        let point = fields[1].replace("\\040", " ");
        if path.starts_with(&point) && best.as_ref().is_none_or(|(len, _)| point.len() >= *len) {
            best = Some((point.len(), fields[2].to_owned()));
        }
    }
    best.map_or_else(|| "unknown".to_owned(), |(_, fs)| fs)
}

/// An empty deployment in a [`work_dir`].
pub fn empty() -> Deployment {
    let deployment = Deployment { temp: work_dir() };
    std::fs::create_dir_all(deployment.path("container/skills")).unwrap();
    std::fs::create_dir_all(deployment.path("groups")).unwrap();
    deployment
}

/// The same content as `Deployment::standard()`, in a [`work_dir`].
pub fn standard() -> Deployment {
    empty()
        .file("container/CLAUDE.md", "BASE\n")
        .file("container/skills/web/SKILL.md", "web skill\n")
        .file("container/skills/web/instructions.md", "WEB\n")
        .file("container/skills/hello/SKILL.md", "hello skill\n")
        .file("container/skills/hello/instructions.md", "HELLO\n")
        .file("container/skills/quiet/SKILL.md", "no instructions\n")
}

/// A copy of a deployment (symlinks kept as symlinks) in a fresh [`work_dir`].
pub fn clone(from: &Deployment) -> Deployment {
    let to = Deployment { temp: work_dir() };
    for top in ["groups", "container"] {
        if from.path(top).exists() {
            copy_tree(&from.path(top), &to.path(top));
        }
    }
    to
}

/// Writes `bytes` at `path` the way an editor that cares would: temp file, then rename.
pub fn write_atomically(path: &Path, bytes: &[u8]) {
    let temp = path.with_extension("test-tmp");
    std::fs::write(&temp, bytes).unwrap();
    std::fs::rename(&temp, path).unwrap();
}

/// A small deterministic PRNG (xorshift64*), so that random test schedules are reproducible.
pub struct Rng(u64, u64);

impl Rng {
    /// A generator from a seed (`CLAWMD_SEED` overrides it, to replay a soak run).
    pub fn new(seed: u64) -> Self {
        let seed = std::env::var("CLAWMD_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(seed);
        Rng(seed.max(1), seed)
    }

    /// The seed, to replay a run with `CLAWMD_SEED`.
    pub fn seed(&self) -> u64 {
        self.1
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// Prints one figure line; `cargo test --test 'reliability_*' -- --nocapture 2>&1 | grep
/// '^\[reliability\]'` collects them for docs/reliability.md.
pub fn figure(test: &str, text: impl fmt::Display) {
    eprintln!("[reliability] {test}: {text}");
}

/// A mount made by a test, unmounted when dropped (also when the test panics).
pub struct Mount {
    target: PathBuf,
}

impl Mount {
    /// Runs `mount ARGS TARGET`; `Err` with mount's message when it fails.
    pub fn new(args: &[&str], target: &Path) -> Result<Mount, String> {
        let output = Command::new("mount")
            .args(args)
            .arg(target)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "mount {args:?} {} failed: {}",
                target.display(),
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        Ok(Mount {
            target: target.to_owned(),
        })
    }

    /// Bind-mounts `source` on `target`.
    pub fn bind(source: &Path, target: &Path) -> Result<Mount, String> {
        Mount::new(&["--bind", &source.to_string_lossy()], target)
    }

    /// Remounts with `options` (for example `remount,bind,ro`).
    pub fn remount(&self, options: &str) {
        let output = Command::new("mount")
            .args(["-o", options])
            .arg(&self.target)
            .output()
            .expect("run mount");
        assert!(
            output.status.success(),
            "mount -o {options} {}: {}",
            self.target.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        &self.target
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let status = Command::new("umount").arg(&self.target).status();
        if !status.is_ok_and(|s| s.success()) {
            let _ = Command::new("umount").arg("-l").arg(&self.target).status();
        }
    }
}

/// Mounting needs root (or a user namespace); tests that need it call this first and skip,
/// loudly, when it is impossible.
pub fn can_mount() -> Result<(), String> {
    let probe = tempfile::tempdir().map_err(|e| e.to_string())?;
    Mount::new(&["-t", "tmpfs", "-o", "size=16k", "tmpfs"], probe.path()).map(drop)
}

/// Files and a folder outside every group that clawmd must never read, write or delete.
///
/// Their access times are set far before their modification times, so under `relatime` (the
/// Linux default) any read of the file or listing of the folder moves the access time:
/// comparing it proves clawmd did not even read them.
pub struct Sentinel {
    pub temp: tempfile::TempDir,
    file_state: (Vec<u8>, u64, i64, i64, i64, i64),
    dir_state: (Vec<String>, u64, i64, i64, i64, i64),
}

impl Sentinel {
    /// Creates `outside/secret.txt` and `outside/dir/{a,b}` in the default temp dir.
    pub fn new() -> Self {
        let temp = tempfile::Builder::new()
            .prefix("clawmd-outside-")
            .tempdir()
            .unwrap();
        std::fs::write(temp.path().join("secret.txt"), "outside: do not touch\n").unwrap();
        std::fs::create_dir(temp.path().join("dir")).unwrap();
        std::fs::write(temp.path().join("dir/a"), "A\n").unwrap();
        std::fs::write(temp.path().join("dir/b.md"), "B\n").unwrap();
        let old = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        let recent = std::time::SystemTime::now() - Duration::from_secs(60);
        for path in [temp.path().join("secret.txt"), temp.path().join("dir")] {
            let file = std::fs::File::open(&path).unwrap();
            file.set_times(
                std::fs::FileTimes::new()
                    .set_accessed(old)
                    .set_modified(recent),
            )
            .unwrap();
        }
        let mut sentinel = Sentinel {
            temp,
            file_state: Default::default(),
            dir_state: Default::default(),
        };
        sentinel.file_state = sentinel.file_now();
        sentinel.dir_state = sentinel.dir_now();
        sentinel
    }

    /// The sentinel file.
    pub fn file(&self) -> PathBuf {
        self.temp.path().join("secret.txt")
    }

    /// The sentinel folder.
    pub fn dir(&self) -> PathBuf {
        self.temp.path().join("dir")
    }

    fn file_now(&self) -> (Vec<u8>, u64, i64, i64, i64, i64) {
        let meta = std::fs::symlink_metadata(self.file()).unwrap();
        let times = (
            meta.ino(),
            meta.mtime(),
            meta.mtime_nsec(),
            meta.atime(),
            meta.atime_nsec(),
        );
        // Read the bytes only after the access time was taken.
        let bytes = std::fs::read(self.file()).unwrap();
        restore_atime(&self.file(), meta.atime());
        (bytes, times.0, times.1, times.2, times.3, times.4)
    }

    fn dir_now(&self) -> (Vec<String>, u64, i64, i64, i64, i64) {
        let meta = std::fs::symlink_metadata(self.dir()).unwrap();
        let times = (
            meta.ino(),
            meta.mtime(),
            meta.mtime_nsec(),
            meta.atime(),
            meta.atime_nsec(),
        );
        let mut names: Vec<String> = std::fs::read_dir(self.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        restore_atime(&self.dir(), meta.atime());
        (names, times.0, times.1, times.2, times.3, times.4)
    }

    /// Asserts nothing about the sentinels changed: content, inode, mtime and atime of the
    /// file; listing, inode, mtime and atime of the folder.
    #[track_caller]
    pub fn assert_untouched(&self, context: &str) {
        let file = self.file_now();
        assert_eq!(
            file, self.file_state,
            "{context}: the file outside the group changed (bytes, inode, mtime s/ns, atime s/ns)"
        );
        let dir = self.dir_now();
        assert_eq!(
            dir, self.dir_state,
            "{context}: the folder outside the group changed (listing, inode, mtime s/ns, atime s/ns)"
        );
    }

    /// Like [`Sentinel::assert_untouched`] but without the access times: for a hard link, which
    /// shares the inode, reading the name inside the group reads the file outside.
    #[track_caller]
    pub fn assert_unchanged(&self, context: &str) {
        let (file, dir) = (self.file_now(), self.dir_now());
        assert_eq!(
            (&file.0, file.1, file.2, file.3),
            (
                &self.file_state.0,
                self.file_state.1,
                self.file_state.2,
                self.file_state.3
            ),
            "{context}: the file outside the group changed (bytes, inode, mtime)"
        );
        assert_eq!(
            (&dir.0, dir.1, dir.2, dir.3),
            (
                &self.dir_state.0,
                self.dir_state.1,
                self.dir_state.2,
                self.dir_state.3
            ),
            "{context}: the folder outside the group changed (listing, inode, mtime)"
        );
    }
}

fn restore_atime(path: &Path, atime: i64) {
    let when = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(atime as u64);
    let file = std::fs::File::open(path).unwrap();
    // Setting only the access time leaves the modification time alone.
    file.set_times(std::fs::FileTimes::new().set_accessed(when))
        .unwrap();
}
