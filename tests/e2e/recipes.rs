//! Two example recipes of docs/recipes/ read by the real Claude Code (the CLI and the Agent SDK
//! with nanoclaw's `settingSources: ['project','user']`) in the sandbox built from
//! `clawmd mounts`: what `clawmd render` shows is what the agent receives, in the recipe's
//! order, and what the recipe must leave alone stays out.

use std::path::Path;
use std::time::Duration;

use crate::support::sandbox::{
    CLAUDE_CODE_VERSION, Consumer, Sandbox, memory_block, printed, rendered, tools,
};
use crate::support::{Deployment, in_order};

/// The memory block `consumer` sends for `group`.
fn observe(d: &Deployment, group: &str, consumer: Consumer) -> String {
    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let hostname = scratch.path().join("hostname");
    std::fs::write(&hostname, "recipes\n").unwrap();
    let sandbox = Sandbox::for_group(d.root(), group, home, hostname);
    memory_block(&sandbox, tools(), consumer, Duration::from_secs(180))
        .unwrap_or_else(|e| panic!("{group}: {e}"))
}

/// `clawmd render` equals the block the CLI sent.
#[track_caller]
fn render_matches(d: &Deployment, group: &str, real: &str) {
    let render = rendered(d.root(), group, &["--claude-version", CLAUDE_CODE_VERSION]);
    assert_eq!(render, printed(real), "render differs from the real block");
}

/// In managed delivery (the default) the persona, which the agent can rewrite, reaches it as the
/// workspace's own text, after the operator's policy, never labelled as that policy.
#[test]
fn persona_first_reaches_the_agent_as_its_own_text() {
    let d = Deployment::example().with_recipe("persona-first").file(
        "groups/main/persona.md",
        "# Persona\n\nYou are Ada. Notes: @./notes.md\n",
    );
    d.write("groups/main/notes.md", b"PLANTED NOTES\n");
    d.run(["compose", "--all"]).success();
    for consumer in [Consumer::Cli, Consumer::sdk()] {
        let block = observe(&d, "main", consumer);
        in_order(
            &block,
            &[
                "(organization-managed policy instructions)",
                "# Shared base for every agent",
                "Instructions for the MCP server `notes-db`",
                "Contents of /workspace/agent/CLAUDE.md (project instructions",
                "You are Ada",
                "# Main group memory",
            ],
        );
        assert!(!block.contains("PLANTED NOTES"), "{consumer}: {block}");
        if let Consumer::Cli = consumer {
            render_matches(&d, "main", &block);
        }
    }
}

#[test]
fn memory_folder_reaches_the_agent_without_a_local_memory() {
    let d = Deployment::example()
        .with_recipe("memory-folder")
        .file(
            "groups/ops/instructions.prepend.md",
            "STANDING: page the human on call before any production change.\n",
        )
        .file(
            "groups/ops/memory/people.md",
            "Sam is on call on Mondays.\n",
        );
    std::fs::remove_file(d.path("groups/ops/CLAUDE.local.md")).unwrap();
    d.run(["compose", "--all"]).success();
    assert!(!Path::new(&d.path("groups/ops/CLAUDE.local.md")).exists());
    for consumer in [Consumer::Cli, Consumer::sdk()] {
        let block = observe(&d, "ops", consumer);
        in_order(
            &block,
            &[
                "(organization-managed policy instructions)",
                "# Shared base for every agent",
                "# Your memory",
                "You can read incidents",
                "Contents of /workspace/agent/CLAUDE.md (project instructions",
                "STANDING: page the human",
            ],
        );
        assert!(!block.contains("Sam is on call"), "{consumer}: {block}");
        assert!(!block.contains("CLAUDE.local.md ("), "{consumer}: {block}");
        if let Consumer::Cli = consumer {
            render_matches(&d, "ops", &block);
        }
    }
}
