//! clawmd mounts: the binds a runner makes for a group's container.

use std::process::ExitCode;

use super::finish;
use crate::args::{GlobalArgs, MountsArgs};
use crate::printer::Printer;

pub fn run(global: &GlobalArgs, args: MountsArgs, printer: &Printer) -> anyhow::Result<ExitCode> {
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
