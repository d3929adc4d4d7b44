//! The nanoclaw drop-in, at the command line: what a nanoclaw host hands clawmd must never
//! fail a spawn (server names with a space, `:` or `@`, nanoclaw's own providers), its module
//! guidance is a source like any other, and its generated files are recognised as generated.

use crate::support::Deployment;
use crate::support::deployment::NANOCLAW_MODULES;

/// The instructions of the servers of `any_server_name_composes_in_every_mode`.
const MARKERS: [&str; 6] = [
    "SPACE NAME",
    "COLON NAME",
    "AT NAME",
    "DOTS NAME",
    "NUL NAME",
    "COMMENT NAME",
];

/// MCP servers as nanoclaw's runner and the agent's own `add_mcp_server` tool name them:
/// any string. Each composes in every delivery mode, a name that must become a file name is
/// escaped, and nothing is written outside the group.
#[test]
fn any_server_name_composes_in_every_mode() {
    let config = r#"{"mcpServers": {
        "my server": {"instructions": "SPACE NAME"},
        "db:ro": {"instructions": "COLON NAME"},
        "me@host": {"instructions": "AT NAME"},
        "../x": {"instructions": "DOTS NAME"},
        "a\u0000b": {"instructions": "NUL NAME"},
        "x-->`y": {"instructions": "COMMENT NAME"},
        "no instructions here": {"command": "x"}
    }}"#;
    for delivery in ["managed", "inline", "copy", "link"] {
        let d = Deployment::standard().group("g", Some(config));
        let before = d.tree();
        let run = d
            .run(["compose", "g", "--json", "--delivery", delivery])
            .success();
        let report = run.json();
        let group = &report["groups"][0];
        assert_eq!(group["status"], "changed", "{delivery}: {report}");
        if delivery != "link" {
            assert_eq!(group["delivered"]["complete"], true, "{delivery}: {report}");
        }
        // Only the group folder (and its bind folder in the state) changed.
        let after = d.tree();
        for (path, entry) in &before {
            if !path.starts_with("groups/g/") && !path.starts_with("groups/.clawmd") {
                assert_eq!(after.get(path), Some(entry), "{delivery}: {path}");
            }
        }
        for path in after.keys() {
            assert!(
                path.starts_with("groups/g")
                    || path.starts_with("groups/.clawmd")
                    || before.contains_key(path),
                "{delivery}: {path} was created"
            );
        }
        let text = match delivery {
            "inline" => d.claude_md("g"),
            "managed" => d.managed_md("g"),
            _ => {
                let mut files = Vec::new();
                for entry in std::fs::read_dir(d.path("groups/g/.claude-fragments")).unwrap() {
                    files.push(entry.unwrap().file_name().into_string().unwrap());
                }
                files.sort();
                let mcp: Vec<&String> = files.iter().filter(|f| f.starts_with("mcp-")).collect();
                assert_eq!(
                    mcp,
                    [
                        "mcp-%2E%2E%2Fx.md",
                        "mcp-a%00b.md",
                        "mcp-db%3Aro.md",
                        "mcp-me%40host.md",
                        "mcp-my%20server.md",
                        "mcp-x--%3E%60y.md",
                    ],
                    "{delivery}"
                );
                files
                    .iter()
                    .filter(|f| f.starts_with("mcp-"))
                    .map(|f| d.read(&format!("groups/g/.claude-fragments/{f}")))
                    .collect::<Vec<_>>()
                    .join("\n")
            }
        };
        for marker in MARKERS {
            assert!(
                text.contains(marker),
                "{delivery}: {marker} missing from {text}"
            );
        }
        assert!(
            !text.contains("x-->`y"),
            "{delivery}: the name ends no comment: {text}"
        );
        // What the agent gets holds every instruction.
        let rendered = d.run(["render", "g"]).success().stdout();
        for marker in MARKERS {
            assert!(
                delivery == "link" || rendered.contains(marker),
                "{delivery}: {marker} not rendered"
            );
        }
    }
}

