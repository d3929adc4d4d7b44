//! clawmd init: writes down in clawmd.json what clawmd detects of the deployment, never
//! changing a key already set.

use std::path::Path;
use std::process::ExitCode;

use clawmd::report::{Line, Stream, Tone};

use crate::args::{DeliveryArgs, GlobalArgs, InitArgs};
use crate::printer::Printer;

pub fn run(global: &GlobalArgs, args: InitArgs, printer: &Printer) -> anyhow::Result<ExitCode> {
    let path = global.root.join(clawmd::settings::SETTINGS_FILE);
    // Without a clawmd.json the only warning is the one that says to run init.
    let (resolved, _) = match fs_err::symlink_metadata(&path).is_ok() {
        true => global.resolve(&DeliveryArgs::default(), None, printer)?,
        false => global.resolve_quietly(&DeliveryArgs::default(), None)?,
    };
    let existing = existing_settings(&path)?;
    let detected = clawmd::init::detect(&global.root, &resolved.layout);
    let plan = clawmd::init::plan(&detected, &resolved.layout, &existing);
    for note in &plan.notes {
        printer.line(&Line {
            stream: Stream::Stdout,
            tone: Tone::Plain,
            text: format!("  {}", clawmd::report::escape(note)),
        })?;
    }
    let summary = match (&plan.settings, args.dry_run) {
        (None, _) => format!("{}: nothing to add", path.display()),
        (Some(_), true) => format!("{}: would write (dry run: nothing written)", path.display()),
        (Some(bytes), false) => {
            clawmd::fsops::write_host_file(&path, bytes)?;
            format!("{}: written", path.display())
        }
    };
    printer.line(&Line {
        stream: Stream::Stdout,
        tone: Tone::Changed,
        text: clawmd::report::escape(&summary).into_owned(),
    })?;
    Ok(ExitCode::SUCCESS)
}

/// The keys `clawmd.json` at `path` already sets (none when there is no such file).
fn existing_settings(path: &Path) -> anyhow::Result<serde_json::Map<String, serde_json::Value>> {
    match fs_err::read(path) {
        Ok(bytes) => match serde_json::from_slice(&bytes) {
            Ok(serde_json::Value::Object(map)) => Ok(map),
            _ => anyhow::bail!(
                "{} is not a JSON object; fix it first (init never overwrites it)",
                path.display()
            ),
        },
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(serde_json::Map::new()),
        Err(err) => Err(err.into()),
    }
}
