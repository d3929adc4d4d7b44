//! Every byte the binary writes to the terminal: report lines coloured by tone, warnings,
//! notes and errors on stderr, uncoloured text on stdout (JSON, rendered memory, scripts), the
//! progress bar, and the logs of `-v`.

use std::io::Write;

use anyhow::Context;

use clawmd::progress::Progress;
use clawmd::report::{Detail, Line, Stream, Tone};

use crate::args::{ColorWhen, GlobalArgs};

/// The one place that writes to stdout without colour (JSON, rendered memory, scripts). A
/// closed pipe (`clawmd ... | head`) is not an error.
pub fn print_stdout(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    ignore_broken_pipe(out.write_all(text.as_bytes()).and_then(|()| out.flush()))
        .context("cannot write to stdout")
}

pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

pub fn ignore_broken_pipe(result: std::io::Result<()>) -> std::io::Result<()> {
    match result {
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Every human line goes through here: to the stream the report chose, coloured by its tone
/// when colour is on (a terminal, or `--color always`; never with `NO_COLOR` under `auto`).
pub struct Printer {
    pub detail: Detail,
    /// Whether `-v` logs may carry ANSI colour (stderr is a terminal and colour is allowed).
    pub log_ansi: bool,
    /// Whether a progress bar may be drawn (stderr is a terminal and not `-q`).
    pub bars: bool,
}

impl Printer {
    pub fn new(global: &GlobalArgs) -> Self {
        use std::io::IsTerminal as _;
        let choice = match global.color {
            ColorWhen::Auto => anstream::ColorChoice::Auto,
            ColorWhen::Always => anstream::ColorChoice::Always,
            ColorWhen::Never => anstream::ColorChoice::Never,
        };
        choice.write_global();
        let stderr_tty = std::io::stderr().is_terminal();
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

    pub fn line(&self, line: &Line) -> anyhow::Result<()> {
        self.lines(std::slice::from_ref(line))
    }

    /// Prints `lines` in order, each run of lines bound for the same stream in one write (a
    /// report of 10,000 groups is 70,000 lines).
    pub fn lines(&self, lines: &[Line]) -> anyhow::Result<()> {
        use owo_colors::OwoColorize as _;
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
                    let mut out = anstream::stdout().lock();
                    out.write_all(&run).and_then(|()| out.flush())
                }
                Stream::Stderr => anstream::stderr().lock().write_all(&run),
            };
            ignore_broken_pipe(result).context("cannot write the report")?;
            run.clear();
        }
        Ok(())
    }

    pub fn warning(&self, message: &str) {
        use owo_colors::OwoColorize as _;
        if self.detail > Detail::Quiet {
            let _ = writeln!(
                anstream::stderr().lock(),
                "{} {message}",
                "clawmd: warning:".yellow()
            );
        }
    }

    /// A line about what the run did, on stderr (stdout may hold a JSON report).
    pub fn note(&self, message: &str) {
        if self.detail > Detail::Quiet {
            let _ = writeln!(anstream::stderr().lock(), "clawmd: {message}");
        }
    }

    pub fn error(&self, message: &str) {
        use owo_colors::OwoColorize as _;
        let _ = writeln!(
            anstream::stderr().lock(),
            "{} {message}",
            "clawmd: error:".red().bold()
        );
    }

    /// A progress bar on stderr for a multi-group run, drawn only on a terminal.
    pub fn progress(&self, what: &'static str) -> Bar {
        Bar {
            bar: self.bars.then(|| {
                // Hidden until the run says how many groups there are (see `Bar::start`).
                let bar = indicatif::ProgressBar::with_draw_target(
                    None,
                    indicatif::ProgressDrawTarget::hidden(),
                );
                bar.set_style(
                    indicatif::ProgressStyle::with_template(
                        "{prefix} [{bar:30}] {pos}/{len} groups ({eta})",
                    )
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                    .progress_chars("=> "),
                );
                bar.set_prefix(what);
                bar
            }),
            quiet: self.detail == Detail::Quiet,
        }
    }
}

/// The library's [`Progress`] hooks, shown as a bar (on a terminal, for more than one group)
/// and a line when a lock is held by another run.
pub struct Bar {
    bar: Option<indicatif::ProgressBar>,
    quiet: bool,
}

impl Progress for Bar {
    fn start(&self, groups: usize) {
        if let Some(bar) = &self.bar
            && groups > 1
        {
            bar.set_length(groups as u64);
            bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        }
    }

    fn done(&self, _group: &str) {
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
    }

    fn waiting_for_lock(&self, group: &str, lock: &std::path::Path) {
        if self.quiet {
            return;
        }
        let line = format!(
            "clawmd: waiting for lock on {} (held by another run) to compose {}",
            clawmd::report::escape_path(lock),
            clawmd::report::escape(group)
        );
        match &self.bar {
            Some(bar) => bar.suspend(|| {
                let _ = writeln!(anstream::stderr().lock(), "{line}");
            }),
            None => {
                let _ = writeln!(anstream::stderr().lock(), "{line}");
            }
        }
    }
}

impl Bar {
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

pub fn init_logging(verbose: u8, ansi: bool) {
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
    let filter = EnvFilter::try_from_env("RUST_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .with_target(false)
        .without_time()
        .init();
}
