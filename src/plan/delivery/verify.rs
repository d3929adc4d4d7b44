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

use memchr::memmem;
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::DeliverySettings;
use crate::input::layout::Layout;
use crate::input::names;
use crate::loader::SettingsEvaluation;
use crate::plan::snapshot::Snapshot;
use std::path::Path;

use crate::input::pin::Consumer;
use crate::input::sources::Sources;
use crate::loader::fs::{MemoryFs, ReadOutcome};
use crate::loader::{DiagnosticCode, LoadOptions, MAX_FILE_BYTES, Memory, claude_block, load};
use crate::plan::delivery::GroupPlan;
use crate::plan::target::{ViewOptions, load_options};
use crate::plan::{Content, Place, Warning};
use crate::report::codes::Code;

/// What reaches a group's agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Delivered {
    /// True when everything the group's config asks for (and its local memory) reaches the
    /// agent: nothing dropped over budget, nothing dropped by the backend.
    pub complete: bool,
    /// What does not reach it: `shared-base`, `skill:<name>`, `mcp:<server>`, `local-memory`
    /// (sections dropped over budget included).
    pub missing: Vec<String>,
    /// Why, when known (the loader's diagnostics, the budget).
    pub reasons: Vec<String>,
    /// Settings the agent can write that may keep composed memory from it and that clawmd
    /// cannot decide, each naming the file and the setting: the guardrails *may not* reach
    /// the agent, so the verdict is never complete while any is left.
    pub undecided: Vec<String>,
    /// What the agent's own settings do that the verdict reports by name (issue 38): a memory
    /// file they withhold (`withheld`: a `Read` deny rule, `blockReadsOutsideWorkingDirectories`,
    /// `CLAUDE_CODE_AUTOMOUNT_ROOTS`), a system prompt they replace (`system-prompt-replaced`,
    /// the CLI's main-thread `agent`). Compose adds them to the group's warnings.
    #[serde(default)]
    pub notices: Vec<crate::report::WarningReport>,
    /// `sha256:<hex>` of the memory the agent receives (Claude Code: the memory block as it
    /// sends it; flat backends: the document).
    pub memory_digest: String,
    /// The Claude Code release and consumer the verdict judged (`None` for a flat backend,
    /// which reads its document as it is).
    pub judged: Option<crate::input::pin::Judged>,
}

/// What the settings files the agent can write (`.claude/settings.json`,
/// `.claude/settings.local.json`, and `~/.claude/settings.json` where the deployment says
/// where that lives) do to its memory, read in its container's view
/// ([`crate::runtime::view::agent_settings_in`]), for each Claude Code front end: the CLI reads all three,
/// the Agent SDK with nanoclaw's `settingSources: ['project','user']` not the local one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentSettings {
    /// As the CLI reads them.
    pub cli: SettingsEvaluation,
    /// As the Agent SDK (`settingSources: ['project','user']`) reads them.
    pub sdk: SettingsEvaluation,
}

impl AgentSettings {
    /// True when the agent has no settings file at all (the verdict is then the plan's alone).
    pub fn is_empty(&self) -> bool {
        self.cli.is_empty() && self.sdk.is_empty()
    }
}

/// Whether a reason of a verdict is a setting of the agent's (an exclude pattern, or memory
/// turned off), so that the fix named is to remove it.
pub fn reason_is_a_setting(reason: &str) -> bool {
    reason.contains("claudeMdExcludes pattern")
        || reason.contains("turns memory off")
        || reason.contains("permissions.deny rule")
        || reason.contains("permissions.blockReadsOutsideWorkingDirectories")
        || reason.contains("so Claude Code's walk skips that folder")
}

/// Works out what reaches the agent of a group composed as `plan`, with no settings file of
/// the agent's. Pure: reads nothing.
pub fn verify(
    layout: &Layout,
    plan: &GroupPlan,
    sources: &Sources,
    settings: &DeliverySettings,
) -> Delivered {
    verify_with(layout, plan, sources, settings, &AgentSettings::default())
}

/// [`verify`] with what the agent's own settings files do (`agent`): memory turned off,
/// composed files excluded, or settings clawmd cannot decide make the verdict incomplete. With
/// settings files, the verdict holds for both the CLI and the Agent SDK: complete only when
/// everything reaches the agent through either. Pure: reads nothing.
pub fn verify_with(
    layout: &Layout,
    plan: &GroupPlan,
    sources: &Sources,
    settings: &DeliverySettings,
    agent: &AgentSettings,
) -> Delivered {
    let delivered = match (plan.target.provider.is_flat(), agent.is_empty()) {
        (true, _) => verify_flat(plan),
        (false, true) => {
            let fs = snapshot(layout, plan, sources);
            verify_claude(layout, plan, &fs, settings, settings.consumer, None)
        }
        (false, false) => {
            let fs = snapshot(layout, plan, sources);
            verify_claude_front_ends(layout, plan, &fs, settings, agent)
        }
    };
    let delivered = Delivered {
        judged: (!plan.target.provider.is_flat()).then(|| settings.judged()),
        ..delivered
    };
    with_dropped(plan, delivered)
}

/// The loader on the snapshot of what compose leaves, as `consumer` reads it, with the agent's
/// settings as evaluated in its view.
fn verify_claude(
    layout: &Layout,
    plan: &GroupPlan,
    fs: &Snapshot,
    settings: &DeliverySettings,
    consumer: Consumer,
    agent: Option<&SettingsEvaluation>,
) -> Delivered {
    let mut options = claude_options(layout, settings, consumer);
    options.settings = agent.cloned();
    match load(fs, &options) {
        Ok(memory) => {
            let memory_digest = link_digest(plan, fs, &memory);
            from_memory(layout, plan, &memory, memory_digest)
        }
        Err(err) => Delivered {
            complete: false,
            missing: vec!["everything".to_owned()],
            reasons: vec![crate::error::chain_text(&err)],
            undecided: Vec::new(),
            notices: Vec::new(),
            memory_digest: digest(b""),
            judged: None,
        },
    }
}

