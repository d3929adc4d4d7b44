//! The per-group lock: one run at a time changes a group (or the `global` folder). A run
//! waits for a lock another run holds up to its timeout, and tells whoever started it once the
//! wait lasts more than a moment ([`LockWait`]); a lock whose holder died is free at once.

// The lock's folder is created here (clippy.toml's write ban).
#![expect(
    clippy::disallowed_methods,
    reason = "fsops is the module that writes (clippy.toml)"
)]

use std::path::Path;
use std::time::{Duration, Instant};

use rustix::fs::{Mode, OFlags};

use super::{FsError, Result};

/// A held per-group lock; released when dropped (or when the process dies).
#[derive(Debug)]
pub struct GroupLock {
    _file: std::fs::File,
}

/// How [`lock`] waits for a lock another run holds: up to `timeout`, telling `on_wait` once
/// the wait has lasted `notice_after`.
#[derive(Clone, Copy)]
pub struct LockWait<'a> {
    /// The longest wait; past it, [`FsError::LockTimeout`] (zero: the lock is taken only
    /// when it is free at once).
    pub timeout: Duration,
    /// How long a wait lasts before `on_wait` is told.
    pub notice_after: Duration,
    /// Told the lock's path, once, when the wait lasts `notice_after` (never when the timeout
    /// comes first).
    pub on_wait: &'a dyn Fn(&Path),
}

impl std::fmt::Debug for LockWait<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockWait")
            .field("timeout", &self.timeout)
            .field("notice_after", &self.notice_after)
            .finish_non_exhaustive()
    }
}

impl LockWait<'static> {
    /// Takes the lock only when it is free at once (no wait, no notice).
    pub const IF_FREE: LockWait<'static> = LockWait {
        timeout: Duration::ZERO,
        notice_after: Duration::ZERO,
        on_wait: &tell_no_one,
    };
}

impl<'a> LockWait<'a> {
    /// How long a run waits for a lock before it says so: a moment, so that the brief waits
    /// of runs that follow each other say nothing.
    pub const NOTICE_AFTER: Duration = Duration::from_millis(500);

    /// Waits up to `timeout`, telling `on_wait` once the wait lasts [`LockWait::NOTICE_AFTER`].
    pub fn up_to(timeout: Duration, on_wait: &'a dyn Fn(&Path)) -> Self {
        LockWait {
            timeout,
            notice_after: Self::NOTICE_AFTER,
            on_wait,
        }
    }
}

/// The notice of a wait that tells no one ([`LockWait::IF_FREE`]).
fn tell_no_one(_lock: &Path) {}

/// Takes the exclusive lock at `lock_path` (creating its folder), waiting for it as `wait`
/// says; a timeout reports the whole wait. A lock held by a process that died is released by
/// the kernel, so it never blocks.
pub fn lock(lock_path: &Path, wait: LockWait<'_>) -> Result<GroupLock> {
    take(open_lock_file(lock_path)?, lock_path, wait)
}

/// [`lock`], for a run that changes nothing: the lock file opened read-only (a reader on a
/// read-only mount, or one who may not write the lock file, takes it all the same), and
/// `None`, without waiting or creating anything, when the lock file is not there (no run has
/// ever taken the lock, so none is holding it) or may not be read.
pub fn lock_if_made(lock_path: &Path, wait: LockWait<'_>) -> Result<Option<GroupLock>> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::open(lock_path, flags, Mode::empty()) {
        Ok(fd) => take(std::fs::File::from(fd), lock_path, wait).map(Some),
        Err(rustix::io::Errno::NOENT | rustix::io::Errno::ACCESS) => Ok(None),
        Err(err) => Err(FsError::io(
            "open lock file",
            lock_path,
            std::io::Error::from(err),
        )),
    }
}

