//! `.claude/rules` folders (JS `VHe`): every `*.md` below, in directory order, subfolders in
//! place, conditional rules (`paths:` frontmatter) held back, links leaving the working
//! directory refused unless external imports are approved.
//!
//! Kept apart from the engine because the folder walk has its own state (a stack of open
//! folders, the folders already visited) and its own symlink rules.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::engine::{Engine, Noise};
use super::fs::{DirEntry, FileKind, MemoryFs};
use super::links;
use super::model::*;
use super::path_policy::is_special_path;
use super::paths::{is_within, key};
use super::version::Behaviour;

/// A rules folder being listed.
pub(super) struct RulesDir {
    path: PathBuf,
    shown: PathBuf,
    real: Option<PathBuf>,
    entries: Vec<DirEntry>,
    next: usize,
    /// How many rules were loaded before this folder was opened: a folder whose walk is
    /// aborted loses everything loaded since (its own rules and its subfolders').
    start: usize,
}

impl<F: MemoryFs + ?Sized> Engine<'_, F> {
    /// JS `VHe`: every `*.md` under a rules folder, in directory order, subfolders in place;
    /// files with `paths:` frontmatter are conditional and not loaded now.
    pub(super) fn load_rules(
        &mut self,
        dir: &Path,
        kind: MemoryKind,
        include_external: bool,
        processed: &mut HashSet<String>,
    ) -> Vec<LoadedFile> {
        let mut out = Vec::new();
        let mut visited: HashSet<String> = HashSet::new();
        // A stack of folders being listed: (listed path, shown-as path, entries, next index).
        let mut stack: Vec<RulesDir> = Vec::new();
        if let Some(top) =
            self.open_rules_dir(dir, None, kind, include_external, true, &mut visited)
        {
            stack.push(RulesDir { start: 0, ..top });
        }
        while let Some(top) = stack.last_mut() {
            let Some(entry) = top.entries.get(top.next).cloned() else {
                stack.pop();
                continue;
            };
            top.next += 1;
            self.spent.rules_entries += 1;
            if self.spent.rules_entries > self.opts.budgets.rules_entries {
                let what = format!(
                    "{} is past {} rules-folder entries looked at in all: the rest of {} is not read",
                    top.path.join(&entry.name).display(),
                    self.opts.budgets.rules_entries,
                    dir.display()
                );
                self.over_budget("rules entries", dir, what);
                break;
            }
            let (dir_path, shown_dir, real_dir) =
                (top.path.clone(), top.shown.clone(), top.real.clone());
            // Node lists names as UTF-8 strings (invalid bytes as U+FFFD), so a name that is
            // not UTF-8 names a file that does not exist (cases 66, 68).
            let name = entry.name.to_string_lossy().into_owned();
            let en = dir_path.join(&name);
            let (zt, is_link, canonical) = match self.fs.canonicalize(&en) {
                Ok(r) => (r.clone(), r != en, true),
                Err(_) => (en.clone(), false, false),
            };
            let pn = shown_dir.join(&name);
            if (pn != zt && self.excludes.matches(&pn, kind))
                || is_special_path(&zt.to_string_lossy())
            {
                continue;
            }
            if self.unchecked_rule_path(&en, is_link, canonical, kind) {
                continue;
            }
            if is_link && zt.to_str().is_none() {
                // Claude Code holds the real path as a string (bytes that are not UTF-8 become
                // U+FFFD). On Node (to 2.1.112) `realpathSync` fails and the link alone is
                // passed over; on the native binary the `stat` of that string fails with
                // `ENOENT`, which ends the walk of this whole folder: none of its rules load,
                // nor its subfolders' (case 113: the user's and managed folders on every native
                // release, a project's before 2.1.333, where the link is vetted above and
                // skipped alone).
                if !self
                    .opts
                    .claude_version
                    .has(Behaviour::UndecodableRuleLinkAbortsFolder)
                {
                    let msg = format!(
                        "rule {} links to {}, a path that is not UTF-8: Claude Code cannot resolve it, and passes it over",
                        pn.display(),
                        zt.display()
                    );
                    self.note(
                        Severity::Warning,
                        DiagnosticCode::LinkUnchecked,
                        &pn,
                        None,
                        None,
                        msg,
                    );
                    continue;
                }
                let msg = format!(
                    "rule {} links to {}, a path that is not UTF-8: Claude Code cannot stat it, and loads none of the rules in {}",
                    pn.display(),
                    zt.display(),
                    shown_dir.display()
                );
                self.note(
                    Severity::Warning,
                    DiagnosticCode::LinkUnchecked,
                    &pn,
                    None,
                    None,
                    msg,
                );
                if let Some(aborted) = stack.pop() {
                    out.truncate(aborted.start);
                }
                continue;
            }
            let entry_kind = if is_link {
                self.fs
                    .metadata(&zt)
                    .map(|m| m.kind)
                    .unwrap_or(FileKind::Other)
            } else {
                entry.kind
            };
            let elsewhere = canonical
                && real_dir.as_ref().is_some_and(|r| zt != r.join(&entry.name))
                && !is_within(&zt, &self.cwd);
            if elsewhere
                && !include_external
                && self.opts.claude_version.has(Behaviour::LinkTargetsExternal)
                && matches!(entry_kind, FileKind::Dir | FileKind::File)
            {
                let msg = format!(
                    "rule {} links outside {} and external imports are not approved: skipped",
                    pn.display(),
                    self.cwd.display()
                );
                self.note(
                    Severity::Warning,
                    DiagnosticCode::RuleExternal,
                    &pn,
                    None,
                    None,
                    msg,
                );
                continue;
            }
            match entry_kind {
                FileKind::Dir if stack.len() > self.opts.budgets.rules_depth => {
                    let what = format!(
                        "{} is nested {} folders below {}: it is not read",
                        pn.display(),
                        stack.len(),
                        dir.display()
                    );
                    self.over_budget("rules depth", &pn, what);
                }
                FileKind::Dir => {
                    let shown = (pn != zt).then_some(pn);
                    if let Some(sub) =
                        self.open_rules_dir(&zt, shown, kind, include_external, false, &mut visited)
                    {
                        stack.push(RulesDir {
                            start: out.len(),
                            ..sub
                        });
                    }
                }
                FileKind::File if name.ends_with(".md") => {
                    let loaded = self.load_tree(
                        &zt,
                        kind,
                        include_external,
                        Origin::Rule,
                        processed,
                        Noise::Report,
                    );
                    for l in loaded {
                        if l.conditional {
                            let msg = "has `paths:` frontmatter: Claude Code loads it only when it reads a matching file, not at start-up".to_string();
                            self.note(
                                Severity::Info,
                                DiagnosticCode::ConditionalRule,
                                &l.file.path,
                                None,
                                None,
                                msg,
                            );
                        } else {
                            out.push(l.file);
                        }
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// Prepare one rules folder for listing, or `None` when it is skipped or unreadable.
    fn open_rules_dir(
        &mut self,
        dir: &Path,
        shown: Option<PathBuf>,
        kind: MemoryKind,
        include_external: bool,
        top: bool,
        visited: &mut HashSet<String>,
    ) -> Option<RulesDir> {
        if visited.contains(&key(dir)) {
            return None;
        }
        let (real, is_link, canonical) = match self.fs.canonicalize(dir) {
            Ok(r) => (r.clone(), r != dir, true),
            Err(_) => (dir.to_path_buf(), false, false),
        };
        if is_special_path(&real.to_string_lossy()) {
            return None;
        }
        if self.unchecked_rule_path(dir, is_link, canonical, kind) {
            return None;
        }
        visited.insert(key(dir));
        if is_link {
            visited.insert(key(&real));
        }
        if top && !include_external && kind != MemoryKind::User && !is_within(&real, &self.cwd) {
            // The rules folder itself linked out: skipped since 2.1.232; its `.claude` folder
            // linked out: since 2.1.284.
            let version = self.opts.claude_version;
            let dir_is_link = version.has(Behaviour::LinkTargetsExternal) && self.is_link(dir);
            let dot_claude_is_link = version.has(Behaviour::LinkedClaudeDirExternal)
                && kind == MemoryKind::Project
                && dir.parent().is_some_and(|p| self.is_link(p));
            if dir_is_link || dot_claude_is_link {
                let msg = format!(
                    "{} links outside {} and external imports are not approved: its rules are skipped",
                    dir.display(),
                    self.cwd.display()
                );
                self.note(
                    Severity::Warning,
                    DiagnosticCode::RuleExternal,
                    dir,
                    None,
                    None,
                    msg,
                );
                return None;
            }
        }
        let mut entries = self.fs.read_dir(&real).ok()?;
        if !self
            .opts
            .claude_version
            .has(Behaviour::RulesInDirectoryOrder)
        {
            // Releases that ran on Node (the npm package's `cli.js`, up to 2.1.112) list a
            // folder through libuv's `scandir`, which sorts the names byte by byte (`strcmp`);
            // the native binary (2.1.113 on) keeps the directory's own order (cases 100, 101).
            entries.sort_by(|a, b| a.name.as_encoded_bytes().cmp(b.name.as_encoded_bytes()));
        }
        Some(RulesDir {
            path: dir.to_path_buf(),
            shown: shown.unwrap_or_else(|| dir.to_path_buf()),
            real: canonical.then_some(real),
            entries,
            next: 0,
            start: 0,
        })
    }

    /// Since 2.1.333 a project rules folder and each of its entries are vetted like a file
    /// found by name (JS `Ao(…, { judged: !p1n(type) })`, then `kne`): one reached through a
    /// link Claude Code does not follow is skipped (managed and user rules are not vetted).
    fn unchecked_rule_path(
        &mut self,
        path: &Path,
        is_link: bool,
        resolved: bool,
        kind: MemoryKind,
    ) -> bool {
        let vetting = self.vetting(kind, 0);
        if !vetting.any()
            || !(links::worth_walking(path, is_link) || !resolved && self.is_link(path))
        {
            return false;
        }
        let Some(why) = links::vet(self.fs, path, vetting) else {
            return false;
        };
        let msg = format!("rules path {} {}", path.display(), why.describe());
        self.note(
            Severity::Warning,
            DiagnosticCode::LinkUnchecked,
            path,
            None,
            None,
            msg,
        );
        true
    }
}
