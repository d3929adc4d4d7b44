//! The Node addon (crates/clawmd-node) from a real Node host, installed as a host installs it:
//! `scripts/package-npm` packs this test build's binary and addon, `npm install --offline` puts
//! them into an empty project, and tests/e2e/addon-host.mjs (only `node` on PATH, no `CLAWMD`)
//! calls `prepareSpawn` there. The addon must answer every request exactly as `clawmd serve`
//! does (the same spawns on the same deployment, once per way), and requests made at once from
//! one process (through the addon, and through serve beside it) must leave every group
//! composed once, consistently.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::npm::{host, node_only_path, package_npm, project};
use crate::support::Deployment;
use crate::typescript::{succeeded, ts_tools};

const CLAWMD: &str = env!("CARGO_BIN_EXE_clawmd");

/// The example deployment and a group `broken` whose container.json is not JSON.
fn deployment() -> Deployment {
    Deployment::example().group("broken", Some("{ \"skills\": [\"web\", "))
}

/// `cp -a FROM TO`, TO fresh.
fn copy(from: &Path, to: &Path) {
    if to.exists() {
        std::fs::remove_dir_all(to).unwrap();
    }
    succeeded(
        "cp -a",
        Command::new("cp")
            .arg("-a")
            .arg(from)
            .arg(to)
            .output()
            .unwrap(),
    );
}

/// A host project with the npm package installed (npm, offline), the PATH holding only `node`,
/// and where the deployment it spawns from goes (`root`), all in one temp folder.
struct Installed {
    _work: tempfile::TempDir,
    dir: PathBuf,
    path: PathBuf,
    root: PathBuf,
}

impl Installed {
    fn new() -> Installed {
        let tools = ts_tools();
        let work = tempfile::tempdir().unwrap();
        let listing = package_npm(&work.path().join("tarballs"));
        let tarballs: Vec<PathBuf> = listing.lines().map(PathBuf::from).collect();
        let dir = project(work.path(), "host", &tarballs);
        std::fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/addon-host.mjs"),
            dir.join("host.mjs"),
        )
        .unwrap();
        Installed {
            path: node_only_path(tools, work.path()),
            root: work.path().join("deployment"),
            dir,
            _work: work,
        }
    }

    /// [`Installed::new`] with a fresh copy of [`deployment`] at `root`.
    fn with_deployment() -> Installed {
        let installed = Installed::new();
        installed.fresh_deployment();
        installed
    }

    /// A fresh copy of [`deployment`] at `root`.
    fn fresh_deployment(&self) {
        copy(deployment().root(), &self.root);
    }

    /// Runs the host with `args`, the deployment at `root`.
    fn run(&self, args: &[&str]) -> Value {
        self.run_with(args, &[])
    }

    /// [`Installed::run`] with more of the environment.
    fn run_with(&self, args: &[&str], env: &[(&str, &str)]) -> Value {
        let mut argv: Vec<&OsStr> = vec![OsStr::new("host.mjs")];
        argv.extend(args.iter().map(OsStr::new));
        let mut all = vec![("DEPLOYMENT", self.root.as_os_str())];
        all.extend(env.iter().map(|(k, v)| (*k, OsStr::new(v))));
        host(&self.path.join("node"), &argv, &self.dir, &self.path, &all)
    }
}

#[test]
fn the_addon_answers_every_request_as_clawmd_serve_does() {
    let installed = Installed::new();
    let root = &installed.root;
    let platform_addon = std::fs::canonicalize(installed.dir.join("node_modules/@clawmd"))
        .unwrap()
        .read_dir()
        .unwrap()
        .map(|entry| entry.unwrap().path().join("clawmd.node"))
        .next()
        .unwrap();
    assert!(platform_addon.is_file(), "{}", platform_addon.display());

    // The same spawns, once per way, each on a fresh copy of the deployment at the same path
    // (the answers name it).
    let mut answers = Vec::new();
    for way in ["addon", "service"] {
        installed.fresh_deployment();
        let got = installed.run(&["sequence", way]);
        assert_eq!(
            got["addon"],
            platform_addon.to_str().unwrap(),
            "the addon resolved is the platform package's: {got}"
        );
        answers.push(got["steps"].clone());
    }
    let [addon, service] = &answers[..] else {
        unreachable!()
    };
    let steps = addon.as_array().unwrap();
    assert_eq!(steps.len(), 8, "{addon}");
    for (mine, theirs) in steps.iter().zip(service.as_array().unwrap()) {
        assert_eq!(mine, theirs, "the addon's answer, then serve's");
    }

    // And the answers are the right ones, not merely the same.
    let step = |name: &str| {
        steps
            .iter()
            .find(|s| s["step"] == name)
            .unwrap_or_else(|| panic!("no step {name}: {addon}"))
    };
    for (name, changed) in [
        ("fresh", true),
        ("steady", false),
        ("edit", true),
        ("steady after the edit", false),
    ] {
        let s = step(name);
        assert_eq!(s["ok"], true, "{s}");
        assert_eq!(s["changed"], changed, "{s}");
        assert_eq!(s["delivered"]["complete"], true, "{s}");
        assert!(s["binds"].as_array().is_some_and(|b| b.len() >= 3), "{s}");
    }
    assert_eq!(step("fresh")["spawnDigest"], step("steady")["spawnDigest"]);
    assert_ne!(
        step("edit")["report"]["groups"][0]["memory_digest"],
        Value::Null,
        "{addon}"
    );
    for (name, code) in [
        ("bad request", "bad-request"),
        ("unknown group", "missing-group"),
        ("bad config", "bad-config"),
        ("bad handed config", "bad-config"),
    ] {
        let s = step(name);
        assert_eq!(s["ok"], false, "{s}");
        assert_eq!(s["code"], code, "{name}: {s}");
    }
    assert!(
        step("bad request")["message"]
            .as_str()
            .unwrap()
            .contains("carrier-pigeon"),
        "{addon}"
    );
    let file = step("bad config")["file"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(
        Path::new(&file),
        root.join("groups/broken/container.json"),
        "{addon}"
    );
    // The edit reached the composed memory.
    let composed =
        std::fs::read_to_string(root.join(Deployment::composed("research", "CLAUDE.md"))).unwrap();
    let managed = root.join("groups/.clawmd/binds/research/managed");
    let everything = format!("{composed}{}", walk_text(&managed));
    assert!(
        everything.contains("Edited: keep replies short."),
        "{everything}"
    );
}

/// The text of every regular file under `dir`.
fn walk_text(dir: &Path) -> String {
    let mut text = String::new();
    for entry in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let entry = entry.unwrap();
        if entry.file_type().is_file() {
            text.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
        }
    }
    text
}

