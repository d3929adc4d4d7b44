//! Delivery, end to end, with the real binaries: does the agent actually see what clawmd composed?
//!
//! Each test copies the example deployment (`container/` + `groups/{main,research,ops}`) to a
//! temp dir, composes it with the real `clawmd` binary, and starts the real Claude Code CLI
//! (`claude -p hello`) or the real Claude Agent SDK (`query()`, tests/e2e/sdk-probe.mjs) inside a
//! bubblewrap sandbox whose mounts are exactly the container mount table of DESIGN.md §1. The
//! agent talks to a stand-in Anthropic API that this test runs on 127.0.0.1; the memory block is
//! read from the first request it records and checked against the deployment's inputs.
//!
//! The tools come from `scripts/e2e-setup` (bubblewrap, and the pinned CLI and SDK in
//! `~/.cache/clawmd-e2e` or `$CLAWMD_E2E_CACHE`). A missing tool fails the test with a message
//! naming that script: never a silent pass. Nothing is written outside the test's temp dirs: the
//! sandbox is built from explicit binds on a tmpfs root, so `/app` and `/workspace` exist only
//! inside it.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::api::{ApiServer, texts};
use crate::support::sandbox::{CLAUDE_CODE_VERSION, Consumer, Sandbox, WORKSPACE, tools};
use crate::support::{Deployment, output_within, run_clawmd};

/// The memory block is the text part that contains this.
const MARK: &str = "Codebase and user instructions";
const GROUPS: [&str; 3] = ["main", "research", "ops"];
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// Mounted over `/etc/hostname` in the sandbox, so an `@/etc/hostname` that was expanded shows.
const HOSTNAME_MARKER: &str = "e2e-hostname-marker-5f1c0b";
/// Added to every test group's `container.json`, so an expanded `@...container.json` shows.
const CONFIG_MARKER: &str = "e2e-container-json-marker-9a7d3e";
/// The MCP server added to every test group: its instructions are full of would-be imports.
const PROBE_SERVER: &str = "e2e-probe";
/// Import-looking lines, each pointing at a file that exists inside the sandbox (resolved from
/// the fragment's folder `.claude-fragments/` or absolutely).
const PROBE_IMPORTS: [&str; 6] = [
    "@/etc/hostname",
    "@./container.json",
    "@../container.json",
    "@/workspace/agent/container.json",
    "@/app/CLAUDE.md",
    "@../CLAUDE.local.md",
];

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

/// `--delivery copy`, real CLI: everything reaches the agent without any approval, and no
/// `@path` inside inline MCP instructions is expanded.
#[test]
fn cli_copy_delivery_reaches_the_agent() {
    let dep = deployment("copy");
    let mut report = Report::new("CLI, --delivery copy, no approval");
    for group in GROUPS {
        check_group(
            &dep,
            group,
            Case::new(Consumer::Cli, Delivery::Copy, false),
            &mut report,
        );
    }
    report.finish();
}

/// The default, with no flag and no settings file (what the README's first command does): the
/// real CLI and the real SDK (nanoclaw's `settingSources`) receive the shared base, the enabled
/// skills (and none of the disabled ones), the MCP instructions and the local memory, with no
/// approval; the SDK's block is the CLI's, byte for byte.
#[test]
fn default_delivery_reaches_the_agent() {
    let dep = deployment(DEFAULT);
    let mut report = Report::new("default delivery (managed), no approval");
    for group in GROUPS {
        let cli = check_group(
            &dep,
            group,
            Case::new(Consumer::Cli, Delivery::Managed, false),
            &mut report,
        );
        let sdk = check_group(
            &dep,
            group,
            Case::new(Consumer::sdk(), Delivery::Managed, false),
            &mut report,
        );
        if let (Some(cli), Some(sdk)) = (cli, sdk) {
            report.check(
                sdk.text == cli.text,
                &format!("{group}, SDK vs CLI, default"),
                &format!(
                    "the SDK's memory block differs from the CLI's\n{}",
                    first_difference(("CLI", &cli.text), ("SDK", &sdk.text))
                ),
                &sdk,
            );
        }
    }
    report.finish();
}

/// `--delivery inline` named explicitly: the same, and with `'local'` added to the SDK's
/// sources the local memory still arrives exactly once (the exact section list is checked).
#[test]
fn inline_delivery_reaches_the_agent() {
    let dep = deployment("inline");
    let mut report = Report::new("--delivery inline, no approval");
    for group in GROUPS {
        let case = Case::new(Consumer::Cli, Delivery::Inline, false);
        check_group(&dep, group, case, &mut report);
    }
    let case = Case::new(
        Consumer::Sdk(&["project", "user", "local"]),
        Delivery::Inline,
        false,
    );
    check_group(&dep, "main", case, &mut report);
    report.finish();
}

/// `--delivery link`, real CLI: without approval the shared base and skill fragments (symlinks
/// into /app) are dropped, MCP fragments and CLAUDE.local.md arrive; with approval all arrive.
#[test]
fn cli_link_delivery_needs_approval() {
    let dep = deployment("link");
    let mut report = Report::new("CLI, --delivery link");
    for group in GROUPS {
        for approved in [false, true] {
            let case = Case::new(Consumer::Cli, Delivery::Link, approved);
            check_group(&dep, group, case, &mut report);
        }
    }
    report.finish();
}

