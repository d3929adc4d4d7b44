//! Settings files against the real binary: every case of crates/clawmd-loader/tests/fixtures/settings-oracle was run
//! with the real Claude Code CLI 2.1.328 (and the Agent SDK 0.3.328, `settingSources:
//! ['project','user']`) in a bubblewrap sandbox laid out like the agent's container (the group
//! at `/workspace/agent`, the home at `/home/agent`, managed files at `/etc/claude-code`), and
//! its memory block recorded. Each case here lays out the same tree, loads it through the
//! container view as `render` does, and compares the block byte for byte; where clawmd says a
//! setting is undecided, the block it shows is its best reading and must still be the real one
//! for these cases, and the verdict's "undecided" must be there for the cases that need it.
//!
//! The CLI cases recorded again on other releases (`cases-<release>.json` beside it, by
//! `scripts/record-settings-oracle`) are replayed the same way for their release.

use std::path::{Path, PathBuf};

use clawmd::loader::{ClaudeVersion, DiagnosticCode, LoadOptions, claude_block, load};
use clawmd::runtime::mounted::{Mount, MountedFs};
use serde_json::Value;

const FIXTURES: &str = "crates/clawmd-loader/tests/fixtures/settings-oracle";

/// One recording of the cases: the release they were run on, the session's date (the memory
/// wrapper of releases before 2.1.268 holds it), and the cases.
struct Recording {
    release: ClaudeVersion,
    current_date: Option<String>,
    cases: Vec<Value>,
}

fn lay(root: &Path, files: &Value) {
    let Some(files) = files.as_object() else {
        return;
    };
    for (rel, value) in files {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        match value {
            Value::String(text) => std::fs::write(&path, text).unwrap(),
            Value::Object(o) if o.contains_key("link") => {
                std::os::unix::fs::symlink(o["link"].as_str().unwrap(), &path).unwrap()
            }
            Value::Object(o) if o.contains_key("b64") => {
                std::fs::write(&path, base64(o["b64"].as_str().unwrap())).unwrap()
            }
            Value::Object(o) if o.contains_key("fill") => {
                let count = o["count"].as_u64().unwrap() as usize;
                let text = format!(
                    "{}{}{}",
                    o["prefix"].as_str().unwrap(),
                    o["fill"].as_str().unwrap().repeat(count),
                    o["suffix"].as_str().unwrap()
                );
                std::fs::write(&path, text).unwrap()
            }
            Value::Object(o) if o.contains_key("dir") => std::fs::create_dir_all(&path).unwrap(),
            other => panic!("unknown file spec {other}"),
        }
    }
}

/// Standard base64 (with padding) to bytes.
fn base64(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for byte in text.bytes().filter(|b| *b != b'=') {
        let value = ALPHABET.iter().position(|a| *a == byte).unwrap() as u32;
        acc = (acc << 6) | value;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

struct Outcome {
    name: String,
    block: Option<String>,
    expected: Option<String>,
    undecided: bool,
    disabled: bool,
}

/// `case` laid out and loaded as `release` loads it, on the session's `current_date`.
fn replay(case: &Value, release: ClaudeVersion, current_date: Option<&str>) -> Outcome {
    let tmp = tempfile::tempdir().unwrap();
    let (group, home, managed) = (
        tmp.path().join("group"),
        tmp.path().join("home"),
        tmp.path().join("managed"),
    );
    std::fs::create_dir_all(&group).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    lay(&group, &case["group"]);
    lay(&home, &case["home"]);
    let mut mounts = vec![
        Mount::new("/workspace/agent", &group),
        Mount::new("/home/agent", &home),
    ];
    if case.get("managed").is_some() {
        std::fs::create_dir_all(&managed).unwrap();
        lay(&managed, &case["managed"]);
        mounts.push(Mount::new("/etc/claude-code", &managed));
    }
    let fs = MountedFs::new(mounts);
    let mut options = LoadOptions::new("/workspace/agent", Some(PathBuf::from("/home/agent")));
    options.claude_version = release;
    options.current_date = current_date.map(str::to_owned);
    if case["consumer"] == "sdk" {
        options.load_local = false;
    }
    let memory = load(&fs, &options).unwrap();
    Outcome {
        name: case["name"].as_str().unwrap().to_owned(),
        block: claude_block(&memory),
        expected: case["block"].as_str().map(str::to_owned),
        undecided: memory
            .diagnostics
            .iter()
            .any(|d| d.code == DiagnosticCode::SettingsUndecided),
        disabled: memory
            .diagnostics
            .iter()
            .any(|d| d.code == DiagnosticCode::MemoryDisabled),
    }
}

/// `cases.json` (2.1.328, with the Agent SDK's cases) and every `cases-<release>.json`.
fn recordings() -> Vec<Recording> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURES);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.starts_with("cases") && name.ends_with(".json"))
        .collect();
    names.sort();
    names
        .iter()
        .map(|name| {
            let fixture: Value =
                serde_json::from_slice(&std::fs::read(dir.join(name)).unwrap()).unwrap();
            let release = fixture["release"].as_str().unwrap_or("2.1.328");
            Recording {
                release: release.parse().unwrap(),
                current_date: fixture["current_date"].as_str().map(str::to_owned),
                cases: fixture["cases"].as_array().unwrap().clone(),
            }
        })
        .collect()
}

