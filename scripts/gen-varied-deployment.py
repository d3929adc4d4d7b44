#!/usr/bin/env python3
"""Generates a deployment where every group differs, as real ones do (issue: fast on real deployments).

    scripts/gen-varied-deployment.py ROOT N [--seed S]

ROOT/container/CLAUDE.md         a shared base of about 6 KB of markdown
ROOT/container/skills/skillNN/   40 skills, each with SKILL.md (name and description frontmatter);
                                 24 of them with an instructions.md of 0.5-6 KB
ROOT/groups/gNNNNN/container.json  a list of 2-14 skills and 0-6 MCP servers, each server with its own
                                 inline instructions (0.1-2 KB) or none, runner keys beside them
ROOT/groups/gNNNNN/CLAUDE.local.md the group's own memory, 0-16 KB (absent in about 1 group in 10)

No two groups have the same container.json or the same memory. The text is markdown as people write
it: headings, paragraphs, lists, tables, fenced code (closed), inline code, links, the odd HTML comment.
Deterministic for a seed. It fits the side-by-side harness (shared/anchors/nanoclaw-perf/run.sh, GEN=this
script): group names are gNNNNN and g00007 has an MCP server srv3 without instructions, the one the
harness's change step gives instructions to and takes them from.
"""
import argparse
import json
import os
import random

WORDS = (
    "agent group container memory skill server tool request answer user file folder note task "
    "schedule report message channel review deploy build test check secret token limit budget "
    "always never before after each every only when unless carefully briefly politely quickly "
    "read write send list search summarise confirm escalate retry ignore keep remove update"
).split()


def sentence(rng):
    words = [rng.choice(WORDS) for _ in range(rng.randint(6, 18))]
    if rng.random() < 0.2:
        words[rng.randrange(len(words))] = f"`{rng.choice(WORDS)}_{rng.randint(1, 99)}`"
    if rng.random() < 0.1:
        words[rng.randrange(len(words))] = f"[{rng.choice(WORDS)}](https://example.com/{rng.choice(WORDS)})"
    text = " ".join(words)
    return text[0].upper() + text[1:] + rng.choice(".!.?.")


def block(rng):
    kind = rng.random()
    if kind < 0.45:
        return " ".join(sentence(rng) for _ in range(rng.randint(1, 5)))
    if kind < 0.7:
        return "\n".join(f"{rng.choice('-*')} {sentence(rng)}" for _ in range(rng.randint(2, 6)))
    if kind < 0.8:
        lang = rng.choice(["sh", "json", "python", ""])
        body = "\n".join(f"{rng.choice(WORDS)} --{rng.choice(WORDS)}={rng.randint(0, 999)}" for _ in range(rng.randint(1, 6)))
        return f"```{lang}\n{body}\n```"
    if kind < 0.88:
        rows = [f"| {rng.choice(WORDS)} | {rng.choice(WORDS)} | {rng.randint(0, 99)} |" for _ in range(rng.randint(1, 5))]
        return "| name | what | n |\n|---|---|---|\n" + "\n".join(rows)
    if kind < 0.93:
        return f"<!-- {sentence(rng)} -->"
    return "\n".join(f"{i + 1}. {sentence(rng)}" for i in range(rng.randint(2, 5)))


def markdown(rng, size, title=None):
    """About `size` bytes of markdown (0 gives an empty text)."""
    if size <= 0:
        return ""
    parts = [f"# {title}"] if title else []
    length = 0
    while length < size:
        if rng.random() < 0.15:
            part = f"{'#' * rng.randint(2, 3)} {sentence(rng).rstrip('.!?')}"
        else:
            part = block(rng)
        parts.append(part)
        length += len(part) + 2
    return "\n\n".join(parts) + "\n"


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        out.write(text)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("groups", type=int)
    parser.add_argument("--seed", type=int, default=20)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    root = args.root

    write(f"{root}/container/CLAUDE.md", markdown(rng, 6000, "Shared base for every agent"))
    skills = [f"skill{n:02d}" for n in range(40)]
    with_instructions = set(rng.sample(skills, 24))
    for skill in skills:
        write(
            f"{root}/container/skills/{skill}/SKILL.md",
            f"---\nname: {skill}\ndescription: {sentence(rng)}\n---\n\n" + markdown(rng, 800),
        )
        if skill in with_instructions:
            write(
                f"{root}/container/skills/{skill}/instructions.md",
                markdown(rng, rng.randint(500, 6000), f"Skill: {skill}"),
            )

    seen = set()
    for g in range(args.groups):
        name = f"g{g:05d}"
        while True:
            chosen = sorted(rng.sample(skills, rng.randint(2, 14)))
            servers = {}
            for s in rng.sample(range(12), rng.randint(0, 6)):
                server = {"command": f"/opt/mcp/srv{s}", "args": ["--group", name]}
                if rng.random() < 0.7:
                    server["instructions"] = markdown(rng, rng.randint(100, 2000)).strip()
                servers[f"srv{s}"] = server
            if name == "g00007":
                servers["srv3"] = {"command": "/opt/mcp/srv3", "args": ["--group", name]}
            config = {
                "skills": chosen,
                "mcpServers": dict(sorted(servers.items())),
                "imageTag": f"agent:{rng.randint(1, 9)}",
                "packages": {"apt": rng.sample(["git", "curl", "jq", "ripgrep"], rng.randint(0, 3))},
            }
            key = json.dumps(config, sort_keys=True)
            if key not in seen:
                seen.add(key)
                break
        write(f"{root}/groups/{name}/container.json", json.dumps(config, indent=2) + "\n")
        if rng.random() < 0.9:
            memory = markdown(rng, rng.randint(0, 16000))
            write(f"{root}/groups/{name}/CLAUDE.local.md", f"<!-- {name} -->\n" + memory)


if __name__ == "__main__":
    main()
