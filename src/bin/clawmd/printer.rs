//! Every byte the binary writes to the terminal goes through here: report lines coloured by
//! tone, warnings, notes and errors on stderr, uncoloured text on stdout (JSON, rendered
//! memory, scripts), clap's help and usage errors, the progress bar (`bar`), and the logs of
//! `-v`. This module is the only one that opens stdout or stderr (clippy.toml refuses it
//! elsewhere; the binary's root denies `print!` and friends).

mod bar;

use std::io::{IsTerminal as _, Write};
use std::process::ExitCode;

use anyhow::Context;
use owo_colors::OwoColorize as _;

use clawmd::error::chain_text;
use clawmd::report::{Detail, Line, Stream, Tone};

use crate::args::{ColorWhen, GlobalArgs};
pub use bar::Bar;

/// Writes the binary's output: to the stream each line is for, coloured by its tone when
/// colour is on (a terminal, or `--color always`; never with `NO_COLOR` under `auto`).
pub struct Printer {
    /// How much the human output says (`-q`, `-v`).
    pub detail: Detail,
    /// Whether `-v` logs may carry ANSI colour (stderr is a terminal and colour is allowed).
    log_ansi: bool,
    /// Whether a progress bar may be drawn (stderr is a terminal and not `-q`).
    bars: bool,
}

impl Printer {
    /// The printer the global flags ask for; sets the colour choice of every coloured stream.
    pub fn new(global: &GlobalArgs) -> Self {
        let choice = match global.color {
            ColorWhen::Auto => anstream::ColorChoice::Auto,
            ColorWhen::Always => anstream::ColorChoice::Always,
            ColorWhen::Never => anstream::ColorChoice::Never,
        };
        choice.write_global();
        let stderr_tty = stderr_is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let log_ansi = match global.color {
            ColorWhen::Always => true,
            ColorWhen::Never => false,
            ColorWhen::Auto => stderr_tty && !no_color,
        };
        Printer {
            detail: global.detail(),
            log_ansi,
            bars: stderr_tty && !global.quiet,
        }
    }

    /// Prints what clap has to say instead of a run (help, version, a usage error), as clap
    /// itself would: on stdout for help and version, else on stderr, coloured on a terminal.
    /// Returns clap's exit status (0, or 2 for a usage error).
    pub fn clap_message(err: &clap::Error) -> ExitCode {
        let text = err.render().ansi().to_string();
        let choice = anstream::ColorChoice::Auto;
        let _ = if err.use_stderr() {
            anstream::AutoStream::new(raw_stderr(), choice).write_all(text.as_bytes())
        } else {
            anstream::AutoStream::new(raw_stdout(), choice).write_all(text.as_bytes())
        };
        ExitCode::from(u8::try_from(err.exit_code()).unwrap_or(2))
    }

    /// Prints one report line (see [`Printer::lines`]).
    pub fn line(&self, line: &Line) -> anyhow::Result<()> {
        self.lines(std::slice::from_ref(line))
    }

    /// Prints `lines` in order, each run of lines bound for the same stream in one write (a
    /// report of 10,000 groups is 70,000 lines).
    pub fn lines(&self, lines: &[Line]) -> anyhow::Result<()> {
        let mut run = Vec::new();
        for (index, line) in lines.iter().enumerate() {
            let text = &line.text;
            let _ = match line.tone {
                Tone::Plain => writeln!(run, "{text}"),
                Tone::Changed => writeln!(run, "{}", text.green()),
                Tone::Warning => writeln!(run, "{}", text.yellow()),
                Tone::Error => writeln!(run, "{}", text.red().bold()),
                Tone::Note => writeln!(run, "{}", text.dimmed()),
            };
            let next = lines.get(index + 1).map(|next| next.stream);
            if next == Some(line.stream) {
                continue;
            }
            let result = match line.stream {
                Stream::Stdout => {
                    let mut out = coloured_stdout();
                    out.write_all(&run).and_then(|()| out.flush())
                }
                Stream::Stderr => coloured_stderr().write_all(&run),
            };
            ignore_broken_pipe(result).context("cannot write the report")?;
            run.clear();
        }
        Ok(())
    }

