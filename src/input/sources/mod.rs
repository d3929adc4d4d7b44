//! Sources: what the recipe ([`crate::input::recipe`]) reads, and the sections it makes of them.
//!
//! The container side (`container/`: shared files, skill roots, fragment folders) is read once
//! per run into [`Sources`]; the group side (a group's own files and skills, agent-writable)
//! is read per group, through the group's [`SafeDir`] (never through a link, never a device,
//! never bigger than Claude Code reads), into a [`GroupParts`]. [`sections`] then makes the
//! group's sections from both and its config: pure, in the recipe's order, each with the name
//! reports use, where it comes from, its text, whether it may be dropped over budget, and
//! where copy and link delivery put it. Where the sections go is the
//! [`delivery`](crate::plan::delivery) module's business.
//!
//! A container-side source is trusted: its own imports are expanded from where its owner
//! put them ([`expand`]). A group-side source is not: clawmd never follows its imports on the
//! host, and delivers its text with every import mention shown as text
//! ([`expand::neutralise`]).

pub mod alone;
pub mod expand;
pub mod host;
pub mod host_reads;
pub mod record;
pub mod vouch;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::disk::fsops::{FsError, SafeDir};
use crate::file_kind::FileKind;
use crate::input::config::{GroupConfig, SkillSelection};
use crate::input::layout::Layout;
use crate::input::names;
use crate::input::recipe::{Select, SkillForm, SkillRoot, Source, SourceKind};
use crate::key_hash::KeyHasher;
use crate::plan::providers::Provider;
use crate::plan::{FragmentCollision, ManagedPath, Warning, mcp_fragment};
use crate::runtime::mounted::Mount;
use crate::safe_name::{display_name, file_stem, validate_name};
use expand::{expand_source_with, neutralise};
use host_reads::HostLog;

/// The largest shared source (`container/CLAUDE.md`, a skill's `instructions.md`) clawmd
/// reads, and so the largest shared base `migrate` may leave behind.
pub const MAX_SOURCE_BYTES: u64 = 16 * 1024 * 1024;

/// The most skills clawmd reads from a group's own skill folder (the agent can make any
/// number); the rest are left out with a warning.
pub const MAX_GROUP_SKILLS: usize = 256;

/// The longest skill description an index shows, in characters.
const MAX_DESCRIPTION_CHARS: usize = 1024;

/// One part of a group's memory.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SectionId(String);

impl SectionId {
    /// The section named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        SectionId(name.into())
    }

    /// `container/CLAUDE.md`.
    pub fn shared_base() -> Self {
        SectionId::new("shared-base")
    }

    /// A skill of clawmd's built-in root.
    pub fn skill(skill: &str) -> Self {
        SectionId(format!("skill:{skill}"))
    }

    /// An MCP server's inline instructions.
    pub fn mcp(server: &str) -> Self {
        SectionId(format!("mcp:{server}"))
    }

    /// The stable name used in reports: `shared-base`, `skill:<name>`, `mcp:<server>`,
    /// `module:<name>`, `group:persona.md`, `skill-index`, …
    pub fn name(&self) -> String {
        self.0.clone()
    }

    /// The name, borrowed.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A section with the text that is delivered for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// Which.
    pub id: SectionId,
    /// Where the text comes from, for the section's comment and for people.
    pub origin: String,
    /// The delivered text (a shared source with its imports expanded; an MCP server's fenced
    /// fragment; a group file with its imports shown as text).
    pub text: Vec<u8>,
    /// The order in which sections are dropped over budget (lower first); `None` for what
    /// is never dropped (shared files, the group's own files).
    pub rank: Option<u8>,
    /// Where copy and link delivery put it in the group folder.
    pub file: ManagedPath,
    /// The owner's file as the container sees it, which link delivery links to; `None`:
    /// always a copy.
    pub link: Option<PathBuf>,
    /// A container folder whose files belong to this section (a skill's folder): an import
    /// from one of them that does not load makes the section incomplete.
    pub scope: Option<PathBuf>,
    /// The owner's file and what its imports reach, as the container shows them: the source
    /// is composed as Claude Code loads that file alone ([`alone`]). `None`: a text of
    /// clawmd's own or of the group's, composed as one file importing nothing.
    pub tree: Option<alone::SharedTree>,
    /// The text of each file Claude Code shows loading the source alone, as the agent must
    /// find it once delivered (set when the group's plan is made, for its release).
    pub expected: Vec<String>,
    /// The source's own size in bytes, as read (what a report names when it is dropped).
    pub size: u64,
    /// Its text comes from the group folder (a group file, the group's own skills), which the
    /// agent can write: never delivered as the operator's managed policy.
    pub group_owned: bool,
    /// Its text was proven, read on its own by the plan's release, to import nothing, to leave
    /// nothing open (a line after a blank line and a comment block is read fresh) and to
    /// define no link reference (the one thing a section could change in another that follows
    /// a comment block): set by [`alone::prepare`]. A document of sealed sections is their
    /// concatenation, with nothing to neutralise across them.
    pub sealed: bool,
    /// A heading line put before its text in a document (the source's `heading`, its item's
    /// name in it), shown as text: it imports nothing.
    pub heading: Option<String>,
}

impl Section {
    /// A section with the defaults of clawmd's built-in kinds for its name (`shared-base`,
    /// `skill:<name>`, `mcp:<server>`) in the default layout; for tests and benches.
    pub fn builtin(id: SectionId, text: &[u8]) -> Section {
        let name = id.name();
        let (rank, file) = if name == "shared-base" {
            (None, ManagedPath::top(names::SHARED))
        } else if let Some(skill) = name.strip_prefix("skill:") {
            (Some(0), ManagedPath::fragment(&format!("{skill}.md")))
        } else {
            (Some(1), ManagedPath::fragment(&fragment_file(&name)))
        };
        Section {
            origin: name.clone(),
            id,
            text: text.to_vec(),
            rank,
            file,
            link: None,
            scope: None,
            tree: None,
            expected: Vec::new(),
            size: text.len() as u64,
            group_owned: false,
            sealed: false,
            heading: None,
        }
    }

    /// The heading line of a section of `source` for `item` (a skill, a fragment, a server):
    /// the source's `heading` with `{name}` replaced by the item's name as reports show it (the
    /// source's name for a section of its own).
    pub fn heading_of(source: &Source, item: Option<&str>) -> Option<String> {
        let heading = source.heading.as_ref()?;
        Some(heading.replace(
            "{name}",
            &display_name(item.unwrap_or(source.name.as_str())),
        ))
    }
}

/// A source file's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// The text delivered (a container-side source with its imports expanded).
    pub text: Vec<u8>,
    /// The bytes on the host, when they differ from `text`: what a link delivers.
    pub original: Option<Vec<u8>>,
    /// The owner's file and what its imports reach in the container (container-side
    /// sources read from the disk).
    pub tree: Option<alone::SharedTree>,
}

impl SourceFile {
    /// A file delivered as it is.
    pub fn plain(text: Vec<u8>) -> Self {
        SourceFile {
            text,
            original: None,
            tree: None,
        }
    }

    /// Its bytes on the host.
    pub fn host_bytes(&self) -> &[u8] {
        self.original.as_deref().unwrap_or(&self.text)
    }
}

/// A skill's name and description, from its `SKILL.md` frontmatter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillMeta {
    /// `name:` (default: the folder's name).
    pub name: String,
    /// `description:`, on one line.
    pub description: Option<String>,
}