/// `--delivery copy`, real Agent SDK with nanoclaw's `settingSources: ['project','user']`:
/// everything arrives, CLAUDE.local.md included (it is imported by the composed CLAUDE.md), and
/// the block is byte-identical to the CLI's. With `'local'` added it still arrives once.
#[test]
fn sdk_copy_delivery_reaches_the_agent() {
    let dep = deployment("copy");
    let mut report = Report::new("SDK settingSources [project,user], --delivery copy");
    for group in GROUPS {
        let case = Case::new(Consumer::sdk(), Delivery::Copy, false);
        let Some(sdk) = check_group(&dep, group, case, &mut report) else {
            continue;
        };
        // Byte for byte what the CLI sends: one `render --format claude` serves both.
        let Some(cli) = report.observe(&dep, group, Consumer::Cli, false) else {
            continue;
        };
        report.check(
            sdk.text == cli.text,
            &format!("{group}, SDK vs CLI, Copy"),
            &format!(
                "the SDK's memory block differs from the CLI's\n{}",
                first_difference(("CLI", &cli.text), ("SDK", &sdk.text))
            ),
            &sdk,
        );
    }
    // With 'local' added the SDK also discovers CLAUDE.local.md; the import still makes it
    // appear exactly once, at the import's position (the exact section list is checked).
    let case = Case::new(
        Consumer::Sdk(&["project", "user", "local"]),
        Delivery::Copy,
        false,
    );
    check_group(&dep, "main", case, &mut report);
    report.finish();
}

/// `--delivery link`, real Agent SDK: the same rule as the CLI.
#[test]
fn sdk_link_delivery_needs_approval() {
    let dep = deployment("link");
    let mut report = Report::new("SDK settingSources [project,user], --delivery link");
    for group in GROUPS {
        for approved in [false, true] {
            let case = Case::new(Consumer::sdk(), Delivery::Link, approved);
            check_group(&dep, group, case, &mut report);
        }
    }
    report.finish();
}

/// The positive control for the `@path` assertions above: the very same lines, written unfenced
/// in a memory file, ARE expanded by the real CLI. Without this, "not expanded" could pass only
/// because the probes point nowhere.
#[test]
fn probe_imports_are_live_outside_a_fence() {
    let dep = Deployment::example();
    let group = "control";
    std::fs::create_dir_all(dep.path("groups/control")).unwrap();
    dep.write(
        "groups/control/container.json",
        format!("{{\"skills\": [], \"e2eMarker\": \"{CONFIG_MARKER}\"}}\n").as_bytes(),
    );
    compose(&dep, "copy");
    // CLAUDE.local.md lives in the group folder, so `@./container.json` resolves to the config.
    let local = format!(
        "Control: the same lines as the probe MCP server, unfenced.\n@/etc/hostname\n@./container.json\n@{WORKSPACE}/container.json\n"
    );
    dep.write("groups/control/CLAUDE.local.md", local.as_bytes());

    let mut report = Report::new("control: unfenced @path lines in CLAUDE.local.md");
    let config = format!("{WORKSPACE}/container.json");
    for approved in [false, true] {
        let Some(memory) = report.observe(&dep, group, Consumer::Cli, approved) else {
            continue;
        };
        let case = format!("{group}, approved={approved}");
        // Inside the cwd: expanded always.
        report.check(
            memory.has_section(&config) && memory.text.contains(CONFIG_MARKER),
            &case,
            "`@./container.json` in CLAUDE.local.md was not expanded (expected a section for the group's container.json)",
            &memory,
        );
        // Outside the cwd: expanded only once external imports are approved.
        report.check(
            memory.has_section("/etc/hostname") == approved
                && memory.text.contains(HOSTNAME_MARKER) == approved,
            &case,
            &format!("`@/etc/hostname` expanded: expected {approved}"),
            &memory,
        );
    }
    report.finish();
}

/// clawmd's last resort for a mention it cannot wrap in a code span is a zero-width space after
/// the `@` (src/plan/delivery/expand.rs): the real CLI does not follow `@\u{200B}./container.json`,
/// while the same line without it is followed (the control above).
#[test]
fn a_zero_width_space_after_the_at_is_not_an_import() {
    let dep = Deployment::example();
    std::fs::create_dir_all(dep.path("groups/zwsp")).unwrap();
    dep.write(
        "groups/zwsp/container.json",
        format!("{{\"skills\": [], \"e2eMarker\": \"{CONFIG_MARKER}\"}}\n").as_bytes(),
    );
    compose(&dep, DEFAULT);
    dep.write(
        "groups/zwsp/CLAUDE.local.md",
        "ZWSP-LOCAL\n@\u{200B}./container.json\n".as_bytes(),
    );
    let mut report = Report::new("a zero-width space after @");
    if let Some(memory) = report.observe(&dep, "zwsp", Consumer::Cli, false) {
        report.check(
            memory.text.contains("ZWSP-LOCAL")
                && !memory.text.contains(CONFIG_MARKER)
                && !memory.has_section(&format!("{WORKSPACE}/container.json")),
            "zwsp, CLI",
            "`@\u{200B}./container.json` was followed, or the local memory is missing",
            &memory,
        );
    }
    report.finish();
}

