//! The `clawmd` command line: parses flags, calls the library, prints the result.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::builder::TypedValueParser as _;
use clap::{Args, Parser, Subcommand};

use clawmd::Delivery;
use clawmd::check::{CheckOptions, check};
use clawmd::compose::{ComposeOptions, compose};
use clawmd::delivery::Provider;
use clawmd::deployment::Selection;
use clawmd::loader::{ClaudeVersion, Format, HostFs, load, render};
use clawmd::migrate::migrate;
use clawmd::report::{Code, Report, RunFailure, WarningReport};
use clawmd::settings::{Overrides, Resolved, read_settings};
use clawmd::view::{Consumer, ViewOptions, delivery_view, load_group, load_options};

/// Compose and check the CLAUDE.md memory of containerised agent groups.
#[derive(Parser, Debug)]
#[command(name = "clawmd", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log what clawmd does to stderr (-v info, -vv debug); RUST_LOG also works.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Compose groups: links or copies, fragments, and an import-only CLAUDE.md.
    Compose(ComposeArgs),
    /// One-time, idempotent cutover of legacy groups (safe at every start-up).
    Migrate(MigrateArgs),
    /// Find what an agent would miss or wrongly get; exit 1 if any error.
    Check(CheckArgs),
    /// Print the memory Claude Code loads: for a group inside its container, or for a folder.
    Render(RenderArgs),
}

#[derive(Args, Debug, Clone)]
struct DeploymentArgs {
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
    /// Seconds to wait for another clawmd run that holds a group's lock [default: 60].
    #[arg(long, env = "CLAWMD_LOCK_TIMEOUT")]
    lock_timeout: Option<u64>,
}

/// How memory reaches the agents; every value falls back to <root>/clawmd.json, then the
/// default.
#[derive(Args, Debug, Clone, Default)]
struct DeliveryArgs {
    /// inline (default): one generated CLAUDE.md importing only CLAUDE.local.md; copy:
    /// regular-file copies; link: symlinks into /app, which Claude Code drops unless external
    /// imports are approved.
    #[arg(long, env = "CLAWMD_DELIVERY", value_parser = parse_delivery())]
    delivery: Option<Delivery>,
    /// The agent backend of groups whose container.json has no `provider` [default: claude].
    #[arg(long, env = "CLAWMD_PROVIDER", value_parser = parse_provider())]
    provider: Option<Provider>,
    /// The agents' runtime approves external imports for the workspace (~/.claude.json).
    #[arg(long)]
    approve_external: bool,
}

