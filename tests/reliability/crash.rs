//! Crash safety: the real binary is aborted before every disk-changing step in turn
//! (`CLAWMD_CRASH_AT=1,2,3,...` until a run completes), and killed with SIGKILL at random
//! moments while composing ~200 groups. After every crash the tree must hold only old or new
//! whole files, with nothing a reader needs missing and no text lost; a clean run afterwards
//! must end exactly where an uninterrupted run ends.

use std::time::{Duration, Instant};

use crate::support::Deployment;
use crate::support::*;

/// Text that must exist, byte for byte, in at least one of some expected files at every crash
/// point and at the end.
struct Keep {
    what: &'static str,
    text: Vec<u8>,
    /// Paths (relative to the root); an entry ending in `*` is a prefix.
    places: Vec<String>,
}

impl Keep {
    fn new(what: &'static str, text: &[u8], places: &[&str]) -> Self {
        Keep {
            what,
            text: text.to_vec(),
            places: places.iter().map(|p| p.to_string()).collect(),
        }
    }

    fn matches(&self, path: &str) -> bool {
        self.places
            .iter()
            .any(|place| match place.strip_suffix('*') {
                Some(prefix) => path.starts_with(prefix) && !is_temp(path),
                None => path == place,
            })
    }

    #[track_caller]
    fn assert_kept(&self, tree: &Tree, context: &str) {
        let found = tree.iter().any(|(path, entry)| {
            self.matches(path) && matches!(entry, Entry::File(bytes) if contains(bytes, &self.text))
        });
        assert!(
            found,
            "{context}: {} ({:?}) is in none of {:?}; tree:\n{tree:#?}",
            self.what,
            String::from_utf8_lossy(&self.text),
            self.places
        );
    }
}

struct Scenario {
    name: &'static str,
    before: Deployment,
    /// The command line; `serve` reads its requests from [`SERVE_REQUESTS`] in the root.
    args: Vec<&'static str>,
    keep: Vec<Keep>,
}

/// The file a `serve` scenario's requests are fed from (one per line).
const SERVE_REQUESTS: &str = "serve-requests.jsonl";

impl Scenario {
    /// Runs the scenario's command on `root`.
    fn run(&self, root: &std::path::Path, env: &[(&str, &str)]) -> Run {
        match self.args.first() {
            Some(&"serve") => clawmd_fed(root, &self.args, env, &root.join(SERVE_REQUESTS)),
            _ => clawmd(root, &self.args, env),
        }
    }
}

#[derive(Default)]
struct Figures {
    scenarios: usize,
    crash_points: usize,
    paths_checked: usize,
    imports_checked: usize,
    texts_checked: usize,
    temps_recorded: usize,
}