    /// Writes `text` to stdout as it is, without colour (JSON, rendered memory, scripts). A
    /// closed pipe (`clawmd ... | head`) is not an error.
    pub fn plain(&self, text: &str) -> anyhow::Result<()> {
        let mut out = raw_stdout();
        ignore_broken_pipe(out.write_all(text.as_bytes()).and_then(|()| out.flush()))
            .context("cannot write to stdout")
    }

    /// Writes `line` and a newline to stdout, without colour, for a reader that follows the
    /// output as it comes (`watch --format json`): a closed pipe is an error here, so that the
    /// caller can stop (`is_broken_pipe`).
    pub fn streamed_line(&self, line: &str) -> anyhow::Result<()> {
        let mut out = raw_stdout();
        // One write for the line and its newline (stdout's line buffer writes a line longer
        // than it holds apart from the newline after it: two system calls).
        let mut text = String::with_capacity(line.len() + 1);
        text.push_str(line);
        text.push('\n');
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .context("cannot write to stdout")
    }

    /// A warning on stderr (not with `-q`).
    pub fn warning(&self, message: &str) {
        if self.detail > Detail::Quiet {
            let _ = writeln!(
                coloured_stderr(),
                "{} {message}",
                "clawmd: warning:".yellow()
            );
        }
    }

    /// A line about what the run did, on stderr (stdout may hold a JSON report).
    pub fn note(&self, message: &str) {
        if self.detail > Detail::Quiet {
            let _ = writeln!(coloured_stderr(), "clawmd: {message}");
        }
    }

    /// The error that ended the run, with its causes ([`chain_text`]), on stderr.
    pub fn error(&self, err: &(dyn std::error::Error + 'static)) {
        let _ = writeln!(
            coloured_stderr(),
            "{} {}",
            "clawmd: error:".red().bold(),
            chain_text(err)
        );
    }

    /// A progress bar on stderr for a multi-group run, drawn only on a terminal.
    pub fn progress(&self, what: &'static str) -> Bar {
        Bar::new(self.bars, what, self.detail == Detail::Quiet)
    }

    /// Sends the library's `tracing` logs to stderr: at `verbose` (`-v` info, `-vv` debug)
    /// or as `RUST_LOG` says.
    #[expect(
        clippy::disallowed_methods,
        reason = "the logs' writer: the Printer is the binary's one writer to the terminal"
    )]
    pub fn start_logging(&self, verbose: u8) {
        use tracing_subscriber::EnvFilter;
        // Logging is off by default: with no subscriber at all, which logs nothing too, a run
        // does not build the filter and the formatter (part of a one-group compose's start-up
        // memory).
        if verbose == 0 && std::env::var_os("RUST_LOG").is_none() {
            return;
        }
        let default = match verbose {
            0 => "off",
            1 => "info",
            _ => "debug",
        };
        let filter =
            EnvFilter::try_from_env("RUST_LOG").unwrap_or_else(|_| EnvFilter::new(default));
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(self.log_ansi)
            .with_target(false)
            .without_time()
            .init();
    }
}

/// Whether the error comes from a closed stdout or stderr (`clawmd ... | head`).
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn ignore_broken_pipe(result: std::io::Result<()>) -> std::io::Result<()> {
    match result {
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Writes one line to stderr, coloured as the global colour choice says.
fn stderr_line(line: &str) {
    let _ = writeln!(coloured_stderr(), "{line}");
}

#[expect(
    clippy::disallowed_methods,
    reason = "the Printer is the binary's one writer to the terminal"
)]
fn raw_stdout() -> std::io::StdoutLock<'static> {
    std::io::stdout().lock()
}

#[expect(
    clippy::disallowed_methods,
    reason = "the Printer is the binary's one writer to the terminal"
)]
fn raw_stderr() -> std::io::StderrLock<'static> {
    std::io::stderr().lock()
}

#[expect(
    clippy::disallowed_methods,
    reason = "the Printer is the binary's one writer to the terminal"
)]
fn stderr_is_terminal() -> bool {
    std::io::stderr().is_terminal()
}

#[expect(
    clippy::disallowed_methods,
    reason = "the Printer is the binary's one writer to the terminal"
)]
fn coloured_stdout() -> anstream::AutoStream<std::io::StdoutLock<'static>> {
    anstream::stdout().lock()
}

#[expect(
    clippy::disallowed_methods,
    reason = "the Printer is the binary's one writer to the terminal"
)]
fn coloured_stderr() -> anstream::AutoStream<std::io::StderrLock<'static>> {
    anstream::stderr().lock()
}
