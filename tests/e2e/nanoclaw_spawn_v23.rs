//! nanoclaw v2.3's spawn path, before and after the swap of docs/nanoclaw.md §3b, for every
//! provider with a host contract (claude, codex, cursor, opencode, ollama) and one without (pi,
//! the runner's default path): what nanoclaw's own `wakeContainer` (its `src/container-runner.ts`
//! of the v2.3.0 fork horsehcj/nanoclaw@192059a, with its provider contracts, `realize.ts`,
//! `registry.ts` and composer) produced for the seven groups of `nanoclaw_v23.rs`, recorded under
//! `tests/fixtures/nanoclaw-spawn/v2.3/` (its README says what is nanoclaw's code there and what
//! was stubbed: the runtime driver, OneCLI, the database, and the rest its README names).
//!
//! The test run in CI reads the recordings: nanoclaw's spawn path composed the same documents as
//! its composer alone (`tests/fixtures/nanoclaw-v2.3/recorded/`); the swap changes only the
//! document's binds (every other mount, the environment, image and command of each SessionSpec
//! are the same); clawmd, run as the swapped runner runs it, rebuilds the group folders the
//! swapped spawn left and binds what it recorded; and every line of every section nanoclaw's
//! composer gave a group reaches that group's agent from the recorded swapped mounts: for the
//! Claude Code groups (claude, ollama) in the memory block the real Claude Code CLI and Agent SDK
//! send from a sandbox laid out by those mounts, for the others in the document bound at their
//! entry point.
//!
//! nanoclaw's code is not kept here (tests/fixtures/nanoclaw-v2.3/README.md): the `#[ignore]`d
//! test runs the spawn path again from the anchor folder (`CLAWMD_NANOCLAW_SPAWN_V23`, default
//! /work/anchors/nanoclaw-spawn-v2.3) with the clawmd under test and checks the recordings are
//! still what it produces; `CLAWMD_NANOCLAW_SPAWN_V23_RECORD=1` rewrites them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::nanoclaw_v23::{MEMORY_MARK, SECRET, content, file_of, groups, nanoclaw_sections, spec};
use crate::npm::package_npm;
use crate::support::Deployment;
use crate::support::memory::in_order;
use crate::support::nanoclaw::{
    Mode, SpawnRecordings, clawmd_spawn_ts, compose_as_runner, lay, snapshot_into,
};
use crate::support::recording::{Anchor, repo};
use crate::support::sandbox::{
    Bind, Consumer, SANDBOX_HOME, Sandbox, WORKSPACE, e2e_cache, memory_block, tools,
};
use crate::typescript::succeeded;

const RUN_TIMEOUT: Duration = Duration::from_secs(180);
const RECORDED: &str = "tests/fixtures/nanoclaw-spawn/v2.3";
/// What nanoclaw's composer alone wrote for the same groups (`nanoclaw_v23.rs`).
const COMPOSER_RECORDED: &str = "tests/fixtures/nanoclaw-v2.3/recorded";
/// nanoclaw v2.3's spawn path, its stubs and driver (outside this repository).
const ANCHOR: Anchor = Anchor {
    env: "CLAWMD_NANOCLAW_SPAWN_V23",
    default: "/work/anchors/nanoclaw-spawn-v2.3",
};
const SPAWNS: SpawnRecordings = SpawnRecordings {
    dir: RECORDED,
    files: &[
        "project-doc-specs.json",
        "wakes.json",
        "session-specs.json",
        "gateway-requests.json",
        "log.json",
        "state.json",
        "clawmd.json",
    ],
    record_env: "CLAWMD_NANOCLAW_SPAWN_V23_RECORD",
};
const CLAWMD: &str = env!("CARGO_BIN_EXE_clawmd");
/// The agent's home in nanoclaw's image.
const IMAGE_HOME: &str = "/home/node";
/// Where clawmd keeps what it binds (under `$ROOT/groups/`).
const CLAWMD_BINDS: &str = "$ROOT/groups/.clawmd/";

