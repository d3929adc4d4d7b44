//! The report of `compose`: per group, what was created, replaced, removed, left alone,
//! rescued and cleaned.

use std::path::PathBuf;

use serde::Serialize;

use super::{
    Detail, ErrorReport, Line, Lines, REPORT_VERSION, Report, Status, Tone, WarningReport, count,
    escape, escape_path,
};
use crate::disk::reconcile::Step;
use crate::error::GroupError;
use crate::file_kind::FileKind;
use crate::plan::delivery::Dropped;
use crate::plan::delivery::GroupPlan;
use crate::plan::delivery::verify::Delivered;
use crate::plan::target::Target;
use crate::plan::{Content, Delivery, Warning};
use crate::report::SchemaKind;

/// A created, replaced or removed managed path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct EntryChange {
    /// The path relative to the group folder.
    pub path: String,
    /// File or symlink (for a removal: what was removed).
    pub kind: FileKind,
    /// A symlink's target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<PathBuf>,
}

/// A hand-edited file kept aside before it was replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Rescued {
    /// The file that was edited (relative to the group folder).
    pub from: String,
    /// Where its text is now: the host path of the rescue file, in the group's rescue folder
    /// outside the group (`<state>/rescues/<group>/CLAUDE.md.rescued-<hash>`, under the
    /// deployment root as given: absolute when `--root` is).
    pub to: String,
}

/// The result of composing one group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct GroupReport {
    /// The group name.
    pub group: String,
    /// Changed, unchanged or failed.
    pub status: Status,
    /// Paths created.
    pub created: Vec<EntryChange>,
    /// Paths whose content or target was replaced.
    pub replaced: Vec<EntryChange>,
    /// Stale paths removed.
    pub removed: Vec<EntryChange>,
    /// Paths that were already right and left alone.
    pub unchanged: Vec<String>,
    /// Hand-edited files kept aside before being replaced.
    pub rescued: Vec<Rescued>,
    /// Temp files an interrupted run made, recorded in its journal and left, that this run
    /// removed: relative to the group folder when they are in it, else host paths.
    pub cleaned: Vec<String>,
    /// Warnings.
    pub warnings: Vec<WarningReport>,
    /// Why the group failed, when it did.
    pub error: Option<ErrorReport>,
    /// What the group is composed as: backend, delivery mode, entry point, byte budget.
    pub target: Option<Target>,
    /// Optional sections left out over budget, by name.
    pub dropped: Vec<Dropped>,
    /// Whether everything composed reaches the agent (worked out by loading the result as
    /// the agent will); `null` in a dry run or for a failed group.
    pub delivered: Option<DeliveredReport>,
    /// `sha256:<hex>` of the memory the agent will receive; `null` in a dry run or for a
    /// failed group.
    pub memory_digest: Option<String>,
    /// `sha256:<hex>` of what a container started earlier cannot see without a restart: the
    /// content behind the binds of `clawmd mounts` that pin a file at spawn (the entry point
    /// bound from the state folder, `container.json`, `/app/CLAUDE.md` in link delivery, guard
    /// files bound as files), never what a running container sees at its next session (the
    /// managed folder, `.claude-fragments`, `/app/skills`) nor the agent's own memory. A runner
    /// restarts a container when this differs from the one it spawned it with. `null` for a
    /// failed group.
    pub spawn_digest: Option<String>,
    /// For a changed group: when a container already running sees the change: at its next
    /// session (only folder binds' content changed), only after a restart (a file bind's
    /// source was replaced), or, when every change is a creation and a file bind's source was
    /// created (a first compose), only when started after this compose; `null` when nothing
    /// changed or the group failed.
    pub running_container: Option<SeenWhen>,
    /// Whether the group folder holds a `container.json` of its own, as this run found it
    /// with the mount table worked out for the spawn digest (without one the runner binds the
    /// defaults over it): what `clawmd serve` makes the binds from rather than looking again
    /// ([`crate::runtime::mounts::mounts_of`]). Not part of the report.
    #[serde(skip)]
    #[schemars(skip)]
    pub own_config: Option<bool>,
}

