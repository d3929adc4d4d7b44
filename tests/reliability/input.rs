//! Hostile input: arbitrary `container.json` bytes and structures, hostile names (traversal,
//! NUL, Unicode look-alikes, 10,000 characters), oversized files and invalid UTF-8. clawmd
//! must never panic or hang, must refuse with an error that names the file (and the field),
//! must leave the group untouched when it refuses, and must keep bytes it does not understand.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use crate::support::Deployment;
use crate::support::*;
use clawmd::config::parse_config;
use clawmd::safe_name::validate_name;

/// A runner: deterministic by default (the figures are reproducible), random under soak.
fn runner(cases: u32) -> TestRunner {
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    if soak() {
        TestRunner::new(config)
    } else {
        TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha))
    }
}

/// Characters that have broken path handling somewhere: separators, dots, NUL, controls,
/// and Unicode look-alikes of `/`, `\` and `.`.
fn hostile_char() -> impl Strategy<Value = char> {
    prop_oneof![
        6 => proptest::char::range('a', 'z'),
        2 => proptest::char::range('0', '9'),
        2 => Just('.'),
        1 => Just('-'),
        1 => Just('_'),
        2 => Just('/'),
        1 => Just('\\'),
        1 => Just('\0'),
        1 => Just('\n'),
        1 => Just('\u{7f}'),
        1 => Just(' '),
        1 => Just('\u{2215}'), // division slash
        1 => Just('\u{2044}'), // fraction slash
        1 => Just('\u{ff0f}'), // fullwidth solidus
        1 => Just('\u{29f8}'), // big solidus
        1 => Just('\u{ff3c}'), // fullwidth reverse solidus
        1 => Just('\u{ff0e}'), // fullwidth full stop
        1 => Just('\u{2024}'), // one dot leader
        1 => Just('\u{202e}'), // right-to-left override
        1 => Just('\u{200b}'), // zero width space
        1 => Just('\u{feff}'), // byte order mark
        1 => Just('\u{0301}'), // combining acute
        2 => any::<char>(),
    ]
}

fn hostile_name() -> impl Strategy<Value = String> {
    prop_oneof![
        20 => proptest::collection::vec(hostile_char(), 0..24).prop_map(|c| c.into_iter().collect()),
        2 => Just("..".to_owned()),
        2 => Just("../../etc/passwd".to_owned()),
        1 => Just("a".repeat(10_000)),
        1 => Just("\u{2215}".repeat(10_000)),
        1 => (1usize..300).prop_map(|n| "x".repeat(n)),
    ]
}