/// Takes the exclusive lock on the open lock `file` (at `lock_path`), waiting as `wait` says.
fn take(file: std::fs::File, lock_path: &Path, wait: LockWait<'_>) -> Result<GroupLock> {
    let started = Instant::now();
    let mut announced = false;
    let mut noticed = false;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(GroupLock { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(err)) => {
                return Err(FsError::io("lock", lock_path, err));
            }
        }
        if !announced {
            tracing::info!(lock = %lock_path.display(), "waiting for another clawmd run to release the lock");
            announced = true;
        }
        let waited = started.elapsed();
        if waited >= wait.timeout {
            return Err(FsError::LockTimeout {
                path: lock_path.to_owned(),
                waited,
            });
        }
        if !noticed && waited >= wait.notice_after {
            (wait.on_wait)(lock_path);
            noticed = true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The lock file at `lock_path`, opened (never through a link) and created, with its folder,
/// when missing.
fn open_lock_file(lock_path: &Path) -> Result<std::fs::File> {
    let flags = OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mode = Mode::from_raw_mode(0o644);
    let fd = match rustix::fs::open(lock_path, flags, mode) {
        Err(rustix::io::Errno::NOENT) if lock_path.parent().is_some() => {
            let parent = lock_path.parent().unwrap_or(lock_path);
            std::fs::create_dir_all(parent)
                .map_err(|err| FsError::io("create lock directory", parent, err))?;
            rustix::fs::open(lock_path, flags, mode)
        }
        other => other,
    }
    .map_err(|err| FsError::io("open lock file", lock_path, err))?;
    Ok(std::fs::File::from(fd))
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::path::PathBuf;

    use super::*;

    /// Waits up to `timeout`, telling `on_wait` once the wait lasts `notice_after`.
    fn wait<'a>(
        timeout: Duration,
        notice_after: Duration,
        on_wait: &'a dyn Fn(&Path),
    ) -> LockWait<'a> {
        LockWait {
            timeout,
            notice_after,
            on_wait,
        }
    }

    /// Waits up to `timeout`, telling no one.
    fn up_to(timeout: Duration) -> LockWait<'static> {
        LockWait {
            timeout,
            ..LockWait::IF_FREE
        }
    }

    /// A lock's path in a fresh temp folder (kept while the folder lives), its folder not made.
    fn lock_path() -> (tempfile::TempDir, PathBuf) {
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join("locks/g.lock");
        (temp, path)
    }

    #[test]
    fn lock_times_out_while_held_and_is_free_after_drop() {
        let (_temp, path) = lock_path();
        let held = lock(&path, up_to(Duration::from_secs(1))).unwrap();
        let err = lock(&path, up_to(Duration::from_millis(20))).unwrap_err();
        assert!(matches!(err, FsError::LockTimeout { .. }), "{err}");
        assert!(err.to_string().contains("CLAWMD_LOCK_TIMEOUT"), "{err}");
        drop(held);
        lock(&path, up_to(Duration::from_millis(20))).unwrap();
    }

    /// A reader's lock (`lock_if_made`) creates nothing, is taken through a read-only
    /// descriptor on a lock file it may not write, and excludes a writer's lock both ways.
    #[test]
    fn a_readers_lock_creates_nothing_and_excludes_a_writers_both_ways() {
        use std::os::unix::fs::PermissionsExt;
        let (_temp, path) = lock_path();
        assert!(
            lock_if_made(&path, up_to(Duration::ZERO))
                .unwrap()
                .is_none()
        );
        assert!(!path.parent().unwrap().exists(), "nothing made");
        let held = lock(&path, up_to(Duration::ZERO)).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
        let err = lock_if_made(&path, up_to(Duration::from_millis(20))).unwrap_err();
        assert!(matches!(err, FsError::LockTimeout { .. }), "{err}");
        drop(held);
        let reading = lock_if_made(&path, up_to(Duration::ZERO)).unwrap();
        assert!(reading.is_some());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = lock(&path, up_to(Duration::from_millis(20))).unwrap_err();
        assert!(matches!(err, FsError::LockTimeout { .. }), "{err}");
    }

    #[test]
    fn a_wait_is_told_once_after_the_notice_delay_and_a_timeout_reports_the_whole_wait() {
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join("locks/g.lock");
        let started = Instant::now();
        let notices: RefCell<Vec<(PathBuf, Duration)>> = RefCell::default();
        let notice = |lock: &Path| {
            notices
                .borrow_mut()
                .push((lock.to_owned(), started.elapsed()));
        };
        // Free: taken at once, nothing told.
        let held = lock(&path, wait(Duration::from_secs(5), Duration::ZERO, &notice)).unwrap();
        assert!(notices.borrow().is_empty());
        // Held by another handle: told once, after the delay; the timeout names the whole wait.
        let notice_after = Duration::from_millis(100);
        let timeout = Duration::from_millis(300);
        let err = lock(&path, wait(timeout, notice_after, &notice)).unwrap_err();
        let elapsed = started.elapsed();
        match &err {
            FsError::LockTimeout {
                path: named,
                waited,
            } => {
                assert_eq!(named, &path);
                assert!(*waited >= timeout && *waited <= elapsed, "{waited:?}");
            }
            other => panic!("{other}"),
        }
        assert_eq!(notices.borrow().len(), 1, "{:?}", notices.borrow());
        let (told, at) = notices.borrow()[0].clone();
        assert_eq!(told, path);
        assert!(at >= notice_after && at < elapsed, "{at:?}");
        // A timeout that comes before the notice delay tells no one.
        let err = lock(&path, wait(notice_after / 2, notice_after, &notice)).unwrap_err();
        assert!(matches!(err, FsError::LockTimeout { .. }), "{err}");
        assert_eq!(notices.borrow().len(), 1);
        // A wait that ends when the holder lets go is told once too, however long it lasts.
        notices.borrow_mut().clear();
        let holder = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            drop(held);
        });
        lock(
            &path,
            wait(Duration::from_secs(30), Duration::from_millis(20), &notice),
        )
        .unwrap();
        holder.join().unwrap();
        assert_eq!(notices.borrow().len(), 1, "{:?}", notices.borrow());
    }

    #[test]
    fn if_free_takes_only_a_free_lock_and_tells_no_one() {
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join("locks/g.lock");
        let held = lock(&path, LockWait::IF_FREE).unwrap();
        let err = lock(&path, LockWait::IF_FREE).unwrap_err();
        assert!(matches!(err, FsError::LockTimeout { .. }), "{err}");
        drop(held);
        lock(&path, LockWait::IF_FREE).unwrap();
    }
}
