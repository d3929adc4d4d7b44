//! **Plan**: the desired state of a group, as plain values, made purely from the input.
//!
//! * [`target`]: what a group is composed as (delivery mode, backend, entry point, budgets);
//! * [`delivery`]: everything that depends on the delivery mode or the agent's backend: the
//!   group's plan ([`delivery::GroupPlan`], made by [`delivery::plan_delivery`], pure), its
//!   documents, the managed policy, the other backends' guards, and the verdict (the loader
//!   run on a [`snapshot`] of the group as compose leaves it) with its cache;
//! * this module: the values a plan is made of: where a managed path lives ([`ManagedPath`],
//!   [`Place`]), what it holds ([`Content`], [`Desired`]), the [`Warning`]s, the
//!   generated-file header with its content hash, and MCP fragments (fenced).
//!
//! A new backend or delivery mode goes in [`delivery`] (and its value in [`target`]).

pub mod delivery;
pub mod providers;
pub mod snapshot;
pub mod target;

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

use crate::input::layout::Layout;
use crate::input::names;
pub use crate::plan::target::Delivery;
pub use crate::safe_name::short_hash;

/// Where a managed path lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Place {
    /// Directly in the group folder.
    Group,
    /// In the group's `.claude-fragments/` (bound read-only as a folder in copy and link
    /// delivery).
    Fragments,
    /// In the group's bind folder in clawmd's state (`<state>/binds/<group>/`): the entry
    /// point, bound read-only over its mount point in the group folder.
    Bind,
    /// In the group's managed-policy folder (`<state>/binds/<group>/managed/`), bound
    /// read-only as a folder at the managed-policy mount point (managed delivery).
    Managed,
    /// In a folder of the group's guard (`<state>/binds/<group>/guard/…`: one of
    /// [`crate::plan::delivery::guard::GUARD_DIRS`], relative to the bind folder), for a Codex,
    /// Gemini CLI or opencode group: files bound read-only over the backend's own
    /// configuration.
    Guard(&'static str),
}

/// A path clawmd manages for a group: in its folder, or in its bind folder in the state.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ManagedPath {
    /// Which folder.
    pub place: Place,
    /// The file name.
    pub name: String,
}

impl ManagedPath {
    /// A file directly in the group folder.
    pub fn top(name: &str) -> Self {
        ManagedPath {
            place: Place::Group,
            name: name.to_owned(),
        }
    }

    /// A file in `.claude-fragments/`.
    pub fn fragment(name: &str) -> Self {
        ManagedPath {
            place: Place::Fragments,
            name: name.to_owned(),
        }
    }

    /// A file in the group's bind folder.
    pub fn bind(name: &str) -> Self {
        ManagedPath {
            place: Place::Bind,
            name: name.to_owned(),
        }
    }

    /// A file in the group's managed-policy folder.
    pub fn managed(name: &str) -> Self {
        ManagedPath {
            place: Place::Managed,
            name: name.to_owned(),
        }
    }

    /// A file in the guard folder `dir` (relative to the bind folder).
    pub fn guard(dir: &'static str, name: &str) -> Self {
        ManagedPath {
            place: Place::Guard(dir),
            name: name.to_owned(),
        }
    }

    /// Whether it is directly in the group folder and named `name`.
    pub fn is_top(&self, name: &str) -> bool {
        self.place == Place::Group && self.name == name
    }

    /// Where it is on the host, for `group` of `layout`.
    pub fn host_path(&self, layout: &Layout, group: &str) -> PathBuf {
        let dir = match self.place {
            Place::Group => layout.group_dir(group),
            Place::Fragments => layout.group_dir(group).join(names::FRAGMENTS),
            Place::Bind => layout.bind_dir(group),
            Place::Managed => layout.managed_dir(group),
            Place::Guard(folder) => layout.bind_dir(group).join(folder),
        };
        dir.join(&self.name)
    }
}

/// How a managed path is named in reports: relative to the group folder, and `state:NAME`
/// (`state:managed/NAME`) for a file in the group's bind folder in clawmd's state.
impl fmt::Display for ManagedPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.place {
            Place::Group => f.write_str(&self.name),
            Place::Fragments => write!(f, "{}/{}", names::FRAGMENTS, self.name),
            Place::Bind => write!(f, "state:{}", self.name),
            Place::Managed => write!(f, "state:{}/{}", names::MANAGED, self.name),
            Place::Guard(folder) => write!(f, "state:{folder}/{}", self.name),
        }
    }
}

