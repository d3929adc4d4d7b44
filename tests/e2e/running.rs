//! A container running across recomposes (issue 18): one long-lived bubblewrap sandbox per
//! delivery mode and backend, built from the real `clawmd mounts`, runs a shell loop that waits
//! for a script file, runs it inside the same running container and writes its output back.
//! Before and after `clawmd compose` changes the sources, the agent (that shell) can write,
//! rename, replace or remove none of the composed files (every read-only bind of the table:
//! entry point, managed folder files, fragments, guard files and folders, `container.json`,
//! `/app/…`); `spawn_digest` stays the same when only `CLAUDE.local.md` changes and moves when
//! a pinned source changes; a change behind a folder bind is seen by a new session of the
//! running container (the real CLI, in managed delivery), one behind a file bind is not until
//! the container restarts (the real CLI, `/app/CLAUDE.md` in link delivery; the entry point
//! of inline delivery and of each flat backend).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::Deployment;
use crate::support::running::RunningSandbox;
use crate::support::sandbox::{Bind, Sandbox, WORKSPACE};

/// A container of `group` kept running, as the runner starts it from `clawmd mounts`.
fn start(dep: &Deployment, group: &str) -> RunningSandbox {
    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path().join("home");
    std::fs::create_dir(&home).unwrap();
    // Link delivery's `/app/CLAUDE.md` is an external import: approved, as a link runner does.
    let approved = json!({"projects": {WORKSPACE: {
        "hasClaudeMdExternalIncludesApproved": true,
        "hasClaudeMdExternalIncludesWarningShown": true,
    }}});
    std::fs::write(home.join(".claude.json"), approved.to_string()).unwrap();
    let hostname = scratch.path().join("hostname");
    std::fs::write(&hostname, "running\n").unwrap();
    let mut running = RunningSandbox::start(Sandbox::for_group(dep.root(), group, home, hostname));
    running.keep.push(scratch);
    running
}

/// The shell lines that try every way the agent could change the file `file`: append,
/// truncate, replace by a rename from beside it, remove, rename away. Each way that works
/// prints `BREACH`; a file that is not there prints `MISSING` (so no check passes on nothing).
fn attack_file(file: &str) -> String {
    attack_file_with(file, "")
}

/// [`attack_file`], running `setup` before each attack (the canary is made again each time).
fn attack_file_with(file: &str, setup: &str) -> String {
    format!(
        r#"if [ -e '{file}' ]; then
  {setup}try "echo x >> '{file}'"
  {setup}try ": > '{file}'"
  {setup}try "printf y > '{file}.e2e-new' && mv -f '{file}.e2e-new' '{file}'"
  rm -f '{file}.e2e-new' 2>/dev/null
  {setup}try "rm -f '{file}' && [ ! -e '{file}' ]"
  {setup}try "mv '{file}' '{file}.e2e-moved'"
else echo "MISSING {file}"; fi
"#
    )
}

/// The attack script for the binds `table` makes read-only: each file bind, each file inside a
/// folder bind (listed on the host), a new file in each folder, the folder removed or moved;
/// and a canary in the workspace, which every attack must break (the script works).
fn attacks(table: &[Bind]) -> String {
    let mut script = String::from(
        "try() { if sh -c \"$1\" 2>/dev/null; then echo \"BREACH: $1\"; fi; }\necho canary > /workspace/agent/e2e-canary\n",
    );
    let canary = "/workspace/agent/e2e-canary";
    script.push_str(&attack_file_with(
        canary,
        &format!("echo canary > {canary}; "),
    ));
    script.push_str("rm -f /workspace/agent/e2e-canary*\n");
    for bind in table.iter().filter(|b| b.readonly) {
        let container = bind.container.display().to_string();
        if bind.host.is_dir() {
            for file in files_under(&bind.host) {
                let inside = bind.container.join(file.strip_prefix(&bind.host).unwrap());
                script.push_str(&attack_file(&inside.display().to_string()));
            }
            script.push_str(&format!(
                "try \"echo x > '{container}/e2e-planted'\"\ntry \"rm -rf '{container}' && [ ! -e '{container}' ]\"\ntry \"mv '{container}' '{container}.e2e-moved'\"\n"
            ));
        } else {
            script.push_str(&attack_file(&container));
        }
    }
    script
}

/// The regular files under `dir`, recursively (links are the agent's to follow, not to write).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            files.extend(files_under(&path));
        } else if meta.is_file() {
            files.push(path);
        }
    }
    files
}

