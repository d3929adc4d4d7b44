//! A bubblewrap sandbox laid out like the agent container (the mount table of DESIGN.md §1), in
//! which the real Claude Code CLI or the Agent SDK probe (tests/e2e/sdk-probe.mjs) runs, and the
//! tools it needs (from `scripts/e2e-setup`).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

use super::api::ApiServer;

/// The versions `scripts/e2e-setup` installs; the facts in docs/delivery.md are about these.
pub const CLAUDE_CODE_VERSION: &str = "2.1.328";
pub const AGENT_SDK_VERSION: &str = "0.3.328";

/// clawmd's default workspace mount point (the agent's cwd).
pub const WORKSPACE: &str = "/workspace/agent";
/// The agent's HOME inside the sandbox (a fresh temp dir on the host).
pub const SANDBOX_HOME: &str = "/home/agent";
/// Where tests/e2e (the SDK probe script) is mounted for SDK runs.
pub const PROBE_MOUNT: &str = "/opt/clawmd-e2e";

/// Who reads the memory inside the sandbox.
#[derive(Debug, Clone, Copy)]
pub enum Consumer {
    /// `claude -p hello`.
    Cli,
    /// tests/e2e/sdk-probe.mjs with these `settingSources`.
    Sdk(&'static [&'static str]),
}

impl Consumer {
    /// nanoclaw's setting.
    pub fn sdk() -> Self {
        Consumer::Sdk(&["project", "user"])
    }
}

impl std::fmt::Display for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Consumer::Cli => write!(f, "CLI {CLAUDE_CODE_VERSION}"),
            Consumer::Sdk(sources) => write!(
                f,
                "SDK {AGENT_SDK_VERSION} settingSources=[{}]",
                sources.join(",")
            ),
        }
    }
}

/// One bind of the container, as `clawmd mounts GROUP --format json` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    pub host: PathBuf,
    pub container: PathBuf,
    pub readonly: bool,
}

/// The binds the runner makes for `group` of the deployment at `root`: the real binary's
/// `clawmd mounts GROUP --format json`, with no flag (the deployment's `clawmd.json` decides),
/// so the sandbox is built exactly as a runner following the docs builds its container.
pub fn mounts(root: &Path, group: &str) -> Vec<Bind> {
    mounts_with(root, group, &[])
}

/// [`mounts`] with more environment for clawmd (`CLAWMD_DELIVERY`, say: the settings the
/// group was composed with).
pub fn mounts_with(root: &Path, group: &str, env: &[(&str, &str)]) -> Vec<Bind> {
    let run = super::run_clawmd(
        [
            OsStr::new("mounts"),
            OsStr::new(group),
            OsStr::new("--format"),
            OsStr::new("json"),
            OsStr::new("--root"),
            root.as_os_str(),
        ],
        &env.iter()
            .map(|(key, value)| (*key, OsStr::new(value)))
            .collect::<Vec<_>>(),
    );
    let table = run.success().json();
    table
        .as_array()
        .unwrap_or_else(|| panic!("clawmd mounts printed no array: {table}"))
        .iter()
        .map(|bind| Bind {
            host: PathBuf::from(bind["host"].as_str().unwrap()),
            container: PathBuf::from(bind["container"].as_str().unwrap()),
            readonly: bind["readonly"].as_bool().unwrap(),
        })
        .collect()
}

/// A bubblewrap sandbox laid out like the agent container.
pub struct Sandbox {
    /// The container's binds, in order ([`mounts`]: the runner's table).
    pub binds: Vec<Bind>,
    /// Host dir mounted read-write at [`SANDBOX_HOME`].
    pub home: PathBuf,
    /// Host file mounted over `/etc/hostname`.
    pub hostname: PathBuf,
    /// More binds after the runner's (a test's own, e.g. a folder to report results in).
    pub extra: Vec<Bind>,
}

/// Where [`Sandbox::shell`] finds the real CLI and the SDK probe.
pub const CLAUDE_IN_SANDBOX: &str = "CLAWMD_E2E_CLAUDE";

