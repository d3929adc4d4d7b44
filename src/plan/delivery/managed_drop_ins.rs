//! The drop-ins of the host's managed policy (`<hostManagedDir>/managed-settings.d/*.json`),
//! merged into the groups' `managed-settings.json` as Claude Code merges them, before
//! clawmd's pins are set.
//!
//! Recorded on every corpus release that reads drop-ins (crates/clawmd-loader, cases 86 to
//! 99; `clawmd_loader::managed`): Claude Code reads the files of `managed-settings.d/` named
//! `*.json`, not starting with `.`, in JavaScript's `sort()` order, after
//! `managed-settings.json`, and merges each over what came before: `env` key by key, lists
//! concatenated (without repeats), other values replaced. So a drop-in's
//! `env.CLAUDE_CODE_DISABLE_CLAUDE_MDS = "1"` wins over a `""` pin in `managed-settings.json`
//! (case 92): copied as it is, a host's drop-in would undo clawmd's pins. Merged into the one
//! file, it is followed by the pins like every key of the host's file.
//!
//! Only what merges the same way on every release is merged: a drop-in with a key whose
//! merge differs between releases (`fallbackModel`, `modelPicker`, `extraKnownMarketplaces`,
//! `managedMcpServers` set on both sides), or whose type differs from the value it would
//! merge over (a release that validates keys one by one drops such a key alone and keeps the
//! earlier value), is left out whole and named in a `host-managed` warning, as are links and
//! names that are not UTF-8. A drop-in that is not a JSON object stops the run, naming it.

use std::path::Path;

use serde_json::{Map, Value};

use crate::disk::fsops::FsError;
use crate::file_kind::FileKind;
use crate::input::sources::host::HostManaged;
use crate::input::sources::host_reads::HostLog;

/// The drop-in folder beside `managed-settings.json`.
pub const DROP_IN_DIR: &str = "managed-settings.d";

/// The most drop-ins clawmd reads from the host's folder.
const MAX_DROP_INS: usize = 64;

/// Keys merged differently by different releases (2.1.328 replaces or merges them shallowly,
/// 2.1.128 deep-merges them); a drop-in that sets one the earlier files set too is left out.
const RELEASE_DEPENDENT: [&str; 4] = [
    "fallbackModel",
    "modelPicker",
    "extraKnownMarketplaces",
    "managedMcpServers",
];

/// Reads the host's drop-in folder `folder` and merges its drop-ins into `host.settings`.
pub fn merge(log: &HostLog, folder: &Path, host: &mut HostManaged) -> Result<(), FsError> {
    let list_error = |err| FsError::Io {
        op: "list the host's managed drop-in folder",
        path: folder.to_owned(),
        source: err,
    };
    if log.kind(folder, false).map_err(list_error)? != Some(FileKind::Dir) {
        host.left_out.push(folder.display().to_string());
        return Ok(());
    }
    let entries = log.list(folder).map_err(list_error)?.unwrap_or_default();
    let mut named = Vec::new();
    for (name, _) in entries {
        let path = folder.join(&name);
        let Some(name) = name.to_str() else {
            host.left_out.push(path.display().to_string());
            continue;
        };
        // What Claude Code itself passes over is left as it is (it changes nothing).
        if !name.ends_with(".json") || name.starts_with('.') {
            continue;
        }
        match log.kind(&path, false).map_err(|err| FsError::Io {
            op: "inspect",
            path: path.clone(),
            source: err,
        })? {
            Some(FileKind::File) => named.push((name.encode_utf16().collect::<Vec<u16>>(), path)),
            Some(FileKind::Dir) => {}
            _ => host.left_out.push(path.display().to_string()),
        }
    }
    // JavaScript's `sort()`: by UTF-16 code units.
    named.sort();
    if named.len() > MAX_DROP_INS {
        for (_, path) in named.drain(MAX_DROP_INS..) {
            host.left_out.push(path.display().to_string());
        }
    }
    for (_, path) in named {
        let bytes = log
            .read_file(&path, super::managed::MAX_HOST_FILE_BYTES)?
            .unwrap_or_default();
        let drop_in = super::managed::parse_settings(&path, &bytes)?;
        let settings = host.settings.get_or_insert_with(Map::new);
        match conflict(settings, &drop_in, "") {
            Some(key) => host.notes.push(format!(
                "{}: not merged into the groups' managed settings: `{key}` is merged differently by different Claude Code releases, or changes the type of the value it would merge over (fix: move it into the host's managed-settings.json)",
                path.display()
            )),
            None => merge_object(settings, drop_in),
        }
    }
    Ok(())
}