/// Sweeps every crash point of one scenario; returns the number of crash points.
fn sweep(scenario: Scenario, figures: &mut Figures) {
    let name = scenario.name;
    let before = tree(scenario.before.root());

    let reference = scenario.before.copy_on_work_dir();
    scenario
        .run(reference.root(), &[])
        .expect(0, &format!("{name}: uninterrupted"));
    let after = tree(reference.root());
    assert!(
        temps(&after).is_empty(),
        "{name}: temp files after a clean run"
    );
    assert_ne!(before, after, "{name}: the scenario must change something");
    assert_imports_resolve(&after, name);
    for keep in &scenario.keep {
        keep.assert_kept(&before, &format!("{name}: before"));
        keep.assert_kept(&after, &format!("{name}: uninterrupted"));
    }
    // A second run is a no-op: same bytes, same inodes and mtimes.
    let snapshot = reference.snapshot();
    scenario
        .run(reference.root(), &[])
        .expect(0, &format!("{name}: second run"));
    assert_eq!(snapshot, reference.snapshot(), "{name}: a second run wrote");

    let mut crash_at = 1;
    loop {
        let context = format!("{name}: CLAWMD_CRASH_AT={crash_at}");
        let work = scenario.before.copy_on_work_dir();
        let crash_env = crash_at.to_string();
        let run = scenario.run(work.root(), &[("CLAWMD_CRASH_AT", crash_env.as_str())]);
        if !run.aborted() {
            // Fewer steps than crash_at: the run completed, every step has been covered.
            run.expect(0, &context);
            assert_same_tree(&after, &tree(work.root()), &context);
            break;
        }
        assert!(
            run.stderr().contains("CLAWMD_CRASH_AT"),
            "{context}: aborted for another reason: {}",
            run.show()
        );
        figures.crash_points += 1;
        let crashed = tree(work.root());
        figures.paths_checked += assert_old_or_new(&before, &after, &crashed, &context);
        figures.imports_checked += assert_imports_resolve(&crashed, &context);
        figures.paths_checked += assert_fragments_vouched(work.root(), &context);
        figures.temps_recorded += assert_temps_recorded(&crashed, &context);
        for keep in &scenario.keep {
            figures.texts_checked += 1;
            keep.assert_kept(&crashed, &context);
        }

        scenario
            .run(work.root(), &[])
            .expect(0, &format!("{context}: rerun"));
        let recovered = tree(work.root());
        assert_same_tree(&after, &recovered, &format!("{context}: rerun"));
        for keep in &scenario.keep {
            figures.texts_checked += 1;
            keep.assert_kept(&recovered, &format!("{context}: rerun"));
        }
        crash_at += 1;
        assert!(crash_at < 1000, "{name}: the run never completes");
    }
    figures.scenarios += 1;
    figure(
        "crash_points",
        format_args!("{name}: {} crash points, all recovered", crash_at - 1),
    );
}

/// Every path is, after a crash, what it was before or what it is after an uninterrupted run
/// (a missing path counts as a value): no torn file, no third state. Temp files are exempt (a
/// rerun clears them). Returns the number of paths checked.
#[track_caller]
fn assert_old_or_new(before: &Tree, after: &Tree, crashed: &Tree, context: &str) -> usize {
    let paths: std::collections::BTreeSet<&String> = before
        .keys()
        .chain(after.keys())
        .chain(crashed.keys())
        .collect();
    let mut checked = 0;
    for path in paths {
        if path.starts_with(JOURNALS) {
            continue; // clawmd's own bookkeeping, never read by an agent (see assert_temps_recorded)
        }
        if is_temp(path) {
            let parent = std::path::Path::new(path).parent().unwrap();
            let parent = parent.to_string_lossy();
            assert!(
                before.contains_key(parent.as_ref()) || after.contains_key(parent.as_ref()),
                "{context}: temp file {path} in a folder clawmd does not write"
            );
            continue;
        }
        let now = crashed.get(path);
        assert!(
            now == before.get(path) || now == after.get(path),
            "{context}: {path} is {now:?}\n  before: {:?}\n  after:  {:?}",
            before.get(path),
            after.get(path)
        );
        checked += 1;
    }
    checked
}

/// Where the journals of the temps each lock's runs make are (the default state folder).
const JOURNALS: &str = "groups/.clawmd/journal/";

/// Every temp a crash left is recorded in a journal (so the next run holding the lock removes
/// it, and removes nothing named like a temp that is not recorded). Returns how many.
#[track_caller]
fn assert_temps_recorded(crashed: &Tree, context: &str) -> usize {
    let journals: Vec<&[u8]> = crashed
        .iter()
        .filter(|(path, _)| path.starts_with(JOURNALS))
        .filter_map(|(_, entry)| match entry {
            Entry::File(bytes) => Some(bytes.as_slice()),
            _ => None,
        })
        .collect();
    let temps = temps(crashed);
    for temp in &temps {
        let name = std::path::Path::new(temp)
            .file_name()
            .unwrap()
            .to_string_lossy();
        assert!(
            journals
                .iter()
                .any(|journal| contains(journal, name.as_bytes())),
            "{context}: the temp {temp} is in no journal"
        );
    }
    temps.len()
}

