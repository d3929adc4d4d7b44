//! The loader's public data: options in, loaded files and diagnostics out.
//!
//! Kept apart from the algorithm so that callers (`render`, `check`, the JSON report) can
//! depend on stable shapes; every output type is `Serialize` with kebab-case enums.

use std::path::{Path, PathBuf};

use serde::Serialize;

pub use super::version::ClaudeVersion;

/// The four kinds of memory Claude Code 2.1.328 loads (its auto-memory is not modelled).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MemoryKind {
    /// The organisation's file under the managed directory (`/etc/claude-code`).
    Managed,
    /// `~/.claude/CLAUDE.md`, `~/.claude/rules/*.md` and what they import.
    User,
    /// `CLAUDE.md`, `.claude/CLAUDE.md`, `.claude/rules/*.md`, `AGENTS.md` and their imports.
    Project,
    /// `CLAUDE.local.md` found by the walk, and what it imports.
    Local,
}

impl MemoryKind {
    /// The label Claude Code prints after the path, e.g.
    /// `project instructions, checked into the codebase`.
    pub fn label(self) -> &'static str {
        match self {
            MemoryKind::Managed => "organization-managed policy instructions",
            MemoryKind::User => "user's private global instructions for all projects",
            MemoryKind::Project => "project instructions, checked into the codebase",
            MemoryKind::Local => "user's private project instructions, not checked in",
        }
    }
}

/// How a file came to be loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// Found by name: `CLAUDE.md`, `.claude/CLAUDE.md`, `CLAUDE.local.md`, the user or
    /// managed file.
    Discovered,
    /// A `.claude/rules/**/*.md` file.
    Rule,
    /// An `AGENTS.md` or `.claude/AGENTS.md` loaded because the project has no CLAUDE.md.
    AgentsMd,
    /// Reached through an `@import`.
    Import,
    /// The `claudeMd` text of the managed settings (`managed-settings.json` and its
    /// `managed-settings.d/` drop-ins), which Claude Code shows as `<managed-settings>`
    /// (see [`crate::managed`]).
    ManagedSettings,
}

/// One file in the memory block, in load order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoadedFile {
    /// The path as Claude Code prints it: as discovered or as written in the import
    /// (a symlink's own path, not its target), except rules, shown by their real path.
    pub path: PathBuf,
    /// The path after following symlinks.
    pub real_path: PathBuf,
    /// Which kind (and so which label) Claude Code gives it; an import inherits its
    /// importer's kind.
    pub kind: MemoryKind,
    /// How it was found.
    pub origin: Origin,
    /// The importing file, for imports.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<PathBuf>,
    /// The `@path` text that imported it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub import: Option<String>,
    /// Import depth: 0 for a file found by name, 1 for its imports, and so on (max 4).
    pub depth: usize,
    /// The content as Claude Code keeps it (frontmatter and comment blocks removed, not yet
    /// trimmed: rendering trims it).
    pub body: String,
}

impl LoadedFile {
    /// The label of the newest releases (see [`LoadedFile::label_on`] for a given one).
    pub fn label(&self) -> &'static str {
        self.kind.label()
    }

    /// The label release `version` prints after the path: before 2.1.136 the managed file
    /// (and its rules and imports) carries the user's label (case 31, bisected).
    pub fn label_on(&self, version: ClaudeVersion) -> &'static str {
        match self.kind {
            MemoryKind::Managed if !version.has(super::version::Behaviour::ManagedLabel) => {
                MemoryKind::User.label()
            }
            kind => kind.label(),
        }
    }
}

/// How serious a diagnostic or a `check` finding is (the one severity scale of the crate,
/// from the least serious).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    /// Worth knowing; nothing is lost that the author probably wanted.
    Info,
    /// Something the author wrote will not reach the agent (or will be slow to load).
    Warning,
    /// The agent will not get what the operator intends (`check` exits 1). The loader itself
    /// never reports this; `check` does.
    Error,
}

