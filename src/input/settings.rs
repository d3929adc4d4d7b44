//! The deployment settings file, `clawmd.json` at the root, so that a runner calls
//! `clawmd compose GROUP` with no flags.
//!
//! ```json
//! {
//!   "delivery": "managed",
//!   "provider": "claude",
//!   "budgets": { "claude": 4194304, "codex": 32768, "opencode": 4194304, "gemini": 4194304 },
//!   "claudeCodeVersion": "2.1.328",
//!   "approveExternal": false,
//!   "groupsDir": "groups",
//!   "containerDir": "container",
//!   "appMount": "/app",
//!   "workspaceMount": "/workspace/agent",
//!   "lockTimeout": 60,
//!   "stateDir": "groups/.clawmd",
//!   "managedMount": "/etc/claude-code",
//!   "hostManagedDir": "policy"
//! }
//! ```
//!
//! Every key is optional. Flags and `CLAWMD_*` variables override the file; the file overrides
//! the built-in defaults. An unknown key is a warning with the nearest known key, never an
//! error; a wrong type is an error naming the file, line, column and field.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::input::config::ConfigError;
use crate::input::layout::Layout;
use crate::input::pin::Consumer;
use crate::input::pin::PinSource;
use crate::input::recipe::{RawMemory, RawSource, Recipe};
use crate::loader::ClaudeVersion;
use crate::plan::target::{Delivery, DeliverySettings, DocumentBudgets, Provider};
use crate::report::Code;

/// The settings file's name, at the deployment root.
pub const SETTINGS_FILE: &str = "clawmd.json";

/// The largest settings file clawmd reads.
const MAX_SETTINGS_BYTES: u64 = 1024 * 1024;

const KEYS: [&str; 23] = [
    "delivery",
    "provider",
    "budgets",
    "claudeCodeVersion",
    "acceptUnrecordedRelease",
    "approveExternal",
    "groupsDir",
    "containerDir",
    "appMount",
    "workspaceMount",
    "lockTimeout",
    "stateDir",
    "geminiSystemSettings",
    "codexManagedConfig",
    "sources",
    "memory",
    "managedMount",
    "hostManagedDir",
    "consumer",
    "groupConfig",
    "agentHome",
    "claudeHome",
    "$schema",
];

/// The parsed settings file (every key optional).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    /// Delivery mode for Claude Code groups.
    pub delivery: Option<Delivery>,
    /// Backend of groups whose `container.json` has no `provider`.
    pub provider: Option<Provider>,
    /// Byte budgets by provider name (unknown names warn and are ignored).
    pub budgets: Option<std::collections::BTreeMap<String, u64>>,
    /// The Claude Code release the agents run.
    pub claude_code_version: Option<String>,
    /// A Claude Code release outside the conformance corpus that the operator accepts to be
    /// judged by the nearest recorded release's rules: `check` warns about it instead of
    /// failing (only this release: a later unrecorded one fails again).
    pub accept_unrecorded_release: Option<String>,
    /// Whether the agents' runtime approves external imports for the workspace.
    pub approve_external: Option<bool>,
    /// The groups folder (relative to the root).
    pub groups_dir: Option<PathBuf>,
    /// The shared container content folder (relative to the root).
    pub container_dir: Option<PathBuf>,
    /// Where `container/` is mounted in the container.
    pub app_mount: Option<PathBuf>,
    /// Where the group folder is mounted in the container (the agent's cwd).
    pub workspace_mount: Option<PathBuf>,
    /// Seconds to wait for a group's lock.
    pub lock_timeout: Option<u64>,
    /// clawmd's state folder (rescued edits, the files bound into containers), relative to
    /// the root; default `<groupsDir>/.clawmd`. Keep it outside every group folder.
    pub state_dir: Option<PathBuf>,
    /// The runner's own Gemini CLI system settings (relative to the root): clawmd merges its
    /// guard into them, and the merged file is what `clawmd mounts` binds at
    /// `/etc/gemini-cli/settings.json`.
    pub gemini_system_settings: Option<PathBuf>,
    /// The runner's own Codex managed configuration (relative to the root): kept whole, with
    /// clawmd's `project_doc_max_bytes` put first, in the file `clawmd mounts` binds at
    /// `/etc/codex/managed_config.toml`.
    pub codex_managed_config: Option<PathBuf>,
    /// The sources of every group's memory, in order (default: the shared base
    /// `container/CLAUDE.md`, the selected skills of `container/skills`, the MCP
    /// instructions); docs/recipes.md.
    pub sources: Option<Vec<RawSource>>,
    /// The group's own memory file: "CLAUDE.local.md" (the default) or "none".
    pub memory: Option<RawMemory>,
    /// Where the group's managed-policy folder is mounted in its container (managed
    /// delivery; default `/etc/claude-code`).
    pub managed_mount: Option<PathBuf>,
    /// A host folder holding the image's or organisation's own managed policy
    /// (`CLAUDE.md`, `managed-settings.json`, other files), relative to the root: merged into
    /// every group's managed folder, which hides the image's `/etc/claude-code`.
    pub host_managed_dir: Option<PathBuf>,
    /// The Claude Code front end the agents run: "cli", or "sdk" (the Agent SDK with
    /// settingSources ['project','user'], nanoclaw's); default: what the deployment's runner
    /// depends on (container/agent-runner/package.json), else "cli".
    pub consumer: Option<Consumer>,
    /// Where a group's config is read: "container.json" (the default), or "handed": the
    /// config the runner hands with `clawmd compose GROUP --config -` (nanoclaw keeps
    /// `cli_scope` in its database, not in container.json), kept for check and render.
    pub group_config: Option<crate::input::layout::GroupConfigSource>,
    /// The agent's `$HOME` in the container (default `/home/node`); the guards of Codex,
    /// Gemini CLI and opencode groups bind over its configuration there.
    pub agent_home: Option<PathBuf>,
    /// The host folder the runner mounts as each group's `~/.claude` (read-write: the agent
    /// can write its user settings there), relative to the root, `{group}` standing for the
    /// group's folder name and `{agentGroupId}` for the `agentGroupId` of its config:
    /// nanoclaw's is `data/v2-sessions/{agentGroupId}/.claude-shared`. clawmd then reads
    /// `~/.claude/settings.json` (and the user memory) as the agent's Claude Code does. A
    /// home named by `{agentGroupId}` is the runner's own bind: `clawmd mounts` does not list
    /// it.
    pub claude_home: Option<String>,
    #[serde(rename = "$schema", default)]
    _schema: Option<String>,
}

