//! What an operator (or a UI) writes: `container.json`, the skills folder, memory files edited
//! on Windows, hosts with a low descriptor limit (issue 25). Every input gets a correct result
//! or a clear error naming the right file, in bounded time; a broken skill fails only the
//! groups that enable it.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::support::Deployment;
use crate::support::*;

/// The groups of a report, by name.
fn group<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .find(|g| g["group"] == name)
        .unwrap_or_else(|| panic!("no group {name} in {report}"))
}

/// The check findings of `name` with this code.
fn findings<'a>(report: &'a Value, name: &str, code: &str) -> Vec<&'a Value> {
    group(report, name)["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["code"] == code)
        .collect()
}

/// `compose g --json --delivery DELIVERY` (exit 0): group `g`'s `delivered` verdict.
fn delivered_verdict(d: &Deployment, delivery: &str) -> Value {
    let run = clawmd(
        d.root(),
        &["compose", "g", "--json", "--delivery", delivery],
        &[],
    );
    run.expect(0, delivery);
    group(&run.json(), "g")["delivered"].clone()
}

fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// A `container.json` of 300,000 skills that do not exist (3.3 MB, under the 4 MiB cap) next
/// to 2,000 skill folders: before, every unknown name was compared with every folder for a
/// "did you mean" (600 million edit distances: minutes of CPU, nothing printed). Now the first
/// 20 are named, each with the nearest folder, and the rest counted in one warning.
#[test]
fn three_hundred_thousand_unknown_skills_finish_and_say_what_is_wrong() {
    let d = Deployment::on_work_dir().with_standard();
    for i in 0..2_000 {
        d.write(&format!("container/skills/skill-{i}/SKILL.md"), b"s\n");
    }
    let names: Vec<String> = (0..300_000).map(|i| format!("sk{i:06}")).collect();
    let config = serde_json::json!({ "skills": names }).to_string();
    assert!(config.len() < 4 * 1024 * 1024, "{}", config.len());
    let d = d.group("g", Some(&config));
    // A debug build, on a shared machine: a hang is minutes; the fix takes about a second.
    let limit = Duration::from_secs(60);
    let dry = clawmd_in(
        d.root(),
        &["compose", "g", "--dry-run", "--json"],
        &[],
        limit,
    );
    dry.expect(0, "compose --dry-run");
    let composed = clawmd_in(d.root(), &["compose", "g", "--json"], &[], limit);
    composed.expect(0, "compose");
    for report in [dry.json(), composed.json()] {
        let warnings = &group(&report, "g")["warnings"];
        let messages: Vec<&str> = warnings
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| w["code"] == "unknown-skill")
            .map(|w| w["message"].as_str().unwrap())
            .collect();
        assert_eq!(messages.len(), 21, "{messages:#?}");
        assert!(messages[0].contains("\"sk000000\""), "{}", messages[0]);
        assert!(
            messages[20].contains("299980 more skills"),
            "{}",
            messages[20]
        );
    }
    let human = clawmd_in(d.root(), &["compose", "g", "--dry-run"], &[], limit);
    human.expect(0, "compose --dry-run, human");
    assert!(
        human.stderr().contains("299980 more skills"),
        "{}",
        human.show()
    );
    let check = clawmd_in(d.root(), &["check", "g", "--json"], &[], limit);
    check.expect(0, "check");
    let report = check.json();
    let unknown = findings(&report, "g", "unknown-skill");
    assert_eq!(unknown.len(), 21);
    assert!(unknown.iter().all(|f| {
        f["file"]
            .as_str()
            .unwrap()
            .ends_with("groups/g/container.json")
    }));
    figure(
        "three_hundred_thousand_unknown_skills_finish_and_say_what_is_wrong",
        format_args!(
            "300,000 unknown skills beside 2,000 folders: compose --dry-run {:.2}s, compose {:.2}s, check {:.2}s (debug build), 20 named + 1 counted",
            dry.elapsed.as_secs_f64(),
            composed.elapsed.as_secs_f64(),
            check.elapsed.as_secs_f64()
        ),
    );
}

