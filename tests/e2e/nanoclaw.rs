//! The swap, end to end: nanoclaw v2.0.64's own composer and clawmd (after `clawmd init`) on the
//! same nanoclaw content, each group then read by the real Claude Code nanoclaw pins (CLI
//! 2.1.128, Agent SDK 0.2.128 with nanoclaw's `settingSources: ['project','user']`) in a sandbox
//! laid out as nanoclaw's `buildMounts()` lays it out (for clawmd, after the swap: the session
//! folder, the table `clawmd mounts` prints, then nanoclaw's own `/app` mounts; docs/nanoclaw.md
//! step 2). Nothing nanoclaw's agents receive is
//! missing from clawmd's; the six built-in module fragments reach the agent (five where the
//! runner hands `cli_scope: disabled`); compose's verdict and `clawmd render` agree with what the
//! binary sent.
//!
//! nanoclaw's code is not kept in this repository: what its composer (`src/claude-md-compose.ts`)
//! writes for these groups (each file, folder and link, with the link's target, and what its
//! start-up migration moves and removes) is recorded under `tests/fixtures/nanoclaw/recorded/`
//! (its README says how), and laid out in the deployment as the composer left it before the real
//! Claude Code reads it. The `#[ignore]`d test at the end runs nanoclaw's composer again from the
//! anchor folder (`CLAWMD_NANOCLAW_V2064`, default /work/anchors/nanoclaw-v2.0.64-compose) and
//! checks the recordings are still what it writes; with `CLAWMD_NANOCLAW_V2064_RECORD=1` it
//! rewrites them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::deployment::NANOCLAW_MODULES;
use crate::support::memory::sections;
use crate::support::nanoclaw::{compose_as_runner, composer_log};
use crate::support::recording::{Anchor, Recordings, repo};
use crate::support::sandbox::{
    Bind, Consumer, NANOCLAW_CLI_VERSION, NANOCLAW_SDK_VERSION, Sandbox, WORKSPACE, e2e_cache,
    memory_block, mounts_with, nanoclaw_tools, printed, rendered,
};
use crate::support::{Deployment, Entry, Tree, changes, everything};

const RUN_TIMEOUT: Duration = Duration::from_secs(180);
/// What nanoclaw's composer wrote, per scenario (`recorded/<scenario>/`).
const RECORDED: &str = "tests/fixtures/nanoclaw/recorded";
/// The folder holding the stubs, the driver and the `compose` script that compile nanoclaw
/// v2.0.64's composer and run it (all outside this repository).
const ANCHOR: Anchor = Anchor {
    env: "CLAWMD_NANOCLAW_V2064",
    default: "/work/anchors/nanoclaw-v2.0.64-compose",
};
/// Set to rewrite the recordings from the anchor's composer instead of comparing them.
const RECORD_ENV: &str = "CLAWMD_NANOCLAW_V2064_RECORD";
/// nanoclaw v2.0.64's tree, for its real `src/claude-md-compose.ts` (the anchor's `compose`
/// reads the same variable).
const CHECKOUT: Anchor = Anchor {
    env: "NANOCLAW_V2064_CHECKOUT",
    default: "/work/anchors/nanoclaw-v2.0.64",
};
/// In a scenario's `changes.json`, what the composer did at a path.
const FOLDER: &str = "folder";
const FILE: &str = "file";
const REMOVED: &str = "removed";
const LINK: &str = "link -> ";

/// The groups, each with its materialised `container.json` and the `cli_scope` of its
/// database row (which nanoclaw keeps out of `container.json`).
fn groups() -> Vec<(&'static str, Value, &'static str)> {
    vec![
        (
            "main",
            json!({"skills": "all", "mcpServers": {
                "notes": {"command": "notes-mcp", "instructions": "NOTES SERVER: read-only; never delete a note."},
                "calendar": {"command": "calendar-mcp"}
            }}),
            "group",
        ),
        (
            "research",
            json!({"skills": "all", "mcpServers": {}}),
            "disabled",
        ),
    ]
}