/// The verdict that holds for the CLI and the Agent SDK, each with its evaluation of the
/// agent's settings files: one load when it stands for both ([`sdk_loads_as_the_cli`]).
fn verify_claude_front_ends(
    layout: &Layout,
    plan: &GroupPlan,
    fs: &Snapshot,
    settings: &DeliverySettings,
    agent: &AgentSettings,
) -> Delivered {
    let cli = verify_claude(layout, plan, fs, settings, Consumer::Cli, Some(&agent.cli));
    if sdk_loads_as_the_cli(fs, agent) {
        return cli;
    }
    let sdk = verify_claude(layout, plan, fs, settings, Consumer::Sdk, Some(&agent.sdk));
    both(cli, sdk)
}

/// Whether the Agent SDK loads from `fs` exactly what the CLI loads, so that one load stands
/// for both: the front ends differ only in the settings files they read (here already
/// evaluated, `agent`) and in the SDK not loading `CLAUDE.local.md` ([`load_options`]), which
/// makes no difference where `fs` holds none. [`both`] of a verdict and itself is that verdict.
fn sdk_loads_as_the_cli(fs: &Snapshot, agent: &AgentSettings) -> bool {
    agent.cli == agent.sdk && !fs.has_entry_named(names::CLAUDE_LOCAL_MD)
}

/// The verdict that holds for both front ends: what either misses, every reason and every
/// undecided setting once (the Agent SDK's own marked so); the CLI's digest.
fn both(cli: Delivered, sdk: Delivered) -> Delivered {
    let mut out = cli;
    let sdk_only = |text: &String| format!("(Agent SDK) {text}");
    for missing in sdk.missing {
        if !out.missing.contains(&missing) {
            out.missing.push(missing);
        }
    }
    for reason in sdk.reasons {
        if !out.reasons.contains(&reason) {
            out.reasons.push(sdk_only(&reason));
        }
    }
    for undecided in sdk.undecided {
        if !out.undecided.contains(&undecided) {
            out.undecided.push(sdk_only(&undecided));
        }
    }
    // The Agent SDK ignores the main-thread `agent` (measured): its prompt stays.
    for notice in sdk.notices {
        if notice.code != Code::SystemPromptReplaced && !out.notices.contains(&notice) {
            out.notices.push(crate::report::WarningReport {
                code: notice.code,
                message: sdk_only(&notice.message),
            });
        }
    }
    out.complete = out.missing.is_empty() && out.undecided.is_empty();
    out
}

/// How the agent's Claude Code loads memory in the container: cwd the workspace mount, no
/// home, no managed file, external imports as the deployment says.
fn claude_options(layout: &Layout, settings: &DeliverySettings, consumer: Consumer) -> LoadOptions {
    let mut options = load_options(
        &layout.workspace_mount,
        None,
        &ViewOptions {
            approve_external: settings.approve_external,
            claude_version: settings.claude_version,
            consumer,
            ..ViewOptions::default()
        },
    );
    // The managed-policy mount point: the snapshot shows the group's managed folder there
    // in managed delivery, and nothing otherwise (the image's own is not modelled).
    options.managed_dir = Some(layout.managed_mount.clone());
    options
}

/// `delivered` with the sections `plan` dropped over budget, and the enabled skills whose
/// instructions are a link to nothing, added to what is missing.
fn with_dropped(plan: &GroupPlan, mut delivered: Delivered) -> Delivered {
    for dropped in &plan.dropped {
        delivered.missing.push(dropped.section.clone());
        delivered.reasons.push(format!(
            "{} was dropped: {} is over its budget of {} bytes",
            dropped.section, plan.target.file, plan.target.budget
        ));
    }
    for warning in &plan.warnings {
        if let Warning::DanglingInstructions { section, .. } = warning {
            delivered.missing.push(section.clone());
            delivered.reasons.push(warning.to_string());
        }
    }
    delivered.complete = delivered.missing.is_empty() && delivered.undecided.is_empty();
    delivered
}

/// The container's view of the group after compose, built from its mount table
/// ([`Layout::mount_table`] for the plan's target): every bind in the table's order, each
/// showing the planned files (and the group's `CLAUDE.local.md`) under its host path, a later
/// bind over an earlier one as in the container (the composed entry point over its mount
/// point in the group folder), and in link delivery the shared sources where the runner
/// mounts them.
pub fn snapshot(layout: &Layout, plan: &GroupPlan, sources: &Sources) -> Snapshot {
    // Any group name: the table is only used to map host paths to container paths.
    const GROUP: &str = "group";
    let needs = plan.target.mount_needs(false);
    let table = layout.mount_table(GROUP, &needs);
    let mut fs = Snapshot::new();
    fs.dir(&layout.workspace_mount);
    if needs.fragments {
        fs.dir(&layout.workspace_mount.join(names::FRAGMENTS));
    }
    if needs.managed {
        fs.dir(&layout.managed_mount);
    }
    for bind in &table {
        for entry in &plan.entries {
            let host = entry.path.host_path(layout, GROUP);
            let Ok(rel) = host.strip_prefix(&bind.host) else {
                continue;
            };
            let path = match rel.as_os_str().is_empty() {
                true => bind.container.clone(),
                false => bind.container.join(rel),
            };
            match &entry.content {
                Content::File(bytes) | Content::Placeholder(bytes) => fs.file(&path, bytes.clone()),
                Content::Symlink(target) => fs.link(&path, target),
                Content::Seed => match plan.local_memory_too_large {
                    Some(len) => fs.oversized(&path, len),
                    None => fs.file(&path, plan.local_memory.clone().unwrap_or_default()),
                },
            }
        }
    }
    // Link delivery: `<app>/CLAUDE.md`, `<app>/skills` and the recipe's other container
    // folders are mounted, as they are on the host.
    if needs.app {
        for (path, bytes) in sources.container_files(layout) {
            fs.file(&path, bytes.to_vec());
        }
        // What the linked sources import, where the runner mounts it (a skill's
        // `reference.md` beside its instructions under `<app>/skills/<skill>/`).
        let mounted = |path: &Path| {
            table.iter().any(|bind| {
                path.starts_with(&bind.container)
                    && bind.container != layout.workspace_mount
                    && !path.starts_with(&layout.workspace_mount)
            })
        };
        for section in &plan.sections {
            if let (Some(tree), Some(_)) = (&section.tree, &section.link) {
                tree.add_to(&mut fs, mounted);
            }
        }
    }
    fs
}

/// The digest of the memory block, and in link delivery of what is behind every link clawmd
/// composed too (approved or not): an upstream edit of a linked source always changes it.
fn link_digest(plan: &GroupPlan, fs: &Snapshot, memory: &Memory) -> String {
    let mut bytes = claude_block(memory).unwrap_or_default().into_bytes();
    bytes.extend_from_slice(&link_bytes(plan, fs));
    digest(&bytes)
}

