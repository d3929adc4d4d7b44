//! Every example command the README, docs/ and the binary's own `--help` pages show, run, so
//! that the docs cannot drift from the binary (issue 42).
//!
//! An example is a line of a fenced `sh` block (continuation lines joined), or a line of an
//! `Examples:` list in `clawmd SUBCOMMAND --help`. Each is one of:
//!
//! * a clawmd command (`clawmd …`, `pnpm exec clawmd …`, `cargo run --release -- …`,
//!   `target/release/clawmd …`): run with this build's binary, in a fresh copy of the
//!   deployment the page is about (the example deployment of this repository; nanoclaw's for
//!   docs/nanoclaw.md), with the page's placeholders filled in (`GROUP` → `main`, `DIR` → the
//!   deployment); a block whose lines share shell variables runs as one script. It must exit 0.
//! * a script of this repository (`scripts/X …`), a test or bench target (`cargo test --test
//!   X`, `cargo bench --bench X`): too slow or too costly for a test to run (they download,
//!   benchmark for minutes or run the suite itself), so the test checks that the script exists
//!   and is executable and that every flag and environment variable the example passes to it
//!   is one the script reads, and that the target exists.
//! * anything else (npm, pnpm, docker, mkdir, …): not clawmd's to run; listed in
//!   [`NOT_CLAWMD`] by its first word, so a new kind of example fails this test until someone
//!   decides how to check it.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{Deployment, run_clawmd};

/// The pages whose examples are checked.
const PAGES: [&str; 3] = ["README.md", "docs", "integrations/typescript/README.md"];

/// First words of examples that are other programs' commands (installing a package, running a
/// container): shown for the operator, checked by the tests of the step they belong to
/// (tests/e2e/npm.rs installs the packages), not here. `kubectl` talks to a cluster (docs/kubernetes.md; the overlay it builds offline is checked by
/// tests/e2e/kubernetes.rs).
const NOT_CLAWMD: [&str; 8] = [
    "npm", "pnpm", "docker", "mkdir", "cd", "python3", "echo", "kubectl",
];

/// One example: where it is shown, and its text (continuation lines joined).
#[derive(Debug, Clone)]
struct Example {
    page: String,
    line: usize,
    text: String,
}

impl Example {
    fn place(&self) -> String {
        format!("{}:{}: {}", self.page, self.line, self.text)
    }
}

/// The fenced `sh` blocks of a markdown page, each as its examples.
fn sh_blocks(page: &str, markdown: &str) -> Vec<Vec<Example>> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<Example>> = None;
    let mut pending: Option<Example> = None;
    for (index, line) in markdown.lines().enumerate() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut current, fence) {
            (None, Some(lang)) if matches!(lang.trim(), "sh" | "bash" | "shell" | "console") => {
                current = Some(Vec::new());
            }
            (Some(block), Some(_)) => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), None) => {
                let text = match pending.take() {
                    Some(mut started) => {
                        started.text.push(' ');
                        started.text.push_str(line.trim());
                        started
                    }
                    None => Example {
                        page: page.to_owned(),
                        line: index + 1,
                        text: line.trim().to_owned(),
                    },
                };
                if let Some(open) = text.text.strip_suffix('\\') {
                    pending = Some(Example {
                        text: open.trim_end().to_owned(),
                        ..text
                    });
                } else if !text.text.is_empty() && !text.text.starts_with('#') {
                    block.push(text);
                }
            }
            (None, _) => {}
        }
    }
    blocks
}

/// Every markdown page under [`PAGES`].
fn pages() -> Vec<PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for page in PAGES {
        let path = repo.join(page);
        if path.is_dir() {
            for entry in walkdir::WalkDir::new(&path).sort_by_file_name() {
                let entry = entry.unwrap();
                if entry.path().extension().is_some_and(|e| e == "md") {
                    found.push(entry.into_path());
                }
            }
        } else {
            found.push(path);
        }
    }
    found
}

/// The ways the docs invoke clawmd, longest first.
const INVOCATIONS: [&str; 5] = [
    "\"$(scripts/release-bin --static)\"",
    "cargo run --release --",
    "pnpm exec clawmd",
    "target/release/clawmd",
    "clawmd",
];