/// nanoclaw issue #2185, measured: the SDK with `settingSources: ['project','user']` does not
/// discover CLAUDE.local.md (the CLI does, and the SDK does with 'local' added). This is why the
/// composed CLAUDE.md imports `@./CLAUDE.local.md` as its last line.
#[test]
fn sdk_discovers_claude_local_md_only_with_the_local_source() {
    let dep = Deployment::example();
    let group = "plain";
    // A hand-written group that clawmd never composed: CLAUDE.md does not import the local file.
    std::fs::create_dir_all(dep.path("groups/plain/.claude-fragments")).unwrap();
    dep.write("groups/plain/container.json", b"{}\n");
    // Where the runner binds the group's CLAUDE.md from (`clawmd mounts`), over its mount
    // point in the group folder; inline delivery's binds (no managed folder: nothing else
    // is composed).
    dep.write("clawmd.json", br#"{"delivery": "inline"}"#);
    dep.write(
        "groups/plain/CLAUDE.md",
        &clawmd::plan::mount_point_placeholder("CLAUDE.md"),
    );
    dep.write(
        &Deployment::composed("plain", "CLAUDE.md"),
        b"PLAIN-PROJECT-MEMORY\n",
    );
    dep.write("groups/plain/CLAUDE.local.md", b"PLAIN-LOCAL-MEMORY\n");

    let mut report = Report::new("CLAUDE.local.md discovery without an import");
    let local_path = format!("{WORKSPACE}/CLAUDE.local.md");
    for (consumer, loads_local) in [
        (Consumer::Cli, true),
        (Consumer::sdk(), false),
        (Consumer::Sdk(&["project", "user", "local"]), true),
    ] {
        let Some(memory) = report.observe(&dep, group, consumer, false) else {
            continue;
        };
        let case = format!("{group}, {consumer}");
        report.check(
            memory.text.contains("PLAIN-PROJECT-MEMORY"),
            &case,
            "CLAUDE.md was not loaded",
            &memory,
        );
        report.check(
            memory.has_section(&local_path) == loads_local
                && memory.text.contains("PLAIN-LOCAL-MEMORY") == loads_local,
            &case,
            &format!("CLAUDE.local.md loaded by discovery: expected {loads_local}"),
            &memory,
        );
        // Found by discovery (not imported), it carries the private-file label.
        report.check(
            !loads_local
                || memory.sections.iter().any(|s| {
                    s.path == local_path
                        && s.label == "user's private project instructions, not checked in"
                }),
            &case,
            "CLAUDE.local.md found by discovery has an unexpected label",
            &memory,
        );
    }
    report.finish();
}

/// An import inside the shared base means what its owner wrote: `@./more.md` in
/// `container/CLAUDE.md` is `container/more.md`, never a `more.md` the agent put in its own
/// (writable) group folder, in every delivery mode. Copy and inline deliver the owner's file
/// (clawmd expands the import where the owner put it); link leaves the import to Claude Code,
/// which resolves it at `/app/more.md`, never in the group, and which the runner's mount table
/// does not mount: compose and check both say the shared base does not reach the agent whole.
#[test]
fn shared_base_imports_resolve_to_the_owners_files() {
    const OWNER: &str = "OWNER-MORE-5d1a";
    const PLANTED: &str = "GROUP-MORE-77c2";
    let mut report = Report::new("imports inside the shared base, per delivery mode");
    for delivery in [DEFAULT, "inline", "copy", "link"] {
        let dep = Deployment::example();
        let base = dep.read("container/CLAUDE.md");
        dep.write(
            "container/CLAUDE.md",
            format!("{base}\nMore rules: @./more.md\n").as_bytes(),
        );
        dep.write(
            "container/more.md",
            format!("{OWNER}: the owner's rules.\n").as_bytes(),
        );
        dep.write(
            "groups/main/more.md",
            format!("{PLANTED}: planted by the agent.\n").as_bytes(),
        );
        let composed = compose(&dep, delivery);
        let main = &composed["groups"][0];
        let link = delivery == "link";
        let mut check = vec!["check", "main", "--root"];
        let root = dep.root().display().to_string();
        check.push(&root);
        if delivery != DEFAULT {
            check.extend(["--delivery", delivery]);
        }
        let checked = run_clawmd(&check, &[]);
        for approved in if link {
            &[false, true][..]
        } else {
            &[false][..]
        } {
            let Some(memory) = report.observe(&dep, "main", Consumer::Cli, *approved) else {
                continue;
            };
            let case = format!("main, CLI, --delivery {delivery}, approved={approved}");
            report.check(
                !memory.text.contains(PLANTED),
                &case,
                "the group's own more.md was loaded in place of the owner's",
                &memory,
            );
            report.check(
                memory.text.contains(OWNER) != link,
                &case,
                &format!(
                    "the owner's container/more.md reached the agent: expected {}",
                    !link
                ),
                &memory,
            );
        }
        let case = format!("main, --delivery {delivery}: compose and check");
        let none = Memory::parse("");
        report.check(
            main["delivered"]["complete"] == json!(!link)
                && main["delivered"]["missing"]
                    .as_array()
                    .unwrap()
                    .contains(&json!("shared-base"))
                    == link,
            &case,
            &format!("compose's verdict is wrong: {main}"),
            &none,
        );
        report.check(
            checked.code() == if link { 1 } else { 0 },
            &case,
            &format!("check disagrees with compose:\n{}", checked.stdout()),
            &none,
        );
    }
    report.finish();
}

/// What an operator writes, against the real CLI (issue 25): a shared base and a skill saved
/// with Windows line endings and bytes that are not UTF-8, and a `CLAUDE.local.md` over 4 MiB.
/// compose's verdict must be what the agent gets: inline, the release strips the document's
/// comments and so delivers CRLF as LF (the verdict used to look for CRLF and say "not
/// delivered"); a copy keeps its CRs; invalid bytes arrive as U+FFFD either way (the inline
/// document holds U+FFFD, the copy the bytes); the oversized local memory is skipped whole, its
/// import line left as text (compose used to say it was delivered).
#[test]
fn windows_sources_and_an_oversized_local_memory_reach_the_agent_as_compose_says() {
    let dep = Deployment::example();
    dep.write(
        "container/CLAUDE.md",
        b"# Base\r\nWINDOWS-BASE line one\r\nline two \xff\xfe bad\r\n",
    );
    dep.write(
        "container/skills/github/instructions.md",
        b"WINDOWS-SKILL first\r\nsecond \xc0\xaf\r\n",
    );
    let mut huge = b"OVERSIZED-LOCAL notes\n".repeat(230_000);
    huge.truncate(5_049_990);
    dep.write("groups/research/CLAUDE.local.md", &huge);
    let mut report = Report::new("Windows sources and an oversized local memory, real CLI");
    for delivery in ["inline", "copy"] {
        let composed = compose(&dep, delivery);
        let verdict = |group: &str| {
            composed["groups"]
                .as_array()
                .unwrap()
                .iter()
                .find(|g| g["group"] == group)
                .unwrap()["delivered"]
                .clone()
        };
        assert_eq!(verdict("main")["complete"], true, "{delivery}: {composed}");
        assert_eq!(
            verdict("research")["missing"],
            json!(["local-memory"]),
            "{delivery}: {composed}"
        );
        let eol = if delivery == "inline" { "\n" } else { "\r\n" };
        let base = format!("WINDOWS-BASE line one{eol}line two \u{fffd}\u{fffd} bad");
        let skill = format!("WINDOWS-SKILL first{eol}second \u{fffd}\u{fffd}");
        if let Some(memory) = report.observe(&dep, "main", Consumer::Cli, false) {
            let case = format!("main, --delivery {delivery}");
            report.check(
                memory.text.contains(&base),
                &case,
                &format!("the shared base is not there as {base:?}"),
                &memory,
            );
            report.check(
                memory.text.contains(&skill),
                &case,
                &format!("the skill is not there as {skill:?}"),
                &memory,
            );
        }
        if let Some(memory) = report.observe(&dep, "research", Consumer::Cli, false) {
            let case = format!("research, --delivery {delivery}");
            report.check(
                !memory.text.contains("OVERSIZED-LOCAL")
                    && !memory.has_section(&format!("{WORKSPACE}/CLAUDE.local.md")),
                &case,
                "the 5 MB CLAUDE.local.md reached the agent",
                &memory,
            );
            report.check(
                memory.text.contains("@./CLAUDE.local.md"),
                &case,
                "the import line of the skipped local memory is not left as text",
                &memory,
            );
        }
    }
    report.finish();
}

/// Issue 19, a live sample of the generated corpus (tests/fixtures/equivalence, recorded with
/// this very release loading each source alone): two groups of five generated sources (the
/// shared base and four skills, with frontmatter, BOM, CRLF and lone CR, fences and comments
/// left open, import chains past the depth limit) composed in managed, inline and copy
/// delivery, read by the real CLI in the sandbox built from `clawmd mounts`: each source's
/// text as the binary showed it alone is in what the agent gets (as a document delivers it:
/// LF line endings, import mentions as code), and compose's verdict says so.
#[test]
fn generated_sources_reach_the_agent_as_loaded_alone() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
        "tests/fixtures/equivalence/{CLAUDE_CODE_VERSION}.json"
    ));
    let corpus: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let sources: BTreeMap<&str, &Value> = corpus["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["id"].as_str().unwrap(), s))
        .collect();
    let alone_bodies = |id: &str| -> Vec<String> {
        let block = sources[id]["alone"]
            .as_str()
            .unwrap()
            .trim_end_matches('\n');
        let block = block.strip_suffix("</system-reminder>").unwrap_or(block);
        block
            .split("\nContents of ")
            .skip(1)
            .map(|part| {
                let (_, text) = part.split_once("):\n\n").unwrap_or((part, ""));
                text.trim_end_matches('\n').to_owned()
            })
            .collect()
    };
    let mut report = Report::new("generated sources, real CLI");
    for first in [0usize, 35] {
        let ids: Vec<String> = (first..first + 5).map(|n| format!("s{n:03}")).collect();
        let dep = Deployment::example();
        for (index, id) in ids.iter().enumerate() {
            let folder = match index {
                0 => "container".to_owned(),
                _ => format!("container/skills/k{index}"),
            };
            if index > 0 {
                dep.write(&format!("{folder}/SKILL.md"), b"generated skill\n");
            }
            for (name, text) in sources[id.as_str()]["files"].as_object().unwrap() {
                let name = match (name.as_str(), index) {
                    ("SOURCE.md", 0) => "CLAUDE.md",
                    ("SOURCE.md", _) => "instructions.md",
                    (other, _) => other,
                };
                dep.write(
                    &format!("{folder}/{name}"),
                    text.as_str().unwrap().as_bytes(),
                );
            }
        }
        for delivery in ["managed", "inline", "copy"] {
            std::fs::write(
                dep.path("clawmd.json"),
                json!({ "delivery": delivery, "claudeCodeVersion": CLAUDE_CODE_VERSION })
                    .to_string(),
            )
            .unwrap();
            let composed = run_clawmd(
                [
                    "compose",
                    "main",
                    "--json",
                    "--root",
                    dep.root().to_str().unwrap(),
                ],
                &[],
            )
            .success()
            .json();
            let verdict = composed["groups"][0]["delivered"]["complete"].clone();
            let case = format!("{}, --delivery {delivery}", ids.join(" "));
            if let Some(memory) = report.observe(&dep, "main", Consumer::Cli, false) {
                let mut all_found = true;
                for id in &ids {
                    for body in alone_bodies(id) {
                        let lf = body.replace("\r\n", "\n").replace('\r', "\n");
                        // Compared without clawmd's zero-width spaces (a mention it could not
                        // wrap, a comment left open).
                        let seen = memory.text.replace('\u{200B}', "");
                        let found = [body.as_str(), lf.as_str()].iter().any(|text| {
                            seen.contains(
                                &clawmd::delivery::expand::neutralise(text).replace('\u{200B}', ""),
                            )
                        });
                        all_found &= found;
                        report.check(
                            found,
                            &case,
                            &format!(
                                "{id}: the text the binary shows of it alone is not there: {body:?}"
                            ),
                            &memory,
                        );
                    }
                }
                report.check(
                    verdict == json!(true) && all_found,
                    &case,
                    &format!("compose's verdict says complete = {verdict}, the real agent got every source = {all_found}"),
                    &memory,
                );
            }
        }
    }
    report.finish();
}