/// `container/CLAUDE.md` and a skill's `instructions.md` saved with Windows line endings:
/// the release strips the document's comments and so delivers the text with LF (checked with
/// the real binary in tests/e2e/delivery.rs); before, the verdict looked for the CRLF text,
/// said "not delivered" and `check` asked to close a comment that was not open.
#[test]
fn crlf_sources_reach_the_agent_in_every_delivery() {
    let d = Deployment::standard().group("g", Some(r#"{"skills": ["web"]}"#));
    d.write(
        "container/CLAUDE.md",
        b"# Base\r\nEdited on Windows.\r\n\r\n- one\r\n- two\r\n",
    );
    d.write(
        "container/skills/web/instructions.md",
        b"Web guidance\r\nsecond line\r\n",
    );
    d.write(
        "groups/g/container.json",
        br#"{"skills": ["web"], "mcpServers": {"db": {"instructions": "Use db\r\nread only\r\n"}}}"#,
    );
    for delivery in ["inline", "copy"] {
        let delivered = delivered_verdict(&d, delivery);
        assert_eq!(delivered["complete"], true, "{delivery}: {delivered}");
        let check = clawmd(d.root(), &["check", "g", "--delivery", delivery], &[]);
        check.expect(0, delivery);
    }
}

/// Under `ulimit -n 256` (soft and hard: no raising it), `compose --all` over 1,000 groups
/// composes every one. Before: 336 failed with "Too many open files", and so again on rerun.
/// With only the soft limit at 256, clawmd raises it to the hard limit.
#[test]
fn compose_all_under_a_low_descriptor_limit_composes_every_group() {
    let d = Deployment::on_work_dir().with_standard();
    let groups = 1_000;
    for i in 0..groups {
        d.write(&format!("groups/g{i:04}/CLAUDE.local.md"), b"mine\n");
    }
    let hard_now = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .maximum
        .unwrap_or(4096);
    for (soft, hard) in [(256, 256), (256, hard_now)] {
        let mut command = command(d.root(), &["compose", "--all", "--json"], &[]);
        // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            command.pre_exec(move || {
                use rustix::process::{Resource, Rlimit, setrlimit};
                setrlimit(
                    Resource::Nofile,
                    Rlimit {
                        current: Some(soft),
                        maximum: Some(hard),
                    },
                )
                .map_err(std::io::Error::from)
            });
        }
        let run = run_within(&mut command, Duration::from_secs(300));
        run.expect(0, &format!("ulimit -n {soft} (hard {hard})"));
        let report = run.json();
        assert_eq!(report["summary"]["failed"], 0, "{}", report["summary"]);
        assert_eq!(report["summary"]["groups"], groups);
        figure(
            "compose_all_under_a_low_descriptor_limit_composes_every_group",
            format_args!(
                "{groups} groups under RLIMIT_NOFILE {soft} (hard {hard}): all composed or up to date in {:.1}s",
                run.elapsed.as_secs_f64()
            ),
        );
        // The next limit starts from scratch.
        for i in 0..groups {
            let _ = std::fs::remove_file(d.path(&format!("groups/g{i:04}/CLAUDE.md")));
        }
    }
}

/// A sparse file of `len` bytes.
fn sparse(path: &Path, len: u64) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::File::create(path).unwrap().set_len(len).unwrap();
}

/// A 5 MB `CLAUDE.local.md`: the real release skips a memory file over 4 MiB whole (its import
/// line stays as text; tests/e2e/delivery.rs). compose's verdict says the local memory does not
/// reach the agent, and check names `CLAUDE.local.md`, not the generated `CLAUDE.md`. Before,
/// compose said everything was delivered and check blamed `CLAUDE.md` ("split the file").
#[test]
fn an_oversized_local_memory_is_named_and_compose_and_check_agree() {
    let d = Deployment::standard().group("g", None);
    let mut text = b"notes\n".repeat(900_000);
    text.truncate(5_049_990);
    d.write("groups/g/CLAUDE.local.md", &text);
    for delivery in ["inline", "copy"] {
        let delivered = delivered_verdict(&d, delivery);
        assert_eq!(delivered["complete"], false, "{delivered}");
        assert_eq!(strings(&delivered["missing"]), ["local-memory"]);
        assert!(
            strings(&delivered["reasons"])[0].contains("CLAUDE.local.md: is 5049990 bytes"),
            "{delivered}"
        );
        let check = clawmd(
            d.root(),
            &["check", "g", "--json", "--delivery", delivery],
            &[],
        );
        check.expect(1, delivery);
        let report = check.json();
        let too_large = findings(&report, "g", "file-too-large");
        assert_eq!(too_large.len(), 1, "{report}");
        assert!(
            too_large[0]["file"]
                .as_str()
                .unwrap()
                .ends_with("groups/g/CLAUDE.local.md"),
            "{report}"
        );
        let not_delivered = findings(&report, "g", "not-delivered");
        assert_eq!(not_delivered.len(), 1, "{report}");
        assert!(
            not_delivered[0]["message"]
                .as_str()
                .unwrap()
                .contains("local-memory"),
            "{report}"
        );
    }
    // A sparse 100 MB one: the same answer, nothing read.
    sparse(&d.path("groups/g/CLAUDE.local.md"), 100 << 20);
    let run = clawmd(d.root(), &["compose", "g", "--json"], &[]);
    run.expect(0, "100 MB");
    assert_eq!(
        strings(&group(&run.json(), "g")["delivered"]["missing"]),
        ["local-memory"]
    );
}

