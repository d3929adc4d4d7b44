//! Today's nanoclaw (v2.3-era, `tests/fixtures/nanoclaw-v2.3/`), every provider it has: what its
//! own composer (`src/project-doc-compose.ts` and `src/group-persona.ts`) writes for each group,
//! with the `ProjectDocSpec` its provider's contract hands it, and clawmd after `clawmd init`, on
//! the same content. Every line of every section nanoclaw's composer gives a group reaches that
//! group's agent through clawmd, in the section's order: for Claude Code and Ollama (Claude Code
//! against a local model) in the memory blocks the real Claude Code CLI and Agent SDK send from a
//! container laid out by `clawmd mounts`, and in `clawmd render`; for the flat providers (codex,
//! cursor, opencode, pi) in the document bound at the entry point. No `{{provider-memory-note}}`
//! reaches any agent; `memory/` is never read nor changed; no `CLAUDE.local.md` is made; the
//! persona (the agent's) stays out of the managed policy; a link among the `*.prepend.md` is
//! refused by both.
//!
//! nanoclaw's code is not kept in this repository: its composer's documents (and log) for these
//! groups are recorded under `tests/fixtures/nanoclaw-v2.3/recorded/` (its README says how).
//! The `#[ignore]`d test at the end runs nanoclaw's composer again from the anchor folder
//! (`CLAWMD_NANOCLAW_V23`, default /work/anchors/nanoclaw-v23-spawn) and checks the
//! recordings are still what it writes; with `CLAWMD_NANOCLAW_V23_RECORD=1` it rewrites them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::memory::in_order;
use crate::support::nanoclaw::{compose_as_runner, composer_log};
use crate::support::recording::{Anchor, Recordings, repo};
use crate::support::sandbox::{
    Bind, CLAUDE_CODE_VERSION, Consumer, Sandbox, WORKSPACE, memory_block, mounts_with, printed,
    rendered, tools,
};
use crate::support::{Deployment, Entry, changes, everything};

const RUN_TIMEOUT: Duration = Duration::from_secs(180);
const FIXTURE: &str = "tests/fixtures/nanoclaw-v2.3";
/// nanoclaw's composer's documents for [`groups`] on [`content`], and its log.
const RECORDED: &str = "tests/fixtures/nanoclaw-v2.3/recorded";
/// The folder holding nanoclaw v2.3's files and the driver that runs its composer (and what
/// `nanoclaw_seam.rs` compiles), outside this repository.
pub(crate) const ANCHOR: Anchor = Anchor {
    env: "CLAWMD_NANOCLAW_V23",
    default: "/work/anchors/nanoclaw-v23-spawn",
};
/// Set to rewrite the recordings from the anchor's composer instead of comparing them.
const RECORD_ENV: &str = "CLAWMD_NANOCLAW_V23_RECORD";

/// What nanoclaw's provider contracts hand its composer (the fixture's README).
pub(crate) fn spec(provider: &str) -> Value {
    match provider {
        "codex" => json!({"fileName": "AGENTS.md", "maxBytes": 32768, "instructions": {
            "nativeOverrideFiles": ["AGENTS.local.md", "AGENTS.override.md"],
            "nativeSkills": {"discoveryPath": "/workspace/agent/.agents/skills", "sharedSource": "/app/skills",
                "selfAuthoredHome": "~/.codex/skills", "persistentRoots": ["~/.codex", "~/.agents"],
                "ruleBearingInlined": true}}}),
        "cursor" => json!({"fileName": "AGENTS.md", "instructions": {
            "nativeOverrideFiles": [".cursorrules", "CLAUDE.md", "CLAUDE.local.md"],
            "nativeSkills": {"discoveryPath": "/workspace/agent/.cursor/skills", "sharedSource": "/app/skills",
                "selfAuthoredHome": "~/.cursor/skills", "persistentRoots": ["~/.cursor"],
                "ruleBearingInlined": true}}}),
        // claude, opencode, ollama (Claude's surfaces), pi (no contract: the default).
        _ => json!({"fileName": "CLAUDE.md", "maxBytes": 4194304}),
    }
}

pub(crate) struct Group {
    pub(crate) name: &'static str,
    pub(crate) provider: &'static str,
    pub(crate) skills: Value,
    pub(crate) mcp: Value,
    pub(crate) cli_scope: &'static str,
}

const NOTES: &str = "NOTES SERVER: read-only; never delete a note.\nAsk before exporting.";

