//! `check`: find what would make an agent's memory wrong, incomplete or unsafe, without
//! changing anything.
//!
//! Two kinds of findings: the composition on disk against what `container.json` asks for
//! (out of date, hand-edited, stale fragments, leftovers), and what the agent will really load
//! inside its container (computed by the [`loader`](crate::loader) through the mount table:
//! dropped, dangling or oversized imports). Each finding names the file and a one-line fix.

mod record;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub use record::{CHECKS, CheckRecord};
use record::{CheckLook, CheckRecords};

use crate::commands::compose::GroupVerdicts;
use crate::disk::deployment::{
    Observation, Selection, checked_group_dir, observe_settled, read_sources,
};
use crate::disk::fsops::LockWait;
use crate::disk::fsops::SafeDir;
use crate::disk::reads::ReadLog;
use crate::disk::reconcile::{Step, is_fragment_rescue_name, kept_rescues, rescue_name_starts};
use crate::disk::state;
use crate::error::{Error, GroupError};
use crate::input::layout::Layout;
use crate::input::names;
use crate::input::sources::Sources;
use crate::loader::fs::MemoryFs;
use crate::loader::{ClaudeVersion, Diagnostic, DiagnosticCode, Memory};
use crate::plan::delivery::GroupPlan;
use crate::plan::delivery::verify::{self, Delivered};
use crate::plan::target::DeliverySettings;
use crate::plan::{Content, Delivery, Warning};
use crate::progress::Progress;
use crate::report::{
    CheckReport, Code, Finding, GroupCheck, REPORT_VERSION, Severity, WarningReport,
};
use crate::runtime::mounted::MountedFs;
use crate::runtime::view::{ViewOptions, agent_settings_in, group_view, load_in};

/// How to check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckOptions {
    /// The deployment's delivery settings, resolved exactly as `compose` resolves them
    /// (`clawmd.json`, `CLAWMD_*`, flags), so that check expects what compose makes.
    pub settings: DeliverySettings,
    /// Whether the delivery mode was given on this command line (`--delivery` or
    /// `CLAWMD_DELIVERY`): fixes then repeat it.
    pub delivery_given: bool,
    /// The Claude Code release the agents run (default: the newest the conformance corpus
    /// covers); a release outside the corpus is checked with the nearest known rules and
    /// reported as `claude-version-unverified`.
    pub claude_version: ClaudeVersion,
    /// The longest wait for a group's lock, when the group is found needing work while
    /// another run holds it (composing it, or keeping its books after a spawn's answer):
    /// the group is looked at again once that run is done, so check never reports a group
    /// midway ([`observe_settled`]).
    pub lock_timeout: Duration,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            settings: DeliverySettings::default(),
            delivery_given: false,
            claude_version: ClaudeVersion::default(),
            lock_timeout: crate::commands::compose::ComposeOptions::default().lock_timeout,
        }
    }
}

/// Checks the selected groups. Fails as a whole only when the deployment cannot be read.
pub fn check(
    layout: &Layout,
    selection: &Selection,
    options: &CheckOptions,
) -> Result<CheckReport, Error> {
    check_with_progress(layout, selection, options, &())
}

/// [`check`], telling `progress` how far it is. Groups are checked in parallel, like compose
/// composes them; the report lists them in name order.
pub fn check_with_progress(
    layout: &Layout,
    selection: &Selection,
    options: &CheckOptions,
    progress: &dyn Progress,
) -> Result<CheckReport, Error> {
    let groups = selection.groups(layout)?;
    let (sources, _) = read_sources(layout)?;
    progress.start(groups.len());
    let verdicts = GroupVerdicts::new(layout, &options.settings);
    let records = CheckRecords::new(&verdicts, &sources, options);
    let groups: Vec<GroupCheck> = crate::commands::compose::parallel_map(&groups, |group| {
        let checked = guarded(layout, group, options, || {
            check_one(layout, &sources, group, options, &records, progress)
        });
        progress.done(group);
        checked
    });
    let ok = groups
        .iter()
        .flat_map(|g| &g.findings)
        .all(|f| f.severity != Severity::Error);
    Ok(CheckReport {
        schema: crate::commands::schema::SchemaKind::CheckReport.id(),
        version: REPORT_VERSION,
        command: "check",
        ok,
        groups,
    })
}

/// The findings `check --fix` clears by composing the group: the composition is out of
/// date, a fragment of a disabled skill is left, temp files of an interrupted run are left.
pub const FIXED_BY_COMPOSE: [Code; 3] = [
    Code::OutOfDate,
    Code::DisabledSkillFragment,
    Code::StaleTemp,
];

