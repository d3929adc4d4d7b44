//! Diffing a group's desired state against the disk, and applying the difference.
//!
//! [`diff`] reads (never follows links, never writes) and returns the minimal list of
//! [`Step`]s; [`apply`] performs them through [`crate::fsops`] in an order that keeps every
//! file a reader can reach whole: new fragments first, then `CLAUDE.md`, and only then the
//! removal of fragments it no longer imports. A group that is already right yields only
//! [`Step::Keep`]s, and applying those writes nothing.

use crate::delivery::{ENTRY_POINTS, is_entry_point_name};
use crate::error::GroupError;
use crate::fsops::{FsError, Node, NodeKind, SafeDir, is_temp_name};
use crate::layout::names;
use crate::plan::{Content, Desired, GroupPlan, ManagedPath, is_composed, is_pristine, short_hash};

/// The largest hand-edited `CLAUDE.md` clawmd will rescue; a larger one is refused, not lost.
pub const MAX_RESCUE_BYTES: u64 = 64 * 1024 * 1024;

/// The most rescued hand edits a group keeps: with this many `CLAUDE.md.rescued-*` files, a
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
        /// What was there before (`Missing` for a creation).
        before: NodeKind,
    },
    /// Keep a hand-edited entry point (`CLAUDE.md`, `AGENTS.md`, `GEMINI.md`) under `to`
    /// before it is replaced or removed.
    Rescue {
        /// The edited file's name in the group folder.
        from: String,
        /// The rescue file name in the group folder.
        to: String,
        /// The edited text.
        bytes: Vec<u8>,
    },
    /// Remove a stale fragment.
    Remove {
        /// Where.
        path: ManagedPath,
        /// What it was.
        before: NodeKind,
    },
    /// Remove a temp file left by an interrupted run (only done while holding the group lock).
    Clean {
        /// Where.
        path: ManagedPath,
    },
    /// Already right: nothing to do.
    Keep {
        /// Where.
        path: ManagedPath,
    },
}

/// Computes the steps that bring the group folder to `plan`. `fragments` is `None` when the
/// `.claude-fragments` folder does not exist yet. A hand edit to rescue when the group already
/// keeps [`MAX_RESCUES`] rescues (or [`MAX_RESCUE_TOTAL_BYTES`]) is
/// [`GroupError::TooManyRescues`]; the same text rescued before is not counted twice (its
/// rescue name is the hash of the text).
pub fn diff(
    group: &SafeDir,
    fragments: Option<&SafeDir>,
    plan: &GroupPlan,
) -> Result<Vec<Step>, GroupError> {
    let mut steps = Vec::new();
    for desired in &plan.entries {
        let dir = if desired.path.in_fragments {
            fragments
        } else {
            Some(group)
        };
        diff_entry(dir, desired, &mut steps)?;
    }
    for name in group.list()? {
        if let Some(name) = name.to_str().filter(|n| is_temp_name(n))
            && matches!(group.kind(name)?, NodeKind::File | NodeKind::Symlink)
        {
            steps.push(Step::Clean {
                path: ManagedPath::top(name),
            });
        }
    }
    if let Some(fragments) = fragments {
        stale_fragments(fragments, plan, &mut steps)?;
    }
    let shared_wanted = plan
        .entries
        .iter()
        .any(|d| !d.path.in_fragments && d.path.name == names::SHARED);
    if !shared_wanted
        && let kind @ (NodeKind::File | NodeKind::Symlink) = group.kind(names::SHARED)?
    {
        steps.push(Step::Remove {
            path: ManagedPath::top(names::SHARED),
            before: kind,
        });
    }
    stale_entry_points(group, plan, &mut steps)?;
    for step in &steps {
        if let Step::Rescue { to, bytes, .. } = step {
            check_rescue_budget(group, to, bytes.len() as u64)?;
        }
    }
    Ok(steps)
}

/// An entry point clawmd composed for another backend (`AGENTS.md` of a group that is now a
/// Claude Code group, say) is removed, its hand edits rescued first. A file clawmd did not
/// compose is never touched.
fn stale_entry_points(
    group: &SafeDir,
    plan: &GroupPlan,
    steps: &mut Vec<Step>,
) -> Result<(), FsError> {
    for name in ENTRY_POINTS {
        let wanted = plan
            .entries
            .iter()
            .any(|d| !d.path.in_fragments && d.path.name == name);
        if wanted || group.kind(name)? != NodeKind::File {
            continue;
        }
        let Some(old) = group.read_file(name, MAX_RESCUE_BYTES)? else {
            continue;
        };
        if !is_composed(&old) {
            continue;
        }
        if needs_rescue(&old) {
            steps.push(Step::Rescue {
                from: name.to_owned(),
                to: rescue_name(name, &old),
                bytes: old.clone(),
            });
        }
        steps.push(Step::Remove {
            path: ManagedPath::top(name),
            before: NodeKind::File,
        });
    }
    Ok(())
}

