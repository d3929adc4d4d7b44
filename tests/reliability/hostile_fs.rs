//! Hostile filesystem: an agent inside the container can replace anything in its (read-write
//! mounted) group with a symlink, a fifo or a hard link. For every managed path, clawmd must
//! either refuse (exit 1, the error names the path, nothing changed) or repair by rename
//! (which replaces the link, never its target), and never read, write or delete anything
//! outside the group: a sentinel file (bytes, inode, mtime and atime) and a sentinel folder
//! (listing, inode, mtime and atime) outside must stay exactly as they were.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::Instant;

use crate::support::Deployment;
use crate::support::*;

const CONFIG: &str = r#"{"skills": "all", "mcpServers": {
  "db": {"command": "db", "instructions": "Read only."}}}"#;
const LOCAL: &str = "# Group memory\n";
const LEGACY: &str = "# Hand-written memory, not migrated yet\n";

const LINK: &[&str] = &["compose", "g", "--delivery", "link"];
const DEFAULT: &[&str] = &["compose", "g"];
const COPY: &[&str] = &["compose", "g", "--delivery", "copy"];
const ALL: &[&str] = &["compose", "--all", "--delivery", "link"];
const MIGRATE: &[&str] = &["migrate"];

#[derive(Clone, Debug)]
enum Expect {
    /// Exit 1, the output names this path (relative to the root), nothing changes.
    Refuse(String),
    /// Exit 0 and the tree ends as the same command leaves a clean deployment.
    Repair,
    /// Exit 0 and nothing changes (the command does not use that path).
    Untouched,
    /// Exit 0, and these paths (relative to the root: what the agent made) are exactly as
    /// they were.
    Spares(Vec<String>),
    /// Exit 0, the tree ends as the same command leaves a clean deployment, and the text found
    /// at the path (relative to the root), which clawmd did not write, was kept aside in the
    /// group's rescue folder first.
    RepairKeeping(String),
}

use Expect::{Repair, Spares, Untouched};

#[allow(non_snake_case)]
fn Refuse(path: &str) -> Expect {
    Expect::Refuse(path.to_owned())
}

type Arrange = Box<dyn Fn(&Deployment, &Sentinel)>;

fn keeping(path: &str) -> Expect {
    Expect::RepairKeeping(path.to_owned())
}

struct Case {
    name: &'static str,
    arrange: Arrange,
    runs: Vec<(&'static [&'static str], Expect)>,
    /// A hard link shares the outside file's inode, so reading the group's name reads it.
    may_read_outside: bool,
}

fn case(
    name: &'static str,
    arrange: impl Fn(&Deployment, &Sentinel) + 'static,
    runs: Vec<(&'static [&'static str], Expect)>,
) -> Case {
    Case {
        name,
        arrange: Box::new(arrange),
        runs,
        may_read_outside: false,
    }
}

/// Group `g` composed (link delivery), group `fresh` never composed.
fn deployment() -> Deployment {
    let d = Deployment::standard()
        .group("g", Some(CONFIG))
        .file("groups/g/CLAUDE.local.md", LOCAL);
    clawmd(d.root(), LINK, &[]).expect(0, "setup");
    d.group("fresh", Some(r#"{"skills": ["hello"]}"#))
}

fn replace_with_link(d: &Deployment, rel: &str, target: &Path) {
    let path = d.path(rel);
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(&path).unwrap(),
        Ok(_) => std::fs::remove_file(&path).unwrap(),
        Err(_) => std::fs::create_dir_all(path.parent().unwrap()).unwrap(),
    }
    symlink(target, &path).unwrap();
}

fn remove_any(d: &Deployment, rel: &str) {
    let path = d.path(rel);
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(&path).unwrap(),
        Ok(_) => std::fs::remove_file(&path).unwrap(),
        Err(_) => std::fs::create_dir_all(path.parent().unwrap()).unwrap(),
    }
}

fn replace_with_fifo(d: &Deployment, rel: &str) {
    let path = d.path(rel);
    let _ = std::fs::remove_file(&path);
    let status = std::process::Command::new("mkfifo")
        .arg(&path)
        .status()
        .unwrap();
    assert!(status.success());
}

