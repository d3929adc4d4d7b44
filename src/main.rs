//! The `clawmd` command line: parses flags, calls the library, prints the result.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::builder::TypedValueParser as _;
use clap::{Args, CommandFactory as _, Parser, Subcommand};

use clawmd::Delivery;
use clawmd::check::{CheckOptions, check_with_progress, safely_fixable};
use clawmd::compose::{ComposeOptions, compose_with_progress};
use clawmd::deployment::Selection;
use clawmd::diff::planned_diffs;
use clawmd::loader::{ClaudeVersion, Format, HostFs, load, render};
use clawmd::migrate::{MigrateOptions, migrate_with_progress};
use clawmd::progress::Progress;
use clawmd::report::{Detail, Line, Report, RunFailure, Stream, Tone, WarningReport};
use clawmd::report::{WatchEvent, WatchLine};
use clawmd::schema::{SchemaKind, schema};
use clawmd::settings::{Overrides, Resolved, read_settings};
use clawmd::target::Provider;
use clawmd::view::{Consumer, ViewOptions, delivery_view, load_group, load_options};
use clawmd::watch::{WatchOptions, watch};

/// Compose and check the CLAUDE.md memory of containerised agent groups.
#[derive(Parser, Debug)]
#[command(name = "clawmd", version, about, long_about = None, after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    global: GlobalArgs,
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
enum Command {
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
  clawmd mounts main --format json   [{\"host\": ..., \"container\": ..., \"readonly\": ...}, ...]")]
    Mounts(With<MountsArgs>),
    /// Keep groups composed as their inputs change (inotify), printing each group that changed.
    #[command(after_help = "\
Examples:
  clawmd watch --all --format json     one JSON line per group that changed (docs/json-report.md)
  clawmd watch main ops                 keep two groups composed
  clawmd watch --all --debounce-ms 500  wait for half a second of quiet before recomposing")]
    Watch(With<WatchArgs>),
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
    /// Print the manual page (roff).
    #[command(after_help = "\
Examples:
  clawmd man > /usr/local/share/man/man1/clawmd.1
  clawmd man | man -l -")]
    Man {
        #[command(flatten)]
        global: GlobalArgs,
    },
}

// A subcommand's arguments, and the flags every command takes ([`GlobalArgs`]) as given after
// the subcommand. (A plain comment: see DeliveryArgs.)
#[derive(Args, Debug)]
struct With<T: Args> {
    #[command(flatten)]
    args: T,
    #[command(flatten)]
    global: GlobalArgs,
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
            Command::Init(with) => &with.global,
            Command::Completions { global, .. }
            | Command::Schema { global, .. }
            | Command::Man { global } => global,
        }
    }
}

/// The command line, its flags given before and after the subcommand merged
/// ([`GlobalArgs::after`]).
fn parse_cli() -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    let mut command = Cli::command();
    let matches = command.get_matches_mut();
    match Cli::from_arg_matches(&matches) {
        Ok(mut cli) => {
            if let Some((_, sub)) = matches.subcommand() {
                cli.global = cli.global.after(cli.command.global(), sub);
            }
            cli
        }
        Err(err) => err.format(&mut command).exit(),
    }
}

