//! Diffing a group's desired state against the disk, and applying the difference.
//!
//! [`diff`] reads (never follows links, never writes) and returns the minimal list of
//! [`Step`]s; [`apply`] performs them through [`crate::disk::fsops`] in an order that keeps every
//! file a reader can reach whole: new fragments first, then `CLAUDE.md`, and only then the
//! removal of fragments it no longer imports. A group that is already right yields only
//! [`Step::Keep`]s, and applying those writes nothing.

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::disk::fsops::{Durability, FsError, Listing, Node, SafeDir, Temp, is_temp_name};
use crate::disk::written::{WrittenFragments, content_hash};
use crate::error::GroupError;
use crate::file_kind::{self, FileKind};
use crate::input::layout::names;
use crate::plan::delivery::GroupPlan;
use crate::plan::delivery::{ENTRY_POINTS, is_entry_point_name};
use crate::plan::{
    Content, Desired, ManagedPath, PLACEHOLDER_START, Place, has_nanoclaw_header, is_composed,
    is_nanoclaw_generated, is_pristine, mount_point_placeholder, short_hash,
};

/// The largest hand-edited `CLAUDE.md` clawmd will rescue; a larger one is refused, not lost.
pub const MAX_RESCUE_BYTES: u64 = 64 * 1024 * 1024;

/// The most rescued hand edits a group keeps: with this many rescues in its rescue folder, a
/// new hand edit makes compose refuse the group (naming the files) instead of adding one.
pub const MAX_RESCUES: usize = 16;

/// The most bytes (apparent size) of rescued hand edits a group keeps, the new one included.
pub const MAX_RESCUE_TOTAL_BYTES: u64 = 128 * 1024 * 1024;

/// One step of reconciling a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Write `content` at `path`; `before` is what was there.
    Write {
        /// Where.
        path: ManagedPath,
        /// What.
        content: Content,
        /// What was there before (`None` for a creation).
        before: Option<FileKind>,
    },
    /// Keep a hand-edited composed document (an entry point, `CLAUDE.md`, `AGENTS.md`,
    /// `GEMINI.md`, in the group folder or its bind folder; the managed `CLAUDE.md`) at `to`,
    /// in the group's rescue folder outside the group, before it is replaced or removed.
    Rescue {
        /// The edited file (reports name it `CLAUDE.md`, `state:CLAUDE.md`).
        from: ManagedPath,
        /// The rescue file's host path: `<state>/rescues/<group>/<from>.rescued-<hash>`.
        to: PathBuf,
        /// The edited text.
        bytes: Vec<u8>,
    },
    /// Remove a stale fragment.
    Remove {
        /// Where.
        path: ManagedPath,
        /// What it was.
        before: FileKind,
    },
    /// Already right: nothing to do.
    Keep {
        /// Where.
        path: ManagedPath,
    },
    /// A mount point in the group folder holding text of its own, which no container shows
    /// (the runner binds the composed file over it): left as it is, since renaming over a
    /// mount point detaches the bind in every running container.
    Shadowed {
        /// Where.
        path: ManagedPath,
    },
    /// The agent's own memory file (`CLAUDE.local.md`) is not a regular file (the agent made
    /// it a link, a FIFO, a device or a folder): left as it is, never written through or
    /// opened, and reported. The group still composes: its guardrails do not depend on it.
    LeftAlone {
        /// Where.
        path: ManagedPath,
        /// What is there.
        found: FileKind,
    },
    /// Something in `.claude-fragments` that no plan wants and clawmd did not write (or
    /// cannot vouch for: [`crate::disk::written`]): a person's file, or the agent's. Left as
    /// it is, never removed, and reported.
    Foreign {
        /// Where.
        path: ManagedPath,
        /// What is there.
        found: FileKind,
    },
}

/// Computes the steps that bring the group's folders (`dirs`; `dirs.rescues` is not used) to
/// `plan`; a hand edit is to be kept in `rescue_dir` (the group's rescue folder, outside the
/// group: see [`check_rescue_budget`]).
pub fn diff(dirs: &Dirs<'_>, rescue_dir: &Path, plan: &GroupPlan) -> Result<Vec<Step>, GroupError> {
    diff_listed(
        dirs,
        &dirs.group.listing()?,
        rescue_dir,
        plan,
        None,
        &BTreeMap::new(),
    )
}

