//! Claude Code's settings files, read as a release reads them, for what they do to memory.
//!
//! An agent can write `.claude/settings.json`, `.claude/settings.local.json` and, where the
//! runner mounts one, `~/.claude/settings.json`. Two settings there change what Claude Code
//! loads as memory: `env.CLAUDE_CODE_DISABLE_CLAUDE_MDS` (any value the release reads as true
//! turns every memory file off, the managed one too) and `claudeMdExcludes` (globs that drop
//! user, project and local files). [`evaluate`] reads the files the way the measured releases
//! do (see [`MEASURED`] and docs/loader.md, "Settings"), says which apply, and says where it
//! cannot decide — never guessing in the verdict's favour:
//!
//! * the text: at most 2 MiB of a regular file, UTF-16LE after an `FF FE` mark, else UTF-8;
//!   CRLF made LF; blank means `{}`; one leading BOM dropped; then `JSON.parse`
//!   ([`super::js_json`]);
//! * the file as a whole: Claude Code validates every key it knows and rejects the *whole
//!   file* when one is wrong (`"permissions": 5` makes its `claudeMdExcludes` void). clawmd
//!   knows the shapes of `claudeMdExcludes`, `env`, `$schema` and the outer shape of
//!   `permissions`; a file holding any other key (or a `permissions` object, whose rules are
//!   validated further) may or may not be accepted, so what it says about memory is
//!   *undecided*;
//! * `env`: the last of user, project, local wins, managed settings over all (measured), and a
//!   value is read as JavaScript's `String(value)`, trimmed and lower-cased, true for `1`,
//!   `true`, `yes`, `on` (the release's own function);
//! * `claudeMdExcludes`: every source's patterns apply; for an absolute pattern Claude Code
//!   also adds a copy whose folder (the part before the first `*?{[`, up to its last `/`) is
//!   replaced by that folder's real path in the container (`/workspace/agent/./CLAUDE.md`,
//!   `/workspace/nothere/../agent/CLAUDE.md`, `/proc/self/cwd/CLAUDE.md`, a link `lnk -> .`
//!   all exclude `/workspace/agent/CLAUDE.md`); a pattern clawmd cannot match exactly as
//!   picomatch does is undecided.

use std::io;
use std::path::{Path, PathBuf};

use super::fs::{FileKind, MemoryFs, ReadOutcome};
use super::js_json::{self, Js, ParseError};
use super::markdown::js_trim;
use super::model::LoadOptions;
pub use super::model::{
    Exclude, FileState, MemoryOff, OutsideBlocked, PromptChange, ReadDeny, SettingsEvaluation,
    SettingsFile, SettingsSource, SkippedDir, Undecided,
};
use super::paths::normalize;
use super::permissions::{self, Parsed, Roots};
use super::picomatch;
use super::version::{Behaviour, CORPUS, MEASURED};

/// The largest settings file Claude Code reads (JS `Sm`); a larger one is not applied.
pub const MAX_SETTINGS_BYTES: u64 = 2 * 1024 * 1024;

/// The environment variable that turns memory off.
pub const DISABLE_MEMORY: &str = "CLAUDE_CODE_DISABLE_CLAUDE_MDS";

/// `--bare` and `--safe-mode` as environment variables: from the user's settings (only) they
/// turn every memory file off too (2.1.328–2.1.333, `tests/fixtures/agent-settings-probe/`).
pub const USER_MEMORY_SWITCHES: [&str; 2] = ["CLAUDE_CODE_SIMPLE", "CLAUDE_CODE_SAFE_MODE"];

/// The environment variable listing folders Claude Code takes as automount roots: its walk
/// skips each, so the memory files there do not load (read from the user's settings only).
pub const AUTOMOUNT_ROOTS: &str = "CLAUDE_CODE_AUTOMOUNT_ROOTS";

/// Environment settings that add or relabel memory in ways clawmd does not render (issue 38):
/// each is undecided where it takes effect. `(name, user settings only)`.
pub const MEMORY_CHANGING_ENV: [(&str, bool); 3] = [
    // Its text loads as an auto-memory section no file holds.
    ("CLAUDE_COWORK_MEMORY_INDEX_CONTENT", false),
    // A folder's MEMORY.md (or an index of its files) loads as auto-memory.
    ("CLAUDE_COWORK_MEMORY_PATH_OVERRIDE", true),
    // The workspace's files relabelled as the user's own (`""` or a folder).
    ("CLAUDE_CONFIG_DIR", true),
];

/// Every environment name whose value in a settings file this module reads.
fn env_of_interest(name: &str) -> bool {
    name == DISABLE_MEMORY
        || name == AUTOMOUNT_ROOTS
        || USER_MEMORY_SWITCHES.contains(&name)
        || MEMORY_CHANGING_ENV.iter().any(|(n, _)| *n == name)
}

