//! `check`: find what would make an agent's memory wrong, incomplete or unsafe, without
//! changing anything.
//!
//! Two kinds of findings: the composition on disk against what `container.json` asks for
//! (out of date, hand-edited, stale fragments, leftovers), and what the agent will really load
//! inside its container (computed by the [`loader`](crate::loader) through the mount table:
//! dropped, dangling or oversized imports). Each finding names the file and a one-line fix.

use std::path::Path;

use crate::deployment::{Observation, Selection, checked_group_dir, observe, read_sources};
use crate::error::{Error, GroupError};
use crate::fsops::{SafeDir, is_temp_name};
use crate::layout::{Layout, names};
use crate::loader::fs::MemoryFs;
use crate::loader::{ClaudeVersion, Diagnostic, DiagnosticCode, Memory, MountedFs};
use crate::plan::{Delivery, Sources};
use crate::reconcile::Step;
use crate::report::{CheckReport, Code, Finding, GroupCheck, REPORT_VERSION, Severity};
use crate::view::{ViewOptions, load_group};

/// How to check.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckOptions {
    /// Check against this delivery mode; `None` detects it from `.claude-shared.md`.
    pub delivery: Option<Delivery>,
    /// Assume the agent's user approved external imports for the workspace.
    pub approve_external: bool,
    /// The Claude Code release the agents run (default: the newest the conformance corpus
    /// covers); a release outside the corpus is checked with the nearest known rules and
    /// reported as `claude-version-unverified`.
    pub claude_version: ClaudeVersion,
}

/// Checks the selected groups. Fails as a whole only when the deployment cannot be read.
pub fn check(
    layout: &Layout,
    selection: &Selection,
    options: &CheckOptions,
) -> Result<CheckReport, Error> {
    let groups = selection.groups(layout)?;
    let (sources, _) = read_sources(layout).map_err(Error::Sources)?;
    let groups: Vec<GroupCheck> = groups
        .iter()
        .map(|group| check_group(layout, &sources, group, options))
        .collect();
    let ok = groups
        .iter()
        .flat_map(|g| &g.findings)
        .all(|f| f.severity != Severity::Error);
    Ok(CheckReport {
        version: REPORT_VERSION,
        command: "check",
        ok,
        groups,
    })
}