/// [`diff`], given a listing of the group folder made by the caller (each folder is listed
/// once: the kinds of the entries come from the listings, not from a `stat` each), and what
/// clawmd is known to have written in `.claude-fragments` ([`crate::disk::written`]; `None`:
/// nothing is known, so nothing there is removed or replaced unkept).
pub fn diff_listed(
    dirs: &Dirs<'_>,
    listed: &Listing,
    rescue_dir: &Path,
    plan: &GroupPlan,
    written: Option<&WrittenFragments>,
    mcp_instructions: &BTreeMap<String, String>,
) -> Result<Vec<Step>, GroupError> {
    let group = dirs.group;
    let mut listings = Vec::new();
    for place in dirs.state_places() {
        if let Some(dir) = dirs.get(place) {
            listings.push((place, dir, dir.listing()?));
        }
    }
    let listing = |place: Place| match place {
        Place::Group => Some((group, listed)),
        _ => listings
            .iter()
            .find(|(p, _, _)| *p == place)
            .map(|(_, dir, listing)| (*dir, listing)),
    };
    let mut steps = Vec::new();
    let vouched = Vouched {
        written,
        mcp_instructions,
    };
    for desired in &plan.entries {
        let place = listing(desired.path.place);
        diff_entry(place, rescue_dir, desired, &vouched, &mut steps)?;
    }
    if let Some((fragments, listing)) = listing(Place::Fragments) {
        stale_fragments(fragments, listing, plan, &vouched, &mut steps)?;
    }
    for place in dirs.state_places().filter(|p| *p != Place::Fragments) {
        if let Some((dir, listing)) = listing(place) {
            stale_state_files(place, dir, listing, rescue_dir, plan, &mut steps)?;
        }
    }
    // The shared base was `.claude-shared.md` in the group folder before it moved into the
    // read-only `.claude-fragments`.
    if let Some(kind @ (FileKind::File | FileKind::Symlink)) = listed.kind(group, names::SHARED)? {
        steps.push(Step::Remove {
            path: ManagedPath::top(names::SHARED),
            before: kind,
        });
    }
    stale_entry_points(group, listed, rescue_dir, plan, &mut steps)?;
    Ok(steps)
}

/// What the group's bind folder or managed folder holds that the plan does not want: files
/// and links are removed (these folders are clawmd's own: nothing else writes there; a
/// hand-edited composed document is kept first), except temps (the journal's); anything else
/// is left with a log line.
fn stale_state_files(
    place: Place,
    dir: &SafeDir,
    listed: &Listing,
    rescue_dir: &Path,
    plan: &GroupPlan,
    steps: &mut Vec<Step>,
) -> Result<(), FsError> {
    for name in listed.names() {
        let Some(name) = name.to_str() else {
            tracing::warn!(dir = %dir.path().display(), "leaving a non-UTF-8 name alone");
            continue;
        };
        let wanted = plan
            .entries
            .iter()
            .any(|d| d.path.place == place && d.path.name == name);
        // A temp an interrupted run left is the journal's to remove (the next run under the
        // lock does), not a stale file of the plan.
        if wanted || is_temp_name(name) {
            continue;
        }
        let path = ManagedPath {
            place,
            name: name.to_owned(),
        };
        match listed.kind(dir, name)? {
            Some(FileKind::File) if is_document(&path) => {
                if let Some(old) = dir.read_file(name, MAX_RESCUE_BYTES)?
                    && needs_rescue(&old)
                {
                    steps.push(Step::Rescue {
                        from: path.clone(),
                        to: rescue_dir.join(rescue_name(name, &old)),
                        bytes: old,
                    });
                }
                steps.push(Step::Remove {
                    path,
                    before: FileKind::File,
                })
            }
            Some(kind @ (FileKind::File | FileKind::Symlink)) => {
                steps.push(Step::Remove { path, before: kind })
            }
            None => {}
            Some(other) => tracing::debug!(
                path = %dir.path().join(name).display(),
                "leaving {} alone", other.describe()
            ),
        }
    }
    Ok(())
}

/// An entry point clawmd composed for another backend (`AGENTS.md` of a group that is now a
/// Claude Code group, say) is removed, its hand edits rescued first. A file clawmd did not
/// compose is never touched.
fn stale_entry_points(
    group: &SafeDir,
    listed: &Listing,
    rescue_dir: &Path,
    plan: &GroupPlan,
    steps: &mut Vec<Step>,
) -> Result<(), FsError> {
    for name in ENTRY_POINTS {
        let wanted = plan.entries.iter().any(|d| d.path.is_top(name));
        if wanted || listed.kind(group, name)? != Some(FileKind::File) {
            continue;
        }
        let Some(old) = group.read_file(name, MAX_RESCUE_BYTES)? else {
            continue;
        };
        // clawmd's own: the document it (or nanoclaw's composer) composed there before bind
        // folders, or a mount point's placeholder (edited or not). A mount point no longer in
        // the table may go.
        if !is_composed(&old)
            && !has_nanoclaw_header(&old)
            && !old.starts_with(PLACEHOLDER_START.as_bytes())
        {
            continue;
        }
        if old != mount_point_placeholder(name)
            && old != crate::plan::mount_point_placeholder_for(name, false)
            && needs_rescue(&old)
        {
            steps.push(Step::Rescue {
                from: ManagedPath::top(name),
                to: rescue_dir.join(rescue_name(name, &old)),
                bytes: old.clone(),
            });
        }
        steps.push(Step::Remove {
            path: ManagedPath::top(name),
            before: FileKind::File,
        });
    }
    Ok(())
}