pub(crate) fn groups() -> Vec<Group> {
    let notes = json!({"notes": {"command": "notes-mcp", "instructions": NOTES}, "cal": {"command": "cal-mcp"}});
    let big = format!(
        "BIG SERVER GUIDE\n{}",
        "Read the whole table before you write.\n".repeat(700)
    );
    vec![
        Group {
            name: "ada",
            provider: "claude",
            skills: json!("all"),
            mcp: notes.clone(),
            cli_scope: "group",
        },
        Group {
            name: "bob",
            provider: "codex",
            skills: json!("all"),
            mcp: notes.clone(),
            cli_scope: "disabled",
        },
        Group {
            name: "cy",
            provider: "cursor",
            skills: json!(["onecli-gateway"]),
            mcp: notes.clone(),
            cli_scope: "group",
        },
        Group {
            name: "dee",
            provider: "opencode",
            skills: json!([]),
            mcp: json!({}),
            cli_scope: "group",
        },
        Group {
            name: "eve",
            provider: "ollama",
            skills: json!("all"),
            mcp: notes.clone(),
            cli_scope: "disabled",
        },
        Group {
            name: "fay",
            provider: "pi",
            skills: json!("all"),
            mcp: notes,
            cli_scope: "group",
        },
        // Over Codex's 32 KiB: the largest droppable section goes, for nanoclaw and clawmd.
        Group {
            name: "gus",
            provider: "codex",
            skills: json!("all"),
            mcp: json!({"big": {"command": "big-mcp", "instructions": big}}),
            cli_scope: "group",
        },
    ]
}

pub(crate) const MEMORY_MARK: &str =
    "MEMORY TREE MARKER: only the SessionStart hook delivers this.";
pub(crate) const SECRET: &str = "HOST SECRET behind a link: never delivered.";

/// The installed content, the same for both: the fixture, and per group its persona (two
/// prepend files and a link to a host file among them), its memory tree and its
/// `container.json` (as nanoclaw materialises it).
pub(crate) fn content() -> Deployment {
    let d = Deployment::new();
    let fixture = repo().join(FIXTURE);
    for top in ["container", "src"] {
        crate::support::copy_tree(&fixture.join(top), &d.path(top));
    }
    d.write("secret.txt", format!("{SECRET}\n").as_bytes());
    for group in groups() {
        let g = group.name;
        d.write(
            &format!("groups/{g}/instructions.prepend.md"),
            format!(
                "You are {g}, a {} agent.\nSign every message as {g}.\n",
                group.provider
            )
            .as_bytes(),
        );
        d.write(
            &format!("groups/{g}/tone.prepend.md"),
            b"\n  Answer in British English.  \n\n",
        );
        std::os::unix::fs::symlink(
            d.path("secret.txt"),
            d.path(&format!("groups/{g}/a-link.prepend.md")),
        )
        .unwrap();
        d.write(
            &format!("groups/{g}/memory/index.md"),
            format!("# Core Memory\n\n{MEMORY_MARK}\n").as_bytes(),
        );
        let config =
            json!({"provider": group.provider, "skills": group.skills, "mcpServers": group.mcp});
        d.write(
            &format!("groups/{g}/container.json"),
            serde_json::to_string_pretty(&config).unwrap().as_bytes(),
        );
    }
    d
}