/// The same installed nanoclaw content in a fresh deployment: the fixture, after nanoclaw's
/// own migration (no `groups/global`), each group with its memory and its config.
fn content() -> Deployment {
    let d = Deployment::nanoclaw();
    std::fs::remove_dir_all(d.path("groups/global")).unwrap();
    std::fs::remove_file(d.path("groups/main/CLAUDE.md")).unwrap();
    d.write(
        "groups/main/CLAUDE.local.md",
        b"# Main memory\n\nThe user is Sam; answers in British English.\n",
    );
    d.write(
        "groups/research/CLAUDE.local.md",
        b"# Research memory\n\nFocus: retrieval-augmented generation.\n",
    );
    for (group, config, _) in groups() {
        d.write(
            &format!("groups/{group}/container.json"),
            serde_json::to_string_pretty(&config).unwrap().as_bytes(),
        );
    }
    d
}

/// A run of nanoclaw's composer that a test here compares clawmd with: the content it ran on,
/// the groups it composed (in order, each with its `container_configs` row's `mcp_servers` and
/// `cli_scope`), and whether nanoclaw's start-up migration ran first.
struct Scenario {
    /// The folder of its recordings under [`RECORDED`].
    name: &'static str,
    content: fn() -> Deployment,
    rows: fn() -> Vec<(&'static str, Value, &'static str)>,
    migrate: bool,
}

/// [`clawmd_delivers_everything_nanoclaws_composer_delivers`]: [`content`] (after nanoclaw's
/// migration), `main` and `research` composed.
const SWAP: Scenario = Scenario {
    name: "swap",
    content,
    rows: swap_rows,
    migrate: false,
};

/// `scripts/nanoclaw-adoption`'s `upgraded` scenario (run by
/// [`the_adoption_check_passes_on_a_nanoclaw_checkout`]): the fixture as a fresh clone has it,
/// with `research`'s old `CLAUDE.md` and a new group `newbie`; nanoclaw's migration, then
/// `main`, `research` and `newbie` composed.
const ADOPTION: Scenario = Scenario {
    name: "adoption",
    content: adoption_content,
    rows: adoption_rows,
    migrate: true,
};

const SCENARIOS: [Scenario; 2] = [SWAP, ADOPTION];

fn swap_rows() -> Vec<(&'static str, Value, &'static str)> {
    groups()
        .into_iter()
        .map(|(group, config, cli_scope)| (group, config["mcpServers"].clone(), cli_scope))
        .collect()
}

/// The configs `scripts/nanoclaw-adoption` gives its `upgraded` groups, and their `cli_scope`.
fn adoption_groups() -> Vec<(&'static str, Value, &'static str)> {
    vec![
        (
            "main",
            json!({"skills": "all", "mcpServers": {
                "notes": {"command": "notes-mcp", "instructions": "NOTES SERVER: read-only."}}}),
            "group",
        ),
        (
            "research",
            json!({"skills": "all", "mcpServers": {}}),
            "disabled",
        ),
        (
            "newbie",
            json!({"skills": "all", "mcpServers": {}}),
            "group",
        ),
    ]
}

fn adoption_rows() -> Vec<(&'static str, Value, &'static str)> {
    adoption_groups()
        .into_iter()
        .map(|(group, config, cli_scope)| (group, config["mcpServers"].clone(), cli_scope))
        .collect()
}

/// The checkout `scripts/nanoclaw-adoption`'s `upgraded` scenario starts from: the fixture as
/// a fresh clone has it (`groups/global`, `groups/main/CLAUDE.md`), `research` with its own
/// `CLAUDE.md`, `newbie` with an empty `CLAUDE.local.md` (as nanoclaw makes a new group), each
/// with its `container.json`. nanoclaw keeps `cli_scope` in its database, not in
/// `container.json`; a root without `data/v2.db` names it there for the script (which takes
/// "group" where it names none), so `research`'s names "disabled". nanoclaw's composer reads
/// neither (its rows are the stubbed database's): it writes the same either way.
fn adoption_content() -> Deployment {
    let d = Deployment::nanoclaw();
    d.write(
        "groups/research/CLAUDE.md",
        b"# Research\n\nFocus: retrieval-augmented generation.\n",
    );
    d.write("groups/newbie/CLAUDE.local.md", b"");
    for (group, mut config, cli_scope) in adoption_groups() {
        if cli_scope != "group" {
            config["cli_scope"] = json!(cli_scope);
        }
        d.write(
            &format!("groups/{group}/container.json"),
            config.to_string().as_bytes(),
        );
    }
    d
}