fn cases() -> Vec<Case> {
    // The agent's own memory made unusable: every compose leaves it as it is and composes the
    // guardrails all the same (issue 38: never a permanent refusal of the group).
    let compose_all_spare = |rel: &str| {
        let spared = || Spares(vec![rel.to_owned()]);
        vec![
            (LINK, spared()),
            (COPY, spared()),
            (DEFAULT, spared()),
            (ALL, spared()),
        ]
    };
    let compose_all_refuse = |rel: &str| {
        vec![
            (LINK, Refuse(rel)),
            (COPY, Refuse(rel)),
            (DEFAULT, Refuse(rel)),
            (ALL, Refuse(rel)),
        ]
    };
    let mut cases = vec![
        case(
            "the group folder is a symlink to an outside folder",
            |d, s| replace_with_link(d, "groups/g", &s.dir()),
            [
                compose_all_refuse("groups/g"),
                vec![(MIGRATE, Refuse("groups/g"))],
            ]
            .concat(),
        ),
        case(
            "the group folder is a symlink to an outside file",
            |d, s| replace_with_link(d, "groups/g", &s.file()),
            [
                compose_all_refuse("groups/g"),
                vec![(MIGRATE, Refuse("groups/g"))],
            ]
            .concat(),
        ),
        case(
            ".claude-fragments is a symlink to an outside folder",
            |d, s| replace_with_link(d, "groups/g/.claude-fragments", &s.dir()),
            [
                compose_all_refuse("groups/g/.claude-fragments"),
                vec![(MIGRATE, Untouched)],
            ]
            .concat(),
        ),
        case(
            ".claude-fragments is a symlink to an outside file",
            |d, s| replace_with_link(d, "groups/g/.claude-fragments", &s.file()),
            compose_all_refuse("groups/g/.claude-fragments"),
        ),
        case(
            "CLAUDE.md is a symlink to an outside file",
            |d, s| replace_with_link(d, "groups/g/CLAUDE.md", &s.file()),
            [
                compose_all_refuse("groups/g/CLAUDE.md"),
                vec![(MIGRATE, Refuse("groups/g/CLAUDE.md"))],
            ]
            .concat(),
        ),
        case(
            "CLAUDE.md is a symlink to an outside folder",
            |d, s| replace_with_link(d, "groups/g/CLAUDE.md", &s.dir()),
            [
                compose_all_refuse("groups/g/CLAUDE.md"),
                vec![(MIGRATE, Refuse("groups/g/CLAUDE.md"))],
            ]
            .concat(),
        ),
        case(
            "CLAUDE.local.md is a symlink to an outside file",
            |d, s| replace_with_link(d, "groups/g/CLAUDE.local.md", &s.file()),
            [
                compose_all_spare("groups/g/CLAUDE.local.md"),
                vec![(MIGRATE, Untouched)],
            ]
            .concat(),
        ),
        case(
            "CLAUDE.local.md is a symlink to an outside file beside a legacy CLAUDE.md",
            |d, s| {
                d.write("groups/g/CLAUDE.md", LEGACY.as_bytes());
                replace_with_link(d, "groups/g/CLAUDE.local.md", &s.file());
            },
            vec![
                (MIGRATE, Refuse("groups/g/CLAUDE.local.md")),
                (LINK, Spares(vec!["groups/g/CLAUDE.local.md".to_owned()])),
            ],
        ),
        case(
            "CLAUDE.local.md is a symlink to an outside folder",
            |d, s| replace_with_link(d, "groups/g/CLAUDE.local.md", &s.dir()),
            compose_all_spare("groups/g/CLAUDE.local.md"),
        ),
        case(
            "container.json is a symlink to an outside file",
            |d, s| replace_with_link(d, "groups/g/container.json", &s.file()),
            [
                compose_all_refuse("groups/g/container.json"),
                vec![(MIGRATE, Untouched)],
            ]
            .concat(),
        ),
        case(
            "a skill fragment link points at an outside file",
            |d, s| replace_with_link(d, "groups/g/.claude-fragments/web.md", &s.file()),
            vec![
                (LINK, Repair),
                (COPY, Repair),
                (DEFAULT, Repair),
                (ALL, Repair),
                (MIGRATE, Untouched),
            ],
        ),
        case(
            "an MCP fragment is a symlink to an outside file",
            |d, s| replace_with_link(d, "groups/g/.claude-fragments/mcp-db.md", &s.file()),
            vec![
                (LINK, Repair),
                (COPY, Repair),
                (DEFAULT, Repair),
                (ALL, Repair),
            ],
        ),
        case(
            "an MCP fragment is a symlink to an outside folder",
            |d, s| replace_with_link(d, "groups/g/.claude-fragments/mcp-db.md", &s.dir()),
            vec![(LINK, Repair), (COPY, Repair)],
        ),
        case(
            "stale fragments are symlinks to an outside file and folder",
            |d, s| {
                replace_with_link(d, "groups/g/.claude-fragments/evil.md", &s.file());
                replace_with_link(d, "groups/g/.claude-fragments/mcp-gone.md", &s.dir());
            },
            // Links hold nobody's text: removed, never followed.
            vec![(LINK, Repair), (COPY, Repair), (ALL, Repair)],
        ),
        case(
            ".claude-shared.md is a symlink to an outside file",
            |d, s| replace_with_link(d, "groups/g/.claude-shared.md", &s.file()),
            vec![(LINK, Repair), (COPY, Repair), (MIGRATE, Untouched)],
        ),
        case(
            ".claude-global.md is a symlink to an outside file",
            |d, s| replace_with_link(d, "groups/g/.claude-global.md", &s.file()),
            vec![(MIGRATE, Repair), (LINK, Untouched)],
        ),
        case(
            "groups/global is a symlink to an outside folder",
            |d, s| replace_with_link(d, "groups/global", &s.dir()),
            vec![(MIGRATE, Refuse("groups/global")), (ALL, Untouched)],
        ),
        case(
            "groups/global/CLAUDE.md is a symlink to an outside file",
            |d, s| replace_with_link(d, "groups/global/CLAUDE.md", &s.file()),
            vec![(MIGRATE, Refuse("groups/global/CLAUDE.md"))],
        ),
        case(
            "container.json is a fifo",
            |d, _| replace_with_fifo(d, "groups/g/container.json"),
            vec![(LINK, Refuse("groups/g/container.json"))],
        ),
        case(
            "CLAUDE.local.md is a fifo",
            |d, _| replace_with_fifo(d, "groups/g/CLAUDE.local.md"),
            compose_all_spare("groups/g/CLAUDE.local.md"),
        ),
        case(
            "CLAUDE.md is a fifo",
            |d, _| replace_with_fifo(d, "groups/g/CLAUDE.md"),
            vec![(LINK, Repair), (MIGRATE, Refuse("groups/g/CLAUDE.md"))],
        ),
        case(
            "a fragment is a fifo",
            |d, _| replace_with_fifo(d, "groups/g/.claude-fragments/mcp-db.md"),
            vec![(LINK, Repair), (COPY, Repair)],
        ),
    ];

    // The name a hand edit (of the composed CLAUDE.md) would be rescued under, planted in
    // advance in the group folder as a link outside: that name is the agent's, not clawmd's
    // (rescues are kept outside the group), so the edit is kept outside and the link is
    // neither followed nor touched.
    let edited = |d: &Deployment| {
        let mut text = std::fs::read(d.path(&Deployment::composed("g", "CLAUDE.md"))).unwrap();
        text.extend_from_slice(b"\nA hand edit someone cares about.\n");
        text
    };
    let rescue_name = {
        let d = deployment();
        format!(
            "{}{}",
            clawmd::layout::names::RESCUE_PREFIX,
            clawmd::plan::short_hash(&edited(&d))
        )
    };
    let in_group = format!("groups/g/{rescue_name}");
    let planted = in_group.clone();
    cases.push(case(
        "the rescue name of a hand edit is planted in the group as a link outside",
        move |d, s| {
            d.write(&Deployment::composed("g", "CLAUDE.md"), &edited(d));
            replace_with_link(d, &planted, &s.file());
        },
        vec![(LINK, Spares(vec![in_group.clone()]))],
    ));

    // clawmd's state folder (the host's) and what is in it, replaced by a link, a FIFO or a
    // file: whatever needs it refuses, naming it, and follows nothing.
    let hand_edit =
        move |d: &Deployment| d.write(&Deployment::composed("g", "CLAUDE.md"), &edited(d));
    let config_change =
        |d: &Deployment| d.write("groups/g/container.json", br#"{"skills": ["hello"]}"#);
    type Plant = fn(&Deployment, &str, &Sentinel);
    let plants: [(&str, Plant); 4] = [
        ("a symlink to an outside folder", |d, rel, s| {
            replace_with_link(d, rel, &s.dir())
        }),
        ("a symlink to an outside file", |d, rel, s| {
            replace_with_link(d, rel, &s.file())
        }),
        ("a fifo", |d, rel, _| {
            remove_any(d, rel);
            replace_with_fifo(d, rel)
        }),
        ("a regular file", |d, rel, _| {
            remove_any(d, rel);
            d.write(rel, b"not a folder")
        }),
    ];
    let places: [(&'static str, &'static str, bool); 5] = [
        ("the state folder", "groups/.clawmd", true),
        ("the rescues folder", "groups/.clawmd/rescues", true),
        (
            "the group's rescue folder",
            "groups/.clawmd/rescues/g",
            true,
        ),
        ("the journal folder", "groups/.clawmd/journal", false),
        ("the group's journal", "groups/.clawmd/journal/g", false),
    ];
    for (place, rel, for_rescues) in places {
        for (what, plant) in plants {
            if rel == "groups/.clawmd/journal/g" && what == "a regular file" {
                continue; // that is what the journal is
            }
            let name: &'static str = Box::leak(format!("{place} is {what}").into_boxed_str());
            if for_rescues {
                cases.push(case(
                    name,
                    move |d, s| {
                        hand_edit(d);
                        plant(d, rel, s);
                    },
                    vec![(LINK, Refuse(rel)), (DEFAULT, Refuse(rel))],
                ));
            }
            if !(for_rescues && rel != "groups/.clawmd") {
                let with_change: &'static str =
                    Box::leak(format!("{name}, and the config changed").into_boxed_str());
                cases.push(case(
                    with_change,
                    move |d, s| {
                        config_change(d);
                        plant(d, rel, s);
                    },
                    vec![(LINK, Refuse(rel)), (COPY, Refuse(rel))],
                ));
            }
            // A group already right needs no rescue folder nor journal: the no-op neither
            // reads nor refuses. It does need the state folder (its composed files are in
            // its bind folder there), so with that replaced it refuses.
            let no_op: &'static str =
                Box::leak(format!("{name}, and the group is right").into_boxed_str());
            let expect = match rel {
                "groups/.clawmd" => Refuse(rel),
                _ => Untouched,
            };
            cases.push(case(
                no_op,
                move |d, s| plant(d, rel, s),
                vec![(LINK, expect)],
            ));
        }
    }

    let mut hard = case(
        "an MCP fragment is a hard link to an outside file",
        |d, s| {
            let path = d.path("groups/g/.claude-fragments/mcp-db.md");
            std::fs::remove_file(&path).unwrap();
            std::fs::hard_link(s.file(), &path).unwrap();
        },
        // The text at a fragment's name is not what clawmd wrote: kept aside before the
        // fragment replaces the link (by rename: the outside file is never written).
        vec![
            (LINK, keeping("groups/g/.claude-fragments/mcp-db.md")),
            (COPY, keeping("groups/g/.claude-fragments/mcp-db.md")),
        ],
    );
    hard.may_read_outside = true;
    cases.push(hard);
    cases
}

/// The tree without lock files and, unless `with_fresh`, without the `fresh` group.
fn comparable(tree: Tree, with_fresh: bool) -> Tree {
    tree.into_iter()
        .filter(|(path, _)| {
            !path.starts_with("groups/.clawmd-locks")
                && (with_fresh
                    || !(path.starts_with("groups/fresh")
                        || path.starts_with("groups/.clawmd/binds/fresh")
                        || path.starts_with("groups/.clawmd/journal/fresh")
                        || path.starts_with("groups/.clawmd/verdicts/fresh")
                        || path.starts_with("groups/.clawmd/written/fresh")))
        })
        .collect()
}

#[test]
fn hostile_links_fifos_and_hard_links_are_refused_or_repaired_without_touching_outside() {
    let started = Instant::now();
    let (mut refused, mut repaired, mut untouched, mut runs, mut hard) = (0, 0, 0, 0, 0);
    let cases = cases();
    for case in &cases {
        for (args, expect) in &case.runs {
            let context = format!("{} / clawmd {}", case.name, args.join(" "));
            let d = deployment();
            let sentinel = Sentinel::new();
            (case.arrange)(&d, &sentinel);
            let before = tree(d.root());
            let run = clawmd(d.root(), args, &[]);
            runs += 1;
            let after = tree(d.root());
            match expect {
                Expect::Refuse(rel) => {
                    run.expect(1, &context);
                    let named = d.path(rel).display().to_string();
                    let output = run.output();
                    assert!(
                        output.contains(&format!("{named}:"))
                            || output.contains(&format!("{named} ")),
                        "{context}: the error does not name {named}:\n{}",
                        run.show()
                    );
                    assert_same_tree(
                        &comparable(before, false),
                        &comparable(after.clone(), false),
                        &format!("{context}: refused, yet something changed"),
                    );
                    refused += 1;
                }
                Expect::Spares(spared) => {
                    run.expect(0, &context);
                    for rel in spared {
                        assert_eq!(before.get(rel), after.get(rel), "{context}: {rel} changed");
                        assert!(after.contains_key(rel), "{context}: {rel} is gone");
                    }
                    repaired += 1;
                }
                Expect::Untouched => {
                    run.expect(0, &context);
                    assert_same_tree(
                        &comparable(before, false),
                        &comparable(after.clone(), false),
                        &context,
                    );
                    untouched += 1;
                }
                Expect::RepairKeeping(rel) => {
                    run.expect(0, &context);
                    let clean = deployment();
                    clawmd(clean.root(), args, &[]).expect(0, &format!("{context}: clean"));
                    let not_rescues = |tree: Tree| -> Tree {
                        comparable(tree, true)
                            .into_iter()
                            .filter(|(path, _)| !path.starts_with("groups/.clawmd/rescues"))
                            .collect()
                    };
                    assert_same_tree(
                        &not_rescues(tree(clean.root())),
                        &not_rescues(after.clone()),
                        &format!("{context}: not repaired to the clean result"),
                    );
                    let Some(Entry::File(text)) = before.get(rel) else {
                        panic!("{context}: {rel} was not a file before");
                    };
                    assert!(
                        after.iter().any(|(path, entry)| {
                            path.starts_with("groups/.clawmd/rescues/g/fragment.")
                                && *entry == Entry::File(text.clone())
                        }),
                        "{context}: the text at {rel} was not kept aside"
                    );
                    repaired += 1;
                }
                Expect::Repair => {
                    run.expect(0, &context);
                    let clean = deployment();
                    clawmd(clean.root(), args, &[]).expect(0, &format!("{context}: clean"));
                    assert_same_tree(
                        &comparable(tree(clean.root()), true),
                        &comparable(after.clone(), true),
                        &format!("{context}: not repaired to the clean result"),
                    );
                    repaired += 1;
                }
            }
            if *args == ALL {
                assert!(
                    d.exists("groups/fresh/CLAUDE.md"),
                    "{context}: the healthy group was not composed"
                );
            }
            assert!(temps(&after).is_empty(), "{context}: {:?}", temps(&after));
            if case.may_read_outside {
                hard += 1;
                sentinel.assert_unchanged(&context);
            } else {
                sentinel.assert_untouched(&context);
            }
        }
    }
    figure(
        "hostile_links_fifos_and_hard_links_are_refused_or_repaired_without_touching_outside",
        format_args!(
            "{} cases, {runs} runs: {refused} refused naming the path, {repaired} repaired by rename, {untouched} left alone; outside file and folder untouched in all {runs} (bytes, inode, mtime; atime too except the {hard} hard-link runs, where reading the group's name reads the shared inode); {:.1}s",
            cases.len(),
            started.elapsed().as_secs_f64()
        ),
    );
}

/// An agent racing clawmd: while composes run back to back, another thread keeps swapping the
/// group's entries for links to the outside and back. Every run ends with exit 0 or 1 (never a
/// crash or a hang), nothing outside is read or written, and once the agent stops a clean run
/// converges.
#[test]
fn an_agent_swapping_links_during_composes_never_reaches_outside() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let started = Instant::now();
    let composes = scale("CLAWMD_RACE_RUNS", 150, 1500);
    let d = Arc::new(deployment());
    let sentinel = Arc::new(Sentinel::new());
    let done = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let config = std::fs::read(d.path("groups/g/container.json")).unwrap();

    let attacker = {
        let (d, sentinel, done, swaps) = (d.clone(), sentinel.clone(), done.clone(), swaps.clone());
        std::thread::spawn(move || {
            let group = d.path("groups/g");
            let names = [
                "CLAUDE.md",
                "CLAUDE.local.md",
                "container.json",
                ".claude-shared.md",
                ".claude-fragments/web.md",
                ".claude-fragments/mcp-db.md",
            ];
            let mut rng = Rng::new(0xa77ac);
            while !done.load(Ordering::Relaxed) {
                let target = if rng.below(2) == 0 {
                    sentinel.file()
                } else {
                    sentinel.dir()
                };
                if rng.below(5) == 0 {
                    // The whole fragments folder, moved aside and replaced by a link.
                    let frag = group.join(".claude-fragments");
                    let saved = group.join(".atk-saved");
                    if std::fs::rename(&frag, &saved).is_ok() {
                        let _ = symlink(&target, &frag);
                        std::thread::sleep(std::time::Duration::from_millis(2));
                        let _ = std::fs::remove_file(&frag);
                        let _ = std::fs::rename(&saved, &frag);
                        let _ = std::fs::remove_dir_all(&saved);
                    }
                } else {
                    // One entry, moved aside and replaced by a link for a moment.
                    let name = names[rng.below(names.len() as u64) as usize];
                    let (path, saved) = (group.join(name), group.join(".atk-saved-file"));
                    let had = std::fs::rename(&path, &saved).is_ok();
                    let _ = symlink(&target, &path);
                    std::thread::sleep(std::time::Duration::from_millis(rng.below(3)));
                    if had {
                        let _ = std::fs::rename(&saved, &path);
                    } else if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_symlink()) {
                        let _ = std::fs::remove_file(&path);
                    }
                }
                swaps.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_micros(300));
            }
        })
    };

    let (mut ok, mut refused) = (0, 0);
    for run in 0..composes {
        let args: &[&str] = if run % 2 == 0 { LINK } else { COPY };
        let outcome = clawmd(d.root(), args, &[]);
        match outcome.status.code() {
            Some(0) => ok += 1,
            Some(1) => refused += 1,
            _ => panic!("run {run}: {}", outcome.show()),
        }
        assert!(!outcome.stderr().contains("panicked"), "{}", outcome.show());
    }
    done.store(true, Ordering::Relaxed);
    attacker.join().unwrap();
    sentinel.assert_untouched("after the race");

    // The agent stops; an operator puts the group's own files back; a run converges.
    for name in [
        "CLAUDE.md",
        "container.json",
        "CLAUDE.local.md",
        ".claude-shared.md",
    ] {
        let path = d.path(&format!("groups/g/{name}"));
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
            std::fs::remove_file(&path).unwrap();
        }
    }
    d.write("groups/g/container.json", &config);
    d.write("groups/g/CLAUDE.local.md", LOCAL.as_bytes());
    let frag = d.path("groups/g/.claude-fragments");
    if std::fs::symlink_metadata(&frag).is_ok_and(|m| m.file_type().is_symlink()) {
        std::fs::remove_file(&frag).unwrap();
    }
    let _ = std::fs::remove_file(d.path("groups/g/.atk-saved-file"));
    let _ = std::fs::remove_dir_all(d.path("groups/g/.atk-saved"));
    let _ = std::fs::remove_dir_all(d.path("groups/.clawmd/rescues"));
    clawmd(d.root(), COPY, &[]).expect(0, "after the race");
    let clean = deployment();
    clawmd(clean.root(), COPY, &[]).expect(0, "clean");
    assert_same_tree(
        &comparable(tree(clean.root()), true),
        &comparable(tree(d.root()), true),
        "after the race",
    );
    sentinel.assert_untouched("after the final run");
    figure(
        "an_agent_swapping_links_during_composes_never_reaches_outside",
        format_args!(
            "{composes} composes against {} link swaps: {ok} succeeded, {refused} refused (exit 1), 0 crashed; outside untouched (bytes, inode, mtime, atime); converged; {:.1}s",
            swaps.load(Ordering::Relaxed),
            started.elapsed().as_secs_f64()
        ),
    );
}