/// What a managed path must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// A symlink with this target.
    Symlink(PathBuf),
    /// A regular file with these bytes.
    File(Vec<u8>),
    /// A regular file, created empty when missing and never modified afterwards.
    Seed,
    /// A mount point in the group folder, which the runner binds a file of the state over:
    /// created with these bytes when missing; a document clawmd composed there in the layout
    /// before bind folders (whole, or kept first when edited by hand) is replaced once; and
    /// anything else is left as it is, since renaming over (or removing) a mount point
    /// detaches the bind in every running container.
    Placeholder(Vec<u8>),
}

/// One entry of the desired state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desired {
    /// Where.
    pub path: ManagedPath,
    /// What.
    pub content: Content,
}

/// Something worth telling the operator that does not stop the compose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "code", rename_all = "kebab-case")]
pub enum Warning {
    /// `skills` lists a skill that `container/skills/` does not have.
    UnknownSkill {
        /// The skill name.
        skill: String,
        /// The existing skill probably meant.
        #[serde(skip_serializing_if = "Option::is_none")]
        suggestion: Option<String>,
    },
    /// An enabled skill's `instructions.md` is a symlink to nothing.
    DanglingInstructions {
        /// The skill (or fragment) name.
        skill: String,
        /// The section it would be (`skill:<name>`, `module:<name>`).
        section: String,
        /// The link on the host.
        path: PathBuf,
        /// Where it points.
        target: PathBuf,
    },
    /// More skills that `container/skills/` does not have than are named one by one.
    MoreUnknownSkills {
        /// How many more.
        count: usize,
    },
    /// A key in `container.json` that is a near miss of one clawmd reads: probably a typo.
    UnknownKey {
        /// The key and what was probably meant.
        key: crate::input::config::UnknownKey,
    },
    /// `container/CLAUDE.md` is missing, so there is no shared base to deliver.
    MissingSharedBase {
        /// The host path that is missing.
        path: PathBuf,
    },
    /// A whole optional section was left out because the target's budget was exceeded.
    SectionDropped {
        /// `skill:<name>` or `mcp:<server>`.
        section: String,
        /// Its size.
        bytes: u64,
        /// The entry point.
        target: String,
        /// The budget.
        budget: u64,
    },
    /// The deployment reads the configs its runner hands (`"groupConfig": "handed"`) and
    /// none was handed for the group yet: composed from its `container.json`, which lacks
    /// what the runner keeps apart (nanoclaw's `cli_scope`, in its database).
    ConfigNotHanded {
        /// The `container.json` read instead.
        path: PathBuf,
    },
    /// A value in the group's config that clawmd ignores (a provider it does not compose
    /// for, a switch that is not what the recipe expects).
    IgnoredConfig {
        /// The JSON path of the value.
        field: String,
        /// What is ignored and what clawmd does instead.
        message: String,
    },
    /// A file or folder of the group that the recipe reads could not be read (a link, a
    /// device, too large): it is left out.
    GroupSourceUnread {
        /// The path in the group folder.
        path: String,
        /// Why.
        reason: String,
    },
    /// Something in the host's own managed policy (`hostManagedDir`) that the groups'
    /// managed folders do not take as it is: a memory switch clawmd pins, a file it does not
    /// merge.
    HostManaged {
        /// What, and the fix.
        message: String,
    },
    /// The group folder's entry point is a mount point the runner binds the composed file
    /// over, and it holds text of its own that no container shows: left as it is, since
    /// renaming over a mount point would detach the bind in every running container.
    MountPointEdited {
        /// The entry point.
        file: String,
        /// Where the group's own text goes ([`crate::input::recipe::Recipe::own_text_file`]).
        own_text: String,
    },
    /// The agent's own memory file is not a regular file (a link, a FIFO, a device, a
    /// folder): compose leaves it as it is and the group composes without it.
    LocalMemoryUnusable {
        /// The file (`CLAUDE.local.md`).
        file: String,
        /// What is there.
        found: crate::file_kind::FileKind,
    },
    /// A file in `.claude-fragments` that clawmd did not write (or cannot vouch for) and no
    /// plan wants: left as it is, never removed.
    ForeignFragment {
        /// Its name in `.claude-fragments`.
        file: String,
        /// What it is.
        found: crate::file_kind::FileKind,
    },
    /// A flat document's copy of the group's memory did not fit in the room the operator's
    /// sections leave in the budget: only its first `kept` bytes are in the document (no
    /// operator's section is ever dropped for it).
    LocalMemoryCut {
        /// The memory's size.
        bytes: u64,
        /// The bytes of it in the document.
        kept: u64,
        /// The entry point.
        target: String,
        /// The budget.
        budget: u64,
    },
    /// Even without every optional section, what must be delivered exceeds the budget.
    OverBudget {
        /// The entry point.
        target: String,
        /// Its size.
        bytes: u64,
        /// The budget.
        budget: u64,
    },
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::UnknownSkill { skill, suggestion } => {
                write!(
                    f,
                    "container.json enables skill {skill:?}, but container/skills/{skill}/ does not exist; it is ignored"
                )?;
                match suggestion {
                    Some(meant) => write!(
                        f,
                        "; did you mean `{meant}`? (fix: correct the name in `skills`)"
                    ),
                    None => write!(f, " (fix: add the skill or remove it from `skills`)"),
                }
            }
            Warning::DanglingInstructions {
                section,
                path,
                target,
                ..
            } => write!(
                f,
                "{} is a link to {}, which does not exist: {section} does not reach the agent (fix: point the link at a file, or replace it with the file)",
                path.display(),
                target.display()
            ),
            Warning::MoreUnknownSkills { count } => write!(
                f,
                "container.json enables {count} more skills that container/skills/ does not have; they are ignored (fix: remove them from `skills`, or add their folders)"
            ),
            Warning::UnknownKey { key } => write!(f, "{key}"),
            Warning::IgnoredConfig { field, message } => {
                write!(f, "container.json `{field}`: {message}")
            }
            Warning::ConfigNotHanded { path } => write!(
                f,
                "no config handed for this group yet (\"groupConfig\": \"handed\"): composed from {}, which lacks what the runner keeps apart (nanoclaw's cli_scope), so the group may get modules its runner leaves out (fix: the runner's next spawn hands the config; or `clawmd compose GROUP --config FILE` with it)",
                path.display()
            ),
            Warning::GroupSourceUnread { path, reason } => write!(
                f,
                "{path} in the group folder is left out of the group's memory: {reason}"
            ),
            Warning::HostManaged { message } => write!(f, "host managed policy: {message}"),
            Warning::MountPointEdited { file, own_text } => write!(
                f,
                "{file} in the group folder holds text that never reaches the agent: the runner binds the composed {file} over it (clawmd mounts); it is left as it is, since replacing it would detach that bind in running containers (fix: move the text into {own_text}, then delete {file} while the group's container is stopped; compose writes the placeholder again)"
            ),
            Warning::LocalMemoryUnusable { file, found } => write!(
                f,
                "{file} in the group folder is {}, not a regular file: the group's own memory is not read from it, and compose leaves it as it is (the guardrails are composed all the same) (fix: replace it with a regular file holding the group's memory, or delete it while the group's container is stopped; compose seeds an empty one)",
                found.describe()
            ),
            Warning::ForeignFragment { file, found } => write!(
                f,
                ".claude-fragments/{file} ({}) was not written by clawmd, or not as it is now, and nothing imports it: compose leaves it as it is and never removes it (fix: move it out of .claude-fragments, or delete it if nobody needs it)",
                found.describe()
            ),
            Warning::LocalMemoryCut {
                bytes,
                kept,
                target,
                budget,
            } => write!(
                f,
                "CLAUDE.local.md ({bytes} bytes) does not fit in {target}'s budget of {budget} bytes after the operator's sections: only its first {kept} bytes are in {target}, and no operator's section is dropped to make room for it (fix: shorten CLAUDE.local.md, or raise the budget in clawmd.json)"
            ),
            Warning::MissingSharedBase { path } => write!(
                f,
                "{} does not exist, so the group gets no shared base (fix: create it)",
                path.display()
            ),
            Warning::SectionDropped {
                section,
                bytes,
                target,
                budget,
            } => write!(
                f,
                "{section} ({bytes} bytes) was dropped from {target}: over its budget of {budget} bytes (fix: shorten it, disable it in container.json, or raise the budget in clawmd.json)"
            ),
            Warning::OverBudget {
                target,
                bytes,
                budget,
            } => write!(
                f,
                "{target} is {bytes} bytes, over its budget of {budget} bytes, even with every optional section dropped; the shared base and the local memory are kept whole (fix: shorten them, or raise the budget in clawmd.json)"
            ),
        }
    }
}