/// Something in the settings worth fixing that does not stop the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsWarning {
    /// [`Code::UnknownKey`] or [`Code::Settings`].
    pub code: Code,
    /// The settings file.
    pub path: PathBuf,
    /// What.
    pub message: String,
}

impl fmt::Display for SettingsWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.message)
    }
}

/// Reads `<root>/clawmd.json`; a missing file means every default.
pub fn read_settings(root: &Path) -> Result<(Settings, Vec<SettingsWarning>), ConfigError> {
    let path = root.join(SETTINGS_FILE);
    match crate::disk::fsops::read_host_file(&path, MAX_SETTINGS_BYTES) {
        Ok(Some(bytes)) => parse_settings(&path, &bytes),
        Ok(None) => Ok((Settings::default(), Vec::new())),
        Err(err) => Err(ConfigError {
            path: path.clone(),
            position: None,
            field: None,
            message: crate::error::chain_text(&err),
            fix: "make the settings file a readable regular file under 1 MiB, or remove it"
                .to_owned(),
        }),
    }
}

/// Refuses a `claudeHome` holding a `{…}` placeholder clawmd does not fill (a typo would
/// name a folder that never exists, and the agent's settings there would go unread).
fn check_claude_home(path: &Path, template: &str) -> Result<(), ConfigError> {
    use crate::input::layout::{AGENT_GROUP_ID_PLACEHOLDER, GROUP_PLACEHOLDER};
    let rest = template
        .replace(GROUP_PLACEHOLDER, "")
        .replace(AGENT_GROUP_ID_PLACEHOLDER, "");
    if let Some(start) = rest.find('{') {
        let placeholder: String = rest[start..].chars().take_while(|&c| c != '}').collect();
        return Err(ConfigError {
            path: path.to_owned(),
            position: None,
            field: Some("claudeHome".to_owned()),
            message: format!("{template:?} holds {placeholder}}}, which clawmd does not fill"),
            fix: "use {group} (the group's folder name) or {agentGroupId} (its config's agentGroupId), e.g. \"data/v2-sessions/{agentGroupId}/.claude-shared\"".to_owned(),
        });
    }
    Ok(())
}