/// What a diagnostic is about. The JSON spelling is the kebab-case variant name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DiagnosticCode {
    /// An import whose real path is outside the working directory, external imports not
    /// approved: dropped silently by Claude Code.
    ImportExternal,
    /// An import whose target does not exist: the `@path` text stays, nothing is loaded.
    ImportMissing,
    /// An import beyond the depth limit (a file found by name is depth 0; depth 5 is dropped).
    ImportTooDeep,
    /// An import of a file that is importing it (directly or further up the chain).
    ImportCycle,
    /// An import of a file that was already loaded elsewhere: it is shown once, there.
    ImportRepeated,
    /// An import whose extension Claude Code does not read as text (`.png`, `.md,` …).
    ImportNotText,
    /// An import naming a directory or a special file.
    ImportNotAFile,
    /// An `@path` inside code (span, fenced or indented block): not an import.
    ImportInCode,
    /// An `@path` inside an HTML comment: not an import.
    ImportInComment,
    /// A file over 4 MiB: Claude Code skips it.
    FileTooLarge,
    /// A file that could not be read (permissions, I/O error).
    FileUnreadable,
    /// A file that is empty or only whitespace once comments and frontmatter are gone:
    /// not loaded, and its imports are not followed.
    FileEmpty,
    /// A file over 40,000 characters: loaded, but Claude Code warns that large memory
    /// files hurt performance.
    FileOversized,
    /// All memory together over 120,000 characters (Claude Code's total warning level).
    MemoryOversized,
    /// A symlink loop (`ELOOP`) on the way to a file.
    SymlinkLoop,
    /// Markdown nested deeper than Claude Code's parser can follow: it drops the file.
    FileUnparsable,
    /// A rule with `paths:` frontmatter: loaded only when Claude reads a matching file.
    ConditionalRule,
    /// A rules folder or rule reached through a symlink that leaves the working directory,
    /// external imports not approved: skipped.
    RuleExternal,
    /// `AGENTS.md` loaded because no CLAUDE.md exists at or above the working directory.
    AgentsMdFallback,
    /// `~/.claude.json` exists but could not be read as JSON.
    ConfigUnreadable,
    /// A file in a folder Claude Code refuses to read memory from (`connector-downloads`, a
    /// session scratchpad), on the walk or as an import.
    FileProtected,
    /// A file reached through a link Claude Code does not follow to memory (since 2.1.333: a
    /// link whose target's name is not UTF-8, or a process's own link such as
    /// `/proc/self/cwd`): not loaded, approved or not.
    LinkUnchecked,
    /// The working directory's path is not UTF-8: Claude Code does not start, so no memory
    /// is loaded at all.
    CwdNotUtf8,
    /// One of clawmd's [`Budgets`] was reached: what lies beyond it was not loaded (or not
    /// applied), so the rendered memory may be incomplete where Claude Code would load more.
    BudgetExceeded,
    /// A settings file turns memory off (`env.CLAUDE_CODE_DISABLE_CLAUDE_MDS`): Claude Code
    /// loads no memory file at all, the managed one included.
    MemoryDisabled,
    /// A file (or import) not loaded because a `claudeMdExcludes` pattern matches it.
    Excluded,
    /// A settings file Claude Code rejects as a whole: none of its settings apply.
    SettingsRejected,
    /// Something in a settings file that may change what loads and that clawmd cannot
    /// decide (the memory shown is clawmd's best reading).
    SettingsUndecided,
    /// A memory file Claude Code withholds because of a setting: a `permissions.deny` rule
    /// `Read(…)` matching it, `permissions.blockReadsOutsideWorkingDirectories` (an import
    /// outside the working folders), or `env.CLAUDE_CODE_AUTOMOUNT_ROOTS` (its folder skipped).
    Withheld,
    /// A setting replaces Claude Code's own system prompt with a file's text (the CLI's
    /// main-thread `agent`): the memory still loads, but the instructions around it are the
    /// agent's.
    SystemPromptReplaced,
}

