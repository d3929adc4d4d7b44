//! The npm package `clawmd`, installed the way a Node host installs it: `scripts/package-npm`
//! packs the runner (JavaScript and `.d.ts` types) and this platform's binary package
//! (`@clawmd/linux-x64-gnu` here: the binary and the Node addon); both tarballs go into an empty Node project with
//! `npm install --offline` (an empty npm cache, an unreachable registry: nothing is fetched);
//! then a plain JavaScript host (tests/e2e/npm-host.mjs), with only `node` on PATH and no
//! `CLAWMD`, composes a copy of the example deployment through the package. The binary must come
//! from the platform package, and the report must say everything reaches the agent.
//!
//! The binary packaged is this test build's (`CARGO_BIN_EXE_clawmd`), the addon this profile's
//! (`addon_library`; the script strips their debug information): a release build here would add
//! minutes to the suite. `scripts/package-npm` without `--binary` and `--addon` packages the
//! static release binary and the `dist` addon through the same steps.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::Deployment;
use crate::support::sandbox::e2e_cache;
use crate::typescript::{TsTools, succeeded, ts_tools};

const CLAWMD: &str = env!("CARGO_BIN_EXE_clawmd");

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The Node addon (crates/clawmd-node) of this test build's profile: `$CLAWMD_TEST_ADDON`,
/// which scripts/test builds just before the tests, with the targets the test build builds;
/// else built once per test run (`cargo build -p clawmd-node`: `cargo test` of this package
/// does not build another package's library). That builds the addon and the library it links,
/// never the `clawmd` binary the other tests are running; the dependencies the
/// dev-dependencies enlarge with features (serde_json, regex, syn, …) are built once more
/// without them (about 27 s of CPU once after `cargo test --workspace`'s build, then a few
/// seconds when the library changed).
pub(crate) fn addon_library() -> &'static Path {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| {
        if let Some(built) = std::env::var_os("CLAWMD_TEST_ADDON").filter(|p| !p.is_empty()) {
            let built = PathBuf::from(built);
            assert!(
                built.is_file(),
                "CLAWMD_TEST_ADDON={} is not a file (scripts/test sets it)",
                built.display()
            );
            return built;
        }
        let output = Command::new(env!("CARGO"))
            .args([
                "build",
                "--quiet",
                "-p",
                "clawmd-node",
                "--message-format=json",
            ])
            .current_dir(repo())
            .output()
            .unwrap();
        let stdout = succeeded("cargo build -p clawmd-node", output);
        stdout
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "clawmd_node")
            .flat_map(|m| m["filenames"].as_array().cloned().unwrap_or_default())
            .filter_map(|f| f.as_str().map(PathBuf::from))
            .find(|f| f.extension().is_some_and(|e| e == "so"))
            .unwrap_or_else(|| panic!("cargo build built no clawmd_node .so:\n{stdout}"))
    })
}

/// `scripts/package-npm` packs this test build's binary and addon into `out`; returns what it
/// printed: the tarballs it made, one a line (the platform package's, then `clawmd`'s).
pub(crate) fn package_npm(out: &Path) -> String {
    succeeded(
        "scripts/package-npm",
        Command::new(repo().join("scripts/package-npm"))
            .arg("--binary")
            .arg(CLAWMD)
            .arg("--addon")
            .arg(addon_library())
            .arg("--out")
            .arg(out)
            .env("CLAWMD_E2E_CACHE", e2e_cache())
            .output()
            .unwrap(),
    )
}