/// A Codex group (`"provider": "codex"` in container.json, which clawmd reads and never
/// changes) gets one flat AGENTS.md within Codex's 32 KiB: the shared base, its enabled skills,
/// its MCP instructions and its local memory, no import line, no CLAUDE.md. A skill too large
/// for the budget is dropped whole and named in the JSON report and the human output.
#[test]
fn codex_group_gets_a_flat_agents_md_within_its_budget() {
    let dep = Deployment::example();
    let manual = "Read the whole manual before every task.\n".repeat(1000);
    dep.write("container/skills/big-manual/SKILL.md", b"a large skill\n");
    dep.write(
        "container/skills/big-manual/instructions.md",
        manual.as_bytes(),
    );
    std::fs::create_dir_all(dep.path("groups/coder")).unwrap();
    let config = r#"{"provider": "codex", "skills": ["github", "big-manual", "welcome"],
  "mcpServers": {"ci": {"command": "ci-mcp", "instructions": "CODER-MCP: read-only CI logs.\n@./container.json stays text."}}}"#;
    dep.write("groups/coder/container.json", config.as_bytes());
    dep.write(
        "groups/coder/CLAUDE.local.md",
        b"CODER-LOCAL: we use tabs.\n",
    );

    let run = run_clawmd(
        [
            "compose",
            "coder",
            "--json",
            "--root",
            &dep.root().display().to_string(),
        ],
        &[],
    )
    .success();
    let group = &run.json()["groups"][0];
    assert_eq!(group["target"]["provider"], "codex", "{group}");
    assert_eq!(group["target"]["file"], "AGENTS.md", "{group}");
    assert_eq!(group["target"]["budget"], 32 * 1024, "{group}");
    assert_eq!(
        group["dropped"],
        json!([{"section": "skill:big-manual", "bytes": manual.len()}]),
        "{group}"
    );
    assert!(
        group["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["code"] == "section-dropped"
                && w["message"].as_str().unwrap().contains("skill:big-manual")),
        "{group}"
    );
    assert_eq!(group["delivered"]["complete"], false, "{group}");
    assert_eq!(
        group["delivered"]["missing"],
        json!(["skill:big-manual"]),
        "{group}"
    );
    assert!(
        group["memory_digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:"),
        "{group}"
    );

    // The composed AGENTS.md is in the group's bind folder; the group folder's is its mount
    // point.
    let agents = dep.read(&Deployment::composed("coder", "AGENTS.md"));
    assert!(
        dep.read("groups/coder/AGENTS.md")
            .starts_with("<!-- clawmd: the mount point of AGENTS.md")
    );
    assert!(
        agents.len() <= 32 * 1024,
        "AGENTS.md is {} bytes",
        agents.len()
    );
    for text in [
        dep.read("container/CLAUDE.md").trim_end(),
        dep.read("container/skills/github/instructions.md")
            .trim_end(),
        dep.read("container/skills/welcome/instructions.md")
            .trim_end(),
        "CODER-MCP: read-only CI logs.",
        "CODER-LOCAL: we use tabs.",
    ] {
        assert!(
            agents.contains(text),
            "{text:?} missing from AGENTS.md:\n{agents}"
        );
    }
    assert!(
        !agents.contains("Read the whole manual"),
        "the dropped skill"
    );
    assert!(
        !agents.contains("## Skill: agent-browser"),
        "a skill the group does not enable"
    );
    // No import line: the MCP text's `@./container.json` stays inside its fence.
    let scan = clawmd::loader::content::scan_markdown(&agents).unwrap();
    assert!(scan.imports.is_empty(), "{:?} in\n{agents}", scan.imports);
    assert!(
        agents.contains("\n@./container.json stays text.\n```\n"),
        "{agents}"
    );
    assert!(!dep.exists("groups/coder/CLAUDE.md"));
    assert_eq!(
        dep.read("groups/coder/container.json"),
        config,
        "never changed"
    );

    // The human output names the dropped section too; a second run writes nothing.
    let before = dep.snapshot();
    let human = run_clawmd(
        [
            "compose",
            "coder",
            "--root",
            &dep.root().display().to_string(),
        ],
        &[],
    )
    .success()
    .stdout();
    assert!(
        human.contains("dropped over budget: skill:big-manual"),
        "{human}"
    );
    assert_eq!(dep.snapshot(), before);
}

