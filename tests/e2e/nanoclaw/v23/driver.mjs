#!/usr/bin/env node
// Runs nanoclaw's real composeGroupProjectDoc (dist/project-doc-compose.js, compiled from
// tests/fixtures/nanoclaw-v2.3/src/project-doc-compose.ts and group-persona.ts, verbatim, with
// the stubs beside it) on a deployment laid out as nanoclaw's project root, for
// tests/e2e/nanoclaw_v23.rs:
//
//   NANOCLAW_ROWS=rows.json node driver.mjs ROOT SPECS.json GROUP...
//
// SPECS.json maps each group to the ProjectDocSpec its provider's contract hands the composer
// (the README of the fixture lists them). nanoclaw resolves container/ from process.cwd(), its
// project root: chdir first.
import fs from 'fs';
import path from 'path';

const [root, specsFile, ...groups] = process.argv.slice(2);
if (!root || !specsFile || groups.length === 0) {
  process.stderr.write('usage: node driver.mjs ROOT SPECS.json GROUP...\n');
  process.exit(2);
}
const specs = JSON.parse(fs.readFileSync(specsFile, 'utf8'));
process.chdir(root);
const { composeGroupProjectDoc } = await import('./dist/project-doc-compose.js');
for (const folder of groups) {
  const group = { id: folder, name: folder, folder, agent_provider: null, created_at: '' };
  await composeGroupProjectDoc(group, path.join(root, 'groups', folder), specs[folder]);
}