/// One mount of a recorded SessionSpec's agent container (`$ROOT` still in `host`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount {
    host: String,
    container: String,
    readonly: bool,
    class: String,
}

/// Each recorded SessionSpec: its group folder (the `nanoclaw-group-folder` label), the spec
/// without its agent container's mounts, and those mounts in order.
fn spawns(mode: Mode) -> Vec<(String, Value, Vec<Mount>)> {
    SPAWNS
        .json(mode, "session-specs.json")
        .as_array()
        .unwrap()
        .iter()
        .map(|spec| {
            let group = spec["labels"]["nanoclaw-group-folder"]
                .as_str()
                .unwrap()
                .to_owned();
            assert_eq!(spec["containers"].as_array().unwrap().len(), 1, "{spec}");
            let mounts = spec["containers"][0]["mounts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| Mount {
                    host: m["hostPath"].as_str().unwrap().to_owned(),
                    container: m["containerPath"].as_str().unwrap().to_owned(),
                    readonly: m["mode"] == "ro",
                    class: m["class"].as_str().unwrap().to_owned(),
                })
                .collect();
            let mut rest = spec.clone();
            rest["containers"][0]["mounts"] = Value::Null;
            (group, rest, mounts)
        })
        .collect()
}

/// The groups as the anchor's driver takes them, in spawn order.
fn groups_json() -> Value {
    Value::Array(
        groups()
            .iter()
            .map(|g| {
                json!({"folder": g.name, "provider": g.provider, "skills": g.skills,
                       "mcpServers": g.mcp, "cli_scope": g.cli_scope})
            })
            .collect(),
    )
}

fn is_claude_code(provider: &str) -> bool {
    matches!(provider, "claude" | "ollama")
}

/// The swapped spawn, rebuilt on a fresh copy of the content: the recorded `clawmd.json`, what
/// nanoclaw's code wrote before composing (its `data/` tree: session folders, runner contexts,
/// provider state volumes with `settings.json` and skill links; each group's materialised
/// `container.json`, `plugins/` and provider skill folders), then clawmd as the swapped runner
/// calls it: `compose GROUP` with the group's `container.json` and its row's `cli_scope`.
/// Returns the deployment and compose's report per group, in spawn order.
fn swapped_deployment() -> (Deployment, Vec<Value>) {
    let d = content();
    d.write(
        "clawmd.json",
        serde_json::to_string_pretty(&SPAWNS.json(Mode::Swapped, "clawmd.json"))
            .unwrap()
            .as_bytes(),
    );
    let state = SPAWNS.json(Mode::Swapped, "state.json");
    let state = state.as_object().unwrap();
    for (key, entry) in state {
        let nanoclaws = key.starts_with("data/")
            || key.ends_with("/container.json")
            || d.path(key).symlink_metadata().is_err();
        if nanoclaws {
            if key.ends_with("/container.json") {
                std::fs::remove_file(d.path(key)).unwrap();
            }
            lay(&d, key, entry);
        }
    }
    let reports = groups()
        .iter()
        .map(|group| {
            let g = group.name;
            let config: Value =
                serde_json::from_str(&d.read(&format!("groups/{g}/container.json"))).unwrap();
            compose_as_runner(&d, g, config, json!(group.cli_scope), &[])
        })
        .collect();
    // Rebuilt, the group folders are what the real swapped spawn left (clawmd's own state
    // folders aside), and nothing else is on disk for the agents.
    let mut ours = serde_json::Map::new();
    for top in ["groups", "data"] {
        snapshot_into(&d.path(top), top, &mut ours);
    }
    let root = d.root().display().to_string();
    let ours: serde_json::Map<String, Value> = ours
        .into_iter()
        .map(|(key, entry)| {
            let entry = serde_json::from_str(&entry.to_string().replace(&root, "$ROOT")).unwrap();
            (key, entry)
        })
        .collect();
    let differing: Vec<String> = ours
        .keys()
        .chain(state.keys())
        .filter(|key| ours.get(*key) != state.get(*key))
        .map(|key| {
            format!(
                "{key}: rebuilt {:?}, recorded {:?}",
                ours.get(key),
                state.get(key)
            )
        })
        .collect();
    assert!(
        differing.is_empty(),
        "clawmd, run as the swapped runner runs it, does not leave what the real swapped spawn \
         left (if clawmd's output changed on purpose, record again: {RECORDED}/README.md):\n{}",
        differing.join("\n")
    );
    (d, reports)
}