/// The groups `check --fix` may safely compose: those with a finding in
/// [`FIXED_BY_COMPOSE`] and no hand edit (composing would move a person's edit aside: that is
/// left for the person, with the finding that says how).
pub fn safely_fixable(report: &CheckReport) -> Vec<String> {
    report
        .groups
        .iter()
        .filter(|group| {
            group
                .findings
                .iter()
                .any(|f| FIXED_BY_COMPOSE.contains(&f.code))
                && !group.findings.iter().any(|f| f.code == Code::HandEdited)
        })
        .map(|group| group.group.clone())
        .collect()
}

/// Checks one group.
pub fn check_group(
    layout: &Layout,
    sources: &Sources,
    group: &str,
    options: &CheckOptions,
) -> GroupCheck {
    let verdicts = GroupVerdicts::new(layout, &options.settings);
    check_one(
        layout,
        sources,
        group,
        options,
        &CheckRecords::new(&verdicts, sources, options),
        &(),
    )
}

/// [`check_group`] with the records of the run: the group's findings as its record keeps
/// them when every read they were made from finds the same again ([`record`]), else worked
/// out (with the verdicts read back from compose's records where the inputs are the same)
/// and recorded.
fn check_one(
    layout: &Layout,
    sources: &Sources,
    group: &str,
    options: &CheckOptions,
    records: &CheckRecords,
    progress: &dyn Progress,
) -> GroupCheck {
    let view = ViewOptions {
        approve_external: options.settings.approve_external,
        claude_version: options.claude_version,
        delivery: options.settings.delivery,
        provider: options.settings.provider,
        ..ViewOptions::default()
    };
    let recorded = records.apply_to(layout, group);
    if recorded && let Some(found) = records.found(layout, group) {
        return found;
    }
    let mut look = CheckLook::default();
    let checked = check_afresh(
        layout,
        sources,
        group,
        options,
        records.verdicts(),
        &view,
        &mut look,
        progress,
    );
    if recorded {
        records.record(layout, group, look, &checked);
    }
    checked
}

/// [`check_one`] without records, logging what it reads in `look`.
#[allow(clippy::too_many_arguments)]
fn check_afresh(
    layout: &Layout,
    sources: &Sources,
    group: &str,
    options: &CheckOptions,
    verdicts: &GroupVerdicts,
    view: &ViewOptions,
    look: &mut CheckLook,
    progress: &dyn Progress,
) -> GroupCheck {
    let mut findings = Vec::new();
    let found = composition_findings(layout, sources, group, options, &mut findings, progress);
    let plan = match found {
        Ok((plan, reads)) => {
            look.reads = Some(reads);
            Some(plan)
        }
        Err(err) => {
            findings.push(group_error_finding(layout, group, &err));
            None
        }
    };
    let delivery = plan
        .as_ref()
        .map_or(options.settings.delivery, |p| p.target.delivery);
    let flat = plan.as_ref().is_some_and(|p| p.target.provider.is_flat());
    let fix = compose_fix(group, options);
    let mut agent = verify::AgentSettings::default();
    let mut agent_unreadable = None;
    if !findings.iter().any(|f| is_group_error(f.code)) && !flat {
        match group_view(layout, group, view) {
            Ok(mut fs) => {
                fs.log_reads_in(&look.view_reads);
                look.view = Some(fs.mounts());
                match load_in(layout, &fs, view) {
                    Ok(memory) => {
                        memory_findings(layout, group, delivery, &fix, &memory, &fs, &mut findings)
                    }
                    Err(err) => findings.push(group_error_finding(layout, group, &err)),
                }
                match agent_settings_in(layout, &fs, view) {
                    Ok(read) => agent = read,
                    Err(err) => agent_unreadable = Some(crate::error::chain_text(&err)),
                }
            }
            Err(err) => {
                agent_unreadable = Some(crate::error::chain_text(&err));
                findings.push(group_error_finding(layout, group, &err));
            }
        }
    }
    // The same verdict as compose's report: what reaches the agent once composed, with what
    // the agent's own settings files do.
    if let Some(plan) = &plan {
        let (mut delivered, _) =
            verdicts.delivered(layout, group, plan, sources, &options.settings, &agent);
        if let Some(why) = agent_unreadable {
            delivered.complete = false;
            delivered.undecided.push(format!(
                "the agent's settings files could not be read ({why}): what they do to its memory is undecided"
            ));
        }
        not_delivered(layout, group, plan, &delivered, &mut findings);
    }
    let version = options.claude_version;
    // Only a Claude Code group's verdict rests on the release's rules (a flat document is
    // what its agent reads).
    if !version.is_verified() && !flat {
        let accepted = options.settings.accepted_unrecorded == Some(version);
        findings.push(Finding {
            severity: match accepted {
                true => Severity::Warning,
                false => Severity::Error,
            },
            code: Code::ClaudeVersionUnverified,
            file: layout.group_dir(group),
            message: format!(
                "Claude Code {version} ({}) is {}: the verdict rests on {}'s rules{}",
                options.settings.claude_version_from.describe(),
                version.unverified_note(),
                version.nearest_verified(),
                match accepted {
                    true => ", as clawmd.json's acceptUnrecordedRelease accepts",
                    false => "",
                }
            ),
            fix: format!(
                "record the corpus on {version} (scripts/new-conformance-case --version {version} crates/clawmd-loader/tests/fixtures/conformance/*/; --sdk for a release the Agent SDK bundles), pin a recorded release, or accept it with \"acceptUnrecordedRelease\": \"{version}\" in clawmd.json"
            ),
        });
    }
    findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    GroupCheck {
        group: group.to_owned(),
        delivery,
        findings,
    }
}

