//! The TypeScript integration (integrations/typescript/), with the real tools: the generated
//! types are what `scripts/gen-typescript` makes from `clawmd schema …` today, byte for byte;
//! the runner module and a stand-in host (tests/e2e/ts-host.ts) compile with the real `tsc
//! --strict` against them, as do the examples of integrations/typescript/README.md; and the host, run by the real `node`, composes, checks and migrates
//! a temp deployment with the real clawmd binary, getting typed reports and typed errors.
//!
//! The tools come from `scripts/e2e-setup` (`typescript`, `json-schema-to-typescript` and
//! `@types/node`, exactly as integrations/typescript/tools/package-lock.json locks them, in
//! `<CLAWMD_E2E_CACHE>/typescript`). A missing tool fails the test with a message naming that
//! script: never a silent pass.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

use crate::support::Deployment;

const CLAWMD: &str = env!("CARGO_BIN_EXE_clawmd");

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub(crate) struct TsTools {
    pub(crate) node: PathBuf,
    /// `<cache>/typescript`, where scripts/e2e-setup ran `npm ci`.
    pub(crate) dir: PathBuf,
    pub(crate) cache: PathBuf,
}

impl TsTools {
    pub(crate) fn tsc(&self) -> PathBuf {
        self.dir.join("node_modules/.bin/tsc")
    }
}

/// The tools, found once; a missing one fails every test that needs it, naming the fix.
pub(crate) fn ts_tools() -> &'static TsTools {
    static TOOLS: OnceLock<Result<TsTools, String>> = OnceLock::new();
    match TOOLS.get_or_init(find_ts_tools) {
        Ok(tools) => tools,
        Err(message) => panic!("{message}"),
    }
}

fn find_ts_tools() -> Result<TsTools, String> {
    let cache = match std::env::var_os("CLAWMD_E2E_CACHE") {
        Some(dir) => PathBuf::from(dir),
        None => {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/clawmd-e2e")
        }
    };
    let dir = cache.join("typescript");
    let mut missing = Vec::new();
    let node = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("node"))
        .find(|p| p.is_file());
    if node.is_none() {
        missing.push("`node` is not on PATH".to_owned());
    }
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("integrations/typescript/tools/package.json"))
            .unwrap(),
    )
    .unwrap();
    for (package, version) in manifest["devDependencies"].as_object().unwrap() {
        let installed =
            std::fs::read_to_string(dir.join("node_modules").join(package).join("package.json"))
                .ok()
                .and_then(|text| serde_json::from_str::<Value>(&text).ok())
                .and_then(|v| v["version"].as_str().map(str::to_owned));
        match installed {
            Some(found) if Some(found.as_str()) == version.as_str() => {}
            Some(found) => missing.push(format!(
                "{package} in {} is {found}, integrations/typescript/tools/package.json pins {version}",
                dir.display()
            )),
            None => missing.push(format!(
                "{package}@{version} is not installed in {}",
                dir.display()
            )),
        }
    }
    for bin in ["tsc", "json2ts"] {
        let path = dir.join("node_modules/.bin").join(bin);
        if missing.is_empty() && !path.exists() {
            missing.push(format!("{} is missing", path.display()));
        }
    }
    if !missing.is_empty() {
        let mut message = String::from("the TypeScript integration test cannot run:\n");
        for line in &missing {
            message.push_str(&format!("  - {line}\n"));
        }
        message.push_str(&format!(
            "Fix: run `scripts/e2e-setup` (installs the tools locked in \
             integrations/typescript/tools/package-lock.json with `npm ci` into {}; set \
             CLAWMD_E2E_CACHE for another cache folder, for both the script and the test).\n",
            dir.display()
        ));
        return Err(message);
    }
    Ok(TsTools {
        node: node.unwrap(),
        dir,
        cache,
    })
}