/// Parses a settings file; `path` is used in messages.
pub fn parse_settings(
    path: &Path,
    bytes: &[u8],
) -> Result<(Settings, Vec<SettingsWarning>), ConfigError> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let settings: Settings =
        serde_path_to_error::deserialize(&mut deserializer).map_err(|err| {
            let field = crate::input::config::known_field(&err.path().to_string());
            let inner = err.into_inner();
            ConfigError {
                path: path.to_owned(),
                position: (inner.line() > 0).then(|| (inner.line(), inner.column())),
                field,
                message: strip_position(&inner.to_string()),
                fix: "see the keys and values in docs/delivery.md (Deployment settings) and docs/recipes.md (sources, memory)".to_owned(),
            }
        })?;
    let mut warnings = Vec::new();
    if let Ok(serde_json::Value::Object(map)) = serde_json::from_slice(bytes) {
        for key in map.keys() {
            if !KEYS.contains(&key.as_str()) {
                warnings.push(unknown(path, key, &KEYS));
            }
        }
        if let Some(serde_json::Value::Object(budgets)) = map.get("budgets") {
            let providers = Provider::ALL.map(Provider::as_str);
            for key in budgets.keys() {
                if Provider::parse(key).is_none() {
                    warnings.push(unknown(path, &format!("budgets.{key}"), &providers));
                }
            }
        }
    }
    if let Err(err) = Recipe::from_raw(settings.sources.as_deref(), settings.memory) {
        return Err(ConfigError {
            path: path.to_owned(),
            position: None,
            field: Some(err.field),
            message: err.message,
            fix: format!("{} (docs/recipes.md)", err.fix),
        });
    }
    if let Some(mount) = &settings.managed_mount
        && !mount.is_absolute()
    {
        return Err(ConfigError {
            path: path.to_owned(),
            position: None,
            field: Some("managedMount".to_owned()),
            message: format!("{} is not an absolute path", mount.display()),
            fix: "write the managed-policy mount point as an absolute container path, e.g. \"/etc/claude-code\" (where Claude Code reads its managed policy on Linux)".to_owned(),
        });
    }
    if let Some(template) = &settings.claude_home {
        check_claude_home(path, template)?;
    }
    if let Some(text) = &settings.accept_unrecorded_release {
        text.parse::<ClaudeVersion>().map_err(|err| ConfigError {
            path: path.to_owned(),
            position: None,
            field: Some("acceptUnrecordedRelease".to_owned()),
            message: format!("{err}"),
            fix: "write the release as MAJOR.MINOR.PATCH, e.g. \"2.1.333\"".to_owned(),
        })?;
    }
    if let Some(text) = &settings.claude_code_version {
        let version: ClaudeVersion = text.parse().map_err(|err| ConfigError {
            path: path.to_owned(),
            position: None,
            field: Some("claudeCodeVersion".to_owned()),
            message: format!("{err}"),
            fix: "write the release as MAJOR.MINOR.PATCH, e.g. \"2.1.328\"".to_owned(),
        })?;
        let accepted = settings.accept_unrecorded_release.as_deref() == Some(text.as_str());
        if !version.is_verified() && !accepted {
            warnings.push(SettingsWarning {
                code: Code::Settings,
                path: path.to_owned(),
                message: format!(
                    "claudeCodeVersion {version}: {} (fix: record the corpus on it, scripts/new-conformance-case --version {version} crates/clawmd-loader/tests/fixtures/conformance/*/, pin a recorded release, or accept it with \"acceptUnrecordedRelease\": \"{version}\")",
                    version.unverified_note()
                ),
            });
        }
    }
    Ok((settings, warnings))
}

fn unknown(path: &Path, key: &str, known: &[&str]) -> SettingsWarning {
    let (parent, leaf) = match key.rsplit_once('.') {
        Some((parent, leaf)) => (Some(parent), leaf),
        None => (None, key),
    };
    let hint = match crate::suggest::nearest(leaf, known.iter().copied()) {
        Some(k) => match parent {
            Some(parent) => format!("did you mean `{parent}.{k}`?"),
            None => format!("did you mean `{k}`?"),
        },
        None => format!("known keys: {}", known.join(", ")),
    };
    SettingsWarning {
        code: Code::UnknownKey,
        path: path.to_owned(),
        message: format!("unknown key `{key}` is ignored; {hint}"),
    }
}

fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(index) => message[..index].to_owned(),
        None => message.to_owned(),
    }
}