/// What one recipe source holds (container side in [`Sources`], group side in
/// [`GroupParts`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Part {
    /// Nothing read on this side.
    #[default]
    Nothing,
    /// A single file (`None`: missing, or not read: see the warnings).
    File(Option<SourceFile>),
    /// A folder's items by name: skills (`None`: the skill has no guidance file) or
    /// fragments.
    Items(BTreeMap<String, Option<SourceFile>>),
    /// A skill root as an index: by skill folder, its `SKILL.md` metadata (`None`: no
    /// `SKILL.md`).
    Index(BTreeMap<String, Option<SkillMeta>>),
}

/// What the container side of the recipe holds, read once per run: one [`Part`] per recipe
/// source, in the recipe's order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sources {
    /// Per recipe source.
    pub parts: Vec<Part>,
    /// Items (skills, fragments) whose file cannot be used (a folder, a FIFO or device,
    /// larger than clawmd reads, unreadable), by section name (`skill:web`): a group that
    /// gets one fails with this error, the others compose. Such an item is in its part with
    /// no text.
    pub unusable: BTreeMap<String, Unusable>,
    /// Items whose file is a symlink to nothing, by section name, with the link's host path
    /// and its target: a group that gets one is warned, and its verdict says the section does
    /// not reach the agent.
    pub dangling: BTreeMap<String, (PathBuf, PathBuf)>,
    /// The host's own managed policy (`hostManagedDir` in clawmd.json), merged into every
    /// group's managed folder in managed delivery.
    pub host_managed: Option<host::HostManaged>,
    /// The runner's own files the guards of Codex, Gemini CLI and opencode groups merge
    /// ([`host::Bases`]).
    pub guard_bases: host::Bases,
    /// The shared sources as the groups of this run get them, each made once
    /// ([`alone::Prepared`]).
    pub prepared: alone::Prepared,
    /// A shared source with a memory-note placeholder as each backend gets it, by the source's
    /// index in the recipe and the backend ([`rendered_notes`]): made once per run, so the
    /// groups of one backend share one text.
    pub rendered: BTreeMap<(usize, Provider), SourceFile>,
}

/// Why an item's file cannot be used: the error reading it gave.
#[derive(Debug, Clone)]
pub struct Unusable(pub std::sync::Arc<FsError>);

impl PartialEq for Unusable {
    fn eq(&self, other: &Self) -> bool {
        crate::error::chain_text(&*self.0) == crate::error::chain_text(&*other.0)
    }
}

impl Eq for Unusable {}

impl Sources {
    /// The sources of clawmd's built-in recipe: this shared base and these skills (with
    /// their guidance, `None`: none), delivered as they are (tests and benches).
    pub fn builtin(
        shared_base: Option<Vec<u8>>,
        skills: BTreeMap<String, Option<Vec<u8>>>,
    ) -> Sources {
        Sources {
            parts: vec![
                Part::File(shared_base.map(SourceFile::plain)),
                Part::Items(
                    skills
                        .into_iter()
                        .map(|(name, text)| (name, text.map(SourceFile::plain)))
                        .collect(),
                ),
                Part::Nothing,
            ],
            ..Sources::default()
        }
    }

    /// The skills of clawmd's built-in root (`container/skills`, full text), when the recipe
    /// has it.
    pub fn builtin_skills(&self, layout: &Layout) -> Option<&BTreeMap<String, Option<SourceFile>>> {
        layout
            .recipe
            .sources
            .iter()
            .zip(&self.parts)
            .find_map(|(source, part)| match part {
                Part::Items(items) if source.is_builtin_skills() => Some(items),
                _ => None,
            })
    }

    /// Every container-side file delivered, at its container path, with its bytes on the
    /// host: what the container sees through the runner's mounts, and what a link points to.
    pub fn container_files<'a>(
        &'a self,
        layout: &'a Layout,
    ) -> impl Iterator<Item = (PathBuf, &'a [u8])> + 'a {
        layout
            .recipe
            .sources
            .iter()
            .zip(&self.parts)
            .flat_map(move |(source, part)| {
                let files: Vec<(PathBuf, &'a [u8])> = match (&source.kind, part) {
                    (SourceKind::Shared { .. }, Part::File(Some(file))) => {
                        vec![(container_path(layout, source, None), file.host_bytes())]
                    }
                    (
                        SourceKind::Skills {
                            root: SkillRoot::Container,
                            ..
                        }
                        | SourceKind::Fragments { .. },
                        Part::Items(items),
                    ) => items
                        .iter()
                        .filter_map(|(name, file)| {
                            let file = file.as_ref()?;
                            Some((
                                container_path(layout, source, Some(name)),
                                file.host_bytes(),
                            ))
                        })
                        .collect(),
                    _ => Vec::new(),
                };
                files
            })
    }
}

/// The group side of the recipe for one group: one [`Part`] per recipe source.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupParts {
    /// Per recipe source (empty when the recipe reads nothing in the group folder).
    pub parts: Vec<Part>,
    /// What could not be read, and why.
    pub warnings: Vec<Warning>,
}

impl GroupParts {
    /// A SHA-256 that differs exactly when two groups' parts differ (to share plans between
    /// groups whose config and group-side sources are the same).
    pub fn digest(&self) -> [u8; 32] {
        let mut key = KeyHasher::new();
        key.count(self.parts.len());
        for part in &self.parts {
            group_part_into(&mut key, part);
        }
        for warning in &self.warnings {
            key.field(warning.to_string().as_bytes());
        }
        key.finish()
    }
}

/// Feeds one part of the group side to `key`: its kind, then its files' text (`-`: none).
fn group_part_into(key: &mut KeyHasher, part: &Part) {
    fn text(file: &Option<SourceFile>) -> &[u8] {
        file.as_ref().map_or(b"-".as_slice(), |f| &f.text)
    }
    match part {
        Part::Nothing => {
            key.field(b"n");
        }
        Part::File(file) => {
            key.field(b"f").field(text(file));
        }
        Part::Items(items) => {
            key.field(b"i").count(items.len());
            for (name, file) in items {
                key.field(name.as_bytes()).field(text(file));
            }
        }
        Part::Index(items) => {
            key.field(b"x").count(items.len());
            for (name, meta) in items {
                key.field(name.as_bytes());
                match meta {
                    None => key.field(b"-"),
                    Some(meta) => (key.field(b"+").field(meta.name.as_bytes()))
                        .field(meta.description.as_deref().unwrap_or("-").as_bytes()),
                };
            }
        }
    }
}

impl Sources {
    /// A SHA-256 of everything the container side holds for the plans of a run (each file's
    /// text and host bytes, what its imports reach, the skills' metadata, what cannot be
    /// used, the host's managed policy, the guards' bases): two runs whose sources have the
    /// same digest plan every group the same.
    pub fn digest(&self) -> [u8; 32] {
        let mut key = KeyHasher::new();
        key.count(self.parts.len());
        for part in &self.parts {
            match part {
                Part::Nothing => {
                    key.field(b"nothing");
                }
                Part::File(one) => {
                    key.field(b"file");
                    source_file_into(&mut key, one);
                }
                Part::Items(items) => {
                    key.field(b"items").count(items.len());
                    for (name, one) in items {
                        key.field(name.as_bytes());
                        source_file_into(&mut key, one);
                    }
                }
                Part::Index(items) => {
                    key.field(format!("index {items:?}").as_bytes());
                }
            }
        }
        let unusable: Vec<(&String, String)> = self
            .unusable
            .iter()
            .map(|(name, why)| (name, crate::error::chain_text(&*why.0)))
            .collect();
        key.field(format!("{unusable:?} {:?}", self.dangling).as_bytes());
        key.field(format!("{:?} {:?}", self.host_managed, self.guard_bases).as_bytes());
        key.finish()
    }
}

