//! clawmd watch: keeps groups composed as their inputs change, printing one event per
//! group that changed until SIGINT or SIGTERM (or a closed stdout).

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::process::ExitCode;

use anyhow::Context;

use clawmd::error::chain_text;
use clawmd::report::{Code, RunFailure, WatchEvent, WatchLine};
use clawmd::watch::{WatchError, WatchOptions, watch};

use super::selection;
use crate::args::{GlobalArgs, OutputFormat, WatchArgs};
use crate::printer::{Printer, is_broken_pipe};

pub fn run(global: &GlobalArgs, args: WatchArgs, printer: &Printer) -> anyhow::Result<ExitCode> {
    use std::os::fd::AsFd as _;
    let overrides = global.overrides(&args.delivery, args.lock.lock_timeout);
    let options = WatchOptions {
        debounce: std::time::Duration::from_millis(args.debounce_ms),
    };
    let (stop, signalled) = stop_on_signals()?;
    // A closed stdout (the runner reading the lines is gone) or any other write error ends
    // the watch the same way a signal does.
    let mut failed = None;
    let mut sink = |event: WatchEvent| {
        let printed = match args.format() {
            OutputFormat::Json => serde_json::to_string(&WatchLine::new(event))
                .map_err(anyhow::Error::from)
                .and_then(|line| printer.streamed_line(&line)),
            OutputFormat::Human => printer.lines(&event.human(printer.detail)),
        };
        if let Err(err) = printed {
            let _ = (&signalled).write_all(b"!");
            failed.get_or_insert(err);
        }
    };
    let watched = watch(
        &global.root,
        &overrides,
        &selection(&args.groups, args.all),
        &options,
        stop.as_fd(),
        &mut sink,
    );
    if let Err(err) = watched {
        // A runner reading the event lines gets the run-failure envelope as a line of its own.
        if matches!(args.format(), OutputFormat::Json) {
            printer.streamed_line(&serde_json::to_string(&run_failure(&err))?)?;
        }
        return Err(unwrapped(err)).context("watch failed");
    }
    match failed {
        Some(err) if !is_broken_pipe(&err) => Err(err),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// A pair of connected sockets, `(stop, signalled)`: SIGINT and SIGTERM write to `signalled`,
/// which makes `stop` readable; the watch loop sleeps on it and stops cleanly between two
/// recomposes.
fn stop_on_signals() -> anyhow::Result<(UnixStream, UnixStream)> {
    let (stop, signalled) = UnixStream::pair().context("cannot set up signal handling")?;
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::low_level::pipe::register(signal, signalled.try_clone()?)
            .context("cannot set up signal handling")?;
    }
    Ok((stop, signalled))
}

/// The run-failure envelope of a watch that could not start (`run-failed`).
fn run_failure(err: &WatchError) -> RunFailure {
    match err {
        WatchError::Run(err) => RunFailure::new("watch", err),
        other => RunFailure::of("watch", Code::RunFailed, chain_text(other)),
    }
}

/// The error itself of a run that could not start, not its transparent wrapper: the printed
/// chain (`chain_text`) then finds the fix it says after its causes.
fn unwrapped(err: WatchError) -> anyhow::Error {
    match err {
        WatchError::Run(err) => err.into(),
        other => other.into(),
    }
}
