//! The library's error types. Each message names the file and says how to fix the problem;
//! the binary only decides how to print them.
//!
//! An error's message says only its own part: one that has a cause (`#[source]`) does not
//! repeat it, and [`chain_text`] says the whole chain, each link once. A fix that reads after
//! the causes (`cannot list the groups folder: <why>; fix: …`, and a failed system call's,
//! `cannot create <path>: Read-only file system (os error 30); fix: …`, which its error number
//! gives) is kept out of the message too: `chain_text` writes it after the last cause.
//!
//! A fix that ends an error's own message ("<problem>; fix: <fix>") is carried apart as well:
//! [`GroupError::fix`] gives it (and the like of `FsError`, `ConfigError` and
//! `FragmentCollision`), and [`chain_problem_and_fix`] the chain's text without it, so that
//! a report puts the two in their own fields without reading the text.

use std::borrow::Cow;
use std::path::PathBuf;

use crate::disk::fsops::FsError;
use crate::input::config::ConfigError;
use crate::loader::LoaderError;
use crate::plan::FragmentCollision;
use crate::plan::delivery::guard::GuardError;
use crate::safe_name::NameProblem;

/// Why one group could not be composed or migrated. Other groups are unaffected.
///
/// A message that says how to fix the problem ends with "; fix: " and the fix; [`fix`] gives
/// the fix apart (one a cause carries too), and [`chain_problem_and_fix`] the whole chain's
/// text apart from it.
///
/// [`fix`]: GroupError::fix
#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    /// The group name cannot be a folder name.
    #[error("{}", self.with_fix())]
    BadName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        problem: NameProblem,
    },
    /// The group name is reserved.
    #[error("{}", self.with_fix())]
    Reserved {
        /// The name given.
        name: String,
    },
    /// Compose would keep one more hand-edited `CLAUDE.md` in a group that already holds the
    /// most it keeps.
    #[error("{}", self.with_fix())]
    TooManyRescues {
        /// The group folder.
        dir: PathBuf,
        /// The rescue files already there.
        files: Vec<PathBuf>,
        /// How many there are.
        count: usize,
        /// Their total size.
        bytes: u64,
        /// The file the group's own text is kept in (`CLAUDE.local.md`, or the persona file
        /// the recipe delivers), where the rescued text can be merged.
        own_text: String,
    },
    /// The group folder does not exist. (Its message puts the suggestion before the fix:
    /// `… does not exist; did you mean `main`? fix: …`.)
    #[error(
        "{} does not exist; {}fix: {MISSING_FIX}",
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
    #[error("{}", self.with_fix())]
    NotComposed {
        /// The group.
        group: String,
        /// The missing bind source.
        path: PathBuf,
    },
    /// `clawmd mounts --format k8s`: a file clawmd composes for the group does not fit in one
    /// ConfigMap (1 MiB of data, which the API server enforces).
    #[error("{}", self.with_fix())]
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
    #[error("{}", self.with_fix())]
    NotUpToDate {
        /// The group.
        group: String,
    },
    /// `clawmd mounts --format k8s`: the group's composition cannot be carried by ConfigMaps.
    #[error("{}", self.with_fix())]
    NotForKubernetes {
        /// The group.
        group: String,
        /// Why.
        reason: String,
        /// How to fix it.
        fix: &'static str,
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
    /// `claudeHome` names the agent's `~/.claude` by the group's `agentGroupId`, and the
    /// group's config has no usable one: the agent's user settings cannot be read.
    #[error("{}", self.with_fix())]
    AgentHomeUnknown {
        /// `claudeHome`, resolved against the root.
        template: PathBuf,
    },
    /// The memory loader could not start (an unusable working directory).
    #[error(transparent)]
    Loader(#[from] LoaderError),
}

/// [`GroupError::Missing`]'s fix.
const MISSING_FIX: &str =
    "create the group folder, or point --root/--groups-dir at the right place";

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
            GroupError::Loader(_) | GroupError::AgentHomeUnknown { .. } => None,
        }
    }

    /// How to fix the error, when clawmd knows: the text its message (or its cause's) ends
    /// with, after "fix: ".
    pub fn fix(&self) -> Option<Cow<'_, str>> {
        Some(match self {
            GroupError::BadName { .. } => {
                "name group folders with ASCII letters, digits, '.', '_' and '-'".into()
            }
            GroupError::Reserved { .. } => {
                "run `clawmd migrate`, and give the group another name".into()
            }
            GroupError::TooManyRescues {
                files, own_text, ..
            } => format!(
                "merge what you need from {} into {own_text}, delete them, then compose again",
                files
                    .iter()
                    .map(|f| f.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            )
            .into(),
            GroupError::Missing { .. } => MISSING_FIX.into(),
            GroupError::NotComposed { group, .. } => format!(
                "run `clawmd compose {group}` first (with the same settings), then `clawmd mounts {group}`"
            )
            .into(),
            GroupError::OverConfigMapLimit { limit, .. } => format!(
                "lower the group's byte budget (`budgets` in clawmd.json) below {limit}, or compose in the pod (the init-container route of docs/kubernetes.md), which has no such limit"
            )
            .into(),
            GroupError::NotUpToDate { group } => format!(
                "run `clawmd compose {group}` first (with the same settings), then `clawmd mounts {group} --format k8s`"
            )
            .into(),
            GroupError::NotForKubernetes { fix, .. } => (*fix).into(),
            GroupError::Config(err) => err.fix.as_str().into(),
            GroupError::Collision { source, .. } => source.fix().into(),
            GroupError::Fs(err) => return err.fix(),
            GroupError::Skill { source, .. } | GroupError::Source { source, .. } => {
                return source.fix();
            }
            GroupError::Loader(_) => return None,
            GroupError::AgentHomeUnknown { .. } => {
                "hand the group's config as the runner has it (nanoclaw's carries `agentGroupId`), or name the home by {group} in claudeHome".into()
            }
        })
    }

    /// What the message says before its own fix, for an error whose own message (not a
    /// cause's) ends with one.
    pub fn problem(&self) -> Option<String> {
        Some(match self {
            GroupError::BadName { name, problem } => {
                format!("group name {name:?} is not usable: {problem}")
            }
            GroupError::Reserved { name } => format!(
                "group name {name:?} is reserved: groups/{name} held the shared memory that `clawmd migrate` retires, keeping its text aside in the state folder's legacy/ (groups/.clawmd/legacy/ by default), or appending it to container/CLAUDE.md with --append-global"
            ),
            GroupError::TooManyRescues {
                dir, count, bytes, ..
            } => format!(
                "{} already holds {count} rescued hand edits ({bytes} bytes), the most clawmd keeps, and CLAUDE.md was edited again; nothing was changed",
                dir.display()
            ),
            GroupError::Missing { path, suggestion } => match suggestion {
                Some(g) => format!("{} does not exist; did you mean `{g}`?", path.display()),
                None => format!("{} does not exist", path.display()),
            },
            GroupError::NotComposed { path, .. } => format!(
                "{} does not exist: the group is not composed (with these settings) yet",
                path.display()
            ),
            GroupError::OverConfigMapLimit {
                group,
                container,
                size,
                limit,
            } => format!(
                "group {group}: {} holds {size} bytes, more than a ConfigMap can carry ({limit} bytes of data, which the API server enforces)",
                container.display()
            ),
            GroupError::NotUpToDate { group } => format!(
                "the group's composed files are not what `clawmd compose {group}` would write with these settings (not composed yet, or changed since)"
            ),
            GroupError::NotForKubernetes { group, reason, .. } => {
                format!("group {group}: {reason}")
            }
            GroupError::AgentHomeUnknown { template } => format!(
                "clawmd.json's claudeHome ({}) names the agent's ~/.claude by the group's agentGroupId, and the group's config has none, or one that is not a plain name (1 to 128 of A-Z a-z 0-9 . _ -, not starting with a dot)",
                template.display()
            ),
            GroupError::Config(err) => err.problem(),
            GroupError::Fs(err) => return err.problem(),
            GroupError::Collision { .. }
            | GroupError::Skill { .. }
            | GroupError::Source { .. }
            | GroupError::Loader(_) => return None,
        })
    }

    /// The message of a variant that ends with its own fix: "<problem>; fix: <fix>".
    fn with_fix(&self) -> String {
        let problem = self.problem().unwrap_or_default();
        match self.fix() {
            Some(fix) => format!("{problem}; fix: {fix}"),
            None => problem,
        }
    }
}

