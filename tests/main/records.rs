//! A group's record stands for the group only while everything its last look read finds the
//! same (`clawmd::reads`): after any edit an agent, an operator or a crash can make, a compose
//! that may answer from the record reports exactly what a compose without records reports.

use crate::support::Deployment;

const CONFIG: &str =
    r#"{"skills": "all", "mcpServers": {"db": {"command": "db", "instructions": "Read only."}}}"#;

/// An edit, by name.
type Edit = (&'static str, Box<dyn Fn(&Deployment)>);

/// The edits, each on a group composed twice (its record holds a look).
fn edits() -> Vec<Edit> {
    vec![
        (
            "local memory, same size",
            Box::new(|d: &Deployment| {
                let text = d.read("groups/g/CLAUDE.local.md");
                d.write("groups/g/CLAUDE.local.md", b"NOTE A\n");
                d.write(
                    "groups/g/CLAUDE.local.md",
                    format!("{text}NOTE B\n").as_bytes(),
                );
            }),
        ),
        (
            "local memory grown past what Claude Code reads",
            Box::new(|d: &Deployment| {
                d.write("groups/g/CLAUDE.local.md", &vec![b'x'; 41_000]);
            }),
        ),
        (
            "mount point edited",
            Box::new(|d: &Deployment| {
                let text = d.read("groups/g/CLAUDE.md");
                d.write("groups/g/CLAUDE.md", format!("{text}edited\n").as_bytes());
            }),
        ),
        (
            "settings planted",
            Box::new(|d: &Deployment| {
                d.write(
                    "groups/g/.claude/settings.json",
                    br#"{"claudeMdExcludes": ["**/CLAUDE.md"]}"#,
                );
            }),
        ),
        (
            "local memory replaced by a FIFO",
            Box::new(|d: &Deployment| {
                std::fs::remove_file(d.path("groups/g/CLAUDE.local.md")).unwrap();
                rustix::fs::mknodat(
                    rustix::fs::CWD,
                    d.path("groups/g/CLAUDE.local.md"),
                    rustix::fs::FileType::Fifo,
                    rustix::fs::Mode::from_raw_mode(0o644),
                    0,
                )
                .unwrap();
            }),
        ),
        (
            "local memory replaced by a link to the same text",
            Box::new(|d: &Deployment| {
                let text = d.read("groups/g/CLAUDE.local.md");
                d.write("elsewhere.md", text.as_bytes());
                std::fs::remove_file(d.path("groups/g/CLAUDE.local.md")).unwrap();
                d.symlink("groups/g/CLAUDE.local.md", d.path("elsewhere.md"));
            }),
        ),
        (
            "container.json edited",
            Box::new(|d: &Deployment| {
                d.write("groups/g/container.json", br#"{"skills": ["web"]}"#)
            }),
        ),
        (
            "container.json removed",
            Box::new(|d: &Deployment| {
                std::fs::remove_file(d.path("groups/g/container.json")).unwrap()
            }),
        ),
        (
            "a shared source changed",
            Box::new(|d: &Deployment| d.write("container/skills/web/instructions.md", b"WEB 2\n")),
        ),
        (
            "a skill added",
            Box::new(|d: &Deployment| d.write("container/skills/new/instructions.md", b"NEW\n")),
        ),
        (
            "the composed document edited in the state folder, same size",
            Box::new(|d: &Deployment| {
                for path in [
                    Deployment::managed("g", "CLAUDE.md"),
                    "groups/.clawmd/binds/g/CLAUDE.md".to_owned(),
                ] {
                    if d.path(&path).exists() {
                        let text = d
                            .read(&path)
                            .replace("BASE", "BAZE")
                            .replace("local", "LOCAL");
                        d.write(&path, text.as_bytes());
                    }
                }
            }),
        ),
        (
            "the bind folder removed",
            Box::new(|d: &Deployment| {
                std::fs::remove_dir_all(d.path("groups/.clawmd/binds/g")).unwrap()
            }),
        ),
        (
            "the record torn",
            Box::new(|d: &Deployment| {
                let path = d.path("groups/.clawmd/verdicts/g");
                let bytes = std::fs::read(&path).unwrap();
                std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
            }),
        ),
    ]
}

/// Marks the look kept in `group`'s record: a report that answers from the record names
/// `sha256:planted` as the group's spawn digest.
fn plant(d: &Deployment, group: &str) {
    edit_record(d, &format!("groups/.clawmd/verdicts/{group}"), |json| {
        json["look"]["found"]["spawn_digest"] = "sha256:planted".into();
    });
}

/// Edits the body of the sealed record at `rel` (its key kept, sealed again).
fn edit_record(d: &Deployment, rel: &str, edit: impl FnOnce(&mut serde_json::Value)) {
    use sha2::Digest;
    let path = d.path(rel);
    let bytes = std::fs::read(&path).expect("the record is there");
    let body = &bytes[..bytes.len() - 32];
    let mut json: serde_json::Value = serde_json::from_slice(&body[32..]).unwrap();
    edit(&mut json);
    let mut planted = body[..32].to_vec();
    planted.extend(serde_json::to_vec(&json).unwrap());
    let seal: [u8; 32] = sha2::Sha256::digest(&planted).into();
    planted.extend(seal);
    std::fs::write(&path, planted).unwrap();
}

fn spawn_digest(report: &serde_json::Value) -> &serde_json::Value {
    &report["groups"][0]["spawn_digest"]
}

/// A dry run of compose for the group `g` in `delivery`, as JSON.
fn dry_run(delivery: &str) -> [&str; 6] {
    [
        "compose",
        "g",
        "--delivery",
        delivery,
        "--json",
        "--dry-run",
    ]
}

/// What a report says, without the run's own figures.
fn report(d: &Deployment, args: &[&str]) -> serde_json::Value {
    let mut json = d.run(args).json();
    json.as_object_mut().unwrap().remove("elapsed_ms");
    json
}

#[test]
fn a_recorded_look_reports_what_a_fresh_look_does_after_every_edit() {
    for delivery in ["managed", "inline", "copy", "link"] {
        for (name, edit) in edits() {
            let d = Deployment::standard().group("g", Some(CONFIG));
            d.write("groups/g/CLAUDE.local.md", b"my notes\n");
            let compose = ["compose", "g", "--delivery", delivery, "--json"];
            d.run(compose).success();
            let steady = report(&d, &compose);
            assert_eq!(steady["groups"][0]["status"], "unchanged", "{delivery}");
            let dry = dry_run(delivery);
            // Nothing changed: the report is the record's.
            plant(&d, "g");
            assert_eq!(
                spawn_digest(&report(&d, &dry)),
                "sha256:planted",
                "{delivery}"
            );
            edit(&d);
            let from_record = report(&d, &dry);
            assert_ne!(
                spawn_digest(&from_record),
                "sha256:planted",
                "{delivery}: {name}: the record was believed"
            );
            let _ = std::fs::remove_file(d.path("groups/.clawmd/verdicts/g"));
            let fresh = report(&d, &dry);
            assert_eq!(from_record, fresh, "{delivery}: {name}");
            // And composing for real converges to a group found by its record again.
            let _ = d.run(compose);
            let again = report(&d, &compose);
            let _ = std::fs::remove_file(d.path("groups/.clawmd/verdicts/g"));
            assert_eq!(again, report(&d, &compose), "{delivery}: {name}: after");
        }
    }
}

/// A group whose agent has a settings file that changes nothing: its record's look stands
/// until that file changes (what the file does is part of the record's key).
#[test]
fn a_settings_file_of_the_agents_own_is_read_again_by_every_run() {
    let d = Deployment::standard().group("g", Some(CONFIG));
    d.write("groups/g/.claude/settings.json", b"{}");
    let compose = ["compose", "g", "--json"];
    d.run(compose).success();
    d.run(compose).success();
    plant(&d, "g");
    let dry = ["compose", "g", "--json", "--dry-run"];
    assert_eq!(spawn_digest(&report(&d, &dry)), "sha256:planted");
    d.write(
        "groups/g/.claude/settings.json",
        br#"{"claudeMdExcludes": ["**/CLAUDE.md"]}"#,
    );
    let from_record = report(&d, &dry);
    assert_ne!(spawn_digest(&from_record), "sha256:planted");
    let _ = std::fs::remove_file(d.path("groups/.clawmd/verdicts/g"));
    assert_eq!(from_record, report(&d, &dry));
}

/// Files of the agent's own beside the composed ones (its workspace is the group folder)
/// change nothing composed: the record still stands for the group, and says what a run without
/// records says.
#[test]
fn files_of_the_agents_own_leave_the_record_standing() {
    for delivery in ["managed", "inline", "copy", "link"] {
        let d = Deployment::standard().group("g", Some(CONFIG));
        let compose = ["compose", "g", "--delivery", delivery, "--json"];
        d.run(compose).success();
        d.run(compose).success();
        plant(&d, "g");
        d.write("groups/g/notes.txt", b"mine\n");
        d.write("groups/g/work/draft.md", b"@./CLAUDE.md and more\n");
        // Named like a temp, but no journal records it: not a leftover of clawmd's.
        d.write("groups/g/.CLAUDE.md.clawmd-tmp-1", b"half");
        let dry = dry_run(delivery);
        let from_record = report(&d, &dry);
        assert_eq!(spawn_digest(&from_record), "sha256:planted", "{delivery}");
        let _ = std::fs::remove_file(d.path("groups/.clawmd/verdicts/g"));
        let mut fresh = report(&d, &dry);
        fresh["groups"][0]["spawn_digest"] = "sha256:planted".into();
        assert_eq!(from_record, fresh, "{delivery}");
    }
}

/// Marks the findings kept in `group`'s check record: a check that answers from the record
/// reports a finding whose message is `planted`.
fn plant_check(d: &Deployment, group: &str) {
    edit_record(d, &format!("groups/.clawmd/checks/{group}"), |json| {
        let finding = serde_json::json!({
            "severity": "info", "code": "import-missing", "file": "/planted",
            "message": "planted", "fix": "none",
        });
        json["found"]["findings"]
            .as_array_mut()
            .unwrap()
            .push(finding);
    });
}

fn is_planted(report: &serde_json::Value) -> bool {
    report["groups"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["message"] == "planted")
}

/// `report` without the planted finding.
fn unplanted(mut report: serde_json::Value) -> serde_json::Value {
    report["groups"][0]["findings"]
        .as_array_mut()
        .unwrap()
        .retain(|f| f["message"] != "planted");
    report
}

/// What the loader reads beyond the composition: the files local memory imports, the agent's
/// rules, the names in its folder that look like rescues.
fn check_edits() -> Vec<Edit> {
    // Compose's record torn changes nothing check finds (its verdict is worked out again,
    // the same): the check record rightly stands.
    let mut edits: Vec<Edit> = (edits().into_iter())
        .filter(|(name, _)| *name != "the record torn")
        .collect();
    edits.extend::<[Edit; 4]>([
        (
            "the file local memory imports written",
            Box::new(|d: &Deployment| d.write("groups/g/todo.md", b"buy milk\n")),
        ),
        (
            "a rule of the agent's importing a missing file",
            Box::new(|d: &Deployment| d.write("groups/g/.claude/rules/r.md", b"@./gone.md\n")),
        ),
        (
            "a name like a rescue's planted",
            Box::new(|d: &Deployment| d.write("groups/g/CLAUDE.md.rescued-1", b"mine\n")),
        ),
        (
            "the check record torn",
            Box::new(|d: &Deployment| {
                let path = d.path("groups/.clawmd/checks/g");
                let bytes = std::fs::read(&path).unwrap();
                std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
            }),
        ),
    ]);
    edits
}

#[test]
fn a_recorded_check_reports_what_a_fresh_check_does_after_every_edit() {
    for delivery in ["managed", "inline", "copy", "link"] {
        for (name, edit) in check_edits() {
            let d = Deployment::standard().group("g", Some(CONFIG));
            d.write("groups/g/CLAUDE.local.md", b"my notes\n@./todo.md\n");
            d.run(["compose", "g", "--delivery", delivery]).success();
            let check = ["check", "g", "--delivery", delivery, "--json"];
            let _ = d.run(check);
            plant_check(&d, "g");
            assert!(is_planted(&report(&d, &check)), "{delivery}: unchanged");
            edit(&d);
            let from_record = report(&d, &check);
            assert!(
                !is_planted(&from_record),
                "{delivery}: {name}: the check record was believed"
            );
            let _ = std::fs::remove_file(d.path("groups/.clawmd/checks/g"));
            assert_eq!(from_record, report(&d, &check), "{delivery}: {name}");
        }
    }
}

/// Files of the agent's own that nothing loads leave the check record standing.
#[test]
fn files_of_the_agents_own_leave_the_check_record_standing() {
    for delivery in ["managed", "inline", "copy", "link"] {
        let d = Deployment::standard().group("g", Some(CONFIG));
        d.run(["compose", "g", "--delivery", delivery]).success();
        let check = ["check", "g", "--delivery", delivery, "--json"];
        let _ = d.run(check);
        plant_check(&d, "g");
        d.write("groups/g/notes.txt", b"mine\n");
        d.write("groups/g/work/draft.md", b"@./CLAUDE.md and more\n");
        let from_record = report(&d, &check);
        assert!(is_planted(&from_record), "{delivery}");
        let _ = std::fs::remove_file(d.path("groups/.clawmd/checks/g"));
        assert_eq!(unplanted(from_record), report(&d, &check), "{delivery}");
    }
}