/// When a running container sees a recompose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SeenWhen {
    /// Every changed file is in a folder the container binds: its next session loads it.
    NextSession,
    /// A changed file is the source of a file bind: the container keeps the old content
    /// until it restarts.
    AfterRestart,
    /// Every change is a creation (a group composed for the first time) and some created
    /// file is the source of a file bind: no container started before this compose could
    /// bind it; start the container after.
    StartAfter,
}

/// Whether everything composed reaches the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct DeliveredReport {
    /// True when every composed section and the local memory reach the agent.
    pub complete: bool,
    /// What does not: `shared-base`, `skill:<name>`, `mcp:<server>`, `local-memory`.
    pub missing: Vec<String>,
    /// Why, as the loader explains it.
    pub reasons: Vec<String>,
    /// The Claude Code release and consumer this verdict judged, and where each came from
    /// (`null` for a flat backend, which reads its document as it is).
    pub judged: Option<crate::input::pin::Judged>,
    /// Settings the agent can write that may keep composed memory from it and that clawmd
    /// cannot evaluate exactly, each naming the file and the setting: the guardrails *may
    /// not* reach the agent (`complete` is then `false`).
    pub undecided: Vec<String>,
    /// For Codex, Gemini CLI and opencode groups: what keeps the agent from dropping the
    /// document with files of its own, in a container built from `clawmd mounts`
    /// (`cannot-be-dropped`; docs/delivery.md, "Guardrails on every backend"). Absent for
    /// Claude Code groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guarantee: Option<crate::plan::delivery::guard::Guarantee>,
}

impl GroupReport {
    /// A failed group.
    pub fn failed(group: &str, err: &GroupError) -> Self {
        let mut report = GroupReport::empty(group);
        report.status = Status::Failed;
        report.error = Some(err.into());
        report
    }

    fn empty(group: &str) -> Self {
        GroupReport {
            group: group.to_owned(),
            status: Status::Unchanged,
            created: Vec::new(),
            replaced: Vec::new(),
            removed: Vec::new(),
            unchanged: Vec::new(),
            rescued: Vec::new(),
            cleaned: Vec::new(),
            warnings: Vec::new(),
            error: None,
            target: None,
            dropped: Vec::new(),
            delivered: None,
            memory_digest: None,
            spawn_digest: None,
            running_container: None,
            own_config: None,
        }
    }

    /// A group found unchanged: `unchanged` already right, with its `warnings`, composed as
    /// `target`, with the sections `dropped` over budget.
    pub fn unchanged(
        group: &str,
        unchanged: Vec<String>,
        warnings: Vec<WarningReport>,
        target: Target,
        dropped: Vec<Dropped>,
    ) -> Self {
        GroupReport {
            unchanged,
            warnings,
            target: Some(target),
            dropped,
            ..GroupReport::empty(group)
        }
    }

    /// Records what reaches the agent.
    pub fn set_delivered(&mut self, delivered: Delivered) {
        for notice in &delivered.notices {
            if !self.warnings.contains(notice) {
                self.warnings.push(notice.clone());
            }
        }
        self.memory_digest = Some(delivered.memory_digest);
        self.delivered = Some(DeliveredReport {
            complete: delivered.complete,
            missing: delivered.missing,
            reasons: delivered.reasons,
            judged: delivered.judged,
            undecided: delivered.undecided,
            guarantee: None,
        });
    }

    /// Adds the temps an interrupted run left and this one removed (or, in a dry run, would
    /// remove): a group with some changed.
    pub fn with_cleaned(mut self, cleaned: Vec<String>) -> Self {
        if !cleaned.is_empty() && self.status == Status::Unchanged {
            self.status = Status::Changed;
        }
        self.cleaned.extend(cleaned);
        self
    }

