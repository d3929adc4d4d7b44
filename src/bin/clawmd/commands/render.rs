//! clawmd render: the memory Claude Code loads, for a group inside its container or for a
//! folder on this machine.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;

use clawmd::loader::{HostFs, Memory, load, render};
use clawmd::settings::Resolved;
use clawmd::view::{ViewOptions, delivery_view, load_group, load_options};

use crate::args::{DeliveryArgs, GlobalArgs, RenderArgs};
use crate::printer::Printer;

pub fn run(global: &GlobalArgs, args: RenderArgs, printer: &Printer) -> anyhow::Result<ExitCode> {
    // A group is rendered as the deployment's agents run (its pinned release and consumer)
    // unless the command line says otherwise.
    let resolved = match &args.group {
        Some(_) => {
            let delivery = DeliveryArgs {
                delivery: args.delivery,
                provider: args.provider,
                ..DeliveryArgs::default()
            };
            Some(global.resolve(&delivery, None, printer)?.0)
        }
        None => None,
    };
    let view = view_options(&args, resolved.as_ref());
    if !view.claude_version.is_verified() {
        printer.warning(&format!(
            "Claude Code {} is {}",
            view.claude_version,
            view.claude_version.unverified_note()
        ));
    }
    if let (Some(group), Some(resolved)) = (&args.group, &resolved)
        && let Some(shown) = flat_document(group, resolved, args.delivery_view, printer)?
    {
        printer.plain(&shown)?;
        return Ok(ExitCode::SUCCESS);
    }
    let memory = match (&args.group, &args.cwd, &resolved) {
        (Some(group), _, Some(resolved)) => group_memory(group, resolved, view)?,
        (None, Some(cwd), _) => folder_memory(cwd, args.home.as_deref(), &view)?,
        _ => unreachable!("clap requires a group or --cwd, and a group's settings are resolved"),
    };
    if args.delivery_view {
        printer.plain(&delivery_view(&memory))?;
    } else {
        printer.plain(&render(&memory, args.format))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// How to load: the command line's choices, else (for a group) the deployment's, else the
/// defaults.
fn view_options(args: &RenderArgs, resolved: Option<&Resolved>) -> ViewOptions {
    ViewOptions {
        approve_external: args.approve_external,
        home: args.home.clone(),
        container_home: Some(args.container_home.clone()),
        consumer: args
            .consumer
            .or(resolved.map(|r| r.delivery.consumer))
            .unwrap_or_default(),
        claude_version: args
            .claude_version
            .or(resolved.map(|r| r.delivery.claude_version))
            .unwrap_or_default(),
        ..ViewOptions::default()
    }
}

/// The memory the agent of `group` loads inside its container.
fn group_memory(group: &str, resolved: &Resolved, mut view: ViewOptions) -> anyhow::Result<Memory> {
    view.delivery = resolved.delivery.delivery;
    view.provider = resolved.delivery.provider;
    Ok(load_group(&resolved.layout, group, &view)
        .with_context(|| format!("cannot render group {group}"))?
        .0)
}

/// A group whose backend reads its document as it is (Codex, Gemini CLI, opencode, Cursor,
/// pi): that document, as compose bound it (with `delivery_view`, a line saying which file
/// reaches the agent whole); `None` for a Claude Code group, whose memory the loader renders.
fn flat_document(
    group: &str,
    resolved: &Resolved,
    delivery_view: bool,
    printer: &Printer,
) -> anyhow::Result<Option<String>> {
    // A config that cannot be read (a device, a link, malformed) is the loader's view's to
    // handle, as it handles it for a Claude Code group (the defaults' binds; check reports it).
    let Ok(Some((provider, path))) =
        clawmd::mounts::flat_document(&resolved.layout, group, &resolved.delivery)
    else {
        return Ok(None);
    };
    let bytes = match fs_err::read(&path) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => anyhow::bail!(
            "cannot render group {group}: {} is not composed yet ({} reads it as it is); fix: run `clawmd compose {group}`",
            path.display(),
            provider
        ),
        Err(err) => return Err(err.into()),
    };
    if delivery_view {
        return Ok(Some(format!(
            "{provider} reads {} as it is, whole ({} bytes): no memory loader applies\n",
            path.display(),
            bytes.len()
        )));
    }
    printer.note(&format!(
        "{group} runs {provider}, which reads its document as it is: {}",
        path.display()
    ));
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// The memory Claude Code loads when started in `cwd` on this machine.
fn folder_memory(cwd: &Path, home: Option<&Path>, view: &ViewOptions) -> anyhow::Result<Memory> {
    let cwd = fs_err::canonicalize(cwd).context("cannot use --cwd")?;
    let home = match home {
        Some(home) => Some(fs_err::canonicalize(home).context("cannot use --home")?),
        None => None,
    };
    let options = load_options(&cwd, home, view);
    load(&HostFs, &options).context("cannot load memory")
}