/// Feeds a container-side file to `key` (`-`: none): its text, its host bytes, and the
/// tree its imports reach.
fn source_file_into(key: &mut KeyHasher, file: &Option<SourceFile>) {
    let Some(file) = file else {
        key.field(b"-");
        return;
    };
    key.field(b"f").field(&file.text);
    key.field(file.original.as_deref().unwrap_or(b"="));
    let Some(tree) = &file.tree else {
        key.field(b"no tree");
        return;
    };
    key.field(tree.root.as_os_str().as_encoded_bytes());
    key.count(tree.files.len());
    for (path, node) in &tree.files {
        key.field(path.as_os_str().as_encoded_bytes());
        match node {
            alone::TreeNode::File(bytes) => key.field(b"file").field(bytes),
            alone::TreeNode::Link(to) => {
                key.field(b"link").field(to.as_os_str().as_encoded_bytes())
            }
        };
    }
}

/// A note about the container side, for the run's warnings.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SourceNote {
    /// What kind.
    pub kind: NoteKind,
    /// The message, with the fix.
    pub message: String,
}

/// What a [`SourceNote`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum NoteKind {
    /// A skill folder or fragment whose name cannot be a file name.
    BadName,
    /// An import inside a shared source that cannot be delivered.
    ImportNotDelivered,
    /// A fragment folder or shared file the recipe names that does not exist.
    MissingSource,
}

// Where things are

/// The base folder (or the file) of a container-side source as the container sees it.
fn container_base(layout: &Layout, source: &Source) -> PathBuf {
    match &source.kind {
        SourceKind::Shared { file, mount, .. } => {
            mount.clone().unwrap_or_else(|| layout.app_mount.join(file))
        }
        SourceKind::Skills {
            root: SkillRoot::Container,
            dir,
            mount,
            ..
        }
        | SourceKind::Fragments { dir, mount, .. } => {
            mount.clone().unwrap_or_else(|| layout.app_mount.join(dir))
        }
        SourceKind::Skills { dir, .. } => layout.workspace_mount.join(dir),
        SourceKind::GroupFile { file } => layout.workspace_mount.join(file),
        SourceKind::GroupFiles { .. } | SourceKind::NativeSkills | SourceKind::Omitted => {
            layout.workspace_mount.clone()
        }
        SourceKind::Mcp => layout.workspace_mount.join(names::CONFIG),
    }
}

/// The file of `item` (a skill or a fragment name; `None` for a single-file source) as the
/// container sees it.
fn container_path(layout: &Layout, source: &Source, item: Option<&str>) -> PathBuf {
    let base = container_base(layout, source);
    match (&source.kind, item) {
        (SourceKind::Skills { file, .. }, Some(skill)) => base.join(skill).join(file),
        (SourceKind::Fragments { pattern, .. }, Some(name)) => base.join(pattern.file_name(name)),
        _ => base,
    }
}

/// The host path of a container-side source's file or folder.
fn host_path(layout: &Layout, source: &Source) -> PathBuf {
    match &source.kind {
        SourceKind::Shared { file, .. } => layout.container_dir.join(file),
        SourceKind::Skills { dir, .. } | SourceKind::Fragments { dir, .. } => {
            layout.container_dir.join(dir)
        }
        SourceKind::GroupFile { file } => file.clone(),
        SourceKind::GroupFiles { pattern, .. } => PathBuf::from(pattern.to_string()),
        SourceKind::NativeSkills | SourceKind::Omitted => PathBuf::new(),
        SourceKind::Mcp => PathBuf::from(names::CONFIG),
    }
}

/// The file name in `.claude-fragments/` of a section named `name` (`module:core` →
/// `module-core.md`, `mcp:my server` → `mcp-my%20server.md`).
pub fn fragment_file(name: &str) -> String {
    format!("{}.md", file_stem(&name.replacen(':', "-", 1)))
}

/// The file name in `.claude-fragments/` of the one section of a `group-files`,
/// `native-skills` or `omitted` source named `name` (`source-persona.md`): prefixed, so that a
/// skill of the built-in root (`<skill>.md`) named like the source cannot take its file.
fn own_fragment_file(name: &str) -> String {
    fragment_file(&format!("source:{name}"))
}

impl Section {
    /// The one section of `source` (named as the source), holding `text` from `origin`: never
    /// dropped, always a copy, importing nothing, the operator's.
    fn whole_source(source: &Source, origin: String, text: Vec<u8>) -> Section {
        Section {
            id: SectionId::new(source.name.clone()),
            origin,
            text,
            rank: None,
            file: ManagedPath::fragment(&own_fragment_file(&source.name)),
            link: None,
            scope: None,
            tree: None,
            expected: Vec::new(),
            size: 0,
            group_owned: false,
            sealed: false,
            heading: None,
        }
    }
}

/// The mounts under which the container-side sources are visible (for expanding their
/// imports): `container/` at the app mount, and each of the recipe's own mounts.
pub fn source_mounts(layout: &Layout) -> Vec<Mount> {
    let mut mounts = vec![Mount::new(&layout.app_mount, &layout.container_dir)];
    mounts.extend(
        layout
            .recipe
            .mounts(&layout.app_mount, &layout.container_dir)
            .into_iter()
            .map(|(container, host)| Mount::new(container, host)),
    );
    mounts
}

// Reading the container side

