//! Imports inside the shared sources keep the meaning their owner gave them.
//!
//! `container/CLAUDE.md` and a skill's `instructions.md` may hold `@./more.md`. The owner
//! means `container/more.md`. Once the text is copied into the group folder (copy delivery) or
//! inlined into a generated document, Claude Code would resolve that line against the
//! *group* folder, which the agent can write (measured on 2.1.328: it loaded a planted
//! `/workspace/agent/more.md`). So before a shared source leaves `container/`, clawmd expands
//! its imports itself, relative to the source's own location in the container's view of
//! `container/` (`/app`), and turns every import mention into a code span, which Claude Code
//! never follows. An import that does not resolve to a text file inside `container/` is not
//! delivered and is reported.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::loader::content::at_mentions;
use crate::loader::content::{import_path, scan_markdown};
use crate::loader::fs::{MemoryFs, ReadOutcome};
use crate::loader::paths::{is_text_path, resolve_import};
use crate::loader::{MAX_FILE_BYTES, MAX_IMPORT_DEPTH};
use crate::runtime::mounted::{Mount, MountedFs};

/// An import inside a shared source that clawmd could not deliver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImportNote {
    /// The source file that holds the import (as the container sees it, e.g. `/app/CLAUDE.md`).
    pub file: PathBuf,
    /// The import as written, after the `@`.
    pub import: String,
    /// Why it is not delivered.
    pub reason: String,
}

impl std::fmt::Display for ImportNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: @{} is not delivered ({}); the line stays as literal text (fix: put the file under the container folder, or remove the import)",
            self.file.display(),
            self.import,
            self.reason
        )
    }
}

/// A shared source with its imports expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expanded {
    /// The text to deliver: every import mention neutralised, the owner's files inlined.
    pub text: Vec<u8>,
    /// Imports that were not delivered.
    pub notes: Vec<ImportNote>,
}

/// Expands the imports of the shared source at `path` (a path in the container's view, e.g.
/// `<app>/CLAUDE.md`) whose bytes are `bytes`. Only `container/` is visible: `app` is
/// where it is mounted, `container_dir` the host folder. Text that holds no import is
/// returned unchanged, byte for byte.
pub fn expand_source(app: &Path, container_dir: &Path, path: &Path, bytes: &[u8]) -> Expanded {
    expand_source_in(&[Mount::new(app, container_dir)], path, bytes)
}

/// [`expand_source`] with the container folders the recipe's sources are mounted at (`app`
/// over `container/`, and each fragment folder where its recipe entry mounts it): only what
/// they show is visible.
pub fn expand_source_in(mounts: &[Mount], path: &Path, bytes: &[u8]) -> Expanded {
    expand_source_with(&MountedFs::new(mounts.iter().cloned()), path, bytes)
}

/// [`expand_source_in`] through the view `fs` (one whose reads are logged, say).
pub fn expand_source_with(fs: &MountedFs, path: &Path, bytes: &[u8]) -> Expanded {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Expanded {
            text: bytes.to_vec(),
            notes: Vec::new(),
        };
    };
    let mut expander = Expander {
        fs,
        seen: HashSet::new(),
        notes: Vec::new(),
    };
    let real = fs.canonicalize(path).unwrap_or_else(|_| path.to_owned());
    expander.seen.insert(real.clone());
    let out = expander.expand(text, &real, path, 0);
    // The owner's files inlined next to each other are neutralised as a whole too.
    let out = if out == text { out } else { neutralise(&out) };
    Expanded {
        text: out.into_bytes(),
        notes: expander.notes,
    }
}

struct Expander<'a, F: MemoryFs> {
    fs: &'a F,
    seen: HashSet<PathBuf>,
    notes: Vec<ImportNote>,
}

