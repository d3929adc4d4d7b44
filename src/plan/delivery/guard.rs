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
//! Everything here is pure but [`Bases::read`] (the runner's own files, read once per run with
//! the shared sources): [`entries`] are the files a group's plan wants under its bind folder
//! (`Layout::bind_dir`), diffed and applied with the rest of the plan under the group's lock
//! (a guard no longer wanted is removed like any other stale file), and [`guard`] adds the
//! binds `clawmd mounts` lists.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use super::{DocumentBudgets, Provider};
pub use crate::input::sources::host::Bases;
use crate::input::sources::host_reads::HostLog;
use crate::plan::{Content, Desired, ManagedPath, Place};

/// The folder, inside a group's bind folder, that holds its guard files.
pub const GUARD_DIR: &str = "guard";

/// Every folder a guard file can be in, relative to the group's bind folder, parents first:
/// compose opens the ones that exist (to remove the files of a guard no longer wanted) and
/// creates the ones its plan writes in.
pub const GUARD_DIRS: [&str; 7] = [
    GUARD_DIR,
    "guard/codex",
    "guard/gemini",
    "guard/opencode",
    OPENCODE_CONFIG_DIR,
    OPENCODE_XDG_DIR,
    "guard/opencode/xdg-config/opencode",
];

/// The folder bound at opencode's workspace and home config folders.
const OPENCODE_CONFIG_DIR: &str = "guard/opencode/config";
/// The folder bound at the agent's `~/.config`.
const OPENCODE_XDG_DIR: &str = "guard/opencode/xdg-config";

/// Codex's managed configuration file, which wins over the user's and a project's.
pub const CODEX_MANAGED_CONFIG: &str = "/etc/codex/managed_config.toml";
/// Gemini CLI's system settings file, merged last (wins over user and workspace settings).
pub const GEMINI_SYSTEM_SETTINGS: &str = "/etc/gemini-cli/settings.json";

/// The `.gitignore` opencode writes in each of its config folders (opencode 1.18.33); with it
/// present opencode writes nothing there at start.
pub const OPENCODE_GITIGNORE: &str =
    "node_modules\npackage.json\npackage-lock.json\nbun.lock\n.gitignore";

/// The deployment's settings for the guards' binds (`clawmd.json`: `agentHome`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardSettings {
    /// The agent's home inside the container (default `/home/node`).
    pub agent_home: PathBuf,
}

impl Default for GuardSettings {
    fn default() -> Self {
        GuardSettings {
            agent_home: PathBuf::from(crate::input::layout::DEFAULT_AGENT_HOME),
        }
    }
}

/// The most bytes of the runner's Gemini system settings clawmd reads.
pub const GEMINI_BASE_LIMIT: u64 = 1024 * 1024;

impl Bases {
    /// Reads the runner's files `layout` names (`Layout::gemini_system_settings`).
    pub fn read(layout: &crate::input::layout::Layout, log: &HostLog) -> Result<Self, GuardError> {
        let base = match &layout.gemini_system_settings {
            None => None,
            Some(path) => Some((path.clone(), read_runner_file(path, log)?)),
        };
        let base = base.as_ref().map(|(p, b)| (p.as_path(), b.as_slice()));
        let codex_config = match &layout.codex_managed_config {
            None => None,
            Some(path) => Some(codex_base(path, &read_runner_file(path, log)?)?),
        };
        Ok(Bases {
            gemini_settings: gemini_system_settings(base)?,
            codex_config,
        })
    }

    /// The bases without any runner file (made once: every spawn's binds ask for them).
    pub fn builtin() -> Self {
        static BUILTIN: std::sync::OnceLock<Bases> = std::sync::OnceLock::new();
        BUILTIN
            .get_or_init(|| Bases {
                gemini_settings: gemini_system_settings(None).expect("no base cannot fail"),
                codex_config: None,
            })
            .clone()
    }
}

impl Default for Bases {
    fn default() -> Self {
        Bases::builtin()
    }
}

/// A runner's file the guards merge: its bytes (a missing file is an error naming it).
fn read_runner_file(path: &Path, log: &HostLog) -> Result<Vec<u8>, GuardError> {
    log.read_file(path, GEMINI_BASE_LIMIT)
        .map_err(GuardError::Read)?
        .ok_or_else(|| GuardError::RunnerFile {
            path: path.to_owned(),
            reason: "the file does not exist".to_owned(),
        })
}