/// Any JSON value, with keys that clawmd reads mixed in so that generation reaches the checks.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        Just(Value::from("all")),
        hostile_name().prop_map(Value::from),
        "\\PC{0,40}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        let key = prop_oneof![
            Just("skills".to_owned()),
            Just("mcpServers".to_owned()),
            Just("instructions".to_owned()),
            Just("command".to_owned()),
            hostile_name(),
        ];
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::btree_map(key, inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A config shaped like a real one, with hostile names and values where clawmd looks.
fn shaped_config() -> impl Strategy<Value = String> {
    use serde_json::{Value, json};
    // Mostly plausible names, so that many configs get through to a real compose.
    let name = || {
        prop_oneof![
            6 => "[a-z][a-z0-9._-]{0,12}",
            2 => Just("web".to_owned()),
            2 => Just("hello".to_owned()),
            3 => hostile_name(),
        ]
    };
    let skills = prop_oneof![
        Just(json!("all")),
        proptest::collection::vec(name(), 0..4).prop_map(|v| json!(v)),
        json_value(),
    ];
    let instructions = prop_oneof![
        "\\PC{0,200}".prop_map(Value::from),
        Just(Value::from("@/etc/passwd\n```\n@./x\n````")),
        json_value(),
    ];
    let servers = proptest::collection::btree_map(
        name(),
        instructions.prop_map(|i| json!({"command": "x", "instructions": i})),
        0..4,
    );
    (skills, servers).prop_map(|(skills, servers)| {
        json!({"skills": skills, "mcpServers": servers, "imageTag": "v1"}).to_string()
    })
}

/// Bytes: arbitrary, a valid config with bytes changed, or a generated structure.
fn config_bytes() -> impl Strategy<Value = Vec<u8>> {
    let mutated = (
        shaped_config(),
        proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    )
        .prop_map(|(text, edits)| {
            let mut bytes = text.into_bytes();
            for (at, byte) in edits {
                if !bytes.is_empty() {
                    let i = at.index(bytes.len());
                    bytes[i] = byte;
                }
            }
            bytes
        });
    prop_oneof![
        2 => proptest::collection::vec(any::<u8>(), 0..512),
        3 => mutated,
        3 => shaped_config().prop_map(String::into_bytes),
        2 => json_value().prop_map(|v| v.to_string().into_bytes()),
    ]
}

#[test]
fn container_json_bytes_never_panic_and_errors_name_the_file() {
    let started = Instant::now();
    let cases = scale("CLAWMD_INPUT_CASES", 3000, 100_000) as u32;
    let (accepted, refused) = (AtomicU64::new(0), AtomicU64::new(0));
    let path = Path::new("/deploy/groups/g/container.json");
    runner(cases)
        .run(&config_bytes(), |bytes| {
            let begun = Instant::now();
            let result = parse_config(path, &bytes);
            prop_assert!(begun.elapsed() < Duration::from_secs(2), "slow parse");
            match result {
                Ok(config) => {
                    accepted.fetch_add(1, Ordering::Relaxed);
                    if let clawmd::config::SkillSelection::Only(skills) = &config.skills {
                        for skill in skills {
                            prop_assert!(validate_name(skill).is_ok(), "accepted skill {skill:?}");
                        }
                    }
                    // Any server name is accepted (nanoclaw accepts any); the file name it
                    // becomes in copy and link delivery is one safe component.
                    for server in config.mcp_instructions.keys() {
                        let file = clawmd::sources::fragment_file(&format!("mcp:{server}"));
                        prop_assert!(
                            !file.contains('/') && !file.contains('\0') && file.len() <= 255,
                            "server {server:?} becomes {file:?}"
                        );
                        let path = Path::new(&file);
                        prop_assert!(
                            file.starts_with("mcp-")
                                && path.components().count() == 1
                                && matches!(
                                    path.components().next(),
                                    Some(std::path::Component::Normal(_))
                                ),
                            "server {server:?} becomes {file:?}"
                        );
                    }
                }
                Err(err) => {
                    refused.fetch_add(1, Ordering::Relaxed);
                    let shown = err.to_string();
                    prop_assert!(shown.starts_with(&path.display().to_string()), "{shown}");
                    prop_assert!(shown.contains("; fix: "), "{shown}");
                }
            }
            Ok(())
        })
        .unwrap();
    figure(
        "container_json_bytes_never_panic_and_errors_name_the_file",
        format_args!(
            "{cases} generated container.json inputs through parse_config: {} accepted (all skill names valid, every server name a safe file stem), {} refused with path + fix, 0 panics; {:.1}s",
            accepted.load(Ordering::Relaxed),
            refused.load(Ordering::Relaxed),
            started.elapsed().as_secs_f64()
        ),
    );
}

#[test]
fn container_json_through_the_binary_refuses_cleanly_and_leaves_the_group_alone() {
    let started = Instant::now();
    let cases = scale("CLAWMD_BINARY_CASES", 120, 2000) as u32;
    let d = Deployment::on_work_dir()
        .with_standard()
        .group("g", Some("{}"))
        .file("groups/g/CLAUDE.local.md", "mine\n");
    let config = d.path("groups/g/container.json");
    let (accepted, refused) = (AtomicU64::new(0), AtomicU64::new(0));
    runner(cases)
        .run(&config_bytes(), |bytes| {
            std::fs::write(&config, &bytes).unwrap();
            let before = without_locks(&tree(d.root()));
            let run = clawmd_in(
                d.root(),
                &["compose", "g", "--json", "--delivery", "copy"],
                &[],
                Duration::from_secs(20),
            );
            prop_assert!(!run.stderr().contains("panicked"), "{}", run.show());
            let report = serde_json::from_str::<serde_json::Value>(&run.stdout());
            prop_assert!(report.is_ok(), "not JSON: {}", run.show());
            let report = report.unwrap();
            match run.status.code() {
                Some(0) => {
                    accepted.fetch_add(1, Ordering::Relaxed);
                    let md = std::fs::read(d.path(&Deployment::composed("g", "CLAUDE.md")));
                    prop_assert!(clawmd::plan::is_pristine(&md.unwrap()));
                }
                Some(1) => {
                    refused.fetch_add(1, Ordering::Relaxed);
                    let error = &report["groups"][0]["error"];
                    prop_assert_eq!(error["file"].as_str(), Some(config.to_str().unwrap()));
                    prop_assert!(error["message"].as_str().unwrap().contains("fix:"));
                    let after = without_locks(&tree(d.root()));
                    prop_assert!(
                        tree_diff(&before, &after).is_empty(),
                        "refused, yet changed:\n{}",
                        tree_diff(&before, &after)
                    );
                }
                _ => prop_assert!(false, "{}", run.show()),
            }
            prop_assert!(std::fs::read(d.path("groups/g/CLAUDE.local.md")).unwrap() == b"mine\n");
            Ok(())
        })
        .unwrap();
    figure(
        "container_json_through_the_binary_refuses_cleanly_and_leaves_the_group_alone",
        format_args!(
            "{cases} generated container.json files through `clawmd compose --json`: {} composed, {} refused (exit 1, JSON error names the file, group unchanged), 0 panics or hangs; {:.1}s",
            accepted.load(Ordering::Relaxed),
            refused.load(Ordering::Relaxed),
            started.elapsed().as_secs_f64()
        ),
    );
}

/// What an accepted name must be: one plain component that stays in its folder.
fn assert_safe_name(name: &str) -> Result<(), TestCaseError> {
    prop_assert!(name.is_ascii() && name.len() <= clawmd::safe_name::MAX_NAME_LEN);
    prop_assert!(!name.contains("..") && !name.starts_with('.') && !name.starts_with('-'));
    let file = format!("mcp-{name}.md");
    let joined = Path::new("/g/.claude-fragments").join(&file);
    prop_assert_eq!(joined.parent(), Some(Path::new("/g/.claude-fragments")));
    prop_assert_eq!(
        joined.file_name().and_then(|n| n.to_str()),
        Some(file.as_str())
    );
    Ok(())
}

#[test]
fn hostile_names_are_refused_with_a_reason() {
    let started = Instant::now();
    let fixed = [
        "..",
        ".",
        "../x",
        "a/../b",
        "/etc/passwd",
        "a\\b",
        "a\0b",
        "a\nb",
        "a\u{2215}b",
        "a\u{2044}b",
        "a\u{ff0f}b",
        "\u{ff0e}\u{ff0e}",
        "a\u{2024}\u{2024}b",
        "gpj.\u{202e}exe",
        "a\u{200b}b",
        "\u{feff}a",
        "cafe\u{0301}",
        "-rf",
        ".hidden",
        "",
    ];
    for name in fixed {
        let problem = validate_name(name).expect_err(name);
        assert!(!problem.to_string().is_empty());
    }
    let long = [
        "a".repeat(10_000),
        "\u{2215}".repeat(10_000),
        "é".repeat(10_000),
    ];
    for name in &long {
        let problem = validate_name(name).expect_err("10,000 characters");
        assert!(problem.to_string().contains("limit is"), "{problem}");
    }
    let cases = scale("CLAWMD_NAME_CASES", 20_000, 1_000_000) as u32;
    let accepted = AtomicU64::new(0);
    runner(cases)
        .run(&hostile_name(), |name| {
            if validate_name(&name).is_ok() {
                accepted.fetch_add(1, Ordering::Relaxed);
                assert_safe_name(&name)?;
            }
            Ok(())
        })
        .unwrap();
    figure(
        "hostile_names_are_refused_with_a_reason",
        format_args!(
            "{} fixed hostile names + 3 of 10,000 characters refused; {cases} generated names: {} accepted, all single safe ASCII components; {:.1}s",
            fixed.len(),
            accepted.load(Ordering::Relaxed),
            started.elapsed().as_secs_f64()
        ),
    );
}

#[test]
fn hostile_names_through_the_binary() {
    let started = Instant::now();
    let d = Deployment::on_work_dir()
        .with_standard()
        .group("ok", Some("{}"))
        .file("container/skills/we\u{2215}b/instructions.md", "X\n")
        .file("container/skills/has space/instructions.md", "X\n")
        .file(
            &format!("container/skills/{}/instructions.md", "s".repeat(200)),
            "X\n",
        );
    std::fs::create_dir_all(d.path("outside")).unwrap();
    std::fs::write(d.path("outside/keep"), "keep\n").unwrap();
    let mut runs = 0;

    // Group names on the command line.
    let long = "g".repeat(10_000);
    for name in [
        "../outside",
        "..",
        "ok/../../outside",
        "/etc",
        "o\u{2215}k",
        long.as_str(),
    ] {
        let run = clawmd(d.root(), &["compose", name], &[]);
        run.expect(1, name);
        assert!(
            run.stdout().contains("is not usable") || run.stderr().contains("is not usable"),
            "{name}: {}",
            run.show()
        );
        runs += 1;
    }
    // A name that is not UTF-8 at all.
    {
        use std::os::unix::ffi::OsStrExt;
        let name = std::ffi::OsStr::from_bytes(b"bad\xff");
        let output = command(d.root(), &["compose"], &[])
            .arg(name)
            .output()
            .unwrap();
        assert!(matches!(output.status.code(), Some(1 | 2)), "{output:?}");
        assert!(!String::from_utf8_lossy(&output.stderr).contains("panicked"));
        runs += 1;
    }
    // Hostile names in container.json, one at a time.
    for name in [
        "../x",
        "a\u{2215}b",
        "a\u{0}b",
        "\u{202e}x",
        &"n".repeat(10_000),
    ] {
        // A skill name is a folder name: refused, naming the field.
        let skill = serde_json::json!({"skills": [name]});
        d.write("groups/ok/container.json", skill.to_string().as_bytes());
        let run = clawmd(d.root(), &["compose", "ok"], &[]);
        run.expect(1, name);
        let shown = run.output();
        assert!(
            shown.contains("container.json") && shown.contains("field"),
            "{shown}"
        );
        runs += 1;
        // A server name is only written down (nanoclaw accepts any): it composes in every
        // mode, escaped where it becomes a file name, and nothing lands outside the group.
        let server = serde_json::json!({"mcpServers": {name: {"instructions": "hi"}}});
        d.write("groups/ok/container.json", server.to_string().as_bytes());
        for delivery in ["copy", "link", "inline"] {
            let run = clawmd(d.root(), &["compose", "ok", "--delivery", delivery], &[]);
            run.expect(0, name);
            // (inline delivery removes the emptied fragments folder.)
            let fragments: Vec<String> = std::fs::read_dir(d.path("groups/ok/.claude-fragments"))
                .map(|listing| {
                    listing
                        .map(|e| e.unwrap().file_name().into_string().unwrap())
                        .collect()
                })
                .unwrap_or_default();
            let expected = clawmd::sources::fragment_file(&format!("mcp:{name}"));
            assert_eq!(
                fragments.contains(&expected),
                delivery != "inline",
                "{delivery} {name:?}: {fragments:?}"
            );
            runs += 1;
        }
        assert_eq!(std::fs::read(d.path("outside/keep")).unwrap(), b"keep\n");
    }
    d.write("groups/ok/container.json", b"{}");
    // Group folders with hostile names on disk: refused, the others composed.
    std::fs::create_dir_all(d.path("groups/ma\u{2215}in")).unwrap();
    {
        use std::os::unix::ffi::OsStrExt;
        let bad = d
            .path("groups")
            .join(std::ffi::OsStr::from_bytes(b"bad\xff"));
        std::fs::create_dir_all(&bad).unwrap();
    }
    for args in [&["compose", "--all"][..], &["migrate"][..]] {
        let run = clawmd(d.root(), args, &[]);
        run.expect(1, &args.join(" "));
        runs += 1;
    }
    assert!(
        d.exists("groups/ok/CLAUDE.md"),
        "the healthy group was composed"
    );
    assert!(!d.exists("groups/ma\u{2215}in/CLAUDE.md"));
    let listing: Vec<_> = std::fs::read_dir(d.path("outside")).unwrap().collect();
    assert_eq!(listing.len(), 1, "nothing was created outside");
    // Skill folders with hostile names are skipped with a warning.
    let report = clawmd(d.root(), &["compose", "ok", "--json"], &[]);
    report.expect(0, "skills");
    let warnings = serde_json::to_string(
        &serde_json::from_str::<serde_json::Value>(&report.stdout()).unwrap()["warnings"],
    )
    .unwrap();
    assert_eq!(warnings.matches("bad-skill-name").count(), 3, "{warnings}");
    runs += 1;
    figure(
        "hostile_names_through_the_binary",
        format_args!(
            "{runs} runs with hostile group, skill and server names (traversal, look-alikes, NUL, non-UTF-8, 10,000 characters): all refused or skipped with a reason, nothing created outside; {:.1}s",
            started.elapsed().as_secs_f64()
        ),
    );
}

/// A sparse file of `len` bytes (no disk used), starting with `head`.
fn sparse(path: &Path, head: &[u8], len: u64) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, head).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