impl<F: MemoryFs> Expander<'_, F> {
    fn expand(&mut self, text: &str, real: &Path, shown: &Path, depth: usize) -> String {
        let imports = match scan_markdown(text) {
            Ok(scan) => scan.imports,
            Err(_) => return text.to_owned(),
        };
        if imports.is_empty() {
            return text.to_owned();
        }
        let base = real.parent().unwrap_or(Path::new("/"));
        // What each import brings, in order.
        let mut children: Vec<(String, Option<String>)> = Vec::new();
        for written in &imports {
            let child = self.child(written, base, shown, depth);
            children.push((written.clone(), child));
        }
        let neutral = neutralise(text);
        let lines: Vec<&str> = neutral.split('\n').collect();
        let mut after_line: Vec<Vec<usize>> = vec![Vec::new(); lines.len()];
        for (index, (written, child)) in children.iter().enumerate() {
            if child.is_none() {
                continue;
            }
            let at = lines
                .iter()
                .position(|line| mentions(line, written))
                .unwrap_or(lines.len() - 1);
            after_line[at].push(index);
        }
        let mut out = String::new();
        for (n, line) in lines.iter().enumerate() {
            if n > 0 {
                out.push('\n');
            }
            out.push_str(line);
            for &index in &after_line[n] {
                let (written, child) = &children[index];
                let child = child.as_deref().unwrap_or_default();
                out.push_str(&format!(
                    "\n\n<!-- begin @{written} (expanded by clawmd from the owner's file) -->\n{}\n<!-- end @{written} -->\n",
                    child.trim_end_matches('\n')
                ));
            }
        }
        out
    }

    /// The expanded text of one import, or `None` (with a note) when it is not delivered.
    fn child(&mut self, written: &str, base: &Path, shown: &Path, depth: usize) -> Option<String> {
        let mut note = |reason: &str| {
            self.notes.push(ImportNote {
                file: shown.to_owned(),
                import: written.to_owned(),
                reason: reason.to_owned(),
            })
        };
        if depth + 1 >= MAX_IMPORT_DEPTH {
            note("nested deeper than Claude Code follows");
            return None;
        }
        let Some(target) = resolve_import(written, base, None) else {
            note("a home-relative path has no meaning for a shared source");
            return None;
        };
        if !is_text_path(&target) {
            note("not a text file");
            return None;
        }
        let Ok(real) = self.fs.canonicalize(&target) else {
            note("no such file inside the container folder");
            return None;
        };
        if !self.seen.insert(real.clone()) {
            // Already delivered (or an import cycle): Claude Code loads a file once.
            return Some(String::new());
        }
        let bytes = match self.fs.read_limited(&real, MAX_FILE_BYTES) {
            Ok(ReadOutcome::Bytes(bytes)) => bytes,
            Ok(ReadOutcome::TooLarge { .. }) => {
                note("larger than Claude Code reads");
                return None;
            }
            Ok(ReadOutcome::NotAFile { .. }) | Err(_) => {
                note("not a readable file inside the container folder");
                return None;
            }
        };
        let text = String::from_utf8_lossy(&bytes).into_owned();
        Some(self.expand(&text, &real, &target, depth + 1))
    }
}

/// Whether `line` mentions `@written` the way Claude Code reads an import.
fn mentions(line: &str, written: &str) -> bool {
    at_mentions(line)
        .into_iter()
        .filter_map(import_path)
        .any(|path| path == written)
        || line.contains(&format!("`@{written}"))
}

/// `text` with every import mention wrapped in a code span, so that Claude Code keeps it as
/// literal text. Lines are only changed where a mention stands. When wrapping cannot do it (a
/// new backtick pairs with one the text left open), a zero-width space after the `@` does:
/// Claude Code never reads `@\u{200B}path` as an import.
pub fn neutralise(text: &str) -> String {
    let imports_of = |text: &str| scan_markdown(text).map(|scan| scan.imports);
    let mut current = text.to_owned();
    for _ in 0..3 {
        let remaining = match imports_of(&current) {
            Ok(remaining) => remaining,
            Err(_) => return current,
        };
        if remaining.is_empty() {
            return current;
        }
        current = current
            .split('\n')
            .map(|line| wrap_mentions(line, &remaining))
            .collect::<Vec<_>>()
            .join("\n");
    }
    let Ok(remaining) = imports_of(&current) else {
        return current;
    };
    for path in &remaining {
        current = current.replace(&format!("@{path}"), &format!("@\u{200B}{path}"));
    }
    if imports_of(&current).is_ok_and(|left| !left.is_empty()) {
        current = current.replace('@', "@\u{200B}");
    }
    current
}