/// Findings that mean the group could not be read at all (no point in loading its memory).
fn is_group_error(code: Code) -> bool {
    matches!(
        code,
        Code::BadGroupName
            | Code::ReservedGroup
            | Code::MissingGroup
            | Code::UnsafePath
            | Code::Io
            | Code::TooLarge
            | Code::Loader
    )
}

/// The one command that brings a group to what check expects: compose with the same
/// settings (and the same `--delivery` when check was given one).
fn compose_fix(group: &str, options: &CheckOptions) -> String {
    match options.delivery_given {
        true => format!(
            "run `clawmd compose {group} --delivery {}`",
            options.settings.delivery
        ),
        false => format!("run `clawmd compose {group}`"),
    }
}

/// Composed sections that do not reach the agent (the same verdict as compose's report).
fn not_delivered(
    layout: &Layout,
    group: &str,
    plan: &GroupPlan,
    delivered: &Delivered,
    findings: &mut Vec<Finding>,
) {
    if delivered.complete {
        return;
    }
    if delivered.missing.is_empty() {
        findings.push(Finding {
            severity: Severity::Error,
            code: Code::SettingsUndecided,
            file: layout.group_dir(group).join(plan.target.file),
            message: format!(
                "the guardrails MAY NOT reach the agent: clawmd cannot decide what these settings do: {}",
                delivered.undecided.join("; ")
            ),
            fix: "remove the settings named (the agent can write those files), or keep its settings files to claudeMdExcludes, env and $schema so clawmd can evaluate them".to_owned(),
        });
        return;
    }
    let by_settings = delivered
        .reasons
        .iter()
        .any(|r| crate::plan::delivery::verify::reason_is_a_setting(r));
    let fix = if by_settings {
        "remove the setting named (the agent can write its settings files, so an agent may have written it), or deliver through the managed files no file of the agent's reaches".to_owned()
    } else if plan.target.delivery == Delivery::Link && !plan.target.provider.is_flat() {
        link_fix(layout, group)
    } else if !plan.dropped.is_empty() {
        format!(
            "shorten or disable the dropped sections in container.json, or raise \"budgets\": {{\"{}\": …}} in clawmd.json, then run `clawmd compose {group}`",
            plan.target.provider
        )
    } else {
        format!(
            "see why with `clawmd render {group} --delivery-view`, fix the source named there, then run `clawmd compose {group}`"
        )
    };
    findings.push(Finding {
        severity: Severity::Error,
        code: Code::NotDelivered,
        file: layout.group_dir(group).join(plan.target.file),
        message: format!(
            "composed for the agent but not reaching it: {}{}{}",
            delivered.missing.join(", "),
            match delivered.reasons.is_empty() {
                true => String::new(),
                false => format!(" ({})", delivered.reasons.join("; ")),
            },
            match delivered.undecided.is_empty() {
                true => String::new(),
                false => format!("; undecided: {}", delivered.undecided.join("; ")),
            }
        ),
        fix,
    });
}

/// The fix for link delivery whose imports Claude Code drops: either approval (the runtime's
/// setting, told to clawmd too) or the default managed delivery.
fn link_fix(layout: &Layout, group: &str) -> String {
    format!(
        "approve external imports for {} in the agent's ~/.claude.json and set \"approveExternal\": true in clawmd.json; or set \"delivery\": \"managed\" in clawmd.json, the default (and stop passing --delivery link / CLAWMD_DELIVERY=link), then run `clawmd compose {group}`",
        layout.workspace_mount.display()
    )
}

