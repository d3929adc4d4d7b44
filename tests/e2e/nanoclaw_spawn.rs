//! nanoclaw v2.0.64's real spawn path, before and after the swap docs/nanoclaw.md gives (§1-3):
//! what the container runtime was asked to run when nanoclaw's own `wakeContainer(session)`
//! spawned four agent groups (skills all or a selection; MCP servers with and without
//! instructions; `cli_scope` disabled on one; the fresh clone's legacy `main` with its
//! `CLAUDE.md`; a group with every default), once with nanoclaw's composer and once with
//! clawmd's package swapped in. nanoclaw's own suite cannot show this: it mocks the runner and
//! stays green with no composer at all.
//!
//! Recorded, not run here (`tests/fixtures/nanoclaw-spawn/v2.0.64/`, its README says how): each
//! spawn's runtime argv (`runtime-argv.json`), what nanoclaw's code left on disk for the agent
//! (`state.json`), each group's database row (`rows.json`) and, swapped, the `clawmd.json`
//! `clawmd init` wrote. nanoclaw's code and the stubs that run it (the container runtime and
//! OneCLI, nothing else) live in an anchor folder outside this repository
//! (`CLAWMD_NANOCLAW_SPAWN_V2064`, default /work/anchors/nanoclaw-spawn-v2.0.64); the
//! `#[ignore]`d test at the end runs it again and checks the recordings are still what it
//! produces (`CLAWMD_NANOCLAW_SPAWN_V2064_RECORD=1` rewrites them).
//!
//! The test CI runs checks the two spawns differ only in the composer's binds (the same
//! environment, OneCLI settings, image and other binds), rebuilds the same deployment from the
//! v2.0.64 fixture, runs clawmd as the
//! swapped runner does (startup `migrateOnce`, then per spawn `composeBeforeSpawnSync` with the
//! materialised `container.json` and the row's `cli_scope`), checks it leaves what the real
//! swapped spawn left, then lays out a sandbox from exactly the binds each recorded spawn asked
//! the runtime for (`-v host:container[:ro]`, in order) and reads it with the Agent SDK 0.2.128
//! nanoclaw's runner uses (`settingSources: ['project','user']`, Claude Code 2.1.128), for both
//! recordings: every line of every section nanoclaw's own spawn delivers reaches the agent after
//! the swap, in order; the shared base, the modules, the skill and MCP instructions (the
//! operator's) as the managed policy; nothing dropped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::Deployment;
use crate::support::memory::{in_order, sections};
use crate::support::nanoclaw::{Mode, SpawnRecordings, compose_as_runner, lay, snapshot_into};
use crate::support::recording::{Anchor, repo};
use crate::support::sandbox::{
    Bind, Consumer, SANDBOX_HOME, Sandbox, memory_block, nanoclaw_tools,
};

const RUN_TIMEOUT: Duration = Duration::from_secs(120);
const RECORDED: &str = "tests/fixtures/nanoclaw-spawn/v2.0.64";
const FIXTURE: &str = "tests/fixtures/nanoclaw";
/// nanoclaw v2.0.64 installed twice (as it is, and with the swap), the stubs of its container
/// runtime and OneCLI, and `run-spawn`, all outside this repository.
const ANCHOR: Anchor = Anchor {
    env: "CLAWMD_NANOCLAW_SPAWN_V2064",
    default: "/work/anchors/nanoclaw-spawn-v2.0.64",
};
const SPAWNS: SpawnRecordings = SpawnRecordings {
    dir: RECORDED,
    files: &[
        "runtime-argv.json",
        "state.json",
        "rows.json",
        "wakes.json",
        "onecli-requests.json",
        "clawmd.json",
    ],
    record_env: "CLAWMD_NANOCLAW_SPAWN_V2064_RECORD",
};
/// The agent's home in nanoclaw's image, and in the sandbox.
const IMAGE_HOME: &str = "/home/node";

/// One `-v host:container[:ro]` of a recorded `run`, `$ROOT` etc. still in `host`.
#[derive(Debug, Clone)]
struct RecordedBind {
    host: String,
    container: String,
    readonly: bool,
}