/// The root of an installed nanoclaw v2.0.64 whose composer composed the adoption scenario's
/// groups ([`ADOPTION`]): [`adoption_content`], then what its migration and composer did there,
/// as recorded. `scripts/nanoclaw-adoption` judges it in its installed mode.
fn adoption_installed() -> Deployment {
    let d = adoption_content();
    let log = install_recorded(&d, &ADOPTION);
    assert!(
        log.contains("Migrated groups to CLAUDE.local.md model"),
        "{log}"
    );
    for (group, _, _) in adoption_groups() {
        assert!(
            d.read(&format!("groups/{group}/CLAUDE.md"))
                .starts_with("<!-- Composed at spawn"),
            "{group}"
        );
    }
    d
}

/// The recordings of nanoclaw's composer, a folder per scenario.
fn recordings() -> Recordings {
    Recordings::new(RECORDED, "nanoclaw's composer", RECORD_ENV)
}

/// A scenario's recorded changes: each path (relative to the deployment's root) the composer
/// created, changed or removed, and what it is now (`folder`, `file`, `link -> TARGET`,
/// `removed`).
fn recorded_changes(scenario: &Scenario) -> BTreeMap<String, String> {
    let file = format!("{}/changes.json", scenario.name);
    serde_json::from_value(recordings().json(&file))
        .unwrap_or_else(|e| panic!("{RECORDED}/{file}: {e}"))
}

/// Lays out in `d` what nanoclaw's composer did in `scenario`'s recorded run, as it left it:
/// each folder and file it made or changed (the file's bytes as recorded), each link with its
/// target, each path it removed gone. Returns its log (the deployment's root as `$ROOT`).
fn install_recorded(d: &Deployment, scenario: &Scenario) -> String {
    let recorded = recordings();
    let changes = recorded_changes(scenario);
    // Removals deepest first, then the rest parents first.
    for (path, change) in changes.iter().rev() {
        if change == REMOVED {
            let at = d.path(path);
            let meta = std::fs::symlink_metadata(&at)
                .unwrap_or_else(|e| panic!("{path} (recorded as removed): {e}"));
            if meta.is_dir() {
                std::fs::remove_dir_all(&at).unwrap();
            } else {
                std::fs::remove_file(&at).unwrap();
            }
        }
    }
    for (path, change) in &changes {
        let at = d.path(path);
        if change == FOLDER {
            std::fs::create_dir_all(&at).unwrap();
        } else if change == FILE {
            d.write(path, &recorded.read(&format!("{}/{path}", scenario.name)));
        } else if let Some(target) = change.strip_prefix(LINK) {
            if std::fs::symlink_metadata(&at).is_ok() {
                std::fs::remove_file(&at).unwrap();
            }
            std::os::unix::fs::symlink(target, &at).unwrap();
        } else {
            assert_eq!(change, REMOVED, "{path}: an unknown change in changes.json");
        }
    }
    String::from_utf8(recorded.read(&format!("{}/composer.log", scenario.name))).unwrap()
}

/// Lays out what nanoclaw's composer wrote for the groups (its recorded run, [`SWAP`]).
fn compose_with_nanoclaw(d: &Deployment) {
    let log = install_recorded(d, &SWAP);
    // Its migration did not run here (content() is after it): it logged nothing.
    assert_eq!(log, "");
    assert!(
        d.read("groups/main/CLAUDE.md")
            .starts_with("<!-- Composed at spawn")
    );
}

/// Composes the groups with clawmd as the runner would after `clawmd init`: each group's config
/// handed with its `cli_scope`. Returns compose's report per group.
fn compose_with_clawmd(d: &Deployment) -> Vec<Value> {
    d.run(["init"]).success();
    d.run(["migrate"]).success();
    groups()
        .into_iter()
        .map(|(group, config, cli_scope)| {
            compose_as_runner(d, group, config, json!(cli_scope), &[])
        })
        .collect()
}