/// The example with every invocation of clawmd replaced by `clawmd` (the test puts this
/// build's binary first on PATH), or `None` if it does not run clawmd.
fn as_clawmd_command(text: &str) -> Option<String> {
    let command = strip_timing(text);
    if let Some(rest) = command.strip_prefix("BIN ") {
        // performance.md: "each binary" of a comparison.
        return Some(format!("clawmd {rest}"));
    }
    for invocation in INVOCATIONS {
        let at_start = command
            .strip_prefix(invocation)
            .filter(|rest| rest.starts_with(' '));
        let inside = command.contains(&format!("$({invocation} "))
            || command.contains(&format!("| {invocation} "));
        if at_start.is_some() || inside {
            return Some(command.replace(invocation, "clawmd"));
        }
    }
    None
}

/// The command a `/usr/bin/time -f FORMAT` prefix measures.
fn strip_timing(text: &str) -> String {
    let Some(rest) = text.strip_prefix("/usr/bin/time -f ") else {
        return text.to_owned();
    };
    let after_format = match rest.strip_prefix('"') {
        Some(quoted) => quoted.split_once('"').map(|(_, r)| r),
        None => rest.split_once(' ').map(|(_, r)| r),
    };
    after_format.unwrap_or(rest).trim_start().to_owned()
}

/// The example's command with the placeholders of the docs filled in for `root`.
fn filled(command: &str, root: &Path) -> String {
    let words: Vec<String> = command
        .split(' ')
        .map(|word| match word {
            "DIR" => root.display().to_string(),
            "GROUP" | "G" | "g00042" => "main".to_owned(),
            "BIN" => "clawmd".to_owned(),
            "~/project" | "~/nanoclaw" => root.display().to_string(),
            // Where a page says to install a manual page: the test's home instead.
            _ => word.replace("/usr/local/share/man/man1/", "~/man1/"),
        })
        .collect();
    words.join(" ")
}

/// The deployment a page's examples run in.
fn deployment_for(page: &str) -> Deployment {
    if page.ends_with("nanoclaw.md") {
        let deployment = Deployment::nanoclaw();
        // As the page's steps leave it: clawmd.json written by `init`, each group composed
        // by the runner before its spawn.
        let root = deployment.root().to_owned();
        for args in [
            &["init"][..],
            &["migrate", "-q"],
            &["compose", "--all", "-q"],
        ] {
            crate::support::clawmd(&root, args, &[]).success();
        }
        deployment
    } else {
        Deployment::example()
    }
}

/// A folder holding `clawmd` (this build) and stand-ins for the programs the examples hand
/// clawmd's output to: `docker` prints its arguments, `man -l -` insists on a page on its
/// standard input.
fn shims() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_clawmd"), dir.path().join("clawmd")).unwrap();
    for (name, script) in [
        ("docker", "printf 'docker %s\\n' \"$*\""),
        ("man", "[ \"$*\" = '-l -' ] && grep -q '^\\.TH ' -"),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    }
    dir
}

/// A home for the examples that write under `~` (completion scripts, manual pages), with the
/// folders they write into.
fn home_for(script: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    for target in script.split("> ").skip(1) {
        let file = target.split_whitespace().next().unwrap_or("");
        if let Some(under_home) = file.strip_prefix("~/") {
            let parent = home.path().join(under_home);
            std::fs::create_dir_all(parent.parent().unwrap()).unwrap();
        }
    }
    home
}

