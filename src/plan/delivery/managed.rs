//! Managed delivery: a Claude Code group's guardrails as Claude Code's own managed policy.
//!
//! The runner binds the group's managed folder (`<state>/binds/<group>/managed`) read-only at
//! the managed-policy mount point (`/etc/claude-code`). Claude Code loads
//! `/etc/claude-code/CLAUDE.md` before every other memory file, and no `claudeMdExcludes` in
//! the project, local or user settings reaches it; and the `env` of
//! `/etc/claude-code/managed-settings.json` wins over theirs. So the folder holds:
//!
//! * `CLAUDE.md`: one flat document (the host's own managed policy, the shared base with its
//!   imports expanded on the host, the enabled skills, the MCP instructions fenced) with no
//!   import line at all: an import in the managed file is followed only with the project's
//!   external-include approval, which the agent can record itself in its `~/.claude.json`;
//! * `managed-settings.json`: the host's own managed settings, with [`MEMORY_SWITCHES`]
//!   pinned off, so that no settings file of the agent's can turn memory off, with
//!   [`MEMORY_ENV_PINS`] and [`PROMPT_PINS`] (what withholds or adds memory, what replaces the
//!   system prompt);
//! * the host's other managed files, copied as they are.
//!
//! Measured on the real releases (docs/delivery.md, "Managed delivery"): an empty string
//! turns each switch off in every release; `"0"` does not in 2.1.48, which tests the variable
//! as a JavaScript string (any non-empty value is on).

use std::path::Path;

use serde_json::{Map, Value};

use super::managed_drop_ins;
use crate::disk::fsops::FsError;
use crate::input::layout::Layout;
use crate::input::names;
use crate::input::sources::SourceFile;
use crate::input::sources::Sources;
use crate::input::sources::alone::SourceTree;
use crate::input::sources::expand::expand_source_with;
use crate::input::sources::host::HostManaged;
use crate::input::sources::host_reads::HostLog;
use crate::input::sources::{Section, SectionId};
use crate::plan::Warning;
use crate::runtime::mounted::Mount;

/// The environment variables by which a settings file's `env` turns every memory file off
/// (the managed one included), pinned off in the managed settings. Found by setting each of
/// the 2,063 variable names the 2.1.328 binary reads to `"1"` in the user settings, in groups
/// (`CLAUDE_CODE_DISABLE_CLAUDE_MDS`; `CLAUDE_CODE_SIMPLE`, the `--bare` mode;
/// `CLAUDE_CODE_SAFE_MODE`, the `--safe-mode`, from 2.1.129 or later): no other one drops
/// memory.
pub const MEMORY_SWITCHES: [&str; 3] = [
    "CLAUDE_CODE_DISABLE_CLAUDE_MDS",
    "CLAUDE_CODE_SIMPLE",
    "CLAUDE_CODE_SAFE_MODE",
];

/// Environment settings of the agent's that withhold or add memory without turning it off
/// (issue 38, `tests/fixtures/agent-settings-probe/`), pinned to `""` in the managed settings
/// too: `CLAUDE_CODE_AUTOMOUNT_ROOTS` (its folders skipped by the memory walk: the workspace's
/// `CLAUDE.md` and `CLAUDE.local.md` withheld), `CLAUDE_COWORK_MEMORY_INDEX_CONTENT` (its text
/// loaded as auto-memory no file holds), `CLAUDE_COWORK_MEMORY_PATH_OVERRIDE` (a folder's
/// `MEMORY.md` loaded as auto-memory). `""` is each one's unset value, in 2.1.128, 2.1.328 and
/// 2.1.333 alike (measured).
pub const MEMORY_ENV_PINS: [&str; 3] = [
    "CLAUDE_CODE_AUTOMOUNT_ROOTS",
    "CLAUDE_COWORK_MEMORY_INDEX_CONTENT",
    "CLAUDE_COWORK_MEMORY_PATH_OVERRIDE",
];