/// Whether `name` is named like a rescued entry point (`CLAUDE.md.rescued-…`). In a group
/// folder such a name says nothing about who wrote it: the agent can name files anything.
pub fn is_rescue_name(name: &str) -> bool {
    rescue_name_starts()
        .iter()
        .any(|start| name.starts_with(start))
}

/// How every name [`is_rescue_name`] accepts starts (`CLAUDE.md.rescued-`, …).
pub fn rescue_name_starts() -> Vec<String> {
    ENTRY_POINTS
        .iter()
        .map(|entry| format!("{entry}{}", names::RESCUE_INFIX))
        .collect()
}

/// Whether `name` is exactly a name [`rescue_name`] gives (`<entry point>.rescued-<16 hex>`)
/// or [`fragment_rescue_name`] does (`fragment.<name>.rescued-<16 hex>`).
pub fn is_rescue_file_name(name: &str) -> bool {
    let is_hash = |hash: &str| {
        hash.len() == 16
            && hash
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let ends_in_hash = |rest: &str| {
        rest.rsplit_once(names::RESCUE_INFIX)
            .is_some_and(|(name, hash)| !name.is_empty() && is_hash(hash))
    };
    name.strip_prefix(FRAGMENT_RESCUE_PREFIX)
        .is_some_and(ends_in_hash)
        || ENTRY_POINTS.iter().any(|entry| {
            name.strip_prefix(entry)
                .and_then(|rest| rest.strip_prefix(names::RESCUE_INFIX))
                .is_some_and(is_hash)
        })
}

/// The rescues clawmd kept in a group's rescue folder `dir`: regular files named as
/// [`rescue_name`] names them, sorted, each with its size.
pub fn kept_rescues(dir: &SafeDir) -> Result<Vec<(String, u64)>, FsError> {
    let listing = dir.listing()?;
    let mut kept = Vec::new();
    for name in listing.names() {
        let Some(name) = name.to_str().filter(|n| is_rescue_file_name(n)) else {
            continue;
        };
        if listing.kind(dir, name)? == Some(FileKind::File) {
            kept.push((name.to_owned(), dir.size(name)?));
        }
    }
    Ok(kept)
}

/// Where the hand-edited `name` is kept: `<name>.rescued-<hash of the text>`.
pub fn rescue_name(name: &str, text: &[u8]) -> String {
    format!("{name}{}{}", names::RESCUE_INFIX, short_hash(text))
}

/// How the rescue of a fragment is named: `fragment.<name>.rescued-<hash of the text>`.
const FRAGMENT_RESCUE_PREFIX: &str = "fragment.";

/// Whether `name` (in a rescue folder) is a fragment's rescue ([`fragment_rescue_name`]).
pub fn is_fragment_rescue_name(name: &str) -> bool {
    name.starts_with(FRAGMENT_RESCUE_PREFIX) && is_rescue_file_name(name)
}

/// Where the text found as the fragment `name` (`.claude-fragments/<name>`) is kept.
pub fn fragment_rescue_name(name: &str, text: &[u8]) -> String {
    format!("{FRAGMENT_RESCUE_PREFIX}{}", rescue_name(name, text))
}

/// Refuses the steps when a hand edit they keep would be one more than the group's rescue
/// folder `rescues` (`None`: it does not exist yet) may hold: [`MAX_RESCUES`] rescues, or
/// [`MAX_RESCUE_TOTAL_BYTES`] with the new one; that is [`GroupError::TooManyRescues`]. The
/// same text rescued before is not counted twice (its rescue name is the hash of the text).
/// Only what clawmd kept there counts: files named like rescues in the group folder are the
/// agent's business.
/// `own_text` is the file the recipe keeps the group's own text in (`CLAUDE.local.md`, or a
/// persona file), where the refusal's fix says to merge the rescued text.
pub fn check_rescue_budget(
    rescues: Option<&SafeDir>,
    steps: &[Step],
    own_text: &str,
) -> Result<(), GroupError> {
    let Some(dir) = rescues else {
        return Ok(()); // no rescue yet
    };
    for step in steps {
        if let Step::Rescue { to, bytes, .. } = step {
            check_one_rescue(dir, to, bytes.len() as u64, own_text)?;
        }
    }
    Ok(())
}

fn check_one_rescue(
    dir: &SafeDir,
    to: &Path,
    new_bytes: u64,
    own_text: &str,
) -> Result<(), GroupError> {
    let name = file_name(to);
    if dir.kind(name)?.is_some() {
        return Ok(()); // the same text, kept before (anything else there is refused in apply)
    }
    let kept = kept_rescues(dir)?;
    let bytes = new_bytes + kept.iter().map(|(_, size)| size).sum::<u64>();
    if kept.len() < MAX_RESCUES && bytes <= MAX_RESCUE_TOTAL_BYTES {
        return Ok(());
    }
    Err(GroupError::TooManyRescues {
        dir: dir.path().to_owned(),
        count: kept.len(),
        bytes: bytes - new_bytes,
        files: kept.iter().map(|(name, _)| dir.path().join(name)).collect(),
        own_text: own_text.to_owned(),
    })
}

/// The file name of a rescue path (every rescue path is `<rescue folder>/<rescue name>`).
fn file_name(to: &Path) -> &str {
    to.file_name()
        .and_then(|name| name.to_str())
        .expect("a rescue path ends in a rescue name")
}

fn diff_entry(
    dir: Option<(&SafeDir, &Listing)>,
    rescue_dir: &Path,
    desired: &Desired,
    vouched: &Vouched<'_>,
    steps: &mut Vec<Step>,
) -> Result<(), FsError> {
    let path = desired.path.clone();
    let Some((dir, listed)) = dir else {
        steps.push(Step::Write {
            path,
            content: desired.content.clone(),
            before: None,
        });
        return Ok(());
    };
    let name = desired.path.name.as_str();
    let limit = match &desired.content {
        _ if desired.path.place == Place::Fragments => MAX_RESCUE_BYTES,
        Content::File(_) | Content::Placeholder(_) if is_document(&desired.path) => {
            MAX_RESCUE_BYTES
        }
        Content::File(bytes) | Content::Placeholder(bytes) => bytes.len() as u64,
        Content::Symlink(_) | Content::Seed => 0,
    };
    let mut longer_than_desired = false;
    let node = match listed.kind(dir, name)? {
        None => Node::Missing,
        Some(FileKind::Dir) => Node::Dir,
        Some(FileKind::Other) => Node::Other,
        Some(FileKind::Symlink) => Node::Symlink(dir.read_link(name)?),
        Some(FileKind::File) if matches!(desired.content, Content::Seed) => Node::File(Vec::new()),
        Some(FileKind::File) => match dir.read_file(name, limit) {
            Ok(Some(bytes)) => Node::File(bytes),
            Ok(None) => Node::Missing,
            // Longer than the desired content, so it differs: replaced without being read.
            Err(FsError::TooLarge { .. }) if !is_kept_when_edited(&desired.path) => {
                longer_than_desired = true;
                Node::File(Vec::new())
            }
            Err(err) => return Err(err),
        },
    };
    if let (Content::Seed, Some(found @ (FileKind::Symlink | FileKind::Dir | FileKind::Other))) =
        (&desired.content, node.kind())
    {
        steps.push(Step::LeftAlone { path, found });
        return Ok(());
    }
    refuse_unsafe(dir, &desired.path, &desired.content, &node)?;
    if let (Content::Placeholder(want), Node::File(have)) = (&desired.content, &node)
        && have != want
        && !is_composed(have)
        && !has_nanoclaw_header(have)
    {
        // Text of its own (a person's, a legacy file not migrated yet): never renamed over.
        steps.push(match have.trim_ascii().is_empty() {
            true => Step::Keep { path },
            false => Step::Shadowed { path },
        });
        return Ok(());
    }
    let up_to_date = match (&desired.content, &node) {
        (Content::Seed, Node::File(_)) => true,
        (Content::Placeholder(want), Node::File(have)) => want == have,
        (Content::File(want), Node::File(have)) => !longer_than_desired && want == have,
        (Content::Symlink(want), Node::Symlink(have)) => want == have,
        _ => false,
    };
    if up_to_date {
        steps.push(Step::Keep { path });
        return Ok(());
    }
    if let Node::File(old) = &node
        && is_document(&desired.path)
        && needs_rescue(old)
    {
        steps.push(Step::Rescue {
            from: desired.path.clone(),
            to: rescue_dir.join(rescue_name(name, old)),
            bytes: old.clone(),
        });
    }
    if let Node::File(old) = &node
        && desired.path.place == Place::Fragments
        && !old.trim_ascii().is_empty()
        && !vouched.vouches_for(name, old)
    {
        // A fragment someone edited, or a file of theirs under a fragment's name.
        steps.push(Step::Rescue {
            from: desired.path.clone(),
            to: rescue_dir.join(fragment_rescue_name(name, old)),
            bytes: old.clone(),
        });
    }
    steps.push(Step::Write {
        path,
        content: desired.content.clone(),
        before: node.kind(),
    });
    Ok(())
}

/// A `CLAUDE.md` that clawmd did not write exactly as it is (a hand edit, or legacy text that
/// was never migrated) is kept before it is replaced; an empty one holds nothing to lose, nor
/// does one exactly as nanoclaw's own composer generates it (its header and import lines).
fn needs_rescue(old: &[u8]) -> bool {
    !is_pristine(old) && !old.trim_ascii().is_empty() && !is_nanoclaw_generated(old)
}

fn refuse_unsafe(
    dir: &SafeDir,
    path: &ManagedPath,
    content: &Content,
    node: &Node,
) -> Result<(), FsError> {
    let protected =
        (path.place == Place::Group && is_entry_point(path)) || path.is_top(names::CLAUDE_LOCAL_MD);
    let refuse = match node {
        Node::Dir | Node::Other if matches!(content, Content::Seed) => true,
        Node::Dir => true,
        Node::Symlink(_) => protected,
        _ => false,
    };
    if !refuse {
        return Ok(());
    }
    let full = dir.path().join(&path.name);
    Err(FsError::Unsafe {
        found: file_kind::describe(node.kind()).to_owned(),
        expected: "a regular file",
        fix: match node {
            Node::Symlink(_) => format!(
                "delete the link {} (clawmd never writes through a link); if it pointed at text you need, copy that text into CLAUDE.local.md first",
                full.display()
            ),
            _ => format!("move {} aside", full.display()),
        },
        path: full,
    })
}

/// What `.claude-fragments` holds that the plan does not want: what clawmd wrote there is
/// removed, and so is a symbolic link (it holds nobody's text: its target, wherever it is, is
/// not touched; nanoclaw's own composer left links there); a file anyone else wrote (a
/// person's, the agent's, or one clawmd cannot vouch for) is left as it is and reported, never
/// removed.
fn stale_fragments(
    fragments: &SafeDir,
    listed: &Listing,
    plan: &GroupPlan,
    vouched: &Vouched<'_>,
    steps: &mut Vec<Step>,
) -> Result<(), FsError> {
    let wanted: Vec<&str> = plan.fragment_names().collect();
    for name in listed.names() {
        let Some(name) = name.to_str() else {
            tracing::warn!(dir = %fragments.path().display(), "leaving a non-UTF-8 name alone");
            continue;
        };
        if wanted.contains(&name) {
            continue;
        }
        let path = ManagedPath::fragment(name);
        let Some(kind) = listed.kind(fragments, name)? else {
            continue;
        };
        let content = match kind {
            FileKind::File => match fragments.read_file(name, MAX_RESCUE_BYTES) {
                Ok(Some(bytes)) => Some(bytes),
                Ok(None) => continue, // gone since the listing
                Err(FsError::TooLarge { .. }) => None,
                Err(err) => return Err(err),
            },
            FileKind::Symlink => Some(fragments.read_link(name)?.as_os_str().as_bytes().to_vec()),
            _ => None,
        };
        match content {
            Some(bytes) if kind == FileKind::Symlink || vouched.vouches_for(name, &bytes) => {
                steps.push(Step::Remove { path, before: kind })
            }
            _ => steps.push(Step::Foreign { path, found: kind }),
        }
    }
    Ok(())
}

/// What vouches for a stale file in `.claude-fragments` as nobody's own text: clawmd's record
/// of what it wrote there, or the group's config holding the same text (nanoclaw's own
/// composer wrote `mcp-<server>.md` as the server's `instructions`, verbatim).
struct Vouched<'a> {
    written: Option<&'a WrittenFragments>,
    mcp_instructions: &'a BTreeMap<String, String>,
}