/// Checks one group.
pub fn check_group(
    layout: &Layout,
    sources: &Sources,
    group: &str,
    options: &CheckOptions,
) -> GroupCheck {
    let mut findings = Vec::new();
    let delivery = match composition_findings(layout, sources, group, options, &mut findings) {
        Ok(delivery) => delivery,
        Err(err) => {
            findings.push(group_error_finding(layout, group, &err));
            options.delivery.unwrap_or_default()
        }
    };
    if !findings.iter().any(|f| is_group_error(f.code)) {
        let view = ViewOptions {
            approve_external: options.approve_external,
            claude_version: options.claude_version,
            ..ViewOptions::default()
        };
        match load_group(layout, group, &view) {
            Ok((memory, fs)) => {
                memory_findings(layout, group, delivery, &memory, &fs, &mut findings)
            }
            Err(err) => findings.push(group_error_finding(layout, group, &err)),
        }
    }
    let version = options.claude_version;
    if !version.is_verified() {
        findings.push(Finding {
            severity: Severity::Warning,
            code: Code::ClaudeVersionUnverified,
            file: layout.group_dir(group),
            message: format!(
                "Claude Code {version} is not in the conformance corpus: its memory is modelled with the rules known for {} and may differ",
                version.nearest_verified()
            ),
            fix: format!(
                "record the corpus on {version} (scripts/new-conformance-case --version {version}) or pin a recorded release"
            ),
        });
    }
    findings.sort_by_key(|f| f.severity);
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

/// What the agent will really get, from the loader's view inside the container.
fn memory_findings(
    layout: &Layout,
    group: &str,
    delivery: Delivery,
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
        let fix = match delivery {
            Delivery::Link => format!(
                "run `clawmd compose {group} --delivery copy` (regular files inside the workspace load without approval), or approve external imports for {} in the agent's ~/.claude.json",
                layout.workspace_mount.display()
            ),
            Delivery::Copy => "point these imports at files inside the workspace".to_owned(),
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
        findings.push(Finding {
            severity,
            code,
            file: host(diagnostic.from.as_deref().unwrap_or(&diagnostic.path)),
            message: diagnostic.message.clone(),
            fix: fix.to_owned(),
        });
    }
    dangling_links(layout, fs, findings);
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
            "split the file: Claude Code skips memory files over 4 MiB",
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
        D::ImportExternal
        | D::ImportRepeated
        | D::ImportInCode
        | D::ImportInComment
        | D::FileEmpty
        | D::ConditionalRule
        | D::AgentsMdFallback => return None,
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

fn group_error_finding(layout: &Layout, group: &str, err: &GroupError) -> Finding {
    Finding {
        severity: Severity::Error,
        code: err.code(),
        file: err.file().unwrap_or_else(|| layout.group_dir(group)),
        message: err.to_string(),
        fix: "fix the problem above, then run `clawmd compose` for the group".to_owned(),
    }
}

fn composition_findings(
    layout: &Layout,
    sources: &Sources,
    group: &str,
    options: &CheckOptions,
    findings: &mut Vec<Finding>,
) -> Result<Delivery, GroupError> {
    let group_path = checked_group_dir(layout, group)?;
    let Observation {
        dir,
        config,
        delivery,
        steps,
        ..
    } = observe(layout, sources, &group_path, options.delivery, false)?;
    let group_path = dir.path().to_owned();
    let compose_fix = format!("run `clawmd compose {group} --delivery {delivery}`");
    let mut pending = Vec::new();
    for step in &steps {
        match step {
            Step::Keep { .. } => {}
            Step::Rescue { .. } => findings.push(Finding {
                severity: Severity::Error,
                code: Code::HandEdited,
                file: group_path.join(names::CLAUDE_MD),
                message: "CLAUDE.md is not what clawmd composed: it was edited by hand (or is legacy text), and the next compose will move the edit aside".to_owned(),
                fix: format!("move the text you need into CLAUDE.local.md, then {compose_fix}"),
            }),
            Step::Clean { path } => findings.push(Finding {
                severity: Severity::Warning,
                code: Code::StaleTemp,
                file: group_path.join(path.to_string()),
                message: "a temp file left by an interrupted clawmd run".to_owned(),
                fix: compose_fix.clone(),
            }),
            Step::Remove { path, .. } if is_disabled_skill(sources, &config.skills, &path.name) => {
                findings.push(Finding {
                    severity: Severity::Error,
                    code: Code::DisabledSkillFragment,
                    file: group_path.join(path.to_string()),
                    message: format!(
                        "a fragment of skill {:?}, which container.json does not enable, is still imported",
                        path.name.trim_end_matches(".md")
                    ),
                    fix: compose_fix.clone(),
                })
            }
            Step::Remove { path, .. } | Step::Write { path, .. } => pending.push(path.to_string()),
        }
    }
    if !pending.is_empty() {
        findings.push(Finding {
            severity: Severity::Error,
            code: Code::OutOfDate,
            file: group_path.clone(),
            message: format!(
                "the composition differs from what container.json asks for ({} with {delivery} delivery): {}",
                names::CONFIG,
                pending.join(", ")
            ),
            fix: compose_fix.clone(),
        });
    }
    rescued_files(&dir, findings)?;
    instruction_imports(&dir, &config.mcp_instructions, findings);
    Ok(delivery)
}

fn is_disabled_skill(
    sources: &Sources,
    selection: &crate::config::SkillSelection,
    fragment: &str,
) -> bool {
    fragment
        .strip_suffix(".md")
        .is_some_and(|skill| sources.skills.contains_key(skill) && !selection.enables(skill))
}

fn rescued_files(dir: &SafeDir, findings: &mut Vec<Finding>) -> Result<(), GroupError> {
    for name in dir.list()? {
        let name = name.to_string_lossy();
        if name.starts_with(names::RESCUE_PREFIX) && !is_temp_name(&name) {
            findings.push(Finding {
                severity: Severity::Warning,
                code: Code::RescuedText,
                file: dir.path().join(name.as_ref()),
                message: "text from a hand-edited CLAUDE.md, kept aside by compose; the agent does not see it".to_owned(),
                fix: "move what is still needed into CLAUDE.local.md, then delete this file".to_owned(),
            });
        }
    }
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
