//! `watch`: keep groups composed while their inputs change, and tell the runner which groups
//! changed, so it can restart stale idle containers without polling.
//!
//! One inotify instance watches what a composition depends on: the deployment root (for
//! `clawmd.json`), the groups folder (groups added or removed), each watched group's folder
//! (its `container.json` and the memory it owns) and the `container/` tree (the shared base, the
//! skills, the files they import). Events are debounced — a burst of writes (an editor's save, a
//! `git pull`) becomes one recompose once the inputs have been quiet for
//! [`WatchOptions::debounce`] — and then only the groups an event concerns are composed, with
//! [`compose`](crate::commands::compose::compose) itself: locks, atomic writes and the verdict are the
//! same as for a runner's own compose, and a group whose inputs did not really change is a
//! no-op that writes nothing. There is no polling: between events the process sleeps in
//! `poll(2)` on the inotify descriptor and on the caller's stop descriptor.
//!
//! The caller sees [`WatchEvent`]s: a group that changed, a group whose compose failed (once
//! per distinct failure, so an agent writing its memory in a loop next to a malformed
//! `container.json` does not repeat it), a group that is back to its composed state after a
//! failure, a group that was removed, and warnings. A malformed `container.json` or
//! `clawmd.json` while watching leaves everything as it was, and watching goes on.
//!
//! What is not watched: folders below a group folder's top level (the agent writes there
//! freely, and every folder it made would cost a watch), and under `container/`, hidden folders
//! and `node_modules`. A directory that cannot be watched (the kernel's
//! `fs.inotify.max_user_watches`) is a warning, not a failure.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsStr;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;

use crate::commands::compose::{ComposeOptions, KeptAcrossRuns, compose_keeping};
use crate::disk::deployment::{Selection, list_groups};
use crate::disk::fsops::{SafeDir, TEMP_PREFIX};
use crate::file_kind::FileKind;
use crate::input::names;
use crate::input::recipe::{SkillRoot, SourceKind};
use crate::input::settings::{Overrides, Resolved, SETTINGS_FILE, read_settings};
use crate::plan::target::{AGENTS_MD, GEMINI_MD};
use crate::report::{Code, GroupReport, Status, WarningReport, WatchEvent};

/// How to watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchOptions {
    /// How long the inputs must be quiet before the groups they concern are recomposed.
    pub debounce: Duration,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            debounce: Duration::from_millis(200),
        }
    }
}

/// The most directories under `container/` that get a watch of their own.
const MAX_CONTAINER_DIRS: usize = 4096;
/// The deepest folder under `container/` that gets a watch.
const MAX_CONTAINER_DEPTH: usize = 16;
/// The most folders inside one group folder that are watched for the recipe's sources there.
const MAX_GROUP_SOURCE_DIRS: usize = 64;
/// What is watched in a group's folders.
const GROUP_EVENTS: WatchFlags = WatchFlags::CLOSE_WRITE
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::MOVED_FROM)
    .union(WatchFlags::CREATE)
    .union(WatchFlags::DELETE)
    .union(WatchFlags::ATTRIB)
    .union(WatchFlags::DELETE_SELF)
    .union(WatchFlags::MOVE_SELF);
/// A burst of events that never goes quiet is still acted on after this many debounce periods.
const MAX_WAIT_PERIODS: u32 = 10;

/// Why watching could not start (or had to stop).
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The deployment's settings file cannot be used at start.
    #[error(transparent)]
    Settings(#[from] crate::input::config::ConfigError),
    /// The groups or shared content cannot be read at start.
    #[error(transparent)]
    Run(#[from] crate::Error),
    /// inotify or poll failed. (The system's error is part of the message, not a cause of
    /// its own, so that the fix reads after it.)
    #[error("cannot watch {what}: {cause}; fix: {fix}")]
    Inotify {
        /// What was being watched.
        what: String,
        /// The system's error.
        cause: std::io::Error,
        /// What to do about it.
        fix: &'static str,
    },
}

/// What a watch descriptor stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Watched {
    /// The deployment root: only `clawmd.json` matters there.
    Root,
    /// The groups folder: groups come and go.
    GroupsDir,
    /// One group's folder.
    Group(String),
    /// A folder of the shared `container/` tree.
    Container,
}