impl Vouched<'_> {
    /// Whether the `name` holding `bytes` can go (or be replaced) without losing anyone's
    /// text.
    fn vouches_for(&self, name: &str, bytes: &[u8]) -> bool {
        let copy_of_config = name
            .strip_prefix("mcp-")
            .and_then(|rest| rest.strip_suffix(".md"))
            .and_then(|server| self.mcp_instructions.get(server))
            .is_some_and(|text| text.as_bytes() == bytes);
        let written_by_clawmd = (self.written)
            .and_then(|written| written.get(name))
            .is_some_and(|hashes| hashes.contains(&content_hash(bytes)));
        copy_of_config || written_by_clawmd
    }
}

/// The folders a group's managed paths live in ([`Place`]): the group folder, its
/// `.claude-fragments`, its bind folder and managed folder in clawmd's state, and its rescue
/// folder (outside the group). A folder that does not exist (yet) is `None`: every path
/// planned in it is then to be written, and the caller creates it before applying.
#[derive(Debug, Clone, Copy)]
pub struct Dirs<'a> {
    /// The group folder.
    pub group: &'a SafeDir,
    /// `.claude-fragments`.
    pub fragments: Option<&'a SafeDir>,
    /// The group's bind folder (`<state>/binds/<group>/`).
    pub bind: Option<&'a SafeDir>,
    /// The group's managed folder (`<state>/binds/<group>/managed/`).
    pub managed: Option<&'a SafeDir>,
    /// The group's rescue folder (`None` when no step rescues anything).
    pub rescues: Option<&'a SafeDir>,
    /// The group's guard folders that exist (or were created), each with its path relative to
    /// the bind folder (one of [`crate::plan::delivery::guard::GUARD_DIRS`]).
    pub guard: &'a [(&'static str, SafeDir)],
    /// The container binds `.claude-fragments` (copy and link delivery): kept, empty or not.
    pub fragments_bound: bool,
}

