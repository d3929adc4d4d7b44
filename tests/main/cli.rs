//! The command line itself: its usage errors, help texts and manual pages, as a newcomer meets
//! them (issue 42).

use crate::support::Deployment;
use crate::support::run::command;
use crate::support::run_clawmd;

/// `compose` with no group names its two choices: groups, or `--all` (it never composes every
/// group unasked: a runner must name what it composes).
#[test]
fn compose_without_a_group_names_all() {
    let run = run_clawmd(["compose"], &[]).expect_code(2);
    let stderr = run.stderr();
    assert!(stderr.contains("<GROUPS|--all>"), "{stderr}");
    assert!(
        stderr.contains("Usage: clawmd compose <GROUPS|--all>"),
        "{stderr}"
    );
    insta::assert_snapshot!("usage_compose_without_a_group", stderr);
    // Both at once is still a usage error.
    run_clawmd(["compose", "main", "--all"], &[]).expect_code(2);
}

/// `render` with no group names `--cwd`, its other choice.
#[test]
fn render_without_a_group_names_cwd() {
    let run = run_clawmd(["render"], &[]).expect_code(2);
    let stderr = run.stderr();
    assert!(stderr.contains("<GROUP|--cwd <DIR>>"), "{stderr}");
    insta::assert_snapshot!("usage_render_without_a_group", stderr);
    run_clawmd(["render", "main", "--cwd", "/"], &[]).expect_code(2);
}

/// Every page clawmd(1) refers to, clawmd-SUBCOMMAND(1), is printed by `clawmd man SUBCOMMAND`.
#[test]
fn every_page_the_manual_names_is_printed() {
    let page = run_clawmd(["man"], &[]).success().stdout();
    let named: Vec<&str> = page
        .lines()
        .filter_map(|line| line.strip_prefix("clawmd\\-")?.strip_suffix("(1)"))
        .collect();
    assert!(named.contains(&"compose"), "{page}");
    for name in named {
        let sub = run_clawmd(["man", name], &[]).success().stdout();
        assert!(
            sub.contains(&format!(".TH clawmd-{name} 1 ")),
            "clawmd man {name}:\n{sub}"
        );
    }
    run_clawmd(["man", "nope"], &[]).expect_code(2);
}

/// The README's synopses (the `clawmd SUBCOMMAND …` lines of its code blocks) name only flags
/// the subcommand takes, and name `--fix`, `--config`, `--approve-external`,
/// `--claude-version` and `--json` wherever it takes them (issue 42).
#[test]
fn the_readme_synopses_match_the_flags() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let flags = |text: &str| -> Vec<String> {
        let mut found = Vec::new();
        let mut rest = text;
        while let Some(at) = rest.find("--") {
            rest = &rest[at + 2..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '-')
                .collect();
            if !name.is_empty() {
                found.push(format!("--{name}"));
            }
        }
        found
    };
    let mut checked = 0;
    for sub in [
        "compose", "migrate", "check", "render", "mounts", "watch", "init",
    ] {
        let prefix = format!("clawmd {sub} ");
        let synopsis: Vec<&str> = readme
            .lines()
            .filter(|line| line.starts_with(&prefix) || *line == prefix.trim_end())
            .collect();
        assert!(!synopsis.is_empty(), "no synopsis of {sub} in the README");
        let help = run_clawmd([sub, "--help"], &[]).success().stdout();
        let taken = flags(&help);
        let named = flags(&synopsis.join("\n"));
        for flag in &named {
            assert!(
                taken.contains(flag),
                "the README's {sub} synopsis names {flag}, which {sub} does not take"
            );
        }
        for flag in [
            "--fix",
            "--config",
            "--approve-external",
            "--claude-version",
            "--json",
        ] {
            if taken.iter().any(|f| f == flag) {
                assert!(
                    named.iter().any(|f| f == flag),
                    "the README's {sub} synopsis lacks {flag}"
                );
            }
        }
        checked += 1;
    }
    assert_eq!(checked, 7);
}

