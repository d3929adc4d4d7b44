//! `clawmd render` and the loader-based findings of `clawmd check`, run as the real binary.

use crate::support::{Deployment, snapshot};

/// The example deployment composed with this delivery mode, set in its `clawmd.json` (so
/// that render and check see the container's binds of that mode, as a runner's calls do).
fn composed(delivery: &str) -> Deployment {
    let d = Deployment::example().file("clawmd.json", &format!("{{\"delivery\": \"{delivery}\"}}"));
    d.run(["compose", "--all"]).success();
    d
}

#[test]
fn copy_delivery_reaches_the_agent_whole() {
    let d = composed("copy");
    let out = d.run(["render", "main"]).success().stdout();
    assert!(out.starts_with("<system-reminder>\n"), "{out}");
    for text in [
        "Contents of /workspace/agent/.claude-fragments/.claude-shared.md (project instructions, checked into the codebase)",
        "# Shared base for every agent",
        "## Skill: agent-browser",
        "## Skill: github",
        "## Skill: welcome",
        "Read-only access to the team's notes database.",
        "The team prefers answers in British English.",
    ] {
        assert!(out.contains(text), "missing {text:?} in\n{out}");
    }
    let research = d.run(["render", "research"]).success().stdout();
    assert!(!research.contains("## Skill: welcome"), "not selected");
}

#[test]
fn link_delivery_loses_the_shared_base_unless_external_imports_are_approved() {
    let d = composed("link");
    let out = d.run(["render", "main"]).success().stdout();
    assert!(!out.contains("# Shared base for every agent"), "{out}");
    assert!(!out.contains("## Skill:"), "{out}");
    assert!(out.contains("Read-only access to the team's notes database."));
    assert!(out.contains("The team prefers answers in British English."));

    let approved = d
        .run(["render", "main", "--approve-external"])
        .success()
        .stdout();
    assert!(
        approved.contains("Contents of /workspace/agent/.claude-fragments/.claude-shared.md"),
        "{approved}"
    );
    assert!(approved.contains("# Shared base for every agent"));
    assert!(approved.contains("## Skill: welcome"));
}

/// A note about a file (not an import) names the file (issue 42: "note     is empty once…").
#[test]
fn delivery_view_names_the_file_of_each_note() {
    let d = composed("managed");
    d.write("groups/ops/CLAUDE.local.md", b"<!-- only a comment -->\n");
    let out = d
        .run(["render", "ops", "--delivery-view"])
        .success()
        .stdout();
    assert!(
        out.contains("note     /workspace/agent/CLAUDE.local.md: is empty once"),
        "{out}"
    );
}

#[test]
fn delivery_view_says_what_is_dropped_and_why() {
    let d = composed("link");
    let out = d
        .run(["render", "ops", "--delivery-view"])
        .success()
        .stdout();
    assert!(out.contains("external imports not approved"), "{out}");
    assert!(
        out.contains("loaded   /workspace/agent/CLAUDE.local.md"),
        "{out}"
    );
    assert!(
        out.contains("@./.claude-fragments/.claude-shared.md is a link to /app/CLAUDE.md"),
        "{out}"
    );
    insta::with_settings!({filters => snapshot::filters(d.root())}, {
        insta::assert_snapshot!("render_delivery_view_link", out);
    });
}

#[test]
fn flat_and_messages_formats() {
    let d = composed("copy");
    let flat = d
        .run(["render", "ops", "--format", "flat"])
        .success()
        .stdout();
    assert!(!flat.contains("<system-reminder>"), "{flat}");
    assert!(flat.contains("## Skill: github"), "{flat}");
    let claude = d.run(["render", "ops"]).success().stdout();
    let messages = d
        .run(["render", "ops", "--format", "messages"])
        .success()
        .json();
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(
        format!("{}\n", messages[0]["content"].as_str().unwrap()),
        claude
    );
    assert_eq!(messages.as_array().unwrap().len(), 1);
}

#[test]
fn the_sdk_consumer_gets_local_memory_only_through_the_import() {
    let d = Deployment::standard()
        .group("g", None)
        .file("groups/g/CLAUDE.local.md", "MINE\n");
    d.run(["compose", "g", "--delivery", "copy"]).success();
    let sdk = d
        .run(["render", "g", "--consumer", "sdk"])
        .success()
        .stdout();
    assert_eq!(sdk.matches("MINE").count(), 1, "{sdk}");
    // A hand-written CLAUDE.md (where the runner binds the entry point from) that does not
    // import it: the SDK never sees CLAUDE.local.md.
    let d = Deployment::standard()
        .group("g", None)
        .file(&Deployment::composed("g", "CLAUDE.md"), "HAND\n")
        .file("groups/g/CLAUDE.local.md", "MINE\n");
    let sdk = d
        .run(["render", "g", "--consumer", "sdk"])
        .success()
        .stdout();
    assert!(sdk.contains("HAND") && !sdk.contains("MINE"), "{sdk}");
    let cli = d.run(["render", "g"]).success().stdout();
    assert!(cli.contains("MINE"), "{cli}");
}

