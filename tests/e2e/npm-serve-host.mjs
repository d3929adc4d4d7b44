// A Node host that installed the clawmd npm package (with pnpm, as a nanoclaw operator does),
// run by tests/e2e/npm.rs with only `node` on PATH and no CLAWMD: for each group named on the
// command line, one `prepareSpawn` (one `clawmd serve` request: compose and binds) the way
// nanoclaw's spawn path calls it, then `mounts` (a process of its own) to compare. It never
// closes the service: the host must still exit by itself (the service is unref'd while idle);
// a timer that does not hold the host open says so if it does not.
import { ClawmdError, mounts, prepareSpawn, resolveBinary } from "clawmd";

const root = process.env.DEPLOYMENT;
const out = { binary: resolveBinary(), groups: {}, hung: false };
const hang = setTimeout(() => {
  out.hung = true;
  process.stdout.write(JSON.stringify(out));
  process.exit(3);
}, 60_000);
hang.unref();
for (const group of process.argv.slice(2)) {
  try {
    const prepared = await prepareSpawn(group, { root });
    out.groups[group] = {
      changed: prepared.changed,
      complete: prepared.delivered.complete,
      spawnDigest: prepared.spawnDigest,
      binds: prepared.binds,
      mounts: await mounts(group, { root }),
      again: (await prepareSpawn(group, { root })).changed,
    };
  } catch (err) {
    out.groups[group] = {
      error: err instanceof ClawmdError ? { code: err.code, message: err.message } : String(err),
    };
  }
}
process.stdout.write(JSON.stringify(out));