impl Sandbox {
    /// The sandbox of `group` of the deployment at `root`, built from `clawmd mounts`.
    pub fn for_group(root: &Path, group: &str, home: PathBuf, hostname: PathBuf) -> Self {
        Sandbox {
            binds: mounts(root, group),
            home,
            hostname,
            extra: Vec::new(),
        }
    }

    /// A sandbox with `binds` whose home (`scratch/home`, empty) and hostname file
    /// (`scratch/hostname`, holding `hostname`) are made in `scratch`.
    pub fn in_scratch(binds: Vec<Bind>, scratch: &Path, hostname: &str) -> Self {
        let home = scratch.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let hostname_file = scratch.join("hostname");
        std::fs::write(&hostname_file, format!("{hostname}\n")).unwrap();
        Sandbox {
            binds,
            home,
            hostname: hostname_file,
            extra: Vec::new(),
        }
    }

    /// `sh -c SCRIPT` in the sandbox, with the environment of [`Sandbox::command`] and
    /// `$CLAWMD_E2E_CLAUDE` (the real CLI), `$CLAWMD_E2E_NODE` and `$CLAWMD_E2E_PROBE` (node and
    /// the SDK probe, `CLAWMD_E2E_SETTING_SOURCES` nanoclaw's) for the script to run them.
    pub fn shell(&self, tools: &Tools, api: &ApiServer, script: &str) -> Command {
        let (mut args, mut command) = self.base(tools, api);
        let probe = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e");
        args.bind("--ro-bind", &probe, PROBE_MOUNT);
        args.push(["--", "/bin/sh", "-c"]);
        args.0.push(script.into());
        command
            .args(args.0)
            .env(CLAUDE_IN_SANDBOX, &tools.claude)
            .env("CLAWMD_E2E_NODE", &tools.node)
            .env("CLAWMD_E2E_PROBE", format!("{PROBE_MOUNT}/sdk-probe.mjs"))
            .env("CLAWMD_E2E_SDK_ENTRY", &tools.sdk_entry)
            .env("CLAWMD_E2E_SETTING_SOURCES", "project,user");
        command
    }

    pub fn command(&self, tools: &Tools, api: &ApiServer, consumer: Consumer) -> Command {
        let (mut args, mut command) = self.base(tools, api);
        match consumer {
            Consumer::Cli => {
                args.push(["--"]);
                args.0.push(tools.claude.clone().into());
                args.push(["-p", "hello"]);
            }
            Consumer::Sdk(sources) => {
                let probe = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e");
                args.bind("--ro-bind", &probe, PROBE_MOUNT);
                args.push(["--"]);
                args.0.push(tools.node.clone().into());
                args.0.push(format!("{PROBE_MOUNT}/sdk-probe.mjs").into());
                args.push([WORKSPACE]);
                command.env("CLAWMD_E2E_SDK_ENTRY", &tools.sdk_entry);
                command.env("CLAWMD_E2E_SETTING_SOURCES", sources.join(","));
            }
        }
        command.args(args.0);
        command
    }

    /// The bwrap arguments up to the program, and the command with its environment.
    fn base(&self, tools: &Tools, api: &ApiServer) -> (ArgList, Command) {
        let mut args = ArgList::default();
        args.push(["--die-with-parent", "--new-session"]);
        args.push(["--unshare-pid", "--unshare-ipc", "--unshare-uts"]);
        system_binds(tools, &mut args);
        args.bind("--ro-bind", &self.hostname, "/etc/hostname");
        args.bind("--bind", &self.home, SANDBOX_HOME);

        // The runner's table, in its order (the read-only binds go over the read-write one).
        for bind in self.binds.iter().chain(&self.extra) {
            let how = if bind.readonly { "--ro-bind" } else { "--bind" };
            args.bind(how, &bind.host, &bind.container.display().to_string());
        }

        args.push(["--chdir", WORKSPACE]);
        let mut command = Command::new(&tools.bwrap);
        command.env_clear();
        let node_dir = tools.node.parent().unwrap().display().to_string();
        command
            .env("PATH", format!("{node_dir}:/usr/local/bin:/usr/bin:/bin"))
            .env("HOME", SANDBOX_HOME)
            .env("TMPDIR", "/tmp")
            .env("LANG", "C.UTF-8")
            .env("ANTHROPIC_BASE_URL", format!("http://{}", api.addr))
            .env("ANTHROPIC_API_KEY", "sk-e2e-local-only")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_ERROR_REPORTING", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .stdin(Stdio::null());
        (args, command)
    }
}