/// The recorded mounts made real on `d`: `$ROOT` is its root; a mount under the image's home
/// goes under the sandbox's.
fn realise(d: &Deployment, mounts: &[Mount]) -> Vec<Bind> {
    let root = d.root().display().to_string();
    mounts
        .iter()
        .map(|m| {
            let host = PathBuf::from(m.host.replace("$ROOT", &root));
            assert!(
                m.host.starts_with("$ROOT/") && host.exists(),
                "{} is bound at {} but the rebuilt deployment has no such path",
                m.host,
                m.container
            );
            let container = match m.container.strip_prefix(IMAGE_HOME) {
                Some(rest) => PathBuf::from(format!("{SANDBOX_HOME}{rest}")),
                None => PathBuf::from(&m.container),
            };
            Bind {
                host,
                container,
                readonly: m.readonly,
            }
        })
        .collect()
}

/// The memory block `consumer` sends from the container the recorded `mounts` lay out.
fn observe(d: &Deployment, group: &str, mounts: &[Mount], consumer: Consumer) -> String {
    let scratch = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::in_scratch(realise(d, mounts), scratch.path(), "nanoclaw-spawn-v23");
    memory_block(&sandbox, tools(), consumer, RUN_TIMEOUT)
        .unwrap_or_else(|e| panic!("{group} in {}: {e}", d.root().display()))
}

