//! Guards: what keeps the agent of a Codex, Gemini CLI or opencode group from dropping,
//! shrinking, replacing or rewriting its composed document with files of its own.
//!
//! The agent writes its group folder (the workspace) and its home. Each backend reads
//! configuration from both, and some of that configuration can take the composed document
//! away (measured with the real CLIs in `tests/e2e/backends.rs`; docs/delivery.md, "Guardrails
//! on every backend"):
//!
//! * **Codex 0.169.0** reads `AGENTS.override.md` in place of `AGENTS.md`, and
//!   `project_doc_max_bytes` from `~/.codex/config.toml` (or a trusted project's
//!   `.codex/config.toml`). Guard: the composed document is bound read-only at
//!   `<workspace>/AGENTS.override.md` too, and `/etc/codex/managed_config.toml` (managed
//!   configuration, which wins over user and project configuration) pins
//!   `project_doc_max_bytes` to the budget.
//! * **Gemini CLI 0.61.0** runs `BeforeModel` hooks from `.gemini/settings.json` (folder or
//!   home), which may rewrite the request. Guard: the system settings file
//!   `/etc/gemini-cli/settings.json` (merged last, so it wins over user and workspace settings)
//!   holds `hooksConfig.enabled: false`, merged into the runner's own system settings.
//! * **opencode 1.18.33** loads plugins (whose `experimental.chat.system.transform` hook
//!   rewrites the system prompt) from `{plugin,plugins}/` of every config folder
//!   (`<workspace>/.opencode`, `~/.opencode`, `~/.config/opencode`) and from the `plugin` list
//!   of any config file (`<workspace>/opencode.json[c]`, those folders' `opencode.json[c]`).
//!   Guard: `<workspace>/.opencode` and `~/.opencode` are bound read-only to a folder holding
//!   only the `.gitignore` opencode writes (it refuses to start when it cannot write it),
//!   `~/.config` to a folder holding only `opencode/.gitignore`, and the workspace's
//!   `opencode.json` and `opencode.jsonc` to an empty object.
//!
//! Every mount point lies directly in the workspace or the home, or under `/etc`, so the agent
//! cannot move it aside: a mount point cannot be renamed, nor can its parent (the workspace
//! and home mounts, `/etc`). A bind deeper in a folder the agent writes would not hold in a
//! running container: the agent renames the folder above it, and the bind goes with it
//! (measured; which is why `~/.config` is bound whole rather than `~/.config/opencode`).
//!
//! Everything here is pure: [`guard`] returns the files to write under the group's bind folder
//! (`Layout::bind_dir`) and the binds to make.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use super::{Budgets, Provider};

/// The folder, inside a group's bind folder, that holds its guard files.
pub const GUARD_DIR: &str = "guard";

/// Codex's managed configuration file, which wins over the user's and a project's.
pub const CODEX_MANAGED_CONFIG: &str = "/etc/codex/managed_config.toml";
/// Gemini CLI's system settings file, merged last (wins over user and workspace settings).
pub const GEMINI_SYSTEM_SETTINGS: &str = "/etc/gemini-cli/settings.json";

/// The `.gitignore` opencode writes in each of its config folders (opencode 1.18.33); with it
/// present opencode writes nothing there at start.
pub const OPENCODE_GITIGNORE: &str =
    "node_modules\npackage.json\npackage-lock.json\nbun.lock\n.gitignore";

/// The deployment's settings for guards (`clawmd.json`: `agentHome`, `geminiSystemSettings`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardSettings {
    /// The agent's home inside the container (default `/home/node`).
    pub agent_home: PathBuf,
    /// The runner's own Gemini system settings on the host, merged into the guard's.
    pub gemini_system_settings: Option<PathBuf>,
}

impl Default for GuardSettings {
    fn default() -> Self {
        GuardSettings {
            agent_home: PathBuf::from(crate::layout::DEFAULT_AGENT_HOME),
            gemini_system_settings: None,
        }
    }
}

/// The most bytes of the runner's Gemini system settings clawmd reads.
pub const GEMINI_BASE_LIMIT: u64 = 1024 * 1024;

