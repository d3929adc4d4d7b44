//! Claude Code's managed layer beyond the managed `CLAUDE.md`: the drop-in folder
//! `managed-settings.d/` beside `managed-settings.json`, and the `claudeMd` key those files
//! may hold ("CLAUDE.md-style instructions injected as organization-managed memory", the
//! binary's schema). Recorded on every corpus release (cases 81 to 99, docs/loader.md,
//! "Managed settings"):
//!
//! * the drop-ins are the entries of `<managed>/managed-settings.d/` that are files or links,
//!   named `*.json` (case-sensitive) and not starting with `.`, read after
//!   `managed-settings.json` in JavaScript's `sort()` order (UTF-16 code units: `10.json`
//!   before `9.json`); a folder named `x.json` is passed over, a link followed;
//! * they merge over `managed-settings.json` as one managed source: `env` key by key, the
//!   last file wins (a drop-in's `CLAUDE_CODE_DISABLE_CLAUDE_MDS: "1"` turns memory off over
//!   a `""` pin in `managed-settings.json`, case 92), `claudeMdExcludes` lists concatenated,
//!   `claudeMd` the last file's;
//! * `claudeMd` (from [`Behaviour::ManagedClaudeMd`]) is shown as one more managed section,
//!   `Contents of <managed-settings> (organization-managed policy instructions)`, after the
//!   managed `CLAUDE.md` and its imports and before the managed rules: the text as written
//!   (trimmed like every body; no import followed, no comment or frontmatter stripped), a
//!   blank text as an empty section, `""` as none; memory turned off drops it with the rest;
//!   `claudeMdExcludes` never drops it; a `claudeMd` in the user's or the project's settings
//!   is ignored (case 85);
//! * from [`Behaviour::ManagedKeysOneByOne`] a managed file whose key has the wrong type
//!   loses that key only (`"permissions": 7` beside `claudeMdExcludes` keeps the excludes,
//!   case 97); before, the whole file is rejected like any settings file;
//! * `managedSourcesBehavior` and `parentSettingsBehavior` compose *sources* (server-managed
//!   settings, MDM, a policy helper, the SDK's `managedSettings`), not the files of one
//!   folder: in `managed-settings.json` or a drop-in they change nothing the memory block
//!   shows (case 96). `policyHelper`/`policyHelpers` run a program at start-up that computes
//!   the managed settings: clawmd cannot know its output, so a managed file naming one makes
//!   the managed settings undecided ([`unmodelled`]).

use std::path::{Path, PathBuf};

use super::fs::{FileKind, MemoryFs};
use super::js_json::Js;
use super::model::{FileState, LoadedFile, ManagedMemory, MemoryKind, Origin, Undecided};
use super::version::{Behaviour, ClaudeVersion};

/// The drop-in folder, beside `managed-settings.json`.
pub const DROP_IN_DIR: &str = "managed-settings.d";

/// The path Claude Code prints for the `claudeMd` text of the managed settings.
pub const MANAGED_SETTINGS_SECTION: &str = "<managed-settings>";

/// The most drop-ins clawmd reads; past it the managed settings are undecided.
pub const MAX_DROP_INS: usize = 256;

/// The keys that name a policy helper.
pub const HELPER_KEYS: [&str; 2] = ["policyHelper", "policyHelpers"];

/// The memory switches besides `CLAUDE_CODE_DISABLE_CLAUDE_MDS` (the `--bare` and
/// `--safe-mode` modes), which the loader does not model.
pub const OTHER_SWITCHES: [&str; 2] = ["CLAUDE_CODE_SIMPLE", "CLAUDE_CODE_SAFE_MODE"];

