//! The example recipes of docs/recipes/, each copied into a fresh copy of the example
//! deployment as an operator would: `clawmd render` shows what the recipe promises, and what
//! it must not touch is byte for byte as it was. The built-in recipe written out composes
//! exactly what no recipe composes.

use std::path::Path;

use crate::support::{Deployment, in_order, tree::Tree};

const GROUPS: [&str; 3] = ["main", "research", "ops"];

fn render(d: &Deployment, group: &str) -> String {
    d.run(["render", group]).success().stdout()
}

/// Composes every group and checks compose says everything reaches the agent and check finds
/// nothing, in every delivery mode (`link` with external imports approved), inline last; then
/// in the default mode (managed), whose report is returned.
#[track_caller]
fn compose_everywhere(d: &Deployment) -> serde_json::Value {
    let mut last = serde_json::Value::Null;
    for delivery in ["copy", "link", "inline", "managed"] {
        let mut args = vec!["compose", "--all", "--json", "--delivery", delivery];
        let mut check = vec!["check", "--delivery", delivery];
        if delivery == "link" {
            args.push("--approve-external");
            check.push("--approve-external");
        }
        let report = d.run(&args).success().json();
        for group in report["groups"].as_array().unwrap() {
            assert_eq!(group["delivered"]["complete"], true, "{delivery}: {group}");
        }
        d.run(&check).success();
        last = report;
    }
    last
}

fn files_under(tree: &Tree, prefix: &str) -> Tree {
    tree.iter()
        .filter(|(path, _)| path.starts_with(prefix))
        .map(|(path, entry)| (path.clone(), entry.clone()))
        .collect()
}

#[test]
fn the_builtin_recipe_written_out_composes_the_same_bytes() {
    let plain = Deployment::example();
    plain.run(["compose", "--all"]).success();
    let written = Deployment::example().file(
        "clawmd.json",
        r#"{"sources": [{"kind": "shared"}, {"kind": "skills"}, {"kind": "mcp"}], "memory": "CLAUDE.local.md"}"#,
    );
    written.run(["compose", "--all"]).success();
    for group in GROUPS {
        let rel = format!("groups/{group}/CLAUDE.md");
        assert_eq!(plain.read(&rel), written.read(&rel), "{group}");
    }
}

