//! `clawmd migrate`, run as the real binary on temp deployments.

use crate::support::{Deployment, snapshot};

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
    let run = d.run(["migrate", "--json", "--append-global"]).success();
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

/// A lock held by another run is not a silent wait for migrate either: after a moment a line
/// says so, as compose's does, and the timeout fails only that group.
#[test]
fn a_held_lock_is_announced_on_stderr() {
    let d = legacy_deployment();
    std::fs::create_dir_all(d.path("groups/.clawmd-locks")).unwrap();
    let lock = std::fs::File::create(d.path("groups/.clawmd-locks/solo.lock")).unwrap();
    lock.lock().unwrap();
    let run = d
        .run(["migrate", "--lock-timeout", "1", "--json"])
        .expect_code(1);
    assert!(
        run.stderr().contains("waiting for lock on ")
            && run
                .stderr()
                .contains("solo.lock (held by another run) to migrate solo"),
        "{}",
        run.stderr()
    );
    assert_eq!(run.stderr().matches("waiting for lock").count(), 1);
    assert!(d.exists("groups/solo/CLAUDE.md"), "solo waits, untouched");
    assert!(
        !d.exists("groups/both/CLAUDE.md"),
        "the other groups migrate"
    );
    drop(lock);
    d.run(["migrate", "--lock-timeout", "1"]).success();
    assert!(!d.exists("groups/solo/CLAUDE.md"));
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

    // Even an edited mount point is compose's business (it warns about it), not legacy.
    let edited = d.read("groups/g/CLAUDE.md") + "edit\n";
    d.write("groups/g/CLAUDE.md", edited.as_bytes());
    d.run(["migrate"]).success();
    assert_eq!(d.read("groups/g/CLAUDE.md"), edited);
    // And so is a hand-edited document of the old layout (compose rescues it).
    let old = String::from_utf8(clawmd::plan::composed_document("BASE\n")).unwrap() + "edit\n";
    d.write("groups/g/CLAUDE.md", old.as_bytes());
    d.run(["migrate"]).success();
    assert_eq!(d.read("groups/g/CLAUDE.md"), old);
}

#[test]
fn global_text_moves_into_the_shared_base_and_the_folder_goes_when_empty() {
    let d = legacy_deployment();
    d.run(["migrate", "--append-global"]).success();
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
    let run = d.run(["migrate", "--append-global"]).success();
    assert_eq!(d.read("groups/global/notes.txt"), "keep me\n");
    assert!(!d.exists("groups/global/CLAUDE.md"));
    assert!(d.read("container/CLAUDE.md").ends_with("G\n"));
    // The warning about what was left goes to stderr.
    assert!(run.stderr().contains("notes.txt"), "{}", run.stderr());
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
    let run = d.run(["migrate", "--dry-run", "--append-global"]).success();
    assert_eq!(d.snapshot(), before);
    let out = run.stdout();
    assert!(out.contains("solo: would migrate"), "{out}");
    assert!(out.contains("CLAUDE.md -> CLAUDE.local.md"), "{out}");
    assert!(out.contains("dry run"), "{out}");
    insta::with_settings!({filters => snapshot::filters(d.root())}, {
        insta::assert_snapshot!("migrate_dry_run_human", snapshot::streams(&run));
    });
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
        // Nothing was kept aside as a hand edit (rescues live outside the group).
        assert_eq!(d.rescues(group), Vec::<String>::new(), "{group}");
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
        run.stderr().contains("not a legacy link"),
        "{}",
        run.stderr()
    );
}

// ---- Issue 8: whole-text matching, size limits, concurrent appends, ownership, escapes ----

#[test]
fn legacy_text_that_is_only_a_substring_of_the_local_file_is_kept() {
    let d = Deployment::standard()
        .group("g", None)
        .file("groups/g/CLAUDE.md", "deploy on fridays\n")
        .file("groups/g/CLAUDE.local.md", "never deploy on fridays\n");
    let run = d.run(["migrate", "--json"]).success();
    assert_eq!(
        run.json()["groups"][0]["actions"][0]["action"],
        "merge-legacy"
    );
    assert_eq!(
        d.read("groups/g/CLAUDE.local.md"),
        "never deploy on fridays\n\n<!-- clawmd migrate: the text below was this group's hand-written CLAUDE.md -->\ndeploy on fridays\n"
    );
    assert!(!d.exists("groups/g/CLAUDE.md"));
    // Whole text on its own lines is recognised: a second legacy file with it goes.
    d.write("groups/g/CLAUDE.md", b"deploy on fridays\n");
    let run = d.run(["migrate", "--json"]).success();
    assert_eq!(
        run.json()["groups"][0]["actions"][0]["action"],
        "remove-migrated"
    );
}