/// The cases clawmd cannot decide exactly (it shows its best reading, and says so): a file
/// holding keys whose validation it does not model, and glob syntax outside the exact subset.
const UNDECIDED: &[&str] = &[
    // Glob syntax outside the exact subset (classes, ranges, a trailing `/`).
    "ex /workspace/agent/[[:upper:]]LAUDE.md",
    "ex /workspace/agent/CLAUDE.m{c..e}",
    "ex **/[[:upper:]]LAUDE.md",
    "ex **/CLAUDE.m{c..e}",
    "ex /workspace/agent/CLAUDE.m{a..c}",
    "ex /workspace/agent/CLAUDE.m{d..d}",
    "ex **/CLAUDE.[[:alpha:]]d",
    "ex **/CLAUDE.[[:digit:]]d",
    "ex /workspace/agent/CLAUDE.m{1..3}",
    "ex **/CLAUDE.{l..l}ocal.md",
    "ex /workspace/agent/CLAUDE.md/",
    // Files holding keys whose validation clawmd does not model, beside an exclude. (A
    // `permissions` object of the measured shapes is modelled since issue 38: "perm obj" and
    // "perm bad rule", whose blocks render reproduces, are decided.)
    "unknown key",
    "hooks bad",
    "depth 70",
    // A pattern with a lone surrogate, and a settings file linked out of the view.
    "lone surrogate",
    "link abs /tmp",
];

#[test]
fn render_agrees_with_the_real_binary_on_every_settings_case() {
    let mut failures = Vec::new();
    let mut undecided = Vec::new();
    let recordings = recordings();
    assert!(recordings.len() >= 2, "{} recordings", recordings.len());
    for recording in &recordings {
        assert!(
            recording.cases.len() >= 100,
            "{} cases",
            recording.cases.len()
        );
        for case in &recording.cases {
            let outcome = replay(case, recording.release, recording.current_date.as_deref());
            let name = format!("{} on {}", outcome.name, recording.release);
            if outcome.block != outcome.expected {
                failures.push(format!(
                    "[{name}] clawmd shows\n{:?}\nthe real binary sent\n{:?}",
                    outcome.block, outcome.expected
                ));
            }
            if outcome.disabled && outcome.expected.is_some() {
                failures.push(format!(
                    "[{name}] memory disabled, but the binary loaded some"
                ));
            }
            if outcome.undecided {
                undecided.push(name);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    eprintln!("undecided: {undecided:#?}");
}

#[test]
fn undecided_exactly_where_clawmd_cannot_know() {
    let mut wrong = Vec::new();
    for recording in recordings() {
        for case in &recording.cases {
            let outcome = replay(case, recording.release, recording.current_date.as_deref());
            let expected = UNDECIDED.contains(&outcome.name.as_str());
            if outcome.undecided != expected {
                wrong.push(format!(
                    "{} on {}: undecided={}",
                    outcome.name, recording.release, outcome.undecided
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// What the agent's permission rules and `CLAUDE_CODE_AUTOMOUNT_ROOTS` do, release by release,
/// as bisected on the real npm releases with `scripts/bisect-agent-settings` (docs/loader.md,
/// "Settings files"): a `Read(./CLAUDE.md)` deny rule withholds the file from 2.1.290 (2.1.257
/// and 2.1.289 load it), the user's `CLAUDE_CODE_AUTOMOUNT_ROOTS=/workspace/agent` skips the
/// workspace from 2.1.323 (2.1.322 loads it); on the measured releases the verdict is decided.
#[test]
fn permission_rules_and_automount_roots_withhold_from_the_release_that_checks_them() {
    let deny: Value = serde_json::json!({
        "name": "deny CLAUDE.md",
        "consumer": "cli",
        "group": {
            "CLAUDE.md": "GUARD\n",
            "CLAUDE.local.md": "LOCAL\n",
            ".claude/settings.json": r#"{"permissions": {"deny": ["Read(./CLAUDE.md)"]}}"#,
        },
    });
    let automount: Value = serde_json::json!({
        "name": "automount",
        "consumer": "cli",
        "group": {"CLAUDE.md": "GUARD\n", "CLAUDE.local.md": "LOCAL\n"},
        "home": {
            ".claude/settings.json": r#"{"env": {"CLAUDE_CODE_AUTOMOUNT_ROOTS": "/workspace/agent"}}"#,
        },
    });
    let loads_claude_md = |case: &Value, release: &str| {
        let release: ClaudeVersion = release.parse().unwrap();
        let outcome = replay(case, release, None);
        let measured = clawmd::loader::version::MEASURED.contains(&release);
        assert!(
            !(measured && outcome.undecided),
            "{} on {release}: undecided on a measured release",
            outcome.name
        );
        outcome
            .block
            .is_some_and(|block| block.contains("Contents of /workspace/agent/CLAUDE.md"))
    };
    for (release, loads) in [
        ("2.1.257", true),
        ("2.1.289", true),
        ("2.1.290", false),
        ("2.1.328", false),
    ] {
        assert_eq!(loads_claude_md(&deny, release), loads, "deny on {release}");
    }
    for (release, loads) in [
        ("2.1.257", true),
        ("2.1.322", true),
        ("2.1.323", false),
        ("2.1.328", false),
    ] {
        assert_eq!(
            loads_claude_md(&automount, release),
            loads,
            "automount on {release}"
        );
    }
}
