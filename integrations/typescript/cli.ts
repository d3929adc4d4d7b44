#!/usr/bin/env node
/**
 * `clawmd` from npm (`npx clawmd compose --all`, or on PATH after `npm install -g clawmd`): runs
 * the binary `resolveBinary()` finds (`$CLAWMD`, else the platform package's) with the same
 * arguments, standard streams and exit status. A runner calls the functions of ./clawmd.js (or
 * the binary itself) instead: this adds a Node start-up to every run.
 */
import { spawnSync } from "node:child_process";

import { ClawmdError, resolveBinary } from "./clawmd.js";

function main(): number {
  let binary: string;
  try {
    binary = resolveBinary();
  } catch (err) {
    if (!(err instanceof ClawmdError)) throw err;
    process.stderr.write(`clawmd: ${err.message}\n`);
    return 127;
  }
  const result = spawnSync(binary, process.argv.slice(2), { stdio: "inherit" });
  if (result.error !== undefined) {
    process.stderr.write(`clawmd: cannot run ${binary}: ${result.error.message}\n`);
    return 127;
  }
  if (result.signal !== null) {
    process.kill(process.pid, result.signal);
  }
  return result.status ?? 1;
}

process.exitCode = main();