/// A config that cannot be composed even though it parsed: two sections would be written to
/// one file of `.claude-fragments/` (copy and link delivery).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}; fix: {}", self.problem(), self.fix())]
pub struct FragmentCollision {
    /// The section written first (`skill:mcp-db`).
    pub first: String,
    /// The other one (`mcp:db`).
    pub second: String,
    /// The shared file name.
    pub file: String,
}

impl FragmentCollision {
    /// How to fix it: the text its message ends with, after "; fix: ".
    pub fn fix(&self) -> &'static str {
        "rename the MCP server in container.json (or a source's `name` in clawmd.json)"
    }

    /// What the message says before its fix.
    pub fn problem(&self) -> String {
        let FragmentCollision {
            first,
            second,
            file,
        } = self;
        format!("{first} and {second} would both be written to .claude-fragments/{file}")
    }
}

/// The most unknown skills named one by one (each with the nearest skill that exists) in a
/// group's warnings; the rest are counted in one warning. A config may list hundreds of
/// thousands of names: naming (and looking for the nearest of) each would make the report,
/// and the time to make it, grow with the config times the skills folder.
pub const MAX_UNKNOWN_SKILLS_NAMED: usize = 20;

/// The start of the header line of every composed `CLAUDE.md`.
pub const HEADER_START: &str = "<!-- Generated by clawmd";
const HASH_MARK: &str = "clawmd-sha256:";

