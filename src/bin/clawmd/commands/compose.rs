//! clawmd compose: composes the named groups (or all), prints the report, and with
//! `--dry-run --diff` each planned file's unified diff, coloured line by line.

use std::process::ExitCode;

use clawmd::compose::{ComposeOptions, compose_with_progress};
use clawmd::diff::planned_diffs;
use clawmd::report::{Line, Stream, Tone};

use super::{finish, selection};
use crate::args::{ComposeArgs, GlobalArgs, OutputFormat};
use crate::printer::Printer;

pub fn run(global: &GlobalArgs, args: ComposeArgs, printer: &Printer) -> anyhow::Result<ExitCode> {
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
