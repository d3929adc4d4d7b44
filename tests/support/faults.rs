//! Fault injection: mounts made by a test (read-only, tiny tmpfs) and sentinel files outside
//! the deployment that clawmd must never read, write or delete.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

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
        let (t, atime) = stamp(&self.file());
        // Read the bytes only after the access time was taken.
        let bytes = std::fs::read(self.file()).unwrap();
        restore_atime(&self.file(), atime);
        (bytes, t.0, t.1, t.2, t.3, t.4)
    }

    fn dir_now(&self) -> (Vec<String>, u64, i64, i64, i64, i64) {
        let (t, atime) = stamp(&self.dir());
        let mut names: Vec<String> = std::fs::read_dir(self.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        restore_atime(&self.dir(), atime);
        (names, t.0, t.1, t.2, t.3, t.4)
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

/// The inode, mtime (s, ns) and atime (s, ns) of `path`, and its atime to restore.
fn stamp(path: &Path) -> ((u64, i64, i64, i64, i64), i64) {
    let meta = std::fs::symlink_metadata(path).unwrap();
    let times = (
        meta.ino(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.atime(),
        meta.atime_nsec(),
    );
    (times, meta.atime())
}
