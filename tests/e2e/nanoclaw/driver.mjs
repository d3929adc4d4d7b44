#!/usr/bin/env node
// Runs nanoclaw's real composeGroupClaudeMd (dist/claude-md-compose.js, compiled from
// tests/fixtures/nanoclaw/src/claude-md-compose.ts, v2.0.64, with the stubs beside it) on a
// deployment laid out as nanoclaw's project root, for tests/e2e/nanoclaw.rs:
//
//   NANOCLAW_ROWS=rows.json node driver.mjs ROOT GROUP...
//
// With NANOCLAW_MIGRATE=1 it first runs nanoclaw's own start-up migration
// (migrateGroupsToClaudeLocal), as an installed nanoclaw did before its groups were composed.
//
// nanoclaw resolves GROUPS_DIR (at module load) and container/ (at each call) from
// process.cwd(), its project root: chdir first, then load the composer.
const [root, ...groups] = process.argv.slice(2);
if (!root || groups.length === 0) {
  process.stderr.write('usage: node driver.mjs ROOT GROUP...\n');
  process.exit(2);
}
process.chdir(root);
const { composeGroupClaudeMd, migrateGroupsToClaudeLocal } = await import(
  './dist/claude-md-compose.js'
);
if (process.env.NANOCLAW_MIGRATE === '1') migrateGroupsToClaudeLocal();
for (const folder of groups) {
  // The host passes the AgentGroup row of its database; the id keys the container config row.
  composeGroupClaudeMd({ id: folder, name: folder, folder, agent_provider: null, created_at: '' });
}
