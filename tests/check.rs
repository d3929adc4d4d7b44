//! `clawmd check`, run as the real binary on temp deployments.

mod common;

use common::Deployment;

fn codes(run: &common::Run, group: usize) -> Vec<String> {
    run.json()["groups"][group]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn an_uncomposed_group_is_out_of_date() {
    let d = Deployment::standard().group("g", None);
    let run = d.run(["check", "g", "--json"]).expect_code(1);
    assert!(codes(&run, 0).contains(&"out-of-date".to_owned()));
    let finding = &run.json()["groups"][0]["findings"][0];
    assert!(
        finding["fix"]
            .as_str()
            .unwrap()
            .contains("clawmd compose g"),
        "{finding}"
    );
}

#[test]
fn a_hand_edit_a_disabled_skill_fragment_and_leftovers_are_found() {
    let d = Deployment::standard().group("g", None);
    d.run(["compose", "g"]).success();
    d.write("groups/g/container.json", br#"{"skills": ["hello"]}"#);
    let edited = d.read("groups/g/CLAUDE.md") + "my edit\n";
    d.write("groups/g/CLAUDE.md", edited.as_bytes());
    d.write("groups/g/.claude-fragments/.clawmd-tmp-1-2-3", b"x");
    d.write("groups/g/CLAUDE.md.rescued-0011223344556677", b"old edit");
    let run = d.run(["check", "--json"]).expect_code(1);
    let found = codes(&run, 0);
    for code in [
        "hand-edited",
        "disabled-skill-fragment",
        "stale-temp",
        "rescued-text",
    ] {
        assert!(found.contains(&code.to_owned()), "{code} in {found:?}");
    }
    let errors_first: Vec<_> = run.json()["groups"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["severity"].as_str().unwrap().to_owned())
        .collect();
    let mut sorted = errors_first.clone();
    sorted.sort();
    assert_eq!(errors_first, sorted, "errors before warnings");
}

#[test]
fn a_composed_group_in_copy_mode_is_detected_as_copy() {
    let d = Deployment::standard().group("g", None);
    d.run(["compose", "g", "--delivery", "copy"]).success();
    let run = d.run(["check", "g", "--json"]).success();
    assert_eq!(run.json()["groups"][0]["delivery"], "copy");
    assert_eq!(codes(&run, 0), Vec::<String>::new());
    // Checked against link delivery, the same group is out of date.
    let run = d
        .run(["check", "g", "--delivery", "link", "--json"])
        .expect_code(1);
    assert!(codes(&run, 0).contains(&"out-of-date".to_owned()));
}

#[test]
fn imports_in_inline_instructions_are_warned_about() {
    let d = Deployment::standard().group(
        "g",
        Some(r#"{"mcpServers": {"db": {"instructions": "see @/etc/hostname and @./container.json"}}}"#),
    );
    d.run(["compose", "g", "--delivery", "copy"]).success();
    let run = d.run(["check", "g", "--json"]).success();
    let finding = &run.json()["groups"][0]["findings"][0];
    assert_eq!(finding["code"], "import-in-instructions");
    assert_eq!(finding["severity"], "warning");
    assert!(
        finding["message"]
            .as_str()
            .unwrap()
            .contains("@/etc/hostname")
    );
}

#[test]
fn a_malformed_config_is_an_error_finding() {
    let d = Deployment::standard().group("g", Some("{ nope"));
    let run = d.run(["check", "g"]).expect_code(1);
    assert!(
        run.stdout().contains("error[bad-config]"),
        "{}",
        run.stdout()
    );
    assert!(
        run.stdout().contains("container.json:1:3"),
        "{}",
        run.stdout()
    );
}

#[test]
fn check_writes_nothing() {
    let d = Deployment::standard().group("g", None).group("h", None);
    d.run(["compose", "g"]).success();
    let before = d.snapshot();
    d.run(["check", "--all"]).expect_code(1);
    assert_eq!(d.snapshot(), before);
}
