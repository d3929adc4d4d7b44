//! A file written through a shared mapping, as an agent can write the files it owns: the
//! kernel stamps the file's times at the first write to a clean page only, so until the page
//! is written back a later write changes the bytes and leaves the change time, modification
//! time, size and inode as they were. What trusts a file's status for its bytes is fooled.

use std::path::Path;

use rustix::mm::{MapFlags, ProtFlags, mmap, munmap};

/// An agent's settings that leave its memory on, and the same length turning it off: what the
/// tests write through a mapping.
pub const MEMORY_ON: &[u8] = br#"{"env":{"CLAUDE_CODE_DISABLE_CLAUDE_MDS":"0"}}"#;
/// See [`MEMORY_ON`].
pub const MEMORY_OFF: &[u8] = br#"{"env":{"CLAUDE_CODE_DISABLE_CLAUDE_MDS":"1"}}"#;

/// A shared, writable mapping of a whole file.
pub struct Mapped {
    file: std::fs::File,
    map: *mut std::ffi::c_void,
    len: usize,
}

impl Mapped {
    /// Maps the file at `path` (of `len` bytes, more than none).
    pub fn new(path: &Path, len: usize) -> Mapped {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap();
        // SAFETY: a fresh shared mapping of the file's `len` bytes, written only through
        // `write` and unmapped on drop, before the file is closed.
        let map = unsafe {
            mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                &file,
                0,
            )
        }
        .unwrap();
        Mapped { file, map, len }
    }

    /// Writes `bytes` (exactly the mapping's length) through the mapping.
    pub fn write(&mut self, bytes: &[u8]) {
        assert_eq!(bytes.len(), self.len);
        // SAFETY: `map` is `len` bytes, readable and writable, owned by this value.
        let view = unsafe { std::slice::from_raw_parts_mut(self.map.cast::<u8>(), self.len) };
        view.copy_from_slice(bytes);
    }

    /// The file's inode, size and times (modification and change, with nanoseconds).
    pub fn status(&self) -> (u64, i64, [i64; 4]) {
        let st = rustix::fs::fstat(&self.file).unwrap();
        let times = [
            st.st_mtime,
            st.st_mtime_nsec as i64,
            st.st_ctime,
            st.st_ctime_nsec as i64,
        ];
        (st.st_ino, st.st_size, times)
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: mapped in `new`, `len` bytes, not used after.
        let _ = unsafe { munmap(self.map, self.len) };
    }
}

/// Runs `round` up to five times, each after writing `first` through `mapped` and letting it
/// settle (the file's last change more than two seconds old, so that what keeps files by
/// their identity may keep it), until a round's later write (made by `round` through the
/// mapping) leaves the file's status as it was; `round` gets the status to compare. The kernel
/// may write the page back (and stamp the next write) at any time, a busy disk sooner: such a
/// round proves nothing and is made again. Returns whether one round proved it.
pub fn settled_rounds(
    mapped: &mut Mapped,
    first: &[u8],
    mut round: impl FnMut(&mut Mapped) -> (u64, i64, [i64; 4]),
) -> bool {
    for _ in 0..5 {
        mapped.write(first);
        let before = mapped.status();
        std::thread::sleep(std::time::Duration::from_millis(2100));
        if round(mapped) == before {
            return true;
        }
    }
    eprintln!("every write through the mapping showed in the file's status: nothing proved");
    false
}