impl<'a> Dirs<'a> {
    /// The group folder alone (its other folders not there).
    pub fn only(group: &'a SafeDir) -> Self {
        Dirs {
            group,
            fragments: None,
            bind: None,
            managed: None,
            rescues: None,
            guard: &[],
            fragments_bound: false,
        }
    }

    /// The folder of `place`, when it exists.
    pub fn get(&self, place: Place) -> Option<&'a SafeDir> {
        match place {
            Place::Group => Some(self.group),
            Place::Fragments => self.fragments,
            Place::Bind => self.bind,
            Place::Managed => self.managed,
            Place::Guard(folder) => self
                .guard
                .iter()
                .find(|(path, _)| *path == folder)
                .map(|(_, dir)| dir),
        }
    }

    /// Every place but the group folder: `.claude-fragments`, the bind folder, the managed
    /// folder, the guard folders that are open.
    fn state_places(&self) -> impl Iterator<Item = Place> + use<'a> {
        [Place::Fragments, Place::Bind, Place::Managed]
            .into_iter()
            .chain(self.guard.iter().map(|(path, _)| Place::Guard(path)))
    }

    /// The folder of `path`, which must exist (the caller created every folder the steps
    /// write in).
    fn of(&self, path: &ManagedPath) -> Result<&'a SafeDir, FsError> {
        self.get(path.place).ok_or_else(|| FsError::Io {
            op: "find the folder of",
            path: self.group.path().join(path.to_string()),
            source: std::io::Error::other("the folder was not opened (a bug)"),
        })
    }

    fn rescues(&self) -> Result<&'a SafeDir, FsError> {
        self.rescues.ok_or_else(|| FsError::Io {
            op: "rescue a hand edit into",
            path: self.group.path().to_owned(),
            source: std::io::Error::other("no rescue folder was opened (a bug)"),
        })
    }

    /// The folders the steps write in (not the rescue folder, synced on its own).
    fn written(&self) -> impl Iterator<Item = &'a SafeDir> {
        [Some(self.group), self.fragments, self.bind, self.managed]
            .into_iter()
            .flatten()
            .chain(self.guard.iter().map(|(_, dir)| dir))
    }

    /// Makes every change in these folders durable.
    pub fn sync(&self) -> Result<(), FsError> {
        self.written().try_for_each(SafeDir::sync)
    }

    /// Marks every folder synced (after a `syncfs` of their filesystems).
    pub fn mark_synced(&self) {
        self.written().for_each(SafeDir::mark_synced);
    }
}