/// What [`link_digest`] adds after the memory block: for every link clawmd composed, its
/// target and what is behind it.
fn link_bytes(plan: &GroupPlan, fs: &Snapshot) -> Vec<u8> {
    let mut bytes = Vec::new();
    for entry in &plan.entries {
        if let Content::Symlink(target) = &entry.content {
            bytes.extend_from_slice(b"\0");
            bytes.extend_from_slice(target.as_os_str().as_encoded_bytes());
            bytes.extend_from_slice(b"\0");
            if let Ok(ReadOutcome::Bytes(content)) = fs.read_limited(target, MAX_FILE_BYTES) {
                bytes.extend_from_slice(&content);
            }
        }
    }
    bytes
}

/// How many bytes of `needle` [`occurs`] looks for first.
const NEEDLE_START: usize = 64;

/// Whether `needle` occurs in one of `haystacks`. A searcher for a whole section costs as much
/// to build as the section is long, for every section of every group: the needle is looked for
/// by its first [`NEEDLE_START`] bytes, and each place they occur compared whole. A haystack
/// that repeats the needle's start (an agent's file can) makes that quadratic: past a budget of
/// bytes compared, the two-way search over the whole needle decides.
fn occurs<'a>(needle: &[u8], haystacks: impl Iterator<Item = &'a [u8]> + Clone) -> bool {
    if needle.len() <= NEEDLE_START {
        let finder = memmem::Finder::new(needle);
        return haystacks.into_iter().any(|h| finder.find(h).is_some());
    }
    let start = memmem::Finder::new(&needle[..NEEDLE_START]);
    let mut budget = 4 * needle.len() + haystacks.clone().map(<[u8]>::len).sum::<usize>();
    for haystack in haystacks.clone() {
        for at in start.find_iter(haystack) {
            let candidate = &haystack[at..haystack.len().min(at + needle.len())];
            if candidate == needle {
                return true;
            }
            budget = budget.saturating_sub(candidate.len());
            if budget == 0 {
                let finder = memmem::Finder::new(needle);
                return haystacks.into_iter().any(|h| finder.find(h).is_some());
            }
        }
    }
    false
}

/// The verdict for a Claude Code group whose memory the loader produced, with the digest
/// of what it receives ([`link_digest`]).
fn from_memory(
    layout: &Layout,
    plan: &GroupPlan,
    memory: &Memory,
    memory_digest: String,
) -> Delivered {
    let found: Vec<bool> = plan
        .sections
        .iter()
        .map(|section| {
            section.expected.iter().all(|expected| {
                let bodies = memory.files.iter().map(|f| f.body.as_bytes());
                expected.is_empty() || occurs(expected.as_bytes(), bodies)
            })
        })
        .collect();
    // An empty CLAUDE.local.md has nothing to deliver (Claude Code skips empty files).
    let local = layout.workspace_mount.join(names::CLAUDE_LOCAL_MD);
    let local_empty = memory
        .diagnostics
        .iter()
        .any(|d| d.code == DiagnosticCode::FileEmpty && d.path == local);
    let seeded = plan
        .entries
        .iter()
        .any(|entry| matches!(entry.content, Content::Seed));
    let local_missing = seeded && !local_empty && !memory.files.iter().any(|f| f.path == local);
    let mut delivered = assemble(
        plan,
        &found,
        local_missing,
        &diagnostic_reasons(memory),
        memory_digest,
    );
    delivered.undecided = memory
        .diagnostics
        .iter()
        .filter(|d| d.code == DiagnosticCode::SettingsUndecided)
        .map(|d| d.message.clone())
        .collect();
    delivered.undecided.dedup();
    delivered.complete &= delivered.undecided.is_empty();
    delivered.notices = memory
        .diagnostics
        .iter()
        .filter_map(|d| {
            let code = match d.code {
                DiagnosticCode::Withheld => Code::Withheld,
                DiagnosticCode::SystemPromptReplaced => Code::SystemPromptReplaced,
                _ => return None,
            };
            Some(crate::report::WarningReport {
                code,
                message: d.message.clone(),
            })
        })
        .collect();
    delivered.notices.dedup();
    delivered
}

/// The loader's reasons for what does not load, in order.
fn diagnostic_reasons(memory: &Memory) -> Vec<String> {
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
                    | DiagnosticCode::MemoryDisabled
                    | DiagnosticCode::Excluded
                    | DiagnosticCode::Withheld
            )
        })
        .map(|d| match d.code {
            // These messages are about the file itself and do not name it.
            DiagnosticCode::FileTooLarge
            | DiagnosticCode::FileUnreadable
            | DiagnosticCode::FileUnparsable => format!("{}: {}", d.path.display(), d.message),
            _ => d.message.clone(),
        })
        .collect()
}

/// A Claude Code group's verdict from its parts: which of `plan`'s sections are found in what
/// loads (`found`, one per section: every file Claude Code shows of its source loaded alone,
/// its imports included), whether a non-empty local memory fails to load, the loader's
/// reasons ([`diagnostic_reasons`]) and the digest.
fn assemble(
    plan: &GroupPlan,
    found: &[bool],
    local_missing: bool,
    diagnostic_reasons: &[String],
    memory_digest: String,
) -> Delivered {
    let mut missing: Vec<String> = plan
        .sections
        .iter()
        .zip(found)
        .filter(|(_, found)| !**found)
        .map(|(section, _)| section.id.name())
        .collect();
    if local_missing {
        missing.push("local-memory".to_owned());
    }
    let mut reasons: Vec<String> = if missing.is_empty() {
        Vec::new()
    } else {
        diagnostic_reasons.to_vec()
    };
    if reasons.is_empty() && !missing.is_empty() {
        for section in plan
            .sections
            .iter()
            .filter(|s| missing.contains(&s.id.name()))
        {
            reasons.push(format!(
                "the text of {} ({}) is not in what Claude Code loads as written: something it leaves open (an HTML comment, a code fence) changes what follows it (fix: close it in the source)",
                section.id.name(),
                section.origin
            ));
        }
    }
    Delivered {
        complete: missing.is_empty(),
        missing,
        reasons,
        undecided: Vec::new(),
        notices: Vec::new(),
        memory_digest,
        judged: None,
    }
}

