//! The swap docs/nanoclaw.md gives for nanoclaw v2.3 and later (section 3b): the file it tells
//! the operator to add, `src/clawmd-spawn.ts`, taken out of the page as it is, in a tree laid
//! out as nanoclaw's (`src/` beside nanoclaw's own `tsconfig.json`, `eslint.config.js` and
//! `.prettierrc`; nanoclaw's `project-doc-compose.ts`, `group-persona.ts` and
//! `container-config.ts`, verbatim, for the types it imports; stubs for its database and log),
//! as the anchor folder's `bench-driver/tree` lays it out, with the npm package as
//! `scripts/package-npm` packs it.
//!
//! - nanoclaw's checks pass on it unchanged: `tsc --noEmit`, `eslint --max-warnings 0` (its
//!   typed rules included), `prettier --check` (the tools of nanoclaw's package.json, pinned by
//!   scripts/e2e-setup in `<cache>/nanoclaw-lint`);
//! - compiled and run from a host: every warning clawmd reports is logged with its code, a
//!   group that does not compose is logged at error level and the call throws, a spec whose
//!   document is not the one clawmd composed is logged, and the binds it returns are `clawmd
//!   mounts`', split at the agent's home.
//!
//! nanoclaw's files, and the stubs beside them, are not kept in this repository: they are in the
//! anchor folder `CLAWMD_NANOCLAW_V23` (default /work/anchors/nanoclaw-v23-spawn, the files
//! scripts/bench-spawn also compiles; their character counts are checked there and here). A clean clone (CI) has no such
//! folder, so the test is `#[ignore]`d; where the folder is, run it with
//!
//! ```text
//! cargo test --test e2e -- --ignored nanoclaw_seam
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::nanoclaw_v23::ANCHOR;
use crate::npm::package_npm;
use crate::support::Deployment;
use crate::support::nanoclaw::clawmd_spawn_ts;
use crate::typescript::{succeeded, ts_tools};

const CLAWMD: &str = env!("CARGO_BIN_EXE_clawmd");

/// nanoclaw's files and their lengths in characters, as the search index stores them.
const NANOCLAW_FILES: [(&str, usize); 6] = [
    ("src/project-doc-compose.ts", 15727),
    ("src/group-persona.ts", 3215),
    ("src/container-config.ts", 25587),
    ("eslint.config.js", 1668),
    ("tsconfig.json", 481),
    (".prettierrc", 47),
];

fn nanoclaw_dir() -> PathBuf {
    let dir = ANCHOR.dir();
    for (file, chars) in NANOCLAW_FILES {
        let text = std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| {
            panic!(
                "{}: {e}: set {} to the anchor folder holding nanoclaw's files and \
                 bench-driver/ (tests/e2e/nanoclaw_seam.rs says which)",
                dir.join(file).display(),
                ANCHOR.env
            )
        });
        assert_eq!(text.chars().count(), chars, "{file} is not nanoclaw's");
    }
    dir
}

fn run(what: &str, program: &Path, args: &[&str], dir: &Path) -> String {
    succeeded(
        what,
        Command::new(program)
            .args(args)
            .current_dir(dir)
            .env_remove("CLAWMD")
            .output()
            .unwrap(),
    )
}

#[test]
#[ignore = "compiles nanoclaw v2.3's sources, which this repository does not keep, from the anchor \
            folder (CLAWMD_NANOCLAW_V23, default /work/anchors/nanoclaw-v23-spawn) a \
            clean clone has not: cargo test --test e2e -- --ignored nanoclaw_seam"]
