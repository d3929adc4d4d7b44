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

/// Runs clawmd with its address space capped (`ulimit -v`), as a host under memory pressure
/// would: a run that asks for gigabytes aborts instead of swapping.
fn run_capped(d: &Deployment, kib: u64, args: &[&str]) -> common::Run {
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_clawmd"))
        .args(args)
        .env_clear()
        .env("CLAWMD_ROOT", d.root())
        .output()
        .expect("run clawmd");
    common::Run { output }
}

/// Issue 8: one group's rule with 3.5 MB of `{a,b}` in its `paths:` made the loader ask for
/// gigabytes and abort, so `check --all` reported no group at all. Within 1 GiB of address
/// space, every group is now reported and the bomb is one finding.
#[test]
fn check_all_reports_every_group_when_one_holds_a_brace_bomb() {
    let bomb = format!(
        "---\npaths: \"{}\"\n---\nA conditional rule.\n",
        "{a,b}".repeat(700_000)
    );
    let d = Deployment::standard()
        .group("a", None)
        .group("hostile", None)
        .group("z", None);
    d.run(["compose", "--all"]).success();
    d.write("groups/hostile/.claude/rules/bomb.md", bomb.as_bytes());
    let run = run_capped(&d, 1024 * 1024, &["check", "--all", "--json"]).expect_code(1);
    let report = run.json();
    let groups: Vec<&str> = report["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["group"].as_str().unwrap())
        .collect();
    assert_eq!(groups, ["a", "hostile", "z"]);
    assert_eq!(codes(&run, 0), Vec::<String>::new());
    assert_eq!(codes(&run, 2), Vec::<String>::new());
    let finding = &report["groups"][1]["findings"][0];
    assert_eq!(finding["code"], "budget-exceeded", "{report}");
    assert!(
        finding["file"]
            .as_str()
            .unwrap()
            .ends_with("groups/hostile/.claude/rules/bomb.md"),
        "{finding}"
    );
    let render = run_capped(&d, 1024 * 1024, &["render", "hostile"]).success();
    assert!(!render.stdout().contains("A conditional rule."));
}
