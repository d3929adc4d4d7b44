//! Delivery: how a group's memory reaches its agent, for every mode and every agent backend.
//!
//! Everything that depends on the delivery mode or the backend lives here, so that a new mode
//! or backend is a change to this module only:
//!
//! * [`Delivery`] — `inline` (the default: one generated `CLAUDE.md` that imports only
//!   `CLAUDE.local.md`), `copy` (regular-file copies imported by an import-only `CLAUDE.md`)
//!   and `link` (symlinks into the container's `/app`, as DESIGN §1 specifies; Claude Code
//!   drops those imports unless external imports are approved);
//! * [`Provider`] — the agent backend, from `container.json`'s `provider` key: `claude` gets
//!   `CLAUDE.md` in the chosen mode; `codex` and `opencode` get a flat `AGENTS.md`, `gemini` a
//!   flat `GEMINI.md`;
//! * [`DocumentBudgets`] — a byte budget per backend; over budget, whole optional sections are
//!   dropped, largest first (skills, then MCP instructions), and reported;
//! * [`plan_delivery`] — the pure part: the managed files of a group, from the sections the
//!   recipe's [`sources`](crate::input::sources) make;
//! * [`verify`] — whether everything composed reaches the agent (the loader on the result),
//!   and the digest of what it receives.

pub mod document;
pub mod guard;
pub mod managed;
pub mod managed_drop_ins;
pub mod verdicts;
pub mod verify;

pub use crate::input::sources::expand;
pub use crate::plan::snapshot;

use crate::input::config::GroupConfig;
use crate::input::layout::Layout;
use crate::input::names;
use crate::input::recipe::MemoryFile;
use crate::input::sources::GroupParts;
use crate::input::sources::Sources;
use crate::input::sources::alone::SectionForm;
use crate::input::sources::expand::neutralise;
use crate::plan::{
    Content, Desired, FragmentCollision, ManagedPath, Place, Warning, composed_claude_md_for,
    composed_document_for, composed_len, composed_len_of, mount_point_placeholder_for,
};

pub use crate::input::sources::{Section, SectionId};
pub use crate::plan::target::{
    AGENTS_MD, CODEX_BUDGET, DEFAULT_BUDGET, Delivery, DeliverySettings, DocumentBudgets,
    ENTRY_POINTS, GEMINI_MD, Provider, Target, is_entry_point_name,
};
pub use document::{Dropped, LocalMemory};

// `Target` is a plain value of `crate::plan::target`; reading it from a group's config stays here.
impl Target {
    /// The target of a group with this config.
    pub fn of(config: &GroupConfig, settings: &DeliverySettings) -> Self {
        let provider = config.provider.unwrap_or(settings.provider);
        Target {
            provider,
            delivery: if provider.is_flat() {
                Delivery::Inline
            } else {
                settings.delivery
            },
            file: provider.entry_point(),
            budget: settings.budgets.of(provider),
        }
    }
}

/// The desired state of one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupPlan {
    /// Every managed path with its content, in the order it is applied: the fragments and the
    /// shared base, then `CLAUDE.local.md`, then `CLAUDE.md` (which imports all of them).
    pub entries: Vec<Desired>,
    /// Things the operator should know.
    pub warnings: Vec<Warning>,
    /// What the group is composed as (backend, mode, entry point, budget).
    pub target: Target,
    /// The sections delivered, in order (what must reach the agent).
    pub sections: Vec<Section>,
    /// The sections left out over budget.
    pub dropped: Vec<Dropped>,
    /// The group's `CLAUDE.local.md` as it was read for the plan (`None`: missing, or too
    /// large to read).
    pub local_memory: Option<Vec<u8>>,
    /// The size of a `CLAUDE.local.md` larger than Claude Code reads (then `local_memory` is
    /// `None`): the agent gets none of it.
    pub local_memory_too_large: Option<u64>,
    /// A flat document's copy of the group's memory, cut to the room the operator's sections
    /// leave in the budget: the bytes kept of it, when that is not all of it.
    pub local_memory_cut: Option<u64>,
    /// A SHA-256 of what the plan was made from in the group folder (its config's bytes, the
    /// recipe's group-side sources, its local memory), when it was made from a look at the
    /// group ([`crate::disk::deployment::observe`]): with the run's binary, settings and shared
    /// sources, it names the plan ([`verdicts::Verdicts::key`]).
    pub made_from: Option<[u8; 32]>,
    /// The container-side items (skills and fragments, by section name) the plan was made
    /// from, present or not ([`crate::input::sources::items_used`]): a change to another item leaves
    /// it as it is. `None`: it may depend on all of them (link delivery mounts the whole of
    /// `container/`, which the loader may read).
    pub uses: Option<Vec<String>>,
}

