//! A group's record stands for the group only while everything its last look read finds the
//! same (`clawmd::reads`): after any edit an agent, an operator or a crash can make, a compose
//! that may answer from the record reports exactly what a compose without records reports.

use crate::support::Deployment;
use clawmd::check::CheckRecord;
use clawmd::compose::GroupRecord;
use clawmd::sources::record::SourcesRecord;
use clawmd::state::record_file;

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
                d.fifo("groups/g/CLAUDE.local.md");
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
            "a file planted in the bind folder",
            Box::new(|d: &Deployment| d.write("groups/.clawmd/binds/g/planted.md", b"x\n")),
        ),
        (
            "a file planted in the managed folder",
            Box::new(|d: &Deployment| {
                let folder = d.path("groups/.clawmd/binds/g/managed");
                if folder.is_dir() {
                    d.write("groups/.clawmd/binds/g/managed/planted.json", b"{}");
                } else {
                    d.write("groups/.clawmd/binds/g/CLAUDE.md.planted", b"x\n");
                }
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

/// Edits the body of the sealed record at `rel` (its key kept, sealed again), as JSON: a
/// group's record, a check record, or the shared sources' record (`recorded` and `parts`).
fn edit_record(d: &Deployment, rel: &str, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = d.path(rel);
    let bytes = std::fs::read(&path).expect("the record is there");
    let (key, mut json) = record_json(rel, bytes);
    edit(&mut json);
    let planted = if rel.contains("/verdicts/") {
        record_file::<GroupRecord>(&key, json)
    } else if rel.contains("/sources/") {
        record_file::<SourcesRecord>(&key, json)
    } else {
        record_file::<CheckRecord>(&key, json)
    };
    std::fs::write(&path, planted.expect("the edited record encodes")).unwrap();
}

/// The record file `bytes` at `rel` as its key and JSON ([`edit_record`]).
fn record_json(rel: &str, bytes: Vec<u8>) -> ([u8; 32], serde_json::Value) {
    let whole = if rel.contains("/verdicts/") {
        clawmd::state::record_json::<GroupRecord>(bytes)
    } else if rel.contains("/sources/") {
        clawmd::state::record_json::<SourcesRecord>(bytes)
    } else {
        clawmd::state::record_json::<CheckRecord>(bytes)
    };
    whole.expect("a whole record")
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
            let d = composed_group(delivery);
            let compose = ["compose", "g", "--delivery", delivery, "--json"];
            let steady = report(&d, &compose);
            assert_eq!(steady["groups"][0]["status"], "unchanged", "{delivery}");
            assert_edit_is_seen(&d, delivery, name, &edit);
        }
    }
}

/// The same once the group's files have settled: its record, made again, keeps them and the
/// folders of the state by their identity (`Seen::Entries` for a listing), and still stands
/// only while every read finds the same.
#[test]
fn a_record_kept_by_identities_reports_what_a_fresh_look_does_after_every_edit() {
    let all: Vec<(&str, Edit, Deployment)> = (["managed", "link"].into_iter())
        .flat_map(|delivery| edits().into_iter().map(move |edit| (delivery, edit)))
        .map(|(delivery, edit)| (delivery, edit, composed_group(delivery)))
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(2100));
    for (delivery, (name, edit), d) in all {
        let compose = ["compose", "g", "--delivery", delivery, "--json"];
        let steady = report(&d, &compose);
        assert_eq!(steady["groups"][0]["status"], "unchanged", "{delivery}");
        let record = std::fs::read(d.path("groups/.clawmd/verdicts/g")).unwrap();
        let (_, json) = record_json("groups/.clawmd/verdicts/g", record);
        let reads = json["look"]["reads"].as_array().unwrap();
        assert!(
            reads
                .iter()
                .any(|read| read["seen"].get("Entries").is_some()),
            "{delivery}: a listing of the state folder kept by its identity: {json}"
        );
        assert_edit_is_seen(&d, delivery, name, &edit);
    }
}

/// A deployment with the group `g` composed in `delivery` (its record keeps a look).
fn composed_group(delivery: &str) -> Deployment {
    let d = Deployment::standard().group("g", Some(CONFIG));
    d.write("groups/g/CLAUDE.local.md", b"my notes\n");
    d.run(["compose", "g", "--delivery", delivery, "--json"])
        .success();
    d
}