/// Performs `steps` in a reader-safe order: every new file and link written under a temp name
/// ([`stage`]), then rescues (each durable in the rescue folder at once) and everything the
/// entry point imports put in place, then the entry point, then removals. The caller must
/// hold the group's lock. [`Durability::PowerLoss`]: each temp fsynced, each phase made
/// durable (the folders fsynced) before the next. [`Durability::ThisBoot`]: the same order,
/// nothing fsynced but the rescues (a person's text), for a run whose records this boot only
/// trusts: after a power loss the next run compares every file with its plan, byte for
/// byte, and writes again what the loss tore, before any agent reads it.
pub fn apply(dirs: Dirs<'_>, steps: &[Step], durability: Durability) -> Result<(), FsError> {
    let durable = durability == Durability::PowerLoss;
    let sync = || match durable {
        true => dirs.sync(),
        false => Ok(()),
    };
    let mut staged = stage(dirs, steps, durable)?;
    staged.place_imported(dirs, steps)?;
    sync()?;
    staged.place_entry_points(dirs, steps)?;
    sync()?;
    staged.remove_stale(dirs, steps)?;
    sync()?;
    if !durable {
        dirs.mark_synced();
    }
    Ok(())
}

/// A group's steps with every file and link they write already made under a temp name (and,
/// unless the caller makes them durable at once for many groups, fsynced), to be put in place
/// in three phases. Between two phases the caller makes the first durable, so that after a
/// crash at any point every file is old or new, a rescue is durable before the entry point
/// it keeps is replaced, everything an entry point imports is durable before it, and a
/// fragment is removed only once the entry point that stopped importing it is durable.
#[derive(Debug)]
#[must_use = "staged temps are put in place or discarded"]
pub struct Staged {
    /// The temp of each step that writes (by step index).
    temps: Vec<Option<Temp>>,
}

/// Phase 0 of [`apply`]: writes every file and link `steps` need under temp names. `durable`:
/// each temp is fsynced; else the caller makes them durable (`syncfs`) before
/// [`Staged::place_imported`]. A rescue is always fsynced (its folder may be on another
/// filesystem than the group's; hand edits are rare). On failure nothing staged is left.
pub fn stage(dirs: Dirs<'_>, steps: &[Step], durable: bool) -> Result<Staged, FsError> {
    let mut staged = Staged { temps: Vec::new() };
    for step in steps {
        let temp = match step {
            Step::Rescue { bytes, .. } => dirs
                .rescues()
                .and_then(|rescues| rescues.stage_new_file(bytes, true))
                .map(Some),
            Step::Write {
                path,
                content,
                before,
            } => dirs.of(path).and_then(|dir| {
                match content {
                    Content::File(bytes) => dir.stage_file(&path.name, bytes, durable),
                    Content::Placeholder(bytes) if before.is_some() => {
                        dir.stage_file(&path.name, bytes, durable)
                    }
                    Content::Placeholder(bytes) => dir.stage_new_file(bytes, durable),
                    Content::Symlink(target) => dir.stage_symlink(&path.name, target),
                    Content::Seed => dir.stage_new_file(b"", durable),
                }
                .map(Some)
            }),
            _ => Ok(None),
        };
        match temp {
            Ok(temp) => staged.temps.push(temp),
            Err(err) => {
                staged.discard(dirs, steps);
                return Err(err);
            }
        }
    }
    Ok(staged)
}

