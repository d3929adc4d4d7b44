//! The loading algorithm: discovery, the import worklist and the reads, in Claude Code
//! 2.1.328's order.
//!
//! This mirrors Claude Code's own functions (named in comments: `XZr` the walk, `Zne` one
//! file and its imports; rules folders are in [`super::rules`], the AGENTS.md plugin in
//! [`super::agents`]), with two deliberate differences: imports are followed with an
//! explicit stack instead of recursion (so no input can overflow the stack), and every file
//! that is dropped leaves a [`Diagnostic`] where Claude Code stays silent.

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};

use super::content::{self, IgnoredReason};
use super::fs::{FileKind, MemoryFs, ReadOutcome, is_loop};
use super::links;
use super::markdown::js_trim;
use super::model::*;
use super::path_policy::{self, is_special_path};
use super::paths::{self, is_within, key, normalize, resolve_import, walk_dirs};
use super::version::Behaviour;

/// Imports are followed to this depth: a file found by name is depth 0, `l4.md` (depth 4)
/// loads, `l5.md` does not.
pub const MAX_IMPORT_DEPTH: usize = 5;
/// Files larger than this (4 MiB) are skipped.
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// Claude Code warns about a memory file longer than this many UTF-16 units (its minimum
/// threshold; it scales with the model's context window).
pub const WARN_FILE_CHARS: usize = 40_000;
/// … and about all memory together longer than this.
pub const WARN_TOTAL_CHARS: usize = 120_000;

/// A place Claude Code looks for memory, in the order it looks.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Candidate {
    /// The file or folder.
    pub path: PathBuf,
    /// The kind its files get.
    pub kind: MemoryKind,
    /// `true` for a rules folder (`.claude/rules`), read recursively.
    pub rules_dir: bool,
}

/// The places Claude Code checks for memory, in order, without touching the disk:
/// the managed file and rules, the user's file and rules, then from the root-most
/// ancestor of `cwd` down to `cwd`: `CLAUDE.md`, `.claude/CLAUDE.md`, `.claude/rules/`,
/// `CLAUDE.local.md`. (`/` itself is never searched. `AGENTS.md` is looked for only
/// when none of these holds a CLAUDE.md; see [`AgentsMd`].)
///
/// ```
/// use clawmd_loader::{discover, LoadOptions};
///
/// let mut opts = LoadOptions::new("/w/p", None);
/// opts.managed_dir = None;
/// let paths: Vec<_> = discover(&opts).into_iter().map(|c| c.path).collect();
/// assert_eq!(paths[0], std::path::Path::new("/w/CLAUDE.md"));
/// assert_eq!(paths.last().unwrap(), std::path::Path::new("/w/p/CLAUDE.local.md"));
/// ```
pub fn discover(opts: &LoadOptions) -> Vec<Candidate> {
    let mut out = Vec::new();
    let mut add = |path: PathBuf, kind, rules_dir| {
        out.push(Candidate {
            path,
            kind,
            rules_dir,
        })
    };
    if let Some(m) = &opts.managed_dir {
        add(m.join("CLAUDE.md"), MemoryKind::Managed, false);
        add(m.join(".claude/rules"), MemoryKind::Managed, true);
    }
    if opts.load_user
        && let Some(u) = opts.user_dir()
    {
        add(u.join("CLAUDE.md"), MemoryKind::User, false);
        add(u.join("rules"), MemoryKind::User, true);
    }
    for dir in walk_dirs(&opts.cwd) {
        if opts.load_project {
            add(dir.join("CLAUDE.md"), MemoryKind::Project, false);
            add(dir.join(".claude/CLAUDE.md"), MemoryKind::Project, false);
            add(dir.join(".claude/rules"), MemoryKind::Project, true);
        }
        if opts.load_local {
            add(dir.join("CLAUDE.local.md"), MemoryKind::Local, false);
        }
    }
    out
}

/// The walked folder a project candidate belongs to (`d/CLAUDE.md`, `d/.claude/CLAUDE.md`,
/// `d/.claude/rules` all belong to `d`).
fn walk_dir_of(candidate: &Path) -> PathBuf {
    let parent = candidate.parent().unwrap_or(candidate);
    if parent.file_name().is_some_and(|n| n == ".claude") {
        parent.parent().unwrap_or(parent).to_path_buf()
    } else {
        parent.to_path_buf()
    }
}