/// Top-level settings pinned in the managed settings, unless the host's own managed settings
/// set them: the CLI's main-thread `agent` (an agent file's text would replace Claude Code's
/// whole system prompt, above the managed guardrails) pinned to `""`, and `outputStyle` (a
/// style's text added to the system prompt) to `"default"`. Measured on 2.1.128, 2.1.328 and
/// 2.1.333 (the agent's `agent` and `outputStyle` change nothing, and the file is accepted
/// whole). Not `"claude"`: the agent's own `.claude/agents/claude.md` overrides the built-in
/// agent of that name, so the managed `"agent": "claude"` *selects* the agent's file (measured
/// on the three releases); not `null`: 2.1.128 rejects a managed file holding it as a whole,
/// which voids every pin.
pub const PROMPT_PINS: [(&str, &str); 2] = [("agent", ""), ("outputStyle", "default")];

/// The largest file of the host's managed folder clawmd reads.
pub(super) const MAX_HOST_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// The most files of the host's managed folder clawmd copies.
const MAX_HOST_FILES: usize = 64;

/// Reads the host's managed folder, when the deployment names one. A missing folder, an
/// unreadable file or a `managed-settings.json` that is not a JSON object stops the run: the
/// managed folder would hide the image's policy, and dropping it silently is not an option.
pub fn read_host_managed(layout: &Layout, log: &HostLog) -> Result<Option<HostManaged>, FsError> {
    let Some(dir) = &layout.host_managed_dir else {
        return Ok(None);
    };
    let mut host = HostManaged {
        dir: dir.clone(),
        claude_md: None,
        settings: None,
        files: Vec::new(),
        left_out: Vec::new(),
        notes: Vec::new(),
    };
    let mut drop_ins = None;
    let names = log
        .list(dir)
        .and_then(|names| names.ok_or_else(|| std::io::ErrorKind::NotFound.into()))
        .map_err(|err| FsError::Io {
            op: "list the host's managed-policy folder (hostManagedDir in clawmd.json)",
            path: dir.clone(),
            source: err,
        })?;
    for (name, _) in names {
        let path = dir.join(&name);
        let Some(name) = name
            .to_str()
            .filter(|n| crate::safe_name::validate_name(n).is_ok())
        else {
            host.left_out.push(path.display().to_string());
            continue;
        };
        if name == managed_drop_ins::DROP_IN_DIR {
            drop_ins = Some(path);
            continue;
        }
        let kind = log
            .kind(&path, false)
            .and_then(|kind| kind.ok_or_else(|| std::io::ErrorKind::NotFound.into()))
            .map_err(|err| FsError::Io {
                op: "inspect",
                path: path.clone(),
                source: err,
            })?;
        if kind != crate::file_kind::FileKind::File || host.files.len() >= MAX_HOST_FILES {
            host.left_out.push(path.display().to_string());
            continue;
        }
        let bytes = log
            .read_file(&path, MAX_HOST_FILE_BYTES)?
            .unwrap_or_default();
        match name {
            names::CLAUDE_MD => {
                // As every container-side source: its imports expanded, and the tree they
                // reach kept, so the section is what the release loads of that file alone.
                let at = layout.managed_mount.join(names::CLAUDE_MD);
                let view = log.view(&[Mount::new(&layout.managed_mount, dir)]);
                let expanded = expand_source_with(&view, &at, &bytes);
                host.notes
                    .extend(expanded.notes.iter().map(|note| note.to_string()));
                let tree = SourceTree::gather(&view, &at, bytes.clone());
                host.claude_md = Some(SourceFile {
                    original: (expanded.text != bytes).then(|| bytes.clone()),
                    text: expanded.text,
                    tree: Some(std::sync::Arc::new(tree)),
                });
            }
            names::MANAGED_SETTINGS => host.settings = Some(parse_settings(&path, &bytes)?),
            _ => host.files.push((name.to_owned(), bytes)),
        }
    }
    if let Some(folder) = drop_ins {
        managed_drop_ins::merge(log, &folder, &mut host)?;
    }
    Ok(Some(host))
}

pub(super) fn parse_settings(path: &Path, bytes: &[u8]) -> Result<Map<String, Value>, FsError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(not_settings(
            path,
            "it is JSON, but not an object".to_owned(),
        )),
        Err(err) => Err(not_settings(path, err.to_string())),
    }
}