#[test]
fn render_cwd_matches_a_conformance_case() {
    let case = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/clawmd-loader/tests/fixtures/conformance/03-imports-code");
    let temp = crate::support::TempTree::new();
    crate::support::copy_tree(&case.join("tree"), temp.root());
    let root = temp.root();
    let home = tempfile::tempdir().unwrap();
    let run = crate::support::run_clawmd(
        [
            "render",
            "--cwd",
            root.join("p").to_str().unwrap(),
            "--home",
            home.path().to_str().unwrap(),
        ],
        &[],
    )
    .success();
    let expected = std::fs::read_to_string(case.join("expected.txt"))
        .unwrap()
        .replace("{ROOT}", root.to_str().unwrap());
    assert_eq!(run.stdout(), expected);
}

#[test]
fn render_errors_name_the_group() {
    let d = Deployment::standard();
    let run = d.run(["render", "nope"]).expect_code(1);
    assert!(run.stderr().contains("nope"), "{}", run.stderr());
    assert_eq!(d.run(["render"]).code(), 2, "a group or --cwd is required");
}

#[test]
fn check_flags_link_delivery_and_passes_copy_delivery() {
    let d = composed("link");
    let run = d
        .run(["check", "--delivery", "link", "--json"])
        .expect_code(1);
    let json = run.json();
    for group in json["groups"].as_array().unwrap() {
        let finding = group["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["code"] == "external-import-dropped")
            .unwrap_or_else(|| panic!("{group}"));
        // The two fixes that work: approval (told to clawmd too), or managed delivery.
        let fix = finding["fix"].as_str().unwrap();
        assert!(
            fix.contains("\"approveExternal\": true") && fix.contains("\"delivery\": \"managed\""),
            "{finding}"
        );
    }
    d.run(["check", "--delivery", "link", "--approve-external"])
        .success();

    let d = composed("copy");
    let run = d.run(["check", "--delivery", "copy", "--json"]).success();
    for group in run.json()["groups"].as_array().unwrap() {
        for finding in group["findings"].as_array().unwrap() {
            assert_eq!(finding["severity"], "warning", "{finding}");
        }
    }
}

#[test]
fn check_finds_links_that_dangle_inside_the_container() {
    let d = Deployment::standard().group("g", None);
    d.run(["compose", "g", "--delivery", "link"]).success();
    std::fs::remove_file(d.path("container/skills/web/instructions.md")).unwrap();
    let run = d
        .run([
            "check",
            "g",
            "--delivery",
            "link",
            "--approve-external",
            "--json",
        ])
        .expect_code(1);
    let findings = run.json()["groups"][0]["findings"].clone();
    let dangling = findings
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "dangling-link")
        .unwrap_or_else(|| panic!("{findings}"));
    assert!(
        dangling["file"]
            .as_str()
            .unwrap()
            .ends_with("groups/g/.claude-fragments/web.md")
    );
    assert!(
        dangling["message"]
            .as_str()
            .unwrap()
            .contains("/app/skills/web/instructions.md")
    );
}

#[test]
fn check_warns_about_oversized_memory() {
    let d = Deployment::standard().group("g", None);
    d.run(["compose", "g"]).success();
    d.write("groups/g/CLAUDE.local.md", "x".repeat(41_000).as_bytes());
    let run = d.run(["check", "g", "--json"]).success();
    let codes: Vec<_> = run.json()["groups"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_owned())
        .collect();
    assert!(codes.contains(&"oversized".to_owned()), "{codes:?}");
}

