//! `init`: write down, in `clawmd.json`, what a deployment needs that clawmd can detect.
//!
//! On a nanoclaw checkout that is: its built-in module guidance
//! (`container/agent-runner/src/mcp-tools/<name>.instructions.md`, which its runner mounts at
//! `/app/src/mcp-tools`) as a `fragments` source, with the `cli` module dropped for a group
//! whose `cli_scope` is `disabled`; the Claude Code release its image pins
//! (`container/Dockerfile`, `ARG CLAUDE_CODE_VERSION`) and the consumer its runner uses (the
//! Agent SDK, `container/agent-runner/package.json`); and where its runner keeps a group's
//! config (`cli_scope` is in its database row, not in `container.json`: `"groupConfig":
//! "handed"`). [`detect`] reads (pure apart from reading files), [`plan`] merges what was found
//! into the existing settings without changing a key the operator set, and the binary writes
//! the result through [`crate::disk::fsops`].

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::input::layout::Layout;
use crate::input::pin::Consumer;
use crate::input::pin::{Pins, read_pins};

/// nanoclaw's built-in module guidance, under the container folder.
pub const NANOCLAW_MODULES: &str = "agent-runner/src/mcp-tools";
/// Where nanoclaw's runner mounts `container/agent-runner/src` (`/app/src`), under the app
/// mount.
pub const NANOCLAW_RUNNER_SRC_MOUNT: &str = "src";
/// nanoclaw's composer, which says what it reads of a group's config.
pub const NANOCLAW_COMPOSER: &str = "src/claude-md-compose.ts";

/// What [`detect`] found in a deployment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Detected {
    /// The module fragments folder (host) and the names found in it, when there are any.
    pub modules: Option<(PathBuf, Vec<String>)>,
    /// Whether the runner drops the `cli` module for a group whose `cli_scope` is
    /// `disabled`, keeping `cli_scope` outside `container.json` (nanoclaw's composer reads it
    /// from its database row).
    pub cli_scope_in_runner: Option<PathBuf>,
    /// The Claude Code release and consumer the deployment pins.
    pub pins: Pins,
}

/// Reads what a deployment rooted at `root` (laid out as `layout`) needs written down.
pub fn detect(root: &Path, layout: &Layout) -> Detected {
    let mut detected = Detected {
        pins: read_pins(&layout.container_dir),
        ..Detected::default()
    };
    let modules = layout.container_dir.join(NANOCLAW_MODULES);
    let pattern =
        crate::input::recipe::Pattern::parse("*.instructions.md").expect("a valid pattern");
    #[expect(
        clippy::disallowed_methods,
        reason = "a trusted host folder, read only to list names"
    )]
    if let Ok(entries) = std::fs::read_dir(&modules) {
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .filter_map(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                pattern.matches(&name).map(str::to_owned)
            })
            .collect();
        names.sort();
        if !names.is_empty() {
            detected.modules = Some((modules, names));
        }
    }
    let composer = root.join(NANOCLAW_COMPOSER);
    if let Ok(Some(bytes)) = crate::disk::fsops::read_host_file(&composer, 4 * 1024 * 1024)
        && String::from_utf8_lossy(&bytes).contains("cli_scope")
    {
        detected.cli_scope_in_runner = Some(composer);
    }
    detected
}

/// What `init` would write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitPlan {
    /// The settings file's new content (`None`: nothing to add).
    pub settings: Option<Vec<u8>>,
    /// What was found and written down, and what was left as the operator set it, for
    /// people.
    pub notes: Vec<String>,
}