/// Every subcommand, as `clawmd --help` lists them.
const SUBCOMMANDS: [&str; 11] = [
    "compose",
    "migrate",
    "check",
    "render",
    "mounts",
    "watch",
    "serve",
    "init",
    "completions",
    "schema",
    "man",
];

/// The version, which moves at every release, hidden from the snapshots.
fn without_version(text: &str) -> String {
    text.replace(env!("CARGO_PKG_VERSION"), "[VERSION]")
}

/// Every help text (`--help` and `-h`, of clawmd and each subcommand) is a snapshot: a change
/// of a flag or its text shows in the review (issue 42).
#[test]
fn every_help_text_is_a_snapshot() {
    for flag in ["--help", "-h"] {
        let top = run_clawmd([flag], &[]).success().stdout();
        insta::assert_snapshot!(format!("help_clawmd{flag}"), without_version(&top));
        for sub in SUBCOMMANDS {
            assert!(
                top.contains(&format!("\n  {sub} ")),
                "clawmd {flag} lists {sub}"
            );
            let help = run_clawmd([sub, flag], &[]).success().stdout();
            insta::assert_snapshot!(format!("help_{sub}{flag}"), without_version(&help));
        }
    }
}

/// The manual pages, clawmd(1) and each clawmd-SUBCOMMAND(1), are snapshots (issue 42).
#[test]
fn every_manual_page_is_a_snapshot() {
    let top = run_clawmd(["man"], &[]).success().stdout();
    insta::assert_snapshot!("man_clawmd", without_version(&top));
    for sub in SUBCOMMANDS.iter().chain(&["help"]) {
        let page = run_clawmd(["man", sub], &[]).success().stdout();
        insta::assert_snapshot!(format!("man_clawmd-{sub}"), without_version(&page));
    }
}

