//! clawmd's own state on the host ([`Layout::state_dir`], default `groups/.clawmd`): what
//! no agent may plant, read or remove, so it lives outside every group folder.
//!
//! - `rescues/<group>/`: the hand-edited entry points compose kept aside before replacing
//!   them ([`Layout::rescue_dir`]); only what clawmd wrote there is counted or listed.
//! - `journal/<lock>`: the temp files made by the runs that hold a lock
//!   ([`fsops::TempJournal`]); a run holding the lock removes what a crash left from it, and
//!   nothing that is merely named like a temp file.
//! - `verdicts/<group>`: the group's last verdict, under the key of everything it depends on
//!   ([`crate::plan::delivery::verdicts`]).
//! - `checks/<group>`: the group's last findings of `check`, with every read they were made
//!   from ([`crate::commands::check`]'s records).
//! - `sources/container`: what the shared sources hold (their digest and notes), with every
//!   host read they were made from, by item ([`crate::input::sources::record`]); written under the
//!   deployment-wide lock (`global`).
//!
//! Records are sealed and written in place, each kind a [`Record`] read and written through
//! the one store, [`Records`]; only the files compose puts in front of an agent
//! go through temps and journals.
//!
//! The state folder is the host's, but it is still opened defensively: it must be a real
//! folder (never a link), and it must not be inside a group folder or `container/`, where an
//! agent could read it.

mod record;

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

pub use record::{
    Record, RecordError, Records, decode, decode_prefix, encode, is_padding, record_file,
    record_json,
};

use crate::disk::fsops::{self, FsError, Leftover, SafeDir, TempJournal};
use crate::input::layout::Layout;
use crate::input::names;

/// Refuses a state folder inside a group folder or inside `container/` (both reach agents).
/// A placement found right is remembered for the process (it is asked for every group).
pub fn check_placement(layout: &Layout) -> Result<(), FsError> {
    static PLACED: std::sync::Mutex<Vec<[PathBuf; 3]>> = std::sync::Mutex::new(Vec::new());
    let key = [
        layout.state_dir.clone(),
        layout.groups_dir.clone(),
        layout.container_dir.clone(),
    ];
    let placed = || PLACED.lock().unwrap_or_else(|p| p.into_inner());
    if placed().contains(&key) {
        return Ok(());
    }
    placement(layout)?;
    let mut known = placed();
    if known.len() < 16 {
        known.push(key);
    }
    Ok(())
}

fn placement(layout: &Layout) -> Result<(), FsError> {
    let cwd = std::env::current_dir().unwrap_or_default();
    let state = lexical(&cwd, &layout.state_dir);
    let inside = |outer: &Path| {
        let outer = lexical(&cwd, outer);
        state.strip_prefix(outer).ok().map(Path::to_owned)
    };
    let reason = match inside(&layout.groups_dir) {
        Some(rest) => match rest.components().next() {
            None => Some("the groups folder itself"),
            Some(Component::Normal(first)) if !first.to_string_lossy().starts_with('.') => {
                Some("inside a group folder, which its agent can read and write")
            }
            Some(_) => None,
        },
        None => None,
    }
    .or_else(|| {
        inside(&layout.container_dir).map(|_| "inside container/, which every agent can read")
    });
    match reason {
        None => Ok(()),
        Some(reason) => Err(FsError::Unsafe {
            path: layout.state_dir.clone(),
            found: reason.to_owned(),
            expected: "a folder for clawmd's state outside every group folder",
            fix: "set stateDir in clawmd.json to a folder no container mounts, such as groups/.clawmd".to_owned(),
        }),
    }
}

