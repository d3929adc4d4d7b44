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
    // Link delivery, so that skills have fragments a stale one can be left of.
    let d = Deployment::standard().group("g", None);
    d.run(["compose", "g", "--delivery", "link"]).success();
    d.write("groups/g/container.json", br#"{"skills": ["hello"]}"#);
    let edited = d.read("groups/g/CLAUDE.md") + "my edit\n";
    d.write("groups/g/CLAUDE.md", edited.as_bytes());
    d.write("groups/g/.claude-fragments/.clawmd-tmp-1-2-3", b"x");
    d.write("groups/g/CLAUDE.md.rescued-0011223344556677", b"old edit");
    let run = d
        .run(["check", "--json", "--delivery", "link"])
        .expect_code(1);
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

/// check expects what compose makes with the same settings (it no longer guesses the mode
/// from the disk), so the fix it suggests is the command that clears it.
#[test]
fn check_expects_the_configured_delivery_and_its_fix_works() {
    let d = Deployment::standard().group("g", None);
    d.run(["compose", "g", "--delivery", "copy"]).success();
    let run = d
        .run(["check", "g", "--delivery", "copy", "--json"])
        .success();
    assert_eq!(run.json()["groups"][0]["delivery"], "copy");
    assert_eq!(codes(&run, 0), Vec::<String>::new());
    // With no flag the deployment's delivery (the default, inline) is expected.
    let run = d.run(["check", "g", "--json"]).expect_code(1);
    assert_eq!(run.json()["groups"][0]["delivery"], "inline");
    assert!(codes(&run, 0).contains(&"out-of-date".to_owned()));
    for finding in run.json()["groups"][0]["findings"].as_array().unwrap() {
        if finding["severity"] == "error" {
            assert_eq!(finding["fix"], "run `clawmd compose g`", "{finding}");
        }
    }
    d.run(["compose", "g"]).success();
    let run = d.run(["check", "g", "--json"]).success();
    assert_eq!(codes(&run, 0), Vec::<String>::new());

    // clawmd.json and CLAWMD_DELIVERY are read by both commands alike.
    d.write("clawmd.json", br#"{"delivery": "copy"}"#);
    let run = d.run(["check", "g", "--json"]).expect_code(1);
    assert_eq!(run.json()["groups"][0]["delivery"], "copy");
    d.run(["compose", "g"]).success();
    d.run(["check", "g"]).success();
    let env = [
        ("CLAWMD_ROOT", d.root().as_os_str()),
        ("CLAWMD_DELIVERY", "inline".as_ref()),
    ];
    common::run_clawmd(["check", "g"], &env).expect_code(1);
    common::run_clawmd(["compose", "g"], &env).success();
    common::run_clawmd(["check", "g"], &env).success();
}

/// Link delivery without approval: compose says what does not reach the agent, check agrees,
/// and both fixes check suggests clear it.
#[test]
fn link_delivery_compose_and_check_agree_and_the_fixes_work() {
    let d = Deployment::standard().group("g", None);
    let run = d
        .run(["compose", "g", "--delivery", "link", "--json"])
        .success();
    let group = &run.json()["groups"][0];
    assert_eq!(group["delivered"]["complete"], false, "{group}");
    let missing = group["delivered"]["missing"].as_array().unwrap();
    for section in ["shared-base", "skill:hello", "skill:web"] {
        assert!(
            missing.iter().any(|m| m == section),
            "{section} in {missing:?}"
        );
    }
    let run = d
        .run(["check", "g", "--delivery", "link", "--json"])
        .expect_code(1);
    let found = codes(&run, 0);
    assert!(found.contains(&"not-delivered".to_owned()), "{found:?}");
    assert!(!found.contains(&"out-of-date".to_owned()), "{found:?}");
    for finding in run.json()["groups"][0]["findings"].as_array().unwrap() {
        if finding["severity"] == "error" {
            let fix = finding["fix"].as_str().unwrap();
            assert!(
                fix.contains("\"delivery\": \"inline\"") && fix.contains("approveExternal"),
                "{fix}"
            );
        }
    }
    // Fix 1: the runtime approves external imports, and clawmd is told so.
    d.write(
        "clawmd.json",
        br#"{"delivery": "link", "approveExternal": true}"#,
    );
    let run = d.run(["compose", "g", "--json"]).success();
    assert_eq!(run.json()["groups"][0]["delivered"]["complete"], true);
    d.run(["check", "g"]).success();
    // Fix 2: inline delivery.
    d.write("clawmd.json", br#"{"delivery": "inline"}"#);
    d.run(["check", "g"]).expect_code(1);
    let run = d.run(["compose", "g", "--json"]).success();
    assert_eq!(run.json()["groups"][0]["delivered"]["complete"], true);
    d.run(["check", "g"]).success();
}

#[test]
fn imports_in_inline_instructions_are_warned_about() {
    let d = Deployment::standard().group(
        "g",
        Some(r#"{"mcpServers": {"db": {"instructions": "see @/etc/hostname and @./container.json"}}}"#),
    );
    d.run(["compose", "g"]).success();
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