/// With a marker planted in `g`'s record: it is reported before `edit` and not after, and a
/// run without the record reports the same; composing for real converges to a group found by
/// its record again.
fn assert_edit_is_seen(d: &Deployment, delivery: &str, name: &str, edit: &dyn Fn(&Deployment)) {
    let compose = ["compose", "g", "--delivery", delivery, "--json"];
    let dry = dry_run(delivery);
    // Nothing changed: the report is the record's.
    plant(d, "g");
    assert_eq!(
        spawn_digest(&report(d, &dry)),
        "sha256:planted",
        "{delivery}: {name}"
    );
    edit(d);
    let from_record = report(d, &dry);
    assert_ne!(
        spawn_digest(&from_record),
        "sha256:planted",
        "{delivery}: {name}: the record was believed"
    );
    let _ = std::fs::remove_file(d.path("groups/.clawmd/verdicts/g"));
    let fresh = report(d, &dry);
    assert_eq!(from_record, fresh, "{delivery}: {name}");
    let _ = d.run(compose);
    let again = report(d, &compose);
    let _ = std::fs::remove_file(d.path("groups/.clawmd/verdicts/g"));
    assert_eq!(again, report(d, &compose), "{delivery}: {name}: after");
}

/// `g` composed, then composed again (its record now keeps a look), and the record planted:
/// a dry run, the one returned, answers from it.
fn recorded_and_planted(d: &Deployment) -> [&'static str; 4] {
    let compose = ["compose", "g", "--json"];
    d.run(compose).success();
    d.run(compose).success();
    plant(d, "g");
    let dry = ["compose", "g", "--json", "--dry-run"];
    assert_eq!(spawn_digest(&report(d, &dry)), "sha256:planted");
    dry
}

/// A group whose agent has a settings file that changes nothing: its record's look stands
/// until that file changes (what the file does is part of the record's key).
#[test]
fn a_settings_file_of_the_agents_own_is_read_again_by_every_run() {
    let d = Deployment::standard().group("g", Some(CONFIG));
    d.write("groups/g/.claude/settings.json", b"{}");
    let dry = recorded_and_planted(&d);
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

/// The container side of [`sources_deployment`]: every kind of host read the shared sources
/// are made from (a shared base and the file it imports, skills, a fragment folder, the host's
/// managed policy, the runner's Gemini settings).
const SOURCES_CONFIG: &str = r#"{
  "sources": [
    { "kind": "shared" },
    { "kind": "fragments", "dir": "fragments", "pattern": "*.md", "name": "fragment" },
    { "kind": "skills" },
    { "kind": "mcp" }
  ],
  "hostManagedDir": "host-managed",
  "geminiSystemSettings": "runner/gemini.json"
}"#;

