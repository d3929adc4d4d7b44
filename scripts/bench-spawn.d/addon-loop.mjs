// The addon alone, in a loop, for a profiler (docs/performance.md, "Twelfth pass"): no
// nanoclaw beside it, no ballast, so that `perf record` sees clawmd's share of a spawn.
//
//   node addon-loop.mjs ADDON ROOT COUNT [edit|steady]
//
// ADDON: a clawmd.node (or target/release/libclawmd_node.so copied to a name ending in .node);
// ROOT: a deployment scripts/bench-spawn built (`WORK=DIR scripts/bench-spawn`, then DIR/mine-addon).
// Each spawn asks the addon as prepareSpawn does (`answer`, then `finishLater` on the next turn
// of the event loop) and waits 1 ms, as bench-spawn's gap. `edit` (the default) gives the group
// new MCP instructions before each spawn, as bench-spawn's edit phase; `steady` changes nothing.
// Environment: WARM (spawns made before the timed ones; with SETTLE set, `sync` and 2.5 s of
// rest after the first pass over the groups, as bench-spawn settles). Prints the median and p90
// of the timed spawns and the process's CPU time per spawn over them (steadier than the wall
// time on a noisy machine, for comparing two builds), and "warm" on stderr when they start
// (for `perf record -D`).
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';

const [addonPath, root, countText, mode = 'edit'] = process.argv.slice(2);
const { ClawmdService } = createRequire(import.meta.url)(path.resolve(addonPath));
const service = new ClawmdService({ root });
const rows = JSON.parse(fs.readFileSync(path.join(root, '..', 'nano', 'rows.json'), 'utf8'));
const groups = Object.values(rows).map((row) => ({
  folder: row.folder,
  config: {
    ...JSON.parse(fs.readFileSync(path.join(root, 'groups', row.folder, 'container.json'), 'utf8')),
    cli_scope: row.cli_scope,
  },
}));
const count = Number(countText);
const warm = Number(process.env.WARM ?? 0);
const rest = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const times = [];
let cpuStart = null;
for (let i = 0; i < warm + count; i++) {
  if (process.env.SETTLE && i === groups.length) {
    spawnSync('sync');
    await rest(2500);
  }
  if (i === warm) {
    console.error('warm');
    cpuStart = process.cpuUsage();
  }
  const group = groups[i % groups.length];
  if (mode === 'edit') {
    const servers = { ...(group.config.mcpServers ?? {}) };
    servers.edited = { command: 'npx', args: ['-y', 'mcp-edited'], env: {}, instructions: `Edit ${i}: keep replies short.` };
    group.config = { ...group.config, mcpServers: servers };
  }
  const start = process.hrtime.bigint();
  const text = service.answer(JSON.stringify({ id: i, group: group.folder, config: group.config }));
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  if (JSON.parse(text).compose === null) throw new Error(text);
  if (i >= warm) times.push(ms);
  await new Promise((resolve) => setImmediate(resolve));
  service.finishLater();
  await rest(1);
}
const cpu = process.cpuUsage(cpuStart);
times.sort((a, b) => a - b);
const at = (q) => times[Math.min(times.length - 1, Math.floor(q * times.length))].toFixed(3);
const perSpawn = (us) => (us / times.length / 1000).toFixed(3);
console.log(
  `${mode}: ${times.length} spawns, median ${at(0.5)} ms, p90 ${at(0.9)} ms; ` +
    `CPU per spawn (the process's, bookkeeping and rests included) ${perSpawn(cpu.user)} ms user, ${perSpawn(cpu.system)} ms system`,
);