/// The sentinel file's text: it must never appear in anything render or check prints.
const SECRET: &str = "outside: do not touch";

/// The group is composed with link delivery ([`deployment`]): render and check are told so,
/// so that the container's binds are those of link delivery.
const RENDERS: &[&[&str]] = &[
    &["render", "g", "--delivery", "link"],
    &["render", "g", "--delivery", "link", "--format", "flat"],
    &["render", "g", "--delivery", "link", "--delivery-view"],
    &[
        "render",
        "g",
        "--delivery",
        "link",
        "--approve-external",
        "--format",
        "messages",
    ],
];

/// What render and check do with a group whose entries an agent replaced by links to the
/// outside: the entries mounted on their own (the group folder, `CLAUDE.md`,
/// `.claude-fragments`, `container.json`) are refused by name, as compose refuses them;
/// everything else is resolved as inside the container, where a host path does not exist.
/// Nothing outside is read (atime), and no output holds the outside text.
#[test]
fn render_and_check_refuse_planted_links_and_never_reach_outside() {
    type Plant = fn(&Deployment, &Sentinel);
    let cases: Vec<(&str, Plant, Option<&str>)> = vec![
        (
            "group folder -> outside folder",
            |d, s| replace_with_link(d, "groups/g", &s.dir()),
            Some("groups/g"),
        ),
        (
            "group folder -> outside file",
            |d, s| replace_with_link(d, "groups/g", &s.file()),
            Some("groups/g"),
        ),
        (
            "CLAUDE.md -> outside file",
            |d, s| replace_with_link(d, "groups/g/CLAUDE.md", &s.file()),
            Some("groups/g/CLAUDE.md"),
        ),
        (
            "CLAUDE.md -> outside folder",
            |d, s| replace_with_link(d, "groups/g/CLAUDE.md", &s.dir()),
            Some("groups/g/CLAUDE.md"),
        ),
        (
            "container.json -> outside file, imported",
            |d, s| {
                d.write("groups/g/CLAUDE.local.md", b"# Mine\n@./container.json\n");
                replace_with_link(d, "groups/g/container.json", &s.file());
            },
            Some("groups/g/container.json"),
        ),
        (
            ".claude-fragments -> outside folder, a file in it imported",
            |d, s| {
                d.write(
                    "groups/g/CLAUDE.local.md",
                    b"# Mine\n@./.claude-fragments/b.md\n",
                );
                replace_with_link(d, "groups/g/.claude-fragments", &s.dir());
            },
            Some("groups/g/.claude-fragments"),
        ),
        (
            "CLAUDE.local.md -> outside file (a host path: missing in the container)",
            |d, s| replace_with_link(d, "groups/g/CLAUDE.local.md", &s.file()),
            None,
        ),
        (
            ".claude-shared.md -> outside file",
            |d, s| replace_with_link(d, "groups/g/.claude-shared.md", &s.file()),
            None,
        ),
        (
            "an imported link climbing out with ..",
            |d, s| {
                d.write("groups/g/CLAUDE.local.md", b"# Mine\n@./up.md\n");
                let up = format!("{}{}", "../".repeat(40), s.file().display());
                replace_with_link(d, "groups/g/up.md", Path::new(&up));
            },
            None,
        ),
        (
            "a rules folder linked to the outside folder",
            |d, s| replace_with_link(d, "groups/g/.claude/rules", &s.dir()),
            None,
        ),
    ];
    let mut runs = 0;
    for (name, plant, refused) in &cases {
        let d = deployment();
        let sentinel = Sentinel::new();
        plant(&d, &sentinel);
        let check_args: [&[&str]; 3] = [
            &["check", "g", "--delivery", "link"],
            &["check", "g", "--delivery", "link", "--json"],
            &["check", "--all", "--delivery", "link"],
        ];
        for args in RENDERS.iter().chain(check_args.iter()) {
            let context = format!("{name} / clawmd {}", args.join(" "));
            let run = clawmd(d.root(), args, &[]);
            runs += 1;
            let output = run.output();
            assert!(
                !output.contains(SECRET),
                "{context}: printed the outside file\n{}",
                run.show()
            );
            assert!(!output.contains("panicked"), "{context}\n{}", run.show());
            let is_render = args[0] == "render";
            match refused {
                Some(rel) => {
                    run.expect(1, &context);
                    let named = d.path(rel).display().to_string();
                    assert!(
                        output.contains(&named) && output.contains("symlink"),
                        "{context}: the refusal does not name {named} as a symlink\n{}",
                        run.show()
                    );
                    if is_render {
                        assert!(run.stdout().is_empty(), "{context}: {}", run.show());
                    }
                }
                None if is_render => {
                    run.expect(0, &context);
                }
                None => assert!(
                    matches!(run.status.code(), Some(0 | 1)),
                    "{context}\n{}",
                    run.show()
                ),
            }
            if args.contains(&"--all") {
                assert!(
                    output.contains("fresh"),
                    "{context}: the healthy group was not checked\n{}",
                    run.show()
                );
            }
        }
        sentinel.assert_untouched(name);
    }
    figure(
        "render_and_check_refuse_planted_links_and_never_reach_outside",
        format_args!(
            "{} plants, {runs} render/check runs: outside untouched (atime), never printed",
            cases.len()
        ),
    );
}