/// Reads what `container/` holds for the recipe: each shared file and each container skill
/// root and fragment folder, with their own imports expanded where their owner put them.
/// Names that cannot be file names are skipped with a note. Every host read is logged in
/// `log`.
pub fn read_container(
    layout: &Layout,
    log: &HostLog,
) -> Result<(Sources, Vec<SourceNote>), FsError> {
    let mounts = source_mounts(layout);
    let mut reader = Reader {
        log,
        mounts: &mounts,
        notes: Vec::new(),
        import_notes: Vec::new(),
    };
    let mut parts = Vec::new();
    let mut unusable = BTreeMap::new();
    let mut dangling = BTreeMap::new();
    // An item's file: its bytes, or `None` (missing; a dangling link or an unusable file is
    // kept aside for the groups that get it).
    let mut item = |section: String, path: &Path| -> Option<Vec<u8>> {
        match log.read_file(path, MAX_SOURCE_BYTES) {
            Ok(None) => {
                if let Some(target) = log.link(path) {
                    dangling.insert(section, (path.to_owned(), target));
                }
                None
            }
            Ok(bytes) => bytes,
            Err(err) => {
                unusable.insert(section, Unusable(std::sync::Arc::new(err)));
                None
            }
        }
    };
    for source in &layout.recipe.sources {
        let part = match &source.kind {
            SourceKind::Shared { .. } => {
                let host = host_path(layout, source);
                let bytes = log.read_file(&host, MAX_SOURCE_BYTES)?;
                if bytes.is_none() && source.name != "shared-base" {
                    reader.notes.push(SourceNote {
                        kind: NoteKind::MissingSource,
                        message: format!(
                            "{} does not exist, so the group gets no {} (fix: create it, or remove it from `sources` in clawmd.json)",
                            host.display(),
                            source.name
                        ),
                    });
                }
                Part::File(bytes.map(|b| reader.expand(&container_path(layout, source, None), b)))
            }
            SourceKind::Skills {
                root: SkillRoot::Container,
                file,
                form,
                ..
            } => {
                let dir = host_path(layout, source);
                let mut items = BTreeMap::new();
                let mut index = BTreeMap::new();
                for name in reader.list_folders(&dir, "skill")? {
                    let folder = dir.join(&name);
                    match form {
                        SkillForm::Full => {
                            let section = format!("{}:{name}", source.name);
                            log.begin_item(&section);
                            let bytes = item(section, &folder.join(file));
                            let target = container_path(layout, source, Some(&name));
                            items.insert(name, bytes.map(|b| reader.expand(&target, b)));
                            log.end_item();
                        }
                        SkillForm::Index => {
                            let bytes = log
                                .read_file(&folder.join(SKILL_MD), crate::loader::MAX_FILE_BYTES)?;
                            let meta = bytes.map(|b| skill_meta(&name, &b));
                            index.insert(name, meta);
                        }
                    }
                }
                match form {
                    SkillForm::Full => Part::Items(items),
                    SkillForm::Index => Part::Index(index),
                }
            }
            SourceKind::Fragments { pattern, .. } => {
                let dir = host_path(layout, source);
                let mut items = BTreeMap::new();
                match reader.list(&dir)? {
                    None => reader.notes.push(SourceNote {
                        kind: NoteKind::MissingSource,
                        message: format!(
                            "{} does not exist, so no {} fragment reaches any group (fix: correct `dir` in clawmd.json's `sources`, or remove the entry)",
                            dir.display(),
                            source.name
                        ),
                    }),
                    Some(entries) => {
                        for (file_name, kind) in entries {
                            let Some(name) = pattern.matches(&file_name) else {
                                continue;
                            };
                            // A folder is not a fragment; anything else is read (a FIFO or a
                            // device is refused, failing the groups that get it).
                            if file_name.starts_with('.') || kind == Some(FileKind::Dir) {
                                continue;
                            }
                            if let Err(problem) = validate_name(name) {
                                reader.notes.push(SourceNote {
                                    kind: NoteKind::BadName,
                                    message: format!(
                                        "skipping fragment {}: its name {name:?} {problem} (fix: rename the file)",
                                        dir.join(&file_name).display()
                                    ),
                                });
                                continue;
                            }
                            let name = name.to_owned();
                            let section = format!("{}:{name}", source.name);
                            log.begin_item(&section);
                            let bytes = item(section, &dir.join(&file_name));
                            let target = container_path(layout, source, Some(&name));
                            items.insert(name, bytes.map(|b| reader.expand(&target, b)));
                            log.end_item();
                        }
                    }
                }
                Part::Items(items)
            }
            SourceKind::Skills { .. }
            | SourceKind::GroupFile { .. }
            | SourceKind::GroupFiles { .. }
            | SourceKind::NativeSkills
            | SourceKind::Omitted
            | SourceKind::Mcp => Part::Nothing,
        };
        parts.push(part);
    }
    let mut notes = reader.notes;
    notes.append(&mut reader.import_notes);
    let rendered = rendered_notes(layout, &parts);
    Ok((
        Sources {
            rendered,
            parts,
            unusable,
            dangling,
            host_managed: None,
            guard_bases: Default::default(),
            prepared: Default::default(),
        },
        notes,
    ))
}

/// Every shared source with a memory-note placeholder as each backend gets it: the
/// placeholder's paragraph (`\n\n<placeholder>`, its first occurrence, as nanoclaw's
/// `renderBaseInstructions` replaces it) becomes the backend's memory note after a blank line,
/// or goes where the backend has none, in the delivered text, in the host bytes and in the
/// source's own file of its tree (so the source is still composed as its release loads it).
pub fn rendered_notes(layout: &Layout, parts: &[Part]) -> BTreeMap<(usize, Provider), SourceFile> {
    let mut out = BTreeMap::new();
    for (index, (source, part)) in layout.recipe.sources.iter().zip(parts).enumerate() {
        let (
            SourceKind::Shared {
                memory_note: Some(placeholder),
                ..
            },
            Part::File(Some(file)),
        ) = (&source.kind, part)
        else {
            continue;
        };
        // Backends with the same note share one rendering (one tree: made once a run).
        let mut by_note: BTreeMap<Option<String>, SourceFile> = BTreeMap::new();
        for provider in Provider::ALL {
            let note = provider.spec().memory_note();
            if let Some(made) = by_note.get(&note) {
                out.insert((index, provider), made.clone());
                continue;
            }
            let render = |bytes: &[u8]| render_note(bytes, placeholder, note.as_deref());
            let tree = file.tree.as_ref().map(|tree| {
                let mut tree = (**tree).clone();
                let root = match tree.files.get(&tree.root) {
                    Some(alone::TreeNode::Link(to)) => to.clone(),
                    _ => tree.root.clone(),
                };
                if let Some(alone::TreeNode::File(bytes)) = tree.files.get_mut(&root) {
                    *bytes = render(bytes);
                }
                std::sync::Arc::new(tree)
            });
            let made = SourceFile {
                text: render(&file.text),
                original: file.original.as_deref().map(render),
                tree,
            };
            by_note.insert(note, made.clone());
            out.insert((index, provider), made);
        }
    }
    out
}

/// `bytes` with the paragraph `\n\n<placeholder>` (its first occurrence) replaced by
/// `\n\n<note>`, or removed when there is no note (nanoclaw's `renderBaseInstructions`);
/// as they are when they hold no such paragraph.
pub fn render_note(bytes: &[u8], placeholder: &str, note: Option<&str>) -> Vec<u8> {
    let text = String::from_utf8_lossy(bytes);
    let paragraph = format!("\n\n{placeholder}");
    if !text.contains(&paragraph) {
        return bytes.to_vec();
    }
    let with = note.map(|note| format!("\n\n{note}")).unwrap_or_default();
    text.replacen(&paragraph, &with, 1).into_bytes()
}

/// A skill's description file.
const SKILL_MD: &str = "SKILL.md";

/// An entry of a trusted host folder, by its name as text, with its kind through a final link.
type Named = (String, Option<FileKind>);

struct Reader<'a> {
    log: &'a HostLog,
    mounts: &'a [Mount],
    notes: Vec<SourceNote>,
    import_notes: Vec<SourceNote>,
}

impl Reader<'_> {
    /// A container-side source at `target` (its container path) with its imports expanded.
    fn expand(&mut self, target: &Path, bytes: Vec<u8>) -> SourceFile {
        let expanded = expand_source_with(&self.log.view(self.mounts), target, &bytes);
        let tree = Some(std::sync::Arc::new(alone::SourceTree::gather(
            &self.log.view(self.mounts),
            target,
            bytes.clone(),
        )));
        self.import_notes
            .extend(expanded.notes.iter().map(|note| SourceNote {
                kind: NoteKind::ImportNotDelivered,
                message: note.to_string(),
            }));
        if expanded.text == bytes {
            SourceFile {
                tree,
                ..SourceFile::plain(bytes)
            }
        } else {
            SourceFile {
                text: expanded.text,
                original: Some(bytes),
                tree,
            }
        }
    }

    /// The entries of a trusted host folder, sorted, each with whether it is a regular file
    /// (following links, as the runner's bind mount does); `None` when the folder does not
    /// exist.
    fn list(&mut self, dir: &Path) -> Result<Option<Vec<Named>>, FsError> {
        let entries = self.log.list(dir).map_err(|err| FsError::Io {
            op: "list",
            path: dir.to_owned(),
            source: err,
        })?;
        let Some(entries) = entries else {
            return Ok(None);
        };
        let mut out: Vec<Named> = (entries.into_iter())
            .map(|(name, kind)| (name.to_string_lossy().into_owned(), kind))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(Some(out))
    }

    /// The folder names in a trusted host folder that can be file names (the others are
    /// noted), sorted.
    fn list_folders(&mut self, dir: &Path, what: &str) -> Result<Vec<String>, FsError> {
        let mut names = Vec::new();
        for (name, kind) in self.list(dir)?.unwrap_or_default() {
            let path = dir.join(&name);
            if name.starts_with('.') || kind != Some(FileKind::Dir) {
                continue;
            }
            if let Err(problem) = validate_name(&name) {
                self.notes.push(SourceNote {
                    kind: NoteKind::BadName,
                    message: format!(
                        "skipping {what} folder {}: {problem} (fix: rename the folder)",
                        path.display()
                    ),
                });
                continue;
            }
            names.push(name);
        }
        Ok(names)
    }
}