/// Whether `name` is where clawmd kept a hand-edited entry point.
pub fn is_rescue_name(name: &str) -> bool {
    ENTRY_POINTS
        .iter()
        .any(|entry| name.starts_with(&format!("{entry}{}", names::RESCUE_INFIX)))
}

/// Where the hand-edited `name` is kept: `<name>.rescued-<hash of the text>`.
pub fn rescue_name(name: &str, text: &[u8]) -> String {
    format!("{name}{}{}", names::RESCUE_INFIX, short_hash(text))
}

/// Refuses a new rescue file when the group already keeps as many as it may.
fn check_rescue_budget(group: &SafeDir, to: &str, new_bytes: u64) -> Result<(), GroupError> {
    if group.kind(to)? != NodeKind::Missing {
        return Ok(()); // the same text, kept before (or a planted name, refused in apply)
    }
    let mut files = Vec::new();
    let mut bytes = new_bytes;
    for name in group.list()? {
        let Some(name) = name.to_str() else { continue };
        if is_rescue_name(name) && !is_temp_name(name) {
            bytes += group.size(name)?;
            files.push(group.path().join(name));
        }
    }
    if files.len() < MAX_RESCUES && bytes <= MAX_RESCUE_TOTAL_BYTES {
        return Ok(());
    }
    Err(GroupError::TooManyRescues {
        dir: group.path().to_owned(),
        count: files.len(),
        bytes: bytes - new_bytes,
        files,
    })
}

