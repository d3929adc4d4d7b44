//! clawmd completions, schema and man: documents derived from the code (the command line's
//! shape, the JSON Schemas of what clawmd reads and prints).

use std::process::ExitCode;

use anyhow::Context;
use clap::CommandFactory as _;

use clawmd::schema::{SchemaKind, schema};

use crate::args::Cli;
use crate::printer::Printer;

/// Prints the completion script for `shell`.
pub fn completions(shell: clap_complete::Shell, printer: &Printer) -> anyhow::Result<ExitCode> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "clawmd", &mut script);
    printer.plain(&String::from_utf8_lossy(&script))?;
    Ok(ExitCode::SUCCESS)
}

/// Prints the JSON Schema of `kind`.
pub fn json_schema(kind: SchemaKind, printer: &Printer) -> anyhow::Result<ExitCode> {
    printer.plain(&(serde_json::to_string_pretty(&schema(kind))? + "\n"))?;
    Ok(ExitCode::SUCCESS)
}

/// Prints the manual page (roff): clawmd(1), or with `subcommand`, clawmd-SUBCOMMAND(1) (the
/// pages clawmd(1) refers to).
pub fn man(subcommand: Option<&str>, printer: &Printer) -> anyhow::Result<ExitCode> {
    let mut command = Cli::command();
    if let Some(name) = subcommand {
        // Built first: each subcommand's arguments are added only when it is built (`defer`).
        command.build();
        let sub = command
            .find_subcommand(name)
            .with_context(|| format!("no manual page for {name}"))?
            .clone();
        // clap takes a `'static` name (without its `string` feature): one short leak, once.
        let page: &'static str = Box::leak(format!("clawmd-{name}").into_boxed_str());
        command = sub.name(page).version(env!("CARGO_PKG_VERSION"));
    }
    let mut page = Vec::new();
    clap_mangen::Man::new(command)
        .render(&mut page)
        .context("cannot render the manual page")?;
    printer.plain(&String::from_utf8_lossy(&page))?;
    Ok(ExitCode::SUCCESS)
}
