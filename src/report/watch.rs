//! What `watch` prints: one JSON line per event (`--format json`, for a runner), or lines for
//! people.

use serde::Serialize;

use super::compose::write_group;
use super::{
    Detail, GroupReport, Line, Lines, REPORT_VERSION, Status, Tone, WarningReport, escape,
};

/// Something that happened while watching.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum WatchEvent {
    /// A group's composition changed (`status: "changed"`: compare its `spawn_digest` with the
    /// one its running container was started with), its compose failed (`"failed"`, reported
    /// once per distinct error; the group was left as it was), or it is back to its composed
    /// state after a failure, or its composition is the same but its `spawn_digest` moved (its
    /// `container.json`, a file bind's source, changed) (`"unchanged"`). The fields are those
    /// of a group in compose's report: a runner restarts a container whose `spawn_digest`
    /// differs from the one it was started with.
    Group(Box<GroupReport>),
    /// A watched group's folder is gone.
    Removed {
        /// The group.
        group: String,
    },
    /// The first compose is done and watching has started.
    Ready {
        /// How many groups are watched.
        groups: usize,
    },
    /// Something worth fixing that did not stop watching (a malformed `clawmd.json`, a folder
    /// that cannot be watched, shared content that cannot be read right now).
    Warning(WarningReport),
}

/// One line of `watch --format json`: an event with its schema and shape version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct WatchLine {
    /// The `$id` of this line's JSON Schema (`clawmd schema watch-event` prints it).
    #[serde(rename = "$schema")]
    #[schemars(schema_with = "crate::report::kind::watch_event_id")]
    pub schema: &'static str,
    /// The JSON shape version.
    pub version: u32,
    /// What happened.
    #[serde(flatten)]
    pub event: WatchEvent,
}

impl WatchLine {
    /// The line for `event`.
    pub fn new(event: WatchEvent) -> Self {
        WatchLine {
            schema: crate::report::SchemaKind::WatchEvent.id(),
            version: REPORT_VERSION,
            event,
        }
    }
}

impl WatchEvent {
    /// The human form of the event.
    pub fn human(&self, detail: Detail) -> Vec<Line> {
        let mut out = Lines::default();
        match self {
            WatchEvent::Group(group) => {
                if group.status == Status::Unchanged {
                    out.out(
                        Tone::Changed,
                        format!("{}: composed again, as it was", escape(&group.group)),
                    );
                } else {
                    write_group(&mut out, group, detail.max(Detail::Normal), false);
                }
            }
            WatchEvent::Removed { group } => {
                out.out(Tone::Changed, format!("{}: removed", escape(group)));
            }
            WatchEvent::Ready { groups } => {
                if detail > Detail::Quiet {
                    out.err(
                        Tone::Note,
                        format!("watching {groups} group(s) for changes (Ctrl-C to stop)"),
                    );
                }
            }
            WatchEvent::Warning(warning) => {
                if detail > Detail::Quiet {
                    out.err(
                        Tone::Warning,
                        format!("warning: {}", escape(&warning.message)),
                    );
                }
            }
        }
        out.0
    }
}