fn sources_deployment() -> Deployment {
    let d = Deployment::standard()
        .file("clawmd.json", SOURCES_CONFIG)
        .file("container/CLAUDE.md", "BASE\n@extra.md\n")
        .file("container/extra.md", "EXTRA\n")
        .file("container/other.md", "OTHER\n")
        .file("container/fragments/a.md", "FRAG A\n")
        .file("host-managed/CLAUDE.md", "HOST POLICY\n")
        .file("host-managed/managed-settings.json", "{}")
        .file("runner/gemini.json", "{}")
        .file("container/skills/README", "not a skill\n")
        .group("g", Some(CONFIG))
        .group("web", Some(r#"{"skills": ["web"]}"#));
    d.symlink("container/skills/broken/instructions.md", "missing.md");
    d
}

/// Edits of the container side, each changing what the shared sources hold.
fn source_edits() -> Vec<Edit> {
    let replace = |rel: &'static str, with: &'static [u8]| -> Box<dyn Fn(&Deployment)> {
        Box::new(move |d: &Deployment| d.write(rel, with))
    };
    vec![
        (
            "shared base, same size",
            replace("container/CLAUDE.md", b"BASX\n@extra.md\n"),
        ),
        (
            "a file the shared base imports",
            replace("container/extra.md", b"EXTRB\n"),
        ),
        (
            "skill instructions, same size",
            replace("container/skills/web/instructions.md", b"WEX\n"),
        ),
        (
            "skill added",
            replace("container/skills/new/instructions.md", b"NEW\n"),
        ),
        (
            "skill removed",
            Box::new(|d: &Deployment| {
                std::fs::remove_dir_all(d.path("container/skills/hello")).unwrap()
            }),
        ),
        (
            "skill instructions replaced by a link to nothing",
            Box::new(|d: &Deployment| {
                std::fs::remove_file(d.path("container/skills/web/instructions.md")).unwrap();
                d.symlink("container/skills/web/instructions.md", "missing.md");
            }),
        ),
        (
            "skill instructions replaced by a link to other text",
            Box::new(|d: &Deployment| {
                std::fs::remove_file(d.path("container/skills/web/instructions.md")).unwrap();
                d.symlink(
                    "container/skills/web/instructions.md",
                    d.path("container/other.md"),
                );
            }),
        ),
        (
            "skill instructions replaced by a FIFO",
            Box::new(|d: &Deployment| {
                d.fifo("container/skills/web/instructions.md");
            }),
        ),
        (
            "skills folder replaced by a link to an edited copy",
            Box::new(|d: &Deployment| {
                std::fs::rename(d.path("container/skills"), d.path("skills-copy")).unwrap();
                d.write("skills-copy/hello/instructions.md", b"HELLO AGAIN\n");
                d.symlink("container/skills", d.path("skills-copy"));
            }),
        ),
        (
            "a file in the skills folder replaced by a folder",
            Box::new(|d: &Deployment| {
                std::fs::remove_file(d.path("container/skills/README")).unwrap();
                std::fs::create_dir(d.path("container/skills/README")).unwrap();
            }),
        ),
        (
            "a link to nothing pointed at another nothing",
            Box::new(|d: &Deployment| {
                std::fs::remove_file(d.path("container/skills/broken/instructions.md")).unwrap();
                d.symlink("container/skills/broken/instructions.md", "gone.md");
            }),
        ),
        (
            "fragment added",
            replace("container/fragments/b.md", b"FRAG B\n"),
        ),
        (
            "fragment, same size",
            replace("container/fragments/a.md", b"FRAG X\n"),
        ),
        (
            "fragment replaced by a folder",
            Box::new(|d: &Deployment| {
                std::fs::remove_file(d.path("container/fragments/a.md")).unwrap();
                std::fs::create_dir(d.path("container/fragments/a.md")).unwrap();
            }),
        ),
        (
            "host's managed CLAUDE.md",
            replace("host-managed/CLAUDE.md", b"HOST POLICX\n"),
        ),
        (
            "host's managed settings",
            replace("host-managed/managed-settings.json", br#"{"a": 1}"#),
        ),
        (
            "a file planted in the host's managed folder",
            replace("host-managed/notes.md", b"N\n"),
        ),
        (
            "the runner's Gemini settings",
            replace("runner/gemini.json", br#"{"b": 2}"#),
        ),
    ]
}

/// Marks the shared sources' record: a run that believes it reports a warning `planted`.
fn plant_sources(d: &Deployment) {
    edit_record(d, "groups/.clawmd/sources/container", |json| {
        let note = serde_json::json!({"kind": "MissingSource", "message": "planted"});
        json["recorded"]["notes"].as_array_mut().unwrap().push(note);
    });
}

/// The parts of the reads in the shared sources' record `bytes`.
fn sources_record_parts(bytes: &[u8]) -> Vec<serde_json::Value> {
    let (_, json) = record_json("groups/.clawmd/sources/container", bytes.to_vec());
    json["parts"].as_array().unwrap().clone()
}

fn sources_planted(report: &serde_json::Value) -> bool {
    (report["warnings"].as_array().unwrap().iter()).any(|w| w["message"] == "planted")
}

/// The shared sources' record stands for them only while every host read they were made
/// from finds the same: after any edit of the container side, of the host's managed policy or
/// of the runner's files, a compose reports what a compose without that record reports (and,
/// before the edit, the record is what answers).
#[test]
fn the_shared_sources_record_stands_only_while_their_reads_find_the_same() {
    let all: Vec<(Edit, Deployment)> = (source_edits().into_iter())
        .map(|edit| (edit, sources_deployment()))
        .collect();
    // Files changed in the last two seconds are recorded by their bytes alone: wait, so the
    // record keeps each file by its identity as it would in a deployment long in place.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let dry = ["compose", "--all", "--json", "--dry-run"];
    for ((name, edit), d) in all {
        d.run(["compose", "--all", "--json"]).success();
        d.run(["compose", "--all", "--json"]).success();
        plant_sources(&d);
        assert!(
            sources_planted(&report(&d, &dry)),
            "{name}: before the edit, the record answers"
        );
        edit(&d);
        let from_record = report(&d, &dry);
        assert!(
            !sources_planted(&from_record),
            "{name}: the sources' record was believed"
        );
        std::fs::remove_file(d.path("groups/.clawmd/sources/container")).unwrap();
        assert_eq!(from_record, report(&d, &dry), "{name}");
    }
}

/// A record made right after a source file changed keeps that file by its bytes (its identity
/// cannot stand for them yet), and every run reads it again. Once it has settled, the next
/// run makes the record again, once, keeping it by its identity; the runs after it write
/// nothing. The same after a file is written again with the same bytes (a copy, a deploy).
#[test]
fn the_shared_sources_record_is_made_again_once_its_files_settle() {
    use std::os::unix::fs::MetadataExt;
    let d = sources_deployment();
    let record = || {
        let path = d.path("groups/.clawmd/sources/container");
        let inode = std::fs::metadata(&path).unwrap().ino();
        (inode, std::fs::read(&path).unwrap())
    };
    // Every file read by its bytes is kept by its identity too.
    let by_identity = |bytes: &[u8]| {
        let parts = sources_record_parts(bytes);
        let files: Vec<&serde_json::Value> = (parts.iter())
            .flat_map(|part| part["probes"].as_array().unwrap())
            .filter_map(|probe| probe.get("File"))
            .filter(|file| !file["digest"].is_null())
            .collect();
        assert!(files.len() >= 6, "{parts:?}");
        files.iter().all(|file| !file["identity"].is_null())
    };
    let no_op = || {
        let run = d.run(["compose", "--all", "--json"]).success().json();
        assert_eq!(run["summary"]["unchanged"], 2, "{run}");
    };
    d.run(["compose", "--all"]).success();
    assert!(!by_identity(&record().1), "made at once, by the bytes");
    for change in ["none", "the same bytes written again"] {
        if change != "none" {
            d.write("container/extra.md", b"EXTRA\n");
        }
        std::thread::sleep(std::time::Duration::from_millis(2100));
        let before = record();
        no_op();
        let remade = record();
        assert_ne!(remade.1, before.1, "{change}: made again");
        assert_eq!(remade.0, before.0, "{change}: in place (no inode freed)");
        assert!(by_identity(&remade.1), "{change}");
        no_op();
        assert_eq!(record(), remade, "{change}: the next run writes nothing");
    }
}

/// `report` without the planted warning.
fn without_planted_warning(mut report: serde_json::Value) -> serde_json::Value {
    (report["warnings"].as_array_mut().unwrap()).retain(|w| w["message"] != "planted");
    report
}

/// A group depends on the container-side items it gets: after an edit of a skill another
/// group gets, its record still answers for it, and says what a run without records says. A
/// group that gets that skill is looked at again, and so is every group in link delivery (the
/// whole of `container/` is mounted, which the loader may read).
#[test]
fn an_edit_of_a_skill_is_looked_at_only_by_the_groups_that_get_it() {
    let managed = sources_deployment();
    let linked = sources_deployment();
    std::thread::sleep(std::time::Duration::from_millis(2100));
    for (d, delivery) in [(&managed, "managed"), (&linked, "link")] {
        let compose = ["compose", "--all", "--delivery", delivery, "--json"];
        d.run(compose).success();
        d.run(compose).success();
        plant_sources(d);
        d.write("container/skills/hello/instructions.md", b"HELLX\n");
        let dry = |group| {
            [
                "compose",
                group,
                "--delivery",
                delivery,
                "--json",
                "--dry-run",
            ]
        };
        let from_record = [report(d, &dry("web")), report(d, &dry("g"))];
        let answered = from_record.iter().map(sources_planted).collect::<Vec<_>>();
        let expected = match delivery {
            "managed" => [true, false],
            _ => [false, false],
        };
        assert_eq!(
            answered, expected,
            "{delivery}: web, g answered by the record"
        );
        std::fs::remove_file(d.path("groups/.clawmd/sources/container")).unwrap();
        let fresh = [report(d, &dry("web")), report(d, &dry("g"))];
        let from_record = from_record.map(without_planted_warning);
        assert_eq!(from_record, fresh, "{delivery}");
    }
}

/// A run that composes a group records its verdict but no look: the files it wrote cannot be
/// kept by their identity yet, so a look made then would only be made again. Once they have
/// settled, the next run (not a dry run) looks at the group and records the look, once,
/// keeping every file of clawmd's it read by its identity, and every file of the group folder
/// by its identity only where its pages were clean when it was read (written back: on ext4,
/// XFS and Btrfs, which say so; never on tmpfs), since the agent writes there and a write
/// through a shared mapping to a dirty page leaves a file's identity as it was; nothing else
/// is written, and the runs after it write nothing at all.
#[test]
fn a_groups_record_is_made_again_once_its_files_settle() {
    use std::os::unix::fs::MetadataExt;
    let d = Deployment::standard().group("g", Some(CONFIG));
    let record = || {
        let path = d.path("groups/.clawmd/verdicts/g");
        let inode = std::fs::metadata(&path).unwrap().ino();
        (inode, std::fs::read(&path).unwrap())
    };
    // Whether every file of the group folder is kept by its identity where the filesystem
    // tells clean pages (everything is written back before that look, below) and by its bytes
    // alone elsewhere, and every file of the bind folder by its identity.
    #[allow(
        clippy::unnecessary_cast,
        reason = "f_type's type differs between targets"
    )]
    let tells_clean = [0xEF53, 0x5846_5342, 0x9123_683E]
        .contains(&(rustix::fs::statfs(d.root()).unwrap().f_type as i64));
    let by_identity = |bytes: &[u8]| {
        let (_, json) = record_json("groups/.clawmd/verdicts/g", bytes.to_vec());
        let reads = json["look"]["reads"].as_array().unwrap();
        let files: Vec<&serde_json::Value> = (reads.iter())
            .filter(|read| read["root"] == "Group")
            .filter_map(|read| read["seen"].get("File"))
            .filter(|file| !file["digest"].is_null())
            .collect();
        assert!(files.len() >= 2, "{json}");
        let own: Vec<&serde_json::Value> = (reads.iter())
            .filter(|read| read["root"] == "Bind")
            .filter_map(|read| read["seen"].get("Identity"))
            .collect();
        assert!(!own.is_empty(), "{json}");
        files
            .iter()
            .all(|file| file["identity"].is_null() != tells_clean)
            && own.iter().all(|file| !file["identity"].is_null())
    };
    let compose = ["compose", "g", "--json"];
    let unchanged =
        |run: serde_json::Value| assert_eq!(run["groups"][0]["status"], "unchanged", "{run}");
    d.run(compose).success();
    let (_, json) = record_json("groups/.clawmd/verdicts/g", record().1);
    assert!(json["look"].is_null(), "the verdict, no look: {json}");
    assert!(json["delivered"].is_object(), "{json}");
    std::thread::sleep(std::time::Duration::from_millis(2100));
    rustix::fs::sync();
    let before = (record(), d.snapshot());
    unchanged(
        d.run(["compose", "g", "--json", "--dry-run"])
            .success()
            .json(),
    );
    assert_eq!(record(), before.0, "a dry run writes nothing");
    unchanged(d.run(compose).success().json());
    let remade = record();
    assert_ne!(remade.1, before.0.1, "made again");
    assert_eq!(remade.0, before.0.0, "in place (no inode freed)");
    assert!(by_identity(&remade.1));
    let after = d.snapshot();
    let differ: Vec<_> = (after.iter())
        .filter(|entry| !before.1.contains(entry))
        .map(|entry| &entry.0)
        .collect();
    assert!(differ.is_empty(), "nothing else is written: {differ:?}");
    assert_eq!(after, before.1);
    unchanged(d.run(compose).success().json());
    assert_eq!(record(), remade, "the next run writes nothing");
}

/// A long-lived service keeps what the agent's settings files do between spawns. A settings
/// file it read right after it was written is kept by its bytes; once the file has settled
/// and its pages are written back, the service reads it again, once, and the group's look
/// keeps it by its identity (where the filesystem tells clean pages: never on tmpfs), so the
/// spawns after that do not read it. The group's record of that look stands at the next
/// spawn, which writes nothing.
#[test]
fn a_services_look_keeps_the_agents_settings_by_identity_once_they_settle() {
    let d = Deployment::standard().group("g", Some(CONFIG));
    d.write(
        "groups/g/.claude/settings.json",
        br#"{"autoMemoryEnabled": false}"#,
    );
    #[allow(
        clippy::unnecessary_cast,
        reason = "f_type's type differs between targets"
    )]
    let tells_clean = [0xEF53, 0x5846_5342, 0x9123_683E]
        .contains(&(rustix::fs::statfs(d.root()).unwrap().f_type as i64));
    let mut service =
        clawmd::service::Service::new(d.root(), clawmd::settings::Overrides::default()).unwrap();
    let mut spawn = |id: u32| {
        let request = serde_json::json!({"id": id, "group": "g"}).to_string();
        let answer = service.answer_line(request.as_bytes());
        assert!(answer.ok, "{answer:?}");
    };
    let record = || std::fs::read(d.path("groups/.clawmd/verdicts/g")).unwrap();
    spawn(1);
    std::thread::sleep(std::time::Duration::from_millis(2100));
    rustix::fs::sync();
    spawn(2);
    let kept = record();
    let (_, json) = record_json("groups/.clawmd/verdicts/g", kept.clone());
    let reads = json["look"]["agent"]["reads"]
        .as_array()
        .expect("the agent's reads kept");
    let settings: Vec<&serde_json::Value> = (reads.iter())
        .filter(|read| read["name"] == "settings.json")
        .filter_map(|read| read["seen"].get("File"))
        .filter(|file| !file["digest"].is_null())
        .collect();
    assert_eq!(settings.len(), 1, "{json}");
    assert_eq!(
        settings[0]["identity"].is_null(),
        !tells_clean,
        "kept by its identity where pages tell clean: {json}"
    );
    spawn(3);
    assert_eq!(record(), kept, "the look stands: nothing is written");
}