#[test]
fn every_line_nanoclaws_v23_spawn_gives_reaches_the_agent_after_the_swap() {
    let theirs = spawns(Mode::Nanoclaw);
    let ours = spawns(Mode::Swapped);
    let names: Vec<&str> = groups().iter().map(|g| g.name).collect();
    let spawned = |s: &[(String, Value, Vec<Mount>)]| -> Vec<String> {
        s.iter().map(|(g, _, _)| g.clone()).collect()
    };
    assert_eq!(
        spawned(&theirs),
        names,
        "nanoclaw: one spawn per group, in order"
    );
    // gus is over Codex's 32 KiB cap. nanoclaw drops its largest section, says so in the
    // document and spawns it; the swapped runner (docs §3b as written) refuses: clawmd reports
    // the dropped section as not delivered, composeWithClawmd logs it as an error and throws,
    // and wakeContainer returns false (host-sweep would retry). Every other group spawns.
    let refused = "gus";
    let expected: Vec<&str> = names.iter().copied().filter(|g| *g != refused).collect();
    assert_eq!(spawned(&ours), expected, "swapped: the spawns, in order");
    let (their_wakes, our_wakes) = (
        SPAWNS.json(Mode::Nanoclaw, "wakes.json"),
        SPAWNS.json(Mode::Swapped, "wakes.json"),
    );
    for g in &names {
        assert_eq!(
            their_wakes[g], true,
            "nanoclaw: wakeContainer failed for {g}"
        );
        assert_eq!(
            our_wakes[g],
            *g != refused,
            "swapped: wakeContainer for {g}"
        );
    }
    let logged_refusal = SPAWNS
        .json(Mode::Swapped, "log.json")
        .as_array()
        .unwrap()
        .iter()
        .any(|line| {
            line["level"] == "error"
                && line["message"] == "clawmd could not compose the group"
                && line["data"]["group"] == refused
                && line["data"]["code"] == "not-delivered"
        });
    assert!(
        logged_refusal,
        "the swapped runner logs why {refused} does not spawn"
    );
    let specs = SPAWNS.json(Mode::Nanoclaw, "project-doc-specs.json");
    let state = SPAWNS.json(Mode::Nanoclaw, "state.json");
    assert!(
        state[format!("groups/{refused}/AGENTS.md")]["file"]
            .as_str()
            .unwrap()
            .contains("# Omitted for size")
    );
    let (d, reports) = swapped_deployment();
    assert_eq!(
        reports[6]["delivered"]["missing"],
        json!(["mcp:big"]),
        "{}",
        reports[6]
    );
    let mut failures = Vec::new();
    let mut checked = 0;
    for (group, report) in groups().iter().zip(&reports) {
        let g = group.name;
        if g == refused {
            continue;
        }
        let (_, their_rest, their_mounts) = theirs.iter().find(|(n, _, _)| n == g).unwrap();
        let (_, our_rest, our_mounts) = ours.iter().find(|(n, _, _)| n == g).unwrap();
        let provider = group.provider;
        // The contract's spec is the one nanoclaw_v23.rs hands the composer (pi has no
        // contract: the runner's default path composes DEFAULT_PROJECT_DOC).
        if provider == "pi" {
            assert_eq!(specs[g], Value::Null, "{g}");
        } else {
            assert_eq!(
                specs[g],
                spec(provider),
                "{g}: the contract's ProjectDocSpec"
            );
        }
        // nanoclaw's spawn composed what its composer alone composes.
        let file = file_of(group);
        let doc = state[format!("groups/{g}/{file}")]["file"]
            .as_str()
            .unwrap_or_else(|| panic!("{g}: nanoclaw's spawn left no {file}"))
            .to_owned();
        assert_eq!(
            doc,
            std::fs::read_to_string(repo().join(COMPOSER_RECORDED).join(g).join(&file)).unwrap(),
            "{g}: the spawn path's document is not the composer's"
        );
        // nanoclaw binds it read-only where the provider reads it; the swapped spawn binds it
        // nowhere, clawmd's binds carry the instructions instead.
        let doc_host = format!("$ROOT/groups/{g}/{file}");
        let their_doc: Vec<&Mount> = their_mounts.iter().filter(|m| m.host == doc_host).collect();
        assert_eq!(their_doc.len(), 1, "{g}: {their_mounts:?}");
        assert!(their_doc[0].readonly, "{g}");
        assert!(
            !our_mounts.iter().any(|m| m.host == doc_host),
            "{g}: the swapped spawn still binds nanoclaw's document"
        );
        let clawmds: Vec<&Mount> = our_mounts
            .iter()
            .filter(|m| m.host.starts_with(CLAWMD_BINDS))
            .collect();
        assert!(
            !clawmds.is_empty(),
            "{g}: no bind of clawmd's: {our_mounts:?}"
        );
        // Every other mount is the same, in the same order; and so is the rest of the spec
        // (environment with OneCLI's, image, command, labels, resources).
        let others = |mounts: &[Mount], skip: &dyn Fn(&Mount) -> bool| -> Vec<Mount> {
            mounts.iter().filter(|m| !skip(m)).cloned().collect()
        };
        assert_eq!(
            others(their_mounts, &|m| m.host == doc_host),
            others(our_mounts, &|m| m.host.starts_with(CLAWMD_BINDS)),
            "{g}: mounts other than the document's"
        );
        assert_eq!(
            their_rest, our_rest,
            "{g}: the SessionSpec beyond its mounts"
        );
        // clawmd's binds, as `clawmd mounts` gives them now, are the recorded ones: the group
        // folder and container.json where nanoclaw bound them, the document's after them, those
        // under the agent's home last.
        let printed = d.run(["mounts", g, "--json"]).success().json();
        let root = d.root().display().to_string();
        let printed: Vec<Mount> = printed
            .as_array()
            .unwrap()
            .iter()
            .map(|b| Mount {
                host: b["host"].as_str().unwrap().replace(&root, "$ROOT"),
                container: b["container"].as_str().unwrap().to_owned(),
                readonly: b["readonly"].as_bool().unwrap(),
                class: "group-state".to_owned(),
            })
            .collect();
        let (early, late): (Vec<Mount>, Vec<Mount>) = printed
            .into_iter()
            .partition(|m| !m.container.starts_with(&format!("{IMAGE_HOME}/")));
        assert_eq!(
            our_mounts[2..2 + early.len()].to_vec(),
            early,
            "{g}: clawmd's early binds"
        );
        assert_eq!(
            our_mounts[our_mounts.len() - late.len()..].to_vec(),
            late,
            "{g}: clawmd's binds under the home, last"
        );

        // Every line of every section nanoclaw gave the group reaches its agent.
        let sections = nanoclaw_sections(&doc);
        let mut views: Vec<(String, String)> = Vec::new();
        if is_claude_code(provider) {
            for consumer in [Consumer::Cli, Consumer::sdk()] {
                views.push((
                    format!("the real Claude Code {consumer}'s memory block"),
                    observe(&d, g, our_mounts, consumer),
                ));
            }
        } else {
            let target = report["target"]["file"].as_str().unwrap();
            let entry = format!("{WORKSPACE}/{target}");
            let bound = our_mounts
                .iter()
                .rev()
                .find(|m| m.container == entry)
                .unwrap_or_else(|| panic!("{g}: nothing bound at {entry}: {our_mounts:?}"));
            let host = bound.host.replace("$ROOT", &d.root().display().to_string());
            let text = std::fs::read_to_string(&host).unwrap();
            let all: Vec<String> = sections.iter().flat_map(|(_, l)| l.clone()).collect();
            if let Err(missing) = in_order(&all, text.lines()) {
                failures.push(format!(
                    "{g} ({provider}): nanoclaw's document is not in order in the one bound at \
                     {entry}, at {missing:?}\n{text}"
                ));
            }
            views.push((format!("the {provider} document at {entry}"), text));
        }
        for (what, text) in &views {
            for (heading, lines) in &sections {
                checked += 1;
                if let Err(missing) = in_order(lines, text.lines()) {
                    failures.push(format!(
                        "{g} ({provider}): {heading} does not reach the agent in {what}: \
                         missing {missing:?}"
                    ));
                }
            }
            for never in ["{{provider-memory-note}}", MEMORY_MARK, SECRET] {
                if text.contains(never) {
                    failures.push(format!("{g} ({provider}): {what} holds {never:?}"));
                }
            }
        }
    }
    eprintln!(
        "e2e nanoclaw v2.3 spawn: {} groups, {checked} section checks",
        names.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The recordings the test above reads are what nanoclaw's spawn path produces, run from the
/// anchor on the same content, before and after the swap (with the clawmd under test, packed as
/// its npm package, and docs/nanoclaw.md §3b's file). With `CLAWMD_NANOCLAW_SPAWN_V23_RECORD=1`
/// the recordings are rewritten instead.
#[test]
#[ignore = "runs nanoclaw v2.3's spawn path from the anchor folder (CLAWMD_NANOCLAW_SPAWN_V23, \
            default /work/anchors/nanoclaw-spawn-v2.3), which a clean clone has not"]
fn the_recordings_are_what_nanoclaws_v23_spawn_path_produces() {
    let anchor = ANCHOR.holding(
        "run-spawn",
        "nanoclaw v2.3's spawn path",
        &format!("{RECORDED}/README.md"),
    );
    let work = tempfile::tempdir().unwrap();
    let listing = package_npm(&work.path().join("tarballs"));
    let package = listing.lines().last().unwrap().to_owned();
    let spawn_ts = work.path().join("clawmd-spawn.ts");
    std::fs::write(&spawn_ts, clawmd_spawn_ts()).unwrap();
    let groups_file = work.path().join("groups.json");
    std::fs::write(&groups_file, groups_json().to_string()).unwrap();
    let mut recordings = SPAWNS.recordings();
    for mode in Mode::BOTH {
        let d = content();
        let out = work.path().join(mode.dir());
        succeeded(
            &format!("the anchor's run-spawn {}", mode.dir()),
            Command::new(anchor.join("run-spawn"))
                .arg(mode.dir())
                .arg(d.root())
                .arg(&groups_file)
                .arg(&out)
                .env("TYPESCRIPT", e2e_cache().join("typescript/node_modules"))
                .env("CLAWMD", CLAWMD)
                .env("CLAWMD_PACKAGE", &package)
                .env("CLAWMD_SPAWN_TS", &spawn_ts)
                .output()
                .unwrap(),
        );
        let files: BTreeMap<String, Vec<u8>> = SPAWNS
            .files(mode)
            .iter()
            .map(|file| {
                let now = std::fs::read(out.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
                ((*file).to_owned(), now)
            })
            .collect();
        recordings.folder(mode.dir(), &files);
    }
    recordings.finish(&Mode::BOTH.map(Mode::dir));
}

/// The agent's `~/.claude` as nanoclaw's spawn path left it (`data/v2-sessions/ag-ada/
/// .claude-shared`, with the `settings.json` its runner writes), named as `clawmd init` names it
/// (`claudeHome: "data/v2-sessions/{agentGroupId}/.claude-shared"`, the id from the config
/// nanoclaw materialises): compose's verdict on nanoclaw's own settings is complete. Once the
/// agent writes a `claudeMdExcludes` of its workspace's `CLAUDE.md` there, the real Claude Code
/// (CLI and Agent SDK), run from the recorded swapped mounts, loses the persona while the
/// managed policy still reaches it, and compose says the persona is missing.
#[test]
fn an_exclude_the_agent_writes_in_its_nanoclaw_home_is_seen_by_the_verdict() {
    let ours = spawns(Mode::Swapped);
    let (d, _) = swapped_deployment();
    let mut settings: Value = serde_json::from_str(&d.read("clawmd.json")).unwrap();
    settings["claudeHome"] = json!("data/v2-sessions/{agentGroupId}/.claude-shared");
    d.write("clawmd.json", settings.to_string().as_bytes());
    let group = groups().into_iter().find(|g| g.name == "ada").unwrap();
    let config: Value = serde_json::from_str(&d.read("groups/ada/container.json")).unwrap();
    assert_eq!(config["agentGroupId"], "ag-ada");
    let compose = || compose_as_runner(&d, "ada", config.clone(), json!(group.cli_scope), &[]);
    let report = compose();
    assert_eq!(report["delivered"]["complete"], true, "{report}");
    let (_, _, mounts) = ours.iter().find(|(n, _, _)| n == "ada").unwrap();
    let block = observe(&d, "ada", mounts, Consumer::sdk());
    assert!(
        block.contains("Sign every message as ada."),
        "before the exclude, the persona reaches the agent:\n{block}"
    );

    let home_settings = "data/v2-sessions/ag-ada/.claude-shared/settings.json";
    let mut written: Value = serde_json::from_str(&d.read(home_settings)).unwrap();
    assert!(
        written.get("hooks").is_some(),
        "nanoclaw's own file: {written}"
    );
    written["claudeMdExcludes"] = json!(["/workspace/agent/CLAUDE.md"]);
    d.write(home_settings, written.to_string().as_bytes());
    let report = compose();
    let delivered = &report["delivered"];
    assert_eq!(delivered["complete"], false, "{report}");
    assert_eq!(delivered["missing"], json!(["persona"]), "{report}");

    let doc = SPAWNS.json(Mode::Nanoclaw, "state.json")["groups/ada/CLAUDE.md"]["file"]
        .as_str()
        .unwrap()
        .to_owned();
    let sections = nanoclaw_sections(&doc);
    for consumer in [Consumer::Cli, Consumer::sdk()] {
        let block = observe(&d, "ada", mounts, consumer);
        assert!(
            !block.contains("Sign every message as ada."),
            "{consumer}: the exclude withholds the persona:\n{block}"
        );
        for (heading, lines) in sections.iter().filter(|(h, _)| h != "# Persona") {
            assert!(
                in_order(lines, block.lines()).is_ok(),
                "{consumer}: {heading} (managed) still reaches the agent:\n{block}"
            );
        }
    }
}
