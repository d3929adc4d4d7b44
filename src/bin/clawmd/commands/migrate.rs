//! clawmd migrate: the one-time cutover of legacy groups.

use std::process::ExitCode;

use clawmd::migrate::{MigrateOptions, migrate_with};

use super::finish;
use crate::args::{DeliveryArgs, GlobalArgs, MigrateArgs};
use crate::printer::Printer;

pub fn run(global: &GlobalArgs, args: MigrateArgs, printer: &Printer) -> anyhow::Result<ExitCode> {
    let (resolved, _) =
        global.resolve(&DeliveryArgs::default(), args.lock.lock_timeout, printer)?;
    finish(
        "migrate",
        migrate_with(
            &resolved.layout,
            &MigrateOptions {
                dry_run: args.dry_run,
                lock_timeout: resolved.lock_timeout,
                append_global: args.append_global,
            },
        ),
        args.output.format(),
        printer,
    )
}