/// What the command line (flags, or `CLAWMD_*` variables through them) says; `None` means
/// "not given": the settings file or the default applies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// `--groups-dir`.
    pub groups_dir: Option<PathBuf>,
    /// `--container-dir`.
    pub container_dir: Option<PathBuf>,
    /// `--app-mount`.
    pub app_mount: Option<PathBuf>,
    /// `--workspace-mount`.
    pub workspace_mount: Option<PathBuf>,
    /// `--lock-timeout`.
    pub lock_timeout: Option<u64>,
    /// `--delivery`.
    pub delivery: Option<Delivery>,
    /// `--provider`.
    pub provider: Option<Provider>,
    /// `--approve-external` (a flag: `true` when given).
    pub approve_external: bool,
    /// `--claude-version`.
    pub claude_version: Option<ClaudeVersion>,
}

/// Everything a run needs, from overrides, then the file, then the defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Paths and mount points.
    pub layout: Layout,
    /// Delivery mode, default provider, budgets, approval.
    pub delivery: DeliverySettings,
    /// Whether the delivery mode was chosen (flag, variable or file) rather than defaulted.
    pub delivery_chosen: bool,
    /// Lock timeout.
    pub lock_timeout: Duration,
    /// The agent's home and the runner's own settings the backends' guards merge.
    pub guards: crate::plan::delivery::guard::GuardSettings,
}

impl Resolved {
    /// These settings with what the deployment's own files pin ([`crate::input::pin::read_pins`])
    /// where neither a flag nor `clawmd.json` chose: the Claude Code release its image
    /// installs and the consumer its runner uses, so that the verdict judges what the agents
    /// run.
    pub fn with_deployment_pins(mut self) -> Self {
        let settings = &mut self.delivery;
        if settings.claude_version_from != PinSource::Default
            && settings.consumer_from != PinSource::Default
        {
            return self;
        }
        let pins = crate::input::pin::read_pins(&self.layout.container_dir);
        if settings.claude_version_from == PinSource::Default
            && let Some((version, _)) = pins.claude_code
        {
            settings.claude_version = version;
            settings.claude_version_from = PinSource::Deployment;
        }
        if settings.consumer_from == PinSource::Default
            && let Some((consumer, _)) = pins.consumer
        {
            settings.consumer = consumer;
            settings.consumer_from = PinSource::Deployment;
        }
        self
    }
}

