//! `clawmd check`, run as the real binary on temp deployments.

use crate::support::{Deployment, snapshot};

fn codes(run: &crate::support::Run, group: usize) -> Vec<String> {
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

/// check reports the typos compose warns about, and a missing group the way compose does.
#[test]
fn check_reports_typos_and_a_missing_group_like_compose() {
    let d = Deployment::standard()
        .group("main", Some(r#"{"skils": ["web"], "imageTag": "v2"}"#))
        .group("ops", Some(r#"{"skills": ["webb"]}"#));
    d.run(["compose", "--all"]).success();
    let run = d.run(["check", "--json"]).success();
    assert_eq!(codes(&run, 0), ["unknown-key"]);
    let finding = &run.json()["groups"][0]["findings"][0];
    assert_eq!(finding["severity"], "warning");
    assert!(
        finding["file"]
            .as_str()
            .unwrap()
            .ends_with("groups/main/container.json")
    );
    assert_eq!(
        finding["fix"],
        "rename `skils` to `skills` in container.json"
    );
    assert_eq!(codes(&run, 1), ["unknown-skill"]);
    assert!(
        run.json()["groups"][1]["findings"][0]["message"]
            .as_str()
            .unwrap()
            .contains("did you mean `web`?")
    );

    let run = d.run(["check", "mian", "--json"]).expect_code(1);
    assert_eq!(codes(&run, 0), ["missing-group"]);
    assert!(
        run.json()["groups"][0]["findings"][0]["message"]
            .as_str()
            .unwrap()
            .contains("did you mean `main`?")
    );
}

/// check reports what compose only warns of on stderr: a missing shared base (every group is
/// composed without it, so it is an error) and a config value clawmd ignores.
#[test]
fn a_missing_shared_base_and_an_ignored_provider_are_findings() {
    let d = Deployment::standard()
        .group("main", None)
        .group("ops", Some(r#"{"provider": "codx"}"#));
    d.run(["compose", "--all"]).success();
    let run = d.run(["check", "--json"]).success();
    assert_eq!(codes(&run, 0), Vec::<String>::new());
    assert_eq!(codes(&run, 1), ["ignored-config"]);
    let finding = &run.json()["groups"][1]["findings"][0];
    assert_eq!(finding["severity"], "warning");
    assert_eq!(
        finding["fix"],
        "correct or remove `provider` in container.json"
    );

    std::fs::remove_file(d.path("container/CLAUDE.md")).unwrap();
    d.run(["compose", "--all"]).success();
    let run = d.run(["check", "--json"]).expect_code(1);
    for group in 0..2 {
        assert!(codes(&run, group).contains(&"missing-shared-base".to_owned()));
    }
    let finding = &run.json()["groups"][0]["findings"][0];
    assert_eq!(finding["severity"], "error");
    assert!(
        finding["file"]
            .as_str()
            .unwrap()
            .ends_with("container/CLAUDE.md"),
        "{finding}"
    );
}

#[test]
fn a_hand_edit_a_disabled_skill_fragment_and_leftovers_are_found() {
    // Link delivery, so that skills have fragments a stale one can be left of.
    let d = Deployment::standard().group("g", None);
    d.run(["compose", "g", "--delivery", "link"]).success();
    d.write("groups/g/container.json", br#"{"skills": ["hello"]}"#);
    // A run interrupted after it wrote its temps (and before it put anything in place).
    let left = d.crash_leaving_temps(
        &["compose", "g", "--delivery", "link"],
        &["groups/.clawmd/binds/g"],
    );
    // A hand edit of the composed CLAUDE.md (in the group's bind folder in the state).
    let edited = d.claude_md("g") + "my edit\n";
    d.write(&Deployment::composed("g", "CLAUDE.md"), edited.as_bytes());
    // A rescue compose kept (in the state folder), and a file the agent named like one.
    d.write(
        "groups/.clawmd/rescues/g/CLAUDE.md.rescued-0011223344556677",
        b"old edit",
    );
    d.write("groups/g/CLAUDE.md.rescued-8899aabbccddeeff", b"planted");
    let run = d
        .run(["check", "--json", "--delivery", "link"])
        .expect_code(1);
    let found = codes(&run, 0);
    for code in [
        "hand-edited",
        "disabled-skill-fragment",
        "stale-temp",
        "rescued-text",
        "legacy-rescues",
    ] {
        assert!(found.contains(&code.to_owned()), "{code} in {found:?}");
    }
    let files = |code: &str| run.finding_files(0, code);
    let mut stale = files("stale-temp");
    stale.sort();
    let mut expected: Vec<String> = left
        .iter()
        .map(|rel| d.path(rel).display().to_string())
        .collect();
    expected.sort();
    assert_eq!(stale, expected);
    assert_eq!(
        files("rescued-text"),
        [
            d.path("groups/.clawmd/rescues/g/CLAUDE.md.rescued-0011223344556677")
                .display()
                .to_string()
        ]
    );
    assert_eq!(
        files("legacy-rescues"),
        [d.path("groups/g").display().to_string()]
    );
    let errors_first: Vec<_> = run.json()["groups"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["severity"].as_str().unwrap().to_owned())
        .collect();
    let mut sorted = errors_first.clone();
    sorted.sort();
    assert_eq!(errors_first, sorted, "errors before warnings");
    // The same findings, as a person reads them.
    let human = d.run(["check", "--delivery", "link"]).expect_code(1);
    insta::with_settings!({filters => snapshot::filters(d.root())}, {
        insta::assert_snapshot!("check_findings_human", snapshot::streams(&human));
    });
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
    // With no flag the deployment's delivery (the default, managed) is expected.
    let run = d.run(["check", "g", "--json"]).expect_code(1);
    assert_eq!(run.json()["groups"][0]["delivery"], "managed");
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
    crate::support::run_clawmd(["check", "g"], &env).expect_code(1);
    crate::support::run_clawmd(["compose", "g"], &env).success();
    crate::support::run_clawmd(["check", "g"], &env).success();
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
                fix.contains("\"delivery\": \"managed\"") && fix.contains("approveExternal"),
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
    // Fix 2: managed delivery (the fix's words, the default).
    d.write("clawmd.json", br#"{"delivery": "managed"}"#);
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
    // Errors go to stderr.
    assert!(
        run.stderr().contains("error[bad-config]"),
        "{}",
        run.stderr()
    );
    assert!(
        run.stderr().contains("container.json:1:3"),
        "{}",
        run.stderr()
    );
}

/// Check changes nothing of the deployment: no group folder, composed file or compose record.
/// It keeps only its own records (`<state>/checks/<group>`, clawmd's cache, which no agent
/// sees, written under the group's lock with its temp in the lock's journal), and a check
/// that finds every group as recorded writes nothing at all.
#[test]
fn check_writes_nothing_but_its_records() {
    let d = Deployment::standard().group("g", None).group("h", None);
    d.run(["compose", "g"]).success();
    let bookkeeping = [
        "groups/.clawmd/checks",
        "groups/.clawmd/journal",
        "groups/.clawmd-locks",
    ];
    let deployment = |snapshot: Vec<(String, String, u64, i64, i64)>| {
        (snapshot.into_iter())
            .filter(|entry| !bookkeeping.iter().any(|b| entry.0.starts_with(b)))
            // The state folder's own time changes when its `checks` folder is made.
            .map(|entry| match entry.0 == "groups/.clawmd" {
                true => (entry.0, entry.1, entry.2, 0, 0),
                false => entry,
            })
            .collect::<Vec<_>>()
    };
    let before = d.snapshot();
    d.run(["check", "--all"]).expect_code(1);
    let checked = d.snapshot();
    assert_eq!(deployment(checked.clone()), deployment(before));
    for group in ["g", "h"] {
        let record = format!("groups/.clawmd/checks/{group}");
        assert!(
            checked.iter().any(|entry| entry.0 == record),
            "{checked:#?}"
        );
    }
    d.run(["check", "--all"]).expect_code(1);
    assert_eq!(d.snapshot(), checked);
}

/// A name that is not a group's is a finding, and check opens and writes nothing for it: no
/// record is read (an empty file planted where `checks/../g` leads is never opened: inotify sees no
/// `IN_OPEN`), and no record, lock or journal is written, inside the state folder or out of it.
#[test]
fn a_name_that_is_not_a_groups_gets_no_record() {
    use rustix::fs::inotify;
    let d = Deployment::standard().group("g", None);
    d.run(["compose", "g"]).success();
    d.run(["check", "g"]).success();
    d.write("groups/.clawmd/g", b"");
    let before = d.snapshot();
    let watch =
        inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC).unwrap();
    inotify::add_watch(
        &watch,
        d.path("groups/.clawmd/g"),
        inotify::WatchFlags::OPEN,
    )
    .unwrap();
    for name in ["../g", "../../x", "global", "g/..", ".clawmd"] {
        let json = d.run(["check", name, "--json"]).expect_code(1).json();
        let code = &json["groups"][0]["findings"][0]["code"];
        assert!(
            ["bad-group-name", "reserved-group"].contains(&code.as_str().unwrap_or_default()),
            "{name}: {json}"
        );
    }
    let mut events = [0u8; 256];
    let opened = rustix::io::read(&watch, &mut events).unwrap_or(0);
    assert_eq!(opened, 0, "a file outside the records was opened as one");
    assert_eq!(d.snapshot(), before);
    assert!(!d.path("x.lock").exists() && !d.path("../x.lock").exists());
}

/// A deployment never composed has no state folder, and check makes none.
#[test]
fn check_makes_no_state_folder() {
    let d = Deployment::standard().group("g", None);
    let before = d.snapshot();
    d.run(["check", "--all"]).expect_code(1);
    assert_eq!(d.snapshot(), before);
}

/// Runs clawmd with its address space capped (`ulimit -v`), as a host under memory pressure
/// would: a run that asks for gigabytes aborts instead of swapping.
fn run_capped(d: &Deployment, kib: u64, args: &[&str]) -> crate::support::Run {
    let mut command = std::process::Command::new("sh");
    command
        .arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_clawmd"))
        .args(args)
        .env_clear()
        .env("CLAWMD_ROOT", d.root());
    crate::support::run_within(&mut command, crate::support::RUN_LIMIT)
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

/// The same finding in many groups is printed once with the groups it is in (unless -v);
/// -q prints only errors; a run that cannot start says its cause once.
#[test]
fn repeated_findings_are_grouped_and_causes_said_once() {
    let mut d = Deployment::standard();
    for i in 0..6 {
        d = d.group(&format!("g{i}"), None);
    }
    let run = d.run(["check"]).expect_code(1);
    let err = run.stderr();
    assert!(
        err.starts_with("error[out-of-date] 6 groups: g0, g1, g2, g3, g4, and 1 more\n  e.g. g0: "),
        "{err}"
    );
    assert_eq!(err.matches("out-of-date").count(), 1, "{err}");
    assert_eq!(
        run.stdout(),
        "6 group(s) checked: 6 error(s), 0 warning(s)\n"
    );
    let verbose = d.run(["check", "-v"]).expect_code(1);
    assert_eq!(verbose.stderr().matches("error[out-of-date]").count(), 6);
    d.run(["compose", "--all"]).success();
    // Temps left by a run interrupted after writing them, the composition itself unchanged.
    let config = d.path("groups/g0/container.json");
    let had = std::fs::read(&config).ok();
    d.write("groups/g0/container.json", br#"{"skills": ["hello"]}"#);
    d.crash_leaving_temps(&["compose", "g0"], &["groups/.clawmd/binds/g0/managed"]);
    match had {
        Some(bytes) => d.write("groups/g0/container.json", &bytes),
        None => std::fs::remove_file(&config).unwrap(),
    }
    let quiet = d.run(["check", "-q"]).success();
    assert_eq!(
        (quiet.stdout(), quiet.stderr()),
        (String::new(), String::new())
    );
    let run = d.run(["check"]).success();
    assert!(
        run.stdout().contains("warning[stale-temp]"),
        "{}",
        run.stdout()
    );

    let run = crate::support::run_clawmd(["check", "--root", "/nonexistent"], &[]).expect_code(1);
    assert_eq!(
        run.stderr().matches("No such file").count(),
        1,
        "{}",
        run.stderr()
    );
}

/// Every code the binary can emit (the whole `Code` enum) is documented in
/// docs/json-report.md, as `` `code` ``.
#[test]
fn every_code_is_documented_in_json_report_md() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/json-report.md"))
        .unwrap();
    let missing: Vec<&str> = clawmd::report::Code::ALL
        .iter()
        .map(|code| code.as_str())
        .filter(|code| !docs.contains(&format!("`{code}`")))
        .collect();
    assert!(missing.is_empty(), "undocumented codes: {missing:?}");
}

/// `check --fix` composes the groups whose findings compose clears (out of date, leftovers),
/// never one a person edited, and reports what is left for the person.
#[test]
fn check_fix_applies_the_safe_fixes_and_leaves_hand_edits() {
    let d = Deployment::standard()
        .group("new", None)
        .group("stale", None)
        .group("edited", None);
    d.run(["compose", "stale", "edited"]).success();
    d.write("groups/stale/container.json", br#"{"skills": ["web"]}"#);
    let left = d.crash_leaving_temps(
        &["compose", "stale"],
        &["groups/.clawmd/binds/stale/managed"],
    );
    // A person's edit of a composed document (compose would move it aside).
    let composed = Deployment::composed("edited", "CLAUDE.md");
    let edited = d.read(&composed) + "my note\n";
    d.write(&composed, edited.as_bytes());
    d.write("groups/edited/container.json", br#"{"skills": ["web"]}"#);

    let run = d.run(["check", "--fix", "--json"]).expect_code(1);
    assert!(
        run.stderr()
            .contains("fixed: composed 2 group(s): new, stale"),
        "{}",
        run.stderr()
    );
    assert!(
        run.stderr().contains("left for a person"),
        "{}",
        run.stderr()
    );
    assert!(d.exists("groups/new/CLAUDE.md"));
    for rel in &left {
        assert!(!d.exists(rel), "{rel} is left");
    }
    assert_eq!(d.read(&composed), edited, "a hand edit is left alone");
    // The report is the check after the fixes: only the edited group remains.
    assert_eq!(codes(&run, 1), Vec::<String>::new());
    assert_eq!(codes(&run, 2), Vec::<String>::new());
    assert!(
        codes(&run, 0).contains(&"hand-edited".to_owned()),
        "{:?}",
        codes(&run, 0)
    );
    assert_eq!(run.json()["groups"][0]["group"], "edited");
}

/// `check --fix` never deletes what the agent named (a file named like a temp) and never
/// calls what the agent planted (a link named like a rescue) a rescued text to merge: it
/// says once that the group folder holds files named like rescues it cannot vouch for.
#[test]
fn check_fix_never_deletes_or_trusts_what_the_agent_named() {
    let d = Deployment::standard().group("g", None);
    d.run(["compose", "g"]).success();
    let secret = d.path("outside-secret.md");
    std::fs::write(&secret, "host secret\n").unwrap();
    d.write("groups/g/.clawmd-tmp-notes", b"the agent's notes\n");
    d.write(
        &format!("groups/g/.clawmd-tmp-{}", "0".repeat(32)),
        b"more notes\n",
    );
    d.symlink("groups/g/CLAUDE.md.rescued-0011223344556677", &secret);
    d.write("groups/g/container.json", br#"{"skills": ["web"]}"#);
    let before_notes = d.tree();

    let run = d.run(["check", "--fix", "--json"]).success();
    assert!(
        run.stderr().contains("fixed: composed 1 group(s): g"),
        "{}",
        run.stderr()
    );
    assert_eq!(d.read("groups/g/.clawmd-tmp-notes"), "the agent's notes\n");
    assert_eq!(
        d.read(&format!("groups/g/.clawmd-tmp-{}", "0".repeat(32))),
        "more notes\n"
    );
    assert_eq!(
        before_notes.get("groups/g/CLAUDE.md.rescued-0011223344556677"),
        d.tree().get("groups/g/CLAUDE.md.rescued-0011223344556677"),
        "the planted link is left alone"
    );
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "host secret\n");
    let findings = run.json()["groups"][0]["findings"].clone();
    let codes: Vec<&str> = findings
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["legacy-rescues"], "{findings}");
    let message = findings[0]["message"].as_str().unwrap();
    assert!(message.contains("cannot tell"), "{message}");
    assert!(!run.stdout().contains("rescued-text"), "{}", run.stdout());
}

/// `clawmd schema …` prints JSON Schemas derived from the code; the example deployment's
/// configs and real reports of every command validate against them, and a typo'd type does
/// not. Every report names its schema first: its `$schema` is the `$id` of the schema
/// `clawmd schema KIND` prints (the run-failure envelope included).
#[test]
fn schemas_validate_the_example_configs_and_real_reports() {
    let env: [(&str, &std::ffi::OsStr); 0] = [];
    let document = |kind: &str| -> serde_json::Value {
        let schema = crate::support::run_clawmd(["schema", kind], &env)
            .success()
            .json();
        assert_eq!(
            schema["$schema"], "https://json-schema.org/draft/2020-12/schema",
            "{kind}"
        );
        let id = schema["$id"]
            .as_str()
            .unwrap_or_else(|| panic!("{kind}: no $id"));
        assert!(id.starts_with("urn:clawmd:schema:"), "{kind}: {id}");
        schema
    };
    let schema = |kind: &str| -> jsonschema::Validator {
        jsonschema::validator_for(&document(kind)).unwrap_or_else(|e| panic!("{kind}: {e}"))
    };
    let valid = |validator: &jsonschema::Validator, doc: &serde_json::Value, what: &str| {
        let errors: Vec<String> = validator
            .iter_errors(doc)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{what}: {errors:?}\n{doc}");
    };
    // A report of `kind`: valid, and `$schema` (its first key) is the schema's `$id`.
    let report = |kind: &str, doc: &serde_json::Value, what: &str| {
        valid(&schema(kind), doc, what);
        let first = doc.as_object().and_then(|o| o.keys().next().cloned());
        assert_eq!(first.as_deref(), Some("$schema"), "{what}: {doc}");
        assert_eq!(doc["$schema"], document(kind)["$id"], "{what}");
    };
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = schema("container-json");
    for group in ["main", "research", "ops"] {
        let path = repo.join("groups").join(group).join("container.json");
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        valid(&config, &doc, &path.display().to_string());
    }
    assert!(!config.is_valid(&serde_json::json!({"skills": 3})));
    // Any provider name is read (a backend clawmd does not compose for is ignored with a
    // warning, as nanoclaw's `mock`); not a string is an error.
    assert!(config.is_valid(&serde_json::json!({"provider": "mock"})));
    assert!(!config.is_valid(&serde_json::json!({"provider": 3})));
    let settings = schema("settings");
    valid(
        &settings,
        &serde_json::json!({"delivery": "copy", "budgets": {"codex": 1000}, "lockTimeout": 5}),
        "settings",
    );
    assert!(!settings.is_valid(&serde_json::json!({"delivery": "pigeon"})));

    let d = Deployment::example();
    let composed = d.run(["compose", "--all", "--json"]).success().json();
    report("report", &composed, "compose report");
    let dry = d.run(["compose", "mian", "--dry-run", "--json"]).json();
    report("report", &dry, "compose report with a failed group");
    let checked = d.run(["check", "--json"]).json();
    report("check-report", &checked, "check report");
    let migrated = d.run(["migrate", "--dry-run", "--json"]).success().json();
    report("migrate-report", &migrated, "migrate report");
    // `mounts` prints a bare array (a runner applies it as it is): valid against its schema,
    // whose `$id` names it; no `$schema` key inside.
    let mounts = d.run(["mounts", "main", "--json"]).success().json();
    valid(&schema("mounts"), &mounts, "mounts");
    assert_eq!(document("mounts")["$id"], "urn:clawmd:schema:mounts:1");
    assert!(
        mounts.as_array().is_some_and(|binds| binds.len() > 1),
        "{mounts}"
    );
    assert!(!schema("mounts").is_valid(&serde_json::json!([{"host": "/x", "container": "/y"}])));
    let failed = d.run(["mounts", "nope", "--json"]).expect_code(1).json();
    report("run-failure", &failed, "mounts of a missing group");
    assert_eq!(failed["command"], "mounts");
    // Another kind's `$schema` does not validate: a reader can tell the documents apart.
    assert!(!schema("check-report").is_valid(&{
        let mut doc = checked.clone();
        doc["$schema"] = composed["$schema"].clone();
        doc
    }));

    // A run that cannot start (no groups folder): the envelope, for every command.
    let empty = tempfile::tempdir().unwrap();
    for args in [
        ["compose", "--all"],
        ["check", "--all"],
        ["migrate", "--dry-run"],
    ] {
        let command = args[0];
        let failed = crate::support::run_clawmd(
            args.into_iter().chain(["--json"]),
            &[("CLAWMD_ROOT", empty.path().as_os_str())],
        )
        .expect_code(1)
        .json();
        report("run-failure", &failed, command);
        assert_eq!(failed["command"], command);
        assert_eq!(failed["error"]["code"], "run-failed");
    }
}

/// A release outside the conformance corpus, pinned by the deployment, fails `check` until it
/// is recorded or the operator accepts it in clawmd.json (that release only); the report says
/// whose rules the verdict rests on (issue 39, point 4). Today's nanoclaw pins it in
/// `container/cli-tools.json`.
#[test]
fn an_unrecorded_release_fails_check_until_it_is_accepted() {
    let d = Deployment::standard().group("g", Some(r#"{"skills": ["hello"]}"#));
    d.write(
        "container/cli-tools.json",
        br#"[{"name": "agent-browser", "version": "0.27.1"}, {"name": "@anthropic-ai/claude-code", "version": "2.1.299", "onlyBuilt": true}]"#,
    );
    let compose = d.run(["compose", "g", "--json"]).success();
    let judged = &compose.json()["groups"][0]["delivered"]["judged"];
    assert_eq!(judged["claude_code"], "2.1.299", "{judged}");
    assert_eq!(judged["claude_code_from"], "deployment", "{judged}");
    assert_eq!(judged["verified"], false, "{judged}");
    assert_eq!(judged["modelled_on"], "2.1.280", "{judged}");
    let check = d.run(["check", "g", "--json"]).expect_code(1);
    let finding = |run: &crate::support::Run| {
        run.json()["groups"][0]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["code"] == "claude-version-unverified")
            .cloned()
            .unwrap()
    };
    let unverified = finding(&check);
    assert_eq!(unverified["severity"], "error", "{unverified}");
    assert!(
        unverified["fix"]
            .as_str()
            .unwrap()
            .contains(r#""acceptUnrecordedRelease": "2.1.299""#),
        "{unverified}"
    );
    // Accepting another release changes nothing; accepting this one makes it a warning.
    d.write("clawmd.json", br#"{"acceptUnrecordedRelease": "2.1.298"}"#);
    d.run(["check", "g", "--json"]).expect_code(1);
    d.write("clawmd.json", br#"{"acceptUnrecordedRelease": "2.1.299"}"#);
    let accepted = d.run(["check", "g", "--json"]).success();
    assert_eq!(finding(&accepted)["severity"], "warning");
    // A release that is not a release is refused, naming the field.
    d.write("clawmd.json", br#"{"acceptUnrecordedRelease": "latest"}"#);
    let bad = d.run(["check", "g"]).expect_code(1);
    assert!(
        bad.stderr().contains("acceptUnrecordedRelease"),
        "{}",
        bad.stderr()
    );
}

/// A group that cannot be composed is a finding whose fix is the error's own, then the compose
/// that clears it (issue 42: it said "fix the problem above").
#[test]
fn a_group_error_finding_gives_the_errors_own_fix() {
    let d = Deployment::standard().group("g", Some(r#"{"skills": [1]}"#));
    let run = d.run(["check", "g", "--json"]).expect_code(1);
    let finding = &run.json()["groups"][0]["findings"][0];
    assert_eq!(finding["code"], "bad-config", "{finding}");
    let message = finding["message"].as_str().unwrap();
    let fix = finding["fix"].as_str().unwrap();
    assert!(
        message.contains("skills[0]") && !message.contains("fix:"),
        "{finding}"
    );
    assert_eq!(
        fix,
        "give the field the type shown (see docs/container-json.md); then run `clawmd compose g`"
    );
}