#[test]
fn persona_first() {
    let d = Deployment::example()
        .with_recipe("persona-first")
        .file(
            "groups/main/persona.md",
            "# Persona\n\nYou are Ada, the main group's assistant. See @./notes.md and @/etc/hostname.\n",
        )
        .file("groups/main/notes.md", "PLANTED NOTES\n");
    let container_before = files_under(&d.tree(), "container/");
    compose_everywhere(&d);
    // Inline delivery: the persona first, then the guardrails.
    d.run(["compose", "--all", "--delivery", "inline"])
        .success();
    let inline = d
        .run(["render", "main", "--delivery", "inline"])
        .success()
        .stdout();
    in_order(
        &inline,
        &[
            "You are Ada",
            "# Shared base for every agent",
            "Instructions for the MCP server `notes-db`",
            "# Main group memory",
        ],
    );
    // Managed delivery (the default): the persona is the agent's to write, so it is never
    // part of the operator's managed policy: it follows the guardrails, in the workspace's
    // CLAUDE.md.
    d.run(["compose", "--all"]).success();
    assert!(!d.managed_md("main").contains("You are Ada"));
    let main = render(&d, "main");
    in_order(
        &main,
        &[
            "(organization-managed policy instructions)",
            "# Shared base for every agent",
            "Instructions for the MCP server `notes-db`",
            "Contents of /workspace/agent/CLAUDE.md",
            "You are Ada",
            "# Main group memory",
        ],
    );
    // The persona's imports are shown, never followed.
    assert!(main.contains("`@./notes.md`"), "{main}");
    assert!(!main.contains("PLANTED NOTES"), "{main}");
    // A group without a persona gets the rest, and no persona of another group.
    let research = render(&d, "research");
    assert!(!research.contains("You are Ada"), "{research}");
    in_order(
        &research,
        &["# Shared base for every agent", "# Research group memory"],
    );
    // Nothing else was touched: the container folder, the persona itself.
    assert_eq!(files_under(&d.tree(), "container/"), container_before);
    assert!(d.read("groups/main/persona.md").contains("@./notes.md"));
    // A persona the agent turned into a link is left out, with a warning; the group composes.
    std::fs::remove_file(d.path("groups/main/persona.md")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", d.path("groups/main/persona.md")).unwrap();
    let report = d.run(["compose", "main", "--json"]).success().json();
    let warning = &report["groups"][0]["warnings"][0];
    assert_eq!(warning["code"], "group-source-unread", "{report}");
    assert!(!render(&d, "main").contains("You are Ada"));
}

/// An agent-written persona too deeply nested for Claude Code's markdown parser (4 MB of
/// `"> "`, a red-team case: each quote level derives the text inside it, so lexing it would
/// derive gigabytes), on one line or many, is composed and reported as not reaching the
/// agent, with the reason; the other groups compose whole, and the next spawn of the group is
/// steady.
#[test]
fn a_persona_nested_past_the_parser_is_reported_missing_and_the_rest_composes() {
    let d = Deployment::example()
        .with_recipe("persona-first")
        .file("groups/main/persona.md", &"> ".repeat(2_000_000));
    let report = d.run(["compose", "--all", "--json"]).success().json();
    let groups = report["groups"].as_array().unwrap();
    let main = groups.iter().find(|g| g["group"] == "main").unwrap();
    assert_eq!(main["delivered"]["complete"], false, "{main}");
    assert_eq!(
        main["delivered"]["missing"],
        serde_json::json!(["persona"]),
        "{main}"
    );
    let reasons = main["delivered"]["reasons"].to_string();
    assert!(
        reasons.contains("nested deeper than Claude Code's markdown parser"),
        "{reasons}"
    );
    for group in groups.iter().filter(|g| g["group"] != "main") {
        assert_eq!(group["delivered"]["complete"], true, "{group}");
    }
    let again = d.run(["compose", "main", "--json"]).success().json();
    assert_eq!(again["groups"][0]["status"], "unchanged", "{again}");
    assert_eq!(
        again["groups"][0]["delivered"]["missing"],
        serde_json::json!(["persona"])
    );
    // The same depth over many lines (each level's text then made, not borrowed).
    let lines = format!("{}x\n", "> ".repeat(1_000)).repeat(2_000);
    let d = d.file("groups/main/persona.md", &lines);
    let report = d.run(["compose", "main", "--json"]).success().json();
    assert_eq!(report["groups"][0]["status"], "changed", "{report}");
    assert_eq!(
        report["groups"][0]["delivered"]["missing"],
        serde_json::json!(["persona"])
    );
}

#[test]
fn group_skills() {
    let d = Deployment::example()
        .with_recipe("group-skills")
        .file(
            "groups/research/skills/lab-notes/instructions.md",
            "LAB NOTES GUIDE: write one note per experiment.\n",
        )
        .file(
            "groups/research/skills/lab-notes/SKILL.md",
            "---\nname: lab-notes\n---\n",
        )
        .file(
            "groups/research/skills/no-guide/SKILL.md",
            "nothing to say\n",
        );
    let container_before = files_under(&d.tree(), "container/");
    let report = compose_everywhere(&d);
    // The group's own skills are the agent's to write: after the guardrails (the managed
    // policy), in the workspace's CLAUDE.md, never in the policy itself.
    let research = render(&d, "research");
    in_order(
        &research,
        &[
            "# Shared base for every agent",
            "agent-browser",
            "Search arXiv",
            "Contents of /workspace/agent/CLAUDE.md",
            "LAB NOTES GUIDE",
        ],
    );
    assert!(!d.managed_md("research").contains("LAB NOTES GUIDE"));
    // research enables agent-browser and scheduler only: a disabled shared skill stays out.
    let github =
        std::fs::read_to_string(d.path("container/skills/github/instructions.md")).unwrap();
    assert!(
        !research.contains(github.lines().next().unwrap()),
        "{research}"
    );
    // Other groups do not get research's own skill.
    assert!(!render(&d, "ops").contains("LAB NOTES GUIDE"));
    let groups = report["groups"].as_array().unwrap();
    let research_report = groups.iter().find(|g| g["group"] == "research").unwrap();
    assert_eq!(
        research_report["delivered"]["missing"],
        serde_json::json!([])
    );
    assert_eq!(files_under(&d.tree(), "container/"), container_before);
    // In copy delivery the group's skill has its own fragment, named apart from shared ones.
    d.run(["compose", "research", "--delivery", "copy"])
        .success();
    assert!(d.exists("groups/research/.claude-fragments/group-skill-lab-notes.md"));
    assert!(d.exists("groups/research/.claude-fragments/agent-browser.md"));
}

#[test]
fn operator_fragments() {
    let d = Deployment::example().with_recipe("operator-fragments");
    let fragments_before = files_under(&d.tree(), "container/fragments/");
    assert!(
        fragments_before.contains_key("container/fragments/house-rules.md"),
        "{fragments_before:?}"
    );
    compose_everywhere(&d);
    for group in GROUPS {
        let text = render(&d, group);
        in_order(
            &text,
            &[
                "# Shared base for every agent",
                "# House rules",
                "group memory",
            ],
        );
    }
    // Link delivery links to the folder where the container sees it.
    d.run(["compose", "ops", "--delivery", "link"]).success();
    assert_eq!(
        d.link("groups/ops/.claude-fragments/fragment-house-rules.md"),
        Path::new("/app/fragments/house-rules.md")
    );
    // Never changed, never pruned, whatever the groups.
    assert_eq!(
        files_under(&d.tree(), "container/fragments/"),
        fragments_before
    );
    // A per-group switch: the groups that list a fragment under the recipe's key do not get it.
    let d = Deployment::example()
        .with_recipe("operator-fragments")
        .file(
            "clawmd.json",
            r#"{"sources": [{"kind": "shared"},
                 {"kind": "fragments", "dir": "fragments", "dropListedIn": "disabled_fragments",
                  "drop": [{"when": {"role": "guest"}, "names": ["tone"]}]},
                 {"kind": "skills"}, {"kind": "mcp"}]}"#,
        )
        .file("container/fragments/tone.md", "TONE FRAGMENT\n")
        .file(
            "groups/ops/container.json",
            r#"{"skills": ["github"], "disabled_fragments": ["house-rules"], "role": "guest"}"#,
        );
    d.run(["compose", "--all"]).success();
    let ops = render(&d, "ops");
    assert!(
        !ops.contains("# House rules") && !ops.contains("TONE FRAGMENT"),
        "{ops}"
    );
    let main = render(&d, "main");
    assert!(
        main.contains("# House rules") && main.contains("TONE FRAGMENT"),
        "{main}"
    );
}