impl GroupPlan {
    /// The names desired in `.claude-fragments/`.
    pub fn fragment_names(&self) -> impl Iterator<Item = &str> {
        self.entries
            .iter()
            .filter(|d| d.path.place == Place::Fragments)
            .map(|d| d.path.name.as_str())
    }
}

/// Computes the desired state of a Claude Code group from its config and the shared sources,
/// with the default settings and this delivery mode (see [`plan_delivery`]).
pub fn plan_group(
    layout: &Layout,
    config: &GroupConfig,
    sources: &Sources,
    delivery: Delivery,
) -> Result<GroupPlan, FragmentCollision> {
    plan_delivery(
        layout,
        config,
        sources,
        GroupInputs::default(),
        &DeliverySettings::with_delivery(delivery),
    )
}

/// The group's inputs besides its config: its own memory and what the recipe reads in its
/// folder.
#[derive(Debug, Clone, Copy, Default)]
pub struct GroupInputs<'a> {
    /// `CLAUDE.local.md`'s bytes (for flat documents, and the verdict).
    pub local_memory: Option<&'a [u8]>,
    /// The group side of the recipe (`None`: the recipe reads nothing in the group folder).
    pub group: Option<&'a GroupParts>,
    /// The size of a `CLAUDE.local.md` larger than Claude Code reads (`local_memory` is then
    /// `None`).
    pub local_memory_too_large: Option<u64>,
}