/// A finding about the memory: something dropped, skipped or worth a warning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// How serious it is.
    pub severity: Severity,
    /// What it is.
    pub code: DiagnosticCode,
    /// The file concerned (for imports: the resolved target).
    pub path: PathBuf,
    /// For imports: the `@path` text as written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub import: Option<String>,
    /// For imports: the file that contains it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<PathBuf>,
    /// A sentence for people.
    pub message: String,
}

/// Whether imports that resolve outside the working directory are followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExternalImports {
    /// As Claude Code decides: `projects[<cwd>].hasClaudeMdExternalIncludesApproved` in
    /// `~/.claude.json` (read through the same filesystem).
    #[default]
    FromConfig,
    /// Approved (the user clicked "allow" once).
    Approved,
    /// Not approved.
    Denied,
}

/// What to do with `AGENTS.md` (Claude Code's built-in `cc-plugin-agents-md`, option
/// `instructionFiles`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AgentsMd {
    /// `claude-md-or-agents-md` (the default): a project with no CLAUDE.md at or above the
    /// working directory gets its `AGENTS.md` files instead.
    #[default]
    Fallback,
    /// `claude-md-and-agents-md`: loaded beside CLAUDE.md.
    Always,
    /// `claude-md`: never.
    Never,
}

/// Everything that decides what Claude Code loads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadOptions {
    /// The working directory Claude Code starts in (absolute; Claude Code uses its real path).
    pub cwd: PathBuf,
    /// `$HOME`: where `~` points and where `.claude.json` and `.claude/` live. `None` means
    /// no user-level memory.
    pub home: Option<PathBuf>,
    /// `$CLAUDE_CONFIG_DIR`, when set (defaults to `<home>/.claude`).
    pub config_dir: Option<PathBuf>,
    /// The managed-policy directory (`/etc/claude-code` on Linux); `None` to skip it.
    pub managed_dir: Option<PathBuf>,
    /// Whether external imports are approved.
    pub external_imports: ExternalImports,
    /// `AGENTS.md` handling.
    pub agents_md: AgentsMd,
    /// Load `CLAUDE.local.md` (the CLI does; the Agent SDK only with `settingSources`
    /// containing `local`).
    pub load_local: bool,
    /// Load project files: `CLAUDE.md`, `.claude/CLAUDE.md`, rules (SDK: `project`).
    pub load_project: bool,
    /// Load the user's files (SDK: `user`).
    pub load_user: bool,
    /// `claudeMdExcludes` globs: user, project and local files (imports included) whose
    /// path matches are not loaded.
    pub excludes: Vec<String>,
    /// Also read the settings files Claude Code reads (managed, `~/.claude/settings.json`,
    /// `<cwd>/.claude/settings.json`, `settings.local.json`: those of the sources loaded) for
    /// what they do to memory ([`super::settings`]).
    pub read_settings: bool,
    /// The settings already evaluated elsewhere (for example on the group folder, while the
    /// memory is loaded from a snapshot of what compose writes): used instead of reading them
    /// when `read_settings` is set.
    pub settings: Option<SettingsEvaluation>,
    /// The Claude Code release to reproduce (default: the newest the conformance corpus
    /// covers). Every behaviour that changed between releases follows it.
    pub claude_version: ClaudeVersion,
    /// The date releases before 2.1.268 print at the end of the block (`Today's date is
    /// YYYY-MM-DD.`); `None` means today (UTC).
    pub current_date: Option<String>,
    /// Limits on the work one load may do, whatever the files say.
    pub budgets: Budgets,
}