const HUNDRED_MB: u64 = 100 * 1024 * 1024;

#[test]
fn oversized_files_fail_fast_with_a_size_error_and_change_nothing() {
    let started = Instant::now();
    let composed = || {
        let d = Deployment::on_work_dir()
            .with_standard()
            .group("g", Some("{}"))
            .file("groups/g/CLAUDE.local.md", "mine\n");
        clawmd(d.root(), &["compose", "g"], &[]).expect(0, "setup");
        d
    };
    let mut checked = 0;
    let cases: [(&str, &[&str], &str); 4] = [
        (
            "groups/g/container.json",
            &["compose", "g"],
            "container.json",
        ),
        (
            "groups/g/CLAUDE.md",
            &["compose", "g"],
            "a hand-edited CLAUDE.md",
        ),
        (
            "container/CLAUDE.md",
            &["compose", "g", "--delivery", "copy"],
            "the shared base",
        ),
        ("groups/g/CLAUDE.md", &["migrate"], "a legacy CLAUDE.md"),
    ];
    for (rel, args, what) in cases {
        let d = composed();
        sparse(&d.path(rel), b"{", HUNDRED_MB);
        let before = d.snapshot();
        let run = clawmd(d.root(), args, &[]);
        run.expect(1, what);
        let shown = run.output();
        assert!(
            shown.contains(&d.path(rel).display().to_string()) && shown.contains("larger than"),
            "{what}: {shown}"
        );
        assert!(
            run.elapsed < Duration::from_secs(10),
            "{what}: took {:?}",
            run.elapsed
        );
        let after = d.snapshot();
        let strip = |s: Vec<(String, String, u64, i64, i64)>| -> Vec<_> {
            s.into_iter()
                .filter(|e| !e.0.contains(".clawmd-locks"))
                .collect()
        };
        assert!(strip(before) == strip(after), "{what}: something changed");
        checked += 1;
    }
    // A 100 MB CLAUDE.local.md is the group's own business: never read, kept as it is.
    let d = composed();
    sparse(&d.path("groups/g/CLAUDE.local.md"), b"mine\n", HUNDRED_MB);
    let meta = std::fs::metadata(d.path("groups/g/CLAUDE.local.md")).unwrap();
    let run = clawmd(d.root(), &["compose", "g", "--delivery", "copy"], &[]);
    run.expect(0, "big CLAUDE.local.md");
    assert!(run.elapsed < Duration::from_secs(10));
    let after = std::fs::metadata(d.path("groups/g/CLAUDE.local.md")).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        (meta.len(), meta.ino(), meta.mtime_nsec()),
        (after.len(), after.ino(), after.mtime_nsec())
    );
    figure(
        "oversized_files_fail_fast_with_a_size_error_and_change_nothing",
        format_args!(
            "{checked} files of 100 MB (container.json, hand-edited CLAUDE.md, container/CLAUDE.md, legacy CLAUDE.md) refused with a size-limit error naming the file, nothing changed; a 100 MB CLAUDE.local.md kept untouched; {:.1}s",
            started.elapsed().as_secs_f64()
        ),
    );
}