/// What the real binary prints on stdout for `args` (which must succeed).
fn clawmd_stdout(args: &[&str]) -> String {
    succeeded(
        &format!("clawmd {}", args.join(" ")),
        Command::new(CLAWMD).args(args).output().unwrap(),
    )
}

#[track_caller]
pub(crate) fn succeeded(what: &str, output: Output) -> String {
    assert!(
        output.status.success(),
        "{what} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The committed types are exactly what scripts/gen-typescript makes from the binary's
/// schemas now: a Rust report type that changes without `scripts/gen-typescript` fails here.
#[test]
fn generated_types_match_the_schemas() {
    let tools = ts_tools();
    let out = tempfile::tempdir().unwrap();
    succeeded(
        "scripts/gen-typescript",
        Command::new(repo().join("scripts/gen-typescript"))
            .arg(out.path())
            .env("CLAWMD", CLAWMD)
            .env("CLAWMD_E2E_CACHE", &tools.cache)
            .output()
            .unwrap(),
    );
    let committed = repo().join("integrations/typescript/generated");
    let names = |dir: &Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(names(out.path()), names(&committed));
    assert_eq!(
        names(&committed),
        [
            "check-report.d.ts",
            "compose-report.d.ts",
            "migrate-report.d.ts",
            "mounts.d.ts",
            "run-failure.d.ts",
            "serve-answer.d.ts",
            "serve-request.d.ts",
            "watch-event.d.ts"
        ]
    );
    for name in names(&committed) {
        let fresh = std::fs::read_to_string(out.path().join(&name)).unwrap();
        let kept = std::fs::read_to_string(committed.join(&name)).unwrap();
        assert!(
            fresh == kept,
            "integrations/typescript/generated/{name} is not what `clawmd schema` gives now: \
             run scripts/gen-typescript and commit the result.\nfresh:\n{fresh}"
        );
    }
}

/// A temp folder holding the runner's sources (`clawmd.ts`, `cli.ts`, `tsconfig.json`,
/// `package.json`, `generated/`) and the locked tools' `node_modules`.
fn build_dir(tools: &TsTools) -> tempfile::TempDir {
    let build = tempfile::tempdir().unwrap();
    let src = repo().join("integrations/typescript");
    std::fs::create_dir(build.path().join("generated")).unwrap();
    for name in ["clawmd.ts", "cli.ts", "tsconfig.json", "package.json"] {
        std::fs::copy(src.join(name), build.path().join(name)).unwrap();
    }
    for entry in std::fs::read_dir(src.join("generated")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(
            entry.path(),
            build.path().join("generated").join(entry.file_name()),
        )
        .unwrap();
    }
    std::os::unix::fs::symlink(
        tools.dir.join("node_modules"),
        build.path().join("node_modules"),
    )
    .unwrap();
    build
}

/// Type-checks the project in `dir` with its `tsconfig.json` (strict), emitting nothing.
fn type_check(tools: &TsTools, dir: &Path, what: &str) {
    succeeded(
        what,
        Command::new(tools.tsc())
            .args(["-p", "tsconfig.json", "--noEmit"])
            .current_dir(dir)
            .output()
            .unwrap(),
    );
}

/// The runner's exports, for a README example that does not import them itself.
const README_IMPORTS: &str = r#"import {
  ClawmdError, checkGroup, composeBeforeSpawn, composeBeforeSpawnSync, migrateOnce,
} from "clawmd";
void [ClawmdError, checkGroup, composeBeforeSpawn, composeBeforeSpawnSync, migrateOnce];
"#;

/// What the README's examples take from the host around them (nanoclaw's names), declared so
/// that everything else in them is type-checked against the runner as it is.
const README_HOST: &str = r#"interface AgentGroup { id: string; folder: string }
declare const group: AgentGroup;
declare const agentGroup: AgentGroup;
declare const containerConfig: { skills: string[] | "all" };
declare function getContainerConfig(id: string): { cli_scope: string | null } | undefined;
declare const root: string;
declare const log: {
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
};
void [group, agentGroup, containerConfig, getContainerConfig, root, log];
"#;

/// The ```ts examples of integrations/typescript/README.md and of README.md compile with the
/// shipped tsconfig.json (strict) against the runner and the generated types, imported as the
/// package `clawmd` (mapped to the runner's source): a renamed option or report field fails
/// here, not in a host that copied the example.
#[test]
fn readme_examples_type_check() {
    let tools = ts_tools();
    let build = build_dir(tools);
    let mut files = Vec::new();
    for (readme, count) in [("integrations/typescript/README.md", 4), ("README.md", 1)] {
        let text = std::fs::read_to_string(repo().join(readme)).unwrap();
        let examples: Vec<&str> = text
            .split("```ts\n")
            .skip(1)
            .map(|rest| rest.split("```").next().unwrap())
            .collect();
        assert_eq!(
            examples.len(),
            count,
            "the ```ts examples of {readme}: {examples:#?}"
        );
        for example in examples {
            let imports = match example.contains("from \"clawmd\"") {
                true => "",
                false => README_IMPORTS,
            };
            let name = format!("readme-example-{}.ts", files.len());
            std::fs::write(
                build.path().join(&name),
                format!("{imports}{README_HOST}{example}"),
            )
            .unwrap();
            files.push(name);
        }
    }
    let tsconfig = build.path().join("tsconfig.json");
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(&tsconfig).unwrap()).unwrap();
    config["compilerOptions"]["paths"] = serde_json::json!({ "clawmd": ["./clawmd.ts"] });
    let include = config["include"].as_array_mut().unwrap();
    include.extend(files.iter().map(|f| Value::from(f.as_str())));
    std::fs::write(&tsconfig, config.to_string()).unwrap();
    type_check(
        tools,
        build.path(),
        "tsc -p tsconfig.json (the README's examples)",
    );
}