/// The drop-in files release `version` reads from `<managed>/managed-settings.d`, in its
/// order; what clawmd cannot list or name is pushed to `undecided`.
pub fn drop_in_files<F: MemoryFs + ?Sized>(
    fs: &F,
    managed: &Path,
    version: ClaudeVersion,
    undecided: &mut Vec<Undecided>,
) -> Vec<PathBuf> {
    if !version.has(Behaviour::ManagedDropIns) {
        return Vec::new();
    }
    let dir = managed.join(DROP_IN_DIR);
    let entries = match fs.read_dir(&dir) {
        Ok(entries) => entries,
        Err(err)
            if matches!(
                err.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            return Vec::new();
        }
        Err(err) => {
            undecided.push(Undecided {
                path: dir,
                setting: "the whole folder".to_owned(),
                why: format!("clawmd cannot list it: {err}"),
            });
            return Vec::new();
        }
    };
    let mut names: Vec<(Vec<u16>, PathBuf)> = Vec::new();
    for entry in &entries {
        let Some(name) = entry.name.to_str() else {
            undecided.push(Undecided {
                path: dir.join(&entry.name),
                setting: "the whole file".to_owned(),
                why: "its name is not UTF-8, which Claude Code reads with replacement characters"
                    .to_owned(),
            });
            continue;
        };
        if !name.ends_with(".json") || name.starts_with('.') {
            continue;
        }
        // `Dirent.isFile() || isSymbolicLink()`: a folder is passed over, a link followed.
        if matches!(entry.kind, FileKind::File | FileKind::Symlink) {
            names.push((name.encode_utf16().collect(), dir.join(name)));
        }
    }
    if names.len() > MAX_DROP_INS {
        undecided.push(Undecided {
            path: dir,
            setting: "the whole folder".to_owned(),
            why: format!(
                "it holds {} drop-ins, more than the {MAX_DROP_INS} clawmd reads",
                names.len()
            ),
        });
        names.truncate(0);
    }
    // JavaScript's `sort()`: by UTF-16 code units.
    names.sort();
    names.into_iter().map(|(_, path)| path).collect()
}