/// The composed `CLAUDE.md` for these import lines: a header comment (stripped by Claude Code
/// before the agent sees it) carrying a hash of the body, then one import per line.
pub fn composed_claude_md(imports: &[String]) -> Vec<u8> {
    composed_claude_md_for(imports, true)
}

/// [`composed_claude_md`] for a recipe with or without `CLAUDE.local.md` (`local_memory`).
pub fn composed_claude_md_for(imports: &[String], local_memory: bool) -> Vec<u8> {
    let mut body = String::new();
    for line in imports {
        body.push_str(line);
        body.push('\n');
    }
    composed_document_for(&body, local_memory)
}

/// A generated document: clawmd's header (with the hash of `body`), then `body`.
pub fn composed_document(body: &str) -> Vec<u8> {
    composed_document_for(body, true)
}

/// [`composed_document`] for a recipe with or without `CLAUDE.local.md`: without it, the
/// header says nothing of where the group's memory goes (the recipe's own instructions do:
/// nanoclaw's `memory/` tree).
pub fn composed_document_for(body: &str, local_memory: bool) -> Vec<u8> {
    with_header(body, local_memory).into_bytes()
}

/// The header's sentence on the group's own memory, where the recipe gives it
/// `CLAUDE.local.md`.
const LOCAL_MEMORY_NOTE: &str = " Put this group's own memory in CLAUDE.local.md.";

/// The length of [`composed_document_for`]`(body, local_memory)`, without hashing `body` (the
/// header's hash always has the same length).
pub fn composed_len(body: &str, local_memory: bool) -> usize {
    composed_len_of(body.len(), local_memory)
}

/// [`composed_len`] of a body `body_len` bytes long.
pub fn composed_len_of(body_len: usize, local_memory: bool) -> usize {
    header_line(&"0".repeat(crate::safe_name::SHORT_HASH_HEX), local_memory).len() + 1 + body_len
}

fn with_header(body: &str, local_memory: bool) -> String {
    let header = header_line(&short_hash(body.as_bytes()), local_memory);
    let mut text = String::with_capacity(header.len() + 1 + body.len());
    text.push_str(&header);
    text.push('\n');
    text.push_str(body);
    text
}

/// The first line of a composed document whose body hashes to `hash` ([`short_hash`]).
fn header_line(hash: &str, local_memory: bool) -> String {
    let note = if local_memory { LOCAL_MEMORY_NOTE } else { "" };
    format!(
        "{HEADER_START} from container.json: do not edit, edits are moved aside at the next compose.{note} {HASH_MARK}{hash} -->"
    )
}

/// The start of a mount point's placeholder in a group folder.
pub const PLACEHOLDER_START: &str = "<!-- clawmd: the mount point of ";

/// What a group folder holds at the mount point of the entry point `name`, which the runner
/// binds the composed `name` over from clawmd's state folder: an HTML comment (Claude Code
/// strips it, so even a container without the bind loads nothing from it) saying where the
/// composed file is and where the group's own memory belongs.
pub fn mount_point_placeholder(name: &str) -> Vec<u8> {
    mount_point_placeholder_for(name, true)
}