#[test]
fn skill_index() {
    let d = Deployment::example().with_recipe("skill-index");
    compose_everywhere(&d);
    let ops = render(&d, "ops");
    // ops enables github only: listed with its SKILL.md description and where to read it.
    assert!(
        ops.contains("- **github** (/app/skills/github/SKILL.md): Work with GitHub issues and pull requests through the gh CLI."),
        "{ops}"
    );
    for other in ["agent-browser", "welcome", "scheduler"] {
        assert!(!ops.contains(&format!("**{other}**")), "{other} in {ops}");
    }
    // No guidance text: the index only.
    for skill in ["github", "agent-browser", "welcome"] {
        let guide =
            std::fs::read_to_string(d.path(&format!("container/skills/{skill}/instructions.md")))
                .unwrap();
        let first = guide.lines().find(|l| !l.trim().is_empty()).unwrap();
        for group in GROUPS {
            assert!(
                !render(&d, group).contains(first),
                "{group} got {skill}'s text"
            );
        }
    }
    let research = render(&d, "research");
    in_order(&research, &["**agent-browser**", "**scheduler**"]);
}

#[test]
fn memory_folder() {
    let d = Deployment::example()
        .with_recipe("memory-folder")
        .file(
            "groups/ops/instructions.prepend.md",
            "STANDING: page the human on call before any production change.\n",
        )
        .file("groups/ops/memory/index.md", "- people.md\n")
        .file(
            "groups/ops/memory/people.md",
            "Sam is on call on Mondays.\n",
        );
    // A fresh group with no memory file at all.
    std::fs::create_dir_all(d.path("groups/fresh")).unwrap();
    let memory_before = files_under(&d.tree(), "groups/ops/memory/");
    compose_everywhere(&d);
    // The standing instructions are in the group folder, the agent's to write: in managed
    // delivery (the default) they follow the guardrails, in the workspace's CLAUDE.md; inline,
    // they come first.
    let ops = render(&d, "ops");
    in_order(
        &ops,
        &[
            "# Shared base for every agent",
            "# Your memory",
            "Contents of /workspace/agent/CLAUDE.md",
            "STANDING: page the human",
        ],
    );
    assert!(!d.managed_md("ops").contains("STANDING"));
    d.run(["compose", "ops", "--delivery", "inline"]).success();
    let inline = d
        .run(["render", "ops", "--delivery", "inline"])
        .success()
        .stdout();
    in_order(
        &inline,
        &[
            "STANDING: page the human",
            "# Shared base for every agent",
            "# Your memory",
            "You can read incidents",
        ],
    );
    d.run(["compose", "ops"]).success();
    // memory/ is the agent's: never read into the memory, never changed.
    assert!(!ops.contains("Sam is on call"), "{ops}");
    assert_eq!(files_under(&d.tree(), "groups/ops/memory/"), memory_before);
    // No CLAUDE.local.md is created, nor imported.
    assert!(!d.exists("groups/fresh/CLAUDE.local.md"));
    assert!(
        !d.read("groups/fresh/CLAUDE.md")
            .contains("CLAUDE.local.md\n@")
    );
    assert!(
        !d.read("groups/ops/CLAUDE.md")
            .contains("@./CLAUDE.local.md")
    );
    // The groups' existing CLAUDE.local.md files are left as they were.
    assert!(
        d.read("groups/ops/CLAUDE.local.md")
            .contains("# Ops group memory")
    );
}