/// What the events since the last recompose ask for.
#[derive(Debug, Default)]
struct Pending {
    settings: bool,
    listing: bool,
    container: bool,
    rewatch_container: bool,
    groups: BTreeSet<String>,
    /// Groups in whose folders a folder appeared: their recipe source folders are watched anew.
    rewatch_groups: BTreeSet<String>,
    first: Option<Instant>,
    last: Option<Instant>,
}

impl Pending {
    fn any(&self) -> bool {
        self.first.is_some()
    }

    fn touch(&mut self, now: Instant) {
        self.first.get_or_insert(now);
        self.last = Some(now);
    }

    /// How long to sleep before acting, or `None` to sleep until the next event.
    fn wait(&self, debounce: Duration, now: Instant) -> Option<Duration> {
        let (first, last) = (self.first?, self.last?);
        let quiet = last + debounce;
        let cap = first + debounce * MAX_WAIT_PERIODS;
        Some(quiet.min(cap).saturating_duration_since(now))
    }
}

/// Composes the selected groups, then keeps them composed as their inputs change, until `stop`
/// becomes readable (the binary makes it readable on SIGINT and SIGTERM). `sink` receives
/// every [`WatchEvent`] as it happens.
pub fn watch(
    root: &Path,
    overrides: &Overrides,
    selection: &Selection,
    options: &WatchOptions,
    stop: BorrowedFd<'_>,
    sink: &mut dyn FnMut(WatchEvent),
) -> Result<(), WatchError> {
    let (resolved, warnings) = read_settings(root)?;
    for warning in warnings {
        sink(WatchEvent::Warning(WarningReport {
            code: warning.code,
            message: warning.to_string(),
        }));
    }
    let mut state = State::start(
        root,
        overrides,
        selection,
        resolved.resolve(root, overrides),
    )?;
    let groups = state.current_groups()?;
    state.rewatch(&groups, sink);
    state.compose(&groups, sink);
    sink(WatchEvent::Ready {
        groups: state.groups.len(),
    });
    let mut pending = Pending::default();
    let mut buffer = vec![MaybeUninit::<u8>::uninit(); 64 * 1024];
    loop {
        let now = Instant::now();
        let timeout = pending.wait(options.debounce, now).map(|wait| {
            Timespec::try_from(wait).unwrap_or(Timespec {
                tv_sec: 1,
                tv_nsec: 0,
            })
        });
        let mut fds = [
            PollFd::new(&state.inotify, PollFlags::IN),
            PollFd::new(&stop, PollFlags::IN),
        ];
        match poll(&mut fds, timeout.as_ref()) {
            Ok(_) | Err(Errno::INTR) => {}
            Err(err) => return Err(state.inotify_error("the deployment", err)),
        }
        if !fds[1].revents().is_empty() {
            tracing::info!("watch: stopping");
            return Ok(());
        }
        if !fds[0].revents().is_empty() {
            state.drain(&mut buffer, &mut pending)?;
        }
        let now = Instant::now();
        if pending.any() && pending.wait(options.debounce, now) == Some(Duration::ZERO) {
            let work = std::mem::take(&mut pending);
            state.act(work, sink);
        }
    }
}

/// The watcher's state between events.
struct State<'a> {
    root: &'a Path,
    overrides: &'a Overrides,
    selection: &'a Selection,
    resolved: Resolved,
    inotify: OwnedFd,
    watches: HashMap<i32, Watched>,
    /// The watched groups and the watch descriptors of their folders (empty: not watched now).
    groups: BTreeMap<String, Vec<i32>>,
    /// The last failure reported per group, so that it is reported once.
    failures: HashMap<String, String>,
    /// The last `spawn_digest` per group: a group whose composition is unchanged but whose
    /// pinned content moved (its `container.json`, say) is news to the runner too.
    spawns: HashMap<String, String>,
    /// The shared sources as the last compose read them, used again while their record
    /// vouches for them ([`KeptAcrossRuns`]).
    kept: KeptAcrossRuns,
}