/// Limits on the work of one load, so that files an agent wrote cannot make clawmd use
/// unbounded memory or time. Past a budget the loader stops that piece of work, records a
/// [`DiagnosticCode::BudgetExceeded`] diagnostic naming the file and the limit, and goes on:
/// it never aborts. Every default is far above what a real memory holds (Claude Code itself
/// warns past 120,000 characters in all), so they change nothing for normal input; see
/// docs/loader.md for the figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budgets {
    /// Bytes of memory files read in all (each file is also capped at 4 MiB, as in Claude
    /// Code). Default 16 MiB.
    pub bytes: u64,
    /// Files loaded in all. Default 5,000.
    pub files: usize,
    /// Imports followed from one file. Default 5,000.
    pub imports_per_file: usize,
    /// Imports looked at (followed, missing, dropped…) in all. Default 20,000.
    pub imports: usize,
    /// Folders nested below a `.claude/rules` folder. Default 64.
    pub rules_depth: usize,
    /// Entries of rules folders looked at in all. Default 20,000.
    pub rules_entries: usize,
    /// Glob patterns kept from one file's `paths:` frontmatter, after brace expansion.
    /// Default 10,000.
    pub glob_patterns: usize,
    /// Bytes of glob text kept from one file's `paths:` frontmatter, after brace expansion.
    /// Default 1 MiB.
    pub glob_bytes: usize,
    /// `claudeMdExcludes` patterns applied, from every source together. Default 1,000.
    pub exclude_patterns: usize,
    /// Bytes of `claudeMdExcludes` patterns applied. Default 64 KiB.
    pub exclude_bytes: usize,
    /// Work of matching paths against `claudeMdExcludes`, in path bytes × patterns; past it
    /// the excludes stop applying. Default 50,000,000 (a thousand patterns against 50 KB of
    /// paths; five patterns against 10 MB).
    pub exclude_work: u64,
    /// Diagnostics recorded; the rest are counted in one last diagnostic. Default 10,000.
    pub diagnostics: usize,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            bytes: 16 * 1024 * 1024,
            files: 5_000,
            imports_per_file: 5_000,
            imports: 20_000,
            rules_depth: 64,
            rules_entries: 20_000,
            glob_patterns: 10_000,
            glob_bytes: 1024 * 1024,
            exclude_patterns: 1_000,
            exclude_bytes: 64 * 1024,
            exclude_work: 50_000_000,
            diagnostics: 10_000,
        }
    }
}

impl LoadOptions {
    /// Options for the Claude Code CLI started in `cwd` with `HOME=home`.
    pub fn new(cwd: impl Into<PathBuf>, home: Option<PathBuf>) -> Self {
        LoadOptions {
            cwd: cwd.into(),
            home,
            config_dir: None,
            managed_dir: Some(PathBuf::from("/etc/claude-code")),
            external_imports: ExternalImports::FromConfig,
            agents_md: AgentsMd::Fallback,
            load_local: true,
            load_project: true,
            load_user: true,
            excludes: Vec::new(),
            read_settings: true,
            settings: None,
            claude_version: ClaudeVersion::default(),
            current_date: None,
            budgets: Budgets::default(),
        }
    }

    /// The user configuration directory (`$CLAUDE_CONFIG_DIR` or `~/.claude`).
    pub fn user_dir(&self) -> Option<PathBuf> {
        self.config_dir
            .clone()
            .or_else(|| self.home.as_ref().map(|h| h.join(".claude")))
    }

    /// Where Claude Code keeps its global config (`~/.claude.json`).
    pub fn claude_json(&self) -> Option<PathBuf> {
        match &self.config_dir {
            Some(dir) => Some(dir.join(".claude.json")),
            None => self.home.as_ref().map(|h| h.join(".claude.json")),
        }
    }
}