/// A `group-files` source (nanoclaw's persona: `instructions.prepend.md`, then the other
/// `*.prepend.md` sorted): the lead file first, the others by name, each trimmed, empty ones
/// skipped, imports shown as text; a link, a FIFO, a folder or a file larger than Claude Code
/// reads among them is left out with a warning and the group composes, in every mode, with
/// none of their text; and in managed delivery the persona is outside the managed policy.
#[test]
fn group_files_in_order_and_hostile_entries_left_out() {
    let d = Deployment::standard();
    d.write(
        "clawmd.json",
        br#"{"sources": [
            {"kind": "group-files", "pattern": "*.prepend.md", "first": "instructions.prepend.md",
             "name": "persona", "heading": "Persona"},
            {"kind": "shared"}, {"kind": "skills"}, {"kind": "mcp"}]}"#,
    );
    d.write(
        "groups/main/instructions.prepend.md",
        b"\n  LEAD PERSONA see @./notes.md  \n",
    );
    d.write("groups/main/b.prepend.md", b"SECOND BY NAME\n");
    d.write("groups/main/a.prepend.md", b"FIRST BY NAME\n");
    d.write("groups/main/empty.prepend.md", b" \n\n");
    d.write("groups/main/notes.md", b"PLANTED NOTES\n");
    d.write("secret.txt", b"LINKED SECRET\n");
    std::os::unix::fs::symlink(d.path("secret.txt"), d.path("groups/main/link.prepend.md"))
        .unwrap();
    std::fs::create_dir(d.path("groups/main/dir.prepend.md")).unwrap();
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        d.path("groups/main/fifo.prepend.md"),
        rustix::fs::Mode::from_raw_mode(0o644),
    )
    .unwrap();
    let big = vec![b'x'; 4 * 1024 * 1024 + 1];
    d.write("groups/main/big.prepend.md", &big);
    d.write("groups/other/container.json", b"{}");
    let report = compose_everywhere(&d);
    let main = (report["groups"].as_array().unwrap().iter())
        .find(|g| g["group"] == "main")
        .unwrap();
    let unread: Vec<&str> = (main["warnings"].as_array().unwrap().iter())
        .filter(|w| w["code"] == "group-source-unread")
        .map(|w| w["message"].as_str().unwrap())
        .collect();
    for name in ["link.prepend.md", "fifo.prepend.md", "big.prepend.md"] {
        assert!(
            unread.iter().any(|m| m.contains(name)),
            "{name}: {unread:?}"
        );
    }
    let text = render(&d, "main");
    in_order(
        &text,
        &[
            "# Persona",
            "LEAD PERSONA see `@./notes.md`",
            "FIRST BY NAME",
            "SECOND BY NAME",
        ],
    );
    for never in ["PLANTED NOTES", "LINKED SECRET", "xxxxxxxx"] {
        assert!(!text.contains(never), "{never}");
    }
    // The managed policy holds the operator's sections, not the agent's persona.
    let policy = d.read("groups/.clawmd/binds/main/managed/CLAUDE.md");
    assert!(!policy.contains("LEAD PERSONA"), "{policy}");
    assert!(
        d.read("groups/.clawmd/binds/main/CLAUDE.md")
            .contains("LEAD PERSONA")
    );
    // Another group without prepend files gets no persona section.
    assert!(!render(&d, "other").contains("# Persona"));
}