/// A failure that stops a whole run (before any group is touched).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The deployment's settings (`clawmd.json`) cannot be used: malformed, or a value clawmd
    /// does not take. No command runs without them.
    #[error(transparent)]
    Settings(#[from] ConfigError),
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
            Error::Settings(_) | Error::Sources(_) | Error::Group { .. } => None,
        }
    }
}

/// `err` and its causes as one text: each link of the chain ([`source`]) once, joined with
/// ": ", then the fixes said after the causes ([`Error::fix_after_causes`], a failed system
/// call's [`FsError::fix`]), the innermost first, each after "; ". The binary prints errors
/// so, and the reports carry this text.
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
        text.push_str(fix.as_ref());
    }
    text
}

/// `err`'s chain as [`chain_text`] says it, apart from the fix: what is wrong, and how to fix
/// it ([`GroupError::fix`]). The link whose message ends with the fix is said without it
/// ([`GroupError::problem`], and its like for the causes that carry a fix).
pub fn chain_problem_and_fix(err: &GroupError) -> (String, Option<Cow<'_, str>>) {
    use std::fmt::Write as _;
    let mut text = String::new();
    let mut link: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(cause) = link {
        if !std::ptr::addr_eq(cause, err) {
            text.push_str(": ");
        }
        match problem(cause) {
            Some(problem) => text.push_str(&problem),
            None => {
                let _ = write!(text, "{cause}");
            }
        }
        link = cause.source();
    }
    (text, err.fix())
}