/// Runs `script` with `sh -eu` in `root`, this build's clawmd first on PATH; panics naming
/// the examples unless it exits 0.
fn run_script(script: &str, root: &Path, shims: &Path, examples: &[&Example]) {
    let path = format!(
        "{}:{}",
        shims.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let home = home_for(script);
    // `watch` keeps watching: it must still be running, with no error, after two seconds.
    let watches = script.starts_with("clawmd watch ");
    let mut command = Command::new(if watches { "timeout" } else { "sh" });
    if watches {
        command.args(["2", "sh"]);
    }
    let exec_script = format!("exec {script}");
    let output = command
        .args(["-euc", if watches { &exec_script } else { script }])
        .current_dir(root)
        .env("PATH", path)
        .env("HOME", home.path())
        .env("GROUP", "main")
        .env("IMAGE", "agent-image")
        .env_remove("CLAWMD_DELIVERY")
        .env_remove("CLAWMD_PROVIDER")
        .env_remove("CLAWMD_CLAUDE_VERSION")
        .output()
        .unwrap();
    let places: Vec<String> = examples.iter().map(|e| e.place()).collect();
    let timed_out = output.status.code() == Some(124);
    assert!(
        if watches {
            timed_out && !String::from_utf8_lossy(&output.stderr).contains("error")
        } else {
            output.status.success()
        },
        "the example fails ({}):\n{}\nran: {script}\nstdout: {}\nstderr: {}",
        output.status,
        places.join("\n"),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Checks an example that names a script or a cargo target of this repository.
fn check_repository_command(example: &Example) -> bool {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let words: Vec<&str> = example.text.split_whitespace().collect();
    let (env, rest): (Vec<&str>, Vec<&str>) = {
        let at = words
            .iter()
            .position(|w| !w.contains('=') || w.starts_with('-'))
            .unwrap_or(words.len());
        (words[..at].to_vec(), words[at..].to_vec())
    };
    let Some(first) = rest.first() else {
        return false;
    };
    if let Some(script) = first.strip_prefix("scripts/") {
        let path = repo.join("scripts").join(script);
        let meta = std::fs::metadata(&path)
            .unwrap_or_else(|e| panic!("{}: no script {}: {e}", example.place(), path.display()));
        assert!(
            std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o111 != 0,
            "{}: {} is not executable",
            example.place(),
            path.display()
        );
        let source = std::fs::read_to_string(&path).unwrap();
        let flags = rest[1..]
            .iter()
            .take_while(|w| !w.starts_with('#'))
            .filter(|w| w.starts_with("--"))
            .map(|w| w.split('=').next().unwrap());
        let names = env.iter().map(|w| w.split('=').next().unwrap());
        for name in flags.chain(names) {
            assert!(
                source.contains(name),
                "{}: {} never reads {name}",
                example.place(),
                path.display()
            );
        }
        return true;
    }
    if *first == "cargo" {
        let target = |flag: &str, folder: &str| {
            rest.iter()
                .position(|w| *w == flag)
                .map(|at| repo.join(folder).join(format!("{}.rs", rest[at + 1])))
        };
        for found in [target("--test", "tests"), target("--bench", "benches")]
            .into_iter()
            .flatten()
        {
            assert!(
                found.is_file(),
                "{}: no {}",
                example.place(),
                found.display()
            );
        }
        return true;
    }
    false
}

/// The `Examples:` lines of every subcommand's `--help`, as commands.
fn help_examples() -> Vec<Example> {
    let top = run_clawmd(["--help"], &[]).success().stdout();
    let subcommands: Vec<String> = top
        .lines()
        .skip_while(|line| !line.starts_with("Commands:"))
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| line.split_whitespace().next().map(str::to_owned))
        .filter(|name| name != "help")
        .collect();
    assert!(subcommands.len() >= 8, "{top}");
    let mut examples = Vec::new();
    for sub in subcommands {
        let help = run_clawmd([sub.as_str(), "--help"], &[]).success().stdout();
        for (index, line) in help
            .lines()
            .skip_while(|line| !line.starts_with("Examples:"))
            .enumerate()
        {
            let Some(command) = line.trim().strip_prefix("clawmd ") else {
                continue;
            };
            // `clawmd compose --all      compose every group`: the command ends at the gap.
            let command = command.split("  ").next().unwrap().trim();
            examples.push(Example {
                page: format!("clawmd {sub} --help"),
                line: index,
                text: format!("clawmd {command}"),
            });
        }
    }
    examples
}

/// Every example of the README and docs/ is run or checked.
#[test]
fn every_example_in_the_docs_runs() {
    let shims = shims();
    let mut ran = 0;
    let mut checked = 0;
    for page in pages() {
        let name = page
            .strip_prefix(env!("CARGO_MANIFEST_DIR"))
            .unwrap()
            .display()
            .to_string();
        let markdown = std::fs::read_to_string(&page).unwrap();
        for block in sh_blocks(name.trim_start_matches('/'), &markdown) {
            let runs: Vec<&Example> = block
                .iter()
                .filter(|e| as_clawmd_command(&e.text).is_some())
                .collect();
            for example in &block {
                if as_clawmd_command(&example.text).is_some() {
                    continue;
                }
                if check_repository_command(example) {
                    checked += 1;
                    continue;
                }
                let first = example.text.split_whitespace().next().unwrap_or("");
                let shares_variables = example.text.contains("$report");
                assert!(
                    NOT_CLAWMD.contains(&first) || shares_variables,
                    "{}: an example this test does not know how to check: run it here or \
                     list its program in NOT_CLAWMD with the reason",
                    example.place()
                );
            }
            if runs.is_empty() {
                continue;
            }
            let deployment = deployment_for(&runs[0].page);
            let root = deployment.root().to_owned();
            let uses_variables = block.iter().any(|e| e.text.contains("=$("));
            if uses_variables {
                // One script: its lines share variables (the README's runner step).
                let script: Vec<String> = block
                    .iter()
                    .map(|e| filled(&as_clawmd_command(&e.text).unwrap_or(e.text.clone()), &root))
                    .collect();
                run_script(&script.join("\n"), &root, shims.path(), &runs);
                ran += runs.len();
            } else {
                for example in runs {
                    let command = filled(&as_clawmd_command(&example.text).unwrap(), &root);
                    run_script(&command, &root, shims.path(), &[example]);
                    ran += 1;
                }
            }
        }
    }
    // Counts as of this writing; more examples only raise them.
    assert!(ran >= 12, "ran {ran} examples");
    assert!(
        checked >= 20,
        "checked {checked} script and target examples"
    );
}

/// Every example at the end of a subcommand's `--help` runs on the example deployment, as the
/// README's first command leaves it (composed).
#[test]
fn every_example_in_the_help_runs() {
    let shims = shims();
    let examples = help_examples();
    assert!(examples.len() >= 20, "{examples:#?}");
    for example in &examples {
        let deployment = Deployment::example();
        crate::support::clawmd(deployment.root(), &["compose", "--all", "-q"], &[]).success();
        let root = deployment.root().to_owned();
        let command = filled(&example.text, &root);
        run_script(&command, &root, shims.path(), &[example]);
    }
}

#[test]
fn continuation_lines_join_and_comments_drop() {
    let blocks = sh_blocks(
        "p.md",
        "text\n```sh\n# a comment\nclawmd a \\\n  --b\n\nscripts/x # y\n```\n```\nclawmd no\n```\n",
    );
    assert_eq!(blocks.len(), 1);
    let texts: Vec<&str> = blocks[0].iter().map(|e| e.text.as_str()).collect();
    assert_eq!(texts, ["clawmd a --b", "scripts/x # y"]);
    assert_eq!(blocks[0][0].line, 4);
}

#[test]
fn invocations_become_the_binary() {
    for (text, want) in [
        (
            "cargo run --release -- compose --all",
            Some("clawmd compose --all"),
        ),
        ("pnpm exec clawmd init", Some("clawmd init")),
        (
            "/usr/bin/time -f \"%e s\" target/release/clawmd --root DIR compose --all -q",
            Some("clawmd --root DIR compose --all -q"),
        ),
        (
            "/usr/bin/time -f %M BIN --root DIR",
            Some("clawmd --root DIR"),
        ),
        (
            "report=$(clawmd compose \"$GROUP\" --json) || exit 1",
            Some("report=$(clawmd compose \"$GROUP\" --json) || exit 1"),
        ),
        ("scripts/bench", None),
        ("npm install clawmd", None),
    ] {
        assert_eq!(as_clawmd_command(text).as_deref(), want, "{text}");
    }
}