#[test]
fn spawns_prepared_at_once_from_one_process_compose_each_group_once() {
    let installed = Installed::with_deployment();
    let root = &installed.root;

    let got = installed.run(&["concurrent"]);
    let calls = got["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 4, "{got}");
    for call in calls {
        assert_eq!(call["ok"], true, "{call}");
        assert_eq!(call["delivered"]["complete"], true, "{call}");
    }
    // `main` three times at once (twice through the addon, once through serve, another
    // process): composed by exactly one of them, the others found it done; one spawn digest.
    let main: Vec<&Value> = calls.iter().filter(|c| c["group"] == "main").collect();
    let changed = main.iter().filter(|c| c["changed"] == true).count();
    assert_eq!(changed, 1, "{got}");
    assert!(
        main.iter()
            .all(|c| c["spawnDigest"] == main[0]["spawnDigest"] && c["binds"] == main[0]["binds"]),
        "{got}"
    );
    let research = calls.iter().find(|c| c["group"] == "research").unwrap();
    assert_eq!(research["changed"], true, "{got}");

    // The groups are whole: clawmd check finds nothing wrong, and composing again changes
    // nothing.
    for (what, args) in [
        (
            "check",
            &["check", "main", "research", "--format", "json"][..],
        ),
        (
            "compose",
            &["compose", "main", "research", "--format", "json"][..],
        ),
    ] {
        let output = Command::new(CLAWMD)
            .arg("--root")
            .arg(root)
            .args(args)
            .output()
            .unwrap();
        let report: Value = serde_json::from_str(&succeeded(what, output)).unwrap();
        assert_eq!(report["ok"], true, "{what}: {report}");
        if what == "compose" {
            assert_eq!(report["summary"]["changed"], 0, "{report}");
        }
    }
}

/// A `CLAWMD_*` variable the addon cannot read: asked for the addon, `prepareSpawn` rejects with
/// `addon-failed` naming the variable; by default it goes through `clawmd serve`, which refuses
/// the same variable (and exits); a good one is read as serve reads it.
#[test]
fn the_addon_reads_the_clawmd_variables_as_serve_does() {
    let installed = Installed::with_deployment();
    let bad = [("CLAWMD_DELIVERY", "carrier-pigeon")];

    let got = installed.run_with(&["one", "addon"], &bad);
    let outcome = &got["outcome"];
    assert_eq!(outcome["code"], "addon-failed", "{got}");
    let message = outcome["message"].as_str().unwrap();
    assert!(
        message.contains("CLAWMD_DELIVERY: \"carrier-pigeon\""),
        "{message}"
    );
    let got = installed.run_with(&["one"], &bad);
    assert_eq!(got["outcome"]["code"], "service-exited", "{got}");
    assert!(
        got["outcome"]["report"].is_null(),
        "serve refused it before any request: {got}"
    );

    for way in ["addon", "service"] {
        let got = installed.run_with(&["one", way], &[("CLAWMD_DELIVERY", "inline")]);
        assert_eq!(got["outcome"]["ok"], true, "{way}: {got}");
        assert_eq!(
            got["outcome"]["target"]["delivery"], "inline",
            "{way}: {got}"
        );
    }
}

/// A spawn whose group's lock another run holds: the addon, which answers on Node's thread,
/// does not wait for the lock there. It answers again on libuv's thread pool once the lock is
/// free, and the host's event loop runs meanwhile (a 10 ms timer keeps firing).
#[test]
fn a_spawn_waiting_for_a_groups_lock_does_not_hold_the_event_loop() {
    let installed = Installed::with_deployment();

    let got = installed.run(&["locked"]);
    assert_eq!(got["outcome"]["ok"], true, "{got}");
    assert_eq!(got["outcome"]["changed"], true, "{got}");
    let elapsed = got["elapsedMs"].as_u64().unwrap();
    let ticks = got["ticks"].as_u64().unwrap();
    // It waited for the other run (the lock is held 1.2 s after the call)...
    assert!(elapsed >= 900, "answered before the lock was free: {got}");
    // ...and the event loop ran while it waited (on Node's thread, the timer would not fire).
    assert!(ticks >= 20, "the event loop was held: {got}");
}
