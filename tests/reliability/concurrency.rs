//! Concurrency: many clawmd processes on the same deployment at once, with reader threads
//! reading what an agent would read the whole time.
//!
//! What must hold for a reader (and is asserted): `CLAUDE.md` and `CLAUDE.local.md` are never
//! missing and never partial; every file read is one whole version that some configuration
//! produces; a fragment that every configuration has is never missing. What need not hold: a
//! fragment only one configuration has may come and go, so a reader that read `CLAUDE.md` a
//! moment before a config switch can find one of its imports gone (docs/reliability.md).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::support::Deployment;
use crate::support::*;

/// Reads `path` the way a careful reader would without following a final symlink: a file's
/// bytes, a link's target, or `None` when nothing is there at that moment.
fn read_now(path: &Path) -> Option<Entry> {
    let eloop = rustix::io::Errno::LOOP.raw_os_error();
    let enoent = rustix::io::Errno::NOENT.raw_os_error();
    let einval = rustix::io::Errno::INVAL.raw_os_error();
    loop {
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(path);
        match opened {
            Ok(mut file) => {
                let meta = file.metadata().unwrap();
                if meta.is_dir() {
                    return Some(Entry::Dir);
                }
                let mut bytes = Vec::new();
                file.read_to_end(&mut bytes).unwrap();
                return Some(Entry::File(bytes));
            }
            Err(err) if err.raw_os_error() == Some(enoent) => return None,
            Err(err) if err.raw_os_error() == Some(eloop) => match std::fs::read_link(path) {
                Ok(target) => return Some(Entry::Link(target)),
                Err(err) if err.raw_os_error() == Some(enoent) => return None,
                // Replaced by a file between the two calls: look again.
                Err(err) if err.raw_os_error() == Some(einval) => continue,
                Err(err) => panic!("read link {}: {err}", path.display()),
            },
            Err(err) => panic!("open {}: {err}", path.display()),
        }
    }
}

/// For each path of one group: every whole version some configuration produces, and whether
/// every configuration has it.
struct Valid {
    versions: BTreeMap<String, BTreeSet<Vec<u8>>>,
    links: BTreeMap<String, BTreeSet<PathBuf>>,
    always: BTreeSet<String>,
}

impl Valid {
    /// From reference trees of the group (paths relative to the group folder).
    fn new(references: &[BTreeMap<String, Entry>]) -> Self {
        let mut valid = Valid {
            versions: BTreeMap::new(),
            links: BTreeMap::new(),
            always: BTreeSet::new(),
        };
        for reference in references {
            for (path, entry) in reference {
                match entry {
                    Entry::File(bytes) => {
                        valid
                            .versions
                            .entry(path.clone())
                            .or_default()
                            .insert(bytes.clone());
                    }
                    Entry::Link(target) => {
                        valid
                            .links
                            .entry(path.clone())
                            .or_default()
                            .insert(target.clone());
                    }
                    _ => {}
                }
            }
        }
        let first = &references[0];
        for path in first.keys() {
            if references.iter().all(|r| r.contains_key(path)) {
                valid.always.insert(path.clone());
            }
        }
        valid
    }

    fn names(&self) -> BTreeSet<String> {
        self.versions
            .keys()
            .chain(self.links.keys())
            .cloned()
            .collect()
    }

    /// Checks what a reader found at `rel`.
    fn check(&self, rel: &str, found: Option<&Entry>) -> Result<(), String> {
        match found {
            None if self.always.contains(rel) => Err(format!(
                "{rel} was missing, though every configuration has it"
            )),
            None => Ok(()),
            Some(Entry::File(bytes)) => match self.versions.get(rel) {
                Some(set) if set.contains(bytes) => Ok(()),
                _ => Err(format!(
                    "{rel} held {} bytes that no configuration produces (torn?): {:?}",
                    bytes.len(),
                    String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
                )),
            },
            Some(Entry::Link(target)) => match self.links.get(rel) {
                Some(set) if set.contains(target) => Ok(()),
                _ => Err(format!("{rel} was a link to {}", target.display())),
            },
            Some(other) => Err(format!("{rel} was {other:?}")),
        }
    }
}