/// What `link`'s message says before its own fix, for the library's errors whose message ends
/// with one.
fn problem(link: &(dyn std::error::Error + 'static)) -> Option<String> {
    if let Some(err) = link.downcast_ref::<GroupError>() {
        err.problem()
    } else if let Some(err) = link.downcast_ref::<FsError>() {
        err.problem()
    } else if let Some(err) = link.downcast_ref::<std::sync::Arc<FsError>>() {
        // `GroupError::Skill`'s and `Source`'s cause.
        err.problem()
    } else if let Some(err) = link.downcast_ref::<ConfigError>() {
        Some(err.problem())
    } else {
        link.downcast_ref::<FragmentCollision>()
            .map(FragmentCollision::problem)
    }
}

/// The fix `link` says after its causes: the library's errors that have both a cause and such
/// a fix are [`Error`], [`GuardError`] and a failed system call ([`FsError::Io`], whose fix
/// its error number gives).
fn fix_after_causes<'a>(link: &'a (dyn std::error::Error + 'static)) -> Option<Cow<'a, str>> {
    if let Some(err) = link.downcast_ref::<Error>() {
        return err.fix_after_causes().map(Cow::Borrowed);
    }
    if let Some(err) = link.downcast_ref::<GuardError>() {
        return err.fix_after_causes().map(Cow::Borrowed);
    }
    let fix = failed_call(link)?.fix()?;
    Some(format!("fix: {fix}").into())
}

/// The failed system call `link` is: an [`FsError::Io`] itself, or the group's error or the
/// shared file's that is one (`GroupError::Fs` is transparent: its message is the call's).
fn failed_call<'a>(link: &'a (dyn std::error::Error + 'static)) -> Option<&'a FsError> {
    let err = if let Some(err) = link.downcast_ref::<FsError>() {
        err
    } else if let Some(err) = link.downcast_ref::<std::sync::Arc<FsError>>() {
        // `GroupError::Skill`'s and `Source`'s cause.
        err
    } else if let Some(GroupError::Fs(err)) = link.downcast_ref::<GroupError>() {
        err
    } else if let Some(GroupError::Fs(err)) = link.downcast_ref::<Box<GroupError>>().map(|b| &**b) {
        // `Error::Group`'s cause.
        err
    } else {
        return None;
    };
    matches!(err, FsError::Io { .. }).then_some(err)
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

    /// A failed system call whose error number says what clawmd lacks (a read-only file
    /// system, a permission refused, a full disk or quota) ends with the fix, after its cause,
    /// naming what clawmd needs there; it is also the group's `fix`, apart from the rest. The
    /// place named is the folder an entry is made in or removed from, or a temp file's folder,
    /// else the path itself. Another error number has no fix.
    #[test]
    fn a_failed_system_call_says_its_fix_after_its_cause_by_its_error_number() {
        use rustix::io::Errno;
        use std::sync::Arc;
        let failed = |op: &'static str, path: &str, errno: Errno| FsError::Io {
            op,
            path: path.into(),
            source: std::io::Error::from_raw_os_error(errno.raw_os_error()),
        };
        let needs = "clawmd reads the shared content and the group folders, and writes in its \
                     state folder (`stateDir` in clawmd.json, default groups/.clawmd) and in the \
                     group folders";
        let writes = "clawmd writes in its state folder (`stateDir` in clawmd.json, default \
                      groups/.clawmd) and in the group folders";
        // (op, path, error number), what the message says before the fix, and the fix.
        let cases = [
            (
                ("create", "/srv/groups/main/.clawmd-tmp-1", Errno::ROFS),
                "cannot create /srv/groups/main/.clawmd-tmp-1: Read-only file system (os error \
                 30)",
                format!(
                    "mount the file system of /srv/groups/main read-write where clawmd runs: \
                     {writes}"
                ),
            ),
            (
                ("open", "/srv/groups/.clawmd/journal/main", Errno::ROFS),
                "cannot open /srv/groups/.clawmd/journal/main: Read-only file system (os error \
                 30)",
                format!(
                    "mount the file system of /srv/groups/.clawmd/journal/main read-write where \
                     clawmd runs: {writes}"
                ),
            ),
            (
                (
                    "create directory",
                    "/srv/groups/.clawmd/binds",
                    Errno::ACCESS,
                ),
                "cannot create directory /srv/groups/.clawmd/binds: Permission denied (os error \
                 13)",
                format!("give the user clawmd runs as access to /srv/groups/.clawmd: {needs}"),
            ),
            (
                ("read", "/srv/container/CLAUDE.md", Errno::PERM),
                "cannot read /srv/container/CLAUDE.md: Operation not permitted (os error 1)",
                format!("give the user clawmd runs as access to /srv/container/CLAUDE.md: {needs}"),
            ),
            (
                ("write", "/srv/groups/main/CLAUDE.md", Errno::NOSPC),
                "cannot write /srv/groups/main/CLAUDE.md: No space left on device (os error 28)",
                "free space (or inodes) on the file system of /srv/groups/main/CLAUDE.md"
                    .to_owned(),
            ),
            (
                (
                    "write",
                    "/srv/groups/main/.clawmd-tmp-0123456789abcdef0123456789abcdef",
                    Errno::NOSPC,
                ),
                "cannot write /srv/groups/main/.clawmd-tmp-0123456789abcdef0123456789abcdef: No \
                 space left on device (os error 28)",
                "free space (or inodes) on the file system of /srv/groups/main".to_owned(),
            ),
            (
                ("replace", "/srv/groups/main/CLAUDE.md", Errno::DQUOT),
                "cannot replace /srv/groups/main/CLAUDE.md: Disk quota exceeded (os error 122)",
                "free space on the file system of /srv/groups/main, or raise the disk quota of \
                 the user clawmd runs as"
                    .to_owned(),
            ),
        ];
        for ((op, path, errno), problem, fix) in cases {
            let fs = || failed(op, path, errno);
            let said = format!("{problem}; fix: {fix}");
            assert_eq!(fs().fix().as_deref(), Some(fix.as_str()), "{op} {path}");
            let err = GroupError::Fs(fs());
            assert_eq!(chain_text(&err), said);
            assert_eq!(err.fix().as_deref(), Some(fix.as_str()));
            let (got_problem, got_fix) = chain_problem_and_fix(&err);
            assert_eq!(got_problem, problem);
            assert_eq!(got_fix.as_deref(), Some(fix.as_str()));
            // The one group of `clawmd mounts GROUP`, under the run's error: said once.
            let run = Error::Group {
                group: "main".to_owned(),
                source: Box::new(GroupError::Fs(fs())),
            };
            assert_eq!(chain_text(&run), format!("group main: {said}"));
            // A shared file a group's skill needs.
            let skill = GroupError::Skill {
                skill: "github".to_owned(),
                source: Arc::new(fs()),
            };
            assert_eq!(
                chain_text(&skill),
                format!("container.json enables skill \"github\", which cannot be used: {said}")
            );
            assert_eq!(skill.fix().as_deref(), Some(fix.as_str()));
        }
        // Before a run's own fix, innermost first.
        let groups = Error::Groups(failed("list", "/srv/groups", Errno::ACCESS));
        assert_eq!(
            chain_text(&groups),
            format!(
                "cannot list the groups folder: cannot list /srv/groups: Permission denied (os \
                 error 13); fix: give the user clawmd runs as access to /srv/groups: {needs}; \
                 fix: check --root (or CLAWMD_ROOT) and --groups-dir"
            )
        );
        // An error number that names nothing to fix: no fix.
        let other = failed("read", "/srv/container/CLAUDE.md", Errno::IO);
        assert_eq!(other.fix(), None);
        assert_eq!(
            chain_text(&GroupError::Fs(other)),
            "cannot read /srv/container/CLAUDE.md: Input/output error (os error 5)"
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

    /// Every error whose message said its fix after "; fix: " (the text `clawmd check` used
    /// to split) keeps that message word for word, and gives the same fix through
    /// [`GroupError::fix`], the message before it through [`chain_problem_and_fix`].
    #[test]
    fn every_error_that_said_its_fix_gives_the_same_fix_apart() {
        use std::sync::Arc;
        use std::time::Duration;
        let unsafe_dir = || FsError::Unsafe {
            path: "/srv/groups/main".into(),
            found: "a symlink".to_owned(),
            expected: "a real directory",
            fix: "move it aside".to_owned(),
        };
        let too_large = || FsError::TooLarge {
            path: "/srv/container/CLAUDE.md".into(),
            limit: 1024,
            fix: "shorten it".to_owned(),
        };
        let lock_timeout = || FsError::LockTimeout {
            path: "/srv/groups/.clawmd/locks/main".into(),
            waited: Duration::from_secs(30),
        };
        // Each error, with the text it said before the fix was carried apart (the old
        // `#[error]` formats, written out), and that fix.
        let cases: Vec<(GroupError, &str, &str)> = vec![
            (
                GroupError::BadName {
                    name: "a b".to_owned(),
                    problem: NameProblem::DotDot,
                },
                "group name \"a b\" is not usable: the name contains \"..\"",
                "name group folders with ASCII letters, digits, '.', '_' and '-'",
            ),
            (
                GroupError::Reserved {
                    name: "global".to_owned(),
                },
                "group name \"global\" is reserved: groups/global held the shared memory that \
                 `clawmd migrate` retires, keeping its text aside in the state folder's legacy/ \
                 (groups/.clawmd/legacy/ by default), or appending it to container/CLAUDE.md \
                 with --append-global",
                "run `clawmd migrate`, and give the group another name",
            ),
            (
                GroupError::TooManyRescues {
                    dir: "/srv/groups/main".into(),
                    files: vec!["/srv/r/1.md".into(), "/srv/r/2.md".into()],
                    count: 2,
                    bytes: 40,
                    own_text: "instructions.prepend.md".to_owned(),
                },
                "/srv/groups/main already holds 2 rescued hand edits (40 bytes), the most clawmd \
                 keeps, and CLAUDE.md was edited again; nothing was changed",
                "merge what you need from /srv/r/1.md, /srv/r/2.md into instructions.prepend.md, \
                 delete them, then compose again",
            ),
            (
                GroupError::Missing {
                    path: "/srv/groups/mian".into(),
                    suggestion: None,
                },
                "/srv/groups/mian does not exist",
                "create the group folder, or point --root/--groups-dir at the right place",
            ),
            (
                GroupError::NotComposed {
                    group: "main".to_owned(),
                    path: "/srv/groups/.clawmd/binds/main/CLAUDE.md".into(),
                },
                "/srv/groups/.clawmd/binds/main/CLAUDE.md does not exist: the group is not \
                 composed (with these settings) yet",
                "run `clawmd compose main` first (with the same settings), then `clawmd mounts \
                 main`",
            ),
            (
                GroupError::OverConfigMapLimit {
                    group: "main".to_owned(),
                    container: "/workspace/group/CLAUDE.md".into(),
                    size: 2_000_000,
                    limit: 1_048_576,
                },
                "group main: /workspace/group/CLAUDE.md holds 2000000 bytes, more than a \
                 ConfigMap can carry (1048576 bytes of data, which the API server enforces)",
                "lower the group's byte budget (`budgets` in clawmd.json) below 1048576, or \
                 compose in the pod (the init-container route of docs/kubernetes.md), which has \
                 no such limit",
            ),
            (
                GroupError::NotUpToDate {
                    group: "main".to_owned(),
                },
                "the group's composed files are not what `clawmd compose main` would write with \
                 these settings (not composed yet, or changed since)",
                "run `clawmd compose main` first (with the same settings), then `clawmd mounts \
                 main --format k8s`",
            ),
            (
                GroupError::NotForKubernetes {
                    group: "main".to_owned(),
                    reason: "/srv/x is a symbolic link, which a ConfigMap cannot carry".to_owned(),
                    fix: "use managed (the default) or copy delivery, or compose in the pod \
                          (docs/kubernetes.md)",
                },
                "group main: /srv/x is a symbolic link, which a ConfigMap cannot carry",
                "use managed (the default) or copy delivery, or compose in the pod \
                 (docs/kubernetes.md)",
            ),
            (
                GroupError::Config(ConfigError {
                    path: "/srv/groups/main/container.json".into(),
                    position: Some((3, 7)),
                    field: Some("skills".to_owned()),
                    message: "expected a list".to_owned(),
                    fix: "write a list of skill names".to_owned(),
                }),
                "/srv/groups/main/container.json:3:7: field `skills`: expected a list",
                "write a list of skill names",
            ),
            (
                GroupError::Collision {
                    path: "/srv/groups/main/container.json".into(),
                    source: FragmentCollision {
                        first: "skill:mcp-db".to_owned(),
                        second: "mcp:db".to_owned(),
                        file: "mcp-db.md".to_owned(),
                    },
                },
                "/srv/groups/main/container.json: skill:mcp-db and mcp:db would both be written \
                 to .claude-fragments/mcp-db.md",
                "rename the MCP server in container.json (or a source's `name` in clawmd.json)",
            ),
            (
                GroupError::Fs(unsafe_dir()),
                "refusing to use /srv/groups/main: it is a symlink, not a real directory",
                "move it aside",
            ),
            (
                GroupError::Fs(too_large()),
                "/srv/container/CLAUDE.md is larger than 1024 bytes",
                "shorten it",
            ),
            (
                GroupError::Fs(lock_timeout()),
                "timed out after 30s waiting for the lock /srv/groups/.clawmd/locks/main held by \
                 another clawmd run",
                "wait for it to finish, or raise CLAWMD_LOCK_TIMEOUT (seconds)",
            ),
            (
                GroupError::Skill {
                    skill: "github".to_owned(),
                    source: Arc::new(too_large()),
                },
                "container.json enables skill \"github\", which cannot be used: \
                 /srv/container/CLAUDE.md is larger than 1024 bytes",
                "shorten it",
            ),
            (
                GroupError::Source {
                    section: "module:core".to_owned(),
                    source: Arc::new(unsafe_dir()),
                },
                "the group gets module:core, which cannot be used: refusing to use \
                 /srv/groups/main: it is a symlink, not a real directory",
                "move it aside",
            ),
        ];
        for (err, problem, fix) in &cases {
            let said = format!("{problem}; fix: {fix}");
            assert_eq!(chain_text(err), said, "{err:?}");
            assert_eq!(err.fix().as_deref(), Some(*fix), "{err:?}");
            let (got_problem, got_fix) = chain_problem_and_fix(err);
            assert_eq!(
                (got_problem.as_str(), got_fix.as_deref()),
                (*problem, Some(*fix)),
                "{err:?}"
            );
        }

        // A missing group with a near name says the suggestion before the fix, as it did.
        let missing = GroupError::Missing {
            path: "/srv/groups/mian".into(),
            suggestion: Some("main".to_owned()),
        };
        assert_eq!(
            missing.to_string(),
            "/srv/groups/mian does not exist; did you mean `main`? fix: create the group folder, \
             or point --root/--groups-dir at the right place"
        );
        let (problem, fix) = chain_problem_and_fix(&missing);
        assert_eq!(
            problem,
            "/srv/groups/mian does not exist; did you mean `main`?"
        );
        assert_eq!(
            fix.as_deref(),
            Some("create the group folder, or point --root/--groups-dir at the right place")
        );

        // An error that says no fix gives none, and its whole text as the problem.
        let io = GroupError::Skill {
            skill: "github".to_owned(),
            source: Arc::new(not_found("read", "/srv/skills/github/instructions.md")),
        };
        assert_eq!(io.fix(), None);
        assert_eq!(chain_problem_and_fix(&io), (chain_text(&io), None));
    }
}