/// Runs the attacks in the running container: none may work (the canary's five must).
#[track_caller]
fn nothing_composed_is_writable(running: &mut RunningSandbox, table: &[Bind], when: &str) {
    let out = running.run(&attacks(table));
    let canary = out
        .lines()
        .filter(|l| l.starts_with("BREACH") && l.contains("e2e-canary"))
        .count();
    assert_eq!(
        canary, 5,
        "{when}: the attacks must work on a plain file:\n{out}"
    );
    let broken: Vec<&str> = out
        .lines()
        .filter(|l| !l.contains("e2e-canary"))
        .filter(|l| l.starts_with("BREACH") || l.starts_with("MISSING"))
        .collect();
    assert!(broken.is_empty(), "{when}: {broken:#?}\n{out}");
}

/// `clawmd compose g --json`: the group's entry.
#[track_caller]
fn compose(dep: &Deployment) -> Value {
    let run = dep.run(["compose", "g", "--json"]);
    assert_eq!(run.code(), 0, "{}", run.output());
    run.json()["groups"][0].clone()
}

fn spawn_digest(group: &Value) -> String {
    group["spawn_digest"].as_str().unwrap().to_owned()
}

/// Replaces `rel` by a rename, as git, an editor or a runner does (an in-place write would be
/// seen through a file bind at once: the same inode).
fn put(dep: &Deployment, rel: &str, text: &str) {
    let path = dep.path(rel);
    let temp = path.with_file_name(".e2e-put");
    std::fs::write(&temp, text).unwrap();
    std::fs::rename(&temp, &path).unwrap();
}

