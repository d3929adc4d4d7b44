//! The other backends' real CLIs (Codex, Gemini CLI, opencode; pinned, installed by
//! `scripts/e2e-setup` into `<cache>/backends`), run offline in a bubblewrap container built
//! from a bind table (`clawmd mounts`' shape), against the stand-in API of [`super::api`].

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::Value;

use super::api::ApiServer;
use super::sandbox::{ArgList, e2e_cache, installed_version, system_binds_for};

/// The releases `scripts/e2e-setup` installs; docs/delivery.md's facts are about these.
pub const CODEX_VERSION: &str = "0.169.0";
pub const GEMINI_CLI_VERSION: &str = "0.61.0";
pub const OPENCODE_VERSION: &str = "1.18.33";

/// The agent's home in the container (nanoclaw's, and clawmd's default `agentHome`).
pub const HOME: &str = "/home/node";
/// The agent's working directory (the group folder).
pub const WORKSPACE: &str = "/workspace/agent";

/// A backend whose real CLI the tests run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Codex,
    Gemini,
    Opencode,
}

impl Backend {
    pub const ALL: [Backend; 3] = [Backend::Codex, Backend::Gemini, Backend::Opencode];

    /// `container.json`'s `provider`.
    pub fn provider(self) -> &'static str {
        match self {
            Backend::Codex => "codex",
            Backend::Gemini => "gemini",
            Backend::Opencode => "opencode",
        }
    }

    /// The composed document's name.
    pub fn entry_point(self) -> &'static str {
        match self {
            Backend::Gemini => "GEMINI.md",
            Backend::Codex | Backend::Opencode => "AGENTS.md",
        }
    }

    fn bin(self) -> &'static str {
        match self {
            Backend::Codex => "codex",
            Backend::Gemini => "gemini",
            Backend::Opencode => "opencode",
        }
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Backend::Codex => write!(f, "codex {CODEX_VERSION}"),
            Backend::Gemini => write!(f, "gemini-cli {GEMINI_CLI_VERSION}"),
            Backend::Opencode => write!(f, "opencode {OPENCODE_VERSION}"),
        }
    }
}

/// One bind of the container, as `clawmd mounts --format json` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Bind {
    pub host: PathBuf,
    pub container: PathBuf,
    pub readonly: bool,
}

impl Bind {
    pub fn ro(host: impl Into<PathBuf>, container: impl Into<PathBuf>) -> Self {
        Bind {
            host: host.into(),
            container: container.into(),
            readonly: true,
        }
    }
    pub fn rw(host: impl Into<PathBuf>, container: impl Into<PathBuf>) -> Self {
        Bind {
            readonly: false,
            ..Bind::ro(host, container)
        }
    }
}

pub struct BackendTools {
    pub bwrap: PathBuf,
    pub node: PathBuf,
    /// `<cache>/backends`, canonical.
    pub dir: PathBuf,
}

/// The tools, found once; a missing one fails every test that needs it, naming the fix.
pub fn backend_tools() -> &'static BackendTools {
    static TOOLS: OnceLock<Result<BackendTools, String>> = OnceLock::new();
    match TOOLS.get_or_init(find) {
        Ok(tools) => tools,
        Err(message) => panic!("{message}"),
    }
}

fn find() -> Result<BackendTools, String> {
    let dir = e2e_cache().join("backends");
    let mut missing = Vec::new();
    for (package, version) in [
        ("@openai/codex", CODEX_VERSION),
        ("@google/gemini-cli", GEMINI_CLI_VERSION),
        ("opencode-ai", OPENCODE_VERSION),
    ] {
        let found = installed_version(&dir, package);
        if found.as_deref() != Some(version) {
            missing.push(format!(
                "{package}@{version} in {} (found {found:?})",
                dir.display()
            ));
        }
    }
    let which = |name: &str| {
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    };
    let (Some(bwrap), Some(node)) = (which("bwrap"), which("node")) else {
        missing.push("bwrap and node on PATH".to_owned());
        return Err(message(&missing));
    };
    if !missing.is_empty() {
        return Err(message(&missing));
    }
    Ok(BackendTools {
        bwrap,
        node: node.canonicalize().unwrap(),
        dir: dir.canonicalize().unwrap(),
    })
}

fn message(missing: &[String]) -> String {
    format!(
        "the end-to-end backend tests cannot run: missing {}.\nFix: run `scripts/e2e-setup` \
         (installs @openai/codex@{CODEX_VERSION}, @google/gemini-cli@{GEMINI_CLI_VERSION} and \
         opencode-ai@{OPENCODE_VERSION} with npm into <cache>/backends).",
        missing.join(", ")
    )
}

/// The system prompt of opencode's title request (opencode 1.18.33), which never carries the
/// agent's memory.
const OPENCODE_TITLE_REQUEST: &str = "You are a title generator";

/// What one run of a backend's CLI sent and printed.
pub struct BackendRun {
    pub output: Output,
    /// Every model request's body, in order.
    pub requests: Vec<Value>,
}