/// The text part that holds the memory (`Codebase and user instructions…`).
pub const MEMORY_MARK: &str = "Codebase and user instructions";

/// Runs `consumer` in `sandbox` against a fresh stand-in API and returns the memory block of
/// the first request it sent, or what went wrong.
pub fn memory_block(
    sandbox: &Sandbox,
    tools: &Tools,
    consumer: Consumer,
    timeout: std::time::Duration,
) -> Result<String, String> {
    let api = ApiServer::start();
    let mut command = sandbox.command(tools, &api, consumer);
    let output = super::output_within(&mut command, timeout);
    let requests = api.stop();
    let output = output?;
    let Some(first) = requests.first() else {
        return Err(format!(
            "{consumer} sent no request to the stand-in API ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    };
    let block = super::api::texts(first)
        .into_iter()
        .find(|t| t.contains(MEMORY_MARK))
        .ok_or_else(|| format!("{consumer}: the first request has no memory block: {first}"))?
        .to_owned();
    if std::env::var_os("CLAWMD_E2E_DUMP").is_some() {
        eprintln!("--- memory block, {consumer}\n{block}\n---");
    }
    Ok(block)
}

/// `clawmd render GROUP --format claude ARGS…` on the deployment at `root`, which must equal
/// a real block as claude-view prints it ([`printed`]).
pub fn rendered(root: &Path, group: &str, args: &[&str]) -> String {
    let root = root.to_str().unwrap();
    let mut all = vec!["render", group, "--root", root, "--format", "claude"];
    all.extend_from_slice(args);
    super::run_clawmd(all, &[]).success().stdout()
}

/// A memory block as tools/claude-view prints it: with a final newline.
pub fn printed(block: &str) -> String {
    match block.ends_with('\n') {
        true => block.to_owned(),
        false => format!("{block}\n"),
    }
}

#[derive(Default)]
pub struct ArgList(pub Vec<OsString>);

impl ArgList {
    pub fn push<const N: usize>(&mut self, args: [&str; N]) {
        self.0.extend(args.iter().map(OsString::from));
    }
    pub fn bind(&mut self, how: &str, from: &Path, to: &str) {
        self.0.push(how.into());
        self.0.push(from.into());
        self.0.push(to.into());
    }
}

/// What node and claude need to start: the OS read-only, a private /proc, /dev and /tmp, the
/// npm cache read-only at its own path. Explicit binds only: never the host root.
pub fn system_binds(tools: &Tools, args: &mut ArgList) {
    system_binds_for(&tools.cache, &tools.node, args);
}

/// [`system_binds`] for any npm cache folder and node.
pub fn system_binds_for(cache: &Path, node: &Path, args: &mut ArgList) {
    args.bind("--ro-bind", Path::new("/usr"), "/usr");
    for top in ["/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"] {
        let Ok(meta) = Path::new(top).symlink_metadata() else {
            continue;
        };
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(top).unwrap();
            args.0.push("--symlink".into());
            args.0.push(target.into());
            args.0.push(top.into());
        } else if meta.is_dir() {
            args.bind("--ro-bind", Path::new(top), top);
        }
    }
    args.push(["--dir", "/etc"]);
    for name in [
        "passwd",
        "group",
        "hosts",
        "nsswitch.conf",
        "resolv.conf",
        "localtime",
        "ld.so.cache",
        "ld.so.conf",
        "ld.so.conf.d",
        "ssl",
        "ca-certificates",
        "alternatives",
    ] {
        let path = Path::new("/etc").join(name);
        if path.exists() {
            args.bind("--ro-bind", &path, &path.display().to_string());
        }
    }
    args.push(["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]);
    args.bind("--ro-bind", cache, &cache.display().to_string());
    // A node installed outside /usr (nvm, a tarball): mount its prefix too.
    let prefix = node.parent().and_then(Path::parent).unwrap();
    if !node.starts_with("/usr") && !node.starts_with(cache) {
        args.bind("--ro-bind", prefix, &prefix.display().to_string());
    }
}

// The tools

pub struct Tools {
    pub bwrap: PathBuf,
    /// The npm cache folder (`CLAWMD_E2E_CACHE`), canonical.
    pub cache: PathBuf,
    /// The real claude binary inside the cache.
    pub claude: PathBuf,
    pub node: PathBuf,
    /// `@anthropic-ai/claude-agent-sdk/sdk.mjs` inside the cache.
    pub sdk_entry: PathBuf,
}

/// The tools, found once; a missing one fails every test that needs it, naming the fix.
pub fn tools() -> &'static Tools {
    static TOOLS: OnceLock<Result<Tools, String>> = OnceLock::new();
    match TOOLS.get_or_init(|| find_tools(&e2e_cache(), CLAUDE_CODE_VERSION, AGENT_SDK_VERSION)) {
        Ok(tools) => tools,
        Err(message) => panic!("{message}"),
    }
}

/// The Claude Code CLI and Agent SDK that nanoclaw v2.0.64 pins (`container/Dockerfile`,
/// `container/agent-runner/package.json`), which `scripts/e2e-setup` installs in the cache's
/// `nanoclaw` folder.
pub const NANOCLAW_CLI_VERSION: &str = "2.1.128";
pub const NANOCLAW_SDK_VERSION: &str = "0.2.128";

/// The tools with nanoclaw's pinned CLI and SDK ([`NANOCLAW_CLI_VERSION`]), found once.
pub fn nanoclaw_tools() -> &'static Tools {
    static TOOLS: OnceLock<Result<Tools, String>> = OnceLock::new();
    match TOOLS.get_or_init(|| {
        find_tools(
            &e2e_cache().join("nanoclaw"),
            NANOCLAW_CLI_VERSION,
            NANOCLAW_SDK_VERSION,
        )
    }) {
        Ok(tools) => tools,
        Err(message) => panic!("{message}"),
    }
}

/// The folder `scripts/e2e-setup` installs into: `CLAWMD_E2E_CACHE`, or
/// `~/.cache/clawmd-e2e`.
pub fn e2e_cache() -> PathBuf {
    match std::env::var_os("CLAWMD_E2E_CACHE") {
        Some(dir) => PathBuf::from(dir),
        None => {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/clawmd-e2e")
        }
    }
}

/// The version of the npm package `package` installed under `prefix/node_modules`, if any.
pub fn installed_version(prefix: &Path, package: &str) -> Option<String> {
    let manifest = prefix
        .join("node_modules")
        .join(package)
        .join("package.json");
    std::fs::read_to_string(manifest)
        .ok()
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        .and_then(|v| v["version"].as_str().map(str::to_owned))
}

/// The tools in the npm prefix `cache`, the CLI and SDK at these versions.
fn find_tools(cache: &Path, cli_version: &str, sdk_version: &str) -> Result<Tools, String> {
    let cache = cache.to_owned();
    let mut missing = Vec::new();
    let bwrap = which("bwrap");
    if bwrap.is_none() {
        missing.push("`bwrap` (bubblewrap) is not on PATH".to_owned());
    }
    let node = which("node");
    if node.is_none() {
        missing.push("`node` is not on PATH".to_owned());
    }
    match installed_version(&cache, "@anthropic-ai/claude-agent-sdk") {
        Some(found) if found == sdk_version => {}
        Some(found) => missing.push(format!(
            "@anthropic-ai/claude-agent-sdk in {} is {found}, the test needs {sdk_version}",
            cache.display()
        )),
        None => missing.push(format!(
            "@anthropic-ai/claude-agent-sdk@{sdk_version} is not installed in {}",
            cache.display()
        )),
    }
    let claude = if missing.is_empty() {
        bundled_claude(&cache).unwrap_or_else(|problem| {
            missing.push(problem);
            PathBuf::new()
        })
    } else {
        PathBuf::new()
    };
    if !missing.is_empty() {
        return Err(missing_tools_message(
            &missing,
            &cache,
            cli_version,
            sdk_version,
        ));
    }
    let cache = cache.canonicalize().unwrap();
    let tools = Tools {
        bwrap: bwrap.unwrap(),
        claude: claude.canonicalize().unwrap(),
        node: node.unwrap().canonicalize().unwrap(),
        sdk_entry: cache.join("node_modules/@anthropic-ai/claude-agent-sdk/sdk.mjs"),
        cache,
    };
    // bwrap can be installed and still unable to sandbox (no user namespaces): say so now.
    let mut args = ArgList::default();
    system_binds(&tools, &mut args);
    args.push(["--"]);
    args.0.push(tools.claude.clone().into());
    args.push(["--version"]);
    let output = Command::new(&tools.bwrap)
        .args(&args.0)
        .env_clear()
        .env("HOME", "/tmp")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", tools.bwrap.display()))?;
    let version = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() || !version.starts_with(cli_version) {
        return Err(format!(
            "`claude --version` in a bubblewrap sandbox failed ({}): stdout {version:?}, stderr {:?}.\n\
             The sandbox needs unprivileged user namespaces or root; see scripts/e2e-setup.",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(tools)
}

/// The Claude Code binary the Agent SDK bundles: its platform package
/// (`@anthropic-ai/claude-agent-sdk-<platform>`, an optional dependency npm installed for this
/// machine) holds the native `claude`, byte for byte the CLI package's binary of the same
/// release, so the tests run it as the CLI and nothing downloads Claude Code twice.
fn bundled_claude(cache: &Path) -> Result<PathBuf, String> {
    let scope = cache.join("node_modules/@anthropic-ai");
    let found: Vec<PathBuf> = std::fs::read_dir(&scope)
        .map_err(|e| format!("cannot list {}: {e}", scope.display()))?
        .filter_map(|entry| entry.ok())
        .filter(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .starts_with("claude-agent-sdk-")
        })
        .map(|entry| entry.path().join("claude"))
        .filter(|binary| binary.is_file())
        .collect();
    match found.as_slice() {
        [binary] => Ok(binary.clone()),
        [] => Err(format!(
            "no platform package of the Agent SDK with a `claude` binary in {} \
             (npm skipped the optional dependency for this platform?)",
            scope.display()
        )),
        _ => Err(format!(
            "several platform packages of the Agent SDK in {}: {found:?}",
            scope.display()
        )),
    }
}

fn missing_tools_message(
    missing: &[String],
    cache: &Path,
    cli_version: &str,
    sdk_version: &str,
) -> String {
    let mut message = String::from("the end-to-end delivery test cannot run:\n");
    for line in missing {
        message.push_str(&format!("  - {line}\n"));
    }
    message.push_str(&format!(
        "Fix: run `scripts/e2e-setup` (installs bubblewrap with apt and \
         @anthropic-ai/claude-agent-sdk@{sdk_version}, which bundles Claude Code {cli_version}, \
         with npm into {}; set CLAWMD_E2E_CACHE for another folder, for both the script and the test).\n",
        cache.display()
    ));
    if std::env::var_os("CI").is_some() {
        message.push_str("CI is set: .ci/run must run `scripts/e2e-setup` before `cargo test`.\n");
    }
    message
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}