/// The runner, compiled with the real tsc --strict against the generated types and run by the
/// real node against the real binary, as a host calls it before each spawn: a good group
/// composes (then is a no-op with the same digest), a broken `container.json` is a typed error
/// naming the file and the field, an incomplete delivery is refused unless allowed, and a
/// missing or hanging binary is a clear error, and a lock another run holds is a typed
/// `lock-timeout`.
#[test]
fn runner_composes_before_spawn_with_the_real_node_and_binary() {
    let tools = ts_tools();
    let build = build_dir(tools);
    std::fs::copy(
        repo().join("tests/e2e/ts-host.ts"),
        build.path().join("ts-host.ts"),
    )
    .unwrap();
    // The shipped tsconfig.json type-checks the runner as it is...
    type_check(tools, build.path(), "tsc -p tsconfig.json");
    // ...and a host using it compiles with --strict.
    succeeded(
        "tsc --strict",
        Command::new(tools.tsc())
            .args([
                "--strict",
                "--noUncheckedIndexedAccess",
                "--exactOptionalPropertyTypes",
                "--target",
                "ES2022",
                "--module",
                "NodeNext",
                "--moduleResolution",
                "NodeNext",
                "--types",
                "node",
                "--outDir",
                "out",
                "ts-host.ts",
                "clawmd.ts",
            ])
            .current_dir(build.path())
            .output()
            .unwrap(),
    );

    let d = Deployment::standard()
        .group("good", Some(r#"{"skills": ["web"]}"#))
        .group(
            "broken",
            Some(r#"{"skills": ["web"], "mcpServers": {"db": {"command": "db", "instructions": 5}}}"#),
        )
        .group("linked", Some("{}"))
        .group("flat", Some("{}"))
        .group("handed", Some(r#"{"skills": []}"#))
        .group("handedsync", Some(r#"{"skills": []}"#));
    // A deployment where another run holds the lock of `locked` for the whole host run (its own
    // deployment: migrate, which takes every group's lock, would wait for it too).
    let locked = Deployment::standard().group("locked", Some("{}"));
    std::fs::create_dir_all(locked.path("groups/.clawmd-locks")).unwrap();
    let held = std::fs::File::create(locked.path("groups/.clawmd-locks/locked.lock")).unwrap();
    held.lock().unwrap();
    // A deployment whose shared base is a folder: the run cannot start.
    let unreadable = Deployment::new()
        .group("good", Some("{}"))
        .file("container/CLAUDE.md/x", "");
    let slow = build.path().join("slow-clawmd");
    std::fs::write(&slow, "#!/bin/sh\nexec sleep 30\n").unwrap();
    std::fs::set_permissions(&slow, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let started = std::time::Instant::now();
    let stdout = succeeded(
        "node out/ts-host.js",
        Command::new(&tools.node)
            .arg("out/ts-host.js")
            .current_dir(build.path())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("CLAWMD", CLAWMD)
            .env("DEPLOYMENT", d.root())
            .env("UNREADABLE_ROOT", unreadable.root())
            .env("LOCKED_ROOT", locked.root())
            .env("SLOW_BINARY", &slow)
            .output()
            .unwrap(),
    );
    // The two timeouts (300 ms each) killed the stand-in rather than waiting 30 s for it.
    let results: Value = serde_json::from_str(&stdout).unwrap();
    assert!(
        started.elapsed().as_secs() < 25,
        "the host took {:?}; each call's milliseconds: {}",
        started.elapsed(),
        results
            .as_object()
            .unwrap()
            .iter()
            .map(|(name, outcome)| format!("{name} {}", outcome["ms"]))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let value = |name: &str| -> &Value {
        results[name]
            .get("value")
            .unwrap_or_else(|| panic!("{name}: expected a value, got {}", results[name]))
    };
    let error = |name: &str| -> &Value {
        let error = results[name]
            .get("error")
            .unwrap_or_else(|| panic!("{name}: expected an error, got {}", results[name]));
        assert_eq!(error["name"], "ClawmdError", "{name}");
        error
    };

    assert_eq!(*value("migrate"), true);

    let composed = value("composed");
    assert_eq!(composed["changed"], true);
    assert_eq!(composed["schema"], "urn:clawmd:schema:compose-report:1");
    assert_eq!(composed["complete"], true);
    assert_eq!(composed["file"], "CLAUDE.md");
    assert!(
        composed["created"]
            .as_array()
            .unwrap()
            .contains(&Value::from("CLAUDE.md")),
        "{composed}"
    );
    let digest = composed["memoryDigest"].as_str().unwrap();
    assert!(digest.starts_with("sha256:"), "{digest}");
    assert!(d.managed_md("good").contains("WEB"));
    for noop in ["noop", "noopSync"] {
        let noop = value(noop);
        assert_eq!(noop["changed"], false, "{noop}");
        assert_eq!(noop["memoryDigest"], digest, "{noop}");
        assert_eq!(noop["created"], serde_json::json!([]), "{noop}");
    }

    // A config handed on standard input is read instead of container.json.
    for (name, group, text) in [
        ("handed", "handed", "HANDED ASYNC"),
        ("handedSync", "handedsync", "HANDED SYNC"),
    ] {
        assert_eq!(value(name)["complete"], true, "{name}");
        let composed = d.managed_md(group);
        assert!(
            composed.contains(text) && composed.contains("WEB"),
            "{name}: {composed}"
        );
    }

    let config = d.path("groups/broken/container.json");
    for name in ["broken", "brokenSync"] {
        let broken = error(name);
        assert_eq!(broken["code"], "bad-config", "{broken}");
        assert_eq!(broken["group"], "broken", "{broken}");
        assert_eq!(broken["file"], config.to_str().unwrap(), "{broken}");
        let message = broken["message"].as_str().unwrap();
        assert!(message.contains("container.json"), "{message}");
        assert!(message.contains("mcpServers.db.instructions"), "{message}");
    }
    assert!(
        !d.exists("groups/broken/CLAUDE.md"),
        "a failed group is left as it was"
    );

    let missing = error("missingGroup");
    assert_eq!(missing["code"], "missing-group", "{missing}");

    // mounts() and mountsSync() give what `clawmd mounts` prints: the binds, in order.
    let table: Value = serde_json::from_str(&clawmd_stdout(&[
        "--root",
        d.root().to_str().unwrap(),
        "mounts",
        "good",
        "--json",
    ]))
    .unwrap();
    let expected: Vec<Value> = table
        .as_array()
        .unwrap()
        .iter()
        .map(|bind| serde_json::json!([bind["container"], bind["readonly"]]))
        .collect();
    assert_eq!(expected[0], serde_json::json!(["/workspace/agent", false]));
    for name in ["mounts", "mountsSync"] {
        assert_eq!(*value(name), Value::from(expected.clone()), "{name}");
    }
    let codex = value("mountsCodex");
    assert!(
        codex
            .as_array()
            .unwrap()
            .contains(&Value::from("/workspace/agent/AGENTS.md")),
        "{codex}"
    );
    for name in ["mountsMissing", "mountsMissingSync"] {
        let missing = error(name);
        assert_eq!(missing["code"], "missing-group", "{missing}");
        assert!(
            missing["message"].as_str().unwrap().contains("nope"),
            "{missing}"
        );
    }

    let incomplete = error("incomplete");
    assert_eq!(incomplete["code"], "not-delivered", "{incomplete}");
    assert_eq!(incomplete["file"], "CLAUDE.md", "{incomplete}");
    assert!(
        incomplete["message"]
            .as_str()
            .unwrap()
            .contains("shared-base"),
        "{incomplete}"
    );
    let allowed = value("incompleteAllowed");
    assert_eq!(allowed["complete"], false, "{allowed}");
    assert!(
        allowed["missing"]
            .as_array()
            .unwrap()
            .contains(&Value::from("shared-base")),
        "{allowed}"
    );

    let codex = value("codex");
    assert_eq!(codex["file"], "AGENTS.md", "{codex}");
    assert!(d.exists("groups/flat/AGENTS.md"));

    let failure = error("runFailure");
    assert_eq!(failure["code"], "run-failed", "{failure}");
    assert!(
        failure["message"]
            .as_str()
            .unwrap()
            .contains("cannot read the shared container content"),
        "{failure}"
    );

    for name in ["missingBinary", "missingBinarySync"] {
        let spawn = error(name);
        assert_eq!(spawn["code"], "spawn-failed", "{spawn}");
        let message = spawn["message"].as_str().unwrap();
        assert!(message.contains("/nonexistent/clawmd"), "{message}");
        assert!(message.contains("ENOENT"), "{message}");
    }
    for name in ["lockTimeout", "lockTimeoutSync"] {
        let waited = error(name);
        assert_eq!(waited["code"], "lock-timeout", "{waited}");
        assert_eq!(waited["group"], "locked", "{waited}");
        let message = waited["message"].as_str().unwrap();
        assert!(message.contains("locked.lock"), "{message}");
        assert!(message.contains("held by another clawmd run"), "{message}");
    }
    assert!(
        !locked.exists("groups/locked/CLAUDE.md"),
        "a group whose lock is held is not composed"
    );
    drop(held);
    for name in ["timeout", "timeoutSync"] {
        let timeout = error(name);
        assert_eq!(timeout["code"], "timeout", "{timeout}");
        assert!(
            timeout["message"].as_str().unwrap().contains("300 ms"),
            "{timeout}"
        );
    }

    let check = value("checkGood");
    assert_eq!(check["ok"], true, "{check}");
    let check = value("checkBroken");
    assert_eq!(check["ok"], false, "{check}");
    assert!(
        check["codes"]
            .as_array()
            .unwrap()
            .contains(&Value::from("bad-config")),
        "{check}"
    );
}
