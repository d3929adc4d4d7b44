//! What the nanoclaw end-to-end tests (`tests/e2e/nanoclaw*.rs`) share: clawmd run as
//! nanoclaw's swapped runner runs it ([`compose_as_runner`]), the recordings of nanoclaw's spawn
//! path in its two modes ([`Mode`], [`SpawnRecordings`]) and their `state.json` form of a tree
//! ([`lay`], [`snapshot_into`]), and the file docs/nanoclaw.md §3b gives ([`clawmd_spawn_ts`]).

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use super::Deployment;
use super::recording::{Recordings, repo};
use super::sandbox::e2e_cache;

/// In what the anchors' scripts logged, the deployment's root.
pub const ROOT_MARK: &str = "$ROOT";

/// A run of nanoclaw's spawn path, as recorded.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    /// nanoclaw's runner as it is, with its own composer (v2.0.64's `composeGroupClaudeMd`,
    /// v2.3's `composeGroupProjectDoc`).
    Nanoclaw,
    /// docs/nanoclaw.md's swap applied (§1-3 for v2.0.64, §3b for v2.3): clawmd's package.
    Swapped,
}

impl Mode {
    pub const BOTH: [Mode; 2] = [Mode::Nanoclaw, Mode::Swapped];

    /// Its folder of the recordings (and the anchor's `run-spawn` argument).
    pub fn dir(self) -> &'static str {
        match self {
            Mode::Nanoclaw => "nanoclaw",
            Mode::Swapped => "swapped",
        }
    }
}

/// The recordings of one nanoclaw release's spawn path: a folder per [`Mode`], each holding
/// `files` (`clawmd.json`, the last, only after the swap).
pub struct SpawnRecordings {
    /// Relative to the repository; its README says how they are made.
    pub dir: &'static str,
    pub files: &'static [&'static str],
    /// Set to rewrite them from the anchor instead of comparing.
    pub record_env: &'static str,
}

impl SpawnRecordings {
    /// The files recorded in `mode`'s folder.
    pub fn files(&self, mode: Mode) -> &'static [&'static str] {
        let (last, before) = self.files.split_last().unwrap();
        assert_eq!(*last, "clawmd.json", "{}: the swap's file last", self.dir);
        match mode {
            Mode::Nanoclaw => before,
            Mode::Swapped => self.files,
        }
    }

    /// Them as [`Recordings`] of nanoclaw's spawn path.
    pub fn recordings(&self) -> Recordings {
        Recordings::new(self.dir, "nanoclaw's spawn path", self.record_env)
    }

    /// The recorded `file` of `mode`, as JSON.
    pub fn json(&self, mode: Mode, file: &str) -> Value {
        self.recordings().json(&format!("{}/{file}", mode.dir()))
    }
}

/// clawmd as the swapped runner calls it before a spawn: `compose GROUP --json` with the
/// group's `config` handed (`--config`) with the `cli_scope` of its row, and `extra` arguments.
/// Returns compose's report of the group.
pub fn compose_as_runner(
    d: &Deployment,
    group: &str,
    mut config: Value,
    cli_scope: Value,
    extra: &[&str],
) -> Value {
    config["cli_scope"] = cli_scope;
    let handed = d.path(&format!("{group}.handed.json"));
    std::fs::write(&handed, config.to_string()).unwrap();
    let mut args = vec!["compose", group, "--json"];
    args.extend(extra);
    args.extend(["--config", handed.to_str().unwrap()]);
    let report = d.run(args).success().json();
    std::fs::remove_file(&handed).unwrap();
    report["groups"][0].clone()
}

/// Runs `command`, an anchor's script running nanoclaw's composer on the deployment at `root`,
/// with the TypeScript compiler of the e2e cache (`TYPESCRIPT`): fails where it fails, naming
/// `what` and showing its log and output. Returns its log (what it wrote to stderr), `root` as
/// [`ROOT_MARK`].
pub fn composer_log(what: &str, command: &mut Command, root: &Path) -> String {
    let output = command
        .env("TYPESCRIPT", e2e_cache().join("typescript/node_modules"))
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let log = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{log}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout)
    );
    log.replace(&root.display().to_string(), ROOT_MARK)
}

/// Lays one entry of a recorded `state.json` at `key` under the root.
pub fn lay(d: &Deployment, key: &str, entry: &Value) {
    let path = d.path(key);
    if entry.get("dir").is_some() {
        std::fs::create_dir_all(&path).unwrap();
    } else if let Some(target) = entry["link"].as_str() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, &path).unwrap();
    } else {
        d.write(key, entry["file"].as_str().unwrap().as_bytes());
    }
}

/// `state.json`'s form of the tree at `dir` (files as text, links as targets), clawmd's state
/// folders left out as the recording leaves them out.
pub fn snapshot_into(dir: &Path, rel: &str, out: &mut serde_json::Map<String, Value>) {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for name in names {
        if rel == "groups" && (name == ".clawmd" || name == ".clawmd-locks") {
            continue;
        }
        let path = dir.join(&name);
        let key = format!("{rel}/{name}");
        let meta = path.symlink_metadata().unwrap();
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&path).unwrap();
            out.insert(key, json!({"link": target.to_string_lossy()}));
        } else if meta.is_dir() {
            out.insert(key.clone(), json!({"dir": true}));
            snapshot_into(&path, &key, out);
        } else {
            out.insert(
                key,
                json!({"file": std::fs::read_to_string(&path).unwrap()}),
            );
        }
    }
}

/// The `src/clawmd-spawn.ts` docs/nanoclaw.md §3b gives: the code block after its
/// `<!-- checked: src/clawmd-spawn.ts` marker.
pub fn clawmd_spawn_ts() -> String {
    let page = std::fs::read_to_string(repo().join("docs/nanoclaw.md")).unwrap();
    let after = page
        .split_once("<!-- checked: src/clawmd-spawn.ts")
        .expect("docs/nanoclaw.md marks the file it gives")
        .1;
    let block = after.split_once("```ts\n").unwrap().1;
    block.split_once("```\n").unwrap().0.to_owned()
}
