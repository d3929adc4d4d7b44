//! Does what clawmd composed reach the agent? And a digest of what it receives.
//!
//! For a Claude Code group the answer comes from the [`loader`](crate::loader), run inside
//! the container's view of the group as compose leaves it (a [`Snapshot`] built from the
//! plan, the group's `CLAUDE.local.md` and the shared sources as the runner mounts them; cwd
//! `/workspace/agent`; external imports approved only when the deployment says its runtime
//! approves them). Every delivered section's text must be in a file Claude Code loads, and a
//! non-empty `CLAUDE.local.md` must load. A flat document (Codex, opencode, Gemini) is read by
//! its backend as it is, so every section and the local memory must lie within its budget.
//! Sections dropped over budget make a group incomplete too.

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::snapshot::Snapshot;
use super::{DeliverySettings, Section, SectionId, source_key};
use crate::layout::{Layout, names};
use crate::loader::content::scan_markdown;
use crate::loader::{DiagnosticCode, Memory, claude_block, load};
use crate::plan::{Content, GroupPlan, Sources};
use crate::view::{ViewOptions, load_options};

/// What reaches a group's agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Delivered {
    /// True when everything the group's config asks for (and its local memory) reaches the
    /// agent: nothing dropped over budget, nothing dropped by the backend.
    pub complete: bool,
    /// What does not reach it: `shared-base`, `skill:<name>`, `mcp:<server>`, `local-memory`
    /// (sections dropped over budget included).
    pub missing: Vec<String>,
    /// Why, when known (the loader's diagnostics, the budget).
    pub reasons: Vec<String>,
    /// `sha256:<hex>` of the memory the agent receives (Claude Code: the memory block as it
    /// sends it; flat backends: the document).
    pub memory_digest: String,
}

/// Works out what reaches the agent of a group composed as `plan`. Pure: reads nothing.
pub fn verify(
    layout: &Layout,
    plan: &GroupPlan,
    sources: &Sources,
    settings: &DeliverySettings,
) -> Delivered {
    let mut delivered = match plan.target.provider.is_flat() {
        true => verify_flat(plan),
        false => {
            let fs = snapshot(layout, plan, sources);
            let mut options = load_options(
                &layout.workspace_mount,
                None,
                &ViewOptions {
                    approve_external: settings.approve_external,
                    claude_version: settings.claude_version,
                    ..ViewOptions::default()
                },
            );
            options.managed_dir = None;
            match load(&fs, &options) {
                Ok(memory) => {
                    let mut delivered = from_memory(layout, plan, &memory);
                    delivered.memory_digest = link_digest(plan, &fs, &memory);
                    delivered
                }
                Err(err) => Delivered {
                    complete: false,
                    missing: vec!["everything".to_owned()],
                    reasons: vec![err.to_string()],
                    memory_digest: digest(b""),
                },
            }
        }
    };
    for dropped in &plan.dropped {
        delivered.missing.push(dropped.section.clone());
        delivered.reasons.push(format!(
            "{} was dropped: {} is over its budget of {} bytes",
            dropped.section, plan.target.file, plan.target.budget
        ));
    }
    delivered.complete = delivered.missing.is_empty();
    delivered
}

/// The container's view of the group after compose: the planned files and links in the
/// workspace, and the shared sources where the runner mounts them.
pub fn snapshot(layout: &Layout, plan: &GroupPlan, sources: &Sources) -> Snapshot {
    let mut fs = Snapshot::new();
    let workspace = &layout.workspace_mount;
    fs.dir(workspace);
    fs.dir(&workspace.join(names::FRAGMENTS));
    for entry in &plan.entries {
        let path = workspace.join(entry.path.to_string());
        match &entry.content {
            Content::File(bytes) => fs.file(&path, bytes.clone()),
            Content::Symlink(target) => fs.link(&path, target),
            Content::Seed => fs.file(&path, plan.local_memory.clone().unwrap_or_default()),
        }
    }
    // DESIGN §1: `<app>/CLAUDE.md` and `<app>/skills` are mounted, as they are on the host.
    if let Some(base) = &sources.shared_base {
        let key = source_key(&SectionId::SharedBase).unwrap_or_default();
        fs.file(
            &layout.shared_base_target(),
            sources.original(&key, base).to_vec(),
        );
    }
    for (skill, instructions) in &sources.skills {
        if let Some(text) = instructions {
            let key = source_key(&SectionId::Skill(skill.clone())).unwrap_or_default();
            fs.file(
                &layout.skill_instructions_target(skill),
                sources.original(&key, text).to_vec(),
            );
        }
    }
    fs
}

