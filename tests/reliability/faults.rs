//! Resource faults: a read-only filesystem, permission denied (an immutable folder, and a
//! runner that is not root), a full disk, and a lock held by a process that then dies.
//!
//! Each fault must give a clear error (exit 1, the path and the cause named), leave nothing
//! half-written (every path old or new, the old content intact where nothing could be
//! written), and the first run after the fault is cleared must converge to exactly what an
//! uninterrupted run produces, with no temp file left. These tests need root for `mount` and
//! `chattr`; they skip, loudly, only where that is impossible.

use std::io::BufRead;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::Deployment;
use crate::support::*;

const CONFIG_A: &str = r#"{"skills": "all", "mcpServers": {
  "db": {"command": "db", "instructions": "Read only."}}}"#;
const CONFIG_B: &str = r#"{"skills": ["hello"], "mcpServers": {
  "db": {"command": "db", "instructions": "Read and write."},
  "search": {"command": "s", "instructions": "Exact phrases."}}}"#;
const LOCAL: &str = "# Group memory\n";
const LEGACY: &str = "# Hand-written, not migrated yet\n";

/// Group `g` composed with config A (link delivery), then its config changed to B, plus an
/// unmigrated group `old` and a `groups/global/CLAUDE.md`: every command has work to do.
fn deployment() -> Deployment {
    let d = Deployment::standard()
        .group("g", Some(CONFIG_A))
        .file("groups/g/CLAUDE.local.md", LOCAL);
    clawmd(d.root(), &["compose", "g", "--delivery", "link"], &[]).expect(0, "setup");
    d.write("groups/g/container.json", CONFIG_B.as_bytes());
    d.group("old", Some("{}"))
        .file("groups/old/CLAUDE.md", LEGACY)
        .file("groups/global/CLAUDE.md", "# Global text\n")
}

/// [`deployment`], with the mount point `groups/g/CLAUDE.md` gone: compose must write in the
/// group folder itself (everything else it composes is in `.claude-fragments` and the bind
/// folder in the state).
fn deployment_without_mount_point() -> Deployment {
    let d = deployment();
    std::fs::remove_file(d.path("groups/g/CLAUDE.md")).unwrap();
    d
}

/// Whether the test can mount; prints why not when it cannot.
fn mounts_available(test: &str) -> bool {
    match can_mount() {
        Ok(()) => true,
        Err(why) => {
            eprintln!(
                "\n!!!!! SKIPPED {test}: cannot mount ({why}); run the suite as root !!!!!\n"
            );
            false
        }
    }
}

#[derive(Default)]
struct Tally {
    faults: usize,
    paths_checked: usize,
}

/// Runs `args` on `d` with a fault in place (made by `inject`, removed when its guard drops),
/// and checks the error, the state during the fault, and convergence after it.
#[allow(clippy::too_many_arguments)]
fn fault<G>(
    tally: &mut Tally,
    name: &str,
    d: &Deployment,
    args: &[&str],
    inject: impl FnOnce(&Deployment) -> G,
    cause: &str,
    path: &Path,
    partial_ok: bool,
) {
    let before = tree(d.root());
    let reference = d.copy_on_work_dir();
    clawmd(reference.root(), args, &[]).expect(0, &format!("{name}: reference"));
    let after = tree(reference.root());

    let guard = inject(d);
    let run = clawmd(d.root(), args, &[]);
    run.expect(1, name);
    let shown = run.output();
    assert!(
        shown.contains(cause),
        "{name}: the cause is not named:\n{shown}"
    );
    assert!(
        shown.contains(fix_for(cause)),
        "{name}: the fix is not said:\n{shown}"
    );
    assert!(
        shown.contains(&path.display().to_string()),
        "{name}: {} is not named:\n{shown}",
        path.display()
    );
    let faulted = tree(d.root());
    drop(guard);

    if partial_ok {
        // Some writes went through before the fault: each path is old or new, never torn,
        // and every import of CLAUDE.md is there.
        for (p, entry) in &faulted {
            if is_temp(p) {
                continue;
            }
            assert!(
                before.get(p) == Some(entry) || after.get(p) == Some(entry),
                "{name}: {p} is {entry:?}, neither old nor new"
            );
            tally.paths_checked += 1;
        }
        for p in before.keys().filter(|p| after.contains_key(*p)) {
            assert!(faulted.contains_key(p), "{name}: {p} vanished");
        }
        assert_imports_resolve(&faulted, name);
    } else {
        assert_same_tree(
            &before,
            &faulted,
            &format!("{name}: changed during the fault"),
        );
        tally.paths_checked += faulted.len();
    }
    assert!(
        temps(&faulted).is_empty(),
        "{name}: a failed write left {:?}",
        temps(&faulted)
    );

    clawmd(d.root(), args, &[]).expect(0, &format!("{name}: after the fault"));
    let converged = tree(d.root());
    assert_same_tree(&after, &converged, &format!("{name}: after the fault"));
    tally.faults += 1;
}