impl<'a> State<'a> {
    fn start(
        root: &'a Path,
        overrides: &'a Overrides,
        selection: &'a Selection,
        resolved: Resolved,
    ) -> Result<Self, WatchError> {
        let inotify =
            inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).map_err(|err| {
                WatchError::Inotify {
                    what: "anything (inotify_init)".to_owned(),
                    cause: err.into(),
                    fix: "raise fs.inotify.max_user_instances",
                }
            })?;
        Ok(State {
            root,
            overrides,
            selection,
            resolved,
            inotify,
            watches: HashMap::new(),
            groups: BTreeMap::new(),
            failures: HashMap::new(),
            spawns: HashMap::new(),
            kept: KeptAcrossRuns::default(),
        })
    }

    fn inotify_error(&self, what: &str, err: Errno) -> WatchError {
        WatchError::Inotify {
            what: what.to_owned(),
            cause: err.into(),
            fix: "check that the folder exists and is readable",
        }
    }

    /// The groups the selection names now (every group folder for `--all`).
    fn current_groups(&self) -> Result<Vec<String>, crate::Error> {
        match self.selection {
            Selection::All => list_groups(&self.resolved.layout).map_err(crate::Error::Groups),
            Selection::Named(names) => Ok(names.clone()),
        }
    }

    /// Drops every watch and watches the root, the groups folder, `groups` and `container/`
    /// again (at start, and when the settings moved a folder).
    fn rewatch(&mut self, groups: &[String], sink: &mut dyn FnMut(WatchEvent)) {
        for wd in self.watches.keys() {
            let _ = inotify::remove_watch(&self.inotify, *wd);
        }
        self.watches.clear();
        self.groups.clear();
        let layout = self.resolved.layout.clone();
        let top = WatchFlags::CLOSE_WRITE
            | WatchFlags::MOVED_TO
            | WatchFlags::MOVED_FROM
            | WatchFlags::CREATE
            | WatchFlags::DELETE;
        self.add(self.root, Watched::Root, top, sink);
        self.add(
            &layout.groups_dir,
            Watched::GroupsDir,
            top | WatchFlags::ATTRIB,
            sink,
        );
        for group in groups {
            self.watch_group(group, sink);
        }
        self.watch_container(sink);
    }

    fn add(
        &mut self,
        path: &Path,
        what: Watched,
        flags: WatchFlags,
        sink: &mut dyn FnMut(WatchEvent),
    ) -> Option<i32> {
        let flags = flags | WatchFlags::ONLYDIR | WatchFlags::DONT_FOLLOW | WatchFlags::EXCL_UNLINK;
        match inotify::add_watch(&self.inotify, path, flags) {
            Ok(wd) => {
                self.watches.insert(wd, what);
                Some(wd)
            }
            Err(Errno::NOENT | Errno::NOTDIR) => None,
            Err(err) => {
                let fix = if err == Errno::NOSPC {
                    "raise the kernel's fs.inotify.max_user_watches (sysctl)"
                } else {
                    "check the folder's permissions"
                };
                sink(WatchEvent::Warning(WarningReport {
                    code: Code::Io,
                    message: format!(
                        "{}: cannot be watched ({}); changes there are not picked up until \
                         another input changes; fix: {fix}",
                        path.display(),
                        std::io::Error::from(err),
                    ),
                }));
                None
            }
        }
    }

    fn watch_group(&mut self, group: &str, sink: &mut dyn FnMut(WatchEvent)) {
        let dir = self.resolved.layout.group_dir(group);
        let watched = Watched::Group(group.to_owned());
        let wds = self
            .add(&dir, watched.clone(), GROUP_EVENTS, sink)
            .into_iter()
            .chain(self.watch_group_sources(&dir, &watched))
            .collect();
        self.groups.insert(group.to_owned(), wds);
    }

    /// Watches the folders inside a group folder that hold the recipe's sources there (the
    /// folder of a `group-file` below the top level; a group skill root and each skill folder
    /// in it), at most [`MAX_GROUP_SOURCE_DIRS`] per group. The agent writes these folders: each
    /// is opened without following a link ([`SafeDir`]) and watched through its descriptor, so
    /// a link it plants never makes the watch reach outside the group.
    fn watch_group_sources(&mut self, group_dir: &Path, watched: &Watched) -> Vec<i32> {
        let Ok(root) = SafeDir::open(group_dir) else {
            return Vec::new();
        };
        let mut dirs = Vec::new();
        for source in &self.resolved.layout.recipe.sources {
            match &source.kind {
                SourceKind::GroupFile { file } => {
                    if let Some(parent) = file.parent().filter(|p| !p.as_os_str().is_empty()) {
                        dirs.extend(open_below(&root, parent));
                    }
                }
                SourceKind::Skills {
                    root: SkillRoot::Group,
                    dir,
                    ..
                } => {
                    let Some(skills) = open_below(&root, dir) else {
                        continue;
                    };
                    let children = skills.list_kinds().unwrap_or_default();
                    for (name, kind) in children {
                        if kind == Some(FileKind::Dir)
                            && let Some(name) = name.to_str()
                            && let Ok(Some(skill)) = skills.open_child(name, false)
                        {
                            dirs.push(skill);
                        }
                    }
                    dirs.push(skills);
                }
                _ => {}
            }
        }
        dirs.truncate(MAX_GROUP_SOURCE_DIRS);
        let flags = GROUP_EVENTS | WatchFlags::ONLYDIR | WatchFlags::EXCL_UNLINK;
        dirs.iter()
            .filter_map(|dir| {
                let path = format!("/proc/self/fd/{}", dir.as_fd().as_raw_fd());
                let wd = inotify::add_watch(&self.inotify, path.as_str(), flags).ok()?;
                self.watches.insert(wd, watched.clone());
                Some(wd)
            })
            .collect()
    }

    fn unwatch_group(&mut self, group: &str) {
        for wd in self.groups.remove(group).unwrap_or_default() {
            let _ = inotify::remove_watch(&self.inotify, wd);
            self.watches.remove(&wd);
        }
    }

    /// Watches every folder of the `container/` tree not watched yet (not following links,
    /// skipping hidden folders and `node_modules`, bounded in number and depth).
    fn watch_container(&mut self, sink: &mut dyn FnMut(WatchEvent)) {
        let flags = WatchFlags::CLOSE_WRITE
            | WatchFlags::MOVED_TO
            | WatchFlags::MOVED_FROM
            | WatchFlags::CREATE
            | WatchFlags::DELETE
            | WatchFlags::ATTRIB
            | WatchFlags::DELETE_SELF;
        let mut stack = vec![(self.resolved.layout.container_dir.clone(), 0usize)];
        let mut seen = 0usize;
        while let Some((dir, depth)) = stack.pop() {
            if seen == MAX_CONTAINER_DIRS {
                sink(WatchEvent::Warning(WarningReport {
                    code: Code::Io,
                    message: format!(
                        "{}: more than {MAX_CONTAINER_DIRS} folders; the rest are not watched",
                        self.resolved.layout.container_dir.display()
                    ),
                }));
                return;
            }
            seen += 1;
            if self.add(&dir, Watched::Container, flags, sink).is_none()
                || depth == MAX_CONTAINER_DEPTH
            {
                continue;
            }
            let Ok(entries) = fs_err::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                if skipped_container_folder(&name) {
                    continue;
                }
                if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                    stack.push((entry.path(), depth + 1));
                }
            }
        }
    }

    /// Reads every queued event into `pending`.
    fn drain(
        &mut self,
        buffer: &mut [MaybeUninit<u8>],
        pending: &mut Pending,
    ) -> Result<(), WatchError> {
        let mut reader = inotify::Reader::new(&self.inotify, buffer);
        let now = Instant::now();
        loop {
            let event = match reader.next() {
                Ok(event) => event,
                Err(Errno::AGAIN | Errno::INTR) => return Ok(()),
                Err(err) => return Err(self.inotify_error("the deployment", err)),
            };
            let flags = event.events();
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                tracing::warn!(
                    "watch: the kernel's event queue overflowed; recomposing everything"
                );
                pending.settings = true;
                pending.listing = true;
                pending.container = true;
                pending.rewatch_container = true;
                pending.touch(now);
                continue;
            }
            let name = event.file_name().map(|name| name.to_bytes());
            let Some(what) = self.watches.get(&event.wd()) else {
                continue;
            };
            if classify(what, name, flags, pending) {
                tracing::debug!(?what, name = ?name.map(String::from_utf8_lossy), ?flags, "watch: event");
                pending.touch(now);
            }
        }
    }

    /// Acts on the events of one quiet period.
    fn act(&mut self, work: Pending, sink: &mut dyn FnMut(WatchEvent)) {
        let mut everything = work.container;
        if work.settings {
            match read_settings(self.root) {
                Ok((settings, warnings)) => {
                    for warning in warnings {
                        sink(WatchEvent::Warning(WarningReport {
                            code: warning.code,
                            message: warning.to_string(),
                        }));
                    }
                    let resolved = settings.resolve(self.root, self.overrides);
                    let moved = resolved.layout != self.resolved.layout;
                    self.resolved = resolved;
                    if moved {
                        match self.current_groups() {
                            Ok(groups) => self.rewatch(&groups, sink),
                            Err(err) => return warn_run(sink, &err),
                        }
                    }
                    everything = true;
                }
                Err(err) => sink(WatchEvent::Warning(WarningReport {
                    code: Code::Settings,
                    message: format!("{err}; watching goes on with the settings it had"),
                })),
            }
        }
        let mut targets: BTreeSet<String> = work.groups;
        if work.listing {
            match self.current_groups() {
                Ok(now) => targets.extend(self.relist(&now, sink)),
                Err(err) => warn_run(sink, &err),
            }
        }
        if work.rewatch_container {
            self.watch_container(sink);
        }
        for group in &work.rewatch_groups {
            if self.groups.get(group).is_some_and(|wds| !wds.is_empty()) {
                self.unwatch_group(group);
                self.watch_group(group, sink);
            }
        }
        let groups: Vec<String> = if everything {
            self.groups.keys().cloned().collect()
        } else {
            targets
                .into_iter()
                .filter(|group| self.groups.contains_key(group))
                .collect()
        };
        self.compose(&groups, sink);
    }

    /// Brings the watched groups in line with `now`: reports removed groups, watches new ones
    /// (and returns them, to be composed), and re-watches a group whose folder was replaced.
    fn relist(&mut self, now: &[String], sink: &mut dyn FnMut(WatchEvent)) -> Vec<String> {
        let now: BTreeSet<&String> = now.iter().collect();
        let gone: Vec<String> = self
            .groups
            .keys()
            .filter(|group| !now.contains(group) || !self.resolved.layout.group_dir(group).is_dir())
            .cloned()
            .collect();
        let mut fresh = Vec::new();
        for group in gone {
            self.unwatch_group(&group);
            self.failures.remove(&group);
            self.spawns.remove(&group);
            if self.resolved.layout.group_dir(&group).is_dir() {
                fresh.push(group);
            } else if matches!(self.selection, Selection::All) {
                sink(WatchEvent::Removed { group });
            } else {
                // A named group keeps being watched for: it is reported when it comes back.
                self.groups.insert(group.clone(), Vec::new());
                sink(WatchEvent::Removed { group });
            }
        }
        for group in now {
            let unwatched = self.groups.get(group).is_none_or(Vec::is_empty);
            if unwatched && self.resolved.layout.group_dir(group).is_dir() {
                fresh.push(group.clone());
            }
        }
        for group in &fresh {
            self.watch_group(group, sink);
        }
        fresh
    }

    /// Composes `groups` and reports what changed or failed.
    fn compose(&mut self, groups: &[String], sink: &mut dyn FnMut(WatchEvent)) {
        if groups.is_empty() {
            return;
        }
        let options = ComposeOptions {
            settings: self.resolved.delivery,
            dry_run: false,
            lock_timeout: self.resolved.lock_timeout,
        };
        let report = match compose_keeping(
            &self.resolved.layout,
            &Selection::Named(groups.to_vec()),
            &options,
            &(),
            &mut self.kept,
        ) {
            Ok(report) => report,
            Err(err) => return warn_run(sink, &err),
        };
        for warning in report.warnings {
            sink(WatchEvent::Warning(warning));
        }
        for group in report.groups {
            if let Some(event) = self.news(group) {
                sink(event);
            }
        }
    }

    /// What a group's report means to the runner: a change, a new failure, a recovery, or
    /// nothing.
    fn news(&mut self, report: GroupReport) -> Option<WatchEvent> {
        let spawn_moved = match &report.spawn_digest {
            Some(digest) => self
                .spawns
                .insert(report.group.clone(), digest.clone())
                .is_some_and(|known| &known != digest),
            None => false,
        };
        match report.status {
            Status::Changed => {
                self.failures.remove(&report.group);
                Some(WatchEvent::Group(Box::new(report)))
            }
            Status::Failed => {
                let message = report
                    .error
                    .as_ref()
                    .map(|error| error.message.clone())
                    .unwrap_or_default();
                let repeated = self.failures.get(&report.group) == Some(&message);
                self.failures.insert(report.group.clone(), message);
                (!repeated).then(|| WatchEvent::Group(Box::new(report)))
            }
            Status::Unchanged => {
                let recovered = self.failures.remove(&report.group).is_some();
                (recovered || spawn_moved).then(|| WatchEvent::Group(Box::new(report)))
            }
        }
    }
}