#[test]
fn claude_version_selects_the_release_rules_and_wrapper() {
    let d = Deployment::new();
    d.write("w/p/CLAUDE.md", b"a\r\n`<!--` in code\r\n");
    let cwd = d.path("w/p");
    let render = |version: &str| {
        d.run([
            "render".as_ref(),
            "--cwd".as_ref(),
            cwd.as_os_str(),
            "--claude-version".as_ref(),
            std::ffi::OsStr::new(version),
        ])
    };
    // 2.1.330 keeps the CRs (nothing is stripped); 2.1.328 turns them into LF (case 38).
    let newest = render("2.1.330").success().stdout();
    assert!(
        newest.contains("\n\na\r\n`<!--` in code\n</system-reminder>"),
        "{newest:?}"
    );
    let pinned = render("2.1.328").success().stdout();
    assert!(
        pinned.contains("\n\na\n`<!--` in code\n</system-reminder>"),
        "{pinned:?}"
    );
    // Before 2.1.268: the other wrapper, with the date.
    let old = render("2.1.250").success().stdout();
    assert!(
        old.starts_with("<system-reminder>\nAs you answer the user's questions, you can use the following context:\n# claudeMd\n"),
        "{old}"
    );
    assert!(old.contains("\n# currentDate\nToday's date is 20"), "{old}");
    // The default is the newest release of the corpus, and the environment sets it too.
    let default = d
        .run(["render".as_ref(), "--cwd".as_ref(), cwd.as_os_str()])
        .success()
        .stdout();
    assert_eq!(default, newest);
    let from_env = crate::support::run_clawmd(
        ["render".as_ref(), "--cwd".as_ref(), cwd.as_os_str()],
        &[("CLAWMD_CLAUDE_VERSION", std::ffi::OsStr::new("2.1.250"))],
    )
    .success()
    .stdout();
    assert!(from_env.contains("# currentDate"), "{from_env}");
    // Outside the corpus: rendered with the nearest rules, with a warning.
    let unverified = render("2.1.329").success();
    assert_eq!(unverified.stdout(), pinned);
    assert!(
        unverified
            .stderr()
            .contains("2.1.329 is not in the conformance corpus"),
        "{}",
        unverified.stderr()
    );
    render("2.1").expect_code(2);
}