/// The `run` invocations of a recording: the group (from `--name nanoclaw-v2-<folder>-$MS`) and
/// its binds, in order.
fn spawns(mode: Mode) -> Vec<(String, Vec<RecordedBind>)> {
    let argv = SPAWNS.json(mode, "runtime-argv.json");
    let mut out = Vec::new();
    for invocation in argv.as_array().unwrap() {
        let args: Vec<&str> = invocation
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        if args.first() != Some(&"run") {
            continue;
        }
        let name = args[args.iter().position(|a| *a == "--name").unwrap() + 1];
        let group = name
            .strip_prefix("nanoclaw-v2-")
            .and_then(|rest| rest.strip_suffix("-$MS"))
            .unwrap_or_else(|| panic!("container name {name}"))
            .to_owned();
        let mut binds = Vec::new();
        for pair in args.windows(2) {
            if pair[0] != "-v" {
                continue;
            }
            let (spec, readonly) = match pair[1].strip_suffix(":ro") {
                Some(spec) => (spec, true),
                None => (pair[1], false),
            };
            let (host, container) = spec.split_once(':').unwrap();
            binds.push(RecordedBind {
                host: host.to_owned(),
                container: container.to_owned(),
                readonly,
            });
        }
        out.push((group, binds));
    }
    out
}

/// The v2.0.64 deployment as a fresh clone has it (the fixture's `container/` and `groups/`,
/// which the ignored test checks are the anchor checkout's files).
fn fresh_clone() -> Deployment {
    let d = Deployment::new();
    let fixture = repo().join(FIXTURE);
    for top in ["container", "groups"] {
        crate::support::copy_tree(&fixture.join(top), &d.path(top));
    }
    d
}

/// What nanoclaw's own spawn left on disk: the recorded state, laid over the fresh clone whose
/// groups its start-up migration replaced.
fn nanoclaw_deployment() -> Deployment {
    let d = fresh_clone();
    std::fs::remove_dir_all(d.path("groups")).unwrap();
    std::fs::create_dir(d.path("groups")).unwrap();
    let state = SPAWNS.json(Mode::Nanoclaw, "state.json");
    for (key, entry) in state.as_object().unwrap() {
        lay(&d, key, entry);
    }
    d
}