/// Whether an event on a watched folder asks for work, and which: recorded in `pending`.
fn classify(what: &Watched, name: Option<&[u8]>, flags: ReadFlags, pending: &mut Pending) -> bool {
    match what {
        Watched::Root => {
            if name == Some(SETTINGS_FILE.as_bytes()) {
                pending.settings = true;
                return true;
            }
            false
        }
        Watched::GroupsDir => match name {
            Some(name) if !name.starts_with(b".") => {
                pending.listing = true;
                true
            }
            _ => false,
        },
        Watched::Group(group) => {
            if flags.intersects(ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF | ReadFlags::IGNORED)
            {
                pending.listing = true;
                return true;
            }
            match name {
                // What compose writes there is its output, never its input: clawmd's own
                // temporary files, the entry points and the fragments.
                Some(name) if is_output(name) => false,
                _ => {
                    if flags.contains(ReadFlags::ISDIR)
                        && flags.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO)
                    {
                        pending.rewatch_groups.insert(group.clone());
                    }
                    pending.groups.insert(group.clone());
                    true
                }
            }
        }
        Watched::Container => {
            if flags.contains(ReadFlags::IGNORED) {
                return false;
            }
            if flags.contains(ReadFlags::ISDIR)
                && flags.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO)
            {
                pending.rewatch_container = true;
            }
            pending.container = true;
            true
        }
    }
}

