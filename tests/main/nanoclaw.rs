//! The nanoclaw drop-in, at the command line: what a nanoclaw host hands clawmd must never
//! fail a spawn (server names with a space, `:` or `@`, nanoclaw's own providers), its module
//! guidance is a source like any other, and its generated files are recognised as generated.

use crate::support::Deployment;

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
    for delivery in ["inline", "copy", "link"] {
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
        // Only the group folder changed.
        let after = d.tree();
        for (path, entry) in &before {
            if !path.starts_with("groups/g/") {
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
            "inline" => d.read("groups/g/CLAUDE.md"),
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
        for marker in [
            "SPACE NAME",
            "COLON NAME",
            "AT NAME",
            "DOTS NAME",
            "NUL NAME",
            "COMMENT NAME",
        ] {
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
        for marker in [
            "SPACE NAME",
            "COLON NAME",
            "AT NAME",
            "DOTS NAME",
            "NUL NAME",
            "COMMENT NAME",
        ] {
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
