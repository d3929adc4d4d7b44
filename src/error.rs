//! The library's error types. Each message names the file and says how to fix the problem;
//! the binary only decides how to print them.

use std::path::PathBuf;

use crate::config::ConfigError;
use crate::fsops::FsError;
use crate::loader::LoaderError;
use crate::names::NameProblem;
use crate::plan::FragmentCollision;

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
    /// The group folder does not exist.
    #[error("{} does not exist; fix: create the group folder, or point --root/--groups-dir at the right place", path.display())]
    Missing {
        /// The folder.
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
    /// The memory loader could not start (an unusable working directory).
    #[error(transparent)]
    Loader(#[from] LoaderError),
}

impl GroupError {
    /// A short machine-readable name of the error kind.
    pub fn code(&self) -> &'static str {
        match self {
            GroupError::BadName { .. } => "bad-group-name",
            GroupError::Missing { .. } => "missing-group",
            GroupError::Config(_) => "bad-config",
            GroupError::Collision { .. } => "fragment-collision",
            GroupError::Fs(FsError::Unsafe { .. }) => "unsafe-path",
            GroupError::Fs(FsError::TooLarge { .. }) => "too-large",
            GroupError::Fs(FsError::LockTimeout { .. }) => "lock-timeout",
            GroupError::Fs(FsError::Io { .. }) => "io",
            GroupError::Loader(_) => "loader",
        }
    }

    /// The file the error is about, when there is one.
    pub fn file(&self) -> Option<PathBuf> {
        match self {
            GroupError::BadName { .. } => None,
            GroupError::Missing { path } | GroupError::Collision { path, .. } => Some(path.clone()),
            GroupError::Config(err) => Some(err.path.clone()),
            GroupError::Fs(err) => Some(err.path().to_owned()),
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
}