const CONFIG_A: &str = r#"{"skills": "all", "mcpServers": {
  "db": {"command": "db", "instructions": "Read only.\nSee @./schema.md (literal)."},
  "cache": {"command": "cache", "instructions": "Flush hourly."}
}}"#;
const CONFIG_B: &str = r#"{"skills": ["hello"], "mcpServers": {
  "db": {"command": "db", "instructions": "Read and write, carefully."},
  "search": {"command": "s", "instructions": "Prefer exact phrases."}
}}"#;
const LOCAL: &str = "# My group\nPeople's own notes: keep them.\n";
const EDIT: &str = "\nHAND EDIT: remember the deploy freeze on Fridays.\n";

fn composed(config: &str, delivery: &str) -> Deployment {
    let deployment = Deployment::on_work_dir()
        .with_standard()
        .group("g", Some(config))
        .file("groups/g/CLAUDE.local.md", LOCAL);
    clawmd(
        deployment.root(),
        &["compose", "g", "--delivery", delivery],
        &[],
    )
    .expect(0, "setup");
    deployment
}

fn local_kept() -> Keep {
    Keep::new(
        "CLAUDE.local.md",
        LOCAL.as_bytes(),
        &["groups/g/CLAUDE.local.md"],
    )
}

fn compose_scenarios() -> Vec<Scenario> {
    let mut scenarios = vec![
        Scenario {
            name: "compose fresh group, link",
            before: Deployment::on_work_dir()
                .with_standard()
                .group("g", Some(CONFIG_A))
                .file("groups/g/CLAUDE.local.md", LOCAL),
            args: vec!["compose", "g", "--delivery", "link"],
            keep: vec![local_kept()],
        },
        Scenario {
            name: "compose fresh group, inline (the default)",
            before: Deployment::on_work_dir()
                .with_standard()
                .group("g", Some(CONFIG_A))
                .file("groups/g/CLAUDE.local.md", LOCAL),
            args: vec!["compose", "g"],
            keep: vec![local_kept()],
        },
        Scenario {
            name: "compose switch link -> inline",
            before: composed(CONFIG_A, "link"),
            args: vec!["compose", "g", "--delivery", "inline"],
            keep: vec![local_kept()],
        },
        Scenario {
            name: "compose fresh group, copy",
            before: Deployment::on_work_dir()
                .with_standard()
                .group("g", Some(CONFIG_A))
                .file("groups/g/CLAUDE.local.md", LOCAL),
            args: vec!["compose", "g", "--delivery", "copy"],
            keep: vec![local_kept()],
        },
        Scenario {
            name: "compose fresh group without CLAUDE.local.md",
            before: Deployment::on_work_dir()
                .with_standard()
                .group("g", Some(CONFIG_B)),
            args: vec!["compose", "g", "--delivery", "copy"],
            keep: vec![],
        },
        Scenario {
            name: "compose switch link -> copy",
            before: composed(CONFIG_A, "link"),
            args: vec!["compose", "g", "--delivery", "copy"],
            keep: vec![local_kept()],
        },
        Scenario {
            name: "compose switch copy -> link",
            before: composed(CONFIG_A, "copy"),
            args: vec!["compose", "g", "--delivery", "link"],
            keep: vec![local_kept()],
        },
        Scenario {
            name: "compose config change removes fragments (copy)",
            before: composed(CONFIG_A, "copy").file("groups/g/container.json", CONFIG_B),
            args: vec!["compose", "g", "--delivery", "copy"],
            keep: vec![local_kept()],
        },
        Scenario {
            name: "compose config change removes fragments (link)",
            before: composed(CONFIG_A, "link").file("groups/g/container.json", CONFIG_B),
            args: vec!["compose", "g", "--delivery", "link"],
            keep: vec![local_kept()],
        },
        Scenario {
            name: "compose shared base deleted upstream (copy)",
            before: {
                let d = composed(CONFIG_B, "copy");
                std::fs::remove_file(d.path("container/CLAUDE.md")).unwrap();
                d
            },
            args: vec!["compose", "g", "--delivery", "copy"],
            keep: vec![local_kept()],
        },
    ];

    // A spawn handing the group's config (`"groupConfig": "handed"`, nanoclaw's): the config
    // kept in the state folder (`configs/g.json`) is a temp renamed into place like every
    // other file, recorded in the group's journal.
    let handed = composed(CONFIG_A, "inline")
        .file("clawmd.json", r#"{"groupConfig": "handed"}"#)
        .file("handed.json", CONFIG_B);
    scenarios.push(Scenario {
        name: "compose with a handed config, kept in the state folder",
        before: handed,
        args: vec!["compose", "g", "--config", "handed.json"],
        keep: vec![local_kept()],
    });
    // The same spawn through `clawmd serve`, which answers before it keeps the config, writes
    // the group's record and settles its journal (docs/design.md, "The runner contract"): a
    // crash in that bookkeeping, after the answer, leaves every file old or new too.
    let request = format!(
        r#"{{"id": 1, "group": "g", "config": {}}}"#,
        CONFIG_B.replace('\n', " ")
    );
    scenarios.push(Scenario {
        name: "serve with a handed config, its bookkeeping after the answer",
        before: composed(CONFIG_A, "inline")
            .file("clawmd.json", r#"{"groupConfig": "handed"}"#)
            .file(SERVE_REQUESTS, &format!("{request}\n")),
        args: vec!["serve"],
        keep: vec![local_kept()],
    });

    // A hand-edited CLAUDE.md, with a config change so CLAUDE.md must be rewritten; alone,
    // and beside files the agent named like rescues and like temps in its folder: the edit is
    // kept outside the group at every crash point, and the agent's files are never counted,
    // removed or changed (they are in `before` and `after` alike, so old-or-new holds them to
    // their bytes).
    scenarios.push(hand_edit_scenario(
        "compose over a hand-edited CLAUDE.md",
        false,
    ));
    scenarios.push(hand_edit_scenario(
        "compose over a hand-edited CLAUDE.md beside planted rescue and temp names",
        true,
    ));

    // --all over groups in different states at once.
    let mixed = composed(CONFIG_A, "link")
        .group("fresh", Some(CONFIG_B))
        .group("legacy", None)
        .file("groups/legacy/CLAUDE.md", "# legacy text, never migrated\n");
    mixed.write("groups/g/container.json", CONFIG_B.as_bytes());
    scenarios.push(Scenario {
        name: "compose --all over fresh, changed and unmigrated groups (copy)",
        before: mixed,
        args: vec!["compose", "--all", "--delivery", "copy"],
        keep: vec![
            local_kept(),
            Keep::new(
                "an unmigrated CLAUDE.md",
                b"# legacy text, never migrated\n",
                &[
                    "groups/legacy/CLAUDE.md*",
                    "groups/.clawmd/rescues/legacy/CLAUDE.md.rescued-*",
                ],
            ),
        ],
    });
    scenarios
}

/// A group composed with config A and then edited by hand, its config now B; with `planted`,
/// 20 files named like rescues and one named like a temp beside it.
fn hand_edit_scenario(name: &'static str, planted: bool) -> Scenario {
    let edited = composed(CONFIG_A, "link");
    let mut text = std::fs::read(edited.path("groups/g/CLAUDE.md")).unwrap();
    text.extend_from_slice(EDIT.as_bytes());
    edited.write("groups/g/CLAUDE.md", &text);
    edited.write("groups/g/container.json", CONFIG_B.as_bytes());
    let mut keep = vec![
        local_kept(),
        Keep::new(
            "the hand-edited CLAUDE.md",
            &text,
            &[
                "groups/g/CLAUDE.md",
                "groups/.clawmd/rescues/g/CLAUDE.md.rescued-*",
            ],
        ),
    ];
    if planted {
        for n in 0..20u64 {
            edited.write(
                &format!("groups/g/CLAUDE.md.rescued-{n:016x}"),
                format!("agent text {n}\n").as_bytes(),
            );
        }
        edited.write("groups/g/.clawmd-tmp-notes", b"the agent's notes\n");
        keep.push(Keep::new(
            "the agent's file named like a rescue",
            b"agent text 7\n",
            &["groups/g/CLAUDE.md.rescued-0000000000000007"],
        ));
    }
    Scenario {
        name,
        before: edited,
        args: vec!["compose", "g"],
        keep,
    }
}

const LEGACY: &str = "# Team memory\nWritten by hand before clawmd.\n";
const GLOBAL: &str = "# Global memory\nShared by every group, the old way.\n";

fn migrate_scenarios() -> Vec<Scenario> {
    let legacy_kept = |group: &str| {
        Keep::new(
            "the legacy CLAUDE.md",
            LEGACY.as_bytes(),
            &[
                &format!("groups/{group}/CLAUDE.md"),
                &format!("groups/{group}/CLAUDE.local.md"),
            ],
        )
    };
    let global_kept = Keep::new(
        "groups/global/CLAUDE.md",
        GLOBAL.as_bytes(),
        &["groups/global/CLAUDE.md", "container/CLAUDE.md"],
    );
    vec![
        Scenario {
            name: "migrate legacy CLAUDE.md alone",
            before: Deployment::on_work_dir()
                .with_standard()
                .group("a", Some("{}"))
                .file("groups/a/CLAUDE.md", LEGACY),
            args: vec!["migrate"],
            keep: vec![legacy_kept("a")],
        },
        Scenario {
            name: "migrate legacy beside an existing CLAUDE.local.md",
            before: Deployment::on_work_dir()
                .with_standard()
                .group("b", Some("{}"))
                .file("groups/b/CLAUDE.md", LEGACY)
                .file("groups/b/CLAUDE.local.md", LOCAL),
            args: vec!["migrate"],
            keep: vec![
                legacy_kept("b"),
                Keep::new(
                    "CLAUDE.local.md",
                    LOCAL.as_bytes(),
                    &["groups/b/CLAUDE.local.md"],
                ),
            ],
        },
        Scenario {
            name: "migrate groups/global into container/CLAUDE.md",
            before: Deployment::on_work_dir()
                .with_standard()
                .file("groups/global/CLAUDE.md", GLOBAL),
            args: vec!["migrate", "--append-global"],
            keep: vec![
                Keep::new("container/CLAUDE.md", b"BASE\n", &["container/CLAUDE.md"]),
                global_kept,
            ],
        },
        Scenario {
            name: "migrate groups/global aside (the default)",
            before: Deployment::on_work_dir()
                .with_standard()
                .file("groups/global/CLAUDE.md", GLOBAL),
            args: vec!["migrate"],
            keep: vec![
                Keep::new("container/CLAUDE.md", b"BASE\n", &["container/CLAUDE.md"]),
                Keep::new(
                    "groups/global/CLAUDE.md",
                    GLOBAL.as_bytes(),
                    &["groups/global/CLAUDE.md", "groups/.clawmd/legacy/*"],
                ),
            ],
        },
        Scenario {
            name: "migrate .claude-global.md links",
            before: {
                let d = Deployment::on_work_dir()
                    .with_standard()
                    .group("c", Some("{}"))
                    .group("d", Some("{}"))
                    .file("groups/d/CLAUDE.md", LEGACY);
                for g in ["c", "d"] {
                    std::os::unix::fs::symlink(
                        "../global/CLAUDE.md",
                        d.path(&format!("groups/{g}/.claude-global.md")),
                    )
                    .unwrap();
                }
                d
            },
            args: vec!["migrate"],
            keep: vec![legacy_kept("d")],
        },
        Scenario {
            name: "migrate a whole legacy deployment",
            before: {
                let d = Deployment::on_work_dir()
                    .with_standard()
                    .group("a", Some("{}"))
                    .file("groups/a/CLAUDE.md", LEGACY)
                    .group("b", None)
                    .file("groups/b/CLAUDE.md", LEGACY)
                    .file("groups/b/CLAUDE.local.md", LOCAL)
                    .group("c", None)
                    .file("groups/global/CLAUDE.md", GLOBAL);
                for g in ["a", "b", "c"] {
                    std::os::unix::fs::symlink(
                        "../global/CLAUDE.md",
                        d.path(&format!("groups/{g}/.claude-global.md")),
                    )
                    .unwrap();
                }
                d
            },
            args: vec!["migrate", "--append-global"],
            keep: vec![
                legacy_kept("a"),
                legacy_kept("b"),
                Keep::new(
                    "CLAUDE.local.md",
                    LOCAL.as_bytes(),
                    &["groups/b/CLAUDE.local.md"],
                ),
                Keep::new(
                    "groups/global/CLAUDE.md",
                    GLOBAL.as_bytes(),
                    &["groups/global/CLAUDE.md", "container/CLAUDE.md"],
                ),
                Keep::new("container/CLAUDE.md", b"BASE\n", &["container/CLAUDE.md"]),
            ],
        },
    ]
}

fn report(test: &str, figures: &Figures, started: Instant) {
    figure(
        test,
        format_args!(
            "{} scenarios, {} crash points (each followed by a clean rerun), {} path states checked old-or-new, {} imports checked present, {} text-preservation checks, texts lost: 0, {} temps left by a crash, each recorded in a journal, {:.1}s on {}",
            figures.scenarios,
            figures.crash_points,
            figures.paths_checked,
            figures.imports_checked,
            figures.texts_checked,
            figures.temps_recorded,
            started.elapsed().as_secs_f64(),
            fs_type(work_dir().path())
        ),
    );
}

#[test]
fn compose_survives_a_crash_before_every_step() {
    let started = Instant::now();
    let mut figures = Figures::default();
    for scenario in compose_scenarios() {
        sweep(scenario, &mut figures);
    }
    report(
        "compose_survives_a_crash_before_every_step",
        &figures,
        started,
    );
}

#[test]
fn migrate_survives_a_crash_before_every_step() {
    let started = Instant::now();
    let mut figures = Figures::default();
    for scenario in migrate_scenarios() {
        sweep(scenario, &mut figures);
    }
    report(
        "migrate_survives_a_crash_before_every_step",
        &figures,
        started,
    );
}

/// The container.json of generated group `i`, in generation `b` (false: A, true: B).
fn generated_config(i: usize, b: bool) -> Option<String> {
    let server = |name: &str, text: &str| {
        format!(r#""{name}": {{"command": "x", "instructions": "{text}"}}"#)
    };
    match (i % 4, b) {
        (0, false) => Some(r#"{"skills": "all"}"#.to_owned()),
        (0, true) => Some(format!(
            r#"{{"skills": ["web"], "mcpServers": {{{}}}}}"#,
            server("db", "B db")
        )),
        (1, false) => Some(format!(
            r#"{{"skills": ["web", "hello"], "mcpServers": {{{}, {}}}}}"#,
            server("db", "A db"),
            server("cache", "A cache")
        )),
        (1, true) => Some(format!(
            r#"{{"skills": [], "mcpServers": {{{}}}}}"#,
            server("db", "B db, longer")
        )),
        (2, false) => None,
        (2, true) => Some(format!(
            r#"{{"skills": "all", "mcpServers": {{{}}}}}"#,
            server("search", "B search")
        )),
        (_, false) => Some(format!(
            r#"{{"skills": ["tools"], "mcpServers": {{{}}}}}"#,
            server("db", "A")
        )),
        (_, true) => Some(r#"{"skills": ["tools", "hello"]}"#.to_owned()),
    }
}

/// Writes generation `b` of every group's container.json (atomically, as a runner would).
fn set_generation(deployment: &Deployment, groups: usize, b: bool) {
    for i in 0..groups {
        let path = deployment.path(&format!("groups/g{i:03}/container.json"));
        match generated_config(i, b) {
            Some(config) => write_atomically(&path, config.as_bytes()),
            None => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
}

/// A deployment of `groups` groups, each with its own CLAUDE.local.md, in generation A.
fn generated(groups: usize) -> Deployment {
    let deployment = Deployment::on_work_dir()
        .with_standard()
        .file(
            "container/skills/tools/instructions.md",
            &"TOOLS line\n".repeat(200),
        )
        .file("container/CLAUDE.md", &"BASE line\n".repeat(500));
    for i in 0..groups {
        deployment.write(
            &format!("groups/g{i:03}/CLAUDE.local.md"),
            format!("notes of group {i}\n").as_bytes(),
        );
    }
    set_generation(&deployment, groups, false);
    deployment
}

const GENERATIONS: [(bool, &str); 2] = [(false, "link"), (true, "copy")];

#[test]
fn compose_all_survives_sigkill_at_random_moments() {
    let started = Instant::now();
    let groups = scale("CLAWMD_KILL_GROUPS", 200, 500) as usize;
    let kills = scale("CLAWMD_KILLS", 30, 300);
    let mut rng = Rng::new(0x5eed_c1a3);

    // What an uninterrupted compose of each generation produces, from scratch.
    let mut references = Vec::new();
    for (b, delivery) in GENERATIONS {
        let d = generated(groups);
        set_generation(&d, groups, b);
        clawmd(d.root(), &["compose", "--all", "--delivery", delivery], &[]).expect(0, "reference");
        references.push(tree(d.root()));
    }
    // (A journal is clawmd's own bookkeeping: after a kill it must record every temp left,
    // and after a recovery it must be empty again, which the recovery's comparison checks.)
    let not_compared = |path: &str| {
        path.ends_with("/container.json")
            || path.contains("/.clawmd-locks")
            || path.starts_with(JOURNALS)
    };

    let work = generated(groups);
    clawmd(
        work.root(),
        &["compose", "--all", "--delivery", "link"],
        &[],
    )
    .expect(0, "initial compose");
    // How long a full switch takes (the shorter of A -> B and back), to spread the kills
    // over it.
    let probe = work.copy_on_work_dir();
    let mut full = Duration::MAX;
    for (b, delivery) in [GENERATIONS[1], GENERATIONS[0]] {
        set_generation(&probe, groups, b);
        let run = clawmd(
            probe.root(),
            &["compose", "--all", "--delivery", delivery],
            &[],
        );
        full = full.min(run.expect(0, "probe").elapsed);
        assert_same_tree(
            &without_locks(&references[b as usize]),
            &without_locks(&tree(probe.root())),
            "an uninterrupted switch",
        );
    }
    drop(probe);

    let (mut killed, mut completed, mut checked, mut recoveries) = (0u64, 0u64, 0usize, 0);
    let mut round = 0;
    // Runs until `kills` runs were killed mid-run; a run that finishes before its kill
    // moment does not count, and makes the kill moments earlier (the probe may have run on a
    // busier machine than the runs that follow). Bounded, in case runs are much faster still.
    while killed < kills && round < 8 * kills {
        round += 1;
        let (b, delivery) = GENERATIONS[(round % 2 == 0) as usize];
        set_generation(&work, groups, b);
        let mut child = command(
            work.root(),
            &["compose", "--all", "--delivery", delivery],
            &[],
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
        let delay = Duration::from_micros(rng.below(full.as_micros() as u64 + 1));
        std::thread::sleep(delay);
        let _ = child.kill();
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        match status.signal() {
            Some(9) => killed += 1,
            _ => {
                assert_eq!(
                    status.code(),
                    Some(0),
                    "round {round}: run failed: {status:?}"
                );
                completed += 1;
                full = (full * 3 / 4).max(Duration::from_millis(1));
            }
        }
        let now = tree(work.root());
        let context = format!("SIGKILL round {round} after {delay:?}");
        for (path, entry) in &now {
            if is_temp(path) || not_compared(path) {
                continue;
            }
            let valid = references.iter().any(|r| r.get(path) == Some(entry));
            assert!(
                valid,
                "{context}: {path} is {entry:?}, in neither generation"
            );
            checked += 1;
        }
        for path in references[0].keys().chain(references[1].keys()) {
            if references.iter().all(|r| r.contains_key(path)) && !not_compared(path) {
                assert!(
                    now.contains_key(path),
                    "{context}: {path} is missing, though both generations have it"
                );
            }
        }
        assert_imports_resolve(&now, &context);
        assert_fragments_vouched(work.root(), &context);
        assert_temps_recorded(&now, &context);

        // Two rounds in three, a clean run of the same generation must converge to exactly
        // its uninterrupted result, and the next kill hits a full switch; every third round
        // the next run starts from the half-done state instead (a crash on top of a crash).
        if round % 3 != 0 {
            clawmd(
                work.root(),
                &["compose", "--all", "--delivery", delivery],
                &[],
            )
            .expect(0, &format!("{context}: recovery"));
            let recovered = without_locks(&tree(work.root()));
            let expected = without_locks(&references[b as usize]);
            assert_same_tree(&expected, &recovered, &format!("{context}: recovery"));
            recoveries += 1;
        }
    }

    assert_eq!(killed, kills, "too few runs could be killed mid-run");

    // A clean run converges to exactly what an uninterrupted run produces.
    let (b, delivery) = GENERATIONS[1];
    set_generation(&work, groups, b);
    clawmd(
        work.root(),
        &["compose", "--all", "--delivery", delivery],
        &[],
    )
    .expect(0, "final clean run");
    let last = tree(work.root());
    assert!(
        temps(&last).is_empty(),
        "temp files left: {:?}",
        temps(&last)
    );
    let strip = |t: &Tree| -> Tree {
        t.iter()
            .filter(|(p, _)| !p.contains("/.clawmd-locks"))
            .map(|(p, e)| (p.clone(), e.clone()))
            .collect()
    };
    assert_same_tree(
        &strip(&references[1]),
        &strip(&last),
        "after the kills and a clean run",
    );
    figure(
        "compose_all_survives_sigkill_at_random_moments",
        format_args!(
            "{groups} groups, {round} runs: {killed} killed by SIGKILL mid-run, {completed} finished before their kill moment (kill delays 0..{full:?}, the length of an uninterrupted switch; seed {:#x}), {checked} path states checked whole, {recoveries} clean runs right after a kill converged exactly, files lost: 0; {:.1}s on {}",
            rng.seed(),
            started.elapsed().as_secs_f64(),
            fs_type(work.root())
        ),
    );
}

/// The agent moves a group's `.claude-fragments` aside (written by link delivery, whose
/// fragments differ from copy delivery's) around a compose to copy delivery, which makes the
/// folder again, and brings it back over what that compose made, whether the compose crashed
/// at any point or finished. The next compose still knows every file of the old folder as
/// clawmd's, replaces them without keeping them as hand edits, and ends where an
/// uninterrupted compose ends.
#[test]
fn a_fragments_folder_moved_aside_and_back_around_a_compose_is_still_clawmds() {
    const COPY: &[&str] = &["compose", "g", "--delivery", "copy"];
    let before = composed(CONFIG_A, "link");
    let reference = before.copy_on_work_dir();
    clawmd(reference.root(), COPY, &[]).expect(0, "uninterrupted");
    let after = tree(reference.root());
    let mut crash_at = 1;
    loop {
        let context = format!("CLAWMD_CRASH_AT={crash_at}");
        let work = before.copy_on_work_dir();
        let (folder, aside) = (work.path("groups/g/.claude-fragments"), work.path("aside"));
        std::fs::rename(&folder, &aside).unwrap();
        let crash_env = crash_at.to_string();
        let run = clawmd(
            work.root(),
            COPY,
            &[("CLAWMD_CRASH_AT", crash_env.as_str())],
        );
        let finished = !run.aborted();
        if finished {
            run.expect(0, &context);
        }
        // The old folder comes back over whatever the run made.
        if folder.exists() {
            std::fs::remove_dir_all(&folder).unwrap();
        }
        std::fs::rename(&aside, &folder).unwrap();
        clawmd(work.root(), COPY, &[]).expect(0, &format!("{context}: rerun"));
        assert!(
            !work.path("groups/.clawmd/rescues").exists(),
            "{context}: clawmd's own fragments kept as hand edits"
        );
        assert_same_tree(&after, &tree(work.root()), &format!("{context}: rerun"));
        if finished {
            break;
        }
        crash_at += 1;
        assert!(crash_at < 1000, "the run never completes");
    }
    assert!(
        crash_at > 5,
        "the compose must have crash points: {crash_at}"
    );
}