/// The guards of one run: each backend's, worked out once (the runner's files read once).
#[derive(Debug, Clone, Default)]
pub struct Guards {
    codex: Option<Guard>,
    gemini: Option<Guard>,
    opencode: Option<Guard>,
}

impl Guards {
    /// Every backend's guard for this deployment.
    pub fn new(
        budgets: &Budgets,
        workspace: &Path,
        settings: &GuardSettings,
    ) -> Result<Self, GuardError> {
        let paths = GuardPaths {
            workspace,
            home: &settings.agent_home,
        };
        let base = match &settings.gemini_system_settings {
            None => None,
            Some(path) => Some((
                path.clone(),
                crate::fsops::read_host_file(path, GEMINI_BASE_LIMIT)
                    .map_err(GuardError::Read)?
                    .ok_or_else(|| GuardError::GeminiBase {
                        path: path.clone(),
                        reason: "the file does not exist".to_owned(),
                    })?,
            )),
        };
        let base = base.as_ref().map(|(p, b)| (p.as_path(), b.as_slice()));
        Ok(Guards {
            codex: guard(Provider::Codex, budgets, paths, None)?,
            gemini: guard(Provider::Gemini, budgets, paths, base)?,
            opencode: guard(Provider::Opencode, budgets, paths, None)?,
        })
    }

    /// The guard of `provider`'s groups.
    pub fn of(&self, provider: Provider) -> Option<&Guard> {
        match provider {
            Provider::Claude => None,
            Provider::Codex => self.codex.as_ref(),
            Provider::Gemini => self.gemini.as_ref(),
            Provider::Opencode => self.opencode.as_ref(),
        }
    }
}

/// What a guard promises about the composed document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Guarantee {
    /// No file the agent can write drops, shrinks, replaces or rewrites the document, in a
    /// container built from `clawmd mounts` (measured on the pinned release).
    CannotBeDropped,
}

/// One file of a guard, under `<bind_dir>/guard/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardFile {
    /// The path under the guard folder (`codex/managed_config.toml`, …).
    pub path: &'static str,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// Where a guard bind's host side is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardSource {
    /// The group's composed entry point (wherever the mount table binds it from).
    EntryPoint,
    /// A file or folder under `<bind_dir>/guard/`.
    Guard(&'static str),
}

/// One read-only bind a guard needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardBind {
    /// What is bound.
    pub source: GuardSource,
    /// Where, in the container.
    pub container: PathBuf,
}

/// A backend's guard: the files to write and the read-only binds to make.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Guard {
    /// Files under `<bind_dir>/guard/` (folders are created for them).
    pub files: Vec<GuardFile>,
    /// Read-only binds, in the order to apply them (after the workspace and the home).
    pub binds: Vec<GuardBind>,
}

impl Guard {
    /// The guard's binds as `(host, container)` pairs, all read-only: `entry_point` is the
    /// host file the mount table binds the composed document from, `guard_root` the group's
    /// `<bind_dir>/guard`.
    pub fn binds(&self, entry_point: &Path, guard_root: &Path) -> Vec<(PathBuf, PathBuf)> {
        self.binds
            .iter()
            .map(|bind| {
                let host = match bind.source {
                    GuardSource::EntryPoint => entry_point.to_owned(),
                    GuardSource::Guard(path) => guard_root.join(path),
                };
                (host, bind.container.clone())
            })
            .collect()
    }
}

/// Where the container's paths are.
#[derive(Debug, Clone, Copy)]
pub struct GuardPaths<'a> {
    /// The agent's working directory (the group folder).
    pub workspace: &'a Path,
    /// The agent's home.
    pub home: &'a Path,
}