/// What the agent will really get, from the loader's view inside the container.
fn memory_findings(
    layout: &Layout,
    group: &str,
    delivery: Delivery,
    compose_fix: &str,
    memory: &Memory,
    fs: &MountedFs,
    findings: &mut Vec<Finding>,
) {
    let host = |path: &Path| fs.host_path(path).unwrap_or_else(|| path.to_owned());
    let external: Vec<&Diagnostic> = memory
        .diagnostics
        .iter()
        .filter(|d| d.code == DiagnosticCode::ImportExternal)
        .collect();
    if !external.is_empty() {
        let imports: Vec<String> = external
            .iter()
            .map(|d| {
                d.import
                    .clone()
                    .unwrap_or_else(|| d.path.display().to_string())
            })
            .collect();
        let from_composition = external.iter().any(|d| {
            d.from.as_deref().is_some_and(|from| {
                from == layout.workspace_mount.join(names::CLAUDE_MD)
                    || from == layout.workspace_mount.join(names::SHARED)
                    || from.starts_with(layout.workspace_mount.join(names::FRAGMENTS))
            })
        });
        let fix = match (delivery, from_composition) {
            (Delivery::Link, true) => link_fix(layout, group),
            (_, true) => compose_fix.to_owned(),
            (_, false) => "point these imports at files inside the workspace".to_owned(),
        };
        findings.push(Finding {
            severity: Severity::Error,
            code: Code::ExternalImportDropped,
            file: host(external[0].from.as_deref().unwrap_or(&external[0].path)),
            message: format!(
                "Claude Code silently drops {} import(s) that resolve outside {} because external imports are not approved: {}",
                imports.len(),
                layout.workspace_mount.display(),
                imports.join(", ")
            ),
            fix,
        });
    }
    for diagnostic in &memory.diagnostics {
        let Some((severity, code, fix)) = classify(diagnostic) else {
            continue;
        };
        if diagnostic.code == DiagnosticCode::ImportMissing
            && fs.read_link(&diagnostic.path).is_ok()
        {
            continue; // a dangling link: reported below as such
        }
        if is_legacy_global_import(layout, diagnostic) {
            continue;
        }
        // A diagnostic about a file itself (too large, unreadable…) names that file, with
        // the file that imports it; one about an import names the file that holds it.
        let (file, message) = match (is_about_the_file(diagnostic.code), &diagnostic.from) {
            (true, Some(from)) => (
                host(&diagnostic.path),
                format!(
                    "{} (imported by {})",
                    diagnostic.message,
                    host(from).display()
                ),
            ),
            (true, None) => (host(&diagnostic.path), diagnostic.message.clone()),
            (false, from) => (
                host(from.as_deref().unwrap_or(&diagnostic.path)),
                diagnostic.message.clone(),
            ),
        };
        findings.push(Finding {
            severity,
            code,
            file,
            message,
            fix: fix.to_owned(),
        });
    }
    dangling_links(layout, fs, findings);
}

/// Whether `diagnostic` is the dead `@./.claude-global.md` import at the top of a group's
/// `CLAUDE.local.md`: nanoclaw v2.0's own start-up migration (`migrateGroupsToClaudeLocal`)
/// renamed every group's old `CLAUDE.md`, that line included, to `CLAUDE.local.md` and deleted
/// the link it imported; `clawmd migrate` removes the link too. The file is the group's memory,
/// which clawmd never changes, and the line reaches the agent as text exactly as it did under
/// nanoclaw's composer: nothing to fix, so nothing to report.
fn is_legacy_global_import(layout: &Layout, diagnostic: &Diagnostic) -> bool {
    diagnostic.code == DiagnosticCode::ImportMissing
        && diagnostic.path == layout.workspace_mount.join(names::LEGACY_GLOBAL_LINK)
        && diagnostic.from.as_deref()
            == Some(
                layout
                    .workspace_mount
                    .join(names::CLAUDE_LOCAL_MD)
                    .as_path(),
            )
}

/// Whether a loader diagnostic is about the file at its path (to fix there) rather than about
/// an import in the file that imports it.
fn is_about_the_file(code: DiagnosticCode) -> bool {
    use DiagnosticCode as D;
    matches!(
        code,
        D::FileTooLarge
            | D::FileUnreadable
            | D::FileUnparsable
            | D::FileOversized
            | D::FileProtected
            | D::LinkUnchecked
    )
}