fn not_settings(path: &Path, why: String) -> FsError {
    FsError::Io {
        op: "read managed settings from",
        path: path.to_owned(),
        source: std::io::Error::other(format!(
            "{why}; fix: make it the JSON object of Claude Code's managed settings, or remove it"
        )),
    }
}

/// The host's managed `CLAUDE.md` as the first section of the managed document (never
/// dropped over budget).
pub fn host_section(sources: &Sources) -> Option<Section> {
    let host = sources.host_managed.as_ref()?;
    let file = host.claude_md.as_ref()?;
    Some(Section {
        id: SectionId::new("managed-policy"),
        origin: format!(
            "{} (the host's managed policy)",
            host.dir.join(names::CLAUDE_MD).display()
        ),
        text: file.text.clone(),
        rank: None,
        file: crate::plan::ManagedPath::fragment("managed-policy.md"),
        link: None,
        scope: None,
        tree: file.tree.clone(),
        expected: Vec::new(),
        size: 0,
        group_owned: false,
        sealed: false,
        heading: None,
    })
}

/// The group's `managed-settings.json`: the host's managed settings (key order kept) with
/// [`MEMORY_SWITCHES`] set to `""` in `env`, and a warning for each switch the host's file
/// set to another value, and for what the host's folder holds that is not merged.
pub fn settings_file(sources: &Sources) -> (Vec<u8>, Vec<Warning>) {
    let host = sources.host_managed.as_ref();
    let mut settings = host.and_then(|h| h.settings.clone()).unwrap_or_default();
    let mut warnings = Vec::new();
    let file = host.map(|h| h.dir.join(names::MANAGED_SETTINGS));
    let env = settings
        .entry("env")
        .or_insert_with(|| Value::Object(Map::new()));
    if !env.is_object() {
        warnings.push(Warning::HostManaged {
            message: format!(
                "{}: `env` is not an object; clawmd's pins replace it",
                file.as_deref().unwrap_or(Path::new("")).display()
            ),
        });
        *env = Value::Object(Map::new());
    }
    if let Value::Object(env) = env {
        for name in MEMORY_ENV_PINS {
            env.entry(name.to_owned())
                .or_insert_with(|| Value::String(String::new()));
        }
        for switch in MEMORY_SWITCHES {
            let pinned = Value::String(String::new());
            if let Some(old) = env.insert(switch.to_owned(), pinned.clone())
                && old != pinned
            {
                warnings.push(Warning::HostManaged {
                    message: format!(
                        "{}: env.{switch} = {old} is replaced by \"\" in the groups' managed settings, so that memory stays on (fix: remove it from the host's file)",
                        file.as_deref().unwrap_or(Path::new("")).display()
                    ),
                });
            }
        }
    }
    if let Some(host) = host {
        warnings.extend(host.notes.iter().map(|note| Warning::HostManaged {
            message: note.clone(),
        }));
    }
    for (key, pin) in PROMPT_PINS {
        settings
            .entry(key.to_owned())
            .or_insert_with(|| Value::String(pin.to_owned()));
    }
    if let Some(host) = host
        && !host.left_out.is_empty()
    {
        warnings.push(Warning::HostManaged {
            message: format!(
                "not merged into the groups' managed folders (only regular files at the top of {} are: CLAUDE.md, managed-settings.json and the others copied): {}",
                host.dir.display(),
                host.left_out.join(", ")
            ),
        });
    }
    let mut bytes = serde_json::to_vec_pretty(&Value::Object(settings)).unwrap_or_default();
    bytes.push(b'\n');
    (bytes, warnings)
}