impl Staged {
    /// Removes every temp not put in place (after a failure).
    pub fn discard(&mut self, dirs: Dirs<'_>, steps: &[Step]) {
        for (step, temp) in steps.iter().zip(self.temps.iter_mut()) {
            let Some(temp) = temp.take() else { continue };
            match step {
                Step::Write { path, .. } => match dirs.of(path) {
                    Ok(dir) => dir.discard(temp),
                    Err(_) => dirs.group.discard(temp),
                },
                Step::Rescue { .. } => {
                    if let Ok(rescues) = dirs.rescues() {
                        rescues.discard(temp);
                    }
                }
                _ => {}
            }
        }
    }

    /// Phase 1: rescues of hand-edited entry points (each durable before this goes on), then
    /// every other written file (in plan order: what the entry point imports). On failure
    /// the remaining temps are removed.
    pub fn place_imported(&mut self, dirs: Dirs<'_>, steps: &[Step]) -> Result<(), FsError> {
        self.place(dirs, steps, Phase::Imported)
    }

    /// Phase 2: the entry points (the composed one in the bind folder, then its mount point
    /// in the group folder), once what they import is durable.
    pub fn place_entry_points(&mut self, dirs: Dirs<'_>, steps: &[Step]) -> Result<(), FsError> {
        self.place(dirs, steps, Phase::EntryPoints)
    }

    /// Phase 3: removals of what the (durable) entry points no longer import, then the
    /// folders the plan no longer uses, when that left them empty.
    pub fn remove_stale(&mut self, dirs: Dirs<'_>, steps: &[Step]) -> Result<(), FsError> {
        for step in steps {
            if let Step::Remove { path, .. } = step {
                dirs.of(path)?.remove(&path.name)?;
            }
        }
        remove_unused_folders(dirs, steps)
    }

    /// Puts the temps of `phase` in place; on failure the remaining temps are removed.
    fn place(&mut self, dirs: Dirs<'_>, steps: &[Step], phase: Phase) -> Result<(), FsError> {
        let result = self.place_phase(dirs, steps, phase);
        if result.is_err() {
            self.discard(dirs, steps);
        }
        result
    }

