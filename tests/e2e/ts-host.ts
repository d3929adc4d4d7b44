// A stand-in TypeScript container host, for tests/e2e/typescript.rs: it calls the runner
// (integrations/typescript/clawmd.ts) the way a nanoclaw host does before each spawn, against
// the real clawmd binary ($CLAWMD) on a temp deployment ($DEPLOYMENT), and prints what each
// call gave as one JSON object, for the Rust test to check. Compiled with tsc --strict together
// with the runner and the generated types, so a host's use of the types is type-checked too.
import {
  ClawmdError,
  checkGroup,
  composeBeforeSpawn,
  composeBeforeSpawnSync,
  migrateOnce,
  mounts,
  mountsSync,
  type Bind,
  type Composed,
} from "./clawmd.js";

const root = process.env["DEPLOYMENT"] ?? "";
const slow = process.env["SLOW_BINARY"] ?? "";
const unreadable = process.env["UNREADABLE_ROOT"] ?? "";
const locked = process.env["LOCKED_ROOT"] ?? "";

type Outcome = { ms: number } & (
  | { value: unknown }
  | { error: { name: string; code: string; file: string | null; group: string | null; message: string } }
);

async function outcome(call: () => Promise<unknown> | unknown): Promise<Outcome> {
  const started = performance.now();
  const ms = () => Math.round(performance.now() - started);
  try {
    const value = await call();
    return { ms: ms(), value };
  } catch (err) {
    if (err instanceof ClawmdError) {
      return {
        ms: ms(),
        error: { name: err.name, code: err.code, file: err.file, group: err.group, message: err.message },
      };
    }
    throw err;
  }
}

/** What a host keeps from a composed group. */
function kept(composed: Composed) {
  return {
    changed: composed.changed,
    memoryDigest: composed.memoryDigest,
    created: composed.group.created.map((change) => change.path),
    file: composed.target.file,
    complete: composed.delivered.complete,
    missing: composed.delivered.missing,
    schema: composed.report.$schema,
  };
}

const results: Record<string, Outcome> = {
  migrate: await outcome(async () => (await migrateOnce({ root })).ok),
  composed: await outcome(async () => kept(await composeBeforeSpawn("good", { root }))),
  noop: await outcome(async () => kept(await composeBeforeSpawn("good", { root }))),
  noopSync: await outcome(() => kept(composeBeforeSpawnSync("good", { root }))),
  broken: await outcome(() => composeBeforeSpawn("broken", { root })),
  brokenSync: await outcome(() => composeBeforeSpawnSync("broken", { root })),
  missingGroup: await outcome(() => composeBeforeSpawn("nope", { root })),
  incomplete: await outcome(() => composeBeforeSpawn("linked", { root, delivery: "link" })),
  incompleteAllowed: await outcome(async () =>
    kept(await composeBeforeSpawn("linked", { root, delivery: "link", allowIncomplete: true })),
  ),
  codex: await outcome(async () => kept(await composeBeforeSpawn("flat", { root, provider: "codex" }))),
  handed: await outcome(async () =>
    kept(
      await composeBeforeSpawn("handed", {
        root,
        config: { skills: ["web"], mcpServers: { "my db": { command: "db", instructions: "HANDED ASYNC" } } },
      }),
    ),
  ),
  handedSync: await outcome(() =>
    kept(
      composeBeforeSpawnSync("handedsync", {
        root,
        config: { skills: ["web"], mcpServers: { db: { command: "db", instructions: "HANDED SYNC" } } },
      }),
    ),
  ),
  runFailure: await outcome(() => composeBeforeSpawn("good", { root: unreadable })),
  missingBinary: await outcome(() => composeBeforeSpawn("good", { root, binary: "/nonexistent/clawmd" })),
  missingBinarySync: await outcome(() =>
    composeBeforeSpawnSync("good", { root, binary: "/nonexistent/clawmd" }),
  ),
  lockTimeout: await outcome(() => composeBeforeSpawn("locked", { root: locked, lockTimeoutSecs: 1 })),
  lockTimeoutSync: await outcome(() => composeBeforeSpawnSync("locked", { root: locked, lockTimeoutSecs: 1 })),
  timeout: await outcome(() => composeBeforeSpawn("good", { root, binary: slow, timeoutMs: 300 })),
  timeoutSync: await outcome(() => composeBeforeSpawnSync("good", { root, binary: slow, timeoutMs: 300 })),
  mounts: await outcome(async () => (await mounts("good", { root })).map((bind: Bind) => [bind.container, bind.readonly])),
  mountsSync: await outcome(() => mountsSync("good", { root }).map((bind: Bind) => [bind.container, bind.readonly])),
  mountsCodex: await outcome(async () => (await mounts("flat", { root, provider: "codex" })).map((bind) => bind.container)),
  mountsMissing: await outcome(() => mounts("nope", { root })),
  mountsMissingSync: await outcome(() => mountsSync("nope", { root })),
  checkGood: await outcome(async () => {
    const report = await checkGroup("good", { root });
    return { ok: report.ok, codes: report.groups.flatMap((g) => g.findings.map((f) => f.code)) };
  }),
  checkBroken: await outcome(async () => {
    const report = await checkGroup("broken", { root });
    return { ok: report.ok, codes: report.groups.flatMap((g) => g.findings.map((f) => f.code)) };
  }),
};
process.stdout.write(JSON.stringify(results, null, 2) + "\n");