/// Reads the settings files of the agent started with `opts` in `cwd` (its real path) through
/// `fs`. Reads only those files (at most [`MAX_SETTINGS_BYTES`] each, through
/// [`MemoryFs::read_limited`], so never a FIFO or device), and resolves the folders of
/// absolute exclude patterns through `fs`.
pub fn evaluate<F: MemoryFs + ?Sized>(
    fs: &F,
    opts: &LoadOptions,
    cwd: &Path,
) -> SettingsEvaluation {
    let mut places = Vec::new();
    if opts.load_user
        && let Some(user) = opts.user_dir()
    {
        places.push((SettingsSource::User, user.join("settings.json")));
    }
    if opts.load_project {
        places.push((SettingsSource::Project, cwd.join(".claude/settings.json")));
    }
    if opts.load_local {
        places.push((
            SettingsSource::Local,
            cwd.join(".claude/settings.local.json"),
        ));
    }
    let mut out = SettingsEvaluation::default();
    if let Some(managed) = &opts.managed_dir {
        places.push((
            SettingsSource::Managed,
            managed.join("managed-settings.json"),
        ));
        // Its drop-ins, merged over it in their order (crate::managed).
        let drop_ins =
            super::managed::drop_in_files(fs, managed, opts.claude_version, &mut out.undecided);
        places.extend(drop_ins.into_iter().map(|p| (SettingsSource::Managed, p)));
    }
    let measured = MEASURED.contains(&opts.claude_version);
    let mut read = Vec::new();
    for (source, path) in places {
        // A managed file with a wrong key loses that key only, on the releases that read
        // managed files so (crate::managed).
        let one_by_one = source == SettingsSource::Managed
            && opts.claude_version.has(Behaviour::ManagedKeysOneByOne);
        let Some(mut file) = read_file(fs, &path, one_by_one) else {
            continue;
        };
        if source != SettingsSource::Managed {
            // `claudeMd` and a policy helper are honoured from managed settings only (case 85).
            file.claude_md = None;
            file.unmodelled.clear();
        }
        // The managed folder belongs to the image or to the runner's binds, never to the agent:
        // one outside the view is taken as absent.
        if source == SettingsSource::Managed && file.opaque && !fs.within_view(&path) {
            continue;
        }
        if let FileState::Unknown { why } = &file.state
            && file.about_memory()
        {
            for setting in file.settings_named() {
                out.undecided.push(Undecided {
                    path: path.clone(),
                    setting,
                    why: format!(
                        "clawmd cannot tell whether Claude Code accepts this file as a whole: {why}"
                    ),
                });
            }
        }
        if source == SettingsSource::Managed && !matches!(file.state, FileState::Rejected { .. }) {
            for (setting, why) in &file.unmodelled {
                out.undecided.push(Undecided {
                    path: path.clone(),
                    setting: setting.clone(),
                    why: (*why).to_owned(),
                });
            }
        }
        let pin = source == SettingsSource::Managed && file.only_pins_memory_on();
        // The managed files' memory settings (`claudeMd`, drop-ins, `env`, excludes) are
        // recorded on every corpus release (crate::managed, cases 81 to 99).
        let recorded = source == SettingsSource::Managed && CORPUS.contains(&opts.claude_version);
        if !measured
            && !pin
            && !recorded
            && file.about_memory()
            && !matches!(file.state, FileState::Rejected { .. })
        {
            out.undecided.push(Undecided {
                path: path.clone(),
                setting: file.settings_named().join(", "),
                why: format!(
                    "Claude Code {}'s handling of settings files was not measured (clawmd reads them as {} do)",
                    opts.claude_version,
                    MEASURED.map(|v| v.to_string()).join(", ")
                ),
            });
        }
        out.files.push(SettingsFile {
            source,
            path: path.clone(),
            state: file.state.clone(),
            about_memory: file.about_memory(),
        });
        read.push((source, path, file));
    }
    memory_switch(&read, &mut out);
    if out.memory_off.is_none() {
        user_switches(&read, &mut out);
    }
    excludes(fs, &read, cwd, &mut out);
    out.managed_memory = super::managed::policy_memory(
        read.iter()
            .filter(|(source, _, file)| {
                *source == SettingsSource::Managed
                    && !matches!(file.state, FileState::Rejected { .. })
            })
            .map(|(_, path, file)| (path.as_path(), file.claude_md.clone())),
        opts.claude_version,
    );
    if opts.claude_version.has(Behaviour::MemoryReadsChecked) {
        read_denies(opts, cwd, &read, &mut out);
        outside_blocked(&read, &mut out);
    }
    if opts.claude_version.has(Behaviour::AutomountRootsSkipped) {
        automount_roots(&read, &mut out);
    }
    memory_changing(&read, &mut out);
    prompt(fs, opts, cwd, &read, &mut out);
    out
}

/// The files that apply (or may: undecided), newest source first (managed, local, project,
/// user), with `user_only` keeping the user's and the managed settings only.
fn applying(
    read: &[(SettingsSource, PathBuf, Read)],
    user_only: bool,
) -> impl Iterator<Item = &(SettingsSource, PathBuf, Read)> {
    read.iter().rev().filter(move |(source, _, file)| {
        !matches!(file.state, FileState::Rejected { .. })
            && (!user_only || matches!(source, SettingsSource::User | SettingsSource::Managed))
    })
}

/// The value Claude Code takes for the environment name `name`, and the file it comes from.
fn env_value<'a>(
    read: &'a [(SettingsSource, PathBuf, Read)],
    name: &str,
    user_only: bool,
) -> Option<(SettingsSource, &'a PathBuf, &'a Js)> {
    applying(read, user_only)
        .find_map(|(source, path, file)| Some((*source, path, file.env(name)?)))
}

/// `CLAUDE_CODE_SIMPLE` and `CLAUDE_CODE_SAFE_MODE` from the user's settings: every memory
/// file off, the managed one included (a managed value wins; clawmd's managed delivery pins
/// both to `""`).
fn user_switches(read: &[(SettingsSource, PathBuf, Read)], out: &mut SettingsEvaluation) {
    for name in USER_MEMORY_SWITCHES {
        let Some((_, path, value)) = env_value(read, name, true) else {
            continue;
        };
        let setting = format!("env.{name}");
        match coerce(value, 0) {
            Ok((shown, true)) => {
                out.memory_off = Some(MemoryOff {
                    path: path.clone(),
                    setting,
                    value: shown,
                });
                return;
            }
            Ok(_) => {}
            Err(why) => out.undecided.push(Undecided {
                path: path.clone(),
                setting,
                why,
            }),
        }
    }
}

/// `permissions.deny` `Read` rules: every applying file's (only the managed file's with the
/// managed `allowManagedPermissionRulesOnly: true`).
fn read_denies(
    opts: &LoadOptions,
    cwd: &Path,
    read: &[(SettingsSource, PathBuf, Read)],
    out: &mut SettingsEvaluation,
) {
    let managed_only = read.iter().any(|(source, _, file)| {
        *source == SettingsSource::Managed
            && !matches!(file.state, FileState::Rejected { .. })
            && matches!(
                file.key("allowManagedPermissionRulesOnly"),
                Some(Js::Bool(true))
            )
    });
    let user_dir = opts.user_dir();
    for (source, path, file) in read {
        if matches!(file.state, FileState::Rejected { .. })
            || managed_only && *source != SettingsSource::Managed
        {
            continue;
        }
        let settings_root = match source {
            SettingsSource::Project | SettingsSource::Local => Some(cwd),
            SettingsSource::User => user_dir.as_deref(),
            SettingsSource::Managed => None,
        };
        let roots = Roots {
            cwd,
            home: opts.home.as_deref(),
            settings_root,
        };
        for rule in file.read_rules() {
            match permissions::parse(rule, &roots) {
                Parsed::Other => {}
                Parsed::Exact(parsed) => out.read_denies.push(ReadDeny {
                    rule: rule.clone(),
                    source: path.clone(),
                    root: parsed.root,
                    pattern: parsed.pattern,
                }),
                Parsed::Inexact(parsed, why) => {
                    out.read_denies.push(ReadDeny {
                        rule: rule.clone(),
                        source: path.clone(),
                        root: parsed.root,
                        pattern: parsed.pattern,
                    });
                    out.undecided.push(Undecided {
                        path: path.clone(),
                        setting: format!("permissions.deny {rule:?}"),
                        why,
                    });
                }
                Parsed::Undecided(why) => out.undecided.push(Undecided {
                    path: path.clone(),
                    setting: format!("permissions.deny {rule:?}"),
                    why,
                }),
            }
        }
    }
}