/// The digest of the memory block, and in link delivery of what is behind every link clawmd
/// composed too (approved or not): an upstream edit of a linked source always changes it.
fn link_digest(plan: &GroupPlan, fs: &Snapshot, memory: &Memory) -> String {
    use crate::loader::fs::{MemoryFs, ReadOutcome};
    let mut bytes = claude_block(memory).unwrap_or_default().into_bytes();
    for entry in &plan.entries {
        if let Content::Symlink(target) = &entry.content {
            bytes.extend_from_slice(b"\0");
            bytes.extend_from_slice(target.as_os_str().as_encoded_bytes());
            bytes.extend_from_slice(b"\0");
            if let Ok(ReadOutcome::Bytes(content)) =
                fs.read_limited(target, crate::loader::MAX_FILE_BYTES)
            {
                bytes.extend_from_slice(&content);
            }
        }
    }
    digest(&bytes)
}

/// The verdict for a Claude Code group whose memory the loader produced.
pub fn from_memory(layout: &Layout, plan: &GroupPlan, memory: &Memory) -> Delivered {
    let mut missing = Vec::new();
    for section in &plan.sections {
        let expected = expected_text(section);
        if !expected.is_empty() && !memory.files.iter().any(|f| f.body.contains(&expected)) {
            missing.push(section.id.name());
        }
    }
    // An import inside a shared source that does not load (link delivery: the owner's file is
    // not mounted, or not approved) means that source is not delivered whole.
    for diagnostic in &memory.diagnostics {
        let Some(from) = &diagnostic.from else {
            continue;
        };
        // The importer as shown may be a link (`.claude-shared.md`): look at where it is.
        let from = memory
            .files
            .iter()
            .find(|f| &f.path == from)
            .map_or(from, |f| &f.real_path);
        let dropped = matches!(
            diagnostic.code,
            DiagnosticCode::ImportExternal
                | DiagnosticCode::ImportMissing
                | DiagnosticCode::ImportTooDeep
        );
        let section = if *from == layout.shared_base_target() {
            Some(SectionId::SharedBase.name())
        } else {
            from.strip_prefix(layout.app_mount.join("skills"))
                .ok()
                .and_then(|rest| rest.components().next())
                .map(|skill| format!("skill:{}", skill.as_os_str().to_string_lossy()))
        };
        if let (true, Some(section)) = (dropped, section)
            && !missing.contains(&section)
        {
            missing.push(section);
        }
    }
    // An empty CLAUDE.local.md has nothing to deliver (Claude Code skips empty files).
    let local = layout.workspace_mount.join(names::CLAUDE_LOCAL_MD);
    let local_empty = memory
        .diagnostics
        .iter()
        .any(|d| d.code == DiagnosticCode::FileEmpty && d.path == local);
    if !local_empty && !memory.files.iter().any(|f| f.path == local) {
        missing.push("local-memory".to_owned());
    }
    let mut reasons: Vec<String> = if missing.is_empty() {
        Vec::new()
    } else {
        memory
            .diagnostics
            .iter()
            .filter(|d| {
                matches!(
                    d.code,
                    DiagnosticCode::ImportExternal
                        | DiagnosticCode::ImportMissing
                        | DiagnosticCode::ImportTooDeep
                        | DiagnosticCode::FileTooLarge
                        | DiagnosticCode::FileUnreadable
                        | DiagnosticCode::FileUnparsable
                )
            })
            .map(|d| d.message.clone())
            .collect()
    };
    if reasons.is_empty() {
        for section in plan
            .sections
            .iter()
            .filter(|s| missing.contains(&s.id.name()))
        {
            reasons.push(format!(
                "the text of {} ({}) is not in what Claude Code loads as written: something it leaves open (an HTML comment, a code fence) changes what follows it (fix: close it in the source)",
                section.id.name(),
                section.id.origin()
            ));
        }
    }
    Delivered {
        complete: missing.is_empty(),
        missing,
        reasons,
        memory_digest: digest(claude_block(memory).unwrap_or_default().as_bytes()),
    }
}

/// A flat document is read as it is, up to its budget (Codex truncates after
/// `project_doc_max_bytes`): what lies beyond does not reach the agent.
fn verify_flat(plan: &GroupPlan) -> Delivered {
    let document = plan
        .entries
        .iter()
        .find(|d| !d.path.in_fragments && d.path.name == plan.target.file)
        .and_then(|d| match &d.content {
            Content::File(bytes) => Some(bytes.as_slice()),
            _ => None,
        })
        .unwrap_or_default();
    let budget = usize::try_from(plan.target.budget).unwrap_or(usize::MAX);
    let seen = String::from_utf8_lossy(&document[..document.len().min(budget)]).into_owned();
    let mut missing = Vec::new();
    for section in &plan.sections {
        let expected = String::from_utf8_lossy(&section.text);
        if !seen.contains(expected.trim_end_matches('\n')) {
            missing.push(section.id.name());
        }
    }
    if let Some(local) = &plan.local_memory {
        let local = String::from_utf8_lossy(local);
        if !seen.contains(local.trim_end_matches('\n')) {
            missing.push("local-memory".to_owned());
        }
    }
    Delivered {
        complete: missing.is_empty(),
        reasons: match missing.is_empty() {
            true => Vec::new(),
            false => vec![format!(
                "{} is {} bytes, over its budget of {} bytes: {} reads no further",
                plan.target.file,
                document.len(),
                plan.target.budget,
                plan.target.provider
            )],
        },
        missing,
        memory_digest: digest(document),
    }
}