/// [`mount_point_placeholder`] for a recipe with or without `CLAUDE.local.md`.
pub fn mount_point_placeholder_for(name: &str, local_memory: bool) -> Vec<u8> {
    let note = if local_memory { LOCAL_MEMORY_NOTE } else { "" };
    format!(
        "{PLACEHOLDER_START}{name}: the runner binds the composed {name} from clawmd's state folder over this file (see `clawmd mounts GROUP`), so nothing written here reaches the agent.{note} -->\n"
    )
    .into_bytes()
}

/// Whether `text` carries clawmd's header (it was composed, possibly edited since).
pub fn is_composed(text: &[u8]) -> bool {
    text.starts_with(HEADER_START.as_bytes())
}

/// The start of the first line of the `CLAUDE.md` nanoclaw's own composer writes
/// (`src/claude-md-compose.ts`: `<!-- Composed at spawn — do not edit. Edit CLAUDE.local.md
/// for per-group content. -->`).
pub const NANOCLAW_HEADER_START: &str = "<!-- Composed at spawn \u{2014} do not edit";

/// The first line of the flat document today's nanoclaw composes for every provider
/// (`src/project-doc-compose.ts`, v2.3-era: `COMPOSED_HEADER`, whose prefix its
/// `migrate-memory` skill keys on).
pub const NANOCLAW_PROJECT_DOC_HEADER: &str = "<!-- Composed at spawn - do not edit. Standing instructions: instructions.prepend.md. Memory: memory/. -->";

/// Whether `text` starts with nanoclaw's generated-file header, v2.0's or today's (composed
/// by nanoclaw, possibly edited since): migrate leaves it to compose, never taking it for
/// someone's memory.
pub fn has_nanoclaw_header(text: &[u8]) -> bool {
    text.starts_with(NANOCLAW_HEADER_START.as_bytes())
        || text.starts_with(NANOCLAW_PROJECT_DOC_HEADER.as_bytes())
}

/// Whether `text` is a `CLAUDE.md` exactly as nanoclaw's composer writes it: its header, then
/// only its import lines (`@./.claude-shared.md`, `@./.claude-fragments/<file>`). It holds
/// nobody's text, so compose replaces it without keeping a copy; any other line makes it a
/// hand edit, kept like any other. Today's flat document (its header first) is nanoclaw's in
/// any case: nanoclaw writes it whole at every spawn, from sources that stay.
pub fn is_nanoclaw_generated(text: &[u8]) -> bool {
    // Today's flat document is nanoclaw's whole: its persona is a copy of the group's
    // `*.prepend.md`, which stay, and the rest is the operator's sources.
    if text.starts_with(format!("{NANOCLAW_PROJECT_DOC_HEADER}\n").as_bytes()) {
        return true;
    }
    let Ok(text) = std::str::from_utf8(text) else {
        return false;
    };
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    if !header.starts_with(NANOCLAW_HEADER_START) || !header.trim_end().ends_with("-->") {
        return false;
    }
    lines.all(|line| {
        let line = line.trim_end();
        line.is_empty()
            || line == "@./.claude-shared.md"
            || line
                .strip_prefix("@./.claude-fragments/")
                .is_some_and(|file| {
                    !file.is_empty() && !file.contains('/') && !file.contains(char::is_whitespace)
                })
    })
}

/// Whether `text` is exactly as clawmd wrote it: the header's hash matches the body.
pub fn is_pristine(text: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(text) else {
        return false;
    };
    let Some((first, body)) = text.split_once('\n') else {
        return false;
    };
    let hash = short_hash(body.as_bytes());
    header_line(&hash, true) == first || header_line(&hash, false) == first
}

