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

/// Prints the manual page (roff).
pub fn man(printer: &Printer) -> anyhow::Result<ExitCode> {
    let mut page = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut page)
        .context("cannot render the manual page")?;
    printer.plain(&String::from_utf8_lossy(&page))?;
    Ok(ExitCode::SUCCESS)
}