/// `path` made absolute (from `cwd`) with `.` and `..` taken out, without touching the disk.
fn lexical(cwd: &Path, path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in cwd.join(path).components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The journal of the temps made under the lock `lock` (a group's name, or `global`).
pub fn journal(layout: &Layout, lock: &str) -> Result<Arc<TempJournal>, FsError> {
    check_placement(layout)?;
    Ok(TempJournal::new(
        layout.state_dir.clone(),
        names::JOURNAL,
        lock,
    ))
}

/// The temps runs under the lock `lock` made and left (read only).
pub fn leftovers(layout: &Layout, lock: &str) -> Result<Vec<Leftover>, FsError> {
    check_placement(layout)?;
    fsops::read_leftovers(&layout.state_dir, names::JOURNAL, lock)
}

/// Whether runs under the lock `lock` may have left temps: the journal is there and not
/// empty, and neither the state folder nor its journal folder is a link (`lstat`s only, never
/// through a link; a run that finds a group right asks this before anything more, and one
/// that finds it a link refuses when it opens the journal).
pub fn may_have_leftovers(layout: &Layout, lock: &str) -> bool {
    // The journal first: it is empty or missing almost always, and then the folders need no
    // look (one `lstat` instead of three).
    journal_has_records(layout, lock) && journals_are_folders(layout)
}

/// Whether the state folder and its journal folder are real folders (the first half of
/// [`may_have_leftovers`], which a run asking for many groups asks once).
pub fn journals_are_folders(layout: &Layout) -> bool {
    let real_dir =
        |path: &Path| fsops::kind_no_follow(path) == Some(crate::file_kind::FileKind::Dir);
    real_dir(&layout.state_dir) && real_dir(&layout.state_dir.join(names::JOURNAL))
}

/// Whether the journal of the lock `lock` records something (the second half of
/// [`may_have_leftovers`]).
pub fn journal_has_records(layout: &Layout, lock: &str) -> bool {
    fsops::journal_has_records(&layout.state_dir.join(names::JOURNAL).join(lock))
}

/// `<state>/binds`, when it exists (read only): a run opens each group's bind folder from it.
pub fn binds_dir(layout: &Layout) -> Result<Option<SafeDir>, FsError> {
    existing_kind_folder(layout, names::BINDS)
}

/// `<state>/rescues`, when it exists (read only).
pub fn rescues_dir(layout: &Layout) -> Result<Option<SafeDir>, FsError> {
    existing_kind_folder(layout, names::RESCUES)
}

/// Takes `group`'s lock (or the deployment-wide one, `global`), waiting as `wait` says; never
/// for a group whose folder is not there (as anything: what it is, the look says), since a
/// lock file made for a typo or in the wrong folder would stay in the locks folder (and make a
/// groups folder where there was none): that is the group's missing-group error.
pub fn lock_group(
    layout: &Layout,
    group: &str,
    wait: fsops::LockWait<'_>,
) -> Result<fsops::GroupLock, crate::error::GroupError> {
    let missing = matches!(
        rustix::fs::lstat(layout.group_dir(group)),
        Err(rustix::io::Errno::NOENT)
    );
    if missing && group != crate::input::layout::GLOBAL_GROUP {
        return Err(crate::disk::deployment::missing_group(
            &layout.group_dir(group),
        ));
    }
    Ok(fsops::lock(&layout.lock_file(group), wait)?)
}

/// [`lock_group`] for a run that changes nothing: `None`, without waiting, when the group's
/// lock was never made (no run has taken it, so none holds it).
pub fn lock_group_if_made(
    layout: &Layout,
    group: &str,
    wait: fsops::LockWait<'_>,
) -> Result<Option<fsops::GroupLock>, crate::error::GroupError> {
    Ok(fsops::lock_if_made(&layout.lock_file(group), wait)?)
}

/// Runs `write` holding `group`'s lock (or the deployment-wide one, `global`), when the lock
/// is free at once (a run holding it writes what it has to itself): for a record, only a
/// saving, of a run that looked at the group without its lock.
pub fn with_free_lock(layout: &Layout, group: &str, write: impl FnOnce()) {
    let Ok(_lock) = lock_group(layout, group, fsops::LockWait::IF_FREE) else {
        return;
    };
    write();
}

/// A group's rescue folder, when it exists (read only).
pub fn rescue_dir(layout: &Layout, group: &str) -> Result<Option<SafeDir>, FsError> {
    existing_group_folder(layout, names::RESCUES, group)
}

/// A group's rescue folder, created when missing (with the owner and permissions of the
/// group folder `group_dir`, so the person who owns the group reads and removes its
/// rescues), recording its temps in `journal`. Only under the group's lock.
pub fn create_rescue_dir(
    layout: &Layout,
    group: &str,
    group_dir: &SafeDir,
    journal: &Arc<TempJournal>,
) -> Result<SafeDir, FsError> {
    create_group_folder(layout, names::RESCUES, journal, |rescues| {
        rescues.open_child_like(group, group_dir)
    })
}

/// A group's bind folder (`<state>/binds/<group>/`: the files the runner binds into its
/// container), when it exists (read only).
pub fn bind_dir(layout: &Layout, group: &str) -> Result<Option<SafeDir>, FsError> {
    existing_group_folder(layout, names::BINDS, group)
}

/// A group's bind folder, created when missing, recording its temps in `journal`. Only under
/// the group's lock.
pub fn create_bind_dir(
    layout: &Layout,
    group: &str,
    journal: &Arc<TempJournal>,
) -> Result<SafeDir, FsError> {
    create_group_folder(layout, names::BINDS, journal, |binds| {
        Ok(binds
            .open_child(group, true)?
            .expect("open_child with create returns a folder or an error"))
    })
}

/// `<state>/<kind>/<group>/`, when it exists (read only).
fn existing_group_folder(
    layout: &Layout,
    kind: &str,
    group: &str,
) -> Result<Option<SafeDir>, FsError> {
    match existing_kind_folder(layout, kind)? {
        Some(folders) => folders.open_child(group, false),
        None => Ok(None),
    }
}

/// `<state>/<kind>/`, when it exists (read only).
fn existing_kind_folder(layout: &Layout, kind: &str) -> Result<Option<SafeDir>, FsError> {
    check_placement(layout)?;
    match SafeDir::open_state(&layout.state_dir, false)? {
        Some(state) => state.open_child(kind, false),
        None => Ok(None),
    }
}

/// `<state>/<kind>/`, created when missing and recording its temps in `journal`, and the
/// group's folder in it that `open_group` opens (or creates); the new folders are durable
/// before anything in them is relied on.
fn create_group_folder(
    layout: &Layout,
    kind: &str,
    journal: &Arc<TempJournal>,
    open_group: impl FnOnce(&SafeDir) -> Result<SafeDir, FsError>,
) -> Result<SafeDir, FsError> {
    check_placement(layout)?;
    let mut state = SafeDir::open_state(&layout.state_dir, true)?
        .expect("open_state with create returns a folder or an error");
    state.record_temps_in(journal);
    let folders = state
        .open_child(kind, true)?
        .expect("open_child with create returns a folder or an error");
    let dir = open_group(&folders)?;
    if journal.folder_syncs_deferred() {
        // The run's `syncfs` makes them durable before anything in them is relied on.
        folders.mark_synced();
        state.mark_synced();
    } else {
        folders.sync()?;
        state.sync()?;
    }
    Ok(dir)
}

/// How a report names a leftover temp: relative to the group folder `group_dir` when it is
/// in it (`.claude-fragments/.clawmd-tmp-…`), else its host path.
pub fn describe_leftover(leftover: &Leftover, group_dir: &Path) -> String {
    let path = leftover.path();
    let cwd = std::env::current_dir().unwrap_or_default();
    match path.strip_prefix(lexical(&cwd, group_dir)) {
        Ok(relative) => relative.display().to_string(),
        Err(_) => path.display().to_string(),
    }
}

/// Which binary judges, in which boot: its identity (device, inode, size, modification and
/// change times of the file clawmd's code was loaded from: the `clawmd` executable, or the Node
/// addon's library in a Node process; a rebuilt or upgraded clawmd does not trust the records
/// of another, nor the binary the addon's records, nor the addon the binary's) and the
/// kernel's boot id (a record made before the machine last stopped is not trusted: the files
/// it vouches for by their identity may have been torn by a power loss, [`durability`]).
/// `None` when the binary cannot be told: no record is then used. Looked up once per process.
pub fn binary_identity() -> Option<Vec<u8>> {
    static IDENTITY: std::sync::OnceLock<Option<Vec<u8>>> = std::sync::OnceLock::new();
    IDENTITY
        .get_or_init(|| {
            let mut identity = identify_binary()?;
            identity.extend_from_slice(boot_id().unwrap_or_default().as_bytes());
            Some(identity)
        })
        .clone()
}

/// The kernel's id of the running boot (`/proc/sys/kernel/random/boot_id`), or, for the
/// tests, `CLAWMD_BOOT_ID` (a run as if the machine had stopped and started again).
fn boot_id() -> Option<String> {
    static BOOT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    BOOT.get_or_init(|| {
        if let Some(id) = std::env::var_os("CLAWMD_BOOT_ID") {
            return Some(id.to_string_lossy().into_owned());
        }
        let id = fs_err::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        Some(id.trim().to_owned()).filter(|id| !id.is_empty())
    })
    .clone()
}

/// How long what compose derives (documents, settings, links, the kept handed config) must
/// last: through a power loss only where the boot cannot be told. Where it can, the records
/// are this boot's ([`binary_identity`]), so the first run after a power loss trusts no file
/// by its identity: it reads each one and writes again what the loss tore, before the runner
/// starts an agent on it. Nothing is fsynced for them then (the spawn does not wait for the
/// disk); what a person wrote (rescues, migrate) is always made durable.
pub fn durability() -> fsops::Durability {
    match boot_id() {
        Some(_) => fsops::Durability::ThisBoot,
        None => fsops::Durability::PowerLoss,
    }
}

fn identify_binary() -> Option<Vec<u8>> {
    // The very file running (device, inode, size, times), one call; else by its path. The
    // file of this code, not the program's: in the Node addon the program is `node`, the same
    // whichever clawmd it loaded.
    let running = code_file().unwrap_or_else(|| PathBuf::from("/proc/self/exe"));
    if let Ok(stat) = rustix::fs::stat(&running) {
        let identity = crate::disk::reads::identity(&stat);
        return Some(
            identity
                .iter()
                .flat_map(|part| part.to_le_bytes())
                .collect(),
        );
    }
    let exe = std::env::current_exe().ok()?;
    let meta = fs_err::metadata(&exe).ok()?;
    let modified = meta
        .modified()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    let mut id = exe.as_os_str().as_encoded_bytes().to_vec();
    id.extend_from_slice(&meta.len().to_le_bytes());
    id.extend_from_slice(&modified.as_nanos().to_le_bytes());
    Some(id)
}

/// The file this code was loaded from (the executable, or the shared library holding it), as
/// `/proc/self/map_files/START-END`: a link to the mapped file itself, even if its path has
/// since been given to another file (an upgrade in place). Found in `/proc/self/maps` by the
/// address of this function; `None` where `/proc` does not say, or the link cannot be followed
/// (kernels before 4.3 allow it only to privileged processes).
fn code_file() -> Option<PathBuf> {
    let here = code_file as fn() -> Option<PathBuf> as usize;
    let maps = fs_err::read_to_string("/proc/self/maps").ok()?;
    let range = maps.lines().find_map(|line| {
        let range = line.split_whitespace().next()?;
        let (start, end) = range.split_once('-')?;
        let start = usize::from_str_radix(start, 16).ok()?;
        let end = usize::from_str_radix(end, 16).ok()?;
        (start..end).contains(&here).then_some(range)
    })?;
    let file = PathBuf::from(format!("/proc/self/map_files/{range}"));
    rustix::fs::stat(&file).is_ok().then_some(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_code_file_is_the_running_executable_here() {
        // A test binary holds this code itself: the same file as /proc/self/exe.
        let file = code_file().expect("/proc/self/maps maps this function");
        let mapped = rustix::fs::stat(&file).unwrap();
        let exe = rustix::fs::stat("/proc/self/exe").unwrap();
        assert_eq!((mapped.st_dev, mapped.st_ino), (exe.st_dev, exe.st_ino));
        assert_eq!(
            std::fs::read_link(&file).unwrap(),
            std::env::current_exe().unwrap()
        );
    }

    fn layout(state: &str) -> Layout {
        Layout {
            state_dir: PathBuf::from(state),
            ..Layout::under_root(Path::new("/srv"))
        }
    }

    #[test]
    fn the_state_folder_must_be_outside_every_group_and_container() {
        for fine in [
            "/srv/groups/.clawmd",
            "/var/lib/clawmd",
            "/srv/state",
            "/srv/groups/main/../.state",
        ] {
            assert!(check_placement(&layout(fine)).is_ok(), "{fine}");
        }
        for refused in [
            "/srv/groups/main/.clawmd",
            "/srv/groups/main",
            "/srv/groups",
            "/srv/groups/./main/state",
            "/srv/container/state",
            "/srv/groups/.x/../main/s",
        ] {
            let err = check_placement(&layout(refused)).unwrap_err();
            assert!(err.to_string().contains("stateDir"), "{refused}: {err}");
        }
    }
}