impl DeploymentArgs {
    /// The deployment's settings: these flags (and `CLAWMD_*`) over `<root>/clawmd.json` over
    /// the defaults. Warnings about the settings file go to stderr and are returned.
    fn resolve(&self, delivery: &DeliveryArgs) -> anyhow::Result<(Resolved, Vec<String>)> {
        let (settings, warnings) = read_settings(&self.root)?;
        let warnings: Vec<String> = warnings.iter().map(ToString::to_string).collect();
        for warning in &warnings {
            let _ = writeln!(std::io::stderr(), "clawmd: warning: {warning}");
        }
        let overrides = Overrides {
            groups_dir: self.groups_dir.clone(),
            container_dir: self.container_dir.clone(),
            app_mount: self.app_mount.clone(),
            workspace_mount: self.workspace_mount.clone(),
            lock_timeout: self.lock_timeout,
            delivery: delivery.delivery,
            provider: delivery.provider,
            approve_external: delivery.approve_external,
        };
        Ok((settings.resolve(&self.root, &overrides), warnings))
    }
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
    deployment: DeploymentArgs,
    #[command(flatten)]
    delivery: DeliveryArgs,
    /// Print what would change; write nothing.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Args, Debug)]
struct MigrateArgs {
    #[command(flatten)]
    deployment: DeploymentArgs,
    /// Print what would change; write nothing.
    #[arg(long)]
    dry_run: bool,
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
    #[command(flatten)]
    deployment: DeploymentArgs,
    /// Check against these settings (the same resolution as compose: flags, CLAWMD_*,
    /// clawmd.json, defaults).
    #[command(flatten)]
    delivery: DeliveryArgs,
    /// The Claude Code release the agent runs: its loader rules and wrapper text (default:
    /// the newest release the conformance corpus covers).
    #[arg(long, env = "CLAWMD_CLAUDE_VERSION", value_name = "X.Y.Z", value_parser = parse_version)]
    claude_version: Option<ClaudeVersion>,
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
    #[command(flatten)]
    deployment: DeploymentArgs,
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
    #[arg(long, default_value = "claude", value_parser = parse_format)]
    format: Format,
    /// The front end: the CLI, or the Agent SDK with settingSources ['project','user'].
    #[arg(long, default_value = "cli", value_parser = parse_consumer())]
    consumer: Consumer,
    /// Instead of the memory: which files reach the agent and what is dropped, and why.
    #[arg(long)]
    delivery_view: bool,
    /// The Claude Code release the agent runs: its loader rules and wrapper text (default:
    /// the newest release the conformance corpus covers).
    #[arg(long, env = "CLAWMD_CLAUDE_VERSION", value_name = "X.Y.Z", value_parser = parse_version)]
    claude_version: Option<ClaudeVersion>,
}

fn parse_format(text: &str) -> Result<Format, String> {
    text.parse()
}

fn parse_version(text: &str) -> Result<ClaudeVersion, String> {
    text.parse()
        .map_err(|e: clawmd::loader::version::BadVersion| e.to_string())
}

/// Library types stay free of clap: the binary lists their values and parses with `FromStr`.
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
    let cli = Cli::parse();
    init_logging(cli.verbose);
    match run(cli) {
        Ok(code) => code,
        Err(err) => {
            let _ = writeln!(std::io::stderr(), "clawmd: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Compose(args) => run_compose(args),
        Command::Migrate(args) => run_migrate(args),
        Command::Check(args) => run_check(args),
        Command::Render(args) => run_render(args),
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

fn run_compose(args: ComposeArgs) -> anyhow::Result<ExitCode> {
    let (resolved, warnings) = args.deployment.resolve(&args.delivery)?;
    let selection = selection(&args.groups, args.all);
    let options = ComposeOptions {
        settings: resolved.delivery,
        dry_run: args.dry_run,
        lock_timeout: resolved.lock_timeout,
    };
    let result = compose(&resolved.layout, &selection, &options).map(|mut report| {
        report
            .warnings
            .extend(warnings.into_iter().map(|message| WarningReport {
                code: Code::Settings,
                message,
            }));
        report
    });
    finish("compose", result, args.output.format())
}

fn run_migrate(args: MigrateArgs) -> anyhow::Result<ExitCode> {
    let (resolved, _) = args.deployment.resolve(&DeliveryArgs::default())?;
    finish(
        "migrate",
        migrate(&resolved.layout, args.dry_run, resolved.lock_timeout),
        args.output.format(),
    )
}

fn run_check(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let (resolved, _) = args.deployment.resolve(&args.delivery)?;
    let selection = selection(&args.groups, args.all);
    let options = CheckOptions {
        settings: resolved.delivery,
        delivery_given: args.delivery.delivery.is_some(),
        claude_version: args.claude_version.unwrap_or_default(),
    };
    finish(
        "check",
        check(&resolved.layout, &selection, &options),
        args.output.format(),
    )
}

fn run_render(args: RenderArgs) -> anyhow::Result<ExitCode> {
    let view = ViewOptions {
        approve_external: args.approve_external,
        home: args.home.clone(),
        container_home: Some(args.container_home.clone()),
        consumer: args.consumer,
        claude_version: args.claude_version.unwrap_or_default(),
    };
    if !view.claude_version.is_verified() {
        let _ = writeln!(
            std::io::stderr(),
            "clawmd: warning: Claude Code {} is not in the conformance corpus; rendering with the rules known for {}",
            view.claude_version,
            view.claude_version.nearest_verified()
        );
    }
    let memory = match (&args.group, &args.cwd) {
        (Some(group), _) => {
            let (resolved, _) = args.deployment.resolve(&DeliveryArgs::default())?;
            load_group(&resolved.layout, group, &view)
                .with_context(|| format!("cannot render group {group}"))?
                .0
        }
        (None, Some(cwd)) => {
            let cwd = std::fs::canonicalize(cwd)
                .with_context(|| format!("cannot use --cwd {}", cwd.display()))?;
            let home = match &args.home {
                Some(home) => Some(
                    std::fs::canonicalize(home)
                        .with_context(|| format!("cannot use --home {}", home.display()))?,
                ),
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
) -> anyhow::Result<ExitCode> {
    let report = match (result, format) {
        (Ok(report), _) => report,
        (Err(err), OutputFormat::Json) => return print_json_error(command, &err),
        (Err(err), OutputFormat::Human) => {
            return Err(err).with_context(|| format!("{command} failed"));
        }
    };
    match format {
        OutputFormat::Json => print_stdout(&(serde_json::to_string_pretty(&report)? + "\n"))?,
        OutputFormat::Human => print_stdout(&report.to_human())?,
    }
    Ok(exit_code(report.ok()))
}

fn print_json_error(command: &str, err: &clawmd::Error) -> anyhow::Result<ExitCode> {
    let failure = RunFailure::new(command, err);
    print_stdout(&(serde_json::to_string_pretty(&failure)? + "\n"))?;
    let _ = writeln!(std::io::stderr(), "clawmd: error: {err}");
    Ok(ExitCode::FAILURE)
}

fn exit_code(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The one place that writes to stdout. A closed pipe (`clawmd ... | head`) is not an error.
fn print_stdout(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("cannot write to stdout"),
    }
}

fn init_logging(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let default = match verbose {
        0 => "off",
        1 => "info",
        _ => "debug",
    };
    let filter = EnvFilter::try_from_env("RUST_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .without_time()
        .init();
}