/// The name and description of a skill from its `SKILL.md` frontmatter (YAML between `---`
/// lines); the folder's name when it has none.
pub fn skill_meta(folder: &str, bytes: &[u8]) -> SkillMeta {
    let text = String::from_utf8_lossy(bytes);
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let mut meta = SkillMeta {
        name: folder.to_owned(),
        description: None,
    };
    let mut lines = text.split_inclusive('\n');
    if lines.next().map(str::trim_end) != Some("---") {
        return meta;
    }
    let mut block = String::new();
    let mut closed = false;
    for line in lines {
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        block.push_str(line);
    }
    if !closed {
        return meta;
    }
    let Ok(docs) = yaml_rust2::YamlLoader::load_from_str(&block) else {
        return meta;
    };
    let one_line = |text: &str| {
        let words: Vec<&str> = text.split_whitespace().collect();
        let joined = words.join(" ");
        match joined.char_indices().nth(MAX_DESCRIPTION_CHARS) {
            Some((at, _)) => format!("{}…", &joined[..at]),
            None => joined,
        }
    };
    if let Some(doc) = docs.first() {
        if let Some(name) = doc["name"].as_str().map(one_line).filter(|n| !n.is_empty()) {
            meta.name = name;
        }
        meta.description = doc["description"]
            .as_str()
            .map(one_line)
            .filter(|d| !d.is_empty());
    }
    meta
}

// Reading the group side

/// Reads what the recipe takes from the group folder in `dir`: its own files and skills,
/// never through a link, never opening anything but a regular file, never more than Claude
/// Code reads. What cannot be read is left out with a warning: an agent can never make its
/// group fail to compose.
pub fn read_group(layout: &Layout, dir: &SafeDir) -> Result<GroupParts, FsError> {
    let mut group = GroupParts::default();
    if !layout.recipe.reads_group() {
        return Ok(group);
    }
    for source in &layout.recipe.sources {
        let part = match &source.kind {
            SourceKind::GroupFile { file } => {
                Part::File(read_group_file(dir, file, &mut group.warnings)?.map(neutralised))
            }
            SourceKind::GroupFiles { pattern, first } => Part::File(
                read_group_files(dir, pattern, first.as_deref(), &mut group.warnings)?
                    .map(neutralised),
            ),
            SourceKind::Skills {
                root: SkillRoot::Group,
                dir: skills_dir,
                file,
                form,
                ..
            } => read_group_skills(dir, skills_dir, file, *form, &mut group.warnings)?,
            _ => Part::Nothing,
        };
        group.parts.push(part);
    }
    Ok(group)
}

/// A group-side text as delivered: every import mention shown as text.
fn neutralised(bytes: Vec<u8>) -> SourceFile {
    let text = String::from_utf8_lossy(&bytes);
    let shown = neutralise(&text);
    if shown.as_bytes() == bytes.as_slice() {
        SourceFile::plain(bytes)
    } else {
        SourceFile {
            text: shown.into_bytes(),
            original: Some(bytes),
            tree: None,
        }
    }
}

/// Opens the folders `folders` under `dir` one by one (never through a link); `None` when
/// one is missing. `folders` is not empty.
fn open_path(dir: &SafeDir, folders: &[String]) -> Result<Option<SafeDir>, FsError> {
    let Some((first, rest)) = folders.split_first() else {
        return Ok(None);
    };
    let Some(mut current) = dir.open_child(first, false)? else {
        return Ok(None);
    };
    for name in rest {
        match current.open_child(name, false)? {
            Some(next) => current = next,
            None => return Ok(None),
        }
    }
    Ok(Some(current))
}

fn components(path: &Path) -> Vec<String> {
    path.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect()
}

/// A group file, or `None` (missing, or not readable: a warning says why).
fn read_group_file(
    dir: &SafeDir,
    path: &Path,
    warnings: &mut Vec<Warning>,
) -> Result<Option<Vec<u8>>, FsError> {
    let mut parts = components(path);
    let Some(name) = parts.pop() else {
        return Ok(None);
    };
    let read = match parts.is_empty() {
        true => dir.read_file(&name, crate::loader::MAX_FILE_BYTES),
        false => open_path(dir, &parts).and_then(|folder| match folder {
            Some(folder) => folder.read_file(&name, crate::loader::MAX_FILE_BYTES),
            None => Ok(None),
        }),
    };
    match read {
        Ok(bytes) => Ok(bytes),
        Err(err @ (FsError::Unsafe { .. } | FsError::TooLarge { .. })) => {
            warnings.push(Warning::GroupSourceUnread {
                path: path.display().to_string(),
                reason: crate::error::chain_text(&err),
            });
            Ok(None)
        }
        Err(err) => Err(err),
    }
}

/// The most files a group-files source reads from a group folder (the agent can make any
/// number); the rest are left out with a warning.
pub const MAX_GROUP_FILES: usize = 256;

/// The group folder's files matching `pattern`, `first` first and the others sorted by name,
/// each trimmed (as JavaScript trims), empty ones skipped, joined by a blank line; `None` when
/// none has text. A link, a FIFO, a device or a file larger than Claude Code reads is left
/// out with a warning, never followed or opened.
fn read_group_files(
    dir: &SafeDir,
    pattern: &crate::input::recipe::Pattern,
    first: Option<&str>,
    warnings: &mut Vec<Warning>,
) -> Result<Option<Vec<u8>>, FsError> {
    let mut names: Vec<String> = (dir.list_kinds()?.into_iter())
        .map(|(name, _)| name.to_string_lossy().into_owned())
        .filter(|name| pattern.matches(name).is_some())
        .collect();
    names.sort();
    if let Some(first) = first
        && let Some(at) = names.iter().position(|name| name == first)
    {
        let lead = names.remove(at);
        names.insert(0, lead);
    }
    if names.len() > MAX_GROUP_FILES {
        warnings.push(Warning::GroupSourceUnread {
            path: pattern.to_string(),
            reason: format!(
                "the group folder holds more than {MAX_GROUP_FILES} of them; the rest are left out (fix: remove the ones the group does not use)"
            ),
        });
        names.truncate(MAX_GROUP_FILES);
    }
    let mut parts: Vec<String> = Vec::new();
    for name in names {
        let Some(bytes) = read_group_file(dir, Path::new(&name), warnings)? else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        let trimmed = crate::loader::content::js_trim(&text);
        if !trimmed.is_empty() {
            parts.push(trimmed.to_owned());
        }
    }
    Ok((!parts.is_empty()).then(|| parts.join("\n\n").into_bytes()))
}

