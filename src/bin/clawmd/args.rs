//! The command line's shape: clap's structs for `clawmd` and every subcommand, their help and
//! examples, and the parsers of the library's value types (the library has no clap types).
//! Nothing here runs a command: `commands` does, `settings` turns the flags into settings.

use std::path::PathBuf;

use clap::builder::TypedValueParser as _;
use clap::{Args, Parser, Subcommand};

use clawmd::Delivery;
use clawmd::loader::{ClaudeVersion, Format};
use clawmd::report::Detail;
use clawmd::schema::SchemaKind;
use clawmd::target::Provider;
use clawmd::view::Consumer;

/// Compose and check the CLAUDE.md memory of containerised agent groups.
#[derive(Parser, Debug)]
#[command(name = "clawmd", version, about, long_about = None, after_help = EXAMPLES)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    #[command(flatten)]
    pub global: GlobalArgs,
}

const EXAMPLES: &str = "\
Examples:
  clawmd compose --all                 compose every group under ./groups
  clawmd --root /srv/host compose main compose one group of another deployment
  clawmd check -q                      print only what is wrong
  clawmd compose main --json           the machine-readable report, for a runner";

/// Each subcommand's arguments are built only when it is the one run (`defer`): a runner
/// calls `compose` at every container spawn, and building every subcommand's arguments was
/// a tenth of that process.
#[derive(Subcommand, Debug)]
#[command(defer = true)]
pub enum Command {
    /// Compose groups: one generated CLAUDE.md (or AGENTS.md, GEMINI.md) per group.
    #[command(after_help = "\
Examples:
  clawmd compose --all                    compose every group
  clawmd compose main ops                 compose two groups
  clawmd compose --all --dry-run          what would change, writing nothing
  clawmd compose main --dry-run --diff    and each file's content change
  clawmd compose main --json              the report a runner parses (docs/json-report.md)
  clawmd compose --all --delivery copy    shared base and skills as copied files")]
    Compose(With<ComposeArgs>),
    /// One-time, idempotent cutover of legacy groups (safe at every start-up).
    #[command(after_help = "\
Examples:
  clawmd migrate --dry-run          what would move, writing nothing
  clawmd migrate --json             at host start-up, for a runner
  clawmd migrate --append-global    also append groups/global/CLAUDE.md to the shared base")]
    Migrate(With<MigrateArgs>),
    /// Find what an agent would miss or wrongly get; exit 1 if any error.
    #[command(after_help = "\
Examples:
  clawmd check                every group; only problems and a summary
  clawmd check main -v        one group, saying so even when it is fine
  clawmd check -q             errors only (nothing when all is well)
  clawmd check --json         findings with codes (docs/json-report.md)
  clawmd check --fix          compose what is out of date, then list what needs a person")]
    Check(With<CheckArgs>),
    /// Print the memory Claude Code loads: for a group inside its container, or for a folder.
    #[command(after_help = "\
Examples:
  clawmd render main                      the memory block the agent of group main gets
  clawmd render main --delivery-view      which files load, and what is dropped and why
  clawmd render main --format flat        one markdown file with every import inlined
  clawmd render --cwd ~/project           what Claude Code loads in a folder on this machine")]
    Render(With<RenderArgs>),
    /// Print the binds a runner makes for a group's container, in the order to apply them.
    #[command(after_help = "\
Examples:
  clawmd mounts main                 host path -> container path, read-only or read-write
  clawmd mounts main --format json   [{\"host\": ..., \"container\": ..., \"readonly\": ...}, ...]
  clawmd mounts main --format k8s     a v1 List: the ConfigMaps and the Pod (docs/kubernetes.md)")]
    Mounts(With<MountsArgs>),
    /// Keep groups composed as their inputs change (inotify), printing each group that changed.
    #[command(after_help = "\
Examples:
  clawmd watch --all --format json     one JSON line per group that changed (docs/json-report.md)
  clawmd watch main ops                 keep two groups composed
  clawmd watch --all --debounce-ms 500  wait for half a second of quiet before recomposing")]
    Watch(With<WatchArgs>),
    /// Serve a runner's spawns: one JSON request per line on stdin, one answer per line on
    /// stdout (the compose report and the group's binds), until stdin closes.
    #[command(after_help = "\
Examples:
  clawmd --root ~/nanoclaw serve       started once by the runner, kept for every spawn
  echo '{\"id\":1,\"group\":\"main\"}' | clawmd serve
                                       one answer: {\"$schema\":...,\"id\":1,\"ok\":true,\"compose\":{...},\"mounts\":[...],\"error\":null}

Each request is `clawmd compose GROUP --json` and, when it composed, `clawmd mounts GROUP
--json`, answered on one line (clawmd schema serve-request, serve-answer; docs/json-report.md).
The deployment root is fixed when the service starts; clawmd.json is read again at every
request. A malformed request gets a `bad-request` answer and the service reads on.")]
    Serve(With<ServeArgs>),
    /// Write down in clawmd.json what this deployment needs that clawmd detects (on a nanoclaw
    /// checkout: its module guidance, the Claude Code release and consumer it pins, where its
    /// runner keeps a group's config); never changes a key already set.
    #[command(after_help = "\
Examples:
  clawmd init --dry-run        what it would write, writing nothing
  clawmd --root ~/nanoclaw init")]
    Init(With<InitArgs>),
    /// Print a shell completion script (e.g. `clawmd completions bash > /etc/bash_completion.d/clawmd`).
    #[command(after_help = "\
Examples:
  clawmd completions bash > ~/.local/share/bash-completion/completions/clawmd
  clawmd completions zsh > ~/.zfunc/_clawmd
  clawmd completions fish > ~/.config/fish/completions/clawmd.fish")]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
        #[command(flatten)]
        global: GlobalArgs,
    },
    /// Print the JSON Schema of a file clawmd reads or a report it prints (derived from the code).
    #[command(after_help = "\
Examples:
  clawmd schema container-json > container.schema.json
  clawmd schema report            the shape of `clawmd compose --json`")]
    Schema {
        /// Which document.
        #[arg(value_parser = parse_schema())]
        kind: SchemaKind,
        #[command(flatten)]
        global: GlobalArgs,
    },
    /// Print the manual page (roff): clawmd(1), or a subcommand's, clawmd-SUBCOMMAND(1).
    #[command(after_help = "\
Examples:
  clawmd man > /usr/local/share/man/man1/clawmd.1
  clawmd man compose > /usr/local/share/man/man1/clawmd-compose.1
  clawmd man | man -l -")]
    Man {
        /// The subcommand whose page to print (clawmd-SUBCOMMAND(1)); without it, clawmd(1).
        #[arg(value_parser = clap::builder::PossibleValuesParser::new(MAN_PAGES))]
        subcommand: Option<String>,
        #[command(flatten)]
        global: GlobalArgs,
    },
}

/// The subcommands with a page of their own, clawmd-SUBCOMMAND(1), as clawmd(1) lists them.
pub const MAN_PAGES: [&str; 12] = [
    "compose",
    "migrate",
    "check",
    "render",
    "mounts",
    "watch",
    "serve",
    "init",
    "completions",
    "schema",
    "man",
    "help",
];

// A subcommand's arguments, and the flags every command takes ([`GlobalArgs`]) as given after
// the subcommand. (A plain comment: see DeliveryArgs.)
#[derive(Args, Debug)]
pub struct With<T: Args> {
    #[command(flatten)]
    pub args: T,
    #[command(flatten)]
    pub global: GlobalArgs,
}

impl Command {
    /// The flags every command takes, as given after the subcommand.
    fn global(&self) -> &GlobalArgs {
        match self {
            Command::Compose(with) => &with.global,
            Command::Migrate(with) => &with.global,
            Command::Check(with) => &with.global,
            Command::Render(with) => &with.global,
            Command::Mounts(with) => &with.global,
            Command::Watch(with) => &with.global,
            Command::Serve(with) => &with.global,
            Command::Init(with) => &with.global,
            Command::Completions { global, .. }
            | Command::Schema { global, .. }
            | Command::Man { global, .. } => global,
        }
    }
}

/// The command line, its flags given before and after the subcommand merged
/// ([`GlobalArgs::after`]); or what clap has to say instead (help, version, a usage error),
/// for the `Printer` to print.
pub fn parse_cli() -> Result<Cli, clap::Error> {
    use clap::{CommandFactory, FromArgMatches};
    let mut command = Cli::command();
    let matches = command.try_get_matches_from_mut(std::env::args_os())?;
    match Cli::from_arg_matches(&matches) {
        Ok(mut cli) => {
            if let Some((_, sub)) = matches.subcommand() {
                cli.global = cli.global.after(cli.command.global(), sub);
            }
            Ok(cli)
        }
        Err(err) => Err(err.format(&mut command)),
    }
}

// Flags every command takes, before or after the subcommand: `clawmd` takes them, and so does
// every subcommand (`With`; `GlobalArgs::after` merges the two). Not clap's `global` args: clap
// copies those into every subcommand at every run, a tenth of a runner's spawn. (A plain
// comment: see DeliveryArgs.)
#[derive(Args, Debug, Clone)]
pub struct GlobalArgs {
    /// The host project root holding container/ and groups/.
    #[arg(long, env = "CLAWMD_ROOT", default_value = ".")]
    pub root: PathBuf,
    /// The groups folder (default: <root>/groups).
    #[arg(long, env = "CLAWMD_GROUPS_DIR")]
    pub groups_dir: Option<PathBuf>,
    /// The shared container content folder (default: <root>/container).
    #[arg(long, env = "CLAWMD_CONTAINER_DIR")]
    pub container_dir: Option<PathBuf>,
    /// Where container/ is mounted inside the container [default: /app].
    #[arg(long, env = "CLAWMD_APP_MOUNT")]
    pub app_mount: Option<PathBuf>,
    /// The agent's working directory inside the container (where the group is mounted)
    /// [default: /workspace/agent].
    #[arg(long, env = "CLAWMD_WORKSPACE_MOUNT")]
    pub workspace_mount: Option<PathBuf>,
    /// Say more: every group, even those already right, and logs on stderr (-v info, -vv
    /// debug; RUST_LOG also works).
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Print only failures.
    #[arg(short, long, conflicts_with = "verbose")]
    pub quiet: bool,
    /// When to colour the output (NO_COLOR is honoured by auto).
    #[arg(long, value_enum, default_value_t = ColorWhen::Auto, value_name = "WHEN")]
    pub color: ColorWhen,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorWhen {
    /// On a terminal, unless NO_COLOR is set.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

impl GlobalArgs {
    /// These flags (given before the subcommand, or from `CLAWMD_*`, or the defaults) with
    /// `later`, given after it (`sub`: the subcommand's matches): a flag given there wins, as
    /// clap's own global flags did.
    fn after(&self, later: &GlobalArgs, sub: &clap::ArgMatches) -> GlobalArgs {
        fn pick<T: Clone>(sub: &clap::ArgMatches, id: &str, before: &T, after: &T) -> T {
            match sub.value_source(id) == Some(clap::parser::ValueSource::CommandLine) {
                true => after.clone(),
                false => before.clone(),
            }
        }
        GlobalArgs {
            root: pick(sub, "root", &self.root, &later.root),
            groups_dir: pick(sub, "groups_dir", &self.groups_dir, &later.groups_dir),
            container_dir: pick(
                sub,
                "container_dir",
                &self.container_dir,
                &later.container_dir,
            ),
            app_mount: pick(sub, "app_mount", &self.app_mount, &later.app_mount),
            workspace_mount: pick(
                sub,
                "workspace_mount",
                &self.workspace_mount,
                &later.workspace_mount,
            ),
            verbose: pick(sub, "verbose", &self.verbose, &later.verbose),
            quiet: pick(sub, "quiet", &self.quiet, &later.quiet),
            color: pick(sub, "color", &self.color, &later.color),
        }
    }

    /// How much the human output says: `-q`, the default, or `-v`.
    pub fn detail(&self) -> Detail {
        match (self.quiet, self.verbose) {
            (true, _) => Detail::Quiet,
            (false, 0) => Detail::Normal,
            (false, _) => Detail::Verbose,
        }
    }
}

#[derive(Args, Debug, Clone, Copy)]
pub struct LockArgs {
    /// Seconds to wait for another clawmd run that holds a group's lock [default: 60].
    #[arg(long, env = "CLAWMD_LOCK_TIMEOUT", value_name = "SECS")]
    pub lock_timeout: Option<u64>,
}

// How memory reaches the agents; every value falls back to <root>/clawmd.json, then the
// default. (Plain comments on every struct flattened into a subcommand: a doc comment would
// be its about, and a subcommand's arguments are added after its own about: `defer` below.)
#[derive(Args, Debug, Clone, Default)]
pub struct DeliveryArgs {
    /// managed (default): the guardrails as Claude Code's managed policy at /etc/claude-code,
    /// which no settings file of the agent's can drop; inline: one generated CLAUDE.md importing
    /// only CLAUDE.local.md; copy: regular-file copies; link: symlinks into /app, which Claude
    /// Code drops unless external imports are approved.
    #[arg(long, env = "CLAWMD_DELIVERY", value_parser = parse_delivery())]
    pub delivery: Option<Delivery>,
    /// The agent backend of groups whose container.json has no `provider` [default: claude].
    #[arg(long, env = "CLAWMD_PROVIDER", value_parser = parse_provider())]
    pub provider: Option<Provider>,
    /// The agents' runtime approves external imports for the workspace (~/.claude.json).
    #[arg(long)]
    pub approve_external: bool,
    /// The Claude Code release the agents run: its loader rules and wrapper text (default:
    /// clawmd.json's claudeCodeVersion, else the deployment's pin (container/cli-tools.json's
    /// Claude Code entry, else container/Dockerfile's ARG CLAUDE_CODE_VERSION), else the newest
    /// release the conformance corpus covers on which the agent's settings were measured too).
    #[arg(long, env = "CLAWMD_CLAUDE_VERSION", value_name = "X.Y.Z", value_parser = parse_version)]
    pub claude_version: Option<ClaudeVersion>,
}

/// How a command's report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OutputFormat {
    /// A short summary for people.
    #[default]
    Human,
    /// The machine-readable report (docs/json-report.md) on stdout.
    Json,
}

#[derive(Args, Debug, Clone, Copy)]
pub struct OutputArgs {
    /// How to print the report: for people, or the machine-readable JSON report
    /// (docs/json-report.md) on stdout.
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub format: OutputFormat,
    /// The same as --format json.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
}

impl OutputArgs {
    /// The format asked for (`--json` is `--format json`).
    pub fn format(self) -> OutputFormat {
        if self.json {
            OutputFormat::Json
        } else {
            self.format
        }
    }
}

// Which groups: named, or every one with --all; one of the two is required (a runner must never
// compose everything by accident), and the usage and its error say so (`<GROUPS>...|--all`).
#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["groups", "all"])))]
pub struct ComposeArgs {
    /// Groups to compose (folder names under groups/).
    pub groups: Vec<String>,
    /// Compose every group.
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub delivery: DeliveryArgs,
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Print what would change; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// With --dry-run: also show each file's content change as a unified diff (human output).
    #[arg(long, requires = "dry_run")]
    pub diff: bool,
    #[command(flatten)]
    pub lock: LockArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Args, Debug)]
pub struct WatchArgs {
    /// Groups to watch (default: every group, including groups added while watching).
    #[arg(conflicts_with = "all")]
    pub groups: Vec<String>,
    /// Watch every group (the default when no group is named).
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub delivery: DeliveryArgs,
    /// Milliseconds the inputs must be quiet before the groups they concern are recomposed.
    #[arg(long, default_value_t = 200, value_name = "MS")]
    pub debounce_ms: u64,
    #[command(flatten)]
    pub lock: LockArgs,
    /// How to print each event: for people, or one JSON line per event (docs/json-report.md).
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub format: OutputFormat,
    /// The same as --format json.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
}

impl WatchArgs {
    /// The format asked for (`--json` is `--format json`, as for the other commands).
    pub fn format(&self) -> OutputFormat {
        match self.json {
            true => OutputFormat::Json,
            false => self.format,
        }
    }
}

// A group's config handed on the command line (a plain comment: see DeliveryArgs).
#[derive(Args, Debug, Clone, Default)]
pub struct ConfigArgs {
    /// The group's config (container.json's shape), from FILE or `-` (standard input), for a
    /// runner that keeps it elsewhere (nanoclaw keeps cli_scope in its database): read instead
    /// of container.json, for one group. With "groupConfig": "handed" in clawmd.json, compose
    /// keeps it for check and render.
    #[arg(long, value_name = "FILE|-")]
    pub config: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct InitArgs {
    /// Print what would be written; write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Args, Debug)]
pub struct MigrateArgs {
    /// Print what would change; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Append groups/global/CLAUDE.md text the shared base lacks to container/CLAUDE.md (by
    /// default it is kept aside in the state folder and reported: the shared base is the
    /// deployment owner's, and the old global text is often one group's persona).
    #[arg(long)]
    pub append_global: bool,
    #[command(flatten)]
    pub lock: LockArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Groups to check (default: all).
    #[arg(conflicts_with = "all")]
    pub groups: Vec<String>,
    /// Check every group (the default when no group is named).
    #[arg(long)]
    pub all: bool,
    /// Check against these settings (the same resolution as compose: flags, CLAWMD_*,
    /// clawmd.json, defaults).
    #[command(flatten)]
    pub delivery: DeliveryArgs,
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Apply the safe fixes (compose the groups that are out of date or hold leftovers, unless
    /// a person edited them), then report what is left for a person.
    #[arg(long)]
    pub fix: bool,
    #[command(flatten)]
    pub lock: LockArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The settings of every request that does not give its own (a request's `delivery`,
    /// `provider`, `approve_external` win over these).
    #[command(flatten)]
    pub delivery: DeliveryArgs,
    #[command(flatten)]
    pub lock: LockArgs,
}

#[derive(Args, Debug)]
pub struct MountsArgs {
    /// The group whose container the binds are for.
    pub group: String,
    /// The binds of these settings (the same resolution as compose: flags, CLAWMD_*,
    /// clawmd.json, defaults).
    #[command(flatten)]
    pub delivery: DeliveryArgs,
    /// How to print the table: for people, as the JSON array a runner applies, or as
    /// Kubernetes objects (a v1 List: ConfigMaps carrying the composed files and the Pod
    /// mounting them; docs/kubernetes.md).
    #[arg(long, value_enum, default_value_t = MountsFormat::Human)]
    pub format: MountsFormat,
    /// The same as --format json.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
}

/// How `clawmd mounts` prints the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum MountsFormat {
    /// One bind a line, for people.
    #[default]
    Human,
    /// The JSON array of binds a runner applies in order.
    Json,
    /// A v1 List: the ConfigMaps carrying what the table binds read-only, and the Pod whose
    /// container `agent` mounts them (docs/kubernetes.md).
    K8s,
}

impl MountsArgs {
    /// The format asked for (`--json` is `--format json`).
    pub fn format(&self) -> MountsFormat {
        match self.json {
            true => MountsFormat::Json,
            false => self.format,
        }
    }
}

// What to render: a group, or a folder with --cwd; one of the two is required, and the usage
// and its error say so (`<GROUP|--cwd <DIR>>`).
#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["group", "cwd"])))]
pub struct RenderArgs {
    /// The group whose agent's memory to show, as loaded inside its container (cwd
    /// /workspace/agent, mounts as the runner sets them up).
    pub group: Option<String>,
    /// Instead of a group: the memory Claude Code loads when started in DIR on this machine.
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// $HOME: for --cwd, the home folder; for a group, a host folder mounted as the agent's home.
    #[arg(long, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// Where --home is mounted in the container (groups only).
    #[arg(long, default_value = clawmd::view::DEFAULT_CONTAINER_HOME, value_name = "PATH")]
    pub container_home: PathBuf,
    /// Treat imports outside the working directory as approved (as after "allow" in Claude Code).
    #[arg(long)]
    pub approve_external: bool,
    /// The output: Claude Code's own block, one flattened markdown file, or chat messages (JSON).
    #[arg(long, default_value = "claude", value_parser = parse_format())]
    pub format: Format,
    /// The front end: the CLI, or the Agent SDK with settingSources ['project','user']
    /// (default for a group: the deployment's, from clawmd.json or its runner; else cli).
    #[arg(long, value_parser = parse_consumer())]
    pub consumer: Option<Consumer>,
    /// Instead of the memory: which files reach the agent and what is dropped, and why.
    #[arg(long)]
    pub delivery_view: bool,
    /// The Claude Code release the agent runs: its loader rules and wrapper text (default for
    /// a group: the deployment's, as compose judges it; else the newest release the
    /// conformance corpus covers on which the agent's settings were measured too).
    #[arg(long, env = "CLAWMD_CLAUDE_VERSION", value_name = "X.Y.Z", value_parser = parse_version)]
    pub claude_version: Option<ClaudeVersion>,
    /// For a group: the delivery mode whose binds the container has (default: clawmd.json's,
    /// as compose resolves it).
    #[arg(long, env = "CLAWMD_DELIVERY", value_parser = parse_delivery())]
    pub delivery: Option<Delivery>,
    /// For a group: the backend of a group whose container.json names none.
    #[arg(long, env = "CLAWMD_PROVIDER", value_parser = parse_provider())]
    pub provider: Option<Provider>,
}

fn parse_format() -> impl clap::builder::TypedValueParser<Value = Format> {
    clap::builder::PossibleValuesParser::new(["claude", "flat", "messages"])
        .try_map(|text| text.parse::<Format>())
}

fn parse_version(text: &str) -> Result<ClaudeVersion, String> {
    text.parse()
        .map_err(|e: clawmd::loader::version::BadVersion| e.to_string())
}

/// Library types stay free of clap: the binary lists their values and parses with `FromStr`.
fn parse_schema() -> impl clap::builder::TypedValueParser<Value = SchemaKind> {
    clap::builder::PossibleValuesParser::new(SchemaKind::ALL.map(|(_, name)| name))
        .try_map(|text| text.parse::<SchemaKind>())
}

fn parse_delivery() -> impl clap::builder::TypedValueParser<Value = Delivery> {
    clap::builder::PossibleValuesParser::new(Delivery::ALL.map(Delivery::as_str))
        .try_map(|text| text.parse::<Delivery>())
}

fn parse_provider() -> impl clap::builder::TypedValueParser<Value = Provider> {
    clap::builder::PossibleValuesParser::new(Provider::ALL.map(Provider::as_str))
        .try_map(|text| text.parse::<Provider>())
}

fn parse_consumer() -> impl clap::builder::TypedValueParser<Value = Consumer> {
    clap::builder::PossibleValuesParser::new(["cli", "sdk"])
        .try_map(|text| text.parse::<Consumer>())
}
