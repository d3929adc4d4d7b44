//! The progress bar of a multi-group run, and the line saying a run waits for another's lock:
//! the library's [`Progress`] hooks, drawn on stderr.

use clawmd::progress::Progress;

/// The library's [`Progress`] hooks, shown as a bar (on a terminal, for more than one group)
/// and a line when a lock is held by another run.
pub struct Bar {
    bar: Option<indicatif::ProgressBar>,
    quiet: bool,
    /// What the run waiting for a group's lock does to the group ("compose", "migrate").
    task: &'static str,
}

impl Bar {
    /// A bar prefixed with `what` when `drawn` (stderr is a terminal, not `-q`); else only the
    /// lock line, unless `quiet`.
    pub(super) fn new(drawn: bool, what: &'static str, quiet: bool) -> Self {
        Bar {
            bar: drawn.then(|| hidden_bar(what)),
            quiet,
            task: "compose",
        }
    }

    /// The same bar, for a run that does `task` to a group ("migrate"; "compose" by default),
    /// as the line saying it waits for a lock names it.
    pub fn for_task(self, task: &'static str) -> Self {
        Bar { task, ..self }
    }

    /// Clears the bar, once the run is done.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// A bar hidden until the run says how many groups there are (see `Bar::start`).
fn hidden_bar(what: &'static str) -> indicatif::ProgressBar {
    let bar =
        indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::hidden());
    bar.set_style(
        indicatif::ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} groups ({eta})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_prefix(what);
    bar
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
            "clawmd: waiting for lock on {} (held by another run) to {} {}",
            clawmd::report::escape_path(lock),
            self.task,
            clawmd::report::escape(group)
        );
        match &self.bar {
            Some(bar) => bar.suspend(|| super::stderr_line(&line)),
            None => super::stderr_line(&line),
        }
    }
}
