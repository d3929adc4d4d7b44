//! [`PathMemo`]: a process-wide memo of one value per path, for what a long-lived process
//! (`clawmd serve`) would otherwise read or parse again at every request. The caller keeps
//! with each value what makes it still right (the bytes it was made from, a file's settled
//! identity) and checks that at every use; the memo only bounds what is kept: the paths, and,
//! for a memo made [`PathMemo::within`] a budget, the bytes the values hold.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// The most paths a memo keeps (a deployment's groups, each at most once); past it, everything
/// kept is dropped and the memo fills again.
const MAX_ENTRIES: usize = 4096;

/// One value per path, at most [`MAX_ENTRIES`] paths (and, [`PathMemo::within`] a budget, at
/// most that many bytes of values), shared by the process's threads.
pub struct PathMemo<V> {
    kept: Mutex<Option<Kept<V>>>,
    max_bytes: usize,
}

/// What a memo holds: each path's value with its size, and the sum of the sizes.
struct Kept<V> {
    values: HashMap<PathBuf, (V, usize)>,
    bytes: usize,
}

impl<V> PathMemo<V> {
    /// An empty memo bounded by paths only (for a `static`).
    pub const fn new() -> Self {
        Self::within(usize::MAX)
    }

    /// An empty memo that also keeps at most `max_bytes` of values, each sized by
    /// [`PathMemo::put_sized`]; past it, everything kept is dropped and the memo fills again.
    pub const fn within(max_bytes: usize) -> Self {
        PathMemo {
            kept: Mutex::new(None),
            max_bytes,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Kept<V>>> {
        self.kept
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// What `use_kept` makes of the value kept for `path`, if any.
    pub fn get<R>(&self, path: &Path, use_kept: impl FnOnce(&V) -> Option<R>) -> Option<R> {
        let memo = self.lock();
        let (value, _) = memo.as_ref()?.values.get(path)?;
        use_kept(value)
    }

    /// Keeps `value` for `path`, in place of the one kept before.
    pub fn put(&self, path: &Path, value: V) {
        self.put_sized(path, value, 0);
    }

    /// [`PathMemo::put`] of a value holding `bytes` bytes; one over the whole budget is not
    /// kept (nor the one kept before for `path`).
    pub fn put_sized(&self, path: &Path, value: V, bytes: usize) {
        let mut memo = self.lock();
        let kept = memo.get_or_insert_with(|| Kept {
            values: HashMap::new(),
            bytes: 0,
        });
        if let Some((_, old)) = kept.values.remove(path) {
            kept.bytes -= old;
        }
        if bytes > self.max_bytes {
            return;
        }
        if kept.values.len() >= MAX_ENTRIES || kept.bytes + bytes > self.max_bytes {
            kept.values.clear();
            kept.bytes = 0;
        }
        kept.bytes += bytes;
        kept.values.insert(path.to_owned(), (value, bytes));
    }

    /// Forgets what was kept for `path`.
    pub fn forget(&self, path: &Path) {
        if let Some(kept) = self.lock().as_mut()
            && let Some((_, bytes)) = kept.values.remove(path)
        {
            kept.bytes -= bytes;
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

    #[test]
    fn a_memo_within_a_budget_keeps_at_most_its_bytes() {
        let memo = PathMemo::<u32>::within(100);
        let total = |memo: &PathMemo<u32>| memo.lock().as_ref().map_or(0, |kept| kept.bytes);
        memo.put_sized(Path::new("/a"), 1, 60);
        memo.put_sized(Path::new("/a"), 2, 70);
        assert_eq!(total(&memo), 70, "a value put again counts once");
        memo.put_sized(Path::new("/b"), 3, 40);
        assert_eq!(
            memo.get(Path::new("/a"), |v| Some(*v)),
            None,
            "over the budget: afresh"
        );
        assert_eq!(memo.get(Path::new("/b"), |v| Some(*v)), Some(3));
        memo.put_sized(Path::new("/b"), 4, 101);
        assert_eq!(
            memo.get(Path::new("/b"), |v| Some(*v)),
            None,
            "too large to keep"
        );
        assert_eq!(total(&memo), 0);
        memo.put_sized(Path::new("/c"), 5, 30);
        memo.forget(Path::new("/c"));
        assert_eq!(total(&memo), 0);
    }
}