/// Merges what was `detected` into the settings `existing` (the parsed `clawmd.json`, an empty
/// object when there is none): a key already set is never changed (and said so).
pub fn plan(detected: &Detected, layout: &Layout, existing: &Map<String, Value>) -> InitPlan {
    let mut out = existing.clone();
    let mut notes = Vec::new();
    let mut add =
        |key: &str, value: Value, why: String, notes: &mut Vec<String>| match existing.get(key) {
            Some(set) if *set != value => notes.push(format!(
                "kept {key} = {set} as clawmd.json has it (detected {value}: {why})"
            )),
            Some(_) => {}
            None => {
                notes.push(format!("{key} = {value}: {why}"));
                out.insert(key.to_owned(), value);
            }
        };
    if let Some((version, file)) = &detected.pins.claude_code {
        add(
            "claudeCodeVersion",
            json!(version.to_string()),
            format!(
                "the release {} installs (the verdict judges what the agents run)",
                file.display()
            ),
            &mut notes,
        );
    }
    if let Some((consumer, file)) = &detected.pins.consumer {
        let name = match consumer {
            Consumer::Cli => "cli",
            Consumer::Sdk => "sdk",
        };
        add(
            "consumer",
            json!(name),
            format!(
                "the runner's package ({}) runs the agent with it",
                file.display()
            ),
            &mut notes,
        );
    }
    if let Some(composer) = &detected.cli_scope_in_runner {
        add(
            "groupConfig",
            json!("handed"),
            format!(
                "{} reads cli_scope from the runner's database, not from container.json: hand each group's config with `clawmd compose GROUP --config -` (docs/nanoclaw.md)",
                composer.display()
            ),
            &mut notes,
        );
    }
    if let Some((folder, names)) = &detected.modules {
        let mut modules = json!({
            "kind": "fragments",
            "dir": NANOCLAW_MODULES,
            "pattern": "*.instructions.md",
            "mount": layout
                .app_mount
                .join(NANOCLAW_RUNNER_SRC_MOUNT)
                .join("mcp-tools")
                .display()
                .to_string(),
            "name": "module",
        });
        if detected.cli_scope_in_runner.is_some() {
            modules["drop"] = json!([{"when": {"cli_scope": "disabled"}, "names": ["cli"]}]);
        }
        // nanoclaw's composer's order: the shared base, then its fragments sorted by file
        // name (`mcp-*`, `module-*`, `skill-*`).
        let sources = json!([
            {"kind": "shared"},
            {"kind": "mcp"},
            modules,
            {"kind": "skills"},
        ]);
        add(
            "sources",
            sources,
            format!(
                "{} holds module guidance ({}) that every group's agent needs, mounted at /app/src/mcp-tools",
                folder.display(),
                names.join(", ")
            ),
            &mut notes,
        );
    }
    let settings = (out != *existing).then(|| {
        let mut text = serde_json::to_string_pretty(&Value::Object(out)).expect("JSON");
        text.push('\n');
        text.into_bytes()
    });
    InitPlan { settings, notes }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::ClaudeVersion;

    fn nanoclaw() -> Detected {
        Detected {
            modules: Some((
                PathBuf::from("/r/container/agent-runner/src/mcp-tools"),
                vec!["cli".into(), "core".into()],
            )),
            cli_scope_in_runner: Some(PathBuf::from("/r/src/claude-md-compose.ts")),
            pins: Pins {
                claude_code: Some((
                    ClaudeVersion::new(2, 1, 128),
                    PathBuf::from("/r/container/Dockerfile"),
                )),
                consumer: Some((
                    Consumer::Sdk,
                    PathBuf::from("/r/container/agent-runner/package.json"),
                )),
                sdk_range: Some("^0.2.128".into()),
            },
        }
    }

    #[test]
    fn a_nanoclaw_checkout_gets_its_modules_pin_consumer_and_config_source() {
        let layout = Layout::under_root(Path::new("/r"));
        let plan = plan(&nanoclaw(), &layout, &Map::new());
        let written: Value = serde_json::from_slice(&plan.settings.unwrap()).unwrap();
        assert_eq!(written["claudeCodeVersion"], "2.1.128");
        assert_eq!(written["consumer"], "sdk");
        assert_eq!(written["groupConfig"], "handed");
        assert_eq!(written["sources"][2]["mount"], "/app/src/mcp-tools");
        assert_eq!(
            written["sources"][2]["drop"][0]["when"]["cli_scope"],
            "disabled"
        );
        // It parses as clawmd's own settings.
        let (settings, warnings) = crate::input::settings::parse_settings(
            Path::new("clawmd.json"),
            &serde_json::to_vec(&written).unwrap(),
        )
        .unwrap();
        assert!(
            warnings
                .iter()
                .all(|w| w.code != crate::report::Code::UnknownKey)
        );
        assert_eq!(settings.consumer, Some(Consumer::Sdk));
    }

    #[test]
    fn keys_the_operator_set_are_kept_and_a_second_run_adds_nothing() {
        let layout = Layout::under_root(Path::new("/r"));
        let existing: Map<String, Value> =
            serde_json::from_str(r#"{"claudeCodeVersion": "2.1.330", "delivery": "copy"}"#)
                .unwrap();
        let first = plan(&nanoclaw(), &layout, &existing);
        let written: Map<String, Value> =
            serde_json::from_slice(first.settings.as_ref().unwrap()).unwrap();
        assert_eq!(written["claudeCodeVersion"], "2.1.330");
        assert_eq!(written["delivery"], "copy");
        assert!(
            first
                .notes
                .iter()
                .any(|n| n.starts_with("kept claudeCodeVersion"))
        );
        let second = plan(&nanoclaw(), &layout, &written);
        assert_eq!(second.settings, None);
        // Nothing detected, nothing written.
        assert_eq!(
            plan(&Detected::default(), &layout, &Map::new()).settings,
            None
        );
    }
}
