// A Node host that installed the clawmd npm package (with pnpm, as a nanoclaw operator does),
// run by tests/e2e/npm.rs with only `node` on PATH and no CLAWMD: for each group named on the
// command line, one `prepareSpawn` (one request: compose and binds; through the platform
// package's addon, or `clawmd serve` with WAY=service) the way nanoclaw's spawn path calls it,
// then `mounts` (a process of its own) to compare. It never closes the service: the host must
// still exit by itself (the service is unref'd while idle); a timer that does not hold the
// host open says so if it does not.
import { ClawmdError, mounts, prepareSpawn, resolveAddon, resolveBinary } from "clawmd";

const root = process.env.DEPLOYMENT;
const way = process.env.WAY || undefined;
const out = { binary: resolveBinary(), addon: resolveAddon(), groups: {}, hung: false };
const hang = setTimeout(() => {
  out.hung = true;
  process.stdout.write(JSON.stringify(out));
  process.exit(3);
}, 60_000);
hang.unref();
const failure = (err) =>
  err instanceof ClawmdError ? { code: err.code, message: err.message } : String(err);
for (const group of process.argv.slice(2)) {
  try {
    const prepared = await prepareSpawn(group, { root, way });
    out.groups[group] = {
      changed: prepared.changed,
      complete: prepared.delivered.complete,
      spawnDigest: prepared.spawnDigest,
      binds: prepared.binds,
      again: (await prepareSpawn(group, { root, way })).changed,
    };
    // `mounts` runs the binary: its own failure, if any.
    out.groups[group].mounts = await mounts(group, { root }).catch((err) => ({ error: failure(err) }));
  } catch (err) {
    out.groups[group] = { error: failure(err) };
  }
}
process.stdout.write(JSON.stringify(out));
