//! [`PathMemo`]: a process-wide memo of one value per path, for what a long-lived process
//! (`clawmd serve`) would otherwise read or parse again at every request. The caller keeps
//! with each value what makes it still right (the bytes it was made from, a file's settled
//! identity) and checks that at every use; the memo only bounds what is kept.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// The most paths a memo keeps (a deployment's groups, each at most once); past it, everything
/// kept is dropped and the memo fills again.
const MAX_ENTRIES: usize = 4096;

/// One value per path, at most [`MAX_ENTRIES`] paths, shared by the process's threads.
pub struct PathMemo<V>(Mutex<Option<HashMap<PathBuf, V>>>);

impl<V> PathMemo<V> {
    /// An empty memo (for a `static`).
    pub const fn new() -> Self {
        PathMemo(Mutex::new(None))
    }

    fn lock(&self) -> MutexGuard<'_, Option<HashMap<PathBuf, V>>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// What `use_kept` makes of the value kept for `path`, if any.
    pub fn get<R>(&self, path: &Path, use_kept: impl FnOnce(&V) -> Option<R>) -> Option<R> {
        self.lock().as_ref()?.get(path).and_then(use_kept)
    }

    /// Keeps `value` for `path`, in place of the one kept before.
    pub fn put(&self, path: &Path, value: V) {
        let mut memo = self.lock();
        let kept = memo.get_or_insert_with(HashMap::new);
        if kept.len() >= MAX_ENTRIES && !kept.contains_key(path) {
            kept.clear();
        }
        kept.insert(path.to_owned(), value);
    }

    /// Forgets what was kept for `path`.
    pub fn forget(&self, path: &Path) {
        if let Some(kept) = self.lock().as_mut() {
            kept.remove(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_value_per_path_and_bounded() {
        let memo = PathMemo::<u32>::new();
        assert_eq!(memo.get(Path::new("/a"), |v| Some(*v)), None);
        memo.put(Path::new("/a"), 1);
        memo.put(Path::new("/a"), 2);
        assert_eq!(memo.get(Path::new("/a"), |v| Some(*v)), Some(2));
        memo.forget(Path::new("/a"));
        assert_eq!(memo.get(Path::new("/a"), |v| Some(*v)), None);
        for n in 0..MAX_ENTRIES as u32 {
            memo.put(Path::new(&format!("/{n}")), n);
        }
        assert_eq!(memo.get(Path::new("/0"), |v| Some(*v)), Some(0));
        memo.put(Path::new("/one-more"), 7);
        assert_eq!(memo.get(Path::new("/0"), |v| Some(*v)), None);
        assert_eq!(memo.get(Path::new("/one-more"), |v| Some(*v)), Some(7));
    }
}