/// How the fix clawmd says after `cause` starts (what it needs, by the error number).
fn fix_for(cause: &str) -> &'static str {
    match cause {
        "Read-only file system" => "; fix: mount the file system of ",
        "Operation not permitted" | "Permission denied" => {
            "; fix: give the user clawmd runs as access to "
        }
        "No space left on device" => "; fix: free space (or inodes) on the file system of ",
        other => panic!("no fix known for {other:?}"),
    }
}

/// Bind-mounts `path` on itself, read-only.
fn read_only(path: &Path) -> Mount {
    let mount = Mount::bind(path, path).unwrap();
    mount.remount("remount,bind,ro");
    mount
}

#[test]
fn read_only_filesystem_fails_cleanly_and_converges() {
    if !mounts_available("read_only_filesystem_fails_cleanly_and_converges") {
        return;
    }
    let started = Instant::now();
    let mut tally = Tally::default();
    let erofs = "Read-only file system";
    let compose_g: &[&str] = &["compose", "g", "--delivery", "copy"];

    let d = deployment();
    let lock = d.path("groups/.clawmd-locks/g.lock");
    fault(
        &mut tally,
        "groups/ read-only, compose",
        &d,
        compose_g,
        |d| read_only(&d.path("groups")),
        erofs,
        &lock,
        false,
    );

    let d = deployment();
    fault(
        &mut tally,
        "groups/ read-only, migrate",
        &d,
        &["migrate"],
        |d| read_only(&d.path("groups")),
        erofs,
        &d.path("groups/.clawmd-locks/old.lock"),
        false,
    );

    let d = deployment_without_mount_point();
    fault(
        &mut tally,
        "the group read-only, compose",
        &d,
        compose_g,
        |d| read_only(&d.path("groups/g")),
        erofs,
        &d.path("groups/g"),
        false,
    );

    let d = deployment();
    fault(
        &mut tally,
        "a legacy group read-only, migrate",
        &d,
        &["migrate"],
        |d| read_only(&d.path("groups/old")),
        erofs,
        &d.path("groups/old"),
        true,
    );

    let d = deployment();
    fault(
        &mut tally,
        "container/ read-only, migrate --append-global of groups/global",
        &d,
        &["migrate", "--append-global"],
        |d| read_only(&d.path("container")),
        erofs,
        &d.path("container"),
        true,
    );

    // By default migrate keeps groups/global text aside in the state folder (and never writes
    // container/).
    let d = deployment();
    std::fs::create_dir_all(d.path("groups/.clawmd")).unwrap();
    fault(
        &mut tally,
        "the state folder read-only, migrate of groups/global",
        &d,
        &["migrate"],
        |d| read_only(&d.path("groups/.clawmd")),
        erofs,
        &d.path("groups/.clawmd"),
        true,
    );

    // The group read-only but its fragments folder writable: the fragments and the composed
    // CLAUDE.md (in the state) are written, then the mount point cannot be. Readers still find
    // every import of the CLAUDE.md they see.
    let d = deployment_without_mount_point();
    let side = tempfile::tempdir().unwrap();
    fault(
        &mut tally,
        "the group read-only, .claude-fragments writable",
        &d,
        compose_g,
        |d| {
            let fragments = d.path("groups/g/.claude-fragments");
            let rw = Mount::bind(&fragments, side.path()).unwrap();
            let ro = read_only(&d.path("groups/g"));
            let back = Mount::bind(side.path(), &fragments).unwrap();
            (back, ro, rw)
        },
        erofs,
        &d.path("groups/g"),
        true,
    );
    figure(
        "read_only_filesystem_fails_cleanly_and_converges",
        format_args!(
            "{} read-only faults (groups/, one group, a legacy group, container/, group read-only with writable fragments): exit 1 naming path and cause, {} path states checked, nothing torn or lost, converged after remount; {:.1}s",
            tally.faults,
            tally.paths_checked,
            started.elapsed().as_secs_f64()
        ),
    );
}