/// `clawmd render GROUP --format claude` predicts the real memory block byte for byte, in every
/// delivery mode and approval state (compared as claude-view prints it: the block plus a final
/// newline).
#[test]
fn render_matches_real_binary() {
    let mut report = Report::new("clawmd render --format claude vs the real CLI");
    for (delivery, approvals) in [
        ("inline", &[false][..]),
        ("copy", &[false][..]),
        ("link", &[false, true][..]),
    ] {
        let dep = deployment(delivery);
        for group in GROUPS {
            for &approved in approvals {
                let Some(memory) = report.observe(&dep, group, Consumer::Cli, approved) else {
                    continue;
                };
                let root = dep.root().as_os_str();
                let mut args: Vec<&OsStr> = vec![
                    "render".as_ref(),
                    group.as_ref(),
                    "--root".as_ref(),
                    root,
                    "--format".as_ref(),
                    "claude".as_ref(),
                    // The release the real CLI here is (render's default is the newest).
                    "--claude-version".as_ref(),
                    CLAUDE_CODE_VERSION.as_ref(),
                ];
                if approved {
                    args.push("--approve-external".as_ref());
                }
                let run = run_clawmd(&args, &[]);
                let case = format!("{group}, --delivery {delivery}, approved={approved}");
                if run.code() != 0 {
                    report.fail(
                        &case,
                        &format!(
                            "clawmd render exited {}\n--- stderr\n{}",
                            run.code(),
                            run.stderr()
                        ),
                        &memory,
                    );
                    continue;
                }
                let real = memory.as_printed();
                let predicted = run.stdout();
                report.check(
                    predicted == real,
                    &case,
                    &format!(
                        "render differs from the real block\n{}",
                        first_difference(("real", &real), ("render", &predicted))
                    ),
                    &memory,
                );
            }
        }
    }
    report.finish();
}