/// Load the memory Claude Code would load; see [`crate::loader`] for an example.
pub fn load<F: MemoryFs + ?Sized>(fs: &F, opts: &LoadOptions) -> Result<Memory, LoaderError> {
    for (what, p) in [
        ("cwd", Some(&opts.cwd)),
        ("home", opts.home.as_ref()),
        ("config dir", opts.config_dir.as_ref()),
    ] {
        if let Some(p) = p.filter(|p| !p.is_absolute()) {
            return Err(LoaderError::RelativePath {
                what,
                path: p.clone(),
            });
        }
    }
    let cwd = fs
        .canonicalize(&opts.cwd)
        .map_err(|source| LoaderError::Cwd {
            path: opts.cwd.clone(),
            source,
        })?;
    let meta = fs.metadata(&cwd).map_err(|source| LoaderError::Cwd {
        path: opts.cwd.clone(),
        source,
    })?;
    if meta.kind != FileKind::Dir {
        let source = io::Error::new(io::ErrorKind::NotADirectory, "not a directory");
        return Err(LoaderError::Cwd {
            path: opts.cwd.clone(),
            source,
        });
    }
    if cwd.to_str().is_none() {
        // Claude Code does not start in a folder whose path is not UTF-8 (cases 63, 64).
        let diagnostic = Diagnostic {
            severity: Severity::Warning,
            code: DiagnosticCode::CwdNotUtf8,
            path: cwd.clone(),
            import: None,
            from: None,
            message: "the working directory's path is not UTF-8: Claude Code does not start there, so no memory loads".into(),
        };
        return Ok(Memory {
            cwd,
            external_imports_approved: false,
            files: Vec::new(),
            diagnostics: vec![diagnostic],
            claude_version: opts.claude_version,
            current_date: opts.current_date.clone().unwrap_or_else(today_utc),
            settings: SettingsEvaluation::default(),
        });
    }
    let mut engine = Engine {
        fs,
        opts,
        cwd,
        approved: false,
        excludes: Excludes::new(&[], 0),
        withhold: Withhold::default(),
        diags: Vec::new(),
        spent: Spent::default(),
    };
    engine.approved = match opts.external_imports {
        ExternalImports::Approved => true,
        ExternalImports::Denied => false,
        ExternalImports::FromConfig => engine.approval_from_config(),
    };
    let settings = match (opts.read_settings, &opts.settings) {
        (false, _) => SettingsEvaluation::default(),
        (true, Some(given)) => given.clone(),
        (true, None) => super::settings::evaluate(fs, opts, &engine.cwd),
    };
    engine.settings_diagnostics(&settings);
    engine.withhold = Withhold::of(&settings);
    for change in &settings.prompt {
        engine.push_diag(Diagnostic {
            severity: Severity::Warning,
            code: DiagnosticCode::SystemPromptReplaced,
            path: change.path.clone(),
            import: None,
            from: None,
            message: format!(
                "{} = {:?} in {} replaces Claude Code's whole system prompt with the text of {} (the CLI; the memory still follows, but the instructions around it are the agent's)",
                change.setting,
                change.value,
                change.path.display(),
                change.file.display()
            ),
        });
    }
    if let Some(off) = &settings.memory_off {
        engine.push_diag(Diagnostic {
            severity: Severity::Warning,
            code: DiagnosticCode::MemoryDisabled,
            path: off.path.clone(),
            import: None,
            from: None,
            message: format!(
                "{} = {:?} in {} turns memory off: Claude Code loads no memory file at all, the managed one included",
                off.setting,
                off.value,
                off.path.display()
            ),
        });
        return Ok(Memory {
            cwd: engine.cwd,
            external_imports_approved: engine.approved,
            files: Vec::new(),
            diagnostics: engine.diags,
            claude_version: opts.claude_version,
            current_date: opts.current_date.clone().unwrap_or_else(today_utc),
            settings,
        });
    }
    let mut patterns = Vec::new();
    // `claudeMdExcludes` is applied since 2.1.48.
    if opts.claude_version.has(Behaviour::ClaudeMdExcludes) {
        let cwd = engine.cwd.clone();
        engine.take_excludes(&mut patterns, &opts.excludes, &cwd);
        // Each settings file's patterns together, so a budget names the file and what it cut.
        for run in settings.excludes.chunk_by(|a, b| a.source == b.source) {
            let list: Vec<String> = run.iter().map(|e| e.pattern.clone()).collect();
            engine.take_excludes(&mut patterns, &list, &run[0].source);
        }
    }
    engine.excludes = Excludes::new(&patterns, opts.budgets.exclude_work);
    engine.excludes.derived = settings
        .excludes
        .iter()
        .filter_map(|e| Some((e.pattern.clone(), e.written.clone()?)))
        .collect();
    let mut files = engine.run();
    if let Some(policy) = &settings.managed_memory {
        super::managed::insert_section(&mut files, policy);
    }
    engine.close_budgets();
    files.shrink_to_fit();
    tracing::debug!(
        cwd = %engine.cwd.display(),
        files = files.len(),
        diagnostics = engine.diags.len(),
        approved = engine.approved,
        "memory loaded"
    );
    Ok(Memory {
        cwd: engine.cwd,
        external_imports_approved: engine.approved,
        files,
        diagnostics: engine.diags,
        claude_version: opts.claude_version,
        current_date: opts.current_date.clone().unwrap_or_else(today_utc),
        settings,
    })
}

/// The memory file at `path` loaded on its own, as Claude Code release `version` loads a
/// project `CLAUDE.md` whose imports all lie inside its project: the file, then everything it
/// imports (depth first, to Claude Code's depth limit, each file once, an empty one skipped
/// with its imports), each with the body Claude Code keeps (frontmatter, comment blocks and
/// line endings as that release handles them). With the diagnostics of what does not load.
///
/// This is what "a source reaches the agent exactly as Claude Code loads that file alone"
/// means for clawmd's composed documents (docs/delivery.md, "What each source becomes").
pub fn load_alone<F: MemoryFs + ?Sized>(
    fs: &F,
    path: &Path,
    version: super::ClaudeVersion,
) -> (Vec<LoadedFile>, Vec<Diagnostic>) {
    let mut opts = LoadOptions::new("/", None);
    opts.claude_version = version;
    opts.managed_dir = None;
    opts.read_settings = false;
    let mut engine = Engine {
        fs,
        opts: &opts,
        cwd: PathBuf::from("/"),
        approved: true,
        excludes: Excludes::new(&[], 0),
        withhold: Withhold::default(),
        diags: Vec::new(),
        spent: Spent::default(),
    };
    let mut processed = HashSet::new();
    let files = engine
        .load_tree(
            path,
            MemoryKind::Project,
            true,
            Origin::Discovered,
            &mut processed,
            Noise::Report,
        )
        .into_iter()
        .map(|loaded| loaded.file)
        .collect();
    engine.close_budgets();
    (files, engine.diags)
}

/// `claudeMdExcludes`, matched against paths with `/` separators (picomatch, `dot: true`):
/// a file is excluded when any pattern matches it (JS `b$n`).
///
/// Matching costs about (path length × patterns); that work is budgeted
/// ([`Budgets::exclude_work`]): once it is spent, excludes stop applying (and the loader says
/// so), so long paths against many patterns cannot keep clawmd busy.
pub(super) struct Excludes {
    patterns: Vec<super::picomatch::Pattern>,
    /// Each pattern as written, and the settings file it comes from.
    written: Vec<(String, PathBuf)>,
    /// Patterns Claude Code adds for an absolute pattern (its folder's real path in place of
    /// the folder as written), with the pattern as written, for messages.
    derived: Vec<(String, String)>,
    /// The paths excluded so far, each with the first pattern that matched it.
    matched: std::cell::RefCell<Vec<(PathBuf, usize)>>,
    work: std::cell::Cell<u64>,
    budget: u64,
    /// The first path not matched because the work budget was spent.
    tripped: std::cell::RefCell<Option<PathBuf>>,
}