/// One group `g` of `config` in `delivery`, composed; its sandbox started; the attacks
/// before and after a recompose that changes the sources; `spawn_digest` across the agent's
/// memory, the sources and `container.json`. Returns the running sandbox and the deployment
/// for the mode's own live/pinned check.
fn across_a_recompose(delivery: &str, config: &str) -> (Deployment, RunningSandbox) {
    let dep = Deployment::standard()
        .file(
            "clawmd.json",
            &format!(r#"{{"delivery": "{delivery}", "approveExternal": true}}"#),
        )
        .group("g", Some(config));
    let first = compose(&dep);
    let spawned = spawn_digest(&first);
    let table = crate::support::sandbox::mounts(dep.root(), "g");
    let mut running = start(&dep, "g");
    nothing_composed_is_writable(
        &mut running,
        &table,
        &format!("{delivery} {config}, at spawn"),
    );

    // The agent saves a memory: no restart asked for.
    running.run("echo 'a note of the agent' >> /workspace/agent/CLAUDE.local.md");
    assert_eq!(
        spawn_digest(&compose(&dep)),
        spawned,
        "{delivery} {config}: CLAUDE.local.md"
    );

    // The sources change (the shared base and a skill, replaced by rename): recomposed while
    // the container runs; nothing composed becomes writable.
    put(&dep, "container/CLAUDE.md", "BASE EDITED WHILE RUNNING\n");
    put(
        &dep,
        "container/skills/web/instructions.md",
        "WEB EDITED WHILE RUNNING\n",
    );
    let recomposed = compose(&dep);
    // (Link delivery's files are links into `/app`: nothing of the group's changes.)
    let changes = if delivery == "link" {
        "unchanged"
    } else {
        "changed"
    };
    assert_eq!(recomposed["status"], changes, "{recomposed:#}");
    let table_after = crate::support::sandbox::mounts(dep.root(), "g");
    assert_eq!(table_after, table, "{delivery}: the table is the same");
    nothing_composed_is_writable(
        &mut running,
        &table,
        &format!("{delivery} {config}, after a recompose"),
    );

    // The shared base and the skill are behind a file bind in inline and link delivery (the
    // entry point, `/app/CLAUDE.md`) and in a flat backend's document; behind folder binds in
    // managed and copy delivery (the managed folder, `.claude-fragments`).
    let pinned = matches!(delivery, "inline" | "link") || config.contains("provider");
    let moved = spawn_digest(&recomposed) != spawned;
    assert_eq!(
        moved, pinned,
        "{delivery} {config}: spawn_digest across the sources' change"
    );
    // A pinned source: container.json (bound as a file), a runner's own key added. Edited in
    // place: replacing it by a rename would rename over the mount point of its bind, which
    // detaches that bind in the running container (docs/delivery.md, "Running containers and
    // recomposes": the operator's own file, which clawmd never writes).
    let spawn_now = spawn_digest(&recomposed);
    let with_key = config.replacen('{', r#"{"runnerKey": 1, "#, 1);
    std::fs::write(dep.path("groups/g/container.json"), with_key).unwrap();
    assert_ne!(
        spawn_digest(&compose(&dep)),
        spawn_now,
        "{delivery} {config}: container.json"
    );
    nothing_composed_is_writable(
        &mut running,
        &table,
        &format!("{delivery} {config}, after a config change"),
    );
    (dep, running)
}

#[test]
fn managed_delivery_a_new_session_sees_the_new_guardrails_and_nothing_is_writable() {
    let (dep, mut running) = across_a_recompose("managed", r#"{"skills": ["web"]}"#);
    // The managed folder is a folder bind: a new session of the running container loads the
    // recomposed guardrails, and spawn_digest did not ask for a restart for them.
    let block = running.session();
    assert!(block.contains("BASE EDITED WHILE RUNNING"), "{block}");
    assert!(block.contains("WEB EDITED WHILE RUNNING"), "{block}");
    put(&dep, "container/CLAUDE.md", "BASE EDITED AGAIN\n");
    let before = spawn_digest(&compose(&dep));
    let block = running.session();
    assert!(block.contains("BASE EDITED AGAIN"), "{block}");
    assert_eq!(before, spawn_digest(&compose(&dep)));
    running.stop();
}

#[test]
fn link_delivery_app_claude_md_is_pinned_until_a_restart() {
    let (dep, mut running) = across_a_recompose("link", r#"{"skills": ["web"]}"#);
    // `/app/CLAUDE.md` is a file bind: the running container's new session still loads the
    // base it was spawned with; /app/skills is a folder bind: the skill's new text is loaded.
    let block = running.session();
    let seen = running.run("cat /app/CLAUDE.md");
    assert_eq!(
        seen, "BASE\n",
        "the running container keeps the inode it was spawned with"
    );
    assert!(!block.contains("BASE EDITED"), "{block}");
    assert!(block.contains("WEB EDITED WHILE RUNNING"), "{block}");
    // Measured on the pinned release (2.1.328): the kept inode is unlinked on the host (its
    // link count is 0 in the container), and Claude Code then loads no shared base at all
    // through the link, old or new, until the container restarts (docs/delivery.md). The
    // runner's rule covers it: `spawn_digest` moved with container/CLAUDE.md.
    assert!(
        !block.contains(".claude-shared.md (") && !block.contains("BASE\n"),
        "{block}"
    );
    running.stop();
    // After a restart (a new container from the same table), the new base.
    let mut restarted = start(&dep, "g");
    let block = restarted.session();
    assert!(block.contains("BASE EDITED WHILE RUNNING"), "{block}");
    restarted.stop();
}

/// The entry point is a file bind: inline's whole document, copy's import list (its
/// fragments are a folder bind: live), each flat backend's document.
#[test]
fn inline_copy_and_flat_backends_pin_their_entry_point_until_a_restart() {
    let cases = [
        ("inline", r#"{"skills": ["web"]}"#, "CLAUDE.md"),
        ("copy", r#"{"skills": ["web"]}"#, "CLAUDE.md"),
        (
            "managed",
            r#"{"skills": ["web"], "provider": "codex"}"#,
            "AGENTS.md",
        ),
        (
            "managed",
            r#"{"skills": ["web"], "provider": "gemini"}"#,
            "GEMINI.md",
        ),
        (
            "managed",
            r#"{"skills": ["web"], "provider": "opencode"}"#,
            "AGENTS.md",
        ),
    ];
    for (delivery, config, entry) in cases {
        let (dep, mut running) = across_a_recompose(delivery, config);
        let seen = running.run(&format!(
            "cat /workspace/agent/{entry}; cat /workspace/agent/.claude-fragments/web.md 2>/dev/null"
        ));
        let composed = match delivery {
            "copy" => dep.read("groups/g/.claude-fragments/web.md"),
            _ => dep.read(&Deployment::composed("g", entry)),
        };
        assert!(composed.contains("WEB EDITED WHILE RUNNING"), "{composed}");
        match delivery {
            "copy" => {
                // The import list did not change; the fragment (a folder bind) is live.
                assert!(
                    seen.contains("WEB EDITED WHILE RUNNING"),
                    "{delivery}: {seen}"
                );
            }
            _ => {
                assert!(!seen.contains("WEB EDITED"), "{delivery} {config}: {seen}");
                assert!(seen.contains("WEB\n"), "{delivery} {config}: {seen}");
            }
        }
        running.stop();
        let mut restarted = start(&dep, "g");
        let seen = restarted.run(&format!("cat /workspace/agent/{entry}"));
        if delivery != "copy" {
            assert!(
                seen.contains("WEB EDITED WHILE RUNNING"),
                "{delivery} {config}: {seen}"
            );
        }
        restarted.stop();
    }
}