/// The entries of one group in a tree, relative to the group folder, and those of its bind
/// folder in the state as `state:NAME` (the composed entry point is there).
fn group_entries(tree: &Tree, group: &str) -> BTreeMap<String, Entry> {
    let prefix = format!("groups/{group}/");
    let state = format!("groups/.clawmd/binds/{group}/");
    tree.iter()
        .filter_map(|(path, entry)| {
            let rel = match path.strip_prefix(&prefix) {
                Some(rel) => rel.to_owned(),
                None => format!("state:{}", path.strip_prefix(&state)?),
            };
            (!is_temp(&rel) && rel != "container.json").then(|| (rel, entry.clone()))
        })
        .collect()
}

/// Where `rel` (as [`group_entries`] names it) of `group` is.
fn entry_path(root: &Path, group: &str, rel: &str) -> PathBuf {
    match rel.strip_prefix("state:") {
        Some(rest) => root.join("groups/.clawmd/binds").join(group).join(rest),
        None => root.join("groups").join(group).join(rel),
    }
}

const CONFIG_A: &str = r#"{"skills": "all", "mcpServers": {
  "db": {"command": "db", "instructions": "Read only."},
  "cache": {"command": "c", "instructions": "Flush hourly."}}}"#;
const CONFIG_B: &str = r#"{"skills": ["hello", "tools"], "mcpServers": {
  "db": {"command": "db", "instructions": "Read and write, carefully."},
  "search": {"command": "s", "instructions": "Prefer exact phrases."}}}"#;
const LOCAL: &str = "# Group memory\nThe agent and people write here.\n";

fn deployment() -> Deployment {
    // Large shared files make each write take long enough for readers to land inside it.
    Deployment::on_work_dir()
        .with_standard()
        .file(
            "container/CLAUDE.md",
            &"shared base line\n".repeat(16 * 1024),
        )
        .file(
            "container/skills/tools/instructions.md",
            &"tool guidance\n".repeat(8 * 1024),
        )
        .group("g", Some(CONFIG_A))
        .file("groups/g/CLAUDE.local.md", LOCAL)
}

