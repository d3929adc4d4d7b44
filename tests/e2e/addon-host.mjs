// A Node host that installed the clawmd npm package, run by tests/e2e/addon.rs with only `node`
// on PATH: `node host.mjs MODE` with DEPLOYMENT the root.
//
//   sequence WAY   the same spawns through `prepareSpawn` with `way: WAY` ("addon": the
//                  platform package's clawmd.node in this process; "service": `clawmd serve`):
//                  a fresh group, a steady one, an edit handed as config, a request clawmd
//                  refuses, a group that does not exist, one whose container.json is bad.
//                  Prints what each resolved to (or rejected with) as JSON.
//   concurrent     at once, from this one process: the same group twice through the addon and
//                  once through `clawmd serve`, and another group through the addon.
//   one [WAY]      `main` once (the environment's CLAWMD_* as the test sets them).
//   locked         `main` through the addon while another process holds its lock (`flock`,
//                  1.5 s): how long it took, and how often a 10 ms timer fired meanwhile.
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { ClawmdError, prepareSpawn, resolveAddon } from "clawmd";

const root = process.env.DEPLOYMENT;
const [mode, way] = process.argv.slice(2);

/** What a `prepareSpawn` gave, as plain JSON. */
async function outcome(promise) {
  try {
    const p = await promise;
    return {
      ok: true,
      changed: p.changed,
      memoryDigest: p.memoryDigest,
      spawnDigest: p.spawnDigest,
      target: p.target,
      delivered: p.delivered,
      binds: p.binds,
      report: p.report,
    };
  } catch (err) {
    if (!(err instanceof ClawmdError)) return { ok: false, thrown: String(err) };
    return { ok: false, code: err.code, message: err.message, file: err.file, group: err.group, report: err.report };
  }
}

const out = { addon: resolveAddon() };
if (mode === "sequence") {
  const research = JSON.parse(fs.readFileSync(path.join(root, "groups/research/container.json"), "utf8"));
  const edited = {
    ...research,
    mcpServers: { ...research.mcpServers, edited: { command: "edited-mcp", instructions: "Edited: keep replies short." } },
  };
  const steps = [
    ["fresh", "main", {}],
    ["steady", "main", {}],
    ["edit", "research", { config: edited }],
    ["steady after the edit", "research", { config: edited }],
    ["bad request", "main", { delivery: "carrier-pigeon" }],
    ["unknown group", "nope", {}],
    ["bad config", "broken", {}],
    ["bad handed config", "ops", { config: { skills: 42 } }],
  ];
  out.steps = [];
  for (const [step, group, options] of steps) {
    out.steps.push({ step, group, ...(await outcome(prepareSpawn(group, { root, way, ...options }))) });
  }
} else if (mode === "concurrent") {
  const calls = [
    ["main", "addon"],
    ["main", "addon"],
    ["main", "service"],
    ["research", "addon"],
  ];
  out.calls = await Promise.all(
    calls.map(async ([group, way]) => ({ group, way, ...(await outcome(prepareSpawn(group, { root, way }))) })),
  );
} else if (mode === "locked") {
  const lock = path.join(root, "groups/.clawmd-locks/main.lock");
  fs.mkdirSync(path.dirname(lock), { recursive: true });
  const holder = spawn("/usr/bin/flock", ["-x", lock, "/bin/sleep", "1.5"], { stdio: "ignore" });
  const released = new Promise((resolve) => holder.on("exit", resolve));
  await new Promise((resolve) => setTimeout(resolve, 300));
  let ticks = 0;
  const timer = setInterval(() => ticks++, 10);
  const start = Date.now();
  out.outcome = await outcome(prepareSpawn("main", { root, way: "addon" }));
  out.elapsedMs = Date.now() - start;
  clearInterval(timer);
  out.ticks = ticks;
  await released;
} else if (mode === "one") {
  out.outcome = await outcome(prepareSpawn("main", { root, ...(way ? { way } : {}) }));
} else {
  throw new Error(`unknown mode ${mode}`);
}
process.stdout.write(JSON.stringify(out));
