#!/usr/bin/env python3
"""A nanoclaw v2.3-style deployment of N varied groups, for scripts/bench-spawn.

    gen-v23-deployment.py ROOT N [--seed S]

ROOT/container/CLAUDE.md                      the canonical template, with its
                                              `{{provider-memory-note}}` paragraph (about 4 KB)
ROOT/container/agent-runner/src/mcp-tools/    the six modules' *.instructions.md (1-4 KB) beside
                                              their .ts files
ROOT/container/skills/skillNN/                30 skills with SKILL.md; 10 with an instructions.md
ROOT/groups/gNNNNN/container.json             what nanoclaw materialises from its database row:
                                              mcpServers (0-5, some with instructions), skills
                                              ("all" or a list), provider (claude, codex, opencode)
ROOT/groups/gNNNNN/instructions.prepend.md    the persona, 0.2-4 KB (absent in 1 group in 10); 1
                                              group in 5 also has another *.prepend.md
ROOT/groups/gNNNNN/memory/                    the memory tree (never read by either composer)
ROOT/rows.json                                the database rows nanoclaw's composer reads
                                              (`mcp_servers`, `skills` as JSON text, `cli_scope`:
                                              "disabled" for 1 group in 6)
ROOT/src/project-doc-compose.ts               the stand-in of tests/fixtures/nanoclaw-v2.3 (the
                                              facts `clawmd init` reads from nanoclaw's composer)
ROOT/src/container-runner.ts                  the one line of nanoclaw's runner naming the folder
                                              it mounts as each agent's ~/.claude (`claudeHome`)
ROOT/data/v2-sessions/ag-gNNNNN/.claude-shared/settings.json
                                              the agent's user settings as nanoclaw's runner
                                              writes them (recorded from its v2.3 spawn path)
ROOT/container/agent-runner/package.json      the runner's pins, as that fixture's (the Agent SDK),
ROOT/container/cli-tools.json                 and the image's tools (Claude Code 2.1.257)

`clawmd init` on ROOT writes what an operator's does on a nanoclaw v2.3 checkout (docs/nanoclaw.md):
the benches compose with those settings.

The markdown comes from scripts/gen-varied-deployment.py. Deterministic for a seed.
"""
import argparse
import importlib.util
import json
import os
import random

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("varied", os.path.join(here, "..", "gen-varied-deployment.py"))
varied = importlib.util.module_from_spec(spec)
spec.loader.exec_module(varied)
markdown, write = varied.markdown, varied.write

BASE = """## Communication

Send messages with the `send_message` tool; your final answer is delivered to the chat.

## Workspace

Your working directory is `/workspace/agent`. Files you create there persist across sessions.

## Received attachments

Attachments arrive under `/workspace/attachments/` and are read-only.

## Memory

Standing role, persona, and behavioral instructions belong in `/workspace/agent/instructions.prepend.md`; durable facts belong in memory (`/workspace/agent/memory/`).

{{provider-memory-note}}

## Conversation history

Earlier conversations are summarised in `/workspace/conversations/`.

## Connecting external accounts

Ask the operator to connect an account through OneCLI; never ask for a secret in chat.
"""

MODULES = ["agents", "cli", "core", "interactive", "scheduling", "self-mod"]

# nanoclaw's runner (src/container-runner.ts, buildMounts): the folder it mounts at /home/node/.claude.
RUNNER_LINE = "  const claudeDir = path.join(DATA_DIR, 'v2-sessions', agentGroup.id, '.claude-shared');\n"

# What nanoclaw v2.3's runner writes there (tests/fixtures/nanoclaw-spawn/v2.3/nanoclaw/state.json).
AGENT_SETTINGS = {
    "autoMemoryEnabled": False,
    "env": {"CLAUDE_CODE_ADDITIONAL_DIRECTORIES_CLAUDE_MD": "1", "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1"},
    "hooks": {"PreCompact": [{"hooks": [{"type": "command", "command": "bun /app/src/compact-instructions.ts"}]}]},
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("n", type=int)
    parser.add_argument("--seed", type=int, default=23)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    root = args.root
    write(os.path.join(root, "container", "CLAUDE.md"), BASE + "\n" + markdown(rng, 800, "Runtime notes"))
    tools = os.path.join(root, "container", "agent-runner", "src", "mcp-tools")
    for module in MODULES:
        write(os.path.join(tools, f"{module}.instructions.md"), markdown(rng, rng.randint(1000, 4000), module))
        write(os.path.join(tools, f"{module}.ts"), f"export const {module.replace('-', '_')} = 1;\n")
    skills = [f"skill{i:02d}" for i in range(30)]
    for i, skill in enumerate(skills):
        write(os.path.join(root, "container", "skills", skill, "SKILL.md"),
              f"---\nname: {skill}\ndescription: {varied.sentence(rng)}\n---\n\n" + markdown(rng, 600))
        if i % 3 == 0:
            write(os.path.join(root, "container", "skills", skill, "instructions.md"),
                  markdown(rng, rng.randint(400, 3000)))
    fixture = os.path.join(here, "..", "..", "tests", "fixtures", "nanoclaw-v2.3")
    for part in (("src", "project-doc-compose.ts"), ("container", "agent-runner", "package.json"),
                 ("container", "cli-tools.json")):
        with open(os.path.join(fixture, *part)) as source:
            write(os.path.join(root, *part), source.read())
    write(os.path.join(root, "src", "container-runner.ts"), RUNNER_LINE)
    rows = {}
    for g in range(args.n):
        name = f"g{g:05d}"
        folder = os.path.join(root, "groups", name)
        provider = rng.choices(["claude", "codex", "opencode"], [70, 18, 12])[0]
        servers = {}
        for s in range(rng.randint(0, 5)):
            server = {"command": "npx", "args": ["-y", f"mcp-{rng.choice(varied.WORDS)}"], "env": {}}
            if rng.random() < 0.6:
                server["instructions"] = markdown(rng, rng.randint(100, 1500))
            servers[f"srv{s}"] = server
        selected = "all" if rng.random() < 0.3 else sorted(rng.sample(skills, rng.randint(2, 14)))
        config = {
            "mcpServers": servers,
            "packages": {"apt": [], "npm": []},
            "additionalMounts": [],
            "skills": selected,
            "provider": provider,
            "groupName": name,
            "assistantName": name,
            "agentGroupId": f"ag-{name}",
        }
        write(os.path.join(folder, "container.json"), json.dumps(config, indent=2) + "\n")
        write(os.path.join(root, "data", "v2-sessions", f"ag-{name}", ".claude-shared", "settings.json"),
              json.dumps(AGENT_SETTINGS, indent=2) + "\n")
        if rng.random() < 0.9:
            write(os.path.join(folder, "instructions.prepend.md"), markdown(rng, rng.randint(200, 4000), "Persona"))
        if rng.random() < 0.2:
            write(os.path.join(folder, "style.prepend.md"), markdown(rng, rng.randint(100, 800)))
        write(os.path.join(folder, "memory", "index.md"), markdown(rng, rng.randint(100, 2000)))
        rows[f"ag-{name}"] = {
            "folder": name,
            "provider": provider,
            "mcp_servers": json.dumps(servers),
            "skills": json.dumps(selected),
            "cli_scope": "disabled" if rng.random() < 1 / 6 else "full",
        }
    write(os.path.join(root, "rows.json"), json.dumps(rows) + "\n")


main()