/// The host's other managed files, copied as they are into the group's managed folder.
pub fn host_files(sources: &Sources) -> impl Iterator<Item = (&str, &[u8])> {
    sources
        .host_managed
        .iter()
        .flat_map(|host| host.files.iter())
        .map(|(name, bytes)| (name.as_str(), bytes.as_slice()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::PathBuf;

    #[test]
    fn the_switches_are_pinned_off_and_the_hosts_settings_kept() {
        let (bytes, warnings) = settings_file(&Sources::default());
        assert!(warnings.is_empty());
        let value: Value = serde_json::from_slice(&bytes).unwrap();
        for switch in MEMORY_SWITCHES.iter().chain(&MEMORY_ENV_PINS) {
            assert_eq!(value["env"][switch], "", "{switch}");
        }
        assert_eq!(value["agent"], "");
        assert_eq!(value["outputStyle"], "default");
        let sources = Sources {
            host_managed: Some(HostManaged {
            dir: PathBuf::from("/policy"),
            claude_md: None,
            settings: Some(
                serde_json::from_str(
                    r#"{"permissions": {"deny": ["Bash(rm:*)"]}, "env": {"X": "1", "CLAUDE_CODE_SIMPLE": "1"}}"#,
                )
                .unwrap(),
            ),
            files: Vec::new(),
            left_out: vec!["/policy/.claude".to_owned()],
            notes: Vec::new(),
            }),
            ..Sources::default()
        };
        let (bytes, warnings) = settings_file(&sources);
        let value: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(value["permissions"]["deny"][0], "Bash(rm:*)");
        assert_eq!(value["env"]["X"], "1");
        assert_eq!(value["env"]["CLAUDE_CODE_SIMPLE"], "");
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].to_string().contains("CLAUDE_CODE_SIMPLE"));
        assert!(warnings[1].to_string().contains("/policy/.claude"));
    }

    #[test]
    fn the_hosts_folder_is_read_and_its_claude_md_imports_expanded_from_there() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("policy");
        std::fs::create_dir_all(dir.join("managed-settings.d")).unwrap();
        std::fs::write(dir.join("CLAUDE.md"), "ORG POLICY\n@./more.md\n").unwrap();
        std::fs::write(dir.join("more.md"), "MORE POLICY\n").unwrap();
        std::fs::write(dir.join("managed-settings.json"), "\u{feff}{\"a\": 1}").unwrap();
        // Drop-ins, in JavaScript's order (10 before 9), merged over managed-settings.json;
        // a link is left out, what Claude Code passes over is left as it is.
        std::fs::write(
            dir.join("managed-settings.d/10.json"),
            "{\"a\": 2, \"b\": [1]}",
        )
        .unwrap();
        std::fs::write(
            dir.join("managed-settings.d/9.json"),
            "{\"a\": 3, \"b\": [1, 2]}",
        )
        .unwrap();
        std::fs::write(dir.join("managed-settings.d/.x.json"), "{\"a\": 4}").unwrap();
        std::fs::write(dir.join("managed-settings.d/x.txt"), "{\"a\": 5}").unwrap();
        std::fs::write(dir.join("managed-settings.d/8.json"), "{\"a\": \"text\"}").unwrap();
        std::os::unix::fs::symlink("9.json", dir.join("managed-settings.d/link.json")).unwrap();
        let mut layout = Layout::under_root(root.path());
        layout.host_managed_dir = Some(dir.clone());
        let host = read_host_managed(&layout, &HostLog::new())
            .unwrap()
            .unwrap();
        let claude_md = host.claude_md.unwrap();
        assert!(claude_md.tree.is_some());
        let text = String::from_utf8(claude_md.text).unwrap();
        assert!(
            text.contains("ORG POLICY") && text.contains("MORE POLICY"),
            "{text}"
        );
        assert!(
            crate::loader::content::scan_markdown(&text)
                .unwrap()
                .imports
                .is_empty(),
            "{text}"
        );
        let settings = host.settings.unwrap();
        assert_eq!(
            (&settings["a"], &settings["b"]),
            (&json!(3), &json!([1, 2]))
        );
        assert_eq!(host.notes.len(), 1, "{:?}", host.notes);
        assert!(host.notes[0].contains("8.json") && host.notes[0].contains("`a`"));
        assert_eq!(
            host.files,
            [("more.md".to_owned(), b"MORE POLICY\n".to_vec())]
        );
        assert_eq!(
            host.left_out,
            [dir.join("managed-settings.d/link.json")
                .display()
                .to_string()]
        );
        std::fs::write(dir.join("managed-settings.json"), "[1]").unwrap();
        let err =
            crate::error::chain_text(&read_host_managed(&layout, &HostLog::new()).unwrap_err());
        assert!(
            err.contains("not an object") && err.contains("fix:"),
            "{err}"
        );
        layout.host_managed_dir = Some(root.path().join("nowhere"));
        assert!(read_host_managed(&layout, &HostLog::new()).is_err());
    }
}