    /// The report of a reconciliation made of `steps` towards `plan`.
    /// `recipe`: the deployment's, for where a fix says the group's own text goes.
    pub fn from_steps(
        group: &str,
        steps: &[Step],
        plan: &GroupPlan,
        recipe: &crate::input::recipe::Recipe,
    ) -> Self {
        let warnings = &plan.warnings;
        let mut report = GroupReport::empty(group);
        report.target = Some(plan.target);
        report.dropped = plan.dropped.clone();
        let mut shadowed = Vec::new();
        for step in steps {
            match step {
                Step::Keep { path } => report.unchanged.push(path.to_string()),
                Step::Shadowed { path } => {
                    report.unchanged.push(path.to_string());
                    shadowed.push(Warning::MountPointEdited {
                        file: path.name.clone(),
                        own_text: recipe.own_text_file(),
                    });
                }
                Step::LeftAlone { path, found } => {
                    report.unchanged.push(path.to_string());
                    shadowed.push(Warning::LocalMemoryUnusable {
                        file: path.name.clone(),
                        found: *found,
                    });
                }
                Step::Foreign { path, found } => {
                    report.unchanged.push(path.to_string());
                    shadowed.push(Warning::ForeignFragment {
                        file: path.name.clone(),
                        found: *found,
                    });
                }
                Step::Rescue { from, to, .. } => report.rescued.push(Rescued {
                    from: from.to_string(),
                    to: to.display().to_string(),
                }),
                Step::Write {
                    path,
                    content,
                    before,
                } => {
                    let (kind, target) = match content {
                        Content::Symlink(target) => (FileKind::Symlink, Some(target.clone())),
                        Content::File(_) | Content::Seed | Content::Placeholder(_) => {
                            (FileKind::File, None)
                        }
                    };
                    let change = EntryChange {
                        path: path.to_string(),
                        kind,
                        target,
                    };
                    if before.is_none() {
                        report.created.push(change);
                    } else {
                        report.replaced.push(change);
                    }
                }
                Step::Remove { path, before } => report.removed.push(EntryChange {
                    path: path.to_string(),
                    kind: if *before == FileKind::Symlink {
                        FileKind::Symlink
                    } else {
                        FileKind::File
                    },
                    target: None,
                }),
            }
        }
        report.warnings = warnings
            .iter()
            .chain(&shadowed)
            .map(WarningReport::from)
            .collect();
        let changed = !(report.created.is_empty()
            && report.replaced.is_empty()
            && report.removed.is_empty()
            && report.rescued.is_empty());
        report.status = if changed {
            Status::Changed
        } else {
            Status::Unchanged
        };
        report
    }
}

/// Counts of groups by status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Summary {
    /// Groups processed.
    pub groups: usize,
    /// Groups changed.
    pub changed: usize,
    /// Groups already right.
    pub unchanged: usize,
    /// Groups that failed.
    pub failed: usize,
}

/// The report of a `compose` run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ComposeReport {
    /// The `$id` of this report's JSON Schema (`clawmd schema` prints it).
    #[serde(rename = "$schema")]
    #[schemars(schema_with = "crate::report::kind::compose_report_id")]
    pub schema: &'static str,
    /// The JSON shape version.
    pub version: u32,
    /// Always "compose".
    pub command: &'static str,
    /// Whether nothing was written (the report says what would be done).
    pub dry_run: bool,
    /// The delivery mode used.
    pub delivery: Delivery,
    /// True when no group failed.
    pub ok: bool,
    /// Counts.
    pub summary: Summary,
    /// One entry per group, sorted by name.
    pub groups: Vec<GroupReport>,
    /// Warnings about the shared content (not about one group).
    pub warnings: Vec<WarningReport>,
}

