//! The Claude Code a deployment pins, read from its own files, so that the verdict judges the
//! release and the consumer the agents really run when `clawmd.json` does not say.
//!
//! * The release: the `@anthropic-ai/claude-code` entry of `container/cli-tools.json` (the
//!   global CLIs today's nanoclaw installs in its image), else `ARG CLAUDE_CODE_VERSION=X.Y.Z`
//!   in the container image's `Dockerfile` (nanoclaw before cli-tools.json): the version its
//!   image installs.
//! * The consumer: a runner that depends on the Claude Agent SDK
//!   (`@anthropic-ai/claude-agent-sdk` in `container/agent-runner/package.json`, nanoclaw's)
//!   runs the agent through the SDK, which with `settingSources: ['project','user']` loads no
//!   `CLAUDE.local.md` by itself.
//!
//! [`Consumer`] is the front end the agents run (the CLI or the Agent SDK); [`Judged`] is what a
//! verdict says it judged: the release, the consumer, and where each came from.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::loader::ClaudeVersion;

/// The image definition that may pin the release, under the container folder.
pub const DOCKERFILE: &str = "Dockerfile";
/// The list of global CLIs the image installs (today's nanoclaw), under the container folder:
/// a JSON array of `{"name": …, "version": …}`.
pub const CLI_TOOLS: &str = "cli-tools.json";
/// The agent runner's package manifest, under the container folder.
pub const RUNNER_PACKAGE: &str = "agent-runner/package.json";
/// The Claude Code CLI package.
pub const CLI_PACKAGE: &str = "@anthropic-ai/claude-code";
/// The Claude Agent SDK package.
pub const SDK_PACKAGE: &str = "@anthropic-ai/claude-agent-sdk";

/// Which Claude Code front end reads the memory.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Default,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Consumer {
    /// The CLI (`claude -p`): loads `CLAUDE.local.md` by discovery too.
    #[default]
    Cli,
    /// The Agent SDK with `settingSources: ['project','user']` (nanoclaw's setting): no
    /// `CLAUDE.local.md` unless it is imported.
    Sdk,
}

impl std::str::FromStr for Consumer {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "cli" => Ok(Consumer::Cli),
            "sdk" => Ok(Consumer::Sdk),
            _ => Err(format!("unknown consumer {text:?}: use cli or sdk")),
        }
    }
}

/// Where a judged release or consumer comes from.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Default,
    Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum PinSource {
    /// clawmd's default: nothing in the deployment says (the newest release the conformance
    /// corpus covers; the CLI).
    #[default]
    Default,
    /// `clawmd.json` (`claudeCodeVersion`, `consumer`).
    Settings,
    /// A flag or `CLAWMD_*` variable of this run.
    Flag,
    /// The deployment's own files: `container/cli-tools.json`'s Claude Code entry or
    /// `container/Dockerfile`'s `ARG CLAUDE_CODE_VERSION`, the runner's `package.json`.
    Deployment,
}

impl PinSource {
    /// For people.
    pub fn describe(self) -> &'static str {
        match self {
            PinSource::Default => {
                "clawmd's default: the deployment pins no release (set claudeCodeVersion in clawmd.json, or run clawmd init)"
            }
            PinSource::Settings => "clawmd.json",
            PinSource::Flag => "this command line",
            PinSource::Deployment => {
                "the deployment's pin (container/cli-tools.json or container/Dockerfile, agent-runner/package.json)"
            }
        }
    }
}

/// What the deployment's files pin.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pins {
    /// The release `container/Dockerfile` installs, with the file.
    pub claude_code: Option<(ClaudeVersion, PathBuf)>,
    /// The consumer the runner uses, with the file that says so.
    pub consumer: Option<(Consumer, PathBuf)>,
    /// The Agent SDK version range the runner depends on (`^0.2.128`), when it does.
    pub sdk_range: Option<String>,
}

/// Every file [`read_pins`] may read in `container_dir`: a caller that keeps what they pinned
/// checks these for a change.
pub fn pin_files(container_dir: &Path) -> [std::path::PathBuf; 3] {
    [CLI_TOOLS, DOCKERFILE, RUNNER_PACKAGE].map(|name| container_dir.join(name))
}