fn the_documented_swap_passes_nanoclaws_checks_and_logs_what_clawmd_reports() {
    let tools = ts_tools();
    let nanoclaw = nanoclaw_dir();
    let lint = tools.cache.join("nanoclaw-lint/node_modules");
    assert!(
        lint.join(".bin/eslint").is_file(),
        "{} is missing: run scripts/e2e-setup",
        lint.display()
    );
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    let project = work.join("nanoclaw");

    // nanoclaw's tree (its configs, its sources the file imports, the stubs), as the anchor lays
    // it out; then the file.
    succeeded(
        "the anchor's bench-driver/tree",
        Command::new(nanoclaw.join("bench-driver/tree"))
            .arg(&project)
            .output()
            .unwrap(),
    );
    for (file, _) in NANOCLAW_FILES {
        assert_eq!(
            std::fs::read(project.join(file)).unwrap(),
            std::fs::read(nanoclaw.join(file)).unwrap(),
            "{file}: the tree holds nanoclaw's file as it is"
        );
    }
    std::fs::write(project.join("src/clawmd-spawn.ts"), clawmd_spawn_ts()).unwrap();
    std::fs::write(
        project.join("package.json"),
        r#"{"name": "nanoclaw", "private": true, "type": "module"}"#,
    )
    .unwrap();
    // node_modules: nanoclaw's tools, and clawmd as packed (its JavaScript and types).
    let modules = project.join("node_modules");
    std::fs::create_dir(&modules).unwrap();
    for entry in std::fs::read_dir(&lint).unwrap() {
        let entry = entry.unwrap();
        std::os::unix::fs::symlink(entry.path(), modules.join(entry.file_name())).unwrap();
    }
    let listing = package_npm(&work.join("tarballs"));
    let package = listing.lines().last().unwrap();
    std::fs::create_dir(modules.join("clawmd")).unwrap();
    run(
        "tar",
        Path::new("tar"),
        &[
            "xzf",
            package,
            "-C",
            "node_modules/clawmd",
            "--strip-components=1",
        ],
        &project,
    );

    // nanoclaw's checks, unchanged, with nothing to say.
    let bin = |name: &str| modules.join(".bin").join(name);
    run(
        "tsc --noEmit",
        &bin("tsc"),
        &["--noEmit", "-p", "."],
        &project,
    );
    let eslint = run(
        "eslint",
        &bin("eslint"),
        &["--max-warnings", "0", "src/clawmd-spawn.ts"],
        &project,
    );
    assert_eq!(eslint.trim(), "", "eslint said: {eslint}");
    run(
        "prettier --check",
        &bin("prettier"),
        &["--check", "src/clawmd-spawn.ts"],
        &project,
    );

    // Compiled (nanoclaw's tsconfig: dist/) and run from a host on a deployment.
    run("tsc", &bin("tsc"), &["-p", "."], &project);
    let deployment = Deployment::standard()
        .group("main", Some("{}"))
        .file("clawmd.json", r#"{"groupConfig": "handed"}"#);
    std::fs::write(project.join("host.mjs"), HOST).unwrap();
    let output = Command::new(&tools.node)
        .arg("host.mjs")
        .current_dir(&project)
        .env("DEPLOYMENT", deployment.root())
        .env("CLAWMD", CLAWMD)
        .output()
        .unwrap();
    let got: Value = serde_json::from_str(&succeeded("node host.mjs", output)).unwrap();
    assert_eq!(got["hung"], false, "{got}");
    let lines = got["log"].as_array().unwrap();
    let logged = |level: &str, message: &str, code: Option<&str>| {
        lines.iter().any(|line| {
            line["level"] == level
                && line["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(message))
                && code.is_none_or(|code| line["data"]["code"] == code)
        })
    };
    assert!(
        logged("warn", "clawmd warning", Some("unknown-skill")),
        "{got}"
    );
    assert!(
        logged("warn", "another project document", None),
        "a spec for AGENTS.md on a Claude group is logged: {got}"
    );
    assert!(
        logged("error", "could not compose", Some("missing-group")),
        "{got}"
    );
    assert_eq!(got["missing"]["thrown"], "missing-group", "{got}");
    assert!(
        deployment.managed_md("main").contains("WEB"),
        "the skill composed"
    );

    // The binds: `clawmd mounts main`, in order, early ones first, those under the home last.
    let mounts = deployment
        .run(["mounts", "main", "--json"])
        .success()
        .json();
    let expected: Vec<Value> = mounts
        .as_array()
        .unwrap()
        .iter()
        .map(|bind| {
            json!({"hostPath": bind["host"], "containerPath": bind["container"],
                   "readonly": bind["readonly"], "mountClass": "group-state", "scope": "ag-main"})
        })
        .collect();
    let early = got["mounts"]["early"].as_array().unwrap();
    let late = got["mounts"]["late"].as_array().unwrap();
    assert_eq!([&early[..], &late[..]].concat(), expected, "{got}");
    assert!(early.iter().all(|m| {
        !m["containerPath"]
            .as_str()
            .unwrap()
            .starts_with("/home/node/")
    }));
    assert!(late.iter().all(|m| {
        m["containerPath"]
            .as_str()
            .unwrap()
            .starts_with("/home/node/")
    }));
    assert_eq!(
        early[0]["containerPath"], "/workspace/agent",
        "the group folder first: {got}"
    );
}

/// The host: nanoclaw's spawn step for group `main` (a skill that does not exist selected,
/// `cli_scope` in the row), then a spec for another document, then a group that does not exist.
const HOST: &str = r#"import { composeWithClawmd, clawmdMounts } from './dist/clawmd-spawn.js';
import { rows } from './dist/db/container-configs.js';
import { lines } from './dist/log.js';
import { DEFAULT_PROJECT_DOC } from './dist/project-doc-compose.js';

const out = { hung: false, log: lines, mounts: null, missing: {} };
const hang = setTimeout(() => {
  out.hung = true;
  process.stdout.write(JSON.stringify(out));
  process.exit(3);
}, 60_000);
hang.unref();
process.chdir(process.env.DEPLOYMENT);
rows.set('ag-main', { mcp_servers: '{}', skills: '["web","nope"]', cli_scope: 'disabled' });
const group = { id: 'ag-main', name: 'main', folder: 'main' };
const config = { mcpServers: {}, packages: { apt: [], npm: [] }, additionalMounts: [], skills: ['web', 'nope'] };
await composeWithClawmd(group, config, DEFAULT_PROJECT_DOC);
out.mounts = clawmdMounts(group);
await composeWithClawmd(group, config, { fileName: 'AGENTS.md' });
try {
  await composeWithClawmd({ id: 'ag-gone', name: 'gone', folder: 'gone' }, config, DEFAULT_PROJECT_DOC);
} catch (err) {
  out.missing.thrown = err.code;
}
process.stdout.write(JSON.stringify(out));
"#;
