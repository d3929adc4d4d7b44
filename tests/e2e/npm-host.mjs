// A Node host that installed the clawmd npm package, run by tests/e2e/npm.rs with only `node` on
// PATH and no CLAWMD: plain JavaScript, no TypeScript anywhere. It composes each group named on
// the command line before "spawning" it, the async way and the sync way, asks for the binds of
// its container, and prints what it got as JSON: the binary the package resolved, and per
// group the verdict (or the error) and the binds (async and sync).
import {
  ClawmdError,
  composeBeforeSpawn,
  composeBeforeSpawnSync,
  mounts,
  mountsSync,
  resolveBinary,
} from "clawmd";

const root = process.env.DEPLOYMENT;
const out = { binary: null, binaryError: null, groups: {}, sync: {}, mounts: {}, mountsSync: {} };
const failure = (err) =>
  err instanceof ClawmdError
    ? { name: err.name, code: err.code, message: err.message }
    : { name: String(err?.name), message: String(err?.message ?? err) };
const verdict = (composed) => ({
  complete: composed.delivered.complete,
  missing: composed.delivered.missing,
  file: composed.target.file,
  memoryDigest: composed.memoryDigest,
  changed: composed.changed,
});

try {
  out.binary = resolveBinary();
} catch (err) {
  out.binaryError = failure(err);
}
for (const group of process.argv.slice(2)) {
  try {
    out.groups[group] = verdict(await composeBeforeSpawn(group, { root }));
  } catch (err) {
    out.groups[group] = { error: failure(err) };
  }
  try {
    out.sync[group] = verdict(composeBeforeSpawnSync(group, { root }));
  } catch (err) {
    out.sync[group] = { error: failure(err) };
  }
  try {
    out.mounts[group] = await mounts(group, { root });
  } catch (err) {
    out.mounts[group] = { error: failure(err) };
  }
  try {
    out.mountsSync[group] = mountsSync(group, { root });
  } catch (err) {
    out.mountsSync[group] = { error: failure(err) };
  }
}
process.stdout.write(JSON.stringify(out));