fn read_group_skills(
    dir: &SafeDir,
    skills_dir: &Path,
    file: &str,
    form: SkillForm,
    warnings: &mut Vec<Warning>,
) -> Result<Part, FsError> {
    let mut items = BTreeMap::new();
    let mut index = BTreeMap::new();
    let unread = |warnings: &mut Vec<Warning>, path: String, err: FsError| {
        warnings.push(Warning::GroupSourceUnread {
            path,
            reason: crate::error::chain_text(&err),
        })
    };
    let root = match open_path(dir, &components(skills_dir)) {
        Ok(root) => root,
        Err(err @ FsError::Unsafe { .. }) => {
            unread(warnings, skills_dir.display().to_string(), err);
            None
        }
        Err(err) => return Err(err),
    };
    if let Some(root) = root {
        let mut taken = 0;
        for (name, kind) in root.list_kinds()? {
            let name = name.to_string_lossy().into_owned();
            let shown = skills_dir.join(&name).display().to_string();
            if name.starts_with('.') || validate_name(&name).is_err() {
                continue;
            }
            let is_dir = match kind {
                Some(kind) => kind == crate::file_kind::FileKind::Dir,
                None => root.kind(&name)? == Some(crate::file_kind::FileKind::Dir),
            };
            if !is_dir {
                continue;
            }
            if taken == MAX_GROUP_SKILLS {
                warnings.push(Warning::GroupSourceUnread {
                    path: skills_dir.display().to_string(),
                    reason: format!(
                        "it holds more than {MAX_GROUP_SKILLS} skills; the rest are left out (fix: remove the skills the group does not use)"
                    ),
                });
                break;
            }
            taken += 1;
            let Some(folder) = root.open_child(&name, false)? else {
                continue;
            };
            let wanted = match form {
                SkillForm::Full => file,
                SkillForm::Index => SKILL_MD,
            };
            let bytes = match folder.read_file(wanted, crate::loader::MAX_FILE_BYTES) {
                Ok(bytes) => bytes,
                Err(err @ (FsError::Unsafe { .. } | FsError::TooLarge { .. })) => {
                    unread(warnings, format!("{shown}/{wanted}"), err);
                    None
                }
                Err(err) => return Err(err),
            };
            match form {
                SkillForm::Full => {
                    items.insert(name, bytes.map(neutralised));
                }
                SkillForm::Index => {
                    let meta = bytes.map(|b| skill_meta(&name, &b));
                    index.insert(name, meta);
                }
            }
        }
    }
    Ok(match form {
        SkillForm::Full => Part::Items(items),
        SkillForm::Index => Part::Index(index),
    })
}

// Sections

/// A group's sections, in the recipe's order, and what is worth telling about them: pure,
/// from its config, the container side, the group side (`group`, empty when the recipe reads
/// nothing there) and whether links are delivered (`originals`: a linked source's text is
/// its host bytes, which the link shows).
pub fn sections(
    layout: &Layout,
    config: &GroupConfig,
    sources: &Sources,
    group: &GroupParts,
    originals: bool,
    provider: Provider,
) -> Result<(Vec<Section>, Vec<Warning>), FragmentCollision> {
    let mut warnings: Vec<Warning> = config
        .unknown_keys
        .iter()
        .map(|key| Warning::UnknownKey { key: key.clone() })
        .collect();
    warnings.extend(config.ignored.iter().map(|ignored| Warning::IgnoredConfig {
        field: ignored.field.clone(),
        message: ignored.message.clone(),
    }));
    warnings.extend(dangling(layout, config, sources));
    warnings.extend(unknown_skills(layout, config, sources));
    warnings.extend(group.warnings.iter().cloned());
    let mut out = Vec::new();
    let nothing = Part::Nothing;
    for (index, source) in layout.recipe.sources.iter().enumerate() {
        let container = sources.parts.get(index).unwrap_or(&nothing);
        let own = group.parts.get(index).unwrap_or(&nothing);
        let text = |file: &SourceFile| match originals {
            true => file.host_bytes().to_vec(),
            false => file.text.clone(),
        };
        let first = out.len();
        // A shared source with a memory-note placeholder, as the group's backend gets it.
        let rendered = sources.rendered.get(&(index, provider));
        match (&source.kind, container, own) {
            (SourceKind::Shared { file, .. }, Part::File(found), _) => match rendered
                .or(found.as_ref())
            {
                Some(found) => out.push(Section {
                    id: SectionId::new(source.name.clone()),
                    origin: format!("container/{}", file.display()),
                    text: text(found),
                    rank: None,
                    file: match source.name == "shared-base" && file == Path::new(names::CLAUDE_MD)
                    {
                        true => ManagedPath::top(names::SHARED),
                        false => ManagedPath::fragment(&fragment_file(&source.name)),
                    },
                    link: Some(container_path(layout, source, None)),
                    scope: None,
                    tree: found.tree.clone(),
                    expected: Vec::new(),
                    size: 0,
                    group_owned: false,
                    sealed: false,
                    heading: None,
                }),
                None if source.name == "shared-base" => warnings.push(Warning::MissingSharedBase {
                    path: host_path(layout, source),
                }),
                None => {}
            },
            (SourceKind::GroupFile { file }, _, Part::File(Some(found))) => out.push(Section {
                id: SectionId::new(source.name.clone()),
                origin: format!("{} (the group's own file)", file.display()),
                text: found.text.clone(),
                rank: None,
                file: ManagedPath::fragment(&fragment_file(&source.name)),
                link: None,
                scope: None,
                tree: None,
                expected: Vec::new(),
                size: 0,
                group_owned: true,
                sealed: false,
                heading: None,
            }),
            (
                SourceKind::Skills {
                    root,
                    dir,
                    file,
                    select,
                    ..
                },
                _,
                _,
            ) => {
                let part = match root {
                    SkillRoot::Container => container,
                    SkillRoot::Group => own,
                };
                let selected = |skill: &str| skill_selected(*root, *select, config, skill);
                match part {
                    Part::Items(items) => {
                        for (skill, found) in items {
                            let Some(found) = found else { continue };
                            if !selected(skill) {
                                continue;
                            }
                            let name = format!("{}:{skill}", source.name);
                            let builtin = source.is_builtin_skills();
                            out.push(Section {
                                origin: match root {
                                    SkillRoot::Container => {
                                        format!("container/{}/{skill}/{file}", dir.display())
                                    }
                                    SkillRoot::Group => format!(
                                        "{}/{skill}/{file} (the group's own skill)",
                                        dir.display()
                                    ),
                                },
                                text: text(found),
                                rank: Some(0),
                                file: ManagedPath::fragment(&match builtin {
                                    true => format!("{skill}.md"),
                                    false => fragment_file(&name),
                                }),
                                link: (*root == SkillRoot::Container)
                                    .then(|| container_path(layout, source, Some(skill))),
                                scope: (*root == SkillRoot::Container)
                                    .then(|| container_base(layout, source).join(skill)),
                                tree: found.tree.clone(),
                                expected: Vec::new(),
                                size: 0,
                                group_owned: *root == SkillRoot::Group,
                                sealed: false,
                                heading: None,
                                id: SectionId::new(name),
                            });
                        }
                    }
                    Part::Index(index) => {
                        let listed: Vec<(&String, &SkillMeta)> = index
                            .iter()
                            .filter(|(skill, _)| selected(skill))
                            .filter_map(|(skill, meta)| Some((skill, meta.as_ref()?)))
                            .collect();
                        if listed.is_empty() {
                            continue;
                        }
                        let base = container_base(layout, source);
                        let mut body = String::from(
                            "## Skills\n\nEach skill below is a folder of instructions. Before you use one, read its SKILL.md (the path after its name).\n\n",
                        );
                        for (skill, meta) in listed {
                            body.push_str(&format!(
                                "- **{}** ({}): {}\n",
                                display_name(&meta.name),
                                base.join(skill).join(SKILL_MD).display(),
                                meta.description.as_deref().unwrap_or("(no description)")
                            ));
                        }
                        let name = format!("{}-index", source.name);
                        out.push(Section {
                            origin: match root {
                                SkillRoot::Container => format!(
                                    "container/{}/*/SKILL.md (names and descriptions)",
                                    dir.display()
                                ),
                                SkillRoot::Group => format!(
                                    "{}/*/SKILL.md in the group folder (names and descriptions)",
                                    dir.display()
                                ),
                            },
                            text: neutralise(&body).into_bytes(),
                            rank: Some(0),
                            file: ManagedPath::fragment(&fragment_file(&name)),
                            link: None,
                            scope: None,
                            tree: None,
                            expected: Vec::new(),
                            size: 0,
                            group_owned: *root == SkillRoot::Group,
                            sealed: false,
                            heading: None,
                            id: SectionId::new(name),
                        });
                    }
                    _ => {}
                }
            }
            (
                SourceKind::Fragments {
                    dir,
                    pattern,
                    drop_listed_in,
                    drop,
                    ..
                },
                Part::Items(items),
                _,
            ) => {
                let (dropped, ignored) = fragment_drops(source, drop_listed_in, drop, config);
                warnings.extend(ignored);
                for (name, found) in items {
                    let Some(found) = found else { continue };
                    if dropped.contains(name) {
                        continue;
                    }
                    let id = format!("{}:{name}", source.name);
                    out.push(Section {
                        origin: format!("container/{}/{}", dir.display(), pattern.file_name(name)),
                        text: text(found),
                        rank: Some(1),
                        file: ManagedPath::fragment(&fragment_file(&id)),
                        link: Some(container_path(layout, source, Some(name))),
                        scope: None,
                        tree: found.tree.clone(),
                        expected: Vec::new(),
                        size: 0,
                        group_owned: false,
                        sealed: false,
                        heading: None,
                        id: SectionId::new(id),
                    });
                }
            }
            (SourceKind::Mcp, _, _) => {
                for (server, instructions) in &config.mcp_instructions {
                    let id = format!("{}:{server}", source.name);
                    let shown = display_name(server);
                    out.push(Section {
                        origin: format!("container.json mcpServers.{shown}.instructions"),
                        text: mcp_fragment(server, instructions),
                        rank: Some(1),
                        file: ManagedPath::fragment(&fragment_file(&id)),
                        link: None,
                        scope: None,
                        tree: None,
                        expected: Vec::new(),
                        size: 0,
                        group_owned: false,
                        sealed: false,
                        heading: None,
                        id: SectionId::new(id),
                    });
                }
            }
            (SourceKind::GroupFiles { pattern, .. }, _, Part::File(Some(found))) => {
                out.push(Section {
                    group_owned: true,
                    ..Section::whole_source(
                        source,
                        format!("{pattern} in the group folder (the group's own files)"),
                        found.text.clone(),
                    )
                })
            }
            (SourceKind::NativeSkills, _, _) => {
                if let Some(body) = provider.spec().native_skills_section() {
                    let mut text = neutralise(&body);
                    text.push('\n');
                    out.push(Section::whole_source(
                        source,
                        format!("clawmd's note on {provider}'s native skills"),
                        text.into_bytes(),
                    ))
                }
            }
            _ => {}
        }
        // The source's heading and drop rank on each section it made.
        let prefix = format!("{}:", source.name);
        for section in &mut out[first..] {
            let item = section.id.as_str().strip_prefix(&prefix);
            section.heading = Section::heading_of(source, item);
            if section.rank.is_some()
                && let Some(rank) = source.rank
            {
                section.rank = Some(rank);
            }
        }
    }
    // Two sections in one file of `.claude-fragments/` would overwrite each other.
    let mut files: BTreeMap<&ManagedPath, &SectionId> = BTreeMap::new();
    for section in &out {
        if let Some(first) = files.insert(&section.file, &section.id) {
            return Err(FragmentCollision {
                first: first.name(),
                second: section.id.name(),
                file: section.file.name.clone(),
            });
        }
    }
    Ok((out, warnings))
}