/// The desired state of a group: pure, from its config, the shared sources and the settings.
pub fn plan_delivery(
    layout: &Layout,
    config: &GroupConfig,
    sources: &Sources,
    inputs: GroupInputs<'_>,
    settings: &DeliverySettings,
) -> Result<GroupPlan, FragmentCollision> {
    let target = Target::of(config, settings);
    let empty = GroupParts::default();
    let (all, mut warnings) = crate::input::sources::sections(
        layout,
        config,
        sources,
        inputs.group.unwrap_or(&empty),
        target.delivery == Delivery::Link,
        target.provider,
    )?;
    let has_memory = layout.recipe.memory == MemoryFile::Local;
    let mut all = all;
    let managed = target.delivery == Delivery::Managed && !target.provider.is_flat();
    if managed && let Some(section) = managed::host_section(sources) {
        // The host's own managed policy first: the group's managed folder hides the image's.
        all.insert(0, section);
    }
    // Each source as the release loads that file alone (frontmatter, comments, line endings,
    // its imports from its own folder to the depth limit), closed so that it cannot change
    // how the next is read.
    let form = match target.delivery {
        _ if target.provider.is_flat() => SectionForm::Document,
        Delivery::Link => SectionForm::Link,
        Delivery::Copy => SectionForm::OwnFile,
        Delivery::Inline | Delivery::Managed => SectionForm::Document,
    };
    for section in &mut all {
        sources
            .prepared
            .prepare(section, settings.claude_version, form);
        with_heading(section, form);
    }
    // The recipe's notice of what was dropped (`omitted`), last in a document and measured
    // with it, as nanoclaw measures its "Omitted for size".
    let notice_for = |kept: &[Section]| -> Option<Section> {
        if form != SectionForm::Document {
            return None;
        }
        let mut notice = crate::input::sources::omitted_notice(layout, &all, kept)?;
        // Made once per text, as the sections are: `fit` measures the notice of every
        // candidate set of sections, and groups that drop the same sections share one.
        (sources.prepared).prepare(&mut notice, settings.claude_version, form);
        with_heading(&mut notice, form);
        Some(notice)
    };
    let local = match inputs.local_memory {
        _ if !has_memory => LocalMemory::None,
        Some(bytes) if target.provider.is_flat() => LocalMemory::Inline(bytes),
        _ if target.provider.is_flat() => LocalMemory::Inline(b""),
        // The managed document holds no import at all: the agent can approve the external
        // includes an import there needs, and point them at its own files.
        _ if managed => LocalMemory::None,
        _ => LocalMemory::Import,
    };
    // The budget is the operator's sections' first: a flat document is measured without the
    // group's memory (with its heading), which then gets the room they leave, so nothing the
    // agent writes can drop an operator's section (or move what the sections are). The one
    // document is built to be measured; the last one built is the one for the sections kept
    // (`fit` measures them last), so it is not built again unless a memory is to go in. A
    // body is measured with its header's length: the header (its hash) is made once, for the
    // document kept.
    let measured = match local {
        LocalMemory::Inline(_) => LocalMemory::Inline(b""),
        other => other,
    };
    let last_body = std::cell::RefCell::new(None);
    let fitted = match target.delivery {
        Delivery::Inline | Delivery::Managed => document::fit(&all, target.budget, |kept| {
            let notice = notice_for(kept);
            let sections = kept.iter().chain(&notice);
            if let Some(len) = document::body_len(sections.clone(), measured) {
                *last_body.borrow_mut() = None; // not this set's: built again if needed
                return composed_len_of(len, has_memory) as u64;
            }
            let body = document::body(sections, measured);
            let len = composed_len(&body, has_memory) as u64;
            *last_body.borrow_mut() = Some(body);
            len
        }),
        Delivery::Copy | Delivery::Link => document::fit(&all, target.budget, |kept| {
            kept.iter().map(|s| s.text.len() as u64).sum()
        }),
    };
    let mut fitted = fitted;
    if let Some(notice) = notice_for(&fitted.kept) {
        fitted.kept.push(notice);
    }
    // The body of the sections kept: the last one `fit` built, or built now (a body of sealed
    // sections is measured without being built, and not built at all when the document is
    // split below).
    let last_document = || {
        let body = (last_body.take()).unwrap_or_else(|| document::body(&fitted.kept, measured));
        composed_document_for(&body, has_memory)
    };
    let mut local_memory_cut = None;
    if let LocalMemory::Inline(bytes) = local
        && !bytes.is_empty()
    {
        let room = target.budget.saturating_sub(fitted.size);
        let kept = document::memory_within(bytes, room);
        if kept.len() < bytes.len() {
            local_memory_cut = Some(kept.len() as u64);
            warnings.push(Warning::LocalMemoryCut {
                bytes: bytes.len() as u64,
                kept: kept.len() as u64,
                target: target.file.to_owned(),
                budget: target.budget,
            });
        }
        *last_body.borrow_mut() = Some(document::body(&fitted.kept, LocalMemory::Inline(kept)));
    }
    for dropped in &fitted.dropped {
        warnings.push(Warning::SectionDropped {
            section: dropped.section.clone(),
            bytes: dropped.bytes,
            target: target.file.to_owned(),
            budget: target.budget,
        });
    }
    if fitted.size > target.budget {
        warnings.push(Warning::OverBudget {
            target: target.file.to_owned(),
            bytes: fitted.size,
            budget: target.budget,
        });
    }

    // In the order they are applied: what the entry point imports (and the managed
    // folder), the group's own memory, then the entry point, bound over its mount point in
    // the group folder, and the mount point itself.
    let mut entries = Vec::new();
    let local_import: Vec<String> = match has_memory {
        true => vec![format!("@./{}", names::CLAUDE_LOCAL_MD)],
        false => Vec::new(),
    };
    let entry = match target.delivery {
        _ if !managed && !matches!(target.delivery, Delivery::Copy | Delivery::Link) => {
            last_document()
        }
        Delivery::Copy | Delivery::Link => {
            let mut imports = Vec::new();
            for section in &fitted.kept {
                let (path, content) = fragment(section, target.delivery);
                imports.push(format!("@./{path}"));
                entries.push(Desired { path, content });
            }
            imports.extend(local_import);
            composed_claude_md_for(&imports, has_memory)
        }
        _ => {
            // What the agent can write (a group file, the group's own skills) is never the
            // operator's policy: it goes in the workspace's entry point, after the guardrails.
            // Split (and the policy document built again) only for a group that has such a
            // section: every other group keeps the document `fit` built.
            let split: Option<(Vec<Section>, Vec<Section>)> = fitted
                .kept
                .iter()
                .any(|s| s.group_owned)
                .then(|| fitted.kept.iter().cloned().partition(|s| s.group_owned));
            let managed_document = match &split {
                None => last_document(),
                Some((_, policy)) => document::document_for(policy, LocalMemory::None, has_memory),
            };
            entries.push(Desired {
                path: ManagedPath::managed(names::CLAUDE_MD),
                content: Content::File(managed_document),
            });
            let (settings_file, settings_warnings) = managed::settings_file(sources);
            warnings.extend(settings_warnings);
            entries.push(Desired {
                path: ManagedPath::managed(names::MANAGED_SETTINGS),
                content: Content::File(settings_file),
            });
            for (name, bytes) in managed::host_files(sources) {
                entries.push(Desired {
                    path: ManagedPath::managed(name),
                    content: Content::File(bytes.to_vec()),
                });
            }
            match split {
                None => composed_claude_md_for(&local_import, has_memory),
                Some((own, _)) if has_memory => {
                    document::document_for(&own, LocalMemory::Import, true)
                }
                Some((own, _)) => document::document_for(&own, LocalMemory::None, false),
            }
        }
    };
    if has_memory {
        entries.push(Desired {
            path: ManagedPath::top(names::CLAUDE_LOCAL_MD),
            content: Content::Seed,
        });
    }
    entries.push(Desired {
        path: ManagedPath::bind(target.file),
        content: Content::File(entry),
    });
    entries.push(Desired {
        path: ManagedPath::top(target.file),
        content: Content::Placeholder(mount_point_placeholder_for(target.file, has_memory)),
    });
    Ok(GroupPlan {
        entries,
        warnings,
        target,
        sections: fitted.kept,
        dropped: fitted.dropped,
        local_memory: inputs.local_memory.map(<[u8]>::to_vec),
        local_memory_too_large: inputs.local_memory_too_large,
        local_memory_cut,
        made_from: None,
        uses: (!target.mount_needs(false).app)
            .then(|| crate::input::sources::items_used(layout, config, sources)),
    })
}