/// The file nanoclaw's composer writes for `group` (its spec's `fileName`).
pub(crate) fn file_of(group: &Group) -> String {
    spec(group.provider)["fileName"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The recordings of nanoclaw's composer.
fn recordings() -> Recordings {
    Recordings::new(RECORDED, "nanoclaw's composer", RECORD_ENV)
}

/// nanoclaw's composer's recorded run: each group's document laid where it wrote it
/// (`groups/<group>/<fileName>`), and its log (one JSON line per entry, the deployment's root
/// as `$ROOT`).
fn install_recorded(d: &Deployment) -> String {
    let recorded = recordings();
    for group in groups() {
        let file = file_of(&group);
        let text = recorded.read(&format!("{}/{file}", group.name));
        d.write(&format!("groups/{}/{file}", group.name), &text);
    }
    String::from_utf8(recorded.read("composer.log")).unwrap()
}

/// What nanoclaw's composer logged: it refused the link among the prepend files, and dropped
/// gus's largest section.
fn assert_logged(log: &str) {
    assert!(log.contains("omitting prepend file"), "{log}");
    assert!(
        log.contains("dropped the largest instruction sections"),
        "{log}"
    );
}

/// clawmd as the runner calls it after `clawmd init`: each group's config handed with its
/// `cli_scope`. Returns compose's report per group.
fn compose_with_clawmd(d: &Deployment) -> Vec<Value> {
    let init = d.run(["init"]).success();
    eprintln!("{}", init.stderr());
    groups()
        .into_iter()
        .map(|group| {
            let config: Value =
                serde_json::from_str(&d.read(&format!("groups/{}/container.json", group.name)))
                    .unwrap();
            compose_as_runner(d, group.name, config, json!(group.cli_scope), &[])
        })
        .collect()
}

/// nanoclaw's document as its sections: each `# <name>` block (its heading line and its body's
/// lines, blank lines left out), after the header comment.
pub(crate) fn nanoclaw_sections(doc: &str) -> Vec<(String, Vec<String>)> {
    const HEADINGS: [&str; 7] = [
        "# Persona",
        "# NanoClaw Runtime Contract",
        "# Native Runtime Skills",
        "# NanoClaw Module: ",
        "# NanoClaw Skill: ",
        "# MCP Server: ",
        "# Omitted for size",
    ];
    let mut lines = doc.lines();
    assert!(
        lines
            .next()
            .unwrap()
            .starts_with("<!-- Composed at spawn - do not edit.")
    );
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let mut previous_blank = true;
    for line in lines {
        let starts = previous_blank
            && HEADINGS
                .iter()
                .any(|h| line == h.trim_end() || (h.ends_with(' ') && line.starts_with(h)));
        if starts {
            out.push((line.to_owned(), vec![line.to_owned()]));
        } else if !line.trim().is_empty() {
            out.last_mut()
                .expect("a section")
                .1
                .push(line.trim_end().to_owned());
        }
        previous_blank = line.trim().is_empty();
    }
    out
}

/// The host file the runner binds at `container` for `group` (the table `clawmd mounts` prints).
fn bound(root: &Path, group: &str, container: &str) -> PathBuf {
    mounts_with(root, group, &[])
        .into_iter()
        .find(|bind| bind.container == Path::new(container))
        .unwrap_or_else(|| panic!("{group}: nothing is bound at {container}"))
        .host
}

/// The memory block the real Claude Code CLI sends for `group`, in a container laid out as the
/// runner lays it out after the swap: its session folder, then `clawmd mounts`' table.
fn claude_block(root: &Path, group: &str, consumer: Consumer) -> String {
    let scratch = tempfile::tempdir().unwrap();
    let session = scratch.path().join("session");
    std::fs::create_dir(&session).unwrap();
    let mut binds = vec![Bind {
        host: session,
        container: PathBuf::from("/workspace"),
        readonly: false,
    }];
    binds.extend(mounts_with(root, group, &[]));
    let sandbox = Sandbox::in_scratch(binds, scratch.path(), "nanoclaw-v23");
    memory_block(&sandbox, tools(), consumer, RUN_TIMEOUT)
        .unwrap_or_else(|e| panic!("{group}: {e}"))
}

#[test]
fn every_line_nanoclaws_composer_gives_a_group_reaches_its_agent_through_clawmd_for_every_provider()
{
    let nanoclaw = content();
    let clawmd = content();
    assert_logged(&install_recorded(&nanoclaw));
    // clawmd's copy is an installed nanoclaw too: its composer wrote each group's document
    // before the swap.
    install_recorded(&clawmd);
    let memory_before: Vec<(String, std::fs::Metadata)> = groups()
        .iter()
        .map(|g| {
            let path = format!("groups/{}/memory/index.md", g.name);
            let meta = std::fs::metadata(clawmd.path(&path)).unwrap();
            (path, meta)
        })
        .collect();
    let reports = compose_with_clawmd(&clawmd);
    let mut failures = Vec::new();
    let mut sections_checked = 0;
    for (group, report) in groups().iter().zip(&reports) {
        let g = group.name;
        // gus is over its cap: what was dropped is missing, and only that.
        let missing = match g {
            "gus" => json!(["mcp:big"]),
            _ => json!([]),
        };
        assert_eq!(report["delivered"]["missing"], missing, "{report}");
        assert_eq!(report["delivered"]["complete"], g != "gus", "{report}");
        // nanoclaw's own document is nobody's text: replaced (or, where the provider reads
        // another file, removed) without a copy kept.
        assert_eq!(report["rescued"], json!([]), "{report}");
        if group.provider == "opencode" {
            assert!(
                std::fs::read_to_string(clawmd.path(&format!("groups/{g}/CLAUDE.md"))).is_err(),
                "{g}: nanoclaw's CLAUDE.md is left beside clawmd's AGENTS.md"
            );
        }
        let file = file_of(group);
        let theirs = nanoclaw.read(&format!("groups/{g}/{file}"));
        let sections = nanoclaw_sections(&theirs);
        let claude_code = matches!(group.provider, "claude" | "ollama");
        // What reaches clawmd's agent: the real CLI's block (and render's), or the flat document.
        let mut views: Vec<(String, String)> = Vec::new();
        if claude_code {
            // The CLI, and the Agent SDK nanoclaw's runner uses (settingSources
            // ['project','user']), of the release the e2e cache holds (the deployment pins
            // 2.1.257, which it does not; the sections are the same text in both); render for
            // that release predicts each block.
            for (consumer, flag) in [(Consumer::Cli, "cli"), (Consumer::sdk(), "sdk")] {
                let block = claude_block(clawmd.root(), g, consumer);
                let render = rendered(
                    clawmd.root(),
                    g,
                    &["--consumer", flag, "--claude-version", CLAUDE_CODE_VERSION],
                );
                if render != printed(&block) {
                    failures.push(format!("{g}: clawmd render differs from the real {flag} block\n--- render\n{render}\n--- real\n{block}"));
                }
                views.push((format!("the real Claude Code {flag}'s memory block"), block));
            }
            // The operator's sections are the managed policy; the persona (the agent's) is not.
            let policy = std::fs::read_to_string(
                bound(clawmd.root(), g, "/etc/claude-code").join("CLAUDE.md"),
            )
            .unwrap();
            let workspace =
                std::fs::read_to_string(bound(clawmd.root(), g, &format!("{WORKSPACE}/CLAUDE.md")))
                    .unwrap();
            assert!(
                policy.contains("# NanoClaw Runtime Contract") && !policy.contains("# Persona"),
                "{g}: {policy}"
            );
            assert!(
                workspace.contains("# Persona") && workspace.contains(&format!("You are {g}")),
                "{g}: {workspace}"
            );
        } else {
            let ours = std::fs::read_to_string(bound(
                clawmd.root(),
                g,
                &format!("{WORKSPACE}/{}", report["target"]["file"].as_str().unwrap()),
            ))
            .unwrap();
            // A flat document: every line of nanoclaw's, in nanoclaw's order, as one sequence.
            let all: Vec<String> = sections
                .iter()
                .flat_map(|(_, lines)| lines.clone())
                .collect();
            if let Err(missing) = in_order(&all, ours.lines()) {
                failures.push(format!("{g} ({}): nanoclaw's document is not in order in clawmd's at {missing:?}\n{ours}", group.provider));
            }
            // And nothing more than nanoclaw's: clawmd's own lines are its comments (Claude Code
            // strips them; the others show them) and the fence around MCP instructions.
            let theirs_lines: std::collections::BTreeSet<&str> =
                theirs.lines().map(str::trim_end).collect();
            for line in ours.lines().map(str::trim_end) {
                let own = line.is_empty()
                    || line.starts_with("<!-- Generated by clawmd")
                    || line.starts_with("<!-- clawmd section ")
                    || line.starts_with("Instructions for the MCP server `")
                    || line.trim_start_matches('`').is_empty()
                    || line == "```text";
                if !own && !theirs_lines.contains(line) {
                    failures.push(format!(
                        "{g} ({}): clawmd's document has a line nanoclaw's has not: {line:?}",
                        group.provider
                    ));
                }
            }
            views.push((format!("the {} document", group.provider), ours));
        }
        for (what, text) in &views {
            for (heading, lines) in &sections {
                sections_checked += 1;
                if let Err(missing) = in_order(lines, text.lines()) {
                    failures.push(format!("{g} ({}): {heading} does not reach the agent in {what}: missing {missing:?}", group.provider));
                }
            }
            for never in [
                "{{provider-memory-note}}",
                MEMORY_MARK,
                SECRET,
                "CLAUDE.local.md for",
            ] {
                if never == "CLAUDE.local.md for" && group.provider == "cursor" {
                    continue; // the note names CLAUDE.local.md as a file NOT to keep memory in
                }
                if text.contains(never) {
                    failures.push(format!("{g} ({}): {what} holds {never:?}", group.provider));
                }
            }
            if text.contains("Put this group's own memory in CLAUDE.local.md") {
                failures.push(format!(
                    "{g}: {what} tells the agent to keep its memory in CLAUDE.local.md"
                ));
            }
        }
        // Both left out cli and scheduling where cli_scope is disabled, and only there.
        let has_cli = theirs.contains("# NanoClaw Module: cli");
        assert_eq!(has_cli, group.cli_scope != "disabled", "{g}");
        assert_eq!(
            theirs.contains("# NanoClaw Module: scheduling"),
            group.cli_scope != "disabled",
            "{g}"
        );
        assert!(
            !clawmd.path(&format!("groups/{g}/CLAUDE.local.md")).exists(),
            "{g}: a CLAUDE.local.md was made"
        );
    }
    // gus: over Codex's cap nanoclaw dropped the big server's section and said so; clawmd too.
    let gus = &reports[6];
    assert_eq!(gus["dropped"][0]["section"], "mcp:big", "{gus}");
    assert!(
        nanoclaw
            .read("groups/gus/AGENTS.md")
            .contains("# Omitted for size")
    );
    for (path, before) in memory_before {
        let after = std::fs::metadata(clawmd.path(&path)).unwrap();
        assert_eq!(
            (before.len(), before.modified().unwrap()),
            (after.len(), after.modified().unwrap()),
            "{path} changed"
        );
        assert!(clawmd.read(&path).contains(MEMORY_MARK));
    }
    eprintln!(
        "e2e nanoclaw v2.3: {} groups, {sections_checked} section checks",
        groups().len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Runs nanoclaw's composer from the anchor on `d` (each group with its row and its spec), as
/// nanoclaw's spawn path does; returns its log, the deployment's root as `$ROOT`.
fn compose_with_nanoclaw(anchor: &Path, d: &Deployment) -> String {
    let inputs = tempfile::tempdir().unwrap();
    let mut rows = serde_json::Map::new();
    let mut specs = serde_json::Map::new();
    for group in groups() {
        rows.insert(
            group.name.to_owned(),
            json!({"agent_group_id": group.name, "mcp_servers": group.mcp.to_string(),
                   "skills": group.skills.to_string(), "cli_scope": group.cli_scope}),
        );
        specs.insert(group.name.to_owned(), spec(group.provider));
    }
    let (rows_file, specs_file) = (
        inputs.path().join("rows.json"),
        inputs.path().join("specs.json"),
    );
    std::fs::write(&rows_file, Value::Object(rows).to_string()).unwrap();
    std::fs::write(&specs_file, Value::Object(specs).to_string()).unwrap();
    composer_log(
        "nanoclaw's composer",
        Command::new(anchor.join("compose-driver/compose"))
            .arg(d.root())
            .arg(&specs_file)
            .arg(&rows_file)
            .args(groups().iter().map(|g| g.name)),
        d.root(),
    )
}

/// The recordings the test above reads are what nanoclaw's composer writes, run from the
/// anchor on the same content: each group's document byte for byte, the log line for line, and
/// nothing else written. And the fixture's `src/project-doc-compose.ts` (a stand-in holding
/// what `clawmd init` reads there) makes `clawmd init` write the same settings as nanoclaw's
/// real file. With `CLAWMD_NANOCLAW_V23_RECORD=1` the recordings are rewritten instead.
#[test]
#[ignore = "runs nanoclaw's composer from the anchor folder (CLAWMD_NANOCLAW_V23, default \
            /work/anchors/nanoclaw-v23-spawn), which a clean clone has not"]
fn the_recordings_are_what_nanoclaws_composer_writes() {
    let anchor = ANCHOR.holding(
        "compose-driver/compose",
        "nanoclaw v2.3's files and compose-driver/",
        &format!("{RECORDED}/README.md"),
    );
    let d = content();
    let before = everything(d.root());
    let log = compose_with_nanoclaw(&anchor, &d);
    assert_logged(&log);
    let after = everything(d.root());
    let written: Vec<String> = changes(&before, &after).into_keys().collect();
    let documents: Vec<String> = groups()
        .iter()
        .map(|g| format!("groups/{}/{}", g.name, file_of(g)))
        .collect();
    assert_eq!(
        written, documents,
        "the composer changed more than each group's document"
    );

    let mut recordings = recordings();
    for (group, document) in groups().iter().zip(&documents) {
        let Some(Entry::File(bytes)) = after.get(document) else {
            panic!("{document}: not a file: {:?}", after.get(document));
        };
        recordings.folder(
            group.name,
            &BTreeMap::from([(file_of(group), bytes.clone())]),
        );
    }
    recordings.file("composer.log", log.as_bytes());
    let names: Vec<&str> = groups().iter().map(|g| g.name).collect();
    recordings.finish(&names);

    // `clawmd init` reads the same from the fixture's stand-in as from nanoclaw's own file.
    let real = content();
    std::fs::copy(
        anchor.join("src/project-doc-compose.ts"),
        real.path("src/project-doc-compose.ts"),
    )
    .unwrap();
    let stand_in = content();
    let settings = |d: &Deployment| {
        d.run(["init"]).success();
        d.read("clawmd.json")
    };
    assert_eq!(settings(&stand_in), settings(&real));
}
