// Stub of nanoclaw's src/db/container-configs.ts: getContainerConfig returns the group's row of
// the container_configs table. Here the rows come from a JSON file ($NANOCLAW_ROWS: an object
// from agent group id to row) instead of the database.
import fs from 'fs';

import type { ContainerConfigRow } from '../types.js';

export async function getContainerConfig(agentGroupId: string): Promise<ContainerConfigRow | undefined> {
  const file = process.env['NANOCLAW_ROWS'];
  if (file === undefined) return undefined;
  const rows = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, ContainerConfigRow>;
  return rows[agentGroupId];
}