/// Whether `name`, in a group folder, is something compose writes rather than reads: its
/// temporary files, the entry points of every backend and the fragments (a person editing
/// one of them is `check`'s business, not a change of the group's inputs).
fn is_output(name: &[u8]) -> bool {
    name.starts_with(TEMP_PREFIX.as_bytes())
        || [
            names::CLAUDE_MD,
            AGENTS_MD,
            GEMINI_MD,
            names::SHARED,
            names::FRAGMENTS,
        ]
        .iter()
        .any(|output| name == output.as_bytes())
}

/// Folders under `container/` that are not watched: hidden ones and installed packages.
fn skipped_container_folder(name: &OsStr) -> bool {
    let name = name.as_encoded_bytes();
    name.starts_with(b".") || name == b"node_modules"
}

/// The folder `relative` below `root`, each component opened without following a link; `None`
/// when it is missing or not a real folder.
fn open_below(root: &SafeDir, relative: &Path) -> Option<SafeDir> {
    let mut names = relative.components().map(|part| part.as_os_str().to_str());
    let first = names.next()??;
    let mut dir = root.open_child(first, false).ok()??;
    for name in names {
        dir = dir.open_child(name?, false).ok()??;
    }
    Some(dir)
}

fn warn_run(sink: &mut dyn FnMut(WatchEvent), err: &crate::Error) {
    sink(WatchEvent::Warning(WarningReport {
        code: Code::RunFailed,
        message: format!("{}; watching goes on", crate::error::chain_text(err)),
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_acted_on_once_quiet_or_at_the_cap() {
        let debounce = Duration::from_millis(100);
        let start = Instant::now();
        let mut pending = Pending::default();
        assert_eq!(pending.wait(debounce, start), None);
        pending.touch(start);
        assert_eq!(pending.wait(debounce, start), Some(debounce));
        // Events every 50 ms keep pushing the quiet point, up to the cap.
        for step in 1..40 {
            pending.touch(start + Duration::from_millis(50 * step));
        }
        let late = start + Duration::from_millis(50 * 39);
        assert_eq!(pending.wait(debounce, late), Some(Duration::ZERO));
        assert_eq!(
            pending.wait(debounce, start + Duration::from_millis(500)),
            Some(Duration::from_millis(500))
        );
    }

    #[test]
    fn events_are_sorted_into_the_work_they_ask_for() {
        let mut pending = Pending::default();
        let file = ReadFlags::CLOSE_WRITE;
        assert!(!classify(
            &Watched::Root,
            Some(b"notes.txt"),
            file,
            &mut pending
        ));
        assert!(classify(
            &Watched::Root,
            Some(b"clawmd.json"),
            file,
            &mut pending
        ));
        assert!(pending.settings);
        assert!(!classify(
            &Watched::GroupsDir,
            Some(b".clawmd-locks"),
            ReadFlags::CREATE,
            &mut pending
        ));
        assert!(classify(
            &Watched::GroupsDir,
            Some(b"new"),
            ReadFlags::CREATE | ReadFlags::ISDIR,
            &mut pending
        ));
        assert!(pending.listing);
        let group = Watched::Group("main".to_owned());
        let temp = format!("{}1-2-3", TEMP_PREFIX);
        assert!(!classify(
            &group,
            Some(temp.as_bytes()),
            ReadFlags::MOVED_FROM,
            &mut pending
        ));
        for output in ["CLAUDE.md", "AGENTS.md", ".claude-fragments"] {
            let flags = ReadFlags::MOVED_TO;
            assert!(!classify(
                &group,
                Some(output.as_bytes()),
                flags,
                &mut pending
            ));
        }
        assert!(pending.groups.is_empty());
        assert!(classify(
            &group,
            Some(b"container.json"),
            ReadFlags::MOVED_TO,
            &mut pending
        ));
        assert_eq!(pending.groups, BTreeSet::from(["main".to_owned()]));
        assert!(!pending.container);
        assert!(classify(
            &Watched::Container,
            Some(b"skills"),
            ReadFlags::CREATE | ReadFlags::ISDIR,
            &mut pending
        ));
        assert!(pending.container && pending.rewatch_container);
    }

    #[test]
    fn hidden_folders_and_packages_under_container_are_not_watched() {
        assert!(skipped_container_folder(OsStr::new(".git")));
        assert!(skipped_container_folder(OsStr::new("node_modules")));
        assert!(!skipped_container_folder(OsStr::new("skills")));
    }
}