impl Excludes {
    fn new(patterns: &[(String, PathBuf)], budget: u64) -> Self {
        let written: Vec<(String, PathBuf)> = patterns
            .iter()
            .filter(|p| !p.0.is_empty())
            .cloned()
            .collect();
        Excludes {
            patterns: written
                .iter()
                .map(|p| super::picomatch::Pattern::new(&p.0.replace('\\', "/")))
                .collect(),
            written,
            derived: Vec::new(),
            matched: std::cell::RefCell::new(Vec::new()),
            work: std::cell::Cell::new(0),
            budget,
            tripped: std::cell::RefCell::new(None),
        }
    }

    pub(super) fn matches(&self, path: &Path, kind: MemoryKind) -> bool {
        if kind == MemoryKind::Managed || self.patterns.is_empty() {
            return false;
        }
        if self.tripped.borrow().is_some() {
            return false;
        }
        let cost = (path.as_os_str().len() as u64 + 1).saturating_mul(self.patterns.len() as u64);
        let work = self.work.get().saturating_add(cost);
        if work > self.budget {
            *self.tripped.borrow_mut() = Some(path.to_path_buf());
            return false;
        }
        self.work.set(work);
        let text = path.to_string_lossy().replace('\\', "/");
        let Some(index) = self.patterns.iter().position(|p| p.is_match(&text)) else {
            return false;
        };
        let mut matched = self.matched.borrow_mut();
        if !matched.iter().any(|(p, _)| p == path) && matched.len() < 10_000 {
            matched.push((path.to_path_buf(), index));
        }
        true
    }
}

pub(super) struct Engine<'a, F: ?Sized> {
    pub(super) fs: &'a F,
    pub(super) opts: &'a LoadOptions,
    pub(super) cwd: PathBuf,
    pub(super) approved: bool,
    pub(super) excludes: Excludes,
    /// What the settings withhold besides the excludes (issue 38).
    pub(super) withhold: Withhold,
    pub(super) diags: Vec<Diagnostic>,
    pub(super) spent: Spent,
}

/// What settings withhold from the project's memory besides `claudeMdExcludes` (JS `ege`'s
/// `held`): `Read` deny rules, `blockReadsOutsideWorkingDirectories`, and the folders the walk
/// skips (`CLAUDE_CODE_AUTOMOUNT_ROOTS`).
#[derive(Default)]
pub(super) struct Withhold {
    rules: Vec<(super::permissions::Rule, ReadDeny)>,
    skipped: Vec<SkippedDir>,
    outside: Option<OutsideBlocked>,
}

impl Withhold {
    fn of(settings: &SettingsEvaluation) -> Withhold {
        Withhold {
            rules: settings
                .read_denies
                .iter()
                .map(|deny| {
                    let rule = super::permissions::Rule {
                        root: deny.root.clone(),
                        pattern: deny.pattern.clone(),
                    };
                    (rule, deny.clone())
                })
                .collect(),
            skipped: settings.skipped_dirs.clone(),
            outside: settings.outside_blocked.clone(),
        }
    }

    fn is_empty(&self) -> bool {
        self.rules.is_empty() && self.outside.is_none()
    }

    /// The folder skipped by the walk, if `dir` is one.
    pub(super) fn skipped(&self, dir: &Path) -> Option<&SkippedDir> {
        self.skipped.iter().find(|s| s.dir == dir)
    }

    /// Why a project or local file (written `path`, real path `real`) is withheld, if it is.
    /// `walked`: a file found by the walk in a folder above the working directory (Claude
    /// Code counts that folder as a working one for it).
    fn why(&self, path: &Path, real: &Path, cwd: &Path, walked_above: bool) -> Option<String> {
        let spellings = [normalize(path), normalize(real)];
        for (rule, deny) in &self.rules {
            if let Some(hit) = spellings.iter().find(|p| rule.matches(p)) {
                let via = match hit == &spellings[0] {
                    true => String::new(),
                    false => format!(" (its real path {})", hit.display()),
                };
                return Some(format!(
                    "{} is not loaded: the permissions.deny rule {:?} in {} matches it{via}, and Claude Code withholds what a Read rule denies",
                    path.display(),
                    deny.rule,
                    deny.source.display()
                ));
            }
        }
        if let Some(blocked) = &self.outside
            && !walked_above
        {
            let inside = |p: &Path| {
                p == cwd
                    || is_within(p, cwd)
                    || blocked.additional.iter().any(|d| p == d || is_within(p, d))
            };
            if let Some(out) = spellings.iter().find(|p| !inside(p)) {
                return Some(format!(
                    "{} is not loaded: permissions.blockReadsOutsideWorkingDirectories in {} withholds {}, outside the working folders ({}{})",
                    path.display(),
                    blocked.source.display(),
                    out.display(),
                    cwd.display(),
                    blocked
                        .additional
                        .iter()
                        .map(|d| format!(", {}", d.display()))
                        .collect::<String>()
                ));
            }
        }
        None
    }
}

