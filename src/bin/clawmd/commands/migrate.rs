//! clawmd migrate: the one-time cutover of legacy groups.

use std::process::ExitCode;

use clawmd::migrate::{MigrateOptions, migrate_with_progress};

use super::{finish, not_started};
use crate::args::{DeliveryArgs, GlobalArgs, MigrateArgs};
use crate::printer::Printer;

pub fn run(global: &GlobalArgs, args: MigrateArgs, printer: &Printer) -> anyhow::Result<ExitCode> {
    let format = args.output.format();
    let (resolved, _) =
        match global.resolve(&DeliveryArgs::default(), args.lock.lock_timeout, printer) {
            Ok(resolved) => resolved,
            Err(err) => return not_started("migrate", err, format, printer),
        };
    let bar = printer.progress("migrating").for_task("migrate");
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
    finish("migrate", report, format, printer)
}