/// The notice of the recipe's `omitted` source for the sections of `all` that are not in
/// `kept` (dropped over budget), named by their headings where they have one: `None` when the
/// recipe has no such source or nothing was dropped. Its text is nanoclaw's (the
/// "Omitted for size" section of `src/project-doc-compose.ts`).
pub fn omitted_notice(layout: &Layout, all: &[Section], kept: &[Section]) -> Option<Section> {
    let source = (layout.recipe.sources.iter()).find(|s| s.kind == SourceKind::Omitted)?;
    let dropped: Vec<String> = (all.iter())
        .filter(|s| !kept.iter().any(|k| k.id == s.id))
        .map(|s| (s.heading.clone()).unwrap_or_else(|| display_name(s.id.as_str()).into_owned()))
        .collect();
    if dropped.is_empty() {
        return None;
    }
    let text = format!(
        "These instruction sections were omitted to fit the project-document size cap: {}. Their tools still work; consult each tool's own description.\n",
        dropped.join(", ")
    );
    Some(Section {
        heading: Section::heading_of(source, None),
        ..Section::whole_source(
            source,
            "clawmd's notice of the sections dropped over the budget".to_owned(),
            neutralise(&text).into_bytes(),
        )
    })
}

/// Whether a skill root with these settings gives a group `skill`.
fn skill_selected(root: SkillRoot, select: Select, config: &GroupConfig, skill: &str) -> bool {
    match (select, root) {
        (Select::All, _) | (Select::Config, SkillRoot::Group) => true,
        (Select::Config, SkillRoot::Container) => config.skills.enables(skill),
    }
}

/// The fragments a group's switches leave out, and a warning when the key listing them does
/// not hold a list of names.
fn fragment_drops(
    source: &Source,
    drop_listed_in: &Option<String>,
    drop: &[crate::input::recipe::DropRule],
    config: &GroupConfig,
) -> (BTreeSet<String>, Option<Warning>) {
    let mut dropped: BTreeSet<String> = BTreeSet::new();
    let mut ignored = None;
    if let Some(key) = drop_listed_in {
        match config.switches.get(key) {
            None | Some(serde_json::Value::Null) => {}
            Some(serde_json::Value::Array(list))
                if list.iter().all(serde_json::Value::is_string) =>
            {
                dropped.extend(list.iter().filter_map(|v| v.as_str().map(str::to_owned)));
            }
            Some(other) => {
                ignored = Some(Warning::IgnoredConfig {
                    field: key.clone(),
                    message: format!(
                        "{other} is not a list of {} names, so no {} fragment is left out by it",
                        source.name, source.name
                    ),
                })
            }
        }
    }
    for rule in drop {
        if rule
            .when
            .iter()
            .all(|(key, value)| config.switch_text(key).as_deref() == Some(value))
        {
            dropped.extend(rule.names.iter().cloned());
        }
    }
    (dropped, ignored)
}