impl Settings {
    /// Merges `overrides` over these settings over the defaults, for the deployment at `root`.
    pub fn resolve(&self, root: &Path, overrides: &Overrides) -> Resolved {
        let mut layout = Layout::under_root(root);
        let under_root = |p: &PathBuf| root.join(p);
        if let Some(dir) = overrides
            .groups_dir
            .clone()
            .or(self.groups_dir.as_ref().map(under_root))
        {
            layout.state_dir = dir.join(crate::input::names::STATE_DIR);
            layout.groups_dir = dir;
        }
        if let Some(dir) = self.state_dir.as_ref().map(under_root) {
            layout.state_dir = dir;
        }
        if let Some(dir) = overrides
            .container_dir
            .clone()
            .or(self.container_dir.as_ref().map(under_root))
        {
            layout.container_dir = dir;
        }
        if let Some(mount) = overrides.app_mount.clone().or(self.app_mount.clone()) {
            layout.app_mount = mount;
        }
        if let Some(mount) = overrides
            .workspace_mount
            .clone()
            .or(self.workspace_mount.clone())
        {
            layout.workspace_mount = mount;
        }
        if let Some(mount) = &self.managed_mount {
            layout.managed_mount = mount.clone();
        }
        layout.host_managed_dir = self.host_managed_dir.as_ref().map(under_root);
        layout.gemini_system_settings = self.gemini_system_settings.as_ref().map(under_root);
        layout.codex_managed_config = self.codex_managed_config.as_ref().map(under_root);
        layout.group_config = self.group_config.unwrap_or_default();
        if let Some(home) = &self.agent_home {
            layout.agent_home = home.clone();
        }
        layout.claude_home = self.claude_home.as_ref().map(|t| root.join(t));
        // Checked when the file was parsed ([`parse_settings`]).
        layout.recipe = Recipe::from_raw(self.sources.as_deref(), self.memory).unwrap_or_default();
        let mut budgets = DocumentBudgets::default();
        for (name, bytes) in self.budgets.iter().flatten() {
            if let Some(provider) = Provider::parse(name) {
                budgets.set(provider, *bytes);
            }
        }
        let delivery = overrides.delivery.or(self.delivery);
        let guards = crate::plan::delivery::guard::GuardSettings {
            agent_home: layout.agent_home.clone(),
        };
        Resolved {
            layout,
            delivery: DeliverySettings {
                delivery: delivery.unwrap_or_default(),
                provider: overrides.provider.or(self.provider).unwrap_or_default(),
                budgets,
                approve_external: overrides.approve_external
                    || self.approve_external.unwrap_or(false),
                claude_version: overrides.claude_version.unwrap_or_else(|| {
                    self.claude_code_version
                        .as_deref()
                        .and_then(|text| text.parse().ok())
                        .unwrap_or_default()
                }),
                claude_version_from: match (overrides.claude_version, &self.claude_code_version) {
                    (Some(_), _) => PinSource::Flag,
                    (None, Some(_)) => PinSource::Settings,
                    (None, None) => PinSource::Default,
                },
                consumer: self.consumer.unwrap_or_default(),
                consumer_from: match self.consumer {
                    Some(_) => PinSource::Settings,
                    None => PinSource::Default,
                },
                accepted_unrecorded: self
                    .accept_unrecorded_release
                    .as_deref()
                    .and_then(|text| text.parse().ok()),
            },
            delivery_chosen: delivery.is_some(),
            lock_timeout: Duration::from_secs(
                overrides.lock_timeout.or(self.lock_timeout).unwrap_or(60),
            ),
            guards,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<(Settings, Vec<SettingsWarning>), ConfigError> {
        parse_settings(Path::new("/d/clawmd.json"), text.as_bytes())
    }

    #[test]
    fn claude_home_takes_only_the_placeholders_clawmd_fills() {
        for good in [
            "data/sessions/{group}/.claude",
            "data/v2-sessions/{agentGroupId}/.claude-shared",
            "/srv/homes/.claude",
        ] {
            assert!(
                parse(&format!(r#"{{"claudeHome": "{good}"}}"#)).is_ok(),
                "{good}"
            );
        }
        let err = parse(r#"{"claudeHome": "data/v2-sessions/{agentGroupID}/.claude-shared"}"#)
            .unwrap_err();
        assert_eq!(err.field.as_deref(), Some("claudeHome"));
        assert!(err.message.contains("{agentGroupID}"), "{}", err.message);
        assert!(err.fix.contains("{agentGroupId}"), "{}", err.fix);
    }

    #[test]
    fn every_key_is_read_and_relative_dirs_are_under_the_root() {
        let (settings, warnings) = parse(
            r#"{"delivery": "copy", "provider": "codex", "budgets": {"codex": 1000},
                "claudeCodeVersion": "2.1.328", "approveExternal": true,
                "groupsDir": "g", "containerDir": "c", "appMount": "/opt/app",
                "workspaceMount": "/w", "lockTimeout": 5}"#,
        )
        .unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        let resolved = settings.resolve(Path::new("/d"), &Overrides::default());
        assert_eq!(resolved.layout.groups_dir, Path::new("/d/g"));
        assert_eq!(resolved.layout.container_dir, Path::new("/d/c"));
        assert_eq!(resolved.layout.app_mount, Path::new("/opt/app"));
        assert_eq!(resolved.layout.workspace_mount, Path::new("/w"));
        assert_eq!(resolved.delivery.delivery, Delivery::Copy);
        assert_eq!(resolved.delivery.provider, Provider::Codex);
        assert_eq!(resolved.delivery.budgets.codex, 1000);
        assert_eq!(
            resolved.delivery.budgets.claude,
            DocumentBudgets::default().claude
        );
        assert!(resolved.delivery.approve_external && resolved.delivery_chosen);
        assert_eq!(resolved.lock_timeout, Duration::from_secs(5));
    }

    #[test]
    fn overrides_win_and_nothing_means_the_defaults() {
        let (settings, _) = parse(r#"{"delivery": "link", "lockTimeout": 5}"#).unwrap();
        let overrides = Overrides {
            delivery: Some(Delivery::Inline),
            lock_timeout: Some(9),
            ..Overrides::default()
        };
        let resolved = settings.resolve(Path::new("/d"), &overrides);
        assert_eq!(resolved.delivery.delivery, Delivery::Inline);
        assert_eq!(resolved.lock_timeout, Duration::from_secs(9));

        let resolved = Settings::default().resolve(Path::new("/d"), &Overrides::default());
        assert_eq!(resolved.layout, Layout::under_root(Path::new("/d")));
        assert_eq!(resolved.delivery, DeliverySettings::default());
        assert_eq!(resolved.delivery.delivery, Delivery::Managed);
        assert!(!resolved.delivery_chosen);
    }

    #[test]
    fn unknown_keys_warn_with_a_suggestion() {
        let (_, warnings) =
            parse(r#"{"delivry": "copy", "budgets": {"codx": 1}, "zzzzzzzz": 1}"#).unwrap();
        let messages: Vec<String> = warnings.iter().map(|w| w.to_string()).collect();
        assert_eq!(messages.len(), 3, "{messages:?}");
        let about = |key: &str| messages.iter().find(|m| m.contains(key)).unwrap();
        assert!(about("`delivry`").contains("did you mean `delivery`?"));
        assert!(about("`budgets.codx`").contains("did you mean `budgets.codex`?"));
        assert!(about("`zzzzzzzz`").contains("known keys:"));
        assert!(warnings.iter().all(|w| w.code == Code::UnknownKey));
        assert!(messages[0].starts_with("/d/clawmd.json: "));
    }

    #[test]
    fn wrong_values_are_errors_naming_the_field() {
        let err = parse(r#"{"delivery": "carrier-pigeon"}"#).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("delivery"));
        assert!(err.to_string().contains("fix:"));
        let err = parse(r#"{"budgets": {"codex": "big"}}"#).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("budgets.codex"));
        let err = parse("{\n\"lockTimeout\": ,}").unwrap_err();
        assert_eq!(err.position.map(|p| p.0), Some(2));
    }

    #[test]
    fn the_claude_code_version_is_read_and_checked() {
        let (settings, warnings) = parse(r#"{"claudeCodeVersion": "2.1.328"}"#).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        let resolved = settings.resolve(Path::new("/d"), &Overrides::default());
        assert_eq!(
            resolved.delivery.claude_version,
            ClaudeVersion::new(2, 1, 328)
        );
        let (_, warnings) = parse(r#"{"claudeCodeVersion": "9.9.9"}"#).unwrap();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0]
                .message
                .contains("9.9.9: not in the conformance corpus")
        );
        let err = parse(r#"{"claudeCodeVersion": "latest"}"#).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("claudeCodeVersion"));
        // A flag wins.
        let overrides = Overrides {
            claude_version: Some(ClaudeVersion::new(2, 1, 330)),
            ..Overrides::default()
        };
        let resolved = settings.resolve(Path::new("/d"), &overrides);
        assert_eq!(
            resolved.delivery.claude_version,
            ClaudeVersion::new(2, 1, 330)
        );
    }

    #[test]
    fn a_recipe_is_read_checked_and_resolved_into_the_layout() {
        let (settings, warnings) = parse(
            r#"{"sources": [{"kind": "group-file", "file": "persona.md"}, {"kind": "shared"},
                            {"kind": "fragments", "dir": "fragments"}],
                "memory": "none"}"#,
        )
        .unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        let layout = settings
            .resolve(Path::new("/d"), &Overrides::default())
            .layout;
        let names: Vec<&str> = layout
            .recipe
            .sources
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(names, ["group:persona.md", "shared-base", "fragment"]);
        assert_eq!(layout.recipe.memory, crate::input::recipe::MemoryFile::None);
        assert!(
            layout
                .mount_table(
                    "g",
                    &crate::input::layout::MountNeeds {
                        entry_point: "CLAUDE.md",
                        fragments: true,
                        managed: false,
                        app: true,
                        config: true,
                    }
                )
                .contains(&crate::input::layout::Bind::read_only(
                    "/d/container/fragments",
                    "/app/fragments"
                ))
        );
        let err = parse(r#"{"sources": [{"kind": "fragments", "dir": "/etc"}]}"#).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("sources[0].dir"));
        assert!(err.fix.contains("docs/recipes.md"), "{}", err.fix);
        let err = parse(r#"{"sources": [{"kind": "persona"}]}"#).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("sources[0].kind"));
        let err = parse(r#"{"memory": "MEMORY.md"}"#).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("memory"));
        // No recipe: the built-in one.
        let (settings, _) = parse("{}").unwrap();
        let layout = settings
            .resolve(Path::new("/d"), &Overrides::default())
            .layout;
        assert_eq!(layout.recipe, Recipe::default());
    }

    #[test]
    fn a_missing_file_means_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let (settings, warnings) = read_settings(dir.path()).unwrap();
        assert_eq!(settings, Settings::default());
        assert!(warnings.is_empty());
    }
}