/// A skill whose `instructions.md` is a folder, a FIFO or over 16 MiB: only the groups that
/// enable it fail, with the message naming the file; the others compose, and check reports
/// each group. Before: compose and check failed as a whole for every group (exit 1, nothing
/// composed).
#[test]
fn a_broken_skill_fails_only_the_groups_that_enable_it() {
    let d = Deployment::standard()
        .group("a", Some(r#"{"skills": ["web"]}"#))
        .group("b", Some(r#"{"skills": ["broken", "web"]}"#))
        .group("c", None)
        .file("container/skills/broken/SKILL.md", "broken\n");
    let instructions = d.path("container/skills/broken/instructions.md");
    let cases: [(&str, &dyn Fn(), &str); 3] = [
        (
            "a folder",
            &|| std::fs::create_dir(&instructions).unwrap(),
            "it is a directory",
        ),
        (
            "a FIFO",
            &|| {
                rustix::fs::mknodat(
                    rustix::fs::CWD,
                    &instructions,
                    rustix::fs::FileType::Fifo,
                    rustix::fs::Mode::from_raw_mode(0o644),
                    0,
                )
                .unwrap()
            },
            "it is a special file",
        ),
        (
            "17 MiB",
            &|| sparse(&instructions, 17 << 20),
            "is larger than 16777216 bytes",
        ),
    ];
    for (what, make, says) in cases {
        let _ = std::fs::remove_dir(&instructions);
        let _ = std::fs::remove_file(&instructions);
        make();
        for group in ["a", "b", "c"] {
            let _ = std::fs::remove_file(d.path(&format!("groups/{group}/CLAUDE.md")));
        }
        let run = clawmd(d.root(), &["compose", "--all", "--json"], &[]);
        run.expect(1, what);
        let report = run.json();
        assert_eq!(group(&report, "a")["status"], "changed", "{what}: {report}");
        assert!(d.exists("groups/a/CLAUDE.md"), "{what}");
        for failed in ["b", "c"] {
            let error = &group(&report, failed)["error"];
            let message = error["message"].as_str().unwrap();
            assert!(
                message.contains("enables skill \"broken\"") && message.contains(says),
                "{what}: {message}"
            );
            assert!(
                error["file"]
                    .as_str()
                    .unwrap()
                    .ends_with("container/skills/broken/instructions.md"),
                "{what}: {error}"
            );
            assert!(!d.exists(&format!("groups/{failed}/CLAUDE.md")), "{what}");
        }
        let check = clawmd(d.root(), &["check", "--all", "--json"], &[]);
        check.expect(1, what);
        let report = check.json();
        assert!(
            group(&report, "a")["findings"]
                .as_array()
                .unwrap()
                .iter()
                .all(|f| f["severity"] != "error"),
            "{what}: {report}"
        );
        for failed in ["b", "c"] {
            let errors: Vec<&Value> = group(&report, failed)["findings"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|f| f["severity"] == "error")
                .collect();
            assert!(
                errors.iter().any(|f| f["file"]
                    .as_str()
                    .unwrap()
                    .ends_with("container/skills/broken/instructions.md")),
                "{what}: {report}"
            );
        }
    }
}

/// An `instructions.md` that is a link to nothing: the groups that enable the skill are
/// composed with a warning naming the link, and the verdict says the skill does not reach the
/// agent; check agrees. Before: treated as "no instructions", exit 0, no warning.
#[test]
fn a_dangling_instructions_link_is_a_warning_and_not_delivered() {
    let d = Deployment::standard()
        .group("a", Some(r#"{"skills": ["web"]}"#))
        .group("b", Some(r#"{"skills": ["broken", "web"]}"#))
        .file("container/skills/broken/SKILL.md", "broken\n");
    d.symlink(
        "container/skills/broken/instructions.md",
        "/nonexistent/instructions.md",
    );
    let run = clawmd(d.root(), &["compose", "--all", "--json"], &[]);
    run.expect(0, "compose");
    let report = run.json();
    let a = group(&report, "a");
    assert_eq!(a["delivered"]["complete"], true, "{a}");
    assert!(a["warnings"].as_array().unwrap().is_empty(), "{a}");
    let b = group(&report, "b");
    assert_eq!(b["delivered"]["complete"], false, "{b}");
    assert_eq!(strings(&b["delivered"]["missing"]), ["skill:broken"]);
    let warning = b["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == "dangling-link")
        .unwrap_or_else(|| panic!("no dangling-link warning: {b}"));
    let message = warning["message"].as_str().unwrap();
    assert!(
        message.contains("container/skills/broken/instructions.md")
            && message.contains("/nonexistent/instructions.md"),
        "{message}"
    );
    let human = clawmd(d.root(), &["compose", "b"], &[]);
    human.expect(0, "human");
    assert!(
        human
            .stderr()
            .contains("container/skills/broken/instructions.md is a link"),
        "{}",
        human.show()
    );
    let check = clawmd(d.root(), &["check", "--all", "--json"], &[]);
    check.expect(1, "check");
    let report = check.json();
    assert!(findings(&report, "a", "dangling-link").is_empty());
    let dangling = findings(&report, "b", "dangling-link");
    assert_eq!(dangling.len(), 1, "{report}");
    assert!(
        dangling[0]["file"]
            .as_str()
            .unwrap()
            .ends_with("container/skills/broken/instructions.md")
    );
    assert_eq!(findings(&report, "b", "not-delivered").len(), 1, "{report}");
}