impl ComposeReport {
    /// Builds the report, computing `ok` and the summary.
    pub fn new(
        dry_run: bool,
        delivery: Delivery,
        groups: Vec<GroupReport>,
        warnings: Vec<WarningReport>,
    ) -> Self {
        let mut summary = Summary {
            groups: groups.len(),
            ..Summary::default()
        };
        for group in &groups {
            match group.status {
                Status::Changed => summary.changed += 1,
                Status::Unchanged => summary.unchanged += 1,
                Status::Failed => summary.failed += 1,
            }
        }
        ComposeReport {
            schema: SchemaKind::Report.id(),
            version: REPORT_VERSION,
            command: "compose",
            dry_run,
            delivery,
            ok: summary.failed == 0,
            summary,
            groups,
            warnings,
        }
    }
}

impl Report for ComposeReport {
    fn ok(&self) -> bool {
        self.ok
    }

    fn human(&self, detail: Detail) -> Vec<Line> {
        let mut out = Lines::default();
        let verb =
            |done: &'static str, would: &'static str| if self.dry_run { would } else { done };
        if detail > Detail::Quiet {
            for warning in &self.warnings {
                out.err(
                    Tone::Warning,
                    format!("warning: {}", escape(&warning.message)),
                );
            }
        }
        for group in &self.groups {
            write_group(&mut out, group, detail, self.dry_run);
        }
        if detail > Detail::Quiet {
            let s = &self.summary;
            let incomplete = self
                .groups
                .iter()
                .filter(|group| group.delivered.as_ref().is_some_and(|d| !d.complete))
                .count();
            out.out(
                Tone::Plain,
                format!(
                    "{} group(s): {} {}, {} up to date, {} failed{}{}",
                    count(s.groups),
                    count(s.changed),
                    verb("changed", "to change"),
                    count(s.unchanged),
                    count(s.failed),
                    match incomplete {
                        0 => String::new(),
                        n => format!("; {} NOT reaching the agent in full", count(n)),
                    },
                    if self.dry_run {
                        " (dry run: nothing written)"
                    } else {
                        ""
                    }
                ),
            );
        }
        out.0
    }
}

/// The lines of one group's result (compose's report, and each group event of `watch`).
pub(crate) fn write_group(out: &mut Lines, group: &GroupReport, detail: Detail, dry_run: bool) {
    let verb = |done: &'static str, would: &'static str| if dry_run { would } else { done };
    let name = escape(&group.group);
    let incomplete = group.delivered.as_ref().is_some_and(|d| !d.complete);
    match group.status {
        Status::Failed => {
            let message = group
                .error
                .as_ref()
                .map(|e| e.message.as_str())
                .unwrap_or("");
            out.err(
                Tone::Error,
                format!("{name}: FAILED, left as it was: {}", escape(message)),
            );
            return;
        }
        _ if detail == Detail::Quiet => return,
        Status::Unchanged => {
            // A group already right is news only when something about it needs a look.
            if detail < Detail::Verbose && group.warnings.is_empty() && !incomplete {
                return;
            }
            out.out(Tone::Plain, format!("{name}: up to date"));
        }
        Status::Changed => {
            out.out(
                Tone::Changed,
                format!("{name}: {}", verb("updated", "would update")),
            );
            if let Some(when) = group.running_container {
                out.out(Tone::Note, format!("  {}", seen_when(when, dry_run)));
            }
            for rescued in &group.rescued {
                out.out(
                    Tone::Warning,
                    format!(
                        "  ! {} was edited by hand: its text {} outside the group in {} (`clawmd check` says where to move what you need)",
                        escape(&rescued.from),
                        verb("is kept", "would be kept"),
                        escape(&rescued.to)
                    ),
                );
            }
            write_changes(out, "+", &group.created);
            write_changes(out, "~", &group.replaced);
            write_changes(out, "-", &group.removed);
            for name in &group.cleaned {
                out.out(
                    Tone::Plain,
                    format!("  - {} (left by an interrupted run)", escape(name)),
                );
            }
        }
    }
    for warning in &group.warnings {
        out.err(
            Tone::Warning,
            format!("  warning: {name}: {}", escape(&warning.message)),
        );
    }
    write_delivery(out, group);
}