// ---------------------------------------------------------------------------------------------
// One group, one consumer: what must and must not be in the memory block
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delivery {
    /// The guardrails as the managed policy at /etc/claude-code (the default).
    Managed,
    /// One generated CLAUDE.md.
    Inline,
    Copy,
    Link,
}

/// One way of delivering and reading the memory.
#[derive(Debug, Clone, Copy)]
struct Case {
    consumer: Consumer,
    delivery: Delivery,
    /// External imports approved in the sandbox HOME's `~/.claude.json`.
    approved: bool,
}

impl Case {
    fn new(consumer: Consumer, delivery: Delivery, approved: bool) -> Self {
        Case {
            consumer,
            delivery,
            approved,
        }
    }
}

/// Runs the case for one group, checks the memory block against the group's inputs and
/// returns it.
fn check_group(dep: &Deployment, group: &str, case: Case, report: &mut Report) -> Option<Memory> {
    let Case {
        consumer,
        delivery,
        approved,
    } = case;
    let inputs = Inputs::read(dep, group);
    let memory = report.observe(dep, group, consumer, approved)?;
    let case = format!("{group}, {consumer}, {delivery:?}, approved={approved}");
    // Inline text and copies are inside the cwd; links resolve to /app, outside it.
    let external_arrives = delivery != Delivery::Link || approved;
    // Inline and managed: everything is in one document, so no section of its own.
    let own_file = matches!(delivery, Delivery::Copy | Delivery::Link);

    // Managed: the guardrails are the managed policy, loaded first; the workspace's
    // CLAUDE.md only imports the local memory.
    let mut expected = match delivery {
        Delivery::Managed => vec![
            "/etc/claude-code/CLAUDE.md".to_owned(),
            format!("{WORKSPACE}/CLAUDE.md"),
        ],
        _ => vec![format!("{WORKSPACE}/CLAUDE.md")],
    };
    let mut texts: Vec<(String, &str, bool)> = Vec::new();
    texts.push((
        "the shared base (container/CLAUDE.md)".into(),
        &inputs.base,
        external_arrives,
    ));
    if external_arrives && own_file {
        expected.push(format!("{WORKSPACE}/.claude-fragments/.claude-shared.md"));
    }
    for (skill, text) in &inputs.enabled {
        texts.push((
            format!("enabled skill {skill:?}'s instructions.md"),
            text,
            external_arrives,
        ));
        if external_arrives && own_file {
            expected.push(format!("{WORKSPACE}/.claude-fragments/{skill}.md"));
        }
    }
    for (skill, text) in &inputs.disabled {
        texts.push((
            format!("disabled skill {skill:?}'s instructions.md"),
            text,
            false,
        ));
    }
    for (server, text) in &inputs.mcp {
        texts.push((format!("MCP server {server:?}'s instructions"), text, true));
        if own_file {
            expected.push(format!("{WORKSPACE}/.claude-fragments/mcp-{server}.md"));
        }
    }
    texts.push(("CLAUDE.local.md".into(), &inputs.local, true));
    expected.push(format!("{WORKSPACE}/CLAUDE.local.md"));

    for (what, text, present) in &texts {
        let text = text.trim_end();
        report.check(
            memory.text.contains(text) == *present,
            &case,
            &format!(
                "{what} {} the memory block:\n{text}",
                if *present {
                    "is missing from"
                } else {
                    "must not be in"
                }
            ),
            &memory,
        );
    }

    // No `@path` inside the inline MCP instructions was followed.
    for (marker, source) in [
        (HOSTNAME_MARKER, "/etc/hostname"),
        (CONFIG_MARKER, "container.json"),
    ] {
        report.check(
            !memory.text.contains(marker),
            &case,
            &format!(
                "{source}'s content reached the agent: an @path in MCP instructions was expanded"
            ),
            &memory,
        );
    }
    // The exact list of loaded files, in order: nothing dropped, nothing extra (an expanded
    // probe import would add a section).
    let wanted: Vec<&str> = expected.iter().map(String::as_str).collect();
    let got: Vec<&str> = memory.sections.iter().map(|s| s.path.as_str()).collect();
    report.check(
        got == wanted,
        &case,
        &format!("loaded files differ\n  expected: {wanted:#?}\n  got:      {got:#?}"),
        &memory,
    );
    Some(memory)
}

