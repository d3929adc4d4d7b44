//! clawmd check: what an agent would miss or wrongly get; with `--fix`, composes what is
//! safely fixable first, then checks again.

use std::process::ExitCode;

use clawmd::Layout;
use clawmd::check::{CheckOptions, check_with_progress, safely_fixable};
use clawmd::compose::{ComposeOptions, compose_with_progress};
use clawmd::deployment::Selection;
use clawmd::report::{CheckReport, Status};
use clawmd::settings::Resolved;

use super::{finish, not_started, not_started_by, selection};
use crate::args::{CheckArgs, GlobalArgs};
use crate::printer::Printer;

pub fn run(global: &GlobalArgs, args: CheckArgs, printer: &Printer) -> anyhow::Result<ExitCode> {
    let format = args.output.format();
    let (mut resolved, _) = match global.resolve(&args.delivery, args.lock.lock_timeout, printer) {
        Ok(resolved) => resolved,
        Err(err) => return not_started("check", err, format, printer),
    };
    if let Err(err) = args.config.apply(&mut resolved.layout, &args.groups) {
        return not_started_by("check", err, format, printer);
    }
    let selection = selection(&args.groups, args.all);
    let options = CheckOptions {
        settings: resolved.delivery,
        delivery_given: args.delivery.delivery.is_some(),
        claude_version: resolved.delivery.claude_version,
        lock_timeout: resolved.lock_timeout,
    };
    let mut result = checked(&resolved.layout, &selection, &options, printer);
    if args.fix
        && let Ok(report) = &result
    {
        let fixable = safely_fixable(report);
        if !fixable.is_empty() {
            compose_fixable(&resolved, fixable, printer);
            result = checked(&resolved.layout, &selection, &options, printer);
        }
        if let Ok(report) = &result
            && report.groups.iter().any(|g| !g.findings.is_empty())
        {
            printer.note("left for a person (check --fix does not change these):");
        }
    }
    finish("check", result, format, printer)
}

/// Checks the selected groups, with a progress bar.
fn checked(
    layout: &Layout,
    selection: &Selection,
    options: &CheckOptions,
    printer: &Printer,
) -> Result<CheckReport, clawmd::Error> {
    let bar = printer.progress("checking");
    let result = check_with_progress(layout, selection, options, &bar);
    bar.finish();
    result
}

/// Composes the groups `check --fix` may fix (`fixable`), and says which it composed.
fn compose_fixable(resolved: &Resolved, fixable: Vec<String>, printer: &Printer) {
    let options = ComposeOptions {
        settings: resolved.delivery,
        dry_run: false,
        lock_timeout: resolved.lock_timeout,
    };
    let bar = printer.progress("fixing");
    let fixed = compose_with_progress(&resolved.layout, &Selection::Named(fixable), &options, &bar);
    bar.finish();
    if let Ok(fixed) = &fixed {
        let names: Vec<String> = fixed
            .groups
            .iter()
            .filter(|g| g.status == Status::Changed)
            .map(|g| clawmd::report::escape(&g.group).into_owned())
            .collect();
        printer.note(&format!(
            "fixed: composed {} group(s){}{}",
            names.len(),
            if names.is_empty() { "" } else { ": " },
            names.join(", ")
        ));
    }
}