/// Whether the bytes a flat backend reads, `seen`, hold `text` whole (its final newlines
/// aside: the document may end right after it).
fn holds(seen: &[u8], text: &[u8]) -> bool {
    let end = text
        .iter()
        .rposition(|&byte| byte != b'\n')
        .map_or(0, |last| last + 1);
    occurs(&text[..end], std::iter::once(seen))
}

/// A flat document is read as it is, up to its budget (Codex truncates after
/// `project_doc_max_bytes`): what lies beyond does not reach the agent.
fn verify_flat(plan: &GroupPlan) -> Delivered {
    let document = plan
        .entries
        .iter()
        .find(|d| d.path.place == Place::Bind && d.path.name == plan.target.file)
        .and_then(|d| match &d.content {
            Content::File(bytes) => Some(bytes.as_slice()),
            _ => None,
        })
        .unwrap_or_default();
    let budget = usize::try_from(plan.target.budget).unwrap_or(usize::MAX);
    let seen = &document[..document.len().min(budget)];
    let mut missing = Vec::new();
    for section in &plan.sections {
        if !holds(seen, &section.text) {
            missing.push(section.id.name());
        }
    }
    if let Some(local) = &plan.local_memory
        && !holds(seen, local)
    {
        missing.push("local-memory".to_owned());
    }
    let mut reasons = Vec::new();
    if let Some(kept) = plan.local_memory_cut {
        reasons.push(format!(
            "{} is {} bytes: only its first {kept} fit in {}'s budget of {} bytes after the operator's sections",
            names::CLAUDE_LOCAL_MD,
            plan.local_memory.as_ref().map_or(0, Vec::len),
            plan.target.file,
            plan.target.budget
        ));
    }
    let over = missing.len() > usize::from(plan.local_memory_cut.is_some());
    reasons.extend(match over {
        false => Vec::new(),
        true => vec![format!(
            "{} is {} bytes, over its budget of {} bytes: {} reads no further",
            plan.target.file,
            document.len(),
            plan.target.budget,
            plan.target.provider
        )],
    });
    if let Some(len) = plan.local_memory_too_large {
        missing.push("local-memory".to_owned());
        reasons.push(format!(
            "{} is {len} bytes, over the {MAX_FILE_BYTES} bytes clawmd copies into {}: none of it is in the document",
            names::CLAUDE_LOCAL_MD,
            plan.target.file
        ));
    }
    Delivered {
        complete: missing.is_empty(),
        reasons,
        missing,
        undecided: Vec::new(),
        notices: Vec::new(),
        memory_digest: digest(document),
        judged: None,
    }
}

/// `sha256:<64 hex digits>`.
pub fn digest(bytes: &[u8]) -> String {
    hex_digest(Sha256::new_with_prefix(bytes))
}

/// `sha256:<64 hex digits>` of what `hash` was given.
pub(crate) fn hex_digest(hash: Sha256) -> String {
    digest_text(&hash.finalize())
}

