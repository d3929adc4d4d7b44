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
/// nanoclaw's composer before v2.2 (`composeGroupClaudeMd`: an import-only `CLAUDE.md`, the
/// group's `CLAUDE.local.md`), which says what it reads of a group's config.
pub const NANOCLAW_COMPOSER: &str = "src/claude-md-compose.ts";
/// nanoclaw's composer from the provider-contract generation on (v2.3-era:
/// `composeGroupProjectDoc`, one flat document per provider, the persona in
/// `instructions.prepend.md`, memory in `memory/`).
pub const NANOCLAW_PROJECT_DOC_COMPOSER: &str = "src/project-doc-compose.ts";
/// The placeholder paragraph of today's `container/CLAUDE.md` nanoclaw replaces by each
/// provider's memory note.
pub const NANOCLAW_MEMORY_NOTE: &str = "{{provider-memory-note}}";

/// nanoclaw's runner, which says where it mounts each group's `~/.claude`.
pub const NANOCLAW_RUNNER: &str = "src/container-runner.ts";
/// How nanoclaw v2's runner names the host folder it mounts as a group's `~/.claude`
/// (`path.join(DATA_DIR, 'v2-sessions', agentGroup.id, '.claude-shared')`), and the
/// `claudeHome` that names the same folder.
const NANOCLAW_CLAUDE_HOME: (&str, &str) = (
    "'v2-sessions', agentGroup.id, '.claude-shared'",
    "data/v2-sessions/{agentGroupId}/.claude-shared",
);

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
    /// Today's composer (`src/project-doc-compose.ts`) and the modules it leaves out where
    /// `cli_scope` is `disabled` (its `NCL_DEPENDENT_MODULES`).
    pub project_doc: Option<(PathBuf, Vec<String>)>,
    /// The runner's file and the `claudeHome` naming the folder it mounts as each group's
    /// `~/.claude`.
    pub claude_home: Option<(PathBuf, &'static str)>,
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
    let runner = root.join(NANOCLAW_RUNNER);
    if let Ok(Some(bytes)) = crate::disk::fsops::read_host_file(&runner, 4 * 1024 * 1024)
        && memchr::memmem::find(&bytes, NANOCLAW_CLAUDE_HOME.0.as_bytes()).is_some()
    {
        detected.claude_home = Some((runner, NANOCLAW_CLAUDE_HOME.1));
    }
    for file in [NANOCLAW_PROJECT_DOC_COMPOSER, NANOCLAW_COMPOSER] {
        let composer = root.join(file);
        let Ok(Some(bytes)) = crate::disk::fsops::read_host_file(&composer, 4 * 1024 * 1024) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        if file == NANOCLAW_PROJECT_DOC_COMPOSER && text.contains("composeGroupProjectDoc") {
            detected.project_doc = Some((composer.clone(), ncl_dependent_modules(&text)));
        }
        if text.contains("cli_scope") {
            detected.cli_scope_in_runner = Some(composer);
            break;
        }
    }
    detected
}