/// The container's binds as nanoclaw's `buildMounts()` makes them, in its order: the session
/// folder at /workspace, the group folder read-write at /workspace/agent, its `container.json`,
/// `CLAUDE.md` and `.claude-fragments` read-only over it, `/app/CLAUDE.md`, `/app/src` (the agent
/// runner's source, where the module fragments are) and `/app/skills`.
fn nanoclaw_binds(root: &Path, session: &Path, group: &str) -> Vec<Bind> {
    let group_dir = root.join("groups").join(group);
    let bind = |host: PathBuf, container: &str, readonly: bool| Bind {
        host,
        container: PathBuf::from(container),
        readonly,
    };
    let mut binds = vec![
        bind(session.to_owned(), "/workspace", false),
        bind(group_dir.clone(), WORKSPACE, false),
    ];
    for name in ["container.json", "CLAUDE.md", ".claude-fragments"] {
        if group_dir.join(name).exists() {
            binds.push(bind(
                group_dir.join(name),
                &format!("{WORKSPACE}/{name}"),
                true,
            ));
        }
    }
    binds.push(bind(
        root.join("container/CLAUDE.md"),
        "/app/CLAUDE.md",
        true,
    ));
    binds.push(bind(
        root.join("container/agent-runner/src"),
        "/app/src",
        true,
    ));
    binds.push(bind(root.join("container/skills"), "/app/skills", true));
    binds
}

/// nanoclaw's `buildMounts()` after the swap: its own session folder, then the table
/// `clawmd mounts` prints as it is, then nanoclaw's own mounts of its code and content
/// (`/app/…`) that the table does not already make.
fn swapped_binds(root: &Path, session: &Path, group: &str, delivery: &str) -> Vec<Bind> {
    let mut binds = vec![Bind {
        host: session.to_owned(),
        container: PathBuf::from("/workspace"),
        readonly: false,
    }];
    binds.extend(mounts_with(root, group, &[("CLAWMD_DELIVERY", delivery)]));
    for own in nanoclaw_binds(root, session, group) {
        let taken = binds.iter().any(|bind| bind.container == own.container);
        if !taken && own.container.starts_with("/app") {
            binds.push(own);
        }
    }
    binds
}

