//! `clawmd serve`, the long-lived process a Node host keeps for its spawns: each request line
//! is answered with what `clawmd compose GROUP --json` and `clawmd mounts GROUP --json` print,
//! in one line; a line that is not a request is answered with `bad-request` and the service
//! reads on; the root is the one it started with; a handed config is composed as `--config`
//! composes it, and the group's record answers only for the config it was made with.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

use serde_json::{Value, json};

use crate::support::Deployment;
use crate::support::run::clawmd;
use crate::support::run::command;

/// A running `clawmd serve` on a deployment.
struct Service {
    child: Child,
    input: Option<ChildStdin>,
    output: BufReader<ChildStdout>,
}

impl Service {
    fn start(d: &Deployment) -> Service {
        let mut child = command(d.root(), &["serve"], &[])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let input = child.stdin.take();
        let output = BufReader::new(child.stdout.take().unwrap());
        Service {
            child,
            input,
            output,
        }
    }

    /// Sends `line` as it is and returns the answer line, parsed.
    #[track_caller]
    fn ask_raw(&mut self, line: &[u8]) -> Value {
        let input = self.input.as_mut().unwrap();
        input.write_all(line).unwrap();
        input.write_all(b"\n").unwrap();
        input.flush().unwrap();
        let mut answer = String::new();
        self.output.read_line(&mut answer).unwrap();
        assert!(
            answer.ends_with('\n'),
            "no answer line to {line:.200?}: {answer:?}"
        );
        assert_eq!(
            answer.matches('\n').count(),
            1,
            "one answer, one line: {answer}"
        );
        serde_json::from_str(&answer).unwrap()
    }

    #[track_caller]
    fn ask(&mut self, request: Value) -> Value {
        self.ask_raw(request.to_string().as_bytes())
    }

    /// Returns once the service has done the bookkeeping of the requests answered so far (it
    /// does it after each answer, before it reads the next request: the config a runner
    /// handed is kept then): a request is answered only after it.
    #[track_caller]
    fn barrier(&mut self) {
        let answer = self.ask(json!({"id": "barrier"}));
        assert_eq!(answer["error"]["code"], "bad-request", "{answer}");
    }

    /// Closes stdin; the service must exit 0 with nothing more on stdout.
    #[track_caller]
    fn finish(mut self) {
        drop(self.input.take());
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut self.output, &mut rest).unwrap();
        let status = self.child.wait().unwrap();
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut self.child.stderr.take().unwrap(), &mut stderr).unwrap();
        assert!(status.success(), "{status:?}\n{stderr}");
        assert_eq!(rest, "", "nothing after the last answer");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

