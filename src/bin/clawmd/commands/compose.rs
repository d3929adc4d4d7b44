//! clawmd compose: composes the named groups (or all), prints the report, and with
//! `--dry-run --diff` each planned file's unified diff, coloured line by line.

use std::process::ExitCode;

use clawmd::compose::{ComposeOptions, compose_with_progress};
use clawmd::diff::planned_diffs;
use clawmd::report::{ComposeReport, Line, Status, Stream, Tone};

use super::{finish, not_started, not_started_by, selection};
use crate::args::{ComposeArgs, GlobalArgs, OutputFormat};
use crate::printer::Printer;

pub fn run(global: &GlobalArgs, args: ComposeArgs, printer: &Printer) -> anyhow::Result<ExitCode> {
    let format = args.output.format();
    // The human report prints the settings' warnings with the run's own: printed here too,
    // each was said twice. A JSON report carries them, and stderr (the runner's log) says them.
    let resolved = match format {
        OutputFormat::Human => global
            .resolve_quietly(&args.delivery, args.lock.lock_timeout)
            .map_err(Into::into),
        _ => global.resolve(&args.delivery, args.lock.lock_timeout, printer),
    };
    let (mut resolved, warnings) = match resolved {
        Ok(resolved) => resolved,
        Err(err) => return not_started("compose", err, format, printer),
    };
    if let Err(err) = args.config.apply(&mut resolved.layout, &args.groups) {
        return not_started_by("compose", err, format, printer);
    }
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
    let diffs = match (&result, args.diff, format) {
        (Ok(report), true, OutputFormat::Human) => {
            planned_diffs(&resolved.layout, &options.settings, &changed_groups(report))?
        }
        _ => Vec::new(),
    };
    let code = finish("compose", result, format, printer)?;
    for diff in &diffs {
        print_diff(&diff.unified, printer)?;
    }
    Ok(code)
}

/// The groups the run changed (or, in a dry run, would change).
fn changed_groups(report: &ComposeReport) -> Vec<String> {
    report
        .groups
        .iter()
        .filter(|g| g.status == Status::Changed)
        .map(|g| g.group.clone())
        .collect()
}

/// Prints a unified diff on stdout, each line coloured by what it is.
fn print_diff(unified: &str, printer: &Printer) -> anyhow::Result<()> {
    for text in unified.lines() {
        printer.line(&Line {
            stream: Stream::Stdout,
            tone: diff_tone(text),
            text: clawmd::report::escape(text).into_owned(),
        })?;
    }
    Ok(())
}

/// The tone of a unified diff's line: added lines green, removed ones red, hunk headers dim;
/// the file headers and the context plain.
fn diff_tone(line: &str) -> Tone {
    if line.starts_with("+++") || line.starts_with("---") {
        Tone::Plain
    } else if line.starts_with('+') {
        Tone::Changed
    } else if line.starts_with('-') {
        Tone::Error
    } else if line.starts_with("@@") {
        Tone::Note
    } else {
        Tone::Plain
    }
}