/// The container items (skills, fragments) a group with this config gets, by source, as
/// `(source, item name, section name)`.
fn container_items<'a>(
    layout: &'a Layout,
    config: &'a GroupConfig,
    sources: &'a Sources,
) -> Vec<(&'a Source, &'a str, String)> {
    let mut items = Vec::new();
    for (source, part) in layout.recipe.sources.iter().zip(&sources.parts) {
        let Part::Items(found) = part else { continue };
        match &source.kind {
            SourceKind::Skills {
                root: SkillRoot::Container,
                select,
                ..
            } => items.extend(
                found
                    .keys()
                    .filter(|skill| skill_selected(SkillRoot::Container, *select, config, skill))
                    .map(|skill| (source, skill.as_str(), format!("{}:{skill}", source.name))),
            ),
            SourceKind::Fragments {
                drop_listed_in,
                drop,
                ..
            } => {
                let (dropped, _) = fragment_drops(source, drop_listed_in, drop, config);
                items.extend(
                    found
                        .keys()
                        .filter(|name| !dropped.contains(*name))
                        .map(|name| (source, name.as_str(), format!("{}:{name}", source.name))),
                );
            }
            _ => {}
        }
    }
    items
}

/// The container-side items (skills and fragments, by section name) a group with `config`
/// gets, present or not: what its plan depends on besides the shared files, the listings and
/// the host's and runner's files ([`host_reads::HostLog::begin_item`]).
pub fn items_used(layout: &Layout, config: &GroupConfig, sources: &Sources) -> Vec<String> {
    (container_items(layout, config, sources).into_iter())
        .map(|(_, _, section)| section)
        .collect()
}

/// The first container item a group with this config gets whose file cannot be used, as
/// `(section, the skill's name when it is one of the built-in root's, why)`: the group fails
/// (the groups that do not get it compose).
pub fn unusable_for(
    layout: &Layout,
    config: &GroupConfig,
    sources: &Sources,
) -> Option<(String, Option<String>, Unusable)> {
    if sources.unusable.is_empty() {
        return None;
    }
    container_items(layout, config, sources)
        .into_iter()
        .find_map(|(source, item, section)| {
            let unusable = sources.unusable.get(&section)?.clone();
            let skill = source.is_builtin_skills().then(|| item.to_owned());
            Some((section, skill, unusable))
        })
}

/// A warning for each item a group gets whose file is a link to nothing.
fn dangling(layout: &Layout, config: &GroupConfig, sources: &Sources) -> Vec<Warning> {
    if sources.dangling.is_empty() {
        return Vec::new();
    }
    container_items(layout, config, sources)
        .into_iter()
        .filter_map(|(_, item, section)| {
            let (path, target) = sources.dangling.get(&section)?;
            Some(Warning::DanglingInstructions {
                skill: item.to_owned(),
                section,
                path: path.clone(),
                target: target.clone(),
            })
        })
        .collect()
}

/// `skills` entries that no container skill root selected by the config has, with the
/// nearest one that exists.
fn unknown_skills(layout: &Layout, config: &GroupConfig, sources: &Sources) -> Vec<Warning> {
    let SkillSelection::Only(selected) = &config.skills else {
        return Vec::new();
    };
    let mut known: BTreeSet<&str> = BTreeSet::new();
    let mut roots = 0;
    for (source, part) in layout.recipe.sources.iter().zip(&sources.parts) {
        if !matches!(
            source.kind,
            SourceKind::Skills {
                root: SkillRoot::Container,
                select: Select::Config,
                ..
            }
        ) {
            continue;
        }
        roots += 1;
        match part {
            Part::Items(items) => known.extend(items.keys().map(String::as_str)),
            Part::Index(items) => known.extend(items.keys().map(String::as_str)),
            _ => {}
        }
    }
    if roots == 0 {
        return Vec::new();
    }
    let mut unknown = selected
        .iter()
        .filter(|skill| !known.contains(skill.as_str()));
    let mut warnings: Vec<Warning> = unknown
        .by_ref()
        .take(crate::plan::MAX_UNKNOWN_SKILLS_NAMED)
        .map(|skill| Warning::UnknownSkill {
            skill: skill.clone(),
            suggestion: crate::suggest::nearest(skill, known.iter().copied()).map(str::to_owned),
        })
        .collect();
    let more = unknown.count();
    if more > 0 {
        warnings.push(Warning::MoreUnknownSkills { count: more });
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    const CANON: &str =
        "## Memory\n\nStanding role.\n\n{{provider-memory-note}}\n\n## Conversation history\n";

    #[test]
    fn the_memory_note_replaces_its_paragraph_or_goes_with_the_blank_line_before_it() {
        let note = Provider::Codex.spec().memory_note();
        let codex = render_note(
            CANON.as_bytes(),
            "{{provider-memory-note}}",
            note.as_deref(),
        );
        assert_eq!(
            String::from_utf8(codex).unwrap(),
            "## Memory\n\nStanding role.\n\nDo not use `AGENTS.local.md` or `AGENTS.override.md` for memory.\n\n## Conversation history\n"
        );
        let claude = render_note(CANON.as_bytes(), "{{provider-memory-note}}", None);
        assert_eq!(
            String::from_utf8(claude).unwrap(),
            "## Memory\n\nStanding role.\n\n## Conversation history\n"
        );
        // A file without the paragraph is as it is (nanoclaw's older canon).
        let older = "## Memory\n\nNo placeholder here {{provider-memory-note}} inline.\n";
        assert_eq!(
            render_note(
                older.as_bytes(),
                "{{provider-memory-note}}",
                note.as_deref()
            ),
            older.as_bytes()
        );
    }

    #[test]
    fn every_backend_gets_its_own_rendering_of_a_shared_source_with_a_memory_note() {
        let mut layout = Layout::under_root(Path::new("/r"));
        layout.recipe = crate::input::recipe::Recipe {
            sources: vec![Source {
                kind: SourceKind::Shared {
                    file: PathBuf::from("CLAUDE.md"),
                    mount: None,
                    memory_note: Some("{{provider-memory-note}}".to_owned()),
                },
                ..Source::shared("CLAUDE.md")
            }],
            memory: crate::input::recipe::MemoryFile::None,
        };
        let tree = alone::SourceTree {
            root: PathBuf::from("/app/CLAUDE.md"),
            files: BTreeMap::from([(
                PathBuf::from("/app/CLAUDE.md"),
                alone::TreeNode::File(CANON.as_bytes().to_vec()),
            )]),
        };
        let parts = vec![Part::File(Some(SourceFile {
            tree: Some(std::sync::Arc::new(tree)),
            ..SourceFile::plain(CANON.as_bytes().to_vec())
        }))];
        let rendered = rendered_notes(&layout, &parts);
        assert_eq!(rendered.len(), Provider::ALL.len());
        for provider in Provider::ALL {
            let file = &rendered[&(0, provider)];
            let text = String::from_utf8(file.text.clone()).unwrap();
            assert!(!text.contains("{{provider-memory-note}}"), "{provider}");
            assert_eq!(
                text.contains("for memory."),
                matches!(provider, Provider::Codex | Provider::Cursor),
                "{provider}"
            );
            // The source's own file in its tree says the same: it is composed from that.
            let tree = file.tree.as_ref().unwrap();
            let Some(alone::TreeNode::File(bytes)) = tree.files.get(&tree.root) else {
                panic!("{provider}")
            };
            assert_eq!(bytes, &file.text, "{provider}");
        }
    }
}