/// The check severity, code and fix for a loader diagnostic (`None`: not worth reporting,
/// or reported elsewhere).
fn classify(diagnostic: &Diagnostic) -> Option<(Severity, Code, &'static str)> {
    use DiagnosticCode as D;
    Some(match diagnostic.code {
        D::ImportMissing => (
            Severity::Error,
            Code::ImportMissing,
            "create the file, or remove the import",
        ),
        D::ImportTooDeep => (
            Severity::Error,
            Code::ImportTooDeep,
            "import the file from a shallower file: Claude Code follows at most 4 levels",
        ),
        D::ImportCycle => (
            Severity::Warning,
            Code::ImportCycle,
            "remove one of the imports that form the cycle",
        ),
        D::ImportNotText | D::ImportNotAFile => (
            Severity::Warning,
            Code::ImportNotLoaded,
            "import a text file",
        ),
        D::FileTooLarge => (
            Severity::Error,
            Code::FileTooLarge,
            "split the file or move what is not needed out of it: Claude Code skips a memory file over 4 MiB whole, so the agent gets none of its text",
        ),
        D::FileUnreadable => (
            Severity::Error,
            Code::FileUnreadable,
            "fix the file's permissions",
        ),
        D::FileUnparsable => (
            Severity::Error,
            Code::FileUnparsable,
            "simplify the markdown: Claude Code could not parse this file and loads nothing from it",
        ),
        D::SymlinkLoop => (
            Severity::Error,
            Code::SymlinkLoop,
            "replace the looping link",
        ),
        D::FileProtected => (
            Severity::Error,
            Code::FileProtected,
            "move the file out of the connector-downloads or scratchpad folder: Claude Code never loads memory from there",
        ),
        D::LinkUnchecked => (
            Severity::Error,
            Code::LinkUnchecked,
            "point the link at a target whose name is UTF-8, or name the file itself rather than a path through /proc/<pid>/…: Claude Code (since 2.1.333) does not load memory through such a link",
        ),
        D::CwdNotUtf8 => (
            Severity::Error,
            Code::CwdNotUtf8,
            "rename the working directory to a UTF-8 name: Claude Code does not start in it",
        ),
        D::FileOversized => (
            Severity::Warning,
            Code::Oversized,
            "shorten the file: Claude Code warns over 40,000 characters per memory file",
        ),
        D::MemoryOversized => (
            Severity::Warning,
            Code::MemoryOversized,
            "shorten the memory: Claude Code warns over 120,000 characters in all",
        ),
        D::RuleExternal => (
            Severity::Warning,
            Code::RuleExternal,
            "keep rules inside the workspace",
        ),
        D::ConfigUnreadable => (
            Severity::Warning,
            Code::ConfigUnreadable,
            "fix ~/.claude.json",
        ),
        D::BudgetExceeded => (
            Severity::Error,
            Code::BudgetExceeded,
            "this much memory cannot be what the agent should get: shrink or remove the file (an agent may have written it)",
        ),
        D::MemoryDisabled => (
            Severity::Error,
            Code::MemoryDisabled,
            "remove the setting (an agent can write this file): with it Claude Code loads no memory at all",
        ),
        D::Excluded => (
            Severity::Warning,
            Code::Excluded,
            "remove the pattern from the settings file if this file should load (an agent can write the file)",
        ),
        D::SettingsUndecided => (
            Severity::Error,
            Code::SettingsUndecided,
            "the guardrails may not reach the agent: remove the setting, or make the file one clawmd can evaluate (only claudeMdExcludes, env and $schema)",
        ),
        D::SettingsRejected => (
            Severity::Info,
            Code::SettingsRejected,
            "fix the file or remove it: Claude Code ignores all of it",
        ),
        D::Withheld => (
            Severity::Warning,
            Code::Withheld,
            "remove the setting from the settings file if this file should load (an agent can write the file)",
        ),
        D::SystemPromptReplaced => (
            Severity::Error,
            Code::SystemPromptReplaced,
            "remove the `agent` setting (an agent can write the file), or use the managed delivery, whose managed settings pin `agent`",
        ),
        D::AgentsMdFallback => (
            Severity::Error,
            Code::PlantedInstructions,
            "the composed CLAUDE.md does not load (see the other findings) and the agent's own AGENTS.md loads in its place: remove what drops CLAUDE.md, and the planted file",
        ),
        D::ImportExternal
        | D::ImportRepeated
        | D::ImportInCode
        | D::ImportInComment
        | D::FileEmpty
        | D::ConditionalRule => return None,
    })
}

/// Links in the group that dangle even inside the container.
fn dangling_links(layout: &Layout, fs: &MountedFs, findings: &mut Vec<Finding>) {
    let workspace = &layout.workspace_mount;
    let mut candidates = vec![workspace.join(names::SHARED)];
    let fragments = workspace.join(names::FRAGMENTS);
    if let Ok(entries) = fs.read_dir(&fragments) {
        candidates.extend(entries.into_iter().map(|entry| fragments.join(entry.name)));
    }
    for link in candidates {
        let Ok(target) = fs.read_link(&link) else {
            continue;
        };
        if fs.metadata(&link).is_err() {
            findings.push(Finding {
                severity: Severity::Error,
                code: Code::DanglingLink,
                file: fs.host_path(&link).unwrap_or_else(|| link.clone()),
                message: format!(
                    "{} points to {}, which does not exist even inside the container",
                    link.display(),
                    target.display()
                ),
                fix: "add the missing file under container/, or recompose the group".to_owned(),
            });
        }
    }
}

/// Runs `check` (one group's check), turning a panic — a bug in clawmd, met in this group —
/// into an `internal-error` finding for the group, so that the other groups are still checked
/// and reported.
fn guarded(
    layout: &Layout,
    group: &str,
    options: &CheckOptions,
    check: impl FnOnce() -> GroupCheck,
) -> GroupCheck {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(check)).unwrap_or_else(|payload| {
        let why = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_owned());
        tracing::error!(group, %why, "check panicked");
        GroupCheck {
            group: group.to_owned(),
            delivery: options.settings.delivery,
            findings: vec![Finding {
                severity: Severity::Error,
                code: Code::InternalError,
                file: layout.group_dir(group),
                message: format!("clawmd failed while checking this group (a bug): {why}"),
                fix: "report it with the group folder's contents; the other groups were checked"
                    .to_owned(),
            }],
        }
    })
}