#[test]
fn global_memory_over_the_shared_base_limit_is_refused_before_anything_is_appended() {
    let mib = 1024 * 1024;
    let d = Deployment::standard().group("g", None);
    d.write("container/CLAUDE.md", &vec![b'b'; 10 * mib]);
    d.write("groups/global/CLAUDE.md", &vec![b'g'; 7 * mib]);
    // Paths and contents (the lock folder and the groups folder's mtime aside).
    let snapshot = || -> Vec<(String, String)> {
        d.snapshot()
            .into_iter()
            .filter(|entry| !entry.0.starts_with("groups/.clawmd-locks"))
            .map(|entry| (entry.0, entry.1))
            .collect()
    };
    let before = snapshot();
    let run = d
        .run(["migrate", "--json", "--append-global"])
        .expect_code(1);
    let global = run.json()["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["group"] == "global")
        .cloned()
        .unwrap();
    assert_eq!(global["error"]["code"], "too-large", "{global}");
    assert!(
        global["error"]["file"]
            .as_str()
            .unwrap()
            .ends_with("container/CLAUDE.md"),
        "{global}"
    );
    assert!(snapshot() == before, "nothing appended, nothing removed");
    // The deployment still composes, and a global memory that fits moves.
    d.run(["compose", "--all"]).success();
    d.write("groups/global/CLAUDE.md", &vec![b'g'; 5 * mib]);
    d.run(["migrate", "--append-global"]).success();
    assert!(!d.exists("groups/global"));
    d.run(["compose", "--all"]).success();
}

#[test]
fn an_agent_appending_to_claude_local_md_during_migrate_loses_nothing() {
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    const GROUPS: usize = 24;
    let mut d = Deployment::standard();
    let legacy = "legacy rule\n".repeat(20_000);
    for g in 0..GROUPS {
        d = d
            .group(&format!("g{g}"), None)
            .file(&format!("groups/g{g}/CLAUDE.md"), &legacy)
            .file(&format!("groups/g{g}/CLAUDE.local.md"), "own notes\n");
    }
    let stop = AtomicBool::new(false);
    let rounds = AtomicUsize::new(0);
    let wait_for_a_round = |writer: &std::thread::ScopedJoinHandle<'_, Vec<usize>>| {
        let seen = rounds.load(Ordering::SeqCst);
        while rounds.load(Ordering::SeqCst) <= seen && !writer.is_finished() {
            std::thread::yield_now();
        }
    };
    let appended = std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let mut count = vec![0usize; GROUPS];
            while !stop.load(Ordering::SeqCst) {
                for (g, n) in count.iter_mut().enumerate() {
                    let mut file = std::fs::OpenOptions::new()
                        .append(true)
                        .open(d.path(&format!("groups/g{g}/CLAUDE.local.md")))
                        .unwrap();
                    file.write_all(format!("agent line {g}-{n}\n").as_bytes())
                        .unwrap();
                    *n += 1;
                }
                rounds.fetch_add(1, Ordering::SeqCst);
            }
            count
        });
        // The agent is appending before migrate starts and still appending after it ends.
        wait_for_a_round(&writer);
        let run = d.run(["migrate"]);
        wait_for_a_round(&writer);
        stop.store(true, Ordering::SeqCst);
        run.success();
        writer.join().unwrap()
    });
    let mut lost = 0;
    for (g, count) in appended.iter().enumerate() {
        let text = d.read(&format!("groups/g{g}/CLAUDE.local.md"));
        assert!(text.starts_with("own notes\n"), "g{g}");
        assert!(text.contains(&legacy), "g{g}: the legacy text is whole");
        let lines: std::collections::HashSet<&str> = text.lines().collect();
        lost += (0..*count)
            .filter(|n| !lines.contains(format!("agent line {g}-{n}").as_str()))
            .count();
        assert!(!d.exists(&format!("groups/g{g}/CLAUDE.md")));
    }
    let total: usize = appended.iter().sum();
    eprintln!(
        "[reliability] an_agent_appending_to_claude_local_md_during_migrate_loses_nothing: {total} lines appended to {GROUPS} groups during one migrate, {lost} lost"
    );
    assert!(total > GROUPS, "the agent appended during the run");
    assert_eq!(lost, 0, "{lost} of {total} appended lines lost");
}

#[test]
fn files_migrate_moves_or_merges_keep_the_group_owner() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    if !rustix::process::geteuid().is_root() {
        eprintln!(
            "\n!!!!! SKIPPED files_migrate_moves_or_merges_keep_the_group_owner: needs root !!!!!\n"
        );
        return;
    }
    let d = Deployment::standard()
        .group("moved", None)
        .file("groups/moved/CLAUDE.md", "legacy\n")
        .group("merged", None)
        .file("groups/merged/CLAUDE.md", "legacy\n")
        .file("groups/merged/CLAUDE.local.md", "mine\n");
    for group in ["moved", "merged"] {
        let dir = d.path(&format!("groups/{group}"));
        std::os::unix::fs::chown(&dir, Some(4242), Some(4343)).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let local = d.path("groups/merged/CLAUDE.local.md");
    std::os::unix::fs::chown(&local, Some(4444), Some(4545)).unwrap();
    std::fs::set_permissions(&local, std::fs::Permissions::from_mode(0o600)).unwrap();
    d.run(["migrate"]).success();
    let owner = |rel: &str| {
        let meta = std::fs::metadata(d.path(rel)).unwrap();
        (meta.uid(), meta.gid(), meta.mode() & 0o777)
    };
    assert_eq!(owner("groups/moved/CLAUDE.local.md"), (4242, 4343, 0o644));
    assert_eq!(owner("groups/merged/CLAUDE.local.md"), (4444, 4545, 0o600));
    assert!(
        d.read("groups/merged/CLAUDE.local.md")
            .ends_with("legacy\n")
    );
}

#[test]
fn human_output_escapes_control_characters_from_disk() {
    let d = Deployment::standard()
        .file("groups/global/CLAUDE.md", "G\n")
        .file(
            "groups/global/notes\u{1b}[2J\n1 folder(s) checked, 0 migrated",
            "keep\n",
        );
    let run = d.run(["migrate", "--dry-run"]).success();
    // Warnings are on stderr, the rest on stdout: neither may carry a control.
    let out = run.stdout() + &run.stderr();
    assert!(!out.contains('\u{1b}'), "{out:?}");
    assert!(out.contains("notes\\u{1b}[2J\\u{a}1 folder(s)"), "{out}");
    let forged = out
        .lines()
        .filter(|l| l.starts_with("1 folder(s) checked, 0 migrated"))
        .count();
    assert_eq!(forged, 0, "{out}");
}