/// `compose GROUP --config` over the limit of a group's config, from a file or standard input,
/// fails (exit code 1) with the message `clawmd serve` answers such a config with: the limit
/// and the fix. Nothing is kept or composed.
#[test]
fn a_handed_config_over_the_limit_is_refused_with_the_limit_and_the_fix() {
    let d = Deployment::standard()
        .group("main", None)
        .file("clawmd.json", r#"{"groupConfig": "handed"}"#);
    let over = format!(r#"{{"x": "{}"}}"#, "a".repeat(4 * 1024 * 1024));
    let said = "the handed config is over 4194304 bytes, the most clawmd reads of a group's \
                config; fix: hand the group's container.json alone (a group's config is a few \
                kilobytes)";
    let handed = d.path("handed.json");
    std::fs::write(&handed, &over).unwrap();
    let run = d
        .run(["compose", "main", "--config", handed.to_str().unwrap()])
        .expect_code(1);
    assert!(run.stderr().contains(said), "{}", run.stderr());

    let mut stdin = command(d.root(), &["compose", "main", "--config", "-"], &[]);
    stdin
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = stdin.spawn().unwrap();
    // clawmd stops reading one byte over the limit: the rest may not be taken.
    let _ = std::io::Write::write_all(child.stdin.as_mut().unwrap(), over.as_bytes());
    drop(child.stdin.take());
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(said), "{stderr}");

    assert!(!d.exists("groups/.clawmd/configs/main.json"));
    assert!(!d.exists("groups/.clawmd/binds/main"));
    // A config under the limit is taken (and kept).
    std::fs::write(&handed, r#"{"skills": "all"}"#).unwrap();
    d.run(["compose", "main", "--config", handed.to_str().unwrap()])
        .success();
    assert!(d.exists("groups/.clawmd/configs/main.json"));
}

/// A `clawmd.json` that cannot be read stops every command before it starts. With `--json`,
/// stdout is then the run-failure envelope, as for a groups folder that cannot be listed
/// (docs/json-report.md): a runner reading stdout gets the code and the message (the file,
/// where in it, the field, the fix) rather than nothing. The error is still on stderr, and the
/// exit status is 1 either way.
#[test]
fn a_malformed_settings_file_is_the_run_failure_envelope_of_every_json_command() {
    let d = Deployment::standard().group("main", None);
    for (settings, said) in [
        (
            r#"{"delivery": "inline",}"#,
            "clawmd.json:1:23: trailing comma; fix: ",
        ),
        (
            r#"{"delivery": "pigeon"}"#,
            "clawmd.json:1:21: field `delivery`: unknown variant `pigeon`",
        ),
    ] {
        d.write("clawmd.json", settings.as_bytes());
        for args in [
            &["compose", "main"][..],
            &["compose", "--all"],
            &["check"],
            &["migrate"],
            &["mounts", "main"],
            &["watch"],
        ] {
            let what = format!("{args:?} with {settings}");
            let run = d.run(args.iter().copied().chain(["--json"])).expect_code(1);
            let failure = run.json();
            assert_eq!(
                failure["$schema"], "urn:clawmd:schema:run-failure:1",
                "{what}: {failure}"
            );
            assert_eq!(failure["command"], args[0], "{what}");
            assert_eq!(failure["ok"], false, "{what}");
            assert_eq!(failure["error"]["code"], "run-failed", "{what}");
            let message = failure["error"]["message"].as_str().unwrap();
            assert!(message.contains(said), "{what}: {message}");
            assert!(message.contains("; fix: "), "{what}: {message}");
            assert!(run.stderr().contains(message), "{what}: {}", run.stderr());
            // The human form is the error alone, on stderr.
            let human = d.run(args).expect_code(1);
            assert_eq!(human.stdout(), "", "{what}");
            assert!(
                human.stderr().contains(message),
                "{what}: {}",
                human.stderr()
            );
        }
    }
}

/// `mounts GROUP --json` of a group that was never composed fails with `not-composed` (the
/// code `clawmd serve` answers it with), in the run-failure envelope; a group that is not
/// there fails with `missing-group`, each with its fix.
#[test]
fn mounts_of_a_group_not_composed_says_not_composed() {
    let d = Deployment::standard().group("main", None);
    let failure = d.run(["mounts", "main", "--json"]).expect_code(1).json();
    assert_eq!(
        failure["$schema"], "urn:clawmd:schema:run-failure:1",
        "{failure}"
    );
    assert_eq!(failure["command"], "mounts");
    assert_eq!(failure["error"]["code"], "not-composed", "{failure}");
    let message = failure["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("not composed") && message.contains("fix: run `clawmd compose main`"),
        "{message}"
    );
    let failure = d.run(["mounts", "mian", "--json"]).expect_code(1).json();
    assert_eq!(failure["error"]["code"], "missing-group", "{failure}");
    // Composed, the same command prints the table.
    d.run(["compose", "main"]).success();
    let binds = d.run(["mounts", "main", "--json"]).success().json();
    assert!(binds.as_array().is_some_and(|b| !b.is_empty()), "{binds}");
}

/// A `--config` file that cannot be read (missing, or over the limit) is the run-failure
/// envelope on stdout with `--json`, as a malformed clawmd.json is: a runner reading stdout
/// is never left with nothing.
#[test]
fn an_unreadable_handed_config_is_the_run_failure_envelope() {
    let d = Deployment::standard().group("g", None);
    let big = d.path("big.json");
    std::fs::write(&big, vec![b' '; 5 * 1024 * 1024]).unwrap();
    for command in ["compose", "check"] {
        for file in [d.path("nothing.json"), big.clone()] {
            let file = file.to_str().unwrap().to_owned();
            let run = d
                .run([command, "g", "--config", file.as_str(), "--json"])
                .expect_code(1);
            let envelope = run.json();
            assert_eq!(envelope["ok"], false, "{command} {file}: {}", run.stdout());
            assert_eq!(envelope["command"], command);
            assert_eq!(envelope["error"]["code"], "run-failed");
            assert!(!run.stderr().is_empty());
        }
    }
}