fn group_error_finding(layout: &Layout, group: &str, err: &GroupError) -> Finding {
    let (message, fix) = message_and_fix(group, err);
    Finding {
        severity: Severity::Error,
        code: Code::from(err),
        file: err.file().unwrap_or_else(|| layout.group_dir(group)),
        message,
        fix,
    }
}

/// A group's error as a finding's message and fix: the error's own fix ([`GroupError::fix`]),
/// then the compose that clears the finding; for a lock another run held past the wait, the
/// check to run again.
fn message_and_fix(group: &str, err: &GroupError) -> (String, String) {
    let (message, fix) = crate::error::chain_problem_and_fix(err);
    if Code::from(err) == Code::LockTimeout {
        let fix = format!(
            "another clawmd run held the group's lock for the whole wait: run `clawmd check {group}` again once it is done, or give it longer with --lock-timeout SECS"
        );
        return (message, fix);
    }
    let compose = format!("run `clawmd compose {group}`");
    let fix = match fix {
        Some(fix) => format!("{fix}; then {compose}"),
        None => format!("correct what the message names, then {compose}"),
    };
    (message, fix)
}

fn composition_findings(
    layout: &Layout,
    sources: &Sources,
    group: &str,
    options: &CheckOptions,
    findings: &mut Vec<Finding>,
    progress: &dyn Progress,
) -> Result<(GroupPlan, Arc<ReadLog>), GroupError> {
    let group_path = checked_group_dir(layout, group)?;
    let Observation {
        dir,
        config,
        delivery,
        plan,
        steps,
        leftovers,
        reads,
        ..
    } = observe_settled(
        layout,
        sources,
        group,
        &group_path,
        &options.settings,
        LockWait::up_to(options.lock_timeout, &|lock| {
            progress.waiting_for_lock(group, lock)
        }),
    )?;
    let group_path = dir.path().to_owned();
    let compose_fix = compose_fix(group, options);
    let own_text = layout.recipe.own_text_file();
    let mut pending = Vec::new();
    for step in &steps {
        match step {
            Step::Keep { .. } => {}
            Step::Rescue { from, to, .. } => findings.push(Finding {
                severity: Severity::Error,
                code: Code::HandEdited,
                file: from.host_path(layout, group),
                message: format!(
                    "{from} is not what clawmd composed: it was edited by hand (or is legacy text), and the next compose will keep the edit in {} (outside the group) and replace it",
                    to.display()
                ),
                fix: format!("move the text you need into {own_text}, then {compose_fix}"),
            }),
            Step::Remove { path, .. } if is_disabled_skill(layout, sources, &config.skills, &path.name) => {
                findings.push(Finding {
                    severity: Severity::Error,
                    code: Code::DisabledSkillFragment,
                    file: path.host_path(layout, group),
                    message: format!(
                        "a fragment of skill {:?}, which container.json does not enable, is still imported",
                        path.name.trim_end_matches(".md")
                    ),
                    fix: compose_fix.clone(),
                })
            }
            Step::Shadowed { path } => findings.push(Finding {
                severity: Severity::Warning,
                code: Code::MountPointEdited,
                file: group_path.join(&path.name),
                message: format!(
                    "{} holds text that never reaches the agent: it is the mount point the runner binds the composed {} over (clawmd mounts {group}), and compose leaves it as it is",
                    path.name, path.name
                ),
                fix: format!(
                    "move the text you need into {own_text}, then delete {} while the group's container is stopped (compose writes the placeholder again)",
                    group_path.join(&path.name).display()
                ),
            }),
            Step::LeftAlone { path, found } => findings.push(Finding {
                severity: Severity::Warning,
                code: Code::LocalMemoryUnusable,
                file: group_path.join(&path.name),
                message: format!(
                    "{} is {}, not a regular file: the group's own memory is not read from it; compose leaves it as it is and composes the guardrails all the same",
                    path.name,
                    found.describe()
                ),
                fix: format!(
                    "replace {} with a regular file holding the group's memory, or delete it while the group's container is stopped (compose seeds an empty one)",
                    group_path.join(&path.name).display()
                ),
            }),
            Step::Foreign { path, found } => findings.push(Finding {
                severity: Severity::Warning,
                code: Code::ForeignFragment,
                file: group_path.join(names::FRAGMENTS).join(&path.name),
                message: format!(
                    ".claude-fragments/{} ({}) was not written by clawmd, or not as it is now, and nothing imports it: compose leaves it as it is and never removes it",
                    path.name,
                    found.describe()
                ),
                fix: format!(
                    "move {} out of .claude-fragments, or delete it if nobody needs it",
                    group_path.join(names::FRAGMENTS).join(&path.name).display()
                ),
            }),
            Step::Remove { path, .. } | Step::Write { path, .. } => pending.push(path.to_string()),
        }
    }
    old_layout(layout, group, &steps, &compose_fix, findings);
    config_findings(&group_path, &plan.warnings, findings);
    if !pending.is_empty() {
        findings.push(Finding {
            severity: Severity::Error,
            code: Code::OutOfDate,
            file: group_path.clone(),
            message: format!(
                "the composition differs from what container.json asks for ({} as {} with {delivery} delivery): {}",
                names::CONFIG,
                plan.target.file,
                pending.join(", ")
            ),
            fix: compose_fix.clone(),
        });
    }
    for leftover in &leftovers {
        findings.push(Finding {
            severity: Severity::Warning,
            code: Code::StaleTemp,
            file: leftover.path(),
            message:
                "a temp file an interrupted clawmd run made and left (recorded in its journal)"
                    .to_owned(),
            fix: compose_fix.clone(),
        });
    }
    rescued_files(layout, group, findings)?;
    legacy_rescues(&dir, layout, group, findings)?;
    instruction_imports(&dir, &config.mcp_instructions, findings);
    Ok((plan, reads))
}