/// `CLAUDE_CODE_AUTOMOUNT_ROOTS` (user settings; a managed value wins): a `:`-separated list;
/// each absolute entry, resolved, is a folder Claude Code's memory walk skips.
fn automount_roots(read: &[(SettingsSource, PathBuf, Read)], out: &mut SettingsEvaluation) {
    let Some((_, path, value)) = env_value(read, AUTOMOUNT_ROOTS, true) else {
        return;
    };
    let setting = format!("env.{AUTOMOUNT_ROOTS}");
    let Js::Str(units) = value else {
        out.undecided.push(Undecided {
            path: path.clone(),
            setting,
            why: format!("it is {}, not a string", value.kind()),
        });
        return;
    };
    let text = String::from_utf16_lossy(units);
    for entry in text.split(':').filter(|e| e.starts_with('/')) {
        out.skipped_dirs.push(SkippedDir {
            dir: normalize(Path::new(entry)),
            source: path.clone(),
            setting: setting.clone(),
        });
    }
}

/// `permissions.blockReadsOutsideWorkingDirectories: true` in any applying file (a `false`
/// elsewhere does not undo it, nor does `allowManagedPermissionRulesOnly`: measured), with
/// every file's `additionalDirectories`.
fn outside_blocked(read: &[(SettingsSource, PathBuf, Read)], out: &mut SettingsEvaluation) {
    let Some((_, path, _)) = applying(read, false)
        .find(|(_, _, file)| matches!(file.block_outside, Some(Js::Bool(true))))
    else {
        return;
    };
    let additional = applying(read, false)
        .flat_map(|(_, _, file)| file.additional.iter())
        .filter(|dir| dir.starts_with('/'))
        .map(|dir| normalize(Path::new(dir)))
        .collect();
    out.outside_blocked = Some(OutsideBlocked {
        source: path.clone(),
        additional,
    });
}

/// Settings that add or relabel memory in ways clawmd does not render: undecided where they
/// take effect (a managed value of the same name wins: clawmd's managed delivery pins them).
fn memory_changing(read: &[(SettingsSource, PathBuf, Read)], out: &mut SettingsEvaluation) {
    for (name, user_only) in MEMORY_CHANGING_ENV {
        let Some((source, path, value)) = env_value(read, name, user_only) else {
            continue;
        };
        let empty = matches!(value, Js::Str(text) if text.is_empty());
        // `CLAUDE_CONFIG_DIR=""` relabels too; the others do nothing when empty.
        if source == SettingsSource::Managed || empty && name != "CLAUDE_CONFIG_DIR" {
            continue;
        }
        out.undecided.push(Undecided {
            path: path.clone(),
            setting: format!("env.{name}"),
            why: "it adds memory no composed file holds, or relabels the composed files (measured), which clawmd does not render".to_owned(),
        });
    }
    let managed_off = read.iter().any(|(source, _, file)| {
        *source == SettingsSource::Managed
            && !matches!(file.state, FileState::Rejected { .. })
            && file.key("autoMemoryDirectory").is_some()
    });
    if managed_off {
        return;
    }
    if let Some((_, path, _)) = applying(read, false).find(
        |(_, _, file)| matches!(file.key("autoMemoryDirectory"), Some(Js::Str(t)) if !t.is_empty()),
    ) {
        out.undecided.push(Undecided {
            path: path.clone(),
            setting: "autoMemoryDirectory".to_owned(),
            why: "the folder's MEMORY.md, or an index Claude Code builds of its files, loads as auto-memory (measured), which clawmd does not render".to_owned(),
        });
    }
}

/// The CLI's main-thread `agent` (local over project over user; a managed `agent` wins, and a
/// managed `strictPluginOnlyCustomization` of `true` or naming `agents` keeps the agent's own
/// agent files out): when it names an agent file in `.claude/agents/` or `~/.claude/agents/`,
/// that file's text replaces Claude Code's whole system prompt (measured on 2.1.128, 2.1.328
/// and 2.1.333; a name no file has changes nothing). A file named like a built-in agent
/// (`claude.md`) overrides it: the managed `"agent": "claude"` selects the agent's own
/// `claude.md` (measured), while `"agent": ""` selects nothing.
fn prompt<F: MemoryFs + ?Sized>(
    fs: &F,
    opts: &LoadOptions,
    cwd: &Path,
    read: &[(SettingsSource, PathBuf, Read)],
    out: &mut SettingsEvaluation,
) {
    let managed = read.iter().find(|(source, _, file)| {
        *source == SettingsSource::Managed && !matches!(file.state, FileState::Rejected { .. })
    });
    let mut chosen = None;
    if let Some((_, path, file)) = managed {
        let strict = match file.key("strictPluginOnlyCustomization") {
            Some(Js::Bool(true)) => true,
            Some(Js::Arr(items)) => items
                .iter()
                .any(|i| matches!(i, Js::Str(u) if String::from_utf16_lossy(u) == "agents")),
            _ => false,
        };
        if strict {
            return;
        }
        if let Some(Js::Str(units)) = file.key("agent") {
            chosen = Some((path, String::from_utf16_lossy(units)));
        }
    }
    let chosen = chosen.or_else(|| {
        applying(read, false).find_map(|(source, path, file)| match (source, file.key("agent")?) {
            (SettingsSource::Managed, _) => None,
            (_, Js::Str(units)) => Some((path, String::from_utf16_lossy(units))),
            _ => None,
        })
    });
    let Some((path, name)) = chosen else {
        return;
    };
    if name.is_empty() {
        return;
    }
    let mut folders = vec![cwd.join(".claude/agents")];
    folders.extend(opts.user_dir().map(|dir| dir.join("agents")));
    // Claude Code names an agent by its frontmatter; a file named after it is the usual case.
    // Any other file in an agents folder may declare the name: counted as the agent's too.
    let file = folders
        .iter()
        .map(|dir| dir.join(format!("{name}.md")))
        .find(|file| fs.metadata(file).is_ok())
        .or_else(|| {
            folders
                .iter()
                .find(|dir| fs.read_dir(dir).is_ok_and(|entries| !entries.is_empty()))
                .cloned()
        });
    if let Some(file) = file {
        out.prompt.push(PromptChange {
            path: path.clone(),
            setting: "agent".to_owned(),
            value: name,
            file,
        });
    }
}