/// nanoclaw's providers: `mock` is its own (not a backend clawmd composes for: ignored with a
/// warning), `Claude` is what it lowercases. Neither fails a spawn.
#[test]
fn nanoclaws_providers_never_fail_a_spawn() {
    let d = Deployment::standard()
        .group("mocked", Some(r#"{"provider": "mock"}"#))
        .group("capital", Some(r#"{"provider": "Claude"}"#))
        .group("codex", Some(r#"{"provider": "CODEX"}"#));
    let report = d.run(["compose", "--all", "--json"]).success().json();
    let group = |name: &str| {
        report["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["group"] == name)
            .unwrap()
            .clone()
    };
    let mocked = group("mocked");
    assert_eq!(mocked["status"], "changed", "{mocked}");
    assert_eq!(mocked["target"]["provider"], "claude");
    let warning = &mocked["warnings"][0];
    assert_eq!(warning["code"], "ignored-config", "{mocked}");
    assert!(
        warning["message"].as_str().unwrap().contains("\"mock\""),
        "{warning}"
    );
    let capital = group("capital");
    assert_eq!(capital["target"]["provider"], "claude");
    assert_eq!(capital["warnings"], serde_json::json!([]), "{capital}");
    assert_eq!(group("codex")["target"]["file"], "AGENTS.md");
    // check agrees: nothing to fix.
    d.run(["check"]).success();
    // Human output says what is ignored.
    let run = d.run(["compose", "mocked", "-v"]).success();
    assert!(run.output().contains("mock"), "{}", run.output());
}

fn group_report(report: &serde_json::Value, name: &str) -> serde_json::Value {
    report["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["group"] == name)
        .unwrap_or_else(|| panic!("no group {name} in {report}"))
        .clone()
}

/// `clawmd init` on a nanoclaw checkout writes what it needs; a second run adds nothing.
#[test]
fn init_writes_down_what_a_nanoclaw_checkout_needs() {
    let d = Deployment::nanoclaw();
    let run = d.run(["init"]).success();
    assert!(
        run.stdout().contains("clawmd.json: written"),
        "{}",
        run.stdout()
    );
    let settings: serde_json::Value = serde_json::from_str(&d.read("clawmd.json")).unwrap();
    assert_eq!(settings["claudeCodeVersion"], "2.1.128", "{settings}");
    assert_eq!(settings["consumer"], "sdk");
    assert_eq!(settings["groupConfig"], "handed");
    let modules = &settings["sources"][2];
    assert_eq!(modules["dir"], "agent-runner/src/mcp-tools");
    assert_eq!(modules["mount"], "/app/src/mcp-tools");
    let before = d.read("clawmd.json");
    let again = d.run(["init"]).success();
    assert!(
        again.stdout().contains("nothing to add"),
        "{}",
        again.stdout()
    );
    assert_eq!(d.read("clawmd.json"), before);
    // check reads it without a warning.
    let run = d.run(["compose", "--all", "--json"]).success();
    assert!(!run.stderr().contains("unknown key"), "{}", run.stderr());
}

/// After init, every group's agent gets the six module fragments; a group whose runner
/// hands `cli_scope: disabled` gets five; the verdict judges the pinned release and consumer.
#[test]
fn module_guidance_reaches_every_group_and_cli_scope_is_honoured() {
    let d = Deployment::nanoclaw();
    d.run(["init"]).success();
    d.run(["migrate"]).success();
    std::fs::create_dir_all(d.path("groups/research")).unwrap();
    let report = d.run(["compose", "--all", "--json"]).success().json();
    for group in ["main", "research"] {
        let g = group_report(&report, group);
        assert_eq!(g["delivered"]["complete"], true, "{g}");
        let judged = &g["delivered"]["judged"];
        assert_eq!(judged["claude_code"], "2.1.128", "{judged}");
        assert_eq!(judged["consumer"], "sdk", "{judged}");
        assert_eq!(judged["claude_code_from"], "settings", "{judged}");
        let text = d.run(["render", group]).success().stdout();
        for module in NANOCLAW_MODULES {
            assert!(
                text.contains(&d.module_line(module)),
                "{group}: {module} missing"
            );
        }
    }
    // nanoclaw keeps cli_scope in its database: the runner hands it.
    let config = d.path("handed.json");
    std::fs::write(&config, r#"{"skills": "all", "cli_scope": "disabled"}"#).unwrap();
    let run = d
        .run([
            "compose",
            "research",
            "--json",
            "--config",
            config.to_str().unwrap(),
        ])
        .success();
    assert_eq!(run.json()["groups"][0]["delivered"]["complete"], true);
    let text = d.run(["render", "research"]).success().stdout();
    assert!(!text.contains(&d.module_line("cli")), "cli dropped");
    for module in ["agents", "core", "interactive", "scheduling", "self-mod"] {
        assert!(text.contains(&d.module_line(module)), "{module} kept");
    }
    // Kept for check (groupConfig: handed): check agrees with what the runner handed, and a
    // later compose without --config keeps it.
    d.run(["check", "research"]).success();
    d.run(["compose", "research"]).success();
    assert!(
        !d.run(["render", "research"])
            .success()
            .stdout()
            .contains(&d.module_line("cli"))
    );
    assert!(d.exists("groups/.clawmd/configs/research.json"));
    // Standard input works too.
    let mut command = crate::support::command(
        d.root(),
        &["compose", "research", "--json", "--config", "-"],
        &[],
    );
    command.stdin(std::process::Stdio::piped());
    command.stdout(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    std::io::Write::write_all(
        child.stdin.as_mut().unwrap(),
        br#"{"skills": "all", "cli_scope": "enabled"}"#,
    )
    .unwrap();
    drop(child.stdin.take());
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(
        d.run(["render", "research"])
            .success()
            .stdout()
            .contains(&d.module_line("cli"))
    );
}

/// Without init, the verdict still judges the release and consumer the checkout pins, and link
/// delivery is judged as 2.1.128 loads it (linked imports load without approval there).
#[test]
fn the_verdict_follows_the_deployments_pin() {
    let d = Deployment::nanoclaw();
    d.run(["migrate"]).success();
    let report = d.run(["compose", "main", "--json"]).success().json();
    let judged = &report["groups"][0]["delivered"]["judged"];
    assert_eq!(judged["claude_code"], "2.1.128", "{judged}");
    assert_eq!(judged["claude_code_from"], "deployment");
    assert_eq!(judged["consumer"], "sdk");
    assert_eq!(judged["consumer_from"], "deployment");
    // nanoclaw's pin is a recorded release of the conformance corpus.
    assert_eq!(judged["verified"], true);
    let link = d
        .run(["compose", "main", "--json", "--delivery", "link"])
        .success()
        .json();
    assert_eq!(link["groups"][0]["delivered"]["complete"], true, "{link}");
    // The newer release drops those links: the verdict says so when told that release.
    let newer = d
        .run([
            "compose",
            "main",
            "--json",
            "--delivery",
            "link",
            "--claude-version",
            "2.1.330",
        ])
        .success()
        .json();
    assert_eq!(
        newer["groups"][0]["delivered"]["complete"], false,
        "{newer}"
    );
    assert_eq!(
        newer["groups"][0]["delivered"]["judged"]["claude_code_from"],
        "flag"
    );
    let human = d.run(["compose", "main", "-v"]).success().stdout();
    assert!(
        human.contains("judged for Claude Code 2.1.128 Agent SDK"),
        "{human}"
    );
}

/// A fresh clone: migrate keeps `groups/global/CLAUDE.md` ("You are Main") aside and says so,
/// never edits `container/CLAUDE.md`; a new group is not told it is Main; main's own legacy text
/// becomes its CLAUDE.local.md without the import of the removed legacy link.
#[test]
fn a_fresh_clone_keeps_the_base_untouched_and_a_new_group_is_not_main() {
    let d = Deployment::nanoclaw();
    std::fs::create_dir_all(d.path("groups/research")).unwrap();
    let base = d.read("container/CLAUDE.md");
    let global = d.read("groups/global/CLAUDE.md");
    let report = d.run(["migrate", "--json"]).success().json();
    assert_eq!(
        d.read("container/CLAUDE.md"),
        base,
        "the base is upstream's"
    );
    assert!(!d.exists("groups/global"));
    let kept = format!(
        "groups/.clawmd/legacy/{}",
        clawmd::migrate::legacy_global_name(global.as_bytes())
    );
    assert_eq!(d.read(&kept), global, "kept aside, byte for byte");
    let g = group_report(&report, "global");
    assert_eq!(g["actions"][0]["action"], "keep-global", "{g}");
    assert!(
        g["warnings"][0]
            .as_str()
            .unwrap()
            .contains("is not given to any group"),
        "{g}"
    );
    let local = d.read("groups/main/CLAUDE.local.md");
    assert!(local.starts_with("# Main\n"), "{local}");
    assert!(!local.contains(".claude-global.md"), "{local}");
    d.run(["init"]).success();
    d.run(["compose", "--all"]).success();
    let research = d.run(["render", "research"]).success().stdout();
    assert!(!research.contains("You are Main"), "{research}");
    assert!(research.contains("You are a NanoClaw agent"), "{research}");
    // A second run does nothing; --append-global is the explicit choice the old way.
    let again = d.run(["migrate", "--json"]).success().json();
    for group in again["groups"].as_array().unwrap() {
        assert_eq!(group["status"], "unchanged", "{group}");
    }
    let d = Deployment::nanoclaw();
    d.run(["migrate", "--append-global"]).success();
    assert!(d.read("container/CLAUDE.md").contains("You are Main"));
}

/// An install that nanoclaw's own composer already ran on: its generated `CLAUDE.md`, shared
/// link and fragments are recognised as generated. migrate changes nothing; compose replaces
/// them, keeps no copy and leaves `CLAUDE.local.md` byte for byte.
#[test]
fn an_upgraded_group_keeps_its_memory_and_nothing_is_rescued() {
    let d = Deployment::nanoclaw();
    std::fs::remove_dir_all(d.path("groups/global")).unwrap();
    std::fs::remove_file(d.path("groups/main/CLAUDE.md")).unwrap();
    let local = "# Main\n\nThe user prefers short answers.\n";
    d.write("groups/main/CLAUDE.local.md", local.as_bytes());
    d.write(
        "groups/main/container.json",
        br#"{"mcpServers": {"db": {"command": "x", "instructions": "DB NOTES"}}, "skills": "all"}"#,
    );
    let mut imports = vec!["@./.claude-shared.md".to_owned()];
    let mut fragments = vec!["mcp-db.md".to_owned()];
    fragments.extend(NANOCLAW_MODULES.iter().map(|m| format!("module-{m}.md")));
    fragments.push("skill-onecli-gateway.md".to_owned());
    std::fs::create_dir_all(d.path("groups/main/.claude-fragments")).unwrap();
    for fragment in &fragments {
        imports.push(format!("@./.claude-fragments/{fragment}"));
        let path = d.path(&format!("groups/main/.claude-fragments/{fragment}"));
        match fragment.strip_prefix("module-") {
            Some(module) => std::os::unix::fs::symlink(
                format!(
                    "/app/src/mcp-tools/{}.instructions.md",
                    module.trim_end_matches(".md")
                ),
                &path,
            )
            .unwrap(),
            None if fragment.starts_with("skill-") => {
                std::os::unix::fs::symlink("/app/skills/onecli-gateway/instructions.md", &path)
                    .unwrap()
            }
            None => std::fs::write(&path, "DB NOTES").unwrap(),
        }
    }
    std::os::unix::fs::symlink("/app/CLAUDE.md", d.path("groups/main/.claude-shared.md")).unwrap();
    let generated = format!(
        "<!-- Composed at spawn \u{2014} do not edit. Edit CLAUDE.local.md for per-group content. -->\n{}\n",
        imports.join("\n")
    );
    d.write("groups/main/CLAUDE.md", generated.as_bytes());
    let migrated = d.run(["migrate", "--json"]).success().json();
    assert_eq!(
        group_report(&migrated, "main")["status"],
        "unchanged",
        "{migrated}"
    );
    assert_eq!(d.read("groups/main/CLAUDE.md"), generated);
    d.run(["init"]).success();
    let report = d.run(["compose", "main", "--json"]).success().json();
    let main = &report["groups"][0];
    assert_eq!(main["rescued"], serde_json::json!([]), "{main}");
    assert_eq!(main["delivered"]["complete"], true, "{main}");
    assert_eq!(d.read("groups/main/CLAUDE.local.md"), local);
    let leftovers: Vec<String> = crate::support::walk(d.root())
        .into_iter()
        .map(|(rel, _, _)| rel)
        .filter(|rel| rel.contains("rescued"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let text = d.run(["render", "main"]).success().stdout();
    for module in NANOCLAW_MODULES {
        assert!(text.contains(&d.module_line(module)), "{module}");
    }
    assert!(text.contains("The user prefers short answers."));
    assert!(text.contains("DB NOTES"));
    // The same file with a line someone added is a hand edit: kept, and reported.
    let d2 = Deployment::nanoclaw();
    std::fs::remove_dir_all(d2.path("groups/global")).unwrap();
    d2.write(
        "groups/main/CLAUDE.md",
        format!("{generated}Remember the client is Acme.\n").as_bytes(),
    );
    let migrated = d2.run(["migrate", "--json"]).success().json();
    assert_eq!(group_report(&migrated, "main")["status"], "unchanged");
    let report = d2.run(["compose", "main", "--json"]).success().json();
    assert_eq!(
        report["groups"][0]["rescued"].as_array().unwrap().len(),
        1,
        "{report}"
    );
}

/// What nanoclaw v2.0's own start-up migration leaves in every group it moved: the old
/// `CLAUDE.md` renamed to `CLAUDE.local.md` with its first line, `@./.claude-global.md`, an
/// import of the link it deleted. That is the group's memory (clawmd never changes it), and
/// the line reaches the agent as text as it did under nanoclaw: after the documented adoption,
/// `check` has nothing to report. Any other missing import is still an error.
#[test]
fn check_has_nothing_to_report_on_what_nanoclaws_migration_left() {
    let d = Deployment::nanoclaw();
    std::fs::remove_dir_all(d.path("groups/global")).unwrap();
    let old = d.read("groups/main/CLAUDE.md");
    assert!(old.starts_with("@./.claude-global.md\n"), "{old}");
    std::fs::rename(
        d.path("groups/main/CLAUDE.md"),
        d.path("groups/main/CLAUDE.local.md"),
    )
    .unwrap();
    d.run(["init"]).success();
    d.run(["migrate"]).success();
    let handed = d.path("main.json");
    std::fs::write(
        &handed,
        r#"{"skills": "all", "mcpServers": {}, "cli_scope": "group"}"#,
    )
    .unwrap();
    d.run(["compose", "main", "--config", handed.to_str().unwrap()])
        .success();
    assert_eq!(d.read("groups/main/CLAUDE.local.md"), old);
    let check = d.run(["check", "--json"]).success().json();
    assert_eq!(
        check["groups"][0]["findings"],
        serde_json::json!([]),
        "{check}"
    );
    // Another import of a missing file is the operator's to fix.
    d.write(
        "groups/main/CLAUDE.local.md",
        format!("@./notes.md\n{old}").as_bytes(),
    );
    let check = d.run(["check", "--json"]).json();
    let findings = check["groups"][0]["findings"].as_array().unwrap().clone();
    assert_eq!(findings.len(), 1, "{check}");
    assert_eq!(findings[0]["code"], "import-missing", "{check}");
    assert!(
        findings[0]["message"]
            .as_str()
            .unwrap()
            .contains("notes.md")
    );
}

/// A deployment holding today's nanoclaw checkout (the v2.3-era fixture's `container/` and
/// `src/`), not yet initialised.
fn todays_nanoclaw() -> Deployment {
    let d = Deployment::new();
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nanoclaw-v2.3");
    for top in ["container", "src"] {
        crate::support::copy_tree(&fixture.join(top), &d.path(top));
    }
    d
}

/// Today's nanoclaw (the v2.3-era fixture): `init` recognises `project-doc-compose.ts` and what
/// it writes composes a group of every provider with its persona first, no raw placeholder, no
/// `CLAUDE.local.md`, and `memory/` left alone; `check` has nothing to report.
#[test]
fn init_on_todays_nanoclaw_composes_every_provider_without_local_memory() {
    let d = todays_nanoclaw();
    let written = d.run(["init"]).success();
    let settings: serde_json::Value = serde_json::from_str(&d.read("clawmd.json")).unwrap();
    assert_eq!(settings["memory"], "none", "{}", written.stderr());
    assert_eq!(settings["claudeCodeVersion"], "2.1.257");
    for provider in ["claude", "codex", "cursor", "opencode", "ollama", "pi"] {
        let g = format!("g-{provider}");
        d.write(
            &format!("groups/{g}/instructions.prepend.md"),
            format!("PERSONA OF {g}\n").as_bytes(),
        );
        d.write(
            &format!("groups/{g}/memory/index.md"),
            b"MEMORY OF THE GROUP\n",
        );
        d.write(
            &format!("groups/{g}/container.json"),
            format!(r#"{{"provider": "{provider}", "skills": "all", "mcpServers": {{}}}}"#)
                .as_bytes(),
        );
        let handed = d.path(&format!("{g}.json"));
        std::fs::write(
            &handed,
            format!(r#"{{"provider": "{provider}", "skills": "all", "mcpServers": {{}}, "cli_scope": "disabled"}}"#),
        )
        .unwrap();
        let report = d
            .run([
                "compose",
                &g,
                "--json",
                "--config",
                handed.to_str().unwrap(),
            ])
            .success()
            .json();
        let group = &report["groups"][0];
        assert_eq!(group["delivered"]["complete"], true, "{group}");
        assert_eq!(report["warnings"], serde_json::json!([]), "{report}");
        if matches!(provider, "claude" | "ollama") {
            let judged = &group["delivered"]["judged"];
            assert_eq!(judged["claude_code"], "2.1.257", "{judged}");
            assert_eq!(judged["verified"], true, "recorded in the corpus: {judged}");
        }
        let text = d
            .run(["render", &g, "--consumer", "cli"])
            .success()
            .stdout();
        let text = match provider {
            "claude" | "ollama" => text,
            // A flat document is what its agent reads.
            _ => d.read(&format!(
                "groups/.clawmd/binds/{g}/{}",
                group["target"]["file"].as_str().unwrap()
            )),
        };
        assert!(
            text.contains(&format!("PERSONA OF {g}")),
            "{provider}: {text}"
        );
        assert!(text.contains("# NanoClaw Runtime Contract"), "{provider}");
        assert!(!text.contains("{{provider-memory-note}}"), "{provider}");
        assert!(!text.contains("MEMORY OF THE GROUP"), "{provider}");
        assert!(
            !text.contains("## Task scheduling"),
            "{provider}: cli_scope disabled"
        );
        assert_eq!(
            text.contains("# Native Runtime Skills"),
            matches!(provider, "codex" | "cursor"),
            "{provider}"
        );
        assert!(
            !d.path(&format!("groups/{g}/CLAUDE.local.md")).exists(),
            "{provider}"
        );
        assert_eq!(
            d.read(&format!("groups/{g}/memory/index.md")),
            "MEMORY OF THE GROUP\n"
        );
    }
    // Nothing to report: 2.1.257, the release today's nanoclaw pins, is in the conformance
    // corpus, so the verdicts of the groups that run Claude Code rest on its recordings.
    let check = d.run(["check", "--json"]).success().json();
    for group in check["groups"].as_array().unwrap() {
        assert_eq!(group["findings"], serde_json::json!([]), "{group}");
    }
}

/// The agent's own permission rules, judged for the release today's nanoclaw pins (2.1.257,
/// measured: its memory files are not checked against them, docs/delivery.md): a `Read` deny
/// rule naming the workspace's `CLAUDE.md` withholds nothing there, and the verdict is complete
/// and decided; the same rules under 2.1.328, which applies them, withhold the persona.
#[test]
fn the_agents_permission_rules_are_judged_for_nanoclaws_pinned_release() {
    let d = todays_nanoclaw();
    d.run(["init"]).success();
    let g = "g-claude";
    d.write(
        &format!("groups/{g}/instructions.prepend.md"),
        b"PERSONA OF THE GROUP\n",
    );
    d.write(
        &format!("groups/{g}/container.json"),
        br#"{"provider": "claude", "skills": "all", "mcpServers": {}}"#,
    );
    d.write(
        &format!("groups/{g}/.claude/settings.json"),
        br#"{"permissions": {"deny": ["Read(./.env)", "Read(./CLAUDE.md)"]}}"#,
    );
    let delivered = |version: &str| {
        let report = d
            .run(["compose", g, "--json", "--claude-version", version])
            .success()
            .json();
        report["groups"][0]["delivered"].clone()
    };
    let pinned = delivered("2.1.257");
    assert_eq!(pinned["complete"], true, "{pinned}");
    assert_eq!(pinned["undecided"], serde_json::json!([]), "{pinned}");
    assert_eq!(pinned["judged"]["claude_code"], "2.1.257", "{pinned}");
    let later = delivered("2.1.328");
    assert_eq!(later["complete"], false, "{later}");
    assert!(
        later["reasons"].to_string().contains("permissions.deny"),
        "{later}"
    );
}

/// On today's nanoclaw no `CLAUDE.local.md` reaches the agent, so a fix that says where to
/// move text of the group's own names the persona file the recipe delivers instead.
#[test]
fn fixes_on_todays_nanoclaw_send_the_groups_own_text_to_its_persona() {
    let d = todays_nanoclaw();
    d.run(["init"]).success();
    d.write("groups/g/container.json", b"{}");
    d.run(["compose", "g"]).success();
    let entry = d.read("groups/g/CLAUDE.md");
    d.write("groups/g/CLAUDE.md", format!("{entry}MY NOTE\n").as_bytes());
    let composed = d.run(["compose", "g"]).success();
    assert!(
        composed
            .stderr()
            .contains("move the text into the group folder's instructions.prepend.md"),
        "{}",
        composed.stderr()
    );
    let run = d.run(["check", "g", "--json"]).success();
    let fixes: Vec<String> = run.json()["groups"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["fix"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        fixes
            .iter()
            .any(|fix| fix.contains("into the group folder's instructions.prepend.md")),
        "{fixes:?}"
    );
    assert!(
        !fixes.iter().any(|fix| fix.contains("CLAUDE.local.md")),
        "{fixes:?}"
    );
}

/// A nanoclaw checkout composed before `clawmd init` wrote its clawmd.json gets the defaults
/// (no modules, no persona, the raw memory note): compose and check say to run init, init
/// itself does not, and after it nothing says so.
#[test]
fn a_nanoclaw_checkout_without_clawmd_json_is_told_to_run_init() {
    let d = todays_nanoclaw();
    d.write("groups/g/container.json", b"{}");
    let composed = d.run(["compose", "g", "--json"]).success();
    let warnings = composed.json()["warnings"].to_string();
    assert!(
        warnings.contains("no clawmd.json in a nanoclaw checkout")
            && warnings.contains("run `clawmd init`"),
        "{warnings}"
    );
    let checked = d.run(["check", "g"]);
    assert!(
        checked.stderr().contains("run `clawmd init`"),
        "{}",
        checked.stderr()
    );
    let init = d.run(["init"]).success();
    assert!(
        !init.stderr().contains("run `clawmd init`"),
        "{}",
        init.stderr()
    );
    let composed = d.run(["compose", "g"]).success();
    assert!(
        !composed.stderr().contains("clawmd init") && !composed.stdout().contains("clawmd init"),
        "{}",
        composed.stderr()
    );
}

/// With `"groupConfig": "handed"` (what init writes for today's nanoclaw), a group no runner
/// has handed a config for is composed from its container.json, which lacks nanoclaw's
/// `cli_scope`: compose and check say so until a config is handed.
#[test]
fn a_group_never_handed_a_config_is_said_to_be_composed_without_it() {
    let d = todays_nanoclaw();
    d.run(["init"]).success();
    d.write("groups/g/container.json", b"{}");
    let run = d.run(["compose", "g", "--json"]).success();
    let warnings = run.json()["groups"][0]["warnings"].to_string();
    assert!(warnings.contains("config-not-handed"), "{warnings}");
    let run = d.run(["check", "g", "--json"]).success();
    let findings = run.json()["groups"][0]["findings"].to_string();
    assert!(findings.contains("config-not-handed"), "{findings}");
    let handed = d.path("handed.json");
    std::fs::write(&handed, br#"{"cli_scope": "disabled"}"#).unwrap();
    let run = d
        .run([
            "compose",
            "g",
            "--config",
            handed.to_str().unwrap(),
            "--json",
        ])
        .success();
    let warnings = run.json()["groups"][0]["warnings"].to_string();
    assert!(!warnings.contains("config-not-handed"), "{warnings}");
    let run = d.run(["check", "g", "--json"]).success();
    let findings = run.json()["groups"][0]["findings"].to_string();
    assert!(!findings.contains("config-not-handed"), "{findings}");
}

/// The line of nanoclaw v2's runner (`src/container-runner.ts`, `buildMounts`) that names the
/// host folder it mounts as each group's `~/.claude`, by the group's agent group id.
const NANOCLAW_CLAUDE_DIR_LINE: &str =
    "  const claudeDir = path.join(DATA_DIR, 'v2-sessions', agentGroup.id, '.claude-shared');\n";

/// The `settings.json` nanoclaw v2.3 writes in each group's `.claude-shared` (recorded from its
/// spawn path: `tests/fixtures/nanoclaw-spawn/v2.3/nanoclaw/state.json`).
const NANOCLAWS_AGENT_SETTINGS: &str = r#"{
  "autoMemoryEnabled": false,
  "env": {
    "CLAUDE_CODE_ADDITIONAL_DIRECTORIES_CLAUDE_MD": "1",
    "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1"
  },
  "hooks": {
    "PreCompact": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "bun /app/src/compact-instructions.ts"
          }
        ]
      }
    ]
  }
}
"#;

/// The compose report of `group` with the config `handed`.
fn compose_handed(d: &Deployment, group: &str, handed: &str) -> serde_json::Value {
    let path = d.path("handed.json");
    std::fs::write(&path, handed).unwrap();
    let report = d
        .run([
            "compose",
            group,
            "--json",
            "--config",
            path.to_str().unwrap(),
        ])
        .success()
        .json();
    report["groups"][0].clone()
}

/// nanoclaw mounts `data/v2-sessions/<agent group id>/.claude-shared` as each agent's
/// `~/.claude`, which the agent can write: `init` says so in `claudeHome`, and the verdict reads
/// the settings there. nanoclaw's own settings file withholds nothing; an exclude the agent
/// adds to it withholds the persona (outside the managed policy) and the verdict says so; a
/// config with no usable `agentGroupId` leaves the verdict undecided, never complete. The
/// runner binds that home itself: `clawmd mounts` does not list it.
#[test]
fn the_agents_home_is_read_where_nanoclaw_mounts_it() {
    let d = todays_nanoclaw();
    d.write(
        "src/container-runner.ts",
        NANOCLAW_CLAUDE_DIR_LINE.as_bytes(),
    );
    d.run(["init"]).success();
    let settings: serde_json::Value = serde_json::from_str(&d.read("clawmd.json")).unwrap();
    assert_eq!(
        settings["claudeHome"],
        "data/v2-sessions/{agentGroupId}/.claude-shared"
    );
    d.write("groups/g/instructions.prepend.md", b"PERSONA OF G\n");
    d.write(
        "data/v2-sessions/ag-1/.claude-shared/settings.json",
        NANOCLAWS_AGENT_SETTINGS.as_bytes(),
    );
    let config = r#"{"provider": "claude", "skills": "all", "mcpServers": {}, "agentGroupId": "ag-1", "cli_scope": null}"#;
    let group = compose_handed(&d, "g", config);
    assert_eq!(group["delivered"]["complete"], true, "{group}");

    // The agent excludes its workspace's CLAUDE.md (the persona) in its ~/.claude.
    let mut written: serde_json::Value = serde_json::from_str(NANOCLAWS_AGENT_SETTINGS).unwrap();
    written["claudeMdExcludes"] = serde_json::json!(["/workspace/agent/CLAUDE.md"]);
    d.write(
        "data/v2-sessions/ag-1/.claude-shared/settings.json",
        written.to_string().as_bytes(),
    );
    let group = compose_handed(&d, "g", config);
    let delivered = &group["delivered"];
    assert_eq!(delivered["complete"], false, "{group}");
    assert_eq!(
        delivered["missing"],
        serde_json::json!(["persona"]),
        "{group}"
    );
    assert!(
        delivered["reasons"]
            .to_string()
            .contains("claudeMdExcludes pattern"),
        "{delivered}"
    );
    let check = d.run(["check", "g", "--json"]).expect_code(1).json();
    let findings = check["groups"][0]["findings"].to_string();
    assert!(findings.contains("not-delivered"), "{findings}");
    // Another group's home is not this one's.
    d.write("groups/h/instructions.prepend.md", b"PERSONA OF H\n");
    let other = config.replace("ag-1", "ag-2");
    assert_eq!(
        compose_handed(&d, "h", &other)["delivered"]["complete"],
        true
    );

    // No usable agent group id: the home cannot be named, so the verdict is undecided.
    for config in [
        r#"{"provider": "claude", "skills": "all", "mcpServers": {}, "cli_scope": null}"#,
        r#"{"provider": "claude", "skills": "all", "mcpServers": {}, "agentGroupId": "../ag-1", "cli_scope": null}"#,
    ] {
        let group = compose_handed(&d, "h", config);
        let delivered = &group["delivered"];
        assert_eq!(delivered["complete"], false, "{config}: {group}");
        assert!(
            delivered["undecided"].to_string().contains("agentGroupId"),
            "{config}: {delivered}"
        );
    }

    // nanoclaw binds the home itself; clawmd's table does not repeat it.
    compose_handed(&d, "g", config);
    let mounts = d.run(["mounts", "g", "--json"]).success().stdout();
    assert!(!mounts.contains("/home/node/.claude"), "{mounts}");
}

/// An agent rewriting its persona through a shared mapping (tests/support/mapped.rs: the
/// file's status stays as it was) still gets it composed at the next spawn: a group's record
/// keeps the files of the group folder by their bytes, never by their identity.
#[test]
fn a_persona_written_through_a_shared_mapping_is_composed_at_the_next_spawn() {
    let d = todays_nanoclaw();
    d.run(["init"]).success();
    const OLD: &[u8] = b"PERSONA: answer in English.\n";
    const NEW: &[u8] = b"PERSONA: answer in Spanish.\n";
    d.write("groups/g/instructions.prepend.md", OLD);
    let config = r#"{"provider": "claude", "skills": "all", "mcpServers": {}, "cli_scope": null}"#;
    compose_handed(&d, "g", config);
    let persona_in = |d: &Deployment| {
        let text = d
            .run(["render", "g", "--consumer", "cli"])
            .success()
            .stdout();
        text.contains("Spanish")
    };
    let path = d.path("groups/g/instructions.prepend.md");
    let mut mapped = crate::support::mapped::Mapped::new(&path, OLD.len());
    crate::support::mapped::settled_rounds(&mut mapped, OLD, |mapped| {
        // The first run after the files settled records the look; the second is answered.
        compose_handed(&d, "g", config);
        compose_handed(&d, "g", config);
        assert!(!persona_in(&d));
        mapped.write(NEW);
        let status = mapped.status();
        compose_handed(&d, "g", config);
        assert!(
            persona_in(&d),
            "the persona written through the mapping is composed"
        );
        status
    });
}