/// A group still laid out the way clawmd composed groups before bind folders: the composed
/// entry point in the group folder (where a compose while the container runs detaches the
/// runner's read-only bind of it), or the shared base as `.claude-shared.md` in the
/// read-write group folder. Compose converts it; a container started with the old binds needs
/// a restart with those of `clawmd mounts`.
fn old_layout(
    layout: &Layout,
    group: &str,
    steps: &[Step],
    compose_fix: &str,
    findings: &mut Vec<Finding>,
) {
    let old: Vec<String> = steps
        .iter()
        .filter_map(|step| match step {
            Step::Write {
                path,
                content: Content::Placeholder(_),
                before: Some(_),
            } => Some(path.name.clone()),
            Step::Remove { path, .. } if path.is_top(names::SHARED) => Some(path.name.clone()),
            _ => None,
        })
        .collect();
    if old.is_empty() {
        return;
    }
    findings.push(Finding {
        severity: Severity::Error,
        code: Code::OldLayout,
        file: layout.group_dir(group),
        message: format!(
            "still laid out as before bind folders ({} composed in the group folder): a compose while the container runs detaches the runner's read-only bind of it, and the agent can then change what clawmd composed",
            old.join(", ")
        ),
        fix: format!(
            "{compose_fix}, then restart the group's container with the binds `clawmd mounts {group}` prints"
        ),
    });
}

/// What compose warns of in the group's config and sources, as findings: keys that are near
/// misses of clawmd's, skills that do not exist (with the nearest that does), enabled skills
/// whose instructions are a link to nothing, values clawmd ignores (a provider it does not
/// compose for), and a shared base that is missing (an error: no group gets it).
fn config_findings(group_path: &Path, warnings: &[Warning], findings: &mut Vec<Finding>) {
    for warning in warnings {
        if let Warning::MissingSharedBase { path } = warning {
            findings.push(Finding {
                severity: Severity::Error,
                code: WarningReport::from(warning).code,
                file: path.clone(),
                message: format!(
                    "{} does not exist: the group is composed without the shared base every group gets",
                    path.display()
                ),
                fix: format!(
                    "restore {} (or check `containerDir` in clawmd.json and --container-dir); for a deployment with no shared base, make it an empty file",
                    path.display()
                ),
            });
            continue;
        }
        let fix = match warning {
            Warning::IgnoredConfig { field, .. } => {
                format!("correct or remove `{field}` in container.json")
            }
            Warning::ConfigNotHanded { .. } => {
                "spawn the group (its runner hands the config), or compose it with `--config FILE`"
                    .to_owned()
            }
            Warning::UnknownKey { key } => {
                format!(
                    "rename `{}` to `{}` in container.json",
                    key.key,
                    key.meant()
                )
            }
            Warning::UnknownSkill {
                skill,
                suggestion: Some(meant),
            } => format!("change {skill:?} to {meant:?} in `skills` in container.json"),
            Warning::UnknownSkill { skill, .. } => format!(
                "add container/skills/{skill}/, or remove {skill:?} from `skills` in container.json"
            ),
            Warning::DanglingInstructions { path, .. } => format!(
                "point {} at a file that exists, replace it with the file, or disable the skill in container.json",
                path.display()
            ),
            Warning::MoreUnknownSkills { .. } => {
                "remove the skills that do not exist from `skills` in container.json".to_owned()
            }
            _ => continue,
        };
        let file = match warning {
            Warning::DanglingInstructions { path, .. } => path.clone(),
            _ => group_path.join(names::CONFIG),
        };
        findings.push(Finding {
            severity: Severity::Warning,
            code: WarningReport::from(warning).code,
            file,
            message: warning.to_string(),
            fix,
        });
    }
}