/// Which runner lays out the container: nanoclaw's own `buildMounts()`, or the same after
/// the swap to clawmd, for the delivery mode the group was composed with.
#[derive(Clone, Copy)]
enum Runner {
    Nanoclaw,
    Swapped(&'static str),
}

/// The memory block `consumer` sends for `group` of the deployment at `root`.
fn observe(root: &Path, group: &str, consumer: Consumer, runner: Runner) -> String {
    let scratch = tempfile::tempdir().unwrap();
    let session = scratch.path().join("session");
    std::fs::create_dir(&session).unwrap();
    let binds = match runner {
        Runner::Nanoclaw => nanoclaw_binds(root, &session, group),
        Runner::Swapped(delivery) => swapped_binds(root, &session, group, delivery),
    };
    let sandbox = Sandbox::in_scratch(binds, scratch.path(), "nanoclaw-swap");
    memory_block(&sandbox, nanoclaw_tools(), consumer, RUN_TIMEOUT)
        .unwrap_or_else(|e| panic!("{group} in {}: {e}", root.display()))
}

#[test]
fn clawmd_delivers_everything_nanoclaws_composer_delivers() {
    let nanoclaw = content();
    let clawmd = content();
    compose_with_nanoclaw(&nanoclaw);
    let reports = compose_with_clawmd(&clawmd);
    for report in &reports {
        let delivered = &report["delivered"];
        assert_eq!(delivered["complete"], true, "{report}");
        assert_eq!(
            delivered["judged"]["claude_code"], NANOCLAW_CLI_VERSION,
            "{report}"
        );
        assert_eq!(delivered["judged"]["consumer"], "sdk", "{report}");
    }
    let mut failures = Vec::new();
    for (group, _, cli_scope) in groups() {
        for consumer in [Consumer::Cli, Consumer::sdk()] {
            // (Consumer's Display names the default e2e release; these are nanoclaw's.)
            let consumer_name = match consumer {
                Consumer::Cli => format!("CLI {NANOCLAW_CLI_VERSION}"),
                Consumer::Sdk(_) => format!("Agent SDK {NANOCLAW_SDK_VERSION} ['project','user']"),
            };
            let theirs = observe(nanoclaw.root(), group, consumer, Runner::Nanoclaw);
            let ours = observe(clawmd.root(), group, consumer, Runner::Swapped("managed"));
            eprintln!(
                "e2e nanoclaw swap: {group:<8} {consumer_name:<40} nanoclaw {:>6} bytes, clawmd {:>6} bytes",
                theirs.len(),
                ours.len()
            );
            // Nothing nanoclaw's agent receives is missing from clawmd's. (Its import-only
            // CLAUDE.md shows its import lines as text on this release: directives, whose
            // files are sections of their own, not guidance.)
            for section in sections(&theirs) {
                let path = &section.path;
                let text: Vec<&str> = section
                    .body
                    .lines()
                    .filter(|line| !line.starts_with("@./") || line.contains(' '))
                    .collect();
                let text = text.join("\n").trim().to_owned();
                if !text.is_empty() && !ours.contains(&text) {
                    failures.push(format!(
                        "{group} {consumer_name}: {path} (from nanoclaw's composer) is not in clawmd's block:\n{text}"
                    ));
                }
            }
            // The module fragments: all six, or five where cli_scope is disabled, for both.
            for module in NANOCLAW_MODULES {
                let line = clawmd.module_line(module);
                let expected = !(module == "cli" && cli_scope == "disabled");
                for (who, block) in [("nanoclaw", &theirs), ("clawmd", &ours)] {
                    if block.contains(&line) != expected {
                        failures.push(format!(
                            "{group} {consumer_name}: module {module} {} {who}'s agent",
                            if expected {
                                "does not reach"
                            } else {
                                "reaches"
                            }
                        ));
                    }
                }
            }
            // The group's own memory reaches the agent with clawmd, whatever the consumer.
            let memory = clawmd
                .read(&format!("groups/{group}/CLAUDE.local.md"))
                .lines()
                .last()
                .unwrap()
                .to_owned();
            if !ours.contains(&memory) {
                failures.push(format!(
                    "{group} {consumer_name}: CLAUDE.local.md does not reach clawmd's agent"
                ));
            }
            // render predicts the block the binary sent, as the deployment pins it.
            let consumer_flag = match consumer {
                Consumer::Cli => "cli",
                Consumer::Sdk(_) => "sdk",
            };
            let render = rendered(clawmd.root(), group, &["--consumer", consumer_flag]);
            let printed = printed(&ours);
            if render != printed {
                failures.push(format!(
                    "{group} {consumer_name}: clawmd render differs from the real block\n--- render\n{render}\n--- real\n{printed}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// With link delivery (nanoclaw's own layout of links into /app), the release nanoclaw pins
/// loads the linked files without approval: compose's verdict, judged for that release, says
/// everything reaches the agent, and the real 2.1.128 agent does receive every module.
#[test]
fn link_delivery_is_judged_for_the_pinned_release() {
    let d = content();
    d.run(["init"]).success();
    let config = groups()[0].1.clone();
    let report = compose_as_runner(&d, "main", config, json!("group"), &["--delivery", "link"]);
    let delivered = &report["delivered"];
    assert_eq!(delivered["complete"], true, "{report}");
    assert_eq!(delivered["judged"]["claude_code"], NANOCLAW_CLI_VERSION);
    assert!(
        d.read_link("groups/main/.claude-fragments/module-core.md")
            .starts_with("/app/src/mcp-tools/")
    );
    for consumer in [Consumer::Cli, Consumer::sdk()] {
        let block = observe(d.root(), "main", consumer, Runner::Swapped("link"));
        for module in NANOCLAW_MODULES {
            assert!(
                block.contains(&d.module_line(module)),
                "{module} does not reach the agent with link delivery"
            );
        }
        assert!(block.contains("NOTES SERVER: read-only"));
        assert!(block.contains("The user is Sam"));
    }
}

/// `scripts/nanoclaw-adoption` (the operator's check of a nanoclaw checkout, docs/nanoclaw.md)
/// passes on the root of an installed nanoclaw v2.0.64 (the fixture after nanoclaw's own
/// migration and composer, laid out from their recorded run, [`adoption_installed`]), read by
/// the consumer the deployment names (the Agent SDK nanoclaw's runner uses) of the release it
/// pins: the groups nanoclaw composed, each with its config and `cli_scope` from its
/// `container.json`, a group with an empty `CLAUDE.local.md` among them, swapped to clawmd, and
/// `clawmd check` with nothing to report; and a fresh clone. It counts its checks. On today's
/// nanoclaw (the v2.3-era fixture) it runs the fresh clone and does not crash.
#[test]
fn the_adoption_check_passes_on_a_nanoclaw_checkout() {
    let repo = repo();
    let tools = nanoclaw_tools();
    let installed = adoption_installed();
    for (checkout, expected) in [
        (installed.root().to_owned(), "30 of 30 checks pass"),
        (
            repo.join("tests/fixtures/nanoclaw-v2.3"),
            "7 of 7 checks pass",
        ),
    ] {
        let output = Command::new(repo.join("scripts/nanoclaw-adoption"))
            .arg(&checkout)
            .arg("--bin")
            .arg(env!("CARGO_BIN_EXE_clawmd"))
            .arg("--claude")
            .arg(&tools.claude)
            .arg("--sdk")
            .arg(e2e_cache().join("nanoclaw"))
            .env("CLAWMD_E2E_CACHE", e2e_cache())
            .env_remove("NANOCLAW_COMPOSER")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && stdout.contains(expected),
            "{}:\n{stdout}\n{}",
            checkout.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        if checkout == installed.root() {
            // It judged the recorded scenario's groups, each with its cli_scope: every module
            // fragment but cli where the scope is disabled.
            let names: Vec<&str> = {
                let mut names: Vec<&str> = adoption_groups().iter().map(|g| g.0).collect();
                names.sort_unstable();
                names
            };
            let mut wanted = vec![
                format!(
                    "the groups nanoclaw composed: {}; configs from container.json",
                    names.join(", ")
                ),
                "judged with the Agent SDK (sdk in clawmd.json)".to_owned(),
            ];
            for (group, _, cli_scope) in adoption_groups() {
                let fragments = if cli_scope == "disabled" { 5 } else { 6 };
                wanted.push(format!(
                    "PASS  {group}: the real {NANOCLAW_CLI_VERSION} agent gets the {fragments} \
                     module fragments"
                ));
                if cli_scope == "disabled" {
                    wanted.push(format!(
                        "PASS  {group}: cli_scope disabled keeps the cli module out"
                    ));
                }
            }
            for line in wanted {
                assert!(stdout.contains(&line), "no {line:?} in:\n{stdout}");
            }
        }
    }
}

/// Runs nanoclaw's composer from the anchor on `d` as `scenario` runs it; returns its log, the
/// deployment's root as `$ROOT`.
fn run_nanoclaws_composer(anchor: &Path, d: &Deployment, scenario: &Scenario) -> String {
    let inputs = tempfile::tempdir().unwrap();
    let rows: serde_json::Map<String, Value> = (scenario.rows)()
        .into_iter()
        .map(|(group, mcp, cli_scope)| {
            let row = json!({"agent_group_id": group, "mcp_servers": mcp.to_string(),
                             "cli_scope": cli_scope});
            (group.to_owned(), row)
        })
        .collect();
    let rows_file = inputs.path().join("rows.json");
    std::fs::write(&rows_file, Value::Object(rows).to_string()).unwrap();
    let mut command = Command::new(anchor.join("compose"));
    command.arg(d.root()).arg(&rows_file);
    if scenario.migrate {
        command.arg("--migrate");
    }
    command.args((scenario.rows)().iter().map(|(group, _, _)| group));
    composer_log(
        &format!("nanoclaw's composer ({})", scenario.name),
        &mut command,
        d.root(),
    )
}

/// What changed from `before` to `after`, as `changes.json` holds it: each path's change
/// (`folder`, `file`, `link -> TARGET`, `removed`); and each file written, with its bytes.
fn changes_made(
    before: &Tree,
    after: &Tree,
) -> (BTreeMap<String, String>, BTreeMap<String, Vec<u8>>) {
    let mut changed = BTreeMap::new();
    let mut files = BTreeMap::new();
    for (path, now) in changes(before, after) {
        let change = match now {
            None => REMOVED.to_owned(),
            Some(Entry::Dir) => FOLDER.to_owned(),
            Some(Entry::Link(target)) => format!("{LINK}{}", target.display()),
            Some(Entry::File(bytes)) => {
                files.insert(path.clone(), bytes.clone());
                FILE.to_owned()
            }
            Some(Entry::Other) => panic!("{path}: nanoclaw's composer made a special file"),
        };
        changed.insert(path, change);
    }
    (changed, files)
}

/// The recordings the tests above lay out are what nanoclaw v2.0.64's composer does, run from
/// the anchor on the same content, scenario by scenario: every folder, file and link it makes
/// or changes (each file byte for byte, each link's target), every path its migration removes,
/// and its log; and laying the recordings out over that content gives the tree the composer
/// left, exactly. And the fixture's `src/claude-md-compose.ts` (a stand-in holding what
/// `clawmd init` reads there) makes `clawmd init` write the same settings as nanoclaw's real
/// file. With `CLAWMD_NANOCLAW_V2064_RECORD=1` the recordings are rewritten instead.
#[test]
#[ignore = "runs nanoclaw v2.0.64's composer from the anchor folder (CLAWMD_NANOCLAW_V2064, \
            default /work/anchors/nanoclaw-v2.0.64-compose), which a clean clone has not"]
fn the_recordings_are_what_nanoclaw_v2064s_composer_writes() {
    let anchor = ANCHOR.holding(
        "compose",
        "the driver of nanoclaw v2.0.64's composer",
        &format!("{RECORDED}/README.md"),
    );
    let mut recordings = recordings();
    for scenario in &SCENARIOS {
        let d = (scenario.content)();
        let before = everything(d.root());
        let log = run_nanoclaws_composer(&anchor, &d, scenario);
        let after = everything(d.root());
        let (changed, files) = changes_made(&before, &after);
        // It wrote only in the groups it composed (and, migrating, groups/global).
        for path in changed.keys() {
            let composed = (scenario.rows)()
                .iter()
                .any(|(group, _, _)| path.starts_with(&format!("groups/{group}/")));
            let migrated =
                scenario.migrate && (path == "groups/global" || path.starts_with("groups/global/"));
            assert!(
                composed || migrated,
                "{}: nanoclaw's composer changed {path}",
                scenario.name
            );
        }
        // The scenario's folder: changes.json, composer.log and the files, nothing else.
        let mut recorded = files;
        let manifest = serde_json::to_string_pretty(&changed).unwrap() + "\n";
        recorded.insert("changes.json".to_owned(), manifest.into_bytes());
        recorded.insert("composer.log".to_owned(), log.into_bytes());
        recordings.folder(scenario.name, &recorded);
        if recordings.recording() {
            continue;
        }
        // Laid out over the same content, the recordings give the tree nanoclaw's composer left.
        let laid = (scenario.content)();
        install_recorded(&laid, scenario);
        if everything(laid.root()) != after {
            recordings.note(format!(
                "{}: the recordings laid out differ from what nanoclaw's composer left",
                scenario.name
            ));
        }
    }
    recordings.finish(&SCENARIOS.map(|s| s.name));

    // `clawmd init` reads the same from the fixture's stand-in as from nanoclaw's own file.
    let checkout = CHECKOUT.dir();
    let real = Deployment::nanoclaw();
    std::fs::copy(
        checkout.join("src/claude-md-compose.ts"),
        real.path("src/claude-md-compose.ts"),
    )
    .unwrap();
    assert!(
        real.read("src/claude-md-compose.ts")
            .contains("composeGroupClaudeMd")
    );
    let stand_in = Deployment::nanoclaw();
    assert!(
        !stand_in
            .read("src/claude-md-compose.ts")
            .contains("export function")
    );
    let settings = |d: &Deployment| {
        d.run(["init"]).success();
        d.read("clawmd.json")
    };
    let written = settings(&stand_in);
    assert!(written.contains("\"groupConfig\": \"handed\""), "{written}");
    assert_eq!(written, settings(&real));
}