#[test]
fn check_warns_about_a_release_outside_the_corpus() {
    let d = composed("copy");
    let report = d
        .run(["check", "main", "--json", "--claude-version", "2.1.329"])
        .json();
    let codes: Vec<&str> = report["groups"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert!(codes.contains(&"claude-version-unverified"), "{report}");
    let report = d
        .run(["check", "main", "--json", "--claude-version", "2.1.328"])
        .json();
    assert!(
        !report.to_string().contains("claude-version-unverified"),
        "{report}"
    );
}

/// Issue 8, item 12: file names and import text an agent chose, with newlines and escape
/// sequences (screen clear, OSC 52 clipboard write, a forged summary line), are shown escaped
/// by `render --delivery-view` and by check's human output: no control character reaches the
/// terminal and no line is forged.
#[test]
fn delivery_view_and_check_escape_control_characters_from_disk() {
    let d = Deployment::standard().group("g", None);
    d.run(["compose", "g", "--delivery", "copy"]).success();
    let forged = "x\n0 group(s) checked: 0 error(s), 0 warning(s)\n\u{1b}[2J.md";
    d.write(&format!("groups/g/.claude/rules/{forged}"), b"Rule.\n");
    d.write(
        "groups/g/CLAUDE.local.md",
        "Mine. @./\u{1b}]52;c;cHduZWQ=\u{7}.md @./\u{9b}31m.md @./bidi\u{202e}dm.txt\n".as_bytes(),
    );
    let view = d.run(["render", "g", "--delivery-view"]).success().stdout();
    // check prints a group with an error on stderr, the summary on stdout: both are checked.
    let check = d.run(["check", "g"]).expect_code(1);
    let check = check.stdout() + &check.stderr();
    for (what, out) in [("render --delivery-view", &view), ("check", &check)] {
        let bad: Vec<char> = out
            .chars()
            .filter(|&c| (c.is_control() && c != '\n') || ('\u{202a}'..='\u{202e}').contains(&c))
            .collect();
        assert!(
            bad.is_empty(),
            "{what} printed control characters {bad:?}:\n{out}"
        );
        assert!(
            !out.lines().any(|l| l.starts_with("0 group(s) checked")),
            "{what} printed a forged line:\n{out}"
        );
    }
    assert!(view.contains("\\u{a}0 group(s) checked"), "{view}");
    assert!(view.contains("\\u{1b}]52;c;cHduZWQ=\\u{7}.md"), "{view}");
    assert!(check.contains("\\u{1b}]52;c;cHduZWQ=\\u{7}.md"), "{check}");
    assert!(check.contains("\\u{9b}31m.md"), "{check}");
}

/// Every label `render` prints is the release's own (issue 39): before 2.1.136 the managed
/// file carries the user's label (recorded, loader corpus case 31), in the block, the flat
/// document and the delivery view alike.
#[test]
fn every_label_render_prints_is_the_releases_own() {
    let d = composed("managed");
    let managed = "/etc/claude-code/CLAUDE.md";
    let user = "user's private global instructions for all projects";
    let policy = "organization-managed policy instructions";
    for (version, label) in [("2.1.128", user), ("2.1.328", policy)] {
        let run = |extra: &[&str]| {
            let mut args = vec!["render", "main", "--claude-version", version];
            args.extend_from_slice(extra);
            d.run(args).success().stdout()
        };
        let block = run(&[]);
        assert!(
            block.contains(&format!("Contents of {managed} ({label}):")),
            "{version}: {block}"
        );
        let view = run(&["--delivery-view"]);
        let line = view.lines().find(|l| l.contains(managed)).unwrap_or("");
        assert!(line.contains(label), "{version}: {view}");
        let flat = run(&["--format", "flat"]);
        assert!(
            flat.contains(&format!("<!-- {managed} ({label}) -->")),
            "{version}: {flat}"
        );
        let other = if label == user { policy } else { user };
        for out in [&block, &view, &flat] {
            assert!(!out.contains(other), "{version}: {out}");
        }
    }
}

/// The host's managed policy goes through the same path as every source: a `claudeMd` in its
/// settings (and in its drop-ins, merged in their order) is shown as the `<managed-settings>`
/// section on the releases that show one, and an import of its `CLAUDE.md` that cannot be
/// delivered is a warning.
#[test]
fn the_hosts_managed_settings_text_and_drop_ins_reach_render() {
    let d = Deployment::example()
        .file("clawmd.json", r#"{"hostManagedDir": "policy"}"#)
        .file("policy/CLAUDE.md", "ORG POLICY\n@./missing.md\n")
        .file(
            "policy/managed-settings.json",
            r#"{"claudeMd": "BASE TEXT"}"#,
        )
        .file(
            "policy/managed-settings.d/10.json",
            r#"{"claudeMd": "TEN"}"#,
        )
        .file(
            "policy/managed-settings.d/9.json",
            r#"{"claudeMd": "NINE"}"#,
        );
    let report = d.run(["compose", "main", "--json"]).success().json();
    let warnings = report["groups"][0]["warnings"].to_string();
    assert!(warnings.contains("missing.md"), "{warnings}");
    assert_eq!(
        report["groups"][0]["delivered"]["complete"], true,
        "{report}"
    );
    let settings = d.read("groups/.clawmd/binds/main/managed/managed-settings.json");
    assert!(settings.contains("\"claudeMd\": \"NINE\""), "{settings}");
    let out = d.run(["render", "main"]).success().stdout();
    assert!(
        out.contains("ORG POLICY")
            && out.contains(
                "Contents of <managed-settings> (organization-managed policy instructions):\n\nNINE\n"
            ),
        "{out}"
    );
    let old = d
        .run(["render", "main", "--claude-version", "2.1.128"])
        .success()
        .stdout();
    assert!(
        !old.contains("<managed-settings>") && old.contains("ORG POLICY"),
        "{old}"
    );
}

/// A policy helper in the host's managed settings computes managed settings at start-up,
/// which clawmd cannot know: the verdict is never complete, and says why.
#[test]
fn a_policy_helper_in_the_managed_settings_is_undecided() {
    let d = Deployment::example()
        .file("clawmd.json", r#"{"hostManagedDir": "policy"}"#)
        .file(
            "policy/managed-settings.json",
            r#"{"policyHelper": {"path": "/usr/local/bin/policy"}}"#,
        );
    let report = d.run(["compose", "main", "--json"]).json();
    let delivered = &report["groups"][0]["delivered"];
    assert_eq!(delivered["complete"], false, "{report}");
    assert!(
        delivered["undecided"].to_string().contains("policyHelper"),
        "{report}"
    );
}

/// A Codex group's agent reads its `AGENTS.md` as it is: render prints that document (it
/// printed nothing, and exited 0), and `--delivery-view` names the file.
#[test]
fn render_of_a_flat_backends_group_prints_its_document() {
    let d =
        Deployment::standard().group("cdx", Some(r#"{"provider": "codex", "skills": ["web"]}"#));
    let run = d.run(["render", "cdx"]).expect_code(1);
    assert!(
        run.stderr().contains("clawmd compose cdx"),
        "{}",
        run.stderr()
    );
    d.run(["compose", "cdx"]).success();
    let run = d.run(["render", "cdx"]).success();
    let document = d.read("groups/.clawmd/binds/cdx/AGENTS.md");
    assert_eq!(run.stdout(), document);
    assert!(
        document.contains("BASE") && document.contains("WEB"),
        "{document}"
    );
    let run = d.run(["render", "cdx", "--delivery-view"]).success();
    assert!(
        run.stdout().contains("AGENTS.md as it is"),
        "{}",
        run.stdout()
    );
}
