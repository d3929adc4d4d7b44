//! `clawmd migrate`, run as the real binary on temp deployments.

mod common;

use common::Deployment;

fn legacy_deployment() -> Deployment {
    let d = Deployment::standard()
        .group("solo", None)
        .file("groups/solo/CLAUDE.md", "# Solo\nhand-written rules\n")
        .group("both", None)
        .file("groups/both/CLAUDE.md", "legacy rules\n")
        .file("groups/both/CLAUDE.local.md", "local notes\n")
        .group("fresh", None)
        .file("groups/global/CLAUDE.md", "GLOBAL RULES\n");
    for group in ["solo", "both"] {
        std::os::unix::fs::symlink(
            "../global/CLAUDE.md",
            d.path(&format!("groups/{group}/.claude-global.md")),
        )
        .unwrap();
    }
    d
}

#[test]
fn removes_global_links_and_moves_legacy_text() {
    let d = legacy_deployment();
    let run = d.run(["migrate", "--json"]).success();
    assert!(!d.exists("groups/solo/.claude-global.md"));
    assert!(!d.exists("groups/both/.claude-global.md"));
    assert!(!d.exists("groups/solo/CLAUDE.md"));
    assert_eq!(
        d.read("groups/solo/CLAUDE.local.md"),
        "# Solo\nhand-written rules\n"
    );
    insta::assert_json_snapshot!(run.json(), {
        ".groups[].actions[].from" => insta::dynamic_redaction(redact_root),
        ".groups[].actions[].into" => insta::dynamic_redaction(redact_root),
        ".groups[].actions[].path" => insta::dynamic_redaction(redact_root),
    });
}

fn redact_root(value: insta::internals::Content, _: insta::internals::ContentPath<'_>) -> String {
    let text = value.as_str().unwrap_or_default();
    match text.find("/groups/").or_else(|| text.find("/container/")) {
        Some(index) if text.starts_with('/') => format!("[root]{}", &text[index..]),
        _ => text.to_owned(),
    }
}

#[test]
fn legacy_text_beside_an_existing_local_file_keeps_both_with_a_marker() {
    let d = legacy_deployment();
    d.run(["migrate"]).success();
    assert_eq!(
        d.read("groups/both/CLAUDE.local.md"),
        "local notes\n\n<!-- clawmd migrate: the text below was this group's hand-written CLAUDE.md -->\nlegacy rules\n"
    );
    assert!(!d.exists("groups/both/CLAUDE.md"));
}

#[test]
fn a_composed_claude_md_is_not_legacy() {
    let d = Deployment::standard().group("g", None);
    d.run(["compose", "g"]).success();
    let before = d.snapshot();
    let run = d.run(["migrate", "--json"]).success();
    assert_eq!(run.json()["groups"][0]["status"], "unchanged");
    assert_eq!(d.snapshot(), before);

    // Even a hand-edited composed file is compose's business (it is rescued there), not legacy.
    let edited = d.read("groups/g/CLAUDE.md") + "edit\n";
    d.write("groups/g/CLAUDE.md", edited.as_bytes());
    d.run(["migrate"]).success();
    assert_eq!(d.read("groups/g/CLAUDE.md"), edited);
}

#[test]
fn global_text_moves_into_the_shared_base_and_the_folder_goes_when_empty() {
    let d = legacy_deployment();
    d.run(["migrate"]).success();
    assert_eq!(
        d.read("container/CLAUDE.md"),
        "BASE\n\n<!-- clawmd migrate: the text below was groups/global/CLAUDE.md -->\nGLOBAL RULES\n"
    );
    assert!(!d.exists("groups/global"));
}

#[test]
fn global_text_already_in_the_shared_base_is_not_duplicated() {
    let d = Deployment::new()
        .file("container/CLAUDE.md", "intro\nGLOBAL RULES\nmore\n")
        .file("groups/global/CLAUDE.md", "GLOBAL RULES\n");
    d.run(["migrate"]).success();
    assert_eq!(d.read("container/CLAUDE.md"), "intro\nGLOBAL RULES\nmore\n");
    assert!(!d.exists("groups/global"));
}

#[test]
fn other_files_in_global_are_never_deleted() {
    let d = Deployment::new()
        .file("container/CLAUDE.md", "BASE\n")
        .file("groups/global/CLAUDE.md", "G\n")
        .file("groups/global/notes.txt", "keep me\n");
    let run = d.run(["migrate"]).success();
    assert_eq!(d.read("groups/global/notes.txt"), "keep me\n");
    assert!(!d.exists("groups/global/CLAUDE.md"));
    assert!(d.read("container/CLAUDE.md").ends_with("G\n"));
    assert!(run.stdout().contains("notes.txt"), "{}", run.stdout());
}

#[test]
fn a_second_run_does_nothing() {
    let d = legacy_deployment();
    d.run(["migrate"]).success();
    let before = d.snapshot();
    let run = d.run(["migrate", "--json"]).success();
    assert_eq!(d.snapshot(), before);
    for group in run.json()["groups"].as_array().unwrap() {
        assert_eq!(group["status"], "unchanged", "{group}");
    }
}

#[test]
fn dry_run_writes_nothing_and_says_what_it_would_do() {
    let d = legacy_deployment();
    let before = d.snapshot();
    let run = d.run(["migrate", "--dry-run"]).success();
    assert_eq!(d.snapshot(), before);
    let out = run.stdout();
    assert!(out.contains("solo: would migrate"), "{out}");
    assert!(out.contains("CLAUDE.md -> CLAUDE.local.md"), "{out}");
    assert!(out.contains("dry run"), "{out}");
}

#[test]
fn migrate_then_compose_gives_every_group_its_old_text() {
    let d = legacy_deployment();
    d.run(["migrate"]).success();
    d.run(["compose", "--all"]).success();
    assert_eq!(
        d.read("groups/solo/CLAUDE.local.md"),
        "# Solo\nhand-written rules\n"
    );
    assert!(
        d.read("groups/both/CLAUDE.local.md")
            .contains("legacy rules")
    );
    for group in ["solo", "both", "fresh"] {
        let names: Vec<_> = std::fs::read_dir(d.path(&format!("groups/{group}")))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(
            !names.iter().any(|n| n.starts_with("CLAUDE.md.rescued-")),
            "{group}: {names:?}"
        );
    }
}

#[test]
fn symlinked_legacy_files_are_refused() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "secret").unwrap();
    let d = Deployment::standard().group("g", None);
    std::os::unix::fs::symlink(outside.path().join("secret"), d.path("groups/g/CLAUDE.md"))
        .unwrap();
    let run = d.run(["migrate", "--json"]).expect_code(1);
    assert_eq!(run.json()["groups"][0]["error"]["code"], "unsafe-path");
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret")).unwrap(),
        "secret"
    );
    assert!(
        !d.exists("groups/g/CLAUDE.local.md"),
        "the link's target was not copied in"
    );
}

#[test]
fn a_regular_file_named_like_the_global_link_is_kept() {
    let d = Deployment::standard()
        .group("g", None)
        .file("groups/g/.claude-global.md", "text\n");
    let run = d.run(["migrate"]).success();
    assert_eq!(d.read("groups/g/.claude-global.md"), "text\n");
    assert!(
        run.stdout().contains("not a legacy link"),
        "{}",
        run.stdout()
    );
}
