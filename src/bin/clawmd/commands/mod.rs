//! One runner per subcommand (`clawmd compose` is `compose::run`), and what they share: the
//! selection of groups and `finish`, which prints a report and turns it into the exit status.

pub mod check;
pub mod compose;
pub mod docs;
pub mod init;
pub mod migrate;
pub mod mounts;
pub mod render;
pub mod serve;
pub mod watch;

use std::process::ExitCode;

use anyhow::Context;

use clawmd::deployment::Selection;
use clawmd::report::{Report, RunFailure};

use crate::args::OutputFormat;
use crate::printer::Printer;

/// The named groups, or all of them with `--all` or when none is named.
pub fn selection(groups: &[String], all: bool) -> Selection {
    if all || groups.is_empty() {
        Selection::All
    } else {
        Selection::Named(groups.to_vec())
    }
}

/// Prints a command's report (JSON or human) and turns it into the exit status.
pub fn finish<R: Report>(
    command: &str,
    result: Result<R, clawmd::Error>,
    format: OutputFormat,
    printer: &Printer,
) -> anyhow::Result<ExitCode> {
    let report = match (result, format) {
        (Ok(report), _) => report,
        (Err(err), OutputFormat::Json) => return print_run_failure(command, &err, printer),
        (Err(err), OutputFormat::Human) => {
            return Err(err).with_context(|| format!("{command} failed"));
        }
    };
    match format {
        OutputFormat::Json => print_json(&report, printer)?,
        OutputFormat::Human => {
            printer.lines(&report.human(printer.detail))?;
        }
    }
    Ok(exit_code(report.ok()))
}

/// Ends a run that could not start (`clawmd.json` cannot be used): in JSON with the
/// run-failure envelope, as [`finish`] ends one whose groups could not be read, so that a
/// runner reading stdout gets a document; in the human form with the error alone, which `main`
/// prints.
pub fn not_started(
    command: &str,
    err: clawmd::Error,
    format: OutputFormat,
    printer: &Printer,
) -> anyhow::Result<ExitCode> {
    match format {
        OutputFormat::Json => print_run_failure(command, &err, printer),
        OutputFormat::Human => Err(err.into()),
    }
}

/// [`not_started`] for an error of the command line's own (a `--config` file that cannot be
/// read, or over the limit): with `--json` the run-failure envelope (`run-failed`) on stdout
/// too, so that a runner reading stdout is never left with nothing; the error on stderr.
pub fn not_started_by(
    command: &str,
    err: anyhow::Error,
    format: OutputFormat,
    printer: &Printer,
) -> anyhow::Result<ExitCode> {
    if matches!(format, OutputFormat::Json) {
        let failure = RunFailure::of(command, clawmd::report::Code::RunFailed, format!("{err:#}"));
        print_json(&failure, printer)?;
    }
    Err(err)
}

/// `document` (a report, a run-failure envelope) on stdout as pretty JSON.
fn print_json(document: &impl serde::Serialize, printer: &Printer) -> anyhow::Result<()> {
    printer.plain(&(serde_json::to_string_pretty(document)? + "\n"))
}

/// Prints the run-failure envelope on stdout and the error on stderr.
fn print_run_failure(
    command: &str,
    err: &clawmd::Error,
    printer: &Printer,
) -> anyhow::Result<ExitCode> {
    print_json(&RunFailure::new(command, err), printer)?;
    printer.error(err);
    Ok(ExitCode::FAILURE)
}

pub fn exit_code(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
