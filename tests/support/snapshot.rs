//! Snapshots of human output: insta filters that hide what changes from run to run.
//!
//! ```ignore
//! insta::with_settings!({filters => snapshot::filters(d.root())}, {
//!     insta::assert_snapshot!("compose_dry_run", run.stdout());
//! });
//! ```

use std::path::Path;

/// Filters for output about the tree at `root`: the root (as given and canonical) becomes
/// `[ROOT]`, any other temp dir `[TEMP]`, process ids `[PID]`, durations `[TIME]`, content
/// hashes (`clawmd-sha256:`, rescue names) `[HASH]`.
pub fn filters(root: &Path) -> Vec<(&'static str, &'static str)> {
    let mut filters = Vec::new();
    for root in [root.to_path_buf(), root.canonicalize().unwrap_or_default()] {
        let text = root.display().to_string();
        if !text.is_empty() {
            let escaped: &'static str = leak(regex_escape(&text));
            filters.push((escaped, "[ROOT]"));
        }
    }
    filters.extend([
        (r"/(tmp|dev/shm)/[A-Za-z0-9._-]+", "[TEMP]"),
        (r"\b(pid|process) \d+", "$1 [PID]"),
        (r"\b\d+(\.\d+)?(ns|µs|us|ms|s)\b", "[TIME]"),
        (r"clawmd-sha256:[0-9a-f]+", "clawmd-sha256:[HASH]"),
        (r"\.rescued-[0-9a-f]{16}\b", ".rescued-[HASH]"),
        (r"\.clawmd-tmp-[0-9a-f]{32}\b", ".clawmd-tmp-[RANDOM]"),
    ]);
    filters
}

/// insta's filters borrow their patterns for the life of the settings: a test's root lives
/// as long as the test, so leaking one short string per snapshot is fine.
fn leak(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A run's exit code and both streams, as one text to snapshot.
pub fn streams(run: &super::Run) -> String {
    format!(
        "exit {}\n--- stdout\n{}--- stderr\n{}",
        run.code(),
        run.stdout(),
        run.stderr()
    )
}