/// Reads what the deployment whose container folder is `container_dir` pins. Missing or
/// unreadable files pin nothing.
pub fn read_pins(container_dir: &Path) -> Pins {
    let mut pins = Pins::default();
    let cli_tools = container_dir.join(CLI_TOOLS);
    let dockerfile = container_dir.join(DOCKERFILE);
    if let Ok(Some(bytes)) = crate::disk::fsops::read_host_file(&cli_tools, 1024 * 1024)
        && let Some(version) = cli_tools_pin(&bytes)
    {
        pins.claude_code = Some((version, cli_tools));
    } else if let Ok(Some(bytes)) = crate::disk::fsops::read_host_file(&dockerfile, 1024 * 1024)
        && let Some(version) = dockerfile_pin(&String::from_utf8_lossy(&bytes))
    {
        pins.claude_code = Some((version, dockerfile));
    }
    let manifest = container_dir.join(RUNNER_PACKAGE);
    if let Ok(Some(bytes)) = crate::disk::fsops::read_host_file(&manifest, 1024 * 1024)
        && let Ok(serde_json::Value::Object(package)) = serde_json::from_slice(&bytes)
    {
        let depends = |package_name: &str| {
            ["dependencies", "devDependencies", "optionalDependencies"]
                .iter()
                .find_map(|key| package.get(*key)?.get(package_name)?.as_str())
                .map(str::to_owned)
        };
        if let Some(range) = depends(SDK_PACKAGE) {
            pins.consumer = Some((Consumer::Sdk, manifest.clone()));
            pins.sdk_range = Some(range);
        } else if depends(CLI_PACKAGE).is_some() {
            pins.consumer = Some((Consumer::Cli, manifest));
        }
    }
    pins
}

/// The release of the Claude Code CLI entry (`"name": "@anthropic-ai/claude-code"`) of a
/// `cli-tools.json` array; a version that is not an exact release (`latest`, a range) pins
/// nothing.
pub fn cli_tools_pin(bytes: &[u8]) -> Option<ClaudeVersion> {
    let tools: Vec<serde_json::Value> = serde_json::from_slice(bytes).ok()?;
    tools.iter().find_map(|tool| {
        (tool.get("name")?.as_str()? == CLI_PACKAGE)
            .then(|| tool.get("version")?.as_str()?.parse().ok())?
    })
}

/// The release of `ARG CLAUDE_CODE_VERSION=X.Y.Z` (quotes allowed) in a Dockerfile; `latest`
/// or a range pins nothing.
pub fn dockerfile_pin(text: &str) -> Option<ClaudeVersion> {
    text.lines().find_map(|line| {
        let rest = line.trim().strip_prefix("ARG")?;
        if !rest.starts_with(char::is_whitespace) {
            return None;
        }
        let value = rest.trim().strip_prefix("CLAUDE_CODE_VERSION=")?;
        let value = value.split_whitespace().next()?.trim_matches(['"', '\'']);
        value.parse().ok()
    })
}

/// What a Claude Code group's verdict judged: the release and consumer it modelled, and where
/// each came from.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct Judged {
    /// The Claude Code release whose loader rules were used.
    #[schemars(with = "String")]
    pub claude_code: ClaudeVersion,
    /// Whether that release is in the loader's conformance corpus (else the nearest known
    /// rules were used).
    pub verified: bool,
    /// The recorded release whose rules the verdict rests on: the release itself when it is
    /// in the corpus, else the newest recorded one before it (the oldest, for an older one),
    /// with what the loader's release table knows in between.
    #[schemars(with = "String")]
    pub modelled_on: ClaudeVersion,
    /// Where the release came from.
    pub claude_code_from: PinSource,
    /// `cli`, or `sdk` (the Agent SDK with `settingSources: ['project','user']`).
    pub consumer: Consumer,
    /// Where the consumer came from.
    pub consumer_from: PinSource,
}