/// The first key (as a dotted path) of `over` whose merge into `into` is not the same on every
/// release, if any.
fn conflict(into: &Map<String, Value>, over: &Map<String, Value>, at: &str) -> Option<String> {
    for (key, value) in over {
        let path = match at {
            "" => key.clone(),
            _ => format!("{at}.{key}"),
        };
        let Some(old) = into.get(key) else {
            continue;
        };
        if at.is_empty() && RELEASE_DEPENDENT.contains(&key.as_str()) {
            return Some(path);
        }
        match (old, value) {
            (Value::Object(old), Value::Object(new)) => {
                if let Some(found) = conflict(old, new, &path) {
                    return Some(found);
                }
            }
            (Value::Array(_), Value::Array(_)) => {}
            (Value::Null, _) | (_, Value::Null) => return Some(path),
            (old, new) if std::mem::discriminant(old) != std::mem::discriminant(new) => {
                return Some(path);
            }
            _ => {}
        }
    }
    None
}

/// lodash's `mergeWith` with Claude Code's customiser: objects merged key by key, lists
/// concatenated without repeats (of primitive values: two objects are never the same), any
/// other value replaced.
fn merge_object(into: &mut Map<String, Value>, over: Map<String, Value>) {
    for (key, value) in over {
        match (into.get_mut(&key), value) {
            (Some(Value::Object(old)), Value::Object(new)) => merge_object(old, new),
            (Some(Value::Array(old)), Value::Array(new)) => {
                for item in new {
                    let primitive = !matches!(item, Value::Object(_) | Value::Array(_));
                    if !(primitive && old.contains(&item)) {
                        old.push(item);
                    }
                }
            }
            (_, value) => {
                into.insert(key, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => unreachable!(),
        }
    }

    #[test]
    fn drop_ins_merge_as_claude_code_merges_them() {
        let mut base = map(json!({
            "env": {"A": "1", "CLAUDE_CODE_DISABLE_CLAUDE_MDS": ""},
            "claudeMdExcludes": ["/a", "/b"],
            "claudeMd": "BASE",
        }));
        let drop_in = map(json!({
            "env": {"CLAUDE_CODE_DISABLE_CLAUDE_MDS": "1"},
            "claudeMdExcludes": ["/b", "/c"],
            "claudeMd": "",
            "permissions": {"deny": ["Bash"]},
        }));
        assert_eq!(conflict(&base, &drop_in, ""), None);
        merge_object(&mut base, drop_in);
        assert_eq!(
            Value::Object(base),
            json!({
                "env": {"A": "1", "CLAUDE_CODE_DISABLE_CLAUDE_MDS": "1"},
                "claudeMdExcludes": ["/a", "/b", "/c"],
                "claudeMd": "",
                "permissions": {"deny": ["Bash"]},
            })
        );
    }

    #[test]
    fn what_releases_merge_differently_is_found() {
        let base = map(json!({"env": {"A": "1"}, "fallbackModel": ["x"], "claudeMd": "T"}));
        for (over, key) in [
            (json!({"fallbackModel": ["y"]}), "fallbackModel"),
            (json!({"env": "x"}), "env"),
            (json!({"env": {"A": 1}}), "env.A"),
            (json!({"claudeMd": 5}), "claudeMd"),
            (json!({"claudeMd": null}), "claudeMd"),
        ] {
            assert_eq!(conflict(&base, &map(over), ""), Some(key.to_owned()));
        }
        assert_eq!(
            conflict(
                &base,
                &map(json!({"modelPicker": {}, "env": {"B": "2"}})),
                ""
            ),
            None
        );
    }
}
