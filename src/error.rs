//! The library's error types. Each message names the file and says how to fix the problem;
//! the binary only decides how to print them.
//!
//! An error's message says only its own part: one that has a cause (`#[source]`) does not
//! repeat it, and [`chain_text`] says the whole chain, each link once. A fix that reads after
//! the causes (`cannot list the groups folder: <why>; fix: …`) is kept out of the message too:
//! `chain_text` writes it after the last cause.

use std::path::PathBuf;

use crate::disk::fsops::FsError;
use crate::input::config::ConfigError;
use crate::loader::LoaderError;
use crate::plan::FragmentCollision;
use crate::plan::delivery::guard::GuardError;
use crate::safe_name::NameProblem;

/// Why one group could not be composed or migrated. Other groups are unaffected.
#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    /// The group name cannot be a folder name.
    #[error(
        "group name {name:?} is not usable: {problem}; fix: name group folders with ASCII letters, digits, '.', '_' and '-'"
    )]
    BadName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        problem: NameProblem,
    },
    /// The group name is reserved.
    #[error(
        "group name {name:?} is reserved: groups/{name} held the shared memory that `clawmd migrate` moves into container/CLAUDE.md; fix: run `clawmd migrate`, and give the group another name"
    )]
    Reserved {
        /// The name given.
        name: String,
    },
    /// Compose would keep one more hand-edited `CLAUDE.md` in a group that already holds the
    /// most it keeps.
    #[error(
        "{} already holds {count} rescued hand edits ({bytes} bytes), the most clawmd keeps, and CLAUDE.md was edited again; nothing was changed; fix: merge what you need from {} into CLAUDE.local.md, delete them, then compose again",
        dir.display(),
        files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    TooManyRescues {
        /// The group folder.
        dir: PathBuf,
        /// The rescue files already there.
        files: Vec<PathBuf>,
        /// How many there are.
        count: usize,
        /// Their total size.
        bytes: u64,
    },
    /// The group folder does not exist.
    #[error(
        "{} does not exist; {}fix: create the group folder, or point --root/--groups-dir at the right place",
        path.display(),
        suggestion.as_ref().map(|g| format!("did you mean `{g}`? ")).unwrap_or_default()
    )]
    Missing {
        /// The folder.
        path: PathBuf,
        /// The existing group with the nearest name, when one is close.
        suggestion: Option<String>,
    },
    /// The group's binds name a file clawmd composes that is not there yet.
    #[error(
        "{} does not exist: the group is not composed (with these settings) yet; fix: run `clawmd compose {group}` first (with the same settings), then `clawmd mounts {group}`",
        path.display()
    )]
    NotComposed {
        /// The group.
        group: String,
        /// The missing bind source.
        path: PathBuf,
    },
    /// `clawmd mounts --format k8s`: a file clawmd composes for the group does not fit in one
    /// ConfigMap (1 MiB of data, which the API server enforces).
    #[error(
        "group {group}: {} holds {size} bytes, more than a ConfigMap can carry ({limit} bytes of data, which the API server enforces); fix: lower the group's byte budget (`budgets` in clawmd.json) below {limit}, or compose in the pod (the init-container route of docs/kubernetes.md), which has no such limit",
        container.display()
    )]
    OverConfigMapLimit {
        /// The group.
        group: String,
        /// What does not fit: the container path of the file or folder.
        container: PathBuf,
        /// Its bytes.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// `clawmd mounts --format k8s`: the group's files are not as compose would write them
    /// with these settings.
    #[error(
        "the group's composed files are not what `clawmd compose {group}` would write with these settings (not composed yet, or changed since); fix: run `clawmd compose {group}` first (with the same settings), then `clawmd mounts {group} --format k8s`"
    )]
    NotUpToDate {
        /// The group.
        group: String,
    },
    /// `clawmd mounts --format k8s`: the group's composition cannot be carried by ConfigMaps.
    #[error("group {group}: {reason}")]
    NotForKubernetes {
        /// The group.
        group: String,
        /// Why, and the fix.
        reason: String,
    },
    /// `container.json` is malformed.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Two fragments would share a file name.
    #[error("{}", path.display())]
    Collision {
        /// The group's `container.json`.
        path: PathBuf,
        /// The collision.
        source: FragmentCollision,
    },
    /// A filesystem operation failed or was refused.
    #[error(transparent)]
    Fs(#[from] FsError),
    /// A skill the group enables has an `instructions.md` that cannot be used (the groups that
    /// do not enable it are composed).
    #[error("container.json enables skill {skill:?}, which cannot be used")]
    Skill {
        /// The skill.
        skill: String,
        /// Why its instructions cannot be read.
        source: std::sync::Arc<FsError>,
    },
    /// A file of the recipe's sources that the group gets (a fragment, a skill of another
    /// root) cannot be used (the groups that do not get it are composed).
    #[error("the group gets {section}, which cannot be used")]
    Source {
        /// The section (`module:core`).
        section: String,
        /// Why its file cannot be read.
        source: std::sync::Arc<FsError>,
    },
    /// The memory loader could not start (an unusable working directory).
    #[error(transparent)]
    Loader(#[from] LoaderError),
}

impl GroupError {
    /// The file the error is about, when there is one.
    pub fn file(&self) -> Option<PathBuf> {
        match self {
            GroupError::BadName { .. }
            | GroupError::Reserved { .. }
            | GroupError::NotForKubernetes { .. }
            | GroupError::NotUpToDate { .. } => None,
            GroupError::OverConfigMapLimit { container, .. } => Some(container.clone()),
            GroupError::TooManyRescues { dir, .. } => Some(dir.clone()),
            GroupError::Missing { path, .. }
            | GroupError::Collision { path, .. }
            | GroupError::NotComposed { path, .. } => Some(path.clone()),
            GroupError::Config(err) => Some(err.path.clone()),
            GroupError::Fs(err) => Some(err.path().to_owned()),
            GroupError::Skill { source, .. } | GroupError::Source { source, .. } => {
                Some(source.path().to_owned())
            }
            GroupError::Loader(_) => None,
        }
    }
}

/// A failure that stops a whole run (before any group is touched).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The groups folder cannot be listed.
    #[error("cannot list the groups folder")]
    Groups(#[source] FsError),
    /// The shared `container/` content cannot be read.
    #[error("cannot read the shared container content")]
    Sources(#[source] FsError),
    /// A backend's guard cannot be composed (the runner's own settings file for it).
    #[error(transparent)]
    Guard(#[from] GuardError),
    /// The one group a command is about (`clawmd mounts GROUP`) cannot be used.
    #[error("group {group}")]
    Group {
        /// The group.
        group: String,
        /// Why.
        #[source]
        source: Box<GroupError>,
    },
}

impl Error {
    /// The fix said after this error's causes, when it has one.
    pub fn fix_after_causes(&self) -> Option<&'static str> {
        match self {
            Error::Groups(_) => Some("fix: check --root (or CLAWMD_ROOT) and --groups-dir"),
            Error::Guard(err) => err.fix_after_causes(),
            Error::Sources(_) | Error::Group { .. } => None,
        }
    }
}

/// `err` and its causes as one text: each link of the chain ([`source`]) once, joined with
/// ": ", then the fixes said after the causes ([`Error::fix_after_causes`]), the innermost
/// first, each after "; ". The binary prints errors so, and the reports carry this text.
///
/// [`source`]: std::error::Error::source
pub fn chain_text(err: &(dyn std::error::Error + 'static)) -> String {
    use std::fmt::Write as _;
    let mut text = String::new();
    let mut fixes = Vec::new();
    let mut link = Some(err);
    while let Some(cause) = link {
        if !std::ptr::addr_eq(cause, err) {
            text.push_str(": ");
        }
        let _ = write!(text, "{cause}");
        fixes.extend(fix_after_causes(cause));
        link = cause.source();
    }
    for fix in fixes.iter().rev() {
        text.push_str("; ");
        text.push_str(fix);
    }
    text
}

/// The fix `link` says after its causes: the library's errors that have both a cause and such
/// a fix are [`Error`] and [`GuardError`].
fn fix_after_causes(link: &(dyn std::error::Error + 'static)) -> Option<&'static str> {
    if let Some(err) = link.downcast_ref::<Error>() {
        return err.fix_after_causes();
    }
    link.downcast_ref::<GuardError>()
        .and_then(GuardError::fix_after_causes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn not_found(op: &'static str, path: &str) -> FsError {
        FsError::Io {
            op,
            path: path.into(),
            source: std::io::ErrorKind::NotFound.into(),
        }
    }

    #[test]
    fn a_message_says_only_its_own_part_and_the_chain_says_each_cause_once() {
        let err = Error::Groups(not_found("open directory", "/srv/groups"));
        assert_eq!(err.to_string(), "cannot list the groups folder");
        assert_eq!(
            chain_text(&err),
            "cannot list the groups folder: cannot open directory /srv/groups: entity not found; \
             fix: check --root (or CLAWMD_ROOT) and --groups-dir"
        );
    }

    #[test]
    fn the_fixes_said_after_the_causes_come_innermost_first() {
        let unsafe_dir = FsError::Unsafe {
            path: "/srv/groups".into(),
            found: "a symlink".to_owned(),
            expected: "a real directory",
            fix: "move it aside".to_owned(),
        };
        let err = Error::Groups(unsafe_dir);
        assert_eq!(
            chain_text(&err),
            "cannot list the groups folder: refusing to use /srv/groups: it is a symlink, not a \
             real directory; fix: move it aside; fix: check --root (or CLAWMD_ROOT) and --groups-dir"
        );
        let guard = Error::Guard(GuardError::Read(not_found("read", "/srv/gemini.json")));
        assert_eq!(
            chain_text(&guard),
            "cannot read the runner's Gemini system settings: cannot read /srv/gemini.json: entity \
             not found; fix the path of `geminiSystemSettings` in clawmd.json"
        );
    }

    #[test]
    fn a_group_error_under_a_run_error_is_said_once() {
        let err = Error::Group {
            group: "main".to_owned(),
            source: Box::new(GroupError::Skill {
                skill: "github".to_owned(),
                source: std::sync::Arc::new(not_found(
                    "read",
                    "/srv/skills/github/instructions.md",
                )),
            }),
        };
        assert_eq!(
            chain_text(&err),
            "group main: container.json enables skill \"github\", which cannot be used: cannot read \
             /srv/skills/github/instructions.md: entity not found"
        );
    }
}
