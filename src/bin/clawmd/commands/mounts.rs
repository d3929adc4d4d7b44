//! clawmd mounts: the binds a runner makes for a group's container.

use std::process::ExitCode;

use super::{finish, not_started};
use anyhow::Context;

use crate::args::{GlobalArgs, MountsArgs, MountsFormat, OutputFormat};
use crate::printer::Printer;

pub fn run(global: &GlobalArgs, args: MountsArgs, printer: &Printer) -> anyhow::Result<ExitCode> {
    // A failure is printed as compose prints one: the run-failure envelope in JSON; in the
    // human and k8s formats, the error alone on stderr.
    let format = match args.format() {
        MountsFormat::Json => OutputFormat::Json,
        MountsFormat::Human | MountsFormat::K8s => OutputFormat::Human,
    };
    let (resolved, _) = match global.resolve(&args.delivery, None, printer) {
        Ok(resolved) => resolved,
        Err(err) => return not_started("mounts", err, format, printer),
    };
    if matches!(args.format(), MountsFormat::K8s) {
        // A v1 List on stdout, as kubectl reads it.
        let list = clawmd::runtime::k8s::k8s_list(
            &resolved.layout,
            &args.group,
            &resolved.delivery,
            &resolved.guards,
        )
        .with_context(|| "mounts failed")?;
        printer.plain(&(serde_json::to_string_pretty(&list)? + "\n"))?;
        return Ok(ExitCode::SUCCESS);
    }
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
    finish("mounts", result, format, printer)
}