fn diff_entry(
    dir: Option<&SafeDir>,
    desired: &Desired,
    steps: &mut Vec<Step>,
) -> Result<(), FsError> {
    let path = desired.path.clone();
    let Some(dir) = dir else {
        steps.push(Step::Write {
            path,
            content: desired.content.clone(),
            before: NodeKind::Missing,
        });
        return Ok(());
    };
    let name = desired.path.name.as_str();
    let limit = match &desired.content {
        Content::File(_) if is_entry_point(&desired.path) => MAX_RESCUE_BYTES,
        Content::File(bytes) => bytes.len() as u64,
        Content::Symlink(_) | Content::Seed => 0,
    };
    let mut longer_than_desired = false;
    let node = match dir.kind(name)? {
        NodeKind::Missing => Node::Missing,
        NodeKind::Dir => Node::Dir,
        NodeKind::Other => Node::Other,
        NodeKind::Symlink => Node::Symlink(dir.read_link(name)?),
        NodeKind::File if matches!(desired.content, Content::Seed) => Node::File(Vec::new()),
        NodeKind::File => match dir.read_file(name, limit) {
            Ok(Some(bytes)) => Node::File(bytes),
            Ok(None) => Node::Missing,
            // Longer than the desired content, so it differs: replaced without being read.
            Err(FsError::TooLarge { .. }) if limit != MAX_RESCUE_BYTES => {
                longer_than_desired = true;
                Node::File(Vec::new())
            }
            Err(err) => return Err(err),
        },
    };
    refuse_unsafe(dir, &desired.path, &desired.content, &node)?;
    let up_to_date = match (&desired.content, &node) {
        (Content::Seed, Node::File(_)) => true,
        (Content::File(want), Node::File(have)) => !longer_than_desired && want == have,
        (Content::Symlink(want), Node::Symlink(have)) => want == have,
        _ => false,
    };
    if up_to_date {
        steps.push(Step::Keep { path });
        return Ok(());
    }
    if let Node::File(old) = &node
        && is_entry_point(&desired.path)
        && needs_rescue(old)
    {
        steps.push(Step::Rescue {
            from: name.to_owned(),
            to: rescue_name(name, old),
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
/// was never migrated) is kept before it is replaced; an empty one holds nothing to lose.
fn needs_rescue(old: &[u8]) -> bool {
    !is_pristine(old) && !old.trim_ascii().is_empty()
}

fn refuse_unsafe(
    dir: &SafeDir,
    path: &ManagedPath,
    content: &Content,
    node: &Node,
) -> Result<(), FsError> {
    let protected =
        is_entry_point(path) || (!path.in_fragments && path.name == names::CLAUDE_LOCAL_MD);
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
        found: node.kind().describe().to_owned(),
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

fn stale_fragments(
    fragments: &SafeDir,
    plan: &GroupPlan,
    steps: &mut Vec<Step>,
) -> Result<(), FsError> {
    let wanted: Vec<&str> = plan.fragment_names().collect();
    for name in fragments.list()? {
        let Some(name) = name.to_str() else {
            tracing::warn!(dir = %fragments.path().display(), "leaving a non-UTF-8 name alone");
            continue;
        };
        if wanted.contains(&name) {
            continue;
        }
        match fragments.kind(name)? {
            NodeKind::File | NodeKind::Symlink if is_temp_name(name) => steps.push(Step::Clean {
                path: ManagedPath::fragment(name),
            }),
            kind @ (NodeKind::File | NodeKind::Symlink) => steps.push(Step::Remove {
                path: ManagedPath::fragment(name),
                before: kind,
            }),
            NodeKind::Missing => {}
            other => tracing::warn!(
                path = %fragments.path().join(name).display(),
                "leaving {} alone in .claude-fragments", other.describe()
            ),
        }
    }
    Ok(())
}

/// Performs `steps` in a reader-safe order: leftovers cleaned, rescues, writes (in plan
/// order), then removals. The caller must hold the group's lock.
pub fn apply(group: &SafeDir, fragments: &SafeDir, steps: &[Step]) -> Result<(), FsError> {
    let dir_of = |path: &ManagedPath| if path.in_fragments { fragments } else { group };
    for step in steps {
        if let Step::Clean { path } = step {
            dir_of(path).remove(&path.name)?;
        }
    }
    for step in steps {
        if let Step::Rescue { from, to, bytes } = step {
            if !group.create_new_file(to, bytes)? {
                check_rescued(group, to, bytes)?;
            }
            tracing::warn!(rescued = %group.path().join(to).display(), "kept a hand-edited {from}");
        }
    }
    // The rescued text is durable before the entry point is replaced, and everything the new
    // entry point imports is durable before it is.
    let (entry_point, imported): (Vec<&Step>, Vec<&Step>) = steps
        .iter()
        .filter(|step| matches!(step, Step::Write { .. }))
        .partition(|step| matches!(step, Step::Write { path, .. } if is_entry_point(path)));
    for step in imported.into_iter().chain(entry_point) {
        if let Step::Write { path, content, .. } = step {
            if is_entry_point(path) {
                fragments.sync()?;
                group.sync()?;
            }
            write(dir_of(path), &path.name, content)?;
        }
    }
    fragments.sync()?;
    group.sync()?;
    for step in steps {
        if let Step::Remove { path, .. } = step {
            dir_of(path).remove(&path.name)?;
        }
    }
    fragments.sync()?;
    group.sync()
}

fn is_entry_point(path: &ManagedPath) -> bool {
    !path.in_fragments && is_entry_point_name(&path.name)
}

fn write(dir: &SafeDir, name: &str, content: &Content) -> Result<(), FsError> {
    match content {
        Content::File(bytes) => dir.write_file(name, bytes),
        Content::Symlink(target) => dir.symlink(name, target),
        Content::Seed => dir.create_new_file(name, b"").map(|_| ()),
    }
}

/// The rescue name is taken: an earlier, interrupted run kept the same text there (the name
/// carries its hash), or someone planted it. Only a regular file holding exactly the text will
/// do; anything else (a link, other bytes) stops the compose before `CLAUDE.md` is replaced.
fn check_rescued(group: &SafeDir, to: &str, bytes: &[u8]) -> Result<(), FsError> {
    match group.read_file(to, bytes.len() as u64) {
        Ok(Some(existing)) if existing == bytes => Ok(()),
        Ok(_) | Err(FsError::TooLarge { .. }) => Err(FsError::Unsafe {
            path: group.path().join(to),
            found: "a file with other content".to_owned(),
            expected: "the rescued copy of a hand-edited entry point",
            fix: format!(
                "move {} aside; CLAUDE.md keeps the hand edit until then",
                group.path().join(to).display()
            ),
        }),
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Warning;

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
        }
    }

    #[test]
    fn a_file_longer_than_desired_is_replaced_even_when_desired_is_empty() {
        let temp = tempfile::tempdir().unwrap();
        let dir = SafeDir::open(temp.path()).unwrap();
        dir.write_file("x.md", b"extra").unwrap();
        let steps = diff(&dir, None, &plan_of(Content::File(Vec::new()))).unwrap();
        assert!(
            matches!(
                steps[0],
                Step::Write {
                    before: NodeKind::File,
                    ..
                }
            ),
            "{steps:?}"
        );
        dir.write_file("x.md", b"").unwrap();
        let steps = diff(&dir, None, &plan_of(Content::File(Vec::new()))).unwrap();
        assert!(matches!(steps[0], Step::Keep { .. }), "{steps:?}");
    }

    #[test]
    fn a_directory_where_a_file_belongs_is_refused() {
        let temp = tempfile::tempdir().unwrap();
        std::fs::create_dir(temp.path().join("x.md")).unwrap();
        let dir = SafeDir::open(temp.path()).unwrap();
        let err = diff(&dir, None, &plan_of(Content::File(b"a".to_vec()))).unwrap_err();
        assert!(
            matches!(err, GroupError::Fs(FsError::Unsafe { .. })),
            "{err}"
        );
    }
}