/// A group's look keeps the agent's settings file by its identity where the filesystem tells
/// clean pages. Rewritten with the same bytes, the file is found by its bytes while it is
/// fresh (the record stands: nothing is written), and once it has settled the look is made
/// again, once, with its new identity; the run after that writes nothing.
#[test]
fn a_look_finding_the_agents_settings_by_their_bytes_is_made_again_once_they_settle() {
    let d = Deployment::standard().group("g", Some(CONFIG));
    let settings = "groups/g/.claude/settings.json";
    d.write(settings, br#"{"autoMemoryEnabled": false}"#);
    #[allow(
        clippy::unnecessary_cast,
        reason = "f_type's type differs between targets"
    )]
    let tells_clean = [0xEF53, 0x5846_5342, 0x9123_683E]
        .contains(&(rustix::fs::statfs(d.root()).unwrap().f_type as i64));
    let record = || std::fs::read(d.path("groups/.clawmd/verdicts/g")).unwrap();
    let settle = || {
        std::thread::sleep(std::time::Duration::from_millis(2100));
        rustix::fs::sync();
    };
    let compose = || {
        let run = d.run(["compose", "g", "--json"]).success().json();
        assert_eq!(run["groups"][0]["status"], "unchanged", "{run}");
    };
    d.run(["compose", "g", "--json"]).success();
    settle();
    compose();
    let looked = record();
    d.write(settings, br#"{"autoMemoryEnabled": false}"#);
    compose();
    assert_eq!(record(), looked, "found by its bytes: the record stands");
    settle();
    compose();
    let again = record();
    assert_eq!(
        again != looked,
        tells_clean,
        "made again once its identity would do (where pages tell clean)"
    );
    compose();
    assert_eq!(record(), again, "the run after writes nothing");
}