/// What a managed file sets that may change memory and that clawmd does not model, each
/// with why: a policy helper (to anything but `null`: Claude Code runs that program at
/// start-up and applies the managed settings it prints), and `env.CLAUDE_CODE_SIMPLE` or
/// `env.CLAUDE_CODE_SAFE_MODE` set to anything but `""` (a true value turns every memory file
/// off, case 94; the loader models `CLAUDE_CODE_DISABLE_CLAUDE_MDS` only, issue 38).
pub(crate) fn unmodelled(value: &Js) -> Vec<(String, &'static str)> {
    let mut out: Vec<(String, &'static str)> = HELPER_KEYS
        .into_iter()
        .filter(|key| matches!(value.get(key), Some(v) if !matches!(v, Js::Null)))
        .map(|key| {
            (
                key.to_owned(),
                "Claude Code runs this policy helper at start-up and applies the managed settings it prints, which clawmd cannot know",
            )
        })
        .collect();
    if let Some(env @ Js::Obj(_)) = value.get("env") {
        for switch in OTHER_SWITCHES {
            if matches!(env.get(switch), Some(v) if !matches!(v, Js::Str(text) if text.is_empty()))
            {
                out.push((
                    format!("env.{switch}"),
                    "a true value turns every memory file off (recorded from a drop-in, case 94), which clawmd's loader does not model yet",
                ));
            }
        }
    }
    out
}

/// Whether Claude Code applies a managed file on a release that drops a key of the wrong
/// type alone ([`Behaviour::ManagedKeysOneByOne`]): any JSON object is applied, minus its
/// wrong keys (the caller reads `claudeMdExcludes`, `env` and `claudeMd` only when they have
/// their type). A `claudeMdExcludes` list holding something other than strings is
/// undecided: whether the item or the list is dropped was not recorded.
pub(crate) fn validate_one_by_one(value: &Js) -> FileState {
    if !matches!(value, Js::Obj(_)) {
        return FileState::Rejected {
            why: format!("it is {}, not a JSON object", value.kind()),
        };
    }
    if let Some(Js::Arr(items)) = value.get("claudeMdExcludes")
        && let Some(item) = items.iter().find(|i| !matches!(i, Js::Str(_)))
    {
        return FileState::Unknown {
            why: format!(
                "\"claudeMdExcludes\" holds {}: clawmd cannot tell whether Claude Code drops that item or the whole list",
                item.kind()
            ),
        };
    }
    FileState::Applied
}

/// The `claudeMd` text the managed files give, read in Claude Code's order (each file's
/// value when it has a string one, `None` otherwise; rejected files left out): the last
/// string wins, and `""` shows nothing.
pub fn policy_memory<'a>(
    values: impl IntoIterator<Item = (&'a Path, Option<String>)>,
    version: ClaudeVersion,
) -> Option<ManagedMemory> {
    if !version.has(Behaviour::ManagedClaudeMd) {
        return None;
    }
    let (source, text) = values
        .into_iter()
        .filter_map(|(path, text)| Some((path, text?)))
        .last()?;
    (!text.is_empty()).then(|| ManagedMemory {
        text,
        source: source.to_owned(),
    })
}

/// Puts the `claudeMd` section where Claude Code shows it: after the managed `CLAUDE.md` and
/// its imports, before the managed rules and every other file (case 84).
pub(crate) fn insert_section(files: &mut Vec<LoadedFile>, policy: &ManagedMemory) {
    let at = files
        .iter()
        .position(|f| {
            !(f.kind == MemoryKind::Managed
                && matches!(f.origin, Origin::Discovered | Origin::Import))
        })
        .unwrap_or(files.len());
    files.insert(
        at,
        LoadedFile {
            path: PathBuf::from(MANAGED_SETTINGS_SECTION),
            real_path: policy.source.clone(),
            kind: MemoryKind::Managed,
            origin: Origin::ManagedSettings,
            parent: None,
            import: None,
            depth: 0,
            body: policy.text.clone(),
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_string_wins_and_empty_shows_nothing() {
        let v = ClaudeVersion::new(2, 1, 331);
        let (a, b) = (Path::new("/m/a.json"), Path::new("/m/b.json"));
        let got = policy_memory([(a, Some("A".to_owned())), (b, None)], v).unwrap();
        assert_eq!((got.text.as_str(), got.source.as_path()), ("A", a));
        let got = policy_memory([(a, Some("A".to_owned())), (b, Some("  ".into()))], v);
        assert_eq!(got.unwrap().text, "  ");
        assert_eq!(
            policy_memory([(a, Some("A".to_owned())), (b, Some(String::new()))], v),
            None
        );
        assert_eq!(
            policy_memory([(a, Some("A".to_owned()))], ClaudeVersion::new(2, 1, 128)),
            None
        );
    }

    #[test]
    fn drop_ins_are_read_in_javascripts_order() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(DROP_IN_DIR);
        std::fs::create_dir_all(dir.join("sub.json")).unwrap();
        for name in [
            "9.json",
            "10.json",
            ".hidden.json",
            "Z.JSON",
            "a.txt",
            "\u{ff5a}.json",
        ] {
            std::fs::write(dir.join(name), "{}").unwrap();
        }
        // A supplementary character sorts before U+FF5A in UTF-16, after it in UTF-8.
        std::fs::write(dir.join("\u{1f600}.json"), "{}").unwrap();
        std::os::unix::fs::symlink("9.json", dir.join("link.json")).unwrap();
        let mut undecided = Vec::new();
        let v = ClaudeVersion::new(2, 1, 331);
        let names: Vec<String> = drop_in_files(&crate::HostFs, tmp.path(), v, &mut undecided)
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "10.json",
                "9.json",
                "link.json",
                "\u{1f600}.json",
                "\u{ff5a}.json"
            ]
        );
        assert!(undecided.is_empty());
        let old = ClaudeVersion::new(2, 0, 77);
        assert!(drop_in_files(&crate::HostFs, tmp.path(), old, &mut undecided).is_empty());
        assert!(
            drop_in_files(&crate::HostFs, &tmp.path().join("none"), v, &mut undecided).is_empty()
        );
        assert!(undecided.is_empty());
    }

    fn file(path: &str, kind: MemoryKind, origin: Origin) -> LoadedFile {
        LoadedFile {
            path: PathBuf::from(path),
            real_path: PathBuf::from(path),
            kind,
            origin,
            parent: None,
            import: None,
            depth: 0,
            body: String::new(),
        }
    }

    #[test]
    fn the_section_follows_the_managed_file_and_its_imports() {
        let policy = ManagedMemory {
            text: "T".into(),
            source: PathBuf::from("/etc/claude-code/managed-settings.json"),
        };
        let mut files = vec![
            file(
                "/etc/claude-code/CLAUDE.md",
                MemoryKind::Managed,
                Origin::Discovered,
            ),
            file("/etc/claude-code/i.md", MemoryKind::Managed, Origin::Import),
            file(
                "/etc/claude-code/.claude/rules/r.md",
                MemoryKind::Managed,
                Origin::Rule,
            ),
            file("/w/CLAUDE.md", MemoryKind::Project, Origin::Discovered),
        ];
        insert_section(&mut files, &policy);
        assert_eq!(files[2].path, Path::new(MANAGED_SETTINGS_SECTION));
        assert_eq!(files[2].origin, Origin::ManagedSettings);
        let mut only_project = vec![file(
            "/w/CLAUDE.md",
            MemoryKind::Project,
            Origin::Discovered,
        )];
        insert_section(&mut only_project, &policy);
        assert_eq!(only_project[0].path, Path::new(MANAGED_SETTINGS_SECTION));
    }

    #[test]
    fn unmodelled_settings_are_named() {
        let js = |t: &str| crate::js_json::parse(&t.encode_utf16().collect::<Vec<_>>()).unwrap();
        let named =
            |t: &str| -> Vec<String> { unmodelled(&js(t)).into_iter().map(|(s, _)| s).collect() };
        assert_eq!(
            named(r#"{"policyHelper": {"path": "/x"}, "policyHelpers": null}"#),
            ["policyHelper"]
        );
        assert_eq!(
            named(r#"{"env": {"CLAUDE_CODE_SIMPLE": "", "CLAUDE_CODE_SAFE_MODE": "1"}}"#),
            ["env.CLAUDE_CODE_SAFE_MODE"]
        );
        assert!(named(r#"{"env": {"CLAUDE_CODE_SIMPLE": ""}, "claudeMd": "x"}"#).is_empty());
    }

    #[test]
    fn claude_md_and_helpers_count_in_managed_files_only() {
        let tmp = tempfile::tempdir().unwrap();
        let (cwd, managed) = (tmp.path().join("w"), tmp.path().join("m"));
        std::fs::create_dir_all(cwd.join(".claude")).unwrap();
        std::fs::create_dir_all(managed.join(DROP_IN_DIR)).unwrap();
        let agents = r#"{"claudeMd": "AGENT", "policyHelper": {"path": "/x"}}"#;
        std::fs::write(cwd.join(".claude/settings.json"), agents).unwrap();
        let mut opts = crate::LoadOptions::new(&cwd, None);
        opts.managed_dir = Some(managed.clone());
        opts.claude_version = ClaudeVersion::new(2, 1, 331);
        let out = crate::settings::evaluate(&crate::HostFs, &opts, &cwd);
        assert_eq!((out.managed_memory, out.undecided), (None, Vec::new()));
        std::fs::write(
            managed.join("managed-settings.json"),
            r#"{"claudeMd": "BASE"}"#,
        )
        .unwrap();
        std::fs::write(managed.join(DROP_IN_DIR).join("5.json"), agents).unwrap();
        let out = crate::settings::evaluate(&crate::HostFs, &opts, &cwd);
        let policy = out.managed_memory.unwrap();
        assert_eq!(policy.text, "AGENT");
        assert_eq!(policy.source, managed.join(DROP_IN_DIR).join("5.json"));
        assert_eq!(out.undecided.len(), 1, "{:?}", out.undecided);
        assert_eq!(out.undecided[0].setting, "policyHelper");
    }
}