/// `chattr +i` while alive, `chattr -i` when dropped.
struct Immutable(PathBuf);

impl Immutable {
    fn new(path: &Path) -> Result<Self, String> {
        let output = std::process::Command::new("chattr")
            .arg("+i")
            .arg(path)
            .output()
            .map_err(|e| e.to_string())?;
        if output.status.success() {
            Ok(Immutable(path.to_owned()))
        } else {
            Err(String::from_utf8_lossy(&output.stderr).into_owned())
        }
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(&self.0)
            .status();
    }
}

#[test]
fn permission_denied_fails_cleanly_and_converges() {
    let started = Instant::now();
    let mut tally = Tally::default();
    let compose_g: &[&str] = &["compose", "g", "--delivery", "copy"];

    // Root ignores permission bits, not the immutable attribute.
    let probe = Deployment::standard().group("g", None);
    match Immutable::new(&probe.path("groups/g")) {
        Ok(_) => {
            let d = deployment_without_mount_point();
            fault(
                &mut tally,
                "the group immutable, compose",
                &d,
                compose_g,
                |d| Immutable::new(&d.path("groups/g")).unwrap(),
                "Operation not permitted",
                &d.path("groups/g"),
                false,
            );
            let d = deployment();
            let legacy = d.path("groups/old");
            fault(
                &mut tally,
                "a legacy group immutable, migrate",
                &d,
                &["migrate"],
                |_| Immutable::new(&legacy).unwrap(),
                "Operation not permitted",
                &d.path("groups/old"),
                true,
            );
            let d = deployment();
            let composed = d.path(&Deployment::composed("g", "CLAUDE.md"));
            fault(
                &mut tally,
                "the composed CLAUDE.md immutable, compose",
                &d,
                compose_g,
                |_| Immutable::new(&composed).unwrap(),
                "Operation not permitted",
                &d.path("groups/.clawmd/binds/g"),
                true,
            );
        }
        Err(why) => eprintln!(
            "\n!!!!! SKIPPED the chattr +i cases: {why} (the temp dir's filesystem has no immutable attribute) !!!!!\n"
        ),
    }

    // A runner that is not root, on a group folder that root owns (a container wrote it).
    let d = deployment();
    let bin = d.path("clawmd-bin");
    std::fs::copy(env!("CARGO_BIN_EXE_clawmd"), &bin).unwrap();
    std::fs::set_permissions(d.root(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let nobody = 65534;
    // The runner's own locks and state folder are its own.
    for own in ["groups/.clawmd-locks", "groups/.clawmd"] {
        for entry in walkdir::WalkDir::new(d.path(own)) {
            std::os::unix::fs::chown(entry.unwrap().path(), Some(nobody), Some(nobody)).unwrap();
        }
    }
    let before = tree(d.root());
    let output = {
        use std::os::unix::process::CommandExt;
        std::process::Command::new(&bin)
            .args(compose_g)
            .env_clear()
            .env("CLAWMD_ROOT", d.root())
            .current_dir(d.root())
            .uid(nobody)
            .gid(nobody)
            .output()
            .unwrap()
    };
    let shown = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{shown}");
    assert!(
        shown.contains("Permission denied")
            && shown.contains(&d.path("groups/g").display().to_string())
            && shown.contains(fix_for("Permission denied")),
        "{shown}"
    );
    assert_same_tree(
        &without_locks(&before),
        &without_locks(&tree(d.root())),
        "as nobody",
    );
    let reference = d.copy_on_work_dir();
    clawmd(reference.root(), compose_g, &[]).expect(0, "reference");
    clawmd(d.root(), compose_g, &[]).expect(0, "as root");
    assert_same_tree(
        &without_locks(&tree(reference.root())),
        &without_locks(&tree(d.root())),
        "as root",
    );
    tally.faults += 1;

    figure(
        "permission_denied_fails_cleanly_and_converges",
        format_args!(
            "{} permission faults (immutable group, legacy group and CLAUDE.md via chattr +i; a non-root runner): exit 1 naming path and cause, nothing changed or torn, converged once cleared; {:.1}s",
            tally.faults,
            started.elapsed().as_secs_f64()
        ),
    );
}

/// A deployment whose groups/ is a tiny tmpfs holding `files`; container/ is on the normal
/// temp dir, with a 200 KB shared base. Bind it as `let (d, mount)`: the mount drops first.
fn on_tiny_tmpfs(size: &str, files: &[(&str, &str)]) -> (Deployment, Mount) {
    let d =
        Deployment::standard().file("container/CLAUDE.md", &"shared base line\n".repeat(12_000));
    let mount = Mount::new(
        &["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"],
        &d.path("groups"),
    )
    .unwrap();
    for (rel, content) in files {
        d.write(rel, content.as_bytes());
    }
    (d, mount)
}

#[test]
fn disk_full_fails_cleanly_and_converges() {
    if !mounts_available("disk_full_fails_cleanly_and_converges") {
        return;
    }
    let started = Instant::now();
    let enospc = "No space left on device";

    // compose: a group composed with links switches to copies of a 200 KB shared base.
    let (d, tiny) = on_tiny_tmpfs(
        "64k",
        &[
            ("groups/g/container.json", CONFIG_A),
            ("groups/g/CLAUDE.local.md", LOCAL),
        ],
    );
    clawmd(d.root(), &["compose", "g", "--delivery", "link"], &[]).expect(0, "setup");
    let reference = d.copy_on_work_dir();
    let args = ["compose", "g", "--delivery", "copy"];
    clawmd(reference.root(), &args, &[]).expect(0, "reference");
    let before = tree(d.root());
    let run = clawmd(d.root(), &args, &[]);
    run.expect(1, "disk full");
    let shown = run.output();
    assert!(
        shown.contains(enospc)
            && shown.contains(&d.path("groups/g").display().to_string())
            && shown.contains(fix_for(enospc)),
        "{shown}"
    );
    let full = tree(d.root());
    assert_same_tree(&before, &full, "a full disk changed the group");
    assert!(
        temps(&full).is_empty(),
        "a failed write left {:?}",
        temps(&full)
    );
    tiny.remount("remount,size=4m");
    clawmd(d.root(), &args, &[]).expect(0, "after the fault");
    assert_same_tree(&tree(reference.root()), &tree(d.root()), "after the fault");
    drop(tiny);
    drop(d);

    // migrate: a 40 KB legacy CLAUDE.md on a 64 KB disk cannot be copied before it is removed.
    let legacy = "legacy line\n".repeat(3_500);
    let (d, tiny) = on_tiny_tmpfs(
        "64k",
        &[
            ("groups/old/container.json", "{}"),
            ("groups/old/CLAUDE.md", &legacy),
        ],
    );
    let reference = d.copy_on_work_dir();
    clawmd(reference.root(), &["migrate"], &[]).expect(0, "reference");
    let before = tree(d.root());
    let run = clawmd(d.root(), &["migrate"], &[]);
    run.expect(1, "disk full, migrate");
    let shown = run.output();
    assert!(
        shown.contains(enospc)
            && shown.contains(&d.path("groups/old").display().to_string())
            && shown.contains(fix_for(enospc)),
        "{shown}"
    );
    let full = tree(d.root());
    assert_same_tree(
        &without_locks(&before),
        &without_locks(&full),
        "a full disk changed the legacy group",
    );
    assert!(
        temps(&full).is_empty(),
        "a failed write left {:?}",
        temps(&full)
    );
    tiny.remount("remount,size=4m");
    clawmd(d.root(), &["migrate"], &[]).expect(0, "after the fault");
    assert_same_tree(
        &tree(reference.root()),
        &tree(d.root()),
        "migrate after the fault",
    );
    assert_eq!(d.read("groups/old/CLAUDE.local.md"), legacy);

    figure(
        "disk_full_fails_cleanly_and_converges",
        format_args!(
            "2 disk-full faults on a 64 KB tmpfs (compose --delivery copy of a 200 KB base; migrate of a 40 KB legacy file): exit 1 naming path and ENOSPC, nothing changed, no temp file left, converged after growing the disk; {:.1}s",
            started.elapsed().as_secs_f64()
        ),
    );
}

/// Not a test of its own: when `CLAWMD_TEST_HOLD_LOCK` is set, this process takes that lock
/// (flock, as clawmd does), says so on stdout and waits to be killed.
#[test]
fn lock_holder_helper() {
    let Some(path) = std::env::var_os("CLAWMD_TEST_HOLD_LOCK") else {
        return;
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap();
    file.lock().unwrap();
    println!("\nclawmd-test-lock-held");
    use std::io::Write;
    std::io::stdout().flush().unwrap();
    std::thread::sleep(Duration::from_secs(600));
}

/// A process holding a lock; killed (SIGKILL) when dropped, also if the test panics.
struct Holder(std::process::Child);

impl Holder {
    /// kill -9, and reap it.
    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Starts a process that holds `lock` until it is killed.
fn hold_lock(lock: &Path) -> Holder {
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            // The test's name in this binary: `faults::lock_holder_helper`.
            &format!(
                "{}::lock_holder_helper",
                module_path!().split_once("::").unwrap().1
            ),
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("CLAWMD_TEST_HOLD_LOCK", lock)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = std::io::BufReader::new(stdout).lines();
    loop {
        let line = lines.next().expect("the holder exited").unwrap();
        if line.contains("clawmd-test-lock-held") {
            break;
        }
    }
    Holder(child)
}

#[test]
fn a_lock_held_by_a_killed_process_is_released() {
    let started = Instant::now();
    let mut checked = 0;
    for (args, group) in [(&["compose", "g"][..], "g"), (&["migrate"][..], "old")] {
        let d = deployment();
        let reference = d.copy_on_work_dir();
        clawmd(reference.root(), args, &[]).expect(0, "reference");
        let lock = d.path(&format!("groups/.clawmd-locks/{group}.lock"));
        let mut holder = hold_lock(&lock);
        let before = tree(d.root());

        // While the holder lives, a run waits, then says which lock and how to wait longer.
        let run = clawmd(d.root(), args, &[("CLAWMD_LOCK_TIMEOUT", "1")]);
        run.expect(1, "lock held");
        let shown = run.output();
        assert!(
            shown.contains(&lock.display().to_string()) && shown.contains("CLAWMD_LOCK_TIMEOUT"),
            "{shown}"
        );
        assert!(run.elapsed >= Duration::from_secs(1), "{:?}", run.elapsed);
        let waited = tree(d.root());
        let ours = |t: &Tree| -> Tree {
            t.iter()
                .filter(|(p, _)| p.starts_with(&format!("groups/{group}/")))
                .map(|(p, e)| (p.clone(), e.clone()))
                .collect()
        };
        assert_same_tree(
            &ours(&before),
            &ours(&waited),
            "a run that timed out changed the group",
        );

        // kill -9: the kernel drops the flock with the process; the next run proceeds at once.
        holder.kill();
        assert!(lock.exists(), "the lock file stays behind");
        let run = clawmd(d.root(), args, &[("CLAWMD_LOCK_TIMEOUT", "1")]);
        run.expect(0, "after kill -9 of the holder");
        assert!(
            run.elapsed < Duration::from_secs(1),
            "waited {:?}",
            run.elapsed
        );
        assert_same_tree(&tree(reference.root()), &tree(d.root()), "after kill -9");
        checked += 1;
    }
    figure(
        "a_lock_held_by_a_killed_process_is_released",
        format_args!(
            "{checked} locks (compose, migrate) held by a live process: timeout error naming the lock and CLAWMD_LOCK_TIMEOUT, group unchanged; after kill -9 of the holder the next run proceeds at once and converges; {:.1}s",
            started.elapsed().as_secs_f64()
        ),
    );
}