/// What one group's inputs say must reach the agent.
struct Inputs {
    base: String,
    /// Enabled skills that have instructions.md, sorted.
    enabled: Vec<(String, String)>,
    /// Skills with instructions.md that the group does not enable.
    disabled: Vec<(String, String)>,
    /// MCP servers with non-empty instructions, sorted.
    mcp: Vec<(String, String)>,
    local: String,
}

impl Inputs {
    fn read(dep: &Deployment, group: &str) -> Self {
        let config: Value =
            serde_json::from_str(&dep.read(&format!("groups/{group}/container.json"))).unwrap();
        let selection: Option<Vec<String>> = match config.get("skills") {
            None => None,
            Some(Value::String(all)) if all == "all" => None,
            Some(Value::Array(list)) => Some(
                list.iter()
                    .map(|s| s.as_str().unwrap().to_owned())
                    .collect(),
            ),
            Some(other) => panic!("unexpected skills value in {group}: {other}"),
        };
        let mut skills = BTreeMap::new();
        for entry in std::fs::read_dir(dep.path("container/skills")).unwrap() {
            let entry = entry.unwrap();
            let instructions = entry.path().join("instructions.md");
            if let Ok(text) = std::fs::read_to_string(&instructions) {
                skills.insert(entry.file_name().to_string_lossy().into_owned(), text);
            }
        }
        let (enabled, disabled) = skills.into_iter().partition(|(skill, _)| {
            selection
                .as_ref()
                .is_none_or(|list| list.iter().any(|s| s == skill))
        });
        let mcp: BTreeMap<String, String> = config
            .get("mcpServers")
            .and_then(Value::as_object)
            .map(|servers| {
                servers
                    .iter()
                    .filter_map(|(name, server)| {
                        let text = server.get("instructions")?.as_str()?;
                        (!text.trim().is_empty()).then(|| (name.clone(), text.to_owned()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Inputs {
            base: dep.read("container/CLAUDE.md"),
            enabled,
            disabled,
            mcp: mcp.into_iter().collect(),
            local: dep.read(&format!("groups/{group}/CLAUDE.local.md")),
        }
    }
}

/// The example deployment, every group given the `e2e-probe` MCP server and a marker key, then
/// composed by the real binary with this delivery mode.
fn deployment(delivery: &str) -> Deployment {
    let dep = Deployment::example();
    let mut instructions =
        String::from("E2E probe: the lines below are literal text, never imports.\n");
    for line in PROBE_IMPORTS {
        instructions.push_str(line);
        instructions.push('\n');
    }
    for group in GROUPS {
        let rel = format!("groups/{group}/container.json");
        let mut config: Value = serde_json::from_str(&dep.read(&rel)).unwrap();
        let object = config.as_object_mut().unwrap();
        object.insert("e2eMarker".into(), json!(CONFIG_MARKER));
        object
            .entry("mcpServers")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .unwrap()
            .insert(
                PROBE_SERVER.into(),
                json!({"command": "true", "instructions": instructions}),
            );
        dep.write(
            &rel,
            serde_json::to_string_pretty(&config).unwrap().as_bytes(),
        );
    }
    let report = compose(&dep, delivery);
    for group in GROUPS {
        let shared = dep.path(&format!(
            "groups/{group}/.claude-fragments/.claude-shared.md"
        ));
        let managed = dep.path(&format!("groups/.clawmd/binds/{group}/managed/CLAUDE.md"));
        let kind = shared.symlink_metadata().map(|m| m.file_type());
        let made = match kind {
            Ok(t) if t.is_symlink() => "link",
            Ok(_) => "copy",
            Err(_) if managed.exists() => "managed",
            Err(_) => "inline",
        };
        let wanted = if delivery == DEFAULT {
            "managed"
        } else {
            delivery
        };
        assert_eq!(
            made,
            wanted,
            "{}: compose --delivery {delivery} made the wrong kind of file",
            shared.display()
        );
    }
    // compose's own verdict: everything reaches the agent, except link without approval.
    for group in report["groups"].as_array().unwrap() {
        assert_eq!(
            group["delivered"]["complete"],
            delivery != "link",
            "compose --delivery {delivery}: {group}"
        );
    }
    dep
}

/// `compose` with no delivery flag and no settings file.
const DEFAULT: &str = "default";

/// Composes every group with this delivery mode (none: [`DEFAULT`]) and returns the JSON
/// report. The mode is the deployment's `clawmd.json` setting, not a flag, so that `clawmd
/// mounts` (which builds the sandbox), compose and check all see it, as a runner's calls do.
fn compose(dep: &Deployment, delivery: &str) -> Value {
    let settings = dep.path("clawmd.json");
    match delivery {
        DEFAULT => {
            let _ = std::fs::remove_file(&settings);
        }
        mode => std::fs::write(&settings, json!({ "delivery": mode }).to_string()).unwrap(),
    }
    let args: Vec<&OsStr> = vec![
        "compose".as_ref(),
        "--all".as_ref(),
        "--json".as_ref(),
        "--root".as_ref(),
        dep.root().as_os_str(),
    ];
    run_clawmd(args, &[]).success().json()
}

// ---------------------------------------------------------------------------------------------
// Running an agent in the sandbox
// ---------------------------------------------------------------------------------------------

/// Starts `consumer` for `group` in a fresh sandbox (fresh HOME, fresh stand-in API) and returns
/// the memory block of the first request it sent.
fn observe(
    dep: &Deployment,
    group: &str,
    consumer: Consumer,
    approved: bool,
) -> Result<Memory, String> {
    let tools = tools();
    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path().join("home");
    std::fs::create_dir(&home).unwrap();
    if approved {
        let config = json!({"projects": {WORKSPACE: {
            "hasClaudeMdExternalIncludesApproved": true,
            "hasClaudeMdExternalIncludesWarningShown": true,
        }}});
        std::fs::write(home.join(".claude.json"), config.to_string()).unwrap();
    }
    let hostname = scratch.path().join("hostname");
    std::fs::write(&hostname, format!("{HOSTNAME_MARKER}\n")).unwrap();

    let sandbox = Sandbox::for_group(dep.root(), group, home, hostname);
    let api = ApiServer::start();
    let mut command = sandbox.command(tools, &api, consumer);
    let started = Instant::now();
    let output = output_within(&mut command, RUN_TIMEOUT);
    let elapsed = started.elapsed();
    let requests = api.stop();
    let output = output?;
    eprintln!(
        "e2e: {group:<8} {consumer:<44} approved={approved:<5} {:>5.1}s, {} request(s)",
        elapsed.as_secs_f64(),
        requests.len()
    );
    let describe = || {
        format!(
            "exit status {}\n--- stdout\n{}\n--- stderr\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            tail(&String::from_utf8_lossy(&output.stderr), 4000)
        )
    };
    let Some(first) = requests.first() else {
        return Err(format!(
            "{consumer} sent no request to the stand-in API\n{}",
            describe()
        ));
    };
    match texts(first).into_iter().find(|t| t.contains(MARK)) {
        Some(block) => {
            if std::env::var_os("CLAWMD_E2E_DUMP").is_some() {
                eprintln!(
                    "--- memory block: {group}, {consumer}, approved={approved}\n{block}\n---"
                );
            }
            Ok(Memory::parse(block))
        }
        None => Err(format!(
            "the first request has no memory block\n{}\n--- request\n{}",
            describe(),
            tail(&first.to_string(), 4000)
        )),
    }
}

// ---------------------------------------------------------------------------------------------
// The memory block
// ---------------------------------------------------------------------------------------------

/// The memory block as the real binary sent it, cut into its `Contents of PATH (KIND):` sections.
struct Memory {
    text: String,
    sections: Vec<Section>,
}

struct Section {
    path: String,
    /// The kind in parentheses, e.g. `project instructions, checked into the codebase`.
    label: String,
}

impl Memory {
    fn parse(text: &str) -> Self {
        let sections = text
            .lines()
            .filter_map(|line| {
                let rest = line.strip_prefix("Contents of ")?.strip_suffix("):")?;
                let (path, label) = rest.rsplit_once(" (")?;
                Some(Section {
                    path: path.to_owned(),
                    label: label.to_owned(),
                })
            })
            .collect();
        Memory {
            text: text.to_owned(),
            sections,
        }
    }

    fn has_section(&self, path: &str) -> bool {
        self.sections.iter().any(|s| s.path == path)
    }

    /// The block as tools/claude-view prints it (and as conformance `expected.txt` holds it).
    fn as_printed(&self) -> String {
        if self.text.ends_with('\n') {
            self.text.clone()
        } else {
            format!("{}\n", self.text)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Collecting failures: every group and case is run, then all failures are reported together
// ---------------------------------------------------------------------------------------------

struct Report {
    title: &'static str,
    failures: Vec<String>,
    runs: usize,
}

impl Report {
    fn new(title: &'static str) -> Self {
        Report {
            title,
            failures: Vec::new(),
            runs: 0,
        }
    }

    /// Runs the agent; a run that produced no memory block is a failure, returned as `None`.
    fn observe(
        &mut self,
        dep: &Deployment,
        group: &str,
        consumer: Consumer,
        approved: bool,
    ) -> Option<Memory> {
        self.runs += 1;
        match observe(dep, group, consumer, approved) {
            Ok(memory) => Some(memory),
            Err(err) => {
                self.failures
                    .push(format!("[{group}, {consumer}, approved={approved}] {err}"));
                None
            }
        }
    }

    fn check(&mut self, ok: bool, case: &str, what: &str, memory: &Memory) {
        if !ok {
            self.fail(case, what, memory);
        }
    }

    fn fail(&mut self, case: &str, what: &str, memory: &Memory) {
        self.failures.push(format!(
            "[{case}] {what}\n--- memory block\n{}\n---",
            memory.text
        ));
    }

    #[track_caller]
    fn finish(self) {
        if !self.failures.is_empty() {
            panic!(
                "{}: {} failure(s) in {} run(s)\n\n{}",
                self.title,
                self.failures.len(),
                self.runs,
                self.failures.join("\n\n")
            );
        }
    }
}

fn tail(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

fn first_difference((a_name, a): (&str, &str), (b_name, b): (&str, &str)) -> String {
    let at = a
        .bytes()
        .zip(b.bytes())
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    let window = |s: &str| {
        let mut from = at.saturating_sub(60).min(s.len());
        while !s.is_char_boundary(from) {
            from -= 1;
        }
        let mut to = (at + 60).min(s.len());
        while !s.is_char_boundary(to) {
            to += 1;
        }
        format!("{:?}", &s[from..to])
    };
    format!(
        "first difference at byte {at} ({a_name} {} bytes, {b_name} {} bytes)\n  {a_name}: {}\n  {b_name}: {}\n--- {b_name}\n{b}",
        a.len(),
        b.len(),
        window(a),
        window(b)
    )
}