/// The text of a section as Claude Code shows it once loaded (comments stripped, trimmed).
fn expected_text(section: &Section) -> String {
    let text = String::from_utf8_lossy(&section.text);
    let body = match scan_markdown(&text) {
        Ok(scan) => scan.body,
        Err(_) => text.into_owned(),
    };
    body.trim().to_owned()
}

/// `sha256:<64 hex digits>`.
pub fn digest(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::GroupConfig;
    use crate::delivery::{Delivery, GroupInputs, Provider, plan_delivery};
    use std::collections::BTreeMap;
    use std::path::Path;

    fn sources(base: &str) -> Sources {
        Sources {
            shared_base: Some(base.as_bytes().to_vec()),
            skills: BTreeMap::from([("web".to_owned(), Some(b"WEB GUIDE\n".to_vec()))]),
            originals: BTreeMap::new(),
        }
    }

    fn verdict(base: &str, settings: DeliverySettings, provider: Option<Provider>) -> Delivered {
        let layout = Layout::under_root(Path::new("/host"));
        let config = GroupConfig {
            provider,
            ..GroupConfig::default()
        };
        let sources = sources(base);
        let inputs = GroupInputs {
            local_memory: Some(b"LOCAL NOTES\n"),
        };
        let plan = plan_delivery(&layout, &config, &sources, inputs, &settings).unwrap();
        verify(&layout, &plan, &sources, &settings)
    }

    #[test]
    fn inline_and_copy_reach_the_agent_link_only_when_approved() {
        for delivery in [Delivery::Inline, Delivery::Copy] {
            let got = verdict("BASE\n", DeliverySettings::with_delivery(delivery), None);
            assert!(got.complete, "{delivery}: {got:?}");
        }
        let link = verdict(
            "BASE\n",
            DeliverySettings::with_delivery(Delivery::Link),
            None,
        );
        assert!(!link.complete);
        assert_eq!(link.missing, ["shared-base", "skill:web"]);
        assert!(link.reasons[0].contains("external imports are not approved"));
        let approved = DeliverySettings {
            approve_external: true,
            ..DeliverySettings::with_delivery(Delivery::Link)
        };
        assert!(verdict("BASE\n", approved, None).complete);
    }

    #[test]
    fn a_source_whose_text_the_document_changes_is_caught() {
        // An unclosed HTML comment in the shared base is closed by the next section's comment
        // line inside the document, so Claude Code strips text the base shows when read
        // alone: the verdict says so instead of trusting the bytes written.
        let got = verdict(
            "BASE\n<!-- never closed\nHIDDEN\n",
            DeliverySettings::default(),
            None,
        );
        assert!(!got.complete);
        assert_eq!(got.missing, ["shared-base"], "{got:?}");
        assert!(got.reasons[0].contains("fix: close it"), "{got:?}");
        // The same base delivered as a copy (a file of its own) is whole.
        let copy = verdict(
            "BASE\n<!-- never closed\nHIDDEN\n",
            DeliverySettings::with_delivery(Delivery::Copy),
            None,
        );
        assert!(copy.complete, "{copy:?}");
    }

    #[test]
    fn a_flat_document_is_judged_within_its_budget() {
        let codex = verdict("BASE\n", DeliverySettings::default(), Some(Provider::Codex));
        assert!(codex.complete, "{codex:?}");
        let tiny = DeliverySettings {
            budgets: crate::delivery::Budgets {
                codex: 10,
                ..Default::default()
            },
            ..DeliverySettings::default()
        };
        let over = verdict("BASE\n", tiny, Some(Provider::Codex));
        assert!(!over.complete);
        assert!(
            over.missing.contains(&"local-memory".to_owned()),
            "{over:?}"
        );
        assert!(
            over.missing.contains(&"skill:web".to_owned()),
            "dropped: {over:?}"
        );
    }

    #[test]
    fn the_digest_is_stable_and_follows_the_content() {
        let a = verdict("BASE\n", DeliverySettings::default(), None);
        let b = verdict("BASE\n", DeliverySettings::default(), None);
        let c = verdict("BASE v2\n", DeliverySettings::default(), None);
        assert_eq!(a.memory_digest, b.memory_digest);
        assert_ne!(a.memory_digest, c.memory_digest);
        // Link, not approved: the base is not received, but what is behind the link counts.
        let link = DeliverySettings::with_delivery(Delivery::Link);
        let a = verdict("BASE\n", link, None);
        let c = verdict("BASE v2\n", link, None);
        assert_ne!(a.memory_digest, c.memory_digest);
    }
}