fn wrap_mentions(line: &str, imports: &[String]) -> String {
    let captures: Vec<&str> = at_mentions(line)
        .into_iter()
        .filter(|capture| import_path(capture).is_some_and(|p| imports.contains(&p)))
        .collect();
    if captures.is_empty() {
        return line.to_owned();
    }
    let mut out = String::new();
    let mut rest = line;
    for capture in captures {
        let needle = format!("@{capture}");
        let Some(at) = rest.find(&needle) else {
            continue;
        };
        out.push_str(&rest[..at]);
        let run = capture.split(|c| c != '`').map(str::len).max().unwrap_or(0);
        let ticks = "`".repeat(run + 1);
        let pad = if capture.starts_with('`') || capture.ends_with('`') {
            " "
        } else {
            ""
        };
        out.push_str(&format!("{ticks}{pad}{needle}{pad}{ticks}"));
        rest = &rest[at + needle.len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("skills/web")).unwrap();
        std::fs::write(dir.path().join("more.md"), "OWNER MORE\nsee @./deeper.md\n").unwrap();
        std::fs::write(dir.path().join("deeper.md"), "DEEPER\n").unwrap();
        std::fs::write(dir.path().join("skills/web/extra.md"), "WEB EXTRA\n").unwrap();
        dir
    }

    fn expand(dir: &Path, path: &str, text: &str) -> (String, Vec<ImportNote>) {
        let out = expand_source(Path::new("/app"), dir, Path::new(path), text.as_bytes());
        (String::from_utf8(out.text).unwrap(), out.notes)
    }

    #[test]
    fn text_without_imports_is_unchanged() {
        let dir = container();
        let text = "# Base\nMail me at a@b.c, `@./x.md` is code\n";
        assert_eq!(expand(dir.path(), "/app/CLAUDE.md", text).0, text);
    }

    #[test]
    fn imports_resolve_against_the_sources_own_folder_and_nest() {
        let dir = container();
        let (text, notes) = expand(dir.path(), "/app/CLAUDE.md", "BASE\nRules: @./more.md\n");
        assert!(notes.is_empty(), "{notes:?}");
        assert!(text.contains("Rules: `@./more.md`\n"), "{text}");
        assert!(
            text.contains("OWNER MORE") && text.contains("DEEPER"),
            "{text}"
        );
        let scan = scan_markdown(&text).unwrap();
        assert!(scan.imports.is_empty(), "{:?} in {text}", scan.imports);

        let (text, _) = expand(dir.path(), "/app/skills/web/instructions.md", "@extra.md\n");
        assert!(text.contains("WEB EXTRA"), "{text}");
    }

    #[test]
    fn imports_outside_the_container_folder_are_neutralised_and_reported() {
        let dir = container();
        let (text, notes) = expand(
            dir.path(),
            "/app/CLAUDE.md",
            "A @../CLAUDE.local.md B @/workspace/agent/x.md C @~/y.md D @./missing.md\n",
        );
        assert!(scan_markdown(&text).unwrap().imports.is_empty(), "{text}");
        let imports: Vec<&str> = notes.iter().map(|n| n.import.as_str()).collect();
        assert_eq!(
            imports,
            [
                "../CLAUDE.local.md",
                "/workspace/agent/x.md",
                "~/y.md",
                "./missing.md"
            ]
        );
        assert!(notes[0].to_string().contains("fix:"));
    }

    #[test]
    fn a_cycle_is_delivered_once() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.md"), "AAA @./b.md\n").unwrap();
        std::fs::write(dir.path().join("b.md"), "BBB @./a.md\n").unwrap();
        let (text, _) = expand(dir.path(), "/app/CLAUDE.md", "@./a.md\n");
        assert_eq!(text.matches("AAA").count(), 1, "{text}");
        assert_eq!(text.matches("BBB").count(), 1, "{text}");
    }

    #[test]
    fn a_mention_that_wrapping_cannot_neutralise_still_is() {
        // Wrapping `@a` pairs the new backtick with the one left open on the line above.
        let text = neutralise("`\n@a");
        assert!(scan_markdown(&text).unwrap().imports.is_empty(), "{text:?}");
        assert!(text.contains('a'));
    }

    #[test]
    fn backticks_in_a_mention_get_a_longer_fence() {
        let line = wrap_mentions("x @a`b.md y", &["a`b.md".to_owned()]);
        assert_eq!(line, "x ``@a`b.md`` y");
        assert!(scan_markdown(&line).unwrap().imports.is_empty());
    }
}