/// The swapped spawn, rebuilt: clawmd as the swapped runner runs it on the fresh clone (its
/// `clawmd.json` as `clawmd init` wrote it; `migrateOnce` at start-up), nanoclaw's own files of
/// each group as its code wrote them (`initGroupFilesystem`'s `CLAUDE.local.md` where there was
/// none, the materialised `container.json`, the `.claude-shared` folder), then
/// `composeBeforeSpawnSync` per group with `{ ...containerConfig, cli_scope: row.cli_scope }`.
/// Returns the deployment and compose's report per group.
fn swapped_deployment() -> (Deployment, BTreeMap<String, Value>) {
    let d = fresh_clone();
    let settings = SPAWNS.json(Mode::Swapped, "clawmd.json");
    d.write(
        "clawmd.json",
        serde_json::to_string_pretty(&settings).unwrap().as_bytes(),
    );
    d.run(["migrate", "--json"]).success();
    let state = SPAWNS.json(Mode::Swapped, "state.json");
    let rows = SPAWNS.json(Mode::Swapped, "rows.json");
    for (key, entry) in state.as_object().unwrap() {
        let nanoclaws = key.starts_with("data/")
            || key.ends_with("/container.json")
            || (key.ends_with("/CLAUDE.local.md") && !d.path(key).exists());
        if nanoclaws {
            lay(&d, key, entry);
        }
    }
    let mut reports = BTreeMap::new();
    for (group, row) in rows.as_object().unwrap() {
        let config: Value =
            serde_json::from_str(&d.read(&format!("groups/{group}/container.json"))).unwrap();
        let report = compose_as_runner(&d, group, config, row["cli_scope"].clone(), &[]);
        reports.insert(group.clone(), report);
    }
    // Rebuilt, the group folders are what the real swapped spawn left, byte for byte (clawmd's
    // state folders aside).
    let mut ours = serde_json::Map::new();
    snapshot_into(&d.path("groups"), "groups", &mut ours);
    let theirs: serde_json::Map<String, Value> = state
        .as_object()
        .unwrap()
        .iter()
        .filter(|(key, _)| key.starts_with("groups/"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(
        Value::Object(ours),
        Value::Object(theirs),
        "clawmd, run as the swapped runner runs it, does not leave the group folders the real \
         swapped spawn left (if clawmd's output changed on purpose, record again: {RECORDED}/README.md)"
    );
    (d, reports)
}

/// The recorded binds made real on `d`: `$ROOT` is its root; the session folder (`$SESSION_…`)
/// an empty folder; OneCLI's CA files (`$TMP`) stand-in files; a bind under the image's home
/// (`/home/node/.claude`, nanoclaw's `.claude-shared`) goes under the sandbox's home.
fn realise(d: &Deployment, binds: &[RecordedBind], scratch: &Path) -> Vec<Bind> {
    let root = d.root().display().to_string();
    binds
        .iter()
        .map(|bind| {
            let host = if let Some(name) = bind.host.strip_prefix("$TMP/") {
                let file = scratch.join(name);
                std::fs::write(&file, "stand-in for OneCLI's CA\n").unwrap();
                file
            } else {
                let host = PathBuf::from(bind.host.replace("$ROOT", &root));
                assert!(
                    host.starts_with(d.root()),
                    "a recorded bind outside the deployment: {}",
                    bind.host
                );
                if bind.host.contains("$SESSION_") {
                    std::fs::create_dir_all(&host).unwrap();
                }
                assert!(
                    host.exists(),
                    "{} is bound at {} but the rebuilt deployment has no such path",
                    bind.host,
                    bind.container
                );
                host
            };
            let container = match bind.container.strip_prefix(IMAGE_HOME) {
                Some(rest) => PathBuf::from(format!("{SANDBOX_HOME}{rest}")),
                None => PathBuf::from(&bind.container),
            };
            Bind {
                host,
                container,
                readonly: bind.readonly,
            }
        })
        .collect()
}

/// The memory block the Agent SDK nanoclaw's runner uses sends from the container `binds` lay
/// out.
fn observe(d: &Deployment, group: &str, binds: &[RecordedBind]) -> String {
    let scratch = tempfile::tempdir().unwrap();
    let binds = realise(d, binds, scratch.path());
    let sandbox = Sandbox::in_scratch(binds, scratch.path(), "nanoclaw-spawn");
    memory_block(&sandbox, nanoclaw_tools(), Consumer::sdk(), RUN_TIMEOUT)
        .unwrap_or_else(|e| panic!("{group} in {}: {e}", d.root().display()))
}

#[test]
fn every_line_nanoclaws_spawn_delivers_reaches_the_agent_after_the_swap() {
    let theirs_spawns = spawns(Mode::Nanoclaw);
    let ours_spawns = spawns(Mode::Swapped);
    let groups: Vec<&String> = theirs_spawns.iter().map(|(g, _)| g).collect();
    assert_eq!(
        groups,
        ours_spawns.iter().map(|(g, _)| g).collect::<Vec<_>>(),
        "both recordings spawn the same groups"
    );
    assert_eq!(groups.len(), 4, "{groups:?}");
    // Each recording is its mode's: nanoclaw's composer's binds before the swap, clawmd's
    // managed policy and none of the composer's binds after it.
    for ((group, theirs), (_, ours)) in theirs_spawns.iter().zip(&ours_spawns) {
        let at = |binds: &[RecordedBind], container: &str| {
            binds.iter().any(|b| b.container == container)
        };
        for composers in ["/app/CLAUDE.md", "/workspace/agent/.claude-fragments"] {
            assert!(
                at(theirs, composers),
                "{group}: nanoclaw's spawn binds no {composers}"
            );
            assert!(
                !at(ours, composers),
                "{group}: the swapped spawn binds {composers}"
            );
        }
        assert!(
            at(ours, "/etc/claude-code"),
            "{group}: the swapped spawn binds no managed policy"
        );
        assert!(!at(theirs, "/etc/claude-code"), "{group}");
        // Only the composer's binds changed: every other bind is the same (host, place, mode),
        // in the same order.
        let composers = |b: &&RecordedBind| {
            b.container == "/app/CLAUDE.md"
                || b.container == "/etc/claude-code"
                || (b.container.starts_with("/workspace/agent/")
                    && b.container != "/workspace/agent/container.json")
        };
        let others = |binds: &[RecordedBind]| -> Vec<String> {
            binds
                .iter()
                .filter(|b| !composers(b))
                .map(|b| format!("{}:{}:{}", b.host, b.container, b.readonly))
                .collect()
        };
        assert_eq!(
            others(theirs),
            others(ours),
            "{group}: binds other than the composer's"
        );
    }
    // And the rest of each `run` (its environment, OneCLI's settings, image, command) is the
    // same with and without the swap.
    let without_binds = |mode: Mode| -> Vec<Vec<Value>> {
        SPAWNS
            .json(mode, "runtime-argv.json")
            .as_array()
            .unwrap()
            .iter()
            .map(|invocation| {
                let args = invocation.as_array().unwrap();
                let mut kept = Vec::new();
                let mut skip = false;
                for arg in args {
                    if skip {
                        skip = false;
                    } else if arg == "-v" {
                        skip = true;
                    } else {
                        kept.push(arg.clone());
                    }
                }
                kept
            })
            .collect()
    };
    assert_eq!(
        without_binds(Mode::Nanoclaw),
        without_binds(Mode::Swapped),
        "the runtime's arguments besides the binds"
    );
    for mode in [Mode::Nanoclaw, Mode::Swapped] {
        for wake in SPAWNS.json(mode, "wakes.json").as_array().unwrap() {
            assert_eq!(wake["woke"], true, "{mode:?}: {wake}");
        }
    }
    let nanoclaw = nanoclaw_deployment();
    let (clawmd, reports) = swapped_deployment();
    for (group, report) in &reports {
        let delivered = &report["delivered"];
        assert_eq!(delivered["complete"], true, "{group}: {report}");
        assert_eq!(delivered["missing"], json!([]), "{group}: {report}");
        assert_eq!(delivered["judged"]["claude_code"], "2.1.128", "{report}");
        assert_eq!(delivered["judged"]["consumer"], "sdk", "{report}");
    }
    let rows = SPAWNS.json(Mode::Swapped, "rows.json");
    let module = |name: &str| clawmd.module_line(name);

    let mut failures = Vec::new();
    let mut lines_checked = 0;
    let mut operator_sections = 0;
    for ((group, theirs_binds), (_, ours_binds)) in theirs_spawns.iter().zip(&ours_spawns) {
        let theirs = observe(&nanoclaw, group, theirs_binds);
        let ours = observe(&clawmd, group, ours_binds);
        let ours_sections = sections(&ours);
        let ours_lines: Vec<String> = ours_sections.iter().flat_map(|s| s.lines()).collect();
        let managed: Vec<String> = ours_sections
            .iter()
            .filter(|s| s.path.starts_with("/etc/claude-code/"))
            .flat_map(|s| s.lines())
            .collect();
        eprintln!(
            "e2e nanoclaw spawn: {group:<8} nanoclaw's spawn {:>6} bytes ({} sections), swapped {:>6} bytes ({} sections, {} managed lines)",
            theirs.len(),
            sections(&theirs).len(),
            ours.len(),
            ours_sections.len(),
            managed.len()
        );
        if managed.is_empty() {
            failures.push(format!(
                "{group}: no managed policy (/etc/claude-code) in the swapped agent's block"
            ));
        }
        for section in sections(&theirs) {
            let path = &section.path;
            // nanoclaw's import-only CLAUDE.md shows its import lines as text on this release:
            // directives, whose files are sections of their own, not guidance.
            let lines: Vec<String> = section
                .lines()
                .into_iter()
                .filter(|line| !line.starts_with("@./") || line.contains(' '))
                .filter(|line| !line.starts_with("<!-- Composed at spawn"))
                .collect();
            lines_checked += lines.len();
            if let Err(missing) = in_order(&lines, ours_lines.iter().map(String::as_str)) {
                failures.push(format!(
                    "{group}: {path} of nanoclaw's spawn does not reach the agent after the swap (first missing line {missing:?})"
                ));
            }
            // The operator's sections (the shared base, the modules, the skills' and MCP
            // servers' instructions) are the managed policy after the swap.
            let operators = path.ends_with("/.claude-shared.md")
                || path.starts_with("/app/")
                || path.contains("/.claude-fragments/");
            operator_sections += usize::from(operators);
            if operators && let Err(missing) = in_order(&lines, managed.iter().map(String::as_str))
            {
                failures.push(format!(
                    "{group}: {path} of nanoclaw's spawn is not in the managed policy after the swap (first missing line {missing:?})"
                ));
            }
        }
        // Nothing dropped: each module (cli only where cli_scope is not disabled), the skill
        // instructions, the MCP instructions, in both.
        let cli_scope = rows[group.as_str()]["cli_scope"].as_str().unwrap();
        for name in crate::support::deployment::NANOCLAW_MODULES {
            let expected = !(name == "cli" && cli_scope == "disabled");
            for (who, block) in [("nanoclaw's", &theirs), ("the swapped", &ours)] {
                if block.contains(&module(name)) != expected {
                    failures.push(format!(
                        "{group}: module {name} {} {who} agent",
                        if expected {
                            "does not reach"
                        } else {
                            "reaches"
                        }
                    ));
                }
            }
        }
        let servers: Value =
            serde_json::from_str(rows[group.as_str()]["mcp_servers"].as_str().unwrap()).unwrap();
        for (name, server) in servers.as_object().unwrap() {
            if let Some(text) = server["instructions"].as_str() {
                for line in text.lines().filter(|l| !l.trim().is_empty()) {
                    for (who, block) in [("nanoclaw's", &theirs), ("the swapped", &ours)] {
                        if !block.contains(line) {
                            failures.push(format!(
                                "{group}: MCP server {name}'s {line:?} does not reach {who} agent"
                            ));
                        }
                    }
                }
            }
        }
        let onecli = clawmd
            .read("container/skills/onecli-gateway/instructions.md")
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap()
            .trim()
            .to_owned();
        for (who, block) in [("nanoclaw's", &theirs), ("the swapped", &ours)] {
            if !block.contains(&onecli) {
                failures.push(format!(
                    "{group}: the onecli-gateway skill's instructions do not reach {who} agent"
                ));
            }
        }
        // The group's own memory (CLAUDE.local.md) reaches the swapped agent, outside the
        // managed policy.
        let memory = clawmd.read(&format!("groups/{group}/CLAUDE.local.md"));
        for line in memory.lines().filter(|l| !l.trim().is_empty()) {
            if !ours.contains(line) {
                failures.push(format!(
                    "{group}: CLAUDE.local.md's {line:?} does not reach the swapped agent"
                ));
            }
            if managed.iter().any(|m| m == line) && !theirs.contains(line) {
                failures.push(format!(
                    "{group}: the agent's own memory {line:?} is in the managed policy"
                ));
            }
        }
    }
    eprintln!(
        "e2e nanoclaw spawn: {} groups, {lines_checked} lines of nanoclaw's spawn checked, \
         {operator_sections} of its sections in the managed policy",
        groups.len()
    );
    // main, research, ops and newbie: the shared base, 5 or 6 modules, the skill, the MCP
    // instructions (main's notes, ops' ops-db).
    assert_eq!(
        operator_sections,
        9 + 7 + 9 + 8,
        "nanoclaw's spawn delivered other sections"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The recordings the test above reads are what nanoclaw's spawn path produces, run from the
/// anchor (its driver calls the real `wakeContainer`) in both modes, the swapped one with this
/// build's clawmd (`CLAWMD`); and the fixture the test above rebuilds the deployment from holds
/// the anchor checkout's own files. With `CLAWMD_NANOCLAW_SPAWN_V2064_RECORD=1` the recordings
/// are rewritten instead.
#[test]
#[ignore = "runs nanoclaw's spawn path from the anchor folder (CLAWMD_NANOCLAW_SPAWN_V2064, \
            default /work/anchors/nanoclaw-spawn-v2.0.64), which a clean clone has not"]
fn the_recordings_are_what_nanoclaws_spawn_path_produces() {
    let anchor = ANCHOR.holding(
        "run-spawn",
        "nanoclaw v2.0.64 installed twice, the stubs of its container runtime and OneCLI, and \
         run-spawn",
        &format!("{RECORDED}/README.md"),
    );
    // The fixture is the checkout's files: the same deployment.
    let fixture = repo().join(FIXTURE);
    let mut compared = 0;
    for top in ["container", "groups"] {
        for entry in walkdir::WalkDir::new(fixture.join(top)) {
            let entry = entry.unwrap();
            if !entry.file_type().is_file() {
                continue;
            }
            let rel = entry.path().strip_prefix(&fixture).unwrap();
            let theirs = std::fs::read(anchor.join("nanoclaw").join(rel))
                .unwrap_or_else(|e| panic!("{}: {e}", rel.display()));
            assert_eq!(
                std::fs::read(entry.path()).unwrap(),
                theirs,
                "{} differs from the anchor checkout's",
                rel.display()
            );
            compared += 1;
        }
    }
    assert!(compared > 10, "{compared} fixture files");

    let mut recordings = SPAWNS.recordings();
    for mode in Mode::BOTH {
        let out = tempfile::tempdir().unwrap();
        let output = Command::new(anchor.join("run-spawn"))
            .arg(mode.dir())
            .arg(out.path())
            .env("CLAWMD", env!("CARGO_BIN_EXE_clawmd"))
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "run-spawn {} failed:\n{}{}",
            mode.dir(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let mut made: Vec<String> = std::fs::read_dir(out.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        made.sort();
        let mut expected: Vec<String> =
            SPAWNS.files(mode).iter().map(|f| (*f).to_owned()).collect();
        expected.sort();
        assert_eq!(made, expected, "run-spawn {}", mode.dir());
        let mut files = BTreeMap::new();
        for file in SPAWNS.files(mode) {
            let now = std::fs::read(out.path().join(file)).unwrap();
            let text = String::from_utf8_lossy(&now);
            assert!(
                !text.contains(&*out.path().to_string_lossy()) && !text.contains("/tmp/tmp"),
                "{file} holds a path of this run: {text}"
            );
            files.insert((*file).to_owned(), now);
        }
        recordings.folder(mode.dir(), &files);
    }
    recordings.finish(&Mode::BOTH.map(Mode::dir));
}