/// What one load has used of its [`Budgets`].
#[derive(Default)]
pub(super) struct Spent {
    bytes: u64,
    files: usize,
    imports: usize,
    pub(super) rules_entries: usize,
    exclude_patterns: usize,
    exclude_bytes: usize,
    /// Diagnostics not recorded because the diagnostics budget was reached.
    diagnostics_dropped: usize,
    /// Per budget that was reached: how many more times it was hit after the first report.
    hits: Vec<(&'static str, usize)>,
}

/// One pending file of an import tree.
struct Frame {
    path: PathBuf,
    depth: usize,
    /// Index of the importer in the tree's chain (for cycle detection).
    parent: Option<usize>,
    import: Option<String>,
}

/// A file loaded by `load_tree`, with what only the engine needs.
pub(super) struct Loaded {
    pub(super) file: LoadedFile,
    pub(super) conditional: bool,
}

/// The file being visited, for diagnostics.
struct Visit<'a> {
    frame: &'a Frame,
    importer: Option<&'a Path>,
    noise: Noise,
}

impl Visit<'_> {
    /// Import problems are reported for imports only: a missing `CLAUDE.md` is normal.
    fn report(&self) -> bool {
        self.noise == Noise::Report && self.frame.import.is_some()
    }

    fn written(&self) -> Option<&str> {
        self.frame.import.as_deref()
    }
}

/// Whether diagnostics are recorded (not for Claude Code's internal probes).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Noise {
    /// Record diagnostics.
    Report,
    /// Do not (Claude Code's own probes, like the AGENTS.md plugin's walk).
    Quiet,
}