/// The content of `.claude-fragments/mcp-<server>.md`.
///
/// The instructions are text from a config file, not a place to pull files from, so they are
/// written inside a fenced code block whose fence is longer than any backtick run in the text:
/// Claude Code never treats an `@path` inside a code block as an import (verified with
/// claude-view on 2.1.328, see tests/e2e), and HTML comments inside it are kept verbatim.
pub fn mcp_fragment(server: &str, instructions: &str) -> Vec<u8> {
    let server = crate::safe_name::display_name(server);
    let longest_run = instructions
        .split(|c| c != '`')
        .map(str::len)
        .max()
        .unwrap_or(0);
    let fence = "`".repeat(longest_run.max(2) + 1);
    let text = instructions.strip_suffix('\n').unwrap_or(instructions);
    format!(
        "<!-- Generated by clawmd from container.json (mcpServers.{server}.instructions): edit that field, not this file. -->\nInstructions for the MCP server `{server}`:\n\n{fence}text\n{text}\n{fence}\n"
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nanoclaws_generated_claude_md_is_recognised_and_an_edited_one_is_not_pristine() {
        let generated = "<!-- Composed at spawn \u{2014} do not edit. Edit CLAUDE.local.md for per-group content. -->\n@./.claude-shared.md\n@./.claude-fragments/mcp-db.md\n@./.claude-fragments/module-core.md\n@./.claude-fragments/skill-onecli-gateway.md\n";
        assert!(is_nanoclaw_generated(generated.as_bytes()));
        assert!(has_nanoclaw_header(generated.as_bytes()));
        assert!(!is_composed(generated.as_bytes()));
        let edited = format!("{generated}Remember: the client is Acme.\n");
        assert!(!is_nanoclaw_generated(edited.as_bytes()));
        assert!(has_nanoclaw_header(edited.as_bytes()));
        for other in [
            "# Main\n@./.claude-shared.md\n",
            "@./.claude-shared.md\n",
            "<!-- Composed at spawn \u{2014} do not edit -->\n@../escape.md\n",
            "<!-- Composed at spawn \u{2014} do not edit -->\n@./.claude-fragments/a b.md\n",
        ] {
            assert!(!is_nanoclaw_generated(other.as_bytes()), "{other}");
        }
    }

    #[test]
    fn composed_len_is_the_composed_documents_length() {
        for body in ["", "one line\n", "caf\u{e9} \u{1f600}\n\nmore\n"] {
            for local_memory in [true, false] {
                assert_eq!(
                    composed_len(body, local_memory),
                    composed_document_for(body, local_memory).len(),
                    "{body:?} {local_memory}"
                );
            }
        }
    }

    #[test]
    fn pristine_detects_any_edit() {
        let text = composed_claude_md(&["@./a.md".to_owned()]);
        assert!(is_pristine(&text) && is_composed(&text));
        let mut edited = text.clone();
        edited.extend_from_slice(b"my note\n");
        assert!(!is_pristine(&edited) && is_composed(&edited));
        assert!(!is_pristine(b"hand written") && !is_composed(b"hand written"));
        assert!(!is_pristine(&[0xff, b'\n']));
        // Either header (with or without the local-memory note) over its own body is
        // pristine; a header edited, or moved onto another body, is not.
        for local_memory in [true, false] {
            let doc = composed_document_for("BODY\n", local_memory);
            assert!(is_pristine(&doc), "{local_memory}");
            let text = String::from_utf8(doc).unwrap();
            let noted = text.replace(LOCAL_MEMORY_NOTE, "");
            assert!(is_pristine(noted.as_bytes()), "{local_memory}");
            let header_edited = text.replacen("do not edit", "do edit", 1);
            assert!(!is_pristine(header_edited.as_bytes()));
            let other_body = text.replace("BODY", "BODI");
            assert!(!is_pristine(other_body.as_bytes()));
        }
    }

    proptest::proptest! {
        #[test]
        fn no_instruction_text_becomes_an_import(
            lines in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::string::string_regex("@[./~a-z]{1,12}").unwrap(),
                    proptest::string::string_regex("`{1,6}[a-z@ ]{0,6}").unwrap(),
                    proptest::string::string_regex("~{3,5}|<!--|-->|    @x|> @y|- @z").unwrap(),
                    proptest::string::string_regex("\\PC{0,20}").unwrap(),
                ],
                0..8,
            )
        ) {
            let text = lines.join("\n");
            let fragment = String::from_utf8(mcp_fragment("db", &text)).unwrap();
            let scan = crate::loader::content::scan_markdown(&fragment).unwrap();
            proptest::prop_assert!(scan.imports.is_empty(), "{:?} in {fragment}", scan.imports);
        }
    }

    #[test]
    fn mcp_fragment_fences_every_backtick_run() {
        let text = "Use @/etc/hostname\n````\n@./container.json\n";
        let fragment = String::from_utf8(mcp_fragment("db", text)).unwrap();
        assert!(
            fragment.contains("\n`````text\nUse @/etc/hostname\n````\n@./container.json\n`````\n"),
            "{fragment}"
        );
        let plain = String::from_utf8(mcp_fragment("db", "no ticks")).unwrap();
        assert!(plain.ends_with("```text\nno ticks\n```\n"), "{plain}");
    }
}