impl fmt::Display for Judged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let consumer = match self.consumer {
            Consumer::Cli => "CLI",
            Consumer::Sdk => "Agent SDK",
        };
        write!(f, "Claude Code {} {consumer}", self.claude_code)?;
        if !self.verified {
            write!(
                f,
                " (not in the conformance corpus: modelled from the release table, near {})",
                self.claude_code.nearest_verified()
            )?;
        }
        match self.claude_code_from {
            PinSource::Default => f.write_str(", clawmd's default: no release pinned"),
            PinSource::Settings => f.write_str(", pinned in clawmd.json"),
            PinSource::Flag => f.write_str(", from this command line"),
            PinSource::Deployment => f.write_str(", pinned by the deployment"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cli_tools_pin_is_read_before_the_dockerfiles() {
        let tools = br#"[{"name": "agent-browser", "version": "0.27.1", "onlyBuilt": true},
            {"name": "@anthropic-ai/claude-code", "version": "2.1.257", "onlyBuilt": true},
            {"name": "@openai/codex", "version": "0.154.0"}]"#;
        assert_eq!(cli_tools_pin(tools), Some(ClaudeVersion::new(2, 1, 257)));
        for none in [
            &br#"[{"name": "@anthropic-ai/claude-code", "version": "latest"}]"#[..],
            br#"[{"name": "agent-browser", "version": "2.1.1"}]"#,
            br#"{"name": "@anthropic-ai/claude-code", "version": "2.1.1"}"#,
            b"not json",
        ] {
            assert_eq!(
                cli_tools_pin(none),
                None,
                "{}",
                String::from_utf8_lossy(none)
            );
        }
        let container = tempfile::tempdir().unwrap();
        std::fs::write(
            container.path().join(DOCKERFILE),
            "ARG CLAUDE_CODE_VERSION=2.1.128\n",
        )
        .unwrap();
        let pinned = |pins: Pins| {
            pins.claude_code
                .map(|(v, path)| (v, path.file_name().unwrap().to_owned()))
        };
        assert_eq!(
            pinned(read_pins(container.path())),
            Some((ClaudeVersion::new(2, 1, 128), DOCKERFILE.into()))
        );
        std::fs::write(container.path().join(CLI_TOOLS), tools).unwrap();
        assert_eq!(
            pinned(read_pins(container.path())),
            Some((ClaudeVersion::new(2, 1, 257), CLI_TOOLS.into()))
        );
    }

    #[test]
    fn the_dockerfile_pin_is_read() {
        let text =
            "FROM node:22\nARG INSTALL_CJK_FONTS=false\nARG CLAUDE_CODE_VERSION=2.1.128\nRUN x\n";
        assert_eq!(dockerfile_pin(text), Some(ClaudeVersion::new(2, 1, 128)));
        assert_eq!(
            dockerfile_pin("ARG  CLAUDE_CODE_VERSION=\"2.1.330\" # pinned"),
            Some(ClaudeVersion::new(2, 1, 330))
        );
        for none in [
            "ARG CLAUDE_CODE_VERSION=latest",
            "ARG CLAUDE_CODE_VERSION",
            "ENV CLAUDE_CODE_VERSION=2.1.1",
            "ARGCLAUDE_CODE_VERSION=2.1.1",
            "",
        ] {
            assert_eq!(dockerfile_pin(none), None, "{none}");
        }
    }

    #[test]
    fn a_runner_on_the_agent_sdk_is_an_sdk_consumer() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("agent-runner")).unwrap();
        std::fs::write(
            dir.path().join("agent-runner/package.json"),
            r#"{"dependencies": {"@anthropic-ai/claude-agent-sdk": "^0.2.128", "zod": "^4"}}"#,
        )
        .unwrap();
        std::fs::write(
            dir.path().join("Dockerfile"),
            "ARG CLAUDE_CODE_VERSION=2.1.128\n",
        )
        .unwrap();
        let pins = read_pins(dir.path());
        assert_eq!(
            pins.claude_code.map(|p| p.0),
            Some(ClaudeVersion::new(2, 1, 128))
        );
        assert_eq!(pins.consumer.map(|p| p.0), Some(Consumer::Sdk));
        assert_eq!(pins.sdk_range.as_deref(), Some("^0.2.128"));
        assert_eq!(read_pins(&dir.path().join("nothing")), Pins::default());
    }
}
