// A nanoclaw-sized host timing the spawn step, nanoclaw v2.3's composer against clawmd's npm
// package, side by side in one process (scripts/bench-spawn runs it; see its header).
//
//   node host.mjs CONFIG.json
//
// CONFIG: { anchor: dist of nanoclaw's composer, clawmd: dist of the npm package, binary,
//           addon (clawmd.node; null: no addon phases), nano: the nanoclaw copy of the
//           deployment, mine: clawmd's copy, mineAddon: the addon's copy, ballastMb, spawns,
//           legacySpawns, seed, out }
//
// The host first holds `ballastMb` of memory (half JavaScript objects on the V8 heap, half
// Buffers), as a nanoclaw host does after a while (its database, channels, sessions). Then, per
// spawn of a group, it times the one call each side makes in nanoclaw's spawn path:
// - nanoclaw: `await composeGroupProjectDoc(group, groupDir, spec)` (what
//   `realizeProviderSpawnSurfaces` calls through `composeProjectDocument`, and `buildMounts`'
//   default path), with the spec of the group's provider;
// - clawmd: `await prepareSpawn(folder, { root, binary, config, way })` (compose + binds, one
//   request), the group's config handed as nanoclaw holds it (its row), answered by a `clawmd
//   serve` process (`way: "service"`) or by the Node addon in this process (`way: "addon"`).
// The two run in turn, the order alternating, each on its own copy of the deployment (and the
// addon on a copy of its own: a host uses one way, and two services on one deployment undo
// each other's records, each spawn of a group the other served costing a look and a record).
// Phases, each way: `steady` (every group composed once before; nothing changed since), `edit`
// (before each spawn one MCP server of the group gets new instructions: `editConfig`); and
// `process` (the old way: `composeBeforeSpawn` + `mounts`, two child processes per spawn).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const load = (dir, file) => import(pathToFileURL(path.join(dir, file)).href);

const compose = await load(config.anchor, 'project-doc-compose.js');
const { rows } = await load(config.anchor, 'db/container-configs.js');
const { lines: nanoLog } = await load(config.anchor, 'log.js');
const clawmd = await load(config.clawmd, 'clawmd.js');

// The host's own memory.
const ballast = [];
const heapBytes = (config.ballastMb * 1024 * 1024) / 2;
for (let i = 0; i < heapBytes / 1024; i++) {
  ballast.push({ id: i, name: `session-${i}`, text: `${'m'.repeat(900)}${i}`, seen: [i, i * 2, i * 3] });
}
const buffers = [];
for (let i = 0; i < config.ballastMb / 2; i++) buffers.push(Buffer.alloc(1024 * 1024, i & 0xff));

const allRows = JSON.parse(fs.readFileSync(path.join(config.nano, 'rows.json'), 'utf8'));
for (const [id, row] of Object.entries(allRows)) {
  rows.set(id, {
    mcp_servers: row.mcp_servers,
    packages_apt: '[]',
    packages_npm: '[]',
    image_tag: null,
    additional_mounts: '[]',
    skills: row.skills,
    provider: row.provider,
    assistant_name: null,
    max_messages_per_prompt: null,
    model: null,
    effort: null,
    speed: null,
    timezone: null,
    runtime_tier: null,
    cli_scope: row.cli_scope,
  });
}
const groups = Object.entries(allRows).map(([id, row]) => ({
  id,
  folder: row.folder,
  provider: row.provider,
  // What nanoclaw holds in memory at spawn: the materialised container.json and the row's cli_scope.
  config: {
    ...JSON.parse(fs.readFileSync(path.join(config.mine, 'groups', row.folder, 'container.json'), 'utf8')),
    cli_scope: row.cli_scope,
  },
}));

// nanoclaw's specs (src/provider-contracts/*.ts): Claude, opencode and ollama share Claude's
// document; Codex writes AGENTS.md under a 32 KiB cap.
const CODEX = {
  fileName: 'AGENTS.md',
  maxBytes: 32 * 1024,
  instructions: {
    nativeOverrideFiles: ['AGENTS.local.md', 'AGENTS.override.md'],
    nativeSkills: {
      discoveryPath: '/workspace/agent/.agents/skills',
      sharedSource: '/app/skills',
      selfAuthoredHome: '~/.codex/skills',
      persistentRoots: ['~/.codex', '~/.agents'],
      ruleBearingInlined: true,
    },
  },
};
const specOf = (group) => (group.provider === 'codex' ? CODEX : compose.DEFAULT_PROJECT_DOC);