// Flags every command takes, before or after the subcommand: `clawmd` takes them, and so does
// every subcommand (`With`; `GlobalArgs::after` merges the two). Not clap's `global` args: clap
// copies those into every subcommand at every run, a tenth of a runner's spawn. (A plain
// comment: see DeliveryArgs.)
#[derive(Args, Debug, Clone)]
struct GlobalArgs {
    /// The host project root holding container/ and groups/.
    #[arg(long, env = "CLAWMD_ROOT", default_value = ".")]
    root: PathBuf,
    /// The groups folder (default: <root>/groups).
    #[arg(long, env = "CLAWMD_GROUPS_DIR")]
    groups_dir: Option<PathBuf>,
    /// The shared container content folder (default: <root>/container).
    #[arg(long, env = "CLAWMD_CONTAINER_DIR")]
    container_dir: Option<PathBuf>,
    /// Where container/ is mounted inside the container [default: /app].
    #[arg(long, env = "CLAWMD_APP_MOUNT")]
    app_mount: Option<PathBuf>,
    /// The agent's working directory inside the container (where the group is mounted)
    /// [default: /workspace/agent].
    #[arg(long, env = "CLAWMD_WORKSPACE_MOUNT")]
    workspace_mount: Option<PathBuf>,
    /// Say more: every group, even those already right, and logs on stderr (-v info, -vv
    /// debug; RUST_LOG also works).
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Print only failures.
    #[arg(short, long, conflicts_with = "verbose")]
    quiet: bool,
    /// When to colour the output (NO_COLOR is honoured by auto).
    #[arg(long, value_enum, default_value_t = ColorWhen::Auto, value_name = "WHEN")]
    color: ColorWhen,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ColorWhen {
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

    fn detail(&self) -> Detail {
        match (self.quiet, self.verbose) {
            (true, _) => Detail::Quiet,
            (false, 0) => Detail::Normal,
            (false, _) => Detail::Verbose,
        }
    }

    /// The deployment's settings: these flags (and `CLAWMD_*`) over `<root>/clawmd.json` over
    /// the defaults. Warnings about the settings file are printed and returned.
    fn resolve(
        &self,
        delivery: &DeliveryArgs,
        lock_timeout: Option<u64>,
        printer: &Printer,
    ) -> anyhow::Result<(Resolved, Vec<WarningReport>)> {
        let (settings, warnings) = read_settings(&self.root)?;
        let warnings: Vec<WarningReport> = warnings
            .iter()
            .map(|warning| WarningReport {
                code: warning.code,
                message: warning.to_string(),
            })
            .collect();
        for warning in &warnings {
            printer.warning(&warning.message);
        }
        Ok((
            settings
                .resolve(&self.root, &self.overrides(delivery, lock_timeout))
                .with_deployment_pins(),
            warnings,
        ))
    }

    /// What these flags (and `CLAWMD_*`) say, over whatever `clawmd.json` says.
    fn overrides(&self, delivery: &DeliveryArgs, lock_timeout: Option<u64>) -> Overrides {
        Overrides {
            groups_dir: self.groups_dir.clone(),
            container_dir: self.container_dir.clone(),
            app_mount: self.app_mount.clone(),
            workspace_mount: self.workspace_mount.clone(),
            lock_timeout,
            delivery: delivery.delivery,
            provider: delivery.provider,
            approve_external: delivery.approve_external,
            claude_version: delivery.claude_version,
        }
    }
}

#[derive(Args, Debug, Clone, Copy)]
struct LockArgs {
    /// Seconds to wait for another clawmd run that holds a group's lock [default: 60].
    #[arg(long, env = "CLAWMD_LOCK_TIMEOUT", value_name = "SECS")]
    lock_timeout: Option<u64>,
}

// How memory reaches the agents; every value falls back to <root>/clawmd.json, then the
// default. (Plain comments on every struct flattened into a subcommand: a doc comment would
// be its about, and a subcommand's arguments are added after its own about: `defer` below.)
#[derive(Args, Debug, Clone, Default)]
struct DeliveryArgs {
    /// managed (default): the guardrails as Claude Code's managed policy at /etc/claude-code,
    /// which no settings file of the agent's can drop; inline: one generated CLAUDE.md importing
    /// only CLAUDE.local.md; copy: regular-file copies; link: symlinks into /app, which Claude
    /// Code drops unless external imports are approved.
    #[arg(long, env = "CLAWMD_DELIVERY", value_parser = parse_delivery())]
    delivery: Option<Delivery>,
    /// The agent backend of groups whose container.json has no `provider` [default: claude].
    #[arg(long, env = "CLAWMD_PROVIDER", value_parser = parse_provider())]
    provider: Option<Provider>,
    /// The agents' runtime approves external imports for the workspace (~/.claude.json).
    #[arg(long)]
    approve_external: bool,
    /// The Claude Code release the agents run: its loader rules and wrapper text (default:
    /// clawmd.json's claudeCodeVersion, else the deployment's pin (container/Dockerfile's
    /// ARG CLAUDE_CODE_VERSION), else the newest release the conformance corpus covers).
    #[arg(long, env = "CLAWMD_CLAUDE_VERSION", value_name = "X.Y.Z", value_parser = parse_version)]
    claude_version: Option<ClaudeVersion>,
}

/// How a command's report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
enum OutputFormat {
    /// A short summary for people.
    #[default]
    Human,
    /// The machine-readable report (docs/json-report.md) on stdout.
    Json,
}

#[derive(Args, Debug, Clone, Copy)]
struct OutputArgs {
    /// How to print the report: for people, or the machine-readable JSON report
    /// (docs/json-report.md) on stdout.
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    format: OutputFormat,
    /// The same as --format json.
    #[arg(long, conflicts_with = "format")]
    json: bool,
}

impl OutputArgs {
    fn format(self) -> OutputFormat {
        if self.json {
            OutputFormat::Json
        } else {
            self.format
        }
    }
}

#[derive(Args, Debug)]
struct ComposeArgs {
    /// Groups to compose (folder names under groups/).
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    groups: Vec<String>,
    /// Compose every group.
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    delivery: DeliveryArgs,
    #[command(flatten)]
    config: ConfigArgs,
    /// Print what would change; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// With --dry-run: also show each file's content change as a unified diff (human output).
    #[arg(long, requires = "dry_run")]
    diff: bool,
    #[command(flatten)]
    lock: LockArgs,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Args, Debug)]