fn is_disabled_skill(
    layout: &Layout,
    sources: &Sources,
    selection: &crate::input::config::SkillSelection,
    fragment: &str,
) -> bool {
    let Some(skills) = sources.builtin_skills(layout) else {
        return false;
    };
    fragment
        .strip_suffix(".md")
        .is_some_and(|skill| skills.contains_key(skill) && !selection.enables(skill))
}

/// The hand edits compose kept in the group's rescue folder (outside the group, where no
/// agent can plant one), each waiting for a person.
fn rescued_files(
    layout: &Layout,
    group: &str,
    findings: &mut Vec<Finding>,
) -> Result<(), GroupError> {
    let Some(dir) = state::rescue_dir(layout, group)? else {
        return Ok(());
    };
    for (name, _) in kept_rescues(&dir)? {
        findings.push(Finding {
            severity: Severity::Warning,
            code: Code::RescuedText,
            file: dir.path().join(&name),
            message: match is_fragment_rescue_name(&name) {
                true => "text found in .claude-fragments that clawmd did not write (a hand-edited fragment, or someone's file under a fragment's name), kept aside by compose outside the group before the fragment replaced it; the agent does not see it",
                false => "text from a hand-edited entry point, kept aside by compose outside the group; the agent does not see it",
            }
            .to_owned(),
            fix: format!(
                "move what is still needed into {}, then delete this file",
                layout.recipe.own_text_file()
            ),
        });
    }
    Ok(())
}

/// Files named like rescues inside the group folder, where clawmd kept them before it kept
/// them outside the group: the agent can write any name there, so clawmd cannot tell a rescue
/// from a planted file. Said once per group; never counted, never trusted, never deleted.
fn legacy_rescues(
    dir: &SafeDir,
    layout: &Layout,
    group: &str,
    findings: &mut Vec<Finding>,
) -> Result<(), GroupError> {
    // Only the names that start like a rescue's are asked for (the log keeps those alone).
    let starts = rescue_name_starts();
    let starts: Vec<&str> = starts.iter().map(String::as_str).collect();
    let names = dir.names_starting_with(&starts)?;
    if names.is_empty() {
        return Ok(());
    }
    findings.push(Finding {
        severity: Severity::Warning,
        code: Code::LegacyRescues,
        file: dir.path().to_owned(),
        message: format!(
            "{} file(s) in the group folder are named like rescued hand edits ({}): clawmd now keeps rescues in {}, outside the group, and cannot tell these from files the agent wrote, so it neither counts nor lists them as rescues, and never deletes them",
            names.len(),
            names
                .iter()
                .take(3)
                .map(|name| crate::report::escape(name).into_owned())
                .collect::<Vec<_>>()
                .join(", ")
                + if names.len() > 3 { ", …" } else { "" },
            layout.rescue_dir(group).display()
        ),
        fix: format!(
            "read them as text the agent may have written: merge into {} only what a person recognises, then delete them yourself",
            layout.recipe.own_text_file()
        ),
    });
    Ok(())
}

fn instruction_imports(
    dir: &SafeDir,
    instructions: &std::collections::BTreeMap<String, String>,
    findings: &mut Vec<Finding>,
) {
    for (server, text) in instructions {
        let imports = match crate::loader::content::scan_markdown(text) {
            Ok(scan) => scan.imports,
            Err(_) => continue,
        };
        if imports.is_empty() {
            continue;
        }
        findings.push(Finding {
            severity: Severity::Warning,
            code: Code::ImportInInstructions,
            file: dir.path().join(names::CONFIG),
            message: format!(
                "mcpServers.{server}.instructions contains {}; Claude Code would load such a line as a file import, so clawmd writes the text inside a code block where it stays literal text",
                imports
                    .iter()
                    .map(|import| format!("@{import}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            fix: "nothing to do if the text is meant literally; to give the agent a file's content, put it in CLAUDE.local.md or a skill".to_owned(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_in_one_group_becomes_that_groups_internal_error() {
        let layout = Layout::under_root(std::path::Path::new("/srv"));
        let options = CheckOptions::default();
        let checked = guarded(&layout, "main", &options, || panic!("index out of bounds"));
        assert_eq!(checked.group, "main");
        assert_eq!(checked.findings.len(), 1);
        let finding = &checked.findings[0];
        assert_eq!(finding.code, Code::InternalError);
        assert_eq!(finding.severity, Severity::Error);
        assert_eq!(finding.file, std::path::Path::new("/srv/groups/main"));
        assert!(
            finding.message.contains("index out of bounds"),
            "{finding:?}"
        );

        let fine = GroupCheck {
            group: "main".to_owned(),
            delivery: options.settings.delivery,
            findings: Vec::new(),
        };
        assert_eq!(guarded(&layout, "main", &options, || fine.clone()), fine);
    }
}