    fn place_phase(&mut self, dirs: Dirs<'_>, steps: &[Step], phase: Phase) -> Result<(), FsError> {
        if phase == Phase::Imported {
            for (step, temp) in steps.iter().zip(self.temps.iter_mut()) {
                if let (Step::Rescue { from, to, bytes }, Some(_)) = (step, &temp) {
                    let temp = temp.take().expect("checked above");
                    let rescues = dirs.rescues()?;
                    let name = file_name(to);
                    if !rescues.link_new(temp, name)? {
                        check_rescued(rescues, name, bytes)?;
                    }
                    // Durable before the entry point it keeps can be replaced, whatever
                    // filesystem the rescue folder is on.
                    rescues.sync()?;
                    tracing::warn!(rescued = %to.display(), "kept a hand-edited {from}");
                }
            }
        }
        for (step, temp) in steps.iter().zip(self.temps.iter_mut()) {
            let Step::Write {
                path,
                content,
                before,
            } = step
            else {
                continue;
            };
            if is_entry_point(path) != (phase == Phase::EntryPoints) {
                continue;
            }
            let Some(temp) = temp.take() else { continue };
            let dir = dirs.of(path)?;
            match content {
                Content::Seed => {
                    dir.link_new(temp, &path.name)?;
                }
                // A mount point is created only where there is none: never over a name
                // someone created meanwhile.
                Content::Placeholder(_) if before.is_none() => {
                    dir.link_new(temp, &path.name)?;
                }
                Content::File(_) | Content::Symlink(_) | Content::Placeholder(_) => {
                    dir.put_in_place(temp, &path.name)?
                }
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Imported,
    EntryPoints,
}

/// An entry point: in the group folder (the mount point) or in the bind folder (the composed
/// file bound over it).
/// Removes `.claude-fragments` (unless the container binds it), the managed folder and the
/// guard folders once nothing the steps keep or write is in them and they are empty (after a
/// change of delivery or backend): a folder holding anything else, or in use, is left as it is. Guard folders go deepest first, so that an
/// emptied parent goes too.
fn remove_unused_folders(dirs: Dirs<'_>, steps: &[Step]) -> Result<(), FsError> {
    let used = |place: Place| {
        steps.iter().any(|step| match step {
            Step::Write { path, .. }
            | Step::Keep { path }
            | Step::Shadowed { path }
            | Step::LeftAlone { path, .. }
            | Step::Foreign { path, .. } => match (path.place, place) {
                (Place::Guard(file_dir), Place::Guard(dir)) => Path::new(file_dir).starts_with(dir),
                (a, b) => a == b,
            },
            Step::Rescue { .. } | Step::Remove { .. } => false,
        })
    };
    if dirs.fragments.is_some()
        && !dirs.fragments_bound
        && !used(Place::Fragments)
        && dirs.group.remove_empty_dir(names::FRAGMENTS)?
    {
        tracing::debug!(group = %dirs.group.path().display(), "removed the empty .claude-fragments");
    }
    let Some(bind) = dirs.bind else {
        return Ok(());
    };
    if dirs.managed.is_some() && !used(Place::Managed) {
        bind.remove_empty_dir(names::MANAGED)?;
    }
    for (folder, _) in dirs.guard.iter().rev() {
        if used(Place::Guard(folder)) {
            continue;
        }
        let (parent, name) = match folder.rsplit_once('/') {
            Some((parent, name)) => {
                let opened = dirs.guard.iter().find(|(open, _)| *open == parent);
                (opened.map(|(_, dir)| dir), name)
            }
            None => (Some(bind), *folder),
        };
        if let Some(parent) = parent {
            parent.remove_empty_dir(name)?;
        }
    }
    Ok(())
}

fn is_entry_point(path: &ManagedPath) -> bool {
    matches!(path.place, Place::Group | Place::Bind) && is_entry_point_name(&path.name)
}

/// A document clawmd composes whole, whose hand edits are kept before it is replaced: an
/// entry point, or the managed `CLAUDE.md`.
fn is_document(path: &ManagedPath) -> bool {
    is_entry_point(path) || (path.place == Place::Managed && path.name == names::CLAUDE_MD)
}

/// Whether what is found at `path` is read whole to be kept aside when it is not what clawmd
/// wrote: a composed document, or a fragment.
fn is_kept_when_edited(path: &ManagedPath) -> bool {
    is_document(path) || path.place == Place::Fragments
}

/// The rescue name is taken: an earlier, interrupted run kept the same text there (the name
/// carries its hash), or someone put something else there. Only a regular file holding
/// exactly the text will do; anything else (a link, other bytes) stops the compose before
/// `CLAUDE.md` is replaced.
fn check_rescued(rescues: &SafeDir, name: &str, bytes: &[u8]) -> Result<(), FsError> {
    match rescues.read_file(name, bytes.len() as u64) {
        Ok(Some(existing)) if existing == bytes => Ok(()),
        Ok(_) | Err(FsError::TooLarge { .. }) => Err(FsError::Unsafe {
            path: rescues.path().join(name),
            found: "a file with other content".to_owned(),
            expected: "the rescued copy of a hand-edited entry point",
            fix: format!(
                "move {} aside; CLAUDE.md keeps the hand edit until then",
                rescues.path().join(name).display()
            ),
        }),
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Warning;

    fn no_rescues() -> &'static Path {
        Path::new("/nowhere/rescues/g")
    }

    fn plan_of(content: Content) -> GroupPlan {
        GroupPlan {
            entries: vec![Desired {
                path: ManagedPath::top("x.md"),
                content,
            }],
            warnings: Vec::<Warning>::new(),
            target: Default::default(),
            sections: Vec::new(),
            dropped: Vec::new(),
            local_memory: None,
            local_memory_too_large: None,
            local_memory_cut: None,
            made_from: None,
            uses: None,
        }
    }

    #[test]
    fn a_file_longer_than_desired_is_replaced_even_when_desired_is_empty() {
        let temp = tempfile::tempdir().unwrap();
        let dir = SafeDir::open(temp.path()).unwrap();
        dir.write_file("x.md", b"extra").unwrap();
        let diff_now = || {
            diff(
                &Dirs::only(&dir),
                no_rescues(),
                &plan_of(Content::File(Vec::new())),
            )
            .unwrap()
        };
        let steps = diff_now();
        assert!(
            matches!(
                steps[0],
                Step::Write {
                    before: Some(FileKind::File),
                    ..
                }
            ),
            "{steps:?}"
        );
        dir.write_file("x.md", b"").unwrap();
        let steps = diff_now();
        assert!(matches!(steps[0], Step::Keep { .. }), "{steps:?}");
    }

    #[test]
    fn a_directory_where_a_file_belongs_is_refused() {
        let temp = tempfile::tempdir().unwrap();
        std::fs::create_dir(temp.path().join("x.md")).unwrap();
        let dir = SafeDir::open(temp.path()).unwrap();
        let err = diff(
            &Dirs::only(&dir),
            no_rescues(),
            &plan_of(Content::File(b"a".to_vec())),
        )
        .unwrap_err();
        assert!(
            matches!(err, GroupError::Fs(FsError::Unsafe { .. })),
            "{err}"
        );
    }
}