/// What a running container of the group sees of the change.
fn seen_when(when: SeenWhen, dry_run: bool) -> &'static str {
    match (when, dry_run) {
        (SeenWhen::NextSession, false) => {
            "a running container sees this at its next session (no restart needed)"
        }
        (SeenWhen::NextSession, true) => {
            "a running container would see this at its next session (no restart needed)"
        }
        (SeenWhen::AfterRestart, false) => {
            "a running container sees this only after a restart (a file it binds was replaced)"
        }
        (SeenWhen::AfterRestart, true) => {
            "a running container would see this only after a restart (a file it binds would be replaced)"
        }
        (SeenWhen::StartAfter, false) => {
            "a container started before this compose has none of these files: start it after"
        }
        (SeenWhen::StartAfter, true) => {
            "a container started before this compose would have none of these files: start it after"
        }
    }
}

fn write_delivery(out: &mut Lines, group: &GroupReport) {
    let Some(target) = &group.target else {
        return;
    };
    for dropped in &group.dropped {
        out.out(
            Tone::Warning,
            format!(
                "  dropped over budget: {} ({} bytes)",
                escape(&dropped.section),
                dropped.bytes
            ),
        );
    }
    match &group.delivered {
        Some(delivered) if delivered.complete => {
            out.out(
                Tone::Note,
                format!(
                    "  {} ({} delivery, {}): everything composed reaches the agent{}",
                    target.file,
                    target.delivery,
                    target.provider,
                    judged_note(delivered)
                ),
            );
        }
        Some(delivered) if delivered.missing.is_empty() => {
            out.out(
                Tone::Warning,
                format!(
                    "  ! {} ({} delivery, {}): the guardrails MAY NOT reach the agent: clawmd cannot decide what settings the agent wrote do",
                    target.file, target.delivery, target.provider
                ),
            );
            for undecided in &delivered.undecided {
                out.out(Tone::Note, format!("    undecided: {}", escape(undecided)));
            }
        }
        Some(delivered) => {
            out.out(
                Tone::Warning,
                format!(
                    "  ! {} ({} delivery, {}): NOT reaching the agent{}: {}",
                    target.file,
                    target.delivery,
                    target.provider,
                    judged_note(delivered),
                    escape(&delivered.missing.join(", "))
                ),
            );
            for reason in &delivered.reasons {
                out.out(Tone::Note, format!("    because: {}", escape(reason)));
            }
            for undecided in &delivered.undecided {
                out.out(Tone::Note, format!("    undecided: {}", escape(undecided)));
            }
            let by_settings = delivered
                .reasons
                .iter()
                .any(|r| crate::plan::delivery::verify::reason_is_a_setting(r));
            if by_settings {
                out.out(
                    Tone::Note,
                    "    fix: remove that setting (the agent can write its settings files), or deliver through the managed files no file of the agent's reaches",
                );
            } else if target.delivery == Delivery::Link && !target.provider.is_flat() {
                out.out(
                    Tone::Note,
                    "    fix: approve external imports in the agent's ~/.claude.json (and set \"approveExternal\": true in clawmd.json), or use the default managed delivery",
                );
            }
        }
        None => {}
    }
}

/// ` (as Claude Code 2.1.128 Agent SDK loads it, pinned by the deployment)`: what the verdict
/// judged, for a Claude Code group.
fn judged_note(delivered: &DeliveredReport) -> String {
    match &delivered.judged {
        Some(judged) => format!(" (judged for {judged})"),
        None => String::new(),
    }
}

fn write_changes(out: &mut Lines, mark: &str, changes: &[EntryChange]) {
    for change in changes {
        let text = match &change.target {
            Some(target) => format!(
                "  {mark} {} -> {}",
                escape(&change.path),
                escape_path(target)
            ),
            None => format!("  {mark} {}", escape(&change.path)),
        };
        out.out(Tone::Plain, text);
    }
}