struct WatchArgs {
    /// Groups to watch (default: every group, including groups added while watching).
    #[arg(conflicts_with = "all")]
    groups: Vec<String>,
    /// Watch every group (the default when no group is named).
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    delivery: DeliveryArgs,
    /// Milliseconds the inputs must be quiet before the groups they concern are recomposed.
    #[arg(long, default_value_t = 200, value_name = "MS")]
    debounce_ms: u64,
    #[command(flatten)]
    lock: LockArgs,
    /// How to print each event: for people, or one JSON line per event (docs/json-report.md).
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    format: OutputFormat,
}

// A group's config handed on the command line (a plain comment: see DeliveryArgs).
#[derive(Args, Debug, Clone, Default)]
struct ConfigArgs {
    /// The group's config (container.json's shape), from FILE or `-` (standard input), for a
    /// runner that keeps it elsewhere (nanoclaw keeps cli_scope in its database): read instead
    /// of container.json, for one group. With "groupConfig": "handed" in clawmd.json, compose
    /// keeps it for check and render.
    #[arg(long, value_name = "FILE|-")]
    config: Option<PathBuf>,
}

impl ConfigArgs {
    /// Puts the handed config, if any, into `layout` for `groups` (exactly one), and with
    /// `keep` (compose, not a dry run) keeps it where "handed" configs are read.
    fn apply(
        &self,
        layout: &mut clawmd::Layout,
        groups: &[String],
        keep: bool,
    ) -> anyhow::Result<()> {
        let Some(from) = &self.config else {
            return Ok(());
        };
        let [group] = groups else {
            anyhow::bail!("--config hands the config of one group: name exactly one group");
        };
        let bytes = if from.as_os_str() == "-" {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(
                &mut std::io::Read::take(std::io::stdin(), clawmd::config::MAX_CONFIG_BYTES + 1),
                &mut bytes,
            )
            .context("cannot read the config from standard input")?;
            bytes
        } else {
            fs_err::read(from).context("cannot read --config")?
        };
        if bytes.len() as u64 > clawmd::config::MAX_CONFIG_BYTES {
            anyhow::bail!(
                "the handed config is over {} bytes; a group's config is a few kilobytes",
                clawmd::config::MAX_CONFIG_BYTES
            );
        }
        if keep && layout.group_config == clawmd::layout::GroupConfigSource::Handed {
            clawmd::deployment::keep_handed_config(layout, group, &bytes)?;
        }
        layout
            .given_configs
            .insert(group.clone(), std::sync::Arc::from(bytes));
        Ok(())
    }
}

#[derive(Args, Debug)]
struct InitArgs {
    /// Print what would be written; write nothing.
    #[arg(long)]
    dry_run: bool,
}

#[derive(Args, Debug)]
struct MigrateArgs {
    /// Print what would change; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Append groups/global/CLAUDE.md text the shared base lacks to container/CLAUDE.md (by
    /// default it is kept aside in the state folder and reported: the shared base is the
    /// deployment owner's, and the old global text is often one group's persona).
    #[arg(long)]
    append_global: bool,
    #[command(flatten)]
    lock: LockArgs,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Args, Debug)]
struct CheckArgs {
    /// Groups to check (default: all).
    #[arg(conflicts_with = "all")]
    groups: Vec<String>,
    /// Check every group (the default when no group is named).
    #[arg(long)]
    all: bool,
    /// Check against these settings (the same resolution as compose: flags, CLAWMD_*,
    /// clawmd.json, defaults).
    #[command(flatten)]
    delivery: DeliveryArgs,
    #[command(flatten)]
    config: ConfigArgs,
    /// Apply the safe fixes (compose the groups that are out of date or hold leftovers, unless
    /// a person edited them), then report what is left for a person.
    #[arg(long)]
    fix: bool,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Args, Debug)]
struct MountsArgs {
    /// The group whose container the binds are for.
    group: String,
    /// The binds of these settings (the same resolution as compose: flags, CLAWMD_*,
    /// clawmd.json, defaults).
    #[command(flatten)]
    delivery: DeliveryArgs,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Args, Debug)]