fn deployment() -> Deployment {
    Deployment::standard()
        .group(
            "main",
            Some(r#"{"skills": ["web"], "mcpServers": {"db": {"instructions": "DB RULES"}}}"#),
        )
        .group("ops", None)
}

/// One request: the compose report `clawmd compose` prints and the binds `clawmd mounts`
/// prints, in one answer line; a second request finds the group as compose would (unchanged,
/// the same digests).
#[test]
fn one_request_is_compose_and_mounts_in_one_answer() {
    let d = deployment();
    let mut service = Service::start(&d);
    let answer = service.ask(json!({"id": 7, "group": "main"}));
    assert_eq!(
        answer["$schema"], "urn:clawmd:schema:serve-answer:1",
        "{answer}"
    );
    assert_eq!(answer["id"], 7);
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(answer["error"], Value::Null);
    let report = &answer["compose"];
    assert_eq!(report["$schema"], "urn:clawmd:schema:compose-report:1");
    assert_eq!(report["groups"][0]["group"], "main");
    assert_eq!(report["groups"][0]["status"], "changed", "{report}");
    assert!(d.managed_md("main").contains("DB RULES"));

    let cli = d.run(["compose", "main", "--json"]).success().json();
    assert_eq!(cli["groups"][0]["status"], "unchanged", "{cli}");
    for key in ["memory_digest", "spawn_digest", "target", "delivered"] {
        assert_eq!(cli["groups"][0][key], report["groups"][0][key], "{key}");
    }
    let mounts = d.run(["mounts", "main", "--json"]).success().json();
    assert_eq!(answer["mounts"], mounts);

    let again = service.ask(json!({"id": "second", "group": "main"}));
    assert_eq!(again["id"], "second");
    assert_eq!(
        again["compose"]["groups"][0]["status"], "unchanged",
        "{again}"
    );
    assert_eq!(
        again["compose"]["groups"][0]["spawn_digest"],
        report["groups"][0]["spawn_digest"]
    );
    assert_eq!(again["mounts"], mounts);
    // The request's settings are compose's flags.
    let inline = service.ask(json!({"id": 3, "group": "ops", "delivery": "inline"}));
    assert_eq!(inline["compose"]["delivery"], "inline", "{inline}");
    assert_eq!(
        inline["mounts"],
        d.run(["mounts", "ops", "--json", "--delivery", "inline"])
            .success()
            .json()
    );
    service.finish();
}

/// Whatever a line holds, it gets an answer and the service reads the next one: not JSON, no
/// group, a field that is not a request's (`root`: the root is fixed when the service starts),
/// a group that cannot be a folder, a missing group, a line over the limit.
#[test]
fn every_bad_request_is_answered_and_the_service_reads_on() {
    let d = deployment();
    let mut service = Service::start(&d);
    let bad = |answer: &Value, id: Value, words: &str| {
        assert_eq!(answer["ok"], false, "{answer}");
        assert_eq!(answer["id"], id, "{answer}");
        assert_eq!(answer["error"]["code"], "bad-request", "{answer}");
        assert_eq!(answer["compose"], Value::Null);
        assert_eq!(answer["mounts"], Value::Null);
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(words), "{message}");
    };
    bad(
        &service.ask_raw(b"compose main"),
        Value::Null,
        "not a clawmd serve request",
    );
    bad(
        &service.ask(json!({"id": 2})),
        json!(2),
        "missing field `group`",
    );
    bad(
        &service.ask(json!({"id": 3, "group": "main", "root": "/"})),
        json!(3),
        "unknown field `root`",
    );
    bad(
        &service.ask(json!({"id": 4, "group": "main", "delivery": "carrier-pigeon"})),
        json!(4),
        "delivery",
    );
    bad(
        &service.ask(json!(["main"])),
        Value::Null,
        "not a clawmd serve request",
    );
    let mut long = br#"{"id": 5, "group": "main", "config": {"x": ""#.to_vec();
    long.extend(std::iter::repeat_n(b'a', 9 * 1024 * 1024));
    long.extend(br#""}}"#);
    bad(&service.ask_raw(&long), Value::Null, "over");

    for (id, group, code) in [
        (6, "../etc", "bad-group-name"),
        (7, "nope", "missing-group"),
    ] {
        let answer = service.ask(json!({"id": id, "group": group}));
        assert_eq!(answer["ok"], false, "{answer}");
        assert_eq!(
            answer["error"],
            Value::Null,
            "the group's error is in its report"
        );
        assert_eq!(answer["mounts"], Value::Null);
        assert_eq!(
            answer["compose"]["groups"][0]["error"]["code"], code,
            "{answer}"
        );
    }
    // Nothing outside the deployment was touched, and the service still composes.
    let answer = service.ask(json!({"id": 8, "group": "main"}));
    assert_eq!(answer["ok"], true, "{answer}");
    service.finish();
}

/// A request's `config` over the limit of a group's config (a line still under the limit of
/// a request line) is a `bad-request`, whose message names the limit and the fix, as
/// `compose --config` says it; nothing is kept or composed, and the service reads on.
#[test]
fn a_handed_config_over_the_limit_is_a_bad_request_and_nothing_is_kept() {
    let d = deployment().file("clawmd.json", r#"{"groupConfig": "handed"}"#);
    let mut service = Service::start(&d);
    // {"x":"aaa…"}: 4 MiB of string, 8 bytes over the limit once serialised.
    let big = "a".repeat(4 * 1024 * 1024);
    let answer = service.ask(json!({"id": 1, "group": "main", "config": {"x": big}}));
    assert_eq!(answer["ok"], false, "{answer:.300}");
    assert_eq!(answer["id"], 1);
    assert_eq!(answer["error"]["code"], "bad-request", "{answer:.300}");
    assert_eq!(answer["compose"], Value::Null);
    assert_eq!(
        answer["error"]["message"],
        "config: the handed config is over 4194304 bytes, the most clawmd reads of a group's \
         config; fix: hand the group's container.json alone (a group's config is a few \
         kilobytes)"
    );
    assert!(!d.exists("groups/.clawmd/configs/main.json"));
    assert!(!d.exists("groups/.clawmd/binds/main"));
    // A config under the limit is taken (and kept).
    let answer = service.ask(json!({"id": 2, "group": "main", "config": {"skills": ["web"]}}));
    assert_eq!(answer["ok"], true, "{answer}");
    service.barrier();
    assert!(d.exists("groups/.clawmd/configs/main.json"));
    service.finish();
}

/// nanoclaw hands the group's config at each spawn (`"groupConfig": "handed"`): it is composed
/// as `--config` composes it, and a record made under one config never answers for another
/// (back and forth between two configs, each spawn composes the config it was handed).
#[test]
fn a_handed_config_is_composed_and_the_record_answers_only_for_it() {
    let d = deployment().file("clawmd.json", r#"{"groupConfig": "handed"}"#);
    let mut service = Service::start(&d);
    let config =
        |rules: &str| json!({"mcpServers": {"db": {"instructions": rules}}, "skills": ["web"]});
    let mut spawn = |id: u32, rules: &str| {
        let answer = service.ask(json!({"id": id, "group": "main", "config": config(rules)}));
        assert_eq!(answer["ok"], true, "{answer}");
        answer["compose"]["groups"][0].clone()
    };
    let first = spawn(1, "RULES ONE");
    assert_eq!(first["status"], "changed");
    assert!(d.managed_md("main").contains("RULES ONE"));
    let same = spawn(2, "RULES ONE");
    assert_eq!(same["status"], "unchanged", "{same}");
    assert_eq!(same["memory_digest"], first["memory_digest"]);
    let other = spawn(3, "RULES TWO");
    assert_eq!(other["status"], "changed", "{other}");
    assert_ne!(other["memory_digest"], first["memory_digest"]);
    assert!(d.managed_md("main").contains("RULES TWO"));
    assert!(!d.managed_md("main").contains("RULES ONE"));
    let back = spawn(4, "RULES ONE");
    assert_eq!(back["status"], "changed", "{back}");
    assert_eq!(back["memory_digest"], first["memory_digest"]);
    assert!(d.managed_md("main").contains("RULES ONE"));
    assert_eq!(spawn(5, "RULES ONE")["status"], "unchanged");
    // The config kept for check and render is the last one handed.
    let kept = d.read("groups/.clawmd/configs/main.json");
    assert!(kept.contains("RULES ONE"), "{kept}");
    service.finish();
}

/// Spawns of different groups, each with its config handed, share the shared sources' record:
/// once written, no spawn reads the sources again or rewrites it (a record keyed by the handed
/// configs made every spawn of a nanoclaw host read every skill and rewrite the record).
#[test]
fn handed_configs_share_the_sources_record() {
    let d = deployment().file("clawmd.json", r#"{"groupConfig": "handed"}"#);
    let mut service = Service::start(&d);
    let config =
        |rules: &str| json!({"mcpServers": {"db": {"instructions": rules}}, "skills": ["web"]});
    for (id, group) in [(1, "main"), (2, "ops")] {
        let answer = service.ask(json!({"id": id, "group": group, "config": config(group)}));
        assert_eq!(answer["ok"], true, "{answer}");
    }
    let record = d.path("groups/.clawmd/sources/container");
    let stamp = || {
        let meta = std::fs::metadata(&record).unwrap();
        (
            meta.modified().unwrap(),
            std::os::unix::fs::MetadataExt::ino(&meta),
        )
    };
    let before = stamp();
    for id in 3..9 {
        let group = if id % 2 == 0 { "main" } else { "ops" };
        let answer = service.ask(json!({"id": id, "group": group, "config": config(group)}));
        assert_eq!(
            answer["compose"]["groups"][0]["status"], "unchanged",
            "{answer}"
        );
    }
    assert_eq!(stamp(), before, "the sources record was written again");
    service.finish();
}

/// An edit of the container side: what it is, the edit, the skills the next spawn asks for,
/// the texts its document must hold and those it must not.
type Edit<'a> = (&'a str, &'a dyn Fn(), Value, &'a [&'a str], &'a [&'a str]);

/// A spawn composed from the kept shared sources is vouched for by the items its plan uses:
/// an edit of a skill one group does not use leaves that group's next spawn right (composed
/// as a fresh `clawmd compose` composes it), and reaches the next spawn of the group that uses
/// the skill.
#[test]
fn an_edit_of_an_item_a_group_does_not_use_reaches_the_group_that_uses_it() {
    let d = deployment()
        .file("clawmd.json", r#"{"groupConfig": "handed"}"#)
        .file("container/skills/other/SKILL.md", "other skill\n")
        .file("container/skills/other/instructions.md", "OTHER\n");
    let mut service = Service::start(&d);
    let mut spawn = |id: u32, group: &str, skills: Value| {
        let config = json!({"mcpServers": {"db": {"instructions": format!("RULES {id}")}},
                            "skills": skills});
        let answer = service.ask(json!({"id": id, "group": group, "config": config}));
        assert_eq!(answer["ok"], true, "{answer}");
        assert_eq!(
            answer["compose"]["groups"][0]["status"], "changed",
            "{answer}"
        );
        d.managed_md(group)
    };
    let fresh = |group: &str| {
        d.run(["compose", group, "--json", "--dry-run"])
            .success()
            .json()
    };
    assert!(spawn(1, "ops", json!(["other"])).contains("OTHER\n"));
    assert!(spawn(2, "main", json!(["web"])).contains("RULES 2"));
    d.write(
        "container/skills/other/instructions.md",
        "OTHER TWO\n".as_bytes(),
    );
    let main = spawn(3, "main", json!(["web"]));
    assert!(main.contains("RULES 3") && main.contains("WEB\n"), "{main}");
    assert!(!main.contains("OTHER"), "{main}");
    assert_eq!(fresh("main")["groups"][0]["status"], "unchanged");
    let ops = spawn(4, "ops", json!(["other"]));
    assert!(ops.contains("OTHER TWO\n"), "{ops}");
    assert_eq!(fresh("ops")["groups"][0]["status"], "unchanged");
    service.finish();
}

/// The service keeps the settings it resolved while `clawmd.json` and the pin files are as
/// they were, and sees every change of them at the next request: a new delivery (also one
/// of the same size written in the same second), a release pinned in `cli-tools.json`, the
/// settings file removed.
#[test]
fn the_kept_settings_never_outlive_an_edit_of_the_settings_or_the_pins() {
    let inline = r#"{"delivery": "inline"}"#;
    let copy = r#"{"delivery": "copy"}  "#;
    assert_eq!(inline.len(), copy.len());
    let d = deployment().file("clawmd.json", inline);
    let mut service = Service::start(&d);
    let mut ask = |id: u32| {
        let answer = service.ask(json!({"id": id, "group": "main"}));
        assert_eq!(answer["ok"], true, "{answer}");
        answer["compose"].clone()
    };
    assert_eq!(ask(1)["delivery"], "inline");
    // Settled: the next request keeps what it resolves.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    assert_eq!(ask(2)["delivery"], "inline");
    assert_eq!(ask(3)["delivery"], "inline");
    d.write("clawmd.json", copy.as_bytes());
    assert_eq!(ask(4)["delivery"], "copy");
    std::thread::sleep(std::time::Duration::from_millis(2100));
    assert_eq!(ask(5)["delivery"], "copy");
    let judged = |report: &Value| report["groups"][0]["delivered"]["judged"].clone();
    assert_eq!(judged(&ask(6))["claude_code_from"], "default");
    d.write(
        "container/cli-tools.json",
        br#"[{"name": "@anthropic-ai/claude-code", "version": "2.1.257"}]"#,
    );
    let pinned = judged(&ask(7));
    assert_eq!(pinned["claude_code"], "2.1.257", "{pinned}");
    std::fs::remove_file(d.path("clawmd.json")).unwrap();
    assert_eq!(ask(8)["delivery"], "managed");
    service.finish();
}

/// The config a runner hands is kept where `clawmd check` reads it at every spawn, however
/// the kept file was changed since it was last found right (by hand, in the same second, to
/// bytes of the same size): the next spawn handing the same config writes it back.
#[test]
fn the_kept_handed_config_is_right_after_every_spawn() {
    let d = deployment().file("clawmd.json", r#"{"groupConfig": "handed"}"#);
    let mut service = Service::start(&d);
    let config = json!({"mcpServers": {"db": {"instructions": "RULES A"}}});
    let kept_path = "groups/.clawmd/configs/main.json";
    let mut spawn_with = |id: u32, config: &serde_json::Value| {
        let answer = service.ask(json!({"id": id, "group": "main", "config": config}));
        assert_eq!(answer["ok"], true, "{answer}");
        service.barrier();
        d.read(kept_path)
    };
    let mut spawn = |id: u32| spawn_with(id, &config);
    let kept = spawn(1);
    std::thread::sleep(std::time::Duration::from_millis(2100));
    assert_eq!(spawn(2), kept);
    assert_eq!(spawn(3), kept);
    let tampered = kept.replace("RULES A", "RULES B");
    assert_eq!(tampered.len(), kept.len());
    // Replaced, then at once a spawn.
    d.write(kept_path, tampered.as_bytes());
    assert_eq!(spawn(4), kept);
    // Replaced, settled, then a spawn.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    assert_eq!(spawn(5), kept);
    d.write(kept_path, tampered.as_bytes());
    std::thread::sleep(std::time::Duration::from_millis(2100));
    assert_eq!(spawn(6), kept);
    // Rewritten in place (the same file), settled, then a spawn.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    assert_eq!(spawn(7), kept);
    std::fs::OpenOptions::new()
        .write(true)
        .open(d.path(kept_path))
        .and_then(|mut file| std::io::Write::write_all(&mut file, tampered.as_bytes()))
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2100));
    assert_eq!(spawn(8), kept);
    // Settled and known to this process, then another config handed: the new one is kept.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    assert_eq!(spawn(9), kept);
    let edited = json!({"mcpServers": {"db": {"instructions": "RULES C"}}});
    let kept_edit = spawn_with(10, &edited);
    assert!(kept_edit.contains("RULES C"), "{kept_edit}");
    assert_eq!(spawn_with(11, &config), kept);
    service.finish();
}

/// The binds of an answer are made from what its compose found of the group's own
/// `container.json` (the runner binds the defaults over a group without one): the agent
/// removing it, or making it again, between two spawns (answered anew, or by the group's
/// record once settled) changes the binds as `clawmd mounts` gives them.
#[test]
fn the_binds_follow_the_groups_own_config_from_spawn_to_spawn() {
    let d = deployment().file("clawmd.json", r#"{"groupConfig": "handed"}"#);
    let mut service = Service::start(&d);
    let config = json!({"mcpServers": {"db": {"instructions": "RULES"}}});
    let mut spawn = |id: u32| {
        let answer = service.ask(json!({"id": id, "group": "main", "config": config}));
        assert_eq!(answer["ok"], true, "{answer}");
        answer["mounts"].clone()
    };
    let mounts = || d.run(["mounts", "main", "--json"]).success().json();
    let settle = || std::thread::sleep(std::time::Duration::from_millis(2100));
    let own = d.read("groups/main/container.json");
    let with_own = spawn(1);
    assert_eq!(with_own, mounts());
    settle();
    assert_eq!(spawn(2), with_own);
    assert_eq!(spawn(3), with_own, "answered by the group's record");
    std::fs::remove_file(d.path("groups/main/container.json")).unwrap();
    let without = spawn(4);
    assert_ne!(
        without, with_own,
        "the defaults are bound over the missing config"
    );
    assert_eq!(without, mounts());
    settle();
    assert_eq!(spawn(5), without);
    assert_eq!(spawn(6), without, "answered by the group's record");
    d.write("groups/main/container.json", own.as_bytes());
    assert_eq!(spawn(7), with_own);
    assert_eq!(spawn(7), mounts());
    service.finish();
}

/// The service keeps the shared sources it read for the requests after it, but a kept reading
/// is used only while the sources' record vouches for it: every edit of the container side
/// between two spawns (a skill's text, a skill added, the shared base, one of the same length,
/// a skill removed) reaches the next spawn's document, as a fresh `clawmd compose` gives it.
#[test]
fn the_kept_sources_never_outlive_an_edit_of_the_container_side() {
    let d = deployment().file("clawmd.json", r#"{"groupConfig": "handed"}"#);
    let mut service = Service::start(&d);
    let mut spawn = |id: u32, skills: Value| {
        let config = json!({"mcpServers": {"db": {"instructions": format!("RULES {id}")}},
                            "skills": skills});
        let answer = service.ask(json!({"id": id, "group": "main", "config": config}));
        assert_eq!(answer["ok"], true, "{answer}");
        assert_eq!(
            answer["compose"]["groups"][0]["status"], "changed",
            "{answer}"
        );
        d.managed_md("main")
    };
    assert!(spawn(1, json!(["web"])).contains("WEB\n"));
    let edits: [Edit; 5] = [
        (
            "a skill's text",
            &|| {
                d.write(
                    "container/skills/web/instructions.md",
                    "WEB TWO\n".as_bytes(),
                )
            },
            json!(["web"]),
            &["WEB TWO\n"],
            &["WEB\n"],
        ),
        (
            "a skill added",
            &|| {
                d.write("container/skills/new/SKILL.md", "new skill\n".as_bytes());
                d.write(
                    "container/skills/new/instructions.md",
                    "NEW SKILL\n".as_bytes(),
                );
            },
            json!(["web", "new"]),
            &["WEB TWO\n", "NEW SKILL\n"],
            &[],
        ),
        (
            "the shared base",
            &|| d.write("container/CLAUDE.md", "BASE TWO\n".as_bytes()),
            json!(["web", "new"]),
            &["BASE TWO\n"],
            &["BASE\n"],
        ),
        (
            "the same length",
            &|| d.write("container/CLAUDE.md", "BASE TW0\n".as_bytes()),
            json!(["web", "new"]),
            &["BASE TW0\n"],
            &["BASE TWO\n"],
        ),
        (
            "a skill removed",
            &|| std::fs::remove_dir_all(d.path("container/skills/new")).unwrap(),
            json!(["web", "new"]),
            &["WEB TWO\n"],
            &["NEW SKILL\n"],
        ),
    ];
    for (id, (what, edit, skills, present, absent)) in (2..).zip(edits) {
        edit();
        let document = spawn(id, skills);
        for text in present {
            assert!(
                document.contains(text),
                "{what}: {text:?} missing:\n{document}"
            );
        }
        for text in absent {
            assert!(
                !document.contains(text),
                "{what}: {text:?} left:\n{document}"
            );
        }
        let fresh = d
            .run(["compose", "main", "--json", "--dry-run"])
            .success()
            .json();
        assert_eq!(fresh["groups"][0]["status"], "unchanged", "{what}: {fresh}");
    }
    service.finish();
}

/// Steady spawns (the group unchanged, answered by its record) are answered without
/// replaying the shared sources while the kernel reports nothing changed in what they read;
/// an edit of anything they read, made right before the next spawn (in place, the same length,
/// in the same second; by a rename; a file added to a folder read whole), is seen by that spawn.
#[test]
fn a_steady_spawn_right_after_an_edit_of_the_shared_sources_sees_it() {
    let d = deployment().file("clawmd.json", r#"{"groupConfig": "handed"}"#);
    let mut service = Service::start(&d);
    let config = json!({"mcpServers": {"db": {"instructions": "RULES"}}, "skills": "all"});
    let mut spawn = |id: u32| {
        let answer = service.ask(json!({"id": id, "group": "main", "config": config}));
        assert_eq!(answer["ok"], true, "{answer}");
        (
            answer["compose"]["groups"][0]["status"].clone(),
            d.managed_md("main"),
        )
    };
    assert!(spawn(1).1.contains("WEB\n"));
    let mut id = 2;
    let edits: [(&str, &dyn Fn(), &str); 4] = [
        (
            "a skill's text in place, the same length",
            &|| {
                use std::io::{Seek, Write};
                let path = d.path("container/skills/web/instructions.md");
                let mut file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
                file.seek(std::io::SeekFrom::Start(0)).unwrap();
                file.write_all(b"WEV\n").unwrap();
            },
            "WEV\n",
        ),
        (
            "the shared base replaced by a rename",
            &|| {
                d.write("container/base.tmp", "BASE TWO\n".as_bytes());
                std::fs::rename(d.path("container/base.tmp"), d.path("container/CLAUDE.md"))
                    .unwrap();
            },
            "BASE TWO\n",
        ),
        (
            "a skill added to the folder every skill is listed from",
            &|| {
                d.write("container/skills/new/SKILL.md", "new skill\n".as_bytes());
                d.write(
                    "container/skills/new/instructions.md",
                    "NEW SKILL\n".as_bytes(),
                );
            },
            "NEW SKILL\n",
        ),
        (
            "a skill's instructions made where there were none",
            &|| {
                d.write(
                    "container/skills/quiet/instructions.md",
                    "QUIET\n".as_bytes(),
                )
            },
            "QUIET\n",
        ),
    ];
    for (what, edit, text) in edits {
        // Two steady spawns: the first replays the sources' record, the second may be vouched.
        for _ in 0..2 {
            let (status, _) = spawn(id);
            id += 1;
            assert_eq!(status, "unchanged", "{what}: before the edit");
        }
        edit();
        let (status, document) = spawn(id);
        id += 1;
        assert_eq!(status, "changed", "{what}: the spawn after it");
        assert!(
            document.contains(text),
            "{what}: {text:?} missing:\n{document}"
        );
    }
    service.finish();
}

/// A link at `container.json` under `"groupConfig": "handed"`, where the runner binds the
/// state's config over the group's: a runtime mounts through the link (into a folder the agent
/// can rename), so the spawn step refuses the group and names the link.
#[test]
fn a_link_at_the_handed_configs_mount_point_is_refused() {
    let d = Deployment::standard()
        .file("clawmd.json", r#"{"groupConfig": "handed"}"#)
        .group("g", None);
    std::os::unix::fs::symlink(
        "/workspace/agent/sub/c.json",
        d.path("groups/g/container.json"),
    )
    .unwrap();
    let mut service = Service::start(&d);
    let answer = service.ask(serde_json::json!({"id": 1, "group": "g", "config": {}}));
    assert_eq!(answer["ok"], false, "{answer}");
    let error = &answer["compose"]["groups"][0]["error"];
    assert_eq!(error["code"], "unsafe-path", "{answer}");
    assert!(
        error["file"]
            .as_str()
            .unwrap()
            .ends_with("g/container.json"),
        "{answer}"
    );
    std::fs::remove_file(d.path("groups/g/container.json")).unwrap();
    let answer = service.ask(serde_json::json!({"id": 2, "group": "g", "config": {}}));
    assert_eq!(answer["ok"], true, "{answer}");
    service.finish();
}

/// A deployment whose group `g` has its config handed, and its service once `g` is steady:
/// composed, settled, its record's look made, and a spawn answered by that record (requests 1
/// to 3).
fn steady_handed_group() -> (Deployment, Service) {
    let d = Deployment::standard()
        .file("clawmd.json", r#"{"groupConfig": "handed"}"#)
        .group("g", None);
    let mut service = Service::start(&d);
    let mut ask = |id: u32| service.ask(serde_json::json!({"id": id, "group": "g", "config": {}}));
    assert_eq!(ask(1)["ok"], true);
    // Settled: the record's look is made, then answers.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    assert_eq!(ask(2)["ok"], true);
    let steady = ask(3);
    assert_eq!(
        steady["compose"]["groups"][0]["status"], "unchanged",
        "{steady}"
    );
    (d, service)
}

/// The same link planted once the group is steady: its record, and the kept view of its
/// agent's settings (which reads neither `container.json` nor the document's mount point), would
/// answer the spawn; the link is still refused at the next spawn, and the group answered again
/// once it is gone.
#[test]
fn a_link_planted_at_a_mount_point_of_a_steady_group_is_refused_at_the_next_spawn() {
    let (d, mut service) = steady_handed_group();
    let mut ask = |id: u32| service.ask(serde_json::json!({"id": id, "group": "g", "config": {}}));
    for name in ["container.json", "CLAUDE.md"] {
        let path = d.path(&format!("groups/g/{name}"));
        let kept = std::fs::read(&path).ok();
        let _ = std::fs::remove_file(&path);
        std::os::unix::fs::symlink("/workspace/agent/sub/x", &path).unwrap();
        let answer = ask(4);
        assert_eq!(answer["ok"], false, "{name}: {answer}");
        let error = &answer["compose"]["groups"][0]["error"];
        assert_eq!(error["code"], "unsafe-path", "{name}: {answer}");
        std::fs::remove_file(&path).unwrap();
        if let Some(bytes) = kept {
            std::fs::write(&path, bytes).unwrap();
        }
        assert_eq!(ask(5)["ok"], true, "{name}");
    }
    service.finish();
}

/// The state folder moved aside and a link to it put in its place while the service runs
/// (the records it read are the very files the link now leads to): the next spawn is refused,
/// naming the link, as a run started afresh refuses it; and answered again once it is put back.
#[test]
fn a_state_folder_swapped_for_a_link_to_itself_is_refused_by_a_running_service() {
    let (d, mut service) = steady_handed_group();
    let mut ask = |id: u32| service.ask(serde_json::json!({"id": id, "group": "g", "config": {}}));
    let (state, aside) = (d.path("groups/.clawmd"), d.path("groups/.clawmd-real"));
    std::fs::rename(&state, &aside).unwrap();
    std::os::unix::fs::symlink(&aside, &state).unwrap();
    let answer = ask(4);
    assert_eq!(answer["ok"], false, "{answer}");
    let error = &answer["compose"]["groups"][0]["error"];
    assert_eq!(error["code"], "unsafe-path", "{answer}");
    assert!(
        error["file"].as_str().unwrap().ends_with("groups/.clawmd"),
        "{answer}"
    );
    std::fs::remove_file(&state).unwrap();
    std::fs::rename(&aside, &state).unwrap();
    assert_eq!(ask(5)["ok"], true);
    service.finish();
}

/// The deployment of `deployment()` with its configs handed, inline delivery, and each agent's
/// `~/.claude` named by its agent group id, as nanoclaw's.
fn home_deployment() -> Deployment {
    deployment().file(
        "clawmd.json",
        r#"{"groupConfig": "handed", "delivery": "inline", "claudeHome": "data/v2-sessions/{agentGroupId}/.claude-shared"}"#,
    )
}

/// A spawn of `main` (request `id`) whose handed config names `agent_group`: whether its
/// instructions reach the agent in full.
#[track_caller]
fn spawn_complete(service: &mut Service, id: u32, agent_group: &str) -> Value {
    let config = json!({"skills": ["web"], "agentGroupId": agent_group});
    let answer = service.ask(json!({"id": id, "group": "main", "config": config}));
    assert_eq!(answer["ok"], true, "{answer}");
    answer["compose"]["groups"][0]["delivered"]["complete"].clone()
}

/// The service keeps what each agent's settings files did to its memory between spawns; a
/// change to any of them (written in place with the same length, created where there was
/// none, the home folder swapped by a rename) and a config naming another home are seen by
/// the very next spawn.
#[test]
fn the_kept_agent_settings_never_outlive_an_edit_of_the_agents_home() {
    let d = home_deployment();
    let mut service = Service::start(&d);
    let mut id = 0;
    let mut complete = |agent_group: &str| {
        id += 1;
        spawn_complete(&mut service, id, agent_group)
    };
    const OFF: &str = r#"{"env":{"CLAUDE_CODE_DISABLE_CLAUDE_MDS":"1"}}"#;
    const ON: &str = r#"{"env":{"CLAUDE_CODE_DISABLE_CLAUDE_MDS":"0"}}"#;
    let home = "data/v2-sessions/ag-1/.claude-shared";
    // No home folder yet, then one is made with the settings turning memory off.
    assert_eq!(complete("ag-1"), true);
    assert_eq!(complete("ag-1"), true);
    d.write(&format!("{home}/settings.json"), OFF.as_bytes());
    assert_eq!(
        complete("ag-1"),
        false,
        "a settings file made where there was none"
    );
    assert_eq!(complete("ag-1"), false);
    // Rewritten in place, the same length.
    std::fs::write(d.path(&format!("{home}/settings.json")), ON).unwrap();
    assert_eq!(complete("ag-1"), true, "rewritten in place");
    assert_eq!(complete("ag-1"), true);
    std::fs::write(d.path(&format!("{home}/settings.json")), OFF).unwrap();
    assert_eq!(complete("ag-1"), false, "rewritten in place again");
    // The home folder swapped for another by a rename.
    d.write("data/v2-sessions/swap/settings.json", ON.as_bytes());
    std::fs::rename(d.path(home), d.path("data/v2-sessions/old")).unwrap();
    std::fs::rename(d.path("data/v2-sessions/swap"), d.path(home)).unwrap();
    assert_eq!(complete("ag-1"), true, "the home folder swapped");
    // Another group id names another home, whose settings turn memory off.
    d.write(
        "data/v2-sessions/ag-2/.claude-shared/settings.json",
        OFF.as_bytes(),
    );
    assert_eq!(complete("ag-2"), false, "another home");
    assert_eq!(complete("ag-1"), true, "back to the first");
    service.finish();
}

/// The agent's `~/.claude/settings.json` of the agent group `ag-1`.
const HOME_SETTINGS: &str = "data/v2-sessions/ag-1/.claude-shared/settings.json";

/// [`home_deployment`] with memory on in [`HOME_SETTINGS`], and a service started on it.
fn service_with_home_settings() -> (Deployment, Service) {
    let d = home_deployment();
    d.write(HOME_SETTINGS, crate::support::mapped::MEMORY_ON);
    let service = Service::start(&d);
    (d, service)
}

/// A write through a shared mapping changes a file's bytes and leaves its status as it was
/// (tests/support/mapped.rs): an agent that maps its own settings file can rewrite it after a
/// spawn with nothing in the file's status showing it. The service's kept evaluation reads
/// the settings again by their bytes at every spawn, and sees what the agent wrote.
#[test]
fn the_kept_agent_settings_never_outlive_a_write_through_a_shared_mapping() {
    use crate::support::mapped::{MEMORY_OFF as OFF, MEMORY_ON as ON};
    let (d, mut service) = service_with_home_settings();
    let settings = HOME_SETTINGS;
    let mut id = 0;
    let mut complete = || {
        id += 1;
        spawn_complete(&mut service, id, "ag-1")
    };
    assert_eq!(complete(), true);
    let mut mapped = crate::support::mapped::Mapped::new(&d.path(settings), ON.len());
    crate::support::mapped::settled_rounds(&mut mapped, ON, |mapped| {
        assert_eq!(complete(), true);
        assert_eq!(complete(), true);
        mapped.write(OFF);
        assert_eq!(std::fs::read(d.path(settings)).unwrap(), OFF);
        let status = mapped.status();
        assert_eq!(complete(), false, "memory turned off through the mapping");
        status
    });
    drop(mapped);
    service.finish();
}

/// The same once the service keeps the settings file by its identity (settled, its pages
/// written back, read again once): the agent's next write through its mapping lands on a clean,
/// write-protected page, which stamps the file's change time, and the next spawn sees it.
#[test]
fn a_settings_file_kept_by_its_identity_is_read_again_after_a_write_through_a_mapping() {
    use crate::support::mapped::{MEMORY_OFF as OFF, MEMORY_ON as ON};
    let (d, mut service) = service_with_home_settings();
    let mut id = 0;
    let mut complete = || {
        id += 1;
        spawn_complete(&mut service, id, "ag-1")
    };
    let mut mapped = crate::support::mapped::Mapped::new(&d.path(HOME_SETTINGS), ON.len());
    mapped.write(ON);
    assert_eq!(complete(), true);
    std::thread::sleep(std::time::Duration::from_millis(2100));
    rustix::fs::sync();
    // Read again once (its identity would now do), then found by its identity.
    assert_eq!(complete(), true);
    assert_eq!(complete(), true);
    mapped.write(OFF);
    assert_eq!(complete(), false, "memory turned off through the mapping");
    drop(mapped);
    service.finish();
}

/// The service hands a spawn's answer on as soon as the group's documents are in place and
/// its verdict is known, and does its bookkeeping (the group's verdict record, its journal
/// settled) after: while the answer is being delivered the group's lock is still held, so no
/// other run sees the group between its documents and its record; once the call returns the
/// record is written and the lock free.
#[test]
fn the_answer_goes_out_before_the_bookkeeping_under_the_groups_lock() {
    let d = deployment();
    let mut service =
        clawmd::service::Service::new(d.root(), clawmd::settings::Overrides::default()).unwrap();
    let record = d.path("groups/.clawmd/verdicts/main");
    let request = json!({"id": 1, "group": "main"}).to_string();
    let during = service.answer_line_then(request.as_bytes(), |answer| {
        assert!(answer.ok, "{answer:?}");
        assert!(d.managed_md("main").contains("DB RULES"));
        let other = d
            .run(["compose", "main", "--json", "--lock-timeout", "0"])
            .json();
        (record.exists(), other)
    });
    let (recorded_during, other_during) = during;
    assert!(!recorded_during, "the record is written after the answer");
    assert_eq!(
        other_during["groups"][0]["error"]["code"], "lock-timeout",
        "another run waits for the lock while the answer is delivered: {other_during}"
    );
    assert!(
        record.exists(),
        "the record is written once the call returns"
    );
    let after = d
        .run(["compose", "main", "--json", "--lock-timeout", "0"])
        .success()
        .json();
    assert_eq!(after["groups"][0]["status"], "unchanged", "{after}");
    // The next spawn is answered by the record the bookkeeping wrote.
    let again = service.answer_line(request.as_bytes());
    assert!(again.ok, "{again:?}");
}

/// A run that changes nothing (`compose --dry-run`, `check`) never reports a group midway
/// through a spawn's bookkeeping: while the answer is out and the handed config not kept
/// yet, a group it finds needing work is looked at again once the lock is free. With no wait
/// allowed it says it timed out on the lock (rather than "changed" and "out of date"); with
/// a wait it reports the group as the spawn left it.
#[test]
fn a_report_waits_for_a_spawns_bookkeeping_rather_than_catch_the_group_midway() {
    let d = deployment().file("clawmd.json", r#"{"groupConfig": "handed"}"#);
    let mut service =
        clawmd::service::Service::new(d.root(), clawmd::settings::Overrides::default()).unwrap();
    let first = json!({"id": 1, "group": "main", "config": {"skills": ["web"]}}).to_string();
    assert!(service.answer_line(first.as_bytes()).ok);
    let config = json!({"mcpServers": {"db": {"instructions": "RULES B"}}});
    let request = json!({"id": 2, "group": "main", "config": config}).to_string();
    let (dry_run, check, waiting) = service.answer_line_then(request.as_bytes(), |answer| {
        assert!(answer.ok, "{answer:?}");
        let now = ["--lock-timeout", "0"];
        let dry_run = d
            .run([["compose", "main", "--dry-run", "--json"].as_slice(), &now].concat())
            .json();
        let check = d
            .run([["check", "main", "--json"].as_slice(), &now].concat())
            .json();
        let waiting = |args: &'static [&'static str]| {
            let root = d.root().to_owned();
            std::thread::spawn(move || clawmd(&root, args, &[]).json())
        };
        let waiting = (
            waiting(&[
                "compose",
                "main",
                "--dry-run",
                "--json",
                "--lock-timeout",
                "30",
            ]),
            waiting(&["check", "main", "--json", "--lock-timeout", "30"]),
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
        (dry_run, check, waiting)
    });
    assert_eq!(
        dry_run["groups"][0]["error"]["code"], "lock-timeout",
        "{dry_run}"
    );
    let codes: Vec<&Value> = check["groups"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| &f["code"])
        .collect();
    assert_eq!(codes, ["lock-timeout"], "{check}");
    let fix = check["groups"][0]["findings"][0]["fix"].as_str().unwrap();
    assert!(fix.contains("`clawmd check main` again"), "{fix}");
    let (dry_run, check) = (waiting.0.join().unwrap(), waiting.1.join().unwrap());
    assert_eq!(dry_run["groups"][0]["status"], "unchanged", "{dry_run}");
    assert_eq!(check["ok"], true, "{check}");
    assert_eq!(check["groups"][0]["findings"], json!([]), "{check}");
}

/// The config a runner hands is kept for `check` after the answer too, under the group's
/// lock, and before the service answers anything else.
#[test]
fn a_handed_config_is_kept_after_the_answer_before_the_next_request() {
    let d = deployment().file("clawmd.json", r#"{"groupConfig": "handed"}"#);
    let mut service =
        clawmd::service::Service::new(d.root(), clawmd::settings::Overrides::default()).unwrap();
    let kept = d.path("groups/.clawmd/configs/main.json");
    for (id, rules) in [(1, "RULES A"), (2, "RULES B")] {
        let config = json!({"mcpServers": {"db": {"instructions": rules}}});
        let request = json!({"id": id, "group": "main", "config": config}).to_string();
        let during = service.answer_line_then(request.as_bytes(), |answer| {
            assert!(answer.ok, "{answer:?}");
            assert!(d.managed_md("main").contains(rules));
            std::fs::read_to_string(&kept).unwrap_or_default()
        });
        assert!(!during.contains(rules), "kept after the answer: {during}");
        let after = std::fs::read_to_string(&kept).unwrap();
        assert!(
            after.contains(rules),
            "kept before the call returns: {after}"
        );
    }
    let check = d.run(["check", "main", "--json"]).success().json();
    assert_eq!(check["ok"], true, "{check}");
    assert_eq!(check["groups"][0]["findings"], json!([]), "{check}");
}