impl BackendRun {
    /// Every model request as JSON text (to look for a marker in wherever the backend put the
    /// document: Codex in a user message, Gemini in the first content, opencode in the system
    /// message).
    pub fn sent(&self) -> String {
        self.requests
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Whether `marker` reached the model in the request that answers the prompt: the last
    /// one that is not opencode's title request. (opencode asks for the session's title beside
    /// the prompt, concurrently: under load the title request can arrive last, and judging it
    /// made `backends::every_opencode_attack_fails_against_the_guard` fail now and then.)
    pub fn reached(&self, marker: &str) -> bool {
        let texts: Vec<String> = self.requests.iter().map(Value::to_string).collect();
        texts
            .iter()
            .rev()
            .find(|text| !text.contains(OPENCODE_TITLE_REQUEST))
            .or(texts.last())
            .is_some_and(|text| text.contains(marker))
    }

    pub fn describe(&self) -> String {
        format!(
            "status {}, {} model request(s)\nstdout: {}\nstderr: {}",
            self.output.status,
            self.requests.len(),
            String::from_utf8_lossy(&self.output.stdout),
            String::from_utf8_lossy(&self.output.stderr)
        )
    }
}

/// Runs `backend`'s CLI once (prompt "hello") in a container made of `binds` (applied in
/// order, after the system's), with the agent's home and working directory as nanoclaw's.
/// `extra_env`: the runner's own variables. Returns what the model received.
pub fn run_backend(backend: Backend, binds: &[Bind], extra_env: &[(&str, &str)]) -> BackendRun {
    let tools = backend_tools();
    let api = ApiServer::start();
    let base = format!("http://{}", api.addr);
    let mut args = ArgList::default();
    args.push(["--die-with-parent", "--new-session"]);
    args.push(["--unshare-pid", "--unshare-ipc", "--unshare-uts"]);
    system_binds_for(&tools.dir, &tools.node, &mut args);
    for bind in binds {
        let how = if bind.readonly { "--ro-bind" } else { "--bind" };
        args.bind(how, &bind.host, &bind.container.display().to_string());
    }
    args.push(["--chdir", WORKSPACE, "--"]);
    let bin = tools.dir.join("node_modules/.bin").join(backend.bin());
    args.0.push(bin.into());
    let mut command = Command::new(&tools.bwrap);
    command.env_clear();
    match backend {
        Backend::Codex => {
            args.push(["exec", "--skip-git-repo-check", "-m", "m", "-c"]);
            args.push(["model_provider=stand", "-c"]);
            args.0.push(
                format!(
                    "model_providers.stand={{name=\"stand\",base_url=\"{base}/v1\",\
                     wire_api=\"responses\",supports_websockets=false,env_key=\"OPENAI_API_KEY\"}}"
                )
                .into(),
            );
            args.push(["hello"]);
            command.env("OPENAI_API_KEY", "sk-e2e-local-only");
        }
        Backend::Gemini => {
            args.push(["-p", "hello", "-m", "gemini-2.5-flash"]);
            command
                .env("GEMINI_API_KEY", "e2e-local-only")
                .env("GOOGLE_GEMINI_BASE_URL", &base)
                .env("GEMINI_CLI_TRUST_WORKSPACE", "true");
        }
        Backend::Opencode => {
            args.push(["run", "-m", "stand/m", "hello"]);
            command
                .env(
                    "OPENCODE_CONFIG_CONTENT",
                    serde_json::json!({"provider": {"stand": {
                    "npm": "@ai-sdk/openai-compatible",
                    "options": {"baseURL": format!("{base}/v1"), "apiKey": "e2e-local-only"},
                    "models": {"m": {}}}}})
                    .to_string(),
                )
                .env(
                    "npm_config_registry",
                    format!("{base}{}", crate::support::api::NPM_REGISTRY),
                );
        }
    }
    let node_dir = tools.node.parent().unwrap().display().to_string();
    command
        .args(args.0)
        .env("PATH", format!("{node_dir}:/usr/local/bin:/usr/bin:/bin"))
        .env("HOME", HOME)
        .env("TMPDIR", "/tmp")
        .env("LANG", "C.UTF-8")
        .envs(extra_env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = command.spawn().expect("spawn bwrap");
    let output = wait_bounded(child, Duration::from_secs(240));
    BackendRun {
        output,
        requests: api.stop(),
    }
}

/// Waits for `child`, killing it (by its own pid, with its process group: bwrap runs it in a
/// new session) after `limit`.
fn wait_bounded(child: std::process::Child, limit: Duration) -> Output {
    let pid = child.id();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watchdog = {
        let done = done.clone();
        std::thread::spawn(move || {
            let start = Instant::now();
            while start.elapsed() < limit {
                if done.load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        })
    };
    let output = child.wait_with_output().expect("output");
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let _ = watchdog.join();
    output
}

/// The host folder of a fresh agent home (empty).
pub fn fresh_home(root: &Path, name: &str) -> PathBuf {
    let home = root.join(format!("home-{name}"));
    std::fs::create_dir_all(&home).unwrap();
    home
}