struct RenderArgs {
    /// The group whose agent's memory to show, as loaded inside its container (cwd
    /// /workspace/agent, mounts as the runner sets them up).
    #[arg(conflicts_with = "cwd", required_unless_present = "cwd")]
    group: Option<String>,
    /// Instead of a group: the memory Claude Code loads when started in DIR on this machine.
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// $HOME: for --cwd, the home folder; for a group, a host folder mounted as the agent's home.
    #[arg(long, value_name = "DIR")]
    home: Option<PathBuf>,
    /// Where --home is mounted in the container (groups only).
    #[arg(long, default_value = clawmd::view::DEFAULT_CONTAINER_HOME, value_name = "PATH")]
    container_home: PathBuf,
    /// Treat imports outside the working directory as approved (as after "allow" in Claude Code).
    #[arg(long)]
    approve_external: bool,
    /// The output: Claude Code's own block, one flattened markdown file, or chat messages (JSON).
    #[arg(long, default_value = "claude", value_parser = parse_format())]
    format: Format,
    /// The front end: the CLI, or the Agent SDK with settingSources ['project','user']
    /// (default for a group: the deployment's, from clawmd.json or its runner; else cli).
    #[arg(long, value_parser = parse_consumer())]
    consumer: Option<Consumer>,
    /// Instead of the memory: which files reach the agent and what is dropped, and why.
    #[arg(long)]
    delivery_view: bool,
    /// The Claude Code release the agent runs: its loader rules and wrapper text (default for
    /// a group: the deployment's, as compose judges it; else the newest release the
    /// conformance corpus covers).
    #[arg(long, env = "CLAWMD_CLAUDE_VERSION", value_name = "X.Y.Z", value_parser = parse_version)]
    claude_version: Option<ClaudeVersion>,
    /// For a group: the delivery mode whose binds the container has (default: clawmd.json's,
    /// as compose resolves it).
    #[arg(long, env = "CLAWMD_DELIVERY", value_parser = parse_delivery())]
    delivery: Option<Delivery>,
    /// For a group: the backend of a group whose container.json names none.
    #[arg(long, env = "CLAWMD_PROVIDER", value_parser = parse_provider())]
    provider: Option<Provider>,
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

fn main() -> ExitCode {
    raise_open_file_limit();
    let cli = parse_cli();
    let printer = Printer::new(&cli.global);
    init_logging(cli.global.verbose, printer.log_ansi);
    match run(cli, &printer) {
        Ok(code) => code,
        Err(err) => {
            printer.error(&error_once(&err));
            ExitCode::FAILURE
        }
    }
}

/// Raises the soft limit on open files to the hard one, as many tools do: a run over thousands
/// of groups holds a few descriptors per group of a batch (the library sizes its batches and
/// threads from the limit, so it works under any limit; a higher one only means fewer syncs).
fn raise_open_file_limit() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    // No hard limit: the kernel still caps descriptors (fs.nr_open, 1,048,576 by default).
    let wanted = limit.maximum.unwrap_or(1 << 20);
    if limit.current.is_some_and(|current| current < wanted) {
        let raised = Rlimit {
            current: Some(wanted),
            maximum: limit.maximum,
        };
        if let Err(err) = setrlimit(Resource::Nofile, raised) {
            tracing::debug!("cannot raise the open-file limit to {wanted}: {err}");
        }
    }
}

/// The error and its causes, each said once: a library error's message already includes its
/// cause, so a cause whose text is already there is not repeated.
fn error_once(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&cause);
        }
    }
    text
}