/// The runner's Codex managed configuration, checked for the merge: clawmd puts its
/// `project_doc_max_bytes` first (a top-level key before any table, whatever the runner's file
/// holds), so the file must be UTF-8 and must not name that key anywhere (a second one would
/// make the file invalid TOML, which Codex refuses).
fn codex_base(path: &Path, bytes: &[u8]) -> Result<String, GuardError> {
    let fail = |reason: &str| GuardError::RunnerFile {
        path: path.to_owned(),
        reason: reason.to_owned(),
    };
    let text = std::str::from_utf8(bytes).map_err(|_| fail("it is not UTF-8"))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.contains("project_doc_max_bytes") {
        return Err(fail(
            "it sets project_doc_max_bytes, which clawmd sets to the Codex budget: remove it from the file (set `budgets.codex` in clawmd.json instead)",
        ));
    }
    Ok(text.to_owned())
}

/// What a guard promises about the composed document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Guarantee {
    /// No file the agent can write drops, shrinks, replaces or rewrites the document, in a
    /// container built from `clawmd mounts` (measured on the pinned release).
    CannotBeDropped,
}

/// One file of a guard, in one of [`GUARD_DIRS`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardFile {
    /// Its folder, relative to the bind folder (`guard/codex`, …).
    pub dir: &'static str,
    /// Its name.
    pub name: &'static str,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// Where a guard bind's host side is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardSource {
    /// The group's composed entry point (wherever the mount table binds it from).
    EntryPoint,
    /// A file or folder under the bind folder (`guard/…`).
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
    /// Files in [`GUARD_DIRS`] (compose plans them: [`entries`]).
    pub files: Vec<GuardFile>,
    /// Read-only binds, in the order to apply them (after the workspace and the home).
    pub binds: Vec<GuardBind>,
}