// nanoclaw resolves its sources from process.cwd(), the project root.
process.chdir(config.nano);
const nanoRoot = process.cwd();
const mineRoot = path.resolve(config.mine);
const addonRoot = config.addon ? path.resolve(config.mineAddon) : null;

async function nanoclawSpawn(group) {
  const agentGroup = { id: group.id, name: group.folder, folder: group.folder };
  const start = process.hrtime.bigint();
  await compose.composeGroupProjectDoc(agentGroup, path.join(nanoRoot, 'groups', group.folder), specOf(group));
  return Number(process.hrtime.bigint() - start) / 1e6;
}

let failures = 0;
const warnings = new Map();
async function clawmdSpawn(group, way = 'service') {
  const start = process.hrtime.bigint();
  const prepared = await clawmd.prepareSpawn(group.folder, {
    root: way === 'addon' ? addonRoot : mineRoot,
    binary: config.binary,
    ...(way === 'addon' ? { addon: config.addon } : {}),
    way,
    config: group.config,
    allowIncomplete: true,
  });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  if (prepared.binds.length === 0) failures++;
  for (const w of [...prepared.report.warnings, ...prepared.group.warnings]) {
    warnings.set(w.code, (warnings.get(w.code) ?? 0) + 1);
  }
  return ms;
}
const addonSpawn = (group) => clawmdSpawn(group, 'addon');

// The floor of any spawn step that writes a changed document before it answers: the addon's
// steady answer (the proof that nothing else changed, and the binds) plus a bare atomic write
// of a document the size of the group's (a temp written, renamed into place), with no plan,
// no journal, no hand-edit check and no verdict. Timed as one call, as `floor-addon`.
const floorDir = addonRoot ? path.join(path.dirname(addonRoot), 'floor') : null;
if (floorDir) fs.mkdirSync(floorDir, { recursive: true });
const documentOf = new Map();
function readDocuments() {
  for (const group of groups) {
    // The document an edit rewrites: the managed policy (Claude's) or the flat AGENTS.md, where
    // clawmd's state folder keeps what it binds.
    const binds = path.join(addonRoot, 'groups', '.clawmd', 'binds', group.folder);
    const written = [path.join(binds, 'managed', 'CLAUDE.md'), path.join(binds, 'AGENTS.md')].find((f) => fs.existsSync(f));
    documentOf.set(group.id, fs.readFileSync(written, 'utf8'));
  }
}
async function floorSpawn(group) {
  const text = documentOf.get(group.id);
  const start = process.hrtime.bigint();
  await clawmdSpawn(group, 'addon');
  const target = path.join(floorDir, `${group.folder}.md`);
  fs.writeFileSync(`${target}.tmp`, text);
  fs.renameSync(`${target}.tmp`, target);
  return Number(process.hrtime.bigint() - start) / 1e6;
}

async function processSpawn(group) {
  const options = { root: mineRoot, binary: config.binary, allowIncomplete: true };
  const start = process.hrtime.bigint();
  await clawmd.composeBeforeSpawn(group.folder, { ...options, config: group.config });
  await clawmd.mounts(group.folder, options);
  return Number(process.hrtime.bigint() - start) / 1e6;
}

// A seeded shuffle, so both sides see the same groups in the same order.
let seed = config.seed >>> 0 || 1;
const random = () => {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return (seed >>> 0) / 2 ** 32;
};
const order = [...groups];
for (let i = order.length - 1; i > 0; i--) {
  const j = Math.floor(random() * (i + 1));
  [order[i], order[j]] = [order[j], order[i]];
}

