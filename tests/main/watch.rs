//! `clawmd watch`: the real binary kept running on a deployment while the test changes its
//! inputs as an operator, a runner and an agent would. Every assertion is about the order of the
//! lines watch prints, never about how long something took: a change that must print nothing is
//! followed by one that must print something, and the next line must be the second one's.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Duration;

use serde_json::Value;

use crate::support::{Deployment, clawmd, command, kill};

/// The schema every line must satisfy, as `clawmd schema watch-event` prints it.
fn schema() -> &'static jsonschema::Validator {
    static SCHEMA: std::sync::OnceLock<jsonschema::Validator> = std::sync::OnceLock::new();
    SCHEMA.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let run = clawmd(dir.path(), &["schema", "watch-event"], &[]).success();
        jsonschema::validator_for(&run.json()).expect("a valid schema")
    })
}

/// How long a line may take to come: generous, since only a hang should ever reach it.
const LINE_LIMIT: Duration = Duration::from_secs(30);

/// `clawmd watch --all --format json` running on a deployment, its lines read as they come.
struct Watching {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Watching {
    fn start(deployment: &Deployment, args: &[&str]) -> Self {
        Self::start_as(deployment, &["--format", "json"], args)
    }

    /// [`Watching::start`] asking for JSON with `format` (`--format json` or `--json`).
    fn start_as(deployment: &Deployment, format: &[&str], args: &[&str]) -> Self {
        let mut all = vec!["watch"];
        all.extend_from_slice(format);
        all.extend_from_slice(&["--debounce-ms", "50"]);
        all.extend_from_slice(args);
        let mut child = command(deployment.root(), &all, &[])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start clawmd watch");
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Watching {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// The next event, parsed; panics with every line so far if none comes.
    #[track_caller]
    fn next(&mut self) -> Value {
        match self.lines.recv_timeout(LINE_LIMIT) {
            Ok(line) => {
                self.seen.push(line.clone());
                let event: Value = serde_json::from_str(&line).expect("a JSON line");
                assert_eq!(
                    event["$schema"], "urn:clawmd:schema:watch-event:1",
                    "{line}"
                );
                let errors: Vec<String> = schema()
                    .iter_errors(&event)
                    .map(|e| format!("{e} at {}", e.instance_path()))
                    .collect();
                assert!(
                    errors.is_empty(),
                    "not a watch event by its schema: {errors:?}\n{line}"
                );
                event
            }
            Err(err) => panic!(
                "no line from watch ({err:?}); so far:\n{}",
                self.seen.join("\n")
            ),
        }
    }

    /// The next `n` events, sorted by group (their order within one recompose is the groups').
    #[track_caller]
    fn next_groups(&mut self, n: usize) -> Vec<(String, String)> {
        let mut got: Vec<(String, String)> = (0..n)
            .map(|_| {
                let event = self.next();
                assert_eq!(event["event"], "group", "{event}");
                (
                    event["group"].as_str().unwrap().to_owned(),
                    event["status"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        got.sort();
        got
    }

    /// Sends `signal` and waits for a clean exit: status 0 and stdout closed.
    #[track_caller]
    fn stop(mut self, signal: rustix::process::Signal) {
        kill(self.child.id(), signal);
        let started = std::time::Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                started.elapsed() < LINE_LIMIT,
                "watch did not stop on the signal"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "watch exited with {status}");
        assert_eq!(
            self.lines.recv_timeout(LINE_LIMIT),
            Err(RecvTimeoutError::Disconnected),
            "stdout is closed after the stop, with no more lines"
        );
    }
}

/// A test that fails part-way leaves no watch running.
impl Drop for Watching {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Writes a file the way a careful operator or runner does: a temp file beside it, renamed over
/// it, so no compose ever reads half of it (the agent's own writes stay plain writes).
fn put(deployment: &Deployment, rel: &str, bytes: &[u8]) {
    let path = deployment.path(rel);
    let temp = path.with_file_name(format!(".put-{}", std::process::id()));
    std::fs::write(&temp, bytes).unwrap();
    std::fs::rename(&temp, &path).unwrap();
}

fn changed(groups: &[&str]) -> Vec<(String, String)> {
    groups
        .iter()
        .map(|group| (group.to_string(), "changed".to_owned()))
        .collect()
}

/// `--json`, as the other commands take it, is `--format json` (issue 42).
#[test]
fn watch_takes_json_as_the_other_commands_do() {
    let deployment = Deployment::example();
    let mut watching = Watching::start_as(&deployment, &["--json"], &["--all"]);
    assert_eq!(
        watching.next_groups(3),
        changed(&["main", "ops", "research"])
    );
    assert_eq!(watching.next()["event"].as_str(), Some("ready"));
    watching.stop(rustix::process::Signal::TERM);
    // Both at once is a usage error, as for the other commands.
    clawmd(
        deployment.root(),
        &["watch", "--json", "--format", "json"],
        &[],
    )
    .expect_code(2);
}

#[test]
fn watch_composes_then_reports_each_change_until_sigterm() {
    let deployment = Deployment::example();
    let mut watching = Watching::start(&deployment, &["--all"]);
    assert_eq!(
        watching.next_groups(3),
        changed(&["main", "ops", "research"])
    );
    let ready = watching.next();
    assert_eq!(
        (ready["event"].as_str(), ready["groups"].as_u64()),
        (Some("ready"), Some(3))
    );

    // The shared base changes: every group is recomposed, and each says so with its digests.
    put(&deployment, "container/CLAUDE.md", b"# A new shared base\n");
    assert_eq!(
        watching.next_groups(3),
        changed(&["main", "ops", "research"])
    );
    assert!(
        deployment
            .managed_md("main")
            .contains("# A new shared base"),
        "the new base is composed"
    );

    // The agent writes its own memory (imported, not copied, in the default delivery): no line.
    // Then the runner changes ops's config: the next line is ops's, and only ops's.
    deployment.write("groups/main/CLAUDE.local.md", b"the agent's note\n");
    put(
        &deployment,
        "groups/ops/container.json",
        br#"{"skills": [], "mcpServers": {"db": {"command": "db", "instructions": "Read only."}}}"#,
    );
    let event = watching.next();
    assert_eq!(
        (event["group"].as_str(), event["status"].as_str()),
        (Some("ops"), Some("changed"))
    );
    assert!(
        event["memory_digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:"),
        "{event}"
    );
    assert_eq!(event["delivered"]["complete"], true, "{event}");
    assert!(deployment.managed_md("ops").contains("Read only."));

    watching.stop(rustix::process::Signal::TERM);
}

#[test]
fn a_malformed_config_while_watching_is_reported_once_and_leaves_the_group_as_it_was() {
    let deployment = Deployment::standard()
        .group("g", Some(r#"{"skills": ["web"]}"#))
        .group("h", Some("{}"));
    let mut watching = Watching::start(&deployment, &[]);
    assert_eq!(watching.next_groups(2), changed(&["g", "h"]));
    assert_eq!(watching.next()["event"], "ready");
    let composed = deployment.claude_md("g");

    put(
        &deployment,
        "groups/g/container.json",
        b"{\"skills\": [\"web\",\n",
    );
    let event = watching.next();
    assert_eq!(event["status"], "failed", "{event}");
    let message = event["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("container.json:2:"),
        "names the file and line: {message}"
    );
    assert_eq!(deployment.claude_md("g"), composed, "left as it was");

    // The agent keeps writing next to the broken config, and g is composed again each time:
    // the same failure is not said again. Each write is followed by a change to h, whose line
    // must be the next one (g's come first in a recompose of both, so a repeat would show).
    for (round, note) in ["note 1\n", "note 2\n"].iter().enumerate() {
        deployment.write("groups/g/CLAUDE.local.md", note.as_bytes());
        put(
            &deployment,
            "groups/h/container.json",
            format!(r#"{{"mcpServers": {{"s": {{"instructions": "round {round}"}}}}}}"#).as_bytes(),
        );
        let event = watching.next();
        assert_eq!(
            (event["group"].as_str(), event["status"].as_str()),
            (Some("h"), Some("changed")),
            "{event}"
        );
    }
    // Fixing the config to what it was brings the group back, unchanged, and says so.
    put(
        &deployment,
        "groups/g/container.json",
        br#"{"skills": ["web"]}"#,
    );
    let event = watching.next();
    assert_eq!(
        (event["group"].as_str(), event["status"].as_str()),
        (Some("g"), Some("unchanged")),
        "{event}"
    );
    assert_eq!(deployment.claude_md("g"), composed);

    watching.stop(rustix::process::Signal::INT);
}

#[test]
fn groups_added_and_removed_while_watching_are_picked_up() {
    let deployment = Deployment::standard()
        .group("a", Some("{}"))
        .group("b", Some("{}"));
    let mut watching = Watching::start(&deployment, &["--all"]);
    assert_eq!(watching.next_groups(2), changed(&["a", "b"]));
    assert_eq!(watching.next()["event"], "ready");

    std::fs::create_dir(deployment.path("groups/c")).unwrap();
    assert_eq!(watching.next_groups(1), changed(&["c"]));
    assert!(deployment.exists("groups/c/CLAUDE.md"));

    std::fs::remove_dir_all(deployment.path("groups/a")).unwrap();
    let event = watching.next();
    assert_eq!(
        (event["event"].as_str(), event["group"].as_str()),
        (Some("removed"), Some("a")),
        "{event}"
    );

    // A group added after the removal is still composed: watching went on.
    std::fs::create_dir(deployment.path("groups/d")).unwrap();
    assert_eq!(watching.next_groups(1), changed(&["d"]));
    watching.stop(rustix::process::Signal::TERM);
}

#[test]
fn settings_changes_recompose_every_group_and_a_malformed_file_is_a_warning() {
    let deployment = Deployment::standard()
        .group("a", Some("{}"))
        .group("b", Some("{}"));
    let mut watching = Watching::start(&deployment, &["--all"]);
    assert_eq!(watching.next_groups(2), changed(&["a", "b"]));
    assert_eq!(watching.next()["event"], "ready");

    put(&deployment, "clawmd.json", b"{\"provider\": ");
    let event = watching.next();
    assert_eq!(
        (event["event"].as_str(), event["code"].as_str()),
        (Some("warning"), Some("settings")),
        "{event}"
    );
    assert!(
        event["message"].as_str().unwrap().contains("clawmd.json"),
        "{event}"
    );

    put(&deployment, "clawmd.json", br#"{"provider": "codex"}"#);
    assert_eq!(watching.next_groups(2), changed(&["a", "b"]));
    assert!(deployment.exists("groups/a/AGENTS.md") && !deployment.exists("groups/a/CLAUDE.md"));
    watching.stop(rustix::process::Signal::TERM);
}

#[test]
fn a_groups_own_skills_are_watched_without_following_the_agents_links() {
    let recipe = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("docs/recipes/group-skills/clawmd.json"),
    )
    .unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(outside.path().join("evil")).unwrap();
    std::fs::write(outside.path().join("evil/instructions.md"), "OUTSIDE\n").unwrap();
    let deployment = Deployment::standard()
        .file("clawmd.json", &recipe)
        .group("g", Some("{}"))
        .file("groups/g/skills/mine/instructions.md", "MINE v1\n")
        .group("h", Some("{}"))
        .group("lnk", Some("{}"));
    std::os::unix::fs::symlink(outside.path(), deployment.path("groups/lnk/skills")).unwrap();
    let mut watching = Watching::start(&deployment, &["--all"]);
    let first = watching.next_groups(3);
    assert_eq!(
        first[0],
        ("g".to_owned(), "changed".to_owned()),
        "{first:?}"
    );
    assert_eq!(watching.next()["event"], "ready");
    assert!(deployment.claude_md("g").contains("MINE v1"));

    // An edit of a skill the group keeps in its own folder is composed.
    put(
        &deployment,
        "groups/g/skills/mine/instructions.md",
        b"MINE v2\n",
    );
    assert_eq!(watching.next_groups(1), changed(&["g"]));
    assert!(deployment.claude_md("g").contains("MINE v2"));

    // So is a skill folder made while watching (it gets a watch of its own).
    std::fs::create_dir_all(deployment.path("groups/g/skills/late")).unwrap();
    put(
        &deployment,
        "groups/g/skills/late/instructions.md",
        b"LATE\n",
    );
    let event = watching.next();
    assert_eq!(
        (event["group"].as_str(), event["status"].as_str()),
        (Some("g"), Some("changed")),
        "{event}"
    );
    if !deployment.claude_md("g").contains("LATE") {
        // The folder and its file may come in two recomposes.
        assert_eq!(watching.next_groups(1), changed(&["g"]));
    }
    put(
        &deployment,
        "groups/g/skills/late/instructions.md",
        b"LATE v2\n",
    );
    assert_eq!(watching.next_groups(1), changed(&["g"]));
    assert!(deployment.claude_md("g").contains("LATE v2"));

    // A link the agent planted where its skills would be is never watched through: a change
    // outside the group prints nothing, and the next line is h's.
    std::fs::write(outside.path().join("evil/instructions.md"), "OUTSIDE v2\n").unwrap();
    put(
        &deployment,
        "groups/h/container.json",
        br#"{"mcpServers": {"s": {"instructions": "x"}}}"#,
    );
    let event = watching.next();
    assert_eq!(
        (event["group"].as_str(), event["status"].as_str()),
        (Some("h"), Some("changed")),
        "{event}"
    );
    watching.stop(rustix::process::Signal::TERM);
}

/// Each group line carries `spawn_digest`; a `container.json` edit that changes no composed
/// file (a runner's own key) still moves it (the file is bound as a file), so watch tells the
/// runner, with `status: "unchanged"`; the agent's own memory never does.
#[test]
fn watch_reports_a_moved_spawn_digest_even_when_nothing_was_composed() {
    let deployment = Deployment::standard().group("g", Some(r#"{"skills": ["web"]}"#));
    let mut watching = Watching::start(&deployment, &[]);
    let first = watching.next();
    assert_eq!(first["status"], "changed", "{first}");
    let spawned = first["spawn_digest"].as_str().unwrap().to_owned();
    assert!(spawned.starts_with("sha256:"), "{first}");
    assert_eq!(watching.next()["event"], "ready");
    deployment.write("groups/g/CLAUDE.local.md", b"the agent's note\n");
    put(
        &deployment,
        "groups/g/container.json",
        br#"{"skills": ["web"], "runnerKey": true}"#,
    );
    let event = watching.next();
    assert_eq!(
        (event["group"].as_str(), event["status"].as_str()),
        (Some("g"), Some("unchanged")),
        "{event}"
    );
    assert_ne!(event["spawn_digest"].as_str().unwrap(), spawned, "{event}");
    watching.stop(rustix::process::Signal::TERM);
}