impl Guard {
    /// The guard's binds as `(host, container)` pairs, all read-only: `entry_point` is the
    /// host file the mount table binds the composed document from, `bind_dir` the group's
    /// bind folder.
    pub fn binds(&self, entry_point: &Path, bind_dir: &Path) -> Vec<(PathBuf, PathBuf)> {
        self.binds
            .iter()
            .map(|bind| {
                let host = match bind.source {
                    GuardSource::EntryPoint => entry_point.to_owned(),
                    GuardSource::Guard(path) => bind_dir.join(path),
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
    #[error("cannot read the runner's Gemini system settings")]
    Read(#[source] crate::disk::fsops::FsError),
    /// A runner's own file for a guard (`codexManagedConfig`, `geminiSystemSettings`) cannot
    /// be read or merged.
    #[error("{path}: the runner's file cannot be merged into clawmd's guard: {reason}")]
    RunnerFile {
        /// The file.
        path: PathBuf,
        /// What is wrong, and the fix.
        reason: String,
    },
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

impl GuardError {
    /// The fix said after this error's causes (`error::chain_text`), when it has one.
    pub fn fix_after_causes(&self) -> Option<&'static str> {
        match self {
            GuardError::Read(_) => Some("fix the path of `geminiSystemSettings` in clawmd.json"),
            GuardError::RunnerFile { .. } | GuardError::GeminiBase { .. } => None,
        }
    }
}

/// The guard of `provider`'s groups, or `None` for Claude Code (whose guardrails are its own
/// delivery's): its files (`bases`: the runner's own, merged) and its binds.
pub fn guard(
    provider: Provider,
    budgets: &DocumentBudgets,
    paths: GuardPaths<'_>,
    bases: &Bases,
) -> Option<Guard> {
    Some(Guard {
        files: files(provider, budgets, bases)?,
        binds: binds(provider, paths)?,
    })
}

/// What a group of `provider` plans in its guard folders: the guard's files, each a
/// [`Place::Guard`] entry (none for Claude Code).
pub fn entries(provider: Provider, budgets: &DocumentBudgets, bases: &Bases) -> Vec<Desired> {
    files(provider, budgets, bases)
        .unwrap_or_default()
        .into_iter()
        .map(|file| Desired {
            path: ManagedPath {
                place: Place::Guard(file.dir),
                name: file.name.to_owned(),
            },
            content: Content::File(file.bytes),
        })
        .collect()
}

fn files(provider: Provider, budgets: &DocumentBudgets, bases: &Bases) -> Option<Vec<GuardFile>> {
    let file = |dir, name, bytes: Vec<u8>| GuardFile { dir, name, bytes };
    let gitignore = || OPENCODE_GITIGNORE.as_bytes().to_vec();
    Some(match provider {
        // Claude Code (and Ollama's Claude Code) has the managed policy; Cursor and pi are
        // not measured yet (their provider modules say so).
        Provider::Claude | Provider::Ollama | Provider::Cursor | Provider::Pi => return None,
        Provider::Codex => vec![file(
            "guard/codex",
            "managed_config.toml",
            codex_managed_config(budgets.codex, bases.codex_config.as_deref()).into_bytes(),
        )],
        Provider::Gemini => vec![file(
            "guard/gemini",
            "settings.json",
            bases.gemini_settings.clone(),
        )],
        Provider::Opencode => vec![
            file(OPENCODE_CONFIG_DIR, ".gitignore", gitignore()),
            file(
                "guard/opencode/xdg-config/opencode",
                ".gitignore",
                gitignore(),
            ),
            file("guard/opencode", "opencode.json", b"{}\n".to_vec()),
        ],
    })
}

fn binds(provider: Provider, paths: GuardPaths<'_>) -> Option<Vec<GuardBind>> {
    let ws = paths.workspace;
    let home = paths.home;
    let bind = |source, container: PathBuf| GuardBind { source, container };
    Some(match provider {
        Provider::Claude | Provider::Ollama | Provider::Cursor | Provider::Pi => return None,
        Provider::Codex => vec![
            bind(GuardSource::EntryPoint, ws.join("AGENTS.override.md")),
            bind(
                GuardSource::Guard("guard/codex/managed_config.toml"),
                PathBuf::from(CODEX_MANAGED_CONFIG),
            ),
        ],
        Provider::Gemini => vec![bind(
            GuardSource::Guard("guard/gemini/settings.json"),
            PathBuf::from(GEMINI_SYSTEM_SETTINGS),
        )],
        Provider::Opencode => {
            let dir = GuardSource::Guard(OPENCODE_CONFIG_DIR);
            let empty = GuardSource::Guard("guard/opencode/opencode.json");
            vec![
                bind(dir, ws.join(".opencode")),
                bind(empty, ws.join("opencode.json")),
                bind(empty, ws.join("opencode.jsonc")),
                bind(dir, home.join(".opencode")),
                bind(GuardSource::Guard(OPENCODE_XDG_DIR), home.join(".config")),
            ]
        }
    })
}

/// Codex's managed configuration: `project_doc_max_bytes` at least the budget (the document is
/// composed within it, so Codex reads all of it), first, then the runner's own (`base`, kept
/// whole: [`codex_base`] checked it does not set that key).
fn codex_managed_config(budget: u64, base: Option<&str>) -> String {
    let mut config = format!(
        "# Written by clawmd: keeps the composed AGENTS.md whole (managed configuration wins over\n\
         # ~/.codex/config.toml and a trusted project's .codex/config.toml).\n\
         project_doc_max_bytes = {budget}\n"
    );
    if let Some(base) = base {
        config.push_str("\n# The runner's own managed configuration (codexManagedConfig):\n");
        config.push_str(base);
        if !base.ends_with('\n') {
            config.push('\n');
        }
    }
    config
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
        Provider::Claude | Provider::Ollama | Provider::Cursor | Provider::Pi => None,
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

    fn of(provider: Provider, budgets: &DocumentBudgets) -> Option<Guard> {
        guard(provider, budgets, paths(), &Bases::builtin())
    }

    #[test]
    fn claude_has_no_guard_here() {
        assert_eq!(of(Provider::Claude, &DocumentBudgets::default()), None);
        assert!(
            entries(
                Provider::Claude,
                &DocumentBudgets::default(),
                &Bases::builtin()
            )
            .is_empty()
        );
    }

    #[test]
    fn codex_pins_the_budget_and_binds_the_override() {
        let budgets = DocumentBudgets {
            codex: 65536,
            ..DocumentBudgets::default()
        };
        let guard = of(Provider::Codex, &budgets).unwrap();
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
    fn codex_keeps_the_runners_config_after_the_budget() {
        let base = "model = \"o4\"\n\n[model_providers.local]\nbase_url = \"http://x\"";
        let checked = codex_base(Path::new("/srv/codex.toml"), base.as_bytes()).unwrap();
        let bases = Bases {
            codex_config: Some(checked),
            ..Bases::builtin()
        };
        let guard = guard(
            Provider::Codex,
            &DocumentBudgets::default(),
            paths(),
            &bases,
        )
        .unwrap();
        let config = String::from_utf8(guard.files[0].bytes.clone()).unwrap();
        let pin = config.find("project_doc_max_bytes = ").unwrap();
        assert!(pin < config.find("model = ").unwrap(), "{config}");
        assert!(config.ends_with("base_url = \"http://x\"\n"), "{config}");
        // Before any table: a top-level key.
        assert!(pin < config.find('[').unwrap(), "{config}");
    }

    #[test]
    fn a_codex_base_that_sets_the_budget_or_is_not_text_is_refused_naming_the_file() {
        for bad in [
            &b"project_doc_max_bytes = 1\n"[..],
            b"[x]\nproject_doc_max_bytes = 1",
            b"\xff",
        ] {
            let err = codex_base(Path::new("/srv/codex.toml"), bad).unwrap_err();
            assert!(err.to_string().contains("/srv/codex.toml"), "{err}");
        }
    }

    #[test]
    fn gemini_keeps_the_runners_settings_and_turns_hooks_off() {
        let base = br#"{"security":{"auth":{"selectedType":"gemini-api-key"}},"hooksConfig":{"enabled":true,"notifications":false}}"#;
        let bytes = gemini_system_settings(Some((Path::new("/srv/gemini.json"), base))).unwrap();
        let merged: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(merged["security"]["auth"]["selectedType"], "gemini-api-key");
        assert_eq!(merged["hooksConfig"]["enabled"], false);
        assert_eq!(merged["hooksConfig"]["notifications"], false);
        let guard = of(Provider::Gemini, &DocumentBudgets::default()).unwrap();
        assert_eq!(guard.binds[0].container, Path::new(GEMINI_SYSTEM_SETTINGS));
        // Without a base: only the pin.
        let alone: Value = serde_json::from_slice(&guard.files[0].bytes).unwrap();
        assert_eq!(
            alone,
            serde_json::json!({"hooksConfig": {"enabled": false}})
        );
    }

    #[test]
    fn a_gemini_base_that_is_not_an_object_is_refused_naming_the_file() {
        for bad in [&b"[1]"[..], b"{", b"\xff"] {
            let err =
                gemini_system_settings(Some((Path::new("/srv/gemini.json"), bad))).unwrap_err();
            assert!(err.to_string().contains("/srv/gemini.json"), "{err}");
        }
    }

    /// Every guard file is in one of [`GUARD_DIRS`] (which compose opens, creates and prunes),
    /// and every bind's source is a guard file or one of those folders.
    #[test]
    fn every_guard_file_and_bind_is_in_the_guard_folders() {
        for provider in [Provider::Codex, Provider::Gemini, Provider::Opencode] {
            let guard = of(provider, &DocumentBudgets::default()).unwrap();
            for file in &guard.files {
                assert!(GUARD_DIRS.contains(&file.dir), "{file:?}");
            }
            for bind in &guard.binds {
                let GuardSource::Guard(path) = bind.source else {
                    continue;
                };
                let is_file = guard
                    .files
                    .iter()
                    .any(|f| format!("{}/{}", f.dir, f.name) == path);
                assert!(is_file || GUARD_DIRS.contains(&path), "{path}");
            }
        }
        // Parents first.
        for (i, dir) in GUARD_DIRS.iter().enumerate().skip(1) {
            let parent = Path::new(dir).parent().unwrap().to_str().unwrap();
            assert!(GUARD_DIRS[..i].contains(&parent), "{dir}");
        }
    }

    #[test]
    fn opencode_closes_every_config_folder_and_project_file() {
        let guard = of(Provider::Opencode, &DocumentBudgets::default()).unwrap();
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
        for bind in &guard.binds {
            assert!(matches!(bind.source, GuardSource::Guard(_)), "{bind:?}");
        }
    }
}