/// One settings file as read.
struct Read {
    state: FileState,
    /// `claudeMdExcludes` when it is a list of strings (whatever the file's state).
    excludes: Option<Vec<Vec<u16>>>,
    /// `env.CLAUDE_CODE_DISABLE_CLAUDE_MDS` when `env` is an object holding it.
    switch: Option<Js>,
    /// The other environment names of interest ([`env_of_interest`]) the file's `env` sets.
    env: Vec<(String, Js)>,
    /// `permissions.deny`'s strings.
    deny: Vec<String>,
    /// `permissions.blockReadsOutsideWorkingDirectories`.
    block_outside: Option<Js>,
    /// `permissions.additionalDirectories`' strings.
    additional: Vec<String>,
    /// Top-level keys that change the system prompt or who decides it: `agent`,
    /// `allowManagedPermissionRulesOnly`, `strictPluginOnlyCustomization`, `autoMemoryDirectory`.
    keys: Vec<(String, Js)>,
    /// clawmd could not see what the file holds.
    opaque: bool,
    /// `claudeMd` when it is a string (read by Claude Code from managed files only).
    claude_md: Option<String>,
    /// What it sets that may change memory and that clawmd does not model, with why (read
    /// from managed files only, crate::managed).
    unmodelled: Vec<(String, &'static str)>,
}

impl Read {
    /// An applied file that says nothing.
    fn empty() -> Read {
        Read {
            state: FileState::Applied,
            excludes: None,
            switch: None,
            env: Vec::new(),
            deny: Vec::new(),
            block_outside: None,
            additional: Vec::new(),
            keys: Vec::new(),
            opaque: false,
            claude_md: None,
            unmodelled: Vec::new(),
        }
    }

    fn about_memory(&self) -> bool {
        !self.settings_named().is_empty()
    }