/// `sha256:<64 hex digits>` for the SHA-256 `digest`.
pub(crate) fn digest_text(digest: &[u8]) -> String {
    format!("sha256:{}", crate::safe_name::hex(digest))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_flat_document_holds_a_section_only_whole_and_within_its_budget() {
        let section = "Réponds en français.\n\n".as_bytes();
        assert!(super::holds(
            b"# A\nR\xc3\xa9ponds en fran\xc3\xa7ais.",
            section
        ));
        assert!(super::holds(b"", b"\n\n"));
        // The budget cut the last character in two: the section is not whole.
        let cedilla = section
            .windows(2)
            .position(|pair| pair == "ç".as_bytes())
            .unwrap();
        let cut = &section[..=cedilla];
        assert!(cut.ends_with(b"fran\xc3"));
        assert!(!super::holds(cut, section));
        assert!(!super::holds(b"R\xc3\xa9ponds en", section));
    }

    #[test]
    fn a_needle_occurs_where_the_two_way_search_finds_it() {
        let needle: Vec<u8> = (0..200u8).map(|i| b'a' + i % 26).collect();
        let start = &needle[..super::NEEDLE_START];
        let mut decoy = start.repeat(3000);
        decoy.extend_from_slice(&needle[..150]);
        let cases: [(Vec<u8>, bool); 5] = [
            (needle.clone(), true),
            ([b"x".as_slice(), &needle, b"y"].concat(), true),
            (needle[..199].to_vec(), false),
            (decoy.clone(), false),
            ([decoy.as_slice(), &needle].concat(), true),
        ];
        for (haystack, expected) in cases {
            let found = super::occurs(&needle, [b"other".as_slice(), &haystack].into_iter());
            let two_way = super::memmem::find(&haystack, &needle).is_some();
            assert_eq!(found, two_way);
            assert_eq!(found, expected);
        }
        assert!(super::occurs(
            b"short",
            [b"a short one".as_slice()].into_iter()
        ));
    }

    use super::*;
    use crate::input::config::GroupConfig;
    use crate::input::recipe::MemoryFile;
    use crate::loader::ClaudeVersion;
    use crate::loader::content::js_trim;
    use crate::plan::delivery::{Delivery, GroupInputs, Provider, plan_delivery};
    use std::collections::BTreeMap;

    fn sources(base: &str) -> Sources {
        Sources::builtin(
            Some(base.as_bytes().to_vec()),
            BTreeMap::from([("web".to_owned(), Some(b"WEB GUIDE\n".to_vec()))]),
        )
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
            ..GroupInputs::default()
        };
        let plan = plan_delivery(&layout, &config, &sources, inputs, &settings).unwrap();
        verify(&layout, &plan, &sources, &settings)
    }

    /// What the settings files `files` (paths in the container, text) do, as
    /// `crate::runtime::view::agent_settings_in` reads them, for both front ends.
    fn agent(files: &[(&str, &str)]) -> AgentSettings {
        let mut fs = Snapshot::new();
        fs.dir(Path::new("/workspace/agent"));
        fs.dir(Path::new("/home/node/.claude"));
        for (path, text) in files {
            fs.file(Path::new(path), text.as_bytes().to_vec());
        }
        let evaluate = |consumer| {
            let view = ViewOptions {
                consumer,
                ..ViewOptions::default()
            };
            let mut options = load_options(
                Path::new("/workspace/agent"),
                Some("/home/node".into()),
                &view,
            );
            options.managed_dir = None;
            crate::loader::settings::evaluate(&fs, &options, Path::new("/workspace/agent"))
        };
        AgentSettings {
            cli: evaluate(Consumer::Cli),
            sdk: evaluate(Consumer::Sdk),
        }
    }

    fn verdict_with(delivery: Delivery, files: &[(&str, &str)]) -> Delivered {
        let layout = Layout::under_root(Path::new("/host"));
        let settings = DeliverySettings::with_delivery(delivery);
        let (sources, plan) = default_plan_of("BASE\n", &layout, &settings);
        verify_with(&layout, &plan, &sources, &settings, &agent(files))
    }

    /// The sources with `base` as the shared base, and the plan of a group with the default
    /// config and a local memory.
    fn default_plan_of(
        base: &str,
        layout: &Layout,
        settings: &DeliverySettings,
    ) -> (Sources, GroupPlan) {
        let sources = sources(base);
        let inputs = GroupInputs {
            local_memory: Some(b"LOCAL NOTES\n"),
            ..GroupInputs::default()
        };
        let plan =
            plan_delivery(layout, &GroupConfig::default(), &sources, inputs, settings).unwrap();
        (sources, plan)
    }

    const PROJECT: &str = "/workspace/agent/.claude/settings.json";
    const LOCAL: &str = "/workspace/agent/.claude/settings.local.json";
    const USER: &str = "/home/node/.claude/settings.json";

    #[test]
    fn settings_that_drop_the_guardrails_make_the_verdict_incomplete_in_every_delivery() {
        for delivery in [Delivery::Inline, Delivery::Copy] {
            for (file, text, missing) in [
                (
                    PROJECT,
                    r#"{"claudeMdExcludes":["/workspace/agent/CLAUDE.md"]}"#,
                    "shared-base",
                ),
                (
                    USER,
                    r#"{"claudeMdExcludes":["**/CLAUDE.md"]}"#,
                    "shared-base",
                ),
                (
                    LOCAL,
                    r#"{"claudeMdExcludes":["/workspace/**"]}"#,
                    "local-memory",
                ),
                (PROJECT, r#"{"claudeMdExcludes":["**"]}"#, "skill:web"),
                (
                    PROJECT,
                    r#"{"env":{"CLAUDE_CODE_DISABLE_CLAUDE_MDS":"yes"}}"#,
                    "local-memory",
                ),
                (
                    USER,
                    r#"{"env":{"CLAUDE_CODE_DISABLE_CLAUDE_MDS":1}}"#,
                    "shared-base",
                ),
                (
                    PROJECT,
                    r#"{"claudeMdExcludes":["/proc/self/cwd/CLAUDE.md"]}"#,
                    "shared-base",
                ),
                (
                    PROJECT,
                    r#"{"claudeMdExcludes":["/workspace/nothere/../agent/CLAUDE.md"]}"#,
                    "shared-base",
                ),
                (
                    PROJECT,
                    "\u{feff}{\"claudeMdExcludes\":[\"/workspace/agent/CLAUDE.md\"]}",
                    "shared-base",
                ),
            ] {
                let got = verdict_with(delivery, &[(file, text)]);
                assert!(!got.complete, "{delivery} {file} {text}: {got:?}");
                assert!(
                    got.missing.contains(&missing.to_owned()),
                    "{delivery} {text}: {got:?}"
                );
                assert!(!got.reasons.is_empty(), "{got:?}");
            }
        }
        // Link delivery (approved): the same setting drops one fragment only.
        let approved = DeliverySettings {
            approve_external: true,
            ..DeliverySettings::with_delivery(Delivery::Link)
        };
        let layout = Layout::under_root(Path::new("/host"));
        let sources = sources("BASE\n");
        let plan = plan_delivery(
            &layout,
            &GroupConfig::default(),
            &sources,
            GroupInputs::default(),
            &approved,
        )
        .unwrap();
        let clean = verify_with(&layout, &plan, &sources, &approved, &agent(&[]));
        assert!(clean.complete, "{clean:?}");
        let one = agent(&[(
            PROJECT,
            r#"{"claudeMdExcludes":["**/.claude-fragments/web.md"]}"#,
        )]);
        let got = verify_with(&layout, &plan, &sources, &approved, &one);
        assert_eq!(got.missing, ["skill:web"], "{got:?}");
    }

    #[test]
    fn settings_that_change_nothing_or_are_rejected_leave_the_verdict_complete() {
        for (file, text) in [
            (
                PROJECT,
                r#"{"claudeMdExcludes":["/workspace/agent/notes/**"]}"#,
            ),
            (
                PROJECT,
                r#"{"env":{"CLAUDE_CODE_DISABLE_CLAUDE_MDS":"0","OTHER":"1"}}"#,
            ),
            (
                PROJECT,
                r#"{"claudeMdExcludes":["/workspace/agent/CLAUDE.md"],"permissions":5}"#,
            ),
            (
                PROJECT,
                r#"{"claudeMdExcludes":["/workspace/agent/CLAUDE.md"],}"#,
            ),
            (PROJECT, r#"{"env":{"claude_code_disable_claude_mds":"1"}}"#),
            (PROJECT, r#"{"env":{"CLAUDE_CODE_DISABLE_CLAUDE_MDS":"y"}}"#),
            (USER, r#"{"$schema":"x","claudeMdExcludes":[]}"#),
        ] {
            let got = verdict_with(Delivery::Inline, &[(file, text)]);
            assert!(got.complete, "{text}: {got:?}");
        }
    }

    /// Issue 38: the settings that withhold a memory file without turning memory off, as
    /// measured on the real binaries (`tests/fixtures/agent-settings-probe/`): the verdict
    /// names what is withheld and why, in every delivery, and the managed guardrails never.
    #[test]
    fn settings_that_withhold_memory_files_are_named_in_every_delivery() {
        let approved = |delivery| DeliverySettings {
            approve_external: true,
            ..DeliverySettings::with_delivery(delivery)
        };
        let verdict_in = |delivery, files: &[(&str, &str)]| {
            let layout = Layout::under_root(Path::new("/host"));
            let settings = approved(delivery);
            let (sources, plan) = default_plan_of("BASE\n", &layout, &settings);
            verify_with(&layout, &plan, &sources, &settings, &agent(files))
        };
        let deny = |rule: &str| format!(r#"{{"permissions":{{"deny":["{rule}"]}}}}"#);
        for (delivery, file, text, missing, not_missing) in [
            // Every delivery: the workspace's CLAUDE.md withheld.
            (
                Delivery::Inline,
                PROJECT,
                deny("Read(./CLAUDE.md)"),
                "shared-base",
                "",
            ),
            (
                Delivery::Copy,
                USER,
                deny("Read(CLAUDE.md)"),
                "shared-base",
                "",
            ),
            (
                Delivery::Link,
                LOCAL,
                deny("Read(./claude.md)"),
                "shared-base",
                "",
            ),
            (Delivery::Inline, PROJECT, deny("Read"), "local-memory", ""),
            (
                Delivery::Inline,
                PROJECT,
                deny("Read(*.md)"),
                "skill:web",
                "",
            ),
            // The agent's own memory alone.
            (
                Delivery::Inline,
                PROJECT,
                deny("Read(/CLAUDE.local.md)"),
                "local-memory",
                "shared-base",
            ),
            (
                Delivery::Copy,
                USER,
                deny("Read(//workspace/agent/CLAUDE.local.md)"),
                "local-memory",
                "shared-base",
            ),
            // The fragments of copy and link delivery, and link's targets under /app.
            (
                Delivery::Copy,
                PROJECT,
                deny("Read(./.claude-fragments)"),
                "shared-base",
                "local-memory",
            ),
            (
                Delivery::Link,
                PROJECT,
                deny("Read(//app/**)"),
                "shared-base",
                "local-memory",
            ),
            (
                Delivery::Link,
                PROJECT,
                r#"{"permissions":{"blockReadsOutsideWorkingDirectories":true}}"#.to_owned(),
                "shared-base",
                "local-memory",
            ),
            // The walk skips the workspace (the user's settings only).
            (
                Delivery::Inline,
                USER,
                r#"{"env":{"CLAUDE_CODE_AUTOMOUNT_ROOTS":"/workspace/agent"}}"#.to_owned(),
                "shared-base",
                "",
            ),
            // Managed delivery: the guardrails stay, the agent's own memory is withheld.
            (
                Delivery::Managed,
                PROJECT,
                deny("Read(./CLAUDE.local.md)"),
                "local-memory",
                "shared-base",
            ),
            (
                Delivery::Managed,
                PROJECT,
                deny("Read(**)"),
                "local-memory",
                "shared-base",
            ),
            (
                Delivery::Managed,
                USER,
                r#"{"env":{"CLAUDE_CODE_AUTOMOUNT_ROOTS":"/workspace/agent"}}"#.to_owned(),
                "local-memory",
                "skill:web",
            ),
        ] {
            let got = verdict_in(delivery, &[(file, text.as_str())]);
            let what = format!("{delivery} {file} {text}: {got:?}");
            assert!(!got.complete, "{what}");
            assert!(got.undecided.is_empty(), "{what}");
            assert!(got.missing.contains(&missing.to_owned()), "{what}");
            assert!(!got.missing.contains(&not_missing.to_owned()), "{what}");
            assert!(
                got.reasons
                    .iter()
                    .any(|r| r.contains(file) && reason_is_a_setting(r)),
                "the reason names the setting's file: {what}"
            );
            assert!(
                got.notices
                    .iter()
                    .any(|n| n.code == Code::Withheld && n.message.contains(file)),
                "a withheld notice names the file: {what}"
            );
        }
        // What withholds nothing: another tool's rule, an allow rule, a rule the settings
        // file's root makes miss, the automount list from a project file, a folder outside
        // the workspace, link delivery's targets made a working folder again.
        for (delivery, file, text) in [
            (Delivery::Inline, PROJECT, deny("Edit(./CLAUDE.md)")),
            (Delivery::Inline, PROJECT, deny("Read()")),
            (Delivery::Inline, PROJECT, deny("read(./CLAUDE.md)")),
            (Delivery::Inline, PROJECT, deny("Read(/workspace/agent/CLAUDE.md)")),
            (Delivery::Inline, USER, deny("Read(/CLAUDE.local.md)")),
            (Delivery::Inline, PROJECT, deny("Read(~/.claude/**)")),
            (Delivery::Managed, PROJECT, deny("Read(//etc/claude-code/**)")),
            (
                Delivery::Inline,
                PROJECT,
                r#"{"permissions":{"allow":["Read(./CLAUDE.md)"]}}"#.to_owned(),
            ),
            (
                Delivery::Inline,
                PROJECT,
                r#"{"env":{"CLAUDE_CODE_AUTOMOUNT_ROOTS":"/workspace/agent"}}"#.to_owned(),
            ),
            (
                Delivery::Inline,
                PROJECT,
                r#"{"permissions":{"blockReadsOutsideWorkingDirectories":true}}"#.to_owned(),
            ),
            (
                Delivery::Link,
                PROJECT,
                r#"{"permissions":{"blockReadsOutsideWorkingDirectories":true,"additionalDirectories":["/app"]}}"#.to_owned(),
            ),
        ] {
            let got = verdict_in(delivery, &[(file, text.as_str())]);
            assert!(got.complete, "{delivery} {file} {text}: {got:?}");
            assert!(got.notices.is_empty(), "{delivery} {file} {text}: {got:?}");
        }
    }

    /// Issue 38 point 3: the CLI's main-thread `agent` naming an agent file replaces Claude
    /// Code's system prompt: named in every delivery (the verdict's memory is unchanged), never
    /// for the Agent SDK (which ignores it), nor for a built-in agent or a name with no file.
    #[test]
    fn an_agent_that_replaces_the_system_prompt_is_named() {
        const AGENT_FILE: &str = "/workspace/agent/.claude/agents/x.md";
        let file = "---\nname: x\ndescription: d\n---\nYou are x.\n";
        for delivery in [
            Delivery::Managed,
            Delivery::Inline,
            Delivery::Copy,
            Delivery::Link,
        ] {
            for place in [PROJECT, LOCAL, USER] {
                let got =
                    verdict_with(delivery, &[(place, r#"{"agent":"x"}"#), (AGENT_FILE, file)]);
                let replaced: Vec<_> = got
                    .notices
                    .iter()
                    .filter(|n| n.code == Code::SystemPromptReplaced)
                    .collect();
                assert_eq!(replaced.len(), 1, "{delivery} {place}: {got:?}");
                assert!(replaced[0].message.contains(place), "{got:?}");
                assert!(replaced[0].message.contains(AGENT_FILE), "{got:?}");
                assert!(!replaced[0].message.starts_with("(Agent SDK)"), "{got:?}");
            }
        }
        for files in [
            vec![(PROJECT, r#"{"agent":"x"}"#)],
            vec![(PROJECT, r#"{"agent":"claude"}"#)],
            vec![(PROJECT, r#"{"agent":""}"#), (AGENT_FILE, file)],
        ] {
            let got = verdict_with(Delivery::Inline, &files);
            assert!(got.notices.is_empty(), "{files:?}: {got:?}");
        }
        // A file named like a built-in agent overrides it (measured).
        let got = verdict_with(
            Delivery::Inline,
            &[
                (USER, r#"{"agent":"claude"}"#),
                ("/home/node/.claude/agents/claude.md", file),
            ],
        );
        assert!(
            got.notices
                .iter()
                .any(|n| n.code == Code::SystemPromptReplaced && n.message.contains("claude.md")),
            "{got:?}"
        );
    }

    #[test]
    fn what_clawmd_cannot_decide_is_never_complete() {
        for text in [
            r#"{"claudeMdExcludes":["/workspace/agent/[[:upper:]]LAUDE.md"]}"#,
            r#"{"claudeMdExcludes":["**/CLAUDE.m{c..e}"]}"#,
            r#"{"claudeMdExcludes":["/nothing/**"],"model":"x","hooks":{}}"#,
            r#"{"env":{"CLAUDE_CODE_DISABLE_CLAUDE_MDS":"1"},"permissions":{"other":[]}}"#,
            r#"{"permissions":{"deny":["Read([C]LAUDE.md)"]}}"#,
            r#"{"permissions":{"deny":["Read(\\CLAUDE.local.md)"]}}"#,
            r#"{"autoMemoryDirectory":"/workspace/agent"}"#,
            r#"{"env":{"CLAUDE_COWORK_MEMORY_INDEX_CONTENT":"injected"}}"#,
            r#"{"claudeMdExcludes":["/proc/1/cwd/CLAUDE.md"]}"#,
        ] {
            let got = verdict_with(Delivery::Inline, &[(PROJECT, text)]);
            assert!(!got.complete, "{text}: {got:?}");
            assert!(!got.undecided.is_empty(), "{text}: {got:?}");
            assert!(
                got.undecided.iter().any(|u| u.contains(PROJECT)),
                "names the file: {got:?}"
            );
        }
    }

    #[test]
    fn the_verdict_holds_for_the_cli_and_the_sdk() {
        // Local settings: read by the CLI, not by the SDK (settingSources project, user).
        let got = verdict_with(
            Delivery::Inline,
            &[(
                LOCAL,
                r#"{"env":{"CLAUDE_CODE_DISABLE_CLAUDE_MDS":"true"}}"#,
            )],
        );
        assert!(!got.complete);
        // The project turns memory off and local turns it back on: the SDK does not read the
        // local file, so memory is off for it.
        let got = verdict_with(
            Delivery::Inline,
            &[
                (PROJECT, r#"{"env":{"CLAUDE_CODE_DISABLE_CLAUDE_MDS":"1"}}"#),
                (LOCAL, r#"{"env":{"CLAUDE_CODE_DISABLE_CLAUDE_MDS":"0"}}"#),
            ],
        );
        assert!(!got.complete, "{got:?}");
        assert!(
            got.reasons.iter().any(|r| r.starts_with("(Agent SDK)")),
            "{got:?}"
        );
    }

    #[test]
    fn one_load_stands_for_both_front_ends_exactly_when_it_gives_their_verdict() {
        let with_local = Layout::under_root(Path::new("/host"));
        // As on nanoclaw v2.3, whose memory is a tree: no CLAUDE.local.md.
        let mut tree_memory = with_local.clone();
        tree_memory.recipe.memory = MemoryFile::None;
        let files: &[&[(&str, &str)]] = &[
            &[(USER, "{}")],
            &[(USER, r#"{"claudeMdExcludes":["**/CLAUDE.md"]}"#)],
            &[(USER, r#"{"env":{"CLAUDE_CODE_DISABLE_CLAUDE_MDS":"1"}}"#)],
            &[(
                USER,
                r#"{"claudeMdExcludes":["/workspace/agent/CLAUDE.md"]}"#,
            )],
            &[(USER, r#"{"claudeMdExcludes": 3}"#)],
            &[(PROJECT, r#"{"agent":"x"}"#)],
            &[(LOCAL, r#"{"claudeMdExcludes":["**/CLAUDE.md"]}"#)],
            // Memory off for the SDK alone, which does not read the local file.
            &[
                (PROJECT, r#"{"env":{"CLAUDE_CODE_DISABLE_CLAUDE_MDS":"1"}}"#),
                (LOCAL, r#"{"env":{"CLAUDE_CODE_DISABLE_CLAUDE_MDS":"0"}}"#),
            ],
        ];
        let mut shortcuts = 0;
        for delivery in [Delivery::Inline, Delivery::Copy, Delivery::Managed] {
            let settings = DeliverySettings::with_delivery(delivery);
            for (layout, local) in [
                (&tree_memory, None),
                (&with_local, None),
                (&with_local, Some(&b"LOCAL NOTES\n"[..])),
            ] {
                let sources = sources("BASE\n");
                let inputs = GroupInputs {
                    local_memory: local,
                    ..GroupInputs::default()
                };
                let plan =
                    plan_delivery(layout, &GroupConfig::default(), &sources, inputs, &settings)
                        .unwrap();
                let fs = snapshot(layout, &plan, &sources);
                for files in files {
                    let agent = agent(files);
                    let each = |consumer, evaluation| {
                        verify_claude(layout, &plan, &fs, &settings, consumer, Some(evaluation))
                    };
                    let apart = both(
                        each(Consumer::Cli, &agent.cli),
                        each(Consumer::Sdk, &agent.sdk),
                    );
                    let got = verify_claude_front_ends(layout, &plan, &fs, &settings, &agent);
                    assert_eq!(got, apart, "{delivery} {local:?} {files:?}");
                    shortcuts += usize::from(sdk_loads_as_the_cli(&fs, &agent));
                }
            }
        }
        // The case it is made for (no CLAUDE.local.md, the same evaluation) is taken: every
        // settings file but the local one, in every delivery of the memory tree.
        assert_eq!(shortcuts, 3 * 6, "{shortcuts}");
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
        // Issue 19: an unclosed HTML comment in the shared base is text when Claude Code loads
        // the base alone; the document used to let the next section's comment line close it,
        // hiding that text. Now it is delivered whole (its `<` followed by a zero-width space),
        // and the verdict says so.
        let base = "BASE\n<!-- never closed\nHIDDEN\n";
        let got = verdict(base, DeliverySettings::default(), None);
        assert!(got.complete, "{got:?}");
        let copy = verdict(base, DeliverySettings::with_delivery(Delivery::Copy), None);
        assert!(copy.complete, "{copy:?}");
        // A document that does change a source's text (here: written without the base's last
        // line) is caught: the verdict reads what is written, not what was meant.
        let layout = Layout::under_root(Path::new("/host"));
        let settings = DeliverySettings::with_delivery(Delivery::Inline);
        let (sources, mut plan) = default_plan_of(base, &layout, &settings);
        let mut changed = 0;
        for entry in &mut plan.entries {
            if let Content::File(bytes) = &mut entry.content {
                let text = String::from_utf8(bytes.clone()).unwrap();
                if text.contains("HIDDEN") {
                    *bytes = text.replace("HIDDEN", "").into_bytes();
                    changed += 1;
                }
            }
        }
        assert_eq!(changed, 1);
        let got = verify(&layout, &plan, &sources, &settings);
        assert!(!got.complete);
        assert_eq!(got.missing, ["shared-base"], "{got:?}");
        assert!(got.reasons[0].contains("fix: close it"), "{got:?}");
    }

    #[test]
    fn a_flat_document_is_judged_within_its_budget() {
        let codex = verdict("BASE\n", DeliverySettings::default(), Some(Provider::Codex));
        assert!(codex.complete, "{codex:?}");
        let tiny = DeliverySettings {
            budgets: crate::plan::delivery::DocumentBudgets {
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
    fn hex_digest_is_sha256_in_lowercase_hex() {
        assert_eq!(
            digest(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        let mut hash = Sha256::new();
        hash.update(b"a");
        hash.update(b"bc");
        assert_eq!(hex_digest(hash), digest(b"abc"));
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

    /// The truth, derived from the sources alone: each source's text as Claude Code `version`
    /// shows that file loaded on its own (frontmatter and comment blocks as the release
    /// handles them, trimmed), in the form `delivery` gives the agent.
    fn truth(text: &str, delivery: Delivery, version: ClaudeVersion) -> Vec<String> {
        let body = crate::loader::content::parse_as(text, version)
            .map(|parsed| js_trim(&parsed.body).to_owned())
            .unwrap_or_default();
        if body.is_empty() {
            return Vec::new();
        }
        let lf = body.replace("\r\n", "\n").replace('\r', "\n");
        match delivery {
            Delivery::Link => vec![body],
            // A copy keeps its line endings unless clawmd had to put a comment in it.
            Delivery::Copy => vec![
                js_trim(&crate::input::sources::expand::neutralise(&body)).to_owned(),
                js_trim(&crate::input::sources::expand::neutralise(&lf)).to_owned(),
            ],
            _ => vec![js_trim(&crate::input::sources::expand::neutralise(&lf)).to_owned()],
        }
    }

    use proptest::strategy::Strategy as _;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        /// Issue 19: for generated groups (sources with frontmatter, BOM, CRLF and lone CR,
        /// fences and comments left open, HTML blocks, lists, setext headings, tables,
        /// imports), in every Claude Code delivery mode, the verdict is complete exactly when
        /// render's output (the block the loader gives for what compose leaves) holds every
        /// source as Claude Code loads it alone.
        #[test]
        fn the_verdict_is_what_render_shows_of_the_sources(
            texts in proptest::collection::vec(
                proptest::collection::vec(
                    proptest::prop_oneof![
                        proptest::string::string_regex("[a-z ]{1,12}").unwrap(),
                        proptest::sample::select(vec![
                            "```", "```text", "~~~", "<!-- c -->", "<!--", "-->", "---",
                            "---\ndescription: x\n---", "\u{feff}", "# H", "Title\n===",
                            "- item", "  - sub", "| a | b |\n|---|---|\n| 1 | 2 |", "<pre>",
                            "</pre>", "<div>", "@./x.md", "see @x.md", "> quote", "    code",
                            "\r", "\r\n", "",
                        ]).prop_map(str::to_owned),
                    ],
                    1..8,
                ).prop_map(|parts| parts.join("\n")),
                3,
            ),
            mode in proptest::sample::select(vec![
                Delivery::Managed, Delivery::Inline, Delivery::Copy, Delivery::Link,
            ]),
        ) {
            let layout = Layout::under_root(Path::new("/host"));
            let mut settings = DeliverySettings::with_delivery(mode);
            settings.approve_external = true;
            let version = settings.claude_version;
            let sources = Sources::builtin(
                Some(texts[0].as_bytes().to_vec()),
                BTreeMap::from([
                    ("a".to_owned(), Some(texts[1].as_bytes().to_vec())),
                    ("b".to_owned(), Some(texts[2].as_bytes().to_vec())),
                ]),
            );
            let config = GroupConfig::default();
            let inputs = GroupInputs {
                local_memory: Some(b"LOCAL NOTES\n"),
                ..GroupInputs::default()
            };
            let plan = plan_delivery(&layout, &config, &sources, inputs, &settings).unwrap();
            let delivered = verify(&layout, &plan, &sources, &settings);
            // render: the block the loader gives for what compose leaves.
            let fs = snapshot(&layout, &plan, &sources);
            let options = claude_options(&layout, &settings, settings.consumer);
            let memory = load(&fs, &options).unwrap();
            let block = claude_block(&memory).unwrap_or_default();
            // Compared without clawmd's zero-width spaces (a mention it could not wrap, an
            // unclosed `<!--` it breaks so that it hides nothing).
            let seen = block.replace('\u{200B}', "");
            let shown = texts.iter().all(|text| {
                let truth = truth(text, mode, version);
                truth.is_empty()
                    || truth.iter().any(|t| seen.contains(&t.replace('\u{200B}', "")))
            });
            proptest::prop_assert_eq!(
                delivered.complete, shown,
                "{:?}\n{:?}\n{}", mode, delivered, block
            );
        }
    }
}
