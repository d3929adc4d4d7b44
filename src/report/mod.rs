//! Reports of what a run did (or, in a dry run, would do): a versioned JSON shape for
//! machines (documented in docs/json-report.md) and a short human form.
//!
//! One submodule per command ([`compose`], [`migrate`], [`check`]); the pieces they share are
//! here: the [`Report`] trait the binary prints through, the group [`Status`], errors and
//! warnings with a [`Code`] from the one vocabulary in [`codes`], the envelope of a run that
//! could not start ([`RunFailure`]), and [`escape`], which every human form applies to text
//! that came from disk.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::GroupError;
use crate::plan::Warning;

pub mod check;
pub mod codes;
pub mod compose;
mod kind;
pub mod migrate;
pub mod serve;
pub mod watch;

pub use check::{CheckReport, Finding, GroupCheck, Severity};
pub use codes::Code;
pub use compose::{ComposeReport, EntryChange, GroupReport, Rescued, SeenWhen, Summary};
pub use kind::SchemaKind;
pub use migrate::{ActionReport, MigrateGroupReport, MigrateReport};
pub use serve::{ServeAnswer, ServeRequest};
pub use watch::{WatchEvent, WatchLine};

/// The version of the JSON report shape; bumped on any incompatible change.
pub const REPORT_VERSION: u32 = 1;

/// What every command's report offers the binary: a JSON form (serde), a human form, and
/// whether the run succeeded (the exit status).
pub trait Report: Serialize {
    /// True when the run succeeded (exit status 0).
    fn ok(&self) -> bool;
    /// The human-readable form, as lines the binary prints (and colours) on the stream each
    /// names. Every name and text that came from disk is passed through [`escape`], so nothing
    /// in it can move the cursor or forge a line.
    fn human(&self, detail: Detail) -> Vec<Line>;
    /// The human form at the default [`Detail`], both streams together.
    fn to_human(&self) -> String {
        self.human(Detail::Normal)
            .into_iter()
            .map(|line| line.text + "\n")
            .collect()
    }
}

/// How much the human form says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Detail {
    /// Only failures (`-q`).
    Quiet,
    /// What changed, what failed, what is wrong, and a one-line summary (the default).
    #[default]
    Normal,
    /// Every group, even those already right (`-v`).
    Verbose,
}

/// Where a line of human output goes: failures and errors to stderr, the rest to stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// What a line says, for the binary to colour (on a terminal only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// Nothing special.
    Plain,
    /// A change made (or to make).
    Changed,
    /// Something that needs a look but did not fail.
    Warning,
    /// A failure.
    Error,
    /// Secondary detail (a fix, a reason).
    Note,
}

/// One line of human output (without its newline).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// Where it goes.
    pub stream: Stream,
    /// What it says, for colour.
    pub tone: Tone,
    /// The text, already escaped.
    pub text: String,
}

/// Collects [`Line`]s.
#[derive(Debug, Default)]
pub(crate) struct Lines(pub Vec<Line>);

impl Lines {
    pub fn push(&mut self, stream: Stream, tone: Tone, text: impl Into<String>) {
        self.0.push(Line {
            stream,
            tone,
            text: text.into(),
        });
    }
    pub fn out(&mut self, tone: Tone, text: impl Into<String>) {
        self.push(Stream::Stdout, tone, text);
    }
    pub fn err(&mut self, tone: Tone, text: impl Into<String>) {
        self.push(Stream::Stderr, tone, text);
    }
}

/// `n` with thousands separators (`10,000`), for counts in summaries.
pub fn count(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// What happened to a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Something was (or would be) written or removed.
    Changed,
    /// The group was already right; nothing was written.
    Unchanged,
    /// The group could not be processed; it was left as it was.
    Failed,
}

/// A warning with a stable code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct WarningReport {
    /// Stable machine-readable code.
    pub code: Code,
    /// Human-readable explanation with a fix.
    pub message: String,
}