fn run(cli: Cli, printer: &Printer) -> anyhow::Result<ExitCode> {
    let global = &cli.global;
    match cli.command {
        Command::Compose(with) => run_compose(global, with.args, printer),
        Command::Migrate(with) => run_migrate(global, with.args, printer),
        Command::Init(with) => run_init(global, with.args, printer),
        Command::Check(with) => run_check(global, with.args, printer),
        Command::Render(with) => run_render(global, with.args, printer),
        Command::Mounts(with) => run_mounts(global, with.args, printer),
        Command::Watch(with) => run_watch(global, with.args, printer),
        Command::Completions { shell, .. } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "clawmd", &mut script);
            print_stdout(&String::from_utf8_lossy(&script))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Schema { kind, .. } => {
            print_stdout(&(serde_json::to_string_pretty(&schema(kind))? + "\n"))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { .. } => {
            let mut page = Vec::new();
            clap_mangen::Man::new(Cli::command())
                .render(&mut page)
                .context("cannot render the manual page")?;
            print_stdout(&String::from_utf8_lossy(&page))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The named groups, or all of them with `--all` or when none is named.
fn selection(groups: &[String], all: bool) -> Selection {
    if all || groups.is_empty() {
        Selection::All
    } else {
        Selection::Named(groups.to_vec())
    }
}

fn run_compose(
    global: &GlobalArgs,
    args: ComposeArgs,
    printer: &Printer,
) -> anyhow::Result<ExitCode> {
    let (mut resolved, warnings) =
        global.resolve(&args.delivery, args.lock.lock_timeout, printer)?;
    args.config
        .apply(&mut resolved.layout, &args.groups, !args.dry_run)?;
    let selection = selection(&args.groups, args.all);
    let options = ComposeOptions {
        settings: resolved.delivery,
        dry_run: args.dry_run,
        lock_timeout: resolved.lock_timeout,
    };
    let bar = printer.progress("composing");
    let result =
        compose_with_progress(&resolved.layout, &selection, &options, &bar).map(|mut report| {
            report.warnings.extend(warnings);
            report
        });
    bar.finish();
    let format = args.output.format();
    let diffs = match (&result, args.diff, format) {
        (Ok(report), true, OutputFormat::Human) => {
            let changed: Vec<String> = report
                .groups
                .iter()
                .filter(|g| g.status == clawmd::report::Status::Changed)
                .map(|g| g.group.clone())
                .collect();
            planned_diffs(&resolved.layout, &options.settings, &changed)?
        }
        _ => Vec::new(),
    };
    let code = finish("compose", result, format, printer)?;
    for diff in &diffs {
        for text in diff.unified.lines() {
            let tone = if text.starts_with("+++") || text.starts_with("---") {
                Tone::Plain
            } else if text.starts_with('+') {
                Tone::Changed
            } else if text.starts_with('-') {
                Tone::Error
            } else if text.starts_with("@@") {
                Tone::Note
            } else {
                Tone::Plain
            };
            printer.line(&Line {
                stream: Stream::Stdout,
                tone,
                text: clawmd::report::escape(text).into_owned(),
            })?;
        }
    }
    Ok(code)
}

fn run_watch(global: &GlobalArgs, args: WatchArgs, printer: &Printer) -> anyhow::Result<ExitCode> {
    use std::os::fd::AsFd as _;
    let overrides = global.overrides(&args.delivery, args.lock.lock_timeout);
    let options = WatchOptions {
        debounce: std::time::Duration::from_millis(args.debounce_ms),
    };
    // SIGINT and SIGTERM make `stop` readable; the watch loop sleeps on it and stops cleanly
    // between two recomposes.
    let (stop, signalled) =
        std::os::unix::net::UnixStream::pair().context("cannot set up signal handling")?;
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::low_level::pipe::register(signal, signalled.try_clone()?)
            .context("cannot set up signal handling")?;
    }
    // A closed stdout (the runner reading the lines is gone) or any other write error ends
    // the watch the same way a signal does.
    let mut failed = None;
    let mut sink = |event: WatchEvent| {
        let printed = match args.format {
            OutputFormat::Json => {
                let mut out = std::io::stdout().lock();
                serde_json::to_string(&WatchLine::new(event))
                    .map_err(anyhow::Error::from)
                    .and_then(|line| {
                        writeln!(out, "{line}")
                            .and_then(|()| out.flush())
                            .context("cannot write to stdout")
                    })
            }
            OutputFormat::Human => printer.lines(&event.human(printer.detail)),
        };
        if let Err(err) = printed {
            let _ = (&signalled).write_all(b"!");
            failed.get_or_insert(err);
        }
    };
    watch(
        &global.root,
        &overrides,
        &selection(&args.groups, args.all),
        &options,
        stop.as_fd(),
        &mut sink,
    )
    .context("watch failed")?;
    match failed {
        Some(err) if !is_broken_pipe(&err) => Err(err),
        _ => Ok(ExitCode::SUCCESS),
    }
}

fn run_init(global: &GlobalArgs, args: InitArgs, printer: &Printer) -> anyhow::Result<ExitCode> {
    let (resolved, _) = global.resolve(&DeliveryArgs::default(), None, printer)?;
    let path = global.root.join(clawmd::settings::SETTINGS_FILE);
    let existing = match fs_err::read(&path) {
        Ok(bytes) => match serde_json::from_slice(&bytes) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => anyhow::bail!(
                "{} is not a JSON object; fix it first (init never overwrites it)",
                path.display()
            ),
        },
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => serde_json::Map::new(),
        Err(err) => return Err(err.into()),
    };
    let detected = clawmd::init::detect(&global.root, &resolved.layout);
    let plan = clawmd::init::plan(&detected, &resolved.layout, &existing);
    for note in &plan.notes {
        printer.line(&Line {
            stream: Stream::Stdout,
            tone: Tone::Plain,
            text: format!("  {}", clawmd::report::escape(note)),
        })?;
    }
    let summary = match (&plan.settings, args.dry_run) {
        (None, _) => format!("{}: nothing to add", path.display()),
        (Some(_), true) => format!("{}: would write (dry run: nothing written)", path.display()),
        (Some(bytes), false) => {
            clawmd::fsops::write_host_file(&path, bytes)?;
            format!("{}: written", path.display())
        }
    };
    printer.line(&Line {
        stream: Stream::Stdout,
        tone: Tone::Changed,
        text: clawmd::report::escape(&summary).into_owned(),
    })?;
    Ok(ExitCode::SUCCESS)
}

fn run_migrate(
    global: &GlobalArgs,
    args: MigrateArgs,
    printer: &Printer,
) -> anyhow::Result<ExitCode> {
    let (resolved, _) =
        global.resolve(&DeliveryArgs::default(), args.lock.lock_timeout, printer)?;
    let bar = Bar {
        task: "migrate",
        ..printer.progress("migrating")
    };
    let report = migrate_with_progress(
        &resolved.layout,
        &MigrateOptions {
            dry_run: args.dry_run,
            lock_timeout: resolved.lock_timeout,
            append_global: args.append_global,
        },
        &bar,
    );
    bar.finish();
    finish("migrate", report, args.output.format(), printer)
}

fn run_check(global: &GlobalArgs, args: CheckArgs, printer: &Printer) -> anyhow::Result<ExitCode> {
    let (mut resolved, _) = global.resolve(&args.delivery, None, printer)?;
    args.config
        .apply(&mut resolved.layout, &args.groups, false)?;
    let selection = selection(&args.groups, args.all);
    let options = CheckOptions {
        settings: resolved.delivery,
        delivery_given: args.delivery.delivery.is_some(),
        claude_version: resolved.delivery.claude_version,
    };
    let bar = printer.progress("checking");
    let mut result = check_with_progress(&resolved.layout, &selection, &options, &bar);
    bar.finish();
    if args.fix
        && let Ok(report) = &result
    {
        let fixable = safely_fixable(report);
        if !fixable.is_empty() {
            let compose_options = ComposeOptions {
                settings: options.settings,
                dry_run: false,
                lock_timeout: resolved.lock_timeout,
            };
            let bar = printer.progress("fixing");
            let fixed = compose_with_progress(
                &resolved.layout,
                &Selection::Named(fixable),
                &compose_options,
                &bar,
            );
            bar.finish();
            if let Ok(fixed) = &fixed {
                let names: Vec<String> = fixed
                    .groups
                    .iter()
                    .filter(|g| g.status == clawmd::report::Status::Changed)
                    .map(|g| clawmd::report::escape(&g.group).into_owned())
                    .collect();
                printer.note(&format!(
                    "fixed: composed {} group(s){}{}",
                    names.len(),
                    if names.is_empty() { "" } else { ": " },
                    names.join(", ")
                ));
            }
            let bar = printer.progress("checking");
            result = check_with_progress(&resolved.layout, &selection, &options, &bar);
            bar.finish();
        }
        if let Ok(report) = &result
            && report.groups.iter().any(|g| !g.findings.is_empty())
        {
            printer.note("left for a person (check --fix does not change these):");
        }
    }
    finish("check", result, args.output.format(), printer)
}

fn run_mounts(
    global: &GlobalArgs,
    args: MountsArgs,
    printer: &Printer,
) -> anyhow::Result<ExitCode> {
    let (resolved, _) = global.resolve(&args.delivery, None, printer)?;
    let result = clawmd::mounts::mounts(
        &resolved.layout,
        &args.group,
        &resolved.delivery,
        &resolved.guards,
    )
    .map_err(|source| clawmd::Error::Group {
        group: args.group.clone(),
        source: Box::new(source),
    });
    finish("mounts", result, args.output.format(), printer)
}

fn run_render(
    global: &GlobalArgs,
    args: RenderArgs,
    printer: &Printer,
) -> anyhow::Result<ExitCode> {
    // A group is rendered as the deployment's agents run (its pinned release and consumer)
    // unless the command line says otherwise.
    let resolved = match &args.group {
        Some(_) => {
            let delivery = DeliveryArgs {
                delivery: args.delivery,
                provider: args.provider,
                ..DeliveryArgs::default()
            };
            Some(global.resolve(&delivery, None, printer)?.0)
        }
        None => None,
    };
    let mut view = ViewOptions {
        approve_external: args.approve_external,
        home: args.home.clone(),
        container_home: Some(args.container_home.clone()),
        consumer: args
            .consumer
            .or(resolved.as_ref().map(|r| r.delivery.consumer))
            .unwrap_or_default(),
        claude_version: args
            .claude_version
            .or(resolved.as_ref().map(|r| r.delivery.claude_version))
            .unwrap_or_default(),
        ..ViewOptions::default()
    };
    if !view.claude_version.is_verified() {
        printer.warning(&format!(
            "Claude Code {} is {}",
            view.claude_version,
            view.claude_version.unverified_note()
        ));
    }
    let memory = match (&args.group, &args.cwd) {
        (Some(group), _) => {
            let resolved = resolved.as_ref().expect("resolved for a group");
            view.delivery = resolved.delivery.delivery;
            view.provider = resolved.delivery.provider;
            load_group(&resolved.layout, group, &view)
                .with_context(|| format!("cannot render group {group}"))?
                .0
        }
        (None, Some(cwd)) => {
            let cwd = fs_err::canonicalize(cwd).context("cannot use --cwd")?;
            let home = match &args.home {
                Some(home) => Some(fs_err::canonicalize(home).context("cannot use --home")?),
                None => None,
            };
            let options = load_options(&cwd, home, &view);
            load(&HostFs, &options).context("cannot load memory")?
        }
        (None, None) => unreachable!("clap requires a group or --cwd"),
    };
    if args.delivery_view {
        print_stdout(&delivery_view(&memory))?;
    } else {
        print_stdout(&render(&memory, args.format))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints a command's report (JSON or human) and turns it into the exit status.
fn finish<R: Report>(
    command: &str,
    result: Result<R, clawmd::Error>,
    format: OutputFormat,
    printer: &Printer,
) -> anyhow::Result<ExitCode> {
    let report = match (result, format) {
        (Ok(report), _) => report,
        (Err(err), OutputFormat::Json) => return print_json_error(command, &err, printer),
        (Err(err), OutputFormat::Human) => {
            return Err(err).with_context(|| format!("{command} failed"));
        }
    };
    match format {
        OutputFormat::Json => print_stdout(&(serde_json::to_string_pretty(&report)? + "\n"))?,
        OutputFormat::Human => {
            printer.lines(&report.human(printer.detail))?;
        }
    }
    Ok(exit_code(report.ok()))
}

fn print_json_error(
    command: &str,
    err: &clawmd::Error,
    printer: &Printer,
) -> anyhow::Result<ExitCode> {
    let failure = RunFailure::new(command, err);
    print_stdout(&(serde_json::to_string_pretty(&failure)? + "\n"))?;
    printer.error(&err.to_string());
    Ok(ExitCode::FAILURE)
}

fn exit_code(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The one place that writes to stdout without colour (JSON, rendered memory, scripts). A
/// closed pipe (`clawmd ... | head`) is not an error.
fn print_stdout(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    ignore_broken_pipe(out.write_all(text.as_bytes()).and_then(|()| out.flush()))
        .context("cannot write to stdout")
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn ignore_broken_pipe(result: std::io::Result<()>) -> std::io::Result<()> {
    match result {
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Every human line goes through here: to the stream the report chose, coloured by its tone
/// when colour is on (a terminal, or `--color always`; never with `NO_COLOR` under `auto`).
struct Printer {
    detail: Detail,
    /// Whether `-v` logs may carry ANSI colour (stderr is a terminal and colour is allowed).
    log_ansi: bool,
    /// Whether a progress bar may be drawn (stderr is a terminal and not `-q`).
    bars: bool,
}

impl Printer {
    fn new(global: &GlobalArgs) -> Self {
        use std::io::IsTerminal as _;
        let choice = match global.color {
            ColorWhen::Auto => anstream::ColorChoice::Auto,
            ColorWhen::Always => anstream::ColorChoice::Always,
            ColorWhen::Never => anstream::ColorChoice::Never,
        };
        choice.write_global();
        let stderr_tty = std::io::stderr().is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let log_ansi = match global.color {
            ColorWhen::Always => true,
            ColorWhen::Never => false,
            ColorWhen::Auto => stderr_tty && !no_color,
        };
        Printer {
            detail: global.detail(),
            log_ansi,
            bars: stderr_tty && !global.quiet,
        }
    }

    fn line(&self, line: &Line) -> anyhow::Result<()> {
        self.lines(std::slice::from_ref(line))
    }

    /// Prints `lines` in order, each run of lines bound for the same stream in one write (a
    /// report of 10,000 groups is 70,000 lines).
    fn lines(&self, lines: &[Line]) -> anyhow::Result<()> {
        use owo_colors::OwoColorize as _;
        let mut run = Vec::new();
        for (index, line) in lines.iter().enumerate() {
            let text = &line.text;
            let _ = match line.tone {
                Tone::Plain => writeln!(run, "{text}"),
                Tone::Changed => writeln!(run, "{}", text.green()),
                Tone::Warning => writeln!(run, "{}", text.yellow()),
                Tone::Error => writeln!(run, "{}", text.red().bold()),
                Tone::Note => writeln!(run, "{}", text.dimmed()),
            };
            let next = lines.get(index + 1).map(|next| next.stream);
            if next == Some(line.stream) {
                continue;
            }
            let result = match line.stream {
                Stream::Stdout => {
                    let mut out = anstream::stdout().lock();
                    out.write_all(&run).and_then(|()| out.flush())
                }
                Stream::Stderr => anstream::stderr().lock().write_all(&run),
            };
            ignore_broken_pipe(result).context("cannot write the report")?;
            run.clear();
        }
        Ok(())
    }

    fn warning(&self, message: &str) {
        use owo_colors::OwoColorize as _;
        if self.detail > Detail::Quiet {
            let _ = writeln!(
                anstream::stderr().lock(),
                "{} {message}",
                "clawmd: warning:".yellow()
            );
        }
    }

    /// A line about what the run did, on stderr (stdout may hold a JSON report).
    fn note(&self, message: &str) {
        if self.detail > Detail::Quiet {
            let _ = writeln!(anstream::stderr().lock(), "clawmd: {message}");
        }
    }

    fn error(&self, message: &str) {
        use owo_colors::OwoColorize as _;
        let _ = writeln!(
            anstream::stderr().lock(),
            "{} {message}",
            "clawmd: error:".red().bold()
        );
    }

    /// A progress bar on stderr for a multi-group run, drawn only on a terminal.
    fn progress(&self, what: &'static str) -> Bar {
        Bar {
            bar: self.bars.then(|| {
                // Hidden until the run says how many groups there are (see `Bar::start`).
                let bar = indicatif::ProgressBar::with_draw_target(
                    None,
                    indicatif::ProgressDrawTarget::hidden(),
                );
                bar.set_style(
                    indicatif::ProgressStyle::with_template(
                        "{prefix} [{bar:30}] {pos}/{len} groups ({eta})",
                    )
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                    .progress_chars("=> "),
                );
                bar.set_prefix(what);
                bar
            }),
            quiet: self.detail == Detail::Quiet,
            task: "compose",
        }
    }
}

/// The library's [`Progress`] hooks, shown as a bar (on a terminal, for more than one group)
/// and a line when a lock is held by another run.
struct Bar {
    bar: Option<indicatif::ProgressBar>,
    quiet: bool,
    /// What the run waiting for a group's lock does to the group ("compose", "migrate").
    task: &'static str,
}

impl Progress for Bar {
    fn start(&self, groups: usize) {
        if let Some(bar) = &self.bar
            && groups > 1
        {
            bar.set_length(groups as u64);
            bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        }
    }

    fn done(&self, _group: &str) {
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
    }

    fn waiting_for_lock(&self, group: &str, lock: &std::path::Path) {
        if self.quiet {
            return;
        }
        let line = format!(
            "clawmd: waiting for lock on {} (held by another run) to {} {}",
            clawmd::report::escape_path(lock),
            self.task,
            clawmd::report::escape(group)
        );
        match &self.bar {
            Some(bar) => bar.suspend(|| {
                let _ = writeln!(anstream::stderr().lock(), "{line}");
            }),
            None => {
                let _ = writeln!(anstream::stderr().lock(), "{line}");
            }
        }
    }
}

impl Bar {
    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

fn init_logging(verbose: u8, ansi: bool) {
    use tracing_subscriber::EnvFilter;
    // Logging is off by default: with no subscriber at all, which logs nothing too, a run
    // does not build the filter and the formatter (part of a one-group compose's start-up
    // memory).
    if verbose == 0 && std::env::var_os("RUST_LOG").is_none() {
        return;
    }
    let default = match verbose {
        0 => "off",
        1 => "info",
        _ => "debug",
    };
    let filter = EnvFilter::try_from_env("RUST_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .with_target(false)
        .without_time()
        .init();
}