#[test]
fn eight_processes_compose_one_group_while_readers_read() {
    let started = Instant::now();
    let writers = scale("CLAWMD_WRITERS", 8, 8) as usize;
    let runs_each = scale("CLAWMD_RUNS_EACH", 25, 250) as usize;

    // Every whole state the group can be in: two configs x two delivery modes.
    let mut references = Vec::new();
    for config in [CONFIG_A, CONFIG_B] {
        for delivery in ["link", "copy"] {
            let d = deployment();
            d.write("groups/g/container.json", config.as_bytes());
            clawmd(d.root(), &["compose", "g", "--delivery", delivery], &[]).expect(0, "reference");
            references.push(group_entries(&tree(d.root()), "g"));
        }
    }
    let valid = Arc::new(Valid::new(&references));
    for must in [
        "state:CLAUDE.md",
        "CLAUDE.md",
        "CLAUDE.local.md",
        ".claude-fragments/.claude-shared.md",
    ] {
        assert!(valid.always.contains(must), "{must}");
    }

    let work = Arc::new(deployment());
    clawmd(work.root(), &["compose", "g", "--delivery", "link"], &[]).expect(0, "initial compose");
    let done = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let config_switches = Arc::new(AtomicU64::new(0));

    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (work, valid, done, reads) =
                (work.clone(), valid.clone(), done.clone(), reads.clone());
            thread::spawn(move || -> Result<(), String> {
                let group = work.path("groups/g");
                let names = valid.names();
                while !done.load(Ordering::Relaxed) {
                    for name in ["state:CLAUDE.md", "CLAUDE.md", "CLAUDE.local.md"] {
                        let found = read_now(&entry_path(work.root(), "g", name));
                        if found.is_none() {
                            return Err(format!("{name} was missing"));
                        }
                        valid.check(name, found.as_ref())?;
                    }
                    for name in &names {
                        valid
                            .check(name, read_now(&entry_path(work.root(), "g", name)).as_ref())?;
                    }
                    for entry in std::fs::read_dir(group.join(".claude-fragments")).unwrap() {
                        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
                        if clawmd::fsops::is_temp_name(&name) {
                            continue;
                        }
                        let rel = format!(".claude-fragments/{name}");
                        valid.check(&rel, read_now(&group.join(&rel)).as_ref())?;
                    }
                    reads.fetch_add(2 + names.len() as u64, Ordering::Relaxed);
                }
                Ok(())
            })
        })
        .collect();

    // The runner changes the config now and then, atomically, while composes run.
    let switcher = {
        let (work, done, switches) = (work.clone(), done.clone(), config_switches.clone());
        thread::spawn(move || {
            let mut b = false;
            while !done.load(Ordering::Relaxed) {
                thread::sleep(Duration::from_millis(15));
                b = !b;
                let config = if b { CONFIG_B } else { CONFIG_A };
                write_atomically(&work.path("groups/g/container.json"), config.as_bytes());
                switches.fetch_add(1, Ordering::Relaxed);
            }
        })
    };

    let composers: Vec<_> = (0..writers)
        .map(|w| {
            let work = work.clone();
            thread::spawn(move || {
                let mut outcomes = Vec::new();
                for run in 0..runs_each {
                    let delivery = if (w + run) % 2 == 0 { "link" } else { "copy" };
                    outcomes.push(clawmd(
                        work.root(),
                        &["compose", "g", "--delivery", delivery],
                        &[],
                    ));
                }
                outcomes
            })
        })
        .collect();
    let mut runs = 0;
    for composer in composers {
        for outcome in composer.join().unwrap() {
            outcome.expect(0, "a concurrent compose");
            runs += 1;
        }
    }
    done.store(true, Ordering::Relaxed);
    switcher.join().unwrap();
    for reader in readers {
        if let Err(problem) = reader.join().unwrap() {
            panic!("a reader saw a bad state: {problem}");
        }
    }

    // The final state is exactly what one uninterrupted compose makes.
    write_atomically(&work.path("groups/g/container.json"), CONFIG_B.as_bytes());
    clawmd(work.root(), &["compose", "g", "--delivery", "copy"], &[]).expect(0, "final");
    let last = tree(work.root());
    assert!(temps(&last).is_empty(), "{:?}", temps(&last));
    assert_eq!(group_entries(&last, "g"), references[3], "final state");
    figure(
        "eight_processes_compose_one_group_while_readers_read",
        format_args!(
            "{writers} processes x {runs_each} composes = {runs} runs (link/copy alternating), {} config switches, 3 reader threads made {} reads, 0 missing or partial, 0 failed runs; {:.1}s on {}",
            config_switches.load(Ordering::Relaxed),
            reads.load(Ordering::Relaxed),
            started.elapsed().as_secs_f64(),
            fs_type(work.root())
        ),
    );
}

const GLOBAL: &str = "# Global memory\nEvery group used to share this.\n";

fn legacy_text(i: usize) -> String {
    format!("# Legacy memory of group l{i}\nHand-written, unique text {i}.\n")
}

fn legacy_deployment(composed: usize, legacy: usize) -> Deployment {
    let d = Deployment::on_work_dir()
        .with_standard()
        .file("groups/global/CLAUDE.md", GLOBAL);
    for i in 0..composed {
        d.write(&format!("groups/c{i}/container.json"), CONFIG_A.as_bytes());
        d.write(&format!("groups/c{i}/CLAUDE.local.md"), LOCAL.as_bytes());
    }
    // Link delivery: the races below switch between link and copy, whose CLAUDE.md is the same.
    clawmd(d.root(), &["compose", "--all", "--delivery", "link"], &[])
        .expect(0, "compose the clean groups");
    for i in 0..legacy {
        d.write(&format!("groups/l{i}/container.json"), CONFIG_B.as_bytes());
        d.write(&format!("groups/l{i}/CLAUDE.md"), legacy_text(i).as_bytes());
        if i % 2 == 0 {
            d.write(&format!("groups/l{i}/CLAUDE.local.md"), LOCAL.as_bytes());
        }
        std::os::unix::fs::symlink(
            "../global/CLAUDE.md",
            d.path(&format!("groups/l{i}/.claude-global.md")),
        )
        .unwrap();
    }
    d
}

