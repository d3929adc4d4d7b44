// Stub: nanoclaw's container_configs table (better-sqlite3, synchronous) as a Map the driver
// fills from rows.json: the composer's `await getContainerConfig(id)` reads one row.
import type { ContainerConfigRow } from '../types.js';

export const rows = new Map<string, ContainerConfigRow>();

export function getContainerConfig(agentGroupId: string): ContainerConfigRow | undefined {
  return rows.get(agentGroupId);
}