/// What Claude Code loads: the files in order, and what the loader noticed on the way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Memory {
    /// The working directory it was loaded for.
    pub cwd: PathBuf,
    /// Whether external imports were approved.
    pub external_imports_approved: bool,
    /// The files, in the order of the memory block.
    pub files: Vec<LoadedFile>,
    /// Dropped imports, skipped files, size warnings…
    pub diagnostics: Vec<Diagnostic>,
    /// The release whose rules (and wrapper text) were applied.
    #[serde(skip)]
    pub claude_version: ClaudeVersion,
    /// The date printed by releases before 2.1.268 (`YYYY-MM-DD`).
    #[serde(skip)]
    pub current_date: String,
    /// What the settings files do to memory (empty when there are none, or when they were
    /// not read).
    #[serde(skip_serializing_if = "SettingsEvaluation::is_empty")]
    pub settings: SettingsEvaluation,
}

impl Memory {
    /// The label this memory's release prints for `file` ([`LoadedFile::label_on`]).
    pub fn label_of(&self, file: &LoadedFile) -> &'static str {
        file.label_on(self.claude_version)
    }

    /// Is any diagnostic at least a warning?
    pub fn has_warnings(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|d| d.severity >= Severity::Warning)
    }

    /// The loaded file with this displayed path, if any.
    pub fn file(&self, path: &Path) -> Option<&LoadedFile> {
        self.files.iter().find(|f| f.path == path)
    }
}

/// Errors that stop loading altogether (bad options, unusable working directory).
#[derive(Debug, thiserror::Error)]
pub enum LoaderError {
    /// A path option that must be absolute is not.
    #[error("{what} must be an absolute path, got {}", path.display())]
    RelativePath {
        /// Which option.
        what: &'static str,
        /// The value given.
        path: PathBuf,
    },
    /// The working directory is missing or not a directory.
    #[error("working directory {} is not usable", path.display())]
    Cwd {
        /// The working directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Which settings file, in the order of `env` precedence (a later one wins; managed over all).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SettingsSource {
    /// `~/.claude/settings.json` (`$CLAUDE_CONFIG_DIR/settings.json`).
    User,
    /// `<cwd>/.claude/settings.json`.
    Project,
    /// `<cwd>/.claude/settings.local.json`.
    Local,
    /// `/etc/claude-code/managed-settings.json`, then its drop-ins
    /// (`/etc/claude-code/managed-settings.d/*.json`, in Claude Code's order).
    Managed,
}

/// What Claude Code does with one settings file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum FileState {
    /// Read and applied.
    Applied,
    /// Read and rejected as a whole (none of its settings apply).
    Rejected {
        /// Why.
        why: String,
    },
    /// clawmd cannot tell whether Claude Code applies it.
    Unknown {
        /// Why.
        why: String,
    },
}

/// A settings file that exists in the agent's view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SettingsFile {
    /// Which one.
    pub source: SettingsSource,
    /// Its path, as the agent sees it.
    pub path: PathBuf,
    /// Whether it applies.
    #[serde(flatten)]
    pub state: FileState,
    /// Whether it holds a setting that changes memory (`claudeMdExcludes`, the memory switches,
    /// `Read` deny rules, `blockReadsOutsideWorkingDirectories`, the environment names of
    /// issue 38, `autoMemoryDirectory`).
    pub about_memory: bool,
}

/// Memory turned off by a setting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemoryOff {
    /// The settings file.
    pub path: PathBuf,
    /// `env.CLAUDE_CODE_DISABLE_CLAUDE_MDS`.
    pub setting: String,
    /// The value as written.
    pub value: String,
}

/// A `claudeMdExcludes` pattern Claude Code applies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Exclude {
    /// The pattern matched (backslashes made `/`).
    pub pattern: String,
    /// The settings file it comes from.
    pub source: PathBuf,
    /// For a copy Claude Code adds with its folder's real path: the pattern as written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub written: Option<String>,
}

/// Something in the settings that may change memory and that clawmd cannot decide.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Undecided {
    /// The settings file.
    pub path: PathBuf,
    /// The setting (`claudeMdExcludes`, `env.CLAUDE_CODE_DISABLE_CLAUDE_MDS`, or the file).
    pub setting: String,
    /// Why clawmd cannot decide.
    pub why: String,
}