#[test]
fn invalid_utf8_is_kept_byte_for_byte() {
    let bad: &[u8] = b"# notes \xff\xfe\n\xed\xa0\x80 surrogate, \xc0\xaf overlong, \x00 NUL\n";
    let mut checked = 0;

    // CLAUDE.local.md, the shared base and a skill's instructions, under both deliveries.
    for delivery in ["link", "copy"] {
        let d = Deployment::on_work_dir()
            .with_standard()
            .group("g", Some(r#"{"skills": ["web"]}"#));
        d.write("groups/g/CLAUDE.local.md", bad);
        d.write("container/CLAUDE.md", bad);
        d.write("container/skills/web/instructions.md", bad);
        clawmd(d.root(), &["compose", "g", "--delivery", delivery], &[]).expect(0, delivery);
        assert_eq!(
            std::fs::read(d.path("groups/g/CLAUDE.local.md")).unwrap(),
            bad
        );
        if delivery == "copy" {
            assert_eq!(
                std::fs::read(d.path("groups/g/.claude-fragments/.claude-shared.md")).unwrap(),
                bad
            );
            assert_eq!(
                std::fs::read(d.path("groups/g/.claude-fragments/web.md")).unwrap(),
                bad
            );
        }
        // A hand edit (of the composed CLAUDE.md) that is not UTF-8 is rescued byte for byte.
        let composed = Deployment::composed("g", "CLAUDE.md");
        let mut edited = std::fs::read(d.path(&composed)).unwrap();
        edited.extend_from_slice(bad);
        d.write(&composed, &edited);
        clawmd(d.root(), &["compose", "g", "--delivery", delivery], &[]).expect(0, "rescue");
        let rescued = std::fs::read_dir(d.rescue_dir("g"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().contains("rescued-"))
            .expect("rescued");
        assert_eq!(std::fs::read(rescued).unwrap(), edited);
        checked += 5;
    }

    // migrate: a legacy CLAUDE.md (alone and beside a CLAUDE.local.md) and groups/global.
    let d = Deployment::on_work_dir()
        .with_standard()
        .group("a", None)
        .group("b", None)
        .file("groups/b/CLAUDE.local.md", "mine\n");
    d.write("groups/a/CLAUDE.md", bad);
    d.write("groups/b/CLAUDE.md", bad);
    d.write("groups/global/CLAUDE.md", bad);
    // Kept aside by default, byte for byte...
    let aside = d.copy_on_work_dir();
    clawmd(aside.root(), &["migrate"], &[]).expect(0, "migrate, global kept aside");
    let kept = aside.path(&format!(
        "groups/.clawmd/legacy/{}",
        clawmd::migrate::legacy_global_name(bad)
    ));
    assert_eq!(std::fs::read(kept).unwrap(), bad);
    // ...or appended to the shared base when asked.
    clawmd(d.root(), &["migrate", "--append-global"], &[]).expect(0, "migrate");
    assert_eq!(
        std::fs::read(d.path("groups/a/CLAUDE.local.md")).unwrap(),
        bad
    );
    let merged = std::fs::read(d.path("groups/b/CLAUDE.local.md")).unwrap();
    assert!(merged.starts_with(b"mine\n") && contains(&merged, bad));
    let base = std::fs::read(d.path("container/CLAUDE.md")).unwrap();
    assert!(base.starts_with(b"BASE\n") && contains(&base, bad));
    clawmd(d.root(), &["compose", "--all", "--delivery", "copy"], &[]).expect(0, "compose");
    assert_eq!(
        std::fs::read(d.path("groups/a/.claude-fragments/.claude-shared.md")).unwrap(),
        base
    );
    checked += 4;

    // container.json that is not UTF-8: a clear error with a position.
    let d = Deployment::on_work_dir().with_standard().group("g", None);
    d.write("groups/g/container.json", b"{\"skills\": \"\xff\"}");
    let run = clawmd(d.root(), &["compose", "g"], &[]);
    run.expect(1, "invalid UTF-8 config");
    // A failed group is printed on stderr.
    assert!(run.stderr().contains("container.json:1:"), "{}", run.show());
    checked += 1;
    figure(
        "invalid_utf8_is_kept_byte_for_byte",
        format_args!(
            "{checked} byte-for-byte checks of invalid UTF-8 through compose (link, copy, rescue) and migrate: all kept"
        ),
    );
}

#[test]
fn deeply_nested_and_huge_json_values_do_not_overflow_or_hang() {
    let d = Deployment::standard().group("g", None);
    let deep = format!(
        "{{\"skills\": {}{}}}",
        "[".repeat(200_000),
        "]".repeat(200_000)
    );
    let wide = format!(
        "{{\"mcpServers\": {{\"db\": {{\"instructions\": \"{}\"}}}}}}",
        "`".repeat(1_000_000)
    );
    for (what, config, code) in [
        ("200,000 nested arrays", &deep, 1),
        ("a 1 MB backtick run", &wide, 0),
    ] {
        d.write("groups/g/container.json", config.as_bytes());
        let run = clawmd(d.root(), &["compose", "g", "--delivery", "copy"], &[]);
        run.expect(code, what);
        assert!(
            run.elapsed < Duration::from_secs(20),
            "{what}: {:?}",
            run.elapsed
        );
    }
    let fragment = std::fs::read_to_string(d.path("groups/g/.claude-fragments/mcp-db.md")).unwrap();
    assert!(
        fragment.contains(&format!("{}text\n", "`".repeat(1_000_001))),
        "fence longer than the run"
    );
    figure(
        "deeply_nested_and_huge_json_values_do_not_overflow_or_hang",
        "200,000 nested arrays refused (exit 1, no stack overflow); a 1 MB backtick run fenced by a longer fence",
    );
}