impl<F: MemoryFs + ?Sized> Engine<'_, F> {
    /// JS `XZr`: managed, user, the walk from the root down, then AGENTS.md.
    fn run(&mut self) -> Vec<LoadedFile> {
        let mut processed: HashSet<String> = HashSet::new();
        let mut files: Vec<LoadedFile> = Vec::new();
        let approved = self.approved;
        let worktree =
            super::worktree::nested_worktree(self.fs, &self.cwd, self.opts.claude_version);
        for c in discover(self.opts) {
            if let Some(wt) = &worktree
                && c.kind == MemoryKind::Project
                && wt.skips(&walk_dir_of(&c.path))
            {
                continue; // the main checkout's files, seen from a nested worktree
            }
            if matches!(c.kind, MemoryKind::Project | MemoryKind::Local)
                && let Some(skipped) = self.withhold.skipped(&walk_dir_of(&c.path))
            {
                if !c.rules_dir && self.fs.metadata(&c.path).is_ok() {
                    let message = format!(
                        "{} is not loaded: {} in {} lists {}, so Claude Code's walk skips that folder",
                        c.path.display(),
                        skipped.setting,
                        skipped.source.display(),
                        skipped.dir.display()
                    );
                    self.note(
                        Severity::Warning,
                        DiagnosticCode::Withheld,
                        &c.path,
                        None,
                        None,
                        message,
                    );
                }
                continue;
            }
            let include_external = c.kind == MemoryKind::User || approved;
            let loaded = if c.rules_dir {
                self.load_rules(&c.path, c.kind, include_external, &mut processed)
            } else if self.excludes.matches(&c.path, c.kind) {
                Vec::new()
            } else {
                self.load_tree(
                    &c.path,
                    c.kind,
                    include_external,
                    Origin::Discovered,
                    &mut processed,
                    Noise::Report,
                )
                .into_iter()
                .map(|l| l.file)
                .collect()
            };
            files.extend(loaded);
        }
        self.agents_md(&mut files);
        self.size_warnings(&files);
        files
    }

    /// The key of `projects` in `~/.claude.json`: the enclosing git repository's root (a
    /// folder holding `.git`), else the working directory (case 32).
    fn project_root(&self) -> PathBuf {
        walk_dirs(&self.cwd)
            .into_iter()
            .rev()
            .find(|d| self.fs.symlink_metadata(&d.join(".git")).is_ok())
            .unwrap_or_else(|| self.cwd.clone())
    }

    /// The diagnostics of the settings files: files rejected as a whole that say something
    /// about memory, and what clawmd cannot decide.
    fn settings_diagnostics(&mut self, settings: &SettingsEvaluation) {
        for file in &settings.files {
            if let FileState::Rejected { why } = &file.state
                && file.about_memory
            {
                self.push_diag(Diagnostic {
                    severity: Severity::Info,
                    code: DiagnosticCode::SettingsRejected,
                    path: file.path.clone(),
                    import: None,
                    from: None,
                    message: format!(
                        "Claude Code rejects {} as a whole ({why}): none of its settings apply, its claudeMdExcludes and env included",
                        file.path.display()
                    ),
                });
            }
        }
        for undecided in &settings.undecided {
            self.push_diag(Diagnostic {
                severity: Severity::Warning,
                code: DiagnosticCode::SettingsUndecided,
                path: undecided.path.clone(),
                import: None,
                from: None,
                message: format!(
                    "{} in {}: {}; the memory shown is clawmd's best reading, and what composed memory reaches the agent is undecided",
                    undecided.setting,
                    undecided.path.display(),
                    undecided.why
                ),
            });
        }
    }

    /// Add `list` (from `source`) to the exclude patterns, within the exclude budgets.
    fn take_excludes(
        &mut self,
        patterns: &mut Vec<(String, PathBuf)>,
        list: &[String],
        source: &Path,
    ) {
        let b = self.opts.budgets;
        for (i, p) in list.iter().enumerate() {
            if self.spent.exclude_patterns >= b.exclude_patterns
                || self.spent.exclude_bytes + p.len() > b.exclude_bytes
            {
                let what = format!(
                    "claudeMdExcludes holds {} more pattern(s) here beyond {} patterns or {} bytes in all: they are not applied, so files Claude Code would exclude may show",
                    list.len() - i,
                    b.exclude_patterns,
                    b.exclude_bytes
                );
                self.over_budget("exclude patterns", source, what);
                self.excludes_undecided(
                    source,
                    "claudeMdExcludes holds more patterns than clawmd applies",
                );
                return;
            }
            self.spent.exclude_patterns += 1;
            self.spent.exclude_bytes += p.len();
            patterns.push((p.clone(), source.to_path_buf()));
        }
    }

    /// Excludes clawmd did not apply in full: what loads is undecided.
    fn excludes_undecided(&mut self, path: &Path, why: &str) {
        self.push_diag(Diagnostic {
            severity: Severity::Warning,
            code: DiagnosticCode::SettingsUndecided,
            path: path.to_path_buf(),
            import: None,
            from: None,
            message: format!(
                "claudeMdExcludes: {why}, so files Claude Code excludes may show; what composed memory reaches the agent is undecided"
            ),
        });
    }

    /// Report that `budget` was reached at `path` (the first time in full; later hits are
    /// counted and summed up by [`Engine::close_budgets`]).
    pub(super) fn over_budget(&mut self, budget: &'static str, path: &Path, what: String) {
        if let Some(hit) = self.spent.hits.iter_mut().find(|h| h.0 == budget) {
            hit.1 += 1;
            return;
        }
        self.spent.hits.push((budget, 0));
        let msg = format!(
            "{what} (clawmd's {budget} budget): the rendered memory is incomplete here where Claude Code would load more"
        );
        tracing::warn!(path = %path.display(), budget, "loader budget reached");
        self.push_diag(Diagnostic {
            severity: Severity::Warning,
            code: DiagnosticCode::BudgetExceeded,
            path: path.to_path_buf(),
            import: None,
            from: None,
            message: msg,
        });
    }

    /// The summary diagnostics of budgets hit more than once, and of dropped diagnostics.
    fn close_budgets(&mut self) {
        let matched = std::mem::take(&mut *self.excludes.matched.borrow_mut());
        for (path, index) in matched {
            let (pattern, source) = self.excludes.written[index].clone();
            let pattern = match self.excludes.derived.iter().find(|(p, _)| *p == pattern) {
                Some((_, written)) => format!(
                    "{written:?} (which Claude Code also applies as {pattern:?}, its folder's real path)"
                ),
                None => format!("{pattern:?}"),
            };
            self.push_diag(Diagnostic {
                severity: Severity::Info,
                code: DiagnosticCode::Excluded,
                message: format!(
                    "{} is not loaded: claudeMdExcludes pattern {pattern} in {} matches it",
                    path.display(),
                    source.display()
                ),
                path,
                import: None,
                from: None,
            });
        }
        let tripped = self.excludes.tripped.borrow_mut().take();
        if let Some(path) = tripped {
            let what = format!(
                "claudeMdExcludes were matched against {} (path bytes × patterns) and are no longer applied from {} on, so files Claude Code would exclude may show",
                self.opts.budgets.exclude_work,
                path.display()
            );
            self.over_budget("exclude matching", &path, what);
            self.excludes_undecided(
                &path,
                "clawmd stopped matching claudeMdExcludes (its budget is spent)",
            );
        }
        let cwd = self.cwd.clone();
        for (budget, more) in std::mem::take(&mut self.spent.hits) {
            if more > 0 {
                self.push_diag(Diagnostic {
                    severity: Severity::Warning,
                    code: DiagnosticCode::BudgetExceeded,
                    path: cwd.clone(),
                    import: None,
                    from: None,
                    message: format!(
                        "the {budget} budget was reached {more} more time(s): more is missing from the rendered memory"
                    ),
                });
            }
        }
        if self.spent.diagnostics_dropped > 0 {
            let message = format!(
                "{} more diagnostic(s) were not recorded, past clawmd's budget of {} diagnostics",
                self.spent.diagnostics_dropped, self.opts.budgets.diagnostics
            );
            self.push_diag(Diagnostic {
                severity: Severity::Warning,
                code: DiagnosticCode::BudgetExceeded,
                path: cwd,
                import: None,
                from: None,
                message,
            });
        }
    }

    /// Budget reports always get in (there are a handful); they bypass the diagnostics budget.
    fn push_diag(&mut self, diagnostic: Diagnostic) {
        self.diags.push(diagnostic);
    }

    fn approval_from_config(&mut self) -> bool {
        let Some(path) = self.opts.claude_json() else {
            return false;
        };
        let bytes = match self.fs.read_limited(&path, 64 * 1024 * 1024) {
            Ok(ReadOutcome::Bytes(b)) => b,
            _ => return false,
        };
        let project = self.project_root();
        match super::claude_json::external_includes_approved(&bytes, &project.to_string_lossy()) {
            Ok(approved) => approved,
            Err(e) => {
                self.note(
                    Severity::Warning,
                    DiagnosticCode::ConfigUnreadable,
                    &path,
                    None,
                    None,
                    format!(
                        "not valid JSON ({e}); Claude Code treats external imports as not approved"
                    ),
                );
                false
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn note(
        &mut self,
        severity: Severity,
        code: DiagnosticCode,
        path: &Path,
        import: Option<&str>,
        from: Option<&Path>,
        message: String,
    ) {
        tracing::debug!(?code, path = %path.display(), %message, "memory diagnostic");
        if self.diags.len() >= self.opts.budgets.diagnostics {
            self.spent.diagnostics_dropped += 1;
            return;
        }
        self.diags.push(Diagnostic {
            severity,
            code,
            path: path.to_path_buf(),
            import: import.map(str::to_string),
            from: from.map(Path::to_path_buf),
            message,
        });
    }

    /// JS `Zne` as a worklist: `root` and everything it imports, depth first, in order.
    pub(super) fn load_tree(
        &mut self,
        root: &Path,
        kind: MemoryKind,
        include_external: bool,
        origin: Origin,
        processed: &mut HashSet<String>,
        noise: Noise,
    ) -> Vec<Loaded> {
        let mut out: Vec<Loaded> = Vec::new();
        // (key, real key, parent) of every file loaded in this tree, for cycle reports.
        let mut chain: Vec<(String, String, Option<usize>)> = Vec::new();
        let mut stack = vec![Frame {
            path: normalize(root),
            depth: 0,
            parent: None,
            import: None,
        }];
        while let Some(frame) = stack.pop() {
            if frame.import.is_some() {
                self.spent.imports += 1;
                if self.spent.imports > self.opts.budgets.imports {
                    let what = format!(
                        "@{} is past {} imports looked at in all: not followed",
                        frame.import.as_deref().unwrap_or(""),
                        self.opts.budgets.imports
                    );
                    self.over_budget("imports", &frame.path, what);
                    continue;
                }
            }
            let parent_path = frame.parent.map(|i| out[i].file.path.clone());
            let Some((loaded, imports)) = self.load_one(
                &frame,
                kind,
                origin,
                include_external,
                parent_path.as_deref(),
                processed,
                &chain,
                noise,
            ) else {
                continue;
            };
            let node = out.len();
            chain.push((
                key(&loaded.file.path),
                key(&loaded.file.real_path),
                frame.parent,
            ));
            let importer = loaded.file.path.clone();
            out.push(loaded);
            let mut next = Vec::new();
            for (written, target) in imports {
                // JS: `if(!jY(Je)&&!K)continue;` — the import as written leaves the cwd.
                if !include_external && !is_within(&target, &self.cwd) {
                    if noise == Noise::Report {
                        let msg = format!(
                            "@{written} resolves outside {} and external imports are not approved: Claude Code drops it",
                            self.cwd.display()
                        );
                        self.note(
                            Severity::Warning,
                            DiagnosticCode::ImportExternal,
                            &target,
                            Some(&written),
                            Some(&importer),
                            msg,
                        );
                    }
                    continue;
                }
                next.push(Frame {
                    path: target,
                    depth: frame.depth + 1,
                    parent: Some(node),
                    import: Some(written),
                });
            }
            stack.extend(next.into_iter().rev());
        }
        out
    }

    /// JS `Zne` for one file: the checks, the read, the parse.
    #[allow(clippy::too_many_arguments)]
    fn load_one(
        &mut self,
        f: &Frame,
        kind: MemoryKind,
        origin: Origin,
        include_external: bool,
        importer: Option<&Path>,
        processed: &mut HashSet<String>,
        chain: &[(String, String, Option<usize>)],
        noise: Noise,
    ) -> Option<(Loaded, Vec<(String, PathBuf)>)> {
        let v = Visit {
            frame: f,
            importer,
            noise,
        };
        let real = self.admit(&v, kind, include_external, processed, chain)?;
        if self.spent.files >= self.opts.budgets.files {
            let what = format!(
                "{} is past {} files loaded in all: not loaded",
                f.path.display(),
                self.opts.budgets.files
            );
            self.over_budget("files", &f.path, what);
            return None;
        }
        let text = self.read_text(f, importer, v.report(), noise)?;
        let parsed = self.parse_text(&v, &text)?;
        drop(text);
        self.spent.files += 1;
        let base = real.parent().unwrap_or(Path::new("/")).to_path_buf();
        let home = self.opts.home.clone();
        let per_file = self.opts.budgets.imports_per_file;
        if parsed.imports.len() > per_file {
            let what = format!(
                "{} has {} imports: only the first {per_file} are followed",
                f.path.display(),
                parsed.imports.len()
            );
            self.over_budget("imports per file", &f.path, what);
        }
        let imports = parsed
            .imports
            .iter()
            .take(per_file)
            .filter_map(|w| resolve_import(w, &base, home.as_deref()).map(|p| (w.clone(), p)))
            .collect();
        let file = LoadedFile {
            path: f.path.clone(),
            real_path: real,
            kind,
            origin: if f.depth == 0 { origin } else { Origin::Import },
            parent: importer.map(Path::to_path_buf),
            import: f.import.clone(),
            depth: f.depth,
            body: parsed.body,
        };
        let conditional = parsed.paths.is_some();
        Some((Loaded { file, conditional }, imports))
    }

    /// The checks before reading (already loaded, depth, excludes, special and device
    /// files, the external rule); on success the file is marked as loaded and its real path
    /// returned.
    fn admit(
        &mut self,
        v: &Visit<'_>,
        kind: MemoryKind,
        include_external: bool,
        processed: &mut HashSet<String>,
        chain: &[(String, String, Option<usize>)],
    ) -> Option<PathBuf> {
        let f = v.frame;
        let k = key(&f.path);
        if processed.contains(&k) {
            if v.report() {
                self.note_repeat(f, &k, v.importer, chain);
            }
            return None;
        }
        if f.depth >= MAX_IMPORT_DEPTH {
            let msg = format!(
                "is {} imports deep; Claude Code stops at depth {}",
                f.depth,
                MAX_IMPORT_DEPTH - 1
            );
            self.warn(v, DiagnosticCode::ImportTooDeep, msg);
            return None;
        }
        if self.excludes.matches(&f.path, kind) || is_special_path(&f.path.to_string_lossy()) {
            return None;
        }
        let (real, via_link, resolved) =
            self.real_path(&f.path, v.report(), v.written(), v.importer);
        // Since 2.1.333 the links on the way are vetted first (JS `Ao(…, { judged })`): when
        // there are links (the real path differs, or the path is a link that does not resolve
        // here, e.g. into the process's own /proc/self/cwd).
        let vetting = self.vetting(kind, f.depth);
        if vetting.any()
            && (links::worth_walking(&f.path, via_link) || !resolved && self.is_link(&f.path))
            && let Some(why) = links::vet(self.fs, &f.path, vetting)
        {
            self.note_file(
                v,
                Severity::Warning,
                DiagnosticCode::LinkUnchecked,
                why.describe(),
            );
            return None;
        }
        if is_special_path(&real.to_string_lossy()) {
            return None;
        }
        let version = self.opts.claude_version;
        if [&f.path, &real].iter().any(|p| {
            path_policy::is_device_or_process_file(&p.to_string_lossy(), &self.cwd, version)
        }) {
            self.warn(
                v,
                DiagnosticCode::ImportNotAFile,
                "is a device or process file; Claude Code never reads those".into(),
            );
            return None;
        }
        if [&f.path, &real]
            .iter()
            .any(|p| path_policy::is_protected(p, version))
        {
            self.note_file(
                v,
                Severity::Warning,
                DiagnosticCode::FileProtected,
                "is in a folder Claude Code protects (connector-downloads, a session scratchpad): not loaded".into(),
            );
            return None;
        }
        if matches!(kind, MemoryKind::Project | MemoryKind::Local)
            && !self.withhold.is_empty()
            && self.fs.metadata(&real).is_ok()
        {
            let walked_above = f.depth == 0 && walk_dir_of(&f.path) != self.cwd;
            if let Some(why) = self.withhold.why(&f.path, &real, &self.cwd, walked_above) {
                self.note_file(v, Severity::Warning, DiagnosticCode::Withheld, why);
                return None;
            }
        }
        if f.depth > 0
            && !include_external
            && version.has(Behaviour::LinkTargetsExternal)
            && !is_within(&real, &self.cwd)
        {
            let msg = format!(
                "is a link to {}, outside {}; external imports are not approved, so Claude Code drops it",
                real.display(),
                self.cwd.display()
            );
            self.warn(v, DiagnosticCode::ImportExternal, msg);
            return None;
        }
        // Deduplicated by real path too since 2.1.142 (before, a link and its target both load).
        // Before, the real path is still recorded, only not checked: a later file reached by
        // that very path (a rule is reached by its real path) is skipped (case 105: a user rule
        // linked to the target of the user's linked CLAUDE.md, on 2.0.77 and 2.1.128).
        let real_key = via_link.then(|| key(&real));
        if let Some(rk) = real_key
            .as_ref()
            .filter(|rk| version.has(Behaviour::RealPathDedupe) && processed.contains(*rk))
        {
            if v.report() {
                self.note_repeat(f, rk, v.importer, chain);
            }
            return None;
        }
        processed.insert(k);
        processed.extend(real_key);
        Some(real)
    }

    /// Which link checks apply to a file of `kind` at `depth` (JS `judged: h > 0 || !p1n(type)`:
    /// every import, and every file found by name but the managed and the user's).
    pub(super) fn vetting(&self, kind: MemoryKind, depth: usize) -> links::Vetting {
        let judged = depth > 0 || !matches!(kind, MemoryKind::Managed | MemoryKind::User);
        let version = self.opts.claude_version;
        links::Vetting {
            undecodable: judged && version.has(Behaviour::UndecodableLinkTargetsRefused),
            process_links: judged && version.has(Behaviour::ProcessLinksUnchecked),
        }
    }

    /// JS `Pht`: the extension check, then frontmatter, comments and imports.
    fn parse_text(&mut self, v: &Visit<'_>, text: &str) -> Option<content::ParsedFile> {
        let f = v.frame;
        if self
            .opts
            .claude_version
            .has(Behaviour::NonTextImportsSkipped)
            && !paths::is_text_path(&f.path)
        {
            self.warn(
                v,
                DiagnosticCode::ImportNotText,
                "does not have an extension Claude Code reads as text; it is skipped".into(),
            );
            return None;
        }
        let version = self.opts.claude_version;
        let parsed = match content::parse_as_within(text, version, &self.opts.budgets) {
            Ok(p) => p,
            Err(e) => {
                self.note_file(
                    v,
                    Severity::Warning,
                    DiagnosticCode::FileUnparsable,
                    e.to_string(),
                );
                return None;
            }
        };
        if parsed.paths_truncated {
            let b = self.opts.budgets;
            let what = format!(
                "the paths: frontmatter of {} expands past {} globs or {} bytes: only those are kept (the file is conditional either way)",
                f.path.display(),
                b.glob_patterns,
                b.glob_bytes
            );
            self.over_budget("glob patterns", &f.path, what);
        }
        if js_trim(&parsed.body).is_empty() {
            let msg = "is empty once frontmatter and comments are removed: Claude Code skips it and follows none of its imports";
            self.note_file(v, Severity::Info, DiagnosticCode::FileEmpty, msg.into());
            return None;
        }
        if v.noise == Noise::Report {
            self.note_ignored(&f.path, &parsed.ignored);
        }
        Some(parsed)
    }

    /// A warning about an import (only for imports, only when reporting).
    fn warn(&mut self, v: &Visit<'_>, code: DiagnosticCode, what: String) {
        if v.report() {
            let msg = format!("@{} {what}", v.written().unwrap_or(""));
            self.note(
                Severity::Warning,
                code,
                &v.frame.path,
                v.written(),
                v.importer,
                msg,
            );
        }
    }

    /// A note about the file itself (any file, when reporting).
    fn note_file(&mut self, v: &Visit<'_>, severity: Severity, code: DiagnosticCode, msg: String) {
        if v.noise == Noise::Report {
            self.note(severity, code, &v.frame.path, v.written(), v.importer, msg);
        }
    }

    fn note_repeat(
        &mut self,
        f: &Frame,
        k: &str,
        importer: Option<&Path>,
        chain: &[(String, String, Option<usize>)],
    ) {
        let mut cursor = f.parent;
        let mut cycle = false;
        while let Some(i) = cursor {
            let (a, b, p) = &chain[i];
            if a == k || b == k {
                cycle = true;
                break;
            }
            cursor = *p;
        }
        let written = f.import.as_deref();
        let (code, msg) = if cycle {
            (
                DiagnosticCode::ImportCycle,
                format!(
                    "@{} imports a file that is already importing it: the cycle is cut",
                    written.unwrap_or("")
                ),
            )
        } else {
            (
                DiagnosticCode::ImportRepeated,
                format!(
                    "@{} names a file already loaded; it is shown once, where it first loaded",
                    written.unwrap_or("")
                ),
            )
        };
        let severity = if cycle {
            Severity::Warning
        } else {
            Severity::Info
        };
        self.note(severity, code, &f.path, written, importer, msg);
    }

    fn note_ignored(&mut self, path: &Path, ignored: &[content::IgnoredMention]) {
        for m in ignored {
            let (code, place) = match m.reason {
                IgnoredReason::InCode => (DiagnosticCode::ImportInCode, "code"),
                IgnoredReason::InComment => (DiagnosticCode::ImportInComment, "an HTML comment"),
            };
            let msg = format!("@{} is inside {place}, so it is not an import", m.text);
            self.note(Severity::Info, code, path, Some(&m.text), None, msg);
        }
    }

    /// Whether `path` itself is a symbolic link.
    pub(super) fn is_link(&self, path: &Path) -> bool {
        self.fs
            .symlink_metadata(path)
            .is_ok_and(|m| m.kind == FileKind::Symlink)
    }

    /// JS `mo`: the real path (or the path itself when it cannot be resolved), whether it
    /// differs from the path, and whether it was resolved at all.
    fn real_path(
        &mut self,
        path: &Path,
        report: bool,
        written: Option<&str>,
        importer: Option<&Path>,
    ) -> (PathBuf, bool, bool) {
        let alias = path_policy::own_process_alias(path, &self.cwd);
        match self.fs.canonicalize(alias.as_deref().unwrap_or(path)) {
            Ok(r) => {
                let link = r != path;
                (r, link, true)
            }
            Err(e) => {
                if report && is_loop(&e) {
                    let msg = format!(
                        "a symlink loop on the way to {}: nothing is loaded",
                        path.display()
                    );
                    self.note(
                        Severity::Warning,
                        DiagnosticCode::SymlinkLoop,
                        path,
                        written,
                        importer,
                        msg,
                    );
                }
                (path.to_path_buf(), false, false)
            }
        }
    }

    /// JS `Mht`/`tv`: read the file as UTF-8 (invalid bytes become U+FFFD).
    fn read_text(
        &mut self,
        f: &Frame,
        importer: Option<&Path>,
        report: bool,
        noise: Noise,
    ) -> Option<String> {
        let written = f.import.as_deref();
        let left = self.opts.budgets.bytes.saturating_sub(self.spent.bytes);
        let alias = path_policy::own_process_alias(&f.path, &self.cwd);
        let (code, msg) = match self.fs.read_limited(
            alias.as_deref().unwrap_or(&f.path),
            MAX_FILE_BYTES.min(left),
        ) {
            Ok(ReadOutcome::Bytes(b)) => {
                self.spent.bytes += b.len() as u64;
                return Some(decode(&b));
            }
            Ok(ReadOutcome::TooLarge { len }) if len <= MAX_FILE_BYTES => {
                let what = format!(
                    "{} ({len} bytes) is past {} bytes of memory files read in all: not loaded",
                    f.path.display(),
                    self.opts.budgets.bytes
                );
                self.over_budget("bytes", &f.path, what);
                return None;
            }
            Ok(ReadOutcome::TooLarge { len }) => (
                DiagnosticCode::FileTooLarge,
                format!("is {len} bytes, over Claude Code's {MAX_FILE_BYTES}-byte limit: skipped"),
            ),
            Ok(ReadOutcome::NotAFile { kind }) if report => (
                DiagnosticCode::ImportNotAFile,
                format!(
                    "@{} is {}, not a regular file: not loaded",
                    written.unwrap_or(""),
                    kind.describe()
                ),
            ),
            Ok(ReadOutcome::NotAFile { .. }) => return None,
            Err(e) if e.kind() == io::ErrorKind::QuotaExceeded => {
                let what = format!("{} cannot be looked up: {e}", f.path.display());
                self.over_budget("path steps", &f.path, what);
                return None;
            }
            Err(e) if is_loop(&e) => (DiagnosticCode::SymlinkLoop, format!("cannot be read: {e}")),
            Err(e) if is_missing(&e) => {
                if !report {
                    return None;
                }
                (
                    DiagnosticCode::ImportMissing,
                    format!(
                        "@{} does not exist: the line stays as text, nothing is loaded",
                        written.unwrap_or("")
                    ),
                )
            }
            Err(e) => (
                DiagnosticCode::FileUnreadable,
                format!("cannot be read ({e}): Claude Code skips it"),
            ),
        };
        if noise == Noise::Report {
            self.note(Severity::Warning, code, &f.path, written, importer, msg);
        }
        None
    }

    fn size_warnings(&mut self, files: &[LoadedFile]) {
        let mut total = 0;
        for f in files {
            let chars = crate::markdown::js_length(&f.body);
            if chars > WARN_FILE_CHARS {
                let msg = format!(
                    "is {chars} characters, over the {WARN_FILE_CHARS} at which Claude Code warns that large memory files hurt performance"
                );
                self.note(
                    Severity::Warning,
                    DiagnosticCode::FileOversized,
                    &f.path,
                    None,
                    None,
                    msg,
                );
            } else {
                total += chars;
            }
        }
        if total > WARN_TOTAL_CHARS {
            let cwd = self.cwd.clone();
            let msg = format!(
                "memory files total {total} characters, over the {WARN_TOTAL_CHARS} at which Claude Code warns"
            );
            self.note(
                Severity::Warning,
                DiagnosticCode::MemoryOversized,
                &cwd,
                None,
                None,
                msg,
            );
        }
    }
}

/// Today's date in UTC, `YYYY-MM-DD` (what releases before 2.1.268 print; Claude Code uses
/// the local date, which is UTC in the containers clawmd serves).
fn today_utc() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    civil_date((secs / 86_400) as i64)
}

/// Days since 1970-01-01 to `YYYY-MM-DD` (Howard Hinnant's `civil_from_days`).
pub(super) fn civil_date(days: i64) -> String {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// Bytes to text as Claude Code sees them: UTF-8 with U+FFFD for invalid sequences. Line
/// endings are left alone here: whether CR and CRLF become LF depends on the comment
/// stripping ([`content::parse_as`], cases 19, 20, 37–42).
fn decode(bytes: &[u8]) -> String {
    content::lossy_text(bytes).into_owned()
}

fn is_missing(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}
