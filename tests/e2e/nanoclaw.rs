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
//! nanoclaw's composer is its real TypeScript (tests/fixtures/nanoclaw/src/claude-md-compose.ts)
//! compiled with the stubs of tests/e2e/nanoclaw/ (its database and logger) and run with node.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::Deployment;
use crate::support::deployment::NANOCLAW_MODULES;
use crate::support::sandbox::{
    Bind, Consumer, NANOCLAW_CLI_VERSION, NANOCLAW_SDK_VERSION, Sandbox, WORKSPACE, e2e_cache,
    memory_block, mounts_with, nanoclaw_tools, printed, rendered,
};

const RUN_TIMEOUT: Duration = Duration::from_secs(180);

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

/// nanoclaw's composer compiled (tsc from `scripts/e2e-setup`'s TypeScript tools) into a temp
/// folder holding `driver.mjs`.
fn composer() -> tempfile::TempDir {
    let build = tempfile::tempdir().unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    crate::support::copy_tree(&repo.join("tests/e2e/nanoclaw"), build.path());
    std::fs::copy(
        repo.join("tests/fixtures/nanoclaw/src/claude-md-compose.ts"),
        build.path().join("src/claude-md-compose.ts"),
    )
    .unwrap();
    let ts = e2e_cache().join("typescript/node_modules");
    let output = Command::new(ts.join(".bin/tsc"))
        .args(["-p", "tsconfig.json", "--typeRoots"])
        .arg(ts.join("@types"))
        .current_dir(build.path())
        .output()
        .unwrap_or_else(|e| panic!("tsc ({}): {e}; run scripts/e2e-setup", ts.display()));
    assert!(
        output.status.success(),
        "tsc failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    build
}

/// Composes the groups with nanoclaw's own composer (its database rows from `groups()`).
fn compose_with_nanoclaw(d: &Deployment) {
    let build = composer();
    let rows: serde_json::Map<String, Value> = groups()
        .into_iter()
        .map(|(group, config, cli_scope)| {
            let row = json!({
                "agent_group_id": group,
                "mcp_servers": config["mcpServers"].to_string(),
                "cli_scope": cli_scope,
            });
            (group.to_owned(), row)
        })
        .collect();
    let rows_file = build.path().join("rows.json");
    std::fs::write(&rows_file, Value::Object(rows).to_string()).unwrap();
    let names: Vec<&str> = groups().into_iter().map(|(group, _, _)| group).collect();
    let output = Command::new("node")
        .arg("driver.mjs")
        .arg(d.root())
        .args(&names)
        .env("NANOCLAW_ROWS", &rows_file)
        .current_dir(build.path())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "nanoclaw's composer failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
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
        .map(|(group, mut config, cli_scope)| {
            config["cli_scope"] = json!(cli_scope);
            let handed = d.path(&format!("{group}.handed.json"));
            std::fs::write(&handed, config.to_string()).unwrap();
            let report = d
                .run([
                    "compose",
                    group,
                    "--json",
                    "--config",
                    handed.to_str().unwrap(),
                ])
                .success()
                .json();
            report["groups"][0].clone()
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
    let (home, session, hostname) = (
        scratch.path().join("home"),
        scratch.path().join("session"),
        scratch.path().join("hostname"),
    );
    std::fs::create_dir(&home).unwrap();
    std::fs::create_dir(&session).unwrap();
    std::fs::write(&hostname, "nanoclaw-swap\n").unwrap();
    let sandbox = Sandbox {
        binds: match runner {
            Runner::Nanoclaw => nanoclaw_binds(root, &session, group),
            Runner::Swapped(delivery) => swapped_binds(root, &session, group, delivery),
        },
        home,
        hostname,
        extra: Vec::new(),
    };
    memory_block(&sandbox, nanoclaw_tools(), consumer, RUN_TIMEOUT)
        .unwrap_or_else(|e| panic!("{group} in {}: {e}", root.display()))
}

/// The body of every `Contents of PATH (LABEL):` section of a memory block, with its path.
fn sections(block: &str) -> Vec<(String, String)> {
    let start = block.find("Contents of ").unwrap_or(block.len());
    let mut body = &block[start..];
    for end in [
        "\n# currentDate\n",
        "\n\n      IMPORTANT: this context",
        "\n</system-reminder>",
    ] {
        if let Some(at) = body.find(end) {
            body = &body[..at];
        }
    }
    let mut out = Vec::new();
    for part in body.split("\n\nContents of ") {
        let part = part.strip_prefix("Contents of ").unwrap_or(part);
        let Some((head, text)) = part.split_once("):\n\n") else {
            continue;
        };
        let path = head.rsplit_once(" (").map_or(head, |(path, _)| path);
        out.push((path.to_owned(), text.trim().to_owned()));
    }
    out
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
            for (path, text) in sections(&theirs) {
                let text: Vec<&str> = text
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
    let mut config = groups()[0].1.clone();
    config["cli_scope"] = json!("group");
    let handed = d.path("main.handed.json");
    std::fs::write(&handed, config.to_string()).unwrap();
    let report = d
        .run([
            "compose",
            "main",
            "--json",
            "--delivery",
            "link",
            "--config",
            handed.to_str().unwrap(),
        ])
        .success()
        .json();
    let delivered = &report["groups"][0]["delivered"];
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
/// passes on the nanoclaw fixture as a checkout, read by the consumer the deployment names
/// (the Agent SDK nanoclaw's runner uses) of the release it pins: nanoclaw's own migration and
/// composer first, then the swap, a group with an empty `CLAUDE.local.md` among them, and
/// `clawmd check` with nothing to report; and a fresh clone. It counts its checks. On today's
/// nanoclaw (the v2.3-era fixture) it runs the fresh clone and does not crash.
#[test]
fn the_adoption_check_passes_on_a_nanoclaw_checkout() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tools = nanoclaw_tools();
    for (fixture, expected) in [
        ("tests/fixtures/nanoclaw", "30 of 30 checks pass"),
        ("tests/fixtures/nanoclaw-v2.3", "7 of 7 checks pass"),
    ] {
        let output = Command::new(repo.join("scripts/nanoclaw-adoption"))
            .arg(repo.join(fixture))
            .arg("--bin")
            .arg(env!("CARGO_BIN_EXE_clawmd"))
            .arg("--claude")
            .arg(&tools.claude)
            .arg("--sdk")
            .arg(e2e_cache().join("nanoclaw"))
            .env("CLAWMD_E2E_CACHE", e2e_cache())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && stdout.contains(expected),
            "{fixture}:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        if fixture == "tests/fixtures/nanoclaw" {
            assert!(
                stdout.contains("judged with the Agent SDK (sdk in clawmd.json)"),
                "{stdout}"
            );
        }
    }
}
