//! Claude Code's built-in AGENTS.md plugin (`cc-plugin-agents-md`): when no CLAUDE.md exists at
//! or above the working directory, `AGENTS.md` and `.claude/AGENTS.md` files load instead, each
//! folder's files placed before the first project file from a deeper folder.
//!
//! It runs after the main walk, with its own "already loaded" set, exactly as the plugin
//! post-processes Claude Code's instruction files; that is why it lives apart.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::engine::{Engine, Noise};
use super::fs::MemoryFs;
use super::markdown::js_trim;
use super::model::*;
use super::paths::{self, key, walk_dirs};
use super::version::Behaviour;

const CLAUDE_NAMES: [&str; 3] = ["CLAUDE.md", ".claude/CLAUDE.md", "CLAUDE.local.md"];
const AGENTS_NAMES: [&str; 2] = ["AGENTS.md", ".claude/AGENTS.md"];

impl<F: MemoryFs + ?Sized> Engine<'_, F> {
    /// Claude Code's built-in AGENTS.md plugin (`cc-plugin-agents-md`).
    pub(super) fn agents_md(&mut self, files: &mut Vec<LoadedFile>) {
        if self.opts.agents_md == AgentsMd::Never || !self.opts.load_project {
            return;
        }
        if self.opts.agents_md == AgentsMd::Fallback
            && (!self.opts.claude_version.has(Behaviour::AgentsMdFallback)
                || self.is_claude_project(files))
        {
            return;
        }
        let found = self.ancestors(&AGENTS_NAMES);
        let fresh = dedupe_against(found, files);
        if fresh.is_empty() {
            return;
        }
        if self.opts.agents_md == AgentsMd::Fallback {
            for f in fresh.iter().filter(|f| f.0.parent.is_none()) {
                let msg = "no CLAUDE.md at or above the working directory, so Claude Code loads this AGENTS.md instead".to_string();
                self.note(
                    Severity::Info,
                    DiagnosticCode::AgentsMdFallback,
                    &f.0.path,
                    None,
                    None,
                    msg,
                );
            }
        }
        insert_by_project_dir(files, fresh);
    }

    /// Is there a CLAUDE.md (or `.claude/CLAUDE.md`, `CLAUDE.local.md`) with content at or
    /// above the working directory?
    fn is_claude_project(&mut self, files: &[LoadedFile]) -> bool {
        let own = files.iter().any(|f| {
            matches!(f.kind, MemoryKind::Project | MemoryKind::Local)
                && f.parent.is_none()
                && CLAUDE_NAMES
                    .iter()
                    .any(|n| f.path.to_string_lossy().ends_with(&format!("/{n}")))
                && {
                    let dir = paths::project_dir_of(&f.path);
                    dir == self.cwd || paths::is_below(&self.cwd, &dir)
                }
        });
        own || !self.ancestors(&CLAUDE_NAMES).is_empty()
    }

    /// JS `FGo`: load `names` in every directory from the root-most ancestor down, with a
    /// fresh "already loaded" set; each main file with its imports (chain root, files).
    fn ancestors(&mut self, names: &[&str]) -> Vec<(LoadedFile, PathBuf)> {
        let mut processed: HashSet<String> = HashSet::new();
        if let Some(m) = &self.opts.managed_dir {
            processed.insert(key(&m.join("CLAUDE.md")));
        }
        if let Some(u) = self.opts.user_dir() {
            processed.insert(key(&u.join("CLAUDE.md")));
        }
        let mut out = Vec::new();
        for dir in walk_dirs(&self.cwd) {
            if self.withhold.skipped(&dir).is_some() {
                continue;
            }
            for name in names {
                let path = dir.join(name);
                if self.excludes.matches(&path, MemoryKind::Project) {
                    continue;
                }
                let loaded = self.load_tree(
                    &path,
                    MemoryKind::Project,
                    self.approved,
                    Origin::AgentsMd,
                    &mut processed,
                    Noise::Quiet,
                );
                for l in loaded {
                    out.push((l.file, path.clone()));
                }
            }
        }
        out
    }
}

/// JS `fKn`: drop AGENTS files already loaded (same path) or identical to a loaded
/// project or local file (same trimmed text).
fn dedupe_against(
    found: Vec<(LoadedFile, PathBuf)>,
    files: &[LoadedFile],
) -> Vec<(LoadedFile, PathBuf)> {
    let mut seen: HashSet<PathBuf> = files.iter().map(|f| f.path.clone()).collect();
    let texts: HashSet<&str> = files
        .iter()
        .filter(|f| matches!(f.kind, MemoryKind::Project | MemoryKind::Local))
        .map(|f| js_trim(&f.body))
        .collect();
    let mut out = Vec::new();
    for (f, root) in found {
        let t = js_trim(&f.body);
        if seen.contains(&f.path) || (!t.is_empty() && texts.contains(t)) {
            continue;
        }
        seen.insert(f.path.clone());
        out.push((f, root));
    }
    out
}

/// JS `SOo`/`R0s`: insert each project folder's AGENTS files before the first project or
/// local file from a deeper folder, else after the last project or local file.
fn insert_by_project_dir(files: &mut Vec<LoadedFile>, fresh: Vec<(LoadedFile, PathBuf)>) {
    let mut groups: Vec<(PathBuf, Vec<LoadedFile>)> = Vec::new();
    for (f, root) in fresh {
        let dir = paths::project_dir_of(&root);
        match groups.iter_mut().find(|(d, _)| *d == dir) {
            Some((_, g)) => g.push(f),
            None => groups.push((dir, vec![f])),
        }
    }
    for (dir, group) in groups {
        let at = insertion_index(files, &dir);
        files.splice(at..at, group);
    }
}

fn insertion_index(files: &[LoadedFile], dir: &Path) -> usize {
    let is_own = |f: &LoadedFile| matches!(f.kind, MemoryKind::Project | MemoryKind::Local);
    let chain_root = |f: &LoadedFile| {
        let mut cur = f;
        let mut seen = HashSet::new();
        while let Some(p) = &cur.parent {
            if !seen.insert(p.clone()) {
                break;
            }
            match files.iter().find(|g| &g.path == p) {
                Some(g) => cur = g,
                None => return p.clone(),
            }
        }
        cur.path.clone()
    };
    if let Some(i) = files
        .iter()
        .position(|f| is_own(f) && paths::is_below(&paths::project_dir_of(&chain_root(f)), dir))
    {
        return i;
    }
    files
        .iter()
        .rposition(is_own)
        .map_or(files.len(), |i| i + 1)
}
