//! The `clawmd` command line: parses flags (`args`), resolves the settings (`settings`), runs
//! the subcommand (`commands`) and prints its result (`printer`). The library does the work.

#![deny(clippy::print_stdout, clippy::print_stderr, clippy::dbg_macro)]

mod args;
mod commands;
mod printer;
mod settings;

use std::process::ExitCode;

use args::{Cli, Command};
use printer::Printer;

/// mimalloc instead of the C library's allocator: a compose makes and drops many short strings
/// and buffers, and `clawmd serve` does it for every spawn (docs/performance.md, "Sixth pass").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    raise_open_file_limit();
    let cli = match args::parse_cli() {
        Ok(cli) => cli,
        Err(message) => return Printer::clap_message(&message),
    };
    let printer = Printer::new(&cli.global);
    printer.start_logging(cli.global.verbose);
    match run(cli, &printer) {
        Ok(code) => code,
        Err(err) => {
            printer.error(err.as_ref());
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

/// Runs the subcommand the command line names.
fn run(cli: Cli, printer: &Printer) -> anyhow::Result<ExitCode> {
    let global = &cli.global;
    match cli.command {
        Command::Compose(with) => commands::compose::run(global, with.args, printer),
        Command::Migrate(with) => commands::migrate::run(global, with.args, printer),
        Command::Init(with) => commands::init::run(global, with.args, printer),
        Command::Check(with) => commands::check::run(global, with.args, printer),
        Command::Render(with) => commands::render::run(global, with.args, printer),
        Command::Mounts(with) => commands::mounts::run(global, with.args, printer),
        Command::Watch(with) => commands::watch::run(global, with.args, printer),
        Command::Serve(with) => commands::serve::run(global, with.args, printer),
        Command::Completions { shell, .. } => commands::docs::completions(shell, printer),
        Command::Schema { kind, .. } => commands::docs::json_schema(kind, printer),
        Command::Man { subcommand, .. } => commands::docs::man(subcommand.as_deref(), printer),
    }
}