/// The modules today's composer leaves out where `cli_scope` is `disabled`: the names in its
/// `NCL_DEPENDENT_MODULES = new Set([...])` (`cli` and `scheduling`), or those two when the
/// line is not found.
pub fn ncl_dependent_modules(composer: &str) -> Vec<String> {
    let listed = composer
        .split_once("NCL_DEPENDENT_MODULES = new Set([")
        .and_then(|(_, rest)| rest.split_once("])"))
        .map(|(list, _)| {
            list.split(',')
                .map(|item| item.trim().trim_matches(|c| c == '\'' || c == '"'))
                .filter(|item| !item.is_empty())
                .map(str::to_owned)
                .collect::<Vec<_>>()
        });
    match listed {
        Some(names) if !names.is_empty() => names,
        _ => vec!["cli".to_owned(), "scheduling".to_owned()],
    }
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
    if let Some((composer, _)) = &detected.project_doc {
        add(
            "memory",
            json!("none"),
            format!(
                "{} keeps each group's memory in its memory/ tree (delivered by nanoclaw's SessionStart hook), not in CLAUDE.local.md: clawmd creates and imports none, and never reads memory/",
                composer.display()
            ),
            &mut notes,
        );
    }
    if let Some((runner, template)) = &detected.claude_home {
        add(
            "claudeHome",
            json!(template),
            format!(
                "{} mounts that folder as each group's ~/.claude, which the agent can write: the verdict reads its settings.json, as the agent's Claude Code does",
                runner.display()
            ),
            &mut notes,
        );
    }
    if let (Some((folder, names)), Some((composer, ncl))) =
        (&detected.modules, &detected.project_doc)
    {
        // Today's composer: its sections in its order, under its headings, its droppable
        // sections (modules, skills, MCP instructions) all of one rank, largest first.
        let mut modules = module_source(layout);
        modules["heading"] = json!("NanoClaw Module: {name}");
        modules["rank"] = json!(0);
        if detected.cli_scope_in_runner.is_some() {
            modules["drop"] = json!([{"when": {"cli_scope": "disabled"}, "names": ncl}]);
        }
        let sources = json!([
            {"kind": "group-files", "pattern": "*.prepend.md", "first": "instructions.prepend.md",
             "name": "persona", "heading": "Persona"},
            {"kind": "shared", "memoryNote": NANOCLAW_MEMORY_NOTE, "heading": "NanoClaw Runtime Contract"},
            {"kind": "native-skills", "heading": "Native Runtime Skills"},
            modules,
            {"kind": "skills", "heading": "NanoClaw Skill: {name}", "rank": 0},
            {"kind": "mcp", "heading": "MCP Server: {name}", "rank": 0},
            {"kind": "omitted", "heading": "Omitted for size"},
        ]);
        add(
            "sources",
            sources,
            format!(
                "{} composes each group's document from its *.prepend.md persona, container/CLAUDE.md (its {NANOCLAW_MEMORY_NOTE} per provider), the provider's native skills, the modules of {} ({}), the skills' instructions.md and the MCP instructions, in that order, and says what was dropped over a cap",
                composer.display(),
                folder.display(),
                names.join(", ")
            ),
            &mut notes,
        );
    } else if let Some((folder, names)) = &detected.modules {
        let mut modules = module_source(layout);
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

/// The recipe source of nanoclaw's built-in modules' guidance
/// (`container/agent-runner/src/mcp-tools/*.instructions.md`, mounted in the container under
/// the app mount), as `clawmd.json` spells it.
fn module_source(layout: &Layout) -> serde_json::Value {
    json!({
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
    })
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
            project_doc: None,
            claude_home: None,
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
    fn todays_composer_gets_its_sections_headings_ranks_and_no_local_memory() {
        let layout = Layout::under_root(Path::new("/r"));
        let mut detected = nanoclaw();
        detected.cli_scope_in_runner = Some(PathBuf::from("/r/src/project-doc-compose.ts"));
        detected.project_doc = Some((
            PathBuf::from("/r/src/project-doc-compose.ts"),
            vec!["cli".into(), "scheduling".into()],
        ));
        let plan = plan(&detected, &layout, &Map::new());
        let written: Value = serde_json::from_slice(&plan.settings.unwrap()).unwrap();
        assert_eq!(written["memory"], "none");
        let kinds: Vec<&str> = (written["sources"].as_array().unwrap().iter())
            .map(|s| s["kind"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "group-files",
                "shared",
                "native-skills",
                "fragments",
                "skills",
                "mcp",
                "omitted"
            ]
        );
        assert_eq!(
            written["sources"][1]["memoryNote"],
            "{{provider-memory-note}}"
        );
        assert_eq!(
            written["sources"][3]["drop"][0]["names"],
            json!(["cli", "scheduling"])
        );
        let (settings, warnings) = crate::input::settings::parse_settings(
            Path::new("clawmd.json"),
            &serde_json::to_vec(&written).unwrap(),
        )
        .unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        let recipe =
            crate::input::recipe::Recipe::from_raw(settings.sources.as_deref(), settings.memory)
                .unwrap();
        assert_eq!(recipe.memory, crate::input::recipe::MemoryFile::None);
        assert!(recipe.reads_group());
    }

    #[test]
    fn the_modules_left_out_without_the_cli_are_read_from_the_composer() {
        let text = "const NCL_DEPENDENT_MODULES = new Set(['cli', 'scheduling', 'rooms']);";
        assert_eq!(ncl_dependent_modules(text), ["cli", "scheduling", "rooms"]);
        assert_eq!(ncl_dependent_modules("nothing"), ["cli", "scheduling"]);
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