/// `npm ARGS` in `dir`, offline: its own empty cache under `work`, a registry nobody listens on.
fn npm_offline(work: &Path, dir: &Path, args: &[&OsStr]) -> String {
    succeeded(
        &format!("npm {args:?}"),
        Command::new("npm")
            .args(args)
            .args(["--offline", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(dir)
            .env("npm_config_cache", work.join("npm-cache"))
            .env("npm_config_registry", "http://127.0.0.1:9/")
            .env("npm_config_update_notifier", "false")
            .env_remove("CLAWMD")
            .output()
            .unwrap(),
    )
}

/// An empty Node project in `work/name` with `tarballs` installed.
pub(crate) fn project(work: &Path, name: &str, tarballs: &[PathBuf]) -> PathBuf {
    let dir = work.join(name);
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(
        dir.join("package.json"),
        format!(r#"{{"name": "{name}", "private": true, "type": "module"}}"#),
    )
    .unwrap();
    let mut args: Vec<&OsStr> = vec![OsStr::new("install")];
    args.extend(tarballs.iter().map(|t| t.as_os_str()));
    npm_offline(work, &dir, &args);
    dir
}

/// A folder holding only `node` (a link to the real one): the PATH of the host.
pub(crate) fn node_only_path(tools: &TsTools, work: &Path) -> PathBuf {
    let bin = work.join("node-only");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(&tools.node, bin.join("node")).unwrap();
    bin
}

/// Runs `program ARGS` in `dir` with a clean environment: PATH = `path`, HOME, and `env`.
pub(crate) fn host(
    program: &Path,
    args: &[&OsStr],
    dir: &Path,
    path: &Path,
    env: &[(&str, &OsStr)],
) -> Value {
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", path)
        .env("HOME", dir);
    for (key, value) in env {
        command.env(key, value);
    }
    let stdout = succeeded(
        &format!("{} {args:?}", program.display()),
        command.output().unwrap(),
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn npm_package_installs_offline_and_composes_the_example_deployment() {
    let tools = ts_tools();
    let work = tempfile::tempdir().unwrap();
    let work = work.path();

    let listing = package_npm(&work.join("tarballs"));
    let tarballs: Vec<PathBuf> = listing.lines().map(PathBuf::from).collect();
    let platform = format!(
        "{}-{}",
        std::env::consts::OS,
        match std::env::consts::ARCH {
            "x86_64" => "x64",
            "aarch64" => "arm64",
            other => other,
        }
    );
    let version = env!("CARGO_PKG_VERSION");
    let names: Vec<String> = tarballs
        .iter()
        .map(|t| t.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            format!("clawmd-{platform}-gnu-{version}.tgz"),
            format!("clawmd-{version}.tgz")
        ],
        "scripts/package-npm printed:\n{listing}"
    );
    for tarball in &tarballs {
        assert!(tarball.is_file(), "{}", tarball.display());
    }

    // Installed offline into an empty project: the package and, through it, the binary.
    let installed = project(work, "host", &tarballs);
    let package_binary = installed.join(format!("node_modules/@clawmd/{platform}-gnu/bin/clawmd"));
    assert!(package_binary.is_file(), "{}", package_binary.display());
    let package_addon = installed.join(format!("node_modules/@clawmd/{platform}-gnu/clawmd.node"));
    assert!(package_addon.is_file(), "{}", package_addon.display());
    for shipped in [
        "dist/clawmd.js",
        "dist/clawmd.d.ts",
        "dist/generated/compose-report.d.ts",
    ] {
        assert!(
            installed
                .join("node_modules/clawmd")
                .join(shipped)
                .is_file(),
            "the clawmd package has no {shipped}"
        );
    }
    assert!(
        !installed.join("node_modules/clawmd/clawmd.ts").exists(),
        "the package ships JavaScript, not its TypeScript sources"
    );

    // A plain JavaScript host, only `node` on PATH, no CLAWMD: the example deployment composes
    // through the package's binary, and everything reaches the agent.
    let deployment = Deployment::example();
    std::fs::copy(
        repo().join("tests/e2e/npm-host.mjs"),
        installed.join("host.mjs"),
    )
    .unwrap();
    let path = node_only_path(tools, work);
    let groups = ["main", "research", "ops"];
    let mut args: Vec<&OsStr> = vec![OsStr::new("host.mjs")];
    args.extend(groups.iter().map(OsStr::new));
    let root = [("DEPLOYMENT", deployment.root().as_os_str())];
    let got = host(&path.join("node"), &args, &installed, &path, &root);
    assert_eq!(
        got["binary"],
        package_binary.to_str().unwrap(),
        "the binary resolved: {got}"
    );
    for group in groups {
        for way in ["groups", "sync"] {
            let verdict = &got[way][group];
            assert_eq!(verdict["complete"], true, "{way} {group}: {got}");
            assert_eq!(
                verdict["missing"],
                serde_json::json!([]),
                "{way} {group}: {got}"
            );
            assert_eq!(verdict["file"], "CLAUDE.md", "{way} {group}: {got}");
            assert!(
                verdict["memoryDigest"]
                    .as_str()
                    .is_some_and(|d| d.starts_with("sha256:")),
                "{way} {group}: {got}"
            );
        }
        // The async call composed; the sync one after it found nothing to do, same digest.
        assert_eq!(got["groups"][group]["changed"], true, "{got}");
        assert_eq!(got["sync"][group]["changed"], false, "{got}");
        assert_eq!(
            got["groups"][group]["memoryDigest"],
            got["sync"][group]["memoryDigest"]
        );
        assert!(
            deployment.claude_md(group).contains("@./CLAUDE.local.md"),
            "{group}"
        );
        // `mounts`: the group folder read-write at the workspace, the composed CLAUDE.md (in
        // the group's bind folder in the state) read-only over it, the managed folder
        // read-only at /etc/claude-code.
        let binds = got["mounts"][group]
            .as_array()
            .unwrap_or_else(|| panic!("{got}"));
        let folder = deployment.path(&format!("groups/{group}"));
        assert_eq!(
            binds[0],
            serde_json::json!({"host": folder, "container": "/workspace/agent", "readonly": false}),
            "{got}"
        );
        let entry = serde_json::json!({
            "host": deployment.path(&Deployment::composed(group, "CLAUDE.md")),
            "container": "/workspace/agent/CLAUDE.md",
            "readonly": true,
        });
        assert!(binds.contains(&entry), "{group}: {entry} in {got}");
        let managed = serde_json::json!({
            "host": deployment.path(&format!("groups/.clawmd/binds/{group}/managed")),
            "container": "/etc/claude-code",
            "readonly": true,
        });
        assert!(binds.contains(&managed), "{group}: {managed} in {got}");
        assert_eq!(
            got["mountsSync"][group], got["mounts"][group],
            "{group}: {got}"
        );
    }

    // `CLAWMD` still wins over the package's binary.
    let missing = OsStr::new("/nonexistent/clawmd");
    let env = [root[0], ("CLAWMD", missing)];
    let got = host(&path.join("node"), &args[..2], &installed, &path, &env);
    assert_eq!(got["binary"], "/nonexistent/clawmd", "{got}");
    assert_eq!(
        got["groups"]["main"]["error"]["code"], "spawn-failed",
        "{got}"
    );

    // The package's `clawmd` command runs the same binary, with only node on PATH.
    let shim = installed.join("node_modules/.bin/clawmd");
    let check = Command::new(&shim)
        .args([OsStr::new("--root"), deployment.root().as_os_str()])
        .args(["check", "--all", "--format", "json"])
        .current_dir(&installed)
        .env_clear()
        .env("PATH", &path)
        .output()
        .unwrap();
    let report: Value =
        serde_json::from_str(&succeeded("node_modules/.bin/clawmd check", check)).unwrap();
    assert_eq!(report["ok"], true, "{report}");

    // The shipped types: a TypeScript host compiles against the installed package (strict,
    // NodeNext, the way integrations/typescript/README.md says to use it).
    std::fs::write(
        installed.join("consumer.ts"),
        r#"import { ClawmdError, composeBeforeSpawn, resolveBinary, type Composed, type GroupReport } from "clawmd";
try {
  const composed: Composed = await composeBeforeSpawn("main", { root: process.cwd(), timeoutMs: 30_000 });
  const digest: string = composed.memoryDigest;
  const group: GroupReport = composed.group;
  void [digest, group, resolveBinary()];
} catch (err) {
  if (err instanceof ClawmdError) {
    const code: string = err.code;
    const file: string | null = err.file;
    void [code, file];
  }
}
"#,
    )
    .unwrap();
    std::fs::write(
        installed.join("tsconfig.json"),
        serde_json::json!({
            "compilerOptions": {
                "target": "ES2022", "module": "NodeNext", "moduleResolution": "NodeNext",
                "strict": true, "exactOptionalPropertyTypes": true, "noEmit": true,
                "typeRoots": [tools.dir.join("node_modules/@types")], "types": ["node"],
            },
            "files": ["consumer.ts"],
        })
        .to_string(),
    )
    .unwrap();
    succeeded(
        "tsc -p tsconfig.json (a TypeScript host of the installed package)",
        Command::new(tools.tsc())
            .args(["-p", "tsconfig.json"])
            .current_dir(&installed)
            .output()
            .unwrap(),
    );

    // Without the platform package (optional dependencies omitted, or another platform's
    // node_modules): a clear error naming the platform, not a search of PATH.
    let bare = project(work, "bare", &tarballs[1..]);
    assert!(!bare.join("node_modules/@clawmd").exists());
    std::fs::copy(repo().join("tests/e2e/npm-host.mjs"), bare.join("host.mjs")).unwrap();
    let got = host(&path.join("node"), &args[..2], &bare, &path, &root);
    for error in [&got["binaryError"], &got["groups"]["main"]["error"]] {
        assert_eq!(error["name"], "ClawmdError", "{got}");
        assert_eq!(error["code"], "no-binary", "{got}");
        let message = error["message"].as_str().unwrap();
        assert!(message.contains(&platform), "{message}");
        assert!(
            message.contains(&format!("@clawmd/{platform}-gnu")),
            "{message}"
        );
        assert!(message.contains("CLAWMD"), "{message}");
    }

    // No package can fit: another OS (nanoclaw's hosts also run on macOS), or a Linux whose libc
    // is not glibc (npm installs the -gnu package only on glibc). The message names the
    // platform and what to do there. (process.platform, process.arch and the libc the report
    // gives are what the package reads; the script overrides them before it resolves.)
    let pretend = r#"import { resolveBinary } from "clawmd";
const [platform, arch, libc] = process.argv.slice(1);
Object.defineProperty(process, "platform", { value: platform });
Object.defineProperty(process, "arch", { value: arch });
if (libc === "musl") {
  const real = process.report.getReport.bind(process.report);
  process.report.getReport = () => ({ ...real(), header: { ...real().header, glibcVersionRuntime: undefined } });
}
try {
  process.stdout.write(JSON.stringify({ binary: resolveBinary() }));
} catch (err) {
  process.stdout.write(JSON.stringify({ code: err.code, message: err.message }));
}
"#;
    for (platform, arch, libc, says) in [
        (
            "darwin",
            "arm64",
            "",
            ["darwin-arm64:", "runs only on Linux", "linux-x64"],
        ),
        (
            "linux",
            "x64",
            "musl",
            ["linux-x64 (not glibc)", "built for glibc", "cargo install"],
        ),
    ] {
        let args = ["--input-type=module", "-e", pretend, platform, arch, libc].map(OsStr::new);
        let got = host(&path.join("node"), &args, &bare, &path, &[]);
        assert_eq!(got["code"], "no-binary", "{platform}-{arch} {libc}: {got}");
        let message = got["message"].as_str().unwrap();
        for said in says {
            assert!(message.contains(said), "{said:?} in {message}");
        }
        assert!(message.contains("CLAWMD"), "{message}");
    }
}

/// `pnpm ARGS` in `dir` (pnpm as scripts/e2e-setup installs it, nanoclaw's release): a store
/// under `work`, a registry nobody listens on, so everything comes from the tarballs.
fn pnpm(tools: &TsTools, work: &Path, dir: &Path, args: &[&str]) -> String {
    let pnpm = tools.cache.join("pnpm/node_modules/.bin/pnpm");
    assert!(
        pnpm.is_file(),
        "{} is missing: run scripts/e2e-setup",
        pnpm.display()
    );
    succeeded(
        &format!("pnpm {args:?}"),
        Command::new(pnpm)
            .args(args)
            .current_dir(dir)
            .env("npm_config_registry", "http://127.0.0.1:9/")
            .env("npm_config_store_dir", work.join("pnpm-store"))
            .env("npm_config_update_notifier", "false")
            .env_remove("CLAWMD")
            .output()
            .unwrap(),
    )
}

/// A nanoclaw operator adds clawmd with pnpm, from the tarballs committed under `vendor/`
/// (docs/nanoclaw.md, step 1): `pnpm add ./vendor/clawmd-X.tgz`, the platform package named
/// in `pnpm.overrides`. The platform package is installed as clawmd's optional dependency (the
/// lockfile says so), nothing is asked of the registry, `pnpm install --frozen-lockfile
/// --offline` (nanoclaw's CI) installs the same again, and a host with only `node` on PATH
/// prepares spawns through `prepareSpawn` (one request each: the report and the binds `mounts`
/// gives), through the platform package's addon by default and through `clawmd serve` when
/// asked, and exits by itself, the service still running. With the package's binary unusable
/// the addon still answers (it is what answered) and `clawmd serve` cannot start.
#[test]
fn pnpm_add_installs_the_binary_as_clawmds_optional_dependency() {
    let tools = ts_tools();
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    let project = work.join("nanoclaw");
    let vendor = project.join("vendor");
    std::fs::create_dir_all(&vendor).unwrap();
    let listing = package_npm(&vendor);
    let names: Vec<String> = listing
        .lines()
        .map(|t| {
            Path::new(t)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let [platform_tarball, clawmd_tarball] = &names[..] else {
        panic!("{listing}")
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        other => other,
    };
    let platform_package = format!("@clawmd/linux-{arch}-gnu");
    let other_package = match arch {
        "x64" => "@clawmd/linux-arm64-gnu",
        _ => "@clawmd/linux-x64-gnu",
    };
    // nanoclaw's package.json, as far as pnpm reads it, with the overrides docs/nanoclaw.md gives.
    std::fs::write(
        project.join("package.json"),
        serde_json::json!({
            "name": "nanoclaw",
            "private": true,
            "type": "module",
            "packageManager": "pnpm@10.34.5",
            "pnpm": {"overrides": {
                platform_package.as_str(): format!("file:vendor/{platform_tarball}"),
                other_package: "-",
            }},
        })
        .to_string(),
    )
    .unwrap();
    let started = std::time::Instant::now();
    pnpm(
        tools,
        work,
        &project,
        &["add", &format!("./vendor/{clawmd_tarball}")],
    );
    let took = started.elapsed();

    // The lockfile: clawmd a dependency of the project, the platform package an optional
    // dependency of clawmd, marked optional.
    let lock = std::fs::read_to_string(project.join("pnpm-lock.yaml")).unwrap();
    let lock = &yaml_rust2::YamlLoader::load_from_str(&lock).unwrap()[0];
    let clawmd_key = format!("clawmd@file:vendor/{clawmd_tarball}");
    let platform_key = format!("{platform_package}@file:vendor/{platform_tarball}");
    let snapshots = &lock["snapshots"];
    assert_eq!(
        snapshots[clawmd_key.as_str()]["optionalDependencies"][platform_package.as_str()].as_str(),
        Some(format!("file:vendor/{platform_tarball}").as_str()),
        "{lock:?}"
    );
    assert_eq!(
        snapshots[platform_key.as_str()]["optional"].as_bool(),
        Some(true),
        "{lock:?}"
    );
    assert!(
        lock["importers"]["."]["dependencies"][platform_package.as_str()].is_badvalue(),
        "the platform package is clawmd's, not a dependency of the project: {lock:?}"
    );
    // Nothing was fetched: pnpm retries an unreachable registry for more than a minute
    // before it skips an optional dependency it looked up there.
    assert!(
        took.as_secs() < 50,
        "pnpm add took {took:?}: did it ask the registry?"
    );

    // nanoclaw's CI: a fresh install from the lockfile, offline.
    std::fs::remove_dir_all(project.join("node_modules")).unwrap();
    pnpm(
        tools,
        work,
        &project,
        &["install", "--frozen-lockfile", "--offline"],
    );

    std::fs::copy(
        repo().join("tests/e2e/npm-serve-host.mjs"),
        project.join("host.mjs"),
    )
    .unwrap();
    let path = node_only_path(tools, work);
    let groups = ["main", "research", "ops"];
    let mut args: Vec<&OsStr> = vec![OsStr::new("host.mjs")];
    args.extend(groups.iter().map(OsStr::new));
    // Through the platform package's addon (the default where it is installed), then through
    // `clawmd serve` (WAY=service), each on a fresh copy of the example deployment.
    let spawn_on_a_fresh_copy = |args: &[&OsStr], way: &str| {
        let deployment = Deployment::example();
        let env = [
            ("DEPLOYMENT", deployment.root().as_os_str()),
            ("WAY", OsStr::new(way)),
        ];
        host(&path.join("node"), args, &project, &path, &env)
    };
    let mut binary = PathBuf::new();
    for way in ["", "service"] {
        let got = spawn_on_a_fresh_copy(&args, way);
        prepared_through_the_package(&got, &project, &platform_package, groups);
        binary = PathBuf::from(got["binary"].as_str().unwrap());
    }

    // With the package's binary unusable, the default way still prepares spawns: through the
    // addon, in the host's process; `clawmd serve` cannot start.
    let mode = std::fs::metadata(&binary).unwrap().permissions();
    std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o644)).unwrap();
    let outcomes: Vec<Value> = ["", "service"]
        .into_iter()
        .map(|way| spawn_on_a_fresh_copy(&args[..2], way))
        .collect();
    std::fs::set_permissions(&binary, mode).unwrap();
    assert_eq!(
        outcomes[0]["groups"]["main"]["changed"], true,
        "{}",
        outcomes[0]
    );
    assert_eq!(
        outcomes[0]["groups"]["main"]["mounts"]["error"]["code"], "spawn-failed",
        "the binary was unusable: {}",
        outcomes[0]
    );
    assert_eq!(
        outcomes[1]["groups"]["main"]["error"]["code"], "spawn-failed",
        "{}",
        outcomes[1]
    );
}

/// What npm-serve-host.mjs printed for `groups` of the example deployment: the binary and
/// addon from the platform package pnpm installed, each group prepared (composed, complete, its
/// binds those `mounts` gives) and not changed by a second call, and the host exited by itself.
fn prepared_through_the_package(
    got: &Value,
    project: &Path,
    platform_package: &str,
    groups: [&str; 3],
) {
    assert_eq!(got["hung"], false, "{got}");
    // (resolved to their real paths in pnpm's store: `.pnpm/@clawmd+linux-…@file+vendor+…/`)
    let store = project.join("node_modules/.pnpm");
    for (field, file) in [("binary", "bin/clawmd"), ("addon", "clawmd.node")] {
        let resolved = got[field].as_str().unwrap_or_default();
        assert!(
            resolved.starts_with(store.to_str().unwrap())
                && resolved.ends_with(&format!("/node_modules/{platform_package}/{file}")),
            "the {field} comes from the platform package pnpm installed: {got}"
        );
    }
    for group in groups {
        let prepared = &got["groups"][group];
        assert_eq!(prepared["changed"], true, "{group}: {got}");
        assert_eq!(prepared["again"], false, "{group}: {got}");
        assert_eq!(prepared["complete"], true, "{group}: {got}");
        assert!(
            prepared["spawnDigest"]
                .as_str()
                .is_some_and(|d| d.starts_with("sha256:")),
            "{group}: {got}"
        );
        assert_eq!(prepared["binds"], prepared["mounts"], "{group}: {got}");
        assert!(
            prepared["binds"]
                .as_array()
                .is_some_and(|binds| binds.len() >= 3),
            "{group}: {got}"
        );
    }
}