/// Records are this boot's: compose writes what it derives without an fsync, so after the
/// machine stops and starts again (another boot id) no record vouches for a file by its
/// identity — a power loss may have torn a file whose identity survived — and the group is
/// looked at byte for byte, then recorded again for that boot. The same boot still believes
/// its record.
#[test]
fn a_record_of_another_boot_is_not_believed() {
    let d = Deployment::standard().group("g", Some(CONFIG));
    let compose = ["compose", "g", "--json"];
    let dry = recorded_and_planted(&d);
    let in_boot = |boot: &str, args: &[&str]| {
        let env = [
            ("CLAWMD_ROOT", d.root().as_os_str()),
            ("CLAWMD_BOOT_ID", std::ffi::OsStr::new(boot)),
        ];
        crate::support::run::run_clawmd(args, &env).success().json()
    };
    let after_reboot = in_boot("another boot", &dry);
    assert_ne!(
        spawn_digest(&after_reboot),
        "sha256:planted",
        "a record of another boot was believed"
    );
    assert_eq!(
        after_reboot["groups"][0]["status"], "unchanged",
        "{after_reboot}"
    );
    assert_eq!(spawn_digest(&report(&d, &dry)), "sha256:planted");
    // The next boot's own record, once made, answers in that boot.
    in_boot("another boot", &compose);
    in_boot("another boot", &compose);
    plant(&d, "g");
    assert_eq!(
        spawn_digest(&in_boot("another boot", &dry)),
        "sha256:planted"
    );
}