impl From<&Warning> for WarningReport {
    fn from(warning: &Warning) -> Self {
        let code = match warning {
            Warning::UnknownSkill { .. } | Warning::MoreUnknownSkills { .. } => Code::UnknownSkill,
            Warning::DanglingInstructions { .. } => Code::DanglingLink,
            Warning::UnknownKey { .. } => Code::UnknownKey,
            Warning::IgnoredConfig { .. } => Code::IgnoredConfig,
            Warning::ConfigNotHanded { .. } => Code::ConfigNotHanded,
            Warning::GroupSourceUnread { .. } => Code::GroupSourceUnread,
            Warning::MissingSharedBase { .. } => Code::MissingSharedBase,
            Warning::SectionDropped { .. } => Code::SectionDropped,
            Warning::OverBudget { .. } => Code::OverBudget,
            Warning::HostManaged { .. } => Code::HostManaged,
            Warning::MountPointEdited { .. } => Code::MountPointEdited,
            Warning::LocalMemoryUnusable { .. } => Code::LocalMemoryUnusable,
            Warning::LocalMemoryCut { .. } => Code::LocalMemoryCut,
            Warning::ForeignFragment { .. } => Code::ForeignFragment,
        };
        WarningReport {
            code,
            message: warning.to_string(),
        }
    }
}

/// A group's failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ErrorReport {
    /// Stable machine-readable code.
    pub code: Code,
    /// The file concerned, when there is one.
    pub file: Option<PathBuf>,
    /// The full message, with the fix.
    pub message: String,
}

impl From<&GroupError> for ErrorReport {
    fn from(err: &GroupError) -> Self {
        ErrorReport {
            code: Code::from(err),
            file: err.file(),
            message: crate::error::chain_text(err),
        }
    }
}

/// The JSON document of a run that could not start (`clawmd.json` could not be used, the
/// groups folder or the shared content could not be read): `{"$schema", "version", "command",
/// "ok": false, "error": {"code", "message"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct RunFailure {
    /// The `$id` of this report's JSON Schema (`clawmd schema` prints it).
    #[serde(rename = "$schema")]
    #[schemars(schema_with = "crate::report::kind::run_failure_id")]
    pub schema: &'static str,
    /// The JSON shape version.
    pub version: u32,
    /// The command that failed.
    pub command: String,
    /// Always false.
    pub ok: bool,
    /// Why.
    pub error: RunError,
}

/// The error of a `RunFailure`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct RunError {
    /// `run-failed`; or the group's own code when the one group a command is about cannot be
    /// used (`clawmd mounts GROUP`: `not-composed`, `missing-group`, …); in a `clawmd serve`
    /// answer, also `bad-request` and `internal-error`.
    pub code: Code,
    /// The full message, with the fix.
    pub message: String,
}

impl RunFailure {
    /// The envelope for `command` failing with `code` and `message` (an error of the command
    /// line's own, such as a `--config` file that cannot be read).
    pub fn of(command: &str, code: Code, message: String) -> Self {
        RunFailure {
            schema: crate::report::SchemaKind::RunFailure.id(),
            version: REPORT_VERSION,
            command: command.to_owned(),
            ok: false,
            error: RunError { code, message },
        }
    }

    /// The envelope for `command` failing with `err`.
    pub fn new(command: &str, err: &crate::Error) -> Self {
        RunFailure::of(command, Code::from(err), crate::error::chain_text(err))
    }
}

/// `text` with every control character (newline, tab, ESC, DEL, C1 controls) and every
/// bidirectional-override character written as a `\u{…}` escape, so that a file name or a text
/// chosen by an agent cannot clear the screen, write the clipboard (OSC 52), reorder a line or
/// start a forged one when printed to a terminal.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if needs_escape(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// [`escape`] of a path's display form.
pub fn escape_path(path: &Path) -> String {
    escape(&path.to_string_lossy()).into_owned()
}

fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_neutralises_terminal_controls_and_keeps_text() {
        assert_eq!(escape("plain name.md"), "plain name.md");
        assert_eq!(
            escape("a\nb\x1b[2J\x07\u{9b}\u{202e}c"),
            "a\\u{a}b\\u{1b}[2J\\u{7}\\u{9b}\\u{202e}c"
        );
        assert_eq!(escape("été"), "été");
    }

    #[test]
    fn counts_have_thousands_separators() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(10_000), "10,000");
        assert_eq!(count(1_234_567), "1,234,567");
    }
}