/// What the settings files of one agent do to its memory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SettingsEvaluation {
    /// The settings files that exist, in [`SettingsSource`] order.
    pub files: Vec<SettingsFile>,
    /// Set when a setting turns memory off (clawmd's best reading when it is undecided).
    pub memory_off: Option<MemoryOff>,
    /// The exclude patterns that apply (best reading when undecided).
    pub excludes: Vec<Exclude>,
    /// What clawmd cannot decide. Empty when the evaluation is exact.
    pub undecided: Vec<Undecided>,
    /// The managed settings' `claudeMd` text, on a release that shows it
    /// ([`crate::managed`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub managed_memory: Option<ManagedMemory>,
    /// `Read` deny rules that withhold memory files (issue 38; best reading when undecided).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub read_denies: Vec<ReadDeny>,
    /// Folders the walk skips (`env.CLAUDE_CODE_AUTOMOUNT_ROOTS` in the user's settings).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped_dirs: Vec<SkippedDir>,
    /// `permissions.blockReadsOutsideWorkingDirectories`: files the project's memory imports
    /// from outside the working folders are withheld.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outside_blocked: Option<OutsideBlocked>,
    /// Settings that replace Claude Code's own system prompt (the CLI's main-thread `agent`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub prompt: Vec<PromptChange>,
}

/// The `claudeMd` text of the managed settings, which Claude Code shows after the managed
/// `CLAUDE.md` (and its imports), before the managed rules, as
/// `Contents of <managed-settings> (organization-managed policy instructions)`: as written,
/// no import followed, no comment stripped (cases 81 to 84).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ManagedMemory {
    /// The text.
    pub text: String,
    /// The managed settings file whose value won (the last one, in Claude Code's merge
    /// order, that sets it).
    pub source: PathBuf,
}

/// A `permissions.deny` rule `Read(…)` (or `Read`) of a settings file, as Claude Code applies
/// it to memory: a project or local memory file, or one they import, that it matches (by the
/// path written or the real path) is withheld.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReadDeny {
    /// The rule as written.
    pub rule: String,
    /// The settings file.
    pub source: PathBuf,
    /// The folder its pattern is relative to (`None`: bare `Read`, every file).
    pub root: Option<PathBuf>,
    /// The gitignore pattern, relative to `root`.
    pub pattern: String,
}

/// A folder Claude Code's walk skips, and the setting that says so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkippedDir {
    /// The folder (absolute, as listed).
    pub dir: PathBuf,
    /// The settings file.
    pub source: PathBuf,
    /// `env.CLAUDE_CODE_AUTOMOUNT_ROOTS`.
    pub setting: String,
}

/// `permissions.blockReadsOutsideWorkingDirectories` set to `true` (in any settings file: a
/// `false` elsewhere does not undo it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutsideBlocked {
    /// The settings file that sets it.
    pub source: PathBuf,
    /// The working folders besides the working directory (`permissions.additionalDirectories`
    /// of every settings file applied).
    pub additional: Vec<PathBuf>,
}

/// A setting that replaces Claude Code's system prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PromptChange {
    /// The settings file.
    pub path: PathBuf,
    /// The setting (`agent`).
    pub setting: String,
    /// Its value.
    pub value: String,
    /// The file whose text becomes the system prompt.
    pub file: PathBuf,
}

impl SettingsEvaluation {
    /// True when no settings file exists (or none was read).
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
            && self.undecided.is_empty()
            && self.memory_off.is_none()
            && self.managed_memory.is_none()
            && self.read_denies.is_empty()
            && self.skipped_dirs.is_empty()
            && self.outside_blocked.is_none()
            && self.prompt.is_empty()
    }

    /// True when nothing is undecided.
    pub fn is_exact(&self) -> bool {
        self.undecided.is_empty()
    }
}