/// Errors a guard can have (a runner's settings file that cannot be merged).
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    /// The runner's own Gemini system settings cannot be read.
    #[error(
        "cannot read the runner's Gemini system settings ({0}); fix the path of `geminiSystemSettings` in clawmd.json"
    )]
    Read(#[source] crate::fsops::FsError),
    /// The runner's own Gemini system settings are not a JSON object.
    #[error(
        "{path}: the runner's Gemini system settings must be a JSON object ({reason}); fix the file or remove `geminiSystemSettings` from clawmd.json"
    )]
    GeminiBase {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// The guard of `provider`'s groups, or `None` for Claude Code (whose guardrails are its own
/// delivery's). `gemini_base`: the runner's own Gemini system settings (path and bytes), kept
/// whole with clawmd's keys merged in.
pub fn guard(
    provider: Provider,
    budgets: &Budgets,
    paths: GuardPaths<'_>,
    gemini_base: Option<(&Path, &[u8])>,
) -> Result<Option<Guard>, GuardError> {
    let ws = paths.workspace;
    let home = paths.home;
    let guard = match provider {
        Provider::Claude => return Ok(None),
        Provider::Codex => Guard {
            files: vec![GuardFile {
                path: "codex/managed_config.toml",
                bytes: codex_managed_config(budgets.codex).into_bytes(),
            }],
            binds: vec![
                GuardBind {
                    source: GuardSource::EntryPoint,
                    container: ws.join("AGENTS.override.md"),
                },
                GuardBind {
                    source: GuardSource::Guard("codex/managed_config.toml"),
                    container: PathBuf::from(CODEX_MANAGED_CONFIG),
                },
            ],
        },
        Provider::Gemini => Guard {
            files: vec![GuardFile {
                path: "gemini/settings.json",
                bytes: gemini_system_settings(gemini_base)?,
            }],
            binds: vec![GuardBind {
                source: GuardSource::Guard("gemini/settings.json"),
                container: PathBuf::from(GEMINI_SYSTEM_SETTINGS),
            }],
        },
        Provider::Opencode => {
            let dir = GuardSource::Guard("opencode/config");
            let empty = GuardSource::Guard("opencode/opencode.json");
            Guard {
                files: vec![
                    GuardFile {
                        path: "opencode/config/.gitignore",
                        bytes: OPENCODE_GITIGNORE.as_bytes().to_vec(),
                    },
                    GuardFile {
                        path: "opencode/xdg-config/opencode/.gitignore",
                        bytes: OPENCODE_GITIGNORE.as_bytes().to_vec(),
                    },
                    GuardFile {
                        path: "opencode/opencode.json",
                        bytes: b"{}\n".to_vec(),
                    },
                ],
                binds: vec![
                    GuardBind {
                        source: dir,
                        container: ws.join(".opencode"),
                    },
                    GuardBind {
                        source: empty,
                        container: ws.join("opencode.json"),
                    },
                    GuardBind {
                        source: empty,
                        container: ws.join("opencode.jsonc"),
                    },
                    GuardBind {
                        source: dir,
                        container: home.join(".opencode"),
                    },
                    GuardBind {
                        source: GuardSource::Guard("opencode/xdg-config"),
                        container: home.join(".config"),
                    },
                ],
            }
        }
    };
    Ok(Some(guard))
}

/// Codex's managed configuration: `project_doc_max_bytes` at least the budget (the document is
/// composed within it, so Codex reads all of it).
fn codex_managed_config(budget: u64) -> String {
    format!(
        "# Written by clawmd: keeps the composed AGENTS.md whole (managed configuration wins over\n\
         # ~/.codex/config.toml and a trusted project's .codex/config.toml).\n\
         project_doc_max_bytes = {budget}\n"
    )
}

/// Gemini's system settings: the runner's own, with `hooksConfig.enabled` set to false.
fn gemini_system_settings(base: Option<(&Path, &[u8])>) -> Result<Vec<u8>, GuardError> {
    let mut settings = match base {
        None => Map::new(),
        Some((path, bytes)) => {
            let fail = |reason: String| GuardError::GeminiBase {
                path: path.to_owned(),
                reason,
            };
            let text = std::str::from_utf8(bytes).map_err(|e| fail(e.to_string()))?;
            match serde_json::from_str::<Value>(text).map_err(|e| fail(e.to_string()))? {
                Value::Object(map) => map,
                other => return Err(fail(format!("found {}", json_kind(&other)))),
            }
        }
    };
    let hooks = settings
        .entry("hooksConfig")
        .or_insert_with(|| Value::Object(Map::new()));
    if !hooks.is_object() {
        *hooks = Value::Object(Map::new());
    }
    if let Value::Object(hooks) = hooks {
        hooks.insert("enabled".to_owned(), Value::Bool(false));
    }
    let mut bytes = serde_json::to_vec_pretty(&Value::Object(settings)).expect("JSON value");
    bytes.push(b'\n');
    Ok(bytes)
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The guarantee a group of a flat `provider` has in a container built from `clawmd mounts`
/// (`None` for Claude Code, whose guarantee depends on its delivery mode).
pub fn guarantee(provider: Provider) -> Option<Guarantee> {
    match provider {
        Provider::Claude => None,
        Provider::Codex | Provider::Gemini | Provider::Opencode => Some(Guarantee::CannotBeDropped),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths() -> GuardPaths<'static> {
        GuardPaths {
            workspace: Path::new("/workspace/agent"),
            home: Path::new("/home/node"),
        }
    }

    #[test]
    fn claude_has_no_guard_here() {
        assert_eq!(
            guard(Provider::Claude, &Budgets::default(), paths(), None).unwrap(),
            None
        );
    }

    #[test]
    fn codex_pins_the_budget_and_binds_the_override() {
        let budgets = Budgets {
            codex: 65536,
            ..Budgets::default()
        };
        let guard = guard(Provider::Codex, &budgets, paths(), None)
            .unwrap()
            .unwrap();
        let config = String::from_utf8(guard.files[0].bytes.clone()).unwrap();
        assert!(config.lines().any(|l| l == "project_doc_max_bytes = 65536"));
        assert_eq!(
            guard.binds[0],
            GuardBind {
                source: GuardSource::EntryPoint,
                container: "/workspace/agent/AGENTS.override.md".into()
            }
        );
        assert_eq!(guard.binds[1].container, Path::new(CODEX_MANAGED_CONFIG));
    }

    #[test]
    fn gemini_keeps_the_runners_settings_and_turns_hooks_off() {
        let base = br#"{"security":{"auth":{"selectedType":"gemini-api-key"}},"hooksConfig":{"enabled":true,"notifications":false}}"#;
        let guard = guard(
            Provider::Gemini,
            &Budgets::default(),
            paths(),
            Some((Path::new("/srv/gemini.json"), base)),
        )
        .unwrap()
        .unwrap();
        let merged: Value = serde_json::from_slice(&guard.files[0].bytes).unwrap();
        assert_eq!(merged["security"]["auth"]["selectedType"], "gemini-api-key");
        assert_eq!(merged["hooksConfig"]["enabled"], false);
        assert_eq!(merged["hooksConfig"]["notifications"], false);
        assert_eq!(guard.binds[0].container, Path::new(GEMINI_SYSTEM_SETTINGS));
        // Without a base: only the pin.
        let alone = super::guard(Provider::Gemini, &Budgets::default(), paths(), None)
            .unwrap()
            .unwrap();
        let alone: Value = serde_json::from_slice(&alone.files[0].bytes).unwrap();
        assert_eq!(
            alone,
            serde_json::json!({"hooksConfig": {"enabled": false}})
        );
    }

    #[test]
    fn a_gemini_base_that_is_not_an_object_is_refused_naming_the_file() {
        for bad in [&b"[1]"[..], b"{", b"\xff"] {
            let err = guard(
                Provider::Gemini,
                &Budgets::default(),
                paths(),
                Some((Path::new("/srv/gemini.json"), bad)),
            )
            .unwrap_err();
            assert!(err.to_string().contains("/srv/gemini.json"), "{err}");
        }
    }

    #[test]
    fn opencode_closes_every_config_folder_and_project_file() {
        let guard = guard(Provider::Opencode, &Budgets::default(), paths(), None)
            .unwrap()
            .unwrap();
        let points: Vec<_> = guard.binds.iter().map(|b| b.container.clone()).collect();
        for expected in [
            "/workspace/agent/.opencode",
            "/workspace/agent/opencode.json",
            "/workspace/agent/opencode.jsonc",
            "/home/node/.opencode",
            "/home/node/.config",
        ] {
            assert!(points.contains(&PathBuf::from(expected)), "{expected}");
        }
        // Every source is a guard file or the folder of one.
        for bind in &guard.binds {
            let GuardSource::Guard(path) = bind.source else {
                panic!("{bind:?}")
            };
            assert!(
                guard
                    .files
                    .iter()
                    .any(|f| f.path == path || f.path.starts_with(&format!("{path}/"))),
                "{path}"
            );
        }
    }
}