/// In a document (`form`), `section`'s text after its heading line (the recipe's `heading`),
/// shown as text; a section in a file of its own (copy, link) is the source's file as it is.
fn with_heading(section: &mut Section, form: SectionForm) {
    if form == SectionForm::Document
        && let Some(heading) = &section.heading
    {
        let mut text = format!("# {}\n\n", neutralise(heading)).into_bytes();
        text.extend_from_slice(&section.text);
        section.text = text;
    }
}

/// The managed path and content of one section in copy or link delivery: a link to the
/// owner's file when the section has one and links are delivered, else a copy of its text;
/// always in `.claude-fragments/`, which the runner binds read-only as a folder. (The shared
/// base, which DESIGN §1 puts at `.claude-shared.md` in the group folder, is
/// `.claude-fragments/.claude-shared.md`, a name no fragment can have: a file in the
/// read-write group folder would be the agent's to change.)
fn fragment(section: &Section, delivery: Delivery) -> (ManagedPath, Content) {
    let content = match (&section.link, delivery) {
        (Some(target), Delivery::Link) => Content::Symlink(target.clone()),
        _ => Content::File(section.text.clone()),
    };
    (ManagedPath::fragment(&section.file.name), content)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::config::SkillSelection;
    use crate::loader::content::scan_markdown;
    use std::collections::BTreeMap;
    use std::path::Path;

    fn sources() -> Sources {
        Sources::builtin(
            Some(b"BASE\n".to_vec()),
            BTreeMap::from([
                ("big".to_owned(), Some(vec![b'B'; 40 * 1024])),
                ("small".to_owned(), Some(b"SMALL\n".to_vec())),
                ("off".to_owned(), Some(b"OFF\n".to_vec())),
            ]),
        )
    }

    fn config(provider: Option<Provider>) -> GroupConfig {
        GroupConfig {
            skills: SkillSelection::Only(["big", "small"].map(String::from).into()),
            mcp_instructions: BTreeMap::from([("db".to_owned(), "@/etc/x\nRO".to_owned())]),
            provider,
            ..GroupConfig::default()
        }
    }

    fn plan(provider: Option<Provider>, delivery: Delivery) -> GroupPlan {
        plan_delivery(
            &Layout::under_root(Path::new("/host")),
            &config(provider),
            &sources(),
            GroupInputs {
                local_memory: Some(b"LOCAL\n"),
                ..GroupInputs::default()
            },
            &DeliverySettings::with_delivery(delivery),
        )
        .unwrap()
    }

    fn file(plan: &GroupPlan, name: &str) -> String {
        let entry = plan.entries.iter().find(|d| d.path.name == name).unwrap();
        match &entry.content {
            Content::File(bytes) => String::from_utf8(bytes.clone()).unwrap(),
            other => panic!("{other:?}"),
        }
    }

    fn content<'a>(plan: &'a GroupPlan, path: &ManagedPath) -> &'a Content {
        &plan
            .entries
            .iter()
            .find(|d| &d.path == path)
            .unwrap()
            .content
    }

    fn text(plan: &GroupPlan, path: &ManagedPath) -> String {
        match content(plan, path) {
            Content::File(bytes) => String::from_utf8(bytes.clone()).unwrap(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_default_is_the_managed_policy_with_no_import() {
        let plan = plan(None, Delivery::default());
        assert_eq!(plan.target.delivery, Delivery::Managed);
        let names: Vec<String> = plan.entries.iter().map(|d| d.path.to_string()).collect();
        assert_eq!(
            names,
            [
                "state:managed/CLAUDE.md",
                "state:managed/managed-settings.json",
                "CLAUDE.local.md",
                "state:CLAUDE.md",
                "CLAUDE.md"
            ]
        );
        // The guardrails: flat, no import at all (the agent could approve external ones).
        let managed = text(&plan, &ManagedPath::managed("CLAUDE.md"));
        assert!(
            scan_markdown(&managed).unwrap().imports.is_empty(),
            "{managed}"
        );
        assert!(managed.contains("BASE") && managed.contains("SMALL") && managed.contains("RO"));
        assert!(!managed.contains("OFF"), "a disabled skill is absent");
        assert!(
            !managed.contains("LOCAL"),
            "the local memory stays the agent's"
        );
        let settings: serde_json::Value =
            serde_json::from_str(&text(&plan, &ManagedPath::managed("managed-settings.json")))
                .unwrap();
        for switch in managed::MEMORY_SWITCHES {
            assert_eq!(settings["env"][switch], "", "{switch}");
        }
        // The workspace's entry point only imports the local memory, whatever the sources.
        let entry = text(&plan, &ManagedPath::bind("CLAUDE.md"));
        assert_eq!(
            scan_markdown(&entry).unwrap().imports,
            ["./CLAUDE.local.md"]
        );
        assert!(!entry.contains("BASE"));
        assert_eq!(
            content(&plan, &ManagedPath::top("CLAUDE.md")),
            &Content::Placeholder(crate::plan::mount_point_placeholder("CLAUDE.md"))
        );
        assert!(plan.dropped.is_empty());
    }

    #[test]
    fn inline_is_one_claude_md_in_the_bind_folder() {
        let plan = plan(None, Delivery::Inline);
        let names: Vec<String> = plan.entries.iter().map(|d| d.path.to_string()).collect();
        assert_eq!(names, ["CLAUDE.local.md", "state:CLAUDE.md", "CLAUDE.md"]);
        let text = text(&plan, &ManagedPath::bind("CLAUDE.md"));
        assert_eq!(scan_markdown(&text).unwrap().imports, ["./CLAUDE.local.md"]);
        assert!(text.contains("BASE") && text.contains("SMALL") && text.contains("RO"));
        assert!(!text.contains("OFF"), "a disabled skill is absent");
        assert!(plan.dropped.is_empty());
    }

    #[test]
    fn codex_gets_a_flat_agents_md_within_32_kib_dropping_the_largest_skill() {
        let plan = plan(Some(Provider::Codex), Delivery::Link);
        assert_eq!(plan.target.file, "AGENTS.md");
        assert_eq!(plan.target.delivery, Delivery::Inline);
        let text = file(&plan, "AGENTS.md");
        assert!(text.len() as u64 <= CODEX_BUDGET, "{}", text.len());
        assert!(scan_markdown(&text).unwrap().imports.is_empty());
        assert!(text.contains("BASE") && text.contains("SMALL") && text.contains("LOCAL"));
        assert_eq!(
            plan.dropped,
            [Dropped {
                section: "skill:big".into(),
                bytes: 40 * 1024
            }]
        );
        assert!(plan.warnings.iter().any(|w| matches!(
            w,
            Warning::SectionDropped { section, .. } if section == "skill:big"
        )));
        // The document measured last is the one written: exactly the sections kept.
        assert_eq!(
            text.as_bytes(),
            document::document(&plan.sections, LocalMemory::Inline(b"LOCAL\n"))
        );
    }

    /// The agent's memory never costs an operator's section its place (issue 38, point 4):
    /// a Codex group whose `CLAUDE.local.md` outgrows the budget keeps exactly the sections
    /// it has with a small one, and the document carries as much of the memory as fits, cut at
    /// a line, within the budget; the verdict names the memory, and only it, as cut.
    #[test]
    fn a_growing_local_memory_is_cut_and_never_evicts_an_operators_section() {
        let with_memory = |memory: &[u8]| {
            plan_delivery(
                &Layout::under_root(Path::new("/host")),
                &config(Some(Provider::Codex)),
                &sources(),
                GroupInputs {
                    local_memory: Some(memory),
                    ..GroupInputs::default()
                },
                &DeliverySettings::with_delivery(Delivery::Inline),
            )
            .unwrap()
        };
        let small = with_memory(b"LOCAL\n");
        let line = "agent note: the same line again and again\n";
        let big_memory = line.repeat(40 * 1024 / line.len());
        let big = with_memory(big_memory.as_bytes());
        let ids = |plan: &GroupPlan| {
            plan.sections
                .iter()
                .map(|s| s.id.name())
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&big), ids(&small));
        assert_eq!(big.dropped, small.dropped);
        let text = file(&big, "AGENTS.md");
        assert!(text.len() as u64 <= CODEX_BUDGET, "{}", text.len());
        assert!(text.contains("BASE") && text.contains("SMALL"));
        assert!(text.ends_with(line), "cut at a line");
        let kept = big.local_memory_cut.unwrap();
        assert!(kept > 0 && kept < big_memory.len() as u64, "{kept}");
        assert!(big.warnings.iter().any(|w| matches!(
            w,
            Warning::LocalMemoryCut { bytes, kept: k, .. }
                if *bytes == big_memory.len() as u64 && *k == kept
        )));
        // The sections, and so the spawn's digest of the document without the memory, are
        // those of the small memory's plan.
        assert_eq!(
            document::document(&big.sections, LocalMemory::Inline(b"")),
            document::document(&small.sections, LocalMemory::Inline(b""))
        );
        let verdict = |plan: &GroupPlan| {
            verify::verify(
                &Layout::under_root(Path::new("/host")),
                plan,
                &sources(),
                &DeliverySettings::with_delivery(Delivery::Inline),
            )
        };
        // The skill over the budget on its own is missing either way; the cut adds the
        // memory, and only it.
        let (small_verdict, big_verdict) = (verdict(&small), verdict(&big));
        let mut expected = small_verdict.missing.clone();
        expected.insert(0, "local-memory".to_owned());
        assert_eq!(big_verdict.missing, expected);
        assert!(
            big_verdict
                .reasons
                .iter()
                .any(|r| r.contains("only its first")),
            "{big_verdict:?}"
        );
        assert!(small.local_memory_cut.is_none());
    }

    #[test]
    fn memory_within_keeps_whole_lines_or_whole_characters() {
        assert_eq!(document::memory_within(b"ab\ncd\n", 100), b"ab\ncd\n");
        assert_eq!(document::memory_within(b"ab\ncd\n", 4), b"ab\n");
        assert_eq!(document::memory_within("ééé".as_bytes(), 3), "é".as_bytes());
        assert_eq!(document::memory_within(b"abc", 0), b"");
    }

    #[test]
    fn opencode_and_gemini_get_their_own_flat_documents() {
        assert_eq!(
            plan(Some(Provider::Opencode), Delivery::Copy).target.file,
            "AGENTS.md"
        );
        let gemini = plan(Some(Provider::Gemini), Delivery::Copy);
        assert_eq!(gemini.target.file, "GEMINI.md");
        assert!(file(&gemini, "GEMINI.md").contains(&"B".repeat(1000)));
    }

    #[test]
    fn copy_and_link_keep_the_import_only_layout() {
        let plan = plan(None, Delivery::Link);
        let names: Vec<String> = plan.entries.iter().map(|d| d.path.to_string()).collect();
        assert_eq!(
            names,
            [
                ".claude-fragments/.claude-shared.md",
                ".claude-fragments/big.md",
                ".claude-fragments/small.md",
                ".claude-fragments/mcp-db.md",
                "CLAUDE.local.md",
                "state:CLAUDE.md",
                "CLAUDE.md"
            ]
        );
    }

    #[test]
    fn a_deployment_default_provider_applies_only_when_the_group_has_none() {
        let settings = DeliverySettings {
            provider: Provider::Gemini,
            ..DeliverySettings::default()
        };
        assert_eq!(Target::of(&config(None), &settings).file, "GEMINI.md");
        assert_eq!(
            Target::of(&config(Some(Provider::Claude)), &settings).file,
            "CLAUDE.md"
        );
    }
}

#[cfg(test)]
mod plan_group_tests {
    use super::*;
    use crate::input::config::SkillSelection;
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};

    fn sources() -> Sources {
        sources_with(Some(b"BASE".to_vec()), &[])
    }

    fn sources_with(base: Option<Vec<u8>>, more: &[(&str, &[u8])]) -> Sources {
        let mut skills = BTreeMap::from([
            ("browser".to_owned(), Some(b"BROWSE".to_vec())),
            ("no-guidance".to_owned(), None),
            ("welcome".to_owned(), Some(b"HELLO".to_vec())),
        ]);
        for (name, text) in more {
            skills.insert((*name).to_owned(), Some(text.to_vec()));
        }
        Sources::builtin(base, skills)
    }

    fn config(skills: Option<&[&str]>, servers: &[(&str, &str)]) -> GroupConfig {
        GroupConfig {
            skills: match skills {
                None => SkillSelection::All,
                Some(list) => SkillSelection::Only(list.iter().map(|s| s.to_string()).collect()),
            },
            mcp_instructions: servers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            provider: None,
            ..GroupConfig::default()
        }
    }

    fn layout() -> Layout {
        Layout::under_root(Path::new("/host"))
    }

    fn paths(plan: &GroupPlan) -> Vec<String> {
        plan.entries.iter().map(|d| d.path.to_string()).collect()
    }

    /// The composed entry point (in the bind folder).
    fn claude_md(plan: &GroupPlan) -> String {
        let entry = plan
            .entries
            .iter()
            .find(|d| d.path == ManagedPath::bind("CLAUDE.md"))
            .unwrap();
        match &entry.content {
            Content::File(bytes) => String::from_utf8(bytes.clone()).unwrap(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn link_plan_for_all_skills() {
        let plan = plan_group(
            &layout(),
            &config(None, &[("db", "RO")]),
            &sources(),
            Delivery::Link,
        )
        .unwrap();
        assert_eq!(
            paths(&plan),
            [
                ".claude-fragments/.claude-shared.md",
                ".claude-fragments/browser.md",
                ".claude-fragments/welcome.md",
                ".claude-fragments/mcp-db.md",
                "CLAUDE.local.md",
                "state:CLAUDE.md",
                "CLAUDE.md"
            ]
        );
        // The group folder's CLAUDE.md is only the mount point of the composed one.
        assert_eq!(
            plan.entries[6].content,
            Content::Placeholder(crate::plan::mount_point_placeholder("CLAUDE.md"))
        );
        assert_eq!(
            plan.entries[0].content,
            Content::Symlink(PathBuf::from("/app/CLAUDE.md"))
        );
        assert_eq!(
            plan.entries[1].content,
            Content::Symlink(PathBuf::from("/app/skills/browser/instructions.md"))
        );
        assert_eq!(plan.entries[4].content, Content::Seed);
        insta::assert_snapshot!(claude_md(&plan), @r"
        <!-- Generated by clawmd from container.json: do not edit, edits are moved aside at the next compose. Put this group's own memory in CLAUDE.local.md. clawmd-sha256:72bedd33a3dfd838 -->
        @./.claude-fragments/.claude-shared.md
        @./.claude-fragments/browser.md
        @./.claude-fragments/welcome.md
        @./.claude-fragments/mcp-db.md
        @./CLAUDE.local.md
        ");
        assert!(plan.warnings.is_empty());
    }

    #[test]
    fn only_enabled_skills_with_instructions_get_fragments() {
        let plan = plan_group(
            &layout(),
            &config(Some(&["welcome", "no-guidance", "ghost"]), &[]),
            &sources(),
            Delivery::Link,
        )
        .unwrap();
        assert_eq!(
            plan.fragment_names().collect::<Vec<_>>(),
            [".claude-shared.md", "welcome.md"]
        );
        assert_eq!(
            plan.warnings,
            [Warning::UnknownSkill {
                skill: "ghost".into(),
                suggestion: None,
            }]
        );
    }

    #[test]
    fn copy_plan_holds_the_sources_bytes() {
        let plan = plan_group(
            &layout(),
            &config(Some(&["browser"]), &[]),
            &sources(),
            Delivery::Copy,
        )
        .unwrap();
        assert_eq!(plan.entries[0].content, Content::File(b"BASE".to_vec()));
        assert_eq!(plan.entries[1].content, Content::File(b"BROWSE".to_vec()));
    }

    #[test]
    fn copy_without_a_shared_base_omits_it_and_warns() {
        let sources = sources_with(None, &[]);
        let plan =
            plan_group(&layout(), &config(Some(&[]), &[]), &sources, Delivery::Copy).unwrap();
        assert_eq!(
            paths(&plan),
            ["CLAUDE.local.md", "state:CLAUDE.md", "CLAUDE.md"]
        );
        assert!(matches!(
            plan.warnings[0],
            Warning::MissingSharedBase { .. }
        ));
    }

    #[test]
    fn same_inputs_same_bytes() {
        let a = plan_group(
            &layout(),
            &config(None, &[("b", "x"), ("a", "y")]),
            &sources(),
            Delivery::Link,
        );
        let b = plan_group(
            &layout(),
            &config(None, &[("a", "y"), ("b", "x")]),
            &sources(),
            Delivery::Link,
        );
        assert_eq!(a, b);
    }

    #[test]
    fn skill_and_server_colliding_on_a_file_name_is_an_error() {
        let sources = sources_with(Some(b"BASE".to_vec()), &[("mcp-db", b"S")]);
        let err = plan_group(
            &layout(),
            &config(None, &[("db", "x")]),
            &sources,
            Delivery::Link,
        )
        .unwrap_err();
        assert_eq!(err.file, "mcp-db.md");
        assert_eq!(
            (err.first.as_str(), err.second.as_str()),
            ("skill:mcp-db", "mcp:db")
        );
        assert!(err.to_string().contains("fix:"));
    }
}