    fn key(&self, name: &str) -> Option<&Js> {
        self.keys.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    fn env(&self, name: &str) -> Option<&Js> {
        self.env.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    /// The `permissions.deny` entries that are (or may be) `Read` rules.
    fn read_rules(&self) -> impl Iterator<Item = &String> {
        self.deny
            .iter()
            .filter(|rule| rule.trim_start().starts_with("Read"))
    }

    /// Whether all the file says about memory is `env.CLAUDE_CODE_DISABLE_CLAUDE_MDS = ""` (the
    /// pin of clawmd's managed delivery): an empty string is false in every reading of the
    /// variable (JavaScript's truthiness, the release's truth test), so it can keep memory on
    /// but never turn it off, on any release (measured from 2.0.77 to 2.1.332,
    /// docs/delivery.md).
    fn only_pins_memory_on(&self) -> bool {
        let empty = |value: &Js| matches!(value, Js::Str(text) if text.is_empty());
        !self.opaque
            && self.claude_md.is_none()
            && self.unmodelled.is_empty()
            && self.switch.as_ref().is_some_and(empty)
            && self.env.iter().all(|(_, value)| empty(value))
            && !self
                .excludes
                .as_ref()
                .is_some_and(|list| list.iter().any(|p| !p.is_empty()))
            && self.read_rules().next().is_none()
            && !matches!(self.block_outside, Some(Js::Bool(true)))
            && self.key("autoMemoryDirectory").is_none()
    }

    fn settings_named(&self) -> Vec<String> {
        let mut named = Vec::new();
        if self.opaque {
            named.push("the whole file".to_owned());
        }
        if self
            .excludes
            .as_ref()
            .is_some_and(|list| list.iter().any(|p| !p.is_empty()))
        {
            named.push("claudeMdExcludes".to_owned());
        }
        if self.switch.is_some() {
            named.push(format!("env.{DISABLE_MEMORY}"));
        }
        if self.claude_md.is_some() {
            named.push("claudeMd".to_owned());
        }
        named.extend(self.unmodelled.iter().map(|(setting, _)| setting.clone()));
        for (name, _) in &self.env {
            named.push(format!("env.{name}"));
        }
        if self.read_rules().next().is_some() {
            named.push("permissions.deny (Read rules)".to_owned());
        }
        if matches!(self.block_outside, Some(Js::Bool(true))) {
            named.push("permissions.blockReadsOutsideWorkingDirectories".to_owned());
        }
        // `agent` changes the prompt, not the memory: reported on its own ([`prompt`]).
        if self.key("autoMemoryDirectory").is_some() {
            named.push("autoMemoryDirectory".to_owned());
        }
        named
    }
}

fn rejected(why: impl Into<String>) -> Read {
    Read {
        state: FileState::Rejected { why: why.into() },
        ..Read::empty()
    }
}

/// A file clawmd cannot see into: it may say anything.
fn opaque(why: impl Into<String>) -> Read {
    Read {
        state: FileState::Unknown { why: why.into() },
        opaque: true,
        ..Read::empty()
    }
}

/// `None` when there is no file there. `one_by_one`: a key of the wrong type is dropped
/// alone (managed files on the releases that read them so), not the whole file.
fn read_file<F: MemoryFs + ?Sized>(fs: &F, path: &Path, one_by_one: bool) -> Option<Read> {
    let bytes = match fs.read_limited(path, MAX_SETTINGS_BYTES) {
        Ok(ReadOutcome::Bytes(bytes)) => bytes,
        Ok(ReadOutcome::TooLarge { len }) => {
            return Some(rejected(format!(
                "it is {len} bytes, over Claude Code's limit of {MAX_SETTINGS_BYTES}"
            )));
        }
        Ok(ReadOutcome::NotAFile { kind }) => {
            return Some(rejected(format!(
                "it is {}, not a regular file",
                kind_name(kind)
            )));
        }
        Err(err) => return missing_or_unreadable(fs, path, &err),
    };
    Some(parse_file(&bytes, one_by_one))
}

fn kind_name(kind: FileKind) -> &'static str {
    match kind {
        FileKind::Dir => "a directory",
        FileKind::Symlink => "a symlink",
        FileKind::File => "a file",
        FileKind::Other => "a special file",
    }
}

/// A read that failed: no file (`None`), a file Claude Code fails on too, or one clawmd
/// cannot see (a link leaving the part of the container it models, a permission the
/// container may not share).
fn missing_or_unreadable<F: MemoryFs + ?Sized>(
    fs: &F,
    path: &Path,
    err: &io::Error,
) -> Option<Read> {
    match err.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => match covered(fs, path) {
            true => None,
            false => Some(opaque(
                "it leads out of the part of the container clawmd sees (a link to another mount)",
            )),
        },
        _ if super::fs::is_loop(err) => Some(rejected("a symlink loop")),
        _ => Some(opaque(format!("clawmd cannot read it: {err}"))),
    }
}

/// The file's bytes as Claude Code decodes and parses them.
fn parse_file(bytes: &[u8], one_by_one: bool) -> Read {
    let text = decode(bytes);
    let as_string = String::from_utf16_lossy(&text);
    if js_trim(&as_string).is_empty() && !text.iter().any(|u| (0xd800..0xe000).contains(u)) {
        // Blank: `{}`.
        return Read::empty();
    }
    let body = match text.first() {
        Some(0xfeff) => &text[1..],
        _ => &text[..],
    };
    let value = match js_json::parse(body) {
        Ok(value) => value,
        Err(ParseError::Invalid) => return rejected("it is not valid JSON"),
        Err(ParseError::TooDeep) => return opaque("it nests too deep for clawmd to read"),
    };
    let state = match one_by_one {
        true => super::managed::validate_one_by_one(&value),
        false => validate(&value),
    };
    let excludes = match value.get("claudeMdExcludes") {
        Some(Js::Arr(items)) => items
            .iter()
            .map(|item| match item {
                Js::Str(units) => Some(units.clone()),
                _ => None,
            })
            .collect(),
        _ => None,
    };
    let switch = match value.get("env") {
        Some(env @ Js::Obj(_)) => env.get(DISABLE_MEMORY).cloned(),
        _ => None,
    };
    let claude_md = match value.get("claudeMd") {
        Some(Js::Str(units)) => Some(String::from_utf16_lossy(units)),
        _ => None,
    };
    let env = match value.get("env") {
        Some(Js::Obj(entries)) => entries
            .iter()
            .filter_map(|(name, value)| {
                let name = String::from_utf16(name).ok()?;
                (name != DISABLE_MEMORY && env_of_interest(&name)).then(|| (name, value.clone()))
            })
            .collect(),
        _ => Vec::new(),
    };
    let strings = |value: Option<&Js>| -> Vec<String> {
        match value {
            Some(Js::Arr(items)) => items
                .iter()
                .filter_map(|item| match item {
                    Js::Str(units) => Some(String::from_utf16_lossy(units)),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    };
    let permissions = match value.get("permissions") {
        Some(p @ Js::Obj(_)) => Some(p),
        _ => None,
    };
    let keys = [
        "agent",
        "allowManagedPermissionRulesOnly",
        "strictPluginOnlyCustomization",
        "autoMemoryDirectory",
    ]
    .into_iter()
    .filter_map(|key| Some((key.to_owned(), value.get(key)?.clone())))
    .collect();
    Read {
        state,
        excludes,
        switch,
        env,
        deny: strings(permissions.and_then(|p| p.get("deny"))),
        block_outside: permissions
            .and_then(|p| p.get("blockReadsOutsideWorkingDirectories"))
            .cloned(),
        additional: strings(permissions.and_then(|p| p.get("additionalDirectories"))),
        keys,
        opaque: false,
        claude_md,
        unmodelled: super::managed::unmodelled(&value),
    }
}

/// Node's `Buffer.toString` with the encoding Claude Code picks (UTF-16LE after `FF FE`, else
/// UTF-8 with replacement characters), then CRLF made LF.
fn decode(bytes: &[u8]) -> Vec<u16> {
    let units: Vec<u16> = match bytes {
        [0xff, 0xfe, ..] => bytes
            .chunks_exact(2)
            .map(|pair| u16::from_le_bytes([pair[0], pair[1]]))
            .collect(),
        _ => String::from_utf8_lossy(bytes).encode_utf16().collect(),
    };
    let mut out = Vec::with_capacity(units.len());
    let mut i = 0;
    while i < units.len() {
        if units[i] == 0x0d && units.get(i + 1) == Some(&0x0a) {
            i += 1;
        }
        out.push(units[i]);
        i += 1;
    }
    out
}

/// Whether Claude Code accepts a parsed file as a whole, as far as clawmd can tell.
fn validate(value: &Js) -> FileState {
    let Js::Obj(entries) = value else {
        return FileState::Rejected {
            why: format!("it is {}, not a JSON object", value.kind()),
        };
    };
    let mut unknown_keys = Vec::new();
    for (key, value) in entries {
        let key = String::from_utf16_lossy(key);
        let wrong = |what: &str| FileState::Rejected {
            why: format!("\"{key}\" is {}, not {what}", value.kind()),
        };
        match (key.as_str(), value) {
            ("claudeMdExcludes", Js::Arr(items)) => {
                if let Some(item) = items.iter().find(|i| !matches!(i, Js::Str(_))) {
                    return FileState::Rejected {
                        why: format!(
                            "\"claudeMdExcludes\" holds {}, not only strings",
                            item.kind()
                        ),
                    };
                }
            }
            ("claudeMdExcludes", _) => return wrong("a list of strings"),
            ("env", Js::Obj(_)) => {}
            ("env", _) => return wrong("an object"),
            ("$schema" | "model", Js::Str(_)) => {}
            ("$schema" | "model", _) => return wrong("a string"),
            // Measured (tests/e2e/settings.rs, attack 6''): a `defaultMode` that is not a
            // string rejects the whole file.
            ("permissions", Js::Obj(rules))
                if rules.iter().any(|(name, value)| {
                    String::from_utf16_lossy(name) == "defaultMode" && !matches!(value, Js::Str(_))
                }) =>
            {
                return FileState::Rejected {
                    why: "\"permissions.defaultMode\" is not a string".to_owned(),
                };
            }
            ("permissions", Js::Obj(rules)) => {
                // Measured: a rule of the wrong type (`"allow": [5]`) does not reject the file.
                let known = rules.iter().all(|(name, value)| {
                    match (String::from_utf16_lossy(name).as_str(), value) {
                        ("allow" | "deny" | "ask", Js::Arr(_)) => true,
                        ("additionalDirectories", Js::Arr(items)) => {
                            items.iter().all(|i| matches!(i, Js::Str(_)))
                        }
                        ("defaultMode", Js::Str(_)) => true,
                        (
                            "blockReadsOutsideWorkingDirectories"
                            | "blockWritesOutsideWorkingDirectories"
                            | "blockFileToolReadsOutsideWorkingDirectories"
                            | "denyInsteadOfPrompting",
                            Js::Bool(_),
                        ) => true,
                        _ => false,
                    }
                });
                if !known {
                    unknown_keys.push(key);
                }
            }
            ("permissions", _) => return wrong("an object"),
            ("agent" | "outputStyle" | "autoMemoryDirectory", Js::Str(_)) => {}
            ("allowManagedPermissionRulesOnly" | "autoMemoryEnabled", Js::Bool(_)) => {}
            _ => unknown_keys.push(key),
        }
    }
    match unknown_keys.is_empty() {
        true => FileState::Applied,
        false => FileState::Unknown {
            why: format!(
                "it holds {} whose validation clawmd does not model",
                unknown_keys
                    .iter()
                    .map(|k| format!("\"{}\"", k.escape_debug()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        },
    }
}

/// `env.CLAUDE_CODE_DISABLE_CLAUDE_MDS`: managed over local over project over user.
fn memory_switch(read: &[(SettingsSource, PathBuf, Read)], out: &mut SettingsEvaluation) {
    let setting = format!("env.{DISABLE_MEMORY}");
    let mut setters = read
        .iter()
        .rev()
        .filter(|(_, _, file)| !matches!(file.state, FileState::Rejected { .. }))
        .filter_map(|(_, path, file)| Some((path, file.switch.as_ref()?)));
    let Some((path, value)) = setters.next() else {
        return;
    };
    let (shown, on) = match coerce(value, 0) {
        Ok(read) => read,
        Err(why) => {
            out.undecided.push(Undecided {
                path: path.clone(),
                setting,
                why,
            });
            return;
        }
    };
    if matches!(value, Js::Null)
        && setters.any(|(_, lower)| coerce(lower, 0).is_ok_and(|(_, on)| on))
    {
        out.undecided.push(Undecided {
            path: path.clone(),
            setting: setting.clone(),
            why:
                "a null value here may or may not override the true one of a settings file below it"
                    .to_owned(),
        });
    }
    if on {
        out.memory_off = Some(MemoryOff {
            path: path.clone(),
            setting,
            value: shown,
        });
    }
}

/// JavaScript's `String(value)` read by the release's truth test (`1`, `true`, `yes`, `on`,
/// after `trim()` and `toLowerCase()`): the text shown and whether it is true.
fn coerce(value: &Js, depth: usize) -> Result<(String, bool), String> {
    if depth > 8 {
        return Err("the value nests too deep for clawmd to read".to_owned());
    }
    Ok(match value {
        Js::Null => ("null".to_owned(), false),
        Js::Bool(b) => (b.to_string(), *b),
        Js::Num(n, text) => (text.clone(), *n == 1.0),
        Js::Str(units) => {
            let text = String::from_utf16_lossy(units);
            let on = truthy(&text);
            (text, on)
        }
        Js::Arr(items) => match items.as_slice() {
            [] => (String::new(), false),
            [Js::Null] => (String::new(), false),
            [one] => coerce(one, depth + 1)?,
            _ => ("(a list of several values)".to_owned(), false),
        },
        Js::Obj(_) => ("[object Object]".to_owned(), false),
    })
}

/// The release's truth test on a string.
fn truthy(text: &str) -> bool {
    let trimmed = js_trim(text);
    // No character outside ASCII lower-cases into one of these words.
    trimmed.is_ascii()
        && matches!(
            trimmed.to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
}

/// The exclude patterns of every applied (or undecided) file, with the copies Claude Code
/// adds for absolute patterns.
fn excludes<F: MemoryFs + ?Sized>(
    fs: &F,
    read: &[(SettingsSource, PathBuf, Read)],
    cwd: &Path,
    out: &mut SettingsEvaluation,
) {
    for (_, path, file) in read {
        if matches!(file.state, FileState::Rejected { .. }) {
            continue;
        }
        for units in file.excludes.iter().flatten() {
            if units.iter().any(|u| (0xd800..0xe000).contains(u))
                && String::from_utf16(units).is_err()
            {
                out.undecided.push(Undecided {
                    path: path.clone(),
                    setting: "claudeMdExcludes".to_owned(),
                    why: "a pattern holds a lone UTF-16 surrogate".to_owned(),
                });
                continue;
            }
            let pattern = String::from_utf16_lossy(units).replace('\\', "/");
            out.excludes.push(Exclude {
                pattern,
                source: path.clone(),
                written: None,
            });
        }
    }
    // JS `zZr`: the list grows while it is walked, so added copies are looked at too.
    let mut i = 0;
    while i < out.excludes.len() && i < 4 * MAX_WALKED {
        let exclude = out.excludes[i].clone();
        i += 1;
        let Some((folder, real)) = real_folder(fs, &exclude.pattern, cwd, &exclude.source, out)
        else {
            continue;
        };
        if real != folder {
            let pattern = format!("{real}{}", &exclude.pattern[folder.len()..]);
            out.excludes.push(Exclude {
                pattern,
                source: exclude.source.clone(),
                written: Some(exclude.written.clone().unwrap_or(exclude.pattern.clone())),
            });
        }
    }
    out.excludes.retain(|e| !e.pattern.is_empty());
    let mut undecided = Vec::new();
    for exclude in &out.excludes {
        if let Err(why) = picomatch::Pattern::exact(&exclude.pattern) {
            undecided.push(Undecided {
                path: exclude.source.clone(),
                setting: "claudeMdExcludes".to_owned(),
                why: format!(
                    "clawmd cannot match the pattern {:?} exactly as Claude Code's picomatch does ({why})",
                    exclude.written.as_deref().unwrap_or(&exclude.pattern)
                ),
            });
        }
    }
    undecided.dedup();
    out.undecided.extend(undecided);
}

/// Patterns looked at for copies (four times this many steps at most).
const MAX_WALKED: usize = 4096;

/// For an absolute pattern: its folder as Claude Code computes it (`dirname` of the part
/// before the first `*?{[`) and that folder's real path in the container. `None` when Claude
/// Code adds no copy (not absolute, `//…`, a folder that does not resolve, or one whose real
/// path stays under `/proc`, where no memory file is).
fn real_folder<F: MemoryFs + ?Sized>(
    fs: &F,
    pattern: &str,
    cwd: &Path,
    source: &Path,
    out: &mut SettingsEvaluation,
) -> Option<(String, String)> {
    if !pattern.starts_with('/') {
        return None;
    }
    let fixed = &pattern[..pattern.find(['*', '?', '{', '[']).unwrap_or(pattern.len())];
    let folder = node_dirname(fixed).to_owned();
    if folder.starts_with("//") {
        return None;
    }
    let mut undecided = |why: String| {
        out.undecided.push(Undecided {
            path: source.to_path_buf(),
            setting: "claudeMdExcludes".to_owned(),
            why,
        });
        None
    };
    // `realpath` first resolves `.`, `..` and `//` by the letter (Node's `path.resolve`).
    let lexical = normalize(Path::new(&folder));
    let lexical_str = lexical.to_str()?;
    let looked_up = match proc_alias(lexical_str, cwd) {
        Proc::Elsewhere => lexical.clone(),
        Proc::Alias(path) => path,
        Proc::Stays => return None,
        Proc::Unknown => {
            return undecided(format!(
                "the pattern {pattern:?} starts in {folder}, which clawmd cannot resolve as the agent's process would"
            ));
        }
    };
    let real = match fs.canonicalize(&looked_up) {
        Ok(real) => real,
        Err(err) => match err.kind() {
            _ if super::fs::is_loop(&err) => return None,
            io::ErrorKind::NotFound | io::ErrorKind::NotADirectory if covered(fs, &looked_up) => {
                return None;
            }
            _ => {
                return undecided(format!(
                    "the folder {folder} of the pattern {pattern:?} cannot be resolved in clawmd's view of the container ({err})"
                ));
            }
        },
    };
    let real = real.to_str()?.to_owned();
    if skipped_real_path(&real) {
        return None;
    }
    Some((folder, real))
}

/// Where a folder under `/proc` leads.
enum Proc {
    /// Not under `/proc`.
    Elsewhere,
    /// The agent's own cwd or root: this path.
    Alias(PathBuf),
    /// A folder under `/proc` (where no memory file is).
    Stays,
    /// Another process's links: clawmd cannot say.
    Unknown,
}

/// `/proc/self/cwd/…` and `/proc/self/root/…` (and `thread-self`) are the agent's own cwd and
/// root; `/proc`, `/proc/self` and `/proc/<pid>` resolve to folders under `/proc`; any other
/// `/proc` path is undecided.
fn proc_alias(path: &str, cwd: &Path) -> Proc {
    let Some(rest) = path.strip_prefix("/proc") else {
        return Proc::Elsewhere;
    };
    if !(rest.is_empty() || rest.starts_with('/')) {
        return Proc::Elsewhere;
    }
    let rest = rest.trim_start_matches('/');
    let mut parts = rest.splitn(3, '/');
    let (who, link, tail) = (parts.next(), parts.next(), parts.next().unwrap_or(""));
    let own = matches!(who, Some("self" | "thread-self"));
    let pid = who.is_some_and(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit()));
    match (who, link) {
        (None | Some(""), _) => Proc::Stays,
        (Some(_), None) if own || pid => Proc::Stays,
        (Some(_), Some("cwd")) if own => Proc::Alias(normalize(&cwd.join(tail))),
        (Some(_), Some("root")) if own => Proc::Alias(normalize(&Path::new("/").join(tail))),
        _ => Proc::Unknown,
    }
}

/// JS `O1` on the real path, for Linux: `/net` and `/net/<host>` (automount) and the macOS
/// `/.vol`, `/.file`, `/.nofollow`, `/.resolve` folders get no copy.
fn skipped_real_path(real: &str) -> bool {
    let parts: Vec<&str> = real.split('/').filter(|p| !p.is_empty()).collect();
    let first = parts.first().map(|p| p.to_ascii_lowercase());
    match first.as_deref() {
        Some("net") => parts.len() <= 2,
        Some(".vol" | ".file" | ".nofollow" | ".resolve") => true,
        _ => false,
    }
}

/// Whether a path that does not resolve is missing in the container too: its resolution, link
/// by link, stops inside the part of the container `fs` models ([`MemoryFs::within_view`]).
fn covered<F: MemoryFs + ?Sized>(fs: &F, path: &Path) -> bool {
    let mut current = normalize(path);
    'hops: for _ in 0..=crate::fs::MAX_SYMLINKS {
        let names: Vec<_> = current.components().skip(1).collect();
        let mut prefix = PathBuf::from("/");
        for (i, name) in names.iter().enumerate() {
            prefix.push(name);
            match fs.symlink_metadata(&prefix) {
                Ok(meta) if meta.kind == FileKind::Symlink => {
                    let Ok(target) = fs.read_link(&prefix) else {
                        return fs.within_view(&prefix);
                    };
                    let mut next = prefix.parent().unwrap_or(Path::new("/")).join(target);
                    next.extend(&names[i + 1..]);
                    current = normalize(&next);
                    continue 'hops;
                }
                Ok(_) => {}
                Err(_) => return fs.within_view(&prefix),
            }
        }
        return true;
    }
    true
}

/// Node's `path.posix.dirname` (always a prefix of its argument).
pub(crate) fn node_dirname(path: &str) -> &str {
    let bytes = path.as_bytes();
    if bytes.is_empty() {
        return ".";
    }
    let has_root = bytes[0] == b'/';
    let mut end = None;
    let mut matched_slash = true;
    for i in (1..bytes.len()).rev() {
        if bytes[i] == b'/' {
            if !matched_slash {
                end = Some(i);
                break;
            }
        } else {
            matched_slash = false;
        }
    }
    match end {
        None if has_root => "/",
        None => ".",
        Some(1) if has_root => "//",
        Some(end) => &path[..end],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirname_is_nodes() {
        for (path, dir) in [
            ("/workspace/agent/CLAUDE.md", "/workspace/agent"),
            ("/workspace/agent//CLAUDE.md", "/workspace/agent/"),
            ("/workspace/agent/./CLAUDE.md", "/workspace/agent/."),
            ("/workspace/agent/", "/workspace"),
            ("/workspace//agent/", "/workspace/"),
            ("/x", "/"),
            ("/", "/"),
            ("//x", "//"),
            ("x", "."),
            ("", "."),
        ] {
            assert_eq!(node_dirname(path), dir, "{path}");
            assert!(path.starts_with(node_dirname(path)) || node_dirname(path) == ".");
        }
    }

    #[test]
    fn truthiness_is_the_releases() {
        for on in [
            "1",
            "true",
            "TRUE",
            "Yes",
            " on ",
            "\u{a0}1",
            "\ttrue\n",
            "\u{feff}yes",
        ] {
            assert!(truthy(on), "{on:?}");
        }
        for off in [
            "0", "false", "", "2", "y", "no", "off", "1.0", "t", "ｏｎ", "\u{212a}",
        ] {
            assert!(!truthy(off), "{off:?}");
        }
    }

    fn js(text: &str) -> Js {
        js_json::parse(&text.encode_utf16().collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn values_are_read_as_javascript_strings() {
        for (text, on) in [
            ("1", true),
            ("1.0", true),
            ("10e-1", true),
            ("true", true),
            ("[\"1\"]", true),
            ("[[1]]", true),
            ("[1, 1]", false),
            ("[null]", false),
            ("null", false),
            ("0", false),
            ("{\"a\": 1}", false),
            ("\"yes\"", true),
        ] {
            assert_eq!(coerce(&js(text), 0).unwrap().1, on, "{text}");
        }
        let deep = format!("{}1{}", "[".repeat(20), "]".repeat(20));
        assert!(coerce(&js(&deep), 0).is_err());
    }

    fn state(text: &str) -> FileState {
        parse_file(text.as_bytes(), false).state
    }

    #[test]
    fn whole_files_are_accepted_or_rejected_as_measured() {
        let e = r#""claudeMdExcludes":["/w/CLAUDE.md"]"#;
        assert_eq!(state(&format!("{{{e}}}")), FileState::Applied);
        assert_eq!(
            state(&format!("{{{e},\"env\":{{\"X\":{{}}}},\"$schema\":\"s\"}}")),
            FileState::Applied
        );
        assert_eq!(state("  \n"), FileState::Applied);
        for bad in [
            format!("{{{e},\"permissions\":5}}"),
            format!("{{{e},\"permissions\":null}}"),
            format!("{{{e},\"permissions\":[]}}"),
            format!("{{{e},}}"),
            format!("// c\n{{{e}}}"),
            format!("[{{{e}}}]"),
            format!("{{{e},\"env\":\"x\"}}"),
            format!("{{{e},\"$schema\":5}}"),
            format!("{{{e},\"model\":5}}"),
            "{\"claudeMdExcludes\":\"/w/CLAUDE.md\"}".to_owned(),
            "{\"claudeMdExcludes\":[\"/w\",5]}".to_owned(),
            "{\"claudeMdExcludes\":null}".to_owned(),
            format!("{{{e}}}\u{0}"),
        ] {
            assert!(matches!(state(&bad), FileState::Rejected { .. }), "{bad}");
        }
        // A `permissions` object of the shapes measured (the settings oracle's "perm obj" and
        // "perm bad rule": a rule of the wrong type does not reject the file).
        for applied in [
            format!("{{{e},\"permissions\":{{}}}}"),
            format!("{{{e},\"permissions\":{{\"allow\":[5],\"deny\":[\"Read\"]}}}}"),
            format!("{{{e},\"agent\":\"x\",\"outputStyle\":\"y\"}}"),
        ] {
            assert_eq!(state(&applied), FileState::Applied, "{applied}");
        }
        assert!(matches!(
            state(&format!("{{{e},\"permissions\":{{\"defaultMode\":5}}}}")),
            FileState::Rejected { .. }
        ));
        for undecided in [
            format!("{{{e},\"permissions\":{{\"other\":[]}}}}"),
            format!("{{{e},\"hooks\":5}}"),
        ] {
            assert!(
                matches!(state(&undecided), FileState::Unknown { .. }),
                "{undecided}"
            );
        }
    }

    #[test]
    fn the_text_is_decoded_as_claude_code_decodes_it() {
        let e = "{\"claudeMdExcludes\":[\"/w/CLAUDE.md\"]}";
        let mut bom = b"\xef\xbb\xbf".to_vec();
        bom.extend_from_slice(e.as_bytes());
        assert_eq!(parse_file(&bom, false).state, FileState::Applied);
        let mut le = vec![0xff, 0xfe];
        le.extend(e.encode_utf16().flat_map(u16::to_le_bytes));
        let read = parse_file(&le, false);
        assert_eq!(read.state, FileState::Applied);
        assert_eq!(read.excludes.unwrap().len(), 1);
        let mut be = vec![0xfe, 0xff];
        be.extend(e.encode_utf16().flat_map(u16::to_be_bytes));
        assert!(matches!(
            parse_file(&be, false).state,
            FileState::Rejected { .. }
        ));
        assert_eq!(
            parse_file(b"{\r\n\"env\": {}\r\n}\r\n", false).state,
            FileState::Applied
        );
        // A lone surrogate is a string to JavaScript: the file is valid.
        assert_eq!(
            state("{\"claudeMdExcludes\":[\"\\ud800\"]}"),
            FileState::Applied
        );
    }

    #[test]
    fn proc_paths() {
        let cwd = Path::new("/workspace/agent");
        assert!(matches!(proc_alias("/proc/self/cwd", cwd), Proc::Alias(p) if p == cwd));
        assert!(
            matches!(proc_alias("/proc/self/root/workspace", cwd), Proc::Alias(p) if p == Path::new("/workspace"))
        );
        assert!(matches!(proc_alias("/proc/self", cwd), Proc::Stays));
        assert!(matches!(proc_alias("/proc", cwd), Proc::Stays));
        assert!(matches!(proc_alias("/proc/17", cwd), Proc::Stays));
        assert!(matches!(proc_alias("/proc/1/cwd", cwd), Proc::Unknown));
        assert!(matches!(proc_alias("/proc/self/fd", cwd), Proc::Unknown));
        assert!(matches!(proc_alias("/procx/a", cwd), Proc::Elsewhere));
        assert!(matches!(proc_alias("/workspace", cwd), Proc::Elsewhere));
    }
}