/// An agent exchanging `CLAUDE.local.md` (and `CLAUDE.md`) with a link to a host file, and with
/// a FIFO, in a tight `renameat2(RENAME_EXCHANGE)` loop while render and check run: no run
/// prints the host file, reads it (atime), or hangs on the FIFO (each run has a time limit).
#[test]
fn an_agent_exchanging_memory_files_with_links_and_fifos_during_renders_never_reaches_outside() {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let started = Instant::now();
    let renders = scale("CLAWMD_RACE_RUNS", 150, 1500);
    let d = Arc::new(deployment());
    d.write("groups/g/CLAUDE.local.md", b"MINE\n");
    let sentinel = Arc::new(Sentinel::new());
    symlink(sentinel.file(), d.path("groups/g/.swap-link")).unwrap();
    symlink(sentinel.file(), d.path("groups/g/.swap-claude")).unwrap();
    replace_with_fifo(&d, "groups/g/.swap-fifo");
    let done = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let attacker = {
        let (d, done, swaps) = (d.clone(), done.clone(), swaps.clone());
        std::thread::spawn(move || {
            let local = d.path("groups/g/CLAUDE.local.md");
            let claude = d.path("groups/g/CLAUDE.md");
            let pairs = [
                (local.clone(), d.path("groups/g/.swap-link")),
                (local, d.path("groups/g/.swap-fifo")),
                (claude, d.path("groups/g/.swap-claude")),
            ];
            // Bounded: at most this many exchanges, whatever happens to the main thread.
            for i in 0..50_000_000u64 {
                if done.load(Ordering::Relaxed) {
                    break;
                }
                let (a, b) = &pairs[(i / 2 % 3) as usize];
                renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE).unwrap();
                swaps.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let (mut ok, mut failed) = (0, 0);
    let limit = std::time::Duration::from_secs(20);
    for run in 0..renders {
        let args: &[&str] = if run % 5 == 4 {
            &["check", "g", "--delivery", "link"]
        } else {
            RENDERS[run as usize % RENDERS.len()]
        };
        let outcome = clawmd_in(d.root(), args, &[], limit);
        let output = outcome.output();
        assert!(
            !output.contains(SECRET),
            "run {run}: printed the outside file\n{}",
            outcome.show()
        );
        assert!(
            !output.contains("panicked"),
            "run {run}\n{}",
            outcome.show()
        );
        match outcome.status.code() {
            Some(0) => ok += 1,
            Some(1) => failed += 1,
            _ => panic!("run {run}: {}", outcome.show()),
        }
    }
    done.store(true, Ordering::Relaxed);
    attacker.join().unwrap();
    sentinel.assert_untouched("after the exchange race");
    figure(
        "an_agent_exchanging_memory_files_with_links_and_fifos_during_renders_never_reaches_outside",
        format_args!(
            "{renders} renders/checks against {} exchanges: {ok} exit 0, {failed} exit 1 (a refused CLAUDE.md link, or check findings), 0 hangs, outside never read or printed; {:.1}s",
            swaps.load(Ordering::Relaxed),
            started.elapsed().as_secs_f64()
        ),
    );
}

/// Watches nodes for `open()` with inotify (`IN_OPEN`), which an `O_PATH` handle or a `stat`
/// does not trigger: proof that a FIFO or device was never opened.
struct OpenWatch {
    fd: std::os::fd::OwnedFd,
}

impl OpenWatch {
    fn new(paths: &[std::path::PathBuf]) -> Self {
        use rustix::fs::inotify;
        let fd =
            inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC).unwrap();
        for path in paths {
            inotify::add_watch(&fd, path, inotify::WatchFlags::OPEN).unwrap();
        }
        OpenWatch { fd }
    }

    /// How many opens happened since the last call.
    fn opens(&self) -> usize {
        let mut buf = [0u8; 4096];
        let mut events = 0;
        while let Ok(n) = rustix::io::read(&self.fd, &mut buf) {
            // Each event is 16 bytes plus its (here empty) name.
            events += n / 16;
        }
        events
    }
}

/// Issue 8, items 3 and 4: a FIFO must not hang render or check, and a device must never be
/// opened (opening some devices has side effects). Planted: a character device (the
/// major/minor of /dev/null, harmless) at `container.json`, at an imported name and in the
/// rules folder, and a FIFO at an imported name. check refuses `container.json` naming it;
/// nothing planted is ever opened (inotify sees no `IN_OPEN`), and no run hangs.
#[test]
fn render_and_check_never_open_a_device_or_fifo() {
    use rustix::fs::{CWD, FileType, Mode, makedev, mknodat};
    let d = deployment();
    d.write(
        "groups/g/CLAUDE.local.md",
        b"# Mine\n@./dev.md\n@./fifo.md\n@./container.json\n",
    );
    let nodes = [
        d.path("groups/g/container.json"),
        d.path("groups/g/dev.md"),
        d.path("groups/g/.claude/rules/dev.md"),
    ];
    std::fs::create_dir_all(d.path("groups/g/.claude/rules")).unwrap();
    for node in &nodes {
        let _ = std::fs::remove_file(node);
        mknodat(
            CWD,
            node,
            FileType::CharacterDevice,
            Mode::from_raw_mode(0o666),
            makedev(1, 3),
        )
        .unwrap();
    }
    replace_with_fifo(&d, "groups/g/fifo.md");
    let mut watched = nodes.to_vec();
    watched.push(d.path("groups/g/fifo.md"));
    let watch = OpenWatch::new(&watched);
    // The detector works: an open of the device is seen.
    drop(std::fs::File::open(&nodes[1]).unwrap());
    assert_eq!(
        watch.opens(),
        1,
        "inotify must see an open of the device node"
    );

    let limit = std::time::Duration::from_secs(20);
    for args in RENDERS {
        let run = clawmd_in(d.root(), args, &[], limit);
        run.expect(0, &args.join(" "));
        assert_eq!(watch.opens(), 0, "clawmd {args:?} opened a device or FIFO");
    }
    let view = clawmd_in(
        d.root(),
        &["render", "g", "--delivery", "link", "--delivery-view"],
        &[],
        limit,
    );
    for name in ["dev.md", "fifo.md", "container.json"] {
        assert!(
            view.stdout()
                .lines()
                .any(|l| l.contains(name) && l.contains("not a regular file")),
            "{name} not reported as not a regular file:\n{}",
            view.stdout()
        );
    }
    for args in [
        &["check", "g", "--delivery", "link"][..],
        &["check", "--all", "--delivery", "link", "--json"],
    ] {
        let run = clawmd_in(d.root(), args, &[], limit);
        run.expect(1, &args.join(" "));
        assert_eq!(watch.opens(), 0, "clawmd {args:?} opened a device or FIFO");
        let config = d.path("groups/g/container.json").display().to_string();
        // The human form prints a group with an error on stderr; the JSON report on stdout.
        let out = run.output();
        assert!(
            out.contains(&config) && out.contains("special file"),
            "check does not refuse {config}:\n{}",
            run.show()
        );
        if args.contains(&"--all") {
            assert!(run.stdout().contains("fresh"), "{}", run.show());
        }
    }
}