/// Whether `text` is in the group's CLAUDE.md, CLAUDE.local.md or a rescued copy (in the
/// group's rescue folder, outside the group), reading in the order the text moves (source
/// first), so a move between reads cannot hide it.
fn text_findable(group: &Path, text: &[u8]) -> bool {
    let holds = |path: &Path| matches!(read_now(path), Some(Entry::File(b)) if contains(&b, text));
    if holds(&group.join("CLAUDE.md")) || holds(&group.join("CLAUDE.local.md")) {
        return true;
    }
    let rescues = group
        .parent()
        .unwrap()
        .join(".clawmd/rescues")
        .join(group.file_name().unwrap());
    let Ok(entries) = std::fs::read_dir(&rescues) else {
        return false;
    };
    entries.into_iter().any(|entry| {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        name.starts_with("CLAUDE.md.rescued-") && holds(&rescues.join(&name))
    })
}

#[test]
fn compose_all_races_migrate() {
    let started = Instant::now();
    let (composed, legacy) = (4, 4);
    let runs_each = scale("CLAWMD_RUNS_EACH", 15, 150) as usize;
    let work = Arc::new(legacy_deployment(composed, legacy));
    let clean_md = std::fs::read(work.path("groups/c0/CLAUDE.md")).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));

    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (work, done, reads, clean_md) =
                (work.clone(), done.clone(), reads.clone(), clean_md.clone());
            thread::spawn(move || -> Result<(), String> {
                while !done.load(Ordering::Relaxed) {
                    for i in 0..composed {
                        let group = work.path(&format!("groups/c{i}"));
                        match read_now(&group.join("CLAUDE.md")) {
                            Some(Entry::File(bytes)) if bytes == clean_md => {}
                            other => return Err(format!("c{i}/CLAUDE.md was {other:?}")),
                        }
                        match read_now(&group.join("CLAUDE.local.md")) {
                            Some(Entry::File(bytes)) if bytes == LOCAL.as_bytes() => {}
                            other => return Err(format!("c{i}/CLAUDE.local.md was {other:?}")),
                        }
                    }
                    for i in 0..legacy {
                        let group = work.path(&format!("groups/l{i}"));
                        if !text_findable(&group, legacy_text(i).as_bytes()) {
                            return Err(format!("the legacy text of l{i} was nowhere"));
                        }
                        if i % 2 == 0 && !text_findable(&group, LOCAL.as_bytes()) {
                            return Err(format!("the CLAUDE.local.md text of l{i} was nowhere"));
                        }
                    }
                    let global = read_now(&work.path("groups/global/CLAUDE.md"));
                    let global_ok =
                        matches!(&global, Some(Entry::File(b)) if b == GLOBAL.as_bytes());
                    match read_now(&work.path("container/CLAUDE.md")) {
                        Some(Entry::File(b)) if b.starts_with(b"BASE\n") => {
                            if !global_ok && !contains(&b, GLOBAL.as_bytes()) {
                                return Err("the global text was nowhere".into());
                            }
                        }
                        other => return Err(format!("container/CLAUDE.md was {other:?}")),
                    }
                    reads.fetch_add(
                        4 * composed as u64 + 3 * legacy as u64 + 2,
                        Ordering::Relaxed,
                    );
                }
                Ok(())
            })
        })
        .collect();

    let workers: Vec<_> = (0..8)
        .map(|w| {
            let work = work.clone();
            thread::spawn(move || {
                (0..runs_each)
                    .map(|run| {
                        if w % 2 == 0 {
                            clawmd(work.root(), &["migrate", "--append-global"], &[])
                        } else {
                            let delivery = if run % 2 == 0 { "link" } else { "copy" };
                            clawmd(
                                work.root(),
                                &["compose", "--all", "--delivery", delivery],
                                &[],
                            )
                        }
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut runs = 0;
    let mut failures = Vec::new();
    for worker in workers {
        for outcome in worker.join().unwrap() {
            runs += 1;
            if outcome.status.code() != Some(0) {
                failures.push(outcome.show());
            }
        }
    }
    done.store(true, Ordering::Relaxed);
    for reader in readers {
        if let Err(problem) = reader.join().unwrap() {
            panic!("a reader saw a bad state: {problem}");
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {runs} runs failed:\n{}",
        failures.len(),
        failures.join("\n")
    );

    // Start-up order once more, then everything is in its final place.
    clawmd(work.root(), &["migrate", "--append-global"], &[]).expect(0, "final migrate");
    clawmd(
        work.root(),
        &["compose", "--all", "--delivery", "copy"],
        &[],
    )
    .expect(0, "final compose");
    let last = tree(work.root());
    assert!(temps(&last).is_empty(), "{:?}", temps(&last));
    assert!(
        !work.exists("groups/global"),
        "groups/global was not retired"
    );
    let container = std::fs::read(work.path("container/CLAUDE.md")).unwrap();
    assert_eq!(
        container
            .windows(GLOBAL.len())
            .filter(|w| *w == GLOBAL.as_bytes())
            .count(),
        1,
        "the global text must be in container/CLAUDE.md exactly once"
    );
    for i in 0..legacy {
        let group = work.path(&format!("groups/l{i}"));
        assert!(text_findable(&group, legacy_text(i).as_bytes()), "l{i}");
        assert!(!work.exists(&format!("groups/l{i}/.claude-global.md")));
        let md = std::fs::read(group.join("CLAUDE.md")).unwrap();
        assert_eq!(
            md,
            clawmd::plan::mount_point_placeholder("CLAUDE.md"),
            "l{i}/CLAUDE.md is the mount point"
        );
        let composed = std::fs::read(work.path(&format!("groups/.clawmd/binds/l{i}/CLAUDE.md")));
        assert!(
            clawmd::plan::is_pristine(&composed.unwrap()),
            "l{i}'s CLAUDE.md is composed"
        );
    }
    // The clean groups end exactly as an uninterrupted migrate + compose leaves them.
    let reference = legacy_deployment(composed, legacy);
    clawmd(reference.root(), &["migrate", "--append-global"], &[]).expect(0, "reference migrate");
    clawmd(
        reference.root(),
        &["compose", "--all", "--delivery", "copy"],
        &[],
    )
    .expect(0, "reference compose");
    let expected = tree(reference.root());
    for i in 0..composed {
        let group = format!("c{i}");
        assert_eq!(
            group_entries(&last, &group),
            group_entries(&expected, &group),
            "{group}"
        );
    }
    assert_eq!(
        last.get("container/CLAUDE.md"),
        expected.get("container/CLAUDE.md")
    );
    figure(
        "compose_all_races_migrate",
        format_args!(
            "4 migrate + 4 compose --all processes x {runs_each} = {runs} runs over {} groups + global, 2 reader threads made {} reads, texts lost: 0, failed runs: 0; {:.1}s on {}",
            composed + legacy,
            reads.load(Ordering::Relaxed),
            started.elapsed().as_secs_f64(),
            fs_type(work.root())
        ),
    );
}

/// Two start-up hooks (or two runners) may run `migrate` at the same moment on a deployment
/// that still has `groups/global/`: every run must succeed, and the end state is the one a
/// single run leaves.
#[test]
fn simultaneous_migrates_all_succeed() {
    let started = Instant::now();
    let rounds = scale("CLAWMD_MIGRATE_ROUNDS", 10, 200) as usize;
    let at_once = 6;
    let make = || {
        Deployment::on_work_dir()
            .with_standard()
            .file("groups/global/CLAUDE.md", GLOBAL)
            .group("a", Some("{}"))
            .file("groups/a/CLAUDE.md", &legacy_text(0))
            .group("b", Some("{}"))
            .file("groups/b/CLAUDE.md", &legacy_text(1))
            .file("groups/b/CLAUDE.local.md", LOCAL)
    };
    let reference = make();
    clawmd(reference.root(), &["migrate"], &[]).expect(0, "reference");
    let expected = tree(reference.root());
    let mut runs = 0;
    for round in 0..rounds {
        let work = make();
        // In even rounds the test holds the global lock while the runs start, so they all
        // find groups/global/ and queue on its lock: the worst interleaving, every time.
        let held = (round % 2 == 0).then(|| {
            std::fs::create_dir_all(work.path("groups/.clawmd-locks")).unwrap();
            let file =
                std::fs::File::create(work.path("groups/.clawmd-locks/global.lock")).unwrap();
            file.lock().unwrap();
            file
        });
        let children: Vec<_> = (0..at_once)
            .map(|_| {
                command(work.root(), &["migrate"], &[])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        if let Some(file) = held {
            thread::sleep(Duration::from_millis(150));
            drop(file);
        }
        for child in children {
            let output = child.wait_with_output().unwrap();
            runs += 1;
            assert!(
                output.status.success(),
                "round {round}: a simultaneous migrate failed: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        assert_same_tree(&expected, &tree(work.root()), &format!("round {round}"));
    }
    figure(
        "simultaneous_migrates_all_succeed",
        format_args!(
            "{rounds} rounds x {at_once} simultaneous migrates = {runs} runs (half the rounds queued on a held global lock), 0 failed, all rounds equal to one uninterrupted migrate; {:.1}s",
            started.elapsed().as_secs_f64()
        ),
    );
}

/// Two spawns of one group at once, each handing another config (`"groupConfig": "handed"`):
/// whichever composes last, the kept config is the one its documents were made from, so
/// `check` (which reads the kept config) has nothing to report after every round. The kept
/// config used to be written before the group's lock was taken: a spawn's config could land
/// after the other's compose, and check then reported the group out of date.
#[test]
fn two_spawns_handing_configs_at_once_leave_the_kept_config_and_documents_agreeing() {
    let d = Deployment::on_work_dir()
        .with_standard()
        .file("clawmd.json", r#"{"groupConfig": "handed"}"#)
        .file("container/skills/tools/instructions.md", "tool guidance\n")
        .group("g", None);
    let (a, b) = (d.path("a.json"), d.path("b.json"));
    std::fs::write(&a, CONFIG_A).unwrap();
    std::fs::write(&b, CONFIG_B).unwrap();
    let rounds = scale("CLAWMD_HANDED_ROUNDS", 24, 96);
    let mut disagreed = Vec::new();
    for round in 0..rounds {
        let spawns: Vec<_> = [a.clone(), b.clone()]
            .into_iter()
            .map(|config| {
                let root = d.root().to_owned();
                thread::spawn(move || {
                    for _ in 0..4 {
                        let config = config.to_str().unwrap();
                        clawmd(&root, &["compose", "g", "-q", "--config", config], &[])
                            .expect(0, "a spawn");
                    }
                })
            })
            .collect();
        for spawn in spawns {
            spawn.join().unwrap();
        }
        let check = clawmd(d.root(), &["check", "g", "--json"], &[]);
        let report: serde_json::Value = serde_json::from_str(&check.stdout()).unwrap();
        let findings = &report["groups"][0]["findings"];
        if findings != &serde_json::json!([]) {
            let kept = std::fs::read_to_string(d.path("groups/.clawmd/configs/g.json")).unwrap();
            let doc = std::fs::read_to_string(d.path("groups/.clawmd/binds/g/managed/CLAUDE.md"))
                .unwrap();
            disagreed.push(format!("round {round}: {findings}\nKEPT {kept}\nDOC {doc}"));
        }
    }
    assert!(disagreed.is_empty(), "{}", disagreed.join("\n"));
}
