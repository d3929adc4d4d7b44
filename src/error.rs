//! The library's error types. Each message names the file and says how to fix the problem;
//! the binary only decides how to print them.

use std::path::PathBuf;

use crate::config::ConfigError;
use crate::fsops::FsError;
use crate::loader::LoaderError;
use crate::plan::FragmentCollision;
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
    /// `container.json` is malformed.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Two fragments would share a file name.
    #[error("{}: {source}", path.display())]
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
    #[error("container.json enables skill {skill:?}, which cannot be used: {source}")]
    Skill {
        /// The skill.
        skill: String,
        /// Why its instructions cannot be read.
        source: std::sync::Arc<FsError>,
    },
    /// A file of the recipe's sources that the group gets (a fragment, a skill of another
    /// root) cannot be used (the groups that do not get it are composed).
    #[error("the group gets {section}, which cannot be used: {source}")]
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
            GroupError::BadName { .. } | GroupError::Reserved { .. } => None,
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
    #[error(
        "cannot list the groups folder: {0}; fix: check --root (or CLAWMD_ROOT) and --groups-dir"
    )]
    Groups(#[source] FsError),
    /// The shared `container/` content cannot be read.
    #[error("cannot read the shared container content: {0}")]
    Sources(#[source] FsError),
    /// A backend's guard cannot be composed (the runner's own settings file for it).
    #[error(transparent)]
    Guard(#[from] crate::delivery::guard::GuardError),
    /// The one group a command is about (`clawmd mounts GROUP`) cannot be used.
    #[error("group {group}: {source}")]
    Group {
        /// The group.
        group: String,
        /// Why.
        #[source]
        source: Box<GroupError>,
    },
}