// The edit both composers see: one MCP server of the group gets new inline instructions, in
// nanoclaw's database row and in the config nanoclaw hands clawmd (what `ncl` or the agent's
// add_mcp_server changes), so both compose a new document.
function editConfig(group, n) {
  const row = rows.get(group.id);
  const servers = JSON.parse(row.mcp_servers);
  servers.edited = { command: 'npx', args: ['-y', 'mcp-edited'], env: {}, instructions: `Edit ${n}: keep replies short.` };
  row.mcp_servers = JSON.stringify(servers);
  group.config = { ...group.config, mcpServers: servers };
}

// The wait between two timed calls (the container starting, in a spawn path): what a side does
// after its call returned is not timed as part of the other side's call.
async function gap() {
  if (config.gapMs > 0) await new Promise((resolve) => setTimeout(resolve, config.gapMs));
}

async function phase(name, count, edit, other = clawmdSpawn) {
  const pairs = [];
  for (let i = 0; i < count; i++) {
    const group = order[i % order.length];
    // (each phase its own edits: the same group edited again by a later phase gets new text)
    if (edit) editConfig(group, `${name} ${i}`);
    let nano;
    let mine;
    if (i % 2 === 0) {
      nano = await nanoclawSpawn(group);
      await gap();
      mine = await other(group);
    } else {
      mine = await other(group);
      await gap();
      nano = await nanoclawSpawn(group);
    }
    await gap();
    pairs.push([nano, mine]);
  }
  return { phase: name, ...summary(pairs) };
}

function quantile(sorted, q) {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

function summary(pairs) {
  const nano = pairs.map((p) => p[0]).sort((a, b) => a - b);
  const mine = pairs.map((p) => p[1]).sort((a, b) => a - b);
  const ratios = pairs.map((p) => p[1] / p[0]).sort((a, b) => a - b);
  const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
  return {
    spawns: pairs.length,
    nanoclaw: { p50: quantile(nano, 0.5), p90: quantile(nano, 0.9), mean: mean(nano) },
    clawmd: { p50: quantile(mine, 0.5), p90: quantile(mine, 0.9), mean: mean(mine) },
    ratioOfMedians: quantile(mine, 0.5) / quantile(nano, 0.5),
    medianPairRatio: quantile(ratios, 0.5),
    ratioOfMeans: mean(mine) / mean(nano),
  };
}

// Every group composed by each side, then, once what was written has settled, spawned once
// more: the state a running host is in when nothing has changed for a while. clawmd trusts a
// group-folder file by its identity only when its last change is two seconds old and its pages
// have been written back (disk/reads.rs: SETTLED, pages_clean), which the kernel does within
// 30 s of a write: `sync` stands for that wait.
for (const group of order) {
  await nanoclawSpawn(group);
  await clawmdSpawn(group);
  if (config.addon) await addonSpawn(group);
}
spawnSync('sync');
await new Promise((resolve) => setTimeout(resolve, 2500));
for (const group of order) {
  await nanoclawSpawn(group);
  await clawmdSpawn(group);
  if (config.addon) await addonSpawn(group);
}
// Both ways' steady phases before any edit: a group edited (and composed) less than two
// seconds before is not steady.
const results = [];
results.push(await phase('steady', config.spawns, false));
if (config.addon) results.push(await phase('steady-addon', config.spawns, false, addonSpawn));
if (config.addon && config.floor) {
  readDocuments();
  results.push(await phase('floor-addon', config.spawns, false, floorSpawn));
}
results.push(await phase('edit', config.spawns, true));
if (config.addon) results.push(await phase('edit-addon', config.spawns, true, addonSpawn));
if (config.legacySpawns > 0) results.push(await phase('process', config.legacySpawns, false, processSpawn));

const memory = process.memoryUsage();
const out = {
  node: process.version,
  groups: groups.length,
  host: { rssMb: memory.rss / 2 ** 20, heapUsedMb: memory.heapUsed / 2 ** 20, ballastMb: config.ballastMb },
  results,
  clawmdFailures: failures,
  clawmdWarnings: Object.fromEntries(warnings),
  nanoclawLogLines: nanoLog.length,
  kept: ballast.length + buffers.length,
};
fs.writeFileSync(config.out, JSON.stringify(out, null, 2) + '\n');
