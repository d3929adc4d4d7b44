//! The per-group lock: one run at a time changes a group (or the `global` folder); a lock
//! whose holder died is free at once.

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

/// Takes the exclusive lock at `lock_path` (creating its folder), waiting up to `timeout`.
/// A lock held by a process that died is released by the kernel, so it never blocks.
pub fn lock(lock_path: &Path, timeout: Duration) -> Result<GroupLock> {
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
    let file = std::fs::File::from(fd);
    let started = Instant::now();
    let mut announced = false;
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
        if started.elapsed() >= timeout {
            return Err(FsError::LockTimeout {
                path: lock_path.to_owned(),
                waited: started.elapsed(),
            });
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_times_out_while_held_and_is_free_after_drop() {
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join("locks/g.lock");
        let held = lock(&path, Duration::from_secs(1)).unwrap();
        let err = lock(&path, Duration::from_millis(20)).unwrap_err();
        assert!(matches!(err, FsError::LockTimeout { .. }), "{err}");
        assert!(err.to_string().contains("CLAWMD_LOCK_TIMEOUT"), "{err}");
        drop(held);
        lock(&path, Duration::from_millis(20)).unwrap();
    }
}
